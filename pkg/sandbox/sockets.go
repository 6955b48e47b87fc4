package sandbox

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/nsbox/nsbox/pkg/notify"
	"golang.org/x/sys/unix"
)

// UnixSocketPolicy is the gate on unix sockets by path. A read-only bind
// does not stop connect(2) to a socket file (the kernel checks the socket's
// write bit, not the mount), so without the gate a sandbox reaches every
// host service whose socket it can see. With it, connects and sends to path
// sockets outside the sandbox's own writable places (binds that are not
// read-only, tmpfs entries, the private /tmp, /run and /dev/shm) fail with
// EACCES and are reported as violations.
type UnixSocketPolicy struct {
	// Allow lists host socket paths (as seen inside) let through.
	Allow []string `json:"allow,omitempty"`
	// Unrestricted turns the gate off: every socket the sandbox can see
	// and may write answers. Where the supervisor still makes the unix
	// calls (the filtered network's trap), it resolves each path in the
	// sandbox's own root with the caller's own permissions (pkg/notify,
	// Server.ungatedGate), never in its own.
	Unrestricted bool `json:"unrestricted,omitempty"`
}

// SockCall, Verdict and SocketHandler are pkg/notify's, for embedders and
// the network layer: see WithSocketHandler.
type (
	SockCall      = notify.SockCall
	SocketVerdict = notify.Verdict
	SocketHandler = notify.Handler
)

// WithSocketHandler has h decide every connect and send on the sandbox's
// AF_INET and AF_INET6 sockets (seccomp user notification, pkg/notify).
// Without one those calls are made as asked, by the supervisor, in the
// sandbox's own network namespace. h runs on the session's notification
// goroutines and must not block for long.
func WithSocketHandler(h SocketHandler) Option { return func(o *options) { o.inet = h } }

// WithViolations calls f with each violation the session's supervisor
// sees while it happens (a refused unix socket connect), from the
// goroutine that refused it: once per path, for at most 64 paths per
// session (a loop of refusals is not a flood). f must not block.
func WithViolations(f func(*ViolationError)) Option { return func(o *options) { o.violations = f } }

// SocketGateMechanism says what keeps the sandbox from host unix sockets on
// this kernel, and when nothing does, why.
func SocketGateMechanism() (mechanism string, err error) {
	if err := socketGateSupported(); err != nil {
		return "none", err
	}
	return "seccomp user notification", nil
}

var (
	gateOnce sync.Once
	gateErr  error
)

func socketGateSupported() error {
	gateOnce.Do(func() { gateErr = notify.Supported() })
	return gateErr
}

// wantSocketGate: the policy asks for the gate and this kernel has it.
// Where the kernel has none (no SECCOMP_RET_USER_NOTIF or pidfd_getfd:
// before Linux 5.6), the sandbox runs without, and SocketGateMechanism
// says so for `nsbox status`.
func (s *Session) wantSocketGate() bool {
	return !s.policy.UnixSockets.Unrestricted && socketGateSupported() == nil
}

// socketGate is a session's notification server and what it refused.
type socketGate struct {
	srv  *notify.Server
	gate *notify.UnixGate // holds the allowed sockets' pins
	// meta serves the Landlock backend's metadata gate (startMetaGate).
	meta *notify.Server

	mu      sync.Mutex
	refused int64    // refusals since the start
	paths   []string // the latest refused paths, at most maxRefusedPaths
	// reported are the paths already told (WithViolations, the audit
	// log): a loop of refused connects is one line per path, and at most
	// maxReportedPaths lines per session, not a flood.
	reported map[string]bool
}

const (
	maxRefusedPaths  = 16
	maxReportedPaths = 64
)

func (g *socketGate) close() {
	if g.srv != nil {
		g.srv.Close()
		g.srv = nil
	}
	if g.meta != nil {
		g.meta.Close()
		g.meta = nil
	}
	if g.gate != nil {
		g.gate.Close()
		g.gate = nil
	}
}

// mark returns the refusal count, for refusedSince.
func (g *socketGate) mark() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.refused
}

// refusedSince returns the first path refused after mark, if any.
func (g *socketGate) refusedSince(mark int64) (string, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := g.refused - mark
	if n <= 0 {
		return "", false
	}
	if n > int64(len(g.paths)) {
		n = int64(len(g.paths))
	}
	if n == 0 {
		return "", true
	}
	return g.paths[len(g.paths)-int(n)], true
}

// record counts a refusal and says whether to report it: the first of
// each path, for the first maxReportedPaths paths.
func (g *socketGate) record(p string) (report bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refused++
	g.paths = append(g.paths, p)
	if len(g.paths) > maxRefusedPaths {
		g.paths = append(g.paths[:0], g.paths[len(g.paths)-maxRefusedPaths:]...)
	}
	if g.reported == nil {
		g.reported = map[string]bool{}
	}
	if g.reported[p] || len(g.reported) >= maxReportedPaths {
		return false
	}
	g.reported[p] = true
	return true
}

// writablePlaces are the sandbox's own writable places, as paths inside:
// the gate lets path sockets on their mounts through.
func writablePlaces(p *Policy) []string {
	out := []string{"/tmp", "/run", "/dev/shm"}
	for _, m := range p.Mounts {
		if (m.Kind == MountBind || m.Kind == MountTmpfs) && !m.ReadOnly {
			out = append(out, m.Dest)
		}
	}
	return out
}

// errNoListener: the worker installed the filter but named no listener.
var errNoListener = errors.New("the worker named no socket notification listener")

// startSocketGate takes the worker's listener (pidfd_getfd) and serves it
// for the session's life.
func (s *Session) startSocketGate(workerFD int, netns uint64) error {
	if workerFD <= 0 {
		return &SetupError{Step: "socket gate", Err: errNoListener}
	}
	listener, err := s.workerFD(workerFD)
	if errors.Is(err, errWorkerGone) {
		return &SetupError{Step: "socket gate", Err: err}
	}
	if err != nil {
		// Yama's ptrace_scope 2 or 3 forbids it: without the listener
		// every connect inside would wait forever, so the sandbox does
		// not start.
		return &SetupError{Step: "socket gate", Err: fmt.Errorf("take the notification listener (pidfd_getfd): %w; kernel.yama.ptrace_scope above 1 forbids it", err)}
	}
	onRefuse := func(p string) {
		if !s.sockets.record(p) {
			return
		}
		if f := s.opts.violations; f != nil {
			f(&ViolationError{Operation: "unix connect", Path: p, Detail: "a host socket outside the sandbox's writable places"})
		}
		if a := s.hostCalls.audit; a.enabled() {
			a.write(map[string]any{"time": time.Now().UTC().Format(time.RFC3339Nano), "session": s.opts.id,
				"kind": "violation", "operation": "unix connect", "path": p})
		}
	}
	gate, err := notify.NewUnixGate(notify.GateConfig{
		RootPid:  s.pid,
		Writable: writablePlaces(&s.policy),
		Allow:    s.policy.UnixSockets.Allow,
		OnRefuse: onRefuse,
		// The shipped profiles refuse chroot, pivot_root and setns, and
		// unshare(CLONE_NEWNS) unless nested user namespaces are allowed.
		RootMayChange: (s.policy.Seccomp != "" && s.policy.Seccomp != "default") || s.policy.AllowUserns || s.policy.AllowPrivileged,
	})
	if err != nil {
		unix.Close(listener)
		return &SetupError{Step: "socket gate", Err: err}
	}
	// A root supervisor performs unix calls as the calling process's own
	// host ids: a host service sees the sandbox, not root, as its peer.
	// OwnPIDNamespace: a namespace sandbox always has one (CLONE_NEWPID);
	// the Landlock backend (s.ll) has none, and its commands could signal
	// a serving thread that keeps their ids (notify.servingThread).
	o := notify.Options{Unix: gate, Inet: s.opts.inet, AsTarget: os.Geteuid() == 0, OwnPIDNamespace: s.ll == nil, SandboxNetns: netns}
	if s.policy.UnixSockets.Unrestricted {
		// Installed for the filtered network alone: unix sockets
		// are not gated. The Server still resolves a path address in
		// the caller's root, as the caller, and connects through a pin
		// (a nil handler's open gate): with the raw path, the kernel
		// resolved it in the supervisor's root and mount namespace,
		// and a sandbox reached host sockets hidden behind its private
		// /tmp (found by review, TestReviewGateUngatedPathIsResolvedInTargetRoot).
		o.Unix = nil
		// The open gate's view of the sandbox: its PID 1's, never a
		// caller's (a nested user namespace's).
		o.SandboxPid = s.pid
	}
	srv, err := notify.NewServer(listener, o)
	if err != nil {
		unix.Close(listener)
		gate.Close()
		return &SetupError{Step: "socket gate", Err: err}
	}
	s.sockets.srv, s.sockets.gate = srv, gate
	go srv.Serve()
	return nil
}

// UnixSocketGate says what guards this session's host unix sockets:
// "seccomp user notification", "unrestricted" (the policy turned the gate
// off) or "none" (this kernel has no way; see SocketGateMechanism).
func (s *Session) UnixSocketGate() string {
	switch {
	case s.sockets.srv != nil:
		return "seccomp user notification"
	case s.policy.UnixSockets.Unrestricted:
		return "unrestricted"
	}
	return "none"
}

// socketViolation turns the refusals since mark into the error of a
// command that failed: a refused connect is a violation, as a refused
// write is.
func (s *Session) socketViolation(mark int64) *ViolationError {
	p, ok := s.sockets.refusedSince(mark)
	if !ok {
		return nil
	}
	return &ViolationError{Operation: "unix connect", Path: p, Detail: "a host socket outside the sandbox's writable places"}
}
