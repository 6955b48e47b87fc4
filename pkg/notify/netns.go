package notify

import (
	"sync"

	"golang.org/x/sys/unix"
)

// OwnNetnsCookie is the cookie of the calling process's network
// namespace (SO_NETNS_COOKIE, Linux 5.14; never reused while the
// namespace lives), asked anew: a worker asks it once it is in the
// sandbox's namespace.
func OwnNetnsCookie() (uint64, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	return netnsCookie(fd)
}

// supervisorNetnsCookie is the cookie of this process's (the
// supervisor's) network namespace, asked once.
var supervisorNetnsCookie = sync.OnceValues(OwnNetnsCookie)

func netnsCookie(fd int) (uint64, error) {
	return unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
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
