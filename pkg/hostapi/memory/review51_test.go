package memory

import (
	"fmt"
	"strings"
	"testing"
)

// Review 51, finding: the review-50 fix of memory.list ("list, and the
// order of a tagged recall, decode only the memories they return") left
// the tagged recall out: Recall with tags and an empty query still goes
// through all(), i.e. each(tx, tags, true), which decodes the whole text
// of every memory carrying the tags, only to sort them by update time
// and return `limit` of them. Severity: MEDIUM (the same host memory
// amplification review 50 fixed for list: about the store's text a call
// in the supervisor, outside every sandbox limit, up to 256 calls at
// once in a session).
//
// Attack: from inside, save MaxMemories memories of 16 KiB all tagged
// "t" (memory.save in a loop), then run many `nsbox call memory recall
// '{"tags":["t"],"limit":1}'` at once: each decodes all 80 MB of text.
//
// Fix: with an empty query, order the tagged memories from their
// metadata (each(tx, tags, false)) and fetch only the returned texts, as
// List does.
func TestReview51TaggedRecallDecodesEveryText(t *testing.T) {
	m := open(t, t.TempDir())
	const n = 200
	total := 0
	for i := 0; i < n; i++ {
		var b strings.Builder
		for j := 0; b.Len() < MaxTextBytes-8; j++ {
			fmt.Fprintf(&b, "z%x ", i*5000+j)
		}
		save(t, m, fmt.Sprint("k", i), b.String(), "t")
		total += b.Len()
	}
	var (
		out []Match
		err error
	)
	alloc := review50Allocated(func() { out, err = m.Recall(ctx, "", []string{"t"}, 1) })
	if err != nil || len(out) != 1 {
		t.Fatalf("recall: %d matches, %v", len(out), err)
	}
	t.Logf("tagged recall limit 1 over %d memories (%d KiB of text) allocated %d KiB", n, total>>10, alloc>>10)
	if limit := uint64(total / 4); alloc > limit {
		t.Fatalf("a tagged recall with no query and limit 1 allocated %d KiB, more than a quarter of the %d KiB of text stored: every memory's text is decoded to return one",
			alloc>>10, total>>10)
	}
}
