package netfilter

import "golang.org/x/sys/unix"

// A spare is the host socket of a sandbox's next connect, made and bound
// before that connect is trapped. Making a TCP socket and binding it to a
// port of its own (bindLocked) costs ~10 µs here, a third of what the
// filter adds to a connect on the host's loopback: dial takes the spare
// instead, and its Verdict's After makes the next one once the sandbox's
// call is answered, while the sandbox runs again.
//
// A spare is the socket dial would make itself: made by the supervisor,
// whose threads all stay in the host's network namespace (none calls
// setns), close-on-exec, nonblocking, SO_REUSEADDR, and bound to a port
// chosen here (bindLocked says why the port must be given explicitly); one
// whose bind failed is not kept. Options the program set are copied at the
// connect, as onto a fresh socket. At most one per family waits, holding
// one ephemeral port of the host: a session that never connects makes
// none, and Close closes them.
//
// A spare is registered in the live set when it is made (that epoll_ctl,
// ~2 µs, is off the wait too), and is no connection until a dial installs
// it: registered counts the spares in the live set, waiting or being
// dialled (the dial counts those in dialing), and the cap counts the live
// set less them (openLocked). A spare leaves registered before its socket
// is closed: in between the count is one too high, never too low.
type spareSet struct {
	fd         [2]int // by familyIndex, when have
	have       [2]bool
	registered int
}

func familyIndex(family int) int {
	if family == unix.AF_INET6 {
		return 1
	}
	return 0
}

// takeSpare returns the spare socket of family, or -1 when none waits.
func (f *Filter) takeSpare(family int) int {
	i := familyIndex(family)
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.spares.have[i] {
		return -1
	}
	f.spares.have[i] = false
	return f.spares.fd[i]
}

// fillSpare makes the spare of family, unless one waits.
func (f *Filter) fillSpare(family int) {
	i := familyIndex(family)
	f.mu.Lock()
	done := f.closed || f.spares.have[i]
	f.mu.Unlock()
	if done {
		return
	}
	fd, bound, err := newSocket(family)
	if err != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !bound || f.closed || f.spares.have[i] || f.live.add(fd) != nil {
		unix.Close(fd)
		return
	}
	f.spares.registered++
	f.spares.fd[i], f.spares.have[i] = fd, true
}

// uncount takes c, a spare that will be closed without becoming a
// connection, out of registered.
func (f *Filter) uncount(c *Conn) {
	if !c.counted {
		return
	}
	f.mu.Lock()
	if !f.closed { // Close set registered to 0
		f.spares.registered--
	}
	f.mu.Unlock()
	c.counted = false
}

// closeSpares closes the spares (Close, with mu held, after the live
// set).
func (f *Filter) closeSpares() {
	for i := range f.spares.have {
		if f.spares.have[i] {
			unix.Close(f.spares.fd[i])
			f.spares.have[i] = false
		}
	}
	f.spares.registered = 0
}

// newSocket makes a nonblocking TCP socket of family in the supervisor's
// (the host's) network namespace and binds it (bindLocked); bound says
// whether the bind succeeded.
func newSocket(family int) (fd int, bound bool, err error) {
	fd, err = unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return -1, false, err
	}
	return fd, bindLocked(fd, family), nil
}
