package session

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/pkg/ipc"
	"github.com/nsbox/nsbox/pkg/sandbox"
)

func start(t *testing.T, p sandbox.Policy, opts ...sandbox.Option) *sandbox.Session {
	t.Helper()
	s, err := sandbox.Start(context.Background(), p, opts...)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func sh(t *testing.T, s *sandbox.Session, script string) sandbox.Result {
	t.Helper()
	res, err := s.Exec(context.Background(), sandbox.Command{Argv: []string{"/bin/sh", "-c", script}})
	if err != nil {
		t.Fatalf("Exec %q: %v", script, err)
	}
	return res
}

func TestHundredCommandsShareState(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		s := start(t, sandbox.Policy{})
		for i := 0; i < 100; i++ {
			res := sh(t, s, fmt.Sprintf("echo %d >> /tmp/state; wc -l < /tmp/state", i))
			if got := strings.TrimSpace(string(res.Stdout)); got != strconv.Itoa(i+1) || res.ExitCode != 0 {
				t.Fatalf("command %d: stdout %q exit %d", i, got, res.ExitCode)
			}
		}
	})
}

func TestBackgroundProcessDoesNotBlockNextCommand(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		s := start(t, sandbox.Policy{})
		begin := time.Now()
		res := sh(t, s, "sleep 30 & echo bg-started")
		if !strings.Contains(string(res.Stdout), "bg-started") {
			t.Fatalf("stdout %q", res.Stdout)
		}
		if d := time.Since(begin); d > 10*time.Second {
			t.Fatalf("a background process held Exec for %s", d)
		}
		res = sh(t, s, "echo next")
		if strings.TrimSpace(string(res.Stdout)) != "next" {
			t.Fatalf("next command: %q", res.Stdout)
		}
	})
}

func TestCloseLeavesNothingRunning(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		s := start(t, sandbox.Policy{})
		marker := strconv.Itoa(700000 + os.Getpid()%100000)
		sh(t, s, fmt.Sprintf("setsid sleep %s & sleep %s & true", marker, marker))
		if len(pidsOf("sleep\x00"+marker)) == 0 {
			t.Fatal("marker processes did not start")
		}
		worker := s.Pid()
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if left := pidsOf("sleep\x00" + marker); len(left) > 0 {
			t.Fatalf("processes left after Close: %v", left)
		}
		if err := syscall.Kill(worker, 0); err == nil {
			t.Fatalf("worker %d still exists after Close", worker)
		}
		if _, err := s.Exec(context.Background(), sandbox.Command{Argv: []string{"/bin/true"}}); !errors.Is(err, sandbox.ErrClosed) {
			t.Fatalf("Exec after Close: %v, want ErrClosed", err)
		}
	})
}

// supervisorMain is a separate supervisor process for the SIGKILL test: it
// starts a session with a long-running command and waits to be killed.
func supervisorMain(mode string) int {
	s, err := sandbox.Start(context.Background(), sandbox.Policy{})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	s.Exec(context.Background(), sandbox.Command{Argv: []string{"/bin/sh", "-c", "setsid sleep " + mode + " & sleep " + mode + " & true"}})
	fmt.Println("ready", s.Pid())
	select {}
}

func TestSupervisorSIGKILLTakesSandboxDown(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		marker := strconv.Itoa(600000 + os.Getpid()%100000)
		self, _ := os.Executable()
		cmd := exec.Command(self)
		cmd.Env = []string{"NSBOX_IT_SUPERVISOR=" + marker, "PATH=/usr/bin:/bin"}
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(out).ReadString('\n')
		if !strings.HasPrefix(line, "ready") {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("supervisor: %q", line)
		}
		if len(pidsOf("sleep\x00"+marker)) == 0 {
			t.Fatal("sandbox processes did not start")
		}
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		// A guard against a leak, not a timing check: the kill is
		// prompt, but a busy machine can delay it.
		deadline := time.Now().Add(10 * time.Second)
		for len(pidsOf("sleep\x00"+marker)) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("sandbox processes survived the supervisor by more than 10 s: %v", pidsOf("sleep\x00"+marker))
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

func echoHandlers(t *testing.T) *sandbox.Handlers {
	h := sandbox.NewHandlers()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(h.Handle("test", "echo", func(ctx context.Context, c sandbox.HostCall) (ipc.Value, error) {
		return ipc.Map{"echo": c.Args, "host_pid": ipc.Number(os.Getpid())}, nil
	}))
	must(h.Handle("test", "fail", func(ctx context.Context, c sandbox.HostCall) (ipc.Value, error) {
		return nil, errors.New("handler says no")
	}))
	must(h.Handle("test", "panic", func(ctx context.Context, c sandbox.HostCall) (ipc.Value, error) {
		panic("handler exploded")
	}))
	must(h.Handle("test", "secret", func(ctx context.Context, c sandbox.HostCall) (ipc.Value, error) {
		t.Error("a method that is not on the allowlist reached its handler")
		return ipc.Null{}, nil
	}))
	return h
}

// docSnippet returns the code block of docs/protocol.md whose info string
// is "LANG nsbox-client": the tests run exactly what the docs show.
func docSnippet(t *testing.T, lang string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(), "docs/protocol.md"))
	if err != nil {
		t.Fatalf("docs/protocol.md: %v", err)
	}
	start := "```" + lang + " nsbox-client\n"
	i := strings.Index(string(b), start)
	if i < 0 {
		t.Fatalf("docs/protocol.md has no %s client snippet", lang)
	}
	rest := string(b)[i+len(start):]
	return rest[:strings.Index(rest, "```")]
}

func TestHostCallFromInside(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		var audit bytes.Buffer
		s := start(t, sandbox.Policy{HostAPIs: []string{"test.echo", "test.fail", "test.panic"}},
			sandbox.WithHandlers(echoHandlers(t)), sandbox.WithAudit(&audit), sandbox.WithID("it"))
		pyClient, nodeClient := docSnippet(t, "python"), docSnippet(t, "js")
		if _, err := os.Stat("/usr/bin/python3"); err == nil {
			res := sh(t, s, `/usr/bin/python3 -c '`+pyClient+`
print(json.dumps(host_call("test", "echo", {"n": 1, "token": "s3cr3t"})))
for m in ("fail", "panic", "secret", "nope"):
    try:
        host_call("test", m, {}); print("UNEXPECTED", m)
    except RuntimeError as e:
        print("refused", m, e)
'`)
			out := string(res.Stdout)
			if !strings.Contains(out, `"n": 1`) || !strings.Contains(out, strconv.Itoa(os.Getpid())) {
				t.Fatalf("python hostCall did not reach the host handler: %q %q", out, res.Stderr)
			}
			for _, want := range []string{"refused fail handler says no", "refused panic", "refused secret host API test.secret is not allowed", "refused nope"} {
				if !strings.Contains(out, want) {
					t.Errorf("missing %q in %q", want, out)
				}
			}
			if strings.Contains(out, "UNEXPECTED") {
				t.Fatalf("a refused call succeeded: %q", out)
			}
			// Processes of one command calling at the same time: each
			// client's own connection gets its own replies.
			res = sh(t, s, `for i in 1 2 3 4; do /usr/bin/python3 -c '`+pyClient+`
for k in range(100):
    r = host_call("test", "echo", {"k": k, "p": os.getpid()})
    assert r["echo"]["k"] == k and r["echo"]["p"] == os.getpid(), r
print("calls-ok")
' & done; wait`)
			if n := strings.Count(string(res.Stdout), "calls-ok"); n != 4 {
				t.Fatalf("%d of 4 concurrent python clients finished: %q %q", n, res.Stdout, res.Stderr)
			}
		}
		if _, err := exec.LookPath("node"); err == nil {
			res := sh(t, s, `node -e '`+nodeClient+`
console.log(JSON.stringify(hostCall("test", "echo", {lang: "node"})));
try { hostCall("test", "secret", {}); console.log("UNEXPECTED") } catch (e) { console.log("refused", e.message) }
'`)
			out := string(res.Stdout)
			if !strings.Contains(out, `"lang":"node"`) || !strings.Contains(out, "refused host API test.secret is not allowed") {
				t.Fatalf("node hostCall: %q %q", out, res.Stderr)
			}
		}
		if strings.Contains(audit.String(), "s3cr3t") {
			t.Fatalf("the audit log holds a secret: %s", audit.String())
		}
		if audit.Len() > 0 && !strings.Contains(audit.String(), `"method":"echo"`) {
			t.Fatalf("audit log: %s", audit.String())
		}
	})
}

func TestNoHostCallFDWithoutHostAPIs(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		s := start(t, sandbox.Policy{})
		res := sh(t, s, `echo "fd=${NSBOX_HOSTCALL_FD:-none}"; ls /proc/self/fd | tr '\n' ' '`)
		if !strings.Contains(string(res.Stdout), "fd=none") {
			t.Fatalf("a hostCall fd without host APIs: %q", res.Stdout)
		}
	})
}

func TestBadInput(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		before := runtime.NumGoroutine()
		s, err := sandbox.Start(context.Background(), sandbox.Policy{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Exec(context.Background(), sandbox.Command{}); err == nil {
			t.Fatal("Exec with an empty argv succeeded")
		}
		h := sandbox.NewHandlers()
		fn := func(ctx context.Context, c sandbox.HostCall) (ipc.Value, error) { return ipc.Null{}, nil }
		if err := h.Handle("a", "b", fn); err != nil {
			t.Fatal(err)
		}
		if err := h.Handle("a", "b", fn); !errors.Is(err, sandbox.ErrHandlerExists) {
			t.Fatalf("second Handle: %v", err)
		}
		// 100 MB of output: captured up to the bound, the rest discarded,
		// no deadlock.
		res, err := s.Exec(context.Background(), sandbox.Command{
			Argv:      []string{"/bin/sh", "-c", "head -c 100000000 /dev/zero; echo done >&2"},
			MaxOutput: 1 << 20,
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Stdout) != 1<<20 || !res.Truncated || !strings.Contains(string(res.Stderr), "done") {
			t.Fatalf("100 MB output: %d bytes captured, truncated=%v, stderr %q", len(res.Stdout), res.Truncated, res.Stderr)
		}
		// Not found / not executable.
		if _, err := s.Exec(context.Background(), sandbox.Command{Argv: []string{"no-such-cmd"}}); !errors.Is(err, sandbox.ErrCommandNotFound) {
			t.Fatalf("missing command: %v", err)
		}
		s.Close()
		if _, err := s.Exec(context.Background(), sandbox.Command{Argv: []string{"/bin/true"}}); !errors.Is(err, sandbox.ErrClosed) {
			t.Fatalf("Exec after Close: %v", err)
		}
		// No goroutine is left behind by a whole session.
		deadline := time.Now().Add(2 * time.Second)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<16)
				n := runtime.Stack(buf, true)
				t.Fatalf("goroutines: %d before, %d after\n%s", before, runtime.NumGoroutine(), buf[:n])
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

func TestCancelKillsCommandNotSession(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		s := start(t, sandbox.Policy{})
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		begin := time.Now()
		_, err := s.Exec(ctx, sandbox.Command{Argv: []string{"/bin/sleep", "60"}})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("cancelled Exec: %v", err)
		}
		if d := time.Since(begin); d > 5*time.Second {
			t.Fatalf("cancellation took %s", d)
		}
		if res := sh(t, s, "echo alive"); strings.TrimSpace(string(res.Stdout)) != "alive" {
			t.Fatal("session did not survive a cancelled command")
		}
	})
}

func TestTimeoutIsAResourceLimit(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		s := start(t, sandbox.Policy{})
		res, err := s.Exec(context.Background(), sandbox.Command{Argv: []string{"/bin/sh", "-c", "sleep 100 & sleep 100"}, Timeout: 300 * time.Millisecond})
		var rl *sandbox.ResourceLimitError
		if !errors.As(err, &rl) || rl.Resource != "time" || !errors.Is(err, sandbox.ErrResourceLimit) || res.Reason != sandbox.ReasonTimeout {
			t.Fatalf("timeout: err %v reason %q", err, res.Reason)
		}
	})
}

func pidsOf(marker string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(b, []byte(marker)) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestCancelNearTheEndSparesTheNextCommand: a context that ends just as
// its command does (the cancel reaches the worker after the command ended)
// kills nothing: in particular not the next command.
func TestCancelNearTheEndSparesTheNextCommand(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		s := start(t, sandbox.Policy{})
		for i := 0; i < 200; i++ {
			// The deadline falls around the command's end, on either
			// side of it.
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%10)*200*time.Microsecond)
			s.Exec(ctx, sandbox.Command{Argv: []string{"/bin/true"}})
			cancel()
			res, err := s.Exec(context.Background(), sandbox.Command{Argv: []string{"/bin/sh", "-c", "sleep 0.01; echo ok"}})
			if err != nil || res.ExitCode != 0 || strings.TrimSpace(string(res.Stdout)) != "ok" {
				t.Fatalf("iteration %d: the next command was hit: err %v exit %d signal %d", i, err, res.ExitCode, res.Signal)
			}
		}
	})
}

// TestHandlerClosesItsSession: a host-API handler ends its own session the
// way Session.Close documents, with `go s.Close()`: the call returns, the
// session ends, and Close returns.
func TestHandlerClosesItsSession(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("python3 is not installed: it makes the host call")
	}
	eachUser(t, func(t *testing.T) {
		h := sandbox.NewHandlers()
		closed := make(chan error, 1)
		var s *sandbox.Session
		ready := make(chan struct{})
		if err := h.Handle("test", "close", func(ctx context.Context, c sandbox.HostCall) (ipc.Value, error) {
			<-ready
			go func() { closed <- s.Close() }()
			return ipc.Map{"closing": ipc.Bool(true)}, nil
		}); err != nil {
			t.Fatal(err)
		}
		s = start(t, sandbox.Policy{HostAPIs: []string{"test.close"}}, sandbox.WithHandlers(h))
		close(ready)
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.Exec(context.Background(), sandbox.Command{Argv: []string{"/usr/bin/python3", "-c", docSnippet(t, "python") + `
host_call("test", "close", {})
import time; time.sleep(60)
`}})
		}()
		select {
		case err := <-closed:
			if err != nil {
				t.Fatalf("Close: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("Close started by a handler did not return")
		}
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the Exec of the closed session did not return")
		}
		select {
		case <-s.Done():
		default:
			t.Fatal("the session is not done after Close")
		}
	})
}
