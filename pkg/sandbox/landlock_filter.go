package sandbox

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"unsafe"

	"github.com/nsbox/nsbox/pkg/internal/cbpf"
	"github.com/nsbox/nsbox/pkg/notify"
	"golang.org/x/sys/unix"
)

// The Landlock backend's seccomp filters, as classic BPF assembled here:
// the socket filter every thread of the worker gets and the filter of its
// commands (commandFilterLandlock), with the system calls Landlock cannot
// refuse by path.

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
// BTRFS_IOC_SUBVOL_SETFLAGS (_IOW(0x94, 26, __u64)); and the file
// systems' own spellings of the same kind, which they take from an owner
// on a read-only fd too: ext4's EXT4_IOC_SETVERSION (_IOW('f', 4, long);
// review 67 changed a protected ~/.bashrc's generation with it), and
// btrfs's BTRFS_IOC_SET_RECEIVED_SUBVOL (_IOWR(0x94, 37, 200 bytes), and
// the 192-byte packed form the 64-bit kernel serves as well), which
// rewrites what `btrfs receive` later trusts of a subvolume.
const (
	fsIocSetflags32          = 0x40046602
	fsIocFssetxattr          = 0x401c5820
	fsIocSetversion          = 0x40087602
	fsIocSetversion32        = 0x40047602
	ext4IocSetversion        = 0x40086604
	btrfsIocSubvolSetflag    = 0x4008941a
	btrfsIocSetReceivedSubv  = 0xc0c89425
	btrfsIocSetReceivedSub32 = 0xc0c09425
	// BTRFS_IOC_SNAP_CREATE(_V2) and SNAP_DESTROY(_V2): a snapshot of a
	// subvolume the caller owns copies what Landlock and the hides keep
	// from it into a writable directory (review 70; the default profile
	// refuses them too).
	btrfsIocSnapCreate    = 0x50009401
	btrfsIocSnapCreateV2  = 0x50009417
	btrfsIocSnapDestroy   = 0x5000940f
	btrfsIocSnapDestroyV2 = 0x5000943f
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
	fsIocSetversion, fsIocSetversion32, ext4IocSetversion,
	unix.FS_IOC_ENABLE_VERITY,
	unix.FS_IOC_SET_ENCRYPTION_POLICY, unix.FS_IOC_ADD_ENCRYPTION_KEY,
	unix.FS_IOC_REMOVE_ENCRYPTION_KEY, unix.FS_IOC_REMOVE_ENCRYPTION_KEY_ALL_USERS,
	btrfsIocSubvolSetflag, btrfsIocSetReceivedSubv, btrfsIocSetReceivedSub32,
	btrfsIocSnapCreate, btrfsIocSnapCreateV2, btrfsIocSnapDestroy, btrfsIocSnapDestroyV2,
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

// Classic BPF on struct seccomp_data, for the filters below.
const (
	ld   = cbpf.LdAbs
	jeq  = cbpf.JEq
	jge  = cbpf.JGe
	jset = cbpf.JSet // jumps when the accumulator has any bit of k set
	and  = cbpf.And
	ret  = cbpf.Ret
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
	a := &bpfAsm{}
	a.Stmt(ld, 4)
	a.Jump(jeq, arch, "", "deny")
	a.Stmt(ld, 0)
	a.Jump(jge, 0x40000000, "deny", "") // x32
	return a, nil
}

// bpfAsm is the Landlock filters' assembler: the project's (cbpf), with
// the answers both filters share.
type bpfAsm struct{ cbpf.Asm }

// returns emits the answers both Landlock filters jump to: "allow",
// "deny" (EACCES), "eperm" and "notsup" (EOPNOTSUPP).
func (a *bpfAsm) returns() {
	a.Label("allow")
	a.Stmt(ret, unix.SECCOMP_RET_ALLOW)
	a.Label("deny")
	a.Stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.EACCES))
	a.Label("eperm")
	a.Stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM))
	a.Label("notsup")
	a.Stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.EOPNOTSUPP))
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
	a.Jump(jeq, unix.SYS_IO_URING_SETUP, "deny", "")
	a.Jump(jeq, unix.SYS_TKILL, "deny", "")
	// A /proc/PID directory fd is a pidfd too: its target cannot be told.
	a.Jump(jeq, unix.SYS_PIDFD_SEND_SIGNAL, "deny", "")
	a.Jump(jeq, unix.SYS_SOCKET, "socket", "")
	a.Jump(jeq, unix.SYS_KILL, "sig1", "")
	a.Jump(jeq, unix.SYS_RT_SIGQUEUEINFO, "sig1", "")
	a.Jump(jeq, unix.SYS_TGKILL, "sig2", "")
	a.Jump(jeq, unix.SYS_RT_TGSIGQUEUEINFO, "sig2", "")
	a.Jump(jeq, unix.SYS_PIDFD_OPEN, "target", "")
	a.Jump(jeq, unix.SYS_PRLIMIT64, "target", "allow")
	// Signal in args[1] (kill, rt_sigqueueinfo) or args[2] (tgkill,
	// rt_tgsigqueueinfo): 0 and SIGURG are harmless to the worker.
	a.Label("sig1")
	a.Stmt(ld, arg(1))
	a.JA("sigcheck")
	a.Label("sig2")
	a.Stmt(ld, arg(2))
	a.Label("sigcheck")
	a.Jump(jeq, 0, "allow", "")
	a.Jump(jeq, uint32(unix.SIGURG), "allow", "target")
	a.Label("target")
	a.Stmt(ld, arg(0))
	a.Jump(jeq, self, "deny", "")
	a.Jump(jeq, group, "deny", "")
	if scoped {
		a.JA("allow")
	} else {
		a.Jump(jeq, 0xffffffff, "deny", "allow") // kill(-1): every process the uid may signal
	}
	a.Label("socket")
	if allSockets {
		a.JA("deny")
	}
	a.Stmt(ld, arg(0)) // the family
	a.Jump(jeq, unix.AF_UNIX, "deny", "allow")
	a.returns()
	return a.Assemble()
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
	case w.setup.MetaGate && w.setup.MetaDumpable:
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
	metaRootless                 // and commands stay dumpable (a supervisor without CAP_SYS_PTRACE)
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
//   - socketpair(2) of another family than AF_UNIX, and of any type but
//     SOCK_STREAM and SOCK_SEQPACKET: a
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
	a.Jump(jeq, unix.SYS_PRLIMIT64, "self", "")
	for _, nr := range []uint32{unix.SYS_SCHED_SETSCHEDULER, unix.SYS_SCHED_SETPARAM, unix.SYS_SCHED_SETATTR,
		unix.SYS_SCHED_SETAFFINITY, unix.SYS_MIGRATE_PAGES, unix.SYS_MOVE_PAGES} {
		a.Jump(jeq, nr, "self", "")
	}
	a.Jump(jeq, unix.SYS_SETPRIORITY, "setpriority", "")
	a.Jump(jeq, unix.SYS_IOPRIO_SET, "ioprio", "")
	a.Jump(jeq, unix.SYS_KILL, "killall", "")
	a.Jump(jeq, unix.SYS_RT_SIGQUEUEINFO, "killall", "")
	a.Jump(jeq, unix.SYS_FCNTL, "fcntl", "")
	a.Jump(jeq, unix.SYS_IOCTL, "ioctl", "")
	if networkNone {
		a.Jump(jeq, unix.SYS_BIND, "deny", "")
		a.Jump(jeq, unix.SYS_CONNECT, "deny", "")
	}
	// System V IPC and POSIX message queues: without an IPC namespace
	// of its own, a command would attach to the shared memory, queues
	// and semaphores of the user's host programs by id or name (an X
	// server's MIT-SHM segments, a database's), and what it made would
	// outlive the session and reach the next one: a per-call pool's next
	// call, as review 24 found. Refused (EACCES), as the namespace
	// sandbox's private IPC namespace would leave nothing to reach.
	for _, nr := range landlockIPCCalls {
		a.Jump(jeq, nr, "deny", "")
	}
	// setxattr(2) and its kin: a POSIX ACL (system.posix_acl_access) is
	// chmod by another name (others rw- on a 0600 file, review 29's
	// area), and removing one can widen access too. The name is behind
	// a pointer seccomp cannot read, so every extended attribute write
	// is refused, with EOPNOTSUPP: what cp -a, rsync -X and tar --xattrs
	// take for a file system without them, and go on.
	for _, nr := range landlockXattrWrites {
		a.Jump(jeq, nr, "notsup", "")
	}
	// chown(2) and its kin with a group: the owner cannot change without
	// CAP_CHOWN, which no command has, but the group can, to any group of
	// the caller's, and a group-writable file then reaches every member
	// (the same grant as chmod g+w, review 25's class). A group of -1
	// (unchanged) passes, and so does the caller's own group (root's tar
	// restoring 0:0, cp -p): the caller's files are in it already.
	egid := uint32(os.Getegid())
	a.Jump(jeq, unix.SYS_FCHOWN, "chown2", "")
	a.Jump(jeq, unix.SYS_FCHOWNAT, "chown3", "")
	for _, nr := range sysChownPath() {
		a.Jump(jeq, nr, "chown2", "")
	}
	// file_setattr(2) (Linux 6.17): the same flags by path, without an
	// open Landlock could refuse.
	a.Jump(jeq, unix.SYS_FILE_SETATTR, "eperm", "")
	// Kernel keyrings, whatever the profile allows: without a user
	// namespace the user keyring (@u) and the persistent one
	// (KEYCTL_GET_PERSISTENT: where Fedora and RHEL keep Kerberos
	// tickets) are the caller's own, reachable by their ids too, and one
	// pooled call's key reached the next (review 70). The worker's new
	// session keyring covers @s only.
	for _, nr := range []uint32{unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY} {
		a.Jump(jeq, nr, "eperm", "")
	}
	a.Jump(jeq, unix.SYS_FCHMOD, "chmod1", "")
	a.Jump(jeq, unix.SYS_FCHMODAT, "chmod2", "")
	a.Jump(jeq, unix.SYS_FCHMODAT2, "chmod2", "")
	if nr, ok := sysChmod(); ok {
		a.Jump(jeq, nr, "chmod1", "")
	}
	// With the metadata gate, a mode change that passes the rule below
	// and every time change go to the supervisor (notify.MetaGate),
	// which makes them only on files Landlock lets the command write.
	chmodOK := "allow"
	if meta != metaOff {
		chmodOK = "notify"
		_, _, utimes := notify.MetaCalls()
		for _, nr := range utimes {
			a.Jump(jeq, nr, "notify", "")
		}
	}
	if meta == metaRootless {
		// A root-less supervisor reads a command's calls with the
		// command's own rights (process_vm_readv, pidfd_getfd: ptrace
		// access), which a command that made itself non-dumpable takes
		// away: its every chmod and touch would fail, in the workspace
		// too (found by review). prctl(PR_SET_DUMPABLE, 0) fails with
		// EPERM instead; ssh-agent and its kin go on without it.
		a.Jump(jeq, unix.SYS_PRCTL, "prctl", "")
	}
	a.Jump(jeq, unix.SYS_SOCKETPAIR, "socketpair", "allow")
	// prlimit64(pid, ...) and the calls that change another process's
	// scheduling or memory placement: only pid 0, the caller itself
	// (what getrlimit, setrlimit, ulimit, nice, chrt and taskset on
	// themselves use).
	a.Label("self")
	a.Stmt(ld, arg(0))
	a.Jump(jeq, 0, "allow", "deny")
	// setpriority(which, who, ...) and ioprio_set(which, who, ...): only
	// the caller itself (PRIO_PROCESS / IOPRIO_WHO_PROCESS, who 0); never
	// a process group or every process of a uid.
	a.Label("setpriority")
	a.Stmt(ld, arg(0))
	a.Jump(jeq, 0 /* PRIO_PROCESS */, "", "deny")
	a.Stmt(ld, arg(1))
	a.Jump(jeq, 0, "allow", "deny")
	a.Label("ioprio")
	a.Stmt(ld, arg(0))
	a.Jump(jeq, 1 /* IOPRIO_WHO_PROCESS */, "", "deny")
	a.Stmt(ld, arg(1))
	a.Jump(jeq, 0, "allow", "deny")
	// kill(-1) reaches the worker through its leader, which is in the
	// commands' domain (the socket filter leaves it to the scope).
	a.Label("killall")
	a.Stmt(ld, arg(0))
	for _, tid := range tids {
		a.Jump(jeq, uint32(tid), "deny", "")
	}
	a.Jump(jeq, 0xffffffff, "deny", "allow")
	a.Label("fcntl")
	a.Stmt(ld, arg(1))
	a.Jump(jeq, unix.F_SETOWN_EX, "deny", "")
	a.Jump(jeq, unix.F_SETOWN, "", "allow")
	a.Stmt(ld, arg(2))
	a.Jump(jeq, uint32(worker), "deny", "")
	a.Jump(jeq, uint32(-worker), "deny", "allow")
	a.Label("ioctl")
	a.Stmt(ld, arg(1))
	// Inode flags and project ids (chattr): Landlock's ioctl right
	// covers device files only, and the owner may set append-only-free
	// flags (+S, +A, +d) and, outside a user namespace, the project id
	// that project quotas count by, on a read-only or hidden file of the
	// host (review 30). The request is an unsigned int: its low word.
	for _, req := range inodeIoctls {
		a.Jump(jeq, req, "eperm", "")
	}
	a.Jump(jeq, ioctlFIOSETOWN, "deny", "")
	a.Jump(jeq, ioctlSIOCSPGRP, "deny", "allow")
	// chmod(path, mode), fchmod(fd, mode): mode is argument 1;
	// fchmodat(dirfd, path, mode[, flags]): argument 2. Landlock has no
	// right for chmod, and the caller owns what the command can name
	// (a root caller: /etc/passwd): a mode that lets the group or others
	// write would let any local user write code the host runs later
	// (an rc file, a protected .git/config, a system file). Refused; a
	// command may still set the other bits on what it owns (npm's and
	// pip's 0755 scripts). What remains is listed in LandlockGaps (review
	// 25). With the metadata gate every mode goes to the supervisor,
	// which refuses any change outside the writable places, so a
	// workspace file may be made group-writable as natively (tar and
	// cp -a of a umask-002 tree failed and left files 0600, found by
	// review 36).
	for _, mode := range []int{1, 2} { // "chmod1", "chmod2": the mode's argument
		a.Label("chmod" + strconv.Itoa(mode))
		if meta != metaOff {
			a.JA("notify")
		} else {
			a.Stmt(ld, arg(mode))
			a.Jump(jset, 0o022, "deny", chmodOK)
		}
	}
	// With the metadata gate, a chown that passes goes to the supervisor
	// too: every chown of a file clears its set-id bits and file
	// capabilities, even to the same owner (found by review: `chown 0:0
	// /usr/bin/sudo` from a root caller's command).
	for _, group := range []int{2, 3} { // "chown2", "chown3": the group's argument
		a.Label("chown" + strconv.Itoa(group))
		a.Stmt(ld, arg(group))
		a.Jump(jeq, 0xffffffff, chmodOK, "") // -1: the group unchanged
		a.Jump(jeq, egid, chmodOK, "eperm")
	}
	a.Label("socketpair")
	// Of the unix family only: socket(2) of every other family is
	// refused, but socketpair(2) would still reach a family's code (and
	// load its module: TIPC implements socketpair) (review 67).
	a.Stmt(ld, arg(0))
	a.Jump(jeq, unix.AF_UNIX, "", "deny")
	a.Stmt(ld, arg(1))
	a.Stmt(and, 0xf) // SOCK_TYPE_MASK: without SOCK_CLOEXEC, SOCK_NONBLOCK
	a.Jump(jeq, unix.SOCK_STREAM, "allow", "")
	a.Jump(jeq, unix.SOCK_SEQPACKET, "allow", "deny")
	a.returns()
	if meta != metaOff {
		a.Label("notify")
		a.Stmt(ret, unix.SECCOMP_RET_USER_NOTIF)
	}
	if meta == metaRootless {
		a.Label("prctl")
		a.Stmt(ld, arg(0))
		a.Jump(jeq, unix.PR_SET_DUMPABLE, "", "allow2")
		a.Stmt(ld, arg(1))
		a.Jump(jeq, 0, "eperm2", "allow2")
		a.Label("allow2")
		a.Stmt(ret, unix.SECCOMP_RET_ALLOW)
		a.Label("eperm2")
		a.Stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM))
	}
	return a.Assemble()
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
