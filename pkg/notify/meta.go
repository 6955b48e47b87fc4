package notify

import (
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The metadata gate: chmod(2) and utimensat(2) and their kin, for a
// sandbox whose file system boundary is Landlock's. Landlock has no right
// for either (landlock(7) lists none: a file's mode and times are
// metadata), so a command could change them on every file its uid owns
// that it can name, read-only and hidden ones included: make a private
// key readable by every local user, set the execute bit on a file the
// host runs, or give a file an old time so that make or a backup skips
// it. The sandbox's main filter hands these calls here
// (SECCOMP_RET_USER_NOTIF), and the gate performs each one only on a file
// that is, or lies beneath, an inode Landlock lets the sandbox write:
// what the mount namespace backend allows (a read-only bind answers
// EROFS there), answered here with Landlock's EACCES.

// Metadata calls the gate answers (SockCall.Syscall).
const (
	// Chmod is chmod(2), fchmod(2), fchmodat(2) and fchmodat2(2).
	Chmod Syscall = iota + 100
	// Utimes is utimensat(2), and utime(2), utimes(2) and futimesat(2)
	// where the architecture has them.
	Utimes
	// Chown is fchown(2) and fchownat(2), and chown(2) and lchown(2)
	// where the architecture has them: a chown changes a mode too (the
	// kernel clears set-user-ID and set-group-ID and drops file
	// capabilities on every chown of a file, even to the same owner).
	Chown
)

// MetaInode names an inode by its device (as stat(2)'s st_dev) and number.
type MetaInode struct{ Dev, Ino uint64 }

// MetaGate decides the metadata calls of a Landlock sandbox.
type MetaGate struct {
	writable map[fileID]bool
	onRefuse func(op, path string)
}

// NewMetaGate returns a gate that lets a call change the mode or times of
// a file that is one of writable, or lies beneath one of them (a
// directory): the inodes the sandbox's Landlock rules grant
// LANDLOCK_ACCESS_FS_WRITE_FILE on, the very inodes those rules hold
// (Landlock's rules are on inodes, and it decides by walking from a file
// up to the root: landlock(7)). onRefuse, if set, is called with the
// call's name and the refused file's path as the supervisor sees it.
func NewMetaGate(writable []MetaInode, onRefuse func(op, path string)) *MetaGate {
	g := &MetaGate{writable: map[fileID]bool{}, onRefuse: onRefuse}
	for _, w := range writable {
		g.writable[fileID{unix.Major(w.Dev), unix.Minor(w.Dev), w.Ino}] = true
	}
	return g
}

// legacyMetaCall is an older metadata call of the architecture
// (legacyMetaCalls) and the operation it is.
type legacyMetaCall struct {
	nr uint32
	op Syscall
}

// metaCall is a metadata call's arguments, as read from the target.
type metaCall struct {
	op       Syscall
	name     string // the system call, for reports
	dirfd    int    // AT_FDCWD, or the fd the path is relative to
	fd       int    // >= 0: the call names this fd itself (fchmod, futimens)
	path     string
	flags    int // AT_SYMLINK_NOFOLLOW, AT_EMPTY_PATH
	mode     uint32
	uid, gid uint32            // Chown's (-1: unchanged)
	times    *[2]unix.Timespec // nil: now
	emptyRef bool              // the path is empty and AT_EMPTY_PATH names dirfd
	// procFD: the path named the caller's own fd through /proc
	// (procFDPath): an O_PATH one is a file like any other there.
	procFD bool
	// leader: take fd from the thread group leader's table (tgid), not
	// the calling thread's.
	leader bool
	tgid   int
	// noop: utimensat with both times UTIME_OMIT, which the kernel
	// answers 0 before it looks the path up (do_utimes).
	noop bool
}

// metaOp says whether nr is a metadata call of the native ABI.
func metaOp(arch uint32, nr int32) bool {
	if arch != auditArch {
		return false
	}
	switch uintptr(nr) {
	case unix.SYS_FCHMOD, unix.SYS_FCHMODAT, unix.SYS_FCHMODAT2, unix.SYS_UTIMENSAT, unix.SYS_FCHOWN, unix.SYS_FCHOWNAT:
		return true
	}
	for _, l := range legacyMetaCalls {
		if uint32(nr) == l.nr {
			return true
		}
	}
	return false
}

// MetaCalls are the native system call numbers the gate answers: those a
// sandbox's filter hands over (SECCOMP_RET_USER_NOTIF) for it.
func MetaCalls() (chmod, chown, utimes []uint32) {
	chmod = []uint32{unix.SYS_FCHMOD, unix.SYS_FCHMODAT, unix.SYS_FCHMODAT2}
	chown = []uint32{unix.SYS_FCHOWN, unix.SYS_FCHOWNAT}
	utimes = []uint32{unix.SYS_UTIMENSAT}
	for _, l := range legacyMetaCalls {
		switch l.op {
		case Chmod:
			chmod = append(chmod, l.nr)
		case Chown:
			chown = append(chown, l.nr)
		default:
			utimes = append(utimes, l.nr)
		}
	}
	return chmod, chown, utimes
}

// decideMeta answers a metadata call: the file it names is opened here
// (the very file the target's call would reach, resolved as the target,
// no /proc magic link followed), checked, and the call made on it, never
// let through with CONTINUE (the kernel would resolve the path again, and
// the target's other threads could change it in between: see the
// package doc).
func (s *Server) decideMeta(n *seccompNotif, c *SockCall) (int64, unix.Errno) {
	g := s.o.Meta
	if g == nil {
		return 0, unix.ENOSYS
	}
	p, e := s.metaProc(c)
	if e != 0 {
		return 0, e
	}
	c.proc = p
	m, e := readMetaCall(c, n.Data.Nr, n.Data.Args)
	if e != 0 {
		return 0, e
	}
	c.Syscall = m.op
	if m.noop {
		return 0, 0
	}
	// The file is found with the target's ids (holdTarget: a root
	// supervisor's thread takes them, with CAP_SYS_PTRACE alone), so
	// that the lookup is checked as the target's own would be.
	if e := c.holdTarget(); e != 0 {
		return 0, e
	}
	obj, parent, e := s.metaObject(c, m)
	if e != 0 {
		return 0, e
	}
	c.closeLater(obj)
	if parent >= 0 {
		c.closeLater(parent)
	}
	var st unix.Statx_t
	if err := unix.Statx(obj, "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_TYPE|unix.STATX_INO|unix.STATX_NLINK, &st); err != nil {
		return 0, errnoOf(err)
	}
	// The check reads only the tree above the file, with the
	// supervisor's own ids: a directory above that the target may not
	// search must not make the answer depend on its ids.
	if !c.ownIDs() {
		return 0, unix.EACCES
	}
	if anonInode(obj) {
		// Every eventfd, epoll, signalfd, timerfd and inotify fd of the
		// host shares one inode, which a root caller's command owns
		// (found by review): not the sandbox's to change.
		return 0, unix.EPERM
	}
	if ok, where := g.allows(obj, &st, parent); !ok {
		if g.onRefuse != nil {
			g.onRefuse(m.name, where)
		}
		return 0, unix.EACCES
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFCHR, unix.S_IFBLK:
		// A device node is the host's (the rules grant the usual ones,
		// /dev/null among them, for writing): its mode, owner and times
		// are not the sandbox's to change, root caller or not (found by
		// review: a root caller's command made the host's /dev/full
		// 0644). What a namespace sandbox's command meets: EPERM. Only
		// "now" passes (touch /dev/null): write permission allows it to
		// every user, and it is made below with the command's own.
		if m.op != Utimes || !nowOnly(m.times) {
			return 0, unix.EPERM
		}
	}
	link := st.Mode&unix.S_IFMT == unix.S_IFLNK // only with AT_SYMLINK_NOFOLLOW
	op := func() (int64, unix.Errno) {
		// Through this process's own link to the checked file: the
		// call is made on that inode, whatever the path names now.
		self := "/proc/self/fd/" + strconv.Itoa(obj)
		var err error
		switch {
		case m.op == Chmod && link:
			err = unix.EOPNOTSUPP // Linux has no mode on a symlink
		case m.op == Chmod:
			err = unix.Fchmodat(unix.AT_FDCWD, self, m.mode&0o7777, 0)
		case m.op == Chown:
			// On the file itself, a symlink too (AT_EMPTY_PATH).
			err = unix.Fchownat(obj, "", int(int32(m.uid)), int(int32(m.gid)), unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW)
		case link:
			err = unix.UtimesNanoAt(obj, "", timesOf(m.times), unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW)
		default:
			err = unix.UtimesNanoAt(unix.AT_FDCWD, self, timesOf(m.times), 0)
		}
		if err != nil {
			return 0, errnoOf(err)
		}
		return 0, 0
	}
	if s.o.AsTarget {
		// As the target, with no capability: the kernel's own checks
		// (the owner for a mode or a time, write permission for "now")
		// are made for its ids (capabilities(7): no CAP_FOWNER).
		return asTarget(c, c.th, false, 0, op)
	}
	return op()
}

// metaProc returns the calling thread's entry: the cached one while its
// thread lives (a cached pidfd names its thread alone, proc.exact, and a
// signal 0 through it fails once that thread is gone, whoever has its id
// since), else a new one (openProc, checked with ID_VALID). A thread that
// makes many calls (tar, cp -a) opens its entry once.
func (s *Server) metaProc(c *SockCall) (*proc, unix.Errno) {
	if p := s.cachedProc(c.Pid); p != nil {
		if unix.PidfdSendSignal(p.pidfd, 0, nil, 0) == nil {
			return p, 0
		}
		s.forget(c.Pid, p)
		s.put(p)
	}
	return s.openProc(c)
}

// nowOnly says whether a time change sets only the current time (a nil
// times, or UTIME_NOW and UTIME_OMIT alone). The kernel allows a nil
// times or both UTIME_NOW to whoever may write the file, and a mix with
// UTIME_OMIT to its owner (utimensat(2)); the gate makes the call as the
// command, so the kernel decides which.
func nowOnly(t *[2]unix.Timespec) bool {
	if t == nil {
		return true
	}
	for _, ts := range t {
		if ts.Nsec != unix.UTIME_NOW && ts.Nsec != unix.UTIME_OMIT {
			return false
		}
	}
	return true
}

// timesOf is the times argument of a utimensat made here: nil for now.
func timesOf(t *[2]unix.Timespec) []unix.Timespec {
	if t == nil {
		return nil
	}
	return t[:]
}

// metaObject opens the file the call names, as an fd of the supervisor's:
// a duplicate of the target's fd for a call by fd, else an O_PATH pin of
// what the path names from the target's working directory, dirfd or root.
func (s *Server) metaObject(c *SockCall, m *metaCall) (obj, parent int, errno unix.Errno) {
	if m.fd >= 0 {
		fd, opath, e := s.metaFD(c, m.fd, m.leader, m.tgid)
		if e != 0 {
			return -1, -1, e
		}
		if opath && !m.procFD {
			// fchmod and futimens refuse an O_PATH descriptor
			// (fdget skips them).
			unix.Close(fd)
			return -1, -1, unix.EBADF
		}
		return fd, -1, 0
	}
	// The target's root must be the supervisor's: its paths (an
	// absolute one, "..", a symlink's text) are resolved here from this
	// process's root. A command that changed its root or mount
	// namespace is refused rather than resolved in the wrong tree.
	tr, err := statRoot(c.proc.dir, "root", 0)
	if err != nil {
		return -1, -1, unix.ESRCH
	}
	if tr != s.ownRoot {
		return -1, -1, unix.EACCES
	}
	base := -1
	switch {
	case m.dirfd == unix.AT_FDCWD && (m.emptyRef || !strings.HasPrefix(m.path, "/")):
		fd, err := unix.Openat(c.proc.dir, "cwd", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, -1, unix.ESRCH
		}
		base = fd
	case m.dirfd != unix.AT_FDCWD && (m.emptyRef || !strings.HasPrefix(m.path, "/")):
		fd, _, e := s.metaFD(c, m.dirfd, false, 0)
		if e != 0 {
			return -1, -1, e
		}
		base = fd
	}
	if m.emptyRef {
		return base, -1, 0 // the call names dirfd (or the cwd) itself
	}
	if base >= 0 {
		defer unix.Close(base)
	} else {
		base = unix.AT_FDCWD
	}
	follow := m.flags&unix.AT_SYMLINK_NOFOLLOW == 0
	// The common case, a last name that is no symlink to follow: open
	// its directory, then the name in it; the directory is then the one
	// the file was found in (allows walks up from it), with no second
	// lookup of the file's own path.
	if dir, name, ok := lastName(m.path); ok {
		pd := base
		var err error
		if dir != "" {
			pd, err = openPath(base, dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC)
		} else {
			pd, err = unix.Openat(base, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		}
		if err != nil {
			return -1, -1, errnoOf(err)
		}
		fd, err := unix.Openat(pd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			unix.Close(pd)
			return -1, -1, errnoOf(err)
		}
		var st unix.Statx_t
		if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_TYPE, &st); err == nil && (st.Mode&unix.S_IFMT != unix.S_IFLNK || !follow) {
			return fd, pd, 0
		}
		// A symlink the call follows: its target may be anywhere.
		unix.Close(fd)
		unix.Close(pd)
	}
	flags := unix.O_PATH | unix.O_CLOEXEC
	if !follow {
		flags |= unix.O_NOFOLLOW
	}
	fd, err := openPath(base, m.path, flags)
	if err != nil {
		return -1, -1, errnoOf(err)
	}
	return fd, -1, 0
}

// metaFD gives the supervisor the file fd n of the calling thread names,
// from that thread's table or its thread group leader's (leader; tgid):
// a duplicate (pidfd_getfd), or, where the supervisor may not call
// pidfd_getfd (a container runtime's default seccomp profile refuses it
// without CAP_SYS_PTRACE, and the Landlock backend runs there), an O_PATH
// descriptor of the same file opened through /proc/ID/fd/N, under the
// same ptrace access check. opath says whether the target's own fd is an
// O_PATH one. A leader's id names the target's thread group while the
// target waits in its call (a group's id is not reused while any of its
// threads lives); the call still pending after the open says so.
func (s *Server) metaFD(c *SockCall, n int, leader bool, tgid int) (fd int, opath bool, e unix.Errno) {
	var err error
	if leader {
		pidfd, perr := unix.PidfdOpen(tgid, 0)
		if err = perr; err == nil {
			fd, err = pidfdGetfd(pidfd, n, 0)
			unix.Close(pidfd)
		}
	} else {
		fd, e = s.getfd(c, n)
		if e != 0 {
			err = e
		}
	}
	switch {
	case err == nil:
		if !c.Valid() {
			unix.Close(fd)
			return -1, false, unix.ESRCH
		}
		fl, ferr := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
		return fd, ferr == nil && fl&unix.O_PATH != 0, 0
	case err != unix.EPERM && err != unix.ENOSYS:
		return -1, false, errnoOf(err)
	}
	dir := c.proc.dir
	if leader {
		d, err := unix.Open("/proc/"+strconv.Itoa(tgid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, false, unix.ESRCH
		}
		defer unix.Close(d)
		dir = d
	}
	// The magic link is followed here on purpose: it is the target's
	// own fd, and what it leads to is checked like any other file.
	fd, err = unix.Openat(dir, "fd/"+strconv.Itoa(n), unix.O_PATH|unix.O_CLOEXEC, 0)
	switch {
	case err == unix.ENOENT:
		return -1, false, unix.EBADF // no such fd
	case err == unix.EACCES:
		// Refused by the ptrace access check (a command that is not
		// dumpable, a supervisor without CAP_SYS_PTRACE).
		return -1, false, unix.EPERM
	case err != nil:
		return -1, false, errnoOf(err)
	}
	// The flags are read in a second step, from fdinfo: they must be of
	// the file opened, not of another the target put at N since (found
	// by review): the inode fdinfo names must be the opened one's, and
	// an fdinfo that cannot be read refuses the call (EBADF).
	if anonInode(fd) {
		// Refused whatever its flags (decideMeta), and an epoll's or
		// inotify's fdinfo lists every watch: not read for nothing.
		return fd, false, 0
	}
	var st unix.Stat_t
	flags, ino, ok := fdinfoOf(dir, n)
	if !ok || unix.Fstat(fd, &st) != nil || (ino != 0 && ino != st.Ino) {
		unix.Close(fd)
		return -1, false, unix.EBADF
	}
	if !c.Valid() {
		unix.Close(fd)
		return -1, false, unix.ESRCH
	}
	return fd, flags&unix.O_PATH != 0, 0
}

// fdinfoOf reads the open flags and the inode number of fd n from dir's
// fdinfo/N (parseFdinfo). ok is false when it cannot read the flags. The first lines are "pos:", "flags:", "mnt_id:" and "ino:",
// within the first 256 bytes whatever the file.
func fdinfoOf(dir, n int) (flags int, ino uint64, ok bool) {
	fd, err := unix.Openat(dir, "fdinfo/"+strconv.Itoa(n), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, 0, false
	}
	defer unix.Close(fd)
	var buf [256]byte
	k, err := unix.Read(fd, buf[:])
	if err != nil {
		return 0, 0, false
	}
	f, ino, err := parseFdinfo(buf[:k])
	if err != nil {
		return 0, 0, false
	}
	return int(f), ino, true
}

// openPath opens p from base as the kernel would for the target, except
// that no /proc magic link is followed (/proc/self/fd/N names this
// process's files here, not the target's): such a path is ELOOP.
func openPath(base int, p string, flags int) (int, error) {
	for {
		fd, err := unix.Openat2(base, p, &unix.OpenHow{Flags: uint64(flags), Resolve: unix.RESOLVE_NO_MAGICLINKS})
		if err == unix.EAGAIN || err == unix.EINTR {
			continue // a rename raced the lookup (openat2(2))
		}
		return fd, err
	}
}

// lastName splits p into its directory and a last name that is a plain
// name ("a/b/c": "a/b", "c"; "c": "", "c"; "/c": "/", "c"). ok is false
// for a last component of ".", ".." or a trailing slash, which the
// general path takes.
func lastName(p string) (dir, name string, ok bool) {
	i := strings.LastIndexByte(p, '/')
	name = p[i+1:]
	if name == "" || name == "." || name == ".." {
		return "", "", false
	}
	if i < 0 {
		return "", name, true
	}
	dir = p[:i]
	if dir == "" {
		dir = "/"
	}
	return dir, name, true
}

// allows says whether the gate lets the call change obj (statx'd as st):
// obj is a writable inode or lies beneath one. parent, when not -1, is
// the directory obj was opened from by its name. Else it returns the path
// it found for obj, for the report.
func (g *MetaGate) allows(obj int, st *unix.Statx_t, parent int) (bool, string) {
	if g.writable[idOf(st)] {
		return true, ""
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return g.beneath(obj), fdPath(obj)
	}
	if parent >= 0 {
		// The directory obj was opened from, by its name.
		if g.beneath(parent) {
			return true, ""
		}
		return false, fdPath(obj)
	}
	if pseudoFile(obj) {
		// A pipe, a socket, an anonymous inode: no file of any
		// directory, nothing the host finds by a path later.
		return true, ""
	}
	if st.Nlink == 0 {
		// Removed, with no other name left: a memfd, a deleted
		// temporary. No path reaches it any more.
		return true, ""
	}
	p, err := readlinkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(obj))
	if err != nil || !strings.HasPrefix(p, "/") {
		// No name to check it by (a path longer than PATH_MAX:
		// ENAMETOOLONG; found by review, where an empty name was
		// taken for a pipe's): refused.
		return false, p
	}
	// The directory the file was reached through: the kernel's name for
	// it (d_path, through this process's own /proc link), opened with
	// no symlink followed and checked to hold obj under that name, so
	// that a name changed since fails closed.
	i := strings.LastIndexByte(p, '/')
	dir, name := p[:i], p[i+1:]
	if dir == "" {
		dir = "/"
	}
	d, err := unix.Openat2(unix.AT_FDCWD, dir, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return false, p
	}
	defer unix.Close(d)
	var in unix.Statx_t
	if unix.Statx(d, name, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_INO, &in) != nil || idOf(&in) != idOf(st) {
		return false, p
	}
	return g.beneath(d), p
}

// maxMetaDepth bounds the walk up: PATH_MAX allows 2048 levels.
const maxMetaDepth = 2048

// beneath walks from directory dir up to the root ("..", which also
// leaves a mount for the one it is mounted on, as Landlock's own walk
// does) and says whether it passes a writable inode. The sandbox cannot
// move a directory from outside its writable places into them, nor out
// (Landlock refuses the rename at the side it may not write), so what the
// walk finds stays true while the call is made.
func (g *MetaGate) beneath(dir int) bool {
	d, err := unix.Openat(dir, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer func() { unix.Close(d) }()
	var st unix.Statx_t
	if unix.Statx(d, "", unix.AT_EMPTY_PATH, unix.STATX_INO, &st) != nil {
		return false
	}
	for i := 0; i < maxMetaDepth; i++ {
		if g.writable[idOf(&st)] {
			return true
		}
		up, err := unix.Openat(d, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return false
		}
		var ust unix.Statx_t
		if unix.Statx(up, "", unix.AT_EMPTY_PATH, unix.STATX_INO, &ust) != nil {
			unix.Close(up)
			return false
		}
		unix.Close(d)
		d = up
		if idOf(&ust) == idOf(&st) {
			return false // the root: ".." is itself
		}
		st = ust
	}
	return false
}

// Magic numbers of the pseudo file systems whose files have no directory
// (statfs(2)).
const (
	pipefsMagic    = 0x50495045
	sockfsMagic    = 0x534f434b
	anonInodeMagic = 0x09041934
)

// pseudoFile says whether fd is a pipe or a socket: a file on a pseudo
// file system no directory holds, with an inode of its own. Not an
// anonymous inode (anonInode): those share one.
func pseudoFile(fd int) bool {
	var fs unix.Statfs_t
	if unix.Fstatfs(fd, &fs) != nil {
		return false
	}
	return fs.Type == pipefsMagic || fs.Type == sockfsMagic
}

// anonInode says whether fd is on anon_inodefs, whose files (eventfd,
// epoll, signalfd, timerfd, inotify...) share the host's one anonymous
// inode.
func anonInode(fd int) bool {
	var fs unix.Statfs_t
	return unix.Fstatfs(fd, &fs) == nil && fs.Type == anonInodeMagic
}

// fdPath is the kernel's name for this process's fd (its /proc link).
func fdPath(fd int) string {
	p, err := readlinkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd))
	if err != nil {
		return ""
	}
	return p
}
