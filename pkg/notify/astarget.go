package notify

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// targetIDs reads the host ids of the calling task: effective uid and gid
// and the supplementary groups, from /proc/TID/status (ids there are shown
// in the reader's user namespace: the supervisor's, the host's).
func targetIDs(c *SockCall) (uid, gid uint32, groups []uint32, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(c.Pid) + "/status")
	if err != nil {
		return 0, 0, nil, err
	}
	var haveU, haveG bool
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		switch k {
		case "Uid", "Gid":
			if len(f) < 2 {
				return 0, 0, nil, unix.EINVAL
			}
			n, err := strconv.ParseUint(f[1], 10, 32) // effective
			if err != nil {
				return 0, 0, nil, err
			}
			if k == "Uid" {
				uid, haveU = uint32(n), true
			} else {
				gid, haveG = uint32(n), true
			}
		case "Groups":
			for _, g := range f {
				n, err := strconv.ParseUint(g, 10, 32)
				if err != nil {
					return 0, 0, nil, err
				}
				groups = append(groups, uint32(n))
			}
		}
	}
	if !haveU || !haveG {
		return 0, 0, nil, unix.EINVAL
	}
	return uid, gid, groups, nil
}

// asTarget runs op on an OS thread of its own that holds the target's host
// ids, and returns its result. A root supervisor that connects or sends
// on the sandbox's behalf would otherwise be the peer a host service sees
// (SO_PEERCRED, SCM_CREDENTIALS under SO_PASSCRED: uid 0) while the
// sandbox runs as unprivileged ids of its range: a service that trusts a
// root peer would trust the sandbox as root (the CVE-2020-15257 pattern).
// On that thread the kernel also checks the socket's write permission for
// the target's ids. The ids are set with raw syscalls, which change only
// the calling thread (glibc's and Go's wrappers change every thread); the
// thread stays locked and exits with its goroutine, so no other goroutine
// ever runs with them. It reaches the pinned socket through
// /proc/self/fd, which the kernel allows a thread of the same thread group
// whatever its ids (proc_fd_access_allowed: same_thread_group).
func asTarget(c *SockCall, op func() (int64, unix.Errno)) (int64, unix.Errno) {
	uid, gid, groups, err := targetIDs(c)
	if err != nil || !c.Valid() {
		return 0, unix.EACCES // fail closed: whose call it is is unknown
	}
	type result struct {
		val int64
		e   unix.Errno
	}
	done := make(chan result, 1)
	go func() {
		// Never unlocked: the thread ends with this goroutine.
		runtime.LockOSThread()
		var gp unsafe.Pointer
		if len(groups) > 0 {
			gp = unsafe.Pointer(&groups[0])
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(groups)), uintptr(gp), 0); e != 0 {
			done <- result{0, unix.EACCES}
			return
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(gid), uintptr(gid), uintptr(gid)); e != 0 {
			done <- result{0, unix.EACCES}
			return
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
			done <- result{0, unix.EACCES}
			return
		}
		v, e := op()
		done <- result{v, e}
	}()
	r := <-done
	return r.val, r.e
}
