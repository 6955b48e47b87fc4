package notify

import (
	"context"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// TestAfterRunsOnceAnswered: work a handler hands to SockCall.After runs
// after the target's call was answered (the notification id is no longer
// valid then), once per call.
func TestAfterRunsOnceAnswered(t *testing.T) {
	var ran, pendingThen atomic.Int64
	h := HandlerFunc(func(_ context.Context, c *SockCall) Verdict {
		if c.Syscall != Connect || c.Domain != unix.AF_INET {
			return Allow()
		}
		c.After(func() {
			ran.Add(1)
			if c.Valid() {
				pendingThen.Add(1)
			}
		})
		return Deny(unix.ECONNREFUSED)
	})
	res, lines := runChildWith(t, "inet", []string{"127.0.0.2:9"}, GateConfig{}, h)
	if res["127.0.0.2:9"] != "ECONNREFUSED" {
		t.Fatalf("inet handler: %v", lines)
	}
	if ran.Load() != 1 || pendingThen.Load() != 0 {
		t.Fatalf("After ran %d times, %d of them before the answer", ran.Load(), pendingThen.Load())
	}
}
