package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// freshRunner runs each call in a session of its own and closes it after,
// as sandbox.Pool.CallTool does, with fakeSessions for sandboxes.
type freshRunner struct {
	used   atomic.Int32 // sessions a call ran in
	ended  atomic.Int32 // of those, closed
	closed atomic.Int32 // Close of the runner itself
	fail   error        // when set, no session can be had
}

func (r *freshRunner) CallTool(ctx context.Context, name string, args json.RawMessage, timeout time.Duration) (json.RawMessage, error) {
	if r.fail != nil {
		return nil, &sandbox.PoolStartError{Err: r.fail}
	}
	f := newFake()
	r.used.Add(1)
	defer func() { f.Close(); r.ended.Add(1) }()
	return f.CallTool(ctx, name, args, timeout)
}

func (r *freshRunner) Close() error {
	r.closed.Add(1)
	return nil
}

func startPerCall(t *testing.T, r *freshRunner, mod func(*Config)) *harness {
	t.Helper()
	return startHarness(t, func(c *Config) {
		defs := c.Definitions
		c.Start = func(context.Context) (Session, error) { return PerCall(r, defs), nil }
		if mod != nil {
			mod(c)
		}
	}, "")
}

// TestPerCallFreshSession: every call runs in a session of its own, and a
// call whose sandbox ends under it is an error for that call only: the
// runner (the pool) stays, and the next call runs.
func TestPerCallFreshSession(t *testing.T) {
	r := &freshRunner{}
	h := startPerCall(t, r, nil)
	if names := h.names(); !contains(names, "echo") || !contains(names, "die") {
		t.Fatalf("tools/list before any call: %v", names)
	}
	for i := 0; i < 3; i++ {
		if res := h.call("echo", map[string]any{"text": "x"}); res.IsError {
			t.Fatalf("echo: %q", text(res))
		}
	}
	res := h.call("die", nil)
	if !res.IsError || !strings.Contains(text(res), "the call's sandbox ended") || strings.Contains(text(res), "session ended") {
		t.Fatalf("die: %q", text(res))
	}
	if res := h.call("echo", map[string]any{"text": "after"}); res.IsError {
		t.Fatalf("echo after a sandbox ended: %q", text(res))
	}
	if n := r.used.Load(); n != 5 {
		t.Fatalf("%d sessions used by 5 calls", n)
	}
	if r.closed.Load() != 0 {
		t.Fatal("the runner was closed while the server runs")
	}
	if err := h.close(); err != nil {
		t.Fatal(err)
	}
	if r.closed.Load() != 1 || r.ended.Load() != 5 {
		t.Fatalf("after the server closed: runner closed %d times, %d of 5 sessions ended", r.closed.Load(), r.ended.Load())
	}
}

// TestPerCallRefusesRegistration: register_tool cannot define a tool that
// outlives its call's sandbox, so it is refused with the reason.
func TestPerCallRefusesRegistration(t *testing.T) {
	r := &freshRunner{}
	h := startPerCall(t, r, func(c *Config) { c.AllowRegistration = true })
	res := h.call(RegisterToolName, map[string]any{"name": "hello", "description": "d", "implementation": map[string]any{"argv": []string{"true"}}})
	if !res.IsError || !strings.Contains(text(res), "per-call") {
		t.Fatalf("register_tool: %v %q", res.IsError, text(res))
	}
	if res := h.call("echo", map[string]any{"text": "x"}); res.IsError {
		t.Fatalf("echo after a refused registration: %q", text(res))
	}
}

// TestPerCallNoSandbox: a pool that cannot start a sandbox answers the
// call with the cause, as unavailable.
func TestPerCallNoSandbox(t *testing.T) {
	r := &freshRunner{fail: fmt.Errorf("%w: bind /gone: no such file or directory", sandbox.ErrUnavailable)}
	h := startPerCall(t, r, nil)
	res := h.call("echo", map[string]any{"text": "x"})
	if !res.IsError || !strings.Contains(text(res), "/gone") || !strings.Contains(text(res), "no fresh sandbox") {
		t.Fatalf("echo: %v %q", res.IsError, text(res))
	}
	if reason, _ := Classify(&sandbox.PoolStartError{Err: errors.New("x")}); reason != ReasonUnavailable {
		t.Fatalf("Classify(PoolStartError) = %s", reason)
	}
}
