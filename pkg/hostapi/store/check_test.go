package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// faultStore writes a store with regular, inline and overflowing data over
// several transactions, and returns its bytes, what the last transaction
// left and what the one before left (what bbolt shows when the newer meta
// page is damaged).
func faultStore(t testing.TB) (img []byte, last, prev map[string]string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "x.db")
	s, err := New(path, "test", Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	r := rand.New(rand.NewSource(1))
	for batch := 0; batch < 4; batch++ {
		err := s.Update(context.Background(), func(tx *Tx) error {
			for i := 0; i < 150; i++ {
				k := fmt.Sprintf("k%05d", r.Intn(100000))
				v := strings.Repeat(string(rune('a'+i%26)), 20+r.Intn(200))
				want["b/"+k] = v
				if err := tx.Put("b", k, []byte(v)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, kv := range [][3]string{
		{"b", "big", strings.Repeat("overflow ", 1500)}, // spans pages
		{"tiny", "one", "inline"},
		{"b", "last", "written last"},
	} {
		if kv[1] == "last" {
			prev = maps.Clone(want)
		}
		if err := s.Update(context.Background(), func(tx *Tx) error { return tx.Put(kv[0], kv[1], []byte(kv[2])) }); err != nil {
			t.Fatal(err)
		}
		want[kv[0]+"/"+kv[1]] = kv[2]
	}
	img, err = os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return img, want, prev
}

func readAll(s *Store) (map[string]string, error) {
	got := map[string]string{}
	err := s.View(context.Background(), func(tx *Tx) error {
		for _, b := range []string{"b", "tiny"} {
			if err := tx.ForEach(b, func(k string, v []byte) error { got[b+"/"+k] = string(v); return nil }); err != nil {
				return err
			}
		}
		return nil
	})
	return got, err
}

// tryDamaged opens a damaged image for reading and for writing. It returns
// what the read saw (nil on a *CorruptError) and fails the test on any
// other error; a crash fails the whole test binary.
func tryDamaged(t *testing.T, dir string, img []byte, what string) map[string]string {
	t.Helper()
	path := filepath.Join(dir, "d.db")
	os.Remove(path)
	if err := os.WriteFile(path, img, 0o600); err != nil {
		t.Fatal(err)
	}
	s := newStore(t, path)
	got, err := readAll(s)
	var ce *CorruptError
	if err != nil {
		if !errors.As(err, &ce) || ce.Path != path {
			t.Fatalf("%s: read: %v, want a *CorruptError naming the file", what, err)
		}
		got = nil
	}
	werr := s.Update(context.Background(), func(tx *Tx) error { return tx.Put("b", "new", []byte("v")) })
	if werr != nil && !errors.As(werr, &ce) {
		t.Fatalf("%s: write: %v, want nil or a *CorruptError", what, werr)
	}
	if (err == nil) != (werr == nil) {
		t.Errorf("%s: the read said %v but the write said %v", what, err, werr)
	}
	return got
}

func TestTruncatedStoreNeverCrashes(t *testing.T) {
	img, want, _ := faultStore(t)
	dir := t.TempDir()
	corrupt := 0
	for pct := 0; pct <= 100; pct += 5 {
		got := tryDamaged(t, dir, img[:len(img)*pct/100], fmt.Sprintf("truncated to %d%%", pct))
		switch {
		case pct == 100 && !maps.Equal(got, want):
			t.Fatalf("the whole file reads wrong: %d entries, want %d", len(got), len(want))
		case got == nil:
			corrupt++
		case pct == 0 && len(got) == 0: // an empty file is a store never written
		case !maps.Equal(got, want):
			t.Fatalf("truncated to %d%%: read wrong data without an error", pct)
		}
	}
	if corrupt < 15 {
		t.Fatalf("only %d of the truncations were reported corrupt", corrupt)
	}
}

func TestFlippedBytesNeverCrash(t *testing.T) {
	img, want, prev := faultStore(t)
	dir := t.TempDir()
	ps := int(binary.NativeEndian.Uint32(img[pageHeaderSize+8:]))
	pages := len(img) / ps
	hwm := int(binary.NativeEndian.Uint64(img[pageHeaderSize+40:]))
	if hwm < 10 || hwm > pages {
		t.Fatalf("test store has %d pages in use of %d, want a multi-page store", hwm, pages)
	}
	r := rand.New(rand.NewSource(2))
	// Pages that continue an overflowing page hold only data.
	continuation := map[int]bool{}
	for pg := 2; pg < hwm; pg++ {
		if binary.NativeEndian.Uint64(img[pg*ps:]) == uint64(pg) {
			for i := 1; i <= int(binary.NativeEndian.Uint32(img[pg*ps+12:])); i++ {
				continuation[pg+i] = true
			}
		}
	}
	var structural, data, detected, changed int
	for pg := 0; pg < hwm; pg++ {
		base := pg * ps
		// Structural bytes: the page header, the meta (pages 0 and 1) or the
		// first elements; then a sample of the rest of the page.
		var offs []int
		for o := 0; o < pageHeaderSize+3*elementSize; o++ {
			offs = append(offs, o)
		}
		for i := 0; i < 6; i++ {
			offs = append(offs, pageHeaderSize+3*elementSize+r.Intn(ps-pageHeaderSize-3*elementSize))
		}
		count := int(binary.NativeEndian.Uint16(img[base+10:]))
		for _, o := range offs {
			// A low bit and a high bit (page ids, sizes, offsets are
			// small numbers: both kinds of damage matter).
			for _, mask := range []byte{0x01 << (o % 2), 0x80 >> (o % 3)} {
				bad := bytes.Clone(img)
				bad[base+o] ^= mask
				what := fmt.Sprintf("page %d byte %d ^%#x", pg, o, mask)
				got := tryDamaged(t, dir, bad, what)
				// Structural: a page header, a meta, an element; but not the
				// sizes of a leaf's last key and value (nothing follows them
				// to check them against).
				lastSizes := binary.NativeEndian.Uint16(img[base+8:]) == flagLeaf && o >= pageHeaderSize+(count-1)*elementSize+8 && o < pageHeaderSize+count*elementSize
				isStructural := !continuation[pg] && !lastSizes && (o < pageHeaderSize || pg < 2 && o < pageHeaderSize+metaSize || o < pageHeaderSize+min(count, 3)*elementSize)
				switch {
				case got == nil:
					detected++
				case maps.Equal(got, want):
				case pg < 2 && maps.Equal(got, prev): // bbolt fell back to the older meta page
				case isStructural:
					t.Errorf("%s: a damaged page header or element read as wrong data without an error", what)
				default:
					changed++ // a flipped key or value byte: bbolt has no data checksum
				}
				if isStructural {
					structural++
				} else {
					data++
				}
			}
		}
	}
	t.Logf("%d structural and %d other flips over %d pages: %d reported corrupt, %d read as changed values", structural, data, hwm, detected, changed)
}

func TestMoveAsideCorrupt(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.db")
	img, _, _ := faultStore(t)
	os.WriteFile(path, img[:len(img)/2], 0o600)
	// Without the option the file stays where it is, untouched.
	if _, err := readAll(newStore(t, path)); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "left untouched") {
		t.Fatalf("err = %v, want corrupt and untouched", err)
	}
	s, _ := New(path, "test", Options{MoveAsideCorrupt: true})
	_, err := readAll(s)
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.MovedTo == "" || !strings.HasPrefix(ce.MovedTo, path+".corrupt-") {
		t.Fatalf("err = %v, want a CorruptError with MovedTo", err)
	}
	if b, err := os.ReadFile(ce.MovedTo); err != nil || !bytes.Equal(b, img[:len(img)/2]) {
		t.Fatalf("moved file: %v", err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the corrupt file is still at %s", path)
	}
	// The next write starts a new store.
	put(t, s, "k", "v")
	if got := get(t, s, "k"); got != "v" {
		t.Fatalf("new store: got %q", got)
	}
}

func BenchmarkCheckStore(b *testing.B) {
	img, _, _ := faultStore(b)
	b.SetBytes(int64(len(img)))
	for b.Loop() {
		if err := checkStore(bytes.NewReader(img), int64(len(img))); err != nil {
			b.Fatal(err)
		}
	}
}
