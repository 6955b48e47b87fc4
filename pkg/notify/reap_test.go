package notify

import (
	"context"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestReaperCancelsTheWaitOfAKilledTarget: an internet connect whose
// handler waits (the filtered network's dial of a host address that never
// answers) is given up when its target dies: the reaper finds the call's
// id no longer valid and cancels the handler's context, well before the
// Server closes. Without it, a sandboxed program killed in the middle of a
// connect held a serving goroutine, and the session's end, for the dial's
// whole timeout.
func TestReaperCancelsTheWaitOfAKilledTarget(t *testing.T) {
	entered := make(chan struct{}, 1)
	ended := make(chan error, 1)
	h := HandlerFunc(func(ctx context.Context, c *SockCall) Verdict {
		// The target dies while its call is being decided, as a
		// program killed by its user or its session's timeout does.
		// Entered is told first: the kill ends the child, and with it
		// runChildWith, which raced this send (a flake of ~5 %).
		entered <- struct{}{}
		unix.Kill(c.Pid, unix.SIGKILL)
		select {
		case <-ctx.Done():
			ended <- ctx.Err()
		case <-time.After(60 * time.Second): // deadlock guard only
			ended <- context.DeadlineExceeded
		}
		return Deny(unix.ETIMEDOUT)
	})
	// runChildWith returns when the child is gone; the Server it made
	// is closed only when the test ends (t.Cleanup), so a cancel seen
	// below came from the reaper, not from Close.
	_, lines := runChildWith(t, "inet", []string{"127.0.0.2:9"}, GateConfig{}, h)
	select {
	case <-entered:
	default:
		t.Fatalf("the handler was never asked: %q", lines)
	}
	if err := <-ended; err != context.Canceled {
		t.Fatalf("the handler's wait for a dead target ended with %v, not a cancel from the reaper", err)
	}
}
