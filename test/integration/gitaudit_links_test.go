package integration

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The end-of-run audit does not walk the trees it skips (node_modules,
// target, .venv ...) nor follow symlinks; git on the host, run in a link
// that leads into such a tree, finds a repository there. These tests show
// that the audit follows the links it meets to repositories in skipped
// trees, as it does for agent files (TestReviewAuditSymlinkToSkippedDir;
// the new-link case is TestReview16RepoThroughLinkIntoSkippedDir), and
// that it leaves the user's own repositories there alone.

// plantBare is a shell line that lays dir out as a bare repository whose
// config runs a program of the sandbox's when git is run in dir.
func plantBare(dir string) string {
	return `mkdir -p ` + dir + `/objects ` + dir + `/refs && ` +
		`printf 'ref: refs/heads/main\n' > ` + dir + `/HEAD && ` +
		`printf '[core]\n\tbare = true\n\tfsmonitor = touch /tmp/pwned\n' > ` + dir + `/config`
}

// plantBehindOldLink makes ws/pkgs/node_modules/p and the user's own
// link ws/pkgs/app -> node_modules/p, then, in a later tick of the clock
// (what the run does is newer than both), runs script in ws.
func plantBehindOldLink(t *testing.T, u user, flags []string, script string) (string, result) {
	t.Helper()
	ws := filepath.Join(u.visibleDir(t), "proj")
	u.mkdirs(t, filepath.Join(ws, "pkgs", "node_modules", "p"))
	u.symlinkAs(t, "node_modules/p", filepath.Join(ws, "pkgs", "app"))
	time.Sleep(50 * time.Millisecond)
	r := u.sh(t, &runOpts{dir: ws}, flags, script+` && echo planted`)
	expectCode(t, r, 0)
	if !strings.Contains(r.stdout, "planted") {
		t.Fatalf("the sandbox could not plant: %q %q", r.stdout, r.stderr)
	}
	return ws, r
}

// A repository the run makes behind a link of the user's that leads into
// node_modules is quarantined; the link, the user's, stays.
func TestGitAuditRepoBehindOldLink(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		reviewBackends(t, u, func(t *testing.T, flags []string) {
			ws, r := plantBehindOldLink(t, u, flags, plantRepo16("pkgs/node_modules/p"))
			if exists(filepath.Join(ws, "pkgs", "app", ".git")) {
				t.Errorf("pkgs/app/.git (node_modules/p/.git), made by the sandbox, is left in place; stderr: %q", r.stderr)
			}
			if !exists(filepath.Join(ws, "pkgs", "node_modules", "p", ".git.nsbox-quarantine")) {
				t.Errorf("node_modules/p/.git not quarantined under its new name; stderr: %q", r.stderr)
			}
			if !exists(filepath.Join(ws, "pkgs", "app")) {
				t.Errorf("the user's link pkgs/app was removed; only what the run made should be")
			}
		})
	})
}

// The same for a bare repository's layout made in the link's target: git
// run in pkgs/app takes it as a repository. Its HEAD is renamed.
func TestGitAuditBareRepoBehindOldLink(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		reviewBackends(t, u, func(t *testing.T, flags []string) {
			ws, r := plantBehindOldLink(t, u, flags, plantBare("pkgs/node_modules/p"))
			if exists(filepath.Join(ws, "pkgs", "node_modules", "p", "HEAD")) {
				t.Errorf("a bare repository made by the sandbox behind pkgs/app kept its HEAD: git in pkgs/app runs its config; stderr: %q", r.stderr)
			}
		})
	})
}

// A bare repository's layout behind a link the run made: the link is
// quarantined.
func TestGitAuditBareRepoBehindNewLink(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		u.mkdirs(t, filepath.Join(ws, "pkgs"))
		time.Sleep(50 * time.Millisecond)
		r := u.sh(t, &runOpts{dir: ws}, nil, plantBare("pkgs/node_modules/b")+` && ln -s node_modules/b pkgs/b && echo planted`)
		expectCode(t, r, 0)
		if !strings.Contains(r.stdout, "planted") {
			t.Fatalf("the sandbox could not plant: %q %q", r.stdout, r.stderr)
		}
		if exists(filepath.Join(ws, "pkgs", "b")) {
			t.Errorf("pkgs/b -> node_modules/b, a bare repository made by the sandbox, is left in place; stderr: %q", r.stderr)
		}
	})
}

// The user's own repository in a skipped tree, behind the user's link,
// which the run does not touch, is left alone: nothing renamed, nothing
// reported.
func TestGitAuditUserRepoBehindLinkKept(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		repo := filepath.Join(ws, "pkgs", "node_modules", "p", ".git")
		u.mkdirs(t, filepath.Join(repo, "objects"), filepath.Join(repo, "refs"))
		u.writeFile(t, filepath.Join(repo, "HEAD"), "ref: refs/heads/main\n", 0o644)
		u.mkdirs(t, filepath.Join(ws, "vendor", "target", "bare", "objects"), filepath.Join(ws, "vendor", "target", "bare", "refs"))
		u.writeFile(t, filepath.Join(ws, "vendor", "target", "bare", "HEAD"), "ref: refs/heads/main\n", 0o644)
		for link, to := range map[string]string{"pkgs/app": "node_modules/p", "vendor/bare": "target/bare"} {
			u.symlinkAs(t, to, filepath.Join(ws, link))
		}
		time.Sleep(50 * time.Millisecond)
		r := u.sh(t, &runOpts{dir: ws}, nil, `ls pkgs/app/.git vendor/bare >/dev/null && echo looked`)
		expectCode(t, r, 0)
		for _, p := range []string{repo, filepath.Join(ws, "vendor", "target", "bare", "HEAD"), filepath.Join(ws, "pkgs", "app"), filepath.Join(ws, "vendor", "bare")} {
			if !exists(p) {
				t.Errorf("%s, the user's own, was moved by a run that did not touch it; stderr: %q", p, r.stderr)
			}
		}
		if strings.Contains(r.stderr, "quarantine") {
			t.Errorf("a run that made nothing reported a quarantine: %q", r.stderr)
		}
	})
}
