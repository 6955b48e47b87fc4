package netfilter

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// fakeUpstream is a DNS server on the loopback that counts the queries it
// gets: names under "up.test" have the A record 192.0.2.7 (or the one
// answeringUpstream gives), others do not exist.
type fakeUpstream struct {
	addr    netip.AddrPort
	queries atomic.Int64
	mu      sync.Mutex
	names   []string
}

func newFakeUpstream(t testing.TB) *fakeUpstream {
	t.Helper()
	return answeringUpstream(t, netip.MustParseAddr("192.0.2.7"))
}

// answeringUpstream is newFakeUpstream whose names under "up.test" have
// the A record answer.
func answeringUpstream(t testing.TB, answer netip.Addr) *fakeUpstream {
	t.Helper()
	u := &fakeUpstream{}
	u.addr = serveUpstream(t, func(q dnsmessage.Question) (dnsmessage.RCode, *netip.Addr) {
		u.queries.Add(1)
		u.mu.Lock()
		u.names = append(u.names, q.Name.String())
		u.mu.Unlock()
		rc := dnsmessage.RCodeNameError
		exists := strings.HasSuffix(q.Name.String(), "up.test.") && !strings.HasPrefix(q.Name.String(), "nothere.")
		if exists {
			rc = dnsmessage.RCodeSuccess
		}
		var ans *netip.Addr
		if exists && q.Type == dnsmessage.TypeA {
			ans = &answer
		}
		return rc, ans
	})
	return u
}

// serveUpstream runs a DNS server on a UDP loopback socket of the test's
// own until the test ends: answer gives each question's code and A record.
func serveUpstream(t testing.TB, answer func(q dnsmessage.Question) (dnsmessage.RCode, *netip.Addr)) netip.AddrPort {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
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
			rc, ans := answer(q)
			pc.WriteTo(build(dnsmessage.Header{ID: h.ID, RecursionDesired: h.RecursionDesired}, []dnsmessage.Question{q}, rc, ans), from)
		}
	}()
	return pc.LocalAddr().(*net.UDPAddr).AddrPort()
}

// serve starts f's resolver on loopback sockets of the test's own (UDP and
// TCP on one port) and returns their address.
func serve(t testing.TB, f *Filter) netip.AddrPort {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp4", ln.Addr().String())
	if err != nil {
		ln.Close()
		t.Skipf("UDP port of the TCP listener is taken: %v", err)
	}
	if err := f.ServeDNS(pc, ln); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return ln.Addr().(*net.TCPAddr).AddrPort()
}

// query sends one question over UDP (or TCP) and returns the answer's
// code and A records.
func query(t testing.TB, server netip.AddrPort, name string, typ dnsmessage.Type, tcp bool) (dnsmessage.RCode, []netip.Addr) {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 4242, RecursionDesired: true})
	b.StartQuestions()
	b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET})
	msg, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	network := "udp"
	if tcp {
		network = "tcp"
		msg = append(binary.BigEndian.AppendUint16(nil, uint16(len(msg))), msg...)
	}
	c, err := net.DialTimeout(network, server.String(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	resp := make([]byte, 1500)
	if tcp {
		var hdr [2]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			t.Fatal(err)
		}
		resp = resp[:binary.BigEndian.Uint16(hdr[:])]
		if _, err := io.ReadFull(c, resp); err != nil {
			t.Fatal(err)
		}
	} else {
		n, err := c.Read(resp)
		if err != nil {
			t.Fatal(err)
		}
		resp = resp[:n]
	}
	var p dnsmessage.Parser
	h, err := p.Start(resp)
	if err != nil || h.ID != 4242 || !h.Response {
		t.Fatalf("bad response %+v: %v", h, err)
	}
	p.SkipAllQuestions()
	var out []netip.Addr
	for {
		rh, err := p.AnswerHeader()
		if errors.Is(err, dnsmessage.ErrSectionDone) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rh.Type != dnsmessage.TypeA {
			t.Fatalf("answer of type %v", rh.Type)
		}
		a, err := p.AResource()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, netip.AddrFrom4(a.A))
	}
	return h.RCode, out
}

func newFilter(t testing.TB, up *fakeUpstream, allow, deny, pins []string, opt func(*Config)) *Filter {
	t.Helper()
	al, err := ParseAllowlist(allow, deny)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Allow: al, Upstream: []netip.AddrPort{up.addr}}
	for _, s := range pins {
		p, err := ParseHostPin(s)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Pins = append(cfg.Pins, p)
	}
	if opt != nil {
		opt(&cfg)
	}
	f, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestDNSAnswersAllowedNamesOnly(t *testing.T) {
	up := newFakeUpstream(t)
	var refused []string
	var mu sync.Mutex
	f := newFilter(t, up, []string{"*.up.test", "pinned.test"}, []string{"bad.up.test"}, []string{"pinned.test:127.0.0.1"}, func(c *Config) {
		c.OnRefusal = func(r *Refusal) { mu.Lock(); refused = append(refused, r.Op+" "+r.Target()); mu.Unlock() }
	})
	srv := serve(t, f)

	// An allowed name: looked up upstream, answered with a virtual
	// address.
	rc, as := query(t, srv, "www.up.test.", dnsmessage.TypeA, false)
	if rc != dnsmessage.RCodeSuccess || len(as) != 1 || !VirtualPrefix.Contains(as[0]) {
		t.Fatalf("www.up.test: %v %v", rc, as)
	}
	// The same name again (over TCP, in upper case): the same address.
	rc, as2 := query(t, srv, "WWW.Up.Test.", dnsmessage.TypeA, true)
	if rc != dnsmessage.RCodeSuccess || len(as2) != 1 || as2[0] != as[0] {
		t.Fatalf("again over TCP: %v %v, want %v", rc, as2, as[0])
	}
	// AAAA: the name exists, no record (IPv6 cleanly absent).
	if rc, as := query(t, srv, "www.up.test.", dnsmessage.TypeAAAA, false); rc != dnsmessage.RCodeSuccess || len(as) != 0 {
		t.Fatalf("AAAA: %v %v", rc, as)
	}
	// An allowed name that does not exist upstream.
	if rc, _ := query(t, srv, "nothere.up.test.", dnsmessage.TypeA, false); rc != dnsmessage.RCodeNameError {
		t.Fatalf("nothere.up.test: %v", rc)
	}
	before := up.queries.Load()
	// A pinned name never goes upstream.
	rc, pin := query(t, srv, "pinned.test.", dnsmessage.TypeA, false)
	if rc != dnsmessage.RCodeSuccess || len(pin) != 1 || !VirtualPrefix.Contains(pin[0]) || pin[0] == as[0] {
		t.Fatalf("pinned.test: %v %v", rc, pin)
	}
	// Names not allowed (and denied ones) get NXDOMAIN without any
	// upstream query: made-up names carry nothing out.
	for _, n := range []string{"secret-data-1234.evil.example.", "bad.up.test.", "up.test.", "x.pinned.test."} {
		for _, tcp := range []bool{false, true} {
			if rc, _ := query(t, srv, n, dnsmessage.TypeA, tcp); rc != dnsmessage.RCodeNameError {
				t.Fatalf("%s: %v", n, rc)
			}
		}
	}
	if got := up.queries.Load(); got != before {
		up.mu.Lock()
		t.Fatalf("%d queries reached the upstream: %q", got-before, up.names[before:])
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"lookup secret-data-1234.evil.example", "lookup bad.up.test", "lookup up.test", "lookup x.pinned.test"}
	if strings.Join(refused, ",") != strings.Join(want, ",") {
		t.Fatalf("refusals %q, want %q (each name once)", refused, want)
	}
	st := f.Stats()
	if st.Names != 2 || st.NXDomain != 8 {
		t.Fatalf("stats %+v", st)
	}
}

func TestDNSBounds(t *testing.T) {
	up := newFakeUpstream(t)
	f := newFilter(t, up, []string{"*.up.test"}, nil, nil, func(c *Config) { c.MaxNames = 2 })
	srv := serve(t, f)
	for _, n := range []string{"a.up.test.", "b.up.test."} {
		if rc, _ := query(t, srv, n, dnsmessage.TypeA, false); rc != dnsmessage.RCodeSuccess {
			t.Fatalf("%s: %v", n, rc)
		}
	}
	// The table is full: a new name fails (SERVFAIL), known ones still
	// resolve.
	if rc, _ := query(t, srv, "c.up.test.", dnsmessage.TypeA, false); rc != dnsmessage.RCodeServerFailure {
		t.Fatalf("c.up.test at the cap: %v", rc)
	}
	if rc, _ := query(t, srv, "a.up.test.", dnsmessage.TypeA, false); rc != dnsmessage.RCodeSuccess {
		t.Fatalf("a.up.test at the cap: %v", rc)
	}
	// A response, garbage, or two questions: no answer or FORMERR, and
	// the server keeps serving.
	c, err := net.Dial("udp", srv.String())
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte{1, 2, 3})
	c.Close()
	if rc, _ := query(t, srv, "a.up.test.", dnsmessage.TypeA, false); rc != dnsmessage.RCodeSuccess {
		t.Fatalf("after garbage: %v", rc)
	}
}

func TestGoResolverThroughFilter(t *testing.T) {
	up := newFakeUpstream(t)
	f := newFilter(t, up, []string{"www.up.test"}, nil, nil, nil)
	srv := serve(t, f)
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, srv.String())
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	as, err := r.LookupNetIP(ctx, "ip", "www.up.test.")
	if err != nil || len(as) != 1 || !VirtualPrefix.Contains(as[0]) {
		t.Fatalf("www.up.test: %v %v", as, err)
	}
	_, err = r.LookupNetIP(ctx, "ip", "evil.example.")
	var de *net.DNSError
	if !errors.As(err, &de) || !de.IsNotFound {
		t.Fatalf("evil.example: %v", err)
	}
}

func TestCloseStopsServing(t *testing.T) {
	up := newFakeUpstream(t)
	f := newFilter(t, up, []string{"www.up.test"}, nil, nil, nil)
	srv := serve(t, f)
	if rc, _ := query(t, srv, "www.up.test.", dnsmessage.TypeA, true); rc != dnsmessage.RCodeSuccess {
		t.Fatal(rc)
	}
	// An idle TCP client holds a connection open; Close ends it too.
	c, err := net.Dial("tcp", srv.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	done := make(chan error, 1)
	go func() { done <- f.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Close did not return (deadlock guard)")
	}
	if err := f.ServeDNS(nil, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("ServeDNS after Close: %v", err)
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("the idle TCP client's connection is still open")
	}
}
