package session

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// TestReview63QuiesceStoppedAndVforked: the native backend's quiesce
// (kill(-1) from PID 1, then kill(-1, 0) until ESRCH) ends a stopped
// process that a sibling would resume later, and a vfork'ed child
// (posix_spawn: clone(CLONE_VM|CLONE_VFORK)) with its parent, before
// Pool.Exec returns.
func TestReview63QuiesceStoppedAndVforked(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		ws, p := pooledWorkspace(t, 1)
		log := filepath.Join(ws, "log")
		script := "cd " + ws + `
sh -c 'kill -STOP $$; while :; do echo s >> log; done' </dev/null >/dev/null 2>&1 &
s=$!
setsid sh -c "sleep 0.3; kill -CONT $s" </dev/null >/dev/null 2>&1 &
python3 -c 'import os; os.setpgid(0,0); os.posix_spawn("/bin/sh", ["sh","-c","sleep 0.3; while :; do echo v >> log; done"], os.environ)' </dev/null >/dev/null 2>&1 &
sleep 0.1`
		res, err := p.Exec(context.Background(), sandbox.Command{Argv: []string{"/bin/sh", "-c", script}})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("call: %v %+v %s", err, res, res.Stderr)
		}
		time.Sleep(600 * time.Millisecond)
		if b, err := os.ReadFile(log); err == nil {
			t.Errorf("processes of the call ran after Pool.Exec returned and wrote %d bytes (%q...)", len(b), b[:min(len(b), 8)])
		}
	})
}
