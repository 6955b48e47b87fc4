package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func bigTool(t *testing.T, name string, size int) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(RuntimeDefinition{Name: name, Description: "x",
		Implementation: &Implementation{Language: "bash", Script: "#" + strings.Repeat("x", size)}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Run-time definitions count against the session's budget; a replaced or
// removed tool gives its share back.
func TestRegisterBudget(t *testing.T) {
	r := NewBuiltinRegistry()
	const size = 900 << 10
	n := RuntimeToolBudget / (size + 200)
	for i := 0; i < n; i++ {
		if err := r.Register(bigTool(t, fmt.Sprintf("t%d", i), size)); err != nil {
			t.Fatalf("tool %d: %v", i, err)
		}
	}
	err := r.Register(bigTool(t, "over", size))
	if !errors.Is(err, ErrToolBudget) || !strings.Contains(err.Error(), "MiB") {
		t.Fatalf("past the budget: %v", err)
	}
	// Replacing a tool with one of the same size fits.
	if err := r.Register(bigTool(t, "t0", size)); err != nil {
		t.Fatalf("replace: %v", err)
	}
	if err := r.Unregister("t1"); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(bigTool(t, "over", size)); err != nil {
		t.Fatalf("after unregister: %v", err)
	}
	// Many small tools stop at the count.
	r = NewBuiltinRegistry()
	for i := 0; ; i++ {
		err := r.Register(bigTool(t, fmt.Sprintf("s%d", i), 10))
		if err != nil {
			if !errors.Is(err, ErrToolBudget) || i < maxTools-len(Builtin()) {
				t.Fatalf("small tool %d: %v", i, err)
			}
			break
		}
	}
}
