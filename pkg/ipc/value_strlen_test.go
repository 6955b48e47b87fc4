package ipc

import (
	"strings"
	"testing"
)

// StringLen counts exactly what AppendString writes.
func TestStringLen(t *testing.T) {
	for _, s := range []string{"", "plain", `"q"\`, "<>&", "\n\r\t\b\f\x00\x1f\x7f", "é€😀", "\u2028\u2029", "bad\xffutf8", strings.Repeat("<\"\n", 100)} {
		if got, want := StringLen(s), len(AppendString(nil, s)); got != want {
			t.Errorf("StringLen(%q) = %d, AppendString writes %d", s, got, want)
		}
	}
}

func FuzzStringLen(f *testing.F) {
	f.Add("a<b\n\"\u2028\xff")
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := StringLen(s), len(AppendString(nil, s)); got != want {
			t.Fatalf("StringLen(%q) = %d, AppendString writes %d", s, got, want)
		}
	})
}
