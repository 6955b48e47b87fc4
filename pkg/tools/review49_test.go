package tools

import (
	"math/bits"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestReview49HunkSearchForcedCollision
//
// Finding (LOW): edit_file's hunk search falls back to an unbounded
// quadratic scan on a hash collision, and the collision can be forced for
// every seed. findHunk (pkg/tools/diff.go) keeps the nearest window whose
// rolling hash equals the hunk's and, when that window does not match,
// assumes "a hash collision (a 64-bit seeded hash: not to be expected)"
// and compares the hunk at every distance from want, line by line,
// outside maxHunkSearch's budget. But the rolling hash is a polynomial
// mod 2^64 over the seeded line hashes: for a Thue-Morse word T of 2^11
// lines over two lines "a"/"b" and its complement T', hash(T) - hash(T')
// = (h(a)-h(b)) * prod_j (1 - base^(2^j)), which 2^64 divides for every
// odd base and every h(a), h(b) -- whatever the seed. So the collision is
// certain, not improbable.
//
// Attack: a model (or a prompt injection it read) calls edit_file on a
// file of N "a" lines followed by T', with a hunk of m " a" context lines
// followed by T, its header at line 1. The only hash match is the T'
// window, which does not match; the fallback then compares up to m lines
// at each of ~N offsets: N*m line compares (200,000 x 100,000 here: 2e10,
// minutes of the worker's CPU), the very cost review 46 bounded, with a
// ~300 KB diff. The hunk does not apply anywhere, so the honest answer
// (an error) comes at once in linear time.
//
// Fix: bound the fallback (charge it to the budget, or compare the
// colliding windows only), or use a hash whose collisions cannot be
// built without the seed (a modulus that is a prime, two hashes).
func TestReview49HunkSearchForcedCollision(t *testing.T) {
	const order = 11 // 2^11 lines: 2^64 divides the product for any odd base
	tm := func(i int, flip bool) string {
		if (bits.OnesCount(uint(i))%2 == 1) != flip {
			return "b"
		}
		return "a"
	}
	const m, n = 100_000, 200_000
	var file strings.Builder
	for i := 0; i < n; i++ {
		file.WriteString("a\n")
	}
	for i := 0; i < 1<<order; i++ {
		file.WriteString(tm(i, true) + "\n")
	}
	k := m + 1<<order
	var diff strings.Builder
	diff.WriteString("--- a/f\n+++ b/f\n@@ -1," + strconv.Itoa(k) + " +1," + strconv.Itoa(k+1) + " @@\n")
	for i := 0; i < m; i++ {
		diff.WriteString(" a\n")
	}
	for i := 0; i < 1<<order; i++ {
		diff.WriteString(" " + tm(i, false) + "\n")
	}
	diff.WriteString("+x\n")

	done := make(chan error, 1)
	go func() {
		_, _, _, err := applyUnifiedDiff([]byte(file.String()), diff.String())
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("the hunk applied, but it matches nowhere in the file")
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("a %d-line hunk against a %d-line file still searching after 10 s: the Thue-Morse block collides with its complement under the mod 2^64 rolling hash for every seed, and the collision fallback compares the hunk at every offset (~%d line compares, no budget)", k, n+1<<order, n*m)
	}
}
