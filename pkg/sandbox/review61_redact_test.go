package sandbox

import (
	"strings"
	"testing"
	"time"
)

// Review 61.

// TestReview61RedactErrorPeriodicCost
//
// Finding (MEDIUM, supervisor CPU): redactError marks every occurrence
// of every form, advancing one byte past each match. A secret that is
// periodic ("1111…") met in a message of the same bytes matches at
// every offset, and each match costs strings.Index's compare and the
// marking loop, len(secret) bytes: O(len(msg)*len(secret)) per form.
// A hostCall's args and its error are the sandbox's (4 MiB a call: memory.recall with a
// "key" of digits and an int argument whose overflowing literal
// encoding/json quotes in its error, "number 1111…"), so one call
// costs the supervisor minutes of CPU while it writes the audit line.
// Sizes here are 1/32 of what one call carries.
func TestReview61RedactErrorPeriodicCost(t *testing.T) {
	secret := strings.Repeat("1", 32<<10)
	msg := `invalid argument "limit": json: cannot unmarshal number ` + strings.Repeat("1", 96<<10) + ` into Go struct field .limit of type int`
	args := map[string]any{"key": secret}
	start := time.Now()
	out := redactError(msg, args)
	d := time.Since(start)
	if strings.Contains(out, secret) {
		t.Fatalf("not redacted")
	}
	if d > 100*time.Millisecond {
		t.Errorf("redactError took %v for a %d-byte message and a %d-byte secret (quadratic: 32x these sizes, one 4 MiB call, takes ~1000x as long)", d, len(msg), len(secret))
	}
}
