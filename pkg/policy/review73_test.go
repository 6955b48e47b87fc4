package policy

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// Review 73 #1: OpenHostDir judged a symlink by where the kernel resolved
// it at one instant and walked on by its text read a moment later: a link
// swapped between the two was judged by its old target and walked by its
// new one, and the final check compared the kernel's open with the walked
// path, so it passed too. Another sandbox of the same policy, running,
// that flipped ws/out between "build" (in the workspace) and a directory
// outside got nsbox to open the outside directory for its status or
// audit file (4,111 of 200,000 tries).
func TestReview73OpenHostDirLinkSwapped(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(base, "ws")
	victim := filepath.Join(base, "victim")
	for _, d := range []string{filepath.Join(ws, "build"), victim} {
		os.MkdirAll(d, 0o755)
	}
	out := filepath.Join(ws, "out")
	inA, outA := filepath.Join(ws, ".in"), filepath.Join(ws, ".out")
	writable := func() ([]string, error) { return []string{ws}, nil }
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; !stop.Load(); i++ {
			if i%2 == 0 {
				os.Symlink("build", inA)
				unix.Rename(inA, out)
			} else {
				os.Symlink(victim, outA)
				unix.Rename(outA, out)
			}
		}
	}()
	escaped, refused, ok, other := 0, 0, 0, 0
	for i := 0; i < 50000; i++ {
		fd, real, err := OpenHostDir(out, writable)
		switch {
		case err == nil && real == victim:
			escaped++
			unix.Close(fd)
		case err == nil:
			ok++
			unix.Close(fd)
		case err != nil:
			if _, pl := err.(*PlantedLinkError); pl {
				refused++
			} else {
				other++
			}
		}
	}
	stop.Store(true)
	<-done
	t.Logf("opened inside %d, refused (planted) %d, other errors %d, OPENED OUTSIDE %d", ok, refused, other, escaped)
	if escaped > 0 {
		t.Errorf("OpenHostDir opened %s (outside the writable %s) through %s in %d of 50000 tries", victim, ws, out, escaped)
	}
}

// Review 73 #2: the link pass of the audit resolved a link's target by
// path from "/" (filepath.EvalSymlinks): another run's sandbox that
// swapped the workspace for a decoy and back during the audit had it scan
// the decoy, and the .vscode the run made behind a link went unseen, with
// no error (71 of 300 audits).
func TestReview73SwapBackHidesLinkTarget(t *testing.T) {
	ws, decoy := review72Dirs(t)
	os.MkdirAll(ws, 0o755)
	os.MkdirAll(filepath.Join(decoy, "pkgs", "node_modules", "p"), 0o755)
	os.Symlink("node_modules/p", filepath.Join(decoy, "pkgs", "proj"))
	a := reviewAudit(t, ws)
	a.placeAll([]string{ws})
	wsIno := review72Ino(ws)
	evil := filepath.Join(ws, "pkgs", "node_modules", "p", ".vscode", "tasks.json")
	reviewMkfile(t, evil, `{"tasks":["evil"]}`)
	link := filepath.Join(ws, "pkgs", "proj")
	if err := os.Symlink("node_modules/p", link); err != nil {
		t.Fatal(err)
	}
	// Baseline.
	qs, err := a.Run()
	if !caught(qs, err, link) {
		t.Fatalf("baseline: not caught: %v %v", qs, err)
	}
	undo := func(qs []Quarantined) {
		for _, x := range qs {
			if x.To != "" {
				os.Rename(x.To, x.From)
			}
		}
	}
	undo(qs)
	var silent, caughtN, reported int
	for i := 0; i < 300; i++ {
		qs, err := runSwapping(a, ws, decoy, wsIno)
		q := false
		for _, x := range qs {
			if strings.HasSuffix(x.From, "pkgs/proj") || strings.Contains(x.From, ".vscode") {
				q = true
			}
		}
		undo(qs)
		switch {
		case q:
			caughtN++
		case err != nil:
			reported++
		default:
			silent++
		}
		if _, serr := os.Stat(evil); serr != nil {
			t.Fatalf("lost %s", evil)
		}
	}
	t.Logf("quarantined %d, error only %d, SILENTLY MISSED %d", caughtN, reported, silent)
	if silent > 0 {
		t.Errorf("the link to the sandbox's .vscode was left, with no error, in %d of 300 audits", silent)
	}
}

// Review 73 #4: with no /proc (or another pid namespace's), the lookups
// through /proc/self/fd failed and every repository the walk found was
// skipped as gone. The audit then looks paths up as they are.
func TestReview73AuditWithoutProc(t *testing.T) {
	old := procFD
	procFD = "/nonexistent/fd/"
	defer func() { procFD = old }()
	ws, _ := review72Dirs(t)
	os.MkdirAll(ws, 0o755)
	a := reviewAudit(t, ws)
	a.created = nil
	a.noGit, a.dirs = false, []string{ws}
	a.placeAll([]string{ws})
	reviewMkfile(t, filepath.Join(ws, "lib", ".git", "config"), "[core]\n")
	qs, err := a.Run()
	if len(qs) != 1 || !strings.HasSuffix(qs[0].From, "lib/.git") {
		t.Errorf("without /proc: quarantined %v, err %v; want lib/.git", qs, err)
	}
}

// Review 73 #3: the descent that opens up unreadable directories below
// one the audit reopened crossed a bind mount of the same file system
// (the same st_dev) and gave u+rwx back to a directory outside the
// workspace. It now stays on the mount it started on.
func TestReview73ReopenStaysOnItsMount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a bind mount needs root")
	}
	base := t.TempDir()
	ws, outside := filepath.Join(base, "ws"), filepath.Join(base, "outside")
	mnt := filepath.Join(ws, "d1", "mnt")
	for _, d := range []string{mnt, filepath.Join(outside, "locked")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mount(outside, mnt, "", unix.MS_BIND, ""); err != nil {
		t.Skipf("bind mount: %v", err)
	}
	defer unix.Unmount(mnt, unix.MNT_DETACH)
	os.Chmod(filepath.Join(outside, "locked"), 0)
	os.Chmod(filepath.Join(ws, "d1"), 0)
	defer os.Chmod(filepath.Join(outside, "locked"), 0o755)
	a := reviewAudit(t, ws)
	a.noGit, a.dirs = false, []string{ws}
	a.placeAll([]string{ws})
	c, moved := a.verifyPlaces()
	defer c.release()
	if moved != nil {
		t.Fatal(moved)
	}
	budget := 100
	below, err := c.reopenTree(filepath.Join(ws, "d1"), &budget)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(filepath.Join(outside, "locked"))
	if st.Mode().Perm() != 0 {
		t.Errorf("%s, outside the workspace behind a bind mount, was opened up to %v (opened %v)", filepath.Join(outside, "locked"), st.Mode().Perm(), below)
	}
}

// Review 73 #6: on a file system that gives no d_type every entry is
// DT_UNKNOWN, and the walk collected no symlink: the audit's link pass,
// which follows the links into directories the walk skips, saw none.
func TestReview73LinksCollectedWithoutDType(t *testing.T) {
	ws := t.TempDir()
	for _, d := range []string{"pkgs/node_modules/p", "other"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink("node_modules/p", filepath.Join(ws, "pkgs", "proj"))
	os.Symlink("../other", filepath.Join(ws, "pkgs", "node_modules2"))
	os.Symlink("other", filepath.Join(ws, "node_modules")) // a link named as a skipped directory
	pats := []globPattern{{path: escapeGlob(ws) + "/**/.vscode"}}
	_, want, err := globAllLinks(pats, 8, true)
	if err != nil {
		t.Fatal(err)
	}
	direntTypeUnknown = true
	defer func() { direntTypeUnknown = false }()
	_, got, err := globAllLinks(pats, 8, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 3 || strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("links without d_type %q, with d_type %q (want the 3 links both ways)", got, want)
	}
}

// Review 73 #5: a walk that collects links kept every one of them (50,000
// symlinks: 50,000 entries held, and as many links returned). Past
// walkMaxLinks it keeps no more, and the end's audit says what it did not
// follow.
func TestReview73LinksCollectedBounded(t *testing.T) {
	old := walkMaxLinks
	walkMaxLinks = 50
	defer func() { walkMaxLinks = old }()
	ws := t.TempDir()
	a := reviewAudit(t, ws)
	a.placeAll([]string{ws})
	os.Mkdir(filepath.Join(ws, "sub"), 0o755) // where the audit's "*/**" walks
	for i := 0; i < 200; i++ {
		if err := os.Symlink("/nonexistent", filepath.Join(ws, "sub", "l"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	kept := 0
	onList = func(read, k int) { kept += k }
	defer func() { onList = nil }()
	_, links, err := globAllLinks([]globPattern{{path: escapeGlob(ws) + "/**/.vscode"}}, 8, true)
	if !errors.Is(err, errTooManyLinks) || len(links) > 50 || kept > 60 {
		t.Errorf("200 links, bound 50: %d links, %d entries kept, err %v", len(links), kept, err)
	}
	if _, err := a.Run(); !errors.Is(err, ErrGitAuditIncomplete) || !strings.Contains(err.Error(), "more than 50 symlinks") {
		t.Errorf("the audit did not say it left links unfollowed: %v", err)
	}
}
