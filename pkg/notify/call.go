package notify

import (
	"context"

	"golang.org/x/sys/unix"
)

// Syscall names the notified call.
type Syscall int

const (
	Connect Syscall = iota + 1
	SendTo
	SendMsg
	SendMmsg
	// Shutdown is shutdown(2): performed by the supervisor on its copy of
	// the socket, after the handler of its family has seen it.
	Shutdown
	// Listen is listen(2), notified under ProgramOptions.Filtered and
	// made like Shutdown.
	Listen
	// Ioctl is a device ioctl(2) on a socket, notified under
	// ProgramOptions.Filtered and answered by the supervisor (ioctl.go).
	Ioctl
)

func (s Syscall) String() string {
	switch s {
	case Connect:
		return "connect"
	case SendTo:
		return "sendto"
	case SendMsg:
		return "sendmsg"
	case SendMmsg:
		return "sendmmsg"
	case Shutdown:
		return "shutdown"
	case Listen:
		return "listen"
	case Ioctl:
		return "ioctl"
	case Chmod:
		return "chmod"
	case Utimes:
		return "utimensat"
	}
	return "unknown"
}

// SockCall is one notified socket call, as the supervisor read it. Addr is
// the supervisor's own copy of the address: a Handler decides on it, and
// the supervisor performs the call with exactly these bytes.
type SockCall struct {
	// Pid is the calling thread's id in the supervisor's PID namespace.
	Pid     int
	Syscall Syscall
	// FD is the socket's number in the target.
	FD int
	// Domain and Type are the socket's own (SO_DOMAIN, SO_TYPE), read
	// from the file the call names at the time of the check. Type is
	// read for AF_INET and AF_INET6 sockets only (0 on an AF_UNIX
	// socket: the unix gate decides by the address, and a system call
	// fewer is a few µs of every connect).
	Domain, Type int
	// Addr is the raw sockaddr (nil: none, a send to the connected peer).
	Addr []byte
	// Data is the supervisor's copy of a send's payload (nil for
	// connect), what Allow would send.
	Data []byte
	// Flags are a send's flags (MSG_*), 0 for other calls.
	Flags int
	// Sock is the supervisor's duplicate of the target's socket
	// (pidfd_getfd), valid during Decide; the Server closes it.
	Sock int

	id       uint64
	listener int
	ctx      context.Context // the handler's (Server.decide)
	th       *servingThread  // the serving thread's ids (AsTarget)
	tainted  bool            // that thread's ids could not be given back
	later    []int           // supervisor fds to close after the answer
	// pinned says the gate answered with a PerformAt through its own
	// O_PATH pin, pin (UnixGate.decidePath): only then does the call
	// run with stickyCaps (Server.run), its one path walk being
	// /proc/PID/fd/pin of this process.
	pinned bool
	pin    int
	// replaced says InstallFD put another file at FD: Sock, the
	// supervisor's copy of the file that was there, is closed in a
	// batch (Server.dropReplaced), not on the serving thread.
	replaced bool
	// statusBuf is /proc/Pid/status once read (status), in scratch (the
	// serving goroutine's buffer, valid during the call) when it fits.
	statusBuf []byte
	scratch   []byte
	cred      *procStatus // the thread's credentials once read (creds)
	// proc names the calling thread (pidfd, /proc/TID), from getfd on;
	// the Server drops its reference after the answer.
	proc *proc
	srv  *Server
	// mem is the thread's /proc/TID/mem once opened for a write back
	// (Server.writeMem, when hasMem).
	mem    int
	hasMem bool
}

func (c *SockCall) closeLater(fd int) { c.later = append(c.later, fd) }

// ownIDs gives the serving thread its own ids back when it kept a
// target's from an earlier call (servingThread), before code from outside
// this package runs on it (GateConfig.OnRefuse: the session's audit log,
// whose rotation creates files, and its reports must not be written with
// a sandbox's ids and without the supervisor's capabilities). false: they
// could not be taken back; the thread is tainted and serves no more.
func (c *SockCall) ownIDs() bool {
	if c.th == nil || !c.th.held {
		return true
	}
	if c.th.release() {
		return true
	}
	c.tainted = true
	return false
}

// Family is the address family of Addr (0 without one).
func (c *SockCall) Family() int {
	if len(c.Addr) < 2 {
		return 0
	}
	return int(c.Addr[0]) | int(c.Addr[1])<<8
}

// Valid reports whether the target still waits in this call. A Handler
// that opened something through /proc/<Pid> asks it after the open: a pid
// names the target only while the call is pending.
func (c *SockCall) Valid() bool { return idValid(c.listener, c.id) }

// Verdict is a Handler's answer.
type Verdict struct {
	kind  verdictKind
	errno unix.Errno
	val   int64
	fd    int
	addr  []byte
}

type verdictKind int

const (
	vAllow verdictKind = iota
	vErrno
	vReturn
	vInstall
	vPerformAt
)

// Allow performs the call as asked: the supervisor makes it on Sock with
// Addr (never SECCOMP_USER_NOTIF_FLAG_CONTINUE; see the package doc).
func Allow() Verdict { return Verdict{kind: vAllow} }

// Deny fails the call with errno.
func Deny(errno unix.Errno) Verdict { return Verdict{kind: vErrno, errno: errno} }

// Return answers val: the Handler made the call itself.
func Return(val int64) Verdict { return Verdict{kind: vReturn, val: val} }

// InstallFD puts fd (a supervisor fd, which the Server closes) at the
// target's number FD in place of its socket (SECCOMP_IOCTL_NOTIF_ADDFD,
// SECCOMP_ADDFD_FLAG_SETFD), then answers val. This is how a connect is
// answered with a socket opened elsewhere (the filtered network).
func InstallFD(fd int, val int64) Verdict { return Verdict{kind: vInstall, fd: fd, val: val} }

// PerformAt performs the call with addr instead of the call's own address
// (the unix gate: "/proc/self/fd/N" of an O_PATH pin of the checked
// inode, pin, which the Server closes once the call is made; -1 for none).
func PerformAt(addr []byte, pin int) Verdict { return Verdict{kind: vPerformAt, addr: addr, fd: pin} }

// Handler decides the calls on sockets of one family. Decide runs on one of
// the Server's bounded goroutines; it must not keep c after it returns.
type Handler interface {
	Decide(ctx context.Context, c *SockCall) Verdict
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, c *SockCall) Verdict

func (f HandlerFunc) Decide(ctx context.Context, c *SockCall) Verdict { return f(ctx, c) }
