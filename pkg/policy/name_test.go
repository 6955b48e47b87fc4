package policy

import (
	"regexp"
	"strings"
	"testing"
)

// isProfileName must accept exactly what the documented pattern accepts.
var profileNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

func FuzzIsProfileName(f *testing.F) {
	for _, s := range []string{"", "workspace", "a.b-c_d", ".hidden", "-x", "_x", "../x", "a/b", strings.Repeat("a", 64), strings.Repeat("a", 65), "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := isProfileName(s), profileNamePattern.MatchString(s); got != want {
			t.Fatalf("isProfileName(%q) = %v, pattern says %v", s, got, want)
		}
	})
}
