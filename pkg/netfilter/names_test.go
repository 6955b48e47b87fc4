package netfilter

import (
	"sync"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// TestNameSlotsReservedBeforeLookup: made-up names under a wildcard,
// asked all at once, never send more distinct names upstream than
// MaxNames (the slot is taken before the lookup, found or not), and
// concurrent queries for one name make one lookup.
func TestNameSlotsReservedBeforeLookup(t *testing.T) {
	up := newFakeUpstream(t)
	const maxNames = 3
	f := newFilter(t, up, []string{"*.up.test"}, nil, nil, func(c *Config) { c.MaxNames = maxNames })
	defer f.Close()
	srv := serve(t, f)
	var wg sync.WaitGroup
	for i := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := "nothere.x" + itoa(uint16(i)) + ".up.test."
			if i%2 == 0 {
				name = "found" + itoa(uint16(i)) + ".up.test."
			}
			query(t, srv, name, dnsmessage.TypeA, false)
		}()
	}
	wg.Wait()
	up.mu.Lock()
	distinct := map[string]bool{}
	for _, n := range up.names {
		distinct[n] = true
	}
	up.mu.Unlock()
	if len(distinct) > maxNames {
		t.Errorf("MaxNames %d, yet %d distinct names went upstream: %v", maxNames, len(distinct), distinct)
	}

	f2 := newFilter(t, up, []string{"one.up.test"}, nil, nil, nil)
	defer f2.Close()
	srv2 := serve(t, f2)
	before := up.queries.Load()
	for range 16 {
		wg.Add(1)
		go func() { defer wg.Done(); query(t, srv2, "one.up.test.", dnsmessage.TypeA, false) }()
	}
	wg.Wait()
	if n := up.queries.Load() - before; n > 2 {
		t.Errorf("16 concurrent queries for one name made %d upstream queries (one lookup is an A and an AAAA)", n)
	}
}

func TestEscapeName(t *testing.T) {
	for in, want := range map[string]string{
		"a!b.example.":         "a!b.example.",
		"a b\n\x1b[31m\\\xff.": `a\x20b\x0a\x1b[31m\x5c\xff.`,
	} {
		if got := escapeName(in); got != want {
			t.Errorf("escapeName(%q) = %q, want %q", in, got, want)
		}
	}
	long := escapeName(string(make([]byte, 300)))
	if len(long) != maxReportedName*4+3 {
		t.Errorf("300 NULs rendered as %d bytes", len(long))
	}
}
