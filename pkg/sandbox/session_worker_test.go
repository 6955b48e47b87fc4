package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nsbox/nsbox/pkg/ipc"
	"golang.org/x/sys/unix"
)

// These tests drive a Session against a real worker loop (worker.serve, its
// execute, cancel and callTool handlers) that runs, without namespaces or
// setup, in a helper process: this test binary started again with
// fakeWorkerEnv set. The Session side is the real one, from its handshake
// on.

const fakeWorkerEnv = "NSBOX_TEST_FAKE_WORKER"

func init() {
	if os.Getenv(fakeWorkerEnv) != "" {
		os.Exit(fakeWorkerMain())
	}
}

// fakeWorkerMain is the helper process: the channel is fd 3. It answers the
// handshake and serves as the worker does after setup, forking commands from
// this (the main, locked) thread.
func fakeWorkerMain() int {
	runtime.LockOSThread()
	conn, err := ipc.NewConn(os.NewFile(3, "nsbox-ipc"))
	if err != nil {
		return 125
	}
	env, fds, err := conn.ReadEnvelope()
	if err != nil || env.Type != ipc.TypeHandshake {
		return 125
	}
	closeInts(fds)
	conn.WriteEnvelope(&ipc.Envelope{Type: ipc.TypeReply, ID: env.ID, Payload: json.RawMessage(fmt.Sprintf(`{"protocol":%d}`, ipc.ProtocolVersion))}, nil)
	w := &worker{conn: conn, selfFD: -1, shimFD: -1, spawnCh: make(chan *spawnReq), running: map[uint64]*command{},
		tools: &testTools{}, toolCancels: map[uint64]context.CancelFunc{}}
	w.reaper.waiters = map[int]chan unix.WaitStatus{}
	w.setup.Env = []string{"PATH=/usr/bin:/bin"}
	w.setup.Workspace = "/"
	w.forkTid = unix.Gettid()
	return w.serve()
}

// testTools are the helper worker's tools:
//   - "wait" runs `sleep SECONDS` (args {"seconds": N}) and reports how it
//     ended: success only when the sleep exited 0;
//   - Register adds a name, and Definitions lists the names registered so
//     far, so each toolsChanged snapshot says how many there were.
type testTools struct {
	mu    sync.Mutex
	names []string
}

func (t *testTools) Definitions() json.RawMessage {
	t.mu.Lock()
	defer t.mu.Unlock()
	defs := make([]map[string]string, 0, len(t.names))
	for _, n := range t.names {
		defs = append(defs, map[string]string{"name": n})
	}
	b, _ := json.Marshal(defs)
	return b
}

func (t *testTools) Register(def json.RawMessage) error {
	var d struct{ Name string }
	if err := json.Unmarshal(def, &d); err != nil {
		return err
	}
	t.mu.Lock()
	t.names = append(t.names, d.Name)
	t.mu.Unlock()
	return nil
}

func (t *testTools) Unregister(name string) error { return errors.New("not supported") }

func (t *testTools) Call(ctx context.Context, env ToolEnv, name string, args json.RawMessage) (json.RawMessage, error) {
	var a struct{ Seconds string }
	json.Unmarshal(args, &a)
	r, err := env.Run(ctx, RunSpec{Argv: []string{"/bin/sleep", a.Seconds}})
	if err != nil {
		return nil, err
	}
	ok := r.ExitCode == 0 && r.Signal == 0 && ctx.Err() == nil
	return json.Marshal(map[string]any{"success": ok, "output": fmt.Sprintf("exit %d signal %d", r.ExitCode, r.Signal)})
}

// startFakeWorkerSession starts the helper worker and a Session on it.
func startFakeWorkerSession(t *testing.T) *Session {
	t.Helper()
	sup, wk, err := ipc.Socketpair()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fakeWorkerEnv+"=1")
	cmd.ExtraFiles = []*os.File{wk}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	wk.Close()
	s := &Session{exited: make(chan struct{}), pid: cmd.Process.Pid, proc: cmd.Process}
	s.policy.Env = []string{"PATH=/usr/bin:/bin"}
	s.hostCalls = newHostCallServer(nil)
	go func() {
		cmd.Wait()
		close(s.exited)
	}()
	conn, err := ipc.NewConn(sup)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.handshake(ctx, conn, &setupMsg{Protocol: ipc.ProtocolVersion}); err != nil {
		s.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestExecCancelSparesConcurrentToolCall: cancelling an Exec kills its
// command, and not a tool call running at the same time whose context
// was never cancelled.
func TestExecCancelSparesConcurrentToolCall(t *testing.T) {
	s := startFakeWorkerSession(t)
	toolDone := make(chan string, 1)
	go func() {
		out, err := s.CallTool(context.Background(), "wait", json.RawMessage(`{"seconds":"1"}`), 0)
		if err != nil {
			toolDone <- "error: " + err.Error()
			return
		}
		toolDone <- string(out)
	}()
	time.Sleep(200 * time.Millisecond) // the tool's sleep runs
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	begin := time.Now()
	res, err := s.Exec(ctx, Command{Argv: []string{"/bin/sleep", "5"}})
	if !errors.Is(err, context.DeadlineExceeded) || res.Reason != ReasonCanceled {
		t.Fatalf("cancelled Exec: err %v reason %q", err, res.Reason)
	}
	if d := time.Since(begin); d > 3*time.Second {
		t.Fatalf("the cancelled command ran for %s", d)
	}
	out := <-toolDone
	var r struct {
		Success bool
		Output  string
	}
	if json.Unmarshal([]byte(out), &r) != nil || !r.Success {
		t.Fatalf("the concurrent tool call was hit by the Exec's cancel: %s", out)
	}
}

// TestLateCancelSparesNextExec: a cancel of a command that has ended (as
// when the context ends just as the command does) kills nothing, in
// particular not the next command.
func TestLateCancelSparesNextExec(t *testing.T) {
	s := startFakeWorkerSession(t)
	if res, err := s.Exec(context.Background(), Command{Argv: []string{"/bin/true"}}); err != nil || res.ExitCode != 0 {
		t.Fatalf("first Exec: %v %+v", err, res)
	}
	done := make(chan error, 1)
	var res Result
	go func() {
		var err error
		res, err = s.Exec(context.Background(), Command{Argv: []string{"/bin/sleep", "0.5"}})
		done <- err
	}()
	time.Sleep(150 * time.Millisecond)
	// The cancel the first Exec's context would have sent, arriving late:
	// it names the first execute (the session numbers them from 1).
	if err := s.peer.Notify(ipc.TypeCancel, map[string]int{"seq": 1}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil || res.ExitCode != 0 || res.Signal != 0 {
		t.Fatalf("the next command was hit by a late cancel: err %v exit %d signal %d", err, res.ExitCode, res.Signal)
	}
}

// TestToolCallCancelStopsOnlyItself: cancelling a CallTool stops that call
// (its command is killed), and the session and other calls go on.
func TestToolCallCancelStopsOnlyItself(t *testing.T) {
	s := startFakeWorkerSession(t)
	other := make(chan string, 1)
	go func() {
		out, err := s.CallTool(context.Background(), "wait", json.RawMessage(`{"seconds":"1"}`), 0)
		if err != nil {
			other <- err.Error()
			return
		}
		other <- string(out)
	}()
	time.Sleep(100 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := s.CallTool(ctx, "wait", json.RawMessage(`{"seconds":"5"}`), 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled CallTool: %v", err)
	}
	if out := <-other; !strings.Contains(out, `"success":true`) {
		t.Fatalf("the other tool call: %s", out)
	}
	if res, err := s.Exec(context.Background(), Command{Argv: []string{"/bin/true"}}); err != nil || res.ExitCode != 0 {
		t.Fatalf("Exec after: %v %+v", err, res)
	}
}

// TestToolsChangedInOrderOneAtATime: toolsChanged events reach a subscriber
// one at a time, in the order the worker sent them, and a slow subscriber
// does not hold up the session.
func TestToolsChangedInOrderOneAtATime(t *testing.T) {
	s := startFakeWorkerSession(t)
	const n = 30
	var (
		mu      sync.Mutex
		got     []int
		running atomic.Int32
		overlap atomic.Bool
		all     = make(chan struct{})
	)
	// The subscriber holds every event until all registrations have
	// returned: if a registration waited for it, they never would.
	release := make(chan struct{})
	s.OnToolsChanged(func(ev ToolsChanged) {
		if running.Add(1) > 1 {
			overlap.Store(true)
		}
		defer running.Add(-1)
		<-release // a slow subscriber
		var defs []json.RawMessage
		json.Unmarshal(ev.Tools, &defs)
		mu.Lock()
		got = append(got, len(defs))
		if len(got) == n {
			close(all)
		}
		mu.Unlock()
	})
	registered := make(chan error, 1)
	go func() {
		for i := 1; i <= n; i++ {
			if err := s.RegisterTool(context.Background(), json.RawMessage(fmt.Sprintf(`{"name":"t%d"}`, i))); err != nil {
				registered <- err
				return
			}
		}
		registered <- nil
	}()
	select {
	case err := <-registered:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second): // a deadlock guard, not a timing check
		close(release)
		t.Fatal("registrations waited for the subscriber, which was holding its first event")
	}
	close(release)
	select {
	case <-all:
	case <-time.After(20 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("events delivered: %v", got)
	}
	if overlap.Load() {
		t.Error("the subscriber was called for two events at once")
	}
	for i, c := range got {
		if c != i+1 {
			t.Fatalf("events out of order: %v", got)
		}
	}
}

// TestExecRejectsNegativeTimeout: a negative Timeout is an error, not "no
// timeout".
func TestExecRejectsNegativeTimeout(t *testing.T) {
	s := startFakeWorkerSession(t)
	_, err := s.Exec(context.Background(), Command{Argv: []string{"/bin/true"}, Timeout: -time.Second})
	if err == nil || errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), "negative timeout") {
		t.Fatalf("negative timeout: %v", err)
	}
	if res, err := s.Exec(context.Background(), Command{Argv: []string{"/bin/true"}}); err != nil || res.ExitCode != 0 {
		t.Fatalf("Exec after: %v %+v", err, res)
	}
}

func TestToolSucceeded(t *testing.T) {
	for in, want := range map[string]bool{
		`{"success":true,"output":"x"}`:   true,
		`{"success":false,"error":"no"}`:  false,
		`{"output":"x"}`:                  false,
		`not json`:                        false,
		`{"success":"true"}`:              false,
		`{"Success":true,"success":null}`: true,
	} {
		if got := toolSucceeded(json.RawMessage(in)); got != want {
			t.Errorf("toolSucceeded(%s) = %v, want %v", in, got, want)
		}
	}
}
