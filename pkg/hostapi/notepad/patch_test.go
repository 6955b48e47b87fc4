package notepad

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/pkg/hostapi/store"
)

func numbered(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

func TestUnifiedDiffApplies(t *testing.T) {
	doc := numbered(20)
	diff := `--- a/doc
+++ b/doc
@@ -2,3 +2,3 @@
 line 2
-line 3
+line three
 line 4
@@ -10,3 +10,4 @@ some function context
 line 10
 line 11
+inserted after 11
 line 12
`
	got, err := ApplyUnifiedDiff(doc, diff)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(doc, "line 3\n", "line three\n", 1)
	want = strings.Replace(want, "line 11\n", "line 11\ninserted after 11\n", 1)
	if got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestUnifiedDiffBadHunkIsNamed(t *testing.T) {
	doc := numbered(20)
	diff := `@@ -2,2 +2,2 @@
 line 2
-line 3
+line three
@@ -10,3 +10,4 @@
 line 10
 line eleven
+new
 line 12
`
	_, err := ApplyUnifiedDiff(doc, diff)
	var pe *PatchError
	if !errors.As(err, &pe) || !errors.Is(err, ErrPatch) {
		t.Fatalf("err = %v, want a *PatchError", err)
	}
	if pe.Hunk != 2 || pe.Line != 11 {
		t.Fatalf("hunk %d line %d, want hunk 2 line 11", pe.Hunk, pe.Line)
	}
	wantMsg := `hunk 2 (@@ -10,3 +10,4 @@) does not apply: context line 11 differs: the document has "line 11", the patch expects "line eleven"`
	if err.Error() != wantMsg {
		t.Fatalf("message:\n%s\nwant:\n%s", err, wantMsg)
	}
	// A line to remove that differs is named as such.
	_, err = ApplyUnifiedDiff(doc, "@@ -5,1 +5,1 @@\n-line five\n+x\n")
	if err == nil || !strings.Contains(err.Error(), "hunk 1 (@@ -5,1 +5,1 @@) does not apply: line to remove 5 differs") {
		t.Fatalf("removed-line mismatch: %v", err)
	}
	// Past the end.
	_, err = ApplyUnifiedDiff("a\nb\n", "@@ -2,2 +2,2 @@\n b\n-c\n+d\n")
	if err == nil || !strings.Contains(err.Error(), "line to remove 3 is past the end of the document (2 lines)") {
		t.Fatalf("past the end: %v", err)
	}
}

func TestUnifiedDiffFindsMovedHunk(t *testing.T) {
	// The document gained two lines above the hunk since the diff was made.
	doc := "new 1\nnew 2\n" + numbered(10)
	got, err := ApplyUnifiedDiff(doc, "@@ -4,3 +4,3 @@\n line 4\n-line 5\n+line five\n line 6\n")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "line 4\nline five\nline 6\n") || strings.Contains(got, "line 5\n") {
		t.Fatalf("moved hunk applied wrongly:\n%s", got)
	}
}

func TestUnifiedDiffEdgeCases(t *testing.T) {
	cases := []struct{ name, doc, diff, want string }{
		{"empty document", "", "@@ -0,0 +1,2 @@\n+a\n+b\n", "a\nb\n"},
		{"counts omitted", "x\n", "@@ -1 +1 @@\n-x\n+y\n", "y\n"},
		{"delete all", "a\nb\n", "@@ -1,2 +0,0 @@\n-a\n-b\n", ""},
		{"no newline kept", "a\nb", "@@ -1,2 +1,2 @@\n-a\n+A\n b\n\\ No newline at end of file\n", "A\nb"},
		{"newline added", "a\nb", "@@ -2 +2 @@\n-b\n\\ No newline at end of file\n+b\n", "a\nb\n"},
		{"newline removed", "a\nb\n", "@@ -2 +2 @@\n-b\n+b\n\\ No newline at end of file\n", "a\nb"},
		{"stripped blank context", "a\n\nb\n", "@@ -1,3 +1,3 @@\n a\n\n-b\n+c\n", "a\n\nc\n"},
		{"CRLF diff", "a\nb\n", "@@ -1,2 +1,2 @@\r\n a\r\n-b\r\n+c\r\n", "a\nc\n"},
	}
	for _, c := range cases {
		got, err := ApplyUnifiedDiff(c.doc, c.diff)
		if err != nil || got != c.want {
			t.Errorf("%s: got %q (%v), want %q", c.name, got, err, c.want)
		}
	}
}

func TestUnifiedDiffMalformed(t *testing.T) {
	for diff, want := range map[string]string{
		"just text\n":               "diff is malformed: no hunks",
		"@@ -1,2 +1,2 @@\n a\n-b\n": "hunk 1 (@@ -1,2 +1,2 @@) is malformed: the header counts 2 old and 2 new lines, but the body has 2 and 1",
		"@@ -1 +1 @@\n-a\n+b\n c\n": "hunk 1 (@@ -1 +1 @@) is malformed: the header counts 1 old and 1 new lines, but more lines follow",
		"@@ -x +1 @@\n":             `bad line number "x"`,
		"@@ -1 +1 @@\n-a\n+b\n--- a/other\n+++ b/other\n":     "more than one file",
		"@@ -1,1 +1,1 @@\n*a\n":                               `does not start with ' ', '-' or '+'`,
		"@@ -1 +1 @@\n\\ No newline at end of file\n-a\n+b\n": `does not follow a line`,
	} {
		_, err := ApplyUnifiedDiff("a\n", diff)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", diff, err, want)
		}
	}
}

func TestSearchReplaceEdits(t *testing.T) {
	doc := "alpha\nbeta\ngamma beta\n"
	got, err := ApplyEdits(doc, []Edit{
		{Search: "alpha", Replace: "ALPHA"},
		{Search: "beta", Replace: "B", All: true},
		{Search: "ALPHA\nB", Replace: "first"}, // sees the previous edits
	})
	if err != nil || got != "first\ngamma B\n" {
		t.Fatalf("got %q, %v", got, err)
	}
	for _, c := range []struct {
		edits []Edit
		want  string
	}{
		{[]Edit{{Search: "alpha", Replace: "a"}, {Search: "delta", Replace: "d"}}, "edit 2 does not apply: the search text was not found"},
		{[]Edit{{Search: "beta", Replace: "b"}}, `edit 1 does not apply: the search text occurs 2 times`},
		{[]Edit{{Search: "", Replace: "b"}}, `edit 1 does not apply: "search" is empty`},
		{[]Edit{{Search: "alpha  beta", Replace: "b"}}, "it would match if whitespace were ignored"},
		{nil, "no edits given"},
	} {
		_, err := ApplyEdits(doc, c.edits)
		var ee *EditError
		if !errors.As(err, &ee) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.edits, err, c.want)
		}
	}
}

// A chain of "all" edits that doubles the document is refused at the edit
// that crosses MaxDocumentBytes, before that edit's result is built (it used
// to be checked only after every edit: 20 doublings of 100 KB took the host
// out of memory).
func TestEditsGrowthIsBoundedBeforeReplacing(t *testing.T) {
	doc := strings.Repeat("a", 4<<10)
	edits := make([]Edit, 10) // 4 KiB × 2^10 = 4 MiB
	for i := range edits {
		edits[i] = Edit{Search: "a", Replace: "aa", All: true}
	}
	_, err := ApplyEdits(doc, edits)
	var tl *store.TooLargeError
	if !errors.As(err, &tl) || !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("err = %v, want a *store.TooLargeError", err)
	}
	// 4 KiB × 2^9 = 2 MiB is allowed; the 10th edit would make 4 MiB.
	if want := "the document after edit 10 (2097152 replacements) is too large: 4194304 bytes, the limit is 2097152 bytes"; err.Error() != want {
		t.Fatalf("message %q, want %q", err, want)
	}
}

// The reviewer's reproduction: 20 doublings of a 100 KB document. It must
// fail fast without allocating more than a few documents.
func TestEditsDoublingDoesNotExhaustMemory(t *testing.T) {
	doc := strings.Repeat("a", 100_000)
	edits := make([]Edit, 20)
	for i := range edits {
		edits[i] = Edit{Search: "a", Replace: "aa", All: true}
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := ApplyEdits(doc, edits)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Fatalf("ApplyEdits allocated %d bytes", alloc)
	}
}

func TestEditsCountIsBounded(t *testing.T) {
	edits := make([]Edit, MaxEdits+1)
	for i := range edits {
		edits[i] = Edit{Search: "a", Replace: "a"}
	}
	_, err := ApplyEdits("a", edits)
	if !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	if want := "the list of edits is too large: 101 edits, the limit is 100 edits"; err.Error() != want {
		t.Fatalf("message %q, want %q", err, want)
	}
	if _, err := ApplyEdits("a", edits[:MaxEdits]); err != nil {
		t.Fatalf("%d edits: %v", MaxEdits, err)
	}
}

// A shrinking "all" edit of a document at the bound is fine.
func TestEditsShrinkingAtTheBound(t *testing.T) {
	doc := strings.Repeat("ab", MaxDocumentBytes/2)
	got, err := ApplyEdits(doc, []Edit{{Search: "ab", Replace: "c", All: true}, {Search: "c", Replace: "dd", All: true}})
	if err != nil || len(got) != MaxDocumentBytes {
		t.Fatalf("len %d, err %v", len(got), err)
	}
}
