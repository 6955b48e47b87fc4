package netfilter

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// keptSockets waits until the filter keeps n sockets of family made ahead
// and returns them (the deadline is a deadlock guard, not a timing check).
func keptSockets(t *testing.T, f *Filter, family, n int) []int {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		f.spares.mu.Lock()
		fds := slices.Clone(f.spares.fds[familyIndex(family)])
		f.spares.mu.Unlock()
		if len(fds) >= n {
			return fds
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sockets kept, want %d", len(fds), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func socketInode(t *testing.T, fd int) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// openSocketInodes lists the inodes of the sockets this process holds.
func openSocketInodes(t *testing.T) map[uint64]bool {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	m := map[uint64]bool{}
	for _, e := range ents {
		l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err != nil || len(l) < 9 || l[:8] != "socket:[" {
			continue
		}
		if ino, err := strconv.ParseUint(l[8:len(l)-1], 10, 64); err == nil {
			m[ino] = true
		}
	}
	return m
}

// TestHostSocketsMadeAhead: after a connect the filter keeps host sockets
// made ahead; each is fresh (unconnected, the kernel's default options),
// nonblocking, close-on-exec and bound to a port of its own; the next
// connect takes one and copies the sandbox socket's options onto it; the
// filter's Close closes those it keeps.
func TestHostSocketsMadeAhead(t *testing.T) {
	up := newFakeUpstream(t)
	echo := echoServer(t)
	// The first connect goes to a server of its own: a kept socket may
	// be bound to that connection's port (SO_REUSEADDR), and a second
	// connection from it to the same server would collide
	// (EADDRNOTAVAIL; dial then makes a fresh socket, correctly, but
	// not one kept).
	first := echoServer(t)
	f := newFilter(t, up, []string{"good.test:" + itoa(echo.Port()), "good.test:" + itoa(first.Port())}, nil, []string{"good.test:127.0.0.1"}, nil)
	v := resolveVia(t, serve(t, f), "good.test")
	dst := netip.AddrPortFrom(v, echo.Port())
	ctx := context.Background()

	f.mu.Lock()
	started := f.spares.started
	f.mu.Unlock()
	if started {
		t.Fatal("sockets are made ahead before any connect")
	}
	verdict, err := f.Connect(ctx, netip.AddrPortFrom(v, first.Port()), Socket{Family: unix.AF_INET, Type: unix.SOCK_STREAM, FD: -1})
	if err != nil || verdict.Action != Install {
		t.Fatalf("first connect: %+v %v", verdict, err)
	}
	roundTrip(t, verdict.Conn)

	kept := keptSockets(t, f, unix.AF_INET, hostSocketsMax)
	ports := map[int]bool{}
	for _, fd := range kept {
		fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
		if err != nil || fl&unix.O_NONBLOCK == 0 {
			t.Fatalf("kept socket %d: flags %#x %v, want nonblocking", fd, fl, err)
		}
		if fdfl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || fdfl&unix.FD_CLOEXEC == 0 {
			t.Fatalf("kept socket %d is not close-on-exec: %#x %v", fd, fdfl, err)
		}
		sa, err := unix.Getsockname(fd)
		if err != nil {
			t.Fatal(err)
		}
		port := sa.(*unix.SockaddrInet4).Port
		if port == 0 || ports[port] {
			t.Fatalf("kept socket %d: local port %d (want a port of its own)", fd, port)
		}
		ports[port] = true
		if _, err := unix.Getpeername(fd); err != unix.ENOTCONN {
			t.Fatalf("kept socket %d has a peer: %v", fd, err)
		}
		if nd, _ := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY); nd != 0 {
			t.Fatalf("kept socket %d has TCP_NODELAY", fd)
		}
	}
	// No family asked for: none kept.
	f.spares.mu.Lock()
	v6 := len(f.spares.fds[1])
	f.spares.mu.Unlock()
	if v6 != 0 {
		t.Fatalf("%d AF_INET6 sockets kept without an AF_INET6 connect", v6)
	}

	// The next connect takes a kept socket (its local port is one of
	// theirs) and gets the sandbox socket's options.
	sfd := sandboxSocket(t, unix.AF_INET, unix.SOCK_STREAM)
	unix.SetsockoptInt(sfd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	unix.SetsockoptInt(sfd, unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1)
	verdict, err = f.Connect(ctx, dst, Socket{Family: unix.AF_INET, Type: unix.SOCK_STREAM, FD: sfd})
	if err != nil || verdict.Action != Install || verdict.Errno != 0 {
		t.Fatalf("second connect: %+v %v", verdict, err)
	}
	sa, err := unix.Getsockname(verdict.Conn.FD())
	if err != nil {
		t.Fatal(err)
	}
	if !ports[sa.(*unix.SockaddrInet4).Port] {
		t.Fatalf("the connect made its own socket (port %d), not one kept", sa.(*unix.SockaddrInet4).Port)
	}
	if nd, _ := unix.GetsockoptInt(verdict.Conn.FD(), unix.IPPROTO_TCP, unix.TCP_NODELAY); nd == 0 {
		t.Fatal("TCP_NODELAY was not copied onto a kept socket")
	}
	if ka, _ := unix.GetsockoptInt(verdict.Conn.FD(), unix.SOL_SOCKET, unix.SO_KEEPALIVE); ka == 0 {
		t.Fatal("SO_KEEPALIVE was not copied onto a kept socket")
	}
	if fl, _ := unix.FcntlInt(uintptr(verdict.Conn.FD()), unix.F_GETFL, 0); fl&unix.O_NONBLOCK != 0 {
		t.Fatal("a blocking socket was installed nonblocking")
	}
	roundTrip(t, verdict.Conn)

	// Close closes every socket kept.
	kept = keptSockets(t, f, unix.AF_INET, 1)
	inodes := make([]uint64, len(kept))
	for i, fd := range kept {
		inodes[i] = socketInode(t, fd)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	open := openSocketInodes(t)
	for _, ino := range inodes {
		if open[ino] {
			t.Fatalf("socket inode %d kept ahead is still open after Close", ino)
		}
	}
	if fd := f.spares.take(unix.AF_INET); fd >= 0 {
		t.Fatalf("a closed filter handed out socket %d", fd)
	}
}

// TestMakeSockaddr: the raw sockaddrs dial passes to connect and bind have
// the kernel's layout.
func TestMakeSockaddr(t *testing.T) {
	for _, c := range []struct {
		family int
		addr   netip.Addr
		port   uint16
	}{
		{unix.AF_INET, netip.MustParseAddr("192.0.2.7"), 443},
		{unix.AF_INET, netip.MustParseAddr("::ffff:192.0.2.7"), 80}, // a mapped address on an AF_INET socket
		{unix.AF_INET, netip.Addr{}, 40000},                         // bind: any address
		{unix.AF_INET6, netip.MustParseAddr("2001:db8::1"), 8443},
		{unix.AF_INET6, netip.MustParseAddr("::ffff:192.0.2.7"), 443},
		{unix.AF_INET6, netip.Addr{}, 40001},
	} {
		sa := makeSockaddr(c.family, c.addr, c.port)
		if c.family == unix.AF_INET {
			if sa.n != unix.SizeofSockaddrInet4 {
				t.Fatalf("%v: length %d", c.addr, sa.n)
			}
			r := (*unix.RawSockaddrInet4)(unsafe.Pointer(&sa.b[0]))
			want := [4]byte{}
			if c.addr.IsValid() {
				want = c.addr.Unmap().As4()
			}
			p := (*[2]byte)(unsafe.Pointer(&r.Port))
			if r.Family != unix.AF_INET || int(p[0])<<8|int(p[1]) != int(c.port) || r.Addr != want {
				t.Fatalf("%v:%d: %+v", c.addr, c.port, r)
			}
			continue
		}
		if sa.n != unix.SizeofSockaddrInet6 {
			t.Fatalf("%v: length %d", c.addr, sa.n)
		}
		r := (*unix.RawSockaddrInet6)(unsafe.Pointer(&sa.b[0]))
		want := [16]byte{}
		if c.addr.IsValid() {
			want = c.addr.As16()
		}
		p := (*[2]byte)(unsafe.Pointer(&r.Port))
		if r.Family != unix.AF_INET6 || int(p[0])<<8|int(p[1]) != int(c.port) || r.Addr != want || r.Flowinfo != 0 || r.Scope_id != 0 {
			t.Fatalf("%v:%d: %+v", c.addr, c.port, r)
		}
	}
}

// TestConnectedErrno: a socket connected, or listening, in the sandbox's
// own namespace gets the kernel's answer to a second connect (EISCONN), not
// a host connection in its place; a fresh one may connect.
func TestConnectedErrno(t *testing.T) {
	fresh, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fresh)
	if e := connectedErrno(fresh); e != 0 {
		t.Errorf("a fresh socket: %v", e)
	}
	if e := connectedErrno(-1); e != 0 {
		t.Errorf("no descriptor: %v", e)
	}
	l, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(l)
	if err := unix.Bind(l, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(l, 1); err != nil {
		t.Fatal(err)
	}
	if e := connectedErrno(l); e != unix.EISCONN {
		t.Errorf("a listening socket: %v, want EISCONN", e)
	}
	sa, _ := unix.Getsockname(l)
	c, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(c)
	if err := unix.Connect(c, sa); err != nil {
		t.Fatal(err)
	}
	if e := connectedErrno(c); e != unix.EISCONN {
		t.Errorf("a connected socket: %v, want EISCONN", e)
	}
	// What the kernel itself answers, for comparison.
	if err := unix.Connect(c, sa); err != unix.EISCONN {
		t.Errorf("the kernel answers a second connect with %v", err)
	}
}

// TestHostSocketsKeepDistinctPorts: with an ephemeral range of two ports
// (so random binds meet at once; SO_REUSEADDR lets unconnected sockets
// share one), the sockets kept hold distinct ports and the refill ends
// instead of spinning on a pool it cannot fill.
func TestHostSocketsKeepDistinctPorts(t *testing.T) {
	// Two ports above Linux's default ephemeral range, which no
	// connect of this host picks on its own.
	const lo = 61733
	saved := localPortRange
	localPortRange = func() (int, int) { return lo, lo + 1 }
	t.Cleanup(func() { localPortRange = saved })

	h := &hostSockets{wake: make(chan struct{}, 1)}
	h.wanted[0] = true
	t.Cleanup(h.stop)
	h.refill(context.Background())

	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.fds[0]) == 0 {
		t.Fatal("no socket kept")
	}
	if len(h.fds[0]) > 2 {
		t.Fatalf("%d sockets kept on a range of two ports", len(h.fds[0]))
	}
	seen := map[int]bool{}
	for _, fd := range h.fds[0] {
		sa, err := unix.Getsockname(fd)
		if err != nil {
			t.Fatal(err)
		}
		p := sockPort(sa)
		if p < lo || p > lo+1 || seen[p] {
			t.Fatalf("kept socket %d: port %d (kept %v)", fd, p, seen)
		}
		seen[p] = true
	}
}
