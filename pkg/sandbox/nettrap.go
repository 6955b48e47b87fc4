package sandbox

import (
	"context"
	"encoding/binary"
	"errors"
	"net/netip"
	"time"

	"github.com/nsbox/nsbox/pkg/netfilter"
	"github.com/nsbox/nsbox/pkg/notify"
	"golang.org/x/sys/unix"
)

// netTrapSupported says whether the connect trap the filtered network
// needs can run here: seccomp user notification and pidfd_getfd.
func netTrapSupported() error { return socketGateSupported() }

// reportViolation reports v as it happens (WithViolations) and writes a
// line to the audit log (WithAudit; the MCP server's audit).
func (s *Session) reportViolation(v *ViolationError) {
	if f := s.opts.violations; f != nil {
		f(v)
	}
	if s.hostCalls != nil && s.hostCalls.audit.enabled() {
		s.hostCalls.audit.write(map[string]any{
			"time": time.Now().UTC().Format(time.RFC3339Nano), "session": s.opts.id, "kind": "violation",
			"operation": v.Operation, "host": v.Host, "port": v.Port, "detail": v.Detail,
		})
	}
}

// netTrap decides the connects and sends on the sandbox's AF_INET and
// AF_INET6 sockets (pkg/notify's Inet handler) with the session's filter.
type netTrap struct{ f *netfilter.Filter }

var errTwoInetHandlers = errors.New("a filtered network decides the sandbox's internet sockets itself: WithSocketHandler cannot be combined with it")

// Decide runs on one of the notification server's bounded goroutines; a
// blocking connect waits here for the host's dial (ctx ends with the
// session).
func (t netTrap) Decide(ctx context.Context, c *notify.SockCall) notify.Verdict {
	if c.Syscall == notify.Shutdown {
		return shutdownVerdict(c)
	}
	if c.Syscall == notify.Listen {
		// A socket of the host's network namespace never listens here,
		// however it came back to an unconnected state (a failed
		// connect's error path, a shutdown, a fast-open send, a second
		// connect racing a reset: each found by review, one after the
		// other). EINVAL, as the kernel answers a connected socket.
		if host, err := notify.OnSupervisorNetns(c.Sock); err != nil || host {
			return notify.Deny(unix.EINVAL)
		}
		return notify.Allow()
	}
	// A socket this filter installed lives in the host's network
	// namespace. Sends on it to its connected peer pass; any call with
	// an address does not: connect(AF_UNSPEC) would dissolve the
	// connection and a second connect to 127.0.0.1 would then be taken
	// for the sandbox's own loopback while it reaches the host's, and a
	// disconnected host socket could listen() on the host. The ways
	// back to an unconnected socket are a connect, which comes here, and
	// a shutdown while it still connects (shutdownVerdict).
	if host, err := notify.OnSupervisorNetns(c.Sock); err != nil || host {
		if c.Addr == nil && err == nil {
			// A fast-open send on it runs the kernel's connect again,
			// which leaves a socket whose connect failed unconnected,
			// free to listen in the host's namespace (found by
			// review): refused, as a kernel with client fast open off
			// answers.
			if c.Flags&unix.MSG_FASTOPEN != 0 {
				return notify.Deny(unix.EOPNOTSUPP)
			}
			return notify.Allow()
		}
		if err == nil && c.Syscall == notify.Connect && c.Family() != unix.AF_UNSPEC {
			return againVerdict(c)
		}
		return notify.Deny(unix.EISCONN)
	}
	if c.Addr == nil {
		// A send on a connected socket: connected through this filter
		// (TCP) or to the sandbox's own loopback (UDP: other UDP
		// connects are refused), so its peer was already checked.
		return notify.Allow()
	}
	dst, ok, errno := parseSockaddr(c.Addr)
	if errno != 0 {
		return notify.Deny(errno)
	}
	if !ok {
		// AF_UNSPEC: a connect that dissolves a datagram socket's
		// association reaches nothing.
		return notify.Allow()
	}
	sock := netfilter.Socket{Family: c.Domain, Type: c.Type, FD: c.Sock}
	sock.Protocol, _ = unix.GetsockoptInt(c.Sock, unix.SOL_SOCKET, unix.SO_PROTOCOL)
	// The file status flags of the sandbox's open file (c.Sock is a
	// duplicate of it): the installed socket answers as that one would.
	if fl, err := unix.FcntlInt(uintptr(c.Sock), unix.F_GETFL, 0); err == nil {
		sock.Nonblock = fl&unix.O_NONBLOCK != 0
	}
	var v netfilter.Verdict
	if c.Syscall == notify.Connect {
		v, _ = t.f.Connect(ctx, dst, sock)
	} else {
		v, _ = t.f.Send(dst, sock)
	}
	// Refusals reached the session through the filter's OnRefusal.
	switch v.Action {
	case netfilter.Continue:
		return notify.Allow()
	case netfilter.Install:
		// No ID_VALID check first: should the sandboxed thread be gone
		// (killed while the supervisor dialled), the ADDFD fails with
		// ENOENT and the Server closes the socket; the kernel installs
		// only into the task that is still waiting in this call.
		// The Server installs the socket at the sandbox's fd number
		// (ADDFD with SETFD) and closes this copy.
		fd := v.Conn.Release()
		// A nonblocking connect answers -EINPROGRESS: the kernel returns
		// val itself when the response's error is 0
		// (syscall_set_return_value), and libc reads a value in
		// [-4095, -1] as -errno.
		return notify.InstallFD(fd, -int64(v.Errno))
	}
	return notify.Deny(v.Errno)
}

// shutdownVerdict decides a shutdown(2). On a socket this filter installed
// (of the host's network namespace) that is still connecting, it fails
// with ENOTCONN: the kernel would disconnect it (inet_shutdown in
// SYN_SENT), leaving an unconnected socket of the host's namespace, which
// then bound and listened there, where bind and listen are not trapped:
// it served clients of the host's loopback and, with SO_REUSEPORT and the
// supervisor's uid, took those of a host service (found by review).
// Anything else is performed as asked.
func shutdownVerdict(c *notify.SockCall) notify.Verdict {
	host, err := notify.OnSupervisorNetns(c.Sock)
	if err != nil {
		return notify.Deny(unix.ENOTCONN) // fail closed: whose socket it is is unknown
	}
	if !host {
		return notify.Allow()
	}
	info, err := unix.GetsockoptTCPInfo(c.Sock, unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil || info.State == tcpSynSent || info.State == tcpSynRecv {
		return notify.Deny(unix.ENOTCONN)
	}
	return notify.Allow()
}

// againVerdict answers a second connect on a socket this filter installed
// as the kernel would, but makes the kernel's call only where it cannot
// disconnect the socket: on one whose connect failed, the kernel's answer
// does (__inet_stream_connect's sock_error path sets SS_UNCONNECTED), and
// an unconnected socket of the host's namespace could listen there. So:
// EALREADY while it connects; the connect's error once it failed
// (SO_ERROR, read and cleared as the kernel reads it; ECONNABORTED
// without one); EISCONN once connected. The kernel's call is never made:
// made on a completed socket, a reset racing it took the same error path
// (found by review), and EISCONN is what programs take for "connected".
// Programs that learn a nonblocking connect's outcome by calling connect
// again get it (they got EISCONN for every outcome before; found by
// review).
func againVerdict(c *notify.SockCall) notify.Verdict {
	info, err := unix.GetsockoptTCPInfo(c.Sock, unix.IPPROTO_TCP, unix.TCP_INFO)
	switch {
	case err != nil:
		return notify.Deny(unix.EISCONN)
	case info.State == tcpSynSent || info.State == tcpSynRecv:
		return notify.Deny(unix.EALREADY)
	case info.State == tcpClose:
		if e, err := unix.GetsockoptInt(c.Sock, unix.SOL_SOCKET, unix.SO_ERROR); err == nil && e != 0 {
			return notify.Deny(unix.Errno(e))
		}
		return notify.Deny(unix.ECONNABORTED)
	}
	return notify.Deny(unix.EISCONN)
}

// TCP states (include/net/tcp_states.h).
const (
	tcpSynSent = 2
	tcpSynRecv = 3
	tcpClose   = 7
)

// parseSockaddr reads an AF_INET or AF_INET6 sockaddr. ok is false for
// AF_UNSPEC; errno is what the kernel would answer a short or foreign
// address with.
func parseSockaddr(b []byte) (dst netip.AddrPort, ok bool, errno unix.Errno) {
	if len(b) < 2 {
		return dst, false, unix.EINVAL
	}
	switch int(binary.NativeEndian.Uint16(b)) {
	case unix.AF_UNSPEC:
		return dst, false, 0
	case unix.AF_INET:
		if len(b) < unix.SizeofSockaddrInet4 {
			return dst, false, unix.EINVAL
		}
		port := binary.BigEndian.Uint16(b[2:4])
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port), true, 0
	case unix.AF_INET6:
		if len(b) < unix.SizeofSockaddrInet6 {
			return dst, false, unix.EINVAL
		}
		port := binary.BigEndian.Uint16(b[2:4])
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])), port), true, 0
	}
	return dst, false, unix.EAFNOSUPPORT
}

// useNetTrap makes the session's notification server decide internet
// sockets with the filter.
func (s *Session) useNetTrap(n *netSession, setup *setupMsg) error {
	if s.opts.inet != nil {
		return errTwoInetHandlers
	}
	s.opts.inet = netTrap{f: n.filter}
	// The notification filter is installed for a filtered network even
	// when the unix socket gate is off (startSocketGate then has no unix
	// handler).
	setup.SocketGate = true
	return nil
}
