package netfilter

import (
	"slices"
	"strings"
	"testing"
)

// TestCheckSNIBarePatternIs443Only: under CheckSNI a pattern written
// without a port covers 443 only; a port written out (80) stays; the
// caller's Allowlist is not changed; Describe says so.
func TestCheckSNIBarePatternIs443Only(t *testing.T) {
	al, err := ParseAllowlist([]string{"a.test", "b.test:80", "*.c.test", "d.test:80,443"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(Config{Allow: al, CheckSNI: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a := f.cfg.Allow
	for _, c := range []struct {
		name string
		port uint16
		want bool
	}{{"a.test", 443, true}, {"a.test", 80, false}, {"x.c.test", 80, false}, {"x.c.test", 443, true}, {"b.test", 80, true}, {"d.test", 80, true}} {
		if got := a.Allowed(c.name, c.port); got != c.want {
			t.Errorf("under CheckSNI, %s:%d allowed = %v", c.name, c.port, got)
		}
	}
	if !al.Allowed("a.test", 80) {
		t.Errorf("New changed the caller's allowlist")
	}
	got := al.Describe(true)
	want := []string{"a.test:443 (TLS server name checked on 443)", "b.test:80", "*.c.test:443 (TLS server name checked on 443)", "d.test:80,443 (TLS server name checked on 443)"}
	if !slices.Equal(got, want) {
		t.Errorf("Describe(true) = %q", got)
	}
	if got := al.Describe(false); got[0] != "a.test:80,443" {
		t.Errorf("Describe(false) = %q", got)
	}
	if why := f.portNotAllowed("a.test", 80); !strings.Contains(why, "443 only") {
		t.Errorf("refusal of port 80 says %q", why)
	}
}
