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
	for _, name := range []string{"getpid", "ptrace", "unshare", "mount", "setxattr", "fchown", "openat2"} {
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

// The openat2 guard: ENOSYS for openat2 on every ABI, nothing else.
func TestOpenAt2Guard(t *testing.T) {
	f, err := OpenAt2Guard()
	if err != nil {
		t.Fatal(err)
	}
	enosys := unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	if v := verdict(t, f, "openat2", 0, 0, 0, 0); v != enosys {
		t.Errorf("openat2 -> %s, want ERRNO(ENOSYS)", verdictString(v))
	}
	for _, name := range []string{"openat", "getpid", "chmod"} {
		if _, ok := nativeNr(t, name); ok {
			if v := verdict(t, f, name, 0, 0, 0, 0); v != retAllow {
				t.Errorf("%s -> %s", name, verdictString(v))
			}
		}
	}
	if nativeAudit(t) == auditArchX86_64 {
		for _, c := range []struct {
			arch uint32
			nr   int32
		}{{auditArchI386, 437}, {auditArchX86_64, 437 | x32SyscallBit}} {
			if v := runBPF(t, f.prog, seccompData{nr: c.nr, arch: c.arch}); v != enosys {
				t.Errorf("arch %#x openat2 (%#x) -> %s, want ERRNO(ENOSYS)", c.arch, c.nr, verdictString(v))
			}
		}
	}
}

// Whether a profile of the user's needs the guard, and when it cannot
// have one.
func TestNeedsOpenAt2Guard(t *testing.T) {
	for _, c := range []struct {
		name, profile string
		need, fail    bool
	}{
		{"allow all", `{"defaultAction":"SCMP_ACT_ALLOW"}`, true, false},
		{"deny all but the basics", `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[{"names":["read","write","exit_group"],"action":"SCMP_ACT_ALLOW"}]}`, false, false},
		{"openat2 already ENOSYS", `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["openat2"],"action":"SCMP_ACT_ERRNO","errnoRet":38},{"names":["seccomp"],"action":"SCMP_ACT_ERRNO"}]}`, false, false},
		{"openat2 open, seccomp denied", `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["seccomp"],"action":"SCMP_ACT_ERRNO"}]}`, false, true},
	} {
		need, err := NeedsOpenAt2Guard(compileJSON(t, c.profile))
		if need != c.need || (err != nil) != c.fail {
			t.Errorf("%s: need %v, err %v; want need %v, error %v", c.name, need, err, c.need, c.fail)
		}
	}
	docker := shippedProfiles(t)
	for name, p := range docker {
		f, err := Compile(p, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if need, err := NeedsOpenAt2Guard(f); err != nil || (name != "default.json" && !need) {
			t.Errorf("%s: need %v, err %v", name, need, err)
		}
	}
}

// CompileShared serves a second compile of the same profile from memory,
// as a copy, and compiles a changed profile again.
func TestCompileShared(t *testing.T) {
	p, err := Parse([]byte(`{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["ptrace"],"action":"SCMP_ACT_ERRNO"}]}`), "shared")
	if err != nil {
		t.Fatal(err)
	}
	a, err := CompileShared(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := CompileShared(p, Options{})
	if err != nil || &a.prog[0] == &b.prog[0] || string(a.Bytes()) != string(b.Bytes()) {
		t.Fatalf("second compile: %v, shared program %v", err, err == nil && &a.prog[0] == &b.prog[0])
	}
	p.Syscalls[0].Names = []string{"getpid"}
	c, err := CompileShared(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if v := verdict(t, c, "getpid"); v != retEPERM {
		t.Errorf("a profile changed after its first compile was served the old filter: getpid -> %s", verdictString(v))
	}
}
