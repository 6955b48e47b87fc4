package seccomp

import (
	"fmt"

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
// installs this filter on the thread that forks every command, beside the
// profile's (the kernel keeps the stricter verdict of the two).
//
// The rules are taken from the default profile (profiles/seccomp/
// default.json), not written twice: every rule there that refuses a call
// when a masked compare finds S_ISUID or S_ISGID in an argument. openat2
// gets ENOSYS, as in the command filter: its mode sits in a struct the
// filter cannot read. Every ABI this kernel runs is covered (the i386 and
// x32 ABIs, which Docker's profile allows through its archMap, have their
// own chmod); no ABI is refused by this filter, which leaves that to the
// profile.

// setIDBits are the mode bits whose rules the set-id filter takes.
const setIDBits = unix.S_ISUID | unix.S_ISGID

// SetIDFilter compiles the set-id filter for this machine.
func SetIDFilter() (*Filter, error) {
	def, err := Default()
	if err != nil {
		return nil, err
	}
	enosys := uint(unix.ENOSYS)
	p := &Profile{
		DefaultAction: ActAllow,
		Syscalls: []Rule{{
			Names:    []string{"openat2"},
			Action:   ActErrno,
			ErrnoRet: &enosys,
			Comment:  "openat2's mode is in a struct the filter cannot read: callers fall back to openat, whose mode it reads.",
		}},
		Source: "the set-id filter",
	}
	// Compile keeps those this kernel can run (hostArches).
	p.Architectures = []string{"SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32", "SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"}
	n := 0
	for _, r := range def.Syscalls {
		if testsSetID(r) {
			p.Syscalls = append(p.Syscalls, r)
			n++
		}
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: the default profile has no set-id rules to take", ErrCompile)
	}
	return Compile(p, Options{})
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
