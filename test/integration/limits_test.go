package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// limitMode returns the limit mode a run reports in its started status.
func limitStatus(t *testing.T, out string) (mode string, exited map[string]any) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev map[string]any
		if json.Unmarshal([]byte(line), &ev) != nil {
			continue
		}
		switch ev["event"] {
		case "started":
			if l, ok := ev["limits"].(map[string]any); ok {
				mode, _ = l["mode"].(string)
			}
		case "exited":
			exited = ev
		}
	}
	return mode, exited
}

// leftoverCgroups lists the nsbox groups whose supervisor is dead: what a
// run left behind. Groups of live supervisors are skipped, because the other
// integration packages (session, mcp) run at the same time and hold their
// own groups legitimately.
func leftoverCgroups() []string {
	var out []string
	for _, ctrl := range []string{"memory", "pids", "cpu", "freezer", "unified"} {
		matches, _ := filepath.Glob("/sys/fs/cgroup/" + ctrl + "/**/nsbox-*")
		more, _ := filepath.Glob("/sys/fs/cgroup/" + ctrl + "/*/*/nsbox-*")
		for _, m := range append(matches, more...) {
			if !supervisorAlive(filepath.Base(m)) {
				out = append(out, m)
			}
		}
	}
	return out
}

// supervisorAlive reports whether the pid in a group name "nsbox-<pid>-..."
// is a live process. A name that does not parse counts as dead, so the test
// still fails on it.
func supervisorAlive(name string) bool {
	rest, ok := strings.CutPrefix(name, "nsbox-")
	if !ok {
		return false
	}
	pidStr, _, _ := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(pidStr)
	if err != nil || pid <= 0 {
		return false
	}
	err = syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}

func TestLimitsMemory(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		r := u.run(t, nil, "run", "--json-status", "fd:1", "--memory", "64M", "--", "/bin/sh", "-c", "head -c 400000000 /dev/zero | tail >/dev/null")
		mode, exited := limitStatus(t, r.stdout)
		switch mode {
		case "cgroup1", "cgroup2", "cgroup2-delegated":
			expectCode(t, r, 137)
			if !strings.Contains(r.stderr, "nsbox: killed: memory limit 64 MiB reached") {
				t.Fatalf("stderr %q", r.stderr)
			}
			if exited["reason"] != "oom" || exited["resource"] != "memory" {
				t.Fatalf("exited status %v", exited)
			}
		case "rlimit":
			if r.code == 0 {
				t.Fatalf("the memory hog was not contained by rlimits: %q", r.stderr)
			}
			if !strings.Contains(r.stderr, "limits are enforced by rlimits, not cgroups") {
				t.Fatalf("no rlimit warning: %q", r.stderr)
			}
		default:
			t.Fatalf("limit mode %q (stdout %q)", mode, r.stdout)
		}
	})
	if left := leftoverCgroups(); len(left) > 0 {
		t.Fatalf("cgroups left behind: %v", left)
	}
}

func TestLimitsPidsStopForkBomb(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		// A sleep time no other test uses: test packages run side by side,
		// and this one counts survivors by command line.
		marker := strconv.Itoa(800000 + os.Getpid()%100000)
		begin := time.Now()
		r := u.run(t, nil, "run", "--json-status", "fd:1", "--pids", "32", "--timeout", "60s", "--", "/bin/sh", "-c",
			`i=0; while [ $i -lt 300 ]; do sleep `+marker+` & i=$((i+1)); done 2>/dev/null; wait`)
		mode, exited := limitStatus(t, r.stdout)
		if time.Since(begin) > 45*time.Second || r.code == 124 {
			t.Fatalf("the fork bomb was not stopped (%s, code %d)", time.Since(begin), r.code)
		}
		switch mode {
		case "cgroup1", "cgroup2", "cgroup2-delegated":
			if exited["reason"] != "pids" {
				t.Fatalf("exited status %v, stderr %q", exited, r.stderr)
			}
		case "rlimit":
			if !strings.Contains(r.stderr, "limits are enforced by rlimits") {
				t.Fatalf("no rlimit warning: %q", r.stderr)
			}
		}
		// Nothing of the bomb survives nsbox.
		if left := pidsOfMarker("sleep\x00" + marker + "\x00"); len(left) > 0 {
			time.Sleep(500 * time.Millisecond)
			if left = pidsOfMarker("sleep\x00" + marker + "\x00"); len(left) > 0 {
				t.Fatalf("processes survived: %v", left)
			}
		}
	})
}

func TestLimitsTimeoutKillsWholeSandbox(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		marker := fmt.Sprintf("%d", 555000+os.Getpid()%1000)
		begin := time.Now()
		r := u.run(t, nil, "run", "--json-status", "fd:1", "--timeout", "1s", "--", "/bin/sh", "-c", "sleep "+marker+" & sleep "+marker)
		expectCode(t, r, 124)
		if d := time.Since(begin); d > 5*time.Second {
			t.Fatalf("--timeout 1s returned after %s", d)
		}
		if _, exited := limitStatus(t, r.stdout); exited["reason"] != "timeout" {
			t.Fatalf("exited status %v", exited)
		}
		if left := pidsOfMarker("sleep\x00" + marker); len(left) > 0 {
			t.Fatalf("processes survived the timeout: %v", left)
		}
	})
}

func TestLimitsBadInput(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		for _, args := range [][]string{
			{"--memory", "0"}, {"--memory", "12XB"}, {"--pids", "-1"}, {"--timeout", "abc"},
			{"--memory", "1M"}, {"--pids", "2"}, {"--cpu", "-1"},
		} {
			r := u.run(t, nil, append(append([]string{"run"}, args...), "--", "/bin/true")...)
			if r.code != 125 || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 || !strings.HasPrefix(r.stderr, "nsbox: ") {
				t.Errorf("%v: code %d stderr %q, want 125 and one line", args, r.code, r.stderr)
			}
		}
	})
}

// TestSignalsToNsboxCleanUp: SIGINT or SIGTERM to nsbox, or SIGKILL of it,
// leaves no process of the sandbox and no cgroup behind.
func TestSignalsToNsboxCleanUp(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGKILL} {
			marker := fmt.Sprintf("%d", 444000+int(sig)*10+os.Getpid()%10)
			cmd := exec.Command(nsboxBin(t), "run", "--memory", "128M", "--", "/bin/sh", "-c", "setsid sleep "+marker+" & sleep "+marker)
			cmd.Dir = "/"
			cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + u.home()}
			u.asUser(cmd)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for len(pidsOfMarker("sleep\x00"+marker)) < 2 {
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					cmd.Wait()
					t.Fatalf("%v: the sandbox did not start", sig)
				}
				time.Sleep(10 * time.Millisecond)
			}
			cmd.Process.Signal(sig)
			cmd.Wait()
			deadline = time.Now().Add(10 * time.Second) // a leak guard, not a timing check
			for len(pidsOfMarker("sleep\x00"+marker)) > 0 {
				if time.Now().After(deadline) {
					t.Fatalf("%v: sandbox processes survived nsbox: %v", sig, pidsOfMarker("sleep\x00"+marker))
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		// A SIGKILLed nsbox cannot remove its cgroup; the next run does.
		u.run(t, nil, "run", "--memory", "128M", "--", "/bin/true")
		if left := leftoverCgroups(); len(left) > 0 {
			t.Fatalf("cgroups left behind: %v", left)
		}
	})
}

// TestLimitsApplyToTheCommandOnly: a command under limits is in the
// sandbox's limited cgroup(s) or has the rlimits, while PID 1 (the worker)
// is not in the group, and no cgroup fd reaches the command.
func TestLimitsApplyToTheCommandOnly(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		r := u.run(t, nil, "run", "--json-status", "fd:2", "--memory", "64M", "--pids", "32", "--", "/bin/sh", "-c",
			`cat /proc/self/cgroup; echo @; cat /proc/1/cgroup; echo @; cat /proc/self/limits; echo @; ls -l /proc/$$/fd/`)
		expectCode(t, r, 0)
		parts := strings.Split(r.stdout, "@\n")
		if len(parts) != 4 {
			t.Fatalf("stdout %q", r.stdout)
		}
		self, worker, limits, fds := cgroupPaths(parts[0]), cgroupPaths(parts[1]), parts[2], parts[3]
		if strings.Contains(fds, "cgroup") {
			t.Errorf("a cgroup file is open in the command: %q", fds)
		}
		if soft, hard := limitOf(limits, "Max core file size"); soft != "0" || hard != "0" {
			t.Errorf("RLIMIT_CORE is not 0: %q", limits)
		}
		mode, _ := limitStatus(t, r.stderr)
		switch mode {
		case "cgroup1", "cgroup2", "cgroup2-delegated":
			keys := []string{"memory", "pids"}
			if mode != "cgroup1" {
				keys = []string{""}
			}
			for _, k := range keys {
				if !strings.Contains(self[k], "nsbox-") {
					t.Errorf("%s: the command is in %q (%q), not the sandbox's group", mode, self[k], k)
				}
				// A systemd scope can only be made around a process: there
				// the worker is in the group too (limiter.join).
				if self[k] == worker[k] && !strings.Contains(r.stderr, "systemd scope") {
					t.Errorf("%s: the worker shares the command's group %q", mode, self[k])
				}
			}
		case "rlimit":
			if soft, hard := limitOf(limits, "Max data size"); soft != "67108864" || hard != soft {
				t.Errorf("RLIMIT_DATA is not 64 MiB: %q", limits)
			}
			// 32, plus the worker's threads, which the kernel counts too.
			soft, hard := limitOf(limits, "Max processes")
			if n, err := strconv.Atoi(soft); err != nil || n < 32 || n > 32+100 || hard != soft {
				t.Errorf("RLIMIT_NPROC is not 32 plus a few threads: %q", limits)
			}
			for k, p := range self {
				if strings.Contains(p, "nsbox-") {
					t.Errorf("rlimit mode, yet the command is in group %q (%q)", p, k)
				}
			}
		default:
			t.Fatalf("limit mode %q (stderr %q)", mode, r.stderr)
		}
	})
}

// cgroupPaths parses /proc/PID/cgroup: each controller ("" for cgroup v2)
// to its path.
func cgroupPaths(text string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			out[c] = f[2]
		}
	}
	return out
}

// limitOf returns the soft and hard values of the line name in
// /proc/PID/limits.
func limitOf(limits, name string) (soft, hard string) {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` +(\S+) +(\S+)`)
	if m := re.FindStringSubmatch(limits); m != nil {
		return m[1], m[2]
	}
	return "", ""
}

// TestLimitShimOfTheBinary: the shim of the built binary, started by hand
// as a child of the sandbox's PID 1 (a shell exec'ing it under the shim's
// name), refuses bad arguments with one line and exit 125, and reports a
// command it cannot run with 126 or 127, as nsbox does.
func TestLimitShimOfTheBinary(t *testing.T) {
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Skip("needs /bin/bash (exec -a): ", err)
	}
	bin := nsboxBin(t)
	eachUser(t, func(t *testing.T, u user) {
		for _, c := range []struct {
			args string
			code int
			msg  string
		}{
			{`7:1 '' /bin/true true`, 125, `nsbox: bad rlimit "7:1"`},
			{`7:-1:64 '' /bin/true true`, 125, `nsbox: bad rlimit "7:-1:64"`},
			{`7:20:10 '' /bin/true true`, 125, `nsbox: set rlimit 7: invalid argument`},
			{`'' 1 /bin/true true`, 125, `nsbox: bad cgroup fd "1"`},
			{`'' x /bin/true true`, 125, `nsbox: bad cgroup fd "x"`},
			{`'' 250 /bin/true true`, 125, `nsbox: join the sandbox's cgroup: bad file descriptor`},
			{`'' '' /nonexistent/nsbox-cmd nsbox-cmd`, 127, `nsbox: nsbox-cmd: command not found`},
			{`'' '' /etc/passwd passwd`, 126, `nsbox: passwd: cannot execute: permission denied`},
			{`7:64:64 '' /bin/sh sh -c 'ulimit -n'`, 0, ``},
		} {
			// The binary is bound at a fixed path: the checkout may be
			// anywhere, also under /tmp, which is private inside.
			r := u.run(t, nil, "run", "--ro", bin+":/tmp/nsbox-under-test", "--", "/bin/bash", "-c", "exec -a nsbox-limit-exec /tmp/nsbox-under-test "+c.args)
			if c.code == 0 {
				if r.code != 0 || r.stdout != "64\n" {
					t.Errorf("%s: code %d stdout %q stderr %q; want 64 open files", c.args, r.code, r.stdout, r.stderr)
				}
				continue
			}
			if r.code != c.code || r.stderr != c.msg+"\n" {
				t.Errorf("%s: code %d stderr %q; want %d and %q", c.args, r.code, r.stderr, c.code, c.msg)
			}
		}
	})
}

// TestLimitShimNameOutsideTheSandbox: started under the shim's name by a
// process other than a sandbox's PID 1, the binary is the plain CLI: it
// runs no command and writes nothing to the fd it is handed.
func TestLimitShimNameOutsideTheSandbox(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	cmd := exec.Command(nsboxBin(t))
	cmd.Args = []string{"nsbox-limit-exec", "", "3", "/bin/sh", "sh", "-c", "echo command ran"}
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{pw}
	out, _ := cmd.CombinedOutput()
	pw.Close()
	written, _ := io.ReadAll(pr)
	if strings.Contains(string(out), "command ran") || cmd.ProcessState.ExitCode() != 125 || !strings.HasPrefix(string(out), "nsbox: unknown command") {
		t.Errorf("code %d output %q; want the CLI's unknown command", cmd.ProcessState.ExitCode(), out)
	}
	if len(written) != 0 {
		t.Errorf("%q written to fd 3", written)
	}
}
