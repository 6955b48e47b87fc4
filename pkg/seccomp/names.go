package seccomp

import (
	"sync"

	libseccomp "github.com/seccomp/libseccomp-golang"
)

// archInfo describes one SCMP_ARCH_* name.
type archInfo struct {
	scmp libseccomp.ScmpArch
	// audit is the AUDIT_ARCH_* value the kernel puts in seccomp_data.arch
	// (linux/audit.h); 0 where nsbox does not generate an ENOSYS stub.
	audit uint32
	// nrBase is added to every syscall number of the ABI (x32 sets bit 30).
	nrBase uint32
}

// AUDIT_ARCH_* values from linux/audit.h: EM_* | 64BIT (0x80000000) | LE (0x40000000).
const (
	auditArchI386    = 0x40000003
	auditArchX86_64  = 0xc000003e
	auditArchARM     = 0x40000028
	auditArchAARCH64 = 0xc00000b7
	x32SyscallBit    = 0x40000000 // __X32_SYSCALL_BIT
)

var arches = map[string]archInfo{
	"SCMP_ARCH_X86":         {libseccomp.ArchX86, auditArchI386, 0},
	"SCMP_ARCH_X86_64":      {libseccomp.ArchAMD64, auditArchX86_64, 0},
	"SCMP_ARCH_X32":         {libseccomp.ArchX32, auditArchX86_64, x32SyscallBit},
	"SCMP_ARCH_ARM":         {libseccomp.ArchARM, auditArchARM, 0},
	"SCMP_ARCH_AARCH64":     {libseccomp.ArchARM64, auditArchAARCH64, 0},
	"SCMP_ARCH_MIPS":        {libseccomp.ArchMIPS, 0, 0},
	"SCMP_ARCH_MIPS64":      {libseccomp.ArchMIPS64, 0, 0},
	"SCMP_ARCH_MIPS64N32":   {libseccomp.ArchMIPS64N32, 0, 0},
	"SCMP_ARCH_MIPSEL":      {libseccomp.ArchMIPSEL, 0, 0},
	"SCMP_ARCH_MIPSEL64":    {libseccomp.ArchMIPSEL64, 0, 0},
	"SCMP_ARCH_MIPSEL64N32": {libseccomp.ArchMIPSEL64N32, 0, 0},
	"SCMP_ARCH_PPC":         {libseccomp.ArchPPC, 0, 0},
	"SCMP_ARCH_PPC64":       {libseccomp.ArchPPC64, 0, 0},
	"SCMP_ARCH_PPC64LE":     {libseccomp.ArchPPC64LE, 0, 0},
	"SCMP_ARCH_S390":        {libseccomp.ArchS390, 0, 0},
	"SCMP_ARCH_S390X":       {libseccomp.ArchS390X, 0, 0},
	"SCMP_ARCH_PARISC":      {libseccomp.ArchPARISC, 0, 0},
	"SCMP_ARCH_PARISC64":    {libseccomp.ArchPARISC64, 0, 0},
	"SCMP_ARCH_RISCV64":     {libseccomp.ArchRISCV64, 0, 0},
	"SCMP_ARCH_LOONGARCH64": {libseccomp.ArchLOONGARCH64, 0, 0},
	"SCMP_ARCH_M68K":        {libseccomp.ArchM68K, 0, 0},
	"SCMP_ARCH_SH":          {libseccomp.ArchSH, 0, 0},
	"SCMP_ARCH_SHEB":        {libseccomp.ArchSHEB, 0, 0},
}

func archName(a libseccomp.ScmpArch) string {
	for name, info := range arches {
		if info.scmp == a {
			return name
		}
	}
	return a.String()
}

// hostArches lists, per native architecture, the ABIs a process on this
// kernel can use. Sections of a filter for any other architecture are dead
// code (seccomp_data.arch can never match), so Compile leaves them out; a
// profile may therefore list SCMP_ARCH_X86_64 and SCMP_ARCH_AARCH64 and work
// on both.
var hostArches = map[libseccomp.ScmpArch][]libseccomp.ScmpArch{
	libseccomp.ArchAMD64: {libseccomp.ArchAMD64, libseccomp.ArchX86, libseccomp.ArchX32},
	libseccomp.ArchARM64: {libseccomp.ArchARM64, libseccomp.ArchARM},
}

// goArches are the architecture names Docker uses in includes/excludes
// "arches" (Go's GOARCH values plus Docker's "x32" and "x86").
var goArches = map[string]bool{
	"386": true, "amd64": true, "x32": true, "x86": true, "arm": true, "arm64": true,
	"mips": true, "mipsle": true, "mips64": true, "mips64le": true, "mips64n32": true,
	"mips64len32": true, "ppc": true, "ppc64": true, "ppc64le": true, "riscv64": true,
	"s390": true, "s390x": true, "loong64": true,
}

// capNames are the capabilities of linux/capability.h.
var capNames = map[string]bool{
	"CAP_CHOWN": true, "CAP_DAC_OVERRIDE": true, "CAP_DAC_READ_SEARCH": true,
	"CAP_FOWNER": true, "CAP_FSETID": true, "CAP_KILL": true, "CAP_SETGID": true,
	"CAP_SETUID": true, "CAP_SETPCAP": true, "CAP_LINUX_IMMUTABLE": true,
	"CAP_NET_BIND_SERVICE": true, "CAP_NET_BROADCAST": true, "CAP_NET_ADMIN": true,
	"CAP_NET_RAW": true, "CAP_IPC_LOCK": true, "CAP_IPC_OWNER": true,
	"CAP_SYS_MODULE": true, "CAP_SYS_RAWIO": true, "CAP_SYS_CHROOT": true,
	"CAP_SYS_PTRACE": true, "CAP_SYS_PACCT": true, "CAP_SYS_ADMIN": true,
	"CAP_SYS_BOOT": true, "CAP_SYS_NICE": true, "CAP_SYS_RESOURCE": true,
	"CAP_SYS_TIME": true, "CAP_SYS_TTY_CONFIG": true, "CAP_MKNOD": true,
	"CAP_LEASE": true, "CAP_AUDIT_WRITE": true, "CAP_AUDIT_CONTROL": true,
	"CAP_SETFCAP": true, "CAP_MAC_OVERRIDE": true, "CAP_MAC_ADMIN": true,
	"CAP_SYSLOG": true, "CAP_WAKE_ALARM": true, "CAP_BLOCK_SUSPEND": true,
	"CAP_AUDIT_READ": true, "CAP_PERFMON": true, "CAP_BPF": true,
	"CAP_CHECKPOINT_RESTORE": true,
}

// newerSyscall is a syscall that the linked libseccomp may not know yet.
// libseccomp can only name syscalls in its own table (2.5.4, Debian 12, stops
// at futex_requeue, Linux 6.7), but profiles name newer ones: Docker's
// default allows statmount, mseal, getxattrat... Without this table such a
// profile would have to be rejected as naming an "unknown syscall".
//
// Numbers are the kernel's: from Linux 5.1 on, new syscalls get the same
// number on every architecture nsbox filters (scripts/syscall.tbl,
// arch/x86/entry/syscalls/syscall_{32,64}.tbl); x32 adds bit 30.
type newerSyscall struct {
	unified int // number on x86_64, i386, x32 (|bit 30), arm and aarch64; -1 if none
	x86_64  int // x86_64-only number (e.g. uretprobe); -1 if none
}

var newerSyscalls = map[string]newerSyscall{
	"statmount":         {457, -1}, // 6.8
	"listmount":         {458, -1}, // 6.8
	"lsm_get_self_attr": {459, -1}, // 6.8
	"lsm_set_self_attr": {460, -1}, // 6.8
	"lsm_list_modules":  {461, -1}, // 6.8
	"mseal":             {462, -1}, // 6.10
	"setxattrat":        {463, -1}, // 6.13
	"getxattrat":        {464, -1}, // 6.13
	"listxattrat":       {465, -1}, // 6.13
	"removexattrat":     {466, -1}, // 6.13
	"open_tree_attr":    {467, -1}, // 6.15
	"file_getattr":      {468, -1}, // 6.17
	"file_setattr":      {469, -1}, // 6.17
	"uretprobe":         {-1, 335}, // 6.11, x86_64 only
	"riscv_hwprobe":     {-1, -1},  // 6.4, riscv only
}

// newerNr is the number of a newerSyscalls entry on arch, if it has one.
func newerNr(name string, a libseccomp.ScmpArch) (int32, bool) {
	n, ok := newerSyscalls[name]
	if !ok {
		return 0, false
	}
	switch {
	case a == libseccomp.ArchAMD64 && n.x86_64 >= 0:
		return int32(n.x86_64), true
	case n.unified < 0:
		return 0, false
	case a == libseccomp.ArchX32:
		return int32(n.unified | x32SyscallBit), true
	case a == libseccomp.ArchAMD64 || a == libseccomp.ArchX86 ||
		a == libseccomp.ArchARM || a == libseccomp.ArchARM64:
		return int32(n.unified), true
	}
	return 0, false
}

// knownSyscall reports whether name is a Linux syscall on some architecture,
// according to libseccomp or the table above. Strict parsing rejects anything
// else, so that a typo ("mout") is an error rather than a silent no-op.
func knownSyscall(name string) bool {
	if _, err := libseccomp.GetSyscallFromName(name); err == nil {
		return true
	}
	_, ok := newerSyscalls[name]
	return ok
}

// syscallNr resolves name on arch: libseccomp first, then the table.
// Negative libseccomp numbers are its "pseudo syscalls", names that do not
// exist on that architecture.
func syscallNr(name string, a libseccomp.ScmpArch) (nr int32, fromTable, ok bool) {
	if n, err := libseccomp.GetSyscallFromNameByArch(name, a); err == nil {
		if int32(n) < 0 {
			return 0, false, false
		}
		return int32(n), false, true
	}
	if n, ok := newerNr(name, a); ok {
		return n, true, true
	}
	return 0, false, false
}

var (
	libMaxMu sync.Mutex
	libMax   = map[libseccomp.ScmpArch]uint32{}
)

// libseccompMaxNr is the highest syscall number the linked libseccomp can
// name on arch. Syscalls above it are newer than libseccomp's table.
func libseccompMaxNr(a libseccomp.ScmpArch, base uint32) uint32 {
	libMaxMu.Lock()
	defer libMaxMu.Unlock()
	if m, ok := libMax[a]; ok {
		return m
	}
	var max uint32
	// x32's legacy range ends at 547; the unified range is far below 1024
	// on every architecture nsbox generates a stub for.
	for i := uint32(0); i < 1024; i++ {
		if _, err := libseccomp.ScmpSyscall(base + i).GetNameByArch(a); err == nil {
			max = base + i
		}
	}
	libMax[a] = max
	return max
}
