package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// These tests run the C limit shim (rlimitexec.c) for real: this test binary
// links pkg/sandbox, so it carries the shim's constructor. The shim acts only
// as a child of PID 1, so each run starts the test binary as PID 1 of a new
// PID namespace (the "parent" below), which starts the test binary again
// under the shim's name and hands back its exit code.

// shimParentEnv carries, to the parent, the shim run to perform.
const shimParentEnv = "NSBOX_TEST_LIMIT_SHIM_PARENT"

type shimSpec struct {
	Argv  []string // the shim's argv, argv[0] included
	Env   []string // passed verbatim, duplicates and order kept
	Files int      // fds 3, 4, ... passed on at the same numbers
}

// goStartedCode is the exit code of this test binary when the Go runtime
// started under the shim's name: the C shim left the process to Go.
const goStartedCode = 99

func init() {
	// Without this, a process the shim left to Go would run this binary's
	// tests again, recursively.
	if len(os.Args) > 0 && os.Args[0] == limitExecArg0 {
		fmt.Fprintln(os.Stderr, "Go started under the limit shim's name")
		os.Exit(goStartedCode)
	}
	if spec := os.Getenv(shimParentEnv); spec != "" && os.Getpid() == 1 {
		os.Exit(shimParent(spec))
	}
}

// shimParent is PID 1: it starts the shim as its child and exits with the
// shim's (that is, the command's) status.
func shimParent(encoded string) int {
	var s shimSpec
	if err := json.Unmarshal([]byte(encoded), &s); err != nil {
		fmt.Fprintln(os.Stderr, "shim parent:", err)
		return 98
	}
	files := []uintptr{0, 1, 2}
	for i := 0; i < s.Files; i++ {
		files = append(files, uintptr(3+i))
	}
	pid, err := syscall.ForkExec("/proc/self/exe", s.Argv, &syscall.ProcAttr{Env: s.Env, Files: files})
	if err != nil {
		fmt.Fprintln(os.Stderr, "shim parent:", err)
		return 98
	}
	var ws syscall.WaitStatus
	for {
		_, err = syscall.Wait4(pid, &ws, 0, nil)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "shim parent:", err)
		return 98
	}
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

type shimResult struct {
	code           int
	stdout, stderr string
}

// runShim runs the shim with args (rlimits, cgroup fds, path, command argv)
// and env, files at fds 3, 4, ...
func runShim(t *testing.T, env []string, files []*os.File, args ...string) shimResult {
	t.Helper()
	r := startUnderPID1(t, env, files, append([]string{limitExecArg0}, args...))
	if r.code == goStartedCode {
		t.Fatalf("shim run %q: the C shim left the process to Go", args)
	}
	return r
}

// startUnderPID1 starts this test binary with argv as a child of PID 1.
func startUnderPID1(t *testing.T, env []string, files []*os.File, argv []string) shimResult {
	t.Helper()
	spec, err := json.Marshal(shimSpec{Argv: argv, Env: env, Files: len(files)})
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = []string{shimParentEnv + "=" + string(spec)}
	cmd.ExtraFiles = files
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID, Pdeathsig: syscall.SIGKILL}
	if os.Getuid() != 0 {
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getuid(), HostID: os.Getuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getgid(), HostID: os.Getgid(), Size: 1}}
	}
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start a process as PID 1 of a new PID namespace here: %v", err)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	r := shimResult{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
	if r.code == 98 {
		t.Fatalf("PID 1 could not run %q: %s", argv, r.stderr)
	}
	return r
}

// shimPipe is a stand-in for a cgroup.procs fd: what the shim writes to it
// can be read back.
func shimPipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// drain closes the test's write end and returns what the shim wrote.
func drain(t *testing.T, r, w *os.File) string {
	t.Helper()
	w.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestLimitShimRejectsBadInput(t *testing.T) {
	for _, c := range []struct {
		rlimits, fds, path, arg0 string
		code                     int
		msg                      string
		joined                   bool // "0" written to fd 3 before the failure
	}{
		{"1:2", "3", "/bin/true", "true", 125, `nsbox: bad rlimit "1:2"`, false},
		{"a:b:c", "3", "/bin/true", "true", 125, `nsbox: bad rlimit "a:b:c"`, false},
		{"7:1:2:3", "3", "/bin/true", "true", 125, `nsbox: bad rlimit "7:1:2:3"`, false},
		// strtoull would read "-1" as 2^64-1, RLIM_INFINITY.
		{"7:-1:5", "3", "/bin/true", "true", 125, `nsbox: bad rlimit "7:-1:5"`, false},
		{"7:+1:5", "3", "/bin/true", "true", 125, `nsbox: bad rlimit "7:+1:5"`, false},
		{"7: 1:5", "3", "/bin/true", "true", 125, `nsbox: bad rlimit "7: 1:5"`, false},
		{"7:1:", "3", "/bin/true", "true", 125, `nsbox: bad rlimit "7:1:"`, false},
		{":1:2", "3", "/bin/true", "true", 125, `nsbox: bad rlimit ":1:2"`, false},
		{"7:18446744073709551616:1", "3", "/bin/true", "true", 125, `nsbox: bad rlimit "7:18446744073709551616:1"`, false},
		{"2147483648:1:1", "3", "/bin/true", "true", 125, `nsbox: bad rlimit "2147483648:1:1"`, false},
		// A good item, then a bad one: nothing is applied.
		{"7:64:64,7:1", "3", "/bin/true", "true", 125, `nsbox: bad rlimit "7:1"`, false},
		{"7:1:2\n\x1b", "3", "/bin/true", "true", 125, `nsbox: bad rlimit "7:1:2\n\x1b"`, false},
		{"", "2", "/bin/true", "true", 125, `nsbox: bad cgroup fd "2"`, false},
		{"", "0", "/bin/true", "true", 125, `nsbox: bad cgroup fd "0"`, false},
		{"", "x", "/bin/true", "true", 125, `nsbox: bad cgroup fd "x"`, false},
		{"", "3x", "/bin/true", "true", 125, `nsbox: bad cgroup fd "3x"`, false},
		{"", "-4", "/bin/true", "true", 125, `nsbox: bad cgroup fd "-4"`, false},
		{"", "4294967299", "/bin/true", "true", 125, `nsbox: bad cgroup fd "4294967299"`, false},
		// Every fd is checked before the first is written.
		{"", "3,1", "/bin/true", "true", 125, `nsbox: bad cgroup fd "1"`, false},
		{"", "250", "/bin/true", "true", 125, `nsbox: join the sandbox's cgroup: bad file descriptor`, false},
		{"7:20:10", "3", "/bin/true", "true", 125, `nsbox: set rlimit 7: invalid argument`, true},
		{"", "3", "/nonexistent/nsbox-cmd", "nsbox-cmd", 127, `nsbox: nsbox-cmd: command not found`, true},
		{"", "3", "/nonexistent", "a\nb", 127, `nsbox: a\x0ab: command not found`, true},
		{"", "3", "/etc/passwd", "passwd", 126, `nsbox: passwd: cannot execute: permission denied`, true},
		{"", "3", "/", "/", 126, `nsbox: /: cannot execute: permission denied`, true},
	} {
		r, w := shimPipe(t)
		res := runShim(t, []string{"PATH=/usr/bin:/bin"}, []*os.File{w}, c.rlimits, c.fds, c.path, c.arg0)
		if res.code != c.code || res.stderr != c.msg+"\n" || res.stdout != "" {
			t.Errorf("%q %q %q: code %d stderr %q stdout %q; want %d and %q", c.rlimits, c.fds, c.path, res.code, res.stderr, res.stdout, c.code, c.msg)
		}
		got := drain(t, r, w)
		if want := map[bool]string{true: "0", false: ""}[c.joined]; got != want {
			t.Errorf("%q %q %q: the shim wrote %q to the cgroup fd; want %q", c.rlimits, c.fds, c.path, got, want)
		}
	}
}

func TestLimitShimAppliesLimits(t *testing.T) {
	r, w := shimPipe(t)
	rl := encodeRlimits([]rlimit{
		{Resource: unix.RLIMIT_NOFILE, Cur: 64, Max: 64},
		{Resource: unix.RLIMIT_CORE, Cur: 0, Max: 0},
		{Resource: unix.RLIMIT_CPU, Cur: 3600, Max: 3600},
		{Resource: unix.RLIMIT_DATA, Cur: 1 << 30, Max: 1 << 30},
	})
	res := runShim(t, []string{"PATH=/usr/bin:/bin"}, []*os.File{w}, rl, "3", "/bin/sh",
		"sh", "-c", `cat /proc/self/limits; if [ -e /proc/self/fd/3 ]; then echo "fd 3 open"; fi`)
	if res.code != 0 || res.stderr != "" {
		t.Fatalf("code %d stderr %q", res.code, res.stderr)
	}
	if got := drain(t, r, w); got != "0" {
		t.Errorf("the shim wrote %q to the cgroup fd; want \"0\"", got)
	}
	if strings.Contains(res.stdout, "fd 3 open") {
		t.Error("the cgroup fd reached the command")
	}
	limits := procLimits(t, res.stdout)
	for name, want := range map[string][2]string{
		"Max open files":     {"64", "64"},
		"Max core file size": {"0", "0"},
		"Max cpu time":       {"3600", "3600"},
		"Max data size":      {"1073741824", "1073741824"},
	} {
		if limits[name] != want {
			t.Errorf("%s: %v; want %v", name, limits[name], want)
		}
	}
}

// procLimits parses /proc/PID/limits: name -> {soft, hard}.
func procLimits(t *testing.T, text string) map[string][2]string {
	t.Helper()
	out := map[string][2]string{}
	for _, line := range strings.Split(text, "\n") {
		// Columns: name (25 wide), soft (21), hard (21), units.
		if len(line) < 67 || strings.HasPrefix(line, "Limit ") {
			continue
		}
		f := strings.Fields(line[25:])
		if len(f) >= 2 {
			out[strings.TrimSpace(line[:25])] = [2]string{f[0], f[1]}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no limits in %q", text)
	}
	return out
}

func TestLimitShimPassesTheEnvironmentVerbatim(t *testing.T) {
	env := []string{"PATH=/usr/bin:/bin", "A=1", "B=", "A=2", "LANG=C"}
	res := runShim(t, env, nil, "", "", "/usr/bin/env", "env")
	if res.code != 0 || res.stdout != strings.Join(env, "\n")+"\n" {
		t.Fatalf("code %d stderr %q environment %q; want %q", res.code, res.stderr, res.stdout, env)
	}
	res = runShim(t, nil, nil, "", "", "/usr/bin/env", "env")
	if res.code != 0 || res.stdout != "" {
		t.Fatalf("code %d stderr %q environment %q; want none", res.code, res.stderr, res.stdout)
	}
}

// decodeRlimits states in Go the RLIMITS grammar that rlimitexec.c parses:
// comma-separated "res:cur:max" items, empty items skipped, res as
// strconv.ParseInt(s, 10, 32), cur and max as strconv.ParseUint(s, 10, 64).
func decodeRlimits(s string) ([]rlimit, error) {
	var out []rlimit
	for _, p := range strings.Split(s, ",") {
		if p == "" {
			continue
		}
		f := strings.Split(p, ":")
		if len(f) != 3 {
			return nil, fmt.Errorf("bad rlimit %q", p)
		}
		res, err1 := strconv.ParseInt(f[0], 10, 32)
		cur, err2 := strconv.ParseUint(f[1], 10, 64)
		max, err3 := strconv.ParseUint(f[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("bad rlimit %q", p)
		}
		out = append(out, rlimit{Resource: int(res), Cur: cur, Max: max})
	}
	return out, nil
}

// TestLimitShimParsesAsGo checks that the C parser accepts exactly what
// decodeRlimits accepts: the worker's encoder and the shim agree on one
// grammar, with strconv's rules.
func TestLimitShimParsesAsGo(t *testing.T) {
	for _, in := range []string{
		"", ",", ",,", "7:64:64", "7:64:64,", ",7:64:64", "7:64:64,,4:0:0",
		"+7:64:64", "-1:1:1", "-0:64:64", "007:064:064",
		"7:18446744073709551615:18446744073709551615", "7:18446744073709551616:1",
		"7:-1:1", "7:+1:1", "7: 1:1", "7:1 :1", " 7:1:1", "7:1:1 ", "\t7:1:1",
		"7:0x10:16", "7:1_0:10", "7:1e3:1", "a:1:1", "7:1", "7:1:1:1", "7::1", ":1:1", "7:1:",
		"::", "2147483647:1:1", "2147483648:1:1", "-2147483648:1:1", "-2147483649:1:1",
		"+-7:1:1", "--7:1:1", "+:1:1", "-:1:1", "\u0663:1:1", "7:\uff11:1",
	} {
		_, goErr := decodeRlimits(in)
		res := runShim(t, []string{"PATH=/usr/bin:/bin"}, nil, in, "", "/bin/true", "true")
		cBad := strings.HasPrefix(res.stderr, "nsbox: bad rlimit ")
		if cBad != (goErr != nil) {
			t.Errorf("%q: Go says %v, the shim exited %d with %q", in, goErr, res.code, res.stderr)
		}
	}
}

// TestLimitShimLeavesOtherStarts: the constructor takes over only a child of
// PID 1 named exactly limitExecArg0 with all its arguments; any other start
// reaches Go with nothing done (fd 3, a would-be cgroup fd, stays unwritten).
func TestLimitShimLeavesOtherStarts(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"", "3", "/bin/sh", "sh", "-c", "echo command ran"}
	check := func(what string, res shimResult, r, w *os.File) {
		t.Helper()
		if res.code != goStartedCode || strings.Contains(res.stdout, "command ran") {
			t.Errorf("%s: code %d stdout %q stderr %q; want the Go runtime to start", what, res.code, res.stdout, res.stderr)
		}
		if got := drain(t, r, w); got != "" {
			t.Errorf("%s: %q written to fd 3", what, got)
		}
	}

	// The parent is this test process, not PID 1.
	r, w := shimPipe(t)
	cmd := exec.Command(exe)
	cmd.Args = append([]string{limitExecArg0}, args...)
	cmd.Env = []string{}
	cmd.ExtraFiles = []*os.File{w}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	check("not a child of PID 1", shimResult{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}, r, w)

	// A child of PID 1 without the command argv.
	r, w = shimPipe(t)
	check("a command argv missing", startUnderPID1(t, nil, []*os.File{w}, []string{limitExecArg0, "", "3", "/bin/sh"}), r, w)

	// Other names. The init guard keys on the exact name too, so Go runs
	// this binary's tests, which the first argument (a bad rlimit list for
	// the shim) stops at once: exit 0 from Go, 125 from the shim.
	for _, arg0 := range []string{"/x/" + limitExecArg0, limitExecArg0 + " ", "nsbox-limit-exe"} {
		r, w := shimPipe(t)
		res := startUnderPID1(t, nil, []*os.File{w}, []string{arg0, "-test.run=^$", "3", "/bin/sh", "sh", "-c", "echo command ran"})
		if res.code != 0 || strings.Contains(res.stdout, "command ran") || strings.Contains(res.stderr, "nsbox:") {
			t.Errorf("argv[0] %q: code %d stdout %q stderr %q; want the Go runtime to start", arg0, res.code, res.stdout, res.stderr)
		}
		if got := drain(t, r, w); got != "" {
			t.Errorf("argv[0] %q: %q written to fd 3", arg0, got)
		}
	}
}
