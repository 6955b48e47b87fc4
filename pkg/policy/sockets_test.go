package policy

import (
	"reflect"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// unix_sockets.allow: variables (nsbox's and the caller's environment)
// expanded, an unset one leaves the entry out with a warning, "!PATH" in a
// higher layer removes, and a socket in a place private inside is bound in
// read-only.
func TestUnixSocketsAllow(t *testing.T) {
	h := testHost(t)
	env := map[string]string{"SSH_AUTH_SOCK": "/tmp/ssh-x/agent.1"}
	h.LookupEnv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	prof, err := ParseLayer([]byte(`
[unix_sockets]
allow = ["$SSH_AUTH_SOCK", "$HOME/.sock", "$NOPE_UNSET/x.sock", "/var/run/removed.sock"]
`), "test", KindProfile)
	if err != nil {
		t.Fatal(err)
	}
	fl := flags(Config{UnixSockets: UnixSockets{Allow: []string{"!/var/run/removed.sock"}}})
	res, err := Resolve(h, []*Layer{prof, fl})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/tmp/ssh-x/agent.1", h.Home + "/.sock"}
	if got := res.Policy.UnixSockets.Allow; !reflect.DeepEqual(got, want) {
		t.Fatalf("allow = %q, want %q", got, want)
	}
	warned := false
	for _, w := range res.Warnings {
		if strings.Contains(w.String(), "NOPE_UNSET") {
			warned = true
		}
	}
	if !warned {
		t.Fatalf("no warning for the unset variable: %v", res.Warnings)
	}
	bound := false
	for _, m := range res.Policy.Mounts {
		if m.Kind == sandbox.MountBind && m.Dest == "/tmp/ssh-x/agent.1" {
			bound = m.ReadOnly && m.Source == m.Dest && m.Optional
		}
		if m.Dest == h.Home+"/.sock" {
			t.Fatalf("a socket visible through the host root was bound: %+v", m)
		}
	}
	if !bound {
		t.Fatalf("the agent's socket in /tmp is not bound in read-only: %+v", res.Policy.Mounts)
	}
}
