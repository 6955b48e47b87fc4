package sandbox

import "io"

// headTail captures a tool process's stream within a bound: the first
// headMax bytes and, when tailMax > 0, the last tailMax bytes, so that the
// end of a long output, where a failing build prints its error, is kept
// too. It counts every byte, and copies every byte to full when set (the
// complete output a caller asked to keep). A failed write to full stops the
// copy, never the capture: the process must not block on its pipe because
// a disk filled up.
type headTail struct {
	head    []byte
	headMax int
	// tail holds the last bytes seen; it grows to 2*tailMax and is then
	// cut back to tailMax, so each byte is copied a bounded number of
	// times and memory stays under 2*tailMax.
	tail    []byte
	tailMax int
	total   int64
	full    io.Writer
}

func newHeadTail(max int64, keepTail bool, full io.Writer) *headTail {
	h := &headTail{headMax: int(max), full: full}
	if keepTail {
		h.headMax = int(max / 2)
		h.tailMax = int(max - max/2)
	}
	return h
}

func (h *headTail) Write(p []byte) (int, error) {
	n := len(p)
	h.total += int64(n)
	if h.full != nil {
		if _, err := h.full.Write(p); err != nil {
			h.full = nil
		}
	}
	if room := h.headMax - len(h.head); room > 0 {
		k := min(room, len(p))
		h.head = append(h.head, p[:k]...)
		p = p[k:]
	}
	if h.tailMax == 0 || len(p) == 0 {
		return n, nil
	}
	if len(p) >= h.tailMax {
		h.tail = append(h.tail[:0], p[len(p)-h.tailMax:]...)
		return n, nil
	}
	h.tail = append(h.tail, p...)
	if len(h.tail) > 2*h.tailMax {
		k := copy(h.tail, h.tail[len(h.tail)-h.tailMax:])
		h.tail = h.tail[:k]
	}
	return n, nil
}

// kept is the tail's part that is kept: its last tailMax bytes.
func (h *headTail) kept() []byte {
	if len(h.tail) > h.tailMax {
		return h.tail[len(h.tail)-h.tailMax:]
	}
	return h.tail
}

// bytes is what was kept: the head, then the tail.
func (h *headTail) bytes() []byte {
	return append(append([]byte(nil), h.head...), h.kept()...)
}

// cut reports whether bytes were dropped.
func (h *headTail) cut() bool { return h.total > int64(len(h.head)+len(h.kept())) }
