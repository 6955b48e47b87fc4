package seccomp

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

// Options adjust a profile at compile time.
type Options struct {
	// AllowUserns lets sandboxed code create user namespaces: it drops, from
	// the rules for clone(2) and unshare(2), those whose only condition is
	// "flags has CLONE_NEWUSER set" (arg & 0x10000000 == 0x10000000), and
	// changes nothing else. Every other CLONE_NEW* flag stays denied, and so
	// do setns, mount and clone3, so a nested user namespace gets no new
	// mount, network or PID namespace to use its capabilities on.
	AllowUserns bool
}

// cloneNewUser is CLONE_NEWUSER (linux/sched.h).
const cloneNewUser = 0x10000000

// ErrCompile is wrapped by Compile errors that are not about the profile's
// content (libseccomp failures, an unreadable kernel version).
var ErrCompile = errors.New("seccomp: cannot compile filter")

// indexedRule is an effective rule with the index of the profile rule it
// came from, for error messages.
type indexedRule struct {
	i int
	r *Rule
}

// Compile turns a profile into a BPF program for this machine. It runs in
// the supervisor, before the sandbox starts, so that every problem with a
// profile is reported here and never when the worker installs the filter.
func Compile(p *Profile, o Options) (*Filter, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: no profile", ErrCompile)
	}
	return compile(p, o)
}

// CompileShared is Compile for a process that compiles the same profile
// more than once (nsbox run: the policy, for what the profile opens, then
// the sandbox): a second compile of the same profile and options is
// served from memory, as a copy. The key is the profile as data, so a
// profile changed after it was loaded is compiled again.
func CompileShared(p *Profile, o Options) (*Filter, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: no profile", ErrCompile)
	}
	key, keyed := compileKey(p, o)
	if keyed {
		if f := compiledCache.get(key); f != nil {
			return f, nil
		}
	}
	f, err := compile(p, o)
	if err == nil && keyed {
		compiledCache.put(key, f)
	}
	return f, err
}

// compileKey is the memo's key for p and o: a hash of p's JSON form (every
// field, so a profile changed after it was loaded gets another key).
func compileKey(p *Profile, o Options) ([32]byte, bool) {
	b, err := json.Marshal(struct {
		P *Profile
		S string
		O Options
	}{p, p.Source, o})
	if err != nil {
		return [32]byte{}, false
	}
	return sha256.Sum256(b), true
}

// compiledCache holds the filters compiled in this process, a few at most
// (the default profile is precompiled; others are the user's files).
var compiledCache = &filterMemo{m: map[[32]byte]*Filter{}}

type filterMemo struct {
	mu sync.Mutex
	m  map[[32]byte]*Filter
}

// get returns a copy: a caller's filter is its own.
func (c *filterMemo) get(k [32]byte) *Filter {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f := c.m[k]; f != nil {
		return &Filter{prog: slices.Clone(f.prog), flags: f.flags}
	}
	return nil
}

func (c *filterMemo) put(k [32]byte, f *Filter) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= 16 {
		clear(c.m)
	}
	c.m[k] = &Filter{prog: slices.Clone(f.prog), flags: f.flags}
}

// compile is Compile without the memo.
func compile(p *Profile, o Options) (*Filter, error) {
	if err := validate(p); err != nil {
		return nil, err
	}
	native, err := libseccomp.GetNativeArch()
	if err != nil {
		return nil, fmt.Errorf("%w: libseccomp does not know this architecture: %v", ErrCompile, err)
	}
	rules, err := effectiveRules(p, o)
	if err != nil {
		return nil, err
	}
	if err := checkConflicts(p, rules); err != nil {
		return nil, err
	}
	var flags uint32
	for i, fl := range p.Flags {
		switch fl {
		case flagLog:
			flags |= unix.SECCOMP_FILTER_FLAG_LOG
		case flagSpecAllow:
			// SPEC_ALLOW turns off the Speculative Store Bypass mitigation
			// (Spectre v4) that installing a filter may enable; sandboxed code
			// is exactly what that mitigation is for.
			return nil, p.fail(index("flags", i), "nsbox does not disable the Speculative Store Bypass mitigation")
		}
		// TSYNC: always set by Install. WAIT_KILLABLE_RECV only affects
		// SCMP_ACT_NOTIFY, which is refused below.
	}
	for _, ir := range rules {
		if ir.r.Action == ActNotify {
			return nil, p.fail(index("syscalls", ir.i)+".action", "SCMP_ACT_NOTIFY needs a seccomp agent; nsbox does not run one")
		}
	}
	targets := targetArches(p, native)
	def := ruleEffect(p.DefaultAction, p.DefaultErrnoRet)
	prog, added, err := buildLibseccomp(p, rules, def, targets, native)
	if err != nil {
		return nil, err
	}
	stub, err := buildStub(p, rules, def, targets, added)
	if err != nil {
		return nil, err
	}
	full := append(stub, prog...)
	if len(full) > unix.BPF_MAXINSNS {
		return nil, &ProfileError{Source: p.Source, Msg: fmt.Sprintf(
			"compiles to %d BPF instructions; the kernel accepts at most %d", len(full), unix.BPF_MAXINSNS)}
	}
	if err := validateProgram(full); err != nil {
		return nil, fmt.Errorf("%w: generated program is invalid: %v", ErrCompile, err)
	}
	return &Filter{prog: full, flags: flags}, nil
}

// effectiveRules evaluates Docker's includes/excludes for the sandbox and
// applies Options. Rule copies are returned; p is not modified.
func effectiveRules(p *Profile, o Options) ([]indexedRule, error) {
	var out []indexedRule
	for i := range p.Syscalls {
		r := p.Syscalls[i] // copy
		field := index("syscalls", i)
		ok, err := conditionHolds(p, r.Includes, true, field+".includes")
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if ok, err = conditionHolds(p, r.Excludes, false, field+".excludes"); err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if o.AllowUserns && deniesNewUser(&r) {
			// Structural match, not a name or comment match: only a rule
			// whose single condition is "CLONE_NEWUSER is set" is dropped,
			// and only for clone/unshare.
			names, _ := ruleNames(&r, field)
			var keep []string
			for _, n := range names {
				if n != "clone" && n != "unshare" {
					keep = append(keep, n)
				}
			}
			if len(keep) == 0 {
				continue
			}
			r.Name, r.Names = "", keep
		}
		out = append(out, indexedRule{i: i, r: &r})
	}
	return out, nil
}

func deniesNewUser(r *Rule) bool {
	if ruleEffect(r.Action, r.ErrnoRet).permissive() || len(r.Args) != 1 {
		return false
	}
	a := r.Args[0]
	return a.Op == OpMaskedEqual && a.Value == cloneNewUser && a.ValueTwo == cloneNewUser
}

// conditionHolds evaluates an includes (all must hold) or excludes (none may
// hold) condition. The sandbox holds no capabilities.
func conditionHolds(p *Profile, c *Condition, include bool, field string) (bool, error) {
	if c == nil {
		return true, nil
	}
	goarch := runtime.GOARCH
	if include {
		if len(c.Caps) > 0 {
			return false, nil // a required capability is never held
		}
		if len(c.Arches) > 0 && !contains(c.Arches, goarch) {
			return false, nil
		}
		if c.MinKernel != "" {
			ok, err := kernelAtLeast(c.MinKernel)
			if err != nil {
				return false, p.fail(field+".minKernel", "%v", err)
			}
			if !ok {
				return false, nil
			}
		}
		return true, nil
	}
	// excludes: caps listed here are not held, so they never exclude.
	if len(c.Arches) > 0 && contains(c.Arches, goarch) {
		return false, nil
	}
	if c.MinKernel != "" {
		ok, err := kernelAtLeast(c.MinKernel)
		if err != nil {
			return false, p.fail(field+".minKernel", "%v", err)
		}
		if ok {
			return false, nil
		}
	}
	return true, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// kernelRelease returns uname(2)'s release; a variable for tests.
var kernelRelease = func() (string, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "", err
	}
	return unix.ByteSliceToString(u.Release[:]), nil
}

func parseVersion(s string) (major, minor int, ok bool) {
	a, rest, found := strings.Cut(s, ".")
	if !found {
		return 0, 0, false
	}
	end := 0
	for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
		end++
	}
	var err1, err2 error
	major, err1 = strconv.Atoi(a)
	minor, err2 = strconv.Atoi(rest[:end])
	return major, minor, err1 == nil && err2 == nil
}

func kernelAtLeast(want string) (bool, error) {
	wMaj, wMin, ok := parseVersion(want)
	if !ok {
		return false, fmt.Errorf("%q is not a kernel version", want)
	}
	rel, err := kernelRelease()
	if err != nil {
		return false, fmt.Errorf("cannot read the kernel version: %v", err)
	}
	maj, min, ok := parseVersion(rel)
	if !ok {
		return false, fmt.Errorf("cannot parse the kernel version %q", rel)
	}
	return maj > wMaj || (maj == wMaj && min >= wMin), nil
}

// Warnings says what in p weakens a sandbox without being an error. A
// profile that allows by default and lets another ABI through as well
// (i386 on x86_64) denies only the names it lists, in each ABI; a call's
// other names there (i386 umount for umount2, socketcall for socket, ipc)
// reach the kernel. Killing the other ABIs, as nsbox's default profile
// does, leaves no such door.
func (p *Profile) Warnings() []string {
	if p.DefaultAction != ActAllow && p.DefaultAction != ActLog {
		return nil
	}
	native, err := libseccomp.GetNativeArch()
	if err != nil {
		return nil
	}
	var other []string
	for _, a := range targetArches(p, native) {
		if a != native {
			other = append(other, a.String())
		}
	}
	if len(other) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("%s allows by default and lets the %s ABI through too: a call it denies may reach the kernel by another name in that ABI (umount, socketcall, ipc); list only the native architecture, so that other ABIs are killed", p.Source, strings.Join(other, ", "))}
}

// targetArches lists the ABIs the filter covers: the profile's
// architectures (or Docker's archMap entry for the native architecture),
// always including the native one, restricted to ABIs that can occur on
// this kernel. Every other ABI gets the bad-architecture action.
func targetArches(p *Profile, native libseccomp.ScmpArch) []libseccomp.ScmpArch {
	var names []string
	names = append(names, p.Architectures...)
	for _, am := range p.ArchMap {
		if arches[am.Architecture].scmp == native {
			names = append(names, am.Architecture)
			names = append(names, am.SubArchitectures...)
		}
	}
	// The native ABI is always filtered (as runc does): without it the
	// sandbox's own calls would hit the bad-architecture action.
	out := []libseccomp.ScmpArch{native}
	possible, restrict := hostArches[native]
	for _, n := range names {
		a := arches[n].scmp
		if contains2(out, a) || (restrict && !contains2(possible, a)) {
			continue
		}
		out = append(out, a)
	}
	return out
}

func contains2(list []libseccomp.ScmpArch, a libseccomp.ScmpArch) bool {
	for _, x := range list {
		if x == a {
			return true
		}
	}
	return false
}

func scmpAction(e effect) libseccomp.ScmpAction {
	switch e.action {
	case ActKillThread:
		return libseccomp.ActKillThread
	case ActKillProcess:
		return libseccomp.ActKillProcess
	case ActTrap:
		return libseccomp.ActTrap
	case ActErrno:
		return libseccomp.ActErrno.SetReturnCode(int16(e.data))
	case ActTrace:
		// What the kernel does with a traced call when no tracer is
		// attached (seccomp(2)): fail it with ENOSYS. nsbox attaches
		// none, and a trace result is weaker than the socket gate's
		// notification (SECCOMP_RET_USER_NOTIF outranks
		// SECCOMP_RET_TRACE when filters disagree): the gate would
		// perform, or let run, a call the profile meant to fail (a
		// traced connect or setgroups; found by review). An errno
		// outranks the notification, so the call fails as it would
		// without the gate. A tracer inside the sandbox is not told of
		// these calls.
		return libseccomp.ActErrno.SetReturnCode(int16(unix.ENOSYS))
	case ActLog:
		// Allowed and logged by the kernel, except a call the socket
		// gate takes (its notification outranks SECCOMP_RET_LOG): that
		// one is decided and reported by the gate, not logged here.
		return libseccomp.ActLog
	case ActNotify:
		return libseccomp.ActNotify
	}
	return libseccomp.ActAllow
}

var scmpOps = map[Op]libseccomp.ScmpCompareOp{
	OpNotEqual: libseccomp.CompareNotEqual, OpLessThan: libseccomp.CompareLess,
	OpLessEqual: libseccomp.CompareLessOrEqual, OpEqualTo: libseccomp.CompareEqual,
	OpGreaterEqual: libseccomp.CompareGreaterEqual, OpGreaterThan: libseccomp.CompareGreater,
	OpMaskedEqual: libseccomp.CompareMaskedEqual,
}

// optimizeLevel is libseccomp's SCMP_FLTATR_CTL_OPTIMIZE; a variable so
// that tests can compare it with the linear layout (1).
var optimizeLevel = 2

// tableUse records a rule for a name libseccomp cannot name (newerSyscalls).
type tableUse struct {
	name  string
	field string
	eff   effect
	raw   bool // added to the filter by its number (native-only filter)
}

// buildLibseccomp builds the filter proper with libseccomp and exports it.
func buildLibseccomp(p *Profile, rules []indexedRule, def effect, targets []libseccomp.ScmpArch,
	native libseccomp.ScmpArch) ([]unix.SockFilter, []tableUse, error) {
	f, err := libseccomp.NewFilter(scmpAction(def))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrCompile, err)
	}
	defer f.Release()
	// Bad architecture: any ABI not in targets (i386 int 0x80, x32 on an
	// x86_64-only filter) kills the whole process. EPERM would leave a 32-bit
	// program failing every call in confusing ways, and KILL_THREAD (libseccomp's
	// default) would leave a Go process with a dead thread; a SIGSYS death is
	// unambiguous and nsbox reports it as a violation.
	if err := f.SetBadArchAction(libseccomp.ActKillProcess); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrCompile, err)
	}
	// Binary-tree syscall dispatch (libseccomp >= 2.5): an allowed call runs
	// ~15-20 instructions instead of ~70 with the linear chain. Tests check
	// that both layouts give the same verdicts. Older libseccomp: linear.
	if optimizeLevel > 1 {
		_ = f.SetOptimize(optimizeLevel)
	}
	for _, a := range targets[1:] {
		if err := f.AddArch(a); err != nil {
			return nil, nil, fmt.Errorf("%w: adding architecture %s: %v", ErrCompile, archName(a), err)
		}
	}
	var table []tableUse
	for _, ir := range rules {
		r := ir.r
		eff := ruleEffect(r.Action, r.ErrnoRet)
		names, fields := ruleNames(r, index("syscalls", ir.i))
		conds := make([]libseccomp.ScmpCondition, 0, len(r.Args))
		for k, a := range r.Args {
			vals := []uint64{a.Value}
			if a.Op == OpMaskedEqual {
				vals = append(vals, a.ValueTwo) // libseccomp: (arg & Value) == ValueTwo
			}
			c, err := libseccomp.MakeCondition(a.Index, scmpOps[a.Op], vals...)
			if err != nil {
				return nil, nil, p.fail(index(index("syscalls", ir.i)+".args", k), "%v", err)
			}
			conds = append(conds, c)
		}
		for k, name := range names {
			if eff == def {
				// Same as the default action: redundant, and libseccomp
				// refuses such rules.
				continue
			}
			var nr libseccomp.ScmpSyscall
			if n, err := libseccomp.GetSyscallFromName(name); err == nil {
				exists := false
				for _, a := range targets {
					if _, fromTable, ok := syscallNr(name, a); ok && !fromTable {
						exists = true
					}
				}
				if !exists {
					continue // not a syscall on any filtered ABI (e.g. arm_fadvise64_64 on x86_64)
				}
				nr = n
			} else {
				// Newer than libseccomp. Its number can be given to
				// libseccomp only for the native ABI (libseccomp translates
				// numbers between ABIs by name), so only a native-only filter
				// gets a rule; buildStub makes sure a skipped name cannot be
				// reached (ENOSYS) if the rule denied it.
				raw, ok := newerNr(name, native)
				table = append(table, tableUse{name: name, field: fields[k], eff: eff, raw: ok && len(targets) == 1})
				if !ok || len(targets) != 1 {
					continue
				}
				nr = libseccomp.ScmpSyscall(raw)
			}
			if err := f.AddRuleConditional(nr, scmpAction(eff), conds); err != nil {
				return nil, nil, p.fail(fields[k], "libseccomp refused the rule for %q: %v", name, err)
			}
		}
	}
	prog, err := exportBPF(f)
	if err != nil {
		return nil, nil, err
	}
	return prog, table, nil
}

// exportBPF gets the raw program from libseccomp: seccomp_export_bpf_mem on
// libseccomp >= 2.6, otherwise seccomp_export_bpf into a memfd.
func exportBPF(f *libseccomp.ScmpFilter) ([]unix.SockFilter, error) {
	raw, err := f.ExportBPFMem()
	if err != nil {
		mfd, merr := unix.MemfdCreate("nsbox-seccomp-bpf", unix.MFD_CLOEXEC)
		if merr != nil {
			return nil, fmt.Errorf("%w: memfd_create: %v", ErrCompile, merr)
		}
		file := os.NewFile(uintptr(mfd), "nsbox-seccomp-bpf")
		defer file.Close()
		if err := f.ExportBPF(file); err != nil {
			return nil, fmt.Errorf("%w: exporting BPF: %v", ErrCompile, err)
		}
		if _, err := file.Seek(0, io.SeekStart); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCompile, err)
		}
		if raw, err = io.ReadAll(io.LimitReader(file, 8*unix.BPF_MAXINSNS+1)); err != nil {
			return nil, fmt.Errorf("%w: reading exported BPF: %v", ErrCompile, err)
		}
	}
	if len(raw) == 0 || len(raw)%8 != 0 {
		return nil, fmt.Errorf("%w: libseccomp exported %d bytes, not whole instructions", ErrCompile, len(raw))
	}
	if len(raw) > 8*unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("%w: the filter has more than %d instructions", ErrCompile, unix.BPF_MAXINSNS)
	}
	// libseccomp writes struct sock_filter in host byte order.
	prog := make([]unix.SockFilter, len(raw)/8)
	for i := range prog {
		b := raw[8*i:]
		prog[i] = unix.SockFilter{
			Code: binary.NativeEndian.Uint16(b[0:]),
			Jt:   b[2],
			Jf:   b[3],
			K:    binary.NativeEndian.Uint32(b[4:]),
		}
	}
	return prog, nil
}
