package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nsbox/nsbox/pkg/ipc"
	"github.com/nsbox/nsbox/pkg/mounts"
	"github.com/nsbox/nsbox/pkg/namespaces"
	"github.com/nsbox/nsbox/pkg/notify"
	"golang.org/x/sys/unix"
)

// initEnv marks the re-exec of the binary as the worker. It is the only
// variable the worker starts with.
const initEnv = "_NSBOX_INIT"

// workerFD is the worker's end of the channel.
const workerFD = 3

// IsInit reports whether this process is a sandbox worker: the binary
// re-executed by Start in its reserved init mode.
func IsInit() bool { return os.Getenv(initEnv) != "" }

// Init runs the worker and exits when this process is one; otherwise it
// returns at once. Programs that embed nsbox call it first thing in main,
// before flags or anything else, as in the package example.
func Init(opts ...InitOption) {
	if isLimitExec() {
		os.Exit(runLimitExec())
	}
	if len(os.Args) == 1 && os.Args[0] == probeArg0 && os.Getpid() == 1 {
		os.Exit(probeChild())
	}
	if len(os.Args) >= 2 && os.Args[0] == SelfPath && os.Args[1] == "call" && os.Getenv(hostCallFDEnv) != "" {
		os.Exit(callMain(os.Args[2:]))
	}
	if !IsInit() {
		return
	}
	var o initOptions
	for _, f := range opts {
		f(&o)
	}
	workerTools = o.tools
	// Capabilities, securebits and the thread a command is forked from are
	// per thread: the worker's whole life runs on the main OS thread.
	runtime.LockOSThread()
	os.Exit(runWorker())
}

// workerTools is set by Init in the worker process only.
var workerTools WorkerTools

type step struct {
	name string
	fn   func() error
}

type worker struct {
	conn   *ipc.Conn
	peer   *ipc.Peer
	setup  setupMsg
	selfFD int
	// loUp: lo was brought up before the handshake arrived.
	loUp bool
	// shimFD is a read-only clone of this binary that the limit shim is
	// executed from (-1 without limits).
	shimFD  int
	spawnCh chan *spawnReq
	// forkTid is the thread that dropped the capabilities: the only one
	// commands are forked from.
	forkTid int
	reaper  reaper

	mu      sync.Mutex
	running map[uint64]*command // execute request id -> its command

	// Main-thread state: only the main thread touches it (see serve).
	efd      int            // wakes the main thread for spawnQ, doneQ
	spawnQ   chan *spawnReq // forks asked for by other goroutines
	doneQ    chan *command  // exits seen without a pidfd
	cmds     []*command     // commands execute started, until reaped
	execQ    []queuedExec   // execute requests waiting for cmds to end
	pollFDs  []unix.PollFd  // reused by waitMain
	pidfdsOK bool           // this kernel has pidfds that poll
	chldFD   int            // readable after a SIGCHLD: the main thread reaps (see serve); -1 without
	spawnC   bool           // cmdspawn.c starts commands (see spawn)
	dirCheck bool           // dircheck.c's helper thread runs
	// llScoped: a Landlock worker whose domain has the signal scope
	// (killDescendants' fail-closed kill(-1) is confined to it).
	llScoped bool
	// cmdScoped: the "restrict scopes (landlock)" step put commands in a
	// scoped domain of their own.
	cmdScoped bool
	// lastYield is when waitMain last went through the scheduler.
	lastYield time.Time
	// served: an execute came; releasing: the idle release thread was
	// started (see idleRelease). Main thread only.
	served, releasing bool

	tools       WorkerTools
	toolCancels map[uint64]context.CancelFunc
	// cgroupFDs are the limited group's join files (cgroup.procs, or tasks
	// on v1); the worker itself stays outside the group.
	cgroupFDs []int
	// resolver are the filtered network's resolver sockets until the
	// supervisor took its copies.
	resolver resolverFDs
	// notifyFD is the socket notification listener until the supervisor
	// took its own copy (-1 then, or without the gate).
	notifyFD int
}

func runWorker() int {
	// Close what the caller of nsbox leaked to us (an fd without
	// FD_CLOEXEC survives execve; the Go runtime's own have it): a
	// directory fd held by PID 1 would be a way back to the host through
	// /proc/1/fd for anything that can reach PID 1.
	closeLeakedFDs(workerFD)
	os.Clearenv()
	conn, err := ipc.NewConn(os.NewFile(workerFD, "nsbox-ipc"))
	if err != nil {
		return 125
	}
	w := &worker{conn: conn, selfFD: -1, shimFD: -1, notifyFD: -1, spawnCh: make(chan *spawnReq), running: map[uint64]*command{},
		tools: workerTools, toolCancels: map[uint64]context.CancelFunc{}}
	w.reaper.waiters = map[int]chan unix.WaitStatus{}
	// While the supervisor still resolves its policy (a worker is usually
	// spawned before the policy is known), bring lo up: in a network
	// namespace of the sandbox's own that is all the "bring up loopback"
	// step does. In the host's (--net host) the kernel refuses it, this
	// user namespace holding no capability over that network namespace,
	// and nothing changes.
	// Not in a Landlock worker: its network namespace is the host's.
	w.loUp = !isLandlockWorker() && namespaces.LoopbackUp() == nil
	// The idmapped binds come first, at most ipc.MaxFDs per message, then
	// the handshake (see Session.handshake).
	var premade []int
	env, fds, err := conn.ReadEnvelope()
	for err == nil && env.Type == typePremade && len(premade)+len(fds) <= maxPremade {
		premade = append(premade, fds...)
		env, fds, err = conn.ReadEnvelope()
	}
	if err != nil {
		return 125
	}
	if env.Type != ipc.TypeHandshake {
		closeInts(premade)
		closeInts(fds)
		conn.WriteEnvelope(&ipc.Envelope{Type: ipc.TypeReply, ID: env.ID, Error: &ipc.ErrorBody{Code: ipc.CodeProtocol, Message: "expected handshake"}}, nil)
		return 125
	}
	// Non-dumpable before anything else is done for the sandbox: no
	// process inside can ptrace the worker or open its /proc/1/mem,
	// environ or fds, even before seccomp is installed (prctl(2)
	// PR_SET_DUMPABLE, proc(5)). Not earlier: until its maps are written
	// (the handshake comes after them) the supervisor, or newuidmap
	// checking who owns the process, must see the worker's /proc files as
	// the caller's, and nothing runs inside yet.
	unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	if err := json.Unmarshal(env.Payload, &w.setup); err != nil || len(fds) != w.setup.CgroupProcs || len(premade) != len(w.setup.Premade) {
		closeInts(fds)
		closeInts(premade)
		if err == nil {
			err = fmt.Errorf("%d fds for %d cgroup join files, %d for %d premade mounts", len(fds), w.setup.CgroupProcs, len(premade), len(w.setup.Premade))
		}
		conn.WriteEnvelope(&ipc.Envelope{Type: ipc.TypeReply, ID: env.ID, Error: &ipc.ErrorBody{Code: ipc.CodeBadRequest, Message: "bad handshake: " + err.Error()}}, nil)
		return 125
	}
	w.cgroupFDs = fds
	if len(premade) > 0 {
		w.setup.Plan.Premade = map[int]int{}
		for i, fd := range premade {
			w.setup.Plan.Premade[w.setup.Premade[i]] = fd
		}
	}
	if w.setup.Protocol != ipc.ProtocolVersion {
		conn.WriteEnvelope(&ipc.Envelope{Type: ipc.TypeReply, ID: env.ID, Error: &ipc.ErrorBody{Code: ipc.CodeVersionMismatch,
			Message: fmt.Sprintf("protocol version mismatch: supervisor speaks %d, worker speaks %d", w.setup.Protocol, ipc.ProtocolVersion)}}, nil)
		return 125
	}
	w.forkTid = unix.Gettid()
	if name, err := w.runSetup(); err != nil {
		conn.WriteEnvelope(&ipc.Envelope{Type: ipc.TypeReply, ID: env.ID, Error: &ipc.ErrorBody{Code: ipc.CodeSetupFailed, Step: name, Message: err.Error()}}, nil)
		return 125
	}
	hr := handshakeReply{Protocol: ipc.ProtocolVersion, OuterProc: w.setup.Plan.OuterProc, Resolver: w.resolver}
	if w.setup.NewNet {
		if c, err := notify.OwnNetnsCookie(); err == nil {
			hr.NetnsCookie = c // 0 (unknown) when the kernel has none
		}
	}
	var replyFDs []int
	switch {
	case w.notifyFD >= 0 && w.setup.Landlock:
		hr.MetaListener, replyFDs = true, []int{w.notifyFD}
	case w.notifyFD >= 0:
		hr.NotifyFD = w.notifyFD
	}
	if fd, err := unix.Open(w.setup.Workspace, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
		hr.WorkspaceError = err.Error()
	} else {
		unix.Close(fd)
	}
	payload, _ := json.Marshal(hr)
	if err := conn.WriteEnvelope(&ipc.Envelope{Type: ipc.TypeReply, ID: env.ID, Payload: payload}, replyFDs); err != nil {
		return 125
	}
	if hr.MetaListener {
		// The supervisor holds it now; no copy stays here.
		unix.Close(w.notifyFD)
		w.notifyFD = -1
	}
	return w.serve()
}

// runSetup is the worker's ordered, one-way list of setup steps. It returns
// the name of the step that failed.
func (w *worker) runSetup() (string, error) {
	if w.setup.Landlock {
		return runSteps(w.landlockSteps())
	}
	steps := []step{
		{"open nsbox binary", w.openSelf},
		// Before the root is built: a mount can be cloned only while it
		// is still in this mount namespace.
		{"clone nsbox binary read-only", w.cloneShim},
		{"set hostname", func() error { return namespaces.SetHostname(w.setup.Hostname) }},
		{"bring up loopback", w.loopback},
		// On lo, with CAP_NET_BIND_SERVICE over this namespace (port 53),
		// before any program inside runs (so none can take the address).
		{"bind resolver", w.bindResolver},
		// Mounts need CAP_SYS_ADMIN; everything after only removes power.
		{"build root", func() error { return mounts.Build(&w.setup.Plan, w.selfFD) }},
		// The supervisor wrote the maps before the handshake; until here
		// the worker ran unmapped, as the caller's host ids: a root
		// caller's worker could walk root-only host directories to hide
		// what is in them (what it created belongs to Plan.Owner). Now a
		// root caller's worker becomes root of the sandbox's range, never
		// host root, before anything of the sandbox can run.
		{"set identity", func() error {
			id := w.setup.Identity
			if err := namespaces.SetIdentity(id.UID, id.GID, id.Setgroups); err != nil {
				return err
			}
			// The kernel clears the parent-death signal when the ids
			// change (commit_creds), which they do here for a root
			// caller (host 0 to the range's root; review 69): set it
			// again, or the worker would outlive a killed supervisor
			// until it read EOF on its channel.
			return unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0)
		}},
		// No fd that names a host file survives into the serving worker:
		// a leaked directory fd is how a process escapes a chroot or
		// pivot_root through /proc/self/fd (CVE-2024-21626 class).
		{"close inherited fds", w.closeFDs},
		// After the identity: the new keyring is the sandbox's root's.
		{"join a session keyring", joinSessionKeyring},
		{"set rlimits", w.setRlimits},
		{"drop capabilities", w.dropCaps},
		// no_new_privs before seccomp: it is required to install a filter
		// without CAP_SYS_ADMIN in the initial namespace, and it makes
		// setuid binaries inside grant nothing (prctl(2)).
		{"set no_new_privs", setNoNewPrivs},
		// A second layer under the network and PID namespaces: Landlock
		// scopes (ABI 6) for commands; needs no_new_privs.
		{"restrict scopes (landlock)", w.landlockScopes},
		// The socket gate's filter, right before the main one: it only
		// hands connect and the sends to the supervisor, which performs
		// them (pkg/notify). Its listener cannot travel over the channel
		// (the worker's own sendmsg would wait for the supervisor that
		// does not have it yet): the handshake reply names its number and
		// the supervisor takes it with pidfd_getfd, as runc does. While
		// this filter's listener exists, no process inside can install a
		// filter with a listener of its own (EBUSY, kernel/seccomp.c
		// has_duplicate_listener), so none can answer its own calls.
		{"install socket notification filter", w.installNotify},
		// A profile of the user's gets the set-id rules beside it.
		{"install set-id filter", w.installSetID},
		// seccomp is last: every step above needs syscalls it denies.
		{"install seccomp filter", w.installSeccomp},
		// On this thread only, which forks every command: openat2, whose
		// mode the profile cannot read, gets ENOSYS in commands, while the
		// worker's tools (other threads) keep using it.
		{"install command filter", w.installCommandFilter},
	}
	return runSteps(steps)
}

// runSteps runs setup steps in order and names the one that failed.
func runSteps(steps []step) (string, error) {
	for _, s := range steps {
		if err := s.fn(); err != nil {
			var me *mounts.Error
			if errors.As(err, &me) {
				return me.Step, err
			}
			return s.name, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return "", nil
}

// serve answers requests until the supervisor hangs up. It reads the
// channel on this, the main and locked, thread, which is also the one
// commands are forked from: an execute request is forked where it was read,
// and while it waits for the next message the thread also forks what other
// goroutines (tools) asked for and reaps the commands that ended (their
// pidfds are polled with the channel), so an Exec makes no goroutine
// hand-off on its way.
func (w *worker) serve() int {
	// Best effort: without the helper, checkDir asks a goroutine.
	w.dirCheck = startDirCheck() == nil
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return 125
	}
	w.efd = efd
	w.spawnQ = make(chan *spawnReq, 16)
	w.doneQ = make(chan *command, 16)
	if fd, err := unix.PidfdOpen(os.Getpid(), 0); err == nil {
		unix.Close(fd)
		w.pidfdsOK = true
	}
	// PID 1 reaps every child, orphans of the sandbox included: a zombie
	// keeps its pid, and enough of them exhaust the pids limit. With
	// pidfds the main thread reaps (waitMain), woken by sigchld.c's
	// eventfd; it also reaps the commands whose pidfds polled readable,
	// so one thread waits for children and a child's end wakes no other
	// thread. Without pidfds, or without the handler, a goroutine reaps
	// on os/signal's notification.
	w.chldFD = -1
	if w.pidfdsOK {
		if fd, err := installSigchld(); err == nil {
			w.chldFD = fd
		}
	}
	if w.chldFD < 0 {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, unix.SIGCHLD)
		go func() {
			for range sig {
				w.reaper.reap()
				// A command whose status was not ready when its
				// pidfd polled readable is finished by the main
				// thread (finishAwaiting).
				w.wake()
			}
		}()
	}
	// After SIGCHLD's handler is in place: cmdspawn.c records which
	// signals have a handler now. On failure commands start with syscall.ForkExec.
	// As PID 1, the handlers the worker does not need go back to the
	// default first (cmdspawn.c).
	w.spawnC = initSpawnC(os.Getpid() == 1) == nil
	if os.Getpid() == 1 {
		// A command's kill or sigqueue of SIGSEGV (or another fault
		// signal) to PID 1 is dropped, not taken for a fault of the
		// worker (faultsig.c). Without it such a signal ends the
		// session, which is the sandbox's own loss only.
		filterFaultSignals()
	}
	go func() {
		for r := range w.spawnCh {
			w.spawnQ <- r
			w.wake() // after the request is queued: the wake-up sees it
		}
	}()
	w.conn.SetWait(w.waitMain)
	opts := ipc.Options{}
	if w.setup.Landlock && w.llScoped {
		// No PID namespace: the session's processes die when the
		// worker kills them. Once the channel is gone, at once: after
		// Serve it waits for the handlers, and a tool call's handler
		// waits up to its grace for a command only this thread can
		// finish, 2 s in which a detached process of the call ran on
		// with the workspace writable (review 63). One scoped kill(-1)
		// here; killDescendants after Serve makes sure.
		opts.OnHangup = killScoped
	}
	w.peer = ipc.NewPeer(w.conn, opts)
	w.peer.HandleDirect(ipc.TypeExecute, w.execute)
	w.peer.Handle(ipc.TypeCancel, w.cancel)
	w.peer.Handle(ipc.TypeCallTool, w.callTool)
	w.peer.Handle(ipc.TypeListSessionDefinitions, w.listDefinitions)
	w.peer.Handle(ipc.TypeRegisterTool, w.registerTool)
	w.peer.Handle(ipc.TypeUnregisterTool, w.unregisterTool)
	// A pooled session left idle is told so (worker_idle.go).
	w.peer.HandleDirect(typeIdle, w.idle)
	// A pooled session about to be discarded ends its processes first.
	w.peer.HandleDirect(typeQuiesce, w.quiesce)
	// Returns when the supervisor is gone or closed the session: PID 1
	// exits and the kernel kills every process of the namespace.
	w.peer.Serve()
	if w.setup.Landlock {
		// No PID namespace: the worker kills what it started itself.
		// A failure to list them is reported by the exit status
		// (killDescendants has killed what it could reach by then).
		known := make([]int, 0, len(w.cmds))
		for _, c := range w.cmds {
			known = append(known, c.res.pid)
		}
		if err := killDescendants(w.llScoped, known); err != nil {
			return 125
		}
	}
	return 0
}

// yieldEvery is how often the main goroutine goes through the scheduler
// (see waitMain): under the 10 ms after which the Go scheduler's monitor
// treats a goroutine as running too long.
const yieldEvery = 5 * time.Millisecond

// wake makes the main thread look at spawnQ and doneQ.
func (w *worker) wake() {
	unix.Write(w.efd, []byte{1, 0, 0, 0, 0, 0, 0, 0})
}

// waitMain returns once the channel fd is readable. Meanwhile, on the main
// thread, it forks the queued requests and finishes the commands that
// ended.
func (w *worker) waitMain(fd int) {
	// The main goroutine never parks (it blocks in syscalls only), so to
	// the Go scheduler it looks like one running for ever: past 10 ms its
	// monitor (sysmon) takes its P at every syscall it finds it in and,
	// finding work each time, wakes every 20 µs to look again, about as
	// much CPU as the main thread itself on a busy session. Going through
	// the scheduler once every few milliseconds, here where nothing is
	// pending, keeps it recent: one hand-off of the locked thread per
	// yieldEvery instead.
	if now := time.Now(); now.Sub(w.lastYield) >= yieldEvery {
		w.lastYield = now
		runtime.Gosched()
	}
	for {
		// A negative fd (no SIGCHLD eventfd) is ignored by poll(2).
		p := append(w.pollFDs[:0], unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}, unix.PollFd{Fd: int32(w.efd), Events: unix.POLLIN},
			unix.PollFd{Fd: int32(w.chldFD), Events: unix.POLLIN})
		for _, c := range w.cmds {
			if c.res.pidfd >= 0 && !c.awaitingStatus {
				// A pidfd polls readable once its process has exited.
				p = append(p, unix.PollFd{Fd: int32(c.res.pidfd), Events: unix.POLLIN})
			}
		}
		w.pollFDs = p
		if _, err := unix.Poll(p, -1); err != nil {
			if err == unix.EINTR {
				continue
			}
			return // the receive reports what is wrong
		}
		if p[2].Revents != 0 {
			var buf [8]byte
			unix.Read(w.chldFD, buf[:])
			// Before the pidfds: a command reaped here hands its
			// status to its waiter's buffered channel, which
			// pidfdReady then reads without blocking.
			w.reaper.reap()
			w.finishAwaiting()
		}
		if p[1].Revents != 0 {
			var buf [8]byte
			unix.Read(w.efd, buf[:])
			w.drainQueues()
			w.finishAwaiting()
		}
		for _, pf := range p[3:] {
			if pf.Revents != 0 {
				w.pidfdReady(int(pf.Fd))
			}
		}
		if p[0].Revents != 0 {
			w.closeResolver()
			if w.notifyFD >= 0 {
				// The supervisor takes the listener before it sends
				// anything after the handshake: from its first message
				// on, PID 1 holds no copy (nothing inside can reach
				// the worker's fds, but the supervisor alone answers).
				unix.Close(w.notifyFD)
				w.notifyFD = -1
			}
			return
		}
	}
}

func (w *worker) drainQueues() {
	for {
		select {
		case r := <-w.spawnQ:
			r.reply <- w.spawn(r)
		case c := <-w.doneQ:
			w.complete(c, c.ws)
		default:
			return
		}
	}
}

type spawnReq struct {
	path  string
	argv  []string
	env   []string
	dir   string
	files []uintptr
	// pidfd asks for a pidfd of the command (spawnRes.pidfd, -1 when
	// the kernel gives none); the caller then closes it.
	pidfd bool
	// checkDir: dir (absolute, without NUL) still needs checkDir's
	// check; a refusal is a *dirError.
	checkDir bool
	reply    chan spawnRes
}

type spawnRes struct {
	pid   int
	pidfd int
	wait  chan unix.WaitStatus
	err   error
}

// errForkThread refuses a fork from any thread but the one that dropped the
// capabilities.
var errForkThread = errors.New("commands are started from the worker's main thread only")

func (w *worker) spawn(r *spawnReq) spawnRes {
	// Capabilities, securebits and the bounding set are per thread: only
	// forkTid dropped them (the others keep the sandbox user namespace's
	// capabilities), so a command forked from another thread could start
	// with them. Forks happen on that thread alone.
	if unix.Gettid() != w.forkTid {
		return spawnRes{err: errForkThread, pidfd: -1}
	}
	path, argv, files := r.path, r.argv, r.files
	if len(w.setup.ExecRlimits) > 0 || len(w.cgroupFDs) > 0 {
		// Limits apply to the command alone: a shim between fork and exec
		// moves it into the limited cgroup and sets its rlimits.
		// RLIMIT_NPROC also counts the worker's own threads, so they are
		// added to the limit.
		rl := append([]rlimit(nil), w.setup.ExecRlimits...)
		for i := range rl {
			if rl[i].Resource == unix.RLIMIT_NPROC {
				rl[i].Cur += threadCount()
				rl[i].Max = rl[i].Cur
			}
		}
		files = append(files[:len(files):len(files)], intsToUintptrs(w.cgroupFDs)...)
		cg := make([]string, len(w.cgroupFDs))
		for i := range w.cgroupFDs {
			cg[i] = strconv.Itoa(len(r.files) + i)
		}
		arg0 := limitExecArg0
		if w.setup.Landlock {
			arg0 = limitExecLandlockArg0
		}
		argv = append([]string{arg0, encodeRlimits(rl), strings.Join(cg, ","), path}, argv...)
		shim, err := shimFDFor(w.shimFD, files)
		if err != nil {
			return spawnRes{err: fmt.Errorf("limit shim: %w", err), pidfd: -1}
		}
		defer unix.Close(shim)
		// execve resolves the link before close-on-exec closes it.
		path = "/proc/self/fd/" + strconv.Itoa(shim)
	}
	w.reaper.mu.Lock()
	defer w.reaper.mu.Unlock()
	if r.pidfd && w.spawnC {
		// cmdspawn.c: the same start (new session, files, dir, env, a
		// pidfd; its child sets up the session as below), without the
		// Go runtime's costs. Only with a pidfd asked for: the C path
		// always makes one (CLONE_PIDFD), and a request without one
		// comes from a kernel without pidfds, where syscall.ForkExec
		// remains. Not busy and initialized, or ok is false.
		//
		// ForkLock, as syscall.ForkExec takes it: code that creates an
		// fd and sets close-on-exec in two steps holds it for reading,
		// so no fd of the worker leaks into the command half-made.
		//
		// The working directory's check runs on dircheck.c's helper
		// thread while the child gets ready; the child execs only
		// once it passed.
		if r.checkDir && !w.dirCheck {
			if err := checkDir(r.dir); err != nil {
				return spawnRes{err: &dirError{err}, pidfd: -1}
			}
		}
		syscall.ForkLock.Lock()
		pid, pidfd, ok, err := spawnC(path, argv, r.env, r.dir, files, r.checkDir && w.dirCheck)
		syscall.ForkLock.Unlock()
		if ok {
			if err != nil {
				return spawnRes{err: err, pidfd: -1}
			}
			ch := make(chan unix.WaitStatus, 1)
			w.reaper.waiters[pid] = ch
			return spawnRes{pid: pid, pidfd: pidfd, wait: ch}
		}
	}
	if r.checkDir {
		if err := checkDir(r.dir); err != nil {
			return spawnRes{err: &dirError{err}, pidfd: -1}
		}
	}
	sys := &syscall.SysProcAttr{
		// A new session: no controlling terminal, so no TIOCSTI
		// injection into a terminal outside (CVE-2017-5226), and one
		// process group to kill on timeout.
		Setsid: true,
	}
	pidfd := -1
	if r.pidfd {
		sys.PidFD = &pidfd
	}
	pid, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{
		Dir:   r.dir,
		Env:   r.env,
		Files: files,
		Sys:   sys,
	})
	if err != nil {
		return spawnRes{err: err, pidfd: -1}
	}
	ch := make(chan unix.WaitStatus, 1)
	w.reaper.waiters[pid] = ch
	return spawnRes{pid: pid, pidfd: pidfd, wait: ch}
}

// shimFDFor returns a close-on-exec duplicate of shimFD at a number that
// syscall.ForkExec's child cannot overwrite before its execve: it moves
// files onto 0..len(files)-1, and moves fds out of the way (and its error
// pipe) onto the numbers right above max(len(files), the largest of files)
// (syscall/exec_linux.go, forkAndExecInChild). Overwritten, the
// /proc/self/fd link would name another file: the shim would not start.
func shimFDFor(shimFD int, files []uintptr) (int, error) {
	top := len(files)
	for _, f := range files {
		top = max(top, int(f))
	}
	return unix.FcntlInt(uintptr(shimFD), unix.F_DUPFD_CLOEXEC, top+len(files)+2)
}
