package policy

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Unit repros of an outside review of the audit of created agent files
// (createdaudit.go, GitAudit.Run): the same findings as
// test/integration/review_audit_test.go, without a sandbox, at the level
// the fix lands. Each FAILS on the code reviewed until fixed.

// reviewAudit is the audit a run of the base profile in workspace ws
// keeps for its nested .vscode pattern, started now (after a tick of
// the file system's clock).
func reviewAudit(t *testing.T, ws string) *GitAudit {
	t.Helper()
	time.Sleep(30 * time.Millisecond)
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &ts); err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * time.Millisecond)
	return &GitAudit{noGit: true, roots: []string{ws}, known: map[fileID]bool{}, since: ts.Nano(),
		created: []createdPattern{{Path: filepath.Join(ws, "*", "**", ".vscode"), Written: "$NSBOX_WORKSPACE/*/**/.vscode"}}}
}

func reviewMkfile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// caught reports whether the audit's result quarantined or named p.
func caught(qs []Quarantined, err error, p string) bool {
	for _, q := range qs {
		if q.From == p || strings.HasPrefix(p, q.From+"/") {
			return true
		}
	}
	return err != nil && strings.Contains(err.Error(), p)
}

// Finding 1b: a .vscode made before the start (in a directory the walk
// skips) and moved into reach by renaming the directory above it keeps
// its old ctime: the run's rename is not seen.
func TestReviewAuditRunMovedAncestor(t *testing.T) {
	ws := t.TempDir()
	reviewMkfile(t, filepath.Join(ws, "node_modules", ".vscode", "tasks.json"), `{"tasks":[]}`)
	a := reviewAudit(t, ws)
	if err := os.Rename(filepath.Join(ws, "node_modules"), filepath.Join(ws, "proj")); err != nil {
		t.Fatal(err)
	}
	qs, err := a.Run()
	if p := filepath.Join(ws, "proj", ".vscode"); !caught(qs, err, p) {
		t.Errorf("%s, moved into place during the run, neither quarantined nor named: %v %v", p, qs, err)
	}
}

// Finding 1a: a .vscode made during the run in a directory the walk
// skips, reached through a symlink made during the run.
func TestReviewAuditRunSymlinkToSkippedDir(t *testing.T) {
	ws := t.TempDir()
	a := reviewAudit(t, ws)
	reviewMkfile(t, filepath.Join(ws, "pkgs", "node_modules", "p", ".vscode", "tasks.json"), `{"tasks":[]}`)
	if err := os.Symlink("node_modules/p", filepath.Join(ws, "pkgs", "proj")); err != nil {
		t.Fatal(err)
	}
	qs, err := a.Run()
	p := filepath.Join(ws, "pkgs", "proj", ".vscode")
	if !caught(qs, err, p) && !caught(qs, err, filepath.Join(ws, "pkgs", "proj")) && !caught(qs, err, filepath.Join(ws, "pkgs", "node_modules", "p", ".vscode")) {
		t.Errorf("%s (through a link made in the run) neither quarantined nor named: %v %v", p, qs, err)
	}
}

// Finding 2: a .vscode that is an old symlink to a directory whose
// contents the run changed: judged by the link's own inode only.
func TestReviewAuditRunLinkTargetChanged(t *testing.T) {
	ws := t.TempDir()
	reviewMkfile(t, filepath.Join(ws, "shared", "tasks.json"), `{}`)
	link := filepath.Join(ws, "pkgs", "a", ".vscode")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../shared", link); err != nil {
		t.Fatal(err)
	}
	a := reviewAudit(t, ws)
	reviewMkfile(t, filepath.Join(ws, "shared", "tasks.json"), `{"tasks":["evil"]}`)
	qs, err := a.Run()
	if !caught(qs, err, link) {
		t.Errorf("%s leads to what the run changed, neither quarantined nor named: %v %v", link, qs, err)
	}
}

// Review 71: the link pass walked each link's target once per link, with
// no bound on the whole (5,000 links to one directory of 19,990 files:
// 291 s after the command ended). Each target is walked once now, and
// past linkPassMaxEntries in all the pass stops and says so.
func TestReview71LinkPassBounded(t *testing.T) {
	saved := linkPassMaxEntries
	t.Cleanup(func() { linkPassMaxEntries = saved })
	linkPassMaxEntries = 50
	mk := func(ws string, targets, links int) {
		for d := 0; d < targets; d++ {
			for i := 0; i < 30; i++ {
				reviewMkfile(t, filepath.Join(ws, "node_modules", "t"+strconv.Itoa(d), "f"+strconv.Itoa(i)), "")
			}
		}
		if err := os.MkdirAll(filepath.Join(ws, "links"), 0o755); err != nil {
			t.Fatal(err)
		}
		for l := 0; l < links; l++ {
			if err := os.Symlink("../node_modules/t"+strconv.Itoa(l%targets), filepath.Join(ws, "links", "l"+strconv.Itoa(l))); err != nil {
				t.Fatal(err)
			}
		}
	}
	// 100 links to one target of 30 entries: walked once, within bounds.
	ws := t.TempDir()
	a := reviewAudit(t, ws)
	mk(ws, 1, 100)
	if _, err := a.Run(); err != nil && strings.Contains(err.Error(), "not followed") {
		t.Errorf("100 links to one small target counted as one walk per link: %v", err)
	}
	// Three targets of 30: past 50 in all, the rest is named, not walked.
	ws = t.TempDir()
	a = reviewAudit(t, ws)
	mk(ws, 3, 3)
	if _, err := a.Run(); err == nil || !strings.Contains(err.Error(), "not followed") || !errors.Is(err, ErrGitAuditIncomplete) {
		t.Errorf("a link pass past its bound: %v, want ErrGitAuditIncomplete naming what was not followed", err)
	}
}

// Review 71 #2: another nsbox's sandbox, still running and able to write
// above this run's workspace, swaps the workspace's parent for a symlink
// to a tree of its choosing between the audit's check of its places and
// the walk and renames. The audit must walk and rename in the workspace
// it checked, never in that tree, and say that its places moved.
func TestReview71AuditRootSwappedAfterCheck(t *testing.T) {
	base := t.TempDir()
	ws := filepath.Join(base, "o", "ws")
	victim := filepath.Join(base, "victim")
	a := reviewAudit(t, ws) // the clock ticks before the files below
	reviewMkfile(t, filepath.Join(ws, "sub", ".vscode", "tasks.json"), `{"tasks":[]}`)
	reviewMkfile(t, filepath.Join(victim, "ws", "sub", ".vscode", "tasks.json"), `{"tasks":[]}`)
	reviewMkfile(t, filepath.Join(victim, "ws", "lib", ".git", "config"), "[core]\n")
	reviewMkfile(t, filepath.Join(ws, "lib", ".git", "config"), "[core]\n")
	a.noGit, a.dirs = false, []string{ws}
	a.placeAll([]string{ws})
	afterVerify = func() {
		if err := os.Rename(filepath.Join(base, "o"), filepath.Join(base, "o.moved")); err != nil {
			t.Error(err)
		}
		if err := os.Symlink(victim, filepath.Join(base, "o")); err != nil {
			t.Error(err)
		}
	}
	defer func() { afterVerify = nil }()
	qs, err := a.Run()
	if _, serr := os.Lstat(filepath.Join(victim, "ws", "sub", ".vscode")); serr != nil {
		t.Errorf("the audit renamed %s, outside the workspace it checked (%v; quarantined %v)", filepath.Join(victim, "ws", "sub", ".vscode"), serr, qs)
	}
	if _, serr := os.Lstat(filepath.Join(victim, "ws", "lib", ".git")); serr != nil {
		t.Errorf("the audit renamed %s, outside the workspace it checked (%v; quarantined %v)", filepath.Join(victim, "ws", "lib", ".git"), serr, qs)
	}
	for _, q := range qs {
		if !strings.HasPrefix(q.From, ws+"/") {
			t.Errorf("quarantined %s, outside the workspace", q.From)
		}
	}
	if !errors.Is(err, ErrGitAuditIncomplete) || !strings.Contains(err.Error(), "while the audit ran") {
		t.Errorf("the audit did not say its workspace moved while it ran: %v", err)
	}
}
