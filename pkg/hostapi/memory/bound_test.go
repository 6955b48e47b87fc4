package memory

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/pkg/hostapi/internal/hostcall"
	"github.com/nsbox/nsbox/pkg/ipc"
)

// A list or recall of memories that are each within their bound used to
// fail as a whole once their JSON passed the result's 3 MiB (40 memories
// of 16 KiB of "<", 6 bytes each in JSON): the caller got "the result is
// too large" for a call a smaller limit would have answered. Now the
// records that fit come back, marked truncated.
func TestListAndRecallFitTheResultBound(t *testing.T) {
	m := open(t, t.TempDir())
	const n = 60
	text := strings.Repeat("<", MaxTextBytes-16)
	for i := 0; i < n; i++ {
		save(t, m, fmt.Sprint("k", i), fmt.Sprint("word ", i, " ", text), "t")
	}
	for _, c := range []struct{ method, args, field string }{
		{"list", `{"limit":1000}`, "memories"},
		{"recall", `{"query":"word","limit":50}`, "results"},
		{"recall", `{"tags":["t"],"limit":50}`, "results"},
	} {
		var out any
		for _, meth := range methods(m) {
			if meth.Name == c.method {
				v, err := ipc.ParseValue([]byte(c.args))
				if err != nil {
					t.Fatal(err)
				}
				if out, err = meth.Fn(ctx, v); err != nil {
					t.Fatalf("%s %s: %v", c.method, c.args, err)
				}
			}
		}
		val, err := hostcall.Result(out)
		if err != nil {
			t.Fatalf("%s %s: %v", c.method, c.args, err)
		}
		res := val.(ipc.Map)
		got := res[c.field].(ipc.List)
		if res["truncated"] != ipc.Bool(true) || len(got) == 0 || len(got) >= n {
			t.Fatalf("%s %s: %d records, truncated=%v; want some but not all %d, truncated", c.method, c.args, len(got), res["truncated"], n)
		}
	}
	// A result that fits says so.
	v, err := call(t, m, "list", `{"limit":3}`)
	if err != nil {
		t.Fatal(err)
	}
	if r := v.(ipc.Map); len(r["memories"].(ipc.List)) != 3 || r["truncated"] != ipc.Bool(false) {
		t.Fatalf("list limit 3: %v records, truncated=%v", len(r["memories"].(ipc.List)), r["truncated"])
	}
}
