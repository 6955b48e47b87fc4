package integration

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Outside review 20 of df4ba76..b24b14d. Each test FAILS on the code
// reviewed, for the reason stated above it, and passes once fixed.

// hostGitDir is the git directory git on the host finds when run in dir
// as u (rev-parse, which runs no hook nor fsmonitor), or "".
func hostGitDir(t *testing.T, u user, dir string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		return ""
	}
	cmd := exec.Command("git", "rev-parse", "--absolute-git-dir")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "GIT_CONFIG_NOSYSTEM=1"}
	u.asUser(cmd)
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// HIGH. Attack: the user has an old link pkgs/app -> node_modules/p (a
// workspace package). The sandbox makes a repository in an ANCESTOR of
// the link's target that is still inside the skipped tree:
// pkgs/node_modules/.git (config core.fsmonitor = its program), or lays
// pkgs/node_modules out as a bare repository. git on the host run in
// pkgs/app resolves its physical cwd (pkgs/node_modules/p) and walks UP,
// so it enters the sandbox's repository. quarantineThroughLinks only
// looks below the link's target (findTails from real), and the main walk
// never lists node_modules, so the repository is left in place and the
// run reports nothing. Should: the directories between the skipped
// component and the link's target (pkgs/node_modules, ...) are looked at
// for a .git or a git directory's layout, as below the target.
func TestReview20RepoAboveLinkTargetInSkippedTree(t *testing.T) {
	for name, plant := range map[string]string{
		"dotgit": plantRepo16("pkgs/node_modules"),
		"bare":   plantBare("pkgs/node_modules"),
	} {
		t.Run(name, func(t *testing.T) {
			eachUser(t, func(t *testing.T, u user) {
				ws, r := plantBehindOldLink(t, u, nil, plant)
				app := filepath.Join(ws, "pkgs", "app")
				nm := filepath.Join(ws, "pkgs", "node_modules")
				if g := hostGitDir(t, u, app); g != "" && strings.HasPrefix(g, nm) {
					t.Errorf("git on the host run in pkgs/app enters %s, the sandbox's repository (above the link's target, in node_modules); stderr: %q", g, r.stderr)
				}
				for _, p := range []string{filepath.Join(nm, ".git", "config"), filepath.Join(nm, "HEAD")} {
					if exists(p) {
						t.Errorf("%s, made by the sandbox above the target of pkgs/app, is left in place; stderr: %q", p, r.stderr)
					}
				}
			})
		})
	}
}
