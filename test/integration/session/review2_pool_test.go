package session

// Second outside review of sandbox.Pool (issue 22, the fixes
// 9074c3f..d2037a8: WithPoolReplan, backoff, WithPoolErrors): repro tests
// that FAIL on the code reviewed (branch rv2pool) and pass once the
// weakness each one names is fixed. Exported API only, as an embedder.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// TestReview2PoolExecIgnoresCtxDuringReplan: a caller that finds the pool
// empty and whose own start fails waits, in take -> replanAfter, for the
// pool's replan lock with no regard to its ctx, and the replan function is
// handed the pool's context, never the caller's. While another replan is
// under way (the pool's own recovery; in nsbox mcp the git audits' walks
// and a resolution, whose hold waits up to 3 s per root locked by another
// process), a caller whose ctx is canceled (an MCP client's
// notifications/cancelled, a deadline) is not answered until that replan
// ends, however long it takes: Exec's "ReasonCanceled, ctx having ended"
// does not hold. Here the embedder's replan is slow (it waits for the
// test), the caller's ctx is canceled while its Exec waits behind it, and
// the Exec must return.
func TestReview2PoolExecIgnoresCtxDuringReplan(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		missing := t.TempDir() + "/gone"
		pol := sandbox.Policy{Mounts: []sandbox.Mount{{Kind: sandbox.MountBind, Source: missing, Dest: "/gone"}}}
		entered := make(chan struct{}, 8)
		release := make(chan struct{})
		replan := func(ctx context.Context, cause error) (sandbox.Policy, error) {
			entered <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
				return sandbox.Policy{}, ctx.Err()
			}
			return sandbox.Policy{}, nil
		}
		p, err := sandbox.NewPool(pol, 1, sandbox.WithPoolReplan(replan))
		if err != nil {
			t.Fatal(err)
		}
		released := false
		defer func() {
			if !released {
				close(release)
			}
			p.Close()
		}()
		// The first refill fails; the pool's recovery replans, slowly.
		select {
		case <-entered:
		case <-time.After(60 * time.Second): // a deadlock guard
			t.Fatal("the pool never asked for a new policy after its refill failed")
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := p.Exec(ctx, sandbox.Command{Argv: []string{"/bin/true"}})
			done <- err
		}()
		// Its on-demand start fails (the bind's source is missing); it
		// then queues for the replan lock.
		waitFor(t, func() bool { return p.Stats().StartErrors >= 1 }, "the caller's own start to fail")
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) && ctx.Err() == nil {
				t.Fatalf("Exec returned %v", err)
			}
		case <-time.After(10 * time.Second): // a deadlock guard, not a timing
			close(release)
			released = true
			err := <-done
			t.Fatalf("Exec whose ctx was canceled still waited 10 s for another caller's replan (it returned only once that replan ended: %v)", err)
		}
	})
}
