package sandbox

import (
	"context"
	"encoding/json"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/pkg/ipc"
)

// TestReview40AuditOfUnparsedArgsWithinBudget (review 40, MEDIUM: host
// memory outside every limit).
//
// Finding: the session's ipc.Budget bounds what the supervisor holds for
// hostCalls, and the arguments a handler gets are charged as they are
// parsed (ipc.ParseValueBudget; "[{},{},…]" of 4 MiB held 86 MiB before).
// But when a call's arguments were never parsed that way — the method is
// not on the policy's allowlist, it has no handler, or its arguments did
// not fit in the budget ("bad arguments") — auditLog.record decodes them
// again with encoding/json into map[string]any/[]any, then Redact copies
// that tree, then json.Marshal encodes it whole, all outside the budget,
// only to write the first 4 KiB.
//
// Attack: under `nsbox mcp --audit FILE` (every run_command command gets
// the hostCall socket, since the memory and notepad tools need it), a
// program inside sends hostCalls of 4 MiB of "[{},{},…]" to a method that
// is not allowed ("x.y"), or to an allowed one: the budget refuses to
// parse them, and the audit then parses them without it. One call makes
// the supervisor allocate about 300 MiB (measured 296 MiB), and the budget
// lets 16 such messages be handled at once (64 MiB / 4 MiB) across the
// session's connections: gigabytes of the host's memory, which the
// sandbox's memory limit does not count, for as long as the program loops.
//
// The test audits one such call of each kind and bounds what the audit of
// it allocates (beyond what the same call allocates without an audit) by
// the session's whole budget. Fixed when the audit of arguments that were
// not parsed writes the start of their raw text (redacting what it can)
// instead of decoding all of them.
func TestReview40AuditOfUnparsedArgsWithinBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates a few hundred MiB")
	}
	h := NewHandlers()
	h.Handle("t", "echo", func(ctx context.Context, c HostCall) (ipc.Value, error) { return ipc.Null{}, nil })
	s := newHostCallServer([]string{"t.echo", "t.nohandler"})
	s.handlers = h
	defer s.close()

	for _, c := range []struct{ name, api, method string }{
		{"refused by the policy", "x", "y"},
		{"allowed without a handler", "t", "nohandler"},
		{"arguments over the budget", "t", "echo"},
	} {
		head, tail := `{"api":"`+c.api+`","method":"`+c.method+`","args":[`, `0]}`
		payload := head + strings.Repeat("{},", (4<<20-len(head)-len(tail))/3) + tail
		s.audit = nil
		base := allocOf(func() {
			s.serveCall(context.Background(), &ipc.Request{Type: ipc.TypeHostCall, ID: 1, Payload: json.RawMessage(payload)})
		})
		s.audit = &auditLog{w: io.Discard}
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, err := s.serveCall(context.Background(), &ipc.Request{Type: ipc.TypeHostCall, ID: 1, Payload: json.RawMessage(payload)}); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		alloc := after.TotalAlloc - before.TotalAlloc - min(base, after.TotalAlloc-before.TotalAlloc)
		t.Logf("%s: without the audit the call allocates %d MiB", c.name, base>>20)
		t.Logf("%s: a call of %d bytes made the audit allocate %d MiB", c.name, len(payload), alloc>>20)
		if limit := uint64(hostCallBudgetBytes); alloc > limit {
			t.Errorf("%s: auditing one call of %d bytes allocated %d MiB outside the session's budget (%d MiB for everything in flight; 16 such calls run at once)", c.name, len(payload), alloc>>20, hostCallBudgetBytes>>20)
		}
	}
}

func allocOf(f func()) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
