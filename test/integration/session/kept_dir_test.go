package session

import (
	"context"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// TestKeptDirReachedThroughAnotherProcessCwd: a command started in the
// working directory approved last (the worker keeps it open and asks its
// check thread nothing) cannot be taken into that directory once it is
// removed, through a symlink to another process's /proc/PID/cwd (a magic
// link the worker's own descriptor does not stand behind): the start is
// refused, as a fresh check refuses it, and nothing runs.
func TestKeptDirReachedThroughAnotherProcessCwd(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		s := start(t, sandbox.Policy{})
		ctx := context.Background()
		d := "/tmp/nsbox-kept-cwd"
		sh(t, s, "mkdir -p "+d)
		// A process whose working directory stays d after d is removed.
		sleeper, err := s.Exec(ctx, sandbox.Command{Argv: []string{"/bin/sh", "-c", "sleep 300 >/dev/null 2>&1 & echo $!"}, Dir: d})
		if err != nil {
			t.Fatalf("start the sleeper: %v", err)
		}
		pid := strings.TrimSpace(string(sleeper.Stdout))
		swap := "cd / && rmdir " + d + " && ln -s /proc/" + pid + "/cwd " + d + " && echo swapped"
		res, err := s.Exec(ctx, sandbox.Command{Argv: []string{"/bin/sh", "-c", swap}, Dir: d})
		if err != nil || !strings.Contains(string(res.Stdout), "swapped") {
			t.Fatalf("approve and swap %s: %v %q %q", d, err, res.Stdout, res.Stderr)
		}
		res, err = s.Exec(ctx, sandbox.Command{Argv: []string{"/bin/sh", "-c", "echo ran; readlink /proc/self/cwd"}, Dir: d})
		if strings.Contains(string(res.Stdout), "ran") {
			t.Fatalf("a command started in %s (a symlink to /proc/%s/cwd, a removed directory): it ran in %q", d, pid, strings.TrimSpace(string(res.Stdout)))
		}
		if err == nil {
			t.Fatalf("a start in %s -> /proc/%s/cwd was not refused", d, pid)
		}
		sh(t, s, "kill "+pid+" 2>/dev/null; true")
	})
}
