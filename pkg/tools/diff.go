package tools

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nsbox/nsbox/pkg/internal/rolling"
)

// Unified diffs for edit_file. A model writes them by hand, so the parser
// is lenient where patch(1) is: the line counts in a hunk header are not
// trusted (a hunk runs to the next "@@" or file header), and a hunk that
// does not match at its line is looked for nearby. It is strict where a
// silent mistake would hurt: context and removed lines must match exactly,
// and a hunk that matches nowhere fails the whole edit with the hunk named.

// hunk is one "@@ -a,b +c,d @@" section.
type hunk struct {
	header string
	oldAt  int // 1-based first old line ("-a"); 0 for an empty file
	lines  []hunkLine
}

// expect returns the lines the hunk expects in the file (context and
// removed lines, in order) and the 0-based line where its header says
// they start: for a pure insertion "@@ -a,0", the line after a.
func (h hunk) expect() (old []string, want int) {
	for _, l := range h.lines {
		if l.op != '+' {
			old = append(old, l.text)
		}
	}
	want = h.oldAt - 1
	if len(old) == 0 {
		want = h.oldAt
	}
	return old, max(want, 0)
}

type hunkLine struct {
	op   byte // ' ', '-' or '+'
	text string
	// noEOL: "\ No newline at end of file" followed this line.
	noEOL bool
}

// parseUnifiedDiff reads the hunks of a diff of one file.
func parseUnifiedDiff(diff string) ([]hunk, error) {
	lines := strings.Split(strings.ReplaceAll(diff, "\r\n", "\n"), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	var (
		hunks   []hunk
		cur     *hunk
		headers int
	)
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.HasPrefix(l, "--- ") && i+1 < len(lines) && strings.HasPrefix(lines[i+1], "+++ "):
			headers++
			if headers > 1 {
				return nil, errors.New("the diff changes more than one file; edit_file applies the diff of one file (the one named by path)")
			}
			cur = nil
			i++
			continue
		case strings.HasPrefix(l, "@@"):
			h, err := parseHunkHeader(l)
			if err != nil {
				return nil, err
			}
			hunks = append(hunks, h)
			cur = &hunks[len(hunks)-1]
			continue
		}
		if cur == nil {
			// "diff --git", "index ...", prose before the first hunk.
			continue
		}
		switch {
		case l == "":
			// An empty context line whose leading space was stripped
			// (editors and models do it).
			cur.lines = append(cur.lines, hunkLine{op: ' '})
		case l[0] == ' ' || l[0] == '-' || l[0] == '+':
			cur.lines = append(cur.lines, hunkLine{op: l[0], text: l[1:]})
		case l[0] == '\\':
			if n := len(cur.lines); n > 0 {
				cur.lines[n-1].noEOL = true
			}
		default:
			return nil, fmt.Errorf("hunk %s: line %q starts with neither ' ', '-' nor '+'", cur.header, clipString(l, 80))
		}
	}
	if len(hunks) == 0 {
		return nil, errors.New("the diff has no hunk (a line starting with \"@@ -\"); give a unified diff as diff -u prints it")
	}
	for _, h := range hunks {
		changes := false
		for _, l := range h.lines {
			changes = changes || l.op != ' '
		}
		if !changes {
			return nil, fmt.Errorf("hunk %s changes nothing", h.header)
		}
	}
	return hunks, nil
}

// parseHunkHeader reads "@@ -a[,b] +c[,d] @@ [section]".
func parseHunkHeader(l string) (hunk, error) {
	bad := fmt.Errorf("bad hunk header %q (want \"@@ -LINE,COUNT +LINE,COUNT @@\")", clipString(l, 80))
	rest := strings.TrimPrefix(l, "@@")
	end := strings.Index(rest, "@@")
	if end < 0 {
		return hunk{}, bad
	}
	f := strings.Fields(rest[:end])
	if len(f) != 2 || !strings.HasPrefix(f[0], "-") || !strings.HasPrefix(f[1], "+") {
		return hunk{}, bad
	}
	a, _, _ := strings.Cut(f[0][1:], ",")
	n, err := strconv.Atoi(a)
	if err != nil || n < 0 {
		return hunk{}, bad
	}
	return hunk{header: "@@" + rest[:end] + "@@", oldAt: n}, nil
}

// fileLines is the file as lines: start[i] is where line i begins in b,
// and start[n] is len(b). Four bytes a line, not a string pair: a 16 MiB
// file of empty lines held 2 GiB as []struct{text, eol string} and a copy
// of it for the result, in the worker, outside the sandbox's memory
// limit (review 46).
type fileLines struct {
	b     []byte
	start []int32
	hash  *rolling.Hash // made on the first search
}

func splitLines(b []byte) *fileLines {
	f := &fileLines{b: b, start: make([]int32, 0, bytes.Count(b, []byte{'\n'})+2)}
	for off := 0; off < len(b); {
		f.start = append(f.start, int32(off))
		i := bytes.IndexByte(b[off:], '\n')
		if i < 0 {
			break
		}
		off += i + 1
	}
	f.start = append(f.start, int32(len(b)))
	return f
}

func (f *fileLines) len() int { return len(f.start) - 1 }

// text is line i without its end.
func (f *fileLines) text(i int) []byte {
	s, e := f.start[i], f.start[i+1]
	if e > s && f.b[e-1] == '\n' {
		e--
		if e > s && f.b[e-1] == '\r' {
			e--
		}
	}
	return f.b[s:e]
}

// eol is line i's end: "\n", "\r\n" or "" (a last line without one).
func (f *fileLines) eol(i int) string {
	return string(f.b[int(f.start[i])+len(f.text(i)) : f.start[i+1]])
}

// applyUnifiedDiff applies diff to content. It returns the new content, the
// number of hunks and the first changed line of the new file.
func applyUnifiedDiff(content []byte, diff string) ([]byte, int, int, error) {
	hunks, err := parseUnifiedDiff(diff)
	if err != nil {
		return nil, 0, 0, err
	}
	file := splitLines(content)
	eol := "\n"
	if file.len() > 0 && file.eol(0) == "\r\n" {
		eol = "\r\n"
	}
	var (
		out      bytes.Buffer
		written  int  // lines written to out
		openLast bool // the last line written has no end
		next     int  // first line of file not yet copied (0-based)
		first    = -1
		budget   = maxHunkSearch
	)
	out.Grow(len(content) + len(diff))
	// A line that was last and no longer is gets a line end.
	write := func(text []byte, e string) {
		if openLast {
			out.WriteString(eol)
		}
		out.Write(text)
		out.WriteString(e)
		openLast = e == ""
		written++
	}
	// Lines of the file are copied as they are, ends included, a range at
	// a time: only the file's last line can lack an end.
	copyLines := func(from, to int) {
		if from >= to {
			return
		}
		if openLast {
			out.WriteString(eol)
		}
		s, e := file.start[from], file.start[to]
		out.Write(file.b[s:e])
		openLast = file.b[e-1] != '\n'
		written += to - from
	}
	for hi, h := range hunks {
		old, want := h.expect()
		at, err := file.findHunk(old, want, next, &budget)
		if err != nil {
			return nil, 0, 0, fmt.Errorf("hunk %d (%s): %w", hi+1, h.header, err)
		}
		if at < 0 {
			return nil, 0, 0, hunkError(hi, h, file, old, want)
		}
		copyLines(next, at)
		if first < 0 {
			first = written
		}
		k := at
		for _, l := range h.lines {
			switch l.op {
			case ' ':
				copyLines(k, k+1)
				k++
			case '-':
				k++
			case '+':
				e := eol
				if l.noEOL {
					e = ""
				}
				write([]byte(l.text), e)
			}
		}
		next = k
	}
	copyLines(next, file.len())
	return out.Bytes(), len(hunks), first + 1, nil
}

// maxHunkSearch bounds the lines one diff's hunk searches may pass over
// (each search is linear in the file: a diff of many hunks at wrong lines
// made as many passes).
const maxHunkSearch = 1 << 28

// errHunkSearch: the diff's hunks asked for more searching than
// maxHunkSearch.
var errHunkSearch = errors.New("its lines are not where its header says, and the diff's hunks ask for more searching than edit_file does in a file this long; give the hunks' right line numbers")

// findHunk returns where old matches the file, at or after min: at want
// when it matches there, else the nearest match (after before before, at
// one distance), else -1.
//
// In time linear in the file: a window is compared line by line only
// where its rolling hash (package rolling) is old's,
// nearest first. Comparing old at every distance from want cost the
// length of both: a file of 4M lines and a hunk of 30,000 searched for
// minutes in the worker after the call had timed out (review 46).
func (f *fileLines) findHunk(old []string, want, min int, budget *int) (int, error) {
	n, k := f.len(), len(old)
	matches := func(at int) bool {
		if at < min || at+k > n {
			return false
		}
		for i, s := range old {
			if string(f.text(at+i)) != s {
				return false
			}
		}
		return true
	}
	if matches(want) {
		return want, nil
	}
	// Places farther from want than the file has lines are not looked at
	// (a header's line that far off is no guide).
	near := func(at int) bool { return at-want <= n && want-at <= n }
	if k == 0 {
		// Every place in [min, n] matches an empty hunk: the nearest
		// to want.
		at := want
		if at < min {
			at = min
		}
		if at > n {
			at = n
		}
		if at < min || !near(at) {
			return -1, nil
		}
		return at, nil
	}
	if min+k > n {
		return -1, nil
	}
	if *budget -= n - min; *budget < 0 {
		return -1, errHunkSearch
	}
	if f.hash == nil {
		f.hash = rolling.New()
	}
	rh := f.hash
	dist := func(at int) int {
		if at >= want {
			return 2 * (at - want) // after want first at one distance
		}
		return 2*(want-at) + 1
	}
	// One pass, keeping only the nearest window whose hash is old's: no
	// list of candidates, no array of line hashes (a line leaving the
	// window is hashed again). Both cost 16 bytes a line of a 16 MiB file
	// of empty lines, over 1 GiB in the worker (review 47).
	best := -1
	line := func(i int) uint64 { return rh.Line(f.text(i)) }
	for at := range rh.Windows(min, n, k, line, rh.Strings(old)) {
		if near(at) && (best < 0 || dist(at) < dist(best)) {
			best = at
		}
	}
	if best >= 0 && matches(best) {
		return best, nil
	}
	if best < 0 {
		return -1, nil
	}
	// A collision (at most k/2^61 a window: package rolling): the slow
	// scan decides, within the same budget (review 49: unbounded, it was
	// the quadratic search again).
	for d := 0; d <= n; d++ {
		for j, at := range [2]int{want + d, want - d} {
			if j == 1 && d == 0 || !near(at) {
				continue
			}
			if *budget -= k; *budget < 0 {
				return -1, errHunkSearch
			}
			if matches(at) {
				return at, nil
			}
		}
	}
	return -1, nil
}

// hunkError says which hunk did not apply and why, in terms of the file's
// lines: the first line that differs where the hunk says it goes.
func hunkError(i int, h hunk, file *fileLines, old []string, want int) error {
	msg := fmt.Sprintf("hunk %d (%s) does not apply", i+1, h.header)
	switch {
	case want+len(old) > file.len() && want >= file.len():
		msg += fmt.Sprintf(": it starts at line %d, and the file has %d lines", want+1, file.len())
	default:
		for k, s := range old {
			if want+k >= file.len() {
				msg += fmt.Sprintf(": the file ends at line %d, the hunk expects %q there", file.len(), clipString(s, 120))
				break
			}
			if got := string(file.text(want + k)); got != s {
				msg += fmt.Sprintf(": line %d of the file is %q, the hunk expects %q; and its lines match nowhere else", want+k+1, clipString(got, 120), clipString(s, 120))
				break
			}
		}
	}
	var body strings.Builder
	body.WriteString(h.header)
	for _, l := range h.lines {
		body.WriteByte('\n')
		body.WriteByte(l.op)
		body.WriteString(l.text)
	}
	return fmt.Errorf("%s\n%s", msg, clipString(body.String(), 2000))
}
