package main

import (
	"strings"
	"testing"
)

// Review 50, finding: `nsbox memory list` and `nsbox memory search` print
// keys, tags and text a sandbox chose with the bidirectional overrides and
// isolates left in. Severity: LOW (display spoofing on the user's
// terminal; nothing is executed).
//
// Attack: a command inside saves `nsbox call memory save
// '{"key":"deploy-\u202etxt.hs","text":"run \u202e... ","tags":["\u2066x"]}'`:
// checkKey and normTags refuse only unicode.IsControl (C0, DEL, C1), and
// oneLine, which builds every cell of the memory table, replaces only
// those too. U+202E reverses the rest of the cell as the terminal shows
// it, so the user reviewing what agents saved reads a key or text other
// than the one stored. nsbox's own messages already escape these
// characters (termSafe: "the bidirectional overrides and isolates, which
// reorder the text shown", review 18); the memory table (and `nsbox
// memory show`, which prints key and tags as they are) does not.
func TestReview50MemoryTableKeepsBidiOverrides(t *testing.T) {
	for _, in := range []string{
		"deploy-\u202etxt.hs",
		"run \u202emr -rf ~\u202c ok",
		"\u2066isolate\u2069",
		"embed \u202a\u202b\u202d",
	} {
		got := oneLine(in, 60)
		if strings.IndexFunc(got, func(r rune) bool {
			return r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
		}) >= 0 {
			t.Errorf("oneLine(%q) = %q: a bidirectional override or isolate reaches the terminal", in, got)
		}
	}
}
