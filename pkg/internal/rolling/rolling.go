// Package rolling is a rolling hash over windows of lines, for finding a
// block of lines in a document in time linear in the document (a unified
// diff's hunk at a line its header does not name).
//
// Each line is hashed with a seed of the hash's own (hash/maphash), and a
// window is the polynomial of its lines' hashes in a base chosen at random
// per hash, modulo the prime 2^61-1. Two different windows of m lines
// then collide with a probability of at most m/2^61 whatever the
// document: the difference of their polynomials has at most m roots. A
// polynomial modulo 2^64 with any odd base does not have that property:
// a Thue-Morse block of lines collides with its complement for every
// base and every seed, which a document chose to send a search into its
// slow path (review 49).
package rolling

import (
	"hash/maphash"
	"iter"
	"math/bits"
	"math/rand/v2"
)

// p is the Mersenne prime 2^61-1.
const p = 1<<61 - 1

// Hash hashes lines and windows of lines.
type Hash struct {
	seed maphash.Seed
	base uint64
}

// New returns a Hash with a seed and a base of its own.
func New() *Hash {
	return &Hash{seed: maphash.MakeSeed(), base: 1<<20 + rand.Uint64N(p-1<<21)}
}

// Line is the hash of one line.
func (h *Hash) Line(b []byte) uint64 { return reduce(maphash.Bytes(h.seed, b)) }

// LineString is Line of a string.
func (h *Hash) LineString(s string) uint64 { return reduce(maphash.String(h.seed, s)) }

// Push appends a line's hash x to the window's hash w.
func (h *Hash) Push(w, x uint64) uint64 { return add(mul(w, h.base), x) }

// Pop takes the line hash x that entered a window of k lines first out of
// its hash w; pow is Pow(k).
func (h *Hash) Pop(w, x, pow uint64) uint64 { return sub(w, mul(x, pow)) }

// Pow is base^(k-1): the weight of a window's first line.
func (h *Hash) Pow(k int) uint64 {
	r := uint64(1)
	for i := 1; i < k; i++ {
		r = mul(r, h.base)
	}
	return r
}

// Strings is the hash of the window of lines.
func (h *Hash) Strings(lines []string) uint64 {
	var w uint64
	for _, l := range lines {
		w = h.Push(w, h.LineString(l))
	}
	return w
}

// Windows yields, in order, the first line of each window of k lines
// (k >= 1) within lines from to n-1 whose hash is target; line(i) is the
// hash of line i (Line or LineString), asked twice a line (entering and
// leaving its windows) so that no array of hashes is kept.
func (h *Hash) Windows(from, n, k int, line func(int) uint64, target uint64) iter.Seq[int] {
	return func(yield func(int) bool) {
		pow := h.Pow(k)
		var w uint64
		for i := from; i < n; i++ {
			if i-from >= k {
				w = h.Pop(w, line(i-k), pow)
			}
			w = h.Push(w, line(i))
			if i-from >= k-1 && w == target && !yield(i-k+1) {
				return
			}
		}
	}
}

func reduce(x uint64) uint64 {
	x = (x & p) + (x >> 61)
	if x >= p {
		x -= p
	}
	return x
}

func add(a, b uint64) uint64 {
	s := a + b
	if s >= p {
		s -= p
	}
	return s
}

func sub(a, b uint64) uint64 {
	if a >= b {
		return a - b
	}
	return a + p - b
}

// mul is a*b mod p for a, b < p: the 122-bit product folded at bit 61.
func mul(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return reduce((lo & p) + (lo>>61 | hi<<3))
}
