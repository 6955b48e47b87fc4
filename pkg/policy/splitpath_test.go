package policy

import (
	"slices"
	"testing"
)

// splitPath drops empty components and ".", and keeps "..".
func TestSplitPath(t *testing.T) {
	for in, want := range map[string][]string{
		"":             nil,
		"/":            nil,
		"/a//b/./c/":   {"a", "b", "c"},
		"a/../b":       {"a", "..", "b"},
		"./x":          {"x"},
		"//":           nil,
		"/.hidden/x.y": {".hidden", "x.y"},
	} {
		if got := splitPath(in); !slices.Equal(got, want) {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}
