package session

// A pool whose sandboxes stop starting (its policy went stale: a bound
// directory removed, a hidden file gone) resolves again through
// WithPoolReplan, reports each failure through WithPoolErrors, and backs
// off instead of starting pool-size builds after every call.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// TestPoolReplanAfterFailedStart: the pool's policy binds a directory
// that is gone; the first start fails, the pool asks for a fresh policy
// (here one without the bind) and the call is served from it.
func TestPoolReplanAfterFailedStart(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		missing := t.TempDir() + "/gone"
		pol := sandbox.Policy{Mounts: []sandbox.Mount{{Kind: sandbox.MountBind, Source: missing, Dest: "/gone"}}}
		var mu sync.Mutex
		var causes []error
		var failures []*sandbox.PoolFailure
		replan := func(ctx context.Context, cause error) (sandbox.Policy, error) {
			mu.Lock()
			causes = append(causes, cause)
			mu.Unlock()
			return sandbox.Policy{}, nil
		}
		report := func(f *sandbox.PoolFailure) {
			mu.Lock()
			failures = append(failures, f)
			mu.Unlock()
		}
		p, err := sandbox.NewPool(pol, 2, sandbox.WithPoolReplan(replan), sandbox.WithPoolErrors(report))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		res, err := p.Exec(context.Background(), sandbox.Command{Argv: []string{"/bin/sh", "-c", "test -e /gone && echo BOUND; echo served"}})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("Pool.Exec after a failed start: %v, exit %d, stderr %q", err, res.ExitCode, res.Stderr)
		}
		if out := string(res.Stdout); out != "served\n" {
			t.Fatalf("the call did not run on the replanned policy: %q", out)
		}
		waitFor(t, func() bool { return p.Stats().Ready == 2 }, "the pool to fill from the fresh policy")
		st := p.Stats()
		if st.Replans < 1 {
			t.Fatalf("stats %+v: want a replan", st)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(causes) == 0 || !strings.Contains(causes[0].Error(), missing) {
			t.Fatalf("replan's causes %v do not name %s", causes, missing)
		}
		if len(failures) == 0 {
			t.Fatal("WithPoolErrors heard of no failure")
		}
		for _, f := range failures {
			if (f.Op != "refill" && f.Op != "start") || !strings.Contains(f.Error(), missing) {
				t.Fatalf("failure %q (op %s): want a refill or start naming %s", f, f.Op, missing)
			}
		}
	})
}

// TestPoolExecWithoutSandboxSaysSetupError: a pool that cannot start a
// sandbox fails Exec with the start's own error and the setup_error
// reason, not an empty one.
func TestPoolExecWithoutSandboxSaysSetupError(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		p, missing := brokenPool(t)
		res, err := p.Exec(context.Background(), sandbox.Command{Argv: []string{"/bin/true"}})
		var se *sandbox.SetupError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), missing) {
			t.Fatalf("Exec on a pool that cannot start: %v, want a SetupError naming %s", err, missing)
		}
		if res.Reason != sandbox.ReasonSetupError {
			t.Fatalf("Exec's reason %q, want %q", res.Reason, sandbox.ReasonSetupError)
		}
	})
}

// TestPoolFailingStartsBackOff: after its starts fail, a pool of 8 does
// not start 8 more doomed builds after every call: its refills run one at
// a time, with a growing delay, while each failing call pays only its own
// start.
func TestPoolFailingStartsBackOff(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		const size, calls = 8, 6
		missing := t.TempDir() + "/gone"
		pol := sandbox.Policy{Mounts: []sandbox.Mount{{Kind: sandbox.MountBind, Source: missing, Dest: "/gone"}}}
		p, err := sandbox.NewPool(pol, size)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		waitFor(t, func() bool { return p.Stats().RefillErrors >= size }, "the first refills to fail")
		before := p.Stats()
		for i := 0; i < calls; i++ {
			// Calls apart, as an agent's are: the refills a call began
			// have ended before the next.
			waitFor(t, func() bool { return p.Stats().Starting == 0 }, "the refills in flight")
			if _, err := p.Exec(context.Background(), sandbox.Command{Argv: []string{"/bin/true"}}); err == nil {
				t.Fatal("Exec on a pool that cannot start a sandbox succeeded")
			}
		}
		after := p.Stats()
		if after.StartErrors-before.StartErrors != calls {
			t.Fatalf("stats before %+v, after %+v: want one failed on-demand start per call", before, after)
		}
		// Not timed: a backoff doubling from 0.1 s leaves room for about
		// 12 refills in 10 minutes; a refill of the whole pool per call
		// would be calls*size = 48.
		if n := after.RefillErrors + after.Starting - before.RefillErrors - before.Starting; n >= 2*size {
			t.Fatalf("%d calls that found no sandbox were followed by %d refills (stats before %+v, after %+v): the pool keeps starting doomed builds", calls, n, before, after)
		}
	})
}

// waitFor polls cond until it holds; the limit is a deadlock guard.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 60 s for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
