package integration

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// How the worker starts a command and reaps what ends (pkg/sandbox
// cmdspawn.c, sigchld.c): the command leads a new session without a
// controlling terminal, a start failure reads as before, and PID 1 reaps the
// orphans a command leaves behind.

// TestExecSessionLeader: the command is its own session and process group
// (kill on timeout takes the group; TIOCSTI needs a controlling terminal:
// CVE-2017-5226) and has no controlling terminal.
func TestExecSessionLeader(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		r := u.sh(t, nil, nil, `exec cat /proc/self/stat`)
		expectCode(t, r, 0)
		pid, rest, _ := strings.Cut(r.stdout, " ")
		_, rest, _ = strings.Cut(rest, ") ")
		// state ppid pgrp session tty_nr ...
		f := strings.Fields(rest)
		if len(f) < 5 || f[2] != pid || f[3] != pid || f[4] != "0" {
			t.Fatalf("pid %s: pgrp, session, tty_nr = %v, want %s %s 0: %q", pid, f[2:5], pid, pid, r.stdout)
		}
	})
}

// TestExecStartFailures: a missing command and one that cannot be executed
// are reported as before, with their exit codes.
func TestExecStartFailures(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		r := u.run(t, nil, "run", "--", "nsbox-it-no-such-command")
		expectCode(t, r, 127)
		if !strings.Contains(r.stderr, "command not found: nsbox-it-no-such-command") {
			t.Errorf("missing command: stderr %q", r.stderr)
		}
		r = u.run(t, nil, "run", "--", "/")
		expectCode(t, r, 126)
		if !strings.Contains(r.stderr, "cannot execute: /: permission denied") {
			t.Errorf("a directory: stderr %q", r.stderr)
		}
	})
}

// TestExecOrphansReaped: processes whose parent ended are re-parented to
// the worker, PID 1, which reaps them when they end: no zombie stays, for
// orphans that end at once and for one that ends later, while the command
// still runs. The loop's bound only guards against a hang.
func TestExecOrphansReaped(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		r := u.sh(t, nil, nil, `
for i in $(seq 40); do (sh -c 'exit 0' &); done
(sleep 0.3 &)
n=0
while [ $n -lt 600 ]; do
	z=0; s=0
	for f in /proc/[0-9]*/stat; do
		read -r pid comm state rest < "$f" 2>/dev/null || continue
		[ "$state" = Z ] && z=$((z+1))
		[ "$comm" = "(sleep)" ] && s=$((s+1))
	done
	if [ $z -eq 0 ] && [ $s -eq 0 ]; then echo reaped; exit 0; fi
	sleep 0.1
	n=$((n+1))
done
echo "zombies $z, sleep $s"; exit 1`)
		expectCode(t, r, 0)
		if strings.TrimSpace(r.stdout) != "reaped" {
			t.Fatalf("stdout %q", r.stdout)
		}
	})
}

// TestExecTracedCommand: a command traced by another process of the
// sandbox (possible with a profile that allows ptrace) is a zombie the
// tracer sees first; the worker, which reaps on its main thread, finishes
// the command once the tracer lets go instead of waiting there for a
// status, which wedged every Exec and all reaping of the session.
func TestExecTracedCommand(t *testing.T) {
	if _, err := exec.LookPath("strace"); err != nil {
		t.Skip("strace is not installed (apt-get install strace)")
	}
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		for i := 0; i < 4; i++ {
			r := u.sh(t, &runOpts{dir: ws, timeout: 60 * time.Second}, []string{"--seccomp", "unconfined"},
				`strace -o /dev/null -p $$ 2>/dev/null & sleep 0.3; exit 7`)
			expectCode(t, r, 7)
		}
	})
}
