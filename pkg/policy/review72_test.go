// Review 72 (of the fixes of review 71): the end-of-run audit swapped
// under by another run's sandbox. The swap tests failed on 08b0f4f (the
// fd count is a guard: no leak was found).

package policy

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// review72Dirs makes a workspace and a decoy beside it, in src.
func review72Dirs(t *testing.T) (ws, decoy string) {
	src := filepath.Join(t.TempDir(), "src")
	return filepath.Join(src, "ws"), filepath.Join(src, "decoy")
}

// swapAfterVerify has the audit's places checked, then ws and decoy
// exchanged (RENAME_EXCHANGE), as another run's sandbox that can write
// their parent would.
func swapAfterVerify(t *testing.T, ws, decoy string) {
	afterVerify = func() {
		if err := unix.Renameat2(unix.AT_FDCWD, ws, unix.AT_FDCWD, decoy, unix.RENAME_EXCHANGE); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { afterVerify = nil })
}

// runSwapping runs the audit while another goroutine keeps exchanging ws
// and decoy (RENAME_EXCHANGE), as another run's sandbox that can write
// their parent would, and puts ws back (its inode wsIno) after.
func runSwapping(a *GitAudit, ws, decoy string, wsIno uint64) ([]Quarantined, error) {
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			unix.Renameat2(unix.AT_FDCWD, ws, unix.AT_FDCWD, decoy, unix.RENAME_EXCHANGE)
		}
	}()
	qs, err := a.Run()
	stop.Store(true)
	<-done
	if review72Ino(ws) != wsIno {
		unix.Renameat2(unix.AT_FDCWD, ws, unix.AT_FDCWD, decoy, unix.RENAME_EXCHANGE)
	}
	return qs, err
}

func review72Ino(p string) uint64 {
	var st unix.Stat_t
	if unix.Lstat(p, &st) != nil {
		return 0
	}
	return st.Ino
}

// A concurrent sandbox of another run flips the workspace with a decoy
// (RENAME_EXCHANGE) while the audit runs: the walk by fd found the .git
// this run's sandbox made, the lookups by path (idOf, inert) saw the
// decoy, and stillInPlace saw the workspace back in place: 8 of 200
// audits left the repository with no error.
func TestReview72SwapBackHidesRepo(t *testing.T) {
	ws, decoy := review72Dirs(t)
	os.MkdirAll(ws, 0o755)
	os.MkdirAll(filepath.Join(decoy, "lib"), 0o755)
	a := reviewAudit(t, ws)
	a.created = nil
	a.noGit, a.dirs = false, []string{ws}
	a.placeAll([]string{ws})
	wsIno := review72Ino(ws)
	evil := filepath.Join(ws, "lib", ".git", "config")
	reviewMkfile(t, evil, "[core]\n\tfsmonitor = touch /tmp/pwned\n")
	var silent, caughtN, reported, runs int
	for i := 0; i < 200; i++ {
		qs, err := runSwapping(a, ws, decoy, wsIno)
		runs++
		q := false
		for _, x := range qs {
			if strings.HasSuffix(x.From, "lib/.git") {
				q = true
				os.Rename(x.To, filepath.Join(ws, "lib", ".git"))
			}
		}
		switch {
		case q:
			caughtN++
		case err != nil:
			reported++
		default:
			silent++
			if silent == 1 {
				t.Logf("run %d: %s left in place, quarantined %v, err %v", i, filepath.Dir(evil), qs, err)
			}
		}
		if _, serr := os.Stat(evil); serr != nil {
			t.Fatalf("lost %s: %v", evil, serr)
		}
	}
	t.Logf("runs %d: quarantined %d, not quarantined but error %d, SILENTLY MISSED %d", runs, caughtN, reported, silent)
	if silent > 0 {
		t.Errorf("the sandbox's repository was left, with no error, in %d of %d audits", silent, runs)
	}
}

// With the workspace swapped for a decoy after verifyPlaces, the user's
// own (protected, known) .envrc in the real workspace was renamed: the
// created patterns' renames had no check by fd of what they renamed.
func TestReview72SwapRenamesKnownCreatedMatch(t *testing.T) {
	ws, decoy := review72Dirs(t)
	reviewMkfile(t, filepath.Join(ws, ".envrc"), "export USERS_OWN=1\n")
	a := reviewAudit(t, ws)
	a.created = []createdPattern{{Path: filepath.Join(ws, ".envr[c]"), Written: "$NSBOX_WORKSPACE/.envr[c]"}}
	a.known[func() fileID { id, _ := idOf(filepath.Join(ws, ".envrc")); return id }()] = true
	a.placeAll([]string{ws})
	reviewMkfile(t, filepath.Join(decoy, ".envrc"), "decoy\n")
	// Baseline: nothing moves, the user's file is left alone.
	qs, err := a.Run()
	t.Logf("no swap: quarantined %v, err %v", qs, err)
	swapAfterVerify(t, ws, decoy)
	qs, err = a.Run()
	t.Logf("swapped: quarantined %+v\nerr: %v", qs, err)
	// the real workspace now lives at decoy
	b, _ := os.ReadFile(filepath.Join(decoy, ".envrc.nsbox-quarantine"))
	if len(b) > 0 {
		t.Errorf("the user's own known .envrc was renamed: %s.nsbox-quarantine holds %q", filepath.Join("<real ws>", ".envrc"), b)
	}
}

func review72Fds(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// fd count before and after Run/Repair in several states.
func TestReview72NoFdLeak(t *testing.T) {
	base := t.TempDir()
	ws := filepath.Join(base, "o", "ws")
	ws2 := filepath.Join(base, "o", "ws2")
	os.MkdirAll(filepath.Join(ws, "d"), 0o755)
	os.MkdirAll(ws2, 0o755)
	a := reviewAudit(t, ws)
	a.roots = []string{ws, ws2}
	a.noGit, a.dirs = false, []string{ws, ws2}
	a.placeAll([]string{ws, ws2})
	reviewMkfile(t, filepath.Join(ws, "lib", ".git", "config"), "x")
	n0 := review72Fds(t)
	a.Run()
	a.Repair()
	os.Chmod(filepath.Join(ws, "d"), 0)
	a.Run()
	os.Chmod(ws, 0)
	a.Repair()
	a.Run()
	os.Rename(ws2, ws2+".moved")
	a.Run()
	a.Deferred().Run()
	a.CreatedOnly().Run()
	if n := review72Fds(t); n != n0 {
		t.Errorf("fds %d before, %d after", n0, n)
	}
}

// A bare repository the user had in the workspace (known by its
// directory's id) had HEAD renamed to HEAD.nsbox-quarantine when the
// workspace was swapped after verifyPlaces: the check by fd looked at
// HEAD's own id, which is never known.
func TestReview72SwapBreaksKnownBareRepo(t *testing.T) {
	ws, decoy := review72Dirs(t)
	for _, root := range []string{ws, decoy} {
		reviewMkfile(t, filepath.Join(root, "proj.git", "HEAD"), "ref: refs/heads/main\n")
		os.MkdirAll(filepath.Join(root, "proj.git", "objects"), 0o755)
		os.MkdirAll(filepath.Join(root, "proj.git", "refs"), 0o755)
	}
	a := reviewAudit(t, ws)
	a.created = nil
	a.noGit = false
	a.addDir(ws, nil, []string{filepath.Join(ws, "proj.git")}, nil, nil)
	qs, err := a.Run()
	t.Logf("no swap: quarantined %v, err %v", qs, err)
	swapAfterVerify(t, ws, decoy)
	qs, err = a.Run()
	t.Logf("swapped: quarantined %+v\nerr: %v", qs, err)
	if _, serr := os.Lstat(filepath.Join(decoy, "proj.git", "HEAD.nsbox-quarantine")); serr == nil {
		t.Errorf("the user's known bare repository (now at %s) had its HEAD renamed", filepath.Join(decoy, "proj.git"))
	}
}
