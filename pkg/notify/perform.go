package notify

// How the Server carries out a verdict: the path of a unix address, the
// open gate of a Server without a unix handler, the call made on a serving
// thread holding the target's ids, and when such a thread keeps them.

import (
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// unixPath returns the path of a path address (AF_UNIX, sun_path not
// abstract nor empty), up to its first NUL.
func unixPath(a []byte) (string, bool) {
	if len(a) <= 2 || int(a[0])|int(a[1])<<8 != unix.AF_UNIX || a[2] == 0 {
		return "", false
	}
	p := string(a[2:])
	if i := strings.IndexByte(p, 0); i >= 0 {
		p = p[:i]
	}
	return p, true
}

// ungatedGate is the Server's open gate (UnixGate.open: no mount policy),
// made at the first path call of a Server without a unix handler from the
// sandbox's view (Options.SandboxPid: its id maps and user namespace),
// never a caller's: built from the first caller's, a process in a nested
// user namespace (`unshare -r`, with nested namespaces allowed) that
// called first stood in for the sandbox for the rest of the session: a
// one-id map of the supervisor's own uid made the gate skip the
// permission checks for every later caller (root-less), or a nested
// namespace's inode refused the sandbox's own root (found by review:
// TestReview2GateOpenGateIsNotTheFirstCallers,
// TestReview2GateRootlessOpenGateSkipDACFromNestedCaller). The sandbox's
// namespace lives as long as its PID 1, which outlives this Server's
// calls, so its inode number cannot be reused meanwhile.
func (s *Server) ungatedGate(c *SockCall) (*UnixGate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ungated == nil {
		if s.o.SandboxPid <= 0 {
			return nil, unix.EACCES
		}
		dir, err := unix.Open("/proc/"+strconv.Itoa(s.o.SandboxPid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, unix.EACCES
		}
		s.ungated = newOpenGate(dir)
		unix.Close(dir)
	}
	return s.ungated, nil
}

// perform carries out a verdict: op makes the call with an address.
func (s *Server) perform(c *SockCall, v Verdict, op func(addr []byte) (int64, unix.Errno)) (int64, unix.Errno, bool) {
	switch v.kind {
	case vErrno:
		return 0, v.errno, false
	case vReturn:
		return v.val, 0, false
	case vInstall:
		defer c.closeLater(v.fd)
		// The flag the target's own fd had is kept (O_CLOEXEC).
		cloexec, _ := s.fdinfo.cloexec(c)
		if err := addFD(s.listener, c.id, v.fd, c.FD, cloexec); err != nil {
			return 0, errnoOf(err), false
		}
		c.replaced = true
		return v.val, 0, false
	case vPerformAt:
		if v.fd >= 0 {
			defer c.closeLater(v.fd)
		}
		// Made with stickyCaps (CAP_SYS_PTRACE) only through the gate's
		// own pin (run): an address a handler made up is walked with no
		// capability, never through /proc/PID/root of a process the
		// target may not trace (proc(5), ptrace access mode).
		c.pinned = c.pinned && v.fd == c.pin
		// No ID_VALID here: everything the verdict rests on was read
		// from the target thread itself (its pidfd, its /proc/TID) or
		// checked after the read (the address); a target killed since
		// gets no answer, and a connect made for it meanwhile is what
		// it asked for, on its own socket (the reaper stops one that
		// blocks).
		val, e := s.run(c, func() (int64, unix.Errno) { return op(v.addr) })
		return val, e, false
	}
	if !c.Valid() {
		return 0, unix.EINTR, false
	}
	// The target's own address (a path only under a Handler other than
	// the gate): resolved with no capability at all (run), as the
	// target's own connect would be (capabilities(7)).
	c.pinned = false
	val, e := s.run(c, func() (int64, unix.Errno) { return op(c.Addr) })
	return val, e, false
}

// run performs a call for the target: as the target on AF_UNIX sockets
// when Options.AsTarget asks (asTarget), else on this goroutine.
func (s *Server) run(c *SockCall, op func() (int64, unix.Errno)) (int64, unix.Errno) {
	if s.o.AsTarget && c.Domain == unix.AF_UNIX {
		if c.tainted {
			return 0, unix.EACCES // this thread's ids are unknown
		}
		// stickyCaps only for a call through the gate's pin, whose
		// one path walk is /proc/PID/fd/N of this process; any other
		// runs with no capability (asTarget says why).
		var eff uint64
		if c.pinned {
			eff = stickyCaps
		}
		return asTarget(c, c.th, s.stay(c), eff, op)
	}
	return op()
}

// stickyIDs says whether this Server's serving threads may keep a
// target's ids between calls (servingThread): a root supervisor
// (AsTarget) of a sandbox in a PID namespace of its own, whose unix calls
// are decided by the unix gate, or by its open form when there is no
// handler (ungatedGate: path addresses are still resolved as the target
// and connected through a pin), the code whose reads in those ids
// (stickyCaps) were checked. Any other Handler is answered by a thread
// that switches per call.
func (s *Server) stickyIDs() bool {
	if !s.o.AsTarget || !s.o.OwnPIDNamespace {
		return false
	}
	switch s.o.Unix.(type) {
	case nil, *UnixGate:
		return true
	}
	return false
}

// stay says whether the thread may keep the target's ids after c (when
// it is sticky): a unix connect or send, whose whole path (the gate's
// reads, the call) was checked with those ids.
func (s *Server) stay(c *SockCall) bool {
	if c.Domain != unix.AF_UNIX {
		return false
	}
	switch c.Syscall {
	case Connect, SendTo, SendMsg:
		return true
	}
	return false
}
