package main

import (
	"fmt"
	"io"
	"os"
	"unicode/utf8"
)

// msgs is where nsbox's own messages go: stderr, with every control
// character but newline and tab escaped. Messages name paths and text a
// sandbox chose (a repository made in a directory named "x\e[2K\r\e[8m"),
// which must not drive the user's terminal: erase the warning, or write
// text of the sandbox's in its place (review 18). A command's own output
// is not nsbox's message: `nsbox run` hands it the caller's stderr, as any
// program would have it.
var msgs io.Writer = termSafe{os.Stderr}

// termSafe escapes, in what is written to w, the C0 and C1 control
// characters but newline and tab, DEL, the bidirectional overrides and
// isolates (which reorder the text shown), and bytes that are not UTF-8.
type termSafe struct{ w io.Writer }

func (t termSafe) Write(p []byte) (int, error) {
	if !needsEscape(p) {
		return t.w.Write(p)
	}
	if _, err := t.w.Write(escapeControls(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

func unsafeRune(r rune) bool {
	return (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r <= 0x9f) ||
		(r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

func needsEscape(p []byte) bool {
	for i := 0; i < len(p); {
		r, n := utf8.DecodeRune(p[i:])
		if (r == utf8.RuneError && n == 1) || unsafeRune(r) {
			return true
		}
		i += n
	}
	return false
}

func escapeControls(p []byte) []byte {
	out := make([]byte, 0, len(p)+16)
	for i := 0; i < len(p); {
		r, n := utf8.DecodeRune(p[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			out = fmt.Appendf(out, `\x%02x`, p[i])
		case r < 0x80 && unsafeRune(r):
			out = fmt.Appendf(out, `\x%02x`, r)
		case unsafeRune(r):
			out = fmt.Appendf(out, `\u%04x`, r)
		default:
			out = append(out, p[i:i+n]...)
		}
		i += n
	}
	return out
}
