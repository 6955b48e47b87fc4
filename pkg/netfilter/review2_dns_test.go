package netfilter

// Repro tests from a second outside review of the filtered network's
// resolver (issue 18; branch rv2dns), written against the fixes of the
// first (rvdns). Each FAILS on purpose on the code it was written against,
// and passes once the finding is fixed. Only loopback servers the tests run
// are contacted.

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	"golang.org/x/sys/unix"
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
	u := &failingUpstream{}
	u.addr = serveUpstream(t, func(q dnsmessage.Question) (dnsmessage.RCode, *netip.Addr) {
		u.queries.Add(1)
		name := q.Name.String()
		switch {
		case strings.HasPrefix(name, "broken."):
			return dnsmessage.RCodeServerFailure, nil
		case strings.HasPrefix(name, "local."):
			if q.Type == dnsmessage.TypeA {
				lo := netip.MustParseAddr("127.0.0.1")
				return dnsmessage.RCodeSuccess, &lo
			}
			return dnsmessage.RCodeSuccess, nil
		}
		return dnsmessage.RCodeNameError, nil
	})
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

// hrrMagic is the Random of a ServerHello that is a HelloRetryRequest
// (RFC 8446 section 4.1.3: SHA-256 of "HelloRetryRequest").
var hrrMagic = []byte{
	0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
	0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
}

// helloRetryRecord is a TLS record holding a HelloRetryRequest that asks
// for an X25519 key share (TLS 1.3, TLS_AES_128_GCM_SHA256).
func helloRetryRecord() []byte {
	var body []byte
	body = append(body, 0x03, 0x03)
	body = append(body, hrrMagic...)
	body = append(body, 0)          // legacy_session_id_echo: empty
	body = append(body, 0x13, 0x01) // cipher_suite
	body = append(body, 0)          // legacy_compression_method
	exts := []byte{0x00, 0x2b, 0x00, 0x02, 0x03, 0x04, 0x00, 0x33, 0x00, 0x02, 0x00, 0x1d}
	body = binary.BigEndian.AppendUint16(body, uint16(len(exts)))
	body = append(body, exts...)
	hs := append([]byte{2, byte(len(body) >> 16), byte(len(body) >> 8), byte(len(body))}, body...)
	rec := []byte{22, 0x03, 0x03}
	rec = binary.BigEndian.AppendUint16(rec, uint16(len(hs)))
	return append(rec, hs...)
}

// readRecord reads one TLS record.
func readRecord(r io.Reader) ([]byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	rec := make([]byte, 5+int(binary.BigEndian.Uint16(hdr[3:5])))
	copy(rec, hdr[:])
	_, err := io.ReadFull(r, rec[5:])
	return rec, err
}

// TestReview2DNSSNISecondClientHelloUnchecked: under --check-sni the relay
// reads the first TLS record from the sandbox, checks its server name, and
// from then on copies both ways unread (sni.go relay: io.Copy after
// readClientHello). In TLS 1.3 that first record is not the only
// ClientHello sent in clear: a server that answers with a
// HelloRetryRequest (it wants a key share for another group, which the
// client can force by offering none it accepts) gets a second ClientHello,
// in clear, which the relay never reads. A client inside sends the
// allowed name in the first and another site's in the second; whether
// the fronting then works is the server's choice (RFC 8446 4.1.2 asks the
// client to repeat the name; Go's server checks that, a server that
// re-runs its name callback on the second one, as OpenSSL's servername
// callback is, routes by it), not the check's. Here the upstream answers
// the first ClientHello with a HelloRetryRequest and records the name in
// the second: "other.example" reaches it through the relay.
func TestReview2DNSSNISecondClientHelloUnchecked(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	second := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := readRecord(c); err != nil {
			second <- "(no first ClientHello: " + err.Error() + ")"
			return
		}
		if _, err := c.Write(helloRetryRecord()); err != nil {
			second <- "(write: " + err.Error() + ")"
			return
		}
		rec, err := readRecord(c)
		if err != nil {
			second <- "(no second ClientHello: " + err.Error() + ")"
			return
		}
		sni, err := parseSNI(rec[5:])
		if err != nil {
			second <- "(second record: " + err.Error() + ")"
			return
		}
		second <- sni
	}()
	port := ln.Addr().(*net.TCPAddr).AddrPort().Port()

	up := newFakeUpstream(t)
	var refusals atomic.Int64
	f := newFilter(t, up, []string{"good.test:" + itoa(port)}, nil, []string{"good.test:127.0.0.1"}, func(c *Config) {
		c.CheckSNI, c.SNIPorts = true, []uint16{port}
		c.OnRefusal = func(*Refusal) { refusals.Add(1) }
	})
	defer f.Close()
	v := resolveVia(t, serve(t, f), "good.test")
	verdict, err := f.Connect(context.Background(), netip.AddrPortFrom(v, port), Socket{Family: unix.AF_INET, Type: unix.SOCK_STREAM, FD: -1})
	if err != nil || verdict.Action != Install {
		t.Fatalf("connect: %+v %v", verdict, err)
	}
	file := os.NewFile(uintptr(verdict.Conn.Release()), "installed")
	fc, err := net.FileConn(file)
	file.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	fc.SetDeadline(time.Now().Add(30 * time.Second))
	// The sandbox's client: the allowed name first.
	if _, err := fc.Write(clientHello(t, "good.test")); err != nil {
		t.Fatal(err)
	}
	if _, err := readRecord(fc); err != nil {
		t.Fatalf("no HelloRetryRequest came back through the relay: %v", err)
	}
	// Then, after the HelloRetryRequest, another site's name.
	fc.Write(clientHello(t, "other.example"))
	var got string
	select {
	case got = <-second:
	case <-time.After(30 * time.Second): // a deadlock guard
		t.Fatal("the upstream saw neither a second ClientHello nor the end of the connection")
	}
	if got == "other.example" {
		t.Errorf("CheckSNI passed a second ClientHello (after a HelloRetryRequest) naming %q on a connection opened for good.test; %d refusals", got, refusals.Load())
	}
}
