package netfilter

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestLiveSetCountsOpenSockets: a registered socket is counted while any
// descriptor of it is open (the sandbox's copy), not after its last close,
// and the count stays right past one read of the fdinfo file (64 KiB).
func TestLiveSetCountsOpenSockets(t *testing.T) {
	l := liveSet{ep: -1}
	defer l.close()
	const n = 1500
	var kept []int
	for i := range n {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.add(fd); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			// The "sandbox" keeps a copy; the supervisor's is closed.
			d, err := unix.Dup(fd)
			if err != nil {
				t.Fatal(err)
			}
			kept = append(kept, d)
		}
		unix.Close(fd)
	}
	if got := l.count(); got != len(kept) {
		t.Fatalf("counted %d, %d still open", got, len(kept))
	}
	for _, fd := range kept[:100] {
		unix.Close(fd)
	}
	if got := l.count(); got != len(kept)-100 {
		t.Fatalf("counted %d after closes, %d still open", got, len(kept)-100)
	}
	for _, fd := range kept[100:] {
		unix.Close(fd)
	}
	if got := l.count(); got != 0 {
		t.Fatalf("counted %d, none open", got)
	}
}

// TestLiveSetTags: a tagged registration is known open by its tag until
// a count finds its socket closed; untagged ones carry no tag.
func TestLiveSetTags(t *testing.T) {
	l := liveSet{ep: -1}
	defer l.close()
	var fds []int
	for _, tag := range []uint64{0, 7, 1 << 40} {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.addTagged(fd, tag); err != nil {
			t.Fatal(err)
		}
		fds = append(fds, fd)
	}
	if l.count() != 3 || !l.open(7) || !l.open(1<<40) || l.open(0) {
		t.Fatalf("count %d, tags %v", l.n, l.tags)
	}
	unix.Close(fds[1])
	if l.count() != 2 || l.open(7) || !l.open(1<<40) {
		t.Fatalf("after closing tag 7: count %d, tags %v", l.n, l.tags)
	}
	unix.Close(fds[0])
	unix.Close(fds[2])
	if l.count() != 0 || l.open(1<<40) {
		t.Fatalf("all closed: count %d, tags %v", l.n, l.tags)
	}
}
