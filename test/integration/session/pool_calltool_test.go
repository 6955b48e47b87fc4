package session

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// TestPoolCallToolFreshSandbox: every Pool.CallTool takes a sandbox of its
// own (the state-crossing end to end is TestIsolationPerCall in
// test/integration/mcp, with the real tools).
func TestPoolCallToolFreshSandbox(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		p := readyPool(t, 2)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for i := 0; i < 3; i++ {
			// This test binary's worker serves no tools: the call is
			// answered (an unknown tool), by a sandbox of the pool.
			// This test binary's worker serves no tools: the answer is
			// that worker's own, from a sandbox of the pool.
			_, err := p.CallTool(ctx, "no_such_tool", []byte(`{}`), 0)
			if err == nil || !strings.Contains(err.Error(), "serves no tools") {
				t.Fatalf("call %d: %v; want the worker's answer that it serves no tools", i, err)
			}
		}
		if st := p.Stats(); st.Taken != 3 {
			t.Fatalf("stats %+v: want 3 sandboxes taken by 3 calls", st)
		}
	})
}

// TestPoolCallToolNoSandbox: a pool whose refills fail answers a call with
// a *PoolStartError naming the cause, at once, instead of waiting for a
// refill.
func TestPoolCallToolNoSandbox(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		p, missing := brokenPool(t)
		// A deadlock guard, not a timing assertion.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := p.CallTool(ctx, "run_command", []byte(`{"command":"true"}`), 0)
		var pe *sandbox.PoolStartError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), missing) {
			t.Fatalf("CallTool on a pool that cannot start a sandbox: %v; want a PoolStartError naming %s", err, missing)
		}
		if ctx.Err() != nil {
			t.Fatal("CallTool waited for the deadline guard")
		}
	})
}

// TestPoolCloseEndsCallsInFlight: Close ends a sandbox that is still
// running a call: the call fails, and no process of it outlives Close
// (whose caller may then release what the sandboxes relied on).
func TestPoolCloseEndsCallsInFlight(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		p := readyPool(t, 1)
		marker := strconv.Itoa(400000 + os.Getpid()%100000)
		done := make(chan error, 1)
		go func() {
			_, err := p.Exec(context.Background(), sandbox.Command{Argv: []string{"sleep", marker}})
			done <- err
		}()
		deadline := time.Now().Add(time.Minute) // a deadlock guard
		for len(pidsOf("sleep\x00"+marker)) == 0 {
			if time.Now().After(deadline) {
				t.Fatal("the call's sleep never ran")
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err := p.Close(); err != nil {
			t.Logf("Close: %v", err)
		}
		if left := pidsOf("sleep\x00" + marker); len(left) > 0 {
			t.Fatalf("a call's process outlived Pool.Close: %v", left)
		}
		select {
		case err := <-done:
			if err == nil {
				t.Fatal("the call in flight succeeded although its sandbox was ended")
			}
		case <-time.After(time.Minute):
			t.Fatal("the call in flight did not return after Close")
		}
	})
}
