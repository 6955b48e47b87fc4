package netfilter

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParsePattern(t *testing.T) {
	good := []struct {
		in       string
		name     string
		wildcard bool
		ports    []uint16
	}{
		{"registry.npmjs.org", "registry.npmjs.org", false, DefaultPorts},
		{"Registry.NPMJS.org.", "registry.npmjs.org", false, DefaultPorts},
		{"*.pythonhosted.org", "pythonhosted.org", true, DefaultPorts},
		{"proxy.golang.org:443", "proxy.golang.org", false, []uint16{443}},
		{"a.test:8080,22,8080", "a.test", false, []uint16{22, 8080}},
		{"localhost", "localhost", false, DefaultPorts},
		{"_srv.example.com", "_srv.example.com", false, DefaultPorts},
	}
	for _, c := range good {
		p, err := ParsePattern(c.in, DefaultPorts)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if p.Name != c.name || p.Wildcard != c.wildcard || !slices.Equal(p.Ports, c.ports) {
			t.Errorf("%q: got %+v", c.in, p)
		}
	}
	bad := map[string]string{
		"":                                "empty",
		"*":                               "every name",
		"*.com":                           "top-level",
		"a.*.com":                         "first label",
		"**.example.com":                  "first label",
		"10.0.0.1":                        "IP address",
		"10.0.0.1:443":                    "IP address",
		"[::1]:443":                       "IPv6",
		"::1":                             "IPv6",
		"a.test:0":                        "not a port",
		"a.test:65536":                    "not a port",
		"a.test:":                         "empty port",
		"a.test:x":                        "not a port",
		"a..test":                         "empty label",
		".a.test":                         "empty label",
		"-a.test":                         "start or end",
		"a-.test":                         "start or end",
		"a b.test":                        "not allowed",
		"a/b":                             "not allowed",
		strings.Repeat("a", 64) + ".test": "63",
	}
	for in, want := range bad {
		_, err := ParsePattern(in, DefaultPorts)
		if err == nil || !errors.Is(err, ErrPattern) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err %v, want one containing %q", in, err, want)
		}
	}
}

func TestAllowlistDenyWins(t *testing.T) {
	a, err := ParseAllowlist(
		[]string{"registry.npmjs.org", "*.pythonhosted.org", "proxy.golang.org:443", "*.example.com"},
		[]string{"evil.example.com", "files.pythonhosted.org:80"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		port    uint16
		allowed bool
	}{
		{"registry.npmjs.org", 443, true},
		{"registry.npmjs.org", 80, true},
		{"registry.npmjs.org", 22, false},
		{"npmjs.org", 443, false},
		{"xregistry.npmjs.org", 443, false},
		{"files.pythonhosted.org", 443, true},
		{"files.pythonhosted.org", 80, false}, // deny with a port
		{"pythonhosted.org", 443, false},      // a wildcard does not cover its suffix
		{"evilpythonhosted.org", 443, false},
		{"proxy.golang.org", 443, true},
		{"proxy.golang.org", 80, false},
		{"a.b.example.com", 443, true},
		{"evil.example.com", 443, false}, // deny wins
		{"evil.example.com", 80, false},
	}
	for _, c := range cases {
		if got := a.Allowed(c.name, c.port); got != c.allowed {
			t.Errorf("Allowed(%s, %d) = %v", c.name, c.port, got)
		}
	}
	for name, want := range map[string]bool{
		"files.pythonhosted.org": true, // a port-less deny is needed to hide a name
		"evil.example.com":       false,
		"other.test":             false,
		"registry.npmjs.org":     true,
	} {
		if got := a.Resolvable(name); got != want {
			t.Errorf("Resolvable(%s) = %v", name, got)
		}
	}
	allow, deny := a.Strings()
	if !slices.Equal(allow, []string{"registry.npmjs.org", "*.pythonhosted.org", "proxy.golang.org:443", "*.example.com"}) ||
		!slices.Equal(deny, []string{"evil.example.com", "files.pythonhosted.org:80"}) {
		t.Errorf("Strings: %q %q", allow, deny)
	}
	if _, err := ParseAllowlist([]string{"ok.test", "1.2.3.4"}, nil); err == nil || !strings.Contains(err.Error(), `"1.2.3.4"`) {
		t.Errorf("bad entry: %v", err)
	}
}

func TestParseHostPin(t *testing.T) {
	for in, want := range map[string]string{
		"good.test:127.0.0.1":   "good.test:127.0.0.1",
		"Good.Test:10.1.2.3":    "good.test:10.1.2.3",
		"v6.test:::1":           "v6.test:::1",
		"v6.test:[2001:db8::1]": "v6.test:2001:db8::1",
		"eq.test=192.0.2.1":     "eq.test:192.0.2.1",
		"m.test:::ffff:1.2.3.4": "m.test:1.2.3.4",
	} {
		p, err := ParseHostPin(in)
		if err != nil || p.String() != want {
			t.Errorf("%q: %v %v, want %s", in, p, err, want)
		}
	}
	for _, in := range []string{"", "good.test", ":1.2.3.4", "good.test:", "good.test:host-gateway", "*.test:1.2.3.4", "a..b:1.2.3.4", "x.test:fe80::1%eth0"} {
		if _, err := ParseHostPin(in); !errors.Is(err, ErrPattern) {
			t.Errorf("%q: err %v", in, err)
		}
	}
}

func FuzzParsePattern(f *testing.F) {
	for _, s := range []string{"registry.npmjs.org", "*.pythonhosted.org", "proxy.golang.org:443", "a:1,2", "1.2.3.4", "[::1]:80", "*.", "a..b", "A.B.", "x:65535"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePattern(s, DefaultPorts)
		if err != nil {
			if !errors.Is(err, ErrPattern) {
				t.Fatalf("%q: untyped error %v", s, err)
			}
			return
		}
		// What parses is a valid normalized name with valid ports, and
		// its string form parses back to the same pattern.
		if n, err := NormalizeName(p.Name); err != nil || n != p.Name {
			t.Fatalf("%q: name %q not normalized (%v)", s, p.Name, err)
		}
		for _, port := range p.Ports {
			if port == 0 {
				t.Fatalf("%q: port 0", s)
			}
		}
		q, err := ParsePattern(p.String(), DefaultPorts)
		if err != nil || q.Name != p.Name || q.Wildcard != p.Wildcard || !slices.Equal(q.Ports, p.Ports) {
			t.Fatalf("%q: round trip %q -> %+v, %v", s, p.String(), q, err)
		}
		// A pattern matches its own name (a wildcard: one label below).
		probe := p.Name
		if p.Wildcard {
			probe = "x." + p.Name
			if p.MatchName(p.Name) {
				t.Fatalf("%q: wildcard matches its suffix", s)
			}
		}
		if !p.MatchName(probe) {
			t.Fatalf("%q: does not match %q", s, probe)
		}
	})
}
