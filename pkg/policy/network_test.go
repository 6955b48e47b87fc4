package policy

import (
	"errors"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

func TestNetworkTableForms(t *testing.T) {
	h := testHost(t)
	dir := filepath.Join(h.ConfigHome, "nsbox", "profiles")
	write(t, filepath.Join(dir, "str.toml"), "network = \"host\"\n")
	write(t, filepath.Join(dir, "table.toml"), "[network]\nmode = \"filtered\"\nallow = [\"registry.npmjs.org\", \"*.pythonhosted.org\"]\ndeny = [\"evil.pythonhosted.org\"]\n")
	write(t, filepath.Join(dir, "dotted.toml"), "network.allow = [\"proxy.golang.org:443\"]\nnetwork.hosts = [\"proxy.golang.org:127.0.0.1\"]\nnetwork.upstream = [\"127.0.0.1:5353\"]\n")
	write(t, filepath.Join(dir, "child.toml"), "extend = \"table\"\n[network]\nallow = [\"!*.pythonhosted.org\", \"crates.io\"]\n")

	if r := mustLoad(t, h, Request{Profile: "str", ConfigFile: "-"}); r.Policy.Network != sandbox.NetworkHost || r.Policy.NetFilter != nil {
		t.Fatalf("string form: %q %+v", r.Policy.Network, r.Policy.NetFilter)
	}
	r := mustLoad(t, h, Request{Profile: "table", ConfigFile: "-"})
	if r.Policy.Network != sandbox.NetworkFiltered || !slices.Equal(r.Policy.NetFilter.Allow, []string{"registry.npmjs.org", "*.pythonhosted.org"}) || !slices.Equal(r.Policy.NetFilter.Deny, []string{"evil.pythonhosted.org"}) {
		t.Fatalf("table: %q %+v", r.Policy.Network, r.Policy.NetFilter)
	}
	// An allow list without a mode means filtered.
	r = mustLoad(t, h, Request{Profile: "dotted", ConfigFile: "-"})
	if r.Policy.Network != sandbox.NetworkFiltered || !slices.Equal(r.Policy.NetFilter.Hosts, []string{"proxy.golang.org:127.0.0.1"}) || !slices.Equal(r.Policy.NetFilter.Upstream, []string{"127.0.0.1:5353"}) {
		t.Fatalf("dotted: %q %+v", r.Policy.Network, r.Policy.NetFilter)
	}
	// A child removes and adds.
	r = mustLoad(t, h, Request{Profile: "child", ConfigFile: "-"})
	if !slices.Equal(r.Policy.NetFilter.Allow, []string{"registry.npmjs.org", "crates.io"}) {
		t.Fatalf("child: %+v", r.Policy.NetFilter)
	}
	// The flags: --allow-host turns the filter on over the workspace
	// profile; --net none over an allowlist keeps no network (a note).
	r = mustLoad(t, h, Request{ConfigFile: "-", Flags: flags(Config{Network: NetworkConfig{Allow: []string{"good.test"}, Hosts: []string{"good.test:127.0.0.1"}}})})
	if r.Policy.Network != sandbox.NetworkFiltered || !slices.Equal(r.Policy.NetFilter.Allow, []string{"good.test"}) {
		t.Fatalf("flags: %q %+v", r.Policy.Network, r.Policy.NetFilter)
	}
	r = mustLoad(t, h, Request{Profile: "table", ConfigFile: "-", Flags: flags(Config{Network: NetworkConfig{Mode: ptr("none")}})})
	if r.Policy.Network != sandbox.NetworkNone || r.Policy.NetFilter != nil || len(r.Warnings) == 0 || !strings.Contains(r.Warnings[len(r.Warnings)-1].Msg, "allowlist is unused") {
		t.Fatalf("--net none over a filtered profile: %q %+v %v", r.Policy.Network, r.Policy.NetFilter, r.Warnings)
	}
	// The preset.
	r = mustLoad(t, h, Request{Profile: "network-registries", ConfigFile: "-"})
	for _, want := range []string{"registry.npmjs.org", "files.pythonhosted.org", "proxy.golang.org", "sum.golang.org", "static.crates.io", "index.crates.io", "rubygems.org", "deb.debian.org", "security.ubuntu.com"} {
		if r.Policy.Network != sandbox.NetworkFiltered || !slices.Contains(r.Policy.NetFilter.Allow, want) {
			t.Fatalf("network-registries lacks %s: %+v", want, r.Policy.NetFilter)
		}
	}
}

func TestNetworkErrorsNameTheEntry(t *testing.T) {
	h := testHost(t)
	dir := filepath.Join(h.ConfigHome, "nsbox", "profiles")
	cases := []struct {
		name, body string
		line       int
		key, want  string
	}{
		{"ip", "[network]\nallow = [\n  \"ok.test\",\n  \"10.0.0.1\",\n]\n", 4, "network.allow[1]", "an IP address is not a host name"},
		{"star", "network.allow = [\"*\"]\n", 1, "network.allow[0]", "every name"},
		{"port", "[network]\ndeny = [\"a.test:99999\"]\n", 2, "network.deny[0]", "not a port"},
		{"pin", "[network]\nallow = [\"a.test\"]\nhosts = [\"a.test\"]\n", 3, "network.hosts[0]", "want NAME:IP"},
		{"pin-not-allowed", "[network]\nallow = [\"a.test\"]\nhosts = [\"b.test:127.0.0.1\"]\n", 3, "network.hosts[0]", "b.test is pinned but not allowed"},
		{"upstream", "[network]\nmode = \"filtered\"\nupstream = [\"dns.google\"]\n", 3, "network.upstream[0]", "not IP:PORT"},
		{"host-with-allow", "[network]\nmode = \"host\"\nallow = [\"a.test\"]\n", 3, "network.allow", "needs network mode \"filtered\""},
		{"mode", "[network]\nmode = \"wifi\"\n", 2, "network.mode", "want none or host"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, c.name+".toml")
			write(t, path, c.body)
			_, err := Load(h, Request{Profile: c.name, ConfigFile: "-"})
			var pe *Error
			if !errors.As(err, &pe) || pe.Source != path || pe.Line != c.line || pe.Key != c.key {
				t.Fatalf("error %q (%+v), want %s:%d key %q", err, pe, path, c.line, c.key)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path+":"+strconv.Itoa(c.line)) {
				t.Fatalf("message %q does not say %q at %s:%d", err, c.want, path, c.line)
			}
		})
	}
	// A flag's error names the flag.
	l := flags(Config{Network: NetworkConfig{Allow: []string{"1.2.3.4"}}})
	l.KeyNames["network.allow"] = "--allow-host"
	_, err := Load(h, Request{ConfigFile: "-", Flags: l})
	if err == nil || !strings.HasPrefix(err.Error(), "--allow-host: ") {
		t.Fatalf("flag error %q", err)
	}
}
