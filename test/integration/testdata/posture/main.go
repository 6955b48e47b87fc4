//go:build linux

// Command posture reports the security posture of the process it runs as,
// as JSON on stdout. The hardening tests (test/integration/hardening_test.go)
// build it statically and run it inside nsbox sandboxes. It is test data,
// not part of nsbox.
//
// Modes (first argument):
//
//	posture            (default) credentials, capabilities, securebits,
//	                   no_new_privs, seccomp, id maps, namespaces, open fds,
//	                   PID 1's /proc entries, mount table, hostname, root.
//	probe              attempts every syscall the default seccomp profile
//	                   denies, with arguments that are harmless even when
//	                   the call is allowed, and reports {name: result}.
//	abi x32|i386       (internal) one call through another syscall ABI;
//	                   probe runs it as a child because the filter kills
//	                   the whole process for it.
//	tiocsti            tries to push input into the terminal on fd 0.
//	openw PATH...      opens each PATH for writing (never O_TRUNC or
//	                   O_CREAT, nothing is written) and reports the result.
//	openr PATH...      the same, read-only.
//	selfexe NSBOX      starts NSBOX (the nsbox binary visible inside) as a
//	                   blocked `nsbox call` and tries to open its
//	                   /proc/PID/exe for writing (CVE-2019-5736).
//
// A result is "OK" when the call succeeded, the errno name (EPERM, ENOSYS,
// ...) when it failed, or "signal:SIGSYS" and the like for the ABI probes.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func main() {
	// First, before the Go runtime or the os package open anything (the
	// netpoller's epoll fd, a directory handle): the fds this process was
	// started with, listed with raw syscalls.
	fds, listFD := listFDs()

	mode := "posture"
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	var out any
	switch mode {
	case "posture":
		out = posture(fds, listFD)
	case "probe":
		if err := refuseWithCapabilities(); err != nil {
			fmt.Fprintln(os.Stderr, "posture probe:", err)
			os.Exit(3)
		}
		out = probe()
	case "abi":
		if len(os.Args) != 3 {
			os.Exit(2)
		}
		os.Exit(abiChild(os.Args[2]))
	case "tiocsti":
		out = tiocsti()
	case "openw":
		out = openAll(os.Args[2:], unix.O_WRONLY)
	case "openr":
		out = openAll(os.Args[2:], unix.O_RDONLY)
	case "selfexe":
		if len(os.Args) != 3 {
			os.Exit(2)
		}
		out = selfExe(os.Args[2])
	default:
		fmt.Fprintf(os.Stderr, "posture: unknown mode %q\n", mode)
		os.Exit(2)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	if err := enc.Encode(out); err != nil {
		os.Exit(1)
	}
}

// result turns a syscall error into the reported string.
func result(err error) string {
	if err == nil {
		return "OK"
	}
	if e, ok := err.(syscall.Errno); ok {
		if e == 0 {
			return "OK"
		}
		if n := unix.ErrnoName(e); n != "" {
			return n
		}
		return "errno:" + strconv.Itoa(int(e))
	}
	if pe, ok := err.(*os.PathError); ok {
		return result(pe.Err)
	}
	return err.Error()
}

func errnoResult(e syscall.Errno) string { return result(e) }

// FD is one open file descriptor.
type FD struct {
	Target string `json:"target"`
	// Cloexec is set for fds this process opened itself after it started
	// (the listing's own fd, the Go runtime's): an fd inherited through
	// execve cannot have FD_CLOEXEC, or it would not have survived it.
	Cloexec bool `json:"cloexec"`
}

// listFDs lists /proc/self/fd with raw syscalls and returns the open fds and
// the fd of the listing itself (also in the map). Since Go 1.25 the runtime
// opens the cgroup CPU limit files at start-up and keeps them open
// (close-on-exec), so not every fd here was inherited; FD.Cloexec tells.
func listFDs() (map[int]FD, int) {
	out := map[int]FD{}
	dfd, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return out, -1
	}
	defer unix.Close(dfd)
	var fds []int
	buf := make([]byte, 8192)
	for {
		n, err := unix.ReadDirent(dfd, buf)
		if err != nil || n <= 0 {
			break
		}
		var names []string
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
		for _, name := range names {
			if fd, err := strconv.Atoi(name); err == nil {
				fds = append(fds, fd)
			}
		}
	}
	for _, fd := range fds {
		target, err := readlink("/proc/self/fd/" + strconv.Itoa(fd))
		if err != nil {
			target = "?" + result(err)
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		out[fd] = FD{Target: target, Cloexec: err == nil && flags&unix.FD_CLOEXEC != 0}
	}
	return out, dfd
}

func readlink(p string) (string, error) {
	buf := make([]byte, 4096)
	n, err := unix.Readlink(p, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// Posture is the default mode's report.
type Posture struct {
	Pid            int               `json:"pid"`
	Ppid           int               `json:"ppid"`
	Uid            []int             `json:"uid"` // real, effective, saved, fs
	Gid            []int             `json:"gid"`
	Groups         []int             `json:"groups"`
	UidMap         string            `json:"uid_map"`
	GidMap         string            `json:"gid_map"`
	Setgroups      string            `json:"setgroups"`
	CapInh         string            `json:"cap_inh"`
	CapPrm         string            `json:"cap_prm"`
	CapEff         string            `json:"cap_eff"`
	CapBnd         string            `json:"cap_bnd"`
	CapAmb         string            `json:"cap_amb"`
	NoNewPrivs     int               `json:"no_new_privs"`
	Seccomp        int               `json:"seccomp"`
	SeccompFilters int               `json:"seccomp_filters"`
	Securebits     int               `json:"securebits"`
	Dumpable       int               `json:"dumpable"`
	Namespaces     map[string]uint64 `json:"namespaces"`
	FDs            map[int]FD        `json:"fds"`
	ListFD         int               `json:"list_fd"`
	Hostname       string            `json:"hostname"`
	// PID1 is what this process can do with PID 1's /proc entries.
	PID1 map[string]string `json:"pid1"`
	// Root: whether "/.." is "/", where chdir("/..") lands, and
	// /proc/self/root.
	DotDotIsRoot bool     `json:"dotdot_is_root"`
	CwdAfterUp   string   `json:"cwd_after_up"`
	ProcSelfRoot string   `json:"proc_self_root"`
	MountInfo    []string `json:"mountinfo"`
	Errors       []string `json:"errors,omitempty"`
}

func posture(fds map[int]FD, listFD int) *Posture {
	p := &Posture{Pid: os.Getpid(), Ppid: os.Getppid(), FDs: fds, ListFD: listFD, Namespaces: map[string]uint64{}, PID1: map[string]string{}}
	fail := func(format string, args ...any) { p.Errors = append(p.Errors, fmt.Sprintf(format, args...)) }

	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		fail("read /proc/self/status: %v", err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "Uid":
			p.Uid = ints(v)
		case "Gid":
			p.Gid = ints(v)
		case "Groups":
			p.Groups = ints(v)
		case "CapInh":
			p.CapInh = v
		case "CapPrm":
			p.CapPrm = v
		case "CapEff":
			p.CapEff = v
		case "CapBnd":
			p.CapBnd = v
		case "CapAmb":
			p.CapAmb = v
		case "NoNewPrivs":
			p.NoNewPrivs, _ = strconv.Atoi(v)
		case "Seccomp":
			p.Seccomp, _ = strconv.Atoi(v)
		case "Seccomp_filters":
			p.SeccompFilters, _ = strconv.Atoi(v)
		}
	}
	p.UidMap = readTrim("/proc/self/uid_map")
	p.GidMap = readTrim("/proc/self/gid_map")
	p.Setgroups = readTrim("/proc/self/setgroups")
	if v, err := unix.PrctlRetInt(unix.PR_GET_SECUREBITS, 0, 0, 0, 0); err == nil {
		p.Securebits = v
	} else {
		p.Securebits = -1
		fail("PR_GET_SECUREBITS: %v", err)
	}
	if v, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0); err == nil {
		p.Dumpable = v
	} else {
		p.Dumpable = -1
	}
	for _, ns := range []string{"cgroup", "ipc", "mnt", "net", "pid", "pid_for_children", "time", "time_for_children", "user", "uts"} {
		var st unix.Stat_t
		if err := unix.Stat("/proc/self/ns/"+ns, &st); err == nil {
			p.Namespaces[ns] = st.Ino
		}
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err == nil {
		p.Hostname = unix.ByteSliceToString(u.Nodename[:])
	}

	// PID 1 is the nsbox worker: non-dumpable, so none of its magic links,
	// memory or environment may be opened from inside.
	p.PID1["readlink_exe"] = result(readlinkErr("/proc/1/exe"))
	p.PID1["open_exe"] = openResult("/proc/1/exe", unix.O_RDONLY)
	p.PID1["open_exe_write"] = openResult("/proc/1/exe", unix.O_WRONLY)
	p.PID1["open_environ"] = readOneResult("/proc/1/environ")
	p.PID1["open_mem"] = readOneResult("/proc/1/mem")
	p.PID1["open_fd_dir"] = openResult("/proc/1/fd", unix.O_RDONLY|unix.O_DIRECTORY)
	p.PID1["readlink_fd3"] = result(readlinkErr("/proc/1/fd/3"))
	p.PID1["open_fd3"] = openResult("/proc/1/fd/3", unix.O_RDWR)
	p.PID1["readlink_any_fd"], p.PID1["open_any_fd"] = pid1FDs()
	p.PID1["readlink_root"] = result(readlinkErr("/proc/1/root"))
	p.PID1["readlink_cwd"] = result(readlinkErr("/proc/1/cwd"))
	p.PID1["open_map_files"] = openResult("/proc/1/map_files", unix.O_RDONLY|unix.O_DIRECTORY)
	var st unix.Stat_t
	if err := unix.Stat("/proc/1", &st); err == nil {
		p.PID1["owner"] = fmt.Sprintf("%d:%d", st.Uid, st.Gid)
	}
	// ptrace(PTRACE_PEEKUSER) of PID 1: it is not our tracee, so the kernel
	// says ESRCH; the filter says EPERM first.
	_, _, e := unix.RawSyscall6(unix.SYS_PTRACE, unix.PTRACE_PEEKUSR, 1, 0, 0, 0, 0)
	p.PID1["ptrace_peekuser"] = errnoResult(e)

	var root, up unix.Stat_t
	if unix.Stat("/", &root) == nil && unix.Stat("/..", &up) == nil {
		p.DotDotIsRoot = root.Dev == up.Dev && root.Ino == up.Ino
	}
	if err := unix.Chdir("/../../.."); err == nil {
		p.CwdAfterUp, _ = unix.Getwd()
	}
	p.ProcSelfRoot, _ = readlink("/proc/self/root")
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		p.MountInfo = strings.Split(strings.TrimSpace(string(b)), "\n")
	} else {
		fail("read mountinfo: %v", err)
	}
	return p
}

// pid1FDs tries every fd of PID 1 (listed if /proc/1/fd can be listed,
// else 0..255): "OK fd N -> TARGET, ..." listing those whose link can be
// read (opened, for the second result), else the last error.
func pid1FDs() (readlinkRes, openRes string) {
	var fds []int
	if ents, err := os.ReadDir("/proc/1/fd"); err == nil {
		for _, e := range ents {
			if n, err := strconv.Atoi(e.Name()); err == nil {
				fds = append(fds, n)
			}
		}
	}
	if len(fds) == 0 {
		for n := 0; n < 256; n++ {
			fds = append(fds, n)
		}
	}
	readlinkRes, openRes = "ENOENT", "ENOENT"
	var read, opened []string
	for _, n := range fds {
		p := fmt.Sprintf("/proc/1/fd/%d", n)
		target, err := readlink(p)
		if err == nil {
			read = append(read, fmt.Sprintf("fd %d -> %s", n, target))
		} else if err != unix.ENOENT {
			readlinkRes = result(err)
		}
		fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err == nil {
			unix.Close(fd)
			opened = append(opened, fmt.Sprintf("fd %d -> %s", n, target))
		} else if err != unix.ENOENT {
			openRes = result(err)
		}
	}
	if len(read) > 0 {
		readlinkRes = "OK " + strings.Join(read, ", ")
	}
	if len(opened) > 0 {
		openRes = "OK " + strings.Join(opened, ", ")
	}
	return readlinkRes, openRes
}

func ints(s string) []int {
	var out []int
	for _, f := range strings.Fields(s) {
		n, err := strconv.Atoi(f)
		if err == nil {
			out = append(out, n)
		}
	}
	return out
}

func readTrim(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return "?" + result(err)
	}
	return strings.Join(strings.Fields(string(b)), " ")
}

func readlinkErr(p string) error {
	_, err := readlink(p)
	return err
}

func openResult(p string, flags int) string {
	fd, err := unix.Open(p, flags|unix.O_CLOEXEC|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
	if err == nil {
		unix.Close(fd)
	}
	return result(err)
}

// readOneResult opens p and reads one byte: for /proc/PID/mem the access
// check happens at open, for environ at open and again at read.
func readOneResult(p string) string {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return result(err)
	}
	defer unix.Close(fd)
	var b [1]byte
	if _, err := unix.Read(fd, b[:]); err != nil {
		return "open OK, read " + result(err)
	}
	return "OK"
}

func openAll(paths []string, flags int) map[string]string {
	out := map[string]string{}
	for _, p := range paths {
		out[p] = openResult(p, flags)
	}
	return out
}

// refuseWithCapabilities keeps probe harmless by construction: every probe
// below already uses arguments that make the call fail even when it is
// allowed, and on top of that the probes never run with a capability of the
// initial user namespace (the host's), so a mistake in an argument cannot
// change the host. Capabilities of a sandbox's own user namespace (nsbox
// --allow-privileged) reach only the sandbox's own namespaces.
func refuseWithCapabilities() error {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return err
	}
	capEff := ""
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			capEff = strings.TrimSpace(v)
		}
	}
	if capEff == "" {
		return fmt.Errorf("no CapEff line in /proc/self/status")
	}
	if strings.Trim(capEff, "0") == "" {
		return nil
	}
	if m := readTrim("/proc/self/uid_map"); m == "0 0 4294967295" || strings.HasPrefix(m, "?") {
		return fmt.Errorf("refusing to run with capabilities in the initial user namespace (CapEff %s, uid_map %q)", capEff, m)
	}
	return nil
}

// Probes is the probe mode's report.
type Probes struct {
	// Denied holds the syscalls the default profile must refuse.
	Denied map[string]string `json:"denied"`
	// Allowed holds calls the default profile must let through (the
	// filter is not over-broad): their result is the kernel's.
	Allowed map[string]string `json:"allowed"`
	// Arch is the GOARCH the probe was built for.
	Arch string `json:"arch"`
}

type probeFn func() string

// sys returns a probe of one raw syscall. A successful call that returns an
// fd has it closed.
func sys(nr uintptr, a ...uintptr) probeFn {
	return func() string {
		var args [6]uintptr
		copy(args[:], a)
		r, _, e := unix.Syscall6(nr, args[0], args[1], args[2], args[3], args[4], args[5])
		if e == 0 && int(r) > 2 && fdCreating[nr] {
			unix.Close(int(r))
		}
		return errnoResult(e)
	}
}

// fdCreating are the probed syscalls that return a new fd on success.
var fdCreating = map[uintptr]bool{}

// bad is an address no process maps: a pointer argument at it makes the
// kernel fail the call with EFAULT before it does anything.
const bad = uintptr(1)

func cstr(s string) uintptr {
	b, _ := unix.BytePtrFromString(s)
	return uintptr(unsafe.Pointer(b))
}

const (
	// Not in every x/sys version, or named differently.
	cloneNewTime      = 0x80
	cloneParent       = 0x8000 // invalid for unshare(2): EINVAL from the kernel
	uffdUserModeOnly  = 1
	readImpliesExec   = 0x0400000
	addrNoRandomize   = 0x0040000
	personalityQuery  = 0xffffffff
	linuxRebootMagic1 = 0xfee1dead
)

// cloneNS are the namespace flags the default profile refuses to clone(2)
// and unshare(2), by name.
var cloneNS = []struct {
	name string
	flag uintptr
}{
	{"NEWNS", unix.CLONE_NEWNS}, {"NEWCGROUP", unix.CLONE_NEWCGROUP}, {"NEWUTS", unix.CLONE_NEWUTS},
	{"NEWIPC", unix.CLONE_NEWIPC}, {"NEWUSER", unix.CLONE_NEWUSER}, {"NEWPID", unix.CLONE_NEWPID},
	{"NEWNET", unix.CLONE_NEWNET},
}

func probe() *Probes {
	devnull, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "posture: open /dev/null:", err)
		os.Exit(1)
	}
	defer unix.Close(devnull)
	dn := uintptr(devnull)
	self := uintptr(os.Getpid())
	fdcwd := unix.AT_FDCWD
	atCWD := uintptr(fdcwd) // -100 as an unsigned register value
	minus1 := ^uintptr(0)
	for _, nr := range []uintptr{unix.SYS_USERFAULTFD, unix.SYS_IO_URING_SETUP, unix.SYS_PERF_EVENT_OPEN, unix.SYS_BPF,
		unix.SYS_OPEN_TREE, unix.SYS_OPEN_TREE_ATTR, unix.SYS_FSOPEN, unix.SYS_FSMOUNT, unix.SYS_FSPICK, unix.SYS_PIDFD_GETFD,
		unix.SYS_OPEN_BY_HANDLE_AT} {
		fdCreating[nr] = true
	}

	// Every probe must be harmless if the call were allowed: it passes an
	// invalid flag, a bad pointer, fd -1 or a non-terminal, so that the
	// kernel refuses it (EINVAL, EFAULT, EBADF, ENOTTY, ...) before acting.
	// The comment says what the kernel answers without the filter; a few
	// calls check a capability first and answer EPERM without the filter
	// too (marked "cap first").
	denied := map[string]probeFn{
		// kernel keyrings
		"keyctl":            sys(unix.SYS_KEYCTL, 9999),                                   // unknown command: EOPNOTSUPP
		"add_key":           sys(unix.SYS_ADD_KEY, 0, 0, 0, 0, 0),                         // NULL type: EFAULT
		"request_key":       sys(unix.SYS_REQUEST_KEY, 0, 0, 0, 0),                        // NULL type: EFAULT
		"bpf":               sys(unix.SYS_BPF, 9999, 0, 0),                                // unknown command: EINVAL (or EPERM by sysctl)
		"perf_event_open":   sys(unix.SYS_PERF_EVENT_OPEN, 0, 0, minus1, minus1, 0x100),   // unknown flag: EINVAL
		"userfaultfd":       sys(unix.SYS_USERFAULTFD, uffdUserModeOnly|0x4),              // unknown flag: EINVAL
		"io_uring_setup":    sys(unix.SYS_IO_URING_SETUP, 1, 0),                           // NULL params: EFAULT
		"io_uring_enter":    sys(unix.SYS_IO_URING_ENTER, minus1, 0, 0, 0xffffffff, 0, 0), // unknown flags: EINVAL
		"io_uring_register": sys(unix.SYS_IO_URING_REGISTER, minus1, 9999, 0, 0),          // fd -1: EBADF/EINVAL
		// replacing or extending the kernel (cap first)
		"kexec_load":      sys(unix.SYS_KEXEC_LOAD, 0, 0, 0, 0x00ff0000),                   // foreign arch: EINVAL
		"kexec_file_load": sys(unix.SYS_KEXEC_FILE_LOAD, minus1, minus1, 0, 0, 0x80000000), // bad flags: EINVAL
		"init_module":     sys(unix.SYS_INIT_MODULE, bad, 0, bad),                          // empty image: ENOEXEC
		"finit_module":    sys(unix.SYS_FINIT_MODULE, minus1, bad, 0),                      // fd -1: EBADF
		"delete_module":   sys(unix.SYS_DELETE_MODULE, bad, 0),                             // bad name: EFAULT
		// the mount table
		"mount":          sys(unix.SYS_MOUNT, cstr("none"), cstr("/nonexistent-nsbox-probe"), bad, 0, 0), // bad fstype: EFAULT
		"umount2":        sys(unix.SYS_UMOUNT2, cstr("/nonexistent-nsbox-probe"), 0x80000000),            // bad flags: EINVAL
		"pivot_root":     sys(unix.SYS_PIVOT_ROOT, bad, bad),                                             // cap first; EFAULT
		"chroot":         sys(unix.SYS_CHROOT, cstr("/nonexistent-nsbox-probe")),                         // ENOENT
		"fsopen":         sys(unix.SYS_FSOPEN, bad, 0),                                                   // cap first; EFAULT
		"fsconfig":       sys(unix.SYS_FSCONFIG, minus1, 0, 0, 0, 0),                                     // fd -1: EINVAL
		"fsmount":        sys(unix.SYS_FSMOUNT, minus1, 0, 0),                                            // cap first; EBADF
		"fspick":         sys(unix.SYS_FSPICK, atCWD, bad, 0),                                            // cap first; EFAULT
		"move_mount":     sys(unix.SYS_MOVE_MOUNT, atCWD, bad, atCWD, bad, 0),                            // cap first; EFAULT
		"open_tree":      sys(unix.SYS_OPEN_TREE, atCWD, cstr("/"), 0x80000000),                          // bad flags: EINVAL
		"open_tree_attr": sys(unix.SYS_OPEN_TREE_ATTR, atCWD, cstr("/"), 0x80000000, 0, 0),               // bad flags: EINVAL
		"mount_setattr":  sys(unix.SYS_MOUNT_SETATTR, atCWD, cstr("/"), 0x80000000, 0, 0),                // bad flags: EINVAL
		// host-wide state
		"swapon":        sys(unix.SYS_SWAPON, bad, 0),                          // cap first; EFAULT
		"swapoff":       sys(unix.SYS_SWAPOFF, bad),                            // cap first; EFAULT
		"reboot":        sys(unix.SYS_REBOOT, 0x1234, 0x5678, 0, 0),            // cap first; bad magic: EINVAL
		"acct":          sys(unix.SYS_ACCT, bad),                               // cap first; EFAULT
		"quotactl":      sys(unix.SYS_QUOTACTL, 0xff, 0, 0, 0),                 // quota type 255: EINVAL
		"quotactl_fd":   sys(unix.SYS_QUOTACTL_FD, minus1, 0xff, 0, 0),         // fd -1: EBADF
		"syslog":        sys(unix.SYS_SYSLOG, 10, 0, 0),                        // SIZE_BUFFER, a read; EPERM if dmesg_restrict
		"vhangup":       sys(unix.SYS_VHANGUP),                                 // cap first; no ctty anyway
		"settimeofday":  sys(unix.SYS_SETTIMEOFDAY, bad, 0),                    // EFAULT
		"clock_settime": sys(unix.SYS_CLOCK_SETTIME, unix.CLOCK_REALTIME, bad), // EFAULT
		"clock_adjtime": sys(unix.SYS_CLOCK_ADJTIME, unix.CLOCK_REALTIME, bad), // EFAULT
		"adjtimex":      sys(unix.SYS_ADJTIMEX, bad),                           // EFAULT
		// other processes
		"ptrace":            sys(unix.SYS_PTRACE, unix.PTRACE_PEEKUSR, 1, 0, 0), // not our tracee: ESRCH
		"process_vm_readv":  sys(unix.SYS_PROCESS_VM_READV, 1, 0, 0, 0, 0, 1),   // flags 1: EINVAL
		"process_vm_writev": sys(unix.SYS_PROCESS_VM_WRITEV, 1, 0, 0, 0, 0, 1),  // flags 1: EINVAL
		"pidfd_getfd":       sys(unix.SYS_PIDFD_GETFD, minus1, 0, 1),            // flags 1: EINVAL
		"process_madvise":   sys(unix.SYS_PROCESS_MADVISE, minus1, 0, 0, 0, 1),  // flags 1: EINVAL
		"kcmp":              sys(unix.SYS_KCMP, self, self, 99, 0, 0),           // unknown type: EINVAL
		// namespaces and file handles
		"setns":             sys(unix.SYS_SETNS, minus1, 0),                                      // fd -1: EBADF
		"clone3":            sys(unix.SYS_CLONE3, 0, 0),                                          // size 0: EINVAL; the profile says ENOSYS
		"open_by_handle_at": sys(unix.SYS_OPEN_BY_HANDLE_AT, minus1, 0, 0),                       // fd -1: EBADF (or cap first)
		"name_to_handle_at": sys(unix.SYS_NAME_TO_HANDLE_AT, atCWD, cstr("/"), 0, 0, 0x80000000), // bad flags: EINVAL
		"lookup_dcookie":    sys(unix.SYS_LOOKUP_DCOOKIE, 0, 0, 0),                               // removed in Linux 6.8: ENOSYS
		// clone and unshare of new namespaces. unshare(CLONE_NEWUSER) in a
		// multithreaded process and unshare with CLONE_PARENT are EINVAL
		// from the kernel; clone with CLONE_SIGHAND but not CLONE_VM is
		// EINVAL before any process is created.
		"unshare(CLONE_NEWUSER)":        sys(unix.SYS_UNSHARE, unix.CLONE_NEWUSER),
		"unshare(CLONE_NEWNS)":          sys(unix.SYS_UNSHARE, unix.CLONE_NEWNS), // cap first
		"unshare(CLONE_NEWTIME|PARENT)": sys(unix.SYS_UNSHARE, cloneNewTime|cloneParent),
		// high bits above the 32 the kernel's flag test looks at cannot
		// hide the namespace flag from the masked compare
		"unshare(CLONE_NEWUSER|1<<32)": sys(unix.SYS_UNSHARE, unix.CLONE_NEWUSER|1<<32),
		// personality: only PER_LINUX-style values and the query pass
		"personality(READ_IMPLIES_EXEC)": personality(readImpliesExec),
		"personality(ADDR_NO_RANDOMIZE)": personality(addrNoRandomize),
		// terminal input injection, on /dev/null (ENOTTY when allowed); the
		// request's high 32 bits are ignored by the kernel
		"ioctl(TIOCSTI)":            sys(unix.SYS_IOCTL, dn, unix.TIOCSTI, bad),
		"ioctl(0xdeadbeef00005412)": sys(unix.SYS_IOCTL, dn, 0xdeadbeef00005412, bad),
		"ioctl(TIOCLINUX)":          sys(unix.SYS_IOCTL, dn, unix.TIOCLINUX, bad),
		"ioctl(0xffffffff0000541c)": sys(unix.SYS_IOCTL, dn, 0xffffffff0000541c, bad),
		"ioctl(TIOCSETD)":           sys(unix.SYS_IOCTL, dn, unix.TIOCSETD, bad),
		// vsock ignores network namespaces; an unknown socket type makes
		// the call harmless where it is allowed (EINVAL, or EAFNOSUPPORT
		// without vsock support); the high bits of the family are ignored
		"socket(AF_VSOCK)":       sys(unix.SYS_SOCKET, unix.AF_VSOCK, 9999, 0),
		"socket(AF_VSOCK|1<<32)": sys(unix.SYS_SOCKET, unix.AF_VSOCK|1<<32, 9999, 0),
	}
	for _, ns := range cloneNS {
		denied["unshare(CLONE_"+ns.name+"|PARENT)"] = sys(unix.SYS_UNSHARE, ns.flag|cloneParent)
		denied["clone(CLONE_"+ns.name+"|SIGHAND)"] = sys(unix.SYS_CLONE, ns.flag|unix.CLONE_SIGHAND|uintptr(unix.SIGCHLD), 0, 0, 0, 0)
	}
	addArchProbes(denied)

	allowed := map[string]probeFn{
		"getpid":                    sys(unix.SYS_GETPID),
		"personality(query)":        sys(unix.SYS_PERSONALITY, personalityQuery),
		"personality(PER_LINUX)":    personality(0),
		"unshare(0)":                sys(unix.SYS_UNSHARE, 0),
		"unshare(CLONE_FS)":         sys(unix.SYS_UNSHARE, unix.CLONE_FS),
		"ioctl(TCGETS)":             sys(unix.SYS_IOCTL, dn, unix.TCGETS, bad),                                 // ENOTTY: reached the kernel
		"ioctl(FIONREAD)":           sys(unix.SYS_IOCTL, dn, unix.TIOCINQ, bad),                                // ENOTTY
		"clone(SIGHAND, no NEW*)":   sys(unix.SYS_CLONE, unix.CLONE_SIGHAND|uintptr(unix.SIGCHLD), 0, 0, 0, 0), // EINVAL
		"socket(AF_UNIX, bad type)": sys(unix.SYS_SOCKET, unix.AF_UNIX, 9999, 0),                               // EINVAL
	}

	out := &Probes{Denied: map[string]string{}, Allowed: map[string]string{}, Arch: goarch}
	for _, name := range sortedKeys(denied) {
		out.Denied[name] = run(denied[name])
	}
	for _, name := range sortedKeys(allowed) {
		out.Allowed[name] = run(allowed[name])
	}
	// Other ABIs kill the whole process (bad-architecture action): each
	// runs in a child.
	for _, abi := range abis {
		out.Denied["abi:"+abi] = runABI(abi)
	}
	return out
}

// personality sets a persona and, when that worked, restores the old one.
func personality(v uintptr) probeFn {
	return func() string {
		old, _, e := unix.Syscall(unix.SYS_PERSONALITY, v, 0, 0)
		if e == 0 {
			unix.Syscall(unix.SYS_PERSONALITY, old, 0, 0)
		}
		return errnoResult(e)
	}
}

func run(f probeFn) (s string) {
	defer func() {
		if r := recover(); r != nil {
			s = fmt.Sprintf("panic: %v", r)
		}
	}()
	return f()
}

func sortedKeys(m map[string]probeFn) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// runABI runs `posture abi NAME` and describes how it ended: "OK" when the
// call ran (it returned the child's pid), an errno name, or the signal that
// killed the child.
func runABI(abi string) string {
	self, err := os.Executable()
	if err != nil {
		self = "/proc/self/exe"
	}
	cmd := exec.Command(self, "abi", abi)
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "signal:" + unix.SignalName(ws.Signal())
		}
		return fmt.Sprintf("exit:%d", ee.ExitCode())
	}
	if err != nil {
		return "start: " + err.Error()
	}
	var r struct {
		Ret   int64  `json:"ret"`
		Errno string `json:"errno"`
		Pid   int    `json:"pid"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return "bad child output: " + strings.TrimSpace(string(out))
	}
	if r.Errno != "OK" {
		return r.Errno
	}
	if int(r.Ret) == r.Pid {
		return "OK"
	}
	return fmt.Sprintf("returned %d, not the pid %d", r.Ret, r.Pid)
}

func abiChild(abi string) int {
	ret, e := abiCall(abi)
	b, _ := json.Marshal(map[string]any{"ret": ret, "errno": errnoResult(e), "pid": os.Getpid()})
	os.Stdout.Write(b)
	return 0
}

// Tiocsti is the tiocsti mode's report.
type Tiocsti struct {
	IsTTY     bool              `json:"is_tty"`
	Results   map[string]string `json:"results"`
	SessionID int               `json:"sid"`
}

// tiocsti tries, on fd 0, to become the terminal's controlling process
// (TIOCSCTTY: possible when no other session holds it) and to push "X" and
// "Y" into its input queue, the second time with garbage in the request's
// high 32 bits.
func tiocsti() *Tiocsti {
	t := &Tiocsti{Results: map[string]string{}}
	_, err := unix.IoctlGetTermios(0, unix.TCGETS)
	t.IsTTY = err == nil
	t.SessionID, _ = unix.Getsid(0)
	_, _, e := unix.Syscall(unix.SYS_IOCTL, 0, unix.TIOCSCTTY, 0)
	t.Results["TIOCSCTTY"] = errnoResult(e)
	x, y := byte('X'), byte('Y')
	_, _, e = unix.Syscall(unix.SYS_IOCTL, 0, unix.TIOCSTI, uintptr(unsafe.Pointer(&x)))
	t.Results["TIOCSTI"] = errnoResult(e)
	_, _, e = unix.Syscall(unix.SYS_IOCTL, 0, 0xdeadbeef00005412, uintptr(unsafe.Pointer(&y)))
	t.Results["TIOCSTI_high_bits"] = errnoResult(e)
	// TIOCLINUX subcode 6 (TIOCL_GETSHIFTSTATE), a read-only query; a pty
	// has no TIOCLINUX, only virtual consoles do.
	sub := byte(6)
	_, _, e = unix.Syscall(unix.SYS_IOCTL, 0, unix.TIOCLINUX, uintptr(unsafe.Pointer(&sub)))
	t.Results["TIOCLINUX"] = errnoResult(e)
	return t
}

// SelfExe is the selfexe mode's report.
type SelfExe struct {
	Pid          int               `json:"pid"`
	Exe          string            `json:"exe"`
	Results      map[string]string `json:"results"`
	OpenBinWrite string            `json:"open_bin_write"`
	Error        string            `json:"error,omitempty"`
}

// selfExe starts the nsbox binary visible inside as `nsbox call` on a
// hostCall socket whose other end is ours and never answers, so that it
// blocks, and tries to reach the binary's file for writing through
// /proc/PID/exe, the way CVE-2019-5736 overwrote runc's. (The client sends a
// "connect" message carrying the fd of a private connection and waits on
// that; the fd is kept open here so that it keeps waiting.)
func selfExe(bin string) *SelfExe {
	s := &SelfExe{Results: map[string]string{}}
	s.OpenBinWrite = openResult(bin, unix.O_WRONLY)
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		s.Error = "socketpair: " + err.Error()
		return s
	}
	mine := os.NewFile(uintptr(fds[0]), "mine")
	theirs := os.NewFile(uintptr(fds[1]), "theirs")
	defer mine.Close()
	cmd := exec.Command(bin, "call", "posture", "block")
	cmd.Env = []string{"NSBOX_HOSTCALL_FD=3", "PATH=/usr/bin:/bin"}
	cmd.ExtraFiles = []*os.File{theirs}
	if err := cmd.Start(); err != nil {
		s.Error = "start: " + err.Error()
		return s
	}
	theirs.Close()
	s.Pid = cmd.Process.Pid
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	// Wait until it runs the binary (its first message arrives on our end).
	buf, oob := make([]byte, 65536), make([]byte, unix.CmsgSpace(4*8))
	tv := unix.NsecToTimeval(int64(10 * time.Second))
	unix.SetsockoptTimeval(fds[0], unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	_, oobn, _, _, err := unix.Recvmsg(fds[0], buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		s.Error = "waiting for the call: " + err.Error()
	} else if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for _, m := range msgs {
			if rights, err := unix.ParseUnixRights(&m); err == nil {
				for _, fd := range rights {
					defer unix.Close(fd)
				}
			}
		}
	}
	exe := fmt.Sprintf("/proc/%d/exe", s.Pid)
	s.Exe, _ = readlink(exe)
	s.Results["open_rdonly"] = openResult(exe, unix.O_RDONLY)
	s.Results["open_wronly"] = openResult(exe, unix.O_WRONLY)
	s.Results["open_rdwr"] = openResult(exe, unix.O_RDWR)
	// Through an O_PATH fd re-opened by /proc/self/fd, the other route.
	if fd, err := unix.Open(exe, unix.O_PATH|unix.O_CLOEXEC, 0); err == nil {
		s.Results["reopen_o_path_wronly"] = openResult(fmt.Sprintf("/proc/self/fd/%d", fd), unix.O_WRONLY)
		unix.Close(fd)
	} else {
		s.Results["reopen_o_path_wronly"] = "O_PATH " + result(err)
	}
	return s
}
