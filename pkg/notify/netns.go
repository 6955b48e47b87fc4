package notify

import (
	"encoding/binary"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// supervisorNetnsCookie is the cookie of this process's network namespace
// (SO_NETNS_COOKIE, Linux 5.14; never reused while the namespace lives).
var supervisorNetnsCookie = sync.OnceValues(func() (uint64, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	return netnsCookie(fd)
})

func netnsCookie(fd int) (uint64, error) {
	var b [8]byte
	n := uint32(len(b))
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_NETNS_COOKIE, uintptr(unsafe.Pointer(&b[0])), uintptr(unsafe.Pointer(&n)), 0)
	if e != 0 {
		return 0, e
	}
	return binary.NativeEndian.Uint64(b[:]), nil
}

// NetnsCookieSupported says whether sockets name their network namespace
// here (SO_NETNS_COOKIE): OnSupervisorNetns needs it.
func NetnsCookieSupported() error {
	_, err := supervisorNetnsCookie()
	return err
}

// OnSupervisorNetns says whether the socket fd belongs to this process's
// (the supervisor's) network namespace: a socket of a sandbox that shares
// the host's network (--net host), or one the supervisor made and
// installed. An error means it cannot tell; callers fail closed.
func OnSupervisorNetns(fd int) (bool, error) {
	host, err := supervisorNetnsCookie()
	if err != nil {
		return false, err
	}
	c, err := netnsCookie(fd)
	if err != nil {
		return false, err
	}
	return c == host, nil
}
