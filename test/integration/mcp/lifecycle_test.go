package mcpintegration

import (
	"bufio"
	"encoding/json"
	"fmt"

	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The lifecycle of a stdio connection, as scripts and clients drive it:
// requests written and stdin closed at once, a cancelled request, a call
// before initialize, and SIGTERM while a call runs.

const rawInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"script","version":"1"}}}`

// answersByID parses a server's stdout into its responses, by id.
func answersByID(t *testing.T, out []byte) map[string]map[string]any {
	t.Helper()
	got := map[string]map[string]any{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("nsbox mcp wrote %q: %v", sc.Text(), err)
		}
		if id, ok := m["id"]; ok && m["method"] == nil {
			b, _ := json.Marshal(id)
			got[string(b)] = m
		}
	}
	return got
}

// runScript runs nsbox mcp with the lines as its whole input (a pipe that
// ends right after them) and returns what it answered.
func runScript(t *testing.T, h *home, lines ...string) map[string]map[string]any {
	t.Helper()
	cmd := h.mcpCmd(t)
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("nsbox mcp: %v\nstderr: %s", err, stderr.String())
	}
	return answersByID(t, out)
}

// TestPipedClientGetsEveryAnswer: a client that writes its requests and
// closes stdin at once gets an answer to each. Twenty times: the answers
// were lost to a race (about half of the runs for a lone initialize, every
// run for a tools/call).
func TestPipedClientGetsEveryAnswer(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		h := newHome(t, u)
		h.writeFile(t, "README.md", "hello\n")
		for i := 0; i < 20; i++ {
			got := runScript(t, h, rawInit)
			if got["1"]["result"] == nil {
				t.Fatalf("run %d: a piped initialize got no answer: %v", i, got)
			}
			got = runScript(t, h, rawInit,
				`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
				`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"echo piped"}}}`,
				`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`,
				`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"README.md"}}}`,
			)
			for _, id := range []string{"1", "2", "3", "4"} {
				if got[id] == nil || got[id]["result"] == nil {
					t.Fatalf("run %d: request %s: %v (all answers: %v)", i, id, got[id], got)
				}
			}
			if res := got["2"]["result"].(map[string]any); res["isError"] == true || !strings.Contains(fmt.Sprint(res["content"]), "piped") {
				t.Fatalf("run %d: run_command: %v", i, res)
			}
		}
	})
}

// rawProc is nsbox mcp spoken to line by line, with its process at hand.
type rawProc struct {
	*rawServer
	cmd *exec.Cmd
}

func startRawProc(t *testing.T, h *home, args ...string) *rawProc {
	t.Helper()
	cmd := h.mcpCmd(t, args...)
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
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Error("nsbox mcp did not exit")
		}
		if t.Failed() {
			t.Logf("nsbox mcp stderr:\n%s", r.stderr)
		}
	})
	return &rawProc{rawServer: r, cmd: cmd}
}

func (r *rawProc) initialize() {
	r.t.Helper()
	r.send(rawInit)
	if m := r.recv(); m["result"] == nil {
		r.t.Fatalf("initialize: %v", m)
	}
	r.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// rest closes stdin and returns every line the server still writes.
func (r *rawProc) rest() []map[string]any {
	r.t.Helper()
	r.stdin.Close()
	var out []map[string]any
	for {
		select {
		case line, ok := <-r.lines:
			if !ok {
				return out
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				r.t.Fatalf("nsbox mcp wrote %q", line)
			}
			out = append(out, m)
		case <-time.After(2 * time.Minute):
			r.t.Fatal("nsbox mcp did not close stdout") // deadlock guard
		}
	}
}

// waitSleeper waits for the sandboxed `sleep 1000` below pid and returns it.
func waitSleeper(t *testing.T, pid int) proc {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		for _, p := range descendants(pid) {
			if p.cmd == "sleep 1000" {
				return p
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the sleep 1000 call never started")
	return proc{}
}

// TestCancelledCallNotAnswered: a request the client cancelled gets no
// response (the TypeScript SDK reports one as "a response for an unknown
// message ID"); its command is stopped; the next request is answered.
func TestCancelledCallNotAnswered(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		r := startRawProc(t, newHome(t, u))
		r.initialize()
		r.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"sleep 1000","timeout":600}}}`)
		sleeper := waitSleeper(t, r.cmd.Process.Pid)
		r.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"the user pressed stop"}}`)
		r.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"echo after"}}}`)
		if m := r.recv(); fmt.Sprint(m["id"]) != "3" {
			t.Fatalf("the first answer after the cancellation is %v, want request 3's", m)
		}
		waitGone(t, []proc{sleeper}, nil, 2*time.Minute)
		for _, m := range r.rest() {
			if fmt.Sprint(m["id"]) == "2" {
				t.Fatalf("the cancelled request was answered: %v", m)
			}
		}
	})
}

// TestCallBeforeInitialize: a JSON-RPC error with a proper code, not 0.
func TestCallBeforeInitialize(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		got := runScript(t, newHome(t, u), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"true"}}}`)
		code, msg := rpcError(got["1"])
		if code != -32600 || !strings.Contains(msg, "initialize") {
			t.Fatalf("code %v %q, want -32600 naming initialize (answer: %v)", code, msg, got["1"])
		}
	})
}

// TestSIGTERMDuringCall: SIGTERM while `sleep 1000` runs: the call is
// answered with an error, nsbox exits, and no process of the sandbox is
// left. (The time it took is logged; docs/agents.md gives the figure.)
func TestSIGTERMDuringCall(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
			t.Run(sig.String(), func(t *testing.T) {
				r := startRawProc(t, newHome(t, u))
				r.initialize()
				r.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_command","arguments":{"command":"sleep 1000","timeout":600}}}`)
				pid := r.cmd.Process.Pid
				waitSleeper(t, pid)
				left := descendants(pid)
				start := time.Now()
				if err := r.cmd.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
				select {
				case err := <-r.exited:
					t.Logf("exited %v after %s (%v)", time.Since(start).Round(time.Millisecond), sig, err)
					r.exited <- err // for the cleanup
				case <-time.After(2 * time.Minute):
					t.Fatalf("nsbox mcp still runs 2 minutes after %s", sig) // deadlock guard
				}
				waitGone(t, left, nil, time.Minute)
				var answer map[string]any
				for {
					line, ok := <-r.lines
					if !ok {
						break
					}
					var m map[string]any
					json.Unmarshal([]byte(line), &m)
					if fmt.Sprint(m["id"]) == "2" {
						answer = m
					}
				}
				res, _ := answer["result"].(map[string]any)
				sc, _ := res["structuredContent"].(map[string]any)
				if res["isError"] != true || sc["reason"] != "server_closing" {
					t.Fatalf("the call in flight was not answered with an error: %v", answer)
				}
			})
		}
	})
}
