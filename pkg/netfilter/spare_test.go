package netfilter

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// socketInode names a socket for good (its fd number can be reused).
func socketInode(t *testing.T, fd int) string {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("socket:[%d]", st.Ino)
}

// holdsSocket reports whether the process has a descriptor of the socket.
func holdsSocket(t *testing.T, inode string) bool {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && l == inode {
			return true
		}
	}
	return false
}

func localPort(t *testing.T, fd int) int {
	t.Helper()
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return sa.Port
	case *unix.SockaddrInet6:
		return sa.Port
	}
	t.Fatalf("getsockname: %T", sa)
	return 0
}

// TestConnectTakesSpare: a verdict's After makes the next connect's host
// socket (the spare): nonblocking, close-on-exec, bound to a port of the
// ephemeral range, and not a connection; the next connect installs that
// very socket, with the program's options and blocking mode, connected;
// Close closes a spare that waits.
func TestConnectTakesSpare(t *testing.T) {
	up := newFakeUpstream(t)
	echo := echoServer(t)
	f := newFilter(t, up, []string{"good.test:" + itoa(echo.Port())}, nil, []string{"good.test:127.0.0.1"}, nil)
	v := resolveVia(t, serve(t, f), "good.test")
	dst := netip.AddrPortFrom(v, echo.Port())
	ctx := context.Background()

	first, err := f.Connect(ctx, dst, Socket{Family: unix.AF_INET, Type: unix.SOCK_STREAM, FD: -1})
	if err != nil || first.Action != Install || first.After == nil {
		t.Fatalf("first connect: %+v %v", first, err)
	}
	if f.spares.have[0] {
		t.Fatal("a spare was made before the call was answered")
	}
	first.After()
	if !f.spares.have[0] {
		t.Fatal("no spare after After")
	}
	spare := f.spares.fd[0]
	if fl, _ := unix.FcntlInt(uintptr(spare), unix.F_GETFL, 0); fl&unix.O_NONBLOCK == 0 {
		t.Fatal("the spare is blocking")
	}
	if fl, _ := unix.FcntlInt(uintptr(spare), unix.F_GETFD, 0); fl&unix.FD_CLOEXEC == 0 {
		t.Fatal("the spare is not close-on-exec")
	}
	lo, hi := localPortRange()
	port := localPort(t, spare)
	if port < lo || port > hi {
		t.Fatalf("the spare is bound to port %d, not one of [%d, %d]", port, lo, hi)
	}
	if n := f.OpenConns(); n != 1 {
		t.Fatalf("open connections with a spare waiting: %d, want 1", n)
	}
	roundTrip(t, first.Conn)

	// The program's socket: blocking, with an option set before connect.
	sfd := sandboxSocket(t, unix.AF_INET, unix.SOCK_STREAM)
	unix.SetsockoptInt(sfd, unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1)
	second, err := f.Connect(ctx, dst, Socket{Family: unix.AF_INET, Type: unix.SOCK_STREAM, FD: sfd})
	if err != nil || second.Action != Install || second.Errno != 0 {
		t.Fatalf("second connect: %+v %v", second, err)
	}
	fd := second.Conn.FD()
	if fd != spare || localPort(t, fd) != port {
		t.Fatalf("installed fd %d port %d, want the spare (fd %d port %d)", fd, localPort(t, fd), spare, port)
	}
	if f.spares.have[0] {
		t.Fatal("the spare was taken and still waits")
	}
	if err := unix.Connect(fd, &unix.SockaddrInet4{Port: int(echo.Port()), Addr: echo.Addr().As4()}); err != unix.EISCONN {
		t.Fatalf("connect again on the installed socket: %v, want EISCONN (marked connected)", err)
	}
	if fl, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); fl&unix.O_NONBLOCK != 0 {
		t.Fatal("a blocking socket was installed nonblocking")
	}
	if ka, _ := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_KEEPALIVE); ka == 0 {
		t.Fatal("SO_KEEPALIVE was not copied onto the spare")
	}
	roundTrip(t, second.Conn)

	// An AF_INET6 socket gets a spare of its own family.
	third, err := f.Connect(ctx, netip.AddrPortFrom(netip.AddrFrom16(v.As16()), echo.Port()), Socket{Family: unix.AF_INET6, Type: unix.SOCK_STREAM, FD: -1})
	if err != nil || third.Action != Install {
		t.Fatalf("AF_INET6: %+v %v", third, err)
	}
	third.After()
	if !f.spares.have[1] {
		t.Fatal("no AF_INET6 spare")
	}
	if d, _ := unix.GetsockoptInt(f.spares.fd[1], unix.SOL_SOCKET, unix.SO_DOMAIN); d != unix.AF_INET6 {
		t.Fatalf("the AF_INET6 spare is of family %d", d)
	}
	roundTrip(t, third.Conn)

	second.After()
	inodes := []string{socketInode(t, f.spares.fd[0]), socketInode(t, f.spares.fd[1])}
	f.Close()
	for _, ino := range inodes {
		if holdsSocket(t, ino) {
			t.Fatalf("the spare %s outlived Close", ino)
		}
	}
	// After on a closed filter makes nothing.
	second.After()
	if f.spares.have[0] || f.spares.have[1] {
		t.Fatal("a spare was made after Close")
	}
}

// TestConnectCapWithSpares: a spare waiting or being dialled is no
// connection: the cap and OpenConns count the connections alone, exactly,
// also after a dial of a spare failed.
func TestConnectCapWithSpares(t *testing.T) {
	up := newFakeUpstream(t)
	echo := echoServer(t)
	closed := closedPort(t)
	f := newFilter(t, up, []string{"good.test:" + itoa(echo.Port()), "closed.test:" + itoa(closed)}, nil, []string{"good.test:127.0.0.1", "closed.test:127.0.0.1"}, func(c *Config) { c.MaxConns = 2 })
	srv := serve(t, f)
	dst := netip.AddrPortFrom(resolveVia(t, srv, "good.test"), echo.Port())
	refused := netip.AddrPortFrom(resolveVia(t, srv, "closed.test"), closed)
	sock := Socket{Family: unix.AF_INET, Type: unix.SOCK_STREAM, FD: -1}
	ctx := context.Background()
	connect := func(to netip.AddrPort) (Verdict, error) {
		t.Helper()
		v, err := f.Connect(ctx, to, sock)
		if v.After != nil {
			v.After()
		}
		return v, err
	}
	var held []int
	for range 2 {
		v, err := connect(dst)
		if err != nil || v.Action != Install {
			t.Fatalf("%+v %v", v, err)
		}
		fd, _ := unix.Dup(v.Conn.FD()) // the sandbox's copy
		v.Conn.Close()
		held = append(held, fd)
	}
	if !f.spares.have[0] {
		t.Fatal("no spare waits")
	}
	if n := f.OpenConns(); n != 2 {
		t.Fatalf("open with a spare waiting: %d, want 2", n)
	}
	if v, err := connect(dst); !errors.Is(err, ErrLimit) || v.Errno != unix.ENOBUFS {
		t.Fatalf("at the cap with a spare waiting: %+v %v", v, err)
	}
	unix.Close(held[0])
	// The spare is dialled to a closed port: the dial fails, and neither
	// it nor the spare made after it is counted.
	if v, err := connect(refused); err != nil || v.Action != Fail || v.Errno != unix.ECONNREFUSED {
		t.Fatalf("dial of a spare to a closed port: %+v %v", v, err)
	}
	if n := f.OpenConns(); n != 1 {
		t.Fatalf("open after a close and a failed dial: %d, want 1", n)
	}
	v, err := connect(dst)
	if err != nil || v.Action != Install {
		t.Fatalf("below the cap again: %+v %v", v, err)
	}
	if v, err := connect(dst); !errors.Is(err, ErrLimit) {
		t.Fatalf("at the cap again: %+v %v", v, err)
	}
	v.Conn.Close()
	unix.Close(held[1])
	if n := f.OpenConns(); n != 0 {
		t.Fatalf("open after all closed: %d, want 0", n)
	}
	if st := f.Stats(); st.OpenConns != 0 || st.Connects != 3 {
		t.Fatalf("stats %+v", st)
	}
}

// closedPort is a port of the host's 127.0.0.1 nobody listens on.
func closedPort(t *testing.T) uint16 {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).AddrPort().Port()
	ln.Close()
	return port
}

// TestCloseWhileDiallingSpare: a filter closed while a dial holds its
// spare counts nothing afterwards (the spare's dial fails on its own).
func TestCloseWhileDiallingSpare(t *testing.T) {
	up := newFakeUpstream(t)
	echo := echoServer(t)
	slow := synDropper(t)
	f := newFilter(t, up, []string{"good.test:" + itoa(echo.Port()), "slow.test:" + itoa(slow.Port())}, nil, []string{"good.test:127.0.0.1", "slow.test:127.0.0.1"}, func(c *Config) { c.ConnectTimeout = 500 * time.Millisecond })
	srv := serve(t, f)
	good := netip.AddrPortFrom(resolveVia(t, srv, "good.test"), echo.Port())
	held := netip.AddrPortFrom(resolveVia(t, srv, "slow.test"), slow.Port())
	sock := Socket{Family: unix.AF_INET, Type: unix.SOCK_STREAM, FD: -1}
	v, err := f.Connect(context.Background(), good, sock)
	if err != nil || v.Action != Install {
		t.Fatalf("%+v %v", v, err)
	}
	v.Conn.Close()
	v.After()
	done := make(chan Verdict)
	go func() {
		v, _ := f.Connect(context.Background(), held, sock)
		done <- v
	}()
	// Closed once the dial took the spare (it then waits for the SYN's
	// answer, which never comes, until ConnectTimeout).
	for taken := false; !taken; {
		f.mu.Lock()
		taken = !f.spares.have[0]
		f.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	f.Close()
	if v := <-done; v.Action != Fail {
		t.Fatalf("dial of a spare past Close: %+v", v)
	}
	if st := f.Stats(); st.OpenConns != 0 || f.spares.registered != 0 {
		t.Fatalf("after Close: %+v, %d spares registered", st, f.spares.registered)
	}
}
