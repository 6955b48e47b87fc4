package netfilter

import (
	"encoding/binary"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The system calls of a dial that never sleep (a socket made, its options
// set, a bind, a nonblocking connect, its file flags) are made as raw
// system calls: without the runtime's entersyscall/exitsyscall around
// each. Beside that bookkeeping (~0.2 µs a call), a call the runtime
// takes for blocking (a loopback connect runs the whole handshake in its
// softirq, tens of µs) lets the runtime's monitor hand the serving
// thread's P to another thread, and getting one back on the way out
// costs more than the call. None of these may sleep for long: a
// nonblocking TCP connect returns EINPROGRESS at once (the wait for the
// handshake is a poll, made the ordinary way: waitConnected), and the
// socket's lock is held by no one else (the socket was just made here).

// rawSockaddr is a sockaddr_in or sockaddr_in6 in the kernel's layout.
type rawSockaddr struct {
	b [unix.SizeofSockaddrInet6]byte
	n uintptr
}

// makeSockaddr lays out a sockaddr of family for a and port: a is an IPv4
// address (or a mapped one) for AF_INET, any address for AF_INET6 (IPv4 as
// a mapped address); the zero Addr is the unspecified address (a bind to
// any of the host's).
func makeSockaddr(family int, a netip.Addr, port uint16) rawSockaddr {
	var r rawSockaddr
	binary.NativeEndian.PutUint16(r.b[0:2], uint16(family))
	binary.BigEndian.PutUint16(r.b[2:4], port)
	if family == unix.AF_INET {
		if a = a.Unmap(); a.Is4() {
			ip := a.As4()
			copy(r.b[4:8], ip[:])
		}
		r.n = unix.SizeofSockaddrInet4
		return r
	}
	if a.IsValid() {
		ip := a.As16()
		copy(r.b[8:24], ip[:])
	}
	r.n = unix.SizeofSockaddrInet6
	return r
}

func errnoErr(e unix.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

// rawSocket makes a nonblocking, close-on-exec TCP socket of family.
// SOCK_CLOEXEC: a process the supervisor starts never inherits a host
// socket.
func rawSocket(family int) (int, error) {
	fd, _, e := unix.RawSyscall(unix.SYS_SOCKET, uintptr(family), unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

func rawConnect(fd int, sa *rawSockaddr) error {
	_, _, e := unix.RawSyscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&sa.b[0])), sa.n)
	return errnoErr(e)
}

func rawBind(fd int, sa *rawSockaddr) error {
	_, _, e := unix.RawSyscall(unix.SYS_BIND, uintptr(fd), uintptr(unsafe.Pointer(&sa.b[0])), sa.n)
	return errnoErr(e)
}

func rawSetsockoptInt(fd, level, opt, v int) error {
	x := int32(v)
	_, _, e := unix.RawSyscall6(unix.SYS_SETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt), uintptr(unsafe.Pointer(&x)), 4, 0)
	return errnoErr(e)
}

// rawSetfl sets fd's file status flags to fl.
func rawSetfl(fd, fl int) error {
	_, _, e := unix.RawSyscall(unix.SYS_FCNTL, uintptr(fd), unix.F_SETFL, uintptr(fl))
	return errnoErr(e)
}
