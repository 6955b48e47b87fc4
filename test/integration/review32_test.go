package integration

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Review 32: the Landlock backend's metadata gate (chmod(2), utimensat(2)
// and their kin decided by the supervisor: pkg/notify/meta.go,
// pkg/sandbox/landlock_meta.go). Each test below fails on the code it was
// written against and passes once the weakness it names is fixed. The
// probes run as root and as uid 65534 unless said otherwise.

// review32Mode is a file's mode bits with setuid, setgid and sticky, as the
// host sees them.
func review32Mode(t *testing.T, p string) uint32 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Mode & 0o7777
}

// TestReview32ChownStripsModeOutsideWritable
//
// Severity: HIGH (root caller: the host's setuid and setgid programs, and
// file capabilities; MEDIUM root-less: the caller's own setuid/setgid files).
//
// Weakness: the gate covers the chmod and utimes families only, but
// chown(2) changes a file's mode too: on a non-directory it always clears
// S_ISUID, and S_ISGID with group execute (and drops security.capability),
// even when neither owner nor group changes, and it updates the ctime. The
// commands' filter lets chown/lchown/fchown/fchownat pass with a group of -1
// or of the caller's own (chown2/chown3 in commandFilterLandlock), and
// Landlock has no right for chown, so the call is made by the kernel on
// any file the caller owns that the command can name, read-only and hidden
// ones included. A root caller's commands run as uid 0: they own the host's
// /usr/bin/sudo, passwd, su, mount, ping (capabilities) and can strip them
// all with `chown 0:0 /usr/bin/sudo` (sudo and su stop working host-wide).
//
// Attack: chown(path, -1, -1) or chown(path, uid, gid) (the caller's own)
// on a setuid/setgid file outside the writable places; chmod on the same
// file is refused by the gate, chown is not.
//
// Fix: hand chown, lchown, fchown and fchownat (and their x86-64 legacy
// numbers) to the metadata gate as well, performed only on files that are,
// or lie beneath, a writable inode (EACCES otherwise), as chmod is.
func TestReview32ChownStripsModeOutsideWritable(t *testing.T) {
	for _, u := range users() {
		u := u
		t.Run(u.name, func(t *testing.T) {
			requireLandlock(t, u)
			ws := u.tempDir(t)
			base := filepath.Dir(ws)
			suid := filepath.Join(base, "suid-tool")
			sgid := filepath.Join(base, "sgid-tool")
			u.writeFile(t, suid, "#!/bin/sh\n", 0o755)
			u.writeFile(t, sgid, "#!/bin/sh\n", 0o755)
			// After the chown: WriteFile applies the umask, and chown
			// itself would clear the bits.
			// syscall.Chmod: os.Chmod takes os.ModeSetuid, not 04000.
			if err := syscall.Chmod(suid, 0o4755); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Chmod(sgid, 0o2755); err != nil {
				t.Fatal(err)
			}
			script := `perl -e '
				print chmod(0755, "` + suid + `") ? "CHMOD_PASSED\n" : "chmod refused: $!\n";
				print chown(-1, -1, "` + suid + `") ? "CHOWN_NOCHANGE_PASSED\n" : "chown refused: $!\n";
				print chown(` + strconv.Itoa(u.uid) + `, ` + strconv.Itoa(u.gid) + `, "` + sgid + `") ? "CHOWN_OWN_PASSED\n" : "chown refused: $!\n";
			'; echo done`
			r := u.sh(t, &runOpts{dir: ws}, []string{"--backend", "landlock", "--workspace", ws}, script)
			t.Logf("probes:\n%s%s", r.stdout, r.stderr)
			if !strings.Contains(r.stdout, "done") {
				t.Fatalf("the probe script did not run (exit %d): %s", r.code, r.stderr)
			}
			if strings.Contains(r.stdout, "CHMOD_PASSED") {
				t.Errorf("chmod outside the writable places passed (the gate itself failed)")
			}
			if got := review32Mode(t, suid); got != 0o4755 {
				t.Errorf("%s: mode %#o after the run, want %#o: chown(-1, -1) stripped the setuid bit of a file outside the writable places (chmod of it is refused)", suid, got, 0o4755)
			}
			if got := review32Mode(t, sgid); got != 0o2755 {
				t.Errorf("%s: mode %#o after the run, want %#o: chown to the caller's own ids stripped the setgid bit of a file outside the writable places", sgid, got, 0o2755)
			}
		})
	}
}

// TestReview32RootDeviceNodesMetadata
//
// Severity: MEDIUM (root caller only; a host-wide denial of service that
// lasts until the device node is fixed or the host reboots).
//
// Weakness: the gate lets a call change every inode Landlock lets the
// commands write (Ruleset.Writable), and the Landlock backend grants
// WriteFile on the host's own /dev/null, /dev/zero, /dev/full,
// /dev/random, /dev/urandom and /dev/tty (there is no private /dev). Being
// writable is not being the sandbox's: those nodes are shared with every
// process of the host. A root caller's commands run as uid 0, the owner of
// the nodes, so the gate (asTarget, no CAP_FOWNER needed for the owner)
// makes `chmod 0600 /dev/null` on the host's node: every non-root program
// of the host then fails to open /dev/null. Their times can be set too.
// The namespace backend refuses both (the nodes are bound into a user
// namespace whose root does not own them: EPERM, checked by hand).
//
// Attack: chmod 0644 /dev/full (any mode the filter lets pass drops the
// group/other write bits), touch -d 2001-01-01 /dev/full. /dev/full is used
// here, and restored at once, because nothing else on a CI host uses it.
//
// Fix: do not count device nodes (and other inodes shared with the host
// that the sandbox did not get as its own: the rules of landlockGrants'
// device list) as writable for the gate: build MetaGate from the grants
// of the workspace, TMPDIR and writable binds only, or refuse character
// and block devices in decideMeta.
func TestReview32RootDeviceNodesMetadata(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs a root caller")
	}
	u := users()[0]
	requireLandlock(t, u)
	const dev = "/dev/full"
	var before unix.Stat_t
	if err := unix.Stat(dev, &before); err != nil {
		t.Skip(err)
	}
	restore := func() {
		unix.Chmod(dev, before.Mode&0o7777)
		unix.UtimesNano(dev, []unix.Timespec{before.Atim, before.Mtim})
	}
	t.Cleanup(restore)
	ws := u.tempDir(t)
	r := u.sh(t, &runOpts{dir: ws}, []string{"--backend", "landlock", "--workspace", ws},
		`touch -d 2001-01-01 `+dev+` 2>/dev/null && echo TOUCH_DEV_PASSED; chmod 0644 `+dev+` 2>/dev/null && echo CHMOD_DEV_PASSED; echo done`)
	var after unix.Stat_t
	unix.Stat(dev, &after)
	restore()
	t.Logf("probes:\n%s%s", r.stdout, r.stderr)
	if !strings.Contains(r.stdout, "done") {
		t.Fatalf("the probe script did not run (exit %d): %s", r.code, r.stderr)
	}
	if after.Mode&0o7777 != before.Mode&0o7777 {
		t.Errorf("%s: the sandbox changed the host's device node's mode from %#o to %#o", dev, before.Mode&0o7777, after.Mode&0o7777)
	}
	if after.Mtim != before.Mtim {
		t.Errorf("%s: the sandbox changed the host's device node's time to %v", dev, time.Unix(after.Mtim.Unix()))
	}
}

// TestReview32ProcSelfFdChmod
//
// Severity: MEDIUM (correctness: common tools fail in the workspace).
//
// Weakness: metaObject resolves the command's path in the supervisor with
// RESOLVE_NO_MAGICLINKS, so every path through /proc/self/fd/N (or
// /dev/fd/N, /proc/thread-self/fd/N) fails with ELOOP, even for a file of
// the workspace. That is exactly how glibc before 2.39 (Debian 12, Ubuntu
// 22.04, RHEL 9) makes fchmodat(..., AT_SYMLINK_NOFOLLOW) and lchmod: it
// opens the file O_PATH|O_NOFOLLOW and calls chmod("/proc/self/fd/N").
// GNU tar restores directory modes that way, so `tar xpf` (and a root
// caller's plain `tar xf`) exits 2 with "Cannot change mode: Too many
// levels of symbolic links"; Python's os.chmod(p, m, follow_symlinks=False)
// (pathlib, shutil with symlinks) and rsync's lchmod fail the same way.
// The namespace backend (the kernel follows the link) makes them all.
//
// Attack (none: a regression): in a writable directory, tar xpf of an
// archive with a directory, os.chmod(follow_symlinks=False), and chmod of
// /proc/self/fd/3 on a workspace file.
//
// Fix: resolve /proc/self/..., /proc/thread-self/... and /proc/<tgid>/...
// as the target's (from its /proc/<tid> directory), and follow its fd
// magic links to the target's file (getfd), then check that file as any
// other; the check is on the object reached, so following the link is
// safe.
func TestReview32ProcSelfFdChmod(t *testing.T) {
	for _, u := range users() {
		u := u
		t.Run(u.name, func(t *testing.T) {
			requireLandlock(t, u)
			ws := u.tempDir(t)
			u.mkdirs(t, filepath.Join(ws, "sub"))
			f := filepath.Join(ws, "sub", "f")
			u.writeFile(t, f, "x\n", 0o644)
			script := strings.Join([]string{
				`cd sub || exit 9`,
				`mkdir -p t/d && echo x > t/d/f && chmod 0700 t/d && tar cf "$TMPDIR/a.tar" t && rm -rf t`,
				`tar xpf "$TMPDIR/a.tar" && echo TAR_XP_OK`,
				`python3 -c 'import os; os.chmod("f", 0o600, follow_symlinks=False)' && echo PY_LCHMOD_OK`,
				`exec 3<f; chmod 0640 /proc/self/fd/3 && echo PROC_FD_OK`,
				`echo done`,
			}, "\n")
			r := u.sh(t, &runOpts{dir: ws}, []string{"--backend", "landlock", "--workspace", ws}, script)
			t.Logf("probes:\n%s%s", r.stdout, r.stderr)
			if !strings.Contains(r.stdout, "done") {
				t.Fatalf("the probe script did not run (exit %d): %s", r.code, r.stderr)
			}
			for _, ok := range []string{"TAR_XP_OK", "PY_LCHMOD_OK", "PROC_FD_OK"} {
				if !strings.Contains(r.stdout, ok) {
					t.Errorf("%s missing: a mode change in the workspace failed", ok)
				}
			}
			if strings.Contains(r.stderr, "Too many levels of symbolic links") {
				t.Errorf("a chmod in the workspace failed with ELOOP (the gate refuses /proc/self/fd paths)")
			}
			if got := review32Mode(t, filepath.Join(ws, "sub", "t", "d")); got != 0o700 {
				t.Errorf("tar xp restored mode %#o, want 0700", got)
			}
		})
	}
}

// TestReview32DeepPathFailsOpen
//
// Severity: LOW (needs a file outside the writable places at a path longer
// than PATH_MAX: a deep dependency or build tree of the caller's, a --ro
// bind inside the workspace holding a repository's deep tree).
//
// Weakness: MetaGate.allows names a non-directory by its /proc/self/fd
// link (fdPath) and takes a name that does not start with "/" for a pipe,
// a socket or an anonymous inode, which it lets through. fdPath returns ""
// when readlink fails, and readlink of /proc/self/fd/N fails with
// ENAMETOOLONG when the file's path is longer than PATH_MAX (d_path into a
// PATH_MAX buffer): the gate then allows the call, and makes it, on any
// such file, read-only or hidden, whatever its place.
//
// Attack: chdir, one component at a time, into the deep directory (the
// kernel resolves relative paths of any depth from the cwd), then
// chmod("secret", 0644) and utime("secret", ...).
//
// Fix: fail closed when fdPath fails (only an inode whose kind is a pipe,
// socket or anonymous inode, by its statx type or its file system, may be
// let through without a path); or check a non-directory by walking ".."
// from the directory it was reached through (an O_PATH of the parent taken
// in metaObject), as beneath does, instead of through d_path.
func TestReview32DeepPathFailsOpen(t *testing.T) {
	for _, u := range users() {
		u := u
		t.Run(u.name, func(t *testing.T) {
			requireLandlock(t, u)
			ws := u.tempDir(t)
			base := filepath.Dir(ws)
			comp := strings.Repeat("d", 200)
			const depth = 22 // 22 * 201 bytes: past PATH_MAX (4096)
			d, err := unix.Open(base, unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < depth; i++ {
				if err := unix.Mkdirat(d, comp, 0o755); err != nil {
					t.Fatal(err)
				}
				unix.Fchownat(d, comp, u.uid, u.gid, 0)
				nd, err := unix.Openat(d, comp, unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
				unix.Close(d)
				if err != nil {
					t.Fatal(err)
				}
				d = nd
			}
			fd, err := unix.Openat(d, "secret", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			unix.Write(fd, []byte("PRIVATE\n"))
			unix.Fchown(fd, u.uid, u.gid)
			unix.Fchmod(fd, 0o600)
			old := []unix.Timespec{{Sec: 1577934245}, {Sec: 1577934245}}
			unix.UtimesNanoAt(fd, "", old, unix.AT_EMPTY_PATH)
			unix.Close(fd)
			check := func() (uint32, int64) {
				var st unix.Stat_t
				if err := unix.Fstatat(d, "secret", &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
					t.Fatal(err)
				}
				return st.Mode & 0o7777, st.Mtim.Sec
			}
			defer unix.Close(d)
			// Python's os.chdir is chdir(2) of the one component: the
			// shell's cd builds the whole path and fails past PATH_MAX.
			script := `python3 -c '
import os
os.chdir("` + base + `")
for i in range(` + strconv.Itoa(depth) + `):
    os.chdir("` + comp + `")
try:
    os.chmod("secret", 0o644); print("CHMOD_DEEP_PASSED")
except OSError as e:
    print("chmod refused:", e)
try:
    os.utime("secret", (978307200, 978307200)); print("TOUCH_DEEP_PASSED")
except OSError as e:
    print("utime refused:", e)
'; echo done`
			r := u.sh(t, &runOpts{dir: ws}, []string{"--backend", "landlock", "--workspace", ws}, script)
			t.Logf("probes:\n%s%s", r.stdout, r.stderr)
			if !strings.Contains(r.stdout, "done") {
				t.Fatalf("the probe script did not run (exit %d): %s", r.code, r.stderr)
			}
			mode, mtime := check()
			if mode != 0o600 {
				t.Errorf("a read-only file at a path past PATH_MAX outside the writable places: mode %#o after the run, want 0600 (the gate let chmod through)", mode)
			}
			if mtime != old[1].Sec {
				t.Errorf("a read-only file at a path past PATH_MAX outside the writable places: time %v after the run, want %v", time.Unix(mtime, 0), time.Unix(old[1].Sec, 0))
			}
		})
	}
}
