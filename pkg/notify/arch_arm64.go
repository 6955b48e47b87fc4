package notify

import "golang.org/x/sys/unix"

const auditArch = unix.AUDIT_ARCH_AARCH64

// foreignSocketCalls: the 32-bit ARM ABI's socket calls that name a peer
// (see arch_amd64.go).
var foreignSocketCalls = []archCalls{
	{arch: unix.AUDIT_ARCH_ARM, nrs: []uint32{102 /* socketcall */, 283 /* connect */, 290 /* sendto */, 296 /* sendmsg */, 374 /* sendmmsg */, 293 /* shutdown */, 281 /* socket: AF_VSOCK */}},
}

// setgroupsCalls: setgroups(2) natively and in the 32-bit ARM ABI (its
// 16- and 32-bit forms; see arch_amd64.go).
var setgroupsCalls = []archCalls{
	{arch: auditArch, nrs: []uint32{unix.SYS_SETGROUPS}},
	{arch: unix.AUDIT_ARCH_ARM, nrs: []uint32{81 /* setgroups */, 206 /* setgroups32 */}},
}

// ioctlCalls: ioctl(2) of 32-bit ARM (see arch_amd64.go).
var ioctlCalls = []archCalls{
	{arch: unix.AUDIT_ARCH_ARM, nrs: []uint32{54 /* ioctl */}},
}

// ioUringSetupCalls: io_uring_setup(2) natively and in the 32-bit ARM
// ABI (see arch_amd64.go).
var ioUringSetupCalls = []archCalls{
	{arch: auditArch, nrs: []uint32{unix.SYS_IO_URING_SETUP}},
	{arch: unix.AUDIT_ARCH_ARM, nrs: []uint32{425 /* io_uring_setup */}},
}

var nativeForeignCalls []uint32

// socketCalls are socket(2) natively (see arch_amd64.go).
var socketCalls = []uint32{unix.SYS_SOCKET}

// filteredForeignCalls are listen(2) and setsockopt(2) of 32-bit ARM
// (see arch_amd64.go).
var filteredForeignCalls = []archCalls{
	{arch: unix.AUDIT_ARCH_ARM, nrs: []uint32{284 /* listen */, 294 /* setsockopt */}},
}

// legacyMetaCalls: arm64 has only the *at metadata calls (arch_amd64.go).
var legacyMetaCalls []legacyMetaCall

func readLegacyMetaCall(*SockCall, int32, [6]uint64) (*metaCall, bool, unix.Errno) {
	return nil, false, 0
}
