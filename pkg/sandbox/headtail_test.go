package sandbox

import (
	"bytes"
	"strings"
	"testing"
)

func TestHeadTail(t *testing.T) {
	// Written in pieces of every size, the kept bytes are always the first
	// and the last halves of the bound, and the full copy is complete.
	src := []byte(strings.Repeat("0123456789", 1000) + "ERROR at the end")
	for _, piece := range []int{1, 7, 64, 999, 5000, len(src)} {
		var full bytes.Buffer
		h := newHeadTail(100, true, &full)
		for off := 0; off < len(src); off += piece {
			h.Write(src[off:min(off+piece, len(src))])
		}
		got := h.bytes()
		want := append(append([]byte(nil), src[:50]...), src[len(src)-50:]...)
		if !bytes.Equal(got, want) || !h.cut() || h.total != int64(len(src)) {
			t.Errorf("pieces of %d: kept %q (cut %v, total %d)", piece, got, h.cut(), h.total)
		}
		if !bytes.Equal(full.Bytes(), src) {
			t.Errorf("pieces of %d: full copy has %d bytes, want %d", piece, full.Len(), len(src))
		}
	}
	// Under the bound nothing is cut, with or without a tail.
	for _, keep := range []bool{true, false} {
		h := newHeadTail(100, keep, nil)
		h.Write([]byte("short"))
		if string(h.bytes()) != "short" || h.cut() {
			t.Errorf("keepTail=%v: %q cut=%v", keep, h.bytes(), h.cut())
		}
	}
	// Without a tail it is the old head-only capture.
	h := newHeadTail(4, false, nil)
	h.Write([]byte("abcdefgh"))
	if string(h.bytes()) != "abcd" || !h.cut() {
		t.Errorf("head only: %q cut=%v", h.bytes(), h.cut())
	}
}
