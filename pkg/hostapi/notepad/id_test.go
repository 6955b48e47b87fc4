package notepad

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// isID must accept exactly what idSchema's pattern tells callers.
func FuzzIsID(f *testing.F) {
	var schema struct{ Pattern string }
	if err := json.Unmarshal([]byte(idSchema), &schema); err != nil {
		f.Fatal(err)
	}
	idSchemaPattern := regexp.MustCompile(schema.Pattern)
	for _, s := range []string{"", "tab-1", "a.b_c", ".x", "-x", "a b", "a/b", strings.Repeat("z", 64), strings.Repeat("z", 65), "ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := isID(s), idSchemaPattern.MatchString(s); got != want {
			t.Fatalf("isID(%q) = %v, pattern says %v", s, got, want)
		}
	})
}
