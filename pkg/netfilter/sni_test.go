package netfilter

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSNICheck: with CheckSNI, a TLS connection to an allowed name goes
// through when its ClientHello names that host, and is cut when it names
// another (domain fronting) or is not TLS.
func TestSNICheck(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "tls ok") }))
	defer srv.Close()
	port := netip.MustParseAddrPort(srv.Listener.Addr().String()).Port()
	up := newFakeUpstream(t)
	var mu sync.Mutex
	var refused []*Refusal
	f := newFilter(t, up, []string{"good.test:" + itoa(port)}, nil, []string{"good.test:127.0.0.1"}, func(c *Config) {
		c.CheckSNI, c.SNIPorts = true, []uint16{port}
		c.OnRefusal = func(r *Refusal) { mu.Lock(); refused = append(refused, r); mu.Unlock() }
	})
	v := resolveVia(t, serve(t, f), "good.test")
	dial := func(serverName string) (string, error) {
		verdict, err := f.Connect(context.Background(), netip.AddrPortFrom(v, port), Socket{Family: unix.AF_INET, Type: unix.SOCK_STREAM, FD: -1})
		if err != nil || verdict.Action != Install {
			t.Fatalf("connect: %+v %v", verdict, err)
		}
		fd := verdict.Conn.Release()
		// Closed through its *os.File: a unix.Close here would leave
		// the File's finalizer to close the number again later, by
		// then another test's descriptor.
		installed := os.NewFile(uintptr(fd), "installed")
		fc, err := net.FileConn(installed)
		installed.Close()
		if err != nil {
			t.Fatal(err)
		}
		defer fc.Close()
		fc.SetDeadline(time.Now().Add(30 * time.Second))
		tc := tls.Client(fc, &tls.Config{ServerName: serverName, InsecureSkipVerify: true})
		if err := tc.Handshake(); err != nil {
			return "", err
		}
		io.WriteString(tc, "GET / HTTP/1.0\r\nHost: "+serverName+"\r\n\r\n")
		b, err := io.ReadAll(tc)
		return string(b), err
	}
	if body, err := dial("good.test"); err != nil || !strings.HasSuffix(body, "tls ok") {
		t.Fatalf("matching SNI: %q %v", body, err)
	}
	if body, err := dial("other.example"); err == nil {
		t.Fatalf("a fronted connection went through: %q", body)
	}
	mu.Lock()
	if len(refused) != 1 || !strings.Contains(refused[0].Reason, `"other.example" is not good.test`) || refused[0].Target() != "good.test:"+itoa(port) {
		t.Fatalf("refusals %+v", refused)
	}
	mu.Unlock()
	// Close ends the relays still open.
	verdict, _ := f.Connect(context.Background(), netip.AddrPortFrom(v, port), Socket{Family: unix.AF_INET, Type: unix.SOCK_STREAM, FD: -1})
	held := verdict.Conn.Release()
	defer unix.Close(held)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	unix.SetsockoptTimeval(held, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 30})
	if n, err := unix.Read(held, make([]byte, 1)); n != 0 || (err != nil && !errors.Is(err, unix.ECONNRESET)) {
		t.Fatalf("relay still open after Close: %d %v", n, err)
	}
}

func TestParseSNI(t *testing.T) {
	// A real ClientHello, from crypto/tls.
	c1, c2 := net.Pipe()
	go func() {
		tls.Client(c1, &tls.Config{ServerName: "registry.npmjs.org"}).Handshake()
		c1.Close()
	}()
	_, sni, err := readClientHello(c2)
	c2.Close()
	if err != nil || sni != "registry.npmjs.org" {
		t.Fatalf("%q %v", sni, err)
	}
	for _, b := range [][]byte{nil, {1}, {1, 0, 0, 0}, {2, 0, 0, 1, 0}} {
		if _, err := parseSNI(b); err == nil {
			t.Errorf("%v parsed", b)
		}
	}
}

func FuzzParseSNI(f *testing.F) {
	f.Add([]byte{1, 0, 0, 4, 3, 3, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		// Never panics, never reads past b.
		parseSNI(b)
	})
}

// helloWith builds a ClientHello handshake message whose extensions are
// exts, each a type and a body.
func helloWith(exts ...[]byte) []byte {
	var e []byte
	for _, x := range exts {
		e = append(e, x...)
	}
	body := []byte{3, 3}
	body = append(body, make([]byte, 32)...) // random
	body = append(body, 0)                   // session id
	body = append(body, 0, 2, 0x13, 0x01)    // cipher suites
	body = append(body, 1, 0)                // compression
	body = append(body, byte(len(e)>>8), byte(len(e)))
	body = append(body, e...)
	return append([]byte{1, 0, byte(len(body) >> 8), byte(len(body))}, body...)
}

func ext(typ uint16, body []byte) []byte {
	return append([]byte{byte(typ >> 8), byte(typ), byte(len(body) >> 8), byte(len(body))}, body...)
}

func serverName(name string) []byte {
	entry := append([]byte{0, byte(len(name) >> 8), byte(len(name))}, name...)
	return ext(0, append([]byte{byte(len(entry) >> 8), byte(len(entry))}, entry...))
}

// TestParseSNIRefusesEncryptedHello: a ClientHello carrying Encrypted
// Client Hello (0xfe0d, Go's real one and a bare extension as GREASE
// sends) or ESNI (0xffce) is errECH whichever comes first, with the outer
// name; two server_name extensions are refused.
func TestParseSNIRefusesEncryptedHello(t *testing.T) {
	cfg, _ := echConfig(t, "good.test")
	list := append([]byte{byte(len(cfg) >> 8), byte(len(cfg))}, cfg...)
	c1, c2 := net.Pipe()
	go func() {
		tls.Client(c1, &tls.Config{ServerName: "other.example", MinVersion: tls.VersionTLS13, EncryptedClientHelloConfigList: list}).Handshake()
		c1.Close()
	}()
	_, sni, err := readClientHello(c2)
	c2.Close()
	if !errors.Is(err, errECH) || sni != "good.test" {
		t.Fatalf("Go's ECH hello: %q %v", sni, err)
	}
	for name, h := range map[string][]byte{
		"ech after":  helloWith(serverName("good.test"), ext(0xfe0d, []byte{1})),
		"ech before": helloWith(ext(0xfe0d, nil), serverName("good.test")),
		"esni":       helloWith(serverName("good.test"), ext(0xffce, []byte{0, 0})),
	} {
		if sni, err := parseSNI(h); !errors.Is(err, errECH) || sni != "good.test" {
			t.Errorf("%s: %q %v", name, sni, err)
		}
	}
	if sni, err := parseSNI(helloWith(serverName("good.test"))); err != nil || sni != "good.test" {
		t.Errorf("plain hello: %q %v", sni, err)
	}
	if sni, err := parseSNI(helloWith(serverName("good.test"), serverName("other.example"))); err == nil {
		t.Errorf("two server names: %q accepted", sni)
	}
}

// TestParseSNIOneHostNameOnly: a server_name list with an entry of another
// type before the host name, or two host names, or bytes after the one
// entry, is refused (a front end that reads another entry than the check
// would route elsewhere; review 74). The allowed name matches by ASCII
// case only: the Kelvin sign (U+212A) is not "k".
func TestParseSNIOneHostNameOnly(t *testing.T) {
	entry := func(kind byte, name string) []byte {
		return append([]byte{kind, byte(len(name) >> 8), byte(len(name))}, name...)
	}
	list := func(entries ...[]byte) []byte {
		var l []byte
		for _, e := range entries {
			l = append(l, e...)
		}
		return ext(0, append([]byte{byte(len(l) >> 8), byte(len(l))}, l...))
	}
	if sni, err := parseSNI(helloWith(list(entry(0, "pkg.example")))); err != nil || sni != "pkg.example" {
		t.Fatalf("one host name: %q %v", sni, err)
	}
	for name, h := range map[string][]byte{
		"another type first": helloWith(list(entry(1, "evil.example"), entry(0, "pkg.example"))),
		"two host names":     helloWith(list(entry(0, "pkg.example"), entry(0, "evil.example"))),
		"trailing bytes":     helloWith(list(entry(0, "pkg.example"), []byte{0})),
	} {
		if sni, err := parseSNI(h); err == nil {
			t.Errorf("%s: parsed as %q", name, sni)
		}
	}
	for _, c := range []struct {
		sni  string
		want bool
	}{{"pkg.example", true}, {"PKG.Example.", true}, {"p\u212Ag.example", false}, {"pkg.example.x", false}} {
		if got := sameName(c.sni, "pkg.example"); got != c.want {
			t.Errorf("sameName(%q): %v, want %v", c.sni, got, c.want)
		}
	}
}

// TestSNINonblockingConnectDoesNotWait: under CheckSNI a nonblocking
// connect is installed at once and its upstream dialled in the
// background: it used to hold one of the trap's eight handlers until the
// dial ended, so eight connects to a silent address stalled every trapped
// call of the sandbox, DNS included (review 74). A dial that fails then
// resets the installed end.
func TestSNINonblockingConnectDoesNotWait(t *testing.T) {
	// A listener whose queue is full: the kernel drops further SYNs, so
	// a connect to it waits, on loopback, until its timeout.
	ln, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ln)
	if err := unix.Bind(ln, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(ln, 0); err != nil {
		t.Fatal(err)
	}
	sa, _ := unix.Getsockname(ln)
	port := uint16(sa.(*unix.SockaddrInet4).Port)
	for i := 0; i < 4; i++ {
		c, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(c)
		unix.Connect(c, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: int(port)})
	}
	up := newFakeUpstream(t)
	f := newFilter(t, up, []string{"silent.test:" + itoa(port)}, nil, []string{"silent.test:127.0.0.1"}, func(c *Config) {
		c.CheckSNI, c.SNIPorts = true, []uint16{port}
		c.ConnectTimeout = 2 * time.Second
	})
	v := resolveVia(t, serve(t, f), "silent.test")
	verdict, err := f.Connect(context.Background(), netip.AddrPortFrom(v, port), Socket{Family: unix.AF_INET, Type: unix.SOCK_STREAM, FD: -1, Nonblock: true})
	if err != nil || verdict.Action != Install {
		t.Fatalf("a nonblocking connect to a silent address waited for the dial: %+v %v", verdict, err)
	}
	fd := verdict.Conn.Release()
	defer unix.Close(fd)
	// The dial times out: the installed end is reset.
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(pfd, 30000)
		if err == unix.EINTR {
			continue
		}
		if n != 1 {
			t.Fatalf("the installed end was not ended after the dial failed: poll %d %v", n, err)
		}
		break
	}
	if n, err := unix.Read(fd, make([]byte, 1)); n > 0 || !errors.Is(err, unix.ECONNRESET) {
		t.Errorf("after the failed dial, a read gave %d %v, want ECONNRESET", n, err)
	}
}
