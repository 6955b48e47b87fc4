package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
		begin := time.Now()
		r := u.run(t, nil, "run", "--json-status", "fd:1", "--pids", "32", "--timeout", "60s", "--", "/bin/sh", "-c",
			`i=0; while [ $i -lt 300 ]; do sleep 30 & i=$((i+1)); done 2>/dev/null; wait`)
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
		if left := pidsOfMarker("sleep\x0030\x00"); len(left) > 0 {
			time.Sleep(500 * time.Millisecond)
			if left = pidsOfMarker("sleep\x0030\x00"); len(left) > 0 {
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
			if u.switchTo {
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.gid), Groups: []uint32{}}}
			}
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
			deadline = time.Now().Add(2 * time.Second)
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
