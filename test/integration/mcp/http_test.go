package mcpintegration

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// nsbox mcp --http: the streamable HTTP transport, driven by the Go SDK's
// client.

type httpServer struct {
	url   string
	token string // the bearer token nsbox made for the run (no --token-file)
	// tokenFile is where nsbox wrote it.
	tokenFile string
	cmd       *exec.Cmd
	stderr    *syncBuffer
	exited    chan error
}

var (
	servingAt = regexp.MustCompile(`serving MCP over HTTP at (http://\S+)`)
	tokenAt   = regexp.MustCompile(`bearer token for this run in (\S+)`)
)

// startHTTPServer runs nsbox mcp --http 127.0.0.1:0 ARGS... and waits for
// the address it prints.
func startHTTPServer(t *testing.T, h *home, args ...string) *httpServer {
	t.Helper()
	s := &httpServer{stderr: &syncBuffer{}, exited: make(chan error, 1)}
	s.cmd = h.mcpCmd(t, append([]string{"--http", "127.0.0.1:0"}, args...)...)
	pr, pw := io.Pipe()
	s.cmd.Stderr = io.MultiWriter(s.stderr, pw)
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.exited <- s.cmd.Wait(); pw.Close() }()
	found := make(chan string, 1)
	var tokenFile string // written before found is sent
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := tokenAt.FindStringSubmatch(sc.Text()); m != nil {
				tokenFile = m[1]
			}
			if m := servingAt.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		close(found)
	}()
	select {
	case u, ok := <-found:
		if !ok {
			t.Fatalf("nsbox mcp --http ended before serving\nstderr: %s", s.stderr)
		}
		s.url = u
		go io.Copy(io.Discard, pr)
		if tokenFile != "" {
			b, err := os.ReadFile(tokenFile)
			if err != nil {
				t.Fatalf("the token file nsbox made: %v", err)
			}
			s.token = strings.TrimSpace(string(b))
			s.tokenFile = tokenFile
		}
	case <-time.After(time.Minute):
		s.cmd.Process.Kill()
		t.Fatalf("nsbox mcp --http did not say where it serves\nstderr: %s", s.stderr)
	}
	t.Cleanup(func() {
		s.cmd.Process.Signal(os.Interrupt)
		select {
		case <-s.exited:
		case <-time.After(30 * time.Second):
			s.cmd.Process.Kill()
			t.Error("nsbox mcp --http did not exit on SIGINT")
		}
		if t.Failed() {
			t.Logf("stderr:\n%s", s.stderr)
		}
	})
	return s
}

type withToken struct {
	token string
	base  http.RoundTripper
}

func (w withToken) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+w.token)
	return w.base.RoundTrip(r)
}

func connectHTTP(t *testing.T, url, token string) (*mcp.ClientSession, error) {
	t.Helper()
	return connectHTTPRetries(t, url, token, -1)
}

// connectHTTPRetries is connectHTTP with the client's retries of its event
// stream (0: the SDK's default; -1: none).
func connectHTTPRetries(t *testing.T, url, token string, retries int) (*mcp.ClientSession, error) {
	t.Helper()
	hc := &http.Client{Transport: http.DefaultTransport}
	if token != "" {
		hc.Transport = withToken{token, http.DefaultTransport}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "nsbox-it-http", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: retries}, nil)
}

// workers are the sandbox workers running below pid.
func workers(pid int) []proc {
	var out []proc
	for _, p := range descendants(pid) {
		if strings.HasPrefix(p.cmd, "nsbox-init") {
			out = append(out, p)
		}
	}
	return out
}

func waitWorkers(t *testing.T, pid, n int, what string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for len(workers(pid)) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d sandbox workers, want %d", what, len(workers(pid)), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func callEcho(t *testing.T, cs *mcp.ClientSession, text string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_command", Arguments: map[string]any{"command": "echo " + text}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || !strings.Contains(text_(res), text) {
		t.Fatalf("run_command over HTTP: %s", text_(res))
	}
}

func text_(res *mcp.CallToolResult) string { return text(res) }

// TestHTTPToken: with --token-file, a client without the token (or with
// another) gets 401 and starts nothing; with it, tools run.
func TestHTTPToken(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		h := newHome(t, u)
		const token = "0123456789abcdef-integration-token"
		tf := filepath.Join(h.cfg, "token")
		if err := os.WriteFile(tf, []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		u.chown(t, tf)
		s := startHTTPServer(t, h, "--token-file", tf)
		for _, bad := range []string{"", "not-the-token-at-all"} {
			if cs, err := connectHTTP(t, s.url, bad); err == nil {
				cs.Close()
				t.Fatalf("connected with token %q", bad)
			}
			req, _ := http.NewRequest("POST", s.url, strings.NewReader(rawInit))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if bad != "" {
				req.Header.Set("Authorization", "Bearer "+bad)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("token %q: HTTP %d, want 401", bad, resp.StatusCode)
			}
		}
		if n := len(workers(s.cmd.Process.Pid)); n != 0 {
			t.Fatalf("%d sandboxes started for clients without the token", n)
		}
		cs, err := connectHTTP(t, s.url, token)
		if err != nil {
			t.Fatalf("with the token: %v", err)
		}
		defer cs.Close()
		callEcho(t, cs, "over-http")
	})
}

// TestHTTPSessions: one sandbox per MCP session; DELETE (the client's
// Close) ends its sandbox, the idle timeout ends an abandoned one.
func TestHTTPSessions(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		// A timeout no slow start reaches: only DELETE ends a session.
		s := startHTTPServer(t, newHome(t, u), "--idle-timeout", "1h")
		pid := s.cmd.Process.Pid
		a, err := connectHTTP(t, s.url, s.token)
		if err != nil {
			t.Fatal(err)
		}
		b, err := connectHTTP(t, s.url, s.token)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		callEcho(t, a, "a")
		callEcho(t, b, "b")
		waitWorkers(t, pid, 2, "two MCP sessions")
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		waitWorkers(t, pid, 1, "after the first client's DELETE")
		callEcho(t, b, "b-still")

		idle := startHTTPServer(t, newHome(t, u), "--idle-timeout", "1s")
		c, err := connectHTTP(t, idle.url, idle.token)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		callEcho(t, c, "c")
		// c goes quiet: the idle timeout ends its session and sandbox.
		waitWorkers(t, idle.cmd.Process.Pid, 0, "after the idle timeout")
	})
}

// TestHTTPMaxSessions: --max-sessions bounds the sandboxes alive at once;
// an initialize beyond it is refused and starts nothing, and a session's
// end makes room again.
func TestHTTPMaxSessions(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		s := startHTTPServer(t, newHome(t, u), "--idle-timeout", "1h", "--max-sessions", "1")
		pid := s.cmd.Process.Pid
		a, err := connectHTTP(t, s.url, s.token)
		if err != nil {
			t.Fatal(err)
		}
		callEcho(t, a, "a")
		if b, err := connectHTTP(t, s.url, s.token); err == nil {
			b.Close()
			t.Fatal("a second MCP session was served with --max-sessions 1")
		}
		waitWorkers(t, pid, 1, "one session, the second refused")
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		waitWorkers(t, pid, 0, "after the first client's DELETE")
		// The slot is free once the session's close has finished, a
		// moment after its worker is gone: a client tries again.
		var c *mcp.ClientSession
		for deadline := time.Now().Add(30 * time.Second); ; {
			if c, err = connectHTTP(t, s.url, s.token); err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("a session after the first ended: %v", err)
		}
		defer c.Close()
		callEcho(t, c, "c")
	})
}

// TestHTTPRefusesOpenAddressWithoutToken: 0.0.0.0 without --token-file is
// refused before anything listens.
func TestHTTPRefusesOpenAddressWithoutToken(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		h := newHome(t, u)
		cmd := h.mcpCmd(t, "--http", "0.0.0.0:0")
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 125 || !strings.Contains(string(out), "token") {
			t.Fatalf("exit %v, output %q: want 125 and a word about the token", err, out)
		}
		tf := filepath.Join(h.cfg, "loose-token")
		os.WriteFile(tf, []byte("0123456789abcdef0123\n"), 0o644)
		u.chown(t, tf)
		cmd = h.mcpCmd(t, "--http", "127.0.0.1:0", "--token-file", tf)
		out, err = cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 125 || !strings.Contains(string(out), "chmod 600") {
			t.Fatalf("a token file others can read: exit %v, output %q", err, out)
		}
	})
}

// TestHTTPSIGTERMDuringCall: SIGTERM while a call runs over HTTP: the call
// is answered with server_closing, nsbox exits, no sandbox is left.
func TestHTTPSIGTERMDuringCall(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		s := startHTTPServer(t, newHome(t, u))
		// The SDK's default retries: the end of the session's event stream
		// at shutdown does not fail the call whose answer is on its way.
		cs, err := connectHTTPRetries(t, s.url, s.token, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		answer := make(chan *mcp.CallToolResult, 1)
		go func() {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_command", Arguments: map[string]any{"command": "sleep 1000", "timeout": 600}})
			if err != nil {
				t.Errorf("the call in flight: %v", err)
			}
			answer <- res
		}()
		pid := s.cmd.Process.Pid
		waitSleeper(t, pid)
		left := descendants(pid)
		start := time.Now()
		s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-s.exited:
			t.Logf("exited %v after SIGTERM (%v)", time.Since(start).Round(time.Millisecond), err)
			s.exited <- err
		case <-time.After(2 * time.Minute):
			t.Fatal("nsbox mcp --http still runs 2 minutes after SIGTERM") // deadlock guard
		}
		waitGone(t, left, nil, time.Minute)
		res := <-answer
		if res == nil || !res.IsError || !strings.Contains(text(res), "shutting down") {
			t.Fatalf("the call in flight: %+v", res)
		}
	})
}
