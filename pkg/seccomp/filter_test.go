package seccomp

import (
	"bytes"
	"errors"
	"io/fs"
	"math/rand"
	"runtime"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/profiles"
	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

// Semantic tests of compiled filters, evaluated with the BPF interpreter in
// bpfvm_test.go. install_test.go runs the same filters in the kernel.

func compileDefault(t testing.TB, o Options) *Filter {
	t.Helper()
	p, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	f, err := Compile(p, o)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func verdict(t testing.TB, f *Filter, name string, args ...uint64) uint32 {
	t.Helper()
	nr, ok := nativeNr(t, name)
	if !ok {
		t.Fatalf("%s does not exist here", name)
	}
	d := seccompData{nr: nr, arch: nativeAudit(t)}
	copy(d.args[:], args)
	return runBPF(t, f.prog, d)
}

func denied(v uint32) bool {
	return v == retKillProcess || v&unix.SECCOMP_RET_ACTION_FULL == unix.SECCOMP_RET_ERRNO
}

// argPatterns are argument vectors a denied call must stay denied with.
var argPatterns = [][6]uint64{
	{},
	{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)},
	{0xffffffff00000000, 0xffffffff00000000, 1, 2, 3, 4},
	{1, 0x5412, 0x10000000, 0x20000, 0, 0},
}

func shippedProfiles(t testing.TB) map[string]*Profile {
	t.Helper()
	entries, err := fs.Glob(profiles.Seccomp, "seccomp/*.json")
	if err != nil || len(entries) == 0 {
		t.Fatalf("no shipped profiles: %v", err)
	}
	out := map[string]*Profile{}
	for _, e := range entries {
		data, err := profiles.Seccomp.ReadFile(e)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Parse(data, e)
		if err != nil {
			t.Fatal(err)
		}
		out[e] = p
	}
	return out
}

func TestShippedProfilesDenyDangerousSetBPF(t *testing.T) {
	for name, p := range shippedProfiles(t) {
		for _, o := range []Options{{}, {AllowUserns: true}} {
			f, err := Compile(p, o)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			for _, sc := range DangerousSet() {
				nr, ok := nativeNr(t, sc)
				if !ok {
					continue // not a syscall on this architecture
				}
				for _, args := range argPatterns {
					v := runBPF(t, f.prog, seccompData{nr: nr, arch: nativeAudit(t), args: args})
					if !denied(v) {
						t.Errorf("%s %+v: %s%v -> %s", name, o, sc, args, verdictString(v))
					}
				}
			}
		}
	}
}

func TestDefaultBenignAllowed(t *testing.T) {
	f := compileDefault(t, Options{})
	const goThread = unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_SYSVSEM | unix.CLONE_THREAD
	for _, c := range []struct {
		name string
		args []uint64
	}{
		{"read", nil}, {"write", nil}, {"getpid", nil}, {"openat", nil}, {"execve", nil},
		{"mmap", nil}, {"futex", nil}, {"seccomp", nil}, {"prctl", nil}, {"landlock_create_ruleset", nil},
		{"clone", []uint64{goThread}},                                                // Go and glibc threads
		{"clone", []uint64{uint64(unix.SIGCHLD)}},                                    // fork
		{"clone", []uint64{unix.CLONE_VM | unix.CLONE_VFORK | uint64(unix.SIGCHLD)}}, // posix_spawn
		{"unshare", []uint64{unix.CLONE_FILES | unix.CLONE_FS}},
		{"ioctl", []uint64{0, unix.TCGETS}},
		{"ioctl", []uint64{0, unix.TIOCSTI + 1}},
		{"personality", []uint64{0xffffffff}},
		{"personality", []uint64{0}},
		{"socket", []uint64{unix.AF_INET, unix.SOCK_STREAM}},
	} {
		if v := verdict(t, f, c.name, c.args...); v != retAllow {
			t.Errorf("%s%#x -> %s, want ALLOW", c.name, c.args, verdictString(v))
		}
	}
}

var newFlags = map[string]uint64{
	"CLONE_NEWNS": unix.CLONE_NEWNS, "CLONE_NEWCGROUP": unix.CLONE_NEWCGROUP, "CLONE_NEWUTS": unix.CLONE_NEWUTS,
	"CLONE_NEWIPC": unix.CLONE_NEWIPC, "CLONE_NEWUSER": unix.CLONE_NEWUSER, "CLONE_NEWPID": unix.CLONE_NEWPID,
	"CLONE_NEWNET": unix.CLONE_NEWNET, "CLONE_NEWTIME": unix.CLONE_NEWTIME,
}

func TestDefaultNamespaces(t *testing.T) {
	def := compileDefault(t, Options{})
	userns := compileDefault(t, Options{AllowUserns: true})
	for fname, flag := range newFlags {
		for _, extra := range []uint64{0, unix.CLONE_THREAD | unix.CLONE_VM, uint64(unix.SIGCHLD), 0xffffffff00000000} {
			args := flag | extra
			// unshare: every CLONE_NEW* flag, CLONE_NEWUSER only with AllowUserns.
			if v := verdict(t, def, "unshare", args); v != retEPERM {
				t.Errorf("default: unshare(%s|%#x) -> %s", fname, extra, verdictString(v))
			}
			want := uint32(retEPERM)
			if flag == unix.CLONE_NEWUSER {
				want = retAllow
			}
			if v := verdict(t, userns, "unshare", args); v != want {
				t.Errorf("AllowUserns: unshare(%s|%#x) -> %s", fname, extra, verdictString(v))
			}
			// Both together: the other flag's rule still denies.
			if flag != unix.CLONE_NEWUSER {
				if v := verdict(t, userns, "unshare", args|unix.CLONE_NEWUSER); v != retEPERM {
					t.Errorf("AllowUserns: unshare(NEWUSER|%s) -> %s", fname, verdictString(v))
				}
			}
			if flag == unix.CLONE_NEWTIME {
				continue // for clone() 0x80 is part of the exit signal
			}
			if v := verdict(t, def, "clone", args); v != retEPERM {
				t.Errorf("default: clone(%s|%#x) -> %s", fname, extra, verdictString(v))
			}
			if v := verdict(t, userns, "clone", args); v != want {
				t.Errorf("AllowUserns: clone(%s|%#x) -> %s", fname, extra, verdictString(v))
			}
		}
	}
	for _, f := range []*Filter{def, userns} {
		if v := verdict(t, f, "clone3"); v != unix.SECCOMP_RET_ERRNO|uint32(unix.ENOSYS) {
			t.Errorf("clone3 -> %s, want ERRNO(ENOSYS)", verdictString(v))
		}
		if v := verdict(t, f, "setns", 0, 0); v != retEPERM {
			t.Errorf("setns -> %s", verdictString(v))
		}
	}
}

// AllowUserns must change the verdict of nothing but clone/unshare calls
// whose flags include CLONE_NEWUSER and no other CLONE_NEW* flag.
func TestAllowUsernsChangesNothingElse(t *testing.T) {
	def := compileDefault(t, Options{})
	userns := compileDefault(t, Options{AllowUserns: true})
	rng := rand.New(rand.NewSource(1))
	audit := nativeAudit(t)
	for nr := int32(0); nr < 1024; nr++ {
		for i := 0; i < 8; i++ {
			d := seccompData{nr: nr, arch: audit}
			for k := range d.args {
				d.args[k] = rng.Uint64()
			}
			if i == 0 {
				d.args = [6]uint64{}
			}
			a, b := runBPF(t, def.prog, d), runBPF(t, userns.prog, d)
			if a != b {
				name, _ := libseccomp.ScmpSyscall(nr).GetName()
				otherNew := d.args[0] & (unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS |
					unix.CLONE_NEWIPC | unix.CLONE_NEWPID | unix.CLONE_NEWNET)
				if name == "unshare" {
					otherNew |= d.args[0] & unix.CLONE_NEWTIME
				}
				if (name != "clone" && name != "unshare") || d.args[0]&unix.CLONE_NEWUSER == 0 || otherNew != 0 {
					t.Fatalf("AllowUserns changed %s(%#x): %s -> %s", name, d.args, verdictString(a), verdictString(b))
				}
			}
		}
	}
}

func TestDefaultIoctl(t *testing.T) {
	f := compileDefault(t, Options{})
	for _, req := range []uint64{unix.TIOCSTI, unix.TIOCLINUX, unix.TIOCSETD} {
		// The kernel reads the request as an unsigned int: high bits must
		// not get a request past the filter (CVE-2019-10063 style).
		for _, high := range []uint64{0, 0xffffffff00000000, 0x100000000, 0x8000000000000000} {
			if v := verdict(t, f, "ioctl", 0, req|high); v != retEPERM {
				t.Errorf("ioctl(%#x) -> %s", req|high, verdictString(v))
			}
		}
	}
}

func TestDefaultPersonality(t *testing.T) {
	f := compileDefault(t, Options{})
	allowed := func(v uint64) bool {
		switch uint32(v) { // the kernel takes an unsigned int
		case 0, 8, 0x20000, 0x20008, 0xffffffff:
			return true
		}
		return false
	}
	check := func(arg uint64) {
		v := verdict(t, f, "personality", arg)
		if allowed(arg) && v != retAllow || !allowed(arg) && v != retEPERM {
			t.Errorf("personality(%#x) -> %s", arg, verdictString(v))
		}
	}
	for _, v := range []uint64{0, 8, 0x20000, 0x20008, 0xffffffff, 0x0040000, 0x0400000, 0x0100000,
		0x0200000, 0x0800000, 0x8000000, 0x100400000, 0xffffffff00000000, 0xffffffff00000008,
		0xfffffffe, 0x7fffffff, 1, 9, 0x20009, 0x20001} {
		check(v)
	}
	for b := 0; b < 64; b++ {
		check(1 << b)
		check(1<<b | 8)
		check(^uint64(0) &^ (1 << b))
	}
	rng := rand.New(rand.NewSource(2))
	for i := 0; i < 20000; i++ {
		check(rng.Uint64())
		check(uint64(rng.Uint32()) & 0x7fffffff)
	}
}

func TestABIs(t *testing.T) {
	f := compileDefault(t, Options{})
	audit := nativeAudit(t)
	getpid, _ := nativeNr(t, "getpid")
	// -1 is what a tracer writes to skip a call; libseccomp passes it on and
	// the kernel returns ENOSYS.
	if v := runBPF(t, f.prog, seccompData{nr: -1, arch: audit}); v != retAllow {
		t.Errorf("nr -1 -> %s", verdictString(v))
	}
	// Syscalls newer than anything the filter can name: ENOSYS.
	for nr := int32(470); nr < 2048; nr++ {
		if v := runBPF(t, f.prog, seccompData{nr: nr, arch: audit}); v != unix.SECCOMP_RET_ERRNO|uint32(unix.ENOSYS) {
			t.Fatalf("nr %d -> %s, want ERRNO(ENOSYS)", nr, verdictString(v))
		}
	}
	// open_tree_attr (467) is unknown to libseccomp 2.5.4; denied by number.
	if v := runBPF(t, f.prog, seccompData{nr: 467, arch: audit}); v != retEPERM {
		t.Errorf("open_tree_attr -> %s", verdictString(v))
	}
	// Foreign and compat ABIs: killed, whatever the number.
	others := []uint32{auditArchI386, auditArchARM, auditArchX86_64, auditArchAARCH64, 0, 0xffffffff}
	for _, a := range others {
		if a == audit {
			continue
		}
		for _, nr := range []int32{0, getpid, 39, 1000} {
			if v := runBPF(t, f.prog, seccompData{nr: nr, arch: a}); v != retKillProcess {
				t.Errorf("arch %#x nr %d -> %s, want KILL_PROCESS", a, nr, verdictString(v))
			}
		}
	}
	if audit == auditArchX86_64 {
		for _, nr := range []int32{getpid | x32SyscallBit, x32SyscallBit, 512 | x32SyscallBit, 0x7ffffffe} {
			if v := runBPF(t, f.prog, seccompData{nr: nr, arch: audit}); v != retKillProcess {
				t.Errorf("x32 nr %#x -> %s, want KILL_PROCESS", nr, verdictString(v))
			}
		}
	}
}

// libseccomp's binary-tree layout must give the same verdicts as its
// linear one, for every syscall number and a spread of arguments.
func TestOptimizedLayoutSameVerdicts(t *testing.T) {
	docker, err := LoadFile("testdata/docker-default.json")
	if err != nil {
		t.Fatal(err)
	}
	def, _ := Default()
	for _, p := range []*Profile{def, docker} {
		tree, err := Compile(p, Options{})
		if err != nil {
			t.Fatal(err)
		}
		optimizeLevel = 1
		linear, err := Compile(p, Options{})
		optimizeLevel = 2
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(tree.Bytes(), linear.Bytes()) {
			t.Fatalf("%s: layouts are identical; the test proves nothing", p.Source)
		}
		rng := rand.New(rand.NewSource(3))
		for _, audit := range []uint32{auditArchX86_64, auditArchI386, auditArchAARCH64, auditArchARM} {
			for _, base := range []int32{0, x32SyscallBit} {
				for nr := base; nr < base+600; nr++ {
					for i := 0; i < 6; i++ {
						d := seccompData{nr: nr, arch: audit}
						for k := range d.args {
							switch i {
							case 1:
								d.args[k] = ^uint64(0)
							case 2, 3:
								d.args[k] = uint64(rng.Intn(64))
							default:
								d.args[k] = rng.Uint64() >> uint(rng.Intn(64))
							}
						}
						if a, b := runBPF(t, tree.prog, d), runBPF(t, linear.prog, d); a != b {
							t.Fatalf("%s: arch %#x nr %d args %#x: tree %s, linear %s", p.Source, audit, nr, d.args,
								verdictString(a), verdictString(b))
						}
					}
				}
			}
		}
	}
}

func TestDockerProfile(t *testing.T) {
	p, err := LoadFile("testdata/docker-default.json")
	if err != nil {
		t.Fatal(err)
	}
	f, err := Compile(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	enosys := unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	for _, c := range []struct {
		name string
		args []uint64
		want uint32
	}{
		{"read", nil, retAllow},
		{"ptrace", nil, retAllow}, // includes minKernel 4.8
		{"bpf", nil, retEPERM},    // includes caps: none held
		{"mount", nil, retEPERM},  // CAP_SYS_ADMIN
		{"clone3", nil, enosys},   // excludes CAP_SYS_ADMIN: ERRNO(38)
		{"clone", []uint64{uint64(unix.SIGCHLD)}, retAllow},
		{"clone", []uint64{unix.CLONE_NEWUSER}, retEPERM},
		{"socket", []uint64{unix.AF_INET}, retAllow},
		{"socket", []uint64{unix.AF_VSOCK}, retEPERM},
		{"personality", []uint64{0x20008}, retAllow},
		{"personality", []uint64{0x0400000}, retEPERM},
		{"keyctl", nil, retEPERM},
	} {
		if v := verdict(t, f, c.name, c.args...); v != c.want {
			t.Errorf("docker: %s%#x -> %s, want %s", c.name, c.args, verdictString(v), verdictString(c.want))
		}
	}
	if runtime.GOARCH == "amd64" {
		// archMap: x86_64 with x86 and x32 sub-architectures.
		read32, _ := libseccomp.GetSyscallFromNameByArch("read", libseccomp.ArchX86)
		if v := runBPF(t, f.prog, seccompData{nr: int32(read32), arch: auditArchI386}); v != retAllow {
			t.Errorf("i386 read -> %s", verdictString(v))
		}
		if v := runBPF(t, f.prog, seccompData{nr: 0 | x32SyscallBit, arch: auditArchX86_64}); v != retAllow {
			t.Errorf("x32 read -> %s", verdictString(v))
		}
		if v := runBPF(t, f.prog, seccompData{nr: 0, arch: auditArchAARCH64}); v != retKillProcess {
			t.Errorf("aarch64 on x86_64 -> %s", verdictString(v))
		}
		// Newer than the profile on a multi-ABI filter: ENOSYS, not EPERM,
		// so callers fall back.
		for _, nr := range []int32{457, 462, 467, 1000} {
			if v := runBPF(t, f.prog, seccompData{nr: nr, arch: auditArchX86_64}); v != enosys {
				t.Errorf("x86_64 nr %d -> %s, want ENOSYS", nr, verdictString(v))
			}
		}
		// Below the profile's highest syscall and not listed: EPERM.
		kexec, _ := nativeNr(t, "kexec_file_load")
		if v := runBPF(t, f.prog, seccompData{nr: kexec, arch: auditArchX86_64}); v != retEPERM {
			t.Errorf("kexec_file_load -> %s", verdictString(v))
		}
	}
	// AllowUserns touches only rules that deny exactly CLONE_NEWUSER; Docker
	// has none.
	f3, err := Compile(p, Options{AllowUserns: true})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(f.Bytes(), f3.Bytes()) {
		t.Error("AllowUserns changed Docker's profile")
	}
	// minKernel is evaluated against uname: on an old kernel ptrace stays denied.
	old := kernelRelease
	kernelRelease = func() (string, error) { return "4.4.0-210-generic", nil }
	defer func() { kernelRelease = old }()
	f2, err := Compile(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if v := verdict(t, f2, "ptrace"); v != retEPERM {
		t.Errorf("docker on 4.4: ptrace -> %s", verdictString(v))
	}
}

func TestNewerSyscallsOnMultiABIDenylist(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("x86_64 ABIs")
	}
	// A denylist naming a syscall libseccomp cannot name is fine on a
	// native-only filter (denied by number) and on a multi-ABI one when
	// the ENOSYS stub covers it; uretprobe (335) is below the ceiling.
	ok := `{"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86"],
		"syscalls": [{"names": ["open_tree_attr", "mseal"], "action": "SCMP_ACT_ERRNO"}]}`
	p, err := Parse([]byte(ok), "ok.json")
	if err != nil {
		t.Fatal(err)
	}
	f, err := Compile(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []uint32{auditArchX86_64, auditArchI386} {
		if v := runBPF(t, f.prog, seccompData{nr: 467, arch: a}); !denied(v) {
			t.Errorf("arch %#x open_tree_attr -> %s", a, verdictString(v))
		}
	}
	if _, err := libseccomp.GetSyscallFromName("uretprobe"); err == nil {
		t.Skip("this libseccomp knows uretprobe")
	}
	bad := `{"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86"],
		"syscalls": [{"names": ["uretprobe"], "action": "SCMP_ACT_ERRNO"}]}`
	p, err = Parse([]byte(bad), "bad.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Compile(p, Options{}); err == nil || !strings.Contains(err.Error(), `cannot deny "uretprobe"`) {
		t.Fatalf("got %v", err)
	}
	// Native only: denied by number.
	p.Architectures = []string{"SCMP_ARCH_X86_64"}
	f, err = Compile(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if v := runBPF(t, f.prog, seccompData{nr: 335, arch: auditArchX86_64}); v != retEPERM {
		t.Errorf("uretprobe -> %s", verdictString(v))
	}
}

func TestCompileDeterministic(t *testing.T) {
	a := compileDefault(t, Options{}).Bytes()
	for i := 0; i < 5; i++ {
		if b := compileDefault(t, Options{}).Bytes(); !bytes.Equal(a, b) {
			t.Fatal("two compilations of the same profile differ")
		}
	}
}

func TestFilterBytesRoundTrip(t *testing.T) {
	f := compileDefault(t, Options{})
	b := f.Bytes()
	g, err := FilterFromBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(g.Bytes(), b) || g.Len() != f.Len() {
		t.Fatal("round trip changed the filter")
	}
	mutate := func(fn func(b []byte) []byte) []byte {
		c := append([]byte(nil), b...)
		return fn(c)
	}
	insn := func(i int) int { return headerLen + 8*i }
	last := f.Len() - 1
	bad := map[string][]byte{
		"empty":             nil,
		"short":             b[:10],
		"bad magic":         mutate(func(c []byte) []byte { c[0] = 'X'; return c }),
		"unknown flags":     mutate(func(c []byte) []byte { c[8] = 0x4; return c }), // SPEC_ALLOW
		"truncated":         b[:len(b)-1],
		"extra byte":        append(append([]byte(nil), b...), 0),
		"count mismatch":    mutate(func(c []byte) []byte { c[12]++; return c }),
		"zero count":        mutate(func(c []byte) []byte { c[12], c[13] = 0, 0; return c[:headerLen] }),
		"bad opcode":        mutate(func(c []byte) []byte { c[insn(0)] = 0xff; c[insn(0)+1] = 0xff; return c }),
		"load out of range": mutate(func(c []byte) []byte { c[insn(0)+4] = 64; return c }),
		"jump out of range": mutate(func(c []byte) []byte { copy(c[insn(2)+4:], []byte{0xff, 0xff, 0, 0}); return c }),
		"cond jump past end": mutate(func(c []byte) []byte {
			for i := last; i >= 0; i-- { // the last conditional jump, aimed one past the end
				if code := f.prog[i].Code; code&0x07 == unix.BPF_JMP && code&0xf0 != unix.BPF_JA && last-i <= 255 {
					c[insn(i)+2] = uint8(last - i)
					break
				}
			}
			return c
		}),
		"last not ret": mutate(func(c []byte) []byte { c[insn(last)], c[insn(last)+1] = 0x00, 0x00; return c }),
	}
	for name, data := range bad {
		if _, err := FilterFromBytes(data); !errors.Is(err, ErrInvalidFilter) {
			t.Errorf("%s: got %v", name, err)
		}
	}
}

func TestVersion(t *testing.T) {
	v := Version()
	if strings.Count(v, ".") != 2 || strings.HasPrefix(v, "0.") {
		t.Fatalf("Version() = %q", v)
	}
	ds := DangerousSet()
	ds[0] = "mutated"
	if DangerousSet()[0] == "mutated" {
		t.Fatal("DangerousSet shares its slice")
	}
}

func TestCompileConcurrent(t *testing.T) {
	want := compileDefault(t, Options{}).Bytes()
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		go func() {
			p, err := Default()
			if err == nil {
				var f *Filter
				if f, err = Compile(p, Options{}); err == nil && !bytes.Equal(f.Bytes(), want) {
					err = errors.New("different output")
				}
			}
			errs <- err
		}()
	}
	for i := 0; i < 8; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestTraceIsENOSYS: SCMP_ACT_TRACE compiles to what the kernel does with
// a traced call when no tracer is attached, ERRNO(ENOSYS), so that a
// profile's traced call also fails under the socket gate's filter, whose
// notification outranks a trace result (TestProfileTraceOnSetgroupsHolds
// in test/integration). SCMP_ACT_LOG stays a logged allow.
func TestTraceIsENOSYS(t *testing.T) {
	p, err := Parse([]byte(`{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [
		{"names": ["setgroups"], "action": "SCMP_ACT_TRACE"},
		{"names": ["connect"], "action": "SCMP_ACT_TRACE", "errnoRet": 7},
		{"names": ["getpid"], "action": "SCMP_ACT_LOG"}]}`), "trace.json")
	if err != nil {
		t.Fatal(err)
	}
	f, err := Compile(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	enosys := unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	for name, want := range map[string]uint32{"setgroups": enosys, "connect": enosys, "getpid": unix.SECCOMP_RET_LOG, "read": retAllow} {
		if v := verdict(t, f, name); v != want {
			t.Errorf("%s -> %s, want %s", name, verdictString(v), verdictString(want))
		}
	}
}
