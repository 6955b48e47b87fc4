package integration

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Review 30: the landlock backend's commands filter
// (pkg/sandbox/landlock_worker.go commandFilterLandlock) and the gaps it
// lists (pkg/sandbox/landlock.go LandlockGaps), after IPC, group/other
// write modes, extended attributes and group changes were refused. Each
// test FAILS on the code reviewed, for the reason stated above it, and
// passes once fixed (refused, or listed in the run's not_isolated).

// review30NoDump is FS_NODUMP_FL (FS_IOC_GETFLAGS/SETFLAGS, chattr +d);
// FS_XFLAG_NODUMP is the same flag in file_setattr(2)'s fa_xflags.
const (
	review30NoDump      = 0x40
	review30XflagNoDump = 0x80
)

// review30Flags is a file's inode flags (lsattr) as the host sees them.
func review30Flags(t *testing.T, p string) int {
	t.Helper()
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	v, err := unix.IoctlGetInt(fd, unix.FS_IOC_GETFLAGS)
	if err != nil {
		t.Skipf("FS_IOC_GETFLAGS on %s: %v", p, err)
	}
	return v
}

// review30InodeFlagsPerl changes the inode flags of a read-only file of
// the host with FS_IOC_SETFLAGS (chattr +d) and of a hidden one by path
// with file_setattr(2) (Linux 6.17, x86_64 468/469: no open needed).
const review30InodeFlagsPerl = `use Fcntl; my ($ro, $hidden) = @ARGV;
if (open(my $h, "<", $hidden)) { print "READ_HIDDEN\n"; }
if (sysopen(my $f, $ro, O_RDONLY)) {
  my $b = pack("L!", 0); ioctl($f, 0x80086601, $b); my $v = unpack("L!", $b);
  print((ioctl($f, 0x40086602, pack("L!", $v | 0x40)) ? "SETFLAGS_RO" : "SETFLAGS_REFUSED $!") . "\n");
} else { print "OPEN_RO_REFUSED $!\n"; }
my $a = "\0" x 24;
if (syscall(468, -100, $hidden, $a, 24, 0) == 0) {
  my ($x) = unpack("Q", $a);
  print((syscall(469, -100, $hidden, pack("QLLLL", $x | 0x80, 0, 0, 0, 0), 24, 0) == 0 ? "SETATTR_HIDDEN" : "SETATTR_REFUSED $!") . "\n");
} else { print "GETATTR_REFUSED $!\n"; }
print "done\n";`

// TestReview30LandlockInodeFlagsOutsideWritable
//
// Severity: LOW.
//
// Weakness: review 25 to 29 closed the metadata calls Landlock has no
// right for one by one (chmod with group/other write, setxattr and kin,
// chown with a group) and listed what stays (the other mode bits,
// utimensat) in LandlockGaps (pkg/sandbox/landlock.go). Inode flags are
// one more such call and are neither refused nor listed:
// ioctl(FS_IOC_SETFLAGS) and ioctl(FS_IOC_FSSETXATTR) on a descriptor
// opened read-only (Landlock's ioctl right, ABI 5, covers device files
// only), and file_setattr(2) (Linux 6.17) by path, with no open at all,
// so on hidden files too. The kernel lets the owner set every flag but
// immutable and append-only (fileattr_set_prepare; in the init user
// namespace, where a landlock command runs, the project id too), and the
// command is the caller, who owns what it can name (a root caller: the
// host's system files). commandFilterLandlock
// (pkg/sandbox/landlock_worker.go) refuses neither the ioctls (its
// "ioctl" label checks FIOSETOWN/SIOCSPGRP only) nor file_setattr (469),
// and neither the profile nor the socket filter does. The native backend
// refuses all of them outside writable binds (read-only mounts: EROFS,
// from mnt_want_write_file), and, in its user namespace, any project id
// change.
//
// Attack: a landlock command runs `chattr +d` (nodump: dump, bsdtar
// --nodump and borg --exclude-nodump then skip the file in the host's
// backups), +S (every write synchronous: a host database crawls) or +A
// on read-only host files, or the same through file_setattr(2) on a
// hidden secret it cannot even open; on a file system with project
// quotas (XFS pquota, as container storage uses) it sets its files'
// project id to 0 and escapes the quota that confines the workspace.
//
// Fix: in commandFilterLandlock refuse file_setattr (469) and the
// ioctls FS_IOC_SETFLAGS (0x40086602, and its 32-bit form 0x40046602)
// and FS_IOC_FSSETXATTR (0x401c5820) (EPERM, or EOPNOTSUPP as for
// xattrs; the request is an unsigned int, so the low word suffices), or
// at least list "inode flags (chattr, FS_IOC_SETFLAGS, file_setattr) and
// project ids" in LandlockGaps next to the mode bits and times.
func TestReview30LandlockInodeFlagsOutsideWritable(t *testing.T) {
	if _, err := os.Stat("/usr/bin/perl"); err != nil {
		t.Skip("no /usr/bin/perl to make the raw calls with")
	}
	if runtime.GOARCH != "amd64" {
		t.Skip("the probe calls file_setattr(2) by its x86_64 number")
	}
	for _, u := range users() {
		u := u
		t.Run(u.name, func(t *testing.T) {
			requireLandlock(t, u)
			ws := u.tempDir(t)
			host := u.tempDir(t)
			rc := filepath.Join(host, "bashrc")
			u.writeFile(t, rc, "# rc\n", 0o644)
			if err := os.Mkdir(filepath.Join(host, "secrets"), 0o700); err != nil {
				t.Fatal(err)
			}
			os.Chown(filepath.Join(host, "secrets"), u.uid, u.gid)
			key := filepath.Join(host, "secrets", "key")
			u.writeFile(t, key, "PRIVATE KEY\n", 0o600)
			// The host's file system must take the flag at all.
			probe := filepath.Join(host, "probe")
			u.writeFile(t, probe, "x", 0o644)
			if fd, err := unix.Open(probe, unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
				err = unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, review30Flags(t, probe)|review30NoDump)
				unix.Close(fd)
				if err != nil {
					t.Skipf("the file system of %s takes no nodump flag: %v", host, err)
				}
			}
			beforeRC, beforeKey := review30Flags(t, rc), review30Flags(t, key)
			status := filepath.Join(u.tempDir(t), "status.json")
			r := u.run(t, &runOpts{dir: ws}, "run", "--backend", "landlock", "--workspace", ws,
				"--ro", host, "--hide", filepath.Join(host, "secrets"), "--json-status", status,
				"--", "perl", "-e", review30InodeFlagsPerl, rc, key)
			t.Logf("probes:\n%s%s", r.stdout, r.stderr)
			if !strings.Contains(r.stdout, "done") {
				t.Fatalf("the probe script did not run (exit %d): %s", r.code, r.stderr)
			}
			if strings.Contains(r.stdout, "READ_HIDDEN") {
				t.Fatalf("the hidden file was readable: the probe does not test what it claims")
			}
			gaps := notIsolated(startedEvent(t, status))
			listed := false
			for _, w := range []string{"FS_IOC_SETFLAGS", "file_setattr", "chattr", "inode flags"} {
				listed = listed || strings.Contains(gaps, w)
			}
			for _, c := range []struct {
				path   string
				before int
				what   string
			}{
				{rc, beforeRC, "a read-only host file, through ioctl(FS_IOC_SETFLAGS) on a read-only descriptor"},
				{key, beforeKey, "a hidden host file the command cannot open, through file_setattr(2) by path"},
			} {
				if got := review30Flags(t, c.path); got != c.before && !listed {
					t.Errorf("%s: inode flags %#x after the run, were %#x: a landlock command changed the flags (nodump) of %s; commandFilterLandlock refuses neither, and the run's not_isolated does not list it:\n%s", c.path, got, c.before, c.what, gaps)
				}
			}
		})
	}
}

// review30InotifyPerl watches a path with inotify (x86_64: inotify_init1
// 294, inotify_add_watch 254) for opens and reads, says WATCHING, and
// prints the name of each event for up to 20 s.
const review30InotifyPerl = `$| = 1; my $fd = syscall(294, 0);
my $wd = syscall(254, $fd, $ARGV[0], 0x1 | 0x20);
if ($wd < 0) { print "WATCH_REFUSED $!\n"; exit 0; }
print "WATCHING\n";
open(my $in, "<&=", $fd) or die "fdopen: $!";
local $SIG{ALRM} = sub { print "TIMEOUT\n"; exit 0; }; alarm 20;
my $buf; while (sysread($in, $buf, 4096) > 0) {
  while (length($buf) >= 16) {
    my ($w, $mask, $cookie, $len) = unpack("lLLL", $buf);
    my $name = unpack("Z*", substr($buf, 16, $len));
    print "EVENT $name $mask\n"; $buf = substr($buf, 16 + $len);
    if ($name ne "") { exit 0; }
  }
}`

// TestReview30LandlockInotifyHiddenActivity
//
// Severity: LOW.
//
// Weakness: a hidden path of the landlock backend is a Landlock rule
// with no access (pkg/sandbox/landlock.go landlockGrants, MountHide):
// open(2) of what is under it is refused, and LandlockGaps lists that
// its names stay listable and its stat metadata visible. But
// inotify_add_watch(2) needs neither an open nor a Landlock right:
// Landlock does not implement the path_notify hook, and the commands'
// filter (pkg/sandbox/landlock_worker.go commandFilterLandlock) leaves
// inotify (and unprivileged fanotify) alone. So a command watches a
// hidden directory or file and learns, live, each time a host program
// opens or reads which secret in it: more than names and stat times,
// and not listed. The native backend hides the path under an empty
// overlay, whose events carry nothing of the host's.
//
// Attack: a landlock command watches the user's hidden
// ~/.password-store (or ~/.gnupg, ~/.ssh) with IN_OPEN|IN_ACCESS and
// logs "bank.gpg opened at 10:31", which entry the user decrypts and
// when (and the same for the hidden /tmp and /run of the host).
//
// Fix: Landlock cannot refuse it by path; refusing inotify_add_watch
// and fanotify_mark outright would break file watchers, so list it in
// LandlockGaps ("inotify/fanotify: the opens, reads and writes of files
// under hidden paths can be watched"); or, where it matters, refuse the
// watch through seccomp user notification when the path resolves under
// a hidden grant.
func TestReview30LandlockInotifyHiddenActivity(t *testing.T) {
	if _, err := os.Stat("/usr/bin/perl"); err != nil {
		t.Skip("no /usr/bin/perl to make the raw calls with")
	}
	if runtime.GOARCH != "amd64" {
		t.Skip("the probe calls inotify by its x86_64 numbers")
	}
	for _, u := range users() {
		u := u
		t.Run(u.name, func(t *testing.T) {
			requireLandlock(t, u)
			ws := u.tempDir(t)
			home := u.tempDir(t)
			store := filepath.Join(home, "password-store")
			if err := os.Mkdir(store, 0o700); err != nil {
				t.Fatal(err)
			}
			os.Chown(store, u.uid, u.gid)
			entry := filepath.Join(store, "bank.gpg")
			u.writeFile(t, entry, "ENCRYPTED\n", 0o600)
			status := filepath.Join(u.tempDir(t), "status.json")
			cmd := exec.Command(nsboxBin(t), "run", "--backend", "landlock", "--workspace", ws,
				"--hide", store, "--json-status", status,
				"--", "perl", "-e", review30InotifyPerl, store)
			cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + u.home(), "LANG=C.UTF-8"}
			cmd.Dir = ws
			u.asUser(cmd)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			defer func() {
				select {
				case <-done:
				case <-time.After(30 * time.Second):
					cmd.Process.Signal(syscall.SIGKILL)
				}
			}()
			var lines []string
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines = append(lines, sc.Text())
				if sc.Text() == "WATCHING" {
					// The host's program (pass, gpg) reads the entry.
					b, err := os.ReadFile(entry)
					if err != nil || len(b) == 0 {
						t.Fatalf("read %s: %v", entry, err)
					}
				}
			}
			cmd.Wait()
			close(done)
			got := strings.Join(lines, "\n")
			t.Logf("probes:\n%s\n%s", got, stderr.String())
			if !strings.Contains(got, "WATCHING") && !strings.Contains(got, "WATCH_REFUSED") {
				t.Fatalf("the probe did not run: %s", stderr.String())
			}
			if strings.Contains(got, "EVENT bank.gpg") {
				if gaps := notIsolated(startedEvent(t, status)); !strings.Contains(gaps, "inotify") {
					t.Errorf("a landlock command watched the hidden %s and saw the host open and read bank.gpg in it (inotify_add_watch needs no Landlock right, and commandFilterLandlock does not refuse it); the run's not_isolated does not list it:\n%s", store, gaps)
				}
			}
		})
	}
}
