package policy

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Review 71 #7: the audit walked every pattern again for each level of
// unreadable directories it opened up: a sandbox that left d1/d2/.../d60,
// each chmod 000, made it walk 60 times (130 s root-less). Opening d1 now
// opens up the unreadable directories below it too, by fd, and the audit
// walks twice: once to find d1, once to search what it opened.
//
// Root reads and searches every directory, whatever its mode: as root
// the audit walks once; make unit runs this test again as uid 65534
// (hack/unit-rootless.sh), for whom the modes hold.
func TestReview71AuditNestedUnreadableFewPasses(t *testing.T) {
	auditNestedUnreadable(t)
}

func auditNestedUnreadable(t *testing.T) {
	const levels = 20
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(base, "ws")
	// Outside the workspace, the user's, and locked: a link to it in
	// the tree must not open it.
	outside := filepath.Join(base, "outside")
	for _, d := range []string{ws, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	a := reviewAudit(t, ws) // the clock ticks before the files below
	a.noGit, a.dirs = false, []string{ws}
	a.placeAll([]string{ws})
	// ws/d1/.../d10/open/d11/.../d20/.git: the descent goes on
	// through a directory left readable.
	dirs := make([]string, levels)
	p := ws
	for i := range dirs {
		if i == levels/2 {
			p = filepath.Join(p, "open")
		}
		p = filepath.Join(p, "d"+strconv.Itoa(i+1))
		dirs[i] = p
	}
	git := filepath.Join(dirs[levels-1], ".git")
	reviewMkfile(t, filepath.Join(git, "config"), "[core]\n\tfsmonitor = ./evil\n")
	if err := os.Symlink(outside, filepath.Join(dirs[0], "out")); err != nil {
		t.Fatal(err)
	}
	// A directory the start found locked (and protected whole) keeps
	// its mode.
	locked := filepath.Join(dirs[1], "locked")
	if err := os.Mkdir(locked, 0o755); err != nil {
		t.Fatal(err)
	}
	a.locked = []string{locked}
	for _, d := range []string{outside, locked} {
		if err := os.Chmod(d, 0); err != nil {
			t.Fatal(err)
		}
	}
	for i := levels - 1; i >= 0; i-- {
		if err := os.Chmod(dirs[i], 0); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, d := range dirs {
			os.Chmod(d, 0o755)
		}
		os.Chmod(outside, 0o755)
		os.Chmod(locked, 0o755)
	})
	passes := 0
	onAuditPass = func() { passes++ }
	defer func() { onAuditPass = nil }()
	qs, err := a.Run()
	quarantined := false
	for _, q := range qs {
		quarantined = quarantined || q.From == git
	}
	if !quarantined {
		t.Errorf("%s, made in the run below %d unreadable directories, was not quarantined: %v %v", git, levels, qs, err)
	}
	if passes > 2 {
		t.Errorf("the audit walked %d times for %d nested unreadable directories; it should open them up together and walk twice", passes, levels)
	}
	if os.Geteuid() != 0 {
		for _, d := range dirs {
			if err == nil || !strings.Contains(err.Error(), "the sandbox made "+d+" unreadable") {
				t.Errorf("the audit did not say it opened up %s: %v", d, err)
			}
			if m := permOf(t, d); m&0o700 != 0o700 {
				t.Errorf("%s was not given u+rwx back: %v", d, m)
			}
		}
	}
	if m := permOf(t, outside); m != 0 {
		t.Errorf("the audit changed the mode of %s, outside the workspace, through a link: %v", outside, m)
	}
	if m := permOf(t, locked); m != 0 {
		t.Errorf("the audit changed the mode of %s, locked before the run: %v", locked, m)
	}
	t.Logf("uid %d: %d walks", os.Geteuid(), passes)
}

func permOf(t *testing.T, p string) os.FileMode {
	t.Helper()
	st, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}
