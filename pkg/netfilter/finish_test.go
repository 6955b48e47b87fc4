package netfilter

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestBlockingConnectInProgressWaits: a blocking sandbox socket whose
// host connect is still unanswered when connect is made again at once
// (EALREADY: the listener drops the SYN) takes the wait, which the
// call's context ends.
func TestBlockingConnectInProgressWaits(t *testing.T) {
	up := newFakeUpstream(t)
	slow := synDropper(t)
	f := newFilter(t, up, []string{"slow.test:" + itoa(slow.Port())}, nil, []string{"slow.test:127.0.0.1"}, nil)
	v := resolveVia(t, serve(t, f), "slow.test")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	verdict, err := f.Connect(ctx, netip.AddrPortFrom(v, slow.Port()), Socket{Family: unix.AF_INET, Type: unix.SOCK_STREAM, FD: -1})
	if err != nil || verdict.Action != Fail || verdict.Errno != unix.EINTR {
		t.Fatalf("blocking connect to a host that does not answer, cancelled: %+v %v, want Fail EINTR", verdict, err)
	}
	if n := f.OpenConns(); n != 0 {
		t.Fatalf("a cancelled dial is counted: %d", n)
	}
}

// TestBlockingConnectCompletesAfterWait: the same connect, answered once
// the listener has room again (the SYN's retransmission, ~1 s later),
// installs a socket that is connected (SS_CONNECTED: a connect on it
// answers EISCONN) and blocking.
func TestBlockingConnectCompletesAfterWait(t *testing.T) {
	up := newFakeUpstream(t)
	lfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(lfd)
	if err := unix.Bind(lfd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(lfd, 0); err != nil {
		t.Fatal(err)
	}
	sa, _ := unix.Getsockname(lfd)
	dst := &unix.SockaddrInet4{Port: sa.(*unix.SockaddrInet4).Port, Addr: [4]byte{127, 0, 0, 1}}
	// The one connection the queue holds: the next SYN is dropped.
	filler, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(filler)
	if err := unix.Connect(filler, dst); err != nil {
		t.Fatal(err)
	}
	f := newFilter(t, up, []string{"slow.test:" + itoa(uint16(dst.Port))}, nil, []string{"slow.test:127.0.0.1"}, nil)
	v := resolveVia(t, serve(t, f), "slow.test")
	// Room in the queue again once the dial has begun.
	accepted := -1
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(200 * time.Millisecond)
		accepted, _, _ = unix.Accept4(lfd, unix.SOCK_CLOEXEC)
	}()
	defer func() {
		<-done
		if accepted >= 0 {
			unix.Close(accepted)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a deadlock guard
	defer cancel()
	verdict, err := f.Connect(ctx, netip.AddrPortFrom(v, uint16(dst.Port)), Socket{Family: unix.AF_INET, Type: unix.SOCK_STREAM, FD: -1})
	if err != nil || verdict.Action != Install || verdict.Errno != 0 {
		t.Fatalf("blocking connect answered late: %+v %v", verdict, err)
	}
	fd := verdict.Conn.FD()
	defer verdict.Conn.Close()
	if err := unix.Connect(fd, dst); err != unix.EISCONN {
		t.Fatalf("connect again on the installed socket: %v, want EISCONN (marked connected)", err)
	}
	if fl, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); fl&unix.O_NONBLOCK != 0 {
		t.Fatal("a blocking socket was installed nonblocking")
	}
}
