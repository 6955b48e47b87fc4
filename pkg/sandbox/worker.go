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
		os.Exit(0)
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
	conn    *ipc.Conn
	peer    *ipc.Peer
	setup   setupMsg
	selfFD  int
	spawnCh chan *spawnReq
	reaper  reaper

	mu      sync.Mutex
	running map[uint64]int // execute request id -> process group
	execMu  sync.Mutex

	tools       WorkerTools
	toolCancels map[uint64]context.CancelFunc
	// cgroupFDs are the limited group's cgroup.procs files; the worker
	// itself stays outside the group.
	cgroupFDs []int
}

func runWorker() int {
	// Non-dumpable before anything else: no process inside can ptrace the
	// worker or open its /proc/1/mem, environ or fds, even before seccomp
	// is installed (prctl(2) PR_SET_DUMPABLE, proc(5)).
	unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
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
	w := &worker{conn: conn, selfFD: -1, spawnCh: make(chan *spawnReq), running: map[uint64]int{},
		tools: workerTools, toolCancels: map[uint64]context.CancelFunc{}}
	w.reaper.waiters = map[int]chan unix.WaitStatus{}
	env, fds, err := conn.ReadEnvelope()
	if err != nil {
		return 125
	}
	if env.Type != ipc.TypeHandshake {
		closeInts(fds)
		conn.WriteEnvelope(&ipc.Envelope{Type: ipc.TypeReply, ID: env.ID, Error: &ipc.ErrorBody{Code: ipc.CodeProtocol, Message: "expected handshake"}}, nil)
		return 125
	}
	if err := json.Unmarshal(env.Payload, &w.setup); err != nil || len(fds) != w.setup.CgroupProcs {
		closeInts(fds)
		if err == nil {
			err = fmt.Errorf("%d fds for %d cgroup.procs files", len(fds), w.setup.CgroupProcs)
		}
		conn.WriteEnvelope(&ipc.Envelope{Type: ipc.TypeReply, ID: env.ID, Error: &ipc.ErrorBody{Code: ipc.CodeBadRequest, Message: "bad handshake: " + err.Error()}}, nil)
		return 125
	}
	w.cgroupFDs = fds
	if w.setup.Protocol != ipc.ProtocolVersion {
		conn.WriteEnvelope(&ipc.Envelope{Type: ipc.TypeReply, ID: env.ID, Error: &ipc.ErrorBody{Code: ipc.CodeVersionMismatch,
			Message: fmt.Sprintf("protocol version mismatch: supervisor speaks %d, worker speaks %d", w.setup.Protocol, ipc.ProtocolVersion)}}, nil)
		return 125
	}
	if name, err := w.runSetup(); err != nil {
		conn.WriteEnvelope(&ipc.Envelope{Type: ipc.TypeReply, ID: env.ID, Error: &ipc.ErrorBody{Code: ipc.CodeSetupFailed, Step: name, Message: err.Error()}}, nil)
		return 125
	}
	payload, _ := json.Marshal(handshakeReply{Protocol: ipc.ProtocolVersion})
	if err := conn.WriteEnvelope(&ipc.Envelope{Type: ipc.TypeReply, ID: env.ID, Payload: payload}, nil); err != nil {
		return 125
	}
	return w.serve()
}

// runSetup is the worker's ordered, one-way list of setup steps. It returns
// the name of the step that failed.
func (w *worker) runSetup() (string, error) {
	steps := []step{
		{"open nsbox binary", w.openSelf},
		{"set hostname", func() error { return namespaces.SetHostname(w.setup.Hostname) }},
		{"bring up loopback", w.loopback},
		// Mounts need CAP_SYS_ADMIN; everything after only removes power.
		{"build root", func() error { return mounts.Build(&w.setup.Plan, w.selfFD) }},
		// No fd that names a host file survives into the serving worker:
		// a leaked directory fd is how a process escapes a chroot or
		// pivot_root through /proc/self/fd (CVE-2024-21626 class).
		{"close inherited fds", w.closeFDs},
		{"set rlimits", w.setRlimits},
		{"drop capabilities", w.dropCaps},
		// no_new_privs before seccomp: it is required to install a filter
		// without CAP_SYS_ADMIN in the initial namespace, and it makes
		// setuid binaries inside grant nothing (prctl(2)).
		{"set no_new_privs", setNoNewPrivs},
		// seccomp is last: every step above needs syscalls it denies.
		{"install seccomp filter", w.installSeccomp},
	}
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

func (w *worker) openSelf() error {
	if w.setup.Plan.SelfDest == "" {
		return nil
	}
	// /proc/self/exe names the file through the supervisor's mount
	// namespace, which cannot be cloned from here. Open the same path in
	// this (copied) namespace and check it is the very same file.
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return err
	}
	fd, err := unix.Open(exe, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	var a, b unix.Stat_t
	if err := unix.Fstat(fd, &a); err != nil {
		unix.Close(fd)
		return err
	}
	if err := unix.Stat("/proc/self/exe", &b); err != nil || a.Dev != b.Dev || a.Ino != b.Ino {
		unix.Close(fd)
		return fmt.Errorf("the nsbox binary at %s was replaced while starting", exe)
	}
	w.selfFD = fd
	return nil
}

func (w *worker) loopback() error {
	if !w.setup.NewNet {
		return nil
	}
	return namespaces.LoopbackUp()
}

func (w *worker) closeFDs() error {
	if w.selfFD >= 0 {
		unix.Close(w.selfFD)
		w.selfFD = -1
	}
	// Everything above stdio is close-on-exec from here on; the channel
	// is the only fd the worker keeps open for itself.
	return unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
}

func (w *worker) setRlimits() error {
	for _, r := range w.setup.Rlimits {
		if err := unix.Setrlimit(r.Resource, &unix.Rlimit{Cur: r.Cur, Max: r.Max}); err != nil {
			return fmt.Errorf("resource %d: %w", r.Resource, err)
		}
	}
	return nil
}

func setNoNewPrivs() error {
	return unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
}

func (w *worker) installSeccomp() error {
	if len(w.setup.Seccomp) == 0 {
		return nil
	}
	return installFilter(w.setup.Seccomp)
}

// serve answers requests until the supervisor hangs up. Forks happen on this
// (the main, locked) thread; everything else in goroutines.
func (w *worker) serve() int {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, unix.SIGCHLD)
	go func() {
		for range sig {
			w.reaper.reap()
		}
	}()
	w.peer = ipc.NewPeer(w.conn, ipc.Options{})
	w.peer.Handle(ipc.TypeExecute, w.execute)
	w.peer.Handle(ipc.TypeCancel, w.cancel)
	w.peer.Handle(ipc.TypeCallTool, w.callTool)
	w.peer.Handle(ipc.TypeListSessionDefinitions, w.listDefinitions)
	w.peer.Handle(ipc.TypeRegisterTool, w.registerTool)
	w.peer.Handle(ipc.TypeUnregisterTool, w.unregisterTool)
	go w.peer.Serve()
	for {
		select {
		case r := <-w.spawnCh:
			r.reply <- w.spawn(r)
		case <-w.peer.Done():
			// The supervisor is gone or closed the session: PID 1 exits
			// and the kernel kills every process of the namespace.
			return 0
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
	reply chan spawnRes
}

type spawnRes struct {
	pid   int
	pidfd int
	wait  chan unix.WaitStatus
	err   error
}

func (w *worker) spawn(r *spawnReq) spawnRes {
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
		argv = append([]string{limitExecArg0, encodeRlimits(rl), strings.Join(cg, ","), path}, argv...)
		path = "/proc/self/exe"
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
	w.reaper.mu.Lock()
	defer w.reaper.mu.Unlock()
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

// reaper collects every child of PID 1, including orphans re-parented to it,
// and hands the status of the commands we started to their waiters.
type reaper struct {
	mu      sync.Mutex
	waiters map[int]chan unix.WaitStatus
}

func (r *reaper) reap() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
		if ch, ok := r.waiters[pid]; ok {
			ch <- ws
			delete(r.waiters, pid)
		}
	}
}

func (w *worker) execute(ctx context.Context, req *ipc.Request) (any, error) {
	rep, err := w.runExecute(ctx, req)
	if err != nil {
		return nil, err
	}
	return rep.encode(), nil
}

func (w *worker) runExecute(ctx context.Context, req *ipc.Request) (executeReply, error) {
	fds := req.FDs
	defer func() { closeInts(fds) }()
	var m executeMsg
	if len(req.Payload) > 0 {
		if err := m.decode(req.Payload); err != nil {
			return executeReply{}, &ipc.RemoteError{Code: ipc.CodeBadRequest, Message: "bad execute payload: " + err.Error()}
		}
	}
	want := 3
	if m.HostCall {
		want = 4
	}
	if len(fds) != want {
		return executeReply{}, &ipc.RemoteError{Code: ipc.CodeBadRequest, Message: fmt.Sprintf("execute needs %d fds, got %d", want, len(fds))}
	}
	if len(m.Argv) == 0 || m.Argv[0] == "" {
		return executeReply{}, &ipc.RemoteError{Code: ipc.CodeBadRequest, Message: "empty command"}
	}
	w.execMu.Lock()
	defer w.execMu.Unlock()

	env := m.Env
	if m.HostCall {
		env = append(env[:len(env):len(env)], hostCallFDEnv+"=3")
	}
	dir := m.Dir
	if dir == "" {
		dir = "/"
	}
	if err := checkDir(dir); err != nil {
		return executeReply{ExitCode: 125, StartErr: "bad_dir", Message: fmt.Sprintf("working directory %s: %v", dir, err)}, nil
	}
	path, err := lookPath(m.Argv[0], envValue(env, "PATH"))
	if err != nil {
		return startFailure(m.Argv[0], err), nil
	}
	files := make([]uintptr, len(fds))
	for i, fd := range fds {
		files[i] = uintptr(fd)
	}
	r := &spawnReq{path: path, argv: m.Argv, env: env, dir: dir, files: files, pidfd: true, reply: make(chan spawnRes, 1)}
	w.spawnCh <- r
	res := <-r.reply
	if res.err != nil {
		return startFailure(m.Argv[0], res.err), nil
	}
	closeInts(fds)
	fds = nil

	w.mu.Lock()
	w.running[req.ID] = res.pid
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.running, req.ID)
		w.mu.Unlock()
	}()

	reply := executeReply{Pid: res.pid}
	ws, timedOut := w.waitCommand(ctx, res, time.Duration(m.TimeoutMs)*time.Millisecond)
	reply.TimedOut = timedOut
	switch {
	case ws.Exited():
		reply.ExitCode = ws.ExitStatus()
	case ws.Signaled():
		reply.Signal = int(ws.Signal())
		reply.ExitCode = 128 + int(ws.Signal())
	}
	return reply, nil
}

// waitCommand waits for the command to end and returns its status. When
// the timeout (if any) passes or ctx ends first, it kills the command's
// process group and reports whether the timeout did.
//
// With a pidfd, this goroutine sleeps in waitid until the kernel reports the
// exit: no SIGCHLD -> signal goroutine -> reaper -> channel chain on the
// way. The reaper still reaps orphans, and may reap the command first; its
// status then comes through the channel as before.
func (w *worker) waitCommand(ctx context.Context, res spawnRes, timeout time.Duration) (unix.WaitStatus, bool) {
	if res.pidfd < 0 {
		return waitChannel(ctx, res, timeout)
	}
	defer unix.Close(res.pidfd)
	var mu sync.Mutex
	exited, timedOut := false, false
	kill := func(byTimeout bool) {
		mu.Lock()
		defer mu.Unlock()
		// Only before the exit is seen, while the command is at most a
		// zombie: its pid and group id are still its own and cannot
		// have been reused for another process.
		if !exited {
			killGroup(res.pid)
			timedOut = timedOut || byTimeout
		}
	}
	var timer *time.Timer
	if timeout > 0 {
		timer = time.AfterFunc(timeout, func() { kill(true) })
	}
	stop := context.AfterFunc(ctx, func() { kill(false) })
	defer func() {
		stop()
		if timer != nil {
			timer.Stop()
		}
	}()
	var err error
	for {
		// WNOWAIT: the exit is reported, the zombie stays for the reap
		// below (or the reaper's).
		var si unix.Siginfo
		if err = unix.Waitid(unix.P_PIDFD, res.pidfd, &si, unix.WEXITED|unix.WNOWAIT, nil); err != unix.EINTR {
			break
		}
	}
	if err != nil && err != unix.ECHILD {
		// This kernel cannot wait on a pidfd (before 5.4): the reaper's
		// path, with the whole timeout again.
		stop()
		if timer != nil {
			timer.Stop()
		}
		mu.Lock()
		killed := timedOut
		mu.Unlock()
		ws, to := waitChannel(ctx, res, timeout)
		return ws, to || killed
	}
	mu.Lock()
	exited = true
	mu.Unlock()
	w.reaper.mu.Lock()
	if _, ok := w.reaper.waiters[res.pid]; ok {
		var ws unix.WaitStatus
		got, err := unix.Wait4(res.pid, &ws, unix.WNOHANG, nil)
		for err == unix.EINTR {
			got, err = unix.Wait4(res.pid, &ws, unix.WNOHANG, nil)
		}
		if got == res.pid {
			delete(w.reaper.waiters, res.pid)
			w.reaper.mu.Unlock()
			mu.Lock()
			defer mu.Unlock()
			return ws, timedOut
		}
	}
	w.reaper.mu.Unlock()
	// The reaper reaped it (ECHILD above, or between waitid and here).
	ws := <-res.wait
	mu.Lock()
	defer mu.Unlock()
	return ws, timedOut
}

// waitChannel waits for the status the reaper sends on SIGCHLD.
func waitChannel(ctx context.Context, res spawnRes, timeout time.Duration) (unix.WaitStatus, bool) {
	var timer <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timer = t.C
	}
	select {
	case ws := <-res.wait:
		return ws, false
	case <-timer:
		killGroup(res.pid)
		return <-res.wait, true
	case <-ctx.Done():
		killGroup(res.pid)
		return <-res.wait, false
	}
}

// killGroup kills the command's process group (it is a session leader, so
// its group id is its pid). Processes that left the group with setsid are
// killed with the sandbox when the session ends.
func killGroup(pid int) {
	unix.Kill(-pid, unix.SIGKILL)
	unix.Kill(pid, unix.SIGKILL)
}

func (w *worker) cancel(ctx context.Context, req *ipc.Request) (any, error) {
	var m cancelMsg
	if err := req.Decode(&m); err != nil {
		return nil, err
	}
	// ID 0 cancels whatever runs: Exec is sequential, so that is the one
	// command the supervisor is waiting for.
	w.mu.Lock()
	n := 0
	for id, pid := range w.running {
		if m.ID == 0 || id == m.ID {
			killGroup(pid)
			n++
		}
	}
	for id, cancel := range w.toolCancels {
		if m.ID == 0 || id == m.ID {
			cancel()
			n++
		}
	}
	w.mu.Unlock()
	return map[string]int{"canceled": n}, nil
}

func startFailure(name string, err error) executeReply {
	switch {
	case errors.Is(err, unix.EAGAIN):
		// fork failed: the sandbox is at its process limit.
		return executeReply{ExitCode: 126, StartErr: "pids", Message: fmt.Sprintf("%s: cannot start: the sandbox is at its process limit", name)}
	case errors.Is(err, unix.ENOENT), errors.Is(err, errNotFound):
		return executeReply{ExitCode: 127, StartErr: "not_found", Message: fmt.Sprintf("%s: command not found", name)}
	default:
		return executeReply{ExitCode: 126, StartErr: "not_executable", Message: fmt.Sprintf("%s: cannot execute: %v", name, err)}
	}
}

var errNotFound = errors.New("not found")

// checkDir makes sure the working directory resolves inside the sandbox
// root without a magic link: a /proc/self/fd/N path that names a directory
// outside the root is refused (CVE-2024-21626 class).
func checkDir(dir string) error {
	if !strings.HasPrefix(dir, "/") {
		return fmt.Errorf("not an absolute path")
	}
	fd, err := unix.Openat2(unix.AT_FDCWD, dir, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return err
	}
	unix.Close(fd)
	return nil
}

func lookPath(name, pathEnv string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	var lastErr error = errNotFound
	for _, dir := range strings.Split(pathEnv, ":") {
		if dir == "" {
			dir = "."
		}
		p := dir + "/" + name
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil || st.Mode&unix.S_IFMT == unix.S_IFDIR {
			continue
		}
		if err := unix.Access(p, unix.X_OK); err != nil {
			lastErr = err
			continue
		}
		return p, nil
	}
	return "", lastErr
}

func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

func closeInts(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

func intsToUintptrs(in []int) []uintptr {
	out := make([]uintptr, len(in))
	for i, v := range in {
		out[i] = uintptr(v)
	}
	return out
}

// closeLeakedFDs closes every fd above keep that is not close-on-exec.
func closeLeakedFDs(keep int) {
	d, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	var fds []int
	buf := make([]byte, 4096)
	for {
		n, err := unix.ReadDirent(d, buf)
		if err != nil || n <= 0 {
			break
		}
		_, _, names := unix.ParseDirent(buf[:n], -1, nil)
		for _, name := range names {
			if fd, err := strconv.Atoi(name); err == nil && fd > keep && fd != d {
				fds = append(fds, fd)
			}
		}
	}
	unix.Close(d)
	for _, fd := range fds {
		if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && fl&unix.FD_CLOEXEC == 0 {
			unix.Close(fd)
		}
	}
}
