package sandbox

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/nsbox/nsbox/pkg/netfilter"
)

// NetworkFiltered is a new network namespace holding only lo, plus TCP
// connections to the names an allowlist covers: DNS is answered by nsbox and
// a connect to an address it handed out is opened by the supervisor from the
// host's namespace (pkg/netfilter).
const NetworkFiltered Network = "filtered"

// NetFilter is the allowlist of a filtered network (Policy.Network ==
// NetworkFiltered).
type NetFilter struct {
	// Allow are host patterns: "registry.npmjs.org", "*.pythonhosted.org",
	// "proxy.golang.org:443". Without a port a pattern allows 80 and 443
	// (443 only with CheckSNI).
	Allow []string `json:"allow,omitempty"`
	// Deny are host patterns that win over Allow; without a port a
	// pattern denies every port (and the name is not resolved).
	Deny []string `json:"deny,omitempty"`
	// Hosts pin names to addresses, "NAME:IP" (as Docker's --add-host).
	// A pin does not allow a name; Allow does.
	Hosts []string `json:"hosts,omitempty"`
	// Upstream are the resolvers ("IP:PORT") allowed names are looked up
	// at; empty means the host's.
	Upstream []string `json:"upstream,omitempty"`
	// CheckSNI relays TLS connections (port 443) through the supervisor
	// and refuses one whose ClientHello names another host than the
	// allowed name it was opened for (domain fronting), or carries
	// Encrypted Client Hello. A pattern without a port then allows 443
	// only.
	CheckSNI bool `json:"checkSNI,omitempty"`
}

// filterConfig parses the allowlist into the network filter's form. Each
// error is a *PolicyError naming the entry.
func (f *NetFilter) filterConfig() (netfilter.Config, error) {
	var cfg netfilter.Config
	al, err := netfilter.ParseAllowlist(f.Allow, f.Deny)
	if err != nil {
		return cfg, &PolicyError{Field: "netFilter", Msg: err.Error()}
	}
	cfg.Allow = al
	cfg.CheckSNI = f.CheckSNI
	for i, h := range f.Hosts {
		pin, err := netfilter.ParseHostPin(h)
		if err != nil {
			return cfg, &PolicyError{Field: fmt.Sprintf("netFilter.hosts[%d]", i), Msg: err.Error()}
		}
		if !al.Resolvable(pin.Name) {
			return cfg, &PolicyError{Field: fmt.Sprintf("netFilter.hosts[%d]", i), Msg: fmt.Sprintf("%s is pinned but not allowed (a pin only says where an allowed name leads)", pin.Name)}
		}
		cfg.Pins = append(cfg.Pins, pin)
	}
	for i, u := range f.Upstream {
		a, err := netip.ParseAddrPort(u)
		if err != nil {
			return cfg, &PolicyError{Field: fmt.Sprintf("netFilter.upstream[%d]", i), Msg: fmt.Sprintf("%q is not IP:PORT", u)}
		}
		cfg.Upstream = append(cfg.Upstream, a)
	}
	return cfg, nil
}

// validateNetwork checks the network fields together.
func (p *Policy) validateNetwork() error {
	switch p.Network {
	case "", NetworkNone, NetworkHost:
		if p.NetFilter != nil && (len(p.NetFilter.Allow) > 0 || len(p.NetFilter.Hosts) > 0) {
			return &PolicyError{Field: "netFilter", Msg: fmt.Sprintf("an allowlist needs network %q, not %q", NetworkFiltered, p.networkName())}
		}
		return nil
	case NetworkFiltered:
		if p.NetFilter == nil {
			return nil // nothing allowed: every lookup NXDOMAIN, every connect refused
		}
		_, err := p.NetFilter.filterConfig()
		return err
	}
	return &PolicyError{Field: "network", Msg: fmt.Sprintf("unknown network %q (want none, host or filtered)", p.Network)}
}

func (p *Policy) networkName() Network {
	if p.Network == "" {
		return NetworkNone
	}
	return p.Network
}

// ErrNetFilterUnavailable is wrapped when a filtered network cannot be
// built here.
var ErrNetFilterUnavailable = errors.New("the filtered network cannot run here")
