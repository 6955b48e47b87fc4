package tools

import (
	"fmt"
	"regexp/syntax"
	"strconv"
)

// Bounds of the regular expressions a schema carries ("pattern",
// "patternProperties"). A schema can come from inside the sandbox (a
// registered tool), and the worker and the host both compile its patterns:
// the bytes of the JSON say nothing of what a pattern compiles to. 3000
// repeats of "a{1000}" are 21 KB of JSON and three million instructions,
// ~130 MiB of heap and 1.7 s of CPU to compile (found by review: three
// such tools grew the worker to 900 MiB under --memory 64M and the host's
// `nsbox mcp`, which has no limit, as much). So a pattern's program size
// is estimated from its parse tree before anything compiles it, and the
// estimate is charged to the session's tool budget (patternInstCost).
const (
	maxPatternLen   = 4096  // bytes of one pattern
	maxPatternInsts = 10000 // estimated instructions of one pattern
	// patternInstCost is what one estimated instruction counts against
	// RuntimeToolBudget: the compiled instruction, the one-pass copy the
	// regexp package may keep and the matcher's per-instruction state,
	// rounded up.
	patternInstCost = 128
)

// checkPattern reports whether p is a regular expression a schema may
// carry, and its estimated program size in instructions.
func checkPattern(p string) (int, error) {
	if len(p) > maxPatternLen {
		return 0, fmt.Errorf("pattern of %d bytes, more than %d", len(p), maxPatternLen)
	}
	// The parser bounds nesting and repeat counts itself (regexp/syntax:
	// at most 1000 per repeat, ErrNestingDepth, ErrLarge); what it does
	// not bound is many repeats side by side.
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return 0, fmt.Errorf("pattern %s is not a regular expression: %v", clipString(strconv.Quote(p), maxQuoted), err)
	}
	n := progSize(re)
	if n > maxPatternInsts {
		return 0, fmt.Errorf("pattern %s compiles to more than %d instructions; use a shorter pattern", clipString(strconv.Quote(p), maxQuoted), maxPatternInsts)
	}
	return n, nil
}

// progSize estimates the instructions re compiles to (within a small
// factor: what Simplify expands and what the compiler emits), saturating
// above maxPatternInsts so that nested repeats cannot overflow.
func progSize(re *syntax.Regexp) int {
	const over = maxPatternInsts + 1
	n := 1 // a character class is one instruction, whatever its ranges
	if re.Op == syntax.OpLiteral {
		n = max(len(re.Rune), 1) // one per character
	}
	if re.Op == syntax.OpRepeat && len(re.Sub) == 1 {
		// x{m,n} becomes n copies of x (m+1 for x{m,}).
		k := re.Max
		if k < 0 {
			k = re.Min + 1
		}
		sub := progSize(re.Sub[0])
		if k > 0 && sub > over/k {
			return over
		}
		return min(1+sub*max(k, 1), over)
	}
	for _, s := range re.Sub {
		n += progSize(s)
		if n > over {
			return over
		}
	}
	return n
}
