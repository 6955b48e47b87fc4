package netfilter

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	"golang.org/x/sys/unix"
)

// echoServer listens on the host's 127.0.0.1 and echoes each connection.
func echoServer(t *testing.T) netip.AddrPort {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	return ln.Addr().(*net.TCPAddr).AddrPort()
}

// resolveVia asks the filter's resolver for name's virtual address.
func resolveVia(t testing.TB, srv netip.AddrPort, name string) netip.Addr {
	t.Helper()
	rc, as := query(t, srv, name+".", dnsmessage.TypeA, false)
	if rc != dnsmessage.RCodeSuccess || len(as) != 1 {
		t.Fatalf("%s: %v %v", name, rc, as)
	}
	return as[0]
}

// sandboxSocket makes the socket a sandboxed program would have made.
func sandboxSocket(t *testing.T, family, typ int) int {
	t.Helper()
	fd, err := unix.Socket(family, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// roundTrip writes through an installed connection and reads the echo.
func roundTrip(t *testing.T, c *Conn) {
	t.Helper()
	// What the sandbox would hold after the ADDFD: its own descriptor.
	fd, err := unix.Dup(c.FD())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	f := os.NewFile(uintptr(fd), "installed")
	defer f.Close()
	conn, err := net.FileConn(f)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := conn.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo %q %v", buf, err)
	}
}

func TestConnectAllowedNameIsDialled(t *testing.T) {
	up := newFakeUpstream(t)
	echo := echoServer(t)
	var refusals []*Refusal
	f := newFilter(t, up, []string{"good.test:" + itoa(echo.Port())}, nil, []string{"good.test:127.0.0.1"}, func(c *Config) {
		c.OnRefusal = func(r *Refusal) { refusals = append(refusals, r) }
	})
	srv := serve(t, f)
	v := resolveVia(t, srv, "good.test")
	ctx := context.Background()

	// Blocking socket: connected when the verdict comes, and blocking.
	sfd := sandboxSocket(t, unix.AF_INET, unix.SOCK_STREAM)
	unix.SetsockoptInt(sfd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	verdict, err := f.Connect(ctx, netip.AddrPortFrom(v, echo.Port()), Socket{Family: unix.AF_INET, Type: unix.SOCK_STREAM, FD: sfd})
	if err != nil || verdict.Action != Install || verdict.Errno != 0 || verdict.Conn.Host != "good.test" {
		t.Fatalf("blocking: %+v %v", verdict, err)
	}
	if fl, _ := unix.FcntlInt(uintptr(verdict.Conn.FD()), unix.F_GETFL, 0); fl&unix.O_NONBLOCK != 0 {
		t.Fatal("a blocking socket was installed nonblocking")
	}
	if nd, _ := unix.GetsockoptInt(verdict.Conn.FD(), unix.IPPROTO_TCP, unix.TCP_NODELAY); nd == 0 {
		t.Fatal("TCP_NODELAY was not copied")
	}
	if verdict.Conn.Addr != echo {
		t.Fatalf("dialled %v, want %v", verdict.Conn.Addr, echo)
	}
	roundTrip(t, verdict.Conn)

	// Nonblocking socket: EINPROGRESS, nonblocking, and it completes.
	verdict, err = f.Connect(ctx, netip.AddrPortFrom(v, echo.Port()), Socket{Family: unix.AF_INET, Type: unix.SOCK_STREAM, Nonblock: true, FD: -1})
	if err != nil || verdict.Action != Install || (verdict.Errno != unix.EINPROGRESS && verdict.Errno != 0) {
		t.Fatalf("nonblocking: %+v %v", verdict, err)
	}
	if fl, _ := unix.FcntlInt(uintptr(verdict.Conn.FD()), unix.F_GETFL, 0); fl&unix.O_NONBLOCK == 0 {
		t.Fatal("a nonblocking socket was installed blocking")
	}
	roundTrip(t, verdict.Conn)

	// An AF_INET6 socket reaches the IPv4 destination (mapped).
	verdict, err = f.Connect(ctx, netip.AddrPortFrom(netip.AddrFrom16(v.As16()), echo.Port()), Socket{Family: unix.AF_INET6, Type: unix.SOCK_STREAM, FD: -1})
	if err != nil || verdict.Action != Install {
		t.Fatalf("AF_INET6: %+v %v", verdict, err)
	}
	roundTrip(t, verdict.Conn)
	if len(refusals) != 0 {
		t.Fatalf("refusals: %v", refusals)
	}
	if st := f.Stats(); st.Connects != 3 {
		t.Fatalf("stats %+v", st)
	}
}

func TestConnectRefusals(t *testing.T) {
	up := newFakeUpstream(t)
	echo := echoServer(t)
	var refusals []string
	f := newFilter(t, up, []string{"good.test:" + itoa(echo.Port())}, nil, []string{"good.test:127.0.0.1"}, func(c *Config) {
		c.OnRefusal = func(r *Refusal) { refusals = append(refusals, r.Target()) }
	})
	srv := serve(t, f)
	v := resolveVia(t, srv, "good.test")
	ctx := context.Background()
	tcp := Socket{Family: unix.AF_INET, Type: unix.SOCK_STREAM, FD: -1}
	cases := []struct {
		dst  netip.AddrPort
		sock Socket
		host string
	}{
		// An address written directly (the test server's 127.0.0.1
		// is the sandbox's own loopback inside: Continue, below).
		{netip.MustParseAddrPort("192.0.2.7:443"), tcp, "192.0.2.7:443"},
		// A virtual address nsbox did not hand out.
		{netip.AddrPortFrom(netip.MustParseAddr("198.18.200.1"), 443), tcp, "198.18.200.1:443"},
		// The allowed name on a port that is not allowed.
		{netip.AddrPortFrom(v, 22), tcp, "good.test:22"},
		// UDP to the allowed name.
		{netip.AddrPortFrom(v, echo.Port()), Socket{Family: unix.AF_INET, Type: unix.SOCK_DGRAM, FD: -1}, "good.test:" + itoa(echo.Port())},
		// ICMP (ping sockets).
		{netip.AddrPortFrom(v, 0), Socket{Family: unix.AF_INET, Type: unix.SOCK_DGRAM, Protocol: unix.IPPROTO_ICMP, FD: -1}, "good.test"},
		// IPv6.
		{netip.MustParseAddrPort("[2001:db8::1]:443"), Socket{Family: unix.AF_INET6, Type: unix.SOCK_STREAM, FD: -1}, "[2001:db8::1]:443"},
	}
	for i, c := range cases {
		verdict, err := f.Connect(ctx, c.dst, c.sock)
		var r *Refusal
		if !errors.As(err, &r) || !errors.Is(err, ErrRefused) || verdict.Action != Fail || verdict.Errno != unix.EACCES {
			t.Fatalf("case %d (%v): %+v %v", i, c.dst, verdict, err)
		}
		if c.host != "" && r.Target() != c.host {
			t.Fatalf("case %d: refusal names %q, want %q", i, r.Target(), c.host)
		}
	}
	if len(refusals) != len(cases) {
		t.Fatalf("reported %q", refusals)
	}
	// A send with an address off the loopback is refused; on it, it runs.
	if _, err := f.Send(netip.AddrPortFrom(v, 53), Socket{Family: unix.AF_INET, Type: unix.SOCK_DGRAM}); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "good.test:53") {
		t.Fatalf("send: %v", err)
	}
	for _, dst := range []string{"127.0.0.53:53", "[::1]:53", "[::ffff:127.0.0.1]:80"} {
		if verdict, err := f.Send(netip.MustParseAddrPort(dst), Socket{Family: unix.AF_INET, Type: unix.SOCK_DGRAM}); err != nil || verdict.Action != Continue {
			t.Fatalf("send to %s: %+v %v", dst, verdict, err)
		}
		// The sandbox's own loopback stays its own.
		if verdict, err := f.Connect(ctx, netip.MustParseAddrPort(dst), tcp); err != nil || verdict.Action != Continue {
			t.Fatalf("connect to %s: %+v %v", dst, verdict, err)
		}
	}
}

func TestConnectErrorsOfTheRealDestination(t *testing.T) {
	up := newFakeUpstream(t)
	// A port nobody listens on: the sandbox sees ECONNREFUSED, as its own
	// connect would, and it is not a refusal of the filter.
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).AddrPort().Port()
	ln.Close()
	f := newFilter(t, up, []string{"closed.test:" + itoa(port)}, nil, []string{"closed.test:127.0.0.1"}, nil)
	v := resolveVia(t, serve(t, f), "closed.test")
	verdict, err := f.Connect(context.Background(), netip.AddrPortFrom(v, port), Socket{Family: unix.AF_INET, Type: unix.SOCK_STREAM, FD: -1})
	if err != nil || verdict.Action != Fail || verdict.Errno != unix.ECONNREFUSED {
		t.Fatalf("%+v %v", verdict, err)
	}
	if f.OpenConns() != 0 {
		t.Fatal("a failed dial is counted")
	}
}

func TestConnectCap(t *testing.T) {
	up := newFakeUpstream(t)
	echo := echoServer(t)
	f := newFilter(t, up, []string{"good.test:" + itoa(echo.Port())}, nil, []string{"good.test:127.0.0.1"}, func(c *Config) { c.MaxConns = 2 })
	v := resolveVia(t, serve(t, f), "good.test")
	dst := netip.AddrPortFrom(v, echo.Port())
	sock := Socket{Family: unix.AF_INET, Type: unix.SOCK_STREAM, FD: -1}
	var held []int
	for range 2 {
		verdict, err := f.Connect(context.Background(), dst, sock)
		if err != nil || verdict.Action != Install {
			t.Fatalf("%+v %v", verdict, err)
		}
		fd, _ := unix.Dup(verdict.Conn.FD()) // the sandbox's copy
		verdict.Conn.Close()
		held = append(held, fd)
	}
	verdict, err := f.Connect(context.Background(), dst, sock)
	var le *LimitError
	if !errors.As(err, &le) || !errors.Is(err, ErrLimit) || !errors.Is(err, ErrRefused) || verdict.Action != Fail || verdict.Errno != unix.ENOBUFS || !strings.Contains(err.Error(), "limit of 2 connections") {
		t.Fatalf("at the cap: %+v %v", verdict, err)
	}
	// The sandbox closes one: a slot is free again.
	unix.Close(held[0])
	if n := f.OpenConns(); n != 1 {
		t.Fatalf("open after a close: %d", n)
	}
	verdict, err = f.Connect(context.Background(), dst, sock)
	if err != nil || verdict.Action != Install {
		t.Fatalf("after a close: %+v %v", verdict, err)
	}
	verdict.Conn.Close()
	unix.Close(held[1])
	if n := f.OpenConns(); n != 0 {
		t.Fatalf("open after all closed: %d", n)
	}
}

func TestPinOfNameNotAllowed(t *testing.T) {
	al, _ := ParseAllowlist([]string{"good.test"}, nil)
	p, _ := ParseHostPin("other.test:127.0.0.1")
	if _, err := New(Config{Allow: al, Pins: []HostPin{p}}); !errors.Is(err, ErrPattern) || !strings.Contains(err.Error(), "--allow-host other.test") {
		t.Fatalf("%v", err)
	}
}

func itoa(p uint16) string {
	return netip.AddrPortFrom(netip.IPv4Unspecified(), p).String()[len("0.0.0.0:"):]
}

// synDropper listens on the host's 127.0.0.1 with a full accept queue
// (backlog 0, one connection never accepted): the kernel drops every
// further SYN, so a connect to it stays in SYN_SENT.
func synDropper(t *testing.T) netip.AddrPort {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, _ := unix.Getsockname(fd)
	ap := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(sa.(*unix.SockaddrInet4).Port))
	c, err := net.DialTimeout("tcp4", ap.String(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return ap
}

// TestConnectPortStaysTheSockets: the host socket a nonblocking connect
// installs, still connecting, has a local port bound explicitly
// (bindLocked): once disconnected (here by a shutdown made directly, which
// the trap refuses inside), it keeps that port and cannot be bound again,
// so a host socket whose connect failed cannot squat a host port.
func TestConnectPortStaysTheSockets(t *testing.T) {
	up := newFakeUpstream(t)
	slow := synDropper(t)
	f := newFilter(t, up, []string{"slow.test:" + itoa(slow.Port())}, nil, []string{"slow.test:127.0.0.1"}, nil)
	v := resolveVia(t, serve(t, f), "slow.test")
	verdict, err := f.Connect(context.Background(), netip.AddrPortFrom(v, slow.Port()), Socket{Family: unix.AF_INET, Type: unix.SOCK_STREAM, Nonblock: true, FD: -1})
	if err != nil || verdict.Action != Install || verdict.Errno != unix.EINPROGRESS {
		t.Fatalf("nonblocking connect to a host that does not answer: %+v %v", verdict, err)
	}
	defer verdict.Conn.Close()
	fd := verdict.Conn.FD()
	if err := unix.Shutdown(fd, unix.SHUT_RDWR); err != nil {
		t.Fatalf("shutdown in SYN_SENT: %v", err)
	}
	free, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := free.Addr().(*net.TCPAddr).Port
	free.Close()
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != unix.EINVAL {
		t.Fatalf("bind of the disconnected host socket to a port of the sandbox's choosing: %v, want EINVAL (its own port kept)", err)
	}
}

// TestCopyOptionsPriorityNotAboveSix: a priority above 6 set on the
// sandbox's socket (it may hold CAP_NET_ADMIN in its own namespaces) is
// not copied onto the host socket, where a root supervisor's copy would
// have set it with the host's privilege (review 74); 0 to 6 is.
func TestCopyOptionsPriorityNotAboveSix(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("setting a priority above 6 on the test's own socket needs CAP_NET_ADMIN")
	}
	for _, c := range []struct{ set, want int }{{7, 0}, {5, 5}} {
		src, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		dst, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.SetsockoptInt(src, unix.SOL_SOCKET, unix.SO_PRIORITY, c.set); err != nil {
			t.Fatal(err)
		}
		copyOptions(dst, Socket{Family: unix.AF_INET, Type: unix.SOCK_STREAM, FD: src})
		got, _ := unix.GetsockoptInt(dst, unix.SOL_SOCKET, unix.SO_PRIORITY)
		if got != c.want {
			t.Errorf("priority %d on the sandbox's socket: the host socket got %d, want %d", c.set, got, c.want)
		}
		unix.Close(src)
		unix.Close(dst)
	}
}
