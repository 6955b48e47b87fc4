package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/nsbox/nsbox/pkg/ipc"
	"golang.org/x/sys/unix"
)

// ToolSettings are the policy's bounds for tools.
type ToolSettings struct {
	// BlockedCommands are refused by run_command (checked on the parsed
	// argv): a guard on top of the sandbox, not the boundary.
	BlockedCommands []string `json:"blockedCommands,omitempty"`
	// Timeout is the default per-call timeout (0: 30s).
	Timeout time.Duration `json:"timeout,omitempty"`
	// MaxOutput is the output budget of a tool call, in characters (0:
	// the tools' default, 30000): see pkg/tools/output.go.
	MaxOutput int64 `json:"maxOutput,omitempty"`
	// MaxResults bounds search results (0: 50).
	MaxResults int `json:"maxResults,omitempty"`
	// ProtectedPatterns are the policy's protect patterns with a
	// wildcard below the workspace, relative to it ("*/**/.vscode"):
	// the file tools refuse to create or change what they match. What
	// they matched at the start is read-only anyway; one the run would
	// create (a nested project's .vscode/tasks.json) is refused by name
	// here, and quarantined when the run ends if made another way.
	ProtectedPatterns []string `json:"protectedPatterns,omitempty"`
}

// WorkerTools is the set of tools a worker runs. It lives in the same binary
// as the supervisor (the worker is that binary re-executed), and is handed to
// Init by programs that want tools: sandbox.Init(sandbox.WithWorkerTools(t)).
// Implementations run inside the sandbox, after seccomp, with no
// capabilities; every path they get is hostile.
type WorkerTools interface {
	// Definitions returns the current tool definitions (JSON array of
	// {name, description, parameters}).
	Definitions() json.RawMessage
	// Call runs one tool and returns its result object
	// ({success, output, error}).
	Call(ctx context.Context, env ToolEnv, name string, args json.RawMessage) (json.RawMessage, error)
	// Register adds a tool defined at run time; Unregister removes one.
	Register(def json.RawMessage) error
	Unregister(name string) error
}

// ToolEnv is what a tool may use inside the worker.
type ToolEnv interface {
	// Workspace is the root the workspace tools are confined to.
	Workspace() string
	// Settings are the policy's tool bounds.
	Settings() ToolSettings
	// Run starts a process inside the sandbox and waits for it.
	Run(ctx context.Context, spec RunSpec) (RunResult, error)
	// HostCall asks the host for a side effect (only allowlisted methods).
	HostCall(ctx context.Context, api, method string, args any) (json.RawMessage, error)
}

// RunSpec is a process a tool starts inside the sandbox.
type RunSpec struct {
	Argv      []string
	Env       []string // added to the policy environment
	Dir       string
	Stdin     []byte
	Timeout   time.Duration
	MaxOutput int64
	// KeepTail splits MaxOutput between the first and the last bytes of
	// each stream, so the end of a long output is not lost.
	KeepTail bool
	// FullStdout and FullStderr, when set, also get every byte of the
	// stream (the complete output, kept in a file); a write error ends
	// the copy, not the command.
	FullStdout, FullStderr io.Writer
}

// RunResult is how it ended.
type RunResult struct {
	ExitCode  int
	Signal    int
	TimedOut  bool
	Stdout    []byte
	Stderr    []byte
	Truncated bool
	// StdoutBytes and StderrBytes count what the process wrote, kept or
	// not. With KeepTail, a stream that was cut holds its first
	// MaxOutput/2 bytes, then its last ones.
	StdoutBytes, StderrBytes int64
	// StartErr is "not_found" or "not_executable" when it did not start.
	StartErr string
}

// InitOption configures the worker side (Init).
type InitOption func(*initOptions)

type initOptions struct {
	tools WorkerTools
}

// WithWorkerTools makes the worker serve t's tools.
func WithWorkerTools(t WorkerTools) InitOption { return func(o *initOptions) { o.tools = t } }

// WithWorkerToolsFunc makes the worker serve the tools newTools returns,
// built on the first tool request: Init runs in every process of the
// binary, and most sandboxes never call a tool.
func WithWorkerToolsFunc(newTools func() WorkerTools) InitOption {
	return func(o *initOptions) { o.tools = &lazyTools{newTools: newTools} }
}

// lazyTools is a WorkerTools built on first use.
type lazyTools struct {
	once     sync.Once
	newTools func() WorkerTools
	t        WorkerTools
}

func (l *lazyTools) get() WorkerTools {
	l.once.Do(func() { l.t = l.newTools() })
	return l.t
}

func (l *lazyTools) Definitions() json.RawMessage       { return l.get().Definitions() }
func (l *lazyTools) Register(def json.RawMessage) error { return l.get().Register(def) }
func (l *lazyTools) Unregister(name string) error       { return l.get().Unregister(name) }
func (l *lazyTools) Call(ctx context.Context, env ToolEnv, name string, args json.RawMessage) (json.RawMessage, error) {
	return l.get().Call(ctx, env, name, args)
}

type callToolMsg struct {
	Name      string          `json:"name"`
	Args      json.RawMessage `json:"args,omitempty"`
	TimeoutMs int64           `json:"timeoutMs,omitempty"`
}

type registerToolMsg struct {
	Definition json.RawMessage `json:"definition"`
}

type unregisterToolMsg struct {
	Name string `json:"name"`
}

// ToolsChanged is pushed by the worker when its tool set changes.
type ToolsChanged struct {
	Tools  json.RawMessage `json:"tools"`
	Reason string          `json:"reason"`
}

// workerToolEnv implements ToolEnv in the worker.
type workerToolEnv struct {
	w *worker
}

func (e workerToolEnv) Workspace() string { return e.w.setup.Workspace }

// Placeholders are the empty placeholders the sandbox's build made for
// missing protected paths (inside paths): nsbox's, not the workspace's
// content, so the tools leave them out of listings.
func (e workerToolEnv) Placeholders() []string { return e.w.setup.Plan.Made }
func (e workerToolEnv) Settings() ToolSettings { return e.w.setup.Tools }

func (e workerToolEnv) HostCall(ctx context.Context, api, method string, args any) (json.RawMessage, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	rep, err := e.w.peer.Call(ctx, ipc.TypeHostCall, hostCallRequest{API: api, Method: method, Args: raw}, nil)
	if err != nil {
		return nil, err
	}
	var res hostCallResult
	if err := rep.Decode(&res); err != nil {
		return nil, err
	}
	if !res.OK {
		return nil, errors.New(res.Error)
	}
	return res.Result, nil
}

// Run starts a process from the worker's main thread with pipes for its
// stdio, and collects bounded output.
func (e workerToolEnv) Run(ctx context.Context, spec RunSpec) (RunResult, error) {
	w := e.w
	if len(spec.Argv) == 0 || spec.Argv[0] == "" {
		return RunResult{}, errors.New("empty command")
	}
	max := spec.MaxOutput
	if max <= 0 {
		max = DefaultMaxOutput
	}
	env := mergeEnv(w.setup.Env, spec.Env)
	dir := spec.Dir
	if dir == "" {
		dir = w.setup.Workspace
	}
	if dir == "" {
		dir = "/"
	}
	if err := checkDir(dir); err != nil {
		return RunResult{ExitCode: 125, StartErr: "bad_dir"}, fmt.Errorf("working directory %s: %w", dir, err)
	}
	path, err := lookPath(spec.Argv[0], envValue(env, "PATH"))
	if err != nil {
		r := startFailure(spec.Argv[0], err)
		return RunResult{ExitCode: r.ExitCode, StartErr: r.StartErr}, nil
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return RunResult{}, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return RunResult{}, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return RunResult{}, err
	}
	files := []uintptr{inR.Fd(), outW.Fd(), errW.Fd()}
	if w.setup.HostCalls {
		// Its own hostCall socket, from the supervisor, as commands of
		// Exec get: nsbox call and tool registration work from here too.
		hc, err := w.openHostCall(ctx)
		if err != nil {
			inR.Close()
			inW.Close()
			outR.Close()
			outW.Close()
			errR.Close()
			errW.Close()
			return RunResult{}, fmt.Errorf("hostCall socket: %w", err)
		}
		defer unix.Close(hc)
		files = append(files, uintptr(hc))
		env = append(env[:len(env):len(env)], hostCallFDEnv+"=3")
	}
	r := &spawnReq{path: path, argv: spec.Argv, env: env, dir: dir,
		files: files, reply: make(chan spawnRes, 1)}
	w.spawnCh <- r
	res := <-r.reply
	inR.Close()
	outW.Close()
	errW.Close()
	if res.err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		sr := startFailure(spec.Argv[0], res.err)
		return RunResult{ExitCode: sr.ExitCode, StartErr: sr.StartErr}, nil
	}
	go func() {
		if len(spec.Stdin) > 0 {
			inW.Write(spec.Stdin)
		}
		inW.Close()
	}()
	out, errb := newHeadTail(max, spec.KeepTail, spec.FullStdout), newHeadTail(max, spec.KeepTail, spec.FullStderr)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); io.Copy(out, outR) }()
	go func() { defer wg.Done(); io.Copy(errb, errR) }()

	var timeout <-chan time.Time
	if spec.Timeout > 0 {
		t := time.NewTimer(spec.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	result := RunResult{}
	var ws unix.WaitStatus
	select {
	case ws = <-res.wait:
	case <-timeout:
		result.TimedOut = true
		killGroup(res.pid)
		ws = <-res.wait
	case <-ctx.Done():
		killGroup(res.pid)
		ws = <-res.wait
	}
	outR.SetReadDeadline(time.Now().Add(drainGrace))
	errR.SetReadDeadline(time.Now().Add(drainGrace))
	wg.Wait()
	outR.Close()
	errR.Close()
	switch {
	case ws.Exited():
		result.ExitCode = ws.ExitStatus()
	case ws.Signaled():
		result.Signal = int(ws.Signal())
		result.ExitCode = 128 + result.Signal
	}
	result.Stdout, result.Stderr = out.bytes(), errb.bytes()
	result.Truncated = out.cut() || errb.cut()
	result.StdoutBytes, result.StderrBytes = out.total, errb.total
	if ctx.Err() != nil {
		return result, ctx.Err()
	}
	return result, nil
}

// callTool serves a callTool request in the worker.
func (w *worker) callTool(ctx context.Context, req *ipc.Request) (any, error) {
	closeInts(req.FDs)
	if w.tools == nil {
		return nil, &ipc.RemoteError{Code: ipc.CodeBadRequest, Message: "this worker serves no tools"}
	}
	var m callToolMsg
	if err := req.Decode(&m); err != nil {
		return nil, err
	}
	if m.TimeoutMs > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(m.TimeoutMs)*time.Millisecond)
		defer cancel()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w.mu.Lock()
	w.toolCancels[req.ID] = cancel
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.toolCancels, req.ID)
		w.mu.Unlock()
	}()
	res, err := w.tools.Call(ctx, workerToolEnv{w}, m.Name, m.Args)
	if err != nil {
		return nil, err
	}
	return res, nil
}

func (w *worker) listDefinitions(ctx context.Context, req *ipc.Request) (any, error) {
	closeInts(req.FDs)
	if w.tools == nil {
		return json.RawMessage("[]"), nil
	}
	return w.tools.Definitions(), nil
}

func (w *worker) registerTool(ctx context.Context, req *ipc.Request) (any, error) {
	closeInts(req.FDs)
	if w.tools == nil {
		return nil, &ipc.RemoteError{Code: ipc.CodeBadRequest, Message: "this worker serves no tools"}
	}
	var m registerToolMsg
	if err := req.Decode(&m); err != nil {
		return nil, err
	}
	if err := w.tools.Register(m.Definition); err != nil {
		return nil, &ipc.RemoteError{Code: ipc.CodeBadRequest, Message: err.Error()}
	}
	w.pushToolsChanged("registered")
	return map[string]bool{"ok": true}, nil
}

func (w *worker) unregisterTool(ctx context.Context, req *ipc.Request) (any, error) {
	closeInts(req.FDs)
	if w.tools == nil {
		return nil, &ipc.RemoteError{Code: ipc.CodeBadRequest, Message: "this worker serves no tools"}
	}
	var m unregisterToolMsg
	if err := req.Decode(&m); err != nil {
		return nil, err
	}
	if err := w.tools.Unregister(m.Name); err != nil {
		return nil, &ipc.RemoteError{Code: ipc.CodeBadRequest, Message: err.Error()}
	}
	w.pushToolsChanged("unregistered")
	return map[string]bool{"ok": true}, nil
}

// pushToolsChanged sends one snapshot of the tool set to the host.
func (w *worker) pushToolsChanged(reason string) {
	w.peer.Notify(ipc.TypeToolsChanged, ToolsChanged{Tools: w.tools.Definitions(), Reason: reason})
}

// openHostCall asks the supervisor for a new hostCall socket.
func (w *worker) openHostCall(ctx context.Context) (int, error) {
	rep, err := w.peer.Call(ctx, ipc.TypeOpenHostCall, nil, nil)
	if err != nil {
		return -1, err
	}
	if len(rep.FDs) != 1 {
		closeInts(rep.FDs)
		return -1, errors.New("the supervisor sent no socket")
	}
	return rep.FDs[0], nil
}
