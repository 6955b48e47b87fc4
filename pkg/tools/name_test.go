package tools

import (
	"regexp"
	"strings"
	"testing"
)

// validName must accept exactly what the documented pattern accepts.
var namePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func FuzzValidName(f *testing.F) {
	for _, s := range []string{"", "a", "read_file", "x-y", "bad name", "ä", "a/b", strings.Repeat("a", 64), strings.Repeat("a", 65), "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := validName(s), namePattern.MatchString(s); got != want {
			t.Fatalf("validName(%q) = %v, pattern says %v", s, got, want)
		}
	})
}
