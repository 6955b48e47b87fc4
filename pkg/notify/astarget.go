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

// asTarget runs op on this goroutine's thread while the thread holds the
// target's host ids, then gives the thread its own ids back. A root
// supervisor that connects or sends on the sandbox's behalf would
// otherwise be the peer a host service sees (SO_PEERCRED, SCM_CREDENTIALS
// under SO_PASSCRED: uid 0) while the sandbox runs as unprivileged ids of
// its range: a service that trusts a root peer would trust the sandbox as
// root (the CVE-2020-15257 pattern). On that thread the kernel also checks
// the socket's write permission for the target's ids (effective and
// file-system ids, groups; the effective capabilities are cleared when
// the effective uid leaves 0, capabilities(7)). The real uid and gid are
// the target's too: SCM_CREDENTIALS carries the real ones.
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
func asTarget(c *SockCall, own *threadCreds, op func() (int64, unix.Errno)) (val int64, errno unix.Errno, tainted bool) {
	if own == nil || own.euid != 0 {
		return 0, unix.EACCES, false // fail closed: the thread cannot take ids
	}
	// Read through the call's proc: the ids are the target thread's own
	// (never those of a later owner of its id), with no ID_VALID after.
	cr, err := c.creds()
	if err != nil {
		return 0, unix.EACCES, false // fail closed: whose call it is is unknown
	}
	uid, gid, groups := cr.uid[1], cr.gid[1], cr.groups
	val, errno = 0, unix.EACCES
	// The groups are set only when they differ from the thread's own,
	// which it cleared when it began serving (ownThreadCreds): a target
	// with none, as the worker leaves every command (SetIdentity), costs
	// no setgroups (~3 µs each way).
	sameGroups := slices.Equal(groups, own.groups)
	if sameGroups || setGroups(groups) == 0 {
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(gid), uintptr(gid), uintptr(own.egid)); e == 0 {
			if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(own.euid)); e == 0 {
				val, errno = op()
			}
		}
	}
	// Back to the supervisor's own ids, uid first (the saved uid 0
	// allows it and brings the capabilities back for the rest).
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(own.ruid), uintptr(own.euid), uintptr(own.suid)); e != 0 {
		return val, errno, true
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(own.rgid), uintptr(own.egid), uintptr(own.sgid)); e != 0 {
		return val, errno, true
	}
	if !sameGroups && setGroups(own.groups) != 0 {
		return val, errno, true
	}
	return val, errno, false
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
