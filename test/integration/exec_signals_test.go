package integration

import (
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// TestExecSignalsToPID1Ignored: the worker, PID 1 of the sandbox, keeps a
// handler only for the signals the Go runtime needs; every other signal a
// command sends it has the default action, which the kernel ignores for
// the init of a PID namespace. A command that sends PID 1 SIGTERM, SIGINT,
// SIGHUP, SIGQUIT, SIGUSR1, SIGALRM or a real-time signal does not end the
// session (SIGTERM used to: the runtime's handler exited), and the next
// command of the same sandbox still runs. The fault signals (SIGSEGV,
// SIGABRT...), whose handlers the worker keeps, are dropped when a process
// sends them (a review found they still ended the session).
func TestExecSignalsToPID1Ignored(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		r := u.sh(t, nil, nil, `
for s in TERM INT HUP QUIT USR1 USR2 ALRM WINCH PROF RTMIN ABRT ILL TRAP SYS SEGV BUS FPE PIPE URG CHLD; do
	kill -s $s 1 || { echo "kill -$s 1 failed"; exit 3; }
done
sleep 0.2
sh -c 'echo still-serving'
`)
		expectCode(t, r, 0)
		if !strings.Contains(r.stdout, "still-serving") {
			t.Errorf("stdout %q, want still-serving", r.stdout)
		}
	})
}

// TestExecSignalDispositions: a command starts with no signal caught (every
// handler of the worker is back to the default before execve, and execve
// resets the rest), none ignored and none blocked, whatever the worker
// keeps for itself.
func TestExecSignalDispositions(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		r := u.run(t, nil, "run", "--", "/bin/cat", "/proc/self/status")
		expectCode(t, r, 0)
		got := map[string]string{}
		for _, l := range strings.Split(r.stdout, "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.HasPrefix(k, "Sig") {
				got[k] = strings.TrimSpace(v)
			}
		}
		for _, k := range []string{"SigBlk", "SigIgn", "SigCgt"} {
			if got[k] != "0000000000000000" {
				t.Errorf("%s = %q, want none", k, got[k])
			}
		}
	})
}

// forgedSigqueuePy sends PID 1 the signal argv[1] with rt_sigqueueinfo(2),
// si_code SI_QUEUE and si_pid 1: the sender fills si_pid of a queued
// signal itself (the kernel only refuses si_code >= 0 and SI_TKILL from
// another process), so it can claim to be PID 1.
const forgedSigqueuePy = `
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
sig = int(sys.argv[1])
info = (ctypes.c_uint32 * 32)()
info[0] = sig
info[2] = 0xffffffff  # si_code = SI_QUEUE (-1)
info[4] = 1           # si_pid: forged, as if from PID 1
info[5] = os.getuid()
if libc.syscall(129, 1, sig, ctypes.byref(info)) != 0:  # SYS_rt_sigqueueinfo (x86-64)
    print("rt_sigqueueinfo failed", ctypes.get_errno()); sys.exit(3)
`

// TestExecSignalsForgedSender: a command that queues SIGSEGV (or SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT,
// SIGSYS) to PID 1 with si_pid 1 does not end the session: faultsig.c
// trusts si_pid only where the kernel wrote it (SI_USER, SI_TKILL), and
// real faults (si_code > 0). Found by review: it ended the session
// ("session closed", exit 125, the command's own exit reason lost).
func TestExecSignalsForgedSender(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the sender calls rt_sigqueueinfo by its x86-64 number")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed (the sender needs rt_sigqueueinfo)")
	}
	eachUser(t, func(t *testing.T, u user) {
		for _, sig := range []string{"11", "6"} { // SIGSEGV, SIGABRT
			r := u.sh(t, nil, nil, `python3 -c '`+forgedSigqueuePy+`' `+sig+` || exit 3
sleep 0.3
sh -c 'echo still-serving'
`)
			if r.code == 3 {
				t.Fatalf("the sender failed: %q %q", r.stdout, r.stderr)
			}
			if r.code != 0 || !strings.Contains(r.stdout, "still-serving") {
				t.Errorf("signal %s queued to PID 1 with a forged si_pid ended the session: exit %d, stdout %q, stderr %q", sig, r.code, r.stdout, r.stderr)
			}
		}
	})
}
