package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp/syntax"
	"strings"
	"testing"
)

// TestPatternEstimateFollowsTheProgram: the estimate is never far below
// what the regexp package compiles (it is what bounds the worker's heap),
// and ordinary patterns stay well inside the bounds.
func TestPatternEstimateFollowsTheProgram(t *testing.T) {
	for _, p := range []string{
		`^[a-zA-Z0-9_-]{1,64}$`, `^\d{4}-\d{2}-\d{2}$`, `^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`,
		`^(https?|ftp)://[^\s/$.?#].[^\s]*$`, `(ab|cd){2,5}x*`, `a{1000}`, `(a{10}b){10}`, `[[:alpha:]]+@[a-z.]+`, `héllo wörld`,
	} {
		n, err := checkPattern(p)
		if err != nil {
			t.Errorf("%q refused: %v", p, err)
			continue
		}
		re, _ := syntax.Parse(p, syntax.Perl)
		prog, err := syntax.Compile(re.Simplify())
		if err != nil {
			t.Fatal(err)
		}
		if real := len(prog.Inst); n*3 < real {
			t.Errorf("%q: estimated %d instructions, compiles to %d", p, n, real)
		}
	}
}

// TestPatternBounds: the review's pattern (3000 repeats side by side),
// nested repeats that multiply, and a pattern past the length bound are
// refused before anything compiles them.
func TestPatternBounds(t *testing.T) {
	for _, p := range []string{
		strings.Repeat("a{1000}", 3000),
		strings.Repeat("a{1000}", 11),
		`((a{100}){100}){100}`,
		strings.Repeat("a", maxPatternLen+1),
		`(unclosed`,
	} {
		if n, err := checkPattern(p); err == nil {
			t.Errorf("%.40q accepted (estimate %d)", p, n)
		}
	}
}

// TestToolBudgetCountsPatterns: the estimated program of a schema's
// patterns counts against the session's tool budget, so tools whose JSON
// is small but whose patterns are large run into ErrToolBudget; a bad
// pattern is refused at registration with the place it is in.
func TestToolBudgetCountsPatterns(t *testing.T) {
	r := NewRegistry()
	def := func(name string, params any) json.RawMessage {
		b, _ := json.Marshal(map[string]any{
			"name": name, "description": "d", "parameters": params,
			"implementation": map[string]any{"language": "bash", "script": "true"},
		})
		return b
	}
	// Each: ~9000 estimated instructions, ~1.1 MiB of budget from 80 bytes of pattern.
	big := map[string]any{"type": "object", "properties": map[string]any{
		"p": map[string]any{"type": "string", "pattern": strings.Repeat("a{1000}", 9)},
	}}
	var err error
	n := 0
	for ; n < 10; n++ {
		if err = r.Register(def(fmt.Sprintf("pat%d", n), big)); err != nil {
			break
		}
	}
	if !errors.Is(err, ErrToolBudget) || n < 2 || n > 4 {
		t.Fatalf("after %d registrations: %v (want the tool budget reached after 3)", n, err)
	}
	bad := map[string]any{"type": "object", "properties": map[string]any{
		"q": map[string]any{"type": "string", "pattern": strings.Repeat("a{1000}", 500)},
	}}
	err = r.Register(def("huge", bad))
	if err == nil || !strings.Contains(err.Error(), "properties/q") || !strings.Contains(err.Error(), "instructions") {
		t.Fatalf("a 500,000-instruction pattern of 3500 bytes: %v", err)
	}
	props := map[string]any{"type": "object", "patternProperties": map[string]any{strings.Repeat("b{1000}", 20): map[string]any{}}}
	if err := r.Register(def("pp", props)); err == nil {
		t.Fatal("a patternProperties key past the bound was accepted")
	}
}
