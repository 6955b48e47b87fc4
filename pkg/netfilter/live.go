package netfilter

import (
	"bytes"
	"strconv"

	"golang.org/x/sys/unix"
)

// liveSet counts the connections made for the sandbox that are still open
// anywhere, without holding them open: each is registered, with no events,
// in an epoll instance of the supervisor before the supervisor's own copy
// is closed. epoll keeps no reference to a file, and the kernel drops a
// file's registration when its last descriptor closes (eventpoll_release
// in __fput), so the set's size, read from /proc/self/fdinfo of the epoll
// descriptor (one "tfd:" line per registration), is the number of those
// sockets still open in the sandbox. Reading it costs what the set holds
// (at most MaxConns lines), not what the host's TCP tables hold.
type liveSet struct {
	ep int // epoll descriptor, -1 until the first add
	n  int // registrations at the last count, plus the adds since
	// tags are the non-zero tags (an SNI relay's id, addTagged) of the
	// registrations open at the last count, plus those added since.
	tags map[uint64]bool
}

// add registers fd (the supervisor's copy of a socket about to be
// installed). Called with the Filter's mu held.
func (l *liveSet) add(fd int) error { return l.addTagged(fd, 0) }

// addTagged registers fd with a tag (the epoll event's data, which
// /proc/self/fdinfo shows): count then also says whether that very
// socket is still open (open). Called with the Filter's mu held.
func (l *liveSet) addTagged(fd int, tag uint64) error {
	if l.ep < 0 {
		ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			return err
		}
		l.ep = ep
	}
	// No events: the registration only marks the file as live; nothing
	// ever waits on this instance.
	ev := unix.EpollEvent{Fd: int32(tag), Pad: int32(tag >> 32)} // epoll_data_t, 64 bits
	if err := unix.EpollCtl(l.ep, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return err
	}
	l.n++
	if tag != 0 {
		if l.tags == nil {
			l.tags = map[uint64]bool{}
		}
		l.tags[tag] = true
	}
	return nil
}

// open reports whether the socket registered with tag was open at the
// last count (or was added since).
func (l *liveSet) open(tag uint64) bool { return l.tags[tag] }

// count re-reads the number of registered sockets still open. On an
// error the last count is kept: the cap fails closed.
func (l *liveSet) count() int {
	if l.ep < 0 {
		return l.n
	}
	if n, tags, err := countTfd(l.ep); err == nil {
		l.n, l.tags = n, tags
	}
	return l.n
}

func (l *liveSet) close() {
	if l.ep >= 0 {
		unix.Close(l.ep)
		l.ep = -1
	}
	l.n, l.tags = 0, nil
}

// countTfd counts the "tfd:" lines of /proc/self/fdinfo/EP and returns
// the non-zero tags among their "data:" fields (ep_show_fdinfo in
// fs/eventpoll.c: "tfd: %8d events: %8x data: %16llx ...").
func countTfd(ep int) (int, map[uint64]bool, error) {
	fd, err := unix.Open("/proc/self/fdinfo/"+strconv.Itoa(ep), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, nil, err
	}
	defer unix.Close(fd)
	var (
		buf  = make([]byte, 64<<10)
		tail []byte // an incomplete line from the previous read
		n    int
		tags map[uint64]bool
	)
	for {
		k, err := unix.Read(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, nil, err
		}
		if k == 0 {
			return n, tags, nil
		}
		data := append(tail, buf[:k]...)
		for {
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				break
			}
			if line := data[:i]; bytes.HasPrefix(line, []byte("tfd:")) {
				n++
				if tag := tfdData(line); tag != 0 {
					if tags == nil {
						tags = map[uint64]bool{}
					}
					tags[tag] = true
				}
			}
			data = data[i+1:]
		}
		tail = append([]byte(nil), data...)
	}
}

// tfdData reads the hexadecimal "data:" field of one "tfd:" line (0 when
// it is absent or unreadable).
func tfdData(line []byte) uint64 {
	_, rest, ok := bytes.Cut(line, []byte(" data:"))
	if !ok {
		return 0
	}
	rest = bytes.TrimLeft(rest, " ")
	if i := bytes.IndexByte(rest, ' '); i >= 0 {
		rest = rest[:i]
	}
	v, err := strconv.ParseUint(string(rest), 16, 64)
	if err != nil {
		return 0
	}
	return v
}
