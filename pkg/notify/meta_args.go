package notify

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A metadata call's arguments, read from the target's memory once
// (readMetaCall), and the paths through which a process names its own
// fds (procFDPath).

// maxMetaPath is PATH_MAX: the kernel refuses longer paths with
// ENAMETOOLONG (getname).
const maxMetaPath = 4096

// readString copies a NUL-terminated string of at most maxMetaPath bytes
// (the NUL included) from the target, a page at a time: a string that
// ends just before an unmapped page must not fail.
func readString(c *SockCall, ptr uint64) (string, unix.Errno) {
	if ptr == 0 {
		return "", unix.EFAULT
	}
	var out []byte
	for len(out) < maxMetaPath {
		n := 4096 - int(ptr%4096)
		if n > maxMetaPath-len(out) {
			n = maxMetaPath - len(out)
		}
		buf := make([]byte, n)
		if err := readMem(c.Pid, ptr, buf); err != nil {
			return "", memErrno(err)
		}
		if i := bytes.IndexByte(buf, 0); i >= 0 {
			out = append(out, buf[:i]...)
			// The thread id named the target while it read: the
			// call is still pending.
			if !c.Valid() {
				return "", unix.EINTR
			}
			return string(out), 0
		}
		out = append(out, buf...)
		ptr += uint64(n)
	}
	return "", unix.ENAMETOOLONG
}

// memErrno is the answer to a call whose arguments could not be read:
// EFAULT for a bad address, but EPERM where the kernel refused the read
// (a root-less supervisor and a target that is not dumpable: it ran a
// program it may not read), which is no fault of the program's pointer
// (found by review).
func memErrno(err error) unix.Errno {
	if err == unix.EPERM || err == unix.ESRCH {
		return err.(unix.Errno)
	}
	return unix.EFAULT
}

// readTimes copies utimensat's two timespecs (a nil pointer: now).
func readTimes(c *SockCall, ptr uint64) (*[2]unix.Timespec, unix.Errno) {
	if ptr == 0 {
		return nil, 0
	}
	var b [32]byte
	if err := readMem(c.Pid, ptr, b[:]); err != nil {
		return nil, memErrno(err)
	}
	if !c.Valid() {
		return nil, unix.EINTR
	}
	var ts [2]unix.Timespec
	for i := range ts {
		ts[i].Sec = int64(binary.NativeEndian.Uint64(b[16*i:]))
		ts[i].Nsec = int64(binary.NativeEndian.Uint64(b[16*i+8:]))
	}
	return &ts, 0
}

// readTimevals copies utimes' and futimesat's two timevals as timespecs
// (a nil pointer: now); a microsecond count out of range is EINVAL, as
// the kernel answers.
func readTimevals(c *SockCall, ptr uint64) (*[2]unix.Timespec, unix.Errno) {
	ts, e := readTimes(c, ptr) // struct timeval is two 64-bit words too
	if ts == nil || e != 0 {
		return ts, e
	}
	for i := range ts {
		if ts[i].Nsec < 0 || ts[i].Nsec >= 1000000 {
			return nil, unix.EINVAL
		}
		ts[i].Nsec *= 1000
	}
	return ts, 0
}

// readUtimbuf copies utime(2)'s struct utimbuf (two times in seconds).
func readUtimbuf(c *SockCall, ptr uint64) (*[2]unix.Timespec, unix.Errno) {
	if ptr == 0 {
		return nil, 0
	}
	var b [16]byte
	if err := readMem(c.Pid, ptr, b[:]); err != nil {
		return nil, memErrno(err)
	}
	if !c.Valid() {
		return nil, unix.EINTR
	}
	return &[2]unix.Timespec{{Sec: int64(binary.NativeEndian.Uint64(b[:]))}, {Sec: int64(binary.NativeEndian.Uint64(b[8:]))}}, 0
}

// readMetaCall reads the arguments of metadata call nr.
func readMetaCall(c *SockCall, nr int32, a [6]uint64) (*metaCall, unix.Errno) {
	m := &metaCall{dirfd: unix.AT_FDCWD, fd: -1}
	var e unix.Errno
	pathAt := func(dirfd, ptr uint64) {
		m.dirfd = int(int32(dirfd))
		m.path, e = readString(c, ptr)
	}
	switch uintptr(nr) {
	case unix.SYS_FCHMOD:
		m.op, m.name, m.fd, m.mode = Chmod, "fchmod", int(int32(a[0])), uint32(a[1])
	case unix.SYS_FCHMODAT:
		m.op, m.name, m.mode = Chmod, "fchmodat", uint32(a[2])
		pathAt(a[0], a[1])
	case unix.SYS_FCHMODAT2:
		m.op, m.name, m.mode, m.flags = Chmod, "fchmodat2", uint32(a[2]), int(int32(a[3]))
		if m.flags&^(unix.AT_SYMLINK_NOFOLLOW|unix.AT_EMPTY_PATH) != 0 {
			return nil, unix.EINVAL
		}
		pathAt(a[0], a[1])
	case unix.SYS_FCHOWN:
		m.op, m.name, m.fd, m.uid, m.gid = Chown, "fchown", int(int32(a[0])), uint32(a[1]), uint32(a[2])
	case unix.SYS_FCHOWNAT:
		m.op, m.name, m.uid, m.gid, m.flags = Chown, "fchownat", uint32(a[2]), uint32(a[3]), int(int32(a[4]))
		if m.flags&^(unix.AT_SYMLINK_NOFOLLOW|unix.AT_EMPTY_PATH) != 0 {
			return nil, unix.EINVAL
		}
		pathAt(a[0], a[1])
	case unix.SYS_UTIMENSAT:
		m.op, m.name, m.flags = Utimes, "utimensat", int(int32(a[3]))
		if m.flags&^(unix.AT_SYMLINK_NOFOLLOW|unix.AT_EMPTY_PATH) != 0 {
			return nil, unix.EINVAL
		}
		if m.times, e = readTimes(c, a[2]); e != 0 {
			return nil, e
		}
		if m.times != nil && m.times[0].Nsec == unix.UTIME_OMIT && m.times[1].Nsec == unix.UTIME_OMIT {
			m.noop = true
			return m, 0
		}
		if a[1] == 0 {
			// futimens(fd): a NULL path names dirfd itself, which
			// takes no flags (do_utimes_fd).
			if int(int32(a[0])) == unix.AT_FDCWD {
				return nil, unix.EFAULT
			}
			if m.flags != 0 {
				return nil, unix.EINVAL
			}
			m.fd = int(int32(a[0]))
			return m, 0
		}
		pathAt(a[0], a[1])
	default:
		var ok bool
		if m, ok, e = readLegacyMetaCall(c, nr, a); !ok {
			return nil, unix.ENOSYS
		}
	}
	if e != 0 {
		return nil, e
	}
	if m.fd < 0 && m.path == "" {
		if m.flags&unix.AT_EMPTY_PATH == 0 {
			return nil, unix.ENOENT
		}
		m.emptyRef = true
	}
	if m.fd < 0 && m.flags&unix.AT_SYMLINK_NOFOLLOW == 0 && (strings.HasPrefix(m.path, "/proc/") || strings.HasPrefix(m.path, "/dev/")) {
		tgid := c.tgid()
		if fd, table := procFDPath(m.path, c.Pid, tgid); table != noTable {
			// /proc/self and /proc/TGID name the thread group
			// leader's table, which a thread that unshared its own
			// (CLONE_FILES) no longer shares: the fd is then taken
			// from the leader's (found by review: the thread's own
			// fd N was changed instead), else from the thread's.
			m.fd, m.procFD = fd, true
			m.leader = table == leaderTable && tgid > 0 && tgid != c.Pid && !sameFiles(c.Pid, tgid)
			m.tgid = tgid
		}
	}
	return m, 0
}

// The fd tables procFDPath can name.
const (
	noTable     = iota
	threadTable // the calling thread's own (/proc/thread-self, /proc/TID)
	leaderTable // its thread group leader's (/proc/self, /proc/TGID, /dev/fd)
)

// sameFiles says whether threads a and b share one fd table (kcmp(2)
// KCMP_FILES; false when it cannot tell).
func sameFiles(a, b int) bool {
	const kcmpFiles = 2
	r, _, e := unix.Syscall6(unix.SYS_KCMP, uintptr(a), uintptr(b), kcmpFiles, 0, 0, 0)
	return e == 0 && r == 0
}

// tgid is the calling thread's thread group id (its status's Tgid line),
// or -1.
func (c *SockCall) tgid() int {
	b, err := c.status()
	if err != nil {
		return -1
	}
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte("\n"))
		if v, ok := bytes.CutPrefix(line, []byte("Tgid:")); ok {
			n, err := strconv.Atoi(string(bytes.TrimSpace(v)))
			if err != nil {
				return -1
			}
			return n
		}
	}
	return -1
}

// procFDPath reads the paths through which a process names one of its own
// fds, and the table each names: /proc/thread-self/fd/N, /proc/TID/fd/N
// and /proc/TGID/task/TID/fd/N of the calling thread (its own table);
// /proc/self/fd/N, /proc/TGID/fd/N, /dev/fd/N and /dev/stdin, stdout and
// stderr (the thread group leader's). glibc before 2.39 makes
// fchmodat(AT_SYMLINK_NOFOLLOW), and with it lchmod and Python's
// chmod(follow_symlinks=False) that tar and pip use, as a chmod of
// /proc/self/fd/N (found by review: they failed with ELOOP, as the gate
// follows no magic link). Such a path is the caller's fd N, which the
// gate then takes from the caller itself (pidfd_getfd) and checks as any
// other file. Only these exact spellings: any other path through /proc
// is resolved as a path, where a magic link is ELOOP.
func procFDPath(p string, tid, tgid int) (int, int) {
	switch p {
	case "/dev/stdin":
		return 0, leaderTable
	case "/dev/stdout":
		return 1, leaderTable
	case "/dev/stderr":
		return 2, leaderTable
	}
	var rest string
	table := leaderTable
	switch {
	case strings.HasPrefix(p, "/dev/fd/"):
		rest = p[len("/dev/fd/"):]
	case strings.HasPrefix(p, "/proc/"):
		who, r, ok := strings.Cut(p[len("/proc/"):], "/fd/")
		if !ok {
			return -1, noTable
		}
		switch who {
		case "self", strconv.Itoa(tgid):
		case "thread-self", strconv.Itoa(tid), strconv.Itoa(tgid) + "/task/" + strconv.Itoa(tid):
			table = threadTable
		default:
			return -1, noTable
		}
		rest = r
	default:
		return -1, noTable
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 || strconv.Itoa(n) != rest {
		return -1, noTable
	}
	return n, table
}
