package session

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// memoryHog allocates and touches 400 MiB.
const memoryHog = `head -c 400000000 /dev/zero | tail > /dev/null`

func TestMemoryLimit(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		s := start(t, sandbox.Policy{Limits: sandbox.Limits{Memory: 64 << 20}})
		info := s.Limits()
		res, err := s.Exec(context.Background(), sandbox.Command{Argv: []string{"/bin/sh", "-c", memoryHog}})
		switch info.Mode {
		case "cgroup1", "cgroup2", "cgroup2-delegated":
			var rl *sandbox.ResourceLimitError
			if !errors.As(err, &rl) || rl.Resource != "memory" || res.Reason != sandbox.ReasonOOM {
				t.Fatalf("%s: err %v reason %q exit %d", info.Mode, err, res.Reason, res.ExitCode)
			}
			if rl.Error() != "killed: memory limit 64 MiB reached" {
				t.Fatalf("message %q", rl.Error())
			}
		case "rlimit":
			// RLIMIT_AS makes the allocation fail instead: contained, and
			// the session says which mechanism did it.
			if err != nil || res.ExitCode == 0 {
				t.Fatalf("rlimit: the memory hog was not contained: err %v exit %d", err, res.ExitCode)
			}
			if !strings.HasPrefix(info.Enforcement["memory"], "rlimit") {
				t.Fatalf("enforcement %v", info.Enforcement)
			}
		default:
			t.Fatalf("limits not enforced: mode %q (%s)", info.Mode, info.Reason)
		}
		// The session survives and works within the limit.
		if r := sh(t, s, "echo ok"); strings.TrimSpace(string(r.Stdout)) != "ok" {
			t.Fatal("session broken after the memory limit")
		}
	})
}

func TestPidsLimitStopsForkBomb(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		s := start(t, sandbox.Policy{Limits: sandbox.Limits{Pids: 32}})
		info := s.Limits()
		begin := time.Now()
		res, err := s.Exec(context.Background(), sandbox.Command{
			Argv:    []string{"/bin/sh", "-c", `i=0; while [ $i -lt 300 ]; do (sleep 20 &) 2>/dev/null; sleep 20 & i=$((i+1)); done 2>/dev/null; echo forked`},
			Timeout: 30 * time.Second,
		})
		switch info.Mode {
		case "cgroup1", "cgroup2", "cgroup2-delegated":
			var rl *sandbox.ResourceLimitError
			if !errors.As(err, &rl) || rl.Resource != "pids" || res.Reason != sandbox.ReasonPids {
				t.Fatalf("%s: err %v reason %q", info.Mode, err, res.Reason)
			}
		case "rlimit":
			if errors.Is(err, sandbox.ErrResourceLimit) && !strings.Contains(err.Error(), "time") {
				t.Fatalf("rlimit: unexpected %v", err)
			}
		}
		if d := time.Since(begin); d > 25*time.Second {
			t.Fatalf("the fork bomb ran for %s", d)
		}
		// The bomb's processes fill the session: the next command is
		// refused with the same typed reason, not a mystery errno.
		if _, err := s.Exec(context.Background(), sandbox.Command{Argv: []string{"/bin/true"}}); err != nil && !errors.Is(err, sandbox.ErrResourceLimit) {
			t.Fatalf("next command: %v", err)
		}
		// The host stays responsive: a trivial process starts at once.
		t0 := time.Now()
		if err := exec1("/bin/true"); err != nil || time.Since(t0) > 5*time.Second {
			t.Fatalf("host unresponsive: %v %s", err, time.Since(t0))
		}
	})
}

func TestTimeoutKillsEverything(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		s := start(t, sandbox.Policy{Limits: sandbox.Limits{Time: time.Second}})
		begin := time.Now()
		_, err := s.Exec(context.Background(), sandbox.Command{Argv: []string{"/bin/sh", "-c", "sleep 100 & sleep 100"}})
		if !errors.Is(err, sandbox.ErrResourceLimit) {
			t.Fatalf("err %v", err)
		}
		// That the timeout ended the command and not the sleeps: a
		// guard far above the limit (a loaded machine can be slow).
		if d := time.Since(begin); d > 30*time.Second {
			t.Fatalf("timeout of 1s took %s", d)
		}
		if r := sh(t, s, "ps -o comm= 2>/dev/null | grep -c sleep || ls /proc | grep -c '^[0-9]'"); strings.Contains(string(r.Stdout), "sleep") {
			t.Fatalf("left after timeout: %q", r.Stdout)
		}
	})
}

func TestLimitValidation(t *testing.T) {
	for _, l := range []sandbox.Limits{{Memory: 1 << 20}, {Pids: 2}, {Memory: -1}, {CPU: -1}} {
		if _, err := sandbox.Start(context.Background(), sandbox.Policy{Limits: l}); !errors.Is(err, sandbox.ErrInvalidPolicy) {
			t.Errorf("limits %+v: %v, want ErrInvalidPolicy", l, err)
		}
	}
}

func exec1(path string) error {
	p, err := os.StartProcess(path, []string{path}, &os.ProcAttr{})
	if err != nil {
		return err
	}
	_, err = p.Wait()
	return err
}

// shimPoller watches the sandbox for limit shims (argv[0]
// nsbox-limit-exec) and tries to open each one's /proc/PID/exe, which is
// the nsbox binary: it records "writable" when it got a handle on a
// writable mount, the errno when the open failed, until /tmp/stop exists.
const shimPoller = `
import os, errno
seen = {}
while not os.path.exists("/tmp/stop"):
    for p in os.listdir("/proc"):
        if not p.isdigit() or p in seen:
            continue
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                if not f.read().startswith(b"nsbox-limit-exec\0"):
                    continue
            fd = os.open("/proc/%s/exe" % p, os.O_RDONLY)
        except OSError as e:
            if e.errno != errno.ENOENT:
                seen[p] = errno.errorcode.get(e.errno, str(e.errno))
            continue
        seen[p] = "read-only" if os.fstatvfs(fd).f_flag & os.ST_RDONLY else "writable"
        os.close(fd)
with open("/tmp/seen", "w") as f:
    f.write(" ".join(sorted(seen.values())))
`

// TestLimitShimBinaryNotWritable: the shim that puts a command under its
// limits is the nsbox binary re-executed. Another process of the sandbox
// must not get from its /proc/PID/exe a handle of the host's binary on a
// writable mount, which it could keep and write once nothing executes the
// binary any more.
func TestLimitShimBinaryNotWritable(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed: it watches for the shims")
	}
	eachUser(t, func(t *testing.T) {
		s := start(t, sandbox.Policy{Limits: sandbox.Limits{Pids: 200}})
		ctx := context.Background()
		if _, err := s.Exec(ctx, sandbox.Command{Argv: []string{"/bin/sh", "-c", "python3 -c '" + shimPoller + "' >/dev/null 2>&1 &"}}); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 300; i++ {
			if _, err := s.Exec(ctx, sandbox.Command{Argv: []string{"/bin/true"}}); err != nil {
				t.Fatal(err)
			}
		}
		r := sh(t, s, "touch /tmp/stop; while [ ! -e /tmp/seen ]; do sleep 0.01; done; cat /tmp/seen")
		seen := strings.Fields(string(r.Stdout))
		t.Logf("%d shims caught: %v", len(seen), seen)
		for _, v := range seen {
			if v == "writable" {
				t.Fatalf("a process in the sandbox got a handle of the nsbox binary on a writable mount from a shim's /proc/PID/exe")
			}
		}
	})
}

// cgroupLimits skips a test whose limits are not enforced by a cgroup here:
// only a cgroup counts OOM kills and refused forks.
func cgroupLimits(t *testing.T, s *sandbox.Session) {
	t.Helper()
	switch info := s.Limits(); info.Mode {
	case "cgroup1", "cgroup2", "cgroup2-delegated":
	default:
		t.Skipf("limits are enforced by %q here, not a cgroup (%s)", info.Mode, info.Reason)
	}
}

// TestOOMOfAnotherProcessIsNotBlamedOnCleanExit: the cgroup's OOM count
// covers every process of the sandbox. A command that exits 0 while a
// process left by an earlier command is OOM-killed ended cleanly.
func TestOOMOfAnotherProcessIsNotBlamedOnCleanExit(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		s := start(t, sandbox.Policy{Limits: sandbox.Limits{Memory: 64 << 20}})
		cgroupLimits(t, s)
		sh(t, s, "(sleep 0.3; "+memoryHog+"; echo $? > /tmp/hog) >/dev/null 2>&1 &")
		// Runs until the hog has ended (however long the OOM kill takes
		// on a loaded machine), then exits 0.
		res, err := s.Exec(context.Background(), sandbox.Command{Argv: []string{"/bin/sh", "-c", "while [ ! -s /tmp/hog ]; do sleep 0.05; done"}, Timeout: time.Minute})
		if err != nil || res.Reason != sandbox.ReasonExited || res.ExitCode != 0 {
			t.Fatalf("a clean exit was blamed for another process's OOM kill: err %v reason %q exit %d", err, res.Reason, res.ExitCode)
		}
		// The background hog was OOM-killed meanwhile (else this test
		// proves nothing).
		r := sh(t, s, "cat /tmp/hog")
		if got := strings.TrimSpace(string(r.Stdout)); got != "137" {
			t.Fatalf("the background memory hog ended with %q, want 137 (OOM-killed)", got)
		}
		// A command that is itself OOM-killed still gets the reason.
		res, err = s.Exec(context.Background(), sandbox.Command{Argv: []string{"/bin/sh", "-c", memoryHog}})
		var rl *sandbox.ResourceLimitError
		if !errors.As(err, &rl) || rl.Resource != "memory" || res.Reason != sandbox.ReasonOOM {
			t.Fatalf("OOM-killed command: err %v reason %q exit %d", err, res.Reason, res.ExitCode)
		}
		// So does one that fails because its child was (make, npm and
		// pytest exit 2 or 1, not 137).
		res, err = s.Exec(context.Background(), sandbox.Command{Argv: []string{"/bin/sh", "-c", "(" + memoryHog + "); exit 2"}})
		if !errors.As(err, &rl) || rl.Resource != "memory" || res.Reason != sandbox.ReasonOOM || res.ExitCode != 2 {
			t.Fatalf("command whose child was OOM-killed: err %v reason %q exit %d", err, res.Reason, res.ExitCode)
		}
	})
}

// TestPidsLimitOfAnotherProcessIsNotBlamedOnCleanExit: likewise for the
// pids controller's count of refused forks.
func TestPidsLimitOfAnotherProcessIsNotBlamedOnCleanExit(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		s := start(t, sandbox.Policy{Limits: sandbox.Limits{Pids: 32}})
		cgroupLimits(t, s)
		// The bomb starts once the command below runs (its marker), so
		// that the command's own start never meets the full limit, on
		// however slow a machine.
		sh(t, s, `(while [ ! -e /tmp/started ]; do sleep 0.05; done; i=0; while [ $i -lt 100 ]; do sleep 1 & i=$((i+1)); done; echo forked) >/tmp/bomb 2>&1 &`)
		res, err := s.Exec(context.Background(), sandbox.Command{Argv: []string{"/bin/sh", "-c", ": >/tmp/started; exec /bin/sleep 1.5"}})
		if err != nil || res.Reason != sandbox.ReasonExited || res.ExitCode != 0 {
			t.Fatalf("a clean exit was blamed for another process's refused fork: err %v reason %q exit %d", err, res.Reason, res.ExitCode)
		}
		var out string
		for i := 0; i < 50; i++ { // the bomb's sleeps end after 1s
			r, err := s.Exec(context.Background(), sandbox.Command{Argv: []string{"/bin/cat", "/tmp/bomb"}})
			if err == nil {
				out = string(r.Stdout)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if strings.Contains(out, "forked") || !strings.Contains(strings.ToLower(out), "fork") {
			t.Fatalf("the background fork bomb was not stopped by the pids limit (else this test proves nothing): %q", out)
		}
	})
}
