package netfilter

// Repro tests from a second outside review of the filtered network's
// resolver (issue 18; branch rv2dns), written against the fixes of the
// first (rvdns). Each FAILS on purpose on the code it was written against,
// and passes once the finding is fixed. Only loopback servers the tests run
// are contacted.

import (
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// failingUpstream is a DNS server on the loopback that counts the queries
// it gets: names starting "broken." are answered SERVFAIL (a zone whose
// servers are lame, or that the sandbox's side makes fail), names starting
// "local." have the A record 127.0.0.1 (an answer the filter refuses, see
// localAnswer), others NXDOMAIN.
type failingUpstream struct {
	addr    netip.AddrPort
	queries atomic.Int64
}

func newFailingUpstream(t *testing.T) *failingUpstream {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	u := &failingUpstream{addr: pc.LocalAddr().(*net.UDPAddr).AddrPort()}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var p dnsmessage.Parser
			h, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, err := p.Question()
			if err != nil {
				continue
			}
			u.queries.Add(1)
			name := q.Name.String()
			rc := dnsmessage.RCodeNameError
			var ans *netip.Addr
			switch {
			case strings.HasPrefix(name, "broken."):
				rc = dnsmessage.RCodeServerFailure
			case strings.HasPrefix(name, "local."):
				rc = dnsmessage.RCodeSuccess
				if q.Type == dnsmessage.TypeA {
					lo := netip.MustParseAddr("127.0.0.1")
					ans = &lo
				}
			}
			pc.WriteTo(build(dnsmessage.Header{ID: h.ID, RecursionDesired: h.RecursionDesired}, []dnsmessage.Question{q}, rc, ans), from)
		}
	}()
	return u
}

// TestReview2DNSUpstreamFailureNotCached: the first review's fix caches an
// allowed name's answer, found (TestUpstreamOncePerName) or not
// (NXDOMAIN, TestReviewDNSNonexistentNameNotCached), for relookAfter. A
// lookup that fails any other way (SERVFAIL, REFUSED, a timeout) is not
// remembered: resolve's "case err != nil" path (dns.go answer) sets
// neither byName nor missing, so each query the sandbox makes for that
// name is a new upstream lookup, an A and an AAAA query each retried per
// the host's resolv.conf, MaxQueries at once with no bound on the rate. A
// sandbox with one allowed name whose zone fails (or a wildcard whose zone
// it can make fail) turns nsbox into a query amplifier against the host's
// resolver and that zone's servers, and a query loop for it is the
// unbounded stream of lookups the first fix meant to end. RFC 9520 asks
// resolvers to cache such failures (at least 1 s, at most 5 min).
func TestReview2DNSUpstreamFailureNotCached(t *testing.T) {
	up := newFailingUpstream(t)
	al, err := ParseAllowlist([]string{"broken.up.test"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(Config{Allow: al, Upstream: []netip.AddrPort{up.addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	srv := serve(t, f)
	const queries = 20
	for range queries {
		if rc, _ := query(t, srv, "broken.up.test.", dnsmessage.TypeA, false); rc != dnsmessage.RCodeServerFailure {
			t.Fatalf("broken.up.test: %v, want SERVFAIL", rc)
		}
	}
	// One lookup (an A and an AAAA query, each tried on the host's
	// resolv.conf servers and attempts) per relookAfter would be a cache;
	// the bound here allows a few such lookups.
	if n := up.queries.Load(); n > 16 {
		t.Errorf("%d queries for one allowed name whose zone answers SERVFAIL made %d upstream queries: a failed lookup is not cached, every query goes upstream again", queries, n)
	}
}

// TestReview2DNSLocalAnswerNotCached: an allowed name that upstream
// resolves only to a host-local address (127.0.0.1 here; the host's own
// interface addresses, link-local, ...) is refused (errLocalAnswer, found
// by the first review) but the refusal is not remembered either: every
// query for it is another upstream lookup, and another refusal. Same root
// as TestReview2DNSUpstreamFailureNotCached.
func TestReview2DNSLocalAnswerNotCached(t *testing.T) {
	up := newFailingUpstream(t)
	al, err := ParseAllowlist([]string{"local.up.test"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var refusals atomic.Int64
	f, err := New(Config{Allow: al, Upstream: []netip.AddrPort{up.addr}, OnRefusal: func(*Refusal) { refusals.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	srv := serve(t, f)
	const queries = 20
	for range queries {
		if rc, _ := query(t, srv, "local.up.test.", dnsmessage.TypeA, false); rc != dnsmessage.RCodeRefused {
			t.Fatalf("local.up.test: %v, want REFUSED", rc)
		}
	}
	if n := up.queries.Load(); n > 16 {
		t.Errorf("%d queries for one allowed name that resolves to 127.0.0.1 made %d upstream queries (%d refusals): the refused answer is not cached, every query goes upstream again", queries, n, refusals.Load())
	}
}
