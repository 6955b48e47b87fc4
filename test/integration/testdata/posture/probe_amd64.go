package main

import (
	"syscall"

	"golang.org/x/sys/unix"
)

const goarch = "amd64"

// abis are the second syscall tables of x86_64: x32 (the native entry with
// bit 30 set in the number) and i386 (int $0x80).
var abis = []string{"x32", "i386"}

// x32Bit marks an x32 syscall number (__X32_SYSCALL_BIT).
const x32Bit = 0x40000000

// int80 makes the i386 system call nr through int $0x80 and returns eax
// (int80_amd64.s).
func int80(nr uint32) uint32

// abiCall makes getpid through another ABI: x32 getpid is number 39 with
// the x32 bit, i386 getpid is number 20.
func abiCall(abi string) (int64, syscall.Errno) {
	switch abi {
	case "x32":
		r, _, e := unix.RawSyscall(x32Bit|unix.SYS_GETPID, 0, 0, 0)
		return int64(r), e
	case "i386":
		r := int32(int80(20))
		if r < 0 && r > -4096 {
			return -1, syscall.Errno(-r)
		}
		return int64(r), 0
	}
	return -1, unix.EINVAL
}

// addArchProbes adds the x86-only calls of the default denylist.
func addArchProbes(m map[string]probeFn) {
	m["iopl"] = sys(unix.SYS_IOPL, 4)                    // level 4: EINVAL
	m["ioperm"] = sys(unix.SYS_IOPERM, 0, 0, 0)          // empty range: EINVAL
	m["modify_ldt"] = sys(unix.SYS_MODIFY_LDT, 99, 0, 0) // unknown func: ENOSYS
	m["uselib"] = sys(unix.SYS_USELIB, bad)              // EFAULT, or ENOSYS without CONFIG_USELIB
}
