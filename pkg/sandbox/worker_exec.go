package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/pkg/ipc"
)

// The worker's commands: execute and cancel, the reaper that collects
// every child of PID 1, and the end of each command.

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

// command is a command started by execute, until it is reaped.
type command struct {
	id    uint64
	seq   int64 // executeMsg.Seq: what a cancel names it by
	res   spawnRes
	timer *time.Timer
	ws    unix.WaitStatus // set before it goes through doneQ

	mu       sync.Mutex
	exited   bool // its exit was seen: it may be reaped, no more kills
	timedOut bool
	reaper   *reaper // the worker's: kill asks it whether the pid is reaped

	// awaitingStatus: its pidfd polled readable but its status could not
	// be collected yet (a tracer inside sees the zombie first); the main
	// thread finishes it once the reaper hands the status over
	// (finishAwaiting). Main thread only.
	awaitingStatus bool
}

// kill kills the command's process group, unless its exit was already seen:
// until then the command is at least a zombie, so its pid and group id are
// still its own and cannot have been given to another process.
func (c *command) kill(byTimeout bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.exited {
		return
	}
	// Without a pidfd the exit is seen only after the reaper has reaped
	// the pid (a goroutine hands the status over): in between, the number
	// is free for another process of the sandbox. The reaper reaps and
	// forgets a pid under its lock, so a pid still among its waiters,
	// checked under that lock, is still the command's (or its zombie's).
	c.reaper.mu.Lock()
	_, waiting := c.reaper.waiters[c.res.pid]
	if waiting {
		killGroup(c.res.pid)
		c.timedOut = c.timedOut || byTimeout
	}
	c.reaper.mu.Unlock()
}

func (c *command) markExited() {
	c.mu.Lock()
	c.exited = true
	c.mu.Unlock()
}

// execute runs on the reading goroutine, which is the main thread
// (HandleDirect): the command is forked right there. The reply is sent when
// the main thread sees the command end. Commands run one at a time: a
// request that arrives while one runs waits for it.
func (w *worker) execute(ctx context.Context, req *ipc.Request) (any, error) {
	if !w.served {
		w.served = true
		markServed() // an idle release not begun yet does not begin
	}
	m, err := parseExecute(req)
	if err != nil {
		closeInts(req.FDs)
		return nil, err
	}
	if len(w.cmds) > 0 {
		w.execQ = append(w.execQ, queuedExec{req, m})
	} else {
		w.startExecute(req, &m)
	}
	return ipc.Deferred, nil
}

type queuedExec struct {
	req *ipc.Request
	m   executeMsg
}

// startExecute starts the command of a checked execute request (on the main
// thread), or replies why it could not.
func (w *worker) startExecute(req *ipc.Request, m *executeMsg) {
	res, rep := w.startCommand(req, m)
	if res.pid == 0 {
		w.peer.Reply(req.ID, rep.encode(), nil)
		w.startQueued()
		return
	}
	c := &command{id: req.ID, seq: m.Seq, res: res, reaper: &w.reaper}
	if m.TimeoutMs > 0 {
		c.timer = time.AfterFunc(time.Duration(m.TimeoutMs)*time.Millisecond, func() { c.kill(true) })
	}
	w.mu.Lock()
	w.running[req.ID] = c
	w.mu.Unlock()
	w.cmds = append(w.cmds, c)
	if res.pidfd < 0 {
		// No pidfd to poll (kernels before 5.3): the status comes from
		// the reaper, through doneQ.
		go func() {
			ws := <-res.wait
			c.markExited()
			c.ws = ws
			w.doneQ <- c
			w.wake()
		}()
	}
}

func (w *worker) startQueued() {
	if len(w.cmds) == 0 && len(w.execQ) > 0 {
		q := w.execQ[0]
		w.execQ = w.execQ[1:]
		w.startExecute(q.req, &q.m)
	}
}

// pidfdReady finishes the command whose pidfd polled readable: it exited.
func (w *worker) pidfdReady(pidfd int) {
	for _, c := range w.cmds {
		if c.res.pidfd == pidfd {
			c.markExited()
			if ws, ok := w.tryReap(c.res); ok {
				w.complete(c, ws)
			} else {
				c.awaitingStatus = true
			}
			return
		}
	}
}

// finishAwaiting completes the commands whose status the reaper has
// handed over since their pidfds polled readable.
func (w *worker) finishAwaiting() {
	for i := 0; i < len(w.cmds); i++ {
		c := w.cmds[i]
		if !c.awaitingStatus {
			continue
		}
		select {
		case ws := <-c.res.wait:
			w.complete(c, ws) // removes c from w.cmds
			i--
		default:
		}
	}
}

// tryReap collects the status of an exited command without blocking: here,
// or from the reaper, which sends it before forgetting the pid. Invariant:
// the main thread never waits for a status, since only it reaps: a zombie
// that a tracer inside the sandbox sees first (wait4 answers 0 until the
// tracer lets go) would otherwise wedge the worker, and every Exec and
// every reaping of the session with it (found by review).
func (w *worker) tryReap(res spawnRes) (unix.WaitStatus, bool) {
	w.reaper.mu.Lock()
	defer w.reaper.mu.Unlock()
	if _, ok := w.reaper.waiters[res.pid]; ok {
		var ws unix.WaitStatus
		got, err := unix.Wait4(res.pid, &ws, unix.WNOHANG, nil)
		for err == unix.EINTR {
			got, err = unix.Wait4(res.pid, &ws, unix.WNOHANG, nil)
		}
		if got == res.pid {
			delete(w.reaper.waiters, res.pid)
			return ws, true
		}
		return 0, false
	}
	select {
	case ws := <-res.wait:
		return ws, true
	default:
		return 0, false
	}
}

// complete replies to the execute request of a reaped command and starts
// the next queued one.
func (w *worker) complete(c *command, ws unix.WaitStatus) {
	if c.timer != nil {
		c.timer.Stop()
	}
	for i, x := range w.cmds {
		if x == c {
			w.cmds = append(w.cmds[:i], w.cmds[i+1:]...)
			break
		}
	}
	w.mu.Lock()
	delete(w.running, c.id)
	w.mu.Unlock()
	c.mu.Lock()
	reply := executeReply{Pid: c.res.pid, TimedOut: c.timedOut}
	c.mu.Unlock()
	switch {
	case ws.Exited():
		reply.ExitCode = ws.ExitStatus()
	case ws.Signaled():
		reply.Signal = int(ws.Signal())
		reply.ExitCode = 128 + int(ws.Signal())
	}
	w.peer.Reply(c.id, reply.encode(), nil)
	// After the reply, which the caller waits for: the pidfd is no
	// longer polled (c left w.cmds above) and its process is reaped.
	if c.res.pidfd >= 0 {
		unix.Close(c.res.pidfd)
	}
	w.startQueued()
}

// parseExecute decodes and checks an execute request.
func parseExecute(req *ipc.Request) (executeMsg, error) {
	var m executeMsg
	if len(req.Payload) > 0 {
		if err := m.decode(req.Payload); err != nil {
			return m, &ipc.RemoteError{Code: ipc.CodeBadRequest, Message: "bad execute payload: " + err.Error()}
		}
	}
	want := 3
	if m.HostCall {
		want = 4
	}
	if len(req.FDs) != want {
		return m, &ipc.RemoteError{Code: ipc.CodeBadRequest, Message: fmt.Sprintf("execute needs %d fds, got %d", want, len(req.FDs))}
	}
	if len(m.Argv) == 0 || m.Argv[0] == "" {
		return m, &ipc.RemoteError{Code: ipc.CodeBadRequest, Message: "empty command"}
	}
	return m, nil
}

// startCommand forks the command of an execute request (on the main
// thread) and closes the request's fds. It returns the started command (pid
// 0 when it did not start, with the reply that says why).
func (w *worker) startCommand(req *ipc.Request, m *executeMsg) (spawnRes, executeReply) {
	defer closeInts(req.FDs)
	env := m.Env
	if m.HostCall {
		env = append(env[:len(env):len(env)], hostCallFDEnv+"=3")
	}
	dir := m.Dir
	if dir == "" {
		dir = "/"
	}
	badDir := func(err error) executeReply {
		return executeReply{ExitCode: 125, StartErr: "bad_dir", Message: fmt.Sprintf("working directory %s: %v", dir, err)}
	}
	// What checkDir refuses before it opens anything; its openat2 check
	// runs as the command starts (spawn).
	if !strings.HasPrefix(dir, "/") {
		return spawnRes{}, badDir(errors.New("not an absolute path"))
	}
	if strings.IndexByte(dir, 0) >= 0 {
		return spawnRes{}, badDir(unix.EINVAL) // as openat2's wrapper answers
	}
	path, err := lookPath(m.Argv[0], envValue(env, "PATH"))
	if err != nil {
		// A bad directory is named first, as it always was.
		if derr := checkDir(dir); derr != nil {
			return spawnRes{}, badDir(derr)
		}
		return spawnRes{}, startFailure(m.Argv[0], err)
	}
	files := make([]uintptr, len(req.FDs))
	for i, fd := range req.FDs {
		files[i] = uintptr(fd)
	}
	res := w.spawn(&spawnReq{path: path, argv: m.Argv, env: env, dir: dir, files: files, pidfd: w.pidfdsOK, checkDir: true})
	var de *dirError
	if errors.As(res.err, &de) {
		return spawnRes{}, badDir(de.err)
	}
	if res.err != nil {
		return spawnRes{}, startFailure(m.Argv[0], res.err)
	}
	return res, executeReply{}
}

// killGroup kills the command's process group (it is a session leader, so
// its group id is its pid). Processes that left the group with setsid are
// killed with the sandbox when the session ends.
func killGroup(pid int) {
	unix.Kill(-pid, unix.SIGKILL)
	unix.Kill(pid, unix.SIGKILL)
}

func (w *worker) cancel(ctx context.Context, req *ipc.Request) (any, error) {
	closeInts(req.FDs)
	var m cancelMsg
	if err := req.Decode(&m); err != nil {
		return nil, err
	}
	// A cancel names what it stops: the execute sent with seq m.Seq, or
	// the request (execute or callTool) with id m.ID. Only that is
	// stopped; a cancel for a command that already ended (it is no longer
	// in running) stops nothing, and never the command after it. A cancel
	// naming neither stops everything running (the protocol's old form,
	// which nsbox itself does not send).
	all := m.ID == 0 && m.Seq == 0
	w.mu.Lock()
	n := 0
	for id, c := range w.running {
		if all || (m.ID != 0 && id == m.ID) || (m.Seq != 0 && c.seq == m.Seq) {
			c.kill(false)
			n++
		}
	}
	if all || m.ID != 0 {
		for id, cancel := range w.toolCancels {
			if all || id == m.ID {
				cancel()
				n++
			}
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
		return executeReply{ExitCode: 126, StartErr: "not_executable", Message: fmt.Sprintf("%s: %v", name, err)}
	}
}

var errNotFound = errors.New("not found")
