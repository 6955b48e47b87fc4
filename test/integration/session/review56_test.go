package session

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// TestReview56PoolExecEndsTheCallsProcesses: when Pool.Exec returns, the
// call's detached processes are gone. They used to run on for up to 80 ms
// (the teardown was left to a goroutine), beside the next call, writing
// into the shared workspace (review 56).
func TestReview56PoolExecEndsTheCallsProcesses(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		ws, p := pooledWorkspace(t, 2)
		log := filepath.Join(ws, "log")
		worst := time.Duration(0)
		for round := 0; round < 5; round++ {
			os.Remove(log)
			// A child that ignores nothing: it writes as long as it lives.
			res, err := p.Exec(context.Background(), sandbox.Command{Argv: []string{"/bin/sh", "-c",
				"setsid sh -c 'while :; do echo x >> " + log + "; done' >/dev/null 2>&1 & sleep 0.05"}})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("call 1: %v %+v", err, res)
			}
			returned := time.Now()
			st0, _ := os.Stat(log)
			time.Sleep(10 * time.Millisecond)
			if st1, _ := os.Stat(log); st1.Size() != st0.Size() {
				t.Errorf("round %d: the call's detached process still writes into the workspace after Pool.Exec returned (%d -> %d bytes)", round, st0.Size(), st1.Size())
			}
			// The next call: it sees the file still growing?
			res, err = p.Exec(context.Background(), sandbox.Command{Argv: []string{"/bin/sh", "-c",
				"a=$(wc -c < " + log + "); sleep 0.02; b=$(wc -c < " + log + "); [ $a = $b ] || echo GROWING $a $b"}})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Stdout) > 0 {
				t.Errorf("round %d: during the next call, the previous call's process still wrote: %s", round, res.Stdout)
			}
			var last int64 = -1
			for {
				st, _ := os.Stat(log)
				if st.Size() == last {
					break
				}
				last = st.Size()
				time.Sleep(5 * time.Millisecond)
			}
			if d := time.Since(returned); d > worst {
				worst = d
			}
		}
		t.Logf("worst time for the log to settle after Exec returned: %v", worst)
	})
}

// pooledWorkspace makes a workspace every user may write, in /var/tmp,
// and a ready pool of size sandboxes with it bound read-write; both go
// when the test ends.
func pooledWorkspace(t *testing.T, size int) (string, *sandbox.Pool) {
	t.Helper()
	ws, err := os.MkdirTemp("/var/tmp", "pooled-ws-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(ws) })
	os.Chmod(ws, 0o777)
	pol := sandbox.Policy{Mounts: []sandbox.Mount{{Kind: sandbox.MountBind, Source: ws, Dest: ws}}}
	p, err := sandbox.NewPool(pol, size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	waitReady(t, p, size)
	return ws, p
}
