package policy

import "testing"

func TestStripIndex(t *testing.T) {
	for in, want := range map[string]string{
		"protect":                "protect",
		"protect[3]":             "protect",
		"hide[12].path":          "hide.path",
		"network.allow[0]":       "network.allow",
		"a[1][22]":               "a",
		"weird[x]":               "weird[x]",
		"open[":                  "open[",
		"empty[]":                "empty[]",
		"env.set.HOME":           "env.set",
		"unix_sockets.allow[10]": "unix_sockets.allow",
	} {
		if got := stripIndex(in); got != want {
			t.Errorf("stripIndex(%q) = %q, want %q", in, got, want)
		}
	}
}
