package netfilter

import (
	"context"
	"sync"

	"golang.org/x/sys/unix"
)

// hostSockets keeps a few host sockets made ahead of the connects that
// need them: made (socket, SO_REUSEADDR, a bound port: bindLocked) by a
// goroutine of their own, off the thread that answers a connect while the
// sandbox waits. Making one there was ~11 µs of every filtered connect
// (perf and timestamps on the serving thread: socket ~6 µs, the option and
// the bind ~5 µs). The goroutine runs on a thread of its own, so on a
// machine with a CPU free it runs beside the sandbox's wait, not in it;
// refills come in batches (woken when fewer than hostSocketsLow are
// left), so its wake-up is paid once per several connects.
//
// A socket made ahead is the supervisor's alone until dial takes it: no
// process of the sandbox ever saw it, its options are the kernel's
// defaults (dial copies the sandbox socket's onto it, as onto one made
// there and then), and it was made with the supervisor's own ids in the
// host's network namespace, like one made by dial (the goroutine runs on
// an ordinary thread: Go never runs it on a serving thread locked to a
// target's ids). At most hostSocketsMax per family are kept, each holding
// one port of the ephemeral range; they are closed with the filter.
type hostSockets struct {
	mu      sync.Mutex
	fds     [2][]int // AF_INET, AF_INET6
	wanted  [2]bool  // a connect of that family was made: keep it filled
	stopped bool
	started bool          // run was started (under Filter.mu)
	wake    chan struct{} // cap 1: a refill is wanted
}

const (
	hostSocketsMax = 8
	hostSocketsLow = 4
)

func familyIndex(family int) int {
	if family == unix.AF_INET6 {
		return 1
	}
	return 0
}

// take returns a socket made ahead for family, or -1 (dial makes its own),
// and asks for a refill when few are left. The caller owns the socket.
func (h *hostSockets) take(family int) int {
	i := familyIndex(family)
	fd := -1
	h.mu.Lock()
	h.wanted[i] = true
	if n := len(h.fds[i]); n > 0 {
		fd = h.fds[i][n-1]
		h.fds[i] = h.fds[i][:n-1]
	}
	low := !h.stopped && len(h.fds[i]) < hostSocketsLow
	h.mu.Unlock()
	if low {
		select {
		case h.wake <- struct{}{}:
		default: // a refill is asked for already
		}
	}
	return fd
}

// run refills until ctx ends, then closes what it kept.
func (h *hostSockets) run(ctx context.Context) {
	defer h.stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.wake:
		}
		h.refill(ctx)
	}
}

// refill makes sockets for each family a connect was made in, up to
// hostSocketsMax kept. A socket whose port one kept holds already is
// closed (portKept); after hostSocketsMax such meetings in one family (an
// ephemeral range narrower than the pool) the refill stops there rather
// than spin, and dial makes its own.
func (h *hostSockets) refill(ctx context.Context) {
	for i, family := range [2]int{unix.AF_INET, unix.AF_INET6} {
		for met := 0; ctx.Err() == nil && met < hostSocketsMax; {
			h.mu.Lock()
			need := h.wanted[i] && !h.stopped && len(h.fds[i]) < hostSocketsMax
			h.mu.Unlock()
			if !need {
				break
			}
			fd, err := newHostSocket(family)
			if err != nil {
				break // dial makes its own, and reports the error
			}
			h.mu.Lock()
			if h.stopped {
				h.mu.Unlock()
				unix.Close(fd)
				return
			}
			if h.portKept(i, fd) {
				h.mu.Unlock()
				unix.Close(fd)
				met++
				continue
			}
			h.fds[i] = append(h.fds[i], fd)
			h.mu.Unlock()
		}
	}
}

// portKept reports whether a socket kept for family index i is bound to
// fd's local port (under h.mu). SO_REUSEADDR lets two unconnected sockets
// share a port (the kernel refuses the pair only once one listens), so two
// random binds can meet (about one refill in a thousand here); two connects
// from one port to one peer would then collide (EADDRNOTAVAIL, which dial
// retries with a fresh socket). Keeping each kept port distinct avoids that
// retry. A bind that failed (port 0) is kept: dial connects it unbound.
func (h *hostSockets) portKept(i, fd int) bool {
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return false
	}
	port := sockPort(sa)
	if port == 0 {
		return false
	}
	for _, k := range h.fds[i] {
		if ka, err := unix.Getsockname(k); err == nil && sockPort(ka) == port {
			return true
		}
	}
	return false
}

// stop closes the sockets kept and keeps no more.
func (h *hostSockets) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
	for i := range h.fds {
		for _, fd := range h.fds[i] {
			unix.Close(fd)
		}
		h.fds[i] = nil
	}
}

// newHostSocket makes a nonblocking, close-on-exec TCP socket of family
// bound to a port of its own (bindLocked).
func newHostSocket(family int) (int, error) {
	fd, err := rawSocket(family)
	if err != nil {
		return -1, err
	}
	bindLocked(fd, family)
	return fd, nil
}
