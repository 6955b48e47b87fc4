package notify

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The kernel's structures (include/uapi/linux/seccomp.h).
type seccompData struct {
	Nr   int32
	Arch uint32
	IP   uint64
	Args [6]uint64
}

type seccompNotif struct {
	ID    uint64
	Pid   uint32
	Flags uint32
	Data  seccompData
}

type seccompNotifResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

type seccompNotifAddfd struct {
	ID         uint64
	Flags      uint32
	Srcfd      uint32
	Newfd      uint32
	NewfdFlags uint32
}

func ioctlPtr(fd int, req uint, p unsafe.Pointer) error {
	for {
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(p))
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return e
		}
		return nil
	}
}

// recv reads one notification. ENOENT means the target died (or was
// interrupted) between the wake-up and the read.
func recv(listener int, n *seccompNotif) error {
	*n = seccompNotif{} // the kernel refuses a buffer that is not zeroed
	return ioctlPtr(listener, unix.SECCOMP_IOCTL_NOTIF_RECV, unsafe.Pointer(n))
}

// idValid says whether the notification id is still pending: the target
// still sits in the syscall, so its pid still names it. It is asked after
// every read of the target's memory and after every open through
// /proc/PID: a pid can be reused once its process died, and a read from a
// reused pid reads another process (seccomp_unotify(2),
// SECCOMP_IOCTL_NOTIF_ID_VALID).
func idValid(listener int, id uint64) bool {
	return ioctlPtr(listener, unix.SECCOMP_IOCTL_NOTIF_ID_VALID, unsafe.Pointer(&id)) == nil
}

func respond(listener int, id uint64, val int64, errno unix.Errno) error {
	r := seccompNotifResp{ID: id, Val: val}
	if errno != 0 {
		r.Error = -int32(errno)
		r.Val = 0
	}
	return ioctlPtr(listener, unix.SECCOMP_IOCTL_NOTIF_SEND, unsafe.Pointer(&r))
}

// respondContinue lets the notified call run as the target made it
// (SECCOMP_USER_NOTIF_FLAG_CONTINUE, Linux 5.5); used only for calls
// nothing is decided on (Server.handle).
func respondContinue(listener int, id uint64) error {
	r := seccompNotifResp{ID: id, Flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE}
	return ioctlPtr(listener, unix.SECCOMP_IOCTL_NOTIF_SEND, unsafe.Pointer(&r))
}

// addFD installs src (a supervisor fd) at number dst of the target,
// replacing what is there (SECCOMP_ADDFD_FLAG_SETFD), close-on-exec as
// flags say.
func addFD(listener int, id uint64, src, dst int, cloexec bool) error {
	a := seccompNotifAddfd{ID: id, Flags: unix.SECCOMP_ADDFD_FLAG_SETFD, Srcfd: uint32(src), Newfd: uint32(dst)}
	if cloexec {
		a.NewfdFlags = unix.O_CLOEXEC
	}
	return ioctlPtr(listener, unix.SECCOMP_IOCTL_NOTIF_ADDFD, unsafe.Pointer(&a))
}

// readMem copies len(buf) bytes at addr of process pid into buf, whole or
// not at all.
func readMem(pid int, addr uint64, buf []byte) error {
	if len(buf) == 0 {
		return nil
	}
	if addr == 0 {
		return unix.EFAULT
	}
	local := []unix.Iovec{{Base: &buf[0]}}
	local[0].SetLen(len(buf))
	remote := []unix.RemoteIovec{{Base: uintptr(addr), Len: len(buf)}}
	n, err := processVMReadv(pid, local, remote, 0)
	if err == unix.EPERM || err == unix.ENOSYS {
		// A container runtime's default seccomp profile refuses
		// process_vm_readv(2) without CAP_SYS_PTRACE (moby's and
		// containerd's do) where /proc/PID/mem, under the same ptrace
		// access check, stays open: the Landlock backend runs there.
		return readProcMem(pid, addr, buf)
	}
	if err != nil {
		return err
	}
	if n != len(buf) {
		return unix.EFAULT
	}
	return nil
}

// readProcMem is readMem through /proc/PID/mem (proc(5)): the kernel's
// ptrace access check (PTRACE_MODE_ATTACH_FSCREDS) at the open, as for
// process_vm_readv. A refused open is EPERM.
//
// A read of /proc/PID/mem is forced (FOLL_FORCE): it would read a page the
// target mapped without read permission, which the kernel's own copy of a
// call's argument refuses (EFAULT). So the range must lie in readable
// mappings of the target (/proc/PID/maps) first (found by review).
func readProcMem(pid int, addr uint64, buf []byte) error {
	if !readableRange(pid, addr, uint64(len(buf))) {
		return unix.EFAULT
	}
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/mem", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		if err == unix.EACCES {
			return unix.EPERM
		}
		return err
	}
	defer unix.Close(fd)
	for off := 0; off < len(buf); {
		n, err := unix.Pread(fd, buf[off:], int64(addr)+int64(off))
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			return unix.EFAULT
		}
		off += n
	}
	return nil
}

// pidfdThread is PIDFD_THREAD (Linux 6.9): a pidfd of one thread, not of
// its thread group.
const pidfdThread = unix.O_EXCL

// openPidfd returns a pidfd through which the fd table of thread tid can
// be read: of the thread itself where the kernel allows it (6.9), else of
// its thread group leader. exact says the pidfd names thread tid itself
// (PIDFD_THREAD, or tid is the leader), not only its thread group: only
// such a pidfd stops working when thread tid ends (a leader's id stays
// taken while its group lives).
func openPidfd(tid int) (fd int, exact bool, err error) {
	fd, err = unix.PidfdOpen(tid, pidfdThread)
	if err == nil {
		return fd, true, nil
	}
	if err != unix.EINVAL {
		return -1, false, err
	}
	fd, err = unix.PidfdOpen(tid, 0)
	if err != unix.EINVAL && err != unix.ENOENT {
		return fd, err == nil, err
	}
	// Not a thread group leader, on a kernel without PIDFD_THREAD.
	tgid, terr := readTgid(tid)
	if terr != nil {
		return -1, false, err
	}
	fd, err = unix.PidfdOpen(tgid, 0)
	return fd, false, err
}

// readProc reads a small /proc file whole into buf with three system
// calls (os.ReadFile adds an fstat and a second read), on the hot path of
// every call that needs one.
func readProc(path string, buf []byte) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	n := 0
	for n < len(buf) {
		k, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if k == 0 {
			return buf[:n], nil
		}
		n += k
	}
	// Larger than the caller expected (a long Groups line): read it all.
	return os.ReadFile(path)
}

func readTgid(tid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Tgid:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, errors.New("no Tgid in status")
}

// errnoOf returns err's errno, or EIO.
func errnoOf(err error) unix.Errno {
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	return unix.EIO
}

// GetSizes checks that the kernel's notification structures have the sizes
// this package was written for (SECCOMP_GET_NOTIF_SIZES).
func checkSizes() error {
	var sz struct{ Notif, Resp, Data uint16 }
	_, _, e := unix.Syscall(unix.SYS_SECCOMP, 3 /* SECCOMP_GET_NOTIF_SIZES */, 0, uintptr(unsafe.Pointer(&sz)))
	if e != 0 {
		return fmt.Errorf("seccomp user notification: %w", e)
	}
	if int(sz.Notif) < int(unsafe.Sizeof(seccompNotif{})) || int(sz.Resp) < int(unsafe.Sizeof(seccompNotifResp{})) {
		return fmt.Errorf("seccomp user notification: unexpected structure sizes %d/%d", sz.Notif, sz.Resp)
	}
	return nil
}

// processVMReadv is process_vm_readv(2); a test makes it fail as a
// container runtime's default seccomp profile does.
var processVMReadv = unix.ProcessVMReadv

// readableRange says whether [addr, addr+n) lies in mappings of process
// pid that allow reading (/proc/PID/maps: "start-end perms ...", sorted
// by address; adjacent mappings may share the range).
func readableRange(pid int, addr, n uint64) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		return false
	}
	end := addr + n
	if end < addr {
		return false
	}
	for len(b) > 0 && addr < end {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte("\n"))
		rng, rest, ok := bytes.Cut(line, []byte(" "))
		if !ok || len(rest) < 1 {
			continue
		}
		lo, hi, ok := bytes.Cut(rng, []byte("-"))
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(string(lo), 16, 64)
		stop, err2 := strconv.ParseUint(string(hi), 16, 64)
		if err1 != nil || err2 != nil || stop <= addr {
			continue
		}
		if start > addr || rest[0] != 'r' {
			return false // a hole, or not readable, at addr
		}
		addr = stop
	}
	return addr >= end
}
