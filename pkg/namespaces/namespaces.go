// Package namespaces starts a sandbox's worker in its new namespaces
// (Spawn: clone flags, session, parent death signal, ambient capabilities),
// chooses and writes its id maps (ChooseIdentity, WriteMaps) and holds the
// small steps the worker runs inside them (SetIdentity, hostname,
// loopback). It imports no other nsbox package.
package namespaces

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Options choose the namespaces of a sandbox.
type Options struct {
	// HostNetwork shares the host's network namespace instead of a new one
	// holding only loopback.
	HostNetwork bool
	// AllCaps gives the worker every capability (of its user namespace),
	// for policies that let commands keep them (--allow-privileged).
	AllCaps bool
}

// CloneFlags returns the namespaces a sandbox gets.
func CloneFlags(o Options) uintptr {
	// A new user namespace first: it is what makes the others possible
	// without root, and it confines every capability the worker holds to
	// the sandbox (user_namespaces(7)).
	flags := uintptr(unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNS |
		unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP)
	if !o.HostNetwork {
		flags |= unix.CLONE_NEWNET
	}
	return flags
}

// SetHostname sets the UTS hostname of the (new) UTS namespace.
func SetHostname(name string) error {
	if err := unix.Sethostname([]byte(name)); err != nil {
		return fmt.Errorf("sethostname %q: %w", name, err)
	}
	return nil
}

// LoopbackUp brings up lo in the current network namespace, so that
// 127.0.0.1 works inside a sandbox that has no other interface.
func LoopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("get flags of lo: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring up lo: %w", err)
	}
	return nil
}

// Inode returns the inode of /proc/self/ns/NAME, which identifies a
// namespace (for status and tests).
func Inode(name string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/"+name, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}
