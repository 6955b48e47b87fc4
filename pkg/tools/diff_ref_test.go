package tools

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// The implementation of applyUnifiedDiff before review 46, the reference
// the compact one must agree with.

// refFileLine is a line of the file and its end ("\n", "\r\n" or "" for
// a last line without one).
type refFileLine struct{ text, eol string }

func refSplitLines(b []byte) []refFileLine {
	var out []refFileLine
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			out = append(out, refFileLine{text: string(b)})
			break
		}
		l := refFileLine{text: string(b[:i]), eol: "\n"}
		if strings.HasSuffix(l.text, "\r") {
			l.text, l.eol = l.text[:len(l.text)-1], "\r\n"
		}
		out = append(out, l)
		b = b[i+1:]
	}
	return out
}

// refApplyUnifiedDiff applies diff to content. It returns the new content, the
// number of hunks and the first changed line of the new file.
func refApplyUnifiedDiff(content []byte, diff string) ([]byte, int, int, error) {
	hunks, err := parseUnifiedDiff(diff)
	if err != nil {
		return nil, 0, 0, err
	}
	file := refSplitLines(content)
	eol := "\n"
	if len(file) > 0 && file[0].eol == "\r\n" {
		eol = "\r\n"
	}
	var (
		out   []refFileLine
		next  int // first line of file not yet copied (0-based)
		first = -1
	)
	for _, h := range hunks {
		// Computed here, not with h.expect(): the reference must not
		// share the code it checks (review 54).
		var old []string
		for _, l := range h.lines {
			if l.op != '+' {
				old = append(old, l.text)
			}
		}
		want := h.oldAt - 1
		if len(old) == 0 {
			// A pure insertion "@@ -a,0": after line a.
			want = h.oldAt
		}
		if want < 0 {
			want = 0
		}
		at := refFindHunk(file, old, want, next)
		if at < 0 {
			return nil, 0, 0, errors.New("no match")
		}
		out = append(out, file[next:at]...)
		if first < 0 {
			first = len(out)
		}
		k := at
		for _, l := range h.lines {
			switch l.op {
			case ' ':
				out = append(out, file[k])
				k++
			case '-':
				k++
			case '+':
				e := eol
				if l.noEOL {
					e = ""
				}
				out = append(out, refFileLine{text: l.text, eol: e})
			}
		}
		next = k
	}
	out = append(out, file[next:]...)
	var b bytes.Buffer
	for i, l := range out {
		b.WriteString(l.text)
		if l.eol == "" && i < len(out)-1 {
			// A line that was last and no longer is gets a line end.
			l.eol = eol
		}
		b.WriteString(l.eol)
	}
	return b.Bytes(), len(hunks), first + 1, nil
}

// findHunk returns where old matches file, at or after min: at want when it
// matches there, else the nearest match (before or after), else -1.
func refFindHunk(file []refFileLine, old []string, want, min int) int {
	matches := func(at int) bool {
		if at < min || at+len(old) > len(file) {
			return false
		}
		for i, s := range old {
			if file[at+i].text != s {
				return false
			}
		}
		return true
	}
	for d := 0; d <= len(file); d++ {
		if matches(want + d) {
			return want + d
		}
		if d > 0 && matches(want-d) {
			return want - d
		}
	}
	return -1
}

// TestApplyUnifiedDiffAgreesWithTheReference: the compact lines and the
// hashed search apply every diff as the old per-line copy and scan did:
// random files of few distinct lines (many equal places), random hunks
// at right and wrong line numbers, CRLF and files without a last newline.
func TestApplyUnifiedDiffAgreesWithTheReference(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	words := []string{"a", "b", "", "c"}
	for i := 0; i < 20000; i++ {
		var lines []string
		for n := r.IntN(10); n > 0; n-- {
			lines = append(lines, words[r.IntN(len(words))])
		}
		eol := "\n"
		if r.IntN(4) == 0 {
			eol = "\r\n"
		}
		content := strings.Join(lines, eol)
		if len(lines) > 0 && r.IntN(3) > 0 {
			content += eol
		}
		var diff strings.Builder
		diff.WriteString("--- a/f\n+++ b/f\n")
		for h := 1 + r.IntN(2); h > 0; h-- {
			fmt.Fprintf(&diff, "@@ -%d,1 +%d,1 @@\n", r.IntN(12), r.IntN(12))
			for l := 1 + r.IntN(3); l > 0; l-- {
				diff.WriteString(string(" -+"[r.IntN(3)]) + words[r.IntN(len(words))] + "\n")
			}
		}
		want, wn, wf, werr := refApplyUnifiedDiff([]byte(content), diff.String())
		got, gn, gf, gerr := applyUnifiedDiff([]byte(content), diff.String())
		if (werr == nil) != (gerr == nil) || !bytes.Equal(want, got) || wn != gn || wf != gf {
			t.Fatalf("content %q diff %q:\n got %q %d %d %v\nwant %q %d %d %v", content, diff.String(), got, gn, gf, gerr, want, wn, wf, werr)
		}
	}
}
