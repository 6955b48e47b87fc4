package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nsbox/nsbox/pkg/ipc"
	"github.com/nsbox/nsbox/pkg/sandbox"
	"github.com/nsbox/nsbox/pkg/tools"
)

// fakeSession stands in for a sandbox session: a few tools, run-time
// registration with a toolsChanged event sent late (as the real channel may
// deliver it after the registration's reply), and a worker that can die.
type fakeSession struct {
	mu      sync.Mutex
	defs    []Definition
	subs    map[int]func(sandbox.ToolsChanged)
	nextSub int
	closed  atomic.Int32
	dead    atomic.Bool
	// eventDelay delays toolsChanged after a registration.
	eventDelay time.Duration
	canceled   chan struct{} // closed when a "sleep" call saw its ctx end
	calls      atomic.Int32
}

var baseDefs = []Definition{
	{Name: "echo", Description: "echo the arguments", Parameters: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)},
	{Name: "read_file", Description: "read a file", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`), Title: "Read file", Annotations: &tools.ReadOnly},
	{Name: "sleep", Description: "sleep until canceled", Parameters: nil},
	{Name: "violate", Description: "always refused", Parameters: json.RawMessage(`{"properties":{}}`)},
	{Name: "die", Description: "kills the worker", Parameters: json.RawMessage(`{"type":"object"}`)},
	{Name: "slow", Description: "times out", Parameters: json.RawMessage(`{"type":"object"}`)},
}

func newFake() *fakeSession {
	return &fakeSession{defs: append([]Definition(nil), baseDefs...), subs: map[int]func(sandbox.ToolsChanged){}, canceled: make(chan struct{})}
}

func (f *fakeSession) CallTool(ctx context.Context, name string, args json.RawMessage, timeout time.Duration) (json.RawMessage, error) {
	f.calls.Add(1)
	if f.dead.Load() {
		return nil, sandbox.ErrClosed
	}
	switch name {
	case "echo":
		var a struct{ Text string }
		json.Unmarshal(args, &a)
		return json.Marshal(map[string]any{"success": true, "output": a.Text, "error": nil})
	case "read_file":
		var a struct{ Path string }
		json.Unmarshal(args, &a)
		if strings.Contains(a.Path, "..") {
			return json.RawMessage(`{"success":false,"output":"","error":"path ../../etc/passwd is outside the workspace"}`), nil
		}
		return json.RawMessage(`{"success":true,"output":{"lines":2},"error":null}`), nil
	case "sleep":
		select {
		case <-ctx.Done():
			close(f.canceled)
			return nil, ctx.Err()
		case <-time.After(20 * time.Second):
			return json.RawMessage(`{"success":true,"output":"slept","error":null}`), nil
		}
	case "violate":
		return nil, &sandbox.ViolationError{Operation: "filesystem write", Path: "/etc/passwd"}
	case "die":
		f.dead.Store(true)
		return nil, sandbox.ErrClosed
	case "slow":
		return json.RawMessage(`{"success":false,"output":{"exit_code":137,"timed_out":true},"error":"command timed out after 1s and was killed"}`), nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, d := range f.defs {
		if d.Name == name {
			return json.Marshal(map[string]any{"success": true, "output": "ran " + name, "error": nil})
		}
	}
	return json.RawMessage(fmt.Sprintf(`{"success":false,"output":"","error":"unknown tool %q"}`, name)), nil
}

func (f *fakeSession) ToolDefinitions(ctx context.Context) (json.RawMessage, error) {
	if f.dead.Load() {
		return nil, sandbox.ErrClosed
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return json.Marshal(f.defs)
}

func (f *fakeSession) OnToolsChanged(fn func(sandbox.ToolsChanged)) func() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextSub++
	id := f.nextSub
	f.subs[id] = fn
	return func() {
		f.mu.Lock()
		delete(f.subs, id)
		f.mu.Unlock()
	}
}

func (f *fakeSession) changed() {
	f.mu.Lock()
	defs, _ := json.Marshal(f.defs)
	subs := []func(sandbox.ToolsChanged){}
	for _, fn := range f.subs {
		subs = append(subs, fn)
	}
	f.mu.Unlock()
	for _, fn := range subs {
		fn(sandbox.ToolsChanged{Tools: defs, Reason: "registered"})
	}
}

func (f *fakeSession) RegisterTool(ctx context.Context, def json.RawMessage) error {
	var d Definition
	if err := json.Unmarshal(def, &d); err != nil || d.Name == "" {
		return &ipc.RemoteError{Code: ipc.CodeBadRequest, Message: "definition: a name is required"}
	}
	f.mu.Lock()
	for _, e := range f.defs {
		if e.Name == d.Name {
			f.mu.Unlock()
			return &ipc.RemoteError{Code: ipc.CodeBadRequest, Message: fmt.Sprintf("tool %q is built in and cannot be replaced", d.Name)}
		}
	}
	f.defs = append(f.defs, d)
	f.mu.Unlock()
	go func() {
		time.Sleep(f.eventDelay)
		f.changed()
	}()
	return nil
}

func (f *fakeSession) UnregisterTool(ctx context.Context, name string) error {
	f.mu.Lock()
	for i, d := range f.defs {
		if d.Name == name {
			f.defs = append(f.defs[:i], f.defs[i+1:]...)
			f.mu.Unlock()
			go f.changed()
			return nil
		}
	}
	f.mu.Unlock()
	return &ipc.RemoteError{Code: ipc.CodeBadRequest, Message: fmt.Sprintf("no tool named %q", name)}
}

func (f *fakeSession) Close() error {
	f.closed.Add(1)
	return nil
}

// harness runs a Server over pipes with an SDK client connected to it.
type harness struct {
	t        *testing.T
	srv      *Server
	cs       *mcp.ClientSession
	starts   atomic.Int32
	sessions []*fakeSession
	mu       sync.Mutex
	served   chan error
	changed  chan struct{}
	progress chan *mcp.ProgressNotificationParams
	stdin    io.WriteCloser

	closeOnce sync.Once
	closeErr  error
}

func (h *harness) last() *fakeSession {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.sessions) == 0 {
		return nil
	}
	return h.sessions[len(h.sessions)-1]
}

func startHarness(t *testing.T, mod func(*Config), protocol string) *harness {
	t.Helper()
	h := &harness{t: t, served: make(chan error, 1), changed: make(chan struct{}, 16), progress: make(chan *mcp.ProgressNotificationParams, 64)}
	defs, _ := json.Marshal(baseDefs)
	cfg := Config{
		Definitions: defs,
		Start: func(ctx context.Context) (Session, error) {
			h.starts.Add(1)
			f := newFake()
			h.mu.Lock()
			h.sessions = append(h.sessions, f)
			h.mu.Unlock()
			return f, nil
		},
		ProgressInterval: 50 * time.Millisecond,
	}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.srv = srv
	cr, sw := io.Pipe() // server → client
	sr, cw := io.Pipe() // client → server
	h.stdin = cw
	go func() {
		h.served <- srv.Serve(context.Background(), sr, sw)
		sw.Close()
	}()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { h.changed <- struct{}{} },
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			h.progress <- r.Params
		},
	})
	cs, err := client.Connect(context.Background(), &mcp.IOTransport{Reader: cr, Writer: cw}, &mcp.ClientSessionOptions{ProtocolVersion: protocol})
	if err != nil {
		t.Fatal(err)
	}
	h.cs = cs
	t.Cleanup(func() { h.close() })
	return h
}

func (h *harness) close() error {
	h.closeOnce.Do(func() {
		h.cs.Close()
		h.stdin.Close()
		select {
		case h.closeErr = <-h.served:
		case <-time.After(10 * time.Second):
			h.t.Error("Serve did not return after the client went away")
		}
	})
	return h.closeErr
}

func (h *harness) call(name string, args any) *mcp.CallToolResult {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := h.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		h.t.Fatalf("call %s: %v", name, err)
	}
	return res
}

func (h *harness) names() []string {
	h.t.Helper()
	res, err := h.cs.ListTools(context.Background(), nil)
	if err != nil {
		h.t.Fatal(err)
	}
	var n []string
	for _, t := range res.Tools {
		n = append(n, t.Name)
	}
	return n
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

var protocols = []string{"", "2025-06-18"} // the SDK's newest, and the legacy handshake

func forProtocols(t *testing.T, fn func(t *testing.T, protocol string)) {
	for _, p := range protocols {
		name := p
		if name == "" {
			name = "latest"
		}
		t.Run(name, func(t *testing.T) { fn(t, p) })
	}
}

func TestLazyStart(t *testing.T) {
	forProtocols(t, func(t *testing.T, p string) {
		h := startHarness(t, nil, p)
		names := h.names()
		for _, d := range baseDefs {
			if !contains(names, d.Name) {
				t.Errorf("tools/list lacks %s: %v", d.Name, names)
			}
		}
		if n := h.starts.Load(); n != 0 {
			t.Fatalf("listing started %d sessions; the session starts with the first call", n)
		}
		// Concurrent first calls share one start.
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() { defer wg.Done(); h.call("echo", map[string]any{"text": "hi"}) }()
		}
		wg.Wait()
		if n := h.starts.Load(); n != 1 {
			t.Fatalf("%d sessions started, want 1", n)
		}
		if err := h.close(); err != nil {
			t.Fatalf("Serve: %v", err)
		}
		if n := h.last().closed.Load(); n != 1 {
			t.Fatalf("session closed %d times at the end of the connection, want 1", n)
		}
	})
}

func TestEagerStart(t *testing.T) {
	h := startHarness(t, func(c *Config) { c.Eager = true }, "")
	deadline := time.Now().Add(5 * time.Second)
	for h.starts.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if h.starts.Load() != 1 {
		t.Fatal("eager server did not start its session")
	}
	h.close()
	if h.last().closed.Load() != 1 {
		t.Fatal("session not closed")
	}
}

func TestResults(t *testing.T) {
	h := startHarness(t, nil, "")
	res := h.call("echo", map[string]any{"text": "hello"})
	if res.IsError || text(res) != "hello" {
		t.Fatalf("echo: isError=%v text=%q", res.IsError, text(res))
	}
	sc, _ := json.Marshal(res.StructuredContent)
	if !strings.Contains(string(sc), `"success":true`) {
		t.Fatalf("structured content %s", sc)
	}
	res = h.call("read_file", map[string]any{"path": "a.txt"})
	if res.IsError || !strings.Contains(text(res), `"lines": 2`) {
		t.Fatalf("object output rendered as %q", text(res))
	}
	res = h.call("read_file", map[string]any{"path": "../../etc/passwd"})
	if !res.IsError || !strings.Contains(text(res), "outside the workspace") {
		t.Fatalf("escape: isError=%v text=%q", res.IsError, text(res))
	}
	res = h.call("slow", nil)
	sc, _ = json.Marshal(res.StructuredContent)
	if !res.IsError || !strings.Contains(string(sc), `"reason":"timeout"`) || !strings.HasPrefix(text(res), "command timed out") {
		t.Fatalf("timeout: %q %s", text(res), sc)
	}
	res = h.call("violate", nil)
	sc, _ = json.Marshal(res.StructuredContent)
	if !res.IsError || !strings.Contains(text(res), "sandbox violation: filesystem write /etc/passwd") || !strings.Contains(string(sc), `"reason":"violation"`) {
		t.Fatalf("violation: isError=%v text=%q sc=%s", res.IsError, text(res), sc)
	}
}

func TestSchemas(t *testing.T) {
	h := startHarness(t, nil, "")
	res, err := h.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		m, ok := tool.InputSchema.(map[string]any)
		if !ok || m["type"] != "object" {
			t.Errorf("%s: input schema %v", tool.Name, tool.InputSchema)
		}
		if tool.OutputSchema == nil {
			t.Errorf("%s: no output schema", tool.Name)
		}
		if tool.Name == "read_file" && (tool.Annotations == nil || !tool.Annotations.ReadOnlyHint) {
			t.Errorf("read_file is not marked read-only")
		}
	}
}

func TestProgressAndCancel(t *testing.T) {
	forProtocols(t, func(t *testing.T, p string) {
		h := startHarness(t, nil, p)
		h.call("echo", nil) // session up
		ctx, cancel := context.WithCancel(context.Background())
		params := &mcp.CallToolParams{Name: "sleep", Arguments: map[string]any{}}
		params.SetProgressToken("tok-1")
		errc := make(chan error, 1)
		go func() {
			_, err := h.cs.CallTool(ctx, params)
			errc <- err
		}()
		var got []*mcp.ProgressNotificationParams
		for len(got) < 2 {
			select {
			case pn := <-h.progress:
				got = append(got, pn)
			case <-time.After(5 * time.Second):
				t.Fatalf("no progress notifications (got %d)", len(got))
			}
		}
		if got[0].ProgressToken != "tok-1" || got[1].Progress <= got[0].Progress {
			t.Fatalf("progress %+v %+v", got[0], got[1])
		}
		start := time.Now()
		cancel()
		if err := <-errc; err == nil {
			t.Fatal("canceled call returned no error")
		}
		select {
		case <-h.last().canceled:
		case <-time.After(5 * time.Second):
			t.Fatal("cancellation did not reach the session")
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("cancel took %s", d)
		}
		// The session lives on.
		if res := h.call("echo", map[string]any{"text": "after"}); text(res) != "after" {
			t.Fatalf("after cancel: %q", text(res))
		}
		if h.starts.Load() != 1 {
			t.Fatal("cancel restarted the session")
		}
		// No progress after the call is over.
		for len(h.progress) > 0 {
			<-h.progress
		}
		time.Sleep(150 * time.Millisecond)
		if len(h.progress) > 0 {
			t.Fatal("progress sent after the call ended")
		}
	})
}

func TestToolsChanged(t *testing.T) {
	forProtocols(t, func(t *testing.T, p string) {
		h := startHarness(t, nil, p)
		h.call("echo", nil)
		f := h.last()
		// Registered "inside" the sandbox; the event comes late.
		f.eventDelay = 300 * time.Millisecond
		if err := f.RegisterTool(context.Background(), json.RawMessage(`{"name":"greet","description":"say hi","parameters":{"type":"object"}}`)); err != nil {
			t.Fatal(err)
		}
		// Callable right after the registration returned.
		if res := h.call("greet", nil); res.IsError || text(res) != "ran greet" {
			t.Fatalf("greet: %v %q", res.IsError, text(res))
		}
		select {
		case <-h.changed:
		case <-time.After(5 * time.Second):
			t.Fatal("no notifications/tools/list_changed")
		}
		if !contains(h.names(), "greet") {
			t.Fatal("greet not listed")
		}
		// Removal is seen on the next list, and notified.
		for len(h.changed) > 0 {
			<-h.changed
		}
		f.UnregisterTool(context.Background(), "greet")
		select {
		case <-h.changed:
		case <-time.After(5 * time.Second):
			t.Fatal("no list_changed after removal")
		}
		if contains(h.names(), "greet") {
			t.Fatal("greet still listed")
		}
	})
}

func TestRegisterTool(t *testing.T) {
	h := startHarness(t, func(c *Config) { c.AllowRegistration = true }, "")
	if !contains(h.names(), RegisterToolName) {
		t.Fatal("register_tool not listed")
	}
	res := h.call(RegisterToolName, map[string]any{"name": "hello", "description": "d", "parameters": map[string]any{"type": "object"}})
	if res.IsError {
		t.Fatalf("register: %q", text(res))
	}
	if res := h.call("hello", nil); res.IsError {
		t.Fatalf("hello: %q", text(res))
	}
	select {
	case <-h.changed:
	case <-time.After(5 * time.Second):
		t.Fatal("no list_changed")
	}
	res = h.call(RegisterToolName, map[string]any{"name": "echo", "description": "x"})
	if !res.IsError || !strings.Contains(text(res), "cannot be replaced") {
		t.Fatalf("replacing a built-in: %v %q", res.IsError, text(res))
	}
	if res := h.call(UnregisterToolName, map[string]any{"name": "hello"}); res.IsError {
		t.Fatalf("unregister: %q", text(res))
	}
	if contains(h.names(), "hello") {
		t.Fatal("hello still listed")
	}
}

func TestNoRegistrationByDefault(t *testing.T) {
	h := startHarness(t, nil, "")
	if contains(h.names(), RegisterToolName) {
		t.Fatal("register_tool listed without AllowRegistration")
	}
}

func TestSessionDiesAndRestarts(t *testing.T) {
	h := startHarness(t, nil, "")
	h.call("echo", nil)
	res := h.call("die", nil)
	if !res.IsError || !strings.Contains(text(res), "session ended") {
		t.Fatalf("die: %q", text(res))
	}
	if h.sessions[0].closed.Load() != 1 {
		t.Fatal("dead session not cleaned up")
	}
	if res := h.call("echo", map[string]any{"text": "x"}); res.IsError {
		t.Fatalf("after restart: %q", text(res))
	}
	if h.starts.Load() != 2 {
		t.Fatalf("starts = %d, want 2", h.starts.Load())
	}
}

func TestStartFailure(t *testing.T) {
	var fail atomic.Bool
	fail.Store(true)
	h := startHarness(t, nil, "")
	orig := h.srv.cfg.Start
	h.srv.cfg.Start = func(ctx context.Context) (Session, error) {
		if fail.Load() {
			return nil, fmt.Errorf("%w: cannot create a user namespace", sandbox.ErrUnavailable)
		}
		return orig(ctx)
	}
	res := h.call("echo", nil)
	sc, _ := json.Marshal(res.StructuredContent)
	if !res.IsError || !strings.Contains(text(res), "could not start") || !strings.Contains(string(sc), `"reason":"unavailable"`) {
		t.Fatalf("start failure: %q %s", text(res), sc)
	}
	fail.Store(false)
	if res := h.call("echo", map[string]any{"text": "ok"}); res.IsError {
		t.Fatalf("retry: %q", text(res))
	}
}

func TestBadCalls(t *testing.T) {
	h := startHarness(t, func(c *Config) { c.MaxArgs = 1 << 10 }, "")
	ctx := context.Background()
	_, err := h.cs.CallTool(ctx, &mcp.CallToolParams{Name: "nope"})
	if err == nil || !strings.Contains(err.Error(), "unknown tool") {
		t.Fatalf("unknown tool: %v", err)
	}
	_, err = h.cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": strings.Repeat("x", 2<<10)}})
	if err == nil || !strings.Contains(err.Error(), "too large") {
		t.Fatalf("large arguments: %v", err)
	}
	_, err = h.cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: []int{1}})
	if err == nil {
		t.Fatal("array arguments accepted")
	}
	if res := h.call("echo", map[string]any{"text": "still here"}); text(res) != "still here" {
		t.Fatal("server stopped serving")
	}
}

// rawServer runs a Server on pipes driven by hand, line by line.
type rawServer struct {
	t   *testing.T
	in  io.WriteCloser
	out *bufio.Reader
	err chan error
}

func startRaw(t *testing.T, maxMessage int) *rawServer {
	defs, _ := json.Marshal(baseDefs)
	srv, err := New(Config{Definitions: defs, MaxMessage: maxMessage, Start: func(ctx context.Context) (Session, error) { return newFake(), nil }})
	if err != nil {
		t.Fatal(err)
	}
	sr, cw := io.Pipe()
	cr, sw := io.Pipe()
	r := &rawServer{t: t, in: cw, out: bufio.NewReaderSize(cr, 1<<20), err: make(chan error, 1)}
	go func() { r.err <- srv.Serve(context.Background(), sr, sw); sw.Close() }()
	t.Cleanup(func() { cw.Close(); <-r.err })
	return r
}

func (r *rawServer) send(line string) {
	r.t.Helper()
	if _, err := io.WriteString(r.in, line+"\n"); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rawServer) recv() map[string]any {
	r.t.Helper()
	type res struct {
		line string
		err  error
	}
	c := make(chan res, 1)
	go func() { l, err := r.out.ReadString('\n'); c <- res{l, err} }()
	select {
	case x := <-c:
		if x.err != nil {
			r.t.Fatalf("read: %v", x.err)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(x.line), &m); err != nil {
			r.t.Fatalf("server sent %q: %v", x.line, err)
		}
		return m
	case <-time.After(10 * time.Second):
		r.t.Fatal("no answer")
	}
	return nil
}

func errCode(m map[string]any) float64 {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return c
}

func TestMalformedInput(t *testing.T) {
	r := startRaw(t, 64<<10)
	r.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if m := r.recv(); m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	r.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	cases := []struct {
		line string
		code float64
		id   any
	}{
		{`{"jsonrpc":"2.0","id":2,"method":`, -32700, nil},
		{`not json at all`, -32700, nil},
		{`[{"jsonrpc":"2.0","id":3,"method":"ping"}]`, -32600, nil},
		{`{"jsonrpc":"1.0","id":4,"method":"ping"}`, -32600, float64(4)},
		{`{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`, -32600, nil},
		{`{"jsonrpc":"2.0","id":"s5","method":42}`, -32600, "s5"},
		{`42`, -32600, nil},
		{`{"jsonrpc":"2.0","id":6,"method":"no/such/method"}`, -32601, float64(6)},
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"nope","arguments":{}}}`, -32602, float64(7)},
		{`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":"x"}`, -32602, float64(8)},
		{`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":"str"}}`, -32602, float64(9)},
		// Larger than the 64 KiB limit: answered with its id, not kept.
		{`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo","arguments":{"text":"` + strings.Repeat("a", 200<<10) + `","k":{"id":99}}},"id":10}`, -32600, float64(10)},
		{`{"jsonrpc":"2.0","id":"big","params":{"arguments":{"text":"` + strings.Repeat(`\"`, 100<<10) + `"}}}`, -32600, "big"},
	}
	for _, c := range cases {
		r.send(c.line)
		m := r.recv()
		short := c.line
		if len(short) > 80 {
			short = short[:80]
		}
		if errCode(m) != c.code {
			t.Errorf("%s: got %v, want code %v", short, m, c.code)
		}
		if m["id"] != c.id {
			t.Errorf("%s: id %v, want %v", short, m["id"], c.id)
		}
		if _, ok := m["id"]; !ok {
			t.Errorf("%s: the response has no id member", short)
		}
	}
	r.send(`{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"echo","arguments":{"text":"alive"}}}`)
	m := r.recv()
	b, _ := json.Marshal(m)
	if !strings.Contains(string(b), "alive") {
		t.Fatalf("after bad input: %s", b)
	}
}

func TestIDScanner(t *testing.T) {
	for in, want := range map[string]string{
		`{"id":5,"x":1}`:                                 `5`,
		`{"a":{"id":1},"id":"q"}`:                        `"q"`,
		`{"a":"\"id\":3","id": 7 }`:                      `7`,
		`{"method":"x","params":[1,{"id":2}],"id":-1.5}`: `-1.5`,
		`{"ids":1,"identity":2,"id":null}`:               ``,
		`{"id":{"a":1}}`:                                 ``,
		`{"x":1}`:                                        ``,
	} {
		var s idScanner
		// Byte by byte: the scanner keeps its state across chunks.
		for i := 0; i < len(in); i++ {
			s.feed([]byte{in[i]})
		}
		if got := string(s.result()); got != want {
			t.Errorf("%s: id %q, want %q", in, got, want)
		}
	}
}

func TestInputSchema(t *testing.T) {
	for in, ok := range map[string]bool{``: true, `null`: true, `{"type":"object"}`: true, `{"properties":{}}`: true, `{"type":"string"}`: false, `[1]`: false} {
		_, err := inputSchema(json.RawMessage(in))
		if (err == nil) != ok {
			t.Errorf("%q: err=%v", in, err)
		}
	}
	if errors.Is(nil, ErrClosed) {
		t.Fatal()
	}
}

func TestSchemaValidationByProtocol(t *testing.T) {
	// 2025-11-25 and later: a tool execution error the model can correct;
	// before: a JSON-RPC invalid params error. No sandbox is started either
	// way.
	for _, c := range []struct {
		protocol string
		rpcError bool
	}{{"", false}, {"2025-11-25", false}, {"2025-06-18", true}, {"2025-03-26", true}} {
		t.Run(c.protocol, func(t *testing.T) {
			h := startHarness(t, nil, c.protocol)
			res, err := h.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": 5}})
			if c.rpcError {
				if err == nil || !strings.Contains(err.Error(), "invalid arguments for read_file") {
					t.Fatalf("got %v, %v; want a JSON-RPC error", res, err)
				}
			} else {
				if err != nil || !res.IsError || !strings.Contains(text(res), `invalid arguments for read_file: argument "path": expected string`) {
					t.Fatalf("got %v, %v; want isError", res, err)
				}
			}
			if h.starts.Load() != 0 {
				t.Fatal("an invalid call started the sandbox")
			}
		})
	}
}
