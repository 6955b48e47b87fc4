package integration

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Review 29: the change set after review 28's base (trust store, walk
// name budget, per-call pool audit, Landlock commands' filter). Each test
// FAILS on the code reviewed, for the reason stated above it, and passes
// once fixed.

// review29ACL is a POSIX access ACL xattr value (version 2) with only the
// three base entries: the owner rw, the group r, and others `other`.
// The kernel folds such an ACL into the file's mode (posix_acl_equiv_mode):
// others rw makes the mode 0646.
func review29ACL(other uint16) []byte {
	b := []byte{2, 0, 0, 0}
	for _, e := range []struct{ tag, perm uint16 }{{0x01, 6}, {0x04, 4}, {0x20, other}} {
		b = append(b, byte(e.tag), byte(e.tag>>8), byte(e.perm), byte(e.perm>>8), 0xff, 0xff, 0xff, 0xff)
	}
	return b
}

// review29SetACLPerl sets others' ACL entry of $ARGV[0] to rw with
// setxattr(2) (x86_64: 188), as `setfacl -m o::rw FILE` does; perl is on
// the host, setfacl often is not.
const review29SetACLPerl = `my $n = "system.posix_acl_access"; ` +
	`my $v = pack("V", 2) . pack("vvV", 1, 6, 0xffffffff) . pack("vvV", 4, 4, 0xffffffff) . pack("vvV", 0x20, 6, 0xffffffff); ` +
	`my $r = syscall(188, $ARGV[0], $n, $v, length($v), 0); print(($r == 0 ? "ACL_SET " : "ACL_REFUSED ") . $ARGV[0] . "\n");`

// TestReview29LandlockACLGrantsOthersWrite
//
// Severity: HIGH.
//
// Weakness: review 25's fix refuses, in the Landlock backend's commands'
// filter (pkg/sandbox/landlock_worker.go commandFilterLandlock, labels
// "chmod1"/"chmod2"), a chmod, fchmod, fchmodat or fchmodat2 whose mode
// lets the group or others write, because Landlock has no right for
// file metadata and the command runs as the caller, who owns what it can
// name (a root caller: /etc/passwd). But a POSIX access ACL is the same
// permission by another call: setxattr(2)/lsetxattr/fsetxattr (and
// setxattrat on 6.13+) of "system.posix_acl_access" sets the file's mode
// bits from the ACL (others rw → mode o+w) or grants write to any named
// user or group (ACL_USER/ACL_GROUP entries), and the kernel lets the
// owner do it (inode_owner_or_capable). Landlock has no xattr right
// either; neither the commands' filter, nor the socket filter, nor the
// default seccomp profile refuses it. LandlockGaps and docs/security.md
// claim "a mode that lets the group or others write is refused".
//
// Attack: a landlock command runs
// `setfacl -m o::rw ~/.bashrc` (or the raw setxattr below, or
// `setfacl -m u:mallory:rw /etc/passwd` as a root caller), or the same on
// the workspace's protected .git/config: afterwards every local user (or
// the named one) writes code the host runs as the caller: exactly what
// review 25's chmod rule was meant to stop.
//
// Fix: in commandFilterLandlock refuse setxattr, lsetxattr, fsetxattr
// and setxattrat (463) outright, or, since name is a pointer a classic
// BPF filter cannot read, refuse them all and list "extended attributes
// cannot be set" in LandlockGaps (user.* xattrs are rarely needed by
// builds); removexattr of an ACL only narrows access and can stay.
func TestReview29LandlockACLGrantsOthersWrite(t *testing.T) {
	if _, err := os.Stat("/usr/bin/perl"); err != nil {
		t.Skip("no /usr/bin/perl to make the raw setxattr(2) call with")
	}
	if runtime.GOARCH != "amd64" {
		t.Skip("the probe calls setxattr(2) by its x86_64 number")
	}
	for _, u := range users() {
		u := u
		t.Run(u.name, func(t *testing.T) {
			requireLandlock(t, u)
			ws := u.tempDir(t)
			base := filepath.Dir(ws)
			// The host's filesystem must take POSIX ACLs at all.
			probe := filepath.Join(base, "acl-probe")
			u.writeFile(t, probe, "x", 0o644)
			if err := unix.Setxattr(probe, "system.posix_acl_access", review29ACL(4), 0); err != nil {
				t.Skipf("the filesystem of %s takes no POSIX ACL: %v", base, err)
			}
			if err := os.Mkdir(filepath.Join(ws, ".git"), 0o755); err != nil {
				t.Fatal(err)
			}
			os.Chown(filepath.Join(ws, ".git"), u.uid, u.gid)
			gitConfig := filepath.Join(ws, ".git", "config")
			u.writeFile(t, gitConfig, "[core]\n", 0o644)
			rc := filepath.Join(base, "bashrc")
			u.writeFile(t, rc, "# rc\n", 0o644)
			script := strings.Join([]string{
				// The rule review 25 added holds for chmod itself.
				`chmod 0666 ` + rc + ` 2>/dev/null && echo CHMOD_RC`,
				`perl -e '` + review29SetACLPerl + `' ` + rc,
				`perl -e '` + review29SetACLPerl + `' ` + gitConfig,
				`echo done`,
			}, "\n")
			r := u.sh(t, &runOpts{dir: ws}, []string{"--backend", "landlock", "--workspace", ws}, script)
			t.Logf("probes:\n%s%s", r.stdout, r.stderr)
			if !strings.Contains(r.stdout, "done") {
				t.Fatalf("the probe script did not run (exit %d): %s", r.code, r.stderr)
			}
			if strings.Contains(r.stdout, "CHMOD_RC") {
				t.Fatalf("chmod 0666 itself went through: review 25's rule is gone, not what this test is about")
			}
			for _, c := range []struct{ path, what string }{
				{rc, "a read-only file outside the workspace"},
				{gitConfig, "the protected .git/config"},
			} {
				if got := review25Mode(t, c.path); got != 0o644 {
					t.Errorf("%s: mode %#o after the run, was 0644: %s is now writable by every local user, through setxattr(system.posix_acl_access), which the commands' filter (commandFilterLandlock) does not refuse although it refuses chmod 0666", c.path, got, c.what)
				}
			}
		})
	}
}
