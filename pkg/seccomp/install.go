package seccomp

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrInstall is wrapped by every Install error.
var ErrInstall = errors.New("seccomp: cannot install filter")

// Install loads the filter into the calling process, on every thread. It
// runs in the worker and needs neither cgo nor libseccomp: one prctl and one
// seccomp(2) call.
//
// Invariants, in the order they are enforced:
//   - no_new_privs is set first (idempotent if the worker already set it).
//     Without it the kernel accepts a filter only from a task with
//     CAP_SYS_ADMIN in its user namespace, which the worker still has at
//     this point; it would then install, and a set-uid program could later
//     run under a filter it does not expect (seccomp(2), "EACCES").
//   - SECCOMP_FILTER_FLAG_TSYNC applies the filter to every thread of the
//     process atomically and copies no_new_privs to them. A Go program
//     always has several threads; a filter on one thread only would leave
//     the others, and the children they fork, unfiltered.
//   - The filter can only be added to, never removed: once Install returns
//     nil, every later exec in the sandbox runs under it.
func (f *Filter) Install() error {
	if f == nil || len(f.prog) == 0 {
		return fmt.Errorf("%w: empty filter", ErrInstall)
	}
	// prctl(PR_SET_NO_NEW_PRIVS) and seccomp(2) act on the calling thread;
	// keep both, and the check in between, on the same one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	// no_new_privs before the filter (seccomp(2) EACCES rule): never a
	// filter that a set-uid/file-capability exec could run under with more
	// privilege than the code that installed it expected.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("%w: setting no_new_privs: %v", ErrInstall, err)
	}
	if v, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0); err != nil || v != 1 {
		return fmt.Errorf("%w: no_new_privs is not set on this thread", ErrInstall)
	}

	prog := unix.SockFprog{Len: uint16(len(f.prog)), Filter: &f.prog[0]}
	// TSYNC: every thread, atomically, or none (a thread left unfiltered
	// could fork an unfiltered child).
	flags := uintptr(unix.SECCOMP_FILTER_FLAG_TSYNC | f.flags)
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&prog)))
	runtime.KeepAlive(f)
	if errno != 0 {
		switch errno {
		case unix.EINVAL:
			return fmt.Errorf("%w: the kernel rejected the program or a flag (EINVAL)", ErrInstall)
		case unix.ENOMEM:
			return fmt.Errorf("%w: too many filters already installed (ENOMEM)", ErrInstall)
		case unix.ENOSYS:
			return fmt.Errorf("%w: the kernel has no seccomp filter support (ENOSYS)", ErrInstall)
		}
		return fmt.Errorf("%w: %v", ErrInstall, errno)
	}
	if r != 0 {
		// With TSYNC, a positive return is the id of a thread that could not
		// be synchronized (it has a diverging filter); nothing was installed.
		return fmt.Errorf("%w: thread %d could not be synchronized", ErrInstall, r)
	}
	return nil
}
