package policy

import (
	"regexp"
	"testing"
)

// usesRW says what the regexp it replaced said.
func FuzzUsesRW(f *testing.F) {
	re := regexp.MustCompile(`\$(\{NSBOX_RW\}|NSBOX_RW([^A-Za-z0-9_]|$))`)
	for _, s := range []string{"$NSBOX_RW/.env", "${NSBOX_RW}/x", "$NSBOX_RWX", "$$NSBOX_RW", "$NSBOX_RW", "x$NSBOX_RW_1", "$NSBOX_RW\xff", "~/.ssh", "$HOME/$NSBOX_RW"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := usesRW(s), re.MatchString(s); got != want {
			t.Fatalf("%q: usesRW %v, regexp %v", s, got, want)
		}
	})
}
