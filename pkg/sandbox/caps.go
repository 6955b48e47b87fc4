package sandbox

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Securebits (capabilities(7)). Locked so that nothing inside can unset them.
const (
	secbitNoroot                  = 1 << 0
	secbitNorootLocked            = 1 << 1
	secbitNoSetuidFixup           = 1 << 2
	secbitNoSetuidFixupLocked     = 1 << 3
	secbitKeepCapsLocked          = 1 << 5
	secbitNoCapAmbientRaise       = 1 << 6
	secbitNoCapAmbientRaiseLocked = 1 << 7
	lockedSecurebits              = secbitNoroot | secbitNorootLocked | secbitNoSetuidFixup | secbitNoSetuidFixupLocked | secbitKeepCapsLocked | secbitNoCapAmbientRaise | secbitNoCapAmbientRaiseLocked
)

func lastCap() int {
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			return n
		}
	}
	return unix.CAP_LAST_CAP
}

// dropCaps removes every capability from this thread, the one all commands
// are forked from: bounding, ambient, inheritable, permitted and effective.
// Even when nsbox runs as root, a command holds no capability, and an
// execve as uid 0 cannot regain them (SECBIT_NOROOT). The capabilities only
// ever existed in the sandbox's user namespace.
func (w *worker) dropCaps() error {
	if w.setup.AllowPrivileged {
		return keepCaps(w.setup.HostRootFiles)
	}
	if w.setup.Identity.Setgroups {
		return keepRangeCaps()
	}
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, lockedSecurebits, 0, 0, 0); err != nil {
		return fmt.Errorf("lock securebits: %w", err)
	}
	if err := dropBounding(0); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("clear capability sets: %w", err)
	}
	return nil
}

func dropBounding(keep uint64) error {
	last := lastCap()
	for c := 0; c <= last; c++ {
		if keep&(1<<c) != 0 {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	return nil
}

// rangeCaps are what commands keep with a full id range: the powers of a
// container's root over files and ids, so that tar restores owners, modes
// and times, chown and setgroups work and subprocess.run(user=...) can
// switch ids. They exist in the sandbox's user namespace only, and the
// kernel honours them only on inodes and ids that namespace maps
// (capable_wrt_inode_uidgid): the range's own ids, and the writable binds
// idmapped onto it. A host file owned by an unmapped id (root's
// /etc/shadow) stays out of reach. Nothing that acts on a namespace
// (CAP_SYS_ADMIN, CAP_NET_ADMIN), no CAP_FSETID or CAP_SETFCAP (no
// privilege can be stored in a file), no CAP_SYS_PTRACE.
const rangeCaps = 1<<unix.CAP_CHOWN | 1<<unix.CAP_DAC_OVERRIDE | 1<<unix.CAP_DAC_READ_SEARCH |
	1<<unix.CAP_FOWNER | 1<<unix.CAP_SETUID | 1<<unix.CAP_SETGID | 1<<unix.CAP_KILL

// keepRangeCaps drops every capability but rangeCaps and carries those
// across every execve as ambient capabilities, whatever the uid: root
// inside gains nothing more at exec (SECBIT_NOROOT), and a switch to
// another uid loses nothing (SECBIT_NO_SETUID_FIXUP), both locked.
func keepRangeCaps() error {
	if err := dropBounding(rangeCaps); err != nil {
		return err
	}
	set := func(permitted, inheritable uint64) error {
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		data := [2]unix.CapUserData{
			{Effective: uint32(permitted), Permitted: uint32(permitted), Inheritable: uint32(inheritable)},
			{Effective: uint32(permitted >> 32), Permitted: uint32(permitted >> 32), Inheritable: uint32(inheritable >> 32)},
		}
		return unix.Capset(&hdr, &data[0])
	}
	// CAP_SETPCAP a little longer: locking the securebits needs it, and
	// they are locked last because SECBIT_NO_CAP_AMBIENT_RAISE stops the
	// raises below.
	if err := set(rangeCaps|1<<unix.CAP_SETPCAP, rangeCaps); err != nil {
		return fmt.Errorf("set capability sets: %w", err)
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	for c := 0; c < 64; c++ {
		if rangeCaps&(1<<c) == 0 {
			continue
		}
		if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_RAISE, uintptr(c), 0, 0); err != nil {
			return fmt.Errorf("raise ambient capability %d: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, lockedSecurebits, 0, 0, 0); err != nil {
		return fmt.Errorf("lock securebits: %w", err)
	}
	if err := set(rangeCaps, rangeCaps); err != nil {
		return fmt.Errorf("drop CAP_SETPCAP: %w", err)
	}
	return nil
}

// keepCaps is --allow-privileged: commands keep every capability of the
// sandbox's user namespace (never of the host), carried across execve as
// ambient capabilities for a non-root id; never CAP_SYS_PTRACE, and for a
// root caller's sandbox (hostRootFiles) neither CAP_SETFCAP nor CAP_FSETID.
func keepCaps(hostRootFiles bool) error {
	// Never CAP_SYS_PTRACE: it overrides PID 1's non-dumpable flag, and a
	// command holding it could open /proc/1/fd/* and /proc/1/mem of the
	// worker, which outlives every command and talks to the host.
	drop := []int{unix.CAP_SYS_PTRACE}
	if hostRootFiles {
		// No file capability the host honours: with CAP_SETFCAP, setcap
		// on a copy of python3 in a writable bind stores a capability
		// whose root id the bind's idmap (or a 0-to-0 map) makes host
		// root's (cap_convert_nscap, capabilities(7) "Namespaced file
		// capabilities"), and any local user who runs it gets it: host
		// root through cap_setuid (review 17). CAP_FSETID: a write
		// keeps a file's set-id bits, and chmod may set set-gid without
		// the group.
		drop = append(drop, unix.CAP_SETFCAP, unix.CAP_FSETID)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	for _, c := range drop {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
		bit := uint32(1) << (c % 32)
		data[c/32].Permitted &^= bit
		data[c/32].Effective &^= bit
	}
	data[0].Inheritable = data[0].Permitted
	data[1].Inheritable = data[1].Permitted
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("set inheritable capabilities: %w", err)
	}
	last := lastCap()
	for c := 0; c <= last; c++ {
		word, bit := c/32, uint32(1)<<(c%32)
		if data[word].Permitted&bit == 0 {
			continue
		}
		if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_RAISE, uintptr(c), 0, 0); err != nil {
			return fmt.Errorf("raise ambient capability %d: %w", c, err)
		}
	}
	return nil
}
