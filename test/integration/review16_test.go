package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Review of 0933efe ("policy: fixes from review 15 of the --rw walk").

// plantRepo16 is a shell line that makes a repository in dir whose config
// runs a program of the sandbox's on the host's next `git status`.
func plantRepo16(dir string) string {
	return `mkdir -p ` + dir + `/.git/objects ` + dir + `/.git/refs && ` +
		`printf 'ref: refs/heads/main\n' > ` + dir + `/.git/HEAD && ` +
		`printf '[core]\n\tfsmonitor = touch /tmp/pwned\n' > ` + dir + `/.git/config`
}

// victimRepos16 makes base/victim/ws, a project of the user's that no
// writable directory of the run holds, with its repository and a nested
// one (lib).
func victimRepos16(t *testing.T, u user, base string) string {
	victim := filepath.Join(base, "victim", "ws")
	for _, d := range []string{".", "lib"} {
		u.mkdirs(t, filepath.Join(victim, d, ".git", "objects"), filepath.Join(victim, d, ".git", "refs"))
		u.writeFile(t, filepath.Join(victim, d, ".git", "HEAD"), "ref: refs/heads/main\n", 0o644)
	}
	return victim
}

// expectMovedReported16: the run ended 125 with the audit's report that
// the sandbox moved or replaced dir.
func expectMovedReported16(t *testing.T, r result, dir string) {
	t.Helper()
	if r.code != 125 || !strings.Contains(r.stderr, "the sandbox moved or replaced") || !strings.Contains(r.stderr, dir) {
		t.Errorf("exit %d, want 125 and a report that %s was moved or replaced; stderr: %s", r.code, dir, r.stderr)
	}
}

func victimIntact16(t *testing.T, victim string, r result) {
	t.Helper()
	for _, p := range []string{".git", "lib/.git"} {
		if !exists(filepath.Join(victim, p)) {
			t.Errorf("%s, a repository of the user's outside every writable directory of the run, was renamed by the audit; stderr: %s", filepath.Join(victim, p), r.stderr)
		}
	}
}

// HIGH (regression of 0933efe). walkedWith now gives a workspace below a
// name the walk skips (--rw ~/o, workspace ~/o/node_modules/ws) an audit
// walk of its own, by its path. The sandbox can write ~/o: it renames
// node_modules away and puts a symlink ~/o/node_modules -> ../victim in
// its place. The end-of-run audit walks ~/o/node_modules/ws through that
// link, i.e. ~/victim/ws, a project the sandbox could never write, and
// renames its .git and every nested .git to NAME.nsbox-quarantine (none
// is "known": their inodes are not the run's). The user's other
// repositories stop working (git: not a git repository), and any tree the
// attacker can name ending in the workspace's basename is hit. The parent
// commit (6224516) leaves the victim alone (the workspace was merged into
// ~/o's walk, which never follows a link).
func TestReview16SkippedNameWorkspaceAncestorSwappedForVictim(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		base := u.visibleDir(t)
		outer := filepath.Join(base, "o")
		ws := filepath.Join(outer, "node_modules", "ws")
		u.mkdirs(t, filepath.Join(ws, "src"))
		victim := victimRepos16(t, u, base)
		r := u.sh(t, &runOpts{dir: ws}, []string{"--rw", outer}, `cd `+outer+` && mv node_modules nm && ln -s ../victim node_modules && echo moved`)
		// Fixed: the audit checks every place it searches again (no
		// symlink, the same directory) and reports the one moved, exit 125.
		expectMovedReported16(t, r, ws)
		victimIntact16(t, victim, r)
	})
}

// HIGH. The same through --shallow (d293527, kept by 0933efe): with
// --rw ~/o --shallow ~/o and the workspace ~/o/a/ws, the workspace is
// the audit's only directory, walked by its path. The sandbox renames
// ~/o/a and links ~/o/a -> ../victim: the audit renames the .git of
// ~/victim/ws and of its nested repositories, outside every writable
// directory. --shallow is what the too-big error tells the user to pass
// for a big --rw cache directory.
func TestReview16ShallowOuterAncestorSwappedForVictim(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		base := u.visibleDir(t)
		outer := filepath.Join(base, "o")
		ws := filepath.Join(outer, "a", "ws")
		u.mkdirs(t, filepath.Join(ws, "src"))
		victim := victimRepos16(t, u, base)
		r := u.sh(t, &runOpts{dir: ws}, []string{"--rw", outer, "--shallow", outer}, `cd `+outer+` && mv a b && ln -s ../victim a && echo moved`)
		expectMovedReported16(t, r, ws)
		victimIntact16(t, victim, r)
	})
}

// HIGH. walkedWith decides at the start, from paths, that a writable
// directory is entered by another's walk (--rw ~/proj/sub/inner inside
// the workspace ~/proj: searched with it). The sandbox can rename what
// lies between them during the run: it plants a repository in
// sub/inner/x, moves sub to node_modules/sub and links sub ->
// node_modules/sub. The workspace's walk never enters node_modules nor
// follows the link, and inner has no walk of its own, so nothing is
// quarantined and nothing is reported; the user's own --rw path
// ~/proj/sub/inner still works (through the link) and `git status` in
// ~/proj/sub/inner/x runs the sandbox's core.fsmonitor.
func TestReview16NestedRWAncestorMovedBelowSkippedName(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		inner := filepath.Join(ws, "sub", "inner")
		u.mkdirs(t, inner)
		r := u.sh(t, &runOpts{dir: ws}, []string{"--rw", inner}, plantRepo16("sub/inner/x")+`
mkdir -p node_modules && mv sub node_modules/sub && ln -s node_modules/sub sub && echo moved`)
		// Fixed: not searched (its path now runs through the sandbox's
		// link), but no longer silently: the run ends 125 naming it.
		expectMovedReported16(t, r, inner)
	})
}

// MEDIUM (pre-existing; the git counterpart of TestReviewAuditSymlinkToSkippedDir,
// fixed only for agent files). The audit's walk neither enters
// node_modules nor follows a symlink, and quarantineThroughLinks looks
// only for the created patterns' tails, not for .git: a repository made
// in pkgs/node_modules/p with a link pkgs/app -> node_modules/p is left,
// unreported; `cd pkgs/app && git status` on the host runs its
// core.fsmonitor.
func TestReview16RepoThroughLinkIntoSkippedDir(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		u.mkdirs(t, filepath.Join(ws, "pkgs"))
		r := u.sh(t, &runOpts{dir: ws}, nil, plantRepo16("pkgs/node_modules/p")+` && ln -s node_modules/p pkgs/app && echo planted`)
		expectCode(t, r, 0)
		if _, err := os.Stat(filepath.Join(ws, "pkgs", "app", ".git", "config")); err == nil {
			t.Errorf("pkgs/app/.git (-> node_modules/p/.git), made by the sandbox, is left in place and unreported; stderr: %q", r.stderr)
		}
	})
}

// LOW (pre-existing). A sandbox that ends with `chmod 000 .` in the
// workspace (rootless) makes nsbox leave its placeholders behind for good:
// they are removed before the audit gives the workspace u+rwx back, and
// no later run removes them. The user's project gets ~22 empty entries
// (.mcp.json, .envrc, .npmrc, .git/, .vscode/ ...) that git status shows
// and an agent or tool then reads as (empty, invalid) config.
func TestReview16PlaceholdersLeftAfterWorkspaceChmod(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		u.mkdirs(t, filepath.Join(ws, "src"))
		defer os.Chmod(ws, 0o755)
		// Fixed: what could not be looked up is kept in the data
		// directory's record, and the next nsbox removes it (the harness's
		// root-less HOME is /nonexistent: a data directory of its own).
		o := &runOpts{dir: ws, env: []string{"XDG_DATA_HOME=" + u.tempDir(t)}}
		r := u.sh(t, o, nil, `chmod 000 . && echo done`)
		expectCode(t, r, 0)
		r2 := u.sh(t, o, nil, `true`)
		for _, p := range []string{".mcp.json", ".envrc", ".vscode"} {
			if exists(filepath.Join(ws, p)) {
				t.Errorf("placeholder %s left in the workspace after the run (and the next one); stderr: %s %s", p, r.stderr, r2.stderr)
			}
		}
	})
}
