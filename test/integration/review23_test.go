package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Outside review 23 of feffadd. Each test FAILS on the code reviewed, for
// the reason stated above it, and passes once fixed.

// HIGH (false negative). feffadd judges a link deeper than the start's
// walk (startLinkDepth) "by its times only", and targetMoved only knows
// links the start met: a deep old link of the user's whose target the
// sandbox swaps is neither new nor redirected. With the repositories'
// pattern lifted (protect = ["!$NSBOX_RW/**/.git"], offered by the docs)
// the start walks 8 levels. The user has an old link
// a/b/c/d/e/f/g/h/i/j/k/app -> node_modules/p. Run 1 makes
// node_modules/stash/.vscode/settings.json (a created pattern's tail;
// in the skipped tree, no link leads there, so run 1's audit leaves it).
// Run 2 renames the stash over node_modules/p (or makes node_modules/p a
// link to it). Observed: the link stays and the default branch judges
// settings.json by changedInRun(p, real), which never looks at real (the
// renamed directory, the only entry with a new ctime) nor at the link in
// node_modules: an editor opened on app reads the sandbox's settings
// (review 22's stash swap, again, below the start's depth). Should: the
// link's resolution is judged at every depth (the target directory and
// the links on the way count as entries changedInRun checks), or the
// start records links as deep as the end walks.
func TestReview23DeepLinkStashSwap(t *testing.T) {
	for name, swap := range map[string]string{
		"rename": `rm -rf node_modules/p && mv node_modules/stash node_modules/p`,
		"relink": `rm -rf node_modules/p && ln -s stash node_modules/p`,
	} {
		t.Run(name, func(t *testing.T) {
			eachUser(t, func(t *testing.T, u user) {
				base := u.visibleDir(t)
				ws := filepath.Join(base, "proj")
				u.mkdirs(t, filepath.Join(ws, "node_modules", "p"))
				deep := filepath.Join(ws, "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k")
				u.mkdirs(t, deep)
				app := filepath.Join(deep, "app")
				u.symlinkAs(t, filepath.Join(ws, "node_modules", "p"), app)
				prof := filepath.Join(base, "p.toml")
				u.writeFile(t, prof, "extend = \"workspace\"\n[filesystem]\nprotect = [\"!$NSBOX_RW/**/.git\"]\n", 0o644)
				time.Sleep(50 * time.Millisecond)
				r1 := u.run(t, &runOpts{dir: ws}, "run", "--profile", prof, "--", "/bin/sh", "-c",
					`mkdir -p node_modules/stash/.vscode && printf '{"evil":1}' > node_modules/stash/.vscode/settings.json && echo planted`)
				if !strings.Contains(r1.stdout, "planted") {
					t.Fatalf("run 1 could not plant: %q %q", r1.stdout, r1.stderr)
				}
				time.Sleep(50 * time.Millisecond)
				r2 := u.run(t, &runOpts{dir: ws}, "run", "--profile", prof, "--", "/bin/sh", "-c", swap+` && echo swapped`)
				if !strings.Contains(r2.stdout, "swapped") {
					t.Fatalf("run 2 could not swap: %q %q", r2.stdout, r2.stderr)
				}
				if b, err := os.ReadFile(filepath.Join(app, ".vscode", "settings.json")); err == nil && strings.Contains(string(b), "evil") {
					t.Errorf("an editor opened on %s (the user's old link, deeper than the start's walk) reads the sandbox's .vscode/settings.json swapped in by run 2; run 1 stderr %q; run 2 exit %d stderr %q", app, r1.stderr, r2.code, r2.stderr)
				}
			})
		})
	}
}
