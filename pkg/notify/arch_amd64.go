package notify

import "golang.org/x/sys/unix"

const auditArch = unix.AUDIT_ARCH_X86_64

// foreignSocketCalls are the socket calls that name a peer in the ABIs
// this kernel may also run besides the native one: i386 (socketcall and
// its direct calls) and x32 (native arch, numbers with bit 30 set, its own
// sendmsg and sendmmsg). nsbox's main filter kills both ABIs; under
// --seccomp unconfined or a custom profile it may not, and the gate must
// not be walked around through them: they fail with EACCES.
var foreignSocketCalls = []archCalls{
	{arch: unix.AUDIT_ARCH_I386, nrs: []uint32{102 /* socketcall */, 345 /* sendmmsg */, 362 /* connect */, 369 /* sendto */, 370 /* sendmsg */, 373 /* shutdown */, 359 /* socket: AF_VSOCK */}},
}

// setgroupsCalls are setgroups(2) in each ABI: native, x32 (native arch),
// and i386's 16- and 32-bit forms. They notify, so that the Server knows
// when a thread's supplementary groups may have changed (creds).
var setgroupsCalls = []archCalls{
	{arch: auditArch, nrs: []uint32{unix.SYS_SETGROUPS, x32 | 116}},
	{arch: unix.AUDIT_ARCH_I386, nrs: []uint32{81 /* setgroups */, 206 /* setgroups32 */}},
}

// ioctlCalls are ioctl(2) of x32 (its compat entry) and i386, whose
// device ioctls Program refuses under ProgramOptions.Filtered.
var ioctlCalls = []archCalls{
	{arch: auditArch, nrs: []uint32{x32 | 514}},
	{arch: unix.AUDIT_ARCH_I386, nrs: []uint32{54 /* ioctl */}},
}

// ioUringSetupCalls are io_uring_setup(2) in each ABI: native, x32 and
// i386 (Program answers ENOSYS).
var ioUringSetupCalls = []archCalls{
	{arch: auditArch, nrs: []uint32{unix.SYS_IO_URING_SETUP, x32 | 425}},
	{arch: unix.AUDIT_ARCH_I386, nrs: []uint32{425 /* io_uring_setup */}},
}

// nativeForeignCalls are x32's, which come with the native audit arch.
var nativeForeignCalls = []uint32{x32 | 42 /* connect */, x32 | 44 /* sendto */, x32 | 518 /* sendmsg */, x32 | 538 /* sendmmsg */, x32 | 48 /* shutdown */}

const x32 = 0x40000000

// socketCalls are socket(2) in the ABIs whose arguments the filter reads:
// native and x32 (AF_VSOCK is refused there).
var socketCalls = []uint32{unix.SYS_SOCKET, x32 | 41}

// filteredForeignCalls are listen(2) and setsockopt(2) of x32 and i386,
// refused under ProgramOptions.Filtered.
var filteredForeignCalls = []archCalls{
	{arch: auditArch, nrs: []uint32{x32 | 50 /* listen */, x32 | 541 /* setsockopt */}},
	{arch: unix.AUDIT_ARCH_I386, nrs: []uint32{363 /* listen */, 366 /* setsockopt */}},
}

// legacyMetaCalls are x86-64's older metadata calls, which arm64 never
// had: chmod(2), chown(2), lchown(2), utime(2), utimes(2) and
// futimesat(2) (MetaGate).
var legacyMetaCalls = []legacyMetaCall{
	{unix.SYS_CHMOD, Chmod}, {unix.SYS_CHOWN, Chown}, {unix.SYS_LCHOWN, Chown},
	{unix.SYS_UTIME, Utimes}, {unix.SYS_UTIMES, Utimes}, {unix.SYS_FUTIMESAT, Utimes},
}

// readLegacyMetaCall reads the arguments of one of legacyMetaCalls.
func readLegacyMetaCall(c *SockCall, nr int32, a [6]uint64) (m *metaCall, ok bool, e unix.Errno) {
	m = &metaCall{dirfd: unix.AT_FDCWD, fd: -1}
	switch uintptr(nr) {
	case unix.SYS_CHMOD:
		m.op, m.name, m.mode = Chmod, "chmod", uint32(a[1])
		m.path, e = readString(c, a[0])
	case unix.SYS_CHOWN, unix.SYS_LCHOWN:
		m.op, m.name, m.uid, m.gid = Chown, "chown", uint32(a[1]), uint32(a[2])
		if uintptr(nr) == unix.SYS_LCHOWN {
			m.name, m.flags = "lchown", unix.AT_SYMLINK_NOFOLLOW
		}
		m.path, e = readString(c, a[0])
	case unix.SYS_UTIME:
		m.op, m.name = Utimes, "utime"
		if m.times, e = readUtimbuf(c, a[1]); e == 0 {
			m.path, e = readString(c, a[0])
		}
	case unix.SYS_UTIMES:
		m.op, m.name = Utimes, "utimes"
		if m.times, e = readTimevals(c, a[1]); e == 0 {
			m.path, e = readString(c, a[0])
		}
	case unix.SYS_FUTIMESAT:
		m.op, m.name = Utimes, "futimesat"
		if m.times, e = readTimevals(c, a[2]); e != 0 {
			break
		}
		if a[1] == 0 {
			// A NULL path names dirfd itself (do_utimes).
			if int(int32(a[0])) == unix.AT_FDCWD {
				return m, true, unix.EFAULT
			}
			m.fd = int(int32(a[0]))
			break
		}
		m.dirfd = int(int32(a[0]))
		m.path, e = readString(c, a[1])
	default:
		return nil, false, 0
	}
	return m, true, e
}
