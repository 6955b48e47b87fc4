package seccomp

import (
	"testing"

	"golang.org/x/sys/unix"
)

// The set-id filter gives every set-id case the default profile's verdict,
// on every ABI this kernel runs, refuses nothing else and kills no ABI
// (the profile beside it decides those).
func TestSetIDFilter(t *testing.T) {
	f, err := SetIDFilter()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range setIDCases() {
		if _, ok := nativeNr(t, c.name); !ok {
			continue
		}
		want := uint32(retAllow)
		if c.refuse {
			want = retEPERM
		}
		if v := verdict(t, f, c.name, c.args...); v != want {
			t.Errorf("%s%#o -> %s, want %s", c.name, c.args, verdictString(v), verdictString(want))
		}
	}
	if v := verdict(t, f, "openat2", 0, 0, 0, 0); v != unix.SECCOMP_RET_ERRNO|uint32(unix.ENOSYS) {
		t.Errorf("openat2 -> %s, want ERRNO(ENOSYS)", verdictString(v))
	}
	for _, name := range []string{"getpid", "ptrace", "unshare", "mount", "setxattr", "fchown"} {
		if v := verdict(t, f, name, ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)); v != retAllow {
			t.Errorf("%s -> %s: the set-id filter leaves every other call to the profile", name, verdictString(v))
		}
	}
	if nativeAudit(t) != auditArchX86_64 {
		return
	}
	// Docker's profile lets the i386 and x32 ABIs in (archMap): their own
	// chmod numbers are refused the bits too. chmod is 15 on i386, 90 on
	// x32 (the x86_64 number with __X32_SYSCALL_BIT); fchmodat 306 on i386.
	for _, c := range []struct {
		arch uint32
		nr   int32
		args [6]uint64
		want uint32
	}{
		{auditArchI386, 15, [6]uint64{0, unix.S_ISUID | 0o755}, retEPERM},
		{auditArchI386, 15, [6]uint64{0, 0o755}, retAllow},
		{auditArchI386, 306, [6]uint64{0xffffff9c, 0, unix.S_ISGID | 0o755}, retEPERM},
		{auditArchI386, 20, [6]uint64{}, retAllow}, // getpid: not killed
		{auditArchX86_64, 90 | x32SyscallBit, [6]uint64{0, unix.S_ISUID | 0o755}, retEPERM},
		{auditArchX86_64, 90 | x32SyscallBit, [6]uint64{0, 0o644}, retAllow},
		{auditArchX86_64, 39 | x32SyscallBit, [6]uint64{}, retAllow},
	} {
		if v := runBPF(t, f.prog, seccompData{nr: c.nr, arch: c.arch, args: c.args}); v != c.want {
			t.Errorf("arch %#x nr %#x %#o -> %s, want %s", c.arch, c.nr, c.args[:3], verdictString(v), verdictString(c.want))
		}
	}
}

// Every rule the filter takes tests a set-id bit; the rules that test
// other bits of a mode or flags argument (personality, O_CREAT alone) are
// left to the profile.
func TestSetIDRulesSelected(t *testing.T) {
	p, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, r := range p.Syscalls {
		if testsSetID(r) {
			n, _ := ruleNames(&r, "")
			for _, x := range n {
				names[x] = true
			}
		}
	}
	for _, want := range []string{"chmod", "fchmod", "fchmodat", "fchmodat2", "mkdir", "mkdirat", "mknod", "mknodat", "creat", "open", "openat"} {
		if !names[want] {
			t.Errorf("no set-id rule taken for %s", want)
		}
	}
	for _, not := range []string{"personality", "clone", "unshare", "ioctl"} {
		if names[not] {
			t.Errorf("%s's rule taken as a set-id rule", not)
		}
	}
}
