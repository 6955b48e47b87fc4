package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nsbox/nsbox/pkg/ipc"
	"github.com/nsbox/nsbox/pkg/mounts"
	"github.com/nsbox/nsbox/pkg/namespaces"
	"golang.org/x/sys/unix"
)

// SelfPath is where the nsbox binary is visible, read-only, inside a
// sandbox whose policy allows host APIs (for `nsbox call`).
const SelfPath = "/run/nsbox/bin/nsbox"

// Session is one running sandbox: a PID-1 worker in its own namespaces that
// runs commands one after another until Close.
type Session struct {
	policy Policy
	peer   *ipc.Peer
	pid    int
	proc   *os.Process // the worker, held by pidfd: signals never reach a reused pid
	// workerPidfd is a pidfd of the worker taken while it was our
	// unreaped child, for pidfd_getfd (workerFD), while hasPidfd: until
	// the worker is reaped.
	pidfdMu     sync.Mutex
	workerPidfd int
	hasPidfd    bool
	hostCalls   *hostCallServer
	// workspaceErr: WorkspaceErr, set by the handshake.
	workspaceErr error

	execMu    sync.Mutex
	execSeq   int64 // the last executeMsg.Seq given; under execMu
	closeOnce sync.Once
	closeErr  error
	exited    chan struct{} // closed when the worker has been reaped
	waitErr   error
	limits    *limiter
	opts      options
	// cgroupProcs are handed to the worker in the handshake.
	cgroupProcs []*os.File
	// net is the filtered network (nil for the others).
	net *netSession
	// ll is the Landlock backend's state (WithLandlock); nil for a
	// namespace sandbox. llInfo is what it enforces.
	ll     *landlockState
	llInfo *LandlockInfo
	// identity is what the worker's user namespace maps (nil for the
	// Landlock backend, which has none); premade the idmapped binds
	// handed over in the handshake.
	identity *namespaces.Identity
	// maps is the writing of the worker's id maps (nil: none begun).
	maps     *idMaps
	premade  []*os.File
	warnings []string
	subscriptions
	sockets socketGate
}

// Reason is why a command (or a sandbox) ended.
type Reason string

const (
	ReasonExited     Reason = "exited"
	ReasonSignaled   Reason = "signaled"
	ReasonTimeout    Reason = "timeout"
	ReasonOOM        Reason = "oom"
	ReasonPids       Reason = "pids"
	ReasonViolation  Reason = "violation"
	ReasonSetupError Reason = "setup_error"
	ReasonCanceled   Reason = "canceled"
)

// Start builds a sandbox for p and returns once its worker is ready to run
// commands. Every error names the step that failed (a *SetupError), and
// nothing is left behind on failure.
func Start(ctx context.Context, p Policy, opts ...Option) (*Session, error) {
	s, err := start(ctx, p, opts)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func start(ctx context.Context, p Policy, opts []Option) (s *Session, err error) {
	var o options
	for _, f := range opts {
		f(&o)
	}
	var (
		workerEnd *os.File
		conn      *ipc.Conn
		supEnd    *os.File
	)
	// A prestarted worker is adopted only when it was started with the
	// namespaces and capabilities this policy asks for; otherwise it is
	// discarded and a worker is started below, as without one.
	if o.landlock {
		// A prestarted worker lives in namespaces; this one must not.
		o.prestarted.Discard()
		s = &Session{exited: make(chan struct{})}
	} else if w := o.prestarted.take(HintFor(p), p.SingleID); w != nil {
		s, workerEnd, supEnd = w.s, w.workerEnd, w.supEnd
	} else {
		s = &Session{exited: make(chan struct{})}
	}
	s.policy, s.opts = p, o
	// The limits' groups are made (and stale ones reaped) on their own
	// goroutine, beside the steps before "create limits": on cgroup v1 that
	// is a mkdir, a lock and limit writes per hierarchy, ~0.7 ms the start
	// no longer waits for in line (BenchmarkStartLimits). The step takes
	// the result; on an earlier failure the defer below takes and destroys
	// it, so a failed Start still leaves no group behind.
	limc := make(chan limiterResult, 1)
	go func(l Limits) {
		lim, err := newLimiter(l)
		limc <- limiterResult{lim, err}
	}(p.Limits)
	defer func() {
		if limc != nil { // "create limits" never ran: the goroutine's groups go
			if r := <-limc; r.l != nil {
				r.l.destroy()
			}
		}
	}()
	defer func() {
		if err != nil {
			if conn != nil {
				conn.Close()
			}
			if supEnd != nil {
				supEnd.Close()
			}
			for _, f := range s.cgroupProcs {
				f.Close()
			}
			for _, f := range s.premade {
				f.Close()
			}
			if workerEnd != nil {
				workerEnd.Close()
			}
			// No newuidmap may still be on its way to /proc/PID once the
			// worker is reaped and its pid free for another process.
			s.maps.wait()
			s.kill()
			if s.pid > 0 {
				<-s.exited // reaped: nothing of a failed Start outlives it
			}
			s.closeNet()
			s.sockets.close()
			if s.limits != nil {
				s.limits.destroy()
			}
			if s.ll != nil {
				s.ll.ruleset.Close()
				os.RemoveAll(s.ll.tmpDir)
			}
		}
	}()
	var setup setupMsg
	// The id maps are written as soon as both the worker and its identity
	// exist, beside the steps that follow (a root-less full range execs
	// newuidmap and newgidmap, a few ms); "write id maps" waits for them.
	// A root-less prestarted worker's are under way since it started
	// (startMaps), a fresh worker's since its clone (startWorker).
	writeMaps := func() {
		if s.maps.identity() == nil && s.pid > 0 && s.identity != nil {
			s.maps = startMaps(s.pid, s.identity, nil, false)
		}
	}
	steps := []step{
		{"validate policy", func() error { return p.Validate() }},
		{"check mount sources", func() error { return checkSources(&p) }},
		{"prepare", func() error {
			err := s.prepare(&setup)
			if err == nil {
				writeMaps() // a prestarted worker runs already
			}
			return err
		}},
		{"network filter", func() error { return s.prepareNetFilter(&setup) }},
		{"build landlock rules", func() error {
			if !o.landlock {
				return nil
			}
			return s.prepareLandlock(&setup)
		}},
		{"create limits", func() error {
			r := <-limc
			limc = nil
			l, err := r.l, r.err
			if err != nil {
				return err
			}
			s.limits = l
			setup.Rlimits, setup.ExecRlimits = l.rlimits()
			s.cgroupProcs, err = l.joinFiles()
			setup.CgroupProcs = len(s.cgroupProcs)
			return err
		}},
		{"create channel", func() error {
			if supEnd == nil {
				sup, wk, err := ipc.Socketpair()
				if err != nil {
					return err
				}
				supEnd, workerEnd = sup, wk
			}
			conn, err = ipc.NewConn(supEnd)
			supEnd = nil // NewConn owns it now, error or not
			return err
		}},
		{"start worker", func() error {
			if s.pid > 0 {
				return nil // prestarted
			}
			if s.ll != nil {
				err := s.startLandlockWorker(workerEnd)
				// The worker holds the ruleset now.
				s.ll.ruleset.Close()
				return err
			}
			// startWorker begins the maps right after the clone.
			return s.startWorker(HintFor(p), workerEnd)
		}},
		// The worker runs unmapped until here and takes its ids only
		// after the handshake: a prestarted worker and a fresh one are
		// alike. (A Landlock worker has no user namespace: no maps.)
		{"write id maps", func() error {
			writeMaps()
			return s.maps.wait()
		}},
		// After the maps: an idmapped mount copies them when it is made.
		{"idmap binds", func() error {
			if !idmapsBinds(s.identity) {
				return nil
			}
			var err error
			s.premade, setup.Premade, err = s.idmapBinds(&setup.Plan)
			return err
		}},
		{"join limits", func() error { return s.limits.join(s.pid) }},
		{"handshake", func() error { return s.handshake(ctx, conn, &setup) }},
	}
	for _, st := range steps {
		if st.name == "handshake" {
			workerEnd.Close()
			workerEnd = nil
		}
		if err := st.fn(); err != nil {
			var se *SetupError
			if errors.As(err, &se) || errors.Is(err, ErrInvalidPolicy) {
				return s, err
			}
			return s, &SetupError{Step: st.name, Err: err}
		}
	}
	return s, nil
}

// checkSources fails early, with the mount named, when a bind source is
// missing: before any namespace exists.
func checkSources(p *Policy) error {
	for _, m := range p.Mounts {
		if m.Kind != MountBind || m.Optional {
			continue
		}
		if _, err := os.Lstat(m.Source); err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return &SetupError{Step: "mount", Err: &mounts.Error{Step: "mount", Source: m.Source, Dest: m.Dest, Err: err}}
		}
	}
	return nil
}

func (s *Session) prepare(setup *setupMsg) error {
	p := &s.policy
	if !s.opts.landlock {
		// Tools' caches go to the private /tmp (the Landlock backend's
		// TMPDIR is made later, in prepareLandlock).
		p.Env = withPrivateCache(p.env(), p.Mounts, "/tmp")
	}
	hostname := p.Hostname
	if hostname == "" {
		hostname = "nsbox"
	}
	*setup = setupMsg{
		Protocol: ipc.ProtocolVersion,
		Plan: mounts.Plan{
			HostDirs: p.HostDirs,
			TmpSize:  p.Limits.Tmp,
			// tmpfs pages escape an rlimit memory limit (RLIMIT_DATA
			// does not count them): every writable tmpfs is bounded by
			// it too. Under cgroups they are charged to the group.
			TmpfsMax: p.Limits.Memory,
			Mounts:   p.Mounts,
		},
		Hostname:        hostname,
		NewNet:          p.Network != NetworkHost,
		AllowPrivileged: p.AllowPrivileged,
		HostRootFiles:   os.Geteuid() == 0,
		Env:             p.env(),
		Workspace:       p.Workspace,
		Tools:           p.Tools,
		// Only for make bench, which measures what the scopes step costs.
		NoScopes: os.Getenv("_NSBOX_BENCH_NO_SCOPES") == "1",
	}
	if setup.Workspace == "" {
		setup.Workspace = p.Cwd
	}
	setup.Plan.OuterProc = s.opts.outerProc
	setup.Plan.ProcFallback = s.opts.procFallback
	// Host APIs reach the sandbox only through this server, which checks
	// the policy's allowlist; commands get a hostCall socket only when the
	// allowlist is not empty.
	s.hostCalls = newHostCallServer(p.HostAPIs)
	s.hostCalls.handlers = s.opts.handlers
	s.hostCalls.session = s.opts.id
	if s.opts.audit != nil {
		s.hostCalls.audit = &auditLog{w: s.opts.audit}
	}
	if p.AllowToolRegistration {
		s.hostCalls.forward = s.forwardToWorker
	}
	if len(p.HostAPIs) > 0 || p.AllowToolRegistration {
		setup.Plan.SelfDest = SelfPath
		setup.HostCalls = true
	}
	filters, err := compileSeccomp(p)
	if err != nil {
		return err
	}
	setup.Seccomp = filters.profile
	setup.CommandFilter = filters.profile != nil && (p.Seccomp == "" || p.Seccomp == "default")
	setup.SetIDSeccomp, setup.CommandSeccomp = filters.setID, filters.openat2
	if s.opts.landlock {
		// No user namespace: the worker keeps the caller's ids.
		return nil
	}
	if s.identity, err = s.chooseIdentity(p); err != nil {
		return err
	}
	setup.Identity = identityMsg{UID: s.identity.UID, GID: s.identity.GID, Setgroups: s.identity.Setgroups()}
	if idmapsBinds(s.identity) {
		// The worker builds the root as host root, whose ids the range
		// does not map: what it creates must be the sandbox's. Otherwise
		// it already runs as the ids it will take (the caller's own,
		// mapped to themselves).
		setup.Plan.Owner = &mounts.Owner{UID: s.identity.UID, GID: s.identity.GID}
		setup.Plan.Mounts = append(reachableAncestors(p), p.Mounts...)
	}
	setup.SocketGate = s.wantSocketGate()
	return nil
}

// chooseIdentity picks the sandbox's ids; with AllowSingleID, a root
// caller's bind that cannot be idmapped selects the single-id
// map, with a warning, before any map is written.
func (s *Session) chooseIdentity(p *Policy) (*namespaces.Identity, error) {
	if id := s.maps.identity(); id != nil {
		// A root-less prestarted worker's maps are being written with the
		// identity chosen at its start; take() hands such a worker only
		// to a policy that identity suits. Chosen once, not twice.
		return id, nil
	}
	id, err := chooseIdentity(p.SingleID)
	if err != nil || !idmapsBinds(id) || !p.AllowSingleID {
		return id, err
	}
	for _, m := range p.Mounts {
		if m.Kind != MountBind {
			continue
		}
		if err := IdmapSupport(m.Source); errors.Is(err, ErrIdmapUnsupported) {
			s.warnings = append(s.warnings, fmt.Sprintf("%s cannot be idmapped (%v): this sandbox runs as host root with the single-id map (--allow-single-id)", m.Source, err))
			return chooseIdentity(true)
		}
	}
	return id, nil
}

// Warnings are what Start accepted but the user should know (a fallback
// chosen with AllowSingleID).
func (s *Session) Warnings() []string { return s.warnings }

func (s *Session) startWorker(h PrestartHint, workerEnd *os.File) error {
	opts := namespaces.Options{
		HostNetwork: h.HostNetwork,
		AllCaps:     h.AllowPrivileged,
	}
	args := namespaces.SpawnArgs{
		// /proc/self/exe, not a path: the very binary that is running,
		// whatever happened to its path on disk since.
		Path:  "/proc/self/exe",
		Argv:  []string{"nsbox-init"},
		Env:   []string{initEnv + "=1"},
		Extra: workerEnd,
	}
	if s.opts.pooled {
		// One processor (withPooled). The worker's commands never see
		// this: their environment is the policy's.
		args.Env = append(args.Env, "GOMAXPROCS=1")
	}
	if os.Getenv("NSBOX_DEBUG_WORKER") != "" {
		args.Stderr = os.Stderr
	}
	// A root-less full range's worker is made inside the identity
	// holder's user namespace when one runs (holder.c): its maps are
	// then written without newuidmap and newgidmap.
	holder, newHolder, chosen := holderFor(s.identity)
	started := make(chan error, 1)
	go func() {
		// PR_SET_PDEATHSIG fires when the *thread* that cloned the worker
		// exits. This goroutine owns its thread for the worker's whole
		// life (it never unlocks, so the thread ends with it), which ties
		// the sandbox's life to the supervisor process.
		runtime.LockOSThread()
		var (
			proc  *os.Process
			stage *namespaces.Stage
			err   error
		)
		if holder != nil {
			proc, stage, err = namespaces.SpawnInHolder(opts, args, holder)
			holder.Close()
			if err != nil {
				// The holder failed this start: make the worker as
				// without one, and a new holder for the next starts.
				newHolder = true
			}
		}
		if proc == nil {
			proc, err = namespaces.Spawn(opts, args)
		}
		if err != nil {
			started <- err
			close(s.exited)
			return
		}
		s.pid, s.proc = proc.Pid, proc
		s.holdWorker()
		// The maps from the clone on: the identity chosen already (Start),
		// or the default one (a prestarted worker; see startMaps).
		maps := startMaps(proc.Pid, chosen, stage, newHolder)
		s.maps = maps
		started <- nil
		// Not reaped while newuidmap may still write to /proc/PID: the
		// pid could be another process's by then.
		maps.wait()
		s.reaped(waitExit(proc))
	}()
	if err := <-started; err != nil {
		return describeStartError(err)
	}
	return nil
}

// waitError is os.Process.Wait's outcome as an error: nil for exit status
// 0, else "exit status 125" or "signal: killed".
func waitError(st *os.ProcessState, err error) error {
	if err == nil && !st.Success() {
		err = errors.New(st.String())
	}
	return err
}

// underSeccomp reports whether this process runs under a seccomp filter
// (Seccomp: 2 in /proc/self/status), as a container's processes do.
func underSeccomp() bool {
	b, err := os.ReadFile("/proc/self/status")
	return err == nil && strings.Contains(string(b), "\nSeccomp:\t2\n")
}

// describeStartError turns the errno of a failed clone into the host knob
// that causes it.
func describeStartError(err error) error {
	switch {
	case (errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES)) && underSeccomp():
		return fmt.Errorf("%w: cannot create a user namespace (%v): the seccomp filter nsbox runs under (a container runtime's default profile) refuses it; run `nsbox status` for the container setting", ErrUnavailable, err)
	case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EACCES):
		return fmt.Errorf("%w: cannot create a user namespace (%v): unprivileged user namespaces are restricted on this host; run `nsbox status` for the exact setting", ErrUnavailable, err)
	case errors.Is(err, syscall.ENOSPC):
		return fmt.Errorf("%w: user namespace limit reached (%v): raise user.max_user_namespaces (sysctl)", ErrUnavailable, err)
	case errors.Is(err, syscall.EINVAL):
		return fmt.Errorf("%w: the kernel refused the namespaces (%v)", ErrUnavailable, err)
	}
	return err
}

func (s *Session) handshake(ctx context.Context, conn *ipc.Conn, setup *setupMsg) error {
	// The idmapped binds go ahead of the handshake, at most ipc.MaxFDs a
	// message, in the order of setup.Premade.
	for i := 0; i < len(s.premade); i += ipc.MaxFDs {
		var fds []int
		for _, f := range s.premade[i:min(i+ipc.MaxFDs, len(s.premade))] {
			fds = append(fds, int(f.Fd()))
		}
		if err := conn.WriteEnvelope(&ipc.Envelope{Type: typePremade}, fds); err != nil {
			return err
		}
	}
	s.peer = ipc.NewPeer(conn, ipc.Options{})
	// The worker's own tools reach host APIs through the same allowlist
	// as commands do.
	s.peer.Handle(ipc.TypeHostCall, s.hostCalls.serveCall)
	// toolsChanged is queued where it is read, so events reach the
	// subscribers in the order they came (see OnToolsChanged).
	s.peer.HandleDirect(ipc.TypeToolsChanged, s.toolsChanged)
	s.peer.Handle(ipc.TypeOpenHostCall, s.openHostCall)
	go s.peer.Serve()
	// A worker that dies during setup closes the channel; Call then
	// returns ErrClosed instead of waiting forever. The cgroup join files
	// travel with the handshake.
	var fds []int
	for _, f := range s.cgroupProcs {
		fds = append(fds, int(f.Fd()))
	}
	// A worker that hangs in setup (a stuck mount source, a stopped
	// process) is bounded by the run's timeout too; cancelling ctx ends
	// the wait at once.
	stopWatch := s.watchWorker(ctx, s.policy.Limits.Time)
	rep, err := s.peer.Call(ctx, ipc.TypeHandshake, setup, fds)
	silent := stopWatch()
	for _, f := range s.cgroupProcs {
		f.Close()
	}
	s.cgroupProcs = nil
	for _, f := range s.premade {
		f.Close()
	}
	s.premade = nil
	if err != nil {
		var re *ipc.RemoteError
		if errors.As(err, &re) {
			step := re.Step
			if step == "" {
				step = "handshake"
			}
			se := &SetupError{Step: step, Err: errors.New(re.Message)}
			if step == mounts.StepHideChanged || step == mounts.StepSourceChanged || step == mounts.StepProtectChanged {
				se.Err = &planChangedError{msg: re.Message}
			}
			return se
		}
		if errors.Is(err, ipc.ErrClosed) {
			<-s.exited
			if silent {
				return fmt.Errorf("the sandbox worker did not finish its setup within the timeout (%s) and %s more, and was killed%s", s.policy.Limits.Time, workerGrace, s.customProfileHint())
			}
			return fmt.Errorf("the sandbox worker exited during setup (%v)%s", s.waitErr, s.customProfileHint())
		}
		return err
	}
	// The reply's fds (the metadata gate's listener) are closed on every
	// return that does not hand them to startMetaGate.
	replyFDs := rep.FDs
	defer func() {
		for _, fd := range replyFDs {
			unix.Close(fd)
		}
	}()
	var hr handshakeReply
	if err := rep.Decode(&hr); err != nil {
		return err
	}
	if hr.Protocol != ipc.ProtocolVersion {
		return fmt.Errorf("protocol version mismatch: supervisor speaks %d, worker speaks %d", ipc.ProtocolVersion, hr.Protocol)
	}
	if hr.OuterProc {
		s.opts.outerProc = true // NotIsolated says so
	}
	if hr.WorkspaceError != "" {
		s.workspaceErr = fmt.Errorf("%w: %s (%s)", ErrWorkspaceNotVisible, setup.Workspace, hr.WorkspaceError)
	}
	if setup.Resolver {
		if err := s.startResolver(hr.Resolver); err != nil {
			return err
		}
	}
	if setup.SocketGate {
		return s.startSocketGate(hr.NotifyFD, hr.NetnsCookie)
	}
	if setup.MetaGate {
		fds := replyFDs
		replyFDs = nil
		return s.startMetaGate(hr.MetaListener, fds)
	}
	return nil
}

// WorkspaceErr is nil when the directory the built-in tools are confined
// to (Policy.Workspace, else Policy.Cwd) is a directory inside the
// sandbox, and an error matching ErrWorkspaceNotVisible otherwise. A
// command runs without it; the tools fail on every call.
func (s *Session) WorkspaceErr() error { return s.workspaceErr }

// NotIsolated lists what this session leaves shared with the host, for a
// sandbox weaker than the namespace one with a fresh /proc (the landlock
// backend, an outer /proc); nil otherwise.
func (s *Session) NotIsolated() []string {
	switch {
	case s.llInfo != nil:
		return s.llInfo.NotIsolated
	case s.opts.outerProc:
		return OuterProcGaps()
	}
	return nil
}

// Pid is the worker's process id on the host.
func (s *Session) Pid() int { return s.pid }

// Policy returns the policy the session runs under.
func (s *Session) Policy() Policy { return s.policy }

// Done is closed when the sandbox has ended.
func (s *Session) Done() <-chan struct{} { return s.exited }

func (s *Session) kill() {
	s.killWorker()
	if s.limits != nil {
		s.limits.kill()
	}
}

// stopProcesses kills every process of the session but the worker and
// returns once they are gone; Close still has to end the rest. Without the
// worker's answer, it kills PID 1 and waits for its reap: the kernel kills
// the namespace's other processes as PID 1 exits and reaps them all before
// PID 1 can be (pid_namespaces(7)). The Landlock backend has no such
// namespace, and its worker ends its command's processes when its channel
// closes: there it is the whole Close.
func (s *Session) stopProcesses() {
	if s.ll != nil {
		s.Close()
		return
	}
	// The worker kills the others and says when they are reaped, without
	// waiting for its own exit (worker_quiesce.go); where it cannot, PID 1
	// goes too.
	ctx, cancel := context.WithTimeout(context.Background(), quiesceTimeout+time.Second)
	defer cancel()
	if _, err := s.peer.Call(ctx, typeQuiesce, nil, nil); err == nil {
		return
	}
	s.killWorker()
	<-s.exited
}

func (s *Session) killWorker() {
	if s.proc != nil {
		// SIGKILL of PID 1 makes the kernel kill every process of the
		// sandbox's PID namespace (pid_namespaces(7)). Through the pidfd:
		// once the worker is reaped its pid may be another process's, and
		// Signal then only says so.
		s.proc.Signal(syscall.SIGKILL)
	}
}

// Close ends the session: the worker and every process of the sandbox are
// killed and waited for, the host-API handlers still running for it (see
// WithHandlers) are waited for, and the limits are removed. It is idempotent
// and safe from any goroutine, except from a host-API handler (HostFunc)
// serving this same session: Close waits for that handler to return, and
// the handler waits for Close, so neither ever does. A handler that decides
// to end its session calls `go s.Close()` and returns.
func (s *Session) Close() error {
	s.closeOnce.Do(func() {
		if s.peer != nil {
			s.peer.Close()
		}
		var llErr error
		if s.ll != nil {
			// The worker kills what it started once its channel closes.
			llErr = s.closeLandlock()
		}
		// The limits' groups are removed beside the worker's exit (a Go
		// process's teardown, the PID namespace's), not after it:
		// destroy itself kills whatever is still in the groups and waits
		// until they are empty before the rmdir, and Close still returns
		// only once they are gone (no leak for a caller that exits right
		// after). Only with a PID namespace: a command whose spawn raced
		// with Close and joins the group after destroy's scan is in it,
		// dies with PID 1, and the rmdir's retry on EBUSY then succeeds.
		// A Landlock worker's commands have no such namespace: there the
		// groups are removed after the worker is reaped, as before.
		var limitsDone chan error
		if s.limits != nil && s.ll == nil {
			s.killWorker() // the limits' kill is destroy's first act
			limitsDone = make(chan error, 1)
			go func() { limitsDone <- s.limits.destroy() }()
		} else {
			s.kill()
		}
		<-s.exited
		s.closeNet()
		s.sockets.close()
		if s.hostCalls != nil {
			s.hostCalls.close()
		}
		if limitsDone != nil {
			s.closeErr = <-limitsDone
		} else if s.limits != nil {
			s.closeErr = s.limits.destroy()
		}
		if llErr != nil {
			s.closeErr = errors.Join(llErr, s.closeErr)
		}
	})
	return s.closeErr
}
