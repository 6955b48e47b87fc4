package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Outside review (branch rvlead) of main's a6571d4..20ced56. Each test
// reproduces one finding and FAILS on the reviewed code.

// landlockTmpParentOf is the private directory Landlock runs of u make
// their TMPDIR in (the harness sets no $TMPDIR).
func landlockTmpParentOf(u user) string { return "/tmp/nsbox-" + strconv.Itoa(u.uid) }

// restoreTmpParent gives u's private directory its mode 0700 back, only
// when it is a real directory of u's (never /tmp itself, never a link).
func restoreTmpParent(t *testing.T, u user) func() {
	p := landlockTmpParentOf(u)
	restore := func() {
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err == nil && st.Mode&syscall.S_IFMT == syscall.S_IFDIR && int(st.Uid) == u.uid && st.Mode&0o7777 != 0o700 {
			if err := os.Chmod(p, 0o700); err != nil {
				t.Errorf("could not restore the mode of %s: %v", p, err)
			}
		}
	}
	t.Cleanup(restore)
	return restore
}

// TestReviewLeadLandlockTmpParentModeBreaksLaterRuns: a command under the
// Landlock backend runs as the caller's uid, and Landlock does not mediate
// chmod(2): it can `chmod 000 "$(dirname "$TMPDIR")"`, i.e. the user's
// /tmp/nsbox-UID. landlockTmpParent still accepts that directory (own
// uid, no group/other bits), so every later root-less Landlock run of the
// user fails at "private TMPDIR: permission denied" (root passes: DAC
// override), the run's own TMPDIR is left behind (its Close cannot remove
// an entry of a mode-0 directory), and the identity holder's directory
// check (same /tmp/nsbox-UID, mode & 077 == 0) passes while its bind()
// there fails. Expected: the directory's mode is repaired (fchmod 0700 by
// fd after checking it is our own real directory) or not trusted, so a
// later run starts and the TMPDIR is removed.
func TestReviewLeadLandlockTmpParentModeBreaksLaterRuns(t *testing.T) {
	for _, u := range users() {
		u := u
		t.Run(u.name, func(t *testing.T) {
			requireLandlock(t, u)
			ws := u.tempDir(t)
			restore := restoreTmpParent(t, u)
			r := u.sh(t, &runOpts{dir: ws}, []string{"--backend", "landlock", "--workspace", ws},
				`echo "$TMPDIR"; chmod 000 "$(dirname "$TMPDIR")" && echo changed; true`)
			expectCode(t, r, 0)
			lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
			if len(lines) == 0 || lines[0] == "" {
				t.Fatalf("no TMPDIR printed: %q %s", r.stdout, r.stderr)
			}
			if len(lines) > 1 && lines[1] == "changed" {
				// The metadata gate refuses it where the kernel has
				// seccomp user notification: the parent is no writable
				// place of the sandbox.
				t.Errorf("a sandboxed command changed the mode of its TMPDIR's parent %s", landlockTmpParentOf(u))
			}
			// The host stands in for it: an older nsbox's run, or any
			// process of the user, can still leave that mode.
			if err := os.Chmod(landlockTmpParentOf(u), 0); err != nil {
				t.Fatal(err)
			}
			first := lines[0]
			t.Cleanup(func() { os.RemoveAll(first) })
			if filepath.Dir(first) != landlockTmpParentOf(u) {
				restore()
				t.Skipf("TMPDIR %s is not in %s", first, landlockTmpParentOf(u))
			}
			r2 := u.run(t, &runOpts{dir: ws}, "run", "--backend", "landlock", "--workspace", ws, "--", "/bin/true")
			_, leftErr := os.Lstat(first)
			restore()
			if r2.code != 0 {
				t.Errorf("after a sandboxed command made %s mode 000, the next Landlock run fails (code %d): %s", landlockTmpParentOf(u), r2.code, strings.TrimSpace(r2.stderr))
			}
			if leftErr == nil {
				t.Errorf("the TMPDIR %s of a run that ended normally was left on the host", first)
			}
		})
	}
}

// TestReviewLeadLandlockTmpParentModeKeepsKilledTmpDir: the same chmod,
// to 0755, makes landlockTmpLeftAt look in the shared /tmp instead of
// /tmp/nsbox-UID (the private name "exists" but is not "usable"), so the
// TMPDIR of a SIGKILLed run, with what its command wrote, is never
// removed by later runs (the leak rvpool's #6 / fixland closed). A sandboxed
// command can do this to its own TMPDIR and then get its run killed (or
// wait for one to be). Expected: a later run still removes the dead
// TMPDIRs in the user's own directory whatever its mode (it is ours and a
// real directory; entries are checked one by one as now) and restores
// its mode.
func TestReviewLeadLandlockTmpParentModeKeepsKilledTmpDir(t *testing.T) {
	for _, u := range users() {
		u := u
		t.Run(u.name, func(t *testing.T) {
			requireLandlock(t, u)
			ws := u.tempDir(t)
			restore := restoreTmpParent(t, u)
			cmd, dir := startLandlockTmpRun(t, u, ws, `chmod 755 "$(dirname "$TMPDIR")"; `)
			// The metadata gate refuses that chmod; the host stands in
			// for it (an older nsbox's run, any process of the user).
			if err := os.Chmod(landlockTmpParentOf(u), 0o755); err != nil {
				t.Fatal(err)
			}
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			r := u.run(t, &runOpts{dir: ws}, "run", "--backend", "landlock", "--workspace", ws, "--", "/bin/true")
			_, leftErr := os.Lstat(dir)
			restore()
			expectCode(t, r, 0)
			if leftErr == nil {
				t.Errorf("the TMPDIR %s of a SIGKILLed run (with what its command wrote) outlived the next run after its command chmod 755 %s", dir, landlockTmpParentOf(u))
			}
		})
	}
}

// TestReviewLeadGitExcludeConcurrentSession: two sessions share a
// workspace (an mcp server's calls, two terminals; Hold exists for this).
// The first makes the placeholders; the second finds them present, so
// they are not in its Plan.Made and gitExclude leaves them out (or, when
// the second made none, skips the step): git inside the second lists
// every placeholder as untracked (`?? .npmrc`, eleven here), which the
// feature was made to stop. Expected: the second session's git lists
// only what its command made (exclude every protected path that is an
// empty placeholder-like entry the build protects, not only the ones this
// build created).
func TestReviewLeadGitExcludeConcurrentSession(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	eachUser(t, func(t *testing.T, u user) {
		ws, _ := gitRepoOf(t, u)
		// The first session holds the placeholders while it runs.
		first := exec.Command(nsboxBin(t), "run", "--workspace", ws, "--rw", ws, "--",
			"sleep", "300."+strconv.Itoa(int(time.Now().UnixNano()%1000000)))
		first.Dir = ws
		first.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + u.home(), "LANG=C.UTF-8"}
		u.asUser(first)
		if err := first.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			first.Process.Signal(syscall.SIGTERM)
			first.Wait()
		})
		// Wait for the placeholder (a deadlock guard only, no timing).
		for i := 0; ; i++ {
			if _, err := os.Lstat(filepath.Join(ws, ".npmrc")); err == nil {
				break
			}
			if i == 1200 {
				t.Fatal("the first session never made the .npmrc placeholder")
			}
			time.Sleep(50 * time.Millisecond)
		}
		r := u.sh(t, &runOpts{dir: ws}, []string{"--rw", ws},
			`: > made.txt; git status --porcelain --untracked-files=all`)
		expectCode(t, r, 0)
		lines := strings.Fields(strings.ReplaceAll(r.stdout, "??", ""))
		if len(lines) != 1 || lines[0] != "made.txt" {
			t.Errorf("git status in a second session sharing the workspace lists %q, want only made.txt", r.stdout)
		}
	})
}
