package notepad

import (
	"encoding/json"
	"fmt"
	"github.com/nsbox/nsbox/pkg/hostapi/store"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestReview40PatchSearchIsBounded (review 40, MEDIUM: host CPU, and every
// notepad call of the host stalled).
//
// Finding: a unified-diff hunk that does not match at the line its header
// names is looked for at every later line of the document (nearest), and
// each place is compared line by line (matchAt): the work is the
// document's lines times the hunk's old lines, with no bound and no look
// at the context. A document may have a million lines (2 MiB of "a\n") and a
// hunk half as many, so one notepad.patch costs 2.7e11 line comparisons:
// 10 s for a document of 80,000 lines (160 KB, a diff of 120 KB that
// even `nsbox call` passes in argv), about 25 minutes of one host core at
// the largest document. Patch runs all of it inside Store.Update: the
// process's write lock on notepad.db (a sync.RWMutex with no timeout:
// every other session's notepad call in that nsbox process waits), the
// exclusive flock on notepad.db.lock (other nsbox processes and the CLI
// fail with "locked by another process" after 10 s), and bbolt's own
// lock; the handler ignores its context, so neither cancelling the call
// nor ending the session stops it (Session.Close waits for the handler).
//
// Attack: `nsbox mcp` allows every notepad method and gives each
// run_command command the hostCall socket; a command writes a tab of
// a million lines "a" (notepad.write, 2 MiB), then sends notepad.patch with
// "@@ -1,521558 +1,521557 @@", 521,557 lines " a" and "-b" (1.5 MiB; a
// hostCall message may be 4 MiB), as many times as it likes: each call
// is refused only after the full search.
//
// The test runs that patch (the document as large as the store allows)
// and expects the refusal within a generous minute; the code above needs
// about 25. Fixed when the search is bounded (for example by hashing the
// lines, or by refusing a hunk the search would cost too much for).
func TestReview40PatchSearchIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("a 2 MiB document")
	}
	n := open(t, t.TempDir())
	// "a\n" is 2 bytes, 3 as JSON text: the most lines a document holds.
	lines := (MaxDocumentJSONBytes - 2) / 3
	if _, _, err := n.Write(ctx, "doc", nil, strings.Repeat("a\n", lines)); err != nil {
		t.Fatal(err)
	}
	k := lines / 2
	diff := fmt.Sprintf("@@ -1,%d +1,%d @@\n", k+1, k) + strings.Repeat(" a\n", k) + "-b\n"
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := n.Patch(ctx, "doc", diff, nil)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a hunk whose line to remove is in no line of the document applied")
		}
		t.Logf("refused after %v: %.120v", time.Since(start), err)
	case <-time.After(time.Minute):
		t.Fatalf("notepad.patch with a document of %d lines and a hunk of %d (a %d byte diff) still searching after a minute, holding the notepad's write locks", lines, k+1, len(diff))
	}
}

// TestReview40ListHoldsNoDocuments (review 40, MEDIUM: host memory outside
// every limit).
//
// Finding: notepad.list returns each tab's metadata (id, title, size,
// lines, times), yet Notepad.List loads every tab whole: tx.ForEach copies
// each stored record and json.Unmarshal decodes its content, and tabs()
// keeps all of them until the view ends. With the store at its bounds
// (100 tabs of 2 MiB) one call holds more than 200 MiB and allocates about
// 600 MiB (measured 603 MiB, 4.9 s of CPU), for a reply of a few KiB.
// Reads share the store's lock (RLock), so calls run side by side, and
// nothing charges a handler's own memory to the session's ipc.Budget: 64
// calls in flight on one connection (more on others, up to the budget's
// 256 goroutines) make the supervisor hold 64 × 200 MiB.
//
// Attack: under `nsbox mcp` (every notepad method allowed, every
// run_command command holding the hostCall socket) a program writes 100
// tabs of 2 MiB (notepad.write, 17 s here; they stay for later sessions
// too), then keeps 64 notepad.list calls in flight: the MCP server, which
// the sandbox's memory limit does not count, grows by gigabytes until the
// host's OOM killer ends it or something else.
//
// The test fills a quarter of a store and compares what one list
// allocates with what an empty read of the same store allocates (opening
// it checks the file's structure, a cost of its own): decoding every
// document, list allocated 4 MiB a tab more (a copy and the decoded
// text), where the metadata it returns costs a few hundred bytes a tab.
// Allocations, not a sampled heap, so that the answer does not depend on
// when the collector ran.
func TestReview40ListHoldsNoDocuments(t *testing.T) {
	if testing.Short() {
		t.Skip("a store of 50 MiB")
	}
	n := open(t, t.TempDir())
	doc := strings.Repeat("a", MaxDocumentBytes)
	const tabs = MaxTabs / 4 // a quarter of a full store: short enough
	for i := 0; i < tabs; i++ {
		if _, _, err := n.Write(ctx, fmt.Sprintf("t%d", i), nil, doc); err != nil {
			t.Fatal(err)
		}
	}
	doc = ""
	allocs := func(f func() error) uint64 {
		runtime.GC()
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		if err := f(); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&b)
		return b.TotalAlloc - a.TotalAlloc
	}
	read := allocs(func() error { return n.st.View(ctx, func(*store.Tx) error { return nil }) })
	list := allocs(func() error {
		metas, _, err := n.List(ctx)
		if err == nil && len(metas) != tabs {
			t.Errorf("%d tabs listed, want %d", len(metas), tabs)
		}
		return err
	})
	t.Logf("over %d tabs of %d bytes: an empty read allocates %d KiB, a list %d KiB", tabs, MaxDocumentBytes, read>>10, list>>10)
	if list > read+4<<20 {
		t.Fatalf("notepad.list allocated %d MiB more than an empty read of the store, for replies of metadata only", (list-read)>>20)
	}
}

// TestNearestAgreesWithTheScan: the hashed search finds what comparing
// old at every line finds (the nearest match, the first of two as close),
// over small documents of few distinct lines, where matches are many.
func TestNearestAgreesWithTheScan(t *testing.T) {
	scan := func(doc, old []string, want, from int) int {
		best := -1
		for at := from; at+len(old) <= len(doc); at++ {
			if matchAt(doc, old, at) && (best < 0 || absInt(at-want) < absInt(best-want)) {
				best = at
			}
		}
		return best
	}
	r := rand.New(rand.NewPCG(1, 2))
	words := []string{"a", "b", ""}
	pick := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = words[r.IntN(len(words))]
		}
		return out
	}
	for i := 0; i < 20000; i++ {
		doc, old := pick(r.IntN(12)), pick(1+r.IntN(4))
		want, from := r.IntN(14)-1, r.IntN(12)
		if got, exp := nearest(doc, old, want, from), scan(doc, old, want, from); got != exp {
			t.Fatalf("nearest(%q, %q, %d, %d) = %d, the scan finds %d", doc, old, want, from, got, exp)
		}
	}
}

// TestContentSizeAgreesWithDecoding: list's measure of a stored document
// (contentSize, which does not decode it) gives the size and line count
// Tab.meta gives for the decoded text, for text as json.Marshal writes it
// and for escapes it never writes (surrogates, paired or not, invalid
// UTF-8, \u000a).
func TestContentSizeAgreesWithDecoding(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	atoms := []string{"a", "\n", "é", "😀", "\xff", "\xe2\x82", `\n`, `\u000a`, `\ud83d\ude00`, `\ud83d`, `\ude00`, `\ud83dx`, `\u00e9`, `\"`, `\\`, `\/`, `\t`, "<&>"}
	for i := 0; i < 20000; i++ {
		var lit strings.Builder
		for n := r.IntN(8); n > 0; n-- {
			lit.WriteString(atoms[r.IntN(len(atoms))])
		}
		raw := lit.String()
		for _, in := range []string{`"` + strings.ReplaceAll(raw, "\n", `\n`) + `"`, mustJSON(raw)} {
			var s string
			if err := json.Unmarshal([]byte(in), &s); err != nil {
				continue // not a JSON string: never stored
			}
			tab := Tab{Content: s}
			want := tab.meta("")
			var c contentSize
			if err := c.UnmarshalJSON([]byte(in)); err != nil || c.size != want.Size || c.lines != want.Lines {
				t.Fatalf("%s: measured %d bytes, %d lines (%v); decoded %d, %d", in, c.size, c.lines, err, want.Size, want.Lines)
			}
		}
	}
}

func mustJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
