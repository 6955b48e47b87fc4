package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nsbox/nsbox/pkg/cgroups"
	"github.com/nsbox/nsbox/pkg/ipc"
)

// Command is one program to run in a session.
type Command struct {
	Argv []string
	// Env is added to the policy's environment (a key set here wins).
	Env []string
	// Dir is the working directory inside; "" uses the policy's.
	Dir string
	// Stdin defaults to /dev/null.
	Stdin io.Reader
	// Stdout and Stderr receive the output; nil captures it into the
	// Result, up to MaxOutput bytes each. An *os.File is handed to the
	// command directly.
	Stdout, Stderr io.Writer
	// Timeout kills the command's process group; 0 uses the policy's.
	// A negative Timeout is an error.
	Timeout time.Duration
	// MaxOutput bounds captured output per stream (0: DefaultMaxOutput).
	MaxOutput int64
}

// errWorkerUnresponsive: nsbox killed a worker that did not answer after
// a command's timeout or cancellation (wrapped with ErrClosed).
var errWorkerUnresponsive = errors.New("the sandbox worker did not answer")

// DefaultMaxOutput bounds captured stdout and stderr (each).
const DefaultMaxOutput = 16 << 20

// Result is how a command ended.
type Result struct {
	ExitCode int
	Signal   syscall.Signal
	Reason   Reason
	Stdout   []byte
	Stderr   []byte
	// Truncated is set when captured output went past MaxOutput.
	Truncated bool
	Duration  time.Duration
}

// Session.Exec: one command in a running sandbox, its limits and its
// cancellation.

// Exec runs one command in the sandbox and waits for it. Commands of a
// session run one at a time. The error is nil when the command ran, whatever
// its exit code; it is a *ResourceLimitError when a limit ended it, and
// ErrCommandNotFound / ErrNotExecutable when it could not start.
func (s *Session) Exec(ctx context.Context, c Command) (Result, error) {
	if len(c.Argv) == 0 || c.Argv[0] == "" {
		return Result{}, errors.New("exec: empty command")
	}
	if c.Timeout < 0 {
		return Result{}, fmt.Errorf("exec: negative timeout %s (0 uses the policy's)", c.Timeout)
	}
	select {
	case <-s.exited:
		return Result{}, ErrClosed
	default:
	}
	s.execMu.Lock()
	defer s.execMu.Unlock()
	if s.peer == nil {
		return Result{}, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		// Not started: a cancel sent now could overtake the execute.
		return Result{Reason: ReasonCanceled}, err
	}
	s.execSeq++
	io, err := newStdio(c)
	if err != nil {
		return Result{}, err
	}
	defer io.close()

	timeout := c.Timeout
	if timeout == 0 {
		timeout = s.policy.Limits.Time
	}
	msg := executeMsg{
		Argv: c.Argv,
		Env:  mergeEnv(s.policy.env(), c.Env),
		Dir:  c.Dir,
		Seq:  s.execSeq,
	}
	if msg.Dir == "" {
		msg.Dir = s.policy.Cwd
		// setup.Workspace is the policy's Cwd when the policy has no
		// workspace, which is when Cwd can be the caller's directory: the
		// handshake said whether it is visible inside.
		if s.policy.CwdFallback && s.policy.Workspace == "" && s.workspaceErr != nil {
			msg.Dir = "/"
		}
	}
	if timeout > 0 {
		msg.TimeoutMs = timeout.Milliseconds()
		if msg.TimeoutMs == 0 {
			msg.TimeoutMs = 1
		}
	}
	fds := io.childFDs()
	var hc *hostCallConn
	if len(s.policy.HostAPIs) > 0 || s.policy.AllowToolRegistration {
		hc, err = s.hostCalls.newConn()
		if err != nil {
			return Result{}, err
		}
		msg.HostCall = true
		fds = append(fds, hc.childFD())
	}
	before := s.limits.events()
	netMark := s.netMark()
	refusals := s.sockets.mark()
	start := time.Now()
	io.start()
	// Cancelling ctx tells the worker to kill the command's process group;
	// the session lives on, and the reply still reports how it ended. The
	// call runs on this goroutine: no hand-off to another one and back.
	cancel := s.cancelOnDone(ctx, msg.Seq)
	stopWatch := s.watchWorker(ctx, timeout)
	rep, callErr := s.peer.Call(context.Background(), ipc.TypeExecute, msg.encode(), fds)
	unresponsive := stopWatch()
	canceled := cancel.stop()
	io.closeChildEnds()
	if hc != nil {
		// Only after the request (and its fds) went out.
		hc.closeChild()
	}
	res := Result{Duration: time.Since(start)}
	if callErr != nil {
		io.finish(&res)
		if errors.Is(callErr, ipc.ErrClosed) {
			// The worker died under the command. If a limit was hit
			// meanwhile (the OOM killer chose PID 1, or the worker could
			// not get a thread at the pids limit), that is the reason.
			<-s.exited
			if lerr := s.limits.check(before, &res); lerr != nil {
				return res, lerr
			}
			if unresponsive {
				err := fmt.Errorf("%w: %w within %s of the command's timeout or cancellation and was killed%s", ErrClosed, errWorkerUnresponsive, workerGrace, s.customProfileHint())
				if cerr := ctx.Err(); cerr != nil {
					// Cancelled: the caller's reason stays visible.
					res.Reason = ReasonCanceled
					err = fmt.Errorf("%w (%w)", err, cerr)
				}
				return res, err
			}
			return res, ErrClosed
		}
		return res, callErr
	}
	var er executeReply
	if len(rep.Payload) > 0 {
		if err := er.decode(rep.Payload); err != nil {
			return res, fmt.Errorf("bad execute reply: %w", err)
		}
	}
	io.finish(&res)
	res.ExitCode = er.ExitCode
	res.Signal = syscall.Signal(er.Signal)
	switch {
	case er.StartErr == "not_found":
		return res, fmt.Errorf("%w: %s", ErrCommandNotFound, c.Argv[0])
	case er.StartErr == "pids":
		res.Reason = ReasonPids
		return res, &ResourceLimitError{Resource: "pids", Limit: strconv.FormatInt(s.policy.Limits.Pids, 10), Enforcer: string(s.limits.mode())}
	case er.StartErr == "not_executable":
		return res, fmt.Errorf("%w: %s", ErrNotExecutable, er.Message)
	case er.StartErr != "":
		return res, errors.New(er.Message)
	case er.Signal != 0:
		res.Reason = ReasonSignaled
	default:
		res.Reason = ReasonExited
	}
	if er.TimedOut {
		res.Reason = ReasonTimeout
		return res, &ResourceLimitError{Resource: "time", Limit: timeout.String(), Enforcer: "timer"}
	}
	if canceled {
		res.Reason = ReasonCanceled
		return res, ctx.Err()
	}
	if res.Signal == syscall.SIGSYS && s.policy.Seccomp != "unconfined" {
		// The filter kills a process that uses a foreign syscall ABI
		// (i386, x32): that is a violation, not a crash.
		res.Reason = ReasonViolation
		detail := "a forbidden syscall ABI (killed by seccomp, SIGSYS)"
		if p := s.customProfile(); p != "" {
			detail = fmt.Sprintf("a system call the seccomp profile %s kills, or a forbidden syscall ABI (SIGSYS)", p)
		}
		return res, &ViolationError{Operation: "syscall", Detail: detail}
	}
	// The group's counters count every process in it, also what earlier
	// commands left running: a limit is this command's end only when it
	// failed. Not only by SIGKILL: the OOM killer often takes a child,
	// and make, npm or pytest then exit 2 or 1, not 137. A clean exit
	// stays a clean exit whatever happened next to it.
	failed := res.Signal != 0 || res.ExitCode != 0
	if lerr := s.limitEnd(before, &res, failed, failed); lerr != nil {
		return res, lerr
	}
	if v := s.netViolationSince(netMark); v != nil && failed {
		// A command that failed after the network filter refused it
		// something failed of it; one that recovered (a fallback
		// mirror) keeps its clean exit.
		res.Reason = ReasonViolation
		return res, v
	}
	if v := s.socketViolation(refusals); v != nil && failed {
		// A command that failed after a refused connect failed of it
		// (sockets.go); one that recovered keeps its clean exit.
		res.Reason = ReasonViolation
		return res, v
	}
	return res, nil
}

// limitEnd turns a limit the kernel counted since before into r's reason
// and a *ResourceLimitError: an OOM kill when oom says one may have ended
// the work, a refused fork when pids says so.
func (s *Session) limitEnd(before cgroups.Events, r *Result, oom, pids bool) error {
	l := s.limits
	if l == nil || l.m == nil || (!oom && !pids) {
		return nil
	}
	after := l.events()
	switch {
	case oom && after.OOMKills > before.OOMKills:
		r.Reason = ReasonOOM
		return &ResourceLimitError{Resource: "memory", Limit: formatBytes(l.limits.Memory), Enforcer: string(l.m.Mode())}
	case pids && after.PidsMax > before.PidsMax:
		r.Reason = ReasonPids
		return &ResourceLimitError{Resource: "pids", Limit: strconv.FormatInt(l.limits.Pids, 10), Enforcer: string(l.m.Mode())}
	}
	return nil
}

// execCancel sends the cancel of one execute once its context ends.
type execCancel struct {
	stopFunc func() bool
	replied  chan struct{} // closed when the execute's reply is in
	stopped  chan struct{} // closed when the sending goroutine is done
}

// cancelOnDone arranges that when ctx ends, the worker is told to kill the
// command of the execute sent with seq, and only that one: the cancel names
// it, so a cancel that arrives after the command ended kills nothing. The
// cancel is sent again, less and less often, until the reply is in: a
// cancel that overtook its execute on the way (ctx ended while the request
// was being written) found nothing to kill.
func (s *Session) cancelOnDone(ctx context.Context, seq int64) *execCancel {
	if ctx.Done() == nil {
		// A context that never ends (context.Background): nothing to
		// watch, and no AfterFunc to set up and stop on every Exec.
		return &execCancel{stopFunc: func() bool { return true }}
	}
	c := &execCancel{replied: make(chan struct{}), stopped: make(chan struct{})}
	c.stopFunc = context.AfterFunc(ctx, func() {
		defer close(c.stopped)
		wait := 20 * time.Millisecond
		for {
			if s.peer.Notify(ipc.TypeCancel, cancelMsg{Seq: seq}) != nil {
				return // the channel is gone: so is the command
			}
			t := time.NewTimer(wait)
			select {
			case <-c.replied:
				t.Stop()
				return
			case <-t.C:
			}
			wait = min(2*wait, time.Second)
		}
	})
	return c
}

// stop is called once the execute has its reply (or failed). It reports
// whether ctx ended first, and returns once nothing more is being sent for
// this command.
func (c *execCancel) stop() (canceled bool) {
	if c.stopFunc() {
		return false
	}
	close(c.replied)
	<-c.stopped
	return true
}

// mergeEnv returns base with extra added; a key in extra replaces base's.
func mergeEnv(base, extra []string) []string {
	if len(extra) == 0 {
		return base
	}
	out := make([]string, 0, len(base)+len(extra))
	keys := map[string]bool{}
	for _, e := range extra {
		k, _, _ := strings.Cut(e, "=")
		keys[k] = true
	}
	for _, e := range base {
		k, _, _ := strings.Cut(e, "=")
		if !keys[k] {
			out = append(out, e)
		}
	}
	return append(out, extra...)
}
