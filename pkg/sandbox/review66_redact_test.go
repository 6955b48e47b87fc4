package sandbox

import (
	"encoding/json"
	"math/rand"
	"regexp"
	"strings"
	"testing"
)

// Review 66: redactErrorCut and record()'s cut (hostcall.go).

// review66Leak returns the bytes of a secret left in the audit line's
// error: the secrets are lower-case letters, nothing else in msg is, and
// the markers' own letters are removed first.
var review66Markers = regexp.MustCompile(`\[REDACTED\]|…\[truncated, [0-9]+ bytes\]`)

func review66Leak(line string) string {
	rest := review66Markers.ReplaceAllString(line, "")
	var leak []byte
	for i := 0; i < len(rest); i++ {
		if rest[i] >= 'a' && rest[i] <= 'z' {
			leak = append(leak, rest[i])
		}
	}
	return string(leak)
}

func review66Args(t *testing.T, secrets []string) string {
	m := map[string]any{}
	for i, s := range secrets {
		m["token"+strings.Repeat("x", i)] = s
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReview66RedactLongSecretTail
//
// Finding (MEDIUM): a secret longer than maxAuditText is searched for by
// its first 1 KiB only and only those bytes are marked; the run becomes
// "[REDACTED]" (10 bytes), which pulls what follows forward, and record()
// then shows the first 1 KiB of the redacted text: the secret's bytes
// 1024.. are in the line in clear (476 bytes of a 1500-byte secret at the
// start of the error). The comment's "covered up to that end" holds in
// the message's coordinates, not in the redacted text's.
func TestReview66RedactLongSecretTail(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	sec := make([]byte, 1500)
	for i := range sec {
		sec[i] = byte('a' + r.Intn(26))
	}
	got := review57AuditError(t, review66Args(t, []string{string(sec)}), string(sec)+" (404)")
	if leak := review66Leak(got); leak != "" {
		t.Fatalf("%d bytes of the secret in the audit line's error (%q...)", len(leak), leak[:min(40, len(leak))])
	}
}

// TestReview66RedactPullsPastWindow
//
// Finding (MEDIUM): same cause, short secrets: the message is searched
// in its first 2 KiB; an occurrence that crosses that cut is not found,
// and redacting an earlier one (1000 bytes -> 10) pulls its start into
// the line's first 1 KiB.
func TestReview66RedactPullsPastWindow(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	sec := make([]byte, 1000)
	for i := range sec {
		sec[i] = byte('a' + r.Intn(26))
	}
	msg := string(sec) + strings.Repeat("-", 500) + string(sec) + " (503)"
	got := review57AuditError(t, review66Args(t, []string{string(sec)}), msg)
	if leak := review66Leak(got); leak != "" {
		t.Fatalf("%d bytes of the secret in the audit line's error", len(leak))
	}
}

// TestReview66RedactFuzz checks the property itself: for random secrets
// (some over a two-letter alphabet, so that occurrences overlap and KMP's
// failure links are used) and messages made of them and filler, no byte
// of any occurrence reaches the line.
func TestReview66RedactFuzz(t *testing.T) {
	r := rand.New(rand.NewSource(66))
	fails := 0
	for iter := 0; iter < 3000 && fails < 5; iter++ {
		alpha := 26
		if iter%2 == 0 {
			alpha = 2
		}
		var secrets []string
		for n := 1 + r.Intn(4); n > 0; n-- {
			l := 3 + r.Intn(12)
			if r.Intn(4) == 0 {
				l = 3 + r.Intn(1600)
			}
			s := make([]byte, l)
			for i := range s {
				s[i] = byte('a' + r.Intn(alpha))
			}
			secrets = append(secrets, string(s))
		}
		var msg strings.Builder
		for msg.Len() < 200+r.Intn(4000) {
			if r.Intn(2) == 0 {
				msg.WriteString(secrets[r.Intn(len(secrets))])
			} else {
				msg.WriteString(strings.Repeat(string("0123456789 .-:"[r.Intn(14)]), r.Intn(300)))
			}
		}
		got := review57AuditError(t, review66Args(t, secrets), msg.String())
		if leak := review66Leak(got); leak != "" {
			fails++
			t.Errorf("iter %d: %d secret bytes in the line (secrets of %v bytes, message of %d)", iter, len(leak), lens(secrets), msg.Len())
		}
	}
}

func lens(ss []string) []int {
	var out []int
	for _, s := range ss {
		out = append(out, len(s))
	}
	return out
}
