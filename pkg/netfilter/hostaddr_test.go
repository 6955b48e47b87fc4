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

// TestEmbedsLocal: an IPv6 answer that carries a local IPv4 address
// (IPv4-compatible, 6to4, NAT64) is refused like that address (review
// 74); one carrying a public address is not.
func TestEmbedsLocal(t *testing.T) {
	own := map[netip.Addr]bool{netip.MustParseAddr("192.0.2.10"): true}
	for _, c := range []struct {
		a    string
		want bool
	}{
		{"::127.0.0.1", true},
		{"::192.0.2.10", true},
		{"2002:7f00:1::", true},
		{"64:ff9b::a9fe:a9fe", true}, // 169.254.169.254
		{"64:ff9b::808:808", false},  // 8.8.8.8
		{"2002:808:808::1", false},
		{"2001:db8::1", false},
		{"::1", false}, // localAnswer's
	} {
		if got := embedsLocal(netip.MustParseAddr(c.a), own); got != c.want {
			t.Errorf("%s: %v, want %v", c.a, got, c.want)
		}
	}
}
