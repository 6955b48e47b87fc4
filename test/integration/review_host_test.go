package integration

// Outside review (branch rvhost) of the services nsbox runs on the host that
// something other than the sandbox can reach: nsbox mcp --http. Every
// TestReviewHost* test here FAILS on purpose on the code reviewed: each
// shows one finding, and passes once it is fixed.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// reviewHTTP is one `nsbox mcp --http 127.0.0.1:0` run as a user.
type reviewHTTP struct {
	url    string // http://127.0.0.1:PORT/
	addr   string // 127.0.0.1:PORT
	token  string // the bearer token nsbox made for the run (no --token-file)
	cmd    *exec.Cmd
	stderr *reviewBuf
}

type reviewBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *reviewBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *reviewBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var (
	reviewServingAt = regexp.MustCompile(`serving MCP over HTTP at http://(\S+)/`)
	reviewTokenAt   = regexp.MustCompile(`bearer token for this run in (\S+)`)
)

// startReviewHTTP runs nsbox mcp --http 127.0.0.1:0 --workspace ws ARGS as
// u (with HOME home and a private data directory) and waits for the address
// it prints; SIGINT ends it with the test.
func startReviewHTTP(t *testing.T, u user, ws, home string, args ...string) *reviewHTTP {
	t.Helper()
	data := filepath.Join(filepath.Dir(ws), "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() == 0 {
		os.Chown(data, u.uid, u.gid)
	}
	s := &reviewHTTP{stderr: &reviewBuf{}}
	s.cmd = exec.Command(nsboxBin(t), append([]string{"mcp", "--http", "127.0.0.1:0", "--workspace", ws}, args...)...)
	s.cmd.Dir = ws
	s.cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + home, "LANG=C.UTF-8", "XDG_DATA_HOME=" + data}
	u.asUser(s.cmd)
	pr, pw := io.Pipe()
	s.cmd.Stderr = io.MultiWriter(s.stderr, pw)
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { s.cmd.Wait(); pw.Close(); close(exited) }()
	found := make(chan string, 1)
	var tokenFile string // written before found is sent
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := reviewTokenAt.FindStringSubmatch(sc.Text()); m != nil {
				tokenFile = m[1]
			}
			if m := reviewServingAt.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
				break
			}
		}
		close(found)
		io.Copy(io.Discard, pr)
	}()
	select {
	case a, ok := <-found:
		if !ok {
			t.Fatalf("nsbox mcp --http ended before serving\nstderr: %s", s.stderr)
		}
		s.addr, s.url = a, "http://"+a+"/"
		if tokenFile != "" {
			b, err := os.ReadFile(tokenFile)
			if err != nil {
				t.Fatalf("the token file nsbox made: %v", err)
			}
			s.token = strings.TrimSpace(string(b))
		}
	case <-time.After(time.Minute): // a deadlock guard only
		s.cmd.Process.Kill()
		t.Fatalf("nsbox mcp --http did not say where it serves\nstderr: %s", s.stderr)
	}
	t.Cleanup(func() {
		s.cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			s.cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			e := s.stderr.String()
			if len(e) > 2048 {
				e = "..." + e[len(e)-2048:]
			}
			t.Logf("nsbox mcp --http stderr:\n%s", e)
		}
	})
	return s
}

// reviewDir returns a fresh directory owned by u outside /tmp (which is
// private inside a sandbox, so a file there would be out of a command's
// sight anyway), removed after the test.
func reviewDir(t *testing.T, u user) string {
	t.Helper()
	base, err := os.MkdirTemp("/var/tmp", "nsbox-rvhost-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "home")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() == 0 {
		if err := os.Chown(dir, u.uid, u.gid); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

type reviewBearer struct {
	token string
	base  http.RoundTripper
}

func (b reviewBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// reviewConnect connects the Go SDK's client to url with token.
func reviewConnect(t *testing.T, url, token string) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: reviewBearer{token, http.DefaultTransport}}
	c := mcp.NewClient(&mcp.Implementation{Name: "nsbox-rvhost", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connecting with the token: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func reviewText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// reviewAttackScript drives an MCP server at $1 with curl alone, as any
// local program can (no token): initialize, initialized, then run_command
// $2. It prints the tools/call answer.
const reviewAttackScript = `set -e
U="$1"; CMD="$2"
H=$(mktemp); trap 'rm -f "$H"' EXIT
J='Content-Type: application/json'; A='Accept: application/json, text/event-stream'
curl -sS -D "$H" -o /dev/null -H "$J" -H "$A" --data '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}' "$U"
SID=$(grep -i '^mcp-session-id:' "$H" | cut -d' ' -f2 | tr -d '\r')
V='Mcp-Protocol-Version: 2025-06-18'
curl -sS -o /dev/null -H "$J" -H "$A" -H "$V" -H "Mcp-Session-Id: $SID" --data '{"jsonrpc":"2.0","method":"notifications/initialized"}' "$U"
curl -sS -H "$J" -H "$A" -H "$V" -H "Mcp-Session-Id: $SID" --data "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"run_command\",\"arguments\":{\"command\":\"$CMD\"}}}" "$U"
`

// TestReviewHostHTTPLoopbackWithoutTokenDrivenByOthers: nsbox mcp --http on
// a loopback address needs no token, and loopback is no boundary: any
// program on the host reaches it. Here (a) a sandbox of the same user with
// --net host, whose own workspace is elsewhere, writes into the server's
// workspace through it (its policy escaped), and (b) when the server runs
// as root, a process of another user (uid 65534) runs commands in root's
// sandbox. Fixed when a client that holds no credential (a token nsbox made
// itself, a unix socket's SO_PEERCRED, ...) is refused.
func TestReviewHostHTTPLoopbackWithoutTokenDrivenByOthers(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed: " + err.Error())
	}
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		s := startReviewHTTP(t, u, ws, u.home())

		t.Run("sandbox-net-host", func(t *testing.T) {
			other := u.tempDir(t) // the attacking sandbox's own workspace
			marker := filepath.Join(ws, "written-by-another-sandbox")
			r := u.run(t, &runOpts{dir: other, timeout: 90 * time.Second}, "run", "--net", "host", "--workspace", other, "--",
				"/bin/sh", "-c", reviewAttackScript, "sh", s.url, "echo pwned > "+marker)
			if _, err := os.Stat(marker); err == nil {
				t.Errorf("a sandbox (workspace %s, --net host) wrote %s, in the workspace of the nsbox mcp --http server on %s, through its token-less loopback endpoint\nstdout: %s\nstderr: %s", other, marker, s.addr, r.stdout, r.stderr)
			}
		})

		if u.uid != 0 || len(users()) < 2 {
			return
		}
		t.Run("other-user", func(t *testing.T) {
			nobody := users()[1]
			r := nobody.runAs(t, &runOpts{timeout: 90 * time.Second}, "/bin/sh", "-c", reviewAttackScript, "sh", s.url, "echo ran-as-$(id -u)-in-$((6*7))")
			if strings.Contains(r.stdout, "ran-as-") && strings.Contains(r.stdout, "-in-42") {
				t.Errorf("uid %d ran a command in the sandbox of root's nsbox mcp --http (loopback, no token):\n%s", nobody.uid, r.stdout)
			}
		})
	})
}

// TestReviewHostHTTPTokenFileReadableInside: the bearer token's file
// (--token-file, where docs/agents.md puts it: ~/.config/nsbox/mcp-token)
// reads in full inside the sandboxes the token guards, although nsbox hides
// --data-dir and protects --audit for the same reason. A command (a prompt
// injection's) prints it into the conversation or, with a network, sends it
// anywhere, and whoever holds it drives the server (with --net host, the
// command itself: it opens new sessions). Fixed when the token file is
// hidden (reads as empty or is absent) inside.
func TestReviewHostHTTPTokenFileReadableInside(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		home := reviewDir(t, u)
		cfg := filepath.Join(home, ".config", "nsbox")
		if err := os.MkdirAll(cfg, 0o755); err != nil {
			t.Fatal(err)
		}
		const token = "rvhost-0123456789abcdef-secret"
		tf := filepath.Join(cfg, "mcp-token")
		if err := os.WriteFile(tf, []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if os.Getuid() == 0 {
			for _, p := range []string{filepath.Join(home, ".config"), cfg, tf} {
				os.Chown(p, u.uid, u.gid)
			}
		}
		ws := u.tempDir(t)
		s := startReviewHTTP(t, u, ws, home, "--token-file", tf)
		cs := reviewConnect(t, s.url, token)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_command", Arguments: map[string]any{"command": "cat " + tf + " 2>&1; true"}})
		if err != nil {
			t.Fatal(err)
		}
		out := reviewText(res)
		t.Logf("cat %s inside: %s", tf, out)
		if strings.Contains(out, token) {
			t.Errorf("a command inside read the server's bearer token from %s:\n%s", tf, out)
		}
	})
}

// TestReviewHostHTTPCancelNotesUnbounded: the cancel filter of nsbox mcp
// --http notes the requestId of every notifications/cancelled POSTed with
// any Mcp-Session-Id, before the SDK checks that the session exists or that
// Host is loopback (its DNS rebinding check), and forgets a session's notes
// only on that session's DELETE. A requestId may be a string of 4 MiB, a
// session id any header: every POST keeps its requestId for the life of the
// process. Here 60 POSTs of 3 MiB from a page rebound to 127.0.0.1 (Host:
// rebind.example), each refused with 403, leave the server holding 180 MiB
// more. Fixed when the notes are bounded in all (sessions × ids × size) and
// kept only for sessions that exist.
func TestReviewHostHTTPCancelNotesUnbounded(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		s := startReviewHTTP(t, u, u.tempDir(t), u.home())
		pid := s.cmd.Process.Pid
		before := vmRSS(pid)
		big := strings.Repeat("x", 3<<20)
		const posts = 60 // 180 MiB of request ids
		var forbidden int
		for i := 0; i < posts; i++ {
			req, _ := http.NewRequest("POST", s.url, strings.NewReader(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"%s-%d"}}`, big, i)))
			req.Host = "rebind.example:" + strings.Split(s.addr, ":")[1]
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Session-Id", fmt.Sprintf("no-such-session-%d", i))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusForbidden {
				forbidden++
			}
		}
		// Let the runtime return what it does not hold any more.
		time.Sleep(2 * time.Second)
		after := vmRSS(pid)
		t.Logf("nsbox mcp --http VmRSS %d MiB before, %d MiB after %d refused POSTs (%d answered 403)", before>>20, after>>20, posts, forbidden)
		if after-before > 100<<20 {
			t.Errorf("%d POSTs of notifications/cancelled for sessions that do not exist, with a foreign Host (%d refused with 403), grew the server by %d MiB, and nothing frees it", posts, forbidden, (after-before)>>20)
		}
	})
}

// TestReviewHostHTTPIdleConnectionsKept: the HTTP server of nsbox mcp
// --http sets ReadHeaderTimeout only: a keep-alive connection between
// requests waits forever (no IdleTimeout, no ReadTimeout). A client without
// the token sends one request, gets 401 and keeps the connection: each
// costs the server a descriptor and a goroutine for good, so anyone who
// reaches the port (0.0.0.0 with a token is the documented set-up) exhausts
// RLIMIT_NOFILE and the server accepts nobody else (nor opens the files a
// new sandbox needs). Fixed when an idle connection is closed within the
// header timeout (here: still open 12 s after its 401).
func TestReviewHostHTTPIdleConnectionsKept(t *testing.T) {
	u := users()[0]
	requireSandbox(t, u)
	home := reviewDir(t, u)
	tf := filepath.Join(home, "token")
	if err := os.WriteFile(tf, []byte("rvhost-idle-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() == 0 {
		os.Chown(tf, u.uid, u.gid)
	}
	s := startReviewHTTP(t, u, u.tempDir(t), u.home(), "--token-file", tf)
	const n = 20
	var conns []net.Conn
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 2\r\n\r\n{}", s.addr)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("a request without the token: HTTP %d, want 401", resp.StatusCode)
		}
		conns = append(conns, c)
	}
	time.Sleep(12 * time.Second) // past the 10 s ReadHeaderTimeout
	open := 0
	deadline := time.Now().Add(time.Second)
	for _, c := range conns {
		c.SetReadDeadline(deadline)
		var b [1]byte
		_, err := c.Read(b[:])
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			open++
		}
	}
	if open > 0 {
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", s.cmd.Process.Pid))
		t.Errorf("%d of %d connections that got 401 (no token) are still open 12 s later (the server holds %d descriptors): unauthenticated clients keep descriptors for good", open, n, len(fds))
	}
}

// reviewPost POSTs body to url as a client without a session (no
// Mcp-Session-Id), with token, and returns the HTTP status.
func reviewPost(t *testing.T, url, token, body string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// reviewWorkers counts the sandbox workers (nsbox-init) below pid.
func reviewWorkers(pid int) int {
	n := 0
	for _, p := range descendants(pid) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		if bytes.HasPrefix(b, []byte("nsbox-init")) {
			n++
		}
	}
	return n
}

// TestReviewHostHTTPFailedFirstRequestLeaksSession: every POST without a
// session id makes an nsbox Server (HTTPServer.newSession: a slot of
// MaxSessions, and with --eager a sandbox) before the SDK reads the body.
// When that body is no request the SDK dispatches ("{}", bad JSON, a
// notification), the SDK closes its session at once, but the Server only
// learns of a session's end through watchSession, which its middleware
// starts on a dispatched request: the Server is never closed. 64 such
// POSTs (answered 400) fill MaxSessions for the life of the process, and
// every later client is refused; with --eager each also leaves a sandbox
// running. Fixed when a Server whose SDK session never started or ended is
// closed and its slot freed.
func TestReviewHostHTTPFailedFirstRequestLeaksSession(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		t.Run("slots", func(t *testing.T) {
			s := startReviewHTTP(t, u, u.tempDir(t), u.home())
			for i := 0; i < 64; i++ {
				if code := reviewPost(t, s.url, s.token, `{}`); code != http.StatusBadRequest {
					t.Fatalf("POST {}: HTTP %d, want 400", code)
				}
			}
			hc := &http.Client{Transport: reviewBearer{s.token, http.DefaultTransport}}
			c := mcp.NewClient(&mcp.Implementation{Name: "nsbox-rvhost", Version: "1"}, nil)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.url, HTTPClient: hc, MaxRetries: -1}, nil)
			if err != nil {
				t.Errorf("after 64 POSTs of {} (each answered 400, no session made), a client cannot initialize: %v", err)
				return
			}
			cs.Close()
		})
		if u.uid != users()[0].uid {
			return // one identity is enough for the sandbox leak
		}
		t.Run("eager-sandbox", func(t *testing.T) {
			s := startReviewHTTP(t, u, u.tempDir(t), u.home(), "--eager")
			pid := s.cmd.Process.Pid
			// 400 since only an initialize makes a session (no server
			// is made for it at all); 2xx before.
			if code := reviewPost(t, s.url, s.token, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); code/100 != 2 && code != http.StatusBadRequest {
				t.Fatalf("POST of a notification without a session: HTTP %d, want 2xx or 400", code)
			}
			// The eager start runs in the background: wait for it, then
			// give the server as long again to close what nobody can
			// address.
			// (An eager start takes well under a second; 10 s covers a
			// loaded CI machine without a minute of waiting for what
			// the fix makes never appear.)
			deadline := time.Now().Add(10 * time.Second)
			for reviewWorkers(pid) == 0 && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			deadline = time.Now().Add(10 * time.Second)
			for reviewWorkers(pid) > 0 && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
			}
			if n := reviewWorkers(pid); n > 0 {
				t.Errorf("one POST of a notification without a session id left %d sandbox worker(s) running below nsbox mcp --http --eager (pid %d) for a session nobody can address", n, pid)
			}
		})
	})
}

// TestReviewHostHTTPSessionsShareMemory: over HTTP each MCP session gets a
// sandbox of its own ("one sandbox per MCP session"; docs/agents.md offers
// it for "many agents on one sandbox host"), but one memory and notepad
// store serves them all (hostapi.DefaultHandlers, made once in mcpMain),
// and every command in every session may call memory.* and notepad.*
// (nsbox call, fd 3). So a program run in one session (a dependency's
// install script) plants text that the model of every other session, of
// any workspace, recalls as its own memory, and reads or deletes theirs.
// Fixed when a session's store is its own (or the sharing is opted into).
func TestReviewHostHTTPSessionsShareMemory(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		home := reviewDir(t, u)
		tf := filepath.Join(home, "token")
		const token = "rvhost-memory-0123456789abcdef"
		if err := os.WriteFile(tf, []byte(token), 0o600); err != nil {
			t.Fatal(err)
		}
		if os.Getuid() == 0 {
			os.Chown(tf, u.uid, u.gid)
		}
		s := startReviewHTTP(t, u, u.tempDir(t), u.home(), "--token-file", tf)
		a := reviewConnect(t, s.url, token)
		b := reviewConnect(t, s.url, token)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		res, err := a.CallTool(ctx, &mcp.CallToolParams{Name: "run_command", Arguments: map[string]any{
			"command": `nsbox call memory save '{"key":"rvhost-plant","text":"planted-by-a-command-of-session-a"}'`}})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("session A's command: %s", reviewText(res))
		res, err = b.CallTool(ctx, &mcp.CallToolParams{Name: "memory_recall", Arguments: map[string]any{"key": "rvhost-plant"}})
		if err != nil {
			t.Fatal(err)
		}
		if out := reviewText(res); strings.Contains(out, "planted-by-a-command-of-session-a") {
			t.Errorf("session B's memory_recall returns what a command of session A saved:\n%s", out)
		}
	})
}
