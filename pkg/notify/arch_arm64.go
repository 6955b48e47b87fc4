package notify

import "golang.org/x/sys/unix"

const auditArch = unix.AUDIT_ARCH_AARCH64

// foreignSocketCalls: the 32-bit ARM ABI's socket calls that name a peer
// (see arch_amd64.go).
var foreignSocketCalls = []archCalls{
	{arch: unix.AUDIT_ARCH_ARM, nrs: []uint32{102 /* socketcall */, 283 /* connect */, 290 /* sendto */, 296 /* sendmsg */, 374 /* sendmmsg */}},
}

var nativeForeignCalls []uint32
