package policy

import (
	"errors"
	"testing"
)

// TestExpandPath: a path nsbox opens itself is expanded as the policy's
// paths are, made absolute against the working directory, and an unknown
// or unset variable is ErrUnknownVariable; LiteralPath turns the result
// into an entry that names that path and nothing else.
func TestExpandPath(t *testing.T) {
	h := Host{Cwd: "/w", Home: "/home/u"}
	for in, want := range map[string]string{
		"$HOME/audit.log":   "/home/u/audit.log",
		"~/a":               "/home/u/a",
		"${CWD}/s.json":     "/w/s.json",
		"rel/x":             "/w/rel/x",
		"/abs/$$HOME/x":     "/abs/$HOME/x",
		"$CWD/../other/./f": "/other/f",
	} {
		got, err := h.ExpandPath(in)
		if err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"${workspaceFolder}/a", "$NSBOX_WORKSPACE/a", "$XDG_RUNTIME_DIR/s"} {
		if _, err := h.ExpandPath(in); !errors.Is(err, ErrUnknownVariable) {
			t.Errorf("%q: %v, want ErrUnknownVariable", in, err)
		}
	}
	if got := LiteralPath("/w/$CWD/a$b"); got != "/w/$$CWD/a$$b" {
		t.Errorf("LiteralPath: %q", got)
	}
	v, err := expand(LiteralPath("/w/$HOME/x"), h.vars(""))
	if err != nil || v != "/w/$HOME/x" {
		t.Errorf("a literal entry expands to %q, %v", v, err)
	}
}
