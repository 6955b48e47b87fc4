package mcpserver

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nsbox/nsbox/pkg/ipc"
)

// boundedSession refuses a call past the worker's in-flight bound, as the
// real channel does ("too many requests in flight").
type boundedSession struct {
	*fakeSession
	inFlight, peak atomic.Int32
	hold           time.Duration
}

func (b *boundedSession) CallTool(ctx context.Context, name string, args json.RawMessage, timeout time.Duration) (json.RawMessage, error) {
	n := b.inFlight.Add(1)
	defer b.inFlight.Add(-1)
	for {
		p := b.peak.Load()
		if n <= p || b.peak.CompareAndSwap(p, n) {
			break
		}
	}
	if n > sessionInFlight {
		return nil, &ipc.RemoteError{Code: ipc.CodeBusy, Message: "too many requests in flight"}
	}
	if name == "echo" {
		select {
		case <-time.After(b.hold):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return b.fakeSession.CallTool(ctx, name, args, timeout)
}

// 150 concurrent calls used to fail 86 times with "too many requests in
// flight": they now wait for a turn, and all succeed.
func TestConcurrentCallsQueue(t *testing.T) {
	var sess *boundedSession
	h := startHarness(t, func(c *Config) {
		c.Start = func(ctx context.Context) (Session, error) {
			sess = &boundedSession{fakeSession: newFake(), hold: 100 * time.Millisecond}
			return sess, nil
		}
	}, "")
	const n = 150
	var wg sync.WaitGroup
	var failed atomic.Int32
	errs := make(chan string, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := h.cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
			switch {
			case err != nil:
				failed.Add(1)
				errs <- err.Error()
			case res.IsError:
				failed.Add(1)
				errs <- text(res)
			}
		}()
	}
	wg.Wait()
	close(errs)
	if f := failed.Load(); f > 0 {
		t.Errorf("%d of %d calls failed, e.g. %q", f, n, <-errs)
	}
	if p := sess.peak.Load(); p > DefaultMaxConcurrentCalls {
		t.Errorf("%d calls in the session at once, want at most %d", p, DefaultMaxConcurrentCalls)
	}
}

// A call waiting for a turn ends with its client's cancellation, without
// ever reaching the session.
func TestQueuedCallIsCancelable(t *testing.T) {
	h := startHarness(t, func(c *Config) { c.MaxConcurrentCalls = 1 }, "")
	ctx, cancelSleep := context.WithCancel(context.Background())
	defer cancelSleep()
	go h.cs.CallTool(ctx, &mcp.CallToolParams{Name: "sleep"})
	deadline := time.Now().Add(5 * time.Second)
	for h.last() == nil || h.last().calls.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the first call did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	qctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	queued := make(chan error, 1)
	go func() {
		_, err := h.cs.CallTool(qctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "queued"}})
		queued <- err
	}()
	waitQueued := func(want int32) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for h.srv.queued.Load() != want {
			if time.Now().After(deadline) {
				t.Fatalf("%d calls wait for a turn, want %d", h.srv.queued.Load(), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitQueued(1)
	cancel()
	if err := <-queued; err == nil {
		t.Fatal("the canceled queued call succeeded")
	}
	// Its notifications/cancelled has reached the server and ended the
	// wait before the turn is given back.
	waitQueued(0)
	cancelSleep()
	select {
	case <-h.last().canceled:
	case <-time.After(10 * time.Second):
		t.Fatal("the first call was not canceled")
	}
	// The queued call never ran; the turn is free again.
	if n := h.last().calls.Load(); n != 1 {
		t.Fatalf("%d calls reached the session, want 1", n)
	}
	if res := h.call("echo", map[string]any{"text": "next"}); res.IsError || text(res) != "next" {
		t.Fatalf("next call: %v %q", res.IsError, text(res))
	}
}
