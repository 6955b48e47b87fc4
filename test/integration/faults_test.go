package integration

import (
	"encoding/json"
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
// its command runs is killed workerGrace after the command's timeout.
func TestFaultsSilentWorkerIsKilled(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		cmd := exec.Command(nsboxBin(t), "run", "--timeout", "2s", "--", "sleep", "300")
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + u.home()}
		cmd.Dir = "/"
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if u.switchTo {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.gid), Groups: []uint32{}}}
		}
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
		select {
		case <-done:
		case <-time.After(2 * time.Minute): // deadlock guard
			cmd.Process.Kill()
			syscall.Kill(worker, syscall.SIGKILL)
			t.Fatal("nsbox still waits on a stopped worker")
		}
		if cmd.ProcessState.ExitCode() == 0 || !strings.Contains(stderr.String(), "did not answer") {
			t.Fatalf("exit %d, stderr %s", cmd.ProcessState.ExitCode(), stderr.String())
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
