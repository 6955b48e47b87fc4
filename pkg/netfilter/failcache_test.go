package netfilter

import (
	"net/netip"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// TestFailedLookupHeldDown: a failed lookup is recorded for a hold-down
// within RFC 9520's bounds (1 s to 5 min), answered from the record until
// then, looked up again after, and held in the name's one slot of
// MaxNames (a second name past the bound goes nowhere).
func TestFailedLookupHeldDown(t *testing.T) {
	up := newFailingUpstream(t)
	al, err := ParseAllowlist([]string{"broken.up.test", "*.other.test"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(Config{Allow: al, Upstream: []netip.AddrPort{up.addr}, MaxNames: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	srv := serve(t, f)
	ask := func() {
		t.Helper()
		if rc, _ := query(t, srv, "broken.up.test.", dnsmessage.TypeA, false); rc != dnsmessage.RCodeServerFailure {
			t.Fatalf("broken.up.test: %v, want SERVFAIL", rc)
		}
	}
	ask()
	first := up.queries.Load()
	if first == 0 {
		t.Fatal("no upstream query: nothing tested")
	}
	f.mu.Lock()
	rec, ok := f.failed["broken.up.test"]
	f.mu.Unlock()
	if hold := time.Until(rec.until); !ok || hold < time.Second-time.Millisecond || hold > 5*time.Minute {
		t.Fatalf("failure record %v %+v: hold-down %v, want within [1 s, 5 min] (RFC 9520)", ok, rec, hold)
	}
	ask()
	if n := up.queries.Load(); n != first {
		t.Fatalf("a query within the hold-down went upstream (%d queries, %d before)", n, first)
	}
	// The same name keeps its slot; another is past MaxNames, unasked.
	if rc, _ := query(t, srv, "x.other.test.", dnsmessage.TypeA, false); rc != dnsmessage.RCodeServerFailure || up.queries.Load() != first {
		t.Fatalf("a second name past MaxNames 1: %v, %d upstream queries (%d before)", rc, up.queries.Load(), first)
	}
	// Past the hold-down the name is looked up again.
	f.mu.Lock()
	f.failed["broken.up.test"] = failedLookup{err: rec.err, until: time.Now().Add(-time.Second)}
	f.mu.Unlock()
	ask()
	if n := up.queries.Load(); n == first {
		t.Fatal("a query after the hold-down was answered from the old record")
	}
}
