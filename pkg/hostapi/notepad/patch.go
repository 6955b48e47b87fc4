package notepad

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nsbox/nsbox/pkg/hostapi/store"
	"github.com/nsbox/nsbox/pkg/internal/rolling"
)

// MaxEdits bounds the search/replace edits of one patch. Each edit scans
// and may rebuild the whole document (at most MaxDocumentBytes), so the
// host's work per patch is bounded by MaxEdits × MaxDocumentBytes.
const MaxEdits = 100

// ErrPatch is wrapped by every *PatchError and *EditError.
var ErrPatch = errors.New("patch does not apply")

// PatchError says which hunk of a unified diff failed and why. Line is the
// document line (1-based) that differs.
type PatchError struct {
	Hunk   int    // 1-based; 0 when the diff as a whole is malformed
	Header string // the hunk's @@ line
	Line   int
	Reason string
	// Malformed: the hunk could not be parsed (as opposed to: it does not
	// match the document).
	Malformed bool
}

func (e *PatchError) Error() string {
	if e.Hunk == 0 {
		return "diff is malformed: " + e.Reason
	}
	if e.Malformed {
		return fmt.Sprintf("hunk %d (%s) is malformed: %s", e.Hunk, e.Header, e.Reason)
	}
	return fmt.Sprintf("hunk %d (%s) does not apply: %s", e.Hunk, e.Header, e.Reason)
}

func (e *PatchError) Unwrap() error { return ErrPatch }

// Edit is one search/replace edit: Search must occur exactly once in the
// document (or any number of times, at least one, with All).
type Edit struct {
	Search  string `json:"search"`
	Replace string `json:"replace"`
	All     bool   `json:"all,omitempty"`
}

// EditError says which edit (1-based) failed and why.
type EditError struct {
	Edit   int
	Reason string
}

func (e *EditError) Error() string {
	return fmt.Sprintf("edit %d does not apply: %s", e.Edit, e.Reason)
}

func (e *EditError) Unwrap() error { return ErrPatch }

// ApplyEdits applies edits in order, each to the result of the previous
// one. Either all apply or the first failure is returned.
//
// ApplyEdits runs on the host with arguments from a sandbox: there are at
// most MaxEdits edits, and no edit may make the document larger than
// MaxDocumentBytes (a *store.TooLargeError, checked before the replacement
// is built), so a patch can never make the host allocate more than a few
// documents' worth.
func ApplyEdits(content string, edits []Edit) (string, error) {
	if len(edits) == 0 {
		return "", &EditError{Edit: 0, Reason: "no edits given"}
	}
	// Security (host DoS): the number of edits is bounded before any work.
	if len(edits) > MaxEdits {
		return "", &store.TooLargeError{What: "the list of edits", Size: len(edits), Limit: MaxEdits, Unit: "edits"}
	}
	for i, e := range edits {
		n := i + 1
		if e.Search == "" {
			return "", &EditError{Edit: n, Reason: `"search" is empty`}
		}
		c := strings.Count(content, e.Search)
		switch {
		case c == 0:
			reason := "the search text was not found"
			if strings.Contains(collapseSpace(content), collapseSpace(e.Search)) {
				reason += " (it would match if whitespace were ignored: copy it exactly)"
			}
			return "", &EditError{Edit: n, Reason: reason}
		case c > 1 && !e.All:
			return "", &EditError{Edit: n, Reason: fmt.Sprintf(`the search text occurs %d times; include more surrounding text to make it unique, or set "all": true`, c)}
		}
		// Security (host DoS): the size of the result is computed before
		// it is built and refused over MaxDocumentBytes, so that repeated
		// "all" edits that double the document cannot exhaust the host's
		// memory. int64: count × growth can exceed 32 bits.
		reps := int64(1)
		if e.All {
			reps = int64(c)
		}
		if size := int64(len(content)) + reps*(int64(len(e.Replace))-int64(len(e.Search))); size > MaxDocumentBytes {
			return "", &store.TooLargeError{What: fmt.Sprintf("the document after edit %d (%d replacements)", n, reps), Size: int(size), Limit: MaxDocumentBytes}
		}
		if e.All {
			content = strings.ReplaceAll(content, e.Search, e.Replace)
		} else {
			content = strings.Replace(content, e.Search, e.Replace, 1)
		}
	}
	return content, nil
}

func collapseSpace(s string) string { return strings.Join(strings.Fields(s), " ") }

// hunk is one parsed @@ section.
type hunk struct {
	n                  int
	header             string
	oldStart, oldCount int
	newStart, newCount int
	lines              []hunkLine
	oldNoEOL, newNoEOL bool // "\ No newline at end of file" after the last old/new line
}

type hunkLine struct {
	op   byte // ' ', '-', '+'
	text string
}

// parseDiff reads a unified diff for one document. Lines before the first
// @@ (diff --git, ---, +++, index) are ignored. A body line can never start
// with "@@" (it starts with ' ', '-', '+' or '\'), so hunks split cleanly.
func parseDiff(diff string) ([]hunk, error) {
	diff = strings.ReplaceAll(diff, "\r\n", "\n")
	// The newline ending the last line does not start another line.
	lines := strings.Split(strings.TrimSuffix(diff, "\n"), "\n")
	var hunks []hunk
	i := 0
	for i < len(lines) && !strings.HasPrefix(lines[i], "@@") {
		i++
	}
	for i < len(lines) {
		h := hunk{n: len(hunks) + 1, header: headerOf(lines[i])}
		if err := parseHeader(lines[i], &h); err != nil {
			return nil, &PatchError{Hunk: h.n, Header: h.header, Malformed: true, Reason: err.Error()}
		}
		i++
		oldSeen, newSeen := 0, 0
		last := byte(0)
		for ; i < len(lines) && !strings.HasPrefix(lines[i], "@@"); i++ {
			l := lines[i]
			if oldSeen == h.oldCount && newSeen == h.newCount {
				// The hunk is complete: only a no-newline marker, blank
				// lines or another file's header may follow.
				switch {
				case strings.HasPrefix(l, `\`):
					if err := markNoEOL(&h, last); err != nil {
						return nil, err
					}
					continue
				case strings.TrimSpace(l) == "":
					continue
				case strings.HasPrefix(l, "diff ") || strings.HasPrefix(l, "--- ") || strings.HasPrefix(l, "+++ ") || strings.HasPrefix(l, "index "):
					return nil, &PatchError{Hunk: h.n, Header: h.header, Malformed: true, Reason: "the diff changes more than one file; patch one document at a time"}
				}
				return nil, &PatchError{Hunk: h.n, Header: h.header, Malformed: true, Reason: fmt.Sprintf("the header counts %d old and %d new lines, but more lines follow (%q)", h.oldCount, h.newCount, clip(l))}
			}
			op := byte(' ')
			text := ""
			if l != "" { // an empty line is an empty context line whose space was stripped
				op, text = l[0], l[1:]
			}
			switch op {
			case ' ':
				oldSeen++
				newSeen++
			case '-':
				oldSeen++
			case '+':
				newSeen++
			case '\\':
				if err := markNoEOL(&h, last); err != nil {
					return nil, err
				}
				continue
			default:
				return nil, &PatchError{Hunk: h.n, Header: h.header, Malformed: true, Reason: fmt.Sprintf("line %q does not start with ' ', '-' or '+'", clip(l))}
			}
			if oldSeen > h.oldCount || newSeen > h.newCount {
				return nil, &PatchError{Hunk: h.n, Header: h.header, Malformed: true, Reason: fmt.Sprintf("the header counts %d old and %d new lines, but the body has more", h.oldCount, h.newCount)}
			}
			h.lines = append(h.lines, hunkLine{op: op, text: text})
			last = op
		}
		if oldSeen != h.oldCount || newSeen != h.newCount {
			return nil, &PatchError{Hunk: h.n, Header: h.header, Malformed: true, Reason: fmt.Sprintf("the header counts %d old and %d new lines, but the body has %d and %d", h.oldCount, h.newCount, oldSeen, newSeen)}
		}
		hunks = append(hunks, h)
	}
	if len(hunks) == 0 {
		return nil, &PatchError{Malformed: true, Reason: "no hunks (a unified diff has lines like \"@@ -1,3 +1,4 @@\")"}
	}
	return hunks, nil
}

func markNoEOL(h *hunk, last byte) error {
	switch last {
	case ' ':
		h.oldNoEOL, h.newNoEOL = true, true
	case '-':
		h.oldNoEOL = true
	case '+':
		h.newNoEOL = true
	default:
		return &PatchError{Hunk: h.n, Header: h.header, Malformed: true, Reason: `"\ No newline at end of file" does not follow a line`}
	}
	return nil
}

func headerOf(l string) string {
	if i := strings.Index(l[2:], "@@"); i >= 0 {
		return l[:i+4]
	}
	return clip(l)
}

// parseHeader reads "@@ -a[,b] +c[,d] @@ ...".
func parseHeader(l string, h *hunk) error {
	rest, ok := strings.CutPrefix(l, "@@ -")
	if !ok {
		return errors.New(`the header does not look like "@@ -a,b +c,d @@"`)
	}
	old, rest, ok := strings.Cut(rest, " +")
	if !ok {
		return errors.New(`the header does not look like "@@ -a,b +c,d @@"`)
	}
	nw, _, ok := strings.Cut(rest, " @@")
	if !ok {
		return errors.New(`the header does not look like "@@ -a,b +c,d @@"`)
	}
	var err error
	if h.oldStart, h.oldCount, err = parseRange(old); err != nil {
		return err
	}
	if h.newStart, h.newCount, err = parseRange(nw); err != nil {
		return err
	}
	return nil
}

func parseRange(s string) (start, count int, err error) {
	a, b, has := strings.Cut(s, ",")
	if start, err = strconv.Atoi(a); err != nil || start < 0 {
		return 0, 0, fmt.Errorf("bad line number %q in the header", a)
	}
	count = 1
	if has {
		if count, err = strconv.Atoi(b); err != nil || count < 0 {
			return 0, 0, fmt.Errorf("bad line count %q in the header", b)
		}
	}
	return start, count, nil
}

// ApplyUnifiedDiff applies a unified diff to content. Hunks apply in order;
// each must match the document exactly (context and removed lines) at the
// line its header names or, when the document has moved, at the nearest
// place after the previous hunk where its lines match. Either the whole
// diff applies or a *PatchError names the first hunk that does not.
func ApplyUnifiedDiff(content, diff string) (string, error) {
	hunks, err := parseDiff(diff)
	if err != nil {
		return "", err
	}
	doc, eol := splitLines(content)
	var out []string
	pos := 0 // next line of doc not yet copied
	for _, h := range hunks {
		var old, nw []string
		for _, l := range h.lines {
			if l.op != '+' {
				old = append(old, l.text)
			}
			if l.op != '-' {
				nw = append(nw, l.text)
			}
		}
		want := h.oldStart - 1 // 0-based index where old lines begin
		if h.oldCount == 0 {
			want = h.oldStart // an insertion goes after line oldStart
		}
		at := -1
		if want >= pos && matchAt(doc, old, want) {
			at = want
		} else if len(old) > 0 {
			at = nearest(doc, old, want, pos)
		}
		if at < 0 {
			return "", mismatch(h, doc, old, want, pos)
		}
		out = append(out, doc[pos:at]...)
		out = append(out, nw...)
		pos = at + len(old)
		if pos == len(doc) && (h.oldNoEOL || h.newNoEOL || len(old) > 0) {
			// The hunk reaches the end of the document: the diff says
			// whether the new text ends with a newline.
			eol = !h.newNoEOL
		}
	}
	out = append(out, doc[pos:]...)
	return joinLines(out, eol), nil
}

// mismatch explains why h does not apply at the line its header names.
func mismatch(h hunk, doc, old []string, want, pos int) error {
	e := &PatchError{Hunk: h.n, Header: h.header}
	if want < pos {
		e.Line = want + 1
		e.Reason = fmt.Sprintf("it starts at line %d, inside the previous hunk, and its lines match nowhere after it", want+1)
		return e
	}
	if want > len(doc) {
		e.Line = want + 1
		e.Reason = fmt.Sprintf("it starts at line %d but the document has %d lines", want+1, len(doc))
		if h.oldCount == 0 {
			e.Line = want
			e.Reason = fmt.Sprintf("it inserts after line %d but the document has %d lines", want, len(doc))
		}
		return e
	}
	i := want
	for _, l := range h.lines {
		if l.op == '+' {
			continue
		}
		kind := "context line"
		if l.op == '-' {
			kind = "line to remove"
		}
		if i >= len(doc) {
			e.Line = i + 1
			e.Reason = fmt.Sprintf("%s %d is past the end of the document (%d lines)", kind, i+1, len(doc))
			return e
		}
		if doc[i] != l.text {
			e.Line = i + 1
			e.Reason = fmt.Sprintf("%s %d differs: the document has %q, the patch expects %q", kind, i+1, clip(doc[i]), clip(l.text))
			return e
		}
		i++
	}
	e.Line = want + 1
	e.Reason = "its lines do not match the document"
	return e
}

func matchAt(doc, old []string, at int) bool {
	if at < 0 || at+len(old) > len(doc) {
		return false
	}
	for i, l := range old {
		if doc[at+i] != l {
			return false
		}
	}
	return true
}

// nearest finds where old matches at or after from, closest to want (the
// first of two as close).
//
// In time linear in the document: a window of lines is compared only
// where its rolling hash is old's, nearest to want first, and the first
// that matches is the answer. Comparing old at every line cost the length
// of both, a document of a million lines of "a" and a hunk of half a
// million " a" lines ending in "-b" about 25 minutes of one core, under
// the notepad's write locks (review 40,
// TestReview40PatchSearchIsBounded).
func nearest(doc, old []string, want, from int) int {
	m := len(old)
	if from < 0 || from+m > len(doc) {
		return -1
	}
	if m == 0 {
		return min(max(want, from), len(doc))
	}
	// Line hashes and the windows' rolling hash: package rolling (a
	// polynomial modulo 2^64 let a document make windows collide: a
	// Thue-Morse block and its complement, review 49).
	rh := rolling.New()
	line := func(i int) uint64 { return rh.LineString(doc[i]) }
	cands := slices.Collect(rh.Windows(from, len(doc), m, line, rh.Strings(old)))
	slices.SortStableFunc(cands, func(a, b int) int { return absInt(a-want) - absInt(b-want) })
	// A window that does not match despite its hash is a collision (at
	// most m/2^61 a window); their comparisons are bounded all the same.
	budget := maxPatchCompare
	for _, at := range cands {
		if budget -= m; budget < 0 {
			return -1
		}
		if matchAt(doc, old, at) {
			return at
		}
	}
	return -1
}

// maxPatchCompare bounds the lines one hunk's search compares.
const maxPatchCompare = 1 << 26

func absInt(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// splitLines splits content into lines without their "\n", and says
// whether the last line ended with one.
func splitLines(s string) ([]string, bool) {
	if s == "" {
		return nil, true
	}
	eol := strings.HasSuffix(s, "\n")
	s = strings.TrimSuffix(s, "\n")
	return strings.Split(s, "\n"), eol
}

func joinLines(lines []string, eol bool) string {
	if len(lines) == 0 {
		return ""
	}
	s := strings.Join(lines, "\n")
	if eol {
		s += "\n"
	}
	return s
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}
