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
}

// add registers fd (the supervisor's copy of a socket about to be
// installed). Called with the Filter's mu held.
func (l *liveSet) add(fd int) error {
	if l.ep < 0 {
		ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			return err
		}
		l.ep = ep
	}
	// No events: the registration only marks the file as live; nothing
	// ever waits on this instance.
	if err := unix.EpollCtl(l.ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{}); err != nil {
		return err
	}
	l.n++
	return nil
}

// count re-reads the number of registered sockets still open. On an
// error the last count is kept: the cap fails closed.
func (l *liveSet) count() int {
	if l.ep < 0 {
		return l.n
	}
	if n, err := countTfd(l.ep); err == nil {
		l.n = n
	}
	return l.n
}

func (l *liveSet) close() {
	if l.ep >= 0 {
		unix.Close(l.ep)
		l.ep = -1
	}
	l.n = 0
}

// countTfd counts the "tfd:" lines of /proc/self/fdinfo/EP.
func countTfd(ep int) (int, error) {
	fd, err := unix.Open("/proc/self/fdinfo/"+strconv.Itoa(ep), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	var (
		buf  = make([]byte, 64<<10)
		tail []byte // an incomplete line from the previous read
		n    int
	)
	for {
		k, err := unix.Read(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		if k == 0 {
			return n, nil
		}
		data := append(tail, buf[:k]...)
		for {
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				break
			}
			if bytes.HasPrefix(data[:i], []byte("tfd:")) {
				n++
			}
			data = data[i+1:]
		}
		tail = append([]byte(nil), data...)
	}
}
