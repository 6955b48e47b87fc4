package netfilter

import (
	"context"
	"net"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkConnect is the filter's own share of a trapped connect (the
// decision and the host-side dial, without the notification round trip),
// against a plain blocking connect, both to a loopback listener.
func BenchmarkConnect(b *testing.B) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	dst := ln.Addr().(*net.TCPAddr).AddrPort()
	b.Run("plain", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			fd, _ := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err := unix.Connect(fd, &unix.SockaddrInet4{Port: int(dst.Port()), Addr: dst.Addr().As4()}); err != nil {
				b.Fatal(err)
			}
			unix.Close(fd)
		}
	})
	b.Run("filter", func(b *testing.B) {
		up := newFakeUpstream(b)
		f := newFilter(b, up, []string{"good.test:" + itoa(dst.Port())}, nil, []string{"good.test:127.0.0.1"}, nil)
		v := resolveVia(b, serve(b, f), "good.test")
		sfd, _ := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		defer unix.Close(sfd)
		sock := Socket{Family: unix.AF_INET, Type: unix.SOCK_STREAM, FD: sfd}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			verdict, err := f.Connect(context.Background(), netip.AddrPortFrom(v, dst.Port()), sock)
			if err != nil || verdict.Action != Install {
				b.Fatal(verdict, err)
			}
			verdict.Conn.Close()
		}
	})
}
