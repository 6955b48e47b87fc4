package notify

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/pkg/internal/cbpf"
)

// metaEnv makes the test child install installMetaFilter instead of the
// socket filter: what the Landlock backend's command filter hands over.
const metaEnv = "NSBOX_NOTIFY_TEST_META"

// installMetaFilter hands the native metadata calls (MetaCalls) to a
// listener, on every thread, and returns the listener.
func installMetaFilter() (int, error) {
	const ld, ret = cbpf.LdAbs, cbpf.Ret
	chmod, chown, utimes := MetaCalls()
	a := &asm{}
	a.Stmt(ld, offArch)
	a.jeq(auditArch, "", "allow")
	a.Stmt(ld, offNr)
	for _, nr := range append(append(chmod, chown...), utimes...) {
		a.jeq(nr, "notify", "")
	}
	a.Label("allow")
	a.Stmt(ret, unix.SECCOMP_RET_ALLOW)
	a.Label("notify")
	a.Stmt(ret, unix.SECCOMP_RET_USER_NOTIF)
	prog := a.done()
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	r, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_NEW_LISTENER|unix.SECCOMP_FILTER_FLAG_TSYNC|unix.SECCOMP_FILTER_FLAG_TSYNC_ESRCH, uintptr(unsafe.Pointer(&fprog)))
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

// metaStep is one call the child makes: its name and the call.
type metaStep struct {
	name string
	call func() error
}

func init() {
	childModes["meta"] = func(args []string, _ *bufio.Reader) int {
		rw, ro := args[0], args[1]
		for _, s := range append(metaSteps(rw, ro), legacyMetaSteps(rw, ro)...) {
			r := "ok"
			if err := s.call(); err != nil {
				r = errName(err)
			}
			fmt.Println(s.name, r)
		}
		return 0
	}
}

var (
	metaTime = []unix.Timespec{{Sec: 1000000000}, {Sec: 1000000000}}
	metaNow  = []unix.Timespec{{Nsec: unix.UTIME_NOW}, {Nsec: unix.UTIME_NOW}}
)

// metaSteps: rw is a writable directory (rw/f, rw/sub, rw/tolink -> ../ro/f
// and rw/lnk -> f in it), ro one that is not (ro/f in it).
func metaSteps(rw, ro string) []metaStep {
	chmodAt := func(dir int, p string, mode uint32, flags int) func() error {
		return func() error {
			b := bytePtr(p)
			_, _, e := unix.Syscall6(unix.SYS_FCHMODAT2, uintptr(dir), uintptr(unsafe.Pointer(b)), uintptr(mode), uintptr(flags), 0, 0)
			return errOf(e)
		}
	}
	fdOf := func(p string, flags int, f func(fd int) error) func() error {
		return func() error {
			fd, err := unix.Open(p, flags|unix.O_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("open: %w", err)
			}
			defer unix.Close(fd)
			return f(fd)
		}
	}
	return []metaStep{
		{"chmod-rw", func() error { return unix.Fchmodat(unix.AT_FDCWD, rw+"/f", 0o640, 0) }},
		{"chmod-ro", func() error { return unix.Fchmodat(unix.AT_FDCWD, ro+"/f", 0o644, 0) }},
		{"chmod-dir-rw", func() error { return unix.Fchmodat(unix.AT_FDCWD, rw+"/sub", 0o750, 0) }},
		{"chmod-dir-ro", func() error { return unix.Fchmodat(unix.AT_FDCWD, ro, 0o750, 0) }},
		// Through a symlink in rw to ro/f: the target is what counts.
		{"chmod-link-out", func() error { return unix.Fchmodat(unix.AT_FDCWD, rw+"/tolink", 0o644, 0) }},
		{"chmod-nofollow-link", chmodAt(unix.AT_FDCWD, rw+"/lnk", 0o600, unix.AT_SYMLINK_NOFOLLOW)},
		// Relative to the working directory, up with "..".
		{"chmod-relative", func() error {
			if err := unix.Chdir(rw + "/sub"); err != nil {
				return err
			}
			return unix.Fchmodat(unix.AT_FDCWD, "../f", 0o604, 0)
		}},
		{"chmod-relative-out", func() error { return unix.Fchmodat(unix.AT_FDCWD, "../../ro/f", 0o600, 0) }},
		// Relative to a directory fd, and AT_EMPTY_PATH on an O_PATH fd.
		{"chmodat-dirfd", fdOf(rw, unix.O_PATH|unix.O_DIRECTORY, func(d int) error { return chmodAt(d, "f", 0o600, 0)() })},
		{"chmodat-empty-ro", fdOf(ro+"/f", unix.O_PATH, func(d int) error { return chmodAt(d, "", 0o600, unix.AT_EMPTY_PATH)() })},
		{"chmodat-empty-nopath", fdOf(ro+"/f", unix.O_PATH, func(d int) error { return chmodAt(d, "", 0o600, 0)() })},
		{"fchmod-rw", fdOf(rw+"/f", unix.O_RDONLY, func(fd int) error { return unix.Fchmod(fd, 0o600) })},
		{"fchmod-ro", fdOf(ro+"/f", unix.O_RDONLY, func(fd int) error { return unix.Fchmod(fd, 0o600) })},
		{"fchmod-opath", fdOf(rw+"/f", unix.O_PATH, func(fd int) error { return unix.Fchmod(fd, 0o600) })},
		// The caller's own fd through /proc (glibc's lchmod before
		// 2.39): that file is checked; any other /proc magic link
		// would name the supervisor's own files: ELOOP.
		{"chmod-magic", fdOf(rw+"/f", unix.O_PATH, func(fd int) error {
			return unix.Fchmodat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), 0o600, 0)
		})},
		{"chmod-magic-ro", fdOf(ro+"/f", unix.O_PATH, func(fd int) error {
			return unix.Fchmodat(unix.AT_FDCWD, "/dev/fd/"+strconv.Itoa(fd), 0o644, 0)
		})},
		{"chmod-proc-cwd", func() error { return unix.Fchmodat(unix.AT_FDCWD, "/proc/self/cwd/../f", 0o600, 0) }},
		{"chown-rw", func() error { return unix.Fchownat(unix.AT_FDCWD, rw+"/f", -1, -1, 0) }},
		{"chown-ro", func() error { return unix.Fchownat(unix.AT_FDCWD, ro+"/f", -1, -1, 0) }},
		{"fchown-ro", fdOf(ro+"/f", unix.O_RDONLY, func(fd int) error { return unix.Fchown(fd, -1, -1) })},
		{"chown-dev", func() error { return unix.Fchownat(unix.AT_FDCWD, "/dev/null", -1, -1, 0) }},
		{"utimes-rw", func() error { return unix.UtimesNanoAt(unix.AT_FDCWD, rw+"/f", metaTime, 0) }},
		{"utimes-ro", func() error { return unix.UtimesNanoAt(unix.AT_FDCWD, ro+"/f", metaTime, 0) }},
		{"utimes-now-ro", func() error { return unix.UtimesNanoAt(unix.AT_FDCWD, ro+"/f", nil, 0) }},
		{"utimes-link-rw", func() error {
			return unix.UtimesNanoAt(unix.AT_FDCWD, rw+"/lnk", metaTime, unix.AT_SYMLINK_NOFOLLOW)
		}},
		{"utimes-link-out", func() error { return unix.UtimesNanoAt(unix.AT_FDCWD, rw+"/tolink", metaTime, 0) }},
		{"futimens-rw", fdOf(rw+"/sub", unix.O_RDONLY|unix.O_DIRECTORY, func(fd int) error { return futimens(fd, metaTime) })},
		{"futimens-ro", fdOf(ro+"/f", unix.O_RDONLY, func(fd int) error { return futimens(fd, metaNow) })},
		{"utimes-badflags", func() error { return unix.UtimesNanoAt(unix.AT_FDCWD, rw+"/f", metaTime, 0x8000) }},
		{"utimes-missing", func() error { return unix.UtimesNanoAt(unix.AT_FDCWD, rw+"/none", metaTime, 0) }},
		{"utimes-badnsec", func() error {
			return unix.UtimesNanoAt(unix.AT_FDCWD, rw+"/f", []unix.Timespec{{Nsec: 2e9}, {}}, 0)
		}},
	}
}

// metaTree makes rw and ro as metaSteps wants them, in a directory any
// user may search.
func metaTree(t *testing.T) (rw, ro string) {
	t.Helper()
	top := t.TempDir()
	os.Chmod(filepath.Dir(top), 0o755) // the test's own, 0700
	os.Chmod(top, 0o755)
	rw, ro = filepath.Join(top, "rw"), filepath.Join(top, "ro")
	for _, d := range []string{rw, ro, filepath.Join(rw, "sub")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(rw, "f"), filepath.Join(ro, "f")} {
		if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../ro/f", filepath.Join(rw, "tolink")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("f", filepath.Join(rw, "lnk")); err != nil {
		t.Fatal(err)
	}
	return rw, ro
}

func inodeOf(t testing.TB, p string) MetaInode {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return MetaInode{Dev: st.Dev, Ino: st.Ino}
}

// runMetaChild runs the "meta" scenario under a Server whose MetaGate lets
// rw be written, the child started with attr; it returns the results and
// the refusals the gate reported.
func runMetaChild(t *testing.T, rw, ro string, o Options, attr *syscall.SysProcAttr) (map[string]string, []string) {
	t.Helper()
	if err := Supported(); err != nil {
		t.Skip(err)
	}
	var refused []string
	o.Meta = NewMetaGate([]MetaInode{inodeOf(t, rw)}, func(op, p string) { refused = append(refused, op+" "+p) })
	cmd := childCmd(t, "meta", []string{rw, ro}, attr)
	cmd.Env = append(cmd.Env, metaEnv+"=1")
	stdin, out := startGateChild(t, cmd, GateConfig{}, o)
	stdin.Write([]byte("go\n"))
	res := map[string]string{}
	for out.Scan() {
		var k, v string
		fmt.Sscanf(out.Text(), "%s %s", &k, &v)
		res[k] = v
	}
	cmd.Wait()
	return res, refused
}

func modeOf(t *testing.T, p string) os.FileMode {
	t.Helper()
	st, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

// checkMeta compares the child's results with what the gate must answer,
// and the files with what the allowed calls must have made of them.
func checkMeta(t *testing.T, res map[string]string, rw, ro string) {
	t.Helper()
	want := map[string]string{
		"chmod-rw": "ok", "chmod-ro": "EACCES", "chmod-dir-rw": "ok", "chmod-dir-ro": "EACCES",
		"chmod-link-out": "EACCES", "chmod-nofollow-link": "ENOTSUP",
		"chmod-relative": "ok", "chmod-relative-out": "EACCES",
		"chmodat-dirfd": "ok", "chmodat-empty-ro": "EACCES", "chmodat-empty-nopath": "ENOENT",
		"fchmod-rw": "ok", "fchmod-ro": "EACCES", "fchmod-opath": "EBADF",
		"chmod-magic": "ok", "chmod-magic-ro": "EACCES", "chmod-proc-cwd": "ELOOP",
		"chown-rw": "ok", "chown-ro": "EACCES", "fchown-ro": "EACCES", "chown-dev": "EACCES",
		"utimes-rw": "ok", "utimes-ro": "EACCES", "utimes-now-ro": "EACCES",
		"utimes-link-rw": "ok", "utimes-link-out": "EACCES",
		"futimens-rw": "ok", "futimens-ro": "EACCES",
		"utimes-badflags": "EINVAL", "utimes-missing": "ENOENT", "utimes-badnsec": "EINVAL",
	}
	for k, v := range legacyMetaWant {
		want[k] = v
	}
	for k, v := range want {
		if res[k] != v {
			t.Errorf("%s: %q, want %q", k, res[k], v)
		}
	}
	// The last allowed chmod of rw/f was fchmod's 0600; ro/f never moved.
	if m := modeOf(t, filepath.Join(rw, "f")); m != 0o600 {
		t.Errorf("rw/f mode %o, want 600", m)
	}
	if m := modeOf(t, filepath.Join(ro, "f")); m != 0o600 {
		t.Errorf("ro/f mode %o, want 600 (unchanged)", m)
	}
	if m := modeOf(t, filepath.Join(rw, "sub")); m != 0o750 {
		t.Errorf("rw/sub mode %o, want 750", m)
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(ro, "f"), &st); err != nil || st.Mtim.Sec == metaTime[0].Sec {
		t.Errorf("ro/f's time was changed: %v %v", st.Mtim, err)
	}
	if err := unix.Lstat(filepath.Join(rw, "lnk"), &st); err != nil || st.Mtim.Sec != metaTime[0].Sec {
		t.Errorf("rw/lnk's own time was not set: %v %v", st.Mtim, err)
	}
	if err := unix.Lstat(filepath.Join(rw, "sub"), &st); err != nil || st.Mtim.Sec != metaTime[0].Sec {
		t.Errorf("rw/sub's time was not set through its fd: %v %v", st.Mtim, err)
	}
}

// TestMetaGate: mode and time changes pass on files in or beneath a
// writable inode, and are refused (EACCES) elsewhere, whichever call and
// path form names the file, with the kernel's own answers kept for bad
// arguments.
func TestMetaGate(t *testing.T) {
	rw, ro := metaTree(t)
	res, refused := runMetaChild(t, rw, ro, Options{}, nil)
	checkMeta(t, res, rw, ro)
	if len(refused) == 0 {
		t.Error("no refusal reported")
	}
	for _, r := range refused {
		t.Log("refused:", r)
	}
}

// TestMetaGateAsTarget: a root supervisor makes the calls with the
// target's ids and no capability: a file of the writable place that the
// target does not own stays as it was (EPERM, as the kernel answers its
// owner check), while its own change passes.
func TestMetaGateAsTarget(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (a supervisor that switches to a target's ids)")
	}
	rw, ro := metaTree(t)
	for _, p := range []string{rw, ro, filepath.Join(rw, "sub"), filepath.Join(rw, "f"), filepath.Join(ro, "f"), filepath.Join(rw, "lnk"), filepath.Join(rw, "tolink")} {
		if err := os.Lchown(p, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	rootOwned := filepath.Join(rw, "root")
	if err := os.WriteFile(rootOwned, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	attr := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}}
	res, _ := runMetaChild(t, rw, ro, Options{AsTarget: true}, attr)
	checkMeta(t, res, rw, ro)

	// The root-owned file in rw: the target may not change it.
	res2, _ := runMetaOne(t, rootOwned, Options{AsTarget: true}, attr)
	if res2 != "EPERM" {
		t.Errorf("chmod of a root-owned file in rw as nobody: %q, want EPERM", res2)
	}
	if m := modeOf(t, rootOwned); m != 0o644 {
		t.Errorf("root-owned file's mode %o, want 644 (unchanged)", m)
	}
}

func init() {
	childModes["meta-one"] = func(args []string, _ *bufio.Reader) int {
		r := "ok"
		if err := unix.Fchmodat(unix.AT_FDCWD, args[0], 0o600, 0); err != nil {
			r = errName(err)
		}
		fmt.Println("one", r)
		return 0
	}
}

// runMetaOne runs one chmod of p under a gate that lets p's directory be
// written.
func runMetaOne(t *testing.T, p string, o Options, attr *syscall.SysProcAttr) (string, []string) {
	t.Helper()
	var refused []string
	o.Meta = NewMetaGate([]MetaInode{inodeOf(t, filepath.Dir(p))}, func(op, p string) { refused = append(refused, op+" "+p) })
	cmd := childCmd(t, "meta-one", []string{p}, attr)
	cmd.Env = append(cmd.Env, metaEnv+"=1")
	stdin, out := startGateChild(t, cmd, GateConfig{}, o)
	stdin.Write([]byte("go\n"))
	r := ""
	for out.Scan() {
		fmt.Sscanf(out.Text(), "one %s", &r)
	}
	cmd.Wait()
	return r, refused
}

// bytePtr is s as a NUL-terminated C string.
func bytePtr(s string) *byte {
	p, err := unix.BytePtrFromString(s)
	if err != nil {
		panic(err)
	}
	return p
}

// futimens is utimensat(fd, NULL, ts, 0).
func futimens(fd int, ts []unix.Timespec) error {
	_, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	return errOf(e)
}

// errOf is a raw call's error: nil for 0.
func errOf(e unix.Errno) error {
	if e != 0 {
		return e
	}
	return nil
}

// TestProcFDPath: the spellings of a process's own fds and the table
// each names; anything else is resolved as a path.
func TestProcFDPath(t *testing.T) {
	const tid, tgid = 1235, 1234
	for _, c := range []struct {
		p     string
		fd    int
		table int
	}{
		{"/proc/self/fd/3", 3, leaderTable},
		{"/proc/1234/fd/3", 3, leaderTable},
		{"/dev/fd/7", 7, leaderTable},
		{"/dev/stdout", 1, leaderTable},
		{"/proc/thread-self/fd/3", 3, threadTable},
		{"/proc/1235/fd/3", 3, threadTable},
		{"/proc/1234/task/1235/fd/3", 3, threadTable},
		{"/proc/1234/task/1236/fd/3", -1, noTable}, // another thread's
		{"/proc/1/fd/3", -1, noTable},
		{"/proc/self/fd/03", -1, noTable},
		{"/proc/self/fd/3/", -1, noTable},
		{"/proc/self/cwd", -1, noTable},
		{"/proc/self/fd/-1", -1, noTable},
		{"/dev/fd/x", -1, noTable},
	} {
		fd, table := procFDPath(c.p, tid, tgid)
		if table != c.table || (table != noTable && fd != c.fd) {
			t.Errorf("%s: fd %d table %d, want %d %d", c.p, fd, table, c.fd, c.table)
		}
	}
}

// TestMemErrno: a read the kernel refused for permission is EPERM (or
// ESRCH), never the program's bad pointer.
func TestMemErrno(t *testing.T) {
	for err, want := range map[error]unix.Errno{unix.EPERM: unix.EPERM, unix.ESRCH: unix.ESRCH, unix.EFAULT: unix.EFAULT, unix.EIO: unix.EFAULT} {
		if got := memErrno(err); got != want {
			t.Errorf("%v: %v, want %v", err, got, want)
		}
	}
}

// TestMetaGateWithoutPidfdGetfd: where pidfd_getfd is refused (a
// container runtime's default seccomp profile, without CAP_SYS_PTRACE),
// the gate opens the target's fds through /proc/TID/fd and reads its
// memory through /proc/TID/mem (process_vm_readv is refused there too),
// and answers every call form as before (the Landlock backend runs in such containers).
func TestMetaGateWithoutPidfdGetfd(t *testing.T) {
	saved, savedRead := pidfdGetfd, processVMReadv
	var refused, refusedRead atomic.Int64
	pidfdGetfd = func(int, int, int) (int, error) { refused.Add(1); return -1, unix.EPERM }
	processVMReadv = func(int, []unix.Iovec, []unix.RemoteIovec, uint) (int, error) {
		refusedRead.Add(1)
		return 0, unix.EPERM
	}
	t.Cleanup(func() { pidfdGetfd, processVMReadv = saved, savedRead })
	rw, ro := metaTree(t)
	res, _ := runMetaChild(t, rw, ro, Options{}, nil)
	checkMeta(t, res, rw, ro)
	if refused.Load() == 0 || refusedRead.Load() == 0 {
		t.Errorf("pidfd_getfd tried %d times, process_vm_readv %d: the test proves nothing", refused.Load(), refusedRead.Load())
	}
}
