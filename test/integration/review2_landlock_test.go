package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Second outside review of the landlock backend (issue 20), of the fixes
// ea6550a..14fff99 (command domain, command filter, TMPDIR naming, dry
// run). Each test is a repro that FAILS on the code it was written against
// and passes once the weakness is fixed. Every probe runs as root and as
// uid 65534.

// review2Decoy starts, as u and outside any sandbox, a process standing
// for any of u's processes on the host (its shell, its editor), and kills
// it when the test ends. As root it holds no capability (the kernel's
// commoncap refuses to reschedule a process with more capabilities than
// the caller's): it stands for the commands and workers of the host's
// other root sandboxes (nsbox's own, of other sessions) and root daemons
// that dropped their capabilities.
func review2Decoy(t *testing.T, u user) int {
	t.Helper()
	arg := fmt.Sprintf("297.%09d", time.Now().UnixNano()%1000000000)
	cmd := exec.Command("/bin/sleep", arg)
	if u.uid == 0 {
		if _, err := os.Stat("/usr/bin/setpriv"); err != nil {
			t.Skip("needs setpriv(1) to start a root process without capabilities")
		}
		cmd = exec.Command("/usr/bin/setpriv", "--bounding-set=-all", "--inh-caps=-all", "--", "/bin/sleep", arg)
	}
	u.asUser(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd.Process.Pid
}

// review2SchedOf reads what a process's scheduling looks like from the
// host: nice (stat field 19), policy (stat field 41), allowed CPUs and the
// I/O priority class (ioprio_get, IOPRIO_WHO_PROCESS).
func review2SchedOf(t *testing.T, pid int) (nice, policy, cpus string, ioclass int) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	// f[0] is field 3.
	nice, policy = f[19-3], f[41-3]
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(st), "\n") {
		if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
			cpus = strings.TrimSpace(v)
		}
	}
	r, _, errno := unix.Syscall(unix.SYS_IOPRIO_GET, 1, uintptr(pid), 0)
	if errno != 0 {
		t.Fatalf("ioprio_get: %v", errno)
	}
	return nice, policy, cpus, int(r >> 13)
}

// TestReview2LandlockSchedulesHostProcess: without a PID namespace a
// command names every host process by pid, and the Landlock scopes cover
// signals and abstract sockets only. setpriority(2), sched_setscheduler(2),
// sched_setaffinity(2) and ioprio_set(2) need only the same uid (no
// capability to lower a priority), and neither the socket filter nor the
// command filter looks at them (only prlimit64 of another pid is refused):
// a command sets any process of the caller outside the sandbox (as root:
// every root process holding no more capabilities than it: the other root
// sandboxes' commands and workers, daemons that dropped theirs; with
// PRIO_USER all of them in one call) to nice 19, SCHED_IDLE, one CPU and
// idle I/O, and without CAP_SYS_NICE nothing of the uid can undo it. The
// worker's threads can be starved the same way. Here the target is a decoy
// process of the caller's uid outside the sandbox.
func TestReview2LandlockSchedulesHostProcess(t *testing.T) {
	for _, u := range users() {
		u := u
		t.Run(u.name, func(t *testing.T) {
			requireLandlock(t, u)
			ws := u.tempDir(t)
			d := review2Decoy(t, u)
			nice0, pol0, cpus0, io0 := review2SchedOf(t, d)
			script := strings.Join([]string{
				`D=` + strconv.Itoa(d),
				`renice -n 19 -p $D >/dev/null 2>&1 && echo RENICED`,
				`chrt -i -p 0 $D >/dev/null 2>&1 && echo SCHED_IDLE`,
				`taskset -p 1 $D >/dev/null 2>&1 && echo AFFINITY`,
				`ionice -c 3 -p $D >/dev/null 2>&1 && echo IOPRIO_IDLE`,
				`echo done`,
			}, "\n")
			r := u.sh(t, &runOpts{dir: ws}, []string{"--backend", "landlock", "--workspace", ws}, script)
			t.Logf("code %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
			if !strings.Contains(r.stdout, "done") {
				t.Fatalf("the probe did not run; cannot judge\nstdout: %s\nstderr: %s", r.stdout, r.stderr)
			}
			nice1, pol1, cpus1, io1 := review2SchedOf(t, d)
			if nice1 != nice0 {
				t.Errorf("a command reniced a host process outside the sandbox (pid %d): nice %s -> %s", d, nice0, nice1)
			}
			if pol1 != pol0 {
				t.Errorf("a command changed the scheduling policy of a host process outside the sandbox (pid %d): %s -> %s (5 = SCHED_IDLE)", d, pol0, pol1)
			}
			if cpus1 != cpus0 {
				t.Errorf("a command changed the CPU affinity of a host process outside the sandbox (pid %d): %s -> %s", d, cpus0, cpus1)
			}
			if io1 != io0 {
				t.Errorf("a command changed the I/O priority class of a host process outside the sandbox (pid %d): %d -> %d (3 = idle)", d, io0, io1)
			}
		})
	}
}

// review2DeepPy makes, in $TMPDIR, a directory chain argv[1] levels deep
// (by relative mkdir and chdir: no path is ever long) with a file at the
// bottom.
const review2DeepPy = `import os, sys
os.chdir(os.environ["TMPDIR"])
for i in range(int(sys.argv[1])):
    os.mkdir("d")
    os.chdir("d")
open("data", "w").write("secret")
print("TMP=" + os.environ["TMPDIR"])
`

// TestReview2LandlockTmpDirKeptByCommand: a Landlock session's private
// TMPDIR (with what its commands wrote there) is to be removed at Close,
// or by a later run's leftovers step once its supervisor is gone. Both use
// a bare os.RemoveAll, whose error is dropped: a command keeps its TMPDIR,
// and its data, on the host after a clean run, and every later run's
// leftovers step fails on it silently, forever:
//   - unsearchable: a directory of mode 0 inside (os.RemoveAll does not
//     restore permissions; root passes with CAP_DAC_OVERRIDE). pkg/script's
//     removeWorkDir already repairs modes for the same reason;
//   - deep: a chain deeper than the supervisor's open-file limit
//     (os.RemoveAll keeps one fd per level and fails with EMFILE), as root
//     too.
func TestReview2LandlockTmpDirKeptByCommand(t *testing.T) {
	reviewRequirePython(t)
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	// nsbox (Go) raises its soft limit to this hard one.
	depth := lim.Max + 64
	probes := map[string]func(ws string) string{
		"unsearchable": func(string) string {
			return `mkdir -p "$TMPDIR/keep/inner" && echo secret >"$TMPDIR/keep/inner/data" && chmod 0 "$TMPDIR/keep" && echo "TMP=$TMPDIR"`
		},
		"deep": func(ws string) string {
			return reviewPython + ` deep.py ` + strconv.FormatUint(depth, 10)
		},
	}
	for _, u := range users() {
		u := u
		t.Run(u.name, func(t *testing.T) {
			requireLandlock(t, u)
			for _, name := range []string{"unsearchable", "deep"} {
				t.Run(name, func(t *testing.T) {
					if name == "deep" && depth > 300000 {
						t.Skipf("open-file limit %d: the chain would be too long to make here", lim.Max)
					}
					ws := u.tempDir(t)
					u.writeFile(t, filepath.Join(ws, "deep.py"), review2DeepPy, 0o644)
					r := u.sh(t, &runOpts{dir: ws}, []string{"--backend", "landlock", "--workspace", ws}, probes[name](ws))
					t.Logf("code %d\nstdout: %.300s\nstderr: %.300s", r.code, r.stdout, r.stderr)
					var tmp string
					for _, l := range strings.Split(r.stdout, "\n") {
						if v, ok := strings.CutPrefix(l, "TMP="); ok {
							tmp = v
						}
					}
					if r.code != 0 || tmp == "" || !strings.HasPrefix(filepath.Base(tmp), "nsbox-tmp-") {
						t.Fatalf("the probe did not run; cannot judge")
					}
					// rm(1) removes any depth and, as root, any mode.
					t.Cleanup(func() { exec.Command("/bin/rm", "-rf", tmp).Run() })
					// A later run: its leftovers step is the second chance.
					r2 := u.run(t, &runOpts{dir: ws}, "run", "--backend", "landlock", "--workspace", ws, "--", "/bin/true")
					expectCode(t, r2, 0)
					if _, err := os.Lstat(tmp); err == nil {
						t.Errorf("the private TMPDIR %s of a finished run (with what its command wrote) outlived the run and a later run's leftovers step (%s)", tmp, name)
					}
				})
			}
		})
	}
}

// TestReview2LandlockDryRunAcceptsWhatRunRefuses: 1c4d087 says the dry run
// of the landlock backend refuses what the run refuses; for these policies
// the run fails at once and the dry run exits 0 with a Landlock plan.
func TestReview2LandlockDryRunAcceptsWhatRunRefuses(t *testing.T) {
	cases := [][]string{
		{"--allow-privileged"},
		{"--net", "filtered", "--allow-host", "example.com"},
	}
	for _, u := range users() {
		u := u
		t.Run(u.name, func(t *testing.T) {
			requireLandlock(t, u)
			ws := u.tempDir(t)
			for _, c := range cases {
				base := append([]string{"run", "--backend", "landlock", "--workspace", ws}, c...)
				real := u.run(t, &runOpts{dir: ws}, append(base, "--", "/bin/true")...)
				dry := u.run(t, &runOpts{dir: ws}, append(base, "--dry-run")...)
				t.Logf("%v: run %d (%s), dry run %d", c, real.code, strings.TrimSpace(real.stderr), dry.code)
				if real.code != 0 && dry.code == 0 {
					t.Errorf("%v: the run fails (%d: %s) but the dry run exits 0 and prints a plan", c, real.code, strings.TrimSpace(real.stderr))
				}
			}
		})
	}
}

// TestReview2LandlockToolReadsPastFilePermissions: the landlock worker drops
// capabilities on its main thread only (capabilities are per thread; the
// native worker's other threads keep only its user namespace's). Without a
// user namespace, as root, every other thread of the worker keeps the
// host's full capability set, and the file tools (read_file, write_file,
// edit_file) run on those threads: a tool call reads a workspace file of
// another user (mode 0600) that no command of the same session may read
// (root without CAP_DAC_OVERRIDE), and writes what DAC refuses. Root-less
// has no capability anywhere and passes.
func TestReview2LandlockToolReadsPastFilePermissions(t *testing.T) {
	for _, u := range users() {
		u := u
		t.Run(u.name, func(t *testing.T) {
			requireLandlock(t, u)
			if os.Getuid() != 0 {
				t.Skip("needs root to make a file of another uid")
			}
			ws := u.tempDir(t)
			other := 65534
			if u.uid != 0 {
				other = 0
			}
			secret := fmt.Sprintf("s3cret-%d", time.Now().UnixNano())
			p := filepath.Join(ws, "private")
			if err := os.WriteFile(p, []byte(secret+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(p, other, other); err != nil {
				t.Fatal(err)
			}
			r := u.run(t, &runOpts{dir: ws}, "run", "--backend", "landlock", "--workspace", ws, "--", "/bin/cat", "private")
			if r.code == 0 || strings.Contains(r.stdout, secret) {
				t.Fatalf("a command read the other uid's 0600 file; cannot judge the tools\nstdout: %s\nstderr: %s", r.stdout, r.stderr)
			}
			c := startMCP(t, u, ws, "--backend", "landlock", "--workspace", ws).mcpClient
			raw := c.send("tools/call", map[string]any{"name": "read_file", "arguments": map[string]any{"path": "private"}}, false)
			t.Logf("read_file: %.400s", raw)
			if strings.Contains(string(raw), secret) {
				t.Errorf("the read_file tool of a landlock session read a 0600 file of uid %d that its commands cannot: the worker's tool threads keep the host's capabilities (CAP_DAC_OVERRIDE)", other)
			}
		})
	}
}
