package seccomp

// The ENOSYS stub.
//
// A filter can only name the syscalls its profile and libseccomp know.
// Everything newer falls to the default action, which is wrong both ways:
//
//   - Allowlist profiles (Docker's: default ERRNO(EPERM)) fail a syscall
//     that is newer than the profile with EPERM. Callers treat EPERM as "not
//     allowed" and give up, where ENOSYS would make them fall back to the
//     older call (glibc's clone3 -> clone, statx -> fstatat, ...).
//   - Denylist profiles (nsbox's default: default ALLOW) let a syscall newer
//     than libseccomp run unfiltered, even when it is a variant of one the
//     profile denies (open_tree_attr, Linux 6.15, is open_tree with
//     mount_setattr attached; libseccomp 2.5.4 cannot name it).
//
// runc solves the first case in libcontainer/seccomp/patchbpf by prepending
// a stub that returns ENOSYS for every syscall number above the highest one
// the profile names. nsbox does not import runc for this: its only exported
// entry point, PatchAndLoad, loads the filter into the calling process,
// while nsbox must hand the program to the worker as bytes; and runc v1.5.2
// requires libseccomp-golang v0.12.0, which conflicts with the v0.11.1 nsbox
// pins. The stub below is nsbox's own implementation of the same idea,
// extended to denylists:
//
//   - default action not permissive (allowlist): ENOSYS above the highest
//     syscall number the profile names on that ABI (runc's rule);
//   - default action permissive (denylist): ENOSYS above the highest number
//     the filter can name at all (libseccomp's table, plus newerSyscalls when
//     the filter covers only the native ABI). The kernel would run such a
//     call unfiltered; refusing what cannot be reasoned about is the safe
//     side, and callers fall back;
//   - default action already ERRNO(ENOSYS): no stub.
//
// Layout: the stub loads seccomp_data.arch, jumps to the section of a known
// ABI, loads seccomp_data.nr and either returns ERRNO(ENOSYS) or jumps to
// the first instruction of libseccomp's program, which reloads both fields
// itself. Unknown ABIs go straight to libseccomp's bad-architecture check.
// On x86_64, numbers with bit 30 set are x32 calls: they are checked against
// the x32 ceiling when x32 is filtered, and otherwise passed to libseccomp,
// which kills the process (bad-architecture action); nr == -1 (what a tracer
// writes to skip a call) is passed through as libseccomp does.

import (
	"fmt"

	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/pkg/internal/cbpf"
)

// Offsets in struct seccomp_data (linux/seccomp.h).
const (
	offNr   = 0
	offArch = 4
)

const retENOSYS = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)

func archInfoOf(a libseccomp.ScmpArch) archInfo {
	for _, info := range arches {
		if info.scmp == a {
			return info
		}
	}
	return archInfo{scmp: a}
}

// buildStub computes the per-ABI ceilings and assembles the stub.
func buildStub(p *Profile, rules []indexedRule, def effect, targets []libseccomp.ScmpArch,
	table []tableUse) ([]unix.SockFilter, error) {
	nativeOnly := len(targets) == 1
	ceiling := map[libseccomp.ScmpArch]uint32{}
	for _, a := range targets {
		info := archInfoOf(a)
		if info.audit == 0 {
			continue
		}
		var c uint32
		if def.permissive() {
			c = libseccompMaxNr(a, info.nrBase)
			if nativeOnly {
				// On a native-only filter every newerSyscalls entry can be
				// given to libseccomp by number, so the filter can name all
				// of them; a multi-ABI filter cannot (see buildLibseccomp).
				for name := range newerSyscalls {
					if n, ok := newerNr(name, a); ok && uint32(n) > c {
						c = uint32(n)
					}
				}
			}
		} else {
			for _, ir := range rules {
				names, _ := ruleNames(ir.r, "")
				for _, name := range names {
					n, fromTable, ok := syscallNr(name, a)
					if !ok || (fromTable && !nativeOnly) {
						continue
					}
					if uint32(n) > c {
						c = uint32(n)
					}
				}
			}
		}
		ceiling[a] = c
	}

	// A denylist rule for a syscall libseccomp cannot name on some filtered
	// ABI was skipped there; that is only safe when the stub refuses the
	// number on that ABI anyway (it is above the ceiling).
	if def.permissive() {
		for _, t := range table {
			if t.raw || t.eff.permissive() {
				continue
			}
			for _, a := range targets {
				n, ok := newerNr(t.name, a)
				if !ok {
					if archInfoOf(a).audit == 0 {
						return nil, p.fail(t.field, "cannot deny %q on %s: libseccomp %s does not know it", t.name, archName(a), Version())
					}
					continue // does not exist on this ABI
				}
				if c, has := ceiling[a]; !has || uint32(n) <= c {
					return nil, p.fail(t.field, "cannot deny %q on %s: libseccomp %s does not know it; filter only the native architecture or upgrade libseccomp",
						t.name, archName(a), Version())
				}
			}
		}
	}

	if def.action == ActErrno && def.data == uint(unix.ENOSYS) {
		return nil, nil // the default already says ENOSYS
	}
	return assembleStub(ceiling)
}

const (
	lblFilter = "filter" // first instruction of libseccomp's program
	lblENOSYS = "enosys"
)

func assembleStub(ceiling map[libseccomp.ScmpArch]uint32) ([]unix.SockFilter, error) {
	type section struct {
		audit            uint32
		ceil, x32Ceil    uint32
		hasNative, isX86 bool
		hasX32           bool
	}
	var sections []*section
	get := func(audit uint32) *section {
		for _, s := range sections {
			if s.audit == audit {
				return s
			}
		}
		s := &section{audit: audit, isX86: audit == auditArchX86_64}
		sections = append(sections, s)
		return s
	}
	// Deterministic order: the same profile always compiles to the same bytes.
	for _, a := range []libseccomp.ScmpArch{libseccomp.ArchAMD64, libseccomp.ArchX32, libseccomp.ArchX86,
		libseccomp.ArchARM64, libseccomp.ArchARM} {
		c, ok := ceiling[a]
		if !ok || c == 0 {
			continue
		}
		s := get(archInfoOf(a).audit)
		if a == libseccomp.ArchX32 {
			s.hasX32, s.x32Ceil = true, c
		} else {
			s.hasNative, s.ceil = true, c
		}
	}
	if len(sections) == 0 {
		return nil, nil
	}

	var a cbpf.Asm
	a.Stmt(cbpf.LdAbs, offArch)
	for i, s := range sections {
		a.Jump(cbpf.JEq, s.audit, fmt.Sprint("arch", i), "")
	}
	a.JA(lblFilter)
	for i, s := range sections {
		lbl := fmt.Sprint("arch", i)
		a.Label(lbl)
		a.Stmt(cbpf.LdAbs, offNr)
		if s.isX86 {
			x32Target := lblFilter // x32 not filtered: libseccomp kills (bad arch)
			if s.hasX32 {
				x32Target = lbl + "x32"
			}
			a.Jump(cbpf.JSet, x32SyscallBit, x32Target, "")
		}
		if s.hasNative {
			a.Jump(cbpf.JGt, s.ceil, lblENOSYS, lblFilter)
		} else {
			a.JA(lblFilter)
		}
		if s.isX86 && s.hasX32 {
			a.Label(lbl + "x32")
			a.Jump(cbpf.JEq, 0xffffffff, lblFilter, "")
			a.Jump(cbpf.JGt, s.x32Ceil, lblENOSYS, lblFilter)
		}
	}
	a.Label(lblENOSYS)
	a.Stmt(cbpf.Ret, retENOSYS)
	// lblFilter is the instruction after the stub: libseccomp's program.
	a.Label(lblFilter)
	prog, err := a.Assemble()
	if err != nil {
		return nil, fmt.Errorf("stub: %w", err)
	}
	return prog, nil
}
