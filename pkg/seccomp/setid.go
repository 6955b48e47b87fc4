package seccomp

import (
	"fmt"
	"runtime"

	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

// The set-id filter: the default profile's rules that refuse set-user-ID
// and set-group-ID modes, on their own, for runs whose profile is not the
// default (--seccomp FILE).
//
// A set-id file a sandbox leaves in a writable bind outlives it, and the
// host runs it later with its owner's ids: `cp /bin/sh x && chmod 4755 x`,
// and every local user who runs ./x is that owner. For a root caller the
// owner is host root (its binds are idmapped so that the sandbox's files
// are the caller's; found by review 17), for anyone else the caller. That
// harm reaches the host, not the sandbox, so the rule cannot depend on the
// profile a user picks to loosen the sandbox: Docker's default profile,
// the usual --seccomp FILE, allows chmod with any mode. The worker
// installs this filter on all its threads right before the profile's (the
// kernel keeps the stricter verdict of the two; the worker itself never
// sets those bits).
//
// The rules are taken from the default profile (profiles/seccomp/
// default.json), not written twice: every rule there that refuses a call
// when a masked compare finds S_ISUID or S_ISGID in an argument. Every ABI
// this kernel runs is covered (the i386 and x32 ABIs, which Docker's
// profile allows through its archMap, have their own chmod); no ABI is
// refused by this filter, which leaves that to the profile. openat2, whose
// mode lies in a struct no filter can read, is OpenAt2Guard's.

// setIDBits are the mode bits whose rules the set-id filter takes.
const setIDBits = unix.S_ISUID | unix.S_ISGID

// SetIDFilter returns the set-id filter for this machine: the one
// precompiled into the binary from the same default.json when there is
// one (precompiled/setid_GOARCH.bpf, as DefaultFilter's), otherwise
// compiled now.
func SetIDFilter() (*Filter, error) {
	if f := precompiledSetID(runtime.GOARCH); f != nil {
		return f, nil
	}
	def, err := Default()
	if err != nil {
		return nil, err
	}
	p, err := setIDProfile(def)
	if err != nil {
		return nil, err
	}
	return Compile(p, Options{})
}

// setIDProfile is the set-id filter's profile, taken from def (the
// default profile).
func setIDProfile(def *Profile) (*Profile, error) {
	p := &Profile{DefaultAction: ActAllow, Architectures: allABIs, Source: "the set-id filter"}
	for _, r := range def.Syscalls {
		if testsSetID(r) {
			p.Syscalls = append(p.Syscalls, r)
		}
	}
	if len(p.Syscalls) == 0 {
		return nil, fmt.Errorf("%w: the default profile has no set-id rules to take", ErrCompile)
	}
	return p, nil
}

// testsSetID reports whether r refuses its calls when an argument has
// S_ISUID or S_ISGID: an errno rule with a masked compare for exactly one
// of those bits.
func testsSetID(r Rule) bool {
	if r.Action != ActErrno || r.Includes != nil || r.Excludes != nil {
		return false
	}
	for _, a := range r.Args {
		if a.Op == OpMaskedEqual && a.Value == a.ValueTwo && a.Value != 0 && a.Value&^setIDBits == 0 {
			return true
		}
	}
	return false
}

// allABIs are the architectures of the filters that cover every ABI;
// Compile keeps those this kernel can run (hostArches).
var allABIs = []string{"SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32", "SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"}

// OpenAt2Guard compiles the command filter for a profile of the user's:
// openat2 gets ENOSYS on every ABI (callers fall back to openat, whose
// mode the set-id filter reads), everything else is left to the profile.
// Installed on the thread that forks commands only, after the profile's
// filter (the worker's own tools resolve paths with openat2).
func OpenAt2Guard() (*Filter, error) {
	enosys := uint(unix.ENOSYS)
	return Compile(&Profile{
		DefaultAction: ActAllow,
		Architectures: allABIs,
		Syscalls:      []Rule{{Names: []string{"openat2"}, Action: ActErrno, ErrnoRet: &enosys}},
		Source:        "the openat2 guard",
	}, Options{})
}

// NeedsOpenAt2Guard reports whether commands under the profile's filter f
// need OpenAt2Guard: f lets openat2 through on some ABI. Such a guard is
// installed after f, so f must then allow seccomp(2) itself; one that
// does not is refused here, before anything starts, with what to change.
func NeedsOpenAt2Guard(f *Filter) (bool, error) {
	native, err := libseccomp.GetNativeArch()
	if err != nil {
		return false, err
	}
	needed := false
	for _, a := range hostArches[native] {
		info := archInfoOf(a)
		nr, _, ok := syscallNr("openat2", a)
		if !ok || info.audit == 0 {
			continue
		}
		if breaks(f.verdict(nr+int32(info.nrBase), info.audit, [6]uint64{}), true) == "" {
			needed = true
		}
	}
	if !needed {
		return false, nil
	}
	info := archInfoOf(native)
	nr, _, ok := syscallNr("seccomp", native)
	if !ok || info.audit == 0 {
		return true, nil
	}
	if action := breaks(f.verdict(nr+int32(info.nrBase), info.audit, [6]uint64{unix.SECCOMP_SET_MODE_FILTER}), true); action != "" {
		return false, fmt.Errorf("it allows openat2 but answers seccomp(2) with %s, which leaves nsbox no way to guard openat2 (its mode is out of a filter's reach, and a command could make a set-user-ID file with it): deny openat2 with SCMP_ACT_ERRNO and errnoRet 38 (ENOSYS: programs fall back to openat), or allow seccomp", action)
	}
	return true, nil
}
