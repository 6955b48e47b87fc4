package sandbox

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/nsbox/nsbox/pkg/landlock"
	"github.com/nsbox/nsbox/pkg/notify"
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
	rs, err := landlock.Build(landlock.Config{Scoped: landlock.ScopeAbstractUnix | landlock.ScopeSignal})
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

// sysChmod is chmod(2)'s number where the architecture has one: 90 on
// x86_64 (written out: arm64, which has only fchmodat, has no
// unix.SYS_CHMOD to name).
func sysChmod() (uint32, bool) {
	if runtime.GOARCH == "amd64" {
		return 90, true
	}
	return 0, false
}

// The inode attribute ioctls commandFilterLandlock refuses that x/sys
// does not name: FS_IOC32_SETFLAGS (_IOW('f', 2, int)),
// FS_IOC_FSSETXATTR (_IOW('X', 32, struct fsxattr)), FS_IOC_SETVERSION
// and its 32-bit twin (_IOW('v', 2, long / int)) and
// BTRFS_IOC_SUBVOL_SETFLAGS (_IOW(0x94, 26, __u64)).
const (
	fsIocSetflags32       = 0x40046602
	fsIocFssetxattr       = 0x401c5820
	fsIocSetversion       = 0x40087602
	fsIocSetversion32     = 0x40047602
	btrfsIocSubvolSetflag = 0x4008941a
)

// inodeIoctls change a file's or directory's state on the file system
// for good with nothing more than ownership or a read-only open, which
// Landlock does not check (its ioctl right covers device files only):
// inode flags and project ids (chattr; review 30), the generation
// number, fs-verity (the file read-only for good), an encryption policy
// on an empty directory and the keys that unlock it, and a btrfs
// subvolume's read-only flag (review 34). Refused (EPERM) on every file.
var inodeIoctls = []uint32{
	unix.FS_IOC_SETFLAGS, fsIocSetflags32, fsIocFssetxattr,
	fsIocSetversion, fsIocSetversion32,
	unix.FS_IOC_ENABLE_VERITY,
	unix.FS_IOC_SET_ENCRYPTION_POLICY, unix.FS_IOC_ADD_ENCRYPTION_KEY,
	unix.FS_IOC_REMOVE_ENCRYPTION_KEY, unix.FS_IOC_REMOVE_ENCRYPTION_KEY_ALL_USERS,
	btrfsIocSubvolSetflag,
}

// sysChownPath is chown(2) and lchown(2) where the architecture has them:
// 92 and 94 on x86_64 (arm64 has only fchownat).
func sysChownPath() []uint32 {
	if runtime.GOARCH == "amd64" {
		return []uint32{92, 94}
	}
	return nil
}

// auditArch is the AUDIT_ARCH_* of this build's architecture.
func auditArch() (uint32, error) {
	switch runtime.GOARCH {
	case "amd64":
		return 0xc000003e, nil
	case "arm64":
		return 0xc00000b7, nil
	}
	return 0, fmt.Errorf("no socket filter for %s", runtime.GOARCH)
}

// bpfAsm assembles classic BPF with symbolic jump targets.
// Classic BPF on struct seccomp_data, for the filters below.
const (
	ld  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	jeq = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	jge = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	// jset jumps when the accumulator has any bit of k set.
	jset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	and  = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
	ret  = unix.BPF_RET | unix.BPF_K
)

// arg is the offset of the low word of seccomp_data.args[i].
func arg(i int) uint32 { return uint32(16 + 8*i) }

// newBPFFilter starts a filter with the checks every one of them begins
// with: the native architecture only (another ABI's numbers mean other
// calls) and no x32 call, each sent to the label "deny"; the syscall
// number is left loaded.
func newBPFFilter() (*bpfAsm, error) {
	arch, err := auditArch()
	if err != nil {
		return nil, err
	}
	a := &bpfAsm{labels: map[string]int{}}
	a.stmt(ld, 4)
	a.jump(jeq, arch, "", "deny")
	a.stmt(ld, 0)
	a.jump(jge, 0x40000000, "deny", "") // x32
	return a, nil
}

type bpfAsm struct {
	prog   []unix.SockFilter
	labels map[string]int
	fixups []bpfFixup
}

type bpfFixup struct {
	at         int
	jt, jf, ja string
}

func (a *bpfAsm) label(name string) { a.labels[name] = len(a.prog) }
func (a *bpfAsm) stmt(code uint16, k uint32) {
	a.prog = append(a.prog, unix.SockFilter{Code: code, K: k})
}

// jump jumps to jt when the comparison holds, else to jf ("" is the next
// instruction).
func (a *bpfAsm) jump(code uint16, k uint32, jt, jf string) {
	a.fixups = append(a.fixups, bpfFixup{at: len(a.prog), jt: jt, jf: jf})
	a.prog = append(a.prog, unix.SockFilter{Code: code, K: k})
}

// ja jumps to a label unconditionally.
func (a *bpfAsm) ja(to string) {
	a.fixups = append(a.fixups, bpfFixup{at: len(a.prog), ja: to})
	a.prog = append(a.prog, unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JA})
}

func (a *bpfAsm) done() ([]unix.SockFilter, error) {
	for _, f := range a.fixups {
		if f.ja != "" {
			to, ok := a.labels[f.ja]
			if !ok || to <= f.at {
				return nil, fmt.Errorf("bpf: bad jump to %q", f.ja)
			}
			a.prog[f.at].K = uint32(to - f.at - 1)
			continue
		}
		for i, l := range []string{f.jt, f.jf} {
			if l == "" {
				continue
			}
			to, ok := a.labels[l]
			off := to - f.at - 1
			if !ok || off < 0 || off > 255 {
				return nil, fmt.Errorf("bpf: bad jump to %q", l)
			}
			if i == 0 {
				a.prog[f.at].Jt = uint8(off)
			} else {
				a.prog[f.at].Jf = uint8(off)
			}
		}
	}
	return a.prog, nil
}

// socketFilter assembles the filter (classic BPF on struct seccomp_data:
// nr at 0, arch at 4, args[i] at 16+8i, the low word first on these
// little-endian architectures; pids and signals are ints, so the low word
// is the whole value).
//
// scoped: the worker's domain has the signal scope, so kill(-1) from any
// thread of it reaches only the session's own processes; it is allowed
// then (killDescendants' fail-closed kill), and commands, whose forking
// thread is the worker's leader, are refused it by commandFilterLandlock.
func socketFilter(allSockets bool, worker int, scoped bool) ([]unix.SockFilter, error) {
	a, err := newBPFFilter()
	if err != nil {
		return nil, err
	}
	self, group := uint32(worker), uint32(-worker)
	a.jump(jeq, unix.SYS_IO_URING_SETUP, "deny", "")
	a.jump(jeq, unix.SYS_TKILL, "deny", "")
	// A /proc/PID directory fd is a pidfd too: its target cannot be told.
	a.jump(jeq, unix.SYS_PIDFD_SEND_SIGNAL, "deny", "")
	a.jump(jeq, unix.SYS_SOCKET, "socket", "")
	a.jump(jeq, unix.SYS_KILL, "sig1", "")
	a.jump(jeq, unix.SYS_RT_SIGQUEUEINFO, "sig1", "")
	a.jump(jeq, unix.SYS_TGKILL, "sig2", "")
	a.jump(jeq, unix.SYS_RT_TGSIGQUEUEINFO, "sig2", "")
	a.jump(jeq, unix.SYS_PIDFD_OPEN, "target", "")
	a.jump(jeq, unix.SYS_PRLIMIT64, "target", "allow")
	// Signal in args[1] (kill, rt_sigqueueinfo) or args[2] (tgkill,
	// rt_tgsigqueueinfo): 0 and SIGURG are harmless to the worker.
	a.label("sig1")
	a.stmt(ld, arg(1))
	a.ja("sigcheck")
	a.label("sig2")
	a.stmt(ld, arg(2))
	a.label("sigcheck")
	a.jump(jeq, 0, "allow", "")
	a.jump(jeq, uint32(unix.SIGURG), "allow", "target")
	a.label("target")
	a.stmt(ld, arg(0))
	a.jump(jeq, self, "deny", "")
	a.jump(jeq, group, "deny", "")
	if scoped {
		a.ja("allow")
	} else {
		a.jump(jeq, 0xffffffff, "deny", "allow") // kill(-1): every process the uid may signal
	}
	a.label("socket")
	if allSockets {
		a.ja("deny")
	}
	a.stmt(ld, arg(0)) // the family
	a.jump(jeq, unix.AF_UNIX, "deny", "allow")
	a.label("allow")
	a.stmt(ret, unix.SECCOMP_RET_ALLOW)
	a.label("deny")
	a.stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.EACCES))
	a.label("eperm")
	a.stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM))
	a.label("notsup")
	a.stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.EOPNOTSUPP))
	return a.done()
}

// installLandlockCommandFilter installs commandFilterLandlock on the
// thread that forks every command (forkTid) only, without TSYNC: it is
// inherited by every command and by nothing else of the worker (see
// seccomp.CommandFilter for why the worker's other threads stay without).
func (w *worker) installLandlockCommandFilter() error {
	if unix.Gettid() != w.forkTid {
		return errForkThread
	}
	// Without the commands' scoped domain nothing else keeps a command
	// from kill(2) of a worker thread id: refuse those of the threads the
	// worker has now (a thread the runtime starts later is not listed; the
	// not-isolated list says so).
	var tids []int
	if !w.cmdScoped {
		var err error
		if tids, err = workerTids(); err != nil {
			return err
		}
	}
	meta := metaOff
	switch {
	case w.setup.MetaGate && os.Geteuid() != 0:
		meta = metaRootless
	case w.setup.MetaGate:
		meta = metaOn
	}
	prog, err := commandFilterLandlock(w.setup.SocketFilter == socketFilterNone, meta, os.Getpid(), tids)
	if err != nil {
		return err
	}
	fp := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	// With the metadata gate the filter has a listener (close-on-exec),
	// which the supervisor takes from this process (pidfd_getfd) after
	// the handshake names it. WAIT_KILLABLE_RECV (5.19) where the kernel
	// has it: a call the supervisor has read is not restarted by a
	// signal handler and made twice.
	flags := []uintptr{0}
	if w.setup.MetaGate {
		flags = []uintptr{unix.SECCOMP_FILTER_FLAG_NEW_LISTENER | unix.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, unix.SECCOMP_FILTER_FLAG_NEW_LISTENER}
	}
	var r uintptr
	var errno unix.Errno
	for _, f := range flags {
		if r, _, errno = unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, f, uintptr(unsafe.Pointer(&fp))); errno != unix.EINVAL {
			break
		}
	}
	runtime.KeepAlive(prog)
	if errno != 0 {
		// Fail closed: without it a command can kill the worker, and
		// what it detached would outlive the session.
		return fmt.Errorf("seccomp(SET_MODE_FILTER): %w (the landlock backend needs seccomp(2) allowed by the seccomp profile for the filter that protects its worker)", errno)
	}
	if w.setup.MetaGate {
		w.notifyFD = int(r)
	}
	return nil
}

// workerTids lists the worker's thread ids.
func workerTids() ([]int, error) {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, err
	}
	var tids []int
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}

// Socket ioctls that set a socket's SIGIO/SIGURG owner, as F_SETOWN does
// (include/uapi/linux/sockios.h; the same numbers on every architecture).
const (
	ioctlFIOSETOWN = 0x8901
	ioctlSIOCSPGRP = 0x8902
)

// metaMode is what commandFilterLandlock does for the metadata gate.
type metaMode int

const (
	metaOff      metaMode = iota // no gate: the calls run as the filter lets them
	metaOn                       // the calls that pass go to the gate
	metaRootless                 // and commands stay dumpable (a root-less supervisor)
)

// commandFilterLandlock is what the Landlock backend refuses to commands
// beyond the socket filter (which binds the worker too). Without PID and
// network namespaces the worker and the host's sockets are reachable by
// number and by name, so:
//   - prlimit64(2) of any process but the caller's own (pid 0): every
//     thread id of the worker names the worker, and an RLIMIT_NOFILE of 0
//     set on it through one stops it from opening /proc to find what to
//     kill at the session's end (review: prlimit --pid TID --nofile=0:0);
//   - the scheduling and placement of any process but the caller's own:
//     sched_setscheduler/setparam/setattr/setaffinity, migrate_pages and
//     move_pages of a pid other than 0, setpriority and ioprio_set of
//     anything but the caller (a process group, or PRIO_USER: every
//     process of the uid). Without a PID namespace a command could make
//     the worker and any process of its uid outside the sandbox SCHED_IDLE,
//     nice 19, I/O-idle or pinned to one CPU, which nothing of that uid
//     can undo (second review; the native backend's PID namespace hides
//     those processes, setpriority(PRIO_USER) included). A command's
//     pthread_setaffinity_np on its own threads (a tid) is refused too;
//   - the owners of SIGIO (fcntl F_SETOWN of the worker's pid or process
//     group, F_SETOWN_EX, whose owner sits behind a pointer, and the
//     socket ioctls FIOSETOWN/SIOCSPGRP, also behind one): with F_SETSIG
//     SIGKILL a write to a pipe would deliver SIGKILL to the worker, and
//     the thread commands fork from, the worker's thread group leader, is
//     in the commands' own Landlock domain, so the signal scope cannot
//     refuse it (fcntl(2) F_SETSIG);
//   - socketpair(2) of any type but SOCK_STREAM and SOCK_SEQPACKET: a
//     datagram end (SOCK_RAW is made SOCK_DGRAM by af_unix) can sendto(2)
//     any named unix datagram socket of the host (/dev/log, journald,
//     sd_notify), which Landlock before ABI 9 cannot refuse by path;
//   - kill(-1) and rt_sigqueueinfo(-1), which would reach the worker's
//     leader, in the commands' domain;
//   - with network none, bind(2) and connect(2): every socket a command
//     can hold is a socketpair end (socket(2) is refused), which needs
//     neither; bind would take an abstract unix name in the host's
//     network namespace (squatting it for the host's services; the scope
//     refuses connects and sends, not binds).
//
// Classic BPF on struct seccomp_data as in socketFilter.
//
// tids, given when commands get no scoped domain of their own (before ABI
// 6), are worker thread ids whose kill(2) and rt_sigqueueinfo(2) are
// refused as well (the socket filter refuses those of the pid only).
func commandFilterLandlock(networkNone bool, meta metaMode, worker int, tids []int) ([]unix.SockFilter, error) {
	a, err := newBPFFilter()
	if err != nil {
		return nil, err
	}
	a.jump(jeq, unix.SYS_PRLIMIT64, "self", "")
	for _, nr := range []uint32{unix.SYS_SCHED_SETSCHEDULER, unix.SYS_SCHED_SETPARAM, unix.SYS_SCHED_SETATTR,
		unix.SYS_SCHED_SETAFFINITY, unix.SYS_MIGRATE_PAGES, unix.SYS_MOVE_PAGES} {
		a.jump(jeq, nr, "self", "")
	}
	a.jump(jeq, unix.SYS_SETPRIORITY, "setpriority", "")
	a.jump(jeq, unix.SYS_IOPRIO_SET, "ioprio", "")
	a.jump(jeq, unix.SYS_KILL, "killall", "")
	a.jump(jeq, unix.SYS_RT_SIGQUEUEINFO, "killall", "")
	a.jump(jeq, unix.SYS_FCNTL, "fcntl", "")
	a.jump(jeq, unix.SYS_IOCTL, "ioctl", "")
	if networkNone {
		a.jump(jeq, unix.SYS_BIND, "deny", "")
		a.jump(jeq, unix.SYS_CONNECT, "deny", "")
	}
	// System V IPC and POSIX message queues: without an IPC namespace
	// of its own, a command would attach to the shared memory, queues
	// and semaphores of the user's host programs by id or name (an X
	// server's MIT-SHM segments, a database's), and what it made would
	// outlive the session and reach the next one: a per-call pool's next
	// call, as review 24 found. Refused (EACCES), as the namespace
	// sandbox's private IPC namespace would leave nothing to reach.
	for _, nr := range landlockIPCCalls {
		a.jump(jeq, nr, "deny", "")
	}
	// setxattr(2) and its kin: a POSIX ACL (system.posix_acl_access) is
	// chmod by another name (others rw- on a 0600 file, review 29's
	// area), and removing one can widen access too. The name is behind
	// a pointer seccomp cannot read, so every extended attribute write
	// is refused, with EOPNOTSUPP: what cp -a, rsync -X and tar --xattrs
	// take for a file system without them, and go on.
	for _, nr := range landlockXattrWrites {
		a.jump(jeq, nr, "notsup", "")
	}
	// chown(2) and its kin with a group: the owner cannot change without
	// CAP_CHOWN, which no command has, but the group can, to any group of
	// the caller's, and a group-writable file then reaches every member
	// (the same grant as chmod g+w, review 25's class). A group of -1
	// (unchanged) passes, and so does the caller's own group (root's tar
	// restoring 0:0, cp -p): the caller's files are in it already.
	egid := uint32(os.Getegid())
	a.jump(jeq, unix.SYS_FCHOWN, "chown2", "")
	a.jump(jeq, unix.SYS_FCHOWNAT, "chown3", "")
	for _, nr := range sysChownPath() {
		a.jump(jeq, nr, "chown2", "")
	}
	// file_setattr(2) (Linux 6.17): the same flags by path, without an
	// open Landlock could refuse.
	a.jump(jeq, unix.SYS_FILE_SETATTR, "eperm", "")
	a.jump(jeq, unix.SYS_FCHMOD, "chmod1", "")
	a.jump(jeq, unix.SYS_FCHMODAT, "chmod2", "")
	a.jump(jeq, unix.SYS_FCHMODAT2, "chmod2", "")
	if nr, ok := sysChmod(); ok {
		a.jump(jeq, nr, "chmod1", "")
	}
	// With the metadata gate, a mode change that passes the rule below
	// and every time change go to the supervisor (notify.MetaGate),
	// which makes them only on files Landlock lets the command write.
	chmodOK := "allow"
	if meta != metaOff {
		chmodOK = "notify"
		_, _, utimes := notify.MetaCalls()
		for _, nr := range utimes {
			a.jump(jeq, nr, "notify", "")
		}
	}
	if meta == metaRootless {
		// A root-less supervisor reads a command's calls with the
		// command's own rights (process_vm_readv, pidfd_getfd: ptrace
		// access), which a command that made itself non-dumpable takes
		// away: its every chmod and touch would fail, in the workspace
		// too (found by review). prctl(PR_SET_DUMPABLE, 0) fails with
		// EPERM instead; ssh-agent and its kin go on without it.
		a.jump(jeq, unix.SYS_PRCTL, "prctl", "")
	}
	a.jump(jeq, unix.SYS_SOCKETPAIR, "socketpair", "allow")
	// prlimit64(pid, ...) and the calls that change another process's
	// scheduling or memory placement: only pid 0, the caller itself
	// (what getrlimit, setrlimit, ulimit, nice, chrt and taskset on
	// themselves use).
	a.label("self")
	a.stmt(ld, arg(0))
	a.jump(jeq, 0, "allow", "deny")
	// setpriority(which, who, ...) and ioprio_set(which, who, ...): only
	// the caller itself (PRIO_PROCESS / IOPRIO_WHO_PROCESS, who 0); never
	// a process group or every process of a uid.
	a.label("setpriority")
	a.stmt(ld, arg(0))
	a.jump(jeq, 0 /* PRIO_PROCESS */, "", "deny")
	a.stmt(ld, arg(1))
	a.jump(jeq, 0, "allow", "deny")
	a.label("ioprio")
	a.stmt(ld, arg(0))
	a.jump(jeq, 1 /* IOPRIO_WHO_PROCESS */, "", "deny")
	a.stmt(ld, arg(1))
	a.jump(jeq, 0, "allow", "deny")
	// kill(-1) reaches the worker through its leader, which is in the
	// commands' domain (the socket filter leaves it to the scope).
	a.label("killall")
	a.stmt(ld, arg(0))
	for _, tid := range tids {
		a.jump(jeq, uint32(tid), "deny", "")
	}
	a.jump(jeq, 0xffffffff, "deny", "allow")
	a.label("fcntl")
	a.stmt(ld, arg(1))
	a.jump(jeq, unix.F_SETOWN_EX, "deny", "")
	a.jump(jeq, unix.F_SETOWN, "", "allow")
	a.stmt(ld, arg(2))
	a.jump(jeq, uint32(worker), "deny", "")
	a.jump(jeq, uint32(-worker), "deny", "allow")
	a.label("ioctl")
	a.stmt(ld, arg(1))
	// Inode flags and project ids (chattr): Landlock's ioctl right
	// covers device files only, and the owner may set append-only-free
	// flags (+S, +A, +d) and, outside a user namespace, the project id
	// that project quotas count by, on a read-only or hidden file of the
	// host (review 30). The request is an unsigned int: its low word.
	for _, req := range inodeIoctls {
		a.jump(jeq, req, "eperm", "")
	}
	a.jump(jeq, ioctlFIOSETOWN, "deny", "")
	a.jump(jeq, ioctlSIOCSPGRP, "deny", "allow")
	// chmod(path, mode), fchmod(fd, mode): mode is argument 1;
	// fchmodat(dirfd, path, mode[, flags]): argument 2. Landlock has no
	// right for chmod, and the caller owns what the command can name
	// (a root caller: /etc/passwd): a mode that lets the group or others
	// write would let any local user write code the host runs later
	// (an rc file, a protected .git/config, a system file). Refused; a
	// command may still set the other bits on what it owns (npm's and
	// pip's 0755 scripts). What remains is listed in LandlockGaps (review
	// 25).
	a.label("chmod1")
	a.stmt(ld, arg(1))
	a.jump(jset, 0o022, "deny", chmodOK)
	a.label("chmod2")
	a.stmt(ld, arg(2))
	a.jump(jset, 0o022, "deny", chmodOK)
	// With the metadata gate, a chown that passes goes to the supervisor
	// too: every chown of a file clears its set-id bits and file
	// capabilities, even to the same owner (found by review: `chown 0:0
	// /usr/bin/sudo` from a root caller's command).
	a.label("chown2")
	a.stmt(ld, arg(2))
	a.jump(jeq, 0xffffffff, chmodOK, "")
	a.jump(jeq, egid, chmodOK, "eperm")
	a.label("chown3")
	a.stmt(ld, arg(3))
	a.jump(jeq, 0xffffffff, chmodOK, "")
	a.jump(jeq, egid, chmodOK, "eperm")
	a.label("socketpair")
	a.stmt(ld, arg(1))
	a.stmt(and, 0xf) // SOCK_TYPE_MASK: without SOCK_CLOEXEC, SOCK_NONBLOCK
	a.jump(jeq, unix.SOCK_STREAM, "allow", "")
	a.jump(jeq, unix.SOCK_SEQPACKET, "allow", "deny")
	a.label("allow")
	a.stmt(ret, unix.SECCOMP_RET_ALLOW)
	a.label("deny")
	a.stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.EACCES))
	a.label("eperm")
	a.stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM))
	a.label("notsup")
	a.stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.EOPNOTSUPP))
	if meta != metaOff {
		a.label("notify")
		a.stmt(ret, unix.SECCOMP_RET_USER_NOTIF)
	}
	if meta == metaRootless {
		a.label("prctl")
		a.stmt(ld, arg(0))
		a.jump(jeq, unix.PR_SET_DUMPABLE, "", "allow2")
		a.stmt(ld, arg(1))
		a.jump(jeq, 0, "eperm2", "allow2")
		a.label("allow2")
		a.stmt(ret, unix.SECCOMP_RET_ALLOW)
		a.label("eperm2")
		a.stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM))
	}
	return a.done()
}

// landlockIPCCalls are the System V IPC and POSIX message queue calls a
// Landlock session's commands may not make (commandFilterLandlock). The
// ones that take an id or a descriptor are refused too: an id is a small
// number, guessed without a get.
var landlockIPCCalls = []uint32{
	unix.SYS_SHMGET, unix.SYS_SHMAT, unix.SYS_SHMCTL,
	unix.SYS_MSGGET, unix.SYS_MSGSND, unix.SYS_MSGRCV, unix.SYS_MSGCTL,
	unix.SYS_SEMGET, unix.SYS_SEMOP, unix.SYS_SEMTIMEDOP, unix.SYS_SEMCTL,
	unix.SYS_MQ_OPEN, unix.SYS_MQ_UNLINK, unix.SYS_MQ_TIMEDSEND, unix.SYS_MQ_TIMEDRECEIVE,
	unix.SYS_MQ_NOTIFY, unix.SYS_MQ_GETSETATTR,
}

// landlockXattrWrites are the calls that set or remove an extended
// attribute (commandFilterLandlock refuses them).
var landlockXattrWrites = []uint32{
	unix.SYS_SETXATTR, unix.SYS_LSETXATTR, unix.SYS_FSETXATTR, unix.SYS_SETXATTRAT,
	unix.SYS_REMOVEXATTR, unix.SYS_LREMOVEXATTR, unix.SYS_FREMOVEXATTR, unix.SYS_REMOVEXATTRAT,
}

// killDescendantsDeadline bounds killDescendants' passes; the supervisor
// waits longer than this before it kills the worker (closeLandlock).
const killDescendantsDeadline = 10 * time.Second

// killDescendants kills every process the Landlock worker started and
// every orphan reparented to it (it is their subreaper), until none is
// left: with no PID namespace, nothing else ends them with the session.
// Each pass SIGKILLs the worker's children; a child's own children are
// reparented to the worker when it dies and are killed by the next pass.
//
// It fails closed: when the children cannot be listed (/proc/self/task
// unreadable: an fd limit, a /proc gone), "none" is never assumed. With
// the signal scope (scoped) it then kills with kill(-1) from a thread of
// the worker's own domain, which the scope confines to the processes of
// that domain and the domains below it: the session's, and no other
// process of the uid (the worker itself is spared by kill(-1)). Without
// it, it kills the process groups of the commands it knows (known). It
// reports the failure either way.
func killDescendants(scoped bool, known []int) error {
	return killDescendantsOf(children, scoped, known)
}

// killDescendantsOf is killDescendants with the listing of children given.
func killDescendantsOf(children func() ([]int, error), scoped bool, known []int) error {
	deadline := time.Now().Add(killDescendantsDeadline)
	for time.Now().Before(deadline) {
		kids, err := children()
		if err != nil {
			if scoped {
				killScoped()
			}
			for _, pid := range known {
				unix.Kill(-pid, unix.SIGKILL)
				unix.Kill(pid, unix.SIGKILL)
			}
			reapAll()
			return fmt.Errorf("list the worker's children: %w", err)
		}
		if len(kids) == 0 {
			return nil
		}
		for _, pid := range kids {
			unix.Kill(pid, unix.SIGKILL)
			// Its process group too: a command is a group leader.
			unix.Kill(-pid, unix.SIGKILL)
		}
		reapAll()
		time.Sleep(time.Millisecond)
	}
	return errors.New("processes of the session were still alive after 10 s of killing")
}

// killScoped sends SIGKILL with kill(-1) from a thread other than the
// main one: the main thread (forkTid) is in the commands' domain and its
// filter refuses kill(-1); every other thread is in the worker's, whose
// signal scope lets kill(-1) reach the session's processes only.
func killScoped() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never the main thread: it is locked to main
		defer runtime.UnlockOSThread()
		if unix.Gettid() != os.Getpid() {
			unix.Kill(-1, unix.SIGKILL)
		}
	}()
	<-done
}

// reapAll reaps what died (the reaper goroutine may race us for it; either
// one reaping is fine) so that the next pass sees their orphans.
func reapAll() {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG|unix.WALL, nil)
		if err == unix.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}

// children lists the worker's children (of all its threads), from
// /proc/self/task/*/children (CONFIG_PROC_CHILDREN), zombies included. An
// error means they could not be listed, never that there are none.
func children() ([]int, error) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		if errors.Is(err, os.ErrNotExist) {
			continue // the thread ended meanwhile
		}
		if err != nil {
			return nil, err
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				out = append(out, pid)
			}
		}
	}
	return out, nil
}
