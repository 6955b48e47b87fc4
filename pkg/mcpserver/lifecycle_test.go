package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nsbox/nsbox/pkg/tools"
)

const initLine = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// lockedBuffer is a server's stdout.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// answers returns the responses written, by id.
func (l *lockedBuffer) answers(t *testing.T) map[string]map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]map[string]any{}
	sc := bufio.NewScanner(bytes.NewReader(l.b.Bytes()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("server wrote %q: %v", sc.Text(), err)
		}
		if id, ok := m["id"]; ok && m["method"] == nil {
			b, _ := json.Marshal(id)
			out[string(b)] = m
		}
	}
	return out
}

func fakeServer(t *testing.T, sessions chan<- *fakeSession) *Server {
	t.Helper()
	defs, _ := json.Marshal(baseDefs)
	srv, err := New(Config{Definitions: defs, Start: func(ctx context.Context) (Session, error) {
		f := newFake()
		if sessions != nil {
			sessions <- f
		}
		return f, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// serveScript writes lines and ends the input at once, as a piped client
// does, and returns what the server answered.
func serveScript(t *testing.T, lines ...string) map[string]map[string]any {
	t.Helper()
	var out lockedBuffer
	srv := fakeServer(t, nil)
	done := make(chan error, 1)
	go func() {
		done <- srv.Serve(context.Background(), strings.NewReader(strings.Join(lines, "\n")+"\n"), &out)
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Serve did not return after the end of its input") // a deadlock guard
	}
	return out.answers(t)
}

// TestEOFAnswersEveryRequest: a client that writes its requests and closes
// its end at once gets every answer. Repeated: the loss was a race between
// the end of the input and the handlers.
func TestEOFAnswersEveryRequest(t *testing.T) {
	for i := 0; i < 20; i++ {
		got := serveScript(t, initLine)
		if got["1"]["result"] == nil {
			t.Fatalf("run %d: initialize alone, then EOF: no answer (got %v)", i, got)
		}
		got = serveScript(t, initLine,
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a"}}}`,
			`{"jsonrpc":"2.0","id":"three","method":"tools/list"}`,
			`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"text":"b"}}}`,
		)
		for _, id := range []string{"1", "2", `"three"`, "4"} {
			if got[id] == nil {
				t.Fatalf("run %d: request %s was never answered (answers: %v)", i, id, got)
			}
			if got[id]["error"] != nil {
				t.Fatalf("run %d: request %s: %v", i, id, got[id]["error"])
			}
		}
		if res, _ := got["4"]["result"].(map[string]any); res["isError"] == true {
			t.Fatalf("run %d: call 4 failed: %v", i, res)
		}
	}
}

// TestCancelledRequestGetsNoAnswer: the specification says a cancelled
// request is not answered; the requests around it are.
func TestCancelledRequestGetsNoAnswer(t *testing.T) {
	sessions := make(chan *fakeSession, 4)
	srv := fakeServer(t, sessions)
	in, w := io.Pipe()
	var out lockedBuffer
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background(), in, &out) }()
	send := func(s string) {
		if _, err := io.WriteString(w, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	send(initLine)
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sleep","arguments":{}}}`)
	f := <-sessions
	// The call runs (the fake counts it) before it is cancelled.
	for f.calls.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"user"}}`)
	<-f.canceled // the tool saw its cancellation
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"after"}}}`)
	w.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := out.answers(t)
	if got["2"] != nil {
		t.Fatalf("the cancelled request was answered: %v", got["2"])
	}
	if got["3"] == nil || got["3"]["error"] != nil {
		t.Fatalf("the request after the cancellation: %v", got["3"])
	}
}

// TestCallBeforeInitialize: a proper JSON-RPC error code, not 0.
func TestCallBeforeInitialize(t *testing.T) {
	got := serveScript(t, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	m := got["7"]
	if m == nil {
		t.Fatal("no answer")
	}
	if c := errCode(m); c != -32600 {
		t.Fatalf("code %v, want -32600 (invalid request): %v", c, m)
	}
	if msg := m["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "initialize") {
		t.Fatalf("message %q does not say to initialize", msg)
	}
}

// TestShutdownAnswersInFlight: cancelling Serve's context (SIGTERM in
// nsbox mcp) cancels the call in flight, answers it with an error, closes
// the session and returns, though the client's input is still open.
func TestShutdownAnswersInFlight(t *testing.T) {
	sessions := make(chan *fakeSession, 4)
	srv := fakeServer(t, sessions)
	in, w := io.Pipe()
	defer w.Close()
	var out lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, in, &out) }()
	for _, s := range []string{initLine, `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sleep","arguments":{}}}`} {
		io.WriteString(w, s+"\n")
	}
	f := <-sessions
	for f.calls.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Serve did not return after its context was cancelled") // deadlock guard
	}
	got := out.answers(t)
	res, _ := got["2"]["result"].(map[string]any)
	if res == nil || res["isError"] != true {
		t.Fatalf("the call in flight was not answered with an error: %v", got["2"])
	}
	if sc, _ := res["structuredContent"].(map[string]any); sc["reason"] != ReasonServerClosing {
		t.Fatalf("reason %v, want %s", sc["reason"], ReasonServerClosing)
	}
	if f.closed.Load() == 0 {
		t.Fatal("the session was not closed")
	}
}

// TestToolSubset: Config.Tools serves only the chosen tools, before and
// during the session; an unknown name is an error.
func TestToolSubset(t *testing.T) {
	h := startHarness(t, func(c *Config) { c.Tools = []string{"echo", "read_file"} }, "")
	want := []string{"echo", "read_file"}
	check := func(when string) {
		got := h.names()
		if len(got) != len(want) || !contains(got, "echo") || !contains(got, "read_file") {
			t.Fatalf("%s: tools %v, want %v", when, got, want)
		}
	}
	check("before the session")
	h.call("echo", map[string]any{"text": "x"})
	check("during the session")
	if _, err := h.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "violate", Arguments: map[string]any{}}); err == nil {
		t.Fatal("a tool left out was callable")
	}
	if _, err := New(Config{Start: func(context.Context) (Session, error) { return nil, nil }, Definitions: mustJSON(baseDefs), Tools: []string{"nope"}}); !errors.Is(err, ErrUnknownTool) {
		t.Fatalf("unknown tool name: %v", err)
	}
}

// TestAnnotationsFromHostOnly: a tool the session lists cannot make itself
// read-only; the built-in ones keep the host's title and annotations.
func TestAnnotationsFromHostOnly(t *testing.T) {
	h := startHarness(t, func(c *Config) { c.AllowRegistration = true }, "")
	h.call("echo", map[string]any{})
	f := h.last()
	f.mu.Lock()
	f.defs = append(f.defs, Definition{Name: "sneaky", Description: "x", Parameters: json.RawMessage(`{"type":"object"}`), Title: "Harmless", Annotations: &tools.ReadOnly})
	f.mu.Unlock()
	res, err := h.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := false
	for _, tool := range res.Tools {
		switch tool.Name {
		case "sneaky":
			seen = true
			if tool.Annotations != nil && tool.Annotations.ReadOnlyHint || tool.Title != "" {
				t.Fatalf("a session tool's own annotations were served: %+v", tool)
			}
		case "read_file":
			if tool.Title != "Read file" || tool.Annotations == nil || !tool.Annotations.ReadOnlyHint {
				t.Fatalf("read_file: %+v", tool)
			}
		}
	}
	if !seen {
		t.Fatal("the session's tool is not listed")
	}
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// TestClientGoneNotWaitedFor: when the reader of the output has gone too
// (the client died rather than closed its input), the calls in flight are
// cancelled instead of waited for.
func TestClientGoneNotWaitedFor(t *testing.T) {
	sessions := make(chan *fakeSession, 4)
	srv := fakeServer(t, sessions)
	in, w := io.Pipe()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background(), in, pw) }()
	io.WriteString(w, initLine+"\n"+`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sleep","arguments":{}}}`+"\n")
	f := <-sessions
	for f.calls.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	pr.Close() // the client is gone
	w.Close()
	<-done
	select {
	case <-f.canceled:
	default:
		t.Fatal("the call in flight ran on after its client was gone")
	}
}

// TestEOFDoesNotWaitForListen: the SDK's client (newest protocol) keeps a
// subscriptions/listen request open for the connection's life; the end of
// the input answers the rest and does not wait for it.
func TestEOFDoesNotWaitForListen(t *testing.T) {
	h := startHarness(t, nil, "")
	h.call("echo", map[string]any{"text": "x"})
	h.stdin.Close() // EOF while the client still reads
	select {
	case err := <-h.served:
		h.served <- err // for the cleanup
	case <-time.After(time.Minute):
		t.Fatal("Serve waits at EOF for a request that is never answered") // deadlock guard
	}
}
