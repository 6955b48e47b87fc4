package netfilter

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// BindResolver binds the resolver's UDP and TCP sockets at ResolverAddr in
// the calling thread's network namespace. The worker calls it during setup,
// in the sandbox's namespace and while it still holds CAP_NET_BIND_SERVICE
// there (port 53), and passes both to the supervisor, which serves them
// (ServeDNS after net.FilePacketConn / net.FileListener). They are plain
// descriptors, close-on-exec, which the caller owns (no *os.File whose
// finalizer could close them).
//
// Why the worker binds and not the supervisor: entering the sandbox's
// network namespace with setns needs CAP_SYS_ADMIN over it AND in the
// caller's own user namespace (netns_install in net/core/net_namespace.c),
// which a root-less supervisor lacks in the host's; and setns into the
// sandbox's user namespace first is refused to a multithreaded process
// (setns(2)), which every Go program is.
//
// The sockets are bound before any program of the sandbox runs, without
// SO_REUSEADDR/SO_REUSEPORT, so nothing inside can bind the address to
// answer in nsbox's place.
func BindResolver() (udp, tcp int, err error) {
	sa := &unix.SockaddrInet4{Port: int(ResolverAddr.Port()), Addr: ResolverAddr.Addr().As4()}
	ufd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, -1, fmt.Errorf("resolver socket: %w", err)
	}
	if err := unix.Bind(ufd, sa); err != nil {
		unix.Close(ufd)
		return -1, -1, fmt.Errorf("bind the resolver to %s/udp: %w", ResolverAddr, err)
	}
	tfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		unix.Close(ufd)
		return -1, -1, fmt.Errorf("resolver socket: %w", err)
	}
	if err := unix.Bind(tfd, sa); err != nil {
		unix.Close(ufd)
		unix.Close(tfd)
		return -1, -1, fmt.Errorf("bind the resolver to %s/tcp: %w", ResolverAddr, err)
	}
	if err := unix.Listen(tfd, 16); err != nil {
		unix.Close(ufd)
		unix.Close(tfd)
		return -1, -1, fmt.Errorf("listen on %s/tcp: %w", ResolverAddr, err)
	}
	return ufd, tfd, nil
}
