package script

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/pkg/cgroups"
	"github.com/nsbox/nsbox/pkg/sandbox"
)

// TestMain makes the test binary the sandbox worker: Native re-executes
// /proc/self/exe, which is this binary, in init mode.
func TestMain(m *testing.M) {
	sandbox.Init()
	os.Exit(m.Run())
}

var native = NewNative()

func requireNative(t *testing.T) {
	t.Helper()
	if !native.Available() {
		_, err := sandbox.Start(context.Background(), sandbox.Policy{})
		t.Skipf("no sandbox on this host: %v", err)
	}
}

func requireInterp(t *testing.T, lang string) {
	t.Helper()
	l, _ := LookupLanguage(lang)
	for _, name := range l.Interpreters {
		if _, err := exec.LookPath(name); err == nil {
			return
		}
	}
	t.Skipf("no %s interpreter on this host (hack/install-deps.sh installs it)", lang)
}

func run(t *testing.T, sb Sandbox, cfg ExecConfig) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return sb.Execute(ctx, cfg)
}

func TestLanguages(t *testing.T) {
	requireNative(t)
	progs := map[string]string{
		"python": "import sys, os\nprint('out', os.getcwd() == os.environ['HOME'])\nprint('err', file=sys.stderr)",
		"node":   "console.log('out', process.cwd() === process.env.HOME); console.error('err')",
		"bash":   "echo out $([ \"$PWD\" = \"$HOME\" ] && echo true); echo err >&2",
		"ruby":   "puts \"out #{Dir.pwd == ENV['HOME']}\"; $stderr.puts 'err'",
	}
	for lang, code := range progs {
		t.Run(lang, func(t *testing.T) {
			requireInterp(t, lang)
			stdout, stderr, err := run(t, native, ExecConfig{Language: lang, Script: code})
			if err != nil {
				t.Fatalf("%v\nstderr: %s", err, stderr)
			}
			if !strings.HasPrefix(stdout, "out ") || !strings.Contains(strings.ToLower(stdout), "true") || strings.TrimSpace(stderr) != "err" {
				t.Fatalf("stdout %q stderr %q", stdout, stderr)
			}
		})
	}
}

func TestExitCode(t *testing.T) {
	requireNative(t)
	requireInterp(t, "bash")
	_, _, err := run(t, native, ExecConfig{Language: "bash", Script: "exit 7"})
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 7 {
		t.Fatalf("err = %v, want *ExitError{7}", err)
	}
}

func TestWriteOutsideIsViolation(t *testing.T) {
	requireNative(t)
	target := filepath.Join("/usr", fmt.Sprintf("nsbox-violation-%d", os.Getpid()))
	progs := map[string]string{
		"python": fmt.Sprintf("open(%q, 'w').write('x')", target),
		"node":   fmt.Sprintf("require('fs').writeFileSync(%q, 'x')", target),
		"bash":   fmt.Sprintf("echo x > %s", target),
		"ruby":   fmt.Sprintf("File.write(%q, 'x')", target),
	}
	for lang, code := range progs {
		t.Run(lang, func(t *testing.T) {
			requireInterp(t, lang)
			_, stderr, err := run(t, native, ExecConfig{Language: lang, Script: code})
			var v *sandbox.ViolationError
			if !errors.Is(err, sandbox.ErrSandboxViolation) || !errors.As(err, &v) {
				t.Fatalf("err = %v, want a violation\nstderr: %s", err, stderr)
			}
			if v.Operation != "filesystem write" || v.Path != target {
				t.Fatalf("violation %+v, want filesystem write of %s", v, target)
			}
			var ee *ExitError
			if !errors.As(err, &ee) || ee.Code == 0 {
				t.Fatalf("the exit status is lost: %v", err)
			}
			if _, err := os.Stat(target); err == nil {
				os.Remove(target)
				t.Fatalf("%s was created on the host", target)
			}
		})
	}
}

func TestMemoryLimit(t *testing.T) {
	requireNative(t)
	requireInterp(t, "python")
	_, stderr, err := run(t, native, ExecConfig{Language: "python", MemoryMB: 64, Script: "x = bytearray(512 << 20)\nx[-1] = 1\nprint('allocated')"})
	if err == nil {
		t.Skipf("memory limits are not enforced on this host (cgroups: %+v): a 512 MiB allocation succeeded under 64 MiB", cgroups.Detect())
	}
	var rl *sandbox.ResourceLimitError
	if !errors.Is(err, sandbox.ErrResourceLimit) || !errors.As(err, &rl) || rl.Resource != "memory" {
		t.Fatalf("err = %v, want a memory limit\nstderr: %s", err, stderr)
	}
}

func TestTimeLimit(t *testing.T) {
	requireNative(t)
	requireInterp(t, "python")
	start := time.Now()
	_, _, err := run(t, native, ExecConfig{Language: "python", TimeoutSec: 1, Script: "while True: pass"})
	var rl *sandbox.ResourceLimitError
	if !errors.As(err, &rl) || rl.Resource != "time" {
		t.Fatalf("err = %v, want a time limit", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("stopped after %s", d)
	}
}

func TestEnvironment(t *testing.T) {
	requireNative(t)
	requireInterp(t, "bash")
	t.Setenv("NSBOX_TEST_SECRET", "hunter2")
	stdout, _, err := run(t, native, ExecConfig{Language: "bash", Env: map[string]string{"GREETING": "hi"},
		Script: `echo "secret=${NSBOX_TEST_SECRET:-unset} greeting=$GREETING"; env | cut -d= -f1 | sort | tr '\n' ' '`})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout, "secret=unset greeting=hi") {
		t.Fatalf("environment: %q", stdout)
	}
}

func TestNetworkOnlyWithAllowNet(t *testing.T) {
	requireNative(t)
	requireInterp(t, "python")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	code := fmt.Sprintf("import socket\ntry:\n  socket.create_connection((%q, %s), timeout=3); print('connected')\nexcept OSError as e:\n  print('failed', e)", host, port)
	stdout, _, err := run(t, native, ExecConfig{Language: "python", Script: code})
	if err != nil || !strings.HasPrefix(stdout, "failed") {
		t.Fatalf("without AllowNet: %q %v", stdout, err)
	}
	stdout, _, err = run(t, native, ExecConfig{Language: "python", Script: code, AllowNet: true})
	if err != nil || !strings.HasPrefix(stdout, "connected") {
		t.Fatalf("with AllowNet: %q %v", stdout, err)
	}
}

func TestInterpreterNotFound(t *testing.T) {
	requireNative(t)
	empty := t.TempDir()
	_, _, err := run(t, native, ExecConfig{Language: "ruby", Script: "puts 1", Env: map[string]string{"PATH": empty}})
	if !errors.Is(err, sandbox.ErrInterpreterNotFound) || err.Error() != "interpreter not found: ruby" {
		t.Fatalf("err = %v", err)
	}
	_, _, err = run(t, native, ExecConfig{Language: "cobol", Script: "x"})
	if !errors.Is(err, ErrUnsupportedLanguage) {
		t.Fatalf("cobol: %v", err)
	}
}

func TestWorkDirFreshAndRemoved(t *testing.T) {
	requireNative(t)
	requireInterp(t, "bash")
	stdout, _, err := run(t, native, ExecConfig{Language: "bash", Script: "pwd; ls; echo data > out.txt; cat out.txt"})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 3 || lines[1] != "main.sh" || lines[2] != "data" {
		t.Fatalf("work dir: %q", stdout)
	}
	if _, err := os.Stat(lines[0]); !os.IsNotExist(err) {
		t.Fatalf("work dir %s left behind: %v", lines[0], err)
	}
	// WorkDir: an existing directory, writable, kept.
	wd := t.TempDir()
	if _, _, err := run(t, native, ExecConfig{Language: "bash", WorkDir: wd, Script: "echo kept > result.txt"}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(wd, "result.txt")); string(b) != "kept\n" {
		t.Fatalf("WorkDir output: %q", b)
	}
}

func TestNoopSandbox(t *testing.T) {
	requireInterp(t, "bash")
	var sb Sandbox = NoopSandbox{}
	if sb.Warning() == "" || !sb.Available() {
		t.Fatal("NoopSandbox must warn")
	}
	stdout, stderr, err := run(t, sb, ExecConfig{Language: "bash", Script: "echo out; echo err >&2; exit 3"})
	var ee *ExitError
	if stdout != "out\n" || stderr != "err\n" || !errors.As(err, &ee) || ee.Code != 3 {
		t.Fatalf("%q %q %v", stdout, stderr, err)
	}
	_, _, err = run(t, sb, ExecConfig{Language: "bash", Script: "sleep 30", TimeoutSec: 1})
	var rl *sandbox.ResourceLimitError
	if !errors.As(err, &rl) || rl.Resource != "time" {
		t.Fatalf("timeout: %v", err)
	}
	_, _, err = run(t, sb, ExecConfig{Language: "bash", Script: "true", Env: map[string]string{"PATH": t.TempDir()}})
	if !errors.Is(err, sandbox.ErrInterpreterNotFound) {
		t.Fatalf("not found: %v", err)
	}
}

func TestClassify(t *testing.T) {
	cases := []struct{ stderr, op, path, resource string }{
		{"OSError: [Errno 30] Read-only file system: '/etc/x'", "filesystem write", "/etc/x", ""},
		{"Error: EROFS: read-only file system, open '/etc/x'\n  errno: -30", "filesystem write", "/etc/x", ""},
		{"-e:1:in `write': Read-only file system @ rb_sysopen - /etc/x (Errno::EROFS)", "filesystem write", "/etc/x", ""},
		{"main.sh: line 1: /etc/x: Read-only file system", "filesystem write", "/etc/x", ""},
		{"main.sh: 1: cannot create /etc/x: Read-only file system", "filesystem write", "/etc/x", ""},
		{"touch: cannot touch '/usr/x': Read-only file system", "filesystem write", "/usr/x", ""},
		{"mkdir: cannot create directory ‘/usr/x’: Read-only file system", "filesystem write", "/usr/x", ""},
		{"touch: cannot touch '/etc/passwd': Permission denied", "filesystem write", "/etc/passwd", ""},
		{"Traceback...\nMemoryError", "", "", "memory"},
		{"FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory", "", "", "memory"},
		{"main.rb: failed to allocate memory (NoMemoryError)", "", "", "memory"},
		{"main.sh: xrealloc: cannot allocate 63012864 bytes", "", "", "memory"},
	}
	for _, c := range cases {
		err := Classify(c.stderr, "64 MiB")
		var v *sandbox.ViolationError
		var rl *sandbox.ResourceLimitError
		switch {
		case c.op != "" && (!errors.As(err, &v) || v.Operation != c.op || v.Path != c.path):
			t.Errorf("Classify(%q) = %v, want %s %s", c.stderr, err, c.op, c.path)
		case c.resource != "" && (!errors.As(err, &rl) || rl.Resource != c.resource):
			t.Errorf("Classify(%q) = %v, want %s limit", c.stderr, err, c.resource)
		}
	}
	// A read that is denied is not a violation; without a memory limit a
	// MemoryError is the script's own.
	for _, s := range []string{"PermissionError: [Errno 13] Permission denied: '/root/x'", "cat: /root/x: Permission denied", "some error"} {
		if err := Classify(s, "64 MiB"); err != nil {
			t.Errorf("Classify(%q) = %v, want nil", s, err)
		}
	}
	if err := Classify("MemoryError", ""); err != nil {
		t.Errorf("MemoryError without a limit = %v", err)
	}
}
