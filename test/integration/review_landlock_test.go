package integration

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Outside review of the landlock backend (issue 20). Each test here is a
// repro of a weakness found by running the backend as an attacker would:
// it FAILS on the code it was written against and passes once the weakness
// is fixed. Every probe runs as root and as uid 65534.

const reviewPython = "/usr/bin/python3"

func reviewRequirePython(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(reviewPython); err != nil {
		t.Skipf("needs %s for the probe", reviewPython)
	}
}

// reviewSigioPy finds the landlock worker among its ancestors (argv[0]
// nsbox-landlock-init) and asks the kernel to SIGKILL it through SIGIO:
// fcntl(F_SETOWN worker) + fcntl(F_SETSIG SIGKILL) + O_ASYNC on a pipe,
// then a write. No kill-family syscall is made, so the socket filter's
// rules on kill/tgkill/rt_sigqueueinfo/pidfd_send_signal never see it, and
// the signal scope lets it through because the worker is in the commands'
// own Landlock domain.
const reviewSigioPy = `import os, fcntl, signal, time
def parent(p):
    return int(open("/proc/%d/stat" % p).read().rsplit(")", 1)[1].split()[1])
w = os.getpid()
while w > 1 and open("/proc/%d/cmdline" % w).read().split("\0")[0] != "nsbox-landlock-init":
    w = parent(w)
if w <= 1:
    print("NO_WORKER", flush=True)
    raise SystemExit(0)
r, wr = os.pipe()
fcntl.fcntl(r, fcntl.F_SETOWN, w)
fcntl.fcntl(r, 10, signal.SIGKILL)  # F_SETSIG
fcntl.fcntl(r, fcntl.F_SETFL, fcntl.fcntl(r, fcntl.F_GETFL) | os.O_ASYNC)
os.write(wr, b"x")
def dead():
    try:
        return open("/proc/%d/stat" % w).read().rsplit(")", 1)[1].split()[0] in "ZX"
    except OSError:
        return True
for _ in range(100):
    if dead():
        print("WORKER_KILLED", flush=True)
        break
    time.sleep(0.05)
else:
    print("WORKER_ALIVE", flush=True)
`

// TestReviewLandlockWorkerKilledViaSIGIO: a command kills the landlock
// worker with an F_SETOWN/F_SETSIG(SIGKILL) SIGIO, and a process it
// detached before survives the session, reparented to the host's init:
// "processes a command detached (setsid) are killed by the worker when the
// session ends" does not hold once the worker is dead.
func TestReviewLandlockWorkerKilledViaSIGIO(t *testing.T) {
	reviewRequirePython(t)
	for _, u := range users() {
		u := u
		t.Run(u.name, func(t *testing.T) {
			requireLandlock(t, u)
			ws := u.tempDir(t)
			u.writeFile(t, filepath.Join(ws, "sigio.py"), reviewSigioPy, 0o644)
			marker := fmt.Sprintf("nsbox-review-ll-sigio-%d", time.Now().UnixNano())
			t.Cleanup(func() { killMarker(marker) })
			// The detached process says it runs by creating a file in
			// the private TMPDIR (the workspace root is frozen by the
			// protected names missing from it); the script waits for it
			// (bounded) instead of for a time.
			script := strings.Join([]string{
				`setsid ` + reviewPython + ` -c 'import sys, time; open(sys.argv[1], "w").close(); time.sleep(300)' "$TMPDIR/started" ` + marker + ` </dev/null >/dev/null 2>&1 &`,
				`i=0; while [ ! -e "$TMPDIR/started" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done`,
				`[ -e "$TMPDIR/started" ] && echo DETACHED_STARTED`,
				reviewPython + ` sigio.py`,
				`echo done`,
			}, "\n")
			r := u.sh(t, &runOpts{dir: ws}, []string{"--backend", "landlock", "--workspace", ws}, script)
			t.Logf("code %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
			if !strings.Contains(r.stdout, "DETACHED_STARTED") {
				t.Fatalf("the detached probe did not start; cannot judge\nstdout: %s\nstderr: %s", r.stdout, r.stderr)
			}
			if strings.Contains(r.stdout, "WORKER_KILLED") {
				t.Errorf("a command killed the landlock worker with F_SETOWN+F_SETSIG(SIGKILL): the socket filter guards only kill-family syscalls, and the worker shares the commands' Landlock domain, so the signal scope lets SIGIO through")
			}
			if left := pidsOfMarker(marker); len(left) > 0 {
				t.Errorf("processes of the session outlived it (now children of the host's init): %v", left)
			}
		})
	}
}

// killMarker SIGKILLs, by pid, the processes whose command line holds
// marker (a probe's leftovers).
func killMarker(marker string) {
	for _, p := range pidsOfMarker(marker) {
		if pid, err := strconv.Atoi(p); err == nil {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// TestReviewLandlockDatagramToHostSocket: with network none the landlock
// backend claims socket(2) of every family is refused, yet socketpair(2)
// is not filtered: a socketpair's SOCK_DGRAM end can sendto(2) any named
// unix datagram socket of the host (/dev/log, journald's, sd_notify's, a
// daemon's), here one in a directory the ruleset grants nothing
// (Landlock ABI < 9 has no right on unix socket paths).
func TestReviewLandlockDatagramToHostSocket(t *testing.T) {
	reviewRequirePython(t)
	for _, u := range users() {
		u := u
		t.Run(u.name, func(t *testing.T) {
			requireLandlock(t, u)
			ws := u.tempDir(t)
			sock := filepath.Join(filepath.Dir(ws), "host-dgram.sock")
			c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := os.Chmod(sock, 0o777); err != nil {
				t.Fatal(err)
			}
			probe := `import socket, sys
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
try:
    a.sendto(b"FROM-THE-SANDBOX", sys.argv[1])
    print("SENT")
except OSError as e:
    print("REFUSED", e)
`
			r := u.run(t, &runOpts{dir: ws}, "run", "--backend", "landlock", "--workspace", ws, "--", reviewPython, "-c", probe, sock)
			t.Logf("code %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
			// A unix datagram is queued before sendto returns: it is
			// there now or never; the deadline only guards the read.
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			buf := make([]byte, 64)
			n, _, err := c.ReadFromUnix(buf)
			if err == nil && strings.Contains(string(buf[:n]), "FROM-THE-SANDBOX") {
				t.Errorf("the sandbox (network none) sent a datagram to the host's unix socket %s through socketpair(AF_UNIX, SOCK_DGRAM) + sendto: %q", sock, buf[:n])
			}
		})
	}
}

// TestReviewLandlockHostTerminal: the landlock backend grants /dev/pts
// read-write, and /dev/pts is the host's (no mount namespace): a command
// opens a terminal of the same user that nsbox was never given, reads what
// is typed there (a password at a sudo prompt) and writes into it (forged
// output, terminal escapes). The native backend has a private devpts; the
// status does not list the host's terminals as shared.
func TestReviewLandlockHostTerminal(t *testing.T) {
	for _, u := range users() {
		u := u
		t.Run(u.name, func(t *testing.T) {
			requireLandlock(t, u)
			master, slave := openHostPty(t, u)
			defer unix.Close(master)
			// "Typed" by the user into their terminal.
			if _, err := unix.Write(master, []byte("hunter2-typed\n")); err != nil {
				t.Fatal(err)
			}
			ws := u.tempDir(t)
			// The read is of a line already queued: it cannot block.
			script := `if read line < ` + slave + `; then echo "GOT:$line"; fi
echo INJECTED-BY-SANDBOX > ` + slave + ` && echo WROTE_TERMINAL
echo done`
			r := u.sh(t, &runOpts{dir: ws}, []string{"--backend", "landlock", "--workspace", ws}, script)
			t.Logf("code %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
			if strings.Contains(r.stdout, "GOT:hunter2-typed") {
				t.Errorf("a command read input typed into the host terminal %s", slave)
			}
			// What the sandbox wrote is in the master's queue now or
			// never: poll without waiting.
			var got []byte
			for {
				fds := []unix.PollFd{{Fd: int32(master), Events: unix.POLLIN}}
				if n, err := unix.Poll(fds, 0); err != nil || n == 0 || fds[0].Revents&unix.POLLIN == 0 {
					break
				}
				buf := make([]byte, 256)
				n, err := unix.Read(master, buf)
				if n <= 0 || err != nil {
					break
				}
				got = append(got, buf[:n]...)
			}
			if strings.Contains(string(got), "INJECTED-BY-SANDBOX") {
				t.Errorf("a command wrote into the host terminal %s: %q", slave, got)
			}
		})
	}
}

// openHostPty opens a new pseudo-terminal on the host's devpts, its slave
// owned by u as a terminal of u's would be, and returns the master fd and
// the slave's path.
func openHostPty(t *testing.T, u user) (int, string) {
	t.Helper()
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no host pseudo-terminals here: %v", err)
	}
	unlock := 0
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(m), unix.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); errno != 0 {
		unix.Close(m)
		t.Fatalf("unlockpt: %v", errno)
	}
	n, err := unix.IoctlGetInt(m, unix.TIOCGPTN)
	if err != nil {
		unix.Close(m)
		t.Fatalf("ptsname: %v", err)
	}
	slave := "/dev/pts/" + strconv.Itoa(n)
	if os.Getuid() == 0 {
		if err := os.Chown(slave, u.uid, u.gid); err != nil {
			unix.Close(m)
			t.Fatal(err)
		}
	}
	// Plain line input, no echo: what is read is exactly the line.
	tio, err := unix.IoctlGetTermios(m, unix.TCGETS)
	if err == nil {
		tio.Lflag &^= unix.ECHO
		unix.IoctlSetTermios(m, unix.TCSETS, tio)
	}
	return m, slave
}

// TestReviewLandlockDryRunDescribesLandlock: `nsbox run --backend landlock
// --dry-run` prints the namespace backend's mount plan ("a fresh proc of
// the sandbox's PID namespace", "private /tmp", "minimal /dev ... private
// devpts") for a backend that makes none of those mounts, says nothing
// of what it does not isolate, and accepts policies (--tmpfs) that the
// backend refuses to start: a user checking the plan is told the opposite
// of what will run.
func TestReviewLandlockDryRunDescribesLandlock(t *testing.T) {
	u := users()[0]
	requireLandlock(t, u)
	ws := u.tempDir(t)
	r := u.run(t, &runOpts{dir: ws}, "run", "--backend", "landlock", "--workspace", ws, "--dry-run", "--", "/bin/true")
	expectCode(t, r, 0)
	var out struct {
		Backend string `json:"backend"`
		Plan    []struct {
			Kind string `json:"kind"`
			Dest string `json:"dest"`
			Why  string `json:"why"`
		} `json:"mountPlan"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if out.Backend != "landlock" {
		t.Fatalf("backend %q, want landlock", out.Backend)
	}
	for _, l := range out.Plan {
		if strings.Contains(l.Why, "PID namespace") || strings.Contains(l.Why, "private /tmp") || strings.Contains(l.Why, "private devpts") || strings.Contains(l.Why, "private /run") {
			t.Errorf("the landlock dry run promises a mount the landlock backend never makes: %s %s (%s)", l.Kind, l.Dest, l.Why)
		}
	}
	if !strings.Contains(r.stdout, "PID visibility") {
		t.Errorf("the landlock dry run does not say what the backend leaves shared with the host (its not-isolated list)")
	}
	// A policy the landlock backend refuses to start (a tmpfs needs a
	// mount namespace) is refused by its dry run too.
	dry := u.run(t, &runOpts{dir: ws}, "run", "--backend", "landlock", "--workspace", ws, "--tmpfs", "/mnt", "--dry-run", "--", "/bin/true")
	run := u.run(t, &runOpts{dir: ws}, "run", "--backend", "landlock", "--workspace", ws, "--tmpfs", "/mnt", "--", "/bin/true")
	if run.code != 0 && dry.code == 0 {
		t.Errorf("--dry-run accepts a policy the landlock backend refuses to run (exit %d: %s)", run.code, strings.TrimSpace(run.stderr))
	}
}

// TestReviewLandlockWorkerByThreadID: the socket filter refused kill(2)
// and prlimit64(2) of the worker's pid but not of its other thread ids
// (listed in /proc/WORKER/task, readable although the worker is not
// dumpable), which name the same process. With kill, a command SIGKILLed
// the worker; with prlimit, it set the worker's RLIMIT_NOFILE to 0, so
// the worker could no longer open /proc/self/task to find what to kill.
// Either way what the command detached outlived the session.
func TestReviewLandlockWorkerByThreadID(t *testing.T) {
	probes := []struct {
		name, need, action, found, what string
	}{
		{"kill", "", `kill -KILL "$t"`, "KILLED_WORKER_VIA_TID", "kill(2)"},
		{"prlimit", "/usr/bin/prlimit", `/usr/bin/prlimit --pid "$t" --nofile=0:0`, "LIMITED_WORKER_VIA_TID", "prlimit64"},
	}
	for _, pr := range probes {
		for _, u := range users() {
			pr, u := pr, u
			t.Run(pr.name+"/"+u.name, func(t *testing.T) {
				if pr.need != "" {
					if _, err := os.Stat(pr.need); err != nil {
						t.Skipf("needs %s for the probe", pr.need)
					}
				}
				requireLandlock(t, u)
				ws := u.tempDir(t)
				// A fractional sleep makes a unique command line to look for.
				marker := fmt.Sprintf("299.%09d", time.Now().UnixNano()%1000000000)
				t.Cleanup(func() { killMarker(marker) })
				script := strings.Join([]string{
					`setsid sleep ` + marker + ` </dev/null >/dev/null 2>&1 &`,
					`W=$PPID`,
					`grep -q '^nsbox-landlock-init' /proc/$W/cmdline || { echo NOT_THE_WORKER; exit 0; }`,
					`for t in $(ls /proc/$W/task); do`,
					`  if [ "$t" != "$W" ]; then ` + pr.action + ` && echo ` + pr.found + `; break; fi`,
					`done`,
					`echo done`,
				}, "\n")
				r := u.sh(t, &runOpts{dir: ws}, []string{"--backend", "landlock", "--workspace", ws}, script)
				t.Logf("code %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
				if strings.Contains(r.stdout, "NOT_THE_WORKER") {
					t.Fatalf("the shell's parent is not the landlock worker; cannot judge\nstdout: %s", r.stdout)
				}
				if strings.Contains(r.stdout, pr.found) {
					t.Errorf("%s of a worker thread id was allowed: the socket filter compares only the worker's pid", pr.what)
				}
				if left := pidsOfMarker(marker); len(left) > 0 {
					t.Errorf("processes of the session outlived it (the run exited %d): %v", r.code, left)
				}
			})
		}
	}
}

// reviewOpenat2Py creates argv[1] with openat2(2) (O_CREAT, mode 04755) and
// prints the mode it got.
const reviewOpenat2Py = `import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
how = ctypes.create_string_buffer(struct.pack("QQQ", os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o4755, 0))
fd = libc.syscall(437, -100, sys.argv[1].encode(), how, 24)
if fd < 0:
    print("OPENAT2_REFUSED", ctypes.get_errno())
else:
    print("CREATED_MODE %o" % os.stat(sys.argv[1]).st_mode)
`

// TestReviewLandlockSetuidCreateViaOpenat2: the native backend puts the
// command filter (openat2 -> ENOSYS) on the thread that forks commands,
// because the default profile's set-id mode rules cannot read open_how's
// mode; the landlock backend's setup has no such step, so a command
// creates a set-user-ID file (owned by the caller's real host uid: host
// root when nsbox runs as root) in the workspace, which open(2) and
// chmod(2) with the same mode are refused. Not "the same seccomp filter".
func TestReviewLandlockSetuidCreateViaOpenat2(t *testing.T) {
	reviewRequirePython(t)
	for _, u := range users() {
		u := u
		t.Run(u.name, func(t *testing.T) {
			requireLandlock(t, u)
			ws := u.tempDir(t)
			sub := filepath.Join(ws, "sub")
			if err := os.Mkdir(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			os.Chown(sub, u.uid, u.gid)
			target := filepath.Join(sub, "setid")
			r := u.run(t, &runOpts{dir: ws}, "run", "--backend", "landlock", "--workspace", ws, "--", reviewPython, "-c", reviewOpenat2Py, target)
			t.Logf("code %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
			if st, err := os.Lstat(target); err == nil && st.Mode()&os.ModeSetuid != 0 {
				t.Errorf("a command under the landlock backend created a set-user-ID file with openat2: %s %v (uid %d)", target, st.Mode(), st.Sys().(*syscall.Stat_t).Uid)
			}
		})
	}
}

// TestReviewLandlockAbstractNameSquat: without a network namespace the
// sandbox shares the host's abstract unix socket names. The scope (ABI 6)
// refuses connects and sends out of the domain, but not bind(2): a
// socketpair's end binds any abstract name, which a host service binding
// it later then gets EADDRINUSE for (and, disconnected with
// connect(AF_UNSPEC), the datagrams the host's clients send to it). The
// status lists nothing of this.
func TestReviewLandlockAbstractNameSquat(t *testing.T) {
	reviewRequirePython(t)
	for _, u := range users() {
		u := u
		t.Run(u.name, func(t *testing.T) {
			requireLandlock(t, u)
			ws := u.tempDir(t)
			name := fmt.Sprintf("nsbox-review-squat-%d", time.Now().UnixNano())
			probe := `import socket, sys
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
try:
    a.bind("\0" + sys.argv[1])
except OSError as e:
    print("BIND_REFUSED", e)
    raise SystemExit(0)
# Seen by the host's network namespace, not only by this process.
if ("@" + sys.argv[1]) in open("/proc/net/unix").read():
    print("SQUATTED_HOST_NAME")
`
			r := u.run(t, &runOpts{dir: ws}, "run", "--backend", "landlock", "--workspace", ws, "--", reviewPython, "-c", probe, name)
			t.Logf("code %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
			if strings.Contains(r.stdout, "SQUATTED_HOST_NAME") {
				t.Errorf("a command (network none) bound the abstract unix name @%s in the host's namespace", name)
			}
		})
	}
}
