package integration

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nsbox/nsbox/pkg/seccomp"
)

// Fault injection (issue 21): damaged stores, killing seccomp profiles,
// killed supervisors and small contract gaps never crash, hang or leak.
// The byte-level damage of stores (every 5 % truncation, flipped bytes in
// headers, meta and data pages) is covered by pkg/hostapi/store's
// TestTruncatedStoreNeverCrashes and TestFlippedBytesNeverCrash; here the
// CLI's side of it.

// noCrash fails when nsbox's output shows a Go crash.
func noCrash(t *testing.T, r result) {
	t.Helper()
	for _, s := range []string{"goroutine ", "SIGSEGV", "SIGBUS", "panic:", "fatal error:"} {
		if strings.Contains(r.stderr, s) {
			t.Fatalf("nsbox crashed (%q in its output): exit %d\n%s", s, r.code, r.stderr)
		}
	}
}

func TestFaultsTruncatedStore(t *testing.T) {
	for _, u := range users() {
		u := u
		t.Run(u.name, func(t *testing.T) {
			src := u.tempDir(t)
			seedStores(t, src)
			chownTree(t, src, u)
			for _, name := range []string{"notepad.db", "memory.db"} {
				img, err := os.ReadFile(filepath.Join(src, name))
				if err != nil {
					t.Fatal(err)
				}
				cmd := strings.TrimSuffix(name, ".db")
				whole := u.run(t, nil, cmd, "list", "--data-dir", src)
				expectCode(t, whole, 0)
				for pct := 10; pct <= 95; pct += 5 {
					d := filepath.Join(u.tempDir(t), "data")
					os.Mkdir(d, 0o700)
					path := filepath.Join(d, name)
					os.WriteFile(path, img[:len(img)*pct/100], 0o600)
					chownTree(t, d, u)
					r := u.run(t, nil, cmd, "list", "--data-dir", d)
					noCrash(t, r)
					// bbolt grows its file ahead of use: a cut that keeps every
					// page in use loses nothing and must read the same.
					intact := r.code == 0 && r.stdout == whole.stdout
					if !intact && (r.code != 1 || !strings.Contains(r.stderr, path) || !strings.Contains(r.stderr, "unreadable")) {
						t.Fatalf("%s truncated to %d%%: exit %d, want 1 and an error naming the file\n%s", name, pct, r.code, r.stderr)
					}
					if pct != 10 {
						continue
					}
					// Asked to, nsbox moves the file aside and the store
					// starts anew.
					r = u.run(t, nil, cmd, "list", "--data-dir", d, "--move-corrupt-aside")
					noCrash(t, r)
					moved, _ := filepath.Glob(path + ".corrupt-*")
					if r.code != 1 || len(moved) != 1 || !strings.Contains(r.stderr, moved[0]) {
						t.Fatalf("--move-corrupt-aside: exit %d, moved %v\n%s", r.code, moved, r.stderr)
					}
					expectCode(t, u.run(t, nil, cmd, "list", "--data-dir", d), 0)
				}
			}
		})
	}
}

// A profile that kills (or fails) a call the worker makes under the filter
// is refused before anything starts, naming the call and the file; it used
// to hang nsbox until SIGKILL.
func TestFaultsKillingSeccompProfileRefused(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		dir := u.tempDir(t)
		for name, js := range map[string]string{
			"getpid":  `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["getpid"],"action":"SCMP_ACT_KILL"}]}`,
			"default": `{"defaultAction":"SCMP_ACT_KILL"}`,
			"execve":  `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["execve"],"action":"SCMP_ACT_ERRNO"}]}`,
		} {
			prof := filepath.Join(dir, name+".json")
			u.writeFile(t, prof, js, 0o644)
			// The harness's deadline is the deadlock guard.
			r := u.run(t, &runOpts{timeout: 90 * time.Second}, "run", "--seccomp", prof, "--timeout", "2s", "--", "/bin/true")
			noCrash(t, r)
			if r.code != 125 || !strings.Contains(r.stderr, prof) || !strings.Contains(r.stderr, "worker calls") {
				t.Fatalf("%s: exit %d, want 125 naming the profile and the call\n%s", name, r.code, r.stderr)
			}
			if name != "default" && !strings.Contains(r.stderr, "denies "+name) {
				t.Fatalf("%s: the message does not name the call: %s", name, r.stderr)
			}
		}
	})
}

// The table of what the worker needs is enough: a sandbox whose profile
// allows only seccomp.WorkerNeeds, and what /bin/true's own start calls
// (the dynamic loader), runs it; every other call fails with EPERM. A call
// the worker needs and the table misses fails the run (or hangs it, until
// the harness's guard).
func TestFaultsWorkerNeedsSuffice(t *testing.T) {
	names := map[string]bool{}
	for _, n := range seccomp.WorkerNeeds {
		names[n.Name] = true
	}
	for _, n := range []string{"access", "newfstatat", "fstat", "pread64", "mprotect", "openat", "close", "read"} {
		names[n] = true // /bin/true's loader and libc start
	}
	var list []string
	for n := range names {
		list = append(list, n)
	}
	prof, _ := json.Marshal(map[string]any{
		"defaultAction": "SCMP_ACT_ERRNO",
		"syscalls":      []map[string]any{{"names": list, "action": "SCMP_ACT_ALLOW"}},
	})
	for _, limited := range []bool{false, true} {
		eachUser(t, func(t *testing.T, u user) {
			p := filepath.Join(u.tempDir(t), "min.json")
			u.writeFile(t, p, string(prof), 0o644)
			args := []string{"run", "--seccomp", p}
			if limited { // commands start through the limit shim
				args = append(args, "--memory", "256M", "--pids", "64")
			}
			r := u.run(t, &runOpts{timeout: 90 * time.Second}, append(args, "--", "/bin/true")...)
			noCrash(t, r)
			expectCode(t, r, 0)
		})
	}
}

// The supervisor never waits forever on a silent worker: one stopped while
// its command runs is killed workerGrace after the command's timeout, or
// after nsbox got SIGTERM (which it then dies of, as documented).
func TestFaultsSilentWorkerIsKilled(t *testing.T) {
	for _, how := range []string{"timeout", "sigterm"} {
		t.Run(how, func(t *testing.T) { silentWorker(t, how) })
	}
}

func silentWorker(t *testing.T, how string) {
	eachUser(t, func(t *testing.T, u user) {
		args := []string{"run", "--", "sleep", "300"}
		if how == "timeout" {
			args = []string{"run", "--timeout", "2s", "--", "sleep", "300"}
		}
		cmd := exec.Command(nsboxBin(t), args...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + u.home()}
		cmd.Dir = "/"
		var stderr strings.Builder
		cmd.Stderr = &stderr
		u.asUser(cmd)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		// The worker is nsbox's child; stop it once sleep runs under it.
		var worker int
		for i := 0; i < 600 && worker == 0; i++ {
			time.Sleep(100 * time.Millisecond)
			if w := childOf(cmd.Process.Pid); w > 0 && childOf(w) > 0 {
				worker = w
			}
		}
		if worker == 0 {
			cmd.Process.Kill()
			t.Fatal("no worker with a command appeared")
		}
		syscall.Kill(worker, syscall.SIGSTOP)
		if how == "sigterm" {
			cmd.Process.Signal(syscall.SIGTERM)
		}
		select {
		case <-done:
		case <-time.After(2 * time.Minute): // deadlock guard
			cmd.Process.Kill()
			syscall.Kill(worker, syscall.SIGKILL)
			t.Fatal("nsbox still waits on a stopped worker")
		}
		ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
		switch {
		case how == "timeout" && (cmd.ProcessState.ExitCode() == 0 || !strings.Contains(stderr.String(), "did not answer")):
			t.Fatalf("exit %d, stderr %s", cmd.ProcessState.ExitCode(), stderr.String())
		case how == "sigterm" && !(ws.Signaled() && ws.Signal() == syscall.SIGTERM) && ws.ExitStatus() != 128+int(syscall.SIGTERM):
			t.Fatalf("after SIGTERM: %v, want death by SIGTERM; stderr %s", cmd.ProcessState, stderr.String())
		}
		if _, err := os.Stat("/proc/" + strconv.Itoa(worker)); err == nil {
			t.Fatalf("worker %d still exists", worker)
		}
	})
}

// childOf returns one child of pid, or 0.
func childOf(pid int) int {
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		if fs := strings.Fields(string(b)); len(fs) > 0 {
			n, _ := strconv.Atoi(fs[0])
			return n
		}
	}
	return 0
}

// cgroupsOf lists the cgroup directories named after supervisor pid.
func cgroupsOf(pid int) []string {
	prefix := "nsbox-" + strconv.Itoa(pid) + "-"
	var found []string
	filepath.WalkDir("/sys/fs/cgroup", func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if strings.HasPrefix(d.Name(), prefix) {
			found = append(found, p)
			return filepath.SkipDir
		}
		if strings.Count(p, "/") > 8 {
			return filepath.SkipDir
		}
		return nil
	})
	return found
}

// startKillable starts nsbox as u with args and returns it once its worker
// runs a command.
func startKillable(t *testing.T, u user, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(nsboxBin(t), args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + u.home()}
	cmd.Dir = "/"
	u.asUser(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 600; i++ {
		if w := childOf(cmd.Process.Pid); w > 0 && childOf(w) > 0 {
			return cmd
		}
		time.Sleep(100 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
	t.Fatal("no command started")
	return nil
}

// A supervisor killed with SIGKILL cannot remove its cgroups: the next run,
// with limits or without, and nsbox status remove them.
func TestFaultsKilledRunLeavesNoCgroup(t *testing.T) {
	for _, next := range [][]string{{"run", "--", "/bin/true"}, {"status"}} {
		eachUser(t, func(t *testing.T, u user) {
			cmd := startKillable(t, u, "run", "--memory", "128M", "--pids", "64", "--", "sleep", "300")
			pid := cmd.Process.Pid
			groups := cgroupsOf(pid)
			if len(groups) == 0 {
				cmd.Process.Kill()
				cmd.Wait()
				t.Skipf("limits are not enforced with cgroups for %s here (rlimits): no group to leave", u.name)
			}
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			if left := cgroupsOf(pid); len(left) == 0 {
				t.Fatalf("the killed run's groups %v were gone before any other run: the test shows nothing", groups)
			}
			r := u.run(t, nil, next...)
			noCrash(t, r)
			if left := cgroupsOf(pid); len(left) > 0 {
				t.Fatalf("after nsbox %s, the killed run's groups are still there: %v\n%s", next[0], left, r.stderr)
			}
		})
	}
}

// The working directory falls back to / when the current directory is not
// visible inside (a directory under the host's /tmp, which is private), as
// the README says; a --cwd the user named is still refused when missing.
func TestFaultsCwdFallsBackWhenNotVisible(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		dir := u.tempDir(t) // under the host's /tmp
		r := u.run(t, &runOpts{dir: dir}, "run", "--profile", "strict", "--", "pwd")
		expectCode(t, r, 0)
		if strings.TrimSpace(r.stdout) != "/" {
			t.Fatalf("working directory %q, want /", r.stdout)
		}
		r = u.run(t, &runOpts{dir: dir}, "run", "--profile", "strict", "--cwd", dir, "--", "pwd")
		if r.code != 125 || !strings.Contains(r.stderr, dir) {
			t.Fatalf("an explicit --cwd that is not visible: exit %d, want 125\n%s", r.code, r.stderr)
		}
	})
}

// --json-status takes a regular file on a disk, fd:N and /dev/stderr; a file
// of /proc (which calls itself regular) is refused before anything starts.
func TestFaultsJSONStatusRefusesPseudoFiles(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		for _, bad := range []string{"/proc/self/status", "/proc/self/comm"} {
			r := u.run(t, nil, "run", "--json-status", bad, "--", "/bin/true")
			// Root may open them for writing; nobody gets EACCES first.
			if r.code != 125 || !strings.Contains(r.stderr, bad) || (u.uid == 0 && !strings.Contains(r.stderr, "not a regular file")) {
				t.Fatalf("--json-status %s: exit %d, want 125\n%s", bad, r.code, r.stderr)
			}
		}
		r := u.run(t, nil, "run", "--json-status", "/dev/stderr", "--", "/bin/true")
		expectCode(t, r, 0)
		if !strings.Contains(r.stderr, `"event":"exited"`) {
			t.Fatalf("--json-status /dev/stderr wrote no status: %s", r.stderr)
		}
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		r = u.run(t, &runOpts{extraFiles: []*os.File{pw}}, "run", "--json-status", "fd:3", "--", "/bin/true")
		pw.Close()
		b, _ := io.ReadAll(pr)
		pr.Close()
		expectCode(t, r, 0)
		if !strings.Contains(string(b), `"event":"exited"`) {
			t.Fatalf("--json-status fd:3 wrote %q", b)
		}
		f := filepath.Join(u.tempDir(t), "status.jsonl")
		expectCode(t, u.run(t, nil, "run", "--json-status", f, "--", "/bin/true"), 0)
		if b, _ := os.ReadFile(f); !strings.Contains(string(b), `"event":"exited"`) {
			t.Fatalf("--json-status FILE wrote %q", b)
		}
	})
}

// Where rlimits enforce --memory, nsbox status says plainly that shared
// memory is not counted (RLIMIT_DATA counts private writable mappings only).
func TestFaultsRlimitMemoryGapIsStated(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		r := u.run(t, nil, "status")
		if !strings.Contains(r.stdout, "memory=rlimit") {
			t.Skipf("cgroups enforce --memory for %s here; the rlimit gap does not apply", u.name)
		}
		if !strings.Contains(r.stdout, "MAP_SHARED anonymous mappings, memfd, System V shm — is NOT counted") {
			t.Fatalf("nsbox status does not state the rlimit memory gap:\n%s", r.stdout)
		}
	})
}
