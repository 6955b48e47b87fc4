package policy

import (
	"slices"
	"testing"
)

func TestLefthookExtends(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"extends:\n  - ci/a.yml\n  - \"ci/b.yml\"\npre-commit:\n  commands: {}\n", []string{"ci/a.yml", "ci/b.yml"}},
		{"pre-commit: {}\nextends: [a.yml, 'b.yml']\n", []string{"a.yml", "b.yml"}},
		{"extends: one.yml\n", []string{"one.yml"}},
		{"extends:\r\n  # shared\r\n  - x.yml\r\n\r\n  - y.yml\r\nskip_output: true\r\n", []string{"x.yml", "y.yml"}},
		{"pre-commit:\n  extends:\n    - not-top.yml\n", nil},
		{"", nil},
	} {
		if got := lefthookExtends([]byte(c.in)); !slices.Equal(got, c.want) {
			t.Errorf("lefthookExtends(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
