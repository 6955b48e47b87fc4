package seccomp

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The command filter: what the default profile denies to commands but
// cannot deny to the worker, installed on the one thread commands are
// forked from.
//
// openat2(2) takes its mode inside struct open_how, behind a pointer the
// filter cannot read, so an openat2(O_CREAT, 04755) would slip past the
// set-id mode rules of the default profile. ENOSYS, not EPERM, as for
// clone3: callers (glibc does not use openat2 for open) fall back to
// openat, whose mode the profile checks. The worker itself resolves paths
// with openat2 after its filter is installed (its tools, RESOLVE_BENEATH),
// so this filter goes on the worker's main thread only, without TSYNC: a
// seccomp filter belongs to the thread that installs it and to the
// children forked from that thread (seccomp(2)), and every command is
// forked from there. The Go runtime creates no thread from a thread locked
// with LockOSThread (it hands the creation to its template thread), so the
// worker's other threads stay without it.

// openat2Nr is the number of openat2 on every architecture nsbox filters
// (Linux 5.6; new syscalls share one number since 5.1).
const openat2Nr = 437

// nativeAuditArch is AUDIT_ARCH of the running binary's ABI.
func nativeAuditArch() (uint32, error) {
	switch runtime.GOARCH {
	case "amd64":
		return auditArchX86_64, nil
	case "arm64":
		return auditArchAARCH64, nil
	}
	return 0, fmt.Errorf("seccomp: no command filter for %s", runtime.GOARCH)
}

// CommandFilter returns the command filter: openat2 of the native ABI gets
// ENOSYS, everything else is left to the profile's filter (other ABIs
// too: the default profile denies them).
func CommandFilter() (*Filter, error) {
	arch, err := nativeAuditArch()
	if err != nil {
		return nil, err
	}
	const (
		ldW  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K
		offA = 4 // seccomp_data.arch
		offN = 0 // seccomp_data.nr
	)
	return &Filter{prog: []unix.SockFilter{
		{Code: ldW, K: offA},
		{Code: jeq, Jt: 0, Jf: 3, K: arch},
		{Code: ldW, K: offN},
		{Code: jeq, Jt: 0, Jf: 1, K: openat2Nr},
		{Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)},
		{Code: ret, K: unix.SECCOMP_RET_ALLOW},
	}}, nil
}

// InstallThread loads the filter on the calling OS thread only (no TSYNC),
// which the caller must have locked with runtime.LockOSThread for good:
// the filter then covers that thread and the processes it forks.
// no_new_privs must already be set on the thread.
func (f *Filter) InstallThread() error {
	if f == nil || len(f.prog) == 0 {
		return fmt.Errorf("%w: empty filter", ErrInstall)
	}
	prog := unix.SockFprog{Len: uint16(len(f.prog)), Filter: &f.prog[0]}
	_, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, uintptr(f.flags), uintptr(unsafe.Pointer(&prog)))
	runtime.KeepAlive(f)
	if errno != 0 {
		return fmt.Errorf("%w: %v", ErrInstall, errno)
	}
	return nil
}
