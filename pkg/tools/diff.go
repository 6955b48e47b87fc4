package tools

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
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

// fileLine is a line of the file and its end ("\n", "\r\n" or "" for a
// last line without one).
type fileLine struct{ text, eol string }

func splitLines(b []byte) []fileLine {
	var out []fileLine
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			out = append(out, fileLine{text: string(b)})
			break
		}
		l := fileLine{text: string(b[:i]), eol: "\n"}
		if strings.HasSuffix(l.text, "\r") {
			l.text, l.eol = l.text[:len(l.text)-1], "\r\n"
		}
		out = append(out, l)
		b = b[i+1:]
	}
	return out
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
	if len(file) > 0 && file[0].eol == "\r\n" {
		eol = "\r\n"
	}
	var (
		out   []fileLine
		next  int // first line of file not yet copied (0-based)
		first = -1
	)
	for hi, h := range hunks {
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
		at := findHunk(file, old, want, next)
		if at < 0 {
			return nil, 0, 0, hunkError(hi, h, file, old, want)
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
				out = append(out, fileLine{text: l.text, eol: e})
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
func findHunk(file []fileLine, old []string, want, min int) int {
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

// hunkError says which hunk did not apply and why, in terms of the file's
// lines: the first line that differs where the hunk says it goes.
func hunkError(i int, h hunk, file []fileLine, old []string, want int) error {
	msg := fmt.Sprintf("hunk %d (%s) does not apply", i+1, h.header)
	switch {
	case want+len(old) > len(file) && want >= len(file):
		msg += fmt.Sprintf(": it starts at line %d, and the file has %d lines", want+1, len(file))
	default:
		for k, s := range old {
			if want+k >= len(file) {
				msg += fmt.Sprintf(": the file ends at line %d, the hunk expects %q there", len(file), clipString(s, 120))
				break
			}
			if got := file[want+k].text; got != s {
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
