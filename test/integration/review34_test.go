package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Review 34: the Landlock backend's metadata gate, third round
// (pkg/notify/meta.go, pkg/sandbox/landlock_meta.go,
// pkg/sandbox/landlock_worker.go commandFilterLandlock, after reviews 32
// and 33). Each test below fails on the code it was written against and
// passes once the weakness it names is fixed. The probes run as root and
// as uid 65534 unless said otherwise; every file they touch is made for
// the test (nothing of the host is changed, whatever the kernel allows).

// review34Run runs a python3 probe in a Landlock session whose workspace
// is ws, from ws/sub (the workspace itself is split by its protected
// entries, so files are made in sub), and returns its stdout.
func review34Run(t *testing.T, u user, ws, probe string) string {
	t.Helper()
	script := "cd sub && python3 -c '" + probe + "'; echo done"
	r := u.sh(t, &runOpts{dir: ws}, []string{"--backend", "landlock", "--workspace", ws}, script)
	t.Logf("probes:\n%s%s", r.stdout, r.stderr)
	if !strings.Contains(r.stdout, "done") || !strings.Contains(r.stdout, "PROBE_RAN") {
		t.Fatalf("the probe script did not run (exit %d): %s", r.code, r.stderr)
	}
	return r.stdout
}

// TestReview34ProcPidFdFromThread
//
// Severity: LOW (correctness: a mode or time change the kernel makes fails
// in the workspace).
//
// Weakness: procFDPath maps /proc/self/fd/N, /proc/thread-self/fd/N and
// /proc/TID/fd/N where TID is the CALLING THREAD's id, and every other
// path through /proc is resolved by openPath with RESOLVE_NO_MAGICLINKS:
// ELOOP. A multi-threaded program's non-main thread that names its own
// fd the common way, "/proc/<getpid()>/fd/N" (the process id, not its
// thread id), or "/proc/self/task/<tid>/fd/N", gets "Too many levels of
// symbolic links" for a file of the workspace, where the host and the
// namespace backend make the call (checked by hand: both "ok" outside the
// sandbox). The main thread's identical call works (its tid is the pid),
// so the failure depends on which thread a runtime happens to use.
//
// Attack (none: a regression): in a Python thread, chmod and utime of
// "/proc/<pid>/fd/N" and "/proc/<pid>/task/<tid>/fd/N" of a workspace file.
//
// Fix: map /proc/<tgid>/fd/N (the calling thread's thread group id, read
// from /proc/<tid>/status Tgid or the pidfd) and /proc/<tgid or
// self>/task/<tid>/fd/N too, each to the fd table the kernel would use
// (see TestReview34ProcSelfFdUnsharedTable).
func TestReview34ProcPidFdFromThread(t *testing.T) {
	for _, u := range users() {
		u := u
		t.Run(u.name, func(t *testing.T) {
			requireLandlock(t, u)
			ws := u.tempDir(t)
			u.mkdirs(t, filepath.Join(ws, "sub"))
			u.writeFile(t, filepath.Join(ws, "sub", "f"), "x\n", 0o644)
			probe := `
import os, threading
print("PROBE_RAN")
fd = os.open("f", os.O_RDONLY)
def th():
    tid = threading.get_native_id()
    for name, p in (("PID_FD", "/proc/%d/fd/%d" % (os.getpid(), fd)), ("TASK_FD", "/proc/%d/task/%d/fd/%d" % (os.getpid(), tid, fd))):
        try:
            os.chmod(p, 0o600); os.utime(p, (978307200, 978307200)); print(name + "_OK")
        except OSError as e:
            print(name, "failed:", e.strerror)
t = threading.Thread(target=th); t.start(); t.join()
`
			out := review34Run(t, u, ws, probe)
			for _, ok := range []string{"PID_FD_OK", "TASK_FD_OK"} {
				if !strings.Contains(out, ok) {
					t.Errorf("%s missing: a non-main thread's chmod/utime of its own workspace file through /proc/<pid>/... failed (the kernel makes it)", ok)
				}
			}
		})
	}
}

// TestReview34ProcSelfFdUnsharedTable
//
// Severity: LOW (correctness: the gate changes a different file than the
// one the call names; both are checked, so nothing outside the writable
// places is reached).
//
// Weakness: procFDPath turns /proc/self/fd/N into "the caller's fd N",
// which metaObject takes with pidfd_getfd through the CALLING THREAD's
// pidfd, i.e. from that thread's fd table. /proc/self is the thread group
// leader's directory: a thread that unshare(CLONE_FILES)'d has an fd table
// of its own, and the kernel resolves /proc/self/fd/N in the leader's. The
// gate then changes the thread's fd N, a different file, and reports
// success: the file the program named keeps its mode, another one of its
// files changes. Checked on the host: chmod("/proc/self/fd/N") from such a
// thread changes the leader's file.
//
// Attack (none: a wrong result): the main thread opens a (fd N); a thread
// unshares its fd table, closes N and opens b (fd N again), then
// chmod("/proc/self/fd/N", 0600): the kernel changes a, the gate b.
//
// Fix: map /proc/self/fd/N (and /proc/<tgid>/fd/N) to the thread group
// leader's fd N (pidfd_getfd through a pidfd of the process, not of the
// thread), and only /proc/thread-self/fd/N and /proc/<tid>/fd/N to the
// calling thread's; or map them only when the thread shares the leader's
// table (kcmp KCMP_FILES), else resolve the path as the leader's.
func TestReview34ProcSelfFdUnsharedTable(t *testing.T) {
	for _, u := range users() {
		u := u
		t.Run(u.name, func(t *testing.T) {
			requireLandlock(t, u)
			ws := u.tempDir(t)
			u.mkdirs(t, filepath.Join(ws, "sub"))
			u.writeFile(t, filepath.Join(ws, "sub", "a"), "a\n", 0o644)
			u.writeFile(t, filepath.Join(ws, "sub", "b"), "b\n", 0o644)
			probe := `
import ctypes, os, threading
libc = ctypes.CDLL(None, use_errno=True)
print("PROBE_RAN")
fa = os.open("a", os.O_RDONLY)
def th():
    if libc.unshare(0x400) != 0:  # CLONE_FILES
        print("unshare refused", ctypes.get_errno()); return
    os.close(fa)
    fb = os.open("b", os.O_RDONLY)
    if fb != fa:
        print("fd", fb, "not", fa); return
    ctypes.set_errno(0)
    print("chmod", libc.chmod(b"/proc/self/fd/%d" % fa, 0o600), ctypes.get_errno())
t = threading.Thread(target=th); t.start(); t.join()
print("MODES a=%o b=%o" % (os.stat("a").st_mode & 0o777, os.stat("b").st_mode & 0o777))
`
			out := review34Run(t, u, ws, probe)
			if strings.Contains(out, "unshare refused") || strings.Contains(out, " not ") {
				t.Skip("the setup could not be made here")
			}
			a, _ := os.Stat(filepath.Join(ws, "sub", "a"))
			b, _ := os.Stat(filepath.Join(ws, "sub", "b"))
			if a == nil || b == nil {
				t.Fatal("the probe's files are gone")
			}
			if a.Mode().Perm() != 0o600 {
				t.Errorf("a (the leader's fd N, which /proc/self/fd/N names) has mode %#o after the run, want 0600", a.Mode().Perm())
			}
			if b.Mode().Perm() != 0o644 {
				t.Errorf("b (the thread's own fd N) has mode %#o after the run, want 0644: the gate changed a file the call did not name", b.Mode().Perm())
			}
		})
	}
}

// TestReview34UtimeOmitBothChecksPath
//
// Severity: LOW (errno fidelity; a false "file metadata" violation event).
//
// Weakness: utimensat(2) with both tv_nsec UTIME_OMIT is a no-op that the
// kernel answers 0 before it even looks at the path ("Nothing to do, we
// must not even check the path", fs/utimes.c). The gate resolves the path
// first and answers ENOENT for a missing one and EACCES for one outside
// the writable places, and for the latter reports a file_metadata
// violation (onRefuse) for a call that changes nothing. Checked on the
// host: both calls return 0. A program that probes utimensat support with
// a no-op call on "/" or a path it has not made yet, or an rsync/cp-style
// "keep both times" that passes UTIME_OMIT twice, fails here only.
//
// Attack (none: a regression and a misleading audit record).
//
// Fix: in readMetaCall (utimensat, and futimens by fd), answer 0 when both
// times are UTIME_OMIT, before any lookup, as the kernel does.
func TestReview34UtimeOmitBothChecksPath(t *testing.T) {
	for _, u := range users() {
		u := u
		t.Run(u.name, func(t *testing.T) {
			requireLandlock(t, u)
			ws := u.tempDir(t)
			u.mkdirs(t, filepath.Join(ws, "sub"))
			probe := `
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
print("PROBE_RAN")
class TS(ctypes.Structure): _fields_ = [("s", ctypes.c_long), ("ns", ctypes.c_long)]
OMIT = (1 << 30) - 2
ts = (TS * 2)(TS(0, OMIT), TS(0, OMIT))
for name, p in (("OMIT_MISSING", b"not-there-yet"), ("OMIT_OUTSIDE", b"/etc/hostname")):
    ctypes.set_errno(0)
    r = libc.utimensat(-100, p, ts, 0)
    print(name + ("_OK" if r == 0 else " failed: " + os.strerror(ctypes.get_errno())))
`
			out := review34Run(t, u, ws, probe)
			for _, ok := range []string{"OMIT_MISSING_OK", "OMIT_OUTSIDE_OK"} {
				if !strings.Contains(out, ok) {
					t.Errorf("%s missing: utimensat with both times UTIME_OMIT (a no-op the kernel answers 0 without a lookup) failed in the sandbox", ok)
				}
			}
		})
	}
}

// TestReview34InodeIoctlsReachReadOnlyFiles
//
// Severity: MEDIUM for a root caller on a host whose file systems have
// fs-verity (btrfs, which needs no mkfs flag, on kernels with
// CONFIG_FS_VERITY such as Fedora's default install; ext4/f2fs with the
// verity feature): any host file it owns can be made permanently
// read-only; LOW root-less (the caller's own files; its btrfs subvolumes,
// such as rootless podman's storage, made read-only).
//
// Weakness: review 30 refused chattr's ioctls (FS_IOC_SETFLAGS, its 32-bit
// twin, FS_IOC_FSSETXATTR) because Landlock's ioctl right covers device
// files only, so an ioctl on a read-only file of the host that the caller
// owns reaches its file system. The list stops there, but other inode
// ioctls need only ownership or DAC write permission (checked with
// inode_permission, which Landlock does not hook), on an fd opened
// read-only, which Landlock allows outside the writable places:
//   - FS_IOC_ENABLE_VERITY: the file becomes immutable for good (every
//     later open for writing fails; no ioctl undoes it): ~/.bashrc,
//     ~/.gitconfig, or as root /etc/passwd;
//   - FS_IOC_SET_ENCRYPTION_POLICY on an empty directory the caller owns
//     (with FS_IOC_ADD_ENCRYPTION_KEY / REMOVE_ENCRYPTION_KEY, which any
//     user may call for v2 keys): what the host later creates there is
//     encrypted with the sandbox's key, or cannot be created (ENOKEY);
//   - BTRFS_IOC_SUBVOL_SETFLAGS: the owner makes a subvolume read-only.
//
// That is a change of a file's metadata outside the writable places, the
// class the metadata gate and review 30 close. The probe passes invalid
// arguments (version 0, an unknown flag), so that nothing changes on any
// kernel; what it checks is the seccomp decision: EPERM as for chattr,
// where today the call reaches the file system (EINVAL, EOPNOTSUPP or
// ENOTTY, depending on it).
//
// Attack: fd = open("~/.bashrc", O_RDONLY); ioctl(fd, FS_IOC_ENABLE_VERITY,
// &{version: 1, hash_algorithm: SHA256, block_size: 4096}).
//
// Fix: refuse these ioctl requests in commandFilterLandlock with EPERM
// next to FS_IOC_SETFLAGS (FS_IOC_ENABLE_VERITY 0x40806685,
// FS_IOC_SET_ENCRYPTION_POLICY 0x800c6613, FS_IOC_ADD_ENCRYPTION_KEY
// 0xc0506617, BTRFS_IOC_SUBVOL_SETFLAGS 0x4008941a, FS_IOC_SETVERSION);
// better, allow only a list of the ioctl requests commands need on
// non-device files (FIONREAD, FIOCLONE..., TCGETS) and refuse the rest.
func TestReview34InodeIoctlsReachReadOnlyFiles(t *testing.T) {
	for _, u := range users() {
		u := u
		t.Run(u.name, func(t *testing.T) {
			requireLandlock(t, u)
			ws := u.tempDir(t)
			u.mkdirs(t, filepath.Join(ws, "sub"))
			// The workspace's .git is protected (read-only to commands,
			// as the rest of the host): a place commands may read, not
			// write, that the test owns.
			ro := filepath.Join(ws, ".git", "config")
			emptyDir := filepath.Join(ws, ".git", "empty")
			u.mkdirs(t, emptyDir)
			u.writeFile(t, ro, "[core]\n", 0o644)
			probe := `
import ctypes, os, fcntl, errno
print("PROBE_RAN")
f = os.open("` + ro + `", os.O_RDONLY)
d = os.open("` + emptyDir + `", os.O_RDONLY | os.O_DIRECTORY)
try:
    open("` + ro + `", "a").close(); print("the file is writable: no probe")
except OSError:
    print("OPENED_READ_ONLY")
# struct fsverity_enable_arg with version 0: EINVAL wherever it arrives.
verity = bytearray(128)
# struct fscrypt_policy_v1 with version 0xff: EINVAL wherever it arrives.
crypt = bytearray(b"\xff" + b"\0" * 11)
subvol = bytearray((1 << 63).to_bytes(8, "little"))
# The generation ioctl of ext4 and the received-subvolume one of btrfs (review
# 67): a generation of 12345, and 200 zero bytes.
gen = bytearray((12345).to_bytes(8, "little"))
received = bytearray(200)
for name, fd, req, arg in (("VERITY", f, 0x40806685, verity), ("ENCRYPTION_POLICY", d, 0x800c6613, crypt), ("SUBVOL_SETFLAGS", d, 0x4008941a, subvol), ("EXT4_SETVERSION", f, 0x40086604, gen), ("SET_RECEIVED_SUBVOL", d, 0xc0c89425, received)):
    try:
        fcntl.ioctl(fd, req, arg); print(name, "reached the file system: 0")
    except OSError as e:
        if e.errno == errno.EPERM:
            print(name + "_REFUSED")
        else:
            print(name, "reached the file system:", errno.errorcode.get(e.errno, e.errno))
`
			out := review34Run(t, u, ws, probe)
			if !strings.Contains(out, "OPENED_READ_ONLY") {
				t.Fatal("the setup failed: the file must be readable, not writable, by commands")
			}
			for _, name := range []string{"VERITY", "ENCRYPTION_POLICY", "SUBVOL_SETFLAGS", "EXT4_SETVERSION", "SET_RECEIVED_SUBVOL"} {
				if !strings.Contains(out, name+"_REFUSED") {
					t.Errorf("%s: the ioctl on a read-only file/directory outside the writable places was not refused by the commands' filter (EPERM, as chattr's): it reached the file system", name)
				}
			}
		})
	}
}
