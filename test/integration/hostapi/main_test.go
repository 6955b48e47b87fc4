// Package hostapiit tests the memory and notepad host APIs end to end
// through the public Go API: real sandbox sessions (this test binary is
// their worker, see TestMain), shell scripts inside calling the real
// `nsbox call` client, and the tools run by the worker. Each test runs as
// root and, re-executing a copy of this binary as uid 65534, root-less.
package hostapiit

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/pkg/hostapi"
	"github.com/nsbox/nsbox/pkg/sandbox"
	"github.com/nsbox/nsbox/pkg/tools"
)

func TestMain(m *testing.M) {
	// Sessions re-execute this binary as their worker: it must become the
	// worker before anything else runs, and it serves the host API tools
	// (which only make hostCalls).
	sandbox.Init(sandbox.WithWorkerTools(tools.NewRegistry(hostapi.Tools()...)))
	code := m.Run()
	if copyPath != "" {
		os.RemoveAll(filepath.Dir(copyPath))
	}
	os.Exit(code)
}

// childEnv marks a copy of this binary re-executed as another user; its
// value is the subtest name to run.
const childEnv = "NSBOX_HOSTAPI_IT_AS"

// clientDest is where the real nsbox CLI (the `nsbox call` client) is bound
// inside the sandboxes of these tests. The binary at sandbox.SelfPath is
// this test binary, which has no `call` command.
const clientDest = "/run/nsbox-client/nsbox"

// nsboxBin is the CLI under test: $NSBOX_BIN, or bin/nsbox at the
// repository root.
func nsboxBin(t *testing.T) string {
	t.Helper()
	p := os.Getenv("NSBOX_BIN")
	if p == "" {
		p, _ = filepath.Abs("../../../bin/nsbox")
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("nsbox binary not found at %s (run make build, or set NSBOX_BIN): %v", p, err)
	}
	return p
}

// eachUser runs fn as root (in this process) and as uid 65534 (in a copy
// of this binary re-executed with those credentials), or, when the tests
// do not run as root, as the current user only.
func eachUser(t *testing.T, fn func(t *testing.T)) {
	t.Helper()
	if name := os.Getenv(childEnv); name != "" {
		t.Run(name, func(t *testing.T) {
			requireSandbox(t)
			fn(t)
		})
		return
	}
	if os.Getuid() != 0 {
		t.Run("rootless", func(t *testing.T) {
			requireSandbox(t)
			fn(t)
		})
		return
	}
	t.Run("root", func(t *testing.T) {
		requireSandbox(t)
		fn(t)
	})
	t.Run("rootless", func(t *testing.T) { runAsNobody(t) })
}

var (
	copyOnce sync.Once
	copyPath string
	copyErr  error
)

// testBinaryCopy is this binary in a directory uid 65534 can enter: `go
// test` builds it in a private (0700) directory.
func testBinaryCopy() (string, error) {
	copyOnce.Do(func() {
		self, err := os.Executable()
		if err != nil {
			copyErr = err
			return
		}
		dir, err := os.MkdirTemp("", "nsbox-hostapi-it-")
		if err != nil {
			copyErr = err
			return
		}
		os.Chmod(dir, 0o755)
		copyPath = filepath.Join(dir, "hostapi.test")
		in, err := os.Open(self)
		if err != nil {
			copyErr = err
			return
		}
		defer in.Close()
		out, err := os.OpenFile(copyPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
		if err != nil {
			copyErr = err
			return
		}
		_, copyErr = io.Copy(out, in)
		if err := out.Close(); copyErr == nil {
			copyErr = err
		}
	})
	return copyPath, copyErr
}

// runAsNobody re-runs the current test (its "rootless" subtest) as uid and
// gid 65534, as `setpriv --reuid=65534 --regid=65534 --clear-groups` would.
func runAsNobody(t *testing.T) {
	t.Helper()
	bin, err := testBinaryCopy()
	if err != nil {
		t.Fatal(err)
	}
	top, _, _ := strings.Cut(t.Name(), "/")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-test.run=^"+top+"$/^rootless$", "-test.v", "-test.count=1")
	cmd.Env = []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/nonexistent", "LANG=C.UTF-8", "TMPDIR=/tmp",
		childEnv + "=rootless",
		"NSBOX_BIN=" + nsboxBin(t),
	}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	text := out.String()
	if err != nil {
		t.Fatalf("as uid 65534: %v\n%s", err, text)
	}
	if strings.Contains(text, "--- SKIP: "+top+"/rootless") {
		t.Skipf("as uid 65534:\n%s", lastLines(text, 6))
	}
	if !strings.Contains(text, "--- PASS: "+top+"/rootless") {
		t.Fatalf("as uid 65534: the test did not run:\n%s", text)
	}
	t.Logf("as uid 65534:\n%s", lastLines(text, 4))
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

var (
	probeOnce sync.Once
	probeErr  error
)

// requireSandbox skips when no sandbox can be built here as this user,
// with nsbox's own reason.
func requireSandbox(t *testing.T) {
	t.Helper()
	probeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s, err := sandbox.Start(ctx, sandbox.Policy{Cwd: "/"})
		if err != nil {
			probeErr = err
			return
		}
		s.Close()
	})
	if probeErr != nil {
		t.Skipf("nsbox cannot build a sandbox as uid %d here: %v", os.Getuid(), probeErr)
	}
}

// box is one session serving the host APIs from dataDir.
type box struct {
	t     *testing.T
	s     *sandbox.Session
	audit *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// startBox starts a session whose policy allows the methods in allow, with
// the handlers hostapi.DefaultHandlers serves from dataDir.
func startBox(t *testing.T, dataDir string, allow []string) *box {
	t.Helper()
	h, closeStores, err := hostapi.DefaultHandlers(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeStores() })
	p := sandbox.Policy{
		Cwd:      "/",
		HostAPIs: allow,
		Env:      []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"},
		Mounts: []sandbox.Mount{
			{Kind: sandbox.MountBind, Source: nsboxBin(t), Dest: clientDest, ReadOnly: true},
		},
	}
	audit := &syncBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := sandbox.Start(ctx, p, sandbox.WithHandlers(h), sandbox.WithAudit(audit), sandbox.WithID(t.Name()))
	if err != nil {
		t.Fatalf("start sandbox: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return &box{t: t, s: s, audit: audit}
}

type shResult struct {
	stdout, stderr string
	code           int
}

// sh runs a shell script inside; "nsbox" in it is the real CLI.
func (b *box) sh(script string) shResult {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := b.s.Exec(ctx, sandbox.Command{
		Argv: []string{"/bin/sh", "-c", "nsbox() { " + clientDest + " \"$@\"; }\n" + script},
	})
	if err != nil {
		b.t.Fatalf("exec: %v", err)
	}
	return shResult{stdout: string(res.Stdout), stderr: string(res.Stderr), code: res.ExitCode}
}

// toolResult is a tool's {success, output, error}.
type toolResult struct {
	Success bool            `json:"success"`
	Output  json.RawMessage `json:"output"`
	Error   *string         `json:"error"`
}

func (r toolResult) errText() string {
	if r.Error == nil {
		return ""
	}
	return *r.Error
}

// tool calls a tool in the session (it runs in the worker, inside).
func (b *box) tool(name string, args any) toolResult {
	b.t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		b.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := b.s.CallTool(ctx, name, raw, 0)
	if err != nil {
		b.t.Fatalf("tool %s: %v", name, err)
	}
	var r toolResult
	if err := json.Unmarshal(out, &r); err != nil {
		b.t.Fatalf("tool %s: bad result %s: %v", name, out, err)
	}
	return r
}

// mustTool calls a tool that must succeed and decodes its output.
func (b *box) mustTool(name string, args any, out any) {
	b.t.Helper()
	r := b.tool(name, args)
	if !r.Success {
		b.t.Fatalf("tool %s failed: %s", name, r.errText())
	}
	if out != nil {
		if err := json.Unmarshal(r.Output, out); err != nil {
			b.t.Fatalf("tool %s: output %s: %v", name, r.Output, err)
		}
	}
}

// dataDir is a fresh data directory (XDG_DATA_HOME/nsbox) owned by the
// user running the test.
func dataDir(t *testing.T) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "xdg", "nsbox")
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func jsonOf(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("not JSON: %q (%v)", s, err)
	}
	return m
}

func expect(t *testing.T, cond bool, format string, args ...any) {
	t.Helper()
	if !cond {
		t.Fatalf(format, args...)
	}
}
