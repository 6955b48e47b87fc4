package memory

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// review50Fill saves n memories of (almost) MaxTextBytes each, every word
// of which occurs in no other memory, as a sandbox can (memory.save, 16 KiB
// a call, up to MaxMemories), and returns the bytes of text saved.
func review50Fill(t *testing.T, m *Memory, n int) int {
	t.Helper()
	total := 0
	for i := 0; i < n; i++ {
		var b strings.Builder
		for j := 0; b.Len() < MaxTextBytes-8; j++ {
			fmt.Fprintf(&b, "z%x ", i*5000+j)
		}
		save(t, m, fmt.Sprint("k", i), b.String())
		total += b.Len()
	}
	return total
}

// review50Allocated is the bytes allocated while fn runs.
func review50Allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Review 50, finding: one memory.recall with a query builds, in the host's
// supervisor, a map of every distinct word of every memory (a term
// frequency map per memory, and a document frequency map over all of
// them), although only the query's words are ever scored. Severity: HIGH
// (a sandbox exhausts the host's memory and CPU; the sandbox's own memory
// limit does not count the supervisor).
//
// Attack: a command inside saves MaxMemories (5000) memories of 16 KiB of
// distinct short words ("z1 z2 z3 ...", about 4000 a memory; a couple of
// minutes of `nsbox call memory save` in a loop), then runs `nsbox call
// memory recall '{"query":"x"}'`. rank() then holds about 20 million map
// entries: measured here 0.88 MiB allocated and 3 ms of CPU per memory,
// 907 MiB and 3.9 s for 1000 memories, so about 4.4 GB and 20 s for one
// recall of a full store. rank runs outside the store's lock and a
// session serves up to 256 handler goroutines at once, so a handful of
// recalls in parallel take the host down (the OOM killer picks the
// largest process: often the user's editor or browser, or nsbox itself
// with every other session). The same store is every stdio session's, so
// a later session's innocent recall pays it too.
//
// The bound: scoring against the query's words needs per memory only the
// counts of those words and its length (a prototype doing that allocates
// 0.25 MiB a memory, nearly all of it the tokenizer's own slices).
func TestReview50RecallRanksEveryWordOfEveryMemory(t *testing.T) {
	m := open(t, t.TempDir())
	const n = 200
	review50Fill(t, m, n)
	var err error
	alloc := review50Allocated(func() { _, err = m.Recall(ctx, "needle", nil, 5) })
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("one recall over %d memories of 16 KiB allocated %d MiB", n, alloc>>20)
	if limit := uint64(n) * 512 << 10; alloc > limit {
		t.Fatalf("one recall over %d memories allocated %d MiB (over %d MiB: 512 KiB a memory); a full store (%d) is about %d GB a call",
			n, alloc>>20, limit>>20, MaxMemories, alloc*MaxMemories/n>>30)
	}
}

// Review 50, finding: memory.list with limit 1 (and every recall) copies
// and decodes every memory's whole text in the host, whatever the limit:
// all() copies each value out of the store (Tx.ForEach) and unmarshals it
// into a Record with its Text, only for List to keep one. Severity:
// MEDIUM (host memory: about twice the store, up to 160 MiB, for each call
// in flight; a session runs up to 256 handler goroutines at once and a
// View takes a shared lock, so they all run together).
//
// Attack: fill the store (5000 memories of 16 KiB, 80 MB), then run many
// `nsbox call memory list '{"limit":1}'` at once from inside: each holds
// its own copy of all 80 MB of text and its decoded strings, 256 of them
// 40 GB. Ordering by update time needs each memory's key, tags and time,
// not its text: the texts of the few memories returned can be read
// afterwards.
func TestReview50ListOneDecodesEveryText(t *testing.T) {
	m := open(t, t.TempDir())
	const n = 200
	text := review50Fill(t, m, n)
	var (
		recs []Record
		err  error
	)
	alloc := review50Allocated(func() { recs, _, err = m.List(ctx, "", 1) })
	if err != nil || len(recs) != 1 {
		t.Fatalf("list: %d records, %v", len(recs), err)
	}
	t.Logf("memory.list limit 1 over %d memories (%d KiB of text) allocated %d KiB", n, text>>10, alloc>>10)
	if limit := uint64(text / 4); alloc > limit {
		t.Fatalf("memory.list with limit 1 allocated %d KiB, more than a quarter of the %d KiB of text stored: every memory's text is copied and decoded to return one",
			alloc>>10, text>>10)
	}
}
