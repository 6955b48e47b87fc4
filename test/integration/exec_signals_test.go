package integration

import (
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
