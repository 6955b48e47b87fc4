package mcpintegration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rawServer is `nsbox mcp` driven by hand: JSON-RPC lines no client library
// would send.
type rawServer struct {
	t      *testing.T
	stdin  io.WriteCloser
	lines  chan string
	stderr *syncBuffer
	exited chan error
}

func startRaw(t *testing.T, h *home) *rawServer {
	t.Helper()
	cmd := h.mcpCmd(t)
	r := &rawServer{t: t, stderr: &syncBuffer{}, lines: make(chan string, 64), exited: make(chan error, 1)}
	cmd.Stderr = r.stderr
	var err error
	if r.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			r.lines <- sc.Text()
		}
		close(r.lines)
	}()
	go func() { r.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		r.stdin.Close()
		select {
		case <-r.exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Error("nsbox mcp did not exit after EOF")
		}
		if t.Failed() {
			t.Logf("nsbox mcp stderr:\n%s", r.stderr)
		}
	})
	return r
}

func (r *rawServer) send(line string) {
	r.t.Helper()
	if _, err := io.WriteString(r.stdin, line+"\n"); err != nil {
		r.t.Fatalf("writing to nsbox mcp: %v\nstderr: %s", err, r.stderr)
	}
}

// recv returns the next message that is not a notification.
func (r *rawServer) recv() map[string]any {
	r.t.Helper()
	for {
		select {
		case line, ok := <-r.lines:
			if !ok {
				r.t.Fatalf("nsbox mcp closed stdout\nstderr: %s", r.stderr)
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				r.t.Fatalf("nsbox mcp wrote a line that is not JSON: %q", line)
			}
			if _, isNote := m["method"]; isNote && m["id"] == nil {
				continue
			}
			return m
		case <-time.After(time.Minute):
			r.t.Fatalf("no answer from nsbox mcp\nstderr: %s", r.stderr)
		}
	}
}

func rpcError(m map[string]any) (float64, string) {
	e, _ := m["error"].(map[string]any)
	code, _ := e["code"].(float64)
	msg, _ := e["message"].(string)
	return code, msg
}

// TestBadInput sends what a broken or hostile client might: the server
// answers each with the JSON-RPC error the specification prescribes (with
// the request's id when it has one) and keeps serving.
func TestBadInput(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		h := newHome(t, u)
		r := startRaw(t, h)
		r.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
		if m := r.recv(); m["result"] == nil {
			t.Fatalf("initialize: %v", m)
		}
		r.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

		big := strings.Repeat("x", 50<<20)
		tooLarge := strings.Repeat("y", 10<<20)
		cases := []struct {
			name string
			line string
			code float64
			id   any
			msg  string
		}{
			{"truncated JSON", `{"jsonrpc":"2.0","id":2,"method":"tools/list"`, -32700, nil, "parse error"},
			{"not JSON", `hello`, -32700, nil, "parse error"},
			{"wrong version", `{"jsonrpc":"1.0","id":3,"method":"tools/list"}`, -32600, float64(3), "jsonrpc"},
			{"bad id", `{"jsonrpc":"2.0","id":[1],"method":"tools/list"}`, -32600, nil, "id"},
			{"method not a string", `{"jsonrpc":"2.0","id":"m","method":7}`, -32600, "m", "method"},
			{"batch", `[{"jsonrpc":"2.0","id":4,"method":"tools/list"}]`, -32600, nil, "batch"},
			{"unknown method", `{"jsonrpc":"2.0","id":5,"method":"tools/destroy"}`, -32601, float64(5), ""},
			{"unknown tool", `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"rm_rf","arguments":{}}}`, -32602, float64(6), "unknown tool"},
			{"params not an object", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":[1,2]}`, -32602, float64(7), ""},
			{"arguments not an object", `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"read_file","arguments":[1]}}`, -32602, float64(8), "object"},
			// 2025-06-18: invalid arguments are a protocol error.
			{"arguments failing the schema", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"read_file","arguments":{"path":42}}}`, -32602, float64(9), "path"},
			{"missing required argument", `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"a"}}}`, -32602, float64(10), "content"},
			{"10 MiB argument", `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"big","content":"` + tooLarge + `"}}}`, -32602, float64(11), "too large"},
			// More than one message may be: read to its end, not kept,
			// answered with its id.
			{"50 MiB argument", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"write_file","arguments":{"path":"big","content":"` + big + `"}},"id":12}`, -32600, float64(12), "too large"},
		}
		for _, c := range cases {
			start := time.Now()
			r.send(c.line)
			m := r.recv()
			code, msg := rpcError(m)
			if code != c.code || !strings.Contains(strings.ToLower(msg), c.msg) {
				t.Errorf("%s: got %v, want code %v with %q", c.name, m, c.code, c.msg)
			}
			if id, ok := m["id"]; !ok || id != c.id {
				t.Errorf("%s: response id %v (present %v), want %v", c.name, id, ok, c.id)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("%s: answered after %s", c.name, d)
			}
		}
		if _, err := os.Stat(filepath.Join(h.ws, "big")); err == nil {
			t.Error("an oversized call was executed")
		}
		// Still serving, and the sandbox works.
		r.send(`{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"after.txt","content":"ok"}}}`)
		m := r.recv()
		if res, _ := m["result"].(map[string]any); res == nil || res["isError"] == true {
			t.Fatalf("a valid call after bad input: %v", m)
		}
		if b, err := os.ReadFile(filepath.Join(h.ws, "after.txt")); err != nil || string(b) != "ok" {
			t.Fatalf("after.txt: %q %v", b, err)
		}
	})
}

// TestBadArguments checks, with the SDK client, how arguments that fail the
// schema are answered in each protocol version: a JSON-RPC error before
// 2025-11-25, a tool execution error (isError, the model can correct it)
// from 2025-11-25 on.
func TestBadArguments(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		for _, c := range []struct {
			protocol string
			rpcError bool
		}{{"2025-06-18", true}, {"2025-11-25", false}, {"", false}} {
			t.Run("protocol="+c.protocol, func(t *testing.T) {
				s := startServer(t, newHome(t, u), serverOpts{protocol: c.protocol})
				res, err := s.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": 42}})
				if c.rpcError {
					if err == nil || !strings.Contains(err.Error(), "path") {
						t.Fatalf("got %v, %v; want a JSON-RPC error naming the argument", res, err)
					}
				} else if err != nil || !res.IsError || !strings.Contains(text(res), "path") || structured(t, res).Reason != "invalid_arguments" {
					t.Fatalf("got %v, %v; want isError naming the argument", res, err)
				}
				_, err = s.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "no_such_tool"})
				if err == nil || !strings.Contains(err.Error(), "unknown tool") {
					t.Fatalf("unknown tool: %v", err)
				}
				r := s.ok("run_command", map[string]any{"command": "echo fine"})
				if !strings.Contains(string(r.Output), "fine") {
					t.Fatal(fmt.Sprint(r.Output))
				}
				s.stop(t)
			})
		}
	})
}
