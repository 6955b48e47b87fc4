package netfilter

import (
	"net"
	"net/netip"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// hostOwnAddr is an IPv4 address of one of the host's own non-loopback
// interfaces (a local route: a connect to it is delivered to the host's
// own listeners on 0.0.0.0, as one to 127.0.0.1 is).
func hostOwnAddr(t *testing.T) netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Skip(err)
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() && !p.Addr().IsLoopback() && !p.Addr().IsLinkLocalUnicast() {
			return p.Addr()
		}
	}
	t.Skip("the host has no non-loopback IPv4 address")
	return netip.Addr{}
}

// TestUpstreamHostOwnAddressRefused: an unpinned allowed name whose zone
// answers with one of the host's own interface addresses (eth0, docker0's
// 172.17.0.1) reaches the same services as 127.0.0.1 (every one bound to
// 0.0.0.0 or ::): it is refused like a loopback answer (found by review;
// localAnswer alone let it through). Only the DNS answer is checked; no
// connect is made to that address.
func TestUpstreamHostOwnAddressRefused(t *testing.T) {
	own := hostOwnAddr(t)
	for _, a := range []netip.Addr{netip.MustParseAddr("127.0.0.1"), own} {
		up := answeringUpstream(t, a)
		f := newFilter(t, up, []string{"www.up.test"}, nil, nil, nil)
		srv := serve(t, f)
		rc, as := query(t, srv, "www.up.test.", dnsmessage.TypeA, false)
		if rc != dnsmessage.RCodeRefused {
			t.Errorf("an unpinned allowed name answered upstream with the host's own %v: %v %v, want REFUSED (as for 127.0.0.1)", a, rc, as)
		}
		f.Close()
	}
}
