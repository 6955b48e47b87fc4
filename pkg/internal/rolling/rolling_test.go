package rolling

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"testing"
)

// TestMulIsModularMultiplication: mul agrees with big-integer arithmetic.
func TestMulIsModularMultiplication(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	P := big.NewInt(p)
	for i := 0; i < 100000; i++ {
		a, b := r.Uint64N(p), r.Uint64N(p)
		if i < 4 {
			a, b = p-1-uint64(i), p-1
		}
		want := new(big.Int).Mod(new(big.Int).Mul(new(big.Int).SetUint64(a), new(big.Int).SetUint64(b)), P).Uint64()
		if got := mul(a, b); got != want {
			t.Fatalf("mul(%d, %d) = %d, want %d", a, b, got, want)
		}
	}
}

// TestRollingEqualsDirect: a window rolled in equals the window hashed
// directly; and the Thue-Morse block that collides with its complement
// under a polynomial modulo 2^64 does not here.
func TestRollingEqualsDirect(t *testing.T) {
	h := New()
	lines := make([]string, 4096)
	for i := range lines {
		// Thue-Morse: the parity of i's one bits.
		if bitsSet(i)%2 == 0 {
			lines[i] = "a"
		} else {
			lines[i] = "b"
		}
	}
	const k = 2048
	direct := func(ls []string) uint64 {
		var w uint64
		for _, l := range ls {
			w = h.Push(w, h.LineString(l))
		}
		return w
	}
	pow := h.Pow(k)
	var w uint64
	for i := range lines {
		if i >= k {
			w = h.Pop(w, h.LineString(lines[i-k]), pow)
		}
		w = h.Push(w, h.LineString(lines[i]))
		if i >= k-1 && w != direct(lines[i-k+1:i+1]) {
			t.Fatalf("window at %d: rolled %d, direct %d", i-k+1, w, direct(lines[i-k+1:i+1]))
		}
	}
	comp := make([]string, k)
	for i := range comp {
		comp[i] = map[string]string{"a": "b", "b": "a"}[lines[i]]
	}
	if direct(lines[:k]) == direct(comp) {
		t.Fatal("the Thue-Morse block collides with its complement")
	}
}

func bitsSet(i int) int {
	n := 0
	for ; i > 0; i &= i - 1 {
		n++
	}
	return n
}

// TestWindows compares Windows with a window-by-window hash of every
// place, and checks each window it yields holds the searched lines.
func TestWindows(t *testing.T) {
	h := New()
	alphabet := []string{"a", "b", ""}
	for trial := 0; trial < 300; trial++ {
		doc := make([]string, rand.IntN(40))
		for i := range doc {
			doc[i] = alphabet[rand.IntN(len(alphabet))]
		}
		k := 1 + rand.IntN(4)
		from := rand.IntN(len(doc) + 1)
		old := make([]string, k)
		for i := range old {
			old[i] = alphabet[rand.IntN(len(alphabet))]
		}
		var want []int
		for at := from; at+k <= len(doc); at++ {
			if h.Strings(doc[at:at+k]) == h.Strings(old) {
				want = append(want, at)
			}
		}
		var got []int
		for at := range h.Windows(from, len(doc), k, func(i int) uint64 { return h.LineString(doc[i]) }, h.Strings(old)) {
			got = append(got, at)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("doc %q from %d old %q: Windows %v, want %v", doc, from, old, got, want)
		}
		for _, at := range got {
			if fmt.Sprint(doc[at:at+k]) != fmt.Sprint(old) {
				t.Errorf("doc %q: window at %d is %q, not %q (a collision in 40 lines)", doc, at, doc[at:at+k], old)
			}
		}
	}
}
