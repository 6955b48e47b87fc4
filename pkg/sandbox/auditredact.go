package sandbox

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/nsbox/nsbox/pkg/ipc"
)

// The redaction of an audit line's error: the values the line's args
// redact must not show in the error beside them.

// redactError returns msg with every value that args hold under a
// secret-looking key replaced by "[REDACTED]". Security: an error may
// quote an argument ("memory \"ghp_…\" not found" for a memory.recall by
// key): the audit line redacts the argument, and its error must not print
// it beside. Each value is looked for as it is and as %q or JSON would
// quote it, numbers and map keys included (reviews 57, 59). Only values
// of at least minRedactedQuote bytes are looked for; past
// maxRedactedQuotes of them the whole error is redacted. A message
// longer than the audit shows is cut to what can reach the line, with
// its length.
func redactError(msg string, args any) string {
	text, cut := redactErrorCut(msg, args, 2*maxAuditText)
	if cut {
		return text + "…[truncated, " + strconv.Itoa(len(msg)) + " bytes]"
	}
	return text
}

// redactErrorCut is redactError for the first keep bytes of msg (cut at
// a character boundary) without the cut's marker: the redacted text, and
// whether msg was longer.
//
// Security: what is shown is chosen by position in msg, before any
// replacement, and redaction only marks: a secret's bytes below keep
// are marked whatever comes after them. Cutting the shortened text
// instead pulled later bytes forward, a long secret's tail or a copy of
// it past the searched part, into the line (review 66). Bounded work: a
// secret shown at all starts below keep, so only msg's first 2×keep
// bytes are searched, for each form's first keep bytes, with a linear
// search; a match marks the form's whole length (a match of a cut form
// that is not the whole secret over-redacts: the safe side). Matching
// whole forms over a whole message cost seconds (review 61).
func redactErrorCut(msg string, args any, keep int) (string, bool) {
	shown := cutUTF8(msg, keep)
	var secrets []string
	if !collectSecrets(args, false, &secrets) {
		return "[REDACTED]", false
	}
	if len(secrets) == 0 {
		return shown, len(shown) < len(msg)
	}
	window := cutUTF8(msg, 2*keep)
	covered := make([]bool, len(shown))
	found := false
	for _, sec := range secrets {
		forms := []string{sec}
		if q := strconv.Quote(sec); q[1:len(q)-1] != sec {
			forms = append(forms, q[1:len(q)-1])
		}
		if j, err := json.Marshal(sec); err == nil && string(j[1:len(j)-1]) != sec {
			forms = append(forms, string(j[1:len(j)-1]))
		}
		for _, f := range forms {
			// Every occurrence, overlapping ones too, marked before one
			// pass replaces them: replacing one form after another
			// broke a secret that overlapped another and left its tail
			// in clear (review 59).
			if markAll(covered, window, f[:min(len(f), keep)], len(f)) {
				found = true
			}
		}
	}
	if !found {
		return shown, len(shown) < len(msg)
	}
	var b strings.Builder
	for i := 0; i < len(shown); {
		if !covered[i] {
			b.WriteByte(shown[i])
			i++
			continue
		}
		b.WriteString("[REDACTED]")
		for i < len(shown) && covered[i] {
			i++
		}
	}
	return b.String(), len(shown) < len(msg)
}

// markAll marks in covered (the first len(covered) bytes of s) every byte
// of every occurrence of f in s, each markLen bytes long from its start,
// overlapping occurrences included, in time linear in len(s)+len(f)
// (Knuth–Morris–Pratt), and reports whether one reached covered.
func markAll(covered []bool, s, f string, markLen int) bool {
	if f == "" || len(f) > len(s) {
		return false
	}
	fail := make([]int, len(f))
	for i, k := 1, 0; i < len(f); i++ {
		for k > 0 && f[i] != f[k] {
			k = fail[k-1]
		}
		if f[i] == f[k] {
			k++
		}
		fail[i] = k
	}
	found, until := false, 0 // bytes before until are marked
	for i, k := 0, 0; i < len(s); i++ {
		for k > 0 && s[i] != f[k] {
			k = fail[k-1]
		}
		if s[i] == f[k] {
			k++
		}
		if k == len(f) {
			start := i + 1 - len(f)
			end := min(start+markLen, len(covered))
			for j := max(start, until); j < end; j++ {
				covered[j] = true
				found = true
			}
			until = max(until, end)
			k = fail[k-1]
		}
	}
	return found
}

const (
	minRedactedQuote  = 3
	maxRedactedQuotes = 32
)

// collectSecrets appends to out the values of v that Redact hides: those
// under a secret-looking key, at any depth (under is true below one),
// strings and numbers as text. It reports false once there are more than
// maxRedactedQuotes.
func collectSecrets(v any, under bool, out *[]string) bool {
	add := func(s string) bool {
		if !under || len(s) < minRedactedQuote {
			return true
		}
		if len(*out) == maxRedactedQuotes {
			return false
		}
		*out = append(*out, s)
		return true
	}
	switch x := v.(type) {
	case string:
		return add(x)
	case ipc.String:
		return add(string(x))
	case float64:
		return add(strconv.FormatFloat(x, 'f', -1, 64)) && add(strconv.FormatFloat(x, 'g', -1, 64))
	case ipc.Number:
		return collectSecrets(float64(x), under, out)
	case json.Number:
		return add(string(x))
	case map[string]any:
		for k, e := range x {
			// Below a secret-looking key the keys are hidden too, as
			// Redact hides the whole value.
			if !add(k) || !collectSecrets(e, under || isSecretKey(k), out) {
				return false
			}
		}
	case ipc.Map:
		for k, e := range x {
			if !add(k) || !collectSecrets(e, under || isSecretKey(k), out) {
				return false
			}
		}
	case []any:
		for _, e := range x {
			if !collectSecrets(e, under, out) {
				return false
			}
		}
	case ipc.List:
		for _, e := range x {
			if !collectSecrets(e, under, out) {
				return false
			}
		}
	}
	return true
}
