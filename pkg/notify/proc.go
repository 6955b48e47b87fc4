package notify

import (
	"strconv"

	"golang.org/x/sys/unix"
)

// The Server's entries per calling thread: descriptors that name the
// thread itself, opened once and kept while it lives.

// maxPidfds bounds the cached entries: up to four descriptors each.
const maxPidfds = 64

// proc holds descriptors of one thread that made calls, each naming the
// thread itself rather than its id: a pidfd (pidfd_getfd) and an O_PATH
// descriptor of its /proc/TID directory (its root, cwd and status are
// opened from there). A thread id can be reused once its thread died; a
// pidfd and a /proc/TID directory cannot: they hold the kernel's struct
// pid, which is never given another id, and once its thread is gone
// every use fails (ESRCH, ENOENT) instead of reaching the thread that
// took the id next. So what a cached proc reaches, if anything, is the
// thread whose call is being answered (a live thread's id is its own),
// and the /proc reads through dir need no ID_VALID check after them.
// The check is made once, when the entry is opened.
//
// refs counts the map's reference and each call's, under Server.mu: the
// descriptors are closed when the last goes, never while a call uses them
// (a number closed and reused under a call would name another file).
type proc struct {
	pidfd, dir int
	status     int // /proc/TID/status, read with pread; -1 until needed
	root       int // the thread's root (O_PATH); -1 until needed
	rootID     rootID
	// oldRoots are roots replaced by a newer one (rootFD), kept open
	// until the entry goes: a call still in flight may use one.
	oldRoots []int
	refs     int
	// exact: pidfd names this thread, not its thread group (openPidfd).
	exact bool
	// groups are the thread's supplementary groups as last read from its
	// status (hasGroups), kept under Server.mu for creds.
	groups    []uint32
	hasGroups bool
}

// rootID names a root directory: its inode and the mount it is seen on.
type rootID struct {
	major, minor uint32
	ino, mnt     uint64
}

func statRoot(dir int, name string, flags int) (rootID, error) {
	var st unix.Statx_t
	if err := unix.Statx(dir, name, flags, unix.STATX_INO|unix.STATX_MNT_ID, &st); err != nil {
		return rootID{}, err
	}
	return rootID{st.Dev_major, st.Dev_minor, st.Ino, st.Mnt_id}, nil
}

func (p *proc) close() {
	unix.Close(p.pidfd)
	unix.Close(p.dir)
	for _, fd := range append([]int{p.status, p.root}, p.oldRoots...) {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

// putLocked drops one reference of p (under mu).
func (s *Server) putLocked(p *proc) {
	p.refs--
	if p.refs == 0 {
		p.close()
	}
}

// put drops a call's reference of p.
func (s *Server) put(p *proc) {
	if p == nil {
		return
	}
	s.mu.Lock()
	s.putLocked(p)
	s.mu.Unlock()
}

// cachedProc returns the cached entry of tid with a reference, or nil.
func (s *Server) cachedProc(tid int) *proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.procs[tid]
	if p != nil {
		p.refs++
	}
	return p
}

// forget removes p from the cache: its thread is gone.
func (s *Server) forget(tid int, p *proc) {
	s.mu.Lock()
	if s.procs[tid] == p {
		delete(s.procs, tid)
		s.putLocked(p)
	}
	s.mu.Unlock()
}

// openProc opens a new entry for the call's thread, checked: the call
// still pending after the opens means its id named it during them. The
// entry is cached when there is room, and returned with a reference. A
// pidfd of the thread's group rather than of the thread (a kernel before
// 6.9, a thread that is not the leader) is never cached: it would go on
// working after the thread ended, on the fd table of a process whose
// thread id the kernel may give to a thread of another process next.
func (s *Server) openProc(c *SockCall) (*proc, unix.Errno) {
	pidfd, exact, err := openPidfd(c.Pid)
	if err != nil {
		return nil, unix.ESRCH
	}
	dir, err := unix.Open("/proc/"+strconv.Itoa(c.Pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(pidfd)
		return nil, unix.ESRCH
	}
	p := &proc{pidfd: pidfd, dir: dir, status: -1, root: -1, refs: 1, exact: exact}
	if !c.Valid() { // the id may have named a process that reused it
		p.close()
		return nil, unix.ESRCH
	}
	s.mu.Lock()
	if s.procs != nil && len(s.procs) >= maxPidfds {
		s.sweepPidfdsLocked()
	}
	if exact && s.procs != nil && len(s.procs) < maxPidfds {
		if old := s.procs[c.Pid]; old != nil {
			s.putLocked(old) // dead: this thread has its id now
		}
		s.procs[c.Pid] = p
		p.refs++
	}
	s.mu.Unlock()
	return p, 0
}

// statusFD returns p's /proc/TID/status descriptor, opened on first use.
func (s *Server) statusFD(p *proc) (int, error) {
	return s.procFD(p, &p.status, "status", unix.O_RDONLY)
}

// rootFD returns the root directory of p's thread (/proc/TID/root,
// followed through p.dir: the thread's own, or an error once it is gone).
// The descriptor is kept for the thread's next calls. When the root may
// change (check: chroot(2), pivot_root(2), setns(2) or unshare(2) of the
// mount namespace allowed, which no shipped seccomp profile does), one
// statx of the link at each call compares it with the kept one, and a
// changed root is opened again, so that a program inside that confines
// itself with chroot stays confined (found by review: the kept root let
// it reach sockets outside its chroot). Either way the gate decides on
// the inode it finds (by mount and allowed inode), so no root lets
// through a socket it would refuse. The replaced descriptor stays open
// until the entry goes (p.oldRoots): a thread waits in its call, but when
// another thread of its group execs, the leader's number, and with it
// this entry, moves to the exec'ing thread while the old leader's call
// may still be answered (found by review).
func (s *Server) rootFD(p *proc, check bool) (int, error) {
	var now rootID
	if check {
		var err error
		if now, err = statRoot(p.dir, "root", 0); err != nil {
			return -1, err
		}
	}
	s.mu.Lock()
	if p.root >= 0 && (!check || p.rootID == now) {
		fd := p.root
		s.mu.Unlock()
		return fd, nil
	}
	s.mu.Unlock()
	fd, err := unix.Openat(p.dir, "root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	// The identity of the directory opened, which may be newer than now.
	id, err := statRoot(fd, "", unix.AT_EMPTY_PATH)
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	s.mu.Lock()
	if p.root >= 0 {
		if len(p.oldRoots) == maxOldRoots { // bounded: a program that
			unix.Close(p.oldRoots[0]) // chroots in a loop
			p.oldRoots = p.oldRoots[1:]
		}
		p.oldRoots = append(p.oldRoots, p.root)
	}
	p.root, p.rootID = fd, id
	s.mu.Unlock()
	return fd, nil
}

// maxOldRoots bounds the replaced roots an entry keeps; a call in flight
// uses one for microseconds, while 16 replacements take a program 16
// chroots between its calls.
const maxOldRoots = 16

// procFD opens name beneath p.dir into *slot once; under mu, so that
// the descriptor is published to the calls that follow (a thread's next
// call may be answered on another goroutine).
func (s *Server) procFD(p *proc, slot *int, name string, flags int) (int, error) {
	s.mu.Lock()
	fd := *slot
	s.mu.Unlock()
	if fd >= 0 {
		return fd, nil
	}
	fd, err := unix.Openat(p.dir, name, flags|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	s.mu.Lock()
	if *slot < 0 {
		*slot = fd
	} else {
		unix.Close(fd)
		fd = *slot
	}
	s.mu.Unlock()
	return fd, nil
}

// getfd duplicates the target thread's fd (pidfd_getfd), through the
// call's proc, opened on first use.
func (s *Server) getfd(c *SockCall, fd int) (int, unix.Errno) {
	if c.proc == nil {
		if c.proc = s.cachedProc(c.Pid); c.proc != nil {
			got, err := pidfdGetfd(c.proc.pidfd, fd, 0)
			if err != unix.ESRCH {
				if err != nil {
					return -1, errnoOf(err)
				}
				return got, 0
			}
			// A dead thread's entry: its id now names the target.
			s.forget(c.Pid, c.proc)
			s.put(c.proc)
			c.proc = nil
		}
		var e unix.Errno
		if c.proc, e = s.openProc(c); e != 0 {
			return -1, e
		}
	}
	got, err := pidfdGetfd(c.proc.pidfd, fd, 0)
	if err != nil {
		return -1, errnoOf(err)
	}
	return got, 0
}

// sweepPidfdsLocked drops the cached entries of threads that ended, with
// one poll: a pidfd is readable once its thread (PIDFD_THREAD) or process
// has exited (pidfd_open(2)). Without it a sandbox that runs many short
// processes (a build) fills the cache with the dead and every later
// process opens its entry per call. Called under mu when the cache is
// full.
func (s *Server) sweepPidfdsLocked() {
	pids := make([]int, 0, len(s.procs))
	p := make([]unix.PollFd, 0, len(s.procs))
	for pid, e := range s.procs {
		pids = append(pids, pid)
		p = append(p, unix.PollFd{Fd: int32(e.pidfd), Events: unix.POLLIN})
	}
	if _, err := unix.Poll(p, 0); err != nil {
		return
	}
	for i := range p {
		if p[i].Revents != 0 {
			e := s.procs[pids[i]]
			delete(s.procs, pids[i])
			s.putLocked(e)
		}
	}
}

// writeMem copies buf to addr in the calling thread's memory (sendmmsg's
// msg_len fields), through /proc/TID/mem opened beneath the thread's own
// /proc directory (c.proc.dir, checked to name the target when opened).
// Never by pid number (process_vm_writev): a send may block in the
// supervisor for as long as the receiver likes, the sandbox may kill the
// caller meanwhile, and its host pid may then be another process's, in
// which a write by number would land (an attacker-chosen word at an
// attacker-chosen address of a host process: found by review). The file
// names the thread's memory for good: opened once the thread is gone it
// fails, and a write into an address space nobody uses any more writes
// nothing (proc(5), /proc/pid/mem; mm_access in fs/proc/base.c). One
// exception stays inside the sandbox: when another thread of the caller's
// group execs, the leader's number and /proc entry move to it, and a file
// opened after that writes into the new image: a process of the same
// sandbox, never the host.
func (s *Server) writeMem(c *SockCall, addr uint64, buf []byte) error {
	if c.proc == nil || addr == 0 || addr >= 1<<63 {
		return unix.EFAULT
	}
	if !c.hasMem {
		fd, err := unix.Openat(c.proc.dir, "mem", unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		c.mem, c.hasMem = fd, true
		c.closeLater(fd)
	}
	n, err := unix.Pwrite(c.mem, buf, int64(addr))
	if err != nil {
		return err
	}
	if n != len(buf) {
		return unix.EFAULT
	}
	return nil
}

// pidfdGetfd is pidfd_getfd(2); a test makes it fail as a container
// runtime's default seccomp profile does (EPERM without CAP_SYS_PTRACE).
var pidfdGetfd = unix.PidfdGetfd
