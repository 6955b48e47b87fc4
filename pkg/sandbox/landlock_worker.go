package sandbox

import (
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"github.com/nsbox/nsbox/pkg/landlock"
	"golang.org/x/sys/unix"
)

// Socket filters of the Landlock backend (setupMsg.SocketFilter).
const (
	// socketFilterNone refuses socket(2) for every family: network none
	// without a network namespace of its own.
	socketFilterNone = "none"
	// socketFilterUnix refuses socket(AF_UNIX): --net host, where the
	// host's unix sockets (a container runtime's, a D-Bus bus) are still
	// no business of the sandbox's.
	socketFilterUnix = "unix"
)

// landlockSteps is the Landlock worker's ordered setup: no namespace to
// set up, so no hostname, loopback or root to build.
func (w *worker) landlockSteps() []step {
	return []step{
		{"open nsbox binary", w.openSelf},
		{"use nsbox binary read-only", w.shimFromSelf},
		// landlock_init.c confined the process before the Go runtime
		// started: every thread (the tools' too) and every command is in
		// the domain. A worker that is not must not serve.
		{"confine with landlock", landlockApplied},
		// Orphans of commands (a daemon that double-forked and setsid'd)
		// are reparented to the worker, not to the host's init, so that
		// the worker can kill them at the session's end (killDescendants).
		{"become child subreaper", func() error { return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }},
		{"close inherited fds", w.closeFDs},
		{"join a session keyring", joinSessionKeyring},
		{"set rlimits", w.setRlimits},
		{"drop capabilities", w.dropCapsLandlock},
		{"set no_new_privs", setNoNewPrivs},
		{"probe pidfds", w.probePidfds},
		// Commands get a Landlock domain nested below the worker's, on
		// the thread that forks them (forkTid), with the signal and
		// abstract-unix scopes: a command cannot signal the worker's
		// other threads (kill(2) of any of its thread ids ends the whole
		// worker) nor reach an abstract socket outside. Needs
		// no_new_privs. The thread itself is the worker's thread group
		// leader, so what reaches the worker through it is refused by
		// the command filter below (commandFilterLandlock).
		{"restrict scopes (landlock)", w.landlockScopes},
		// Before the profile's filter: both stay (the stricter answer
		// wins), and the profile may deny seccomp(2) itself.
		{"install socket filter", w.installSocketFilter},
		// The profile's filter after every step that needs syscalls it
		// denies; only the thread-only filters below come later.
		{"install set-id filter", w.installSetID},
		{"install seccomp filter", w.installSeccomp},
		// Started before the command filter lists the worker's threads
		// (without the scope it refuses kill(2) of each): serve would
		// start it later, unlisted. It inherits the filters above from
		// the Go thread that creates it.
		{"start directory check thread", func() error {
			if !w.cmdScoped {
				startDirCheck() // best effort, as in serve
			}
			return nil
		}},
		// Thread-only filters come after every TSYNC one: a TSYNC
		// install from this thread would copy them to all the worker's
		// threads (seccomp(2) SECCOMP_FILTER_FLAG_TSYNC), and the
		// worker's fail-closed kill(-1) (killScoped) runs on another.
		{"install landlock command filter", w.installLandlockCommandFilter},
		// The native backend's command filter, on the thread that forks
		// every command: openat2, whose mode the profile cannot read,
		// gets ENOSYS in commands, so openat2(O_CREAT, 04755) cannot
		// make a set-user-ID file in a writable bind (the profile
		// refuses that mode to open, openat, creat, chmod, mkdir...).
		{"install command filter", w.installCommandFilter},
	}
}

// dropCapsLandlock drops every capability as dropCaps does when the worker
// holds any (nsbox run by root, in a container too: the capabilities are
// the host's or the container's own, here); a worker without any (a
// non-root caller) cannot lock securebits, and needs not: with
// no_new_privs nothing it executes can gain one.
func (w *worker) dropCapsLandlock() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	if data[0].Permitted|data[1].Permitted|data[0].Effective|data[1].Effective != 0 || w.setup.AllowPrivileged {
		// --allow-privileged is meaningless without a user namespace of
		// the sandbox's own: dropCaps refuses nothing, so refuse here.
		if w.setup.AllowPrivileged {
			return fmt.Errorf("--allow-privileged needs the native backend: without a user namespace the capabilities would be the host's")
		}
		return w.dropCaps()
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	var none [2]unix.CapUserData
	return unix.Capset(&hdr, &none[0])
}

// shimFromSelf is cloneShim without a mount namespace: the limit shim runs
// from the binary itself, which the Landlock rules grant read and execute
// only (landlockGrants), so no process inside can write it through
// /proc/PID/exe or any path (CVE-2019-5736 class).
func (w *worker) shimFromSelf() error {
	if !w.needsShim() {
		return nil
	}
	fd, err := unix.FcntlInt(uintptr(w.selfFD), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return err
	}
	w.shimFD = fd
	return nil
}

// landlockScopes is the namespace sandbox's second layer (issue 17): the
// abstract unix socket and signal scopes of Landlock ABI 6 on the thread
// that forks every command. With --net host the sandbox shares the host's
// abstract socket namespace; the scope refuses connects to sockets made
// outside the sandbox, and signals to processes outside it. Without ABI 6
// it does nothing (nsbox status says so).
func (w *worker) landlockScopes() error {
	if w.setup.NoScopes {
		return nil
	}
	abi, err := landlock.ABI()
	if err != nil || abi < 6 {
		return nil
	}
	cfg := landlock.Config{Scoped: landlock.ScopeAbstractUnix | landlock.ScopeSignal}
	if w.setup.Landlock {
		// Under the Landlock backend's file system layer, a layer that
		// grants no LANDLOCK_ACCESS_FS_REFER refuses it (the kernel
		// denies reparenting by default in every layer once one
		// handles the file system): every rename or link between two
		// directories failed with EXDEV, in the workspace too (found
		// by review). This layer hands it back on the whole tree; the
		// backend's own layer still decides where it may happen.
		cfg.HandledFS = landlock.Refer
		cfg.Paths = []landlock.PathRule{{Path: "/", Access: landlock.Refer}}
	}
	rs, err := landlock.Build(cfg)
	if err != nil {
		return err
	}
	defer rs.Close()
	// On this thread: commands fork from it (forkTid). The worker's other
	// threads run only its own code.
	if err := rs.RestrictSelf(); err != nil {
		return err
	}
	w.cmdScoped = true
	return nil
}

// installSocketFilter adds the Landlock backend's own seccomp filter, on
// every thread (TSYNC), inherited by every command:
//   - socket(2) refused for every family, or for AF_UNIX only, and
//     io_uring_setup (whose operations would open and connect sockets past
//     seccomp);
//   - signals to the worker refused (kill, tgkill, rt_sigqueueinfo,
//     rt_tgsigqueueinfo of its pid or process group, kill(-1), tkill, and
//     pidfd_send_signal altogether: a /proc/PID fd is a pidfd too), and
//     pidfd_open and prlimit64 of it. Without a PID namespace the worker
//     is an ordinary process of the same uid and domain; killed, it could
//     not kill the session's processes at its end (no cgroup without
//     limits), which would outlive the session. SIGURG (the Go runtime's
//     preemption signal, which it sends to its own threads) and signal 0
//     stay allowed;
//   - a foreign ABI (i386's socketcall, x32) refused outright.
func (w *worker) installSocketFilter() error {
	if w.setup.SocketFilter == "" {
		return nil
	}
	// The worker's own domain (landlock_init.c) carries the signal scope
	// wherever the kernel has it (ABI 6): the supervisor built it with
	// both scopes, best effort, on this kernel. Seen, not assumed: the
	// supervisor, of the same uid and outside the domain, must be out of
	// signal reach. kill(-1) is allowed to the worker only then; without
	// the scope it would reach every process of the uid (all of them as
	// root).
	if abi, err := landlock.ABI(); err == nil && abi >= 6 && unix.Kill(os.Getppid(), 0) == unix.EPERM {
		w.llScoped = true
	}
	prog, err := socketFilter(w.setup.SocketFilter == socketFilterNone, os.Getpid(), w.llScoped)
	if err != nil {
		return err
	}
	fp := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fp))); errno != 0 {
		return fmt.Errorf("seccomp(SET_MODE_FILTER): %w", errno)
	}
	runtime.KeepAlive(prog)
	return nil
}

// probePidfds is serve's pidfd check done before the filter, which
// refuses pidfd_open of the worker's own pid.
func (w *worker) probePidfds() error {
	if fd, err := unix.PidfdOpen(os.Getpid(), 0); err == nil {
		unix.Close(fd)
		w.pidfdsOK = true
	}
	return nil
}
