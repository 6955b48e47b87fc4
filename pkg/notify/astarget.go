package notify

import (
	"bytes"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"
)

// procStatus is what the gate reads of /proc/TID/status: the uids and
// gids (real, effective, saved, file system), the supplementary groups
// and the effective capabilities.
type procStatus struct {
	uid, gid [4]uint32
	groups   []uint32
	capEff   uint64
}

// parseStatus reads the lines of /proc/TID/status that procStatus needs,
// without a string per line or field (the first version's Split and
// Fields cost more than the read). Uid, Gid and CapEff must all be there.
func parseStatus(b []byte) (procStatus, error) {
	var st procStatus
	var have int
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte("\n"))
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		switch string(k) { // no allocation: the compiler compares in place
		case "Uid", "Gid":
			ids := &st.uid
			if k[0] == 'G' {
				ids = &st.gid
			}
			n := 0
			for f := range bytes.FieldsSeq(v) {
				id, ok := parseUint(f, 10, 32)
				if n == 4 || !ok {
					return st, unix.EINVAL
				}
				ids[n] = uint32(id)
				n++
			}
			if n != 4 {
				return st, unix.EINVAL
			}
			if k[0] == 'U' {
				have |= 1
			} else {
				have |= 2
			}
		case "Groups":
			for f := range bytes.FieldsSeq(v) {
				id, ok := parseUint(f, 10, 32)
				if !ok {
					return st, unix.EINVAL
				}
				st.groups = append(st.groups, uint32(id))
			}
		case "CapEff":
			caps, ok := parseUint(bytes.TrimSpace(v), 16, 64)
			if !ok {
				return st, unix.EINVAL
			}
			st.capEff = caps
			have |= 4
		}
	}
	if have != 7 {
		return st, unix.EINVAL
	}
	return st, nil
}

// parseUint parses b, digits of base 10 or 16 (lower case, as /proc
// writes them) that fit in bits, without a string.
func parseUint(b []byte, base, bits uint) (uint64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var n uint64
	for _, ch := range b {
		var d uint64
		switch {
		case ch >= '0' && ch <= '9':
			d = uint64(ch - '0')
		case base == 16 && ch >= 'a' && ch <= 'f':
			d = uint64(ch-'a') + 10
		default:
			return 0, false
		}
		if n > (1<<bits-1-d)/uint64(base) {
			return 0, false // overflow
		}
		n = n*uint64(base) + d
	}
	return n, true
}

// creds returns the calling thread's credentials, read once per call: the
// gate's permission check and asTarget both need them. A thread's first
// call reads its /proc/TID/status (8-20 µs here, most of a root
// session's added connect cost: the kernel prints the whole file); its
// later calls take the ids from PIDFD_GET_INFO and the capabilities from
// capget(2) (~1 µs together), and the supplementary groups, which
// neither gives, from that first read (proc.groups).
//
// Keeping the groups is sound because only setgroups(2) changes a task's
// groups, and only its own (credentials are per task, changed by the
// task itself; exec and clone keep or copy them; credentials(7)). Every
// setgroups under the filter notifies, and the first one, in any thread,
// ends the keeping for the Server's life (groupsMoved, set before the
// call goes on). A per-thread mark would not do: when a thread that is
// not the leader execs, it takes over the leader's id and struct pid
// (de_thread), and with it the leader's entry and kept groups. Until any
// setgroups, the threads of one process all hold the groups the process
// had when the filter was installed, so that entry's groups are right.
// The worker clears the groups before it installs the filter
// (SetIdentity), so a session that never calls setgroups keeps them.
func (c *SockCall) creds() (*procStatus, error) {
	if c.cred != nil {
		return c.cred, nil
	}
	if st, ok := c.fastCreds(); ok {
		c.cred = st
		return st, nil
	}
	b, err := c.status()
	if err != nil {
		return nil, err
	}
	st, err := parseStatus(b)
	if err != nil {
		return nil, err
	}
	if p := c.proc; p != nil && p.exact {
		c.srv.mu.Lock()
		p.groups, p.hasGroups = st.groups, true
		c.srv.mu.Unlock()
	}
	c.cred = &st
	return c.cred, nil
}

// fastCreds is creds without the status read, when the thread's groups
// are kept and the kernel has PIDFD_GET_INFO (6.13).
func (c *SockCall) fastCreds() (*procStatus, bool) {
	p, s := c.proc, c.srv
	if p == nil || s == nil || !p.exact || s.groupsMoved.Load() || s.noPidfdInfo.Load() {
		return nil, false
	}
	s.mu.Lock()
	groups, ok := p.groups, p.hasGroups
	s.mu.Unlock()
	if !ok {
		return nil, false
	}
	// capget names the thread by its id, which is the thread's while it
	// lives: the pidfd read that follows fails once the thread is gone,
	// so a success there shows the id named this thread at the capget
	// too (an id is reused only after its thread is gone).
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3, Pid: int32(c.Pid)}
	var data [2]unix.CapUserData
	if _, _, e := unix.RawSyscall(unix.SYS_CAPGET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return nil, false
	}
	info := unix.PidfdInfo{Mask: unix.PIDFD_INFO_CREDS}
	if err := unix.IoctlPidfdInfo(p.pidfd, &info); err != nil {
		if err == unix.ENOTTY || err == unix.EINVAL {
			s.noPidfdInfo.Store(true)
		}
		return nil, false
	}
	if info.Mask&unix.PIDFD_INFO_CREDS == 0 {
		return nil, false
	}
	return &procStatus{
		uid:    [4]uint32{info.Ruid, info.Euid, info.Suid, info.Fsuid},
		gid:    [4]uint32{info.Rgid, info.Egid, info.Sgid, info.Fsgid},
		groups: groups, // shared with the entry: read, never written
		capEff: uint64(data[1].Effective)<<32 | uint64(data[0].Effective),
	}, true
}

// status returns /proc/TID/status of the target (creds). It is read through the call's proc (the thread's
// own /proc/TID, never a later owner of its id), from a descriptor kept
// open across calls: a read at offset 0 makes the kernel write the file
// afresh (seq_file), and the open and close (~10 µs) are paid once per
// thread.
func (c *SockCall) status() ([]byte, error) {
	if c.statusBuf != nil {
		return c.statusBuf, nil
	}
	if c.proc == nil || c.srv == nil {
		return nil, unix.ESRCH
	}
	fd, err := c.srv.statusFD(c.proc)
	if err != nil {
		return nil, err
	}
	buf := c.scratch
	if len(buf) == 0 {
		buf = make([]byte, statusBufSize)
	}
	for {
		n, err := unix.Pread(fd, buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n < len(buf) {
			c.statusBuf = buf[:n]
			return c.statusBuf, nil
		}
		buf = make([]byte, 2*len(buf)) // a long Groups line
	}
}

// statusBufSize holds a /proc/TID/status with a short Groups line (~1.5
// KiB here); a longer one is read into a larger buffer made for it.
const statusBufSize = 4096

// threadCreds are the ids a thread of the supervisor holds of its own,
// read on that thread (raw syscalls: this thread's, not the process's).
type threadCreds struct {
	ruid, euid, suid, rgid, egid, sgid uint32
	groups                             []uint32
}

func readThreadCreds() (threadCreds, error) {
	var t threadCreds
	if _, _, e := unix.RawSyscall(unix.SYS_GETRESUID, uintptr(unsafe.Pointer(&t.ruid)), uintptr(unsafe.Pointer(&t.euid)), uintptr(unsafe.Pointer(&t.suid))); e != 0 {
		return t, e
	}
	if _, _, e := unix.RawSyscall(unix.SYS_GETRESGID, uintptr(unsafe.Pointer(&t.rgid)), uintptr(unsafe.Pointer(&t.egid)), uintptr(unsafe.Pointer(&t.sgid))); e != 0 {
		return t, e
	}
	n, _, e := unix.RawSyscall(unix.SYS_GETGROUPS, 0, 0, 0)
	if e != 0 {
		return t, e
	}
	t.groups = make([]uint32, n)
	if n > 0 {
		if _, _, e := unix.RawSyscall(unix.SYS_GETGROUPS, n, uintptr(unsafe.Pointer(&t.groups[0])), 0); e != 0 {
			return t, e
		}
	}
	return t, nil
}

func setGroups(g []uint32) unix.Errno {
	var gp unsafe.Pointer
	if len(g) > 0 {
		gp = unsafe.Pointer(&g[0])
	}
	_, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(g)), uintptr(gp), 0)
	return e
}

// servingThread is the id state of one of the Server's serving threads
// (follow), which is locked to its goroutine for the Server's life and
// ends with it (runtime.LockOSThread, never unlocked: Go then destroys the
// thread, so no other goroutine ever runs with the ids below).
type servingThread struct {
	// own are the thread's own ids (root's, groups cleared), given back
	// after a call (asTarget) or before one that needs them (release).
	own threadCreds
	// sticky: the thread may keep a target's ids between calls
	// (Options.OwnPIDNamespace; see take).
	sticky bool
	// held: the thread holds the target ids below now (from take to
	// release: within one call, and between calls on a sticky thread).
	held     bool
	uid, gid uint32
	groups   []uint32
	// caps are the thread's own capability sets (capget at the start),
	// written back as they are by capset (release). eff is the effective
	// set the thread has now (setEff).
	caps [2]unix.CapUserData
	eff  uint64
}

// stickyCaps is the effective set a thread has while it holds a target's
// ids: during the gate's path lookup and the call, and between calls on a
// sticky thread. It is what the reads of a target need, and nothing that
// overrides a permission check of the lookup or of the call itself:
//   - CAP_SYS_PTRACE: pidfd_getfd (PTRACE_MODE_ATTACH_REALCREDS), the
//     /proc/TID/root and cwd links and ns/user (PTRACE_MODE_READ_FSCREDS)
//     and process_vm_readv of a target that is not dumpable
//     (PR_SET_DUMPABLE 0), or whose ids are not all the held ones; ptrace(2),
//     "Ptrace access mode checking", proc(5). It overrides no file mode:
//     a path lookup made with it is checked like the target's own, except
//     for /proc magic links, which the gate never follows
//     (RESOLVE_NO_MAGICLINKS, openInRoot) and which a call runs through
//     only as the gate's own pin (/proc/PID/fd/N of this process: same
//     thread group, proc_fd_access_allowed). A call that is not made
//     through a pin runs with no capability at all (asTarget's eff).
//
// Not CAP_DAC_READ_SEARCH (found by review: with it the lookup walked
// directories the target may not search, and a sticky thread's ungated
// connect resolved the target's raw path with it: path_resolution(7)),
// not CAP_DAC_OVERRIDE or CAP_FOWNER (the kernel would pass the socket's
// write check for any target: the confused deputy asTarget exists to
// prevent; capabilities(7)), nor CAP_SETUID/CAP_SETGID (SCM_CREDENTIALS is
// refused anyway: translateControl), nor CAP_NET_ADMIN. A target's own
// CAP_DAC_READ_SEARCH or CAP_DAC_OVERRIDE in the sandbox's user namespace
// is honoured by the gate itself (UnixGate.lookup), on the inodes that
// namespace maps, as the kernel would.
const stickyCaps = 1 << unix.CAP_SYS_PTRACE

// newServingThread reads this thread's own ids (ownThreadCreds) and
// capabilities; sticky asks for a thread that may keep a target's ids
// between calls, which it does only when it may take the capabilities
// stickyCaps names (a root without them, in a container, switches per
// call).
func newServingThread(sticky bool) (*servingThread, error) {
	own, err := ownThreadCreds()
	if err != nil {
		return nil, err
	}
	th := &servingThread{own: own}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3} // Pid 0: this thread
	if _, _, e := unix.RawSyscall(unix.SYS_CAPGET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&th.caps[0])), 0); e != 0 {
		return nil, e
	}
	th.eff = uint64(th.caps[1].Effective)<<32 | uint64(th.caps[0].Effective)
	// Never on the process's main thread: its ids are the process's face
	// (/proc/PID/status, kill(PID) and prlimit(PID) are checked against
	// them, a peer's SO_PEERCRED pid names it), and Go does not end it
	// when a locked goroutine exits but parks it for good, with whatever
	// ids it holds then.
	if sticky && own.euid == 0 && own.suid == 0 && unix.Gettid() != unix.Getpid() {
		permitted := uint64(th.caps[1].Permitted)<<32 | uint64(th.caps[0].Permitted)
		th.sticky = permitted&stickyCaps == stickyCaps
	}
	return th, nil
}

// holdTarget makes the serving thread hold c's target's host ids with
// exactly stickyCaps effective (take), or finds it holding them already
// (a sticky thread, or an earlier step of this call), before anything is
// resolved or performed for c. It does nothing for a Server that does not
// switch ids (Options.AsTarget unset: a root-less supervisor, whose ids
// are the sandbox's). An errno refuses the call; c.tainted says the
// thread's ids are unknown.
func (c *SockCall) holdTarget() unix.Errno {
	if c.srv == nil || !c.srv.o.AsTarget {
		return 0
	}
	th := c.th
	if c.tainted || th == nil || th.own.euid != 0 {
		return unix.EACCES // fail closed: the thread cannot take ids
	}
	// Read through the call's proc: the ids are the target thread's own
	// (never those of a later owner of its id), with no ID_VALID after.
	cr, err := c.creds()
	if err != nil {
		return unix.EACCES // fail closed: whose call it is is unknown
	}
	uid, gid, groups := cr.uid[1], cr.gid[1], cr.groups
	if th.held && th.uid == uid && th.gid == gid && slices.Equal(th.groups, groups) {
		if !th.setEff(stickyCaps) {
			c.tainted = !th.release()
			return unix.EACCES
		}
		return 0
	}
	// Another target's ids, kept from an earlier call: root's first (a
	// thread with the target's ids and no CAP_SETUID may only go back to
	// its saved ids).
	if th.held && !th.release() {
		c.tainted = true
		return unix.EACCES
	}
	// Even a target whose ids are the thread's own (a root caller's
	// single-id sandbox, host uid 0 inside) is switched: its lookup and
	// call run with stickyCaps, not with root's capabilities, which
	// would search and write any directory and socket for it (its own
	// capabilities are those of its user namespace, on the inodes that
	// namespace maps: capabilities(7)).
	if !th.take(uid, gid, groups) {
		// Whatever part was taken is given back.
		c.tainted = !th.release()
		return unix.EACCES
	}
	return 0
}

// asTarget runs op on this goroutine's thread while the thread holds the
// target's host ids (holdTarget), then gives the thread its own ids back
// (unless it is sticky and stay: see take). A root supervisor that
// connects or sends on the sandbox's behalf would otherwise be the peer a
// host service sees (SO_PEERCRED, SCM_CREDENTIALS under SO_PASSCRED: uid
// 0) while the sandbox runs as unprivileged ids of its range: a service
// that trusts a root peer would trust the sandbox as root (the
// CVE-2020-15257 pattern). On that thread the kernel also checks the
// socket's write permission for the target's ids (effective and file
// system ids, groups; no capability that overrides it: stickyCaps). The
// real uid and gid are the target's too: SCM_CREDENTIALS carries the real
// ones.
//
// eff is the effective set op runs with: stickyCaps for a call made
// through the gate's pin (c.pinned), none for any other. Only the pin's
// /proc/PID/fd/N is ever walked with CAP_SYS_PTRACE: a path a handler
// passed as it came from the target (a Handler other than the gate that
// allows a path address) is resolved with no capability, as the target's
// own connect would be, never through /proc/PID/root of a process the
// target may not trace (found by review: a sticky thread made such a
// connect with CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH effective;
// proc(5), ptrace access mode).
//
// The thread is locked to its goroutine for the Server's life (follow),
// and the ids are set with raw syscalls, which change only the calling
// thread (glibc's and Go's wrappers change every thread), so no other
// goroutine ever runs with them. The saved uid stays the supervisor's
// (0) so that the thread may take its own ids back; if giving them back
// fails, asTarget reports the thread tainted: its goroutine ends still
// locked, and Go ends the thread with it. It reaches the pinned socket
// through /proc/self/fd, which the kernel allows a thread of the same
// thread group whatever its ids (proc_fd_access_allowed:
// same_thread_group).
func asTarget(c *SockCall, th *servingThread, stay bool, eff uint64, op func() (int64, unix.Errno)) (val int64, errno unix.Errno) {
	if errno := c.holdTarget(); errno != 0 {
		return 0, errno
	}
	if c.srv == nil || !c.srv.o.AsTarget {
		return 0, unix.EACCES // fail closed: not a Server that switches ids
	}
	if !th.setEff(eff) {
		c.tainted = !th.release()
		return 0, unix.EACCES
	}
	val, errno = op()
	// Kept after the call only on a sticky thread, for a call that asks
	// it (Server.stay), with stickyCaps again for the reads of the next.
	if stay && th.sticky && th.setEff(stickyCaps) {
		return val, errno
	}
	if !th.release() {
		c.tainted = true
	}
	return val, errno
}

// setEff makes eff (within the thread's own permitted set) its effective
// set; capset(2) with pid 0 changes this thread only. false: refused.
func (th *servingThread) setEff(eff uint64) bool {
	eff &= uint64(th.caps[1].Permitted)<<32 | uint64(th.caps[0].Permitted)
	if th.eff == eff {
		return true
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	data := th.caps
	data[0].Effective = uint32(eff)
	data[1].Effective = uint32(eff >> 32)
	if _, _, e := unix.RawSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		th.eff = ^uint64(0) // unknown
		return false
	}
	th.eff = eff
	return true
}

// take gives the thread the target's ids: groups, then the real,
// effective and file-system gid and uid (credentials(7): SO_PEERCRED
// reports the connecting thread's effective ids, SCM_CREDENTIALS its real
// ones, so both are the target's; CVE-2020-15257 is that pattern), and
// exactly stickyCaps effective. The saved uid and gid stay the
// supervisor's (0): they are what allows release to take root's ids back,
// and a saved uid of 0 is also what keeps the permitted capabilities
// through the switch (capabilities(7), "Effect of user ID changes on
// capabilities": they are cleared only when no uid is 0 any more), with
// the effective set cleared as the effective uid leaves 0 and then set to
// stickyCaps from the permitted set (capset). No securebit is needed.
//
// The thread holds these ids until release: within one call (the gate's
// lookup as the target, then the call), and on a sticky thread between
// calls too, for the reads of the calls it answers meanwhile. Sound
// between calls only where no process of the target's uid can name this
// thread:
//   - Signals: kill(2) and tgkill(2) accept a sender whose real or
//     effective uid is the target thread's real or saved uid
//     (kill_ok_by_cred), so a process of the held uid could signal the
//     whole supervisor through this thread's id. A sandbox with a PID
//     namespace of its own cannot name it (kill, tgkill and
//     pidfd_open take ids of the caller's namespace, and
//     pidfd_send_signal refuses a pidfd of a process outside it, as one
//     from SO_PEERPIDFD would be): Options.OwnPIDNamespace, which the
//     Landlock backend (no PID namespace) never sets. Host processes of
//     that uid outside any PID namespace could, as they could during a
//     per-call switch's window; the uids are the sandbox range's.
//   - Scheduling: setpriority(2), sched_setattr(2), sched_setaffinity(2)
//     and ioprio_set(2) accept a caller whose effective uid is the
//     thread's real or effective uid (set_one_prio_perm,
//     check_same_owner). A host process of the held uid could lower
//     this thread's priority (nice 19, SCHED_IDLE, one CPU, idle I/O
//     class): the calls it answers get slower, never different, and so
//     could that process slow the sandbox itself, whose threads have the
//     same uid. Nothing inside can name the thread (as for signals).
//   - ptrace: PTRACE_MODE_ATTACH needs the tracer's uid to equal the
//     thread's real, effective AND saved uids (saved 0 here), or
//     CAP_SYS_PTRACE over it; the process is not dumpable either once a
//     thread's effective uid changed (fs.suid_dumpable, commit_creds), and
//     the tracer's permitted set must include this thread's (full):
//     refused three times over (ptrace(2), "Ptrace access mode checking").
func (th *servingThread) take(uid, gid uint32, groups []uint32) bool {
	// The groups are set only when they differ from the thread's own,
	// which it cleared when it began serving (ownThreadCreds): a target
	// with none, as the worker leaves every command (SetIdentity), costs
	// no setgroups (~3 µs each way).
	th.held, th.uid, th.gid, th.groups = true, uid, gid, groups
	if !slices.Equal(groups, th.own.groups) && setGroups(groups) != 0 {
		return false
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(gid), uintptr(gid), uintptr(th.own.egid)); e != 0 {
		return false
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(th.own.euid)); e != 0 {
		return false
	}
	// The effective set is empty now if the effective uid left 0, full
	// if it stayed 0 (a target of uid 0): exactly stickyCaps either way.
	// The lookup the gate makes next is the target's: no capability that
	// overrides a directory's search bit (path_resolution(7),
	// capabilities(7): CAP_DAC_READ_SEARCH, CAP_DAC_OVERRIDE).
	if uid != 0 {
		th.eff = 0
	}
	return th.setEff(stickyCaps)
}

// release gives the thread its own ids back, uid first (the saved uid 0
// allows it), then its own capabilities (capset: an effective uid that
// stayed 0 kept the lowered set). false: the thread's ids are unknown
// (tainted: it serves nothing more).
func (th *servingThread) release() bool {
	own := &th.own
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(own.ruid), uintptr(own.euid), uintptr(own.suid)); e != 0 {
		return false
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(own.rgid), uintptr(own.egid), uintptr(own.sgid)); e != 0 {
		return false
	}
	if !slices.Equal(th.groups, own.groups) && setGroups(own.groups) != 0 {
		return false
	}
	if th.uid != 0 {
		// The effective uid's return to 0 copied the permitted set into
		// the effective one (capabilities(7)): no capset when that is
		// the thread's own effective set, as it is for root.
		th.eff = uint64(th.caps[1].Permitted)<<32 | uint64(th.caps[0].Permitted)
	}
	if !th.setEff(uint64(th.caps[1].Effective)<<32 | uint64(th.caps[0].Effective)) {
		return false
	}
	th.held, th.groups = false, nil
	return true
}

// ownThreadCreds clears the supplementary groups of this thread (a raw
// setgroups: this thread only) and reads the ids it then holds, which
// asTarget gives back after each call. A root thread loses nothing it
// needs with them: it reads /proc and takes descriptors by its
// capabilities, not by a group.
func ownThreadCreds() (threadCreds, error) {
	setGroups(nil) // if refused, they are kept: what is read below is restored
	return readThreadCreds()
}
