package notify

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrUnsupported is returned where the kernel or the architecture has no
// seccomp user notification (or no pidfd_getfd, which the supervisor needs
// to act on the target's sockets).
var ErrUnsupported = errors.New("seccomp user notification is not available")

// Offsets in struct seccomp_data.
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

func stmt(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
func jump(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
	return unix.SockFilter{Code: code, K: k, Jt: jt, Jf: jf}
}

// Program returns the notification filter: connect, sendmsg and sendmmsg
// always notify; sendto notifies only when its address argument is not
// NULL (send(2) to a connected socket costs nothing). Everything else, and
// every foreign ABI (the main filter kills those), is allowed here: this
// filter only decides who answers, the main filter what is denied.
func Program() []unix.SockFilter {
	const (
		ld  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		ret = unix.BPF_RET | unix.BPF_K
	)
	allow, notif := uint32(unix.SECCOMP_RET_ALLOW), uint32(unix.SECCOMP_RET_USER_NOTIF)
	// sendto's 5th argument (dest_addr), as two 32-bit words (little
	// endian: the low word first).
	addrLo, addrHi := uint32(offArgs+4*8), uint32(offArgs+4*8+4)
	return []unix.SockFilter{
		/* 0 */ stmt(ld, offArch),
		/* 1 */ jump(jeq, auditArch, 0, 9), // foreign ABI -> 11 allow
		/* 2 */ stmt(ld, offNr),
		/* 3 */ jump(jeq, uint32(unix.SYS_CONNECT), 8, 0), // -> 12 notify
		/* 4 */ jump(jeq, uint32(unix.SYS_SENDMSG), 7, 0),
		/* 5 */ jump(jeq, uint32(unix.SYS_SENDMMSG), 6, 0),
		/* 6 */ jump(jeq, uint32(unix.SYS_SENDTO), 0, 4), // other -> 11 allow
		/* 7 */ stmt(ld, addrLo),
		/* 8 */ jump(jeq, 0, 0, 3), // -> 12 notify
		/* 9 */ stmt(ld, addrHi),
		/* 10 */ jump(jeq, 0, 0, 1), // -> 12 notify
		/* 11 */ stmt(ret, allow),
		/* 12 */ stmt(ret, notif),
	}
}

// Supported reports whether this kernel and architecture can run the
// notification gate: seccomp's SECCOMP_RET_USER_NOTIF action and
// pidfd_getfd(2) (Linux 5.6).
func Supported() error {
	if auditArch == 0 {
		return fmt.Errorf("%w on %s", ErrUnsupported, runtime.GOARCH)
	}
	action := uint32(unix.SECCOMP_RET_USER_NOTIF)
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, 2 /* SECCOMP_GET_ACTION_AVAIL */, 0, uintptr(unsafe.Pointer(&action))); e != 0 {
		return fmt.Errorf("%w: the kernel has no SECCOMP_RET_USER_NOTIF (%v)", ErrUnsupported, e)
	}
	if err := checkSizes(); err != nil {
		return fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	// pidfd_getfd on an fd of our own: ENOSYS before 5.6.
	pfd, err := unix.PidfdOpen(unix.Getpid(), 0)
	if err != nil {
		return fmt.Errorf("%w: pidfd_open: %v", ErrUnsupported, err)
	}
	defer unix.Close(pfd)
	fd, err := unix.PidfdGetfd(pfd, pfd, 0)
	if err != nil {
		return fmt.Errorf("%w: pidfd_getfd: %v", ErrUnsupported, err)
	}
	unix.Close(fd)
	return nil
}

// Install loads the notification filter on every thread of the calling
// process and returns the listener fd (close-on-exec). no_new_privs must
// already be set, or the caller hold CAP_SYS_ADMIN (seccomp(2)).
//
// The filter is installed with TSYNC (every thread, or none: a thread left
// out would fork unwatched children) and, where the kernel has it, with
// SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (5.19): once the supervisor has
// read a notification, only a fatal signal interrupts the target's wait,
// so a connect the supervisor already made is never restarted by a
// signal handler and made twice.
func Install() (int, error) {
	if auditArch == 0 {
		return -1, fmt.Errorf("%w on %s", ErrUnsupported, runtime.GOARCH)
	}
	prog := Program()
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	base := uintptr(unix.SECCOMP_FILTER_FLAG_NEW_LISTENER | unix.SECCOMP_FILTER_FLAG_TSYNC | unix.SECCOMP_FILTER_FLAG_TSYNC_ESRCH)
	var lastErr unix.Errno
	for _, extra := range []uintptr{unix.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, 0} {
		r, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, base|extra, uintptr(unsafe.Pointer(&fprog)))
		runtime.KeepAlive(prog)
		if e == unix.EINVAL {
			lastErr = e
			continue
		}
		if e != 0 {
			return -1, fmt.Errorf("install notification filter: %w", e)
		}
		return int(r), nil
	}
	return -1, fmt.Errorf("install notification filter: %w", lastErr)
}
