package policy

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/nsbox/nsbox/pkg/netfilter"
	"github.com/nsbox/nsbox/pkg/sandbox"
)

// NetworkConfig is the [network] table. In TOML it is either a string, the
// mode (`network = "host"`, as before the table existed), or a table:
//
//	[network]
//	mode = "filtered"
//	allow = ["registry.npmjs.org", "*.pythonhosted.org", "proxy.golang.org:443"]
//	deny = ["evil.pythonhosted.org"]
//	hosts = ["registry.test:127.0.0.1"]
//
// Lists add to lower layers' lists; "!ENTRY" removes an entry a lower layer
// added.
type NetworkConfig struct {
	// Mode is "none", "host" or "filtered". A layer that adds to Allow
	// without a mode means "filtered".
	Mode *string `toml:"mode" json:"mode,omitempty"`
	// Allow are host patterns a filtered network reaches ("NAME",
	// "*.SUFFIX", either with ":PORT[,PORT]"; without a port 80 and 443,
	// 443 only with CheckSNI).
	Allow []string `toml:"allow" json:"allow,omitempty"`
	// Deny are host patterns that win over Allow (without a port: every
	// port, and the name is not resolved).
	Deny []string `toml:"deny" json:"deny,omitempty"`
	// Hosts pin allowed names to addresses, "NAME:IP" (--add-host).
	Hosts []string `toml:"hosts" json:"hosts,omitempty"`
	// Upstream are the resolvers ("IP:PORT") allowed names are looked up
	// at; empty: the host's.
	Upstream []string `toml:"upstream" json:"upstream,omitempty"`
	// CheckSNI refuses a TLS connection (port 443) whose ClientHello
	// names another host than the allowed name it was opened for.
	CheckSNI *bool `toml:"check_sni" json:"check_sni,omitempty"`
	// textForm: the mode was written as a string (`network = "none"`),
	// not under a table.
	textForm bool
}

// UnmarshalText reads the string form, `network = "MODE"`.
func (n *NetworkConfig) UnmarshalText(b []byte) error {
	s := string(b)
	*n = NetworkConfig{Mode: &s, textForm: true}
	return nil
}

type mergedNetwork struct {
	allow, deny, hosts, upstream []sentry
	checkSNI                     bval
}

func (m *merged) mergeNetwork(c *NetworkConfig, l *Layer, rank int) {
	mode := c.Mode
	if mode == nil && adds(c.Allow) {
		// --allow-host alone turns the filter on (at the layer that
		// gave it: a higher layer's mode still wins).
		mode = ptr(string(sandbox.NetworkFiltered))
		m.network = sval{v: *mode, set: true, at: origin{l, "network.allow", rank}}
	} else {
		setS(&m.network, mode, l, l.networkModeKey(), rank)
	}
	m.net.allow = addStrings(m.net.allow, c.Allow, l, "network.allow", rank)
	m.net.deny = addStrings(m.net.deny, c.Deny, l, "network.deny", rank)
	m.net.hosts = addStrings(m.net.hosts, c.Hosts, l, "network.hosts", rank)
	m.net.upstream = addStrings(m.net.upstream, c.Upstream, l, "network.upstream", rank)
	setB(&m.net.checkSNI, c.CheckSNI, l, "network.check_sni", rank)
}

// adds reports whether a list adds an entry (not only "!" removals).
func adds(list []string) bool {
	for _, s := range list {
		if !strings.HasPrefix(s, "!") {
			return true
		}
	}
	return false
}

// networkModeKey is the key the mode was written as: "network.mode" in
// the table form, "network" in the string form (and on the command line,
// where "network" names --net).
func (l *Layer) networkModeKey() string {
	if l.pos != nil && l.Config.Network.Mode != nil && !l.Config.Network.textForm {
		return "network.mode"
	}
	return "network"
}

// checkNetwork checks a layer's [network] entries, so that a bad pattern
// is reported at its own file, line and key.
func checkNetwork(l *Layer) error {
	c := &l.Config.Network
	if c.Mode != nil && *c.Mode != string(sandbox.NetworkFiltered) && adds(c.Allow) {
		return errorf(l, "network.allow", nil, "an allowlist needs network mode \"filtered\", not %q", *c.Mode)
	}
	each := func(key string, list []string, parse func(string) error) error {
		for i, s := range list {
			if err := parse(strings.TrimPrefix(s, "!")); err != nil {
				return errorf(l, fmt.Sprintf("%s[%d]", key, i), err, "%v", err)
			}
		}
		return nil
	}
	if err := each("network.allow", c.Allow, func(s string) error {
		_, err := netfilter.ParsePattern(s, netfilter.DefaultPorts)
		return err
	}); err != nil {
		return err
	}
	if err := each("network.deny", c.Deny, func(s string) error {
		_, err := netfilter.ParsePattern(s, nil)
		return err
	}); err != nil {
		return err
	}
	if err := each("network.hosts", c.Hosts, func(s string) error {
		_, err := netfilter.ParseHostPin(s)
		return err
	}); err != nil {
		return err
	}
	return each("network.upstream", c.Upstream, func(s string) error {
		if _, err := netip.ParseAddrPort(s); err != nil {
			return fmt.Errorf("%q is not IP:PORT", s)
		}
		return nil
	})
}

// network is the resolver's step for the allowlist of a filtered network:
// the merged lists, deduplicated, checked together (a pin of a name that
// is not allowed is an error naming where the pin came from).
func (r *resolver) network() error {
	p, n := &r.res.Policy, &r.m.net
	if at := r.m.network.at; p.Network == sandbox.NetworkHost && at.layer != nil && !at.layer.builtin() && at.layer.Kind != KindFlags {
		// A policy file's choice, which the command line does not show
		// (review 19); --net host is the user's own typing.
		r.warn(at.warn(false, "the sandbox shares the host's network: every interface, the services listening on the host's loopback and its abstract unix sockets"))
	}
	if p.Network != sandbox.NetworkFiltered {
		if len(n.allow) > 0 {
			r.warn(n.allow[0].at.warn(true, "the network allowlist is unused: the network is %q", p.Network))
		}
		return nil
	}
	vals := func(l []sentry) []string {
		var out []string
		for _, e := range l {
			out = append(out, e.v)
		}
		return dedupStrings(out)
	}
	f := &sandbox.NetFilter{Allow: vals(n.allow), Deny: vals(n.deny), Hosts: vals(n.hosts), Upstream: vals(n.upstream), CheckSNI: n.checkSNI.v}
	al, err := netfilter.ParseAllowlist(f.Allow, f.Deny)
	if err != nil {
		return &Error{Source: "resolved policy", Key: "network", Msg: err.Error(), Err: err}
	}
	for _, h := range n.hosts {
		pin, err := netfilter.ParseHostPin(h.v)
		if err != nil {
			return h.at.err(err, "%v", err)
		}
		if !al.Resolvable(pin.Name) {
			return h.at.err(nil, "%s is pinned but not allowed: a pin only says where an allowed name leads (add --allow-host %s)", pin.Name, pin.Name)
		}
	}
	if len(f.Allow) == 0 {
		r.warn(r.m.network.at.warn(false, "the filtered network allows no host: every lookup fails and every connection is refused"))
	}
	p.NetFilter = f
	return nil
}

// NetworkSettings is the network part of a policy, for `nsbox status`.
type NetworkSettings struct {
	Profile string             `json:"profile"`
	Mode    string             `json:"mode"`
	Filter  *sandbox.NetFilter `json:"filter,omitempty"`
}

// Network reads the network settings of req (defaults, config file,
// profile chain, flags) without resolving the rest of the policy (no
// workspace is needed).
func Network(h Host, req Request) (NetworkSettings, error) {
	h = h.withDefaults()
	layers, ref, err := loadLayers(h, req)
	if err != nil {
		return NetworkSettings{}, err
	}
	for _, l := range layers {
		if err := CheckLayer(l); err != nil {
			return NetworkSettings{}, err
		}
	}
	r := &resolver{h: h, layers: layers, m: merge(layers), res: &Result{}}
	r.res.Policy.Network = sandbox.Network(r.m.network.v)
	if err := r.network(); err != nil {
		return NetworkSettings{}, err
	}
	return NetworkSettings{Profile: ref, Mode: r.m.network.v, Filter: r.res.Policy.NetFilter}, nil
}
