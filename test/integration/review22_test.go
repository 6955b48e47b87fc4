package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Outside review 22 of 2998779..a4e7a47. Each test FAILS on the code
// reviewed, for the reason stated above it, and passes once fixed.

// userRepo22 lays out a repository of the user's own at dir (.git with
// HEAD, objects, refs), made on the host before any run.
func userRepo22(t *testing.T, u user, dir string) {
	t.Helper()
	u.mkdirs(t, filepath.Join(dir, ".git", "objects"), filepath.Join(dir, ".git", "refs"))
	u.writeFile(t, filepath.Join(dir, ".git", "HEAD"), "ref: refs/heads/main\n", 0o644)
}

// MEDIUM (false positive: the audit renames the user's own link and
// blames the sandbox). The start's walk records the links it meets
// (startLinks), but how deep it goes depends on the pattern: the
// repositories' "$NSBOX_RW/**/.git" is walked to auditMaxDepth (64), the
// others (protectGlob, hides) to walkMaxDepth (8). The end's walk of the
// created patterns always goes to 64 (createdGlob). When the repositories'
// pattern is lifted (a profile with protect = ["!$NSBOX_RW/**/.git"],
// which the docs offer), a link of the user's deeper than the start's
// bound is "not seen at the start", which quarantineThroughLinks takes
// for "made or moved into view in the run". Setup: the user's
// dependency checkout node_modules/dep holds .vscode/settings.json, and
// an old link a/b/c/d/e/f/g/h/i/j/k/dep leads to it, both made on the
// host before the run. The run is /bin/true. Observed: the link is
// renamed dep.nsbox-quarantine, with "the sandbox made or changed ...".
// Should: startLinks covers every depth the end's walk covers (walk the
// start as deep), or a link deeper than the start's walk is judged by
// its times as before.
func TestReview22DeepUserLinkTakenForNew(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		base := u.visibleDir(t)
		ws := filepath.Join(base, "proj")
		dep := filepath.Join(ws, "node_modules", "dep")
		u.mkdirs(t, filepath.Join(dep, ".vscode"))
		u.writeFile(t, filepath.Join(dep, ".vscode", "settings.json"), "{}\n", 0o644)
		deep := filepath.Join(ws, "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k")
		u.mkdirs(t, deep)
		link := filepath.Join(deep, "dep")
		u.symlinkAs(t, dep, link)
		prof := filepath.Join(base, "p.toml")
		u.writeFile(t, prof, "extend = \"workspace\"\n[filesystem]\nprotect = [\"!$NSBOX_RW/**/.git\"]\n", 0o644)
		time.Sleep(50 * time.Millisecond) // the run's clock tick is later
		r := u.run(t, &runOpts{dir: ws}, "run", "--profile", prof, "--", "/bin/true")
		if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
			t.Errorf("the user's own old link %s (to the user's checkout in node_modules) was renamed by a run that changed nothing; exit %d, stderr %q", link, r.code, r.stderr)
		}
	})
}

// HIGH (false negative). The user has an old link app -> node_modules/p
// (a workspace package, in startLinks, old ctime). Run 1 makes
// node_modules/stash/.git (core.fsmonitor = its program): no walked link
// leads there, so run 1's audit leaves it. Run 2 puts the stash where the
// user's link leads: either renames it over node_modules/p ("rename"), or
// replaces node_modules/p with a link to it ("relink"; inside the skipped
// tree, so no walk meets that link). app is the user's, seen at the
// start: newLink is false, and the default branch judges the .git below
// the target by changedInRun(g, real), which never looks at real itself
// (the renamed directory, the only entry with a new ctime) nor at the
// link in node_modules: every entry of the stash dates from run 1.
// Observed: git on the host run in app enters node_modules/.../.git (the
// sandbox's, fsmonitor). Should: the link's resolution is judged, not
// only its own inode: a target whose path changed in the run (the
// directory or a link on the way renamed/made after since, or a target
// other than the start's) makes the link count as new, or the target
// directory itself is among the entries changedInRun checks.
func TestReview22StashSwappedBehindOldLink(t *testing.T) {
	for name, swap := range map[string]string{
		"rename": `rm -rf node_modules/p && mv node_modules/stash node_modules/p`,
		"relink": `rm -rf node_modules/p && ln -s stash node_modules/p`,
	} {
		t.Run(name, func(t *testing.T) {
			eachUser(t, func(t *testing.T, u user) {
				ws := filepath.Join(u.visibleDir(t), "proj")
				u.mkdirs(t, filepath.Join(ws, "node_modules", "p"))
				app := filepath.Join(ws, "app")
				u.symlinkAs(t, "node_modules/p", app)
				time.Sleep(50 * time.Millisecond)
				r1 := u.sh(t, &runOpts{dir: ws}, nil, plantRepo16("node_modules/stash")+` && echo planted`)
				expectCode(t, r1, 0)
				if !strings.Contains(r1.stdout, "planted") {
					t.Fatalf("run 1 could not plant: %q %q", r1.stdout, r1.stderr)
				}
				time.Sleep(50 * time.Millisecond)
				r2 := u.sh(t, &runOpts{dir: ws}, nil, swap+` && echo swapped`)
				if !strings.Contains(r2.stdout, "swapped") {
					t.Fatalf("run 2 could not swap: %q %q", r2.stdout, r2.stderr)
				}
				nm := filepath.Join(ws, "node_modules")
				if g := hostGitDir(t, u, app); g != "" && strings.HasPrefix(g, nm) {
					t.Errorf("git on the host run in app (the user's link) enters %s, the sandbox's repository from run 1 swapped in by run 2; run 1 stderr %q; run 2 exit %d stderr %q", g, r1.stderr, r2.code, r2.stderr)
				}
			})
		})
	}
}

// MEDIUM. trustedPolicyFile exempts a policy file in the config
// directory when that directory is $HOME/.config/nsbox ("the default
// config directory, protected in every run whatever XDG_CONFIG_HOME
// says"). But $HOME is the run's own environment just as XDG_CONFIG_HOME
// is (review 21): a run with another HOME protects another directory.
// Attack: the user's home for some runs lies in a directory other runs
// make writable (a shared dev volume given with --rw, a per-project
// HOME of a devcontainer or direnv: HOME=/vol/home). One run started with
// the user's usual HOME and --rw /vol lets its sandbox write
// /vol/home/.config/nsbox/config.toml with backend = "none". Observed:
// the next run with HOME=/vol/home and --rw /vol (the config file is in
// its writable directory, so trustedPolicyFile is asked) accepts it as
// the default config directory and runs its command with no sandbox (it
// writes outside every writable directory). The same run with
// XDG_CONFIG_HOME=/vol/home/.config is refused (review 21's fix).
// Should: a config directory inside a writable directory of the run is
// not exempt whatever variable names it (refused, exit 125).
func TestReview22ConfigDirUnderHomeInRwDir(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		vol := u.tempDir(t)
		ws := u.tempDir(t)
		outside := u.tempDir(t)
		home := filepath.Join(vol, "home")
		cfg := filepath.Join(home, ".config", "nsbox")
		u.mkdirs(t, cfg)
		u.writeFile(t, filepath.Join(cfg, "config.toml"), "# the user's\n", 0o644)
		r1 := u.sh(t, &runOpts{dir: ws}, []string{"--rw", vol}, `printf 'backend = "none"\n' > `+filepath.Join(cfg, "config.toml")+`; echo wrote=$?`)
		b, _ := os.ReadFile(filepath.Join(cfg, "config.toml"))
		if !strings.Contains(string(b), "none") {
			t.Skipf("the earlier run could not rewrite the config: %q %q", r1.stdout, r1.stderr)
		}
		marker := filepath.Join(outside, "escaped")
		r2 := u.run(t, &runOpts{dir: ws, env: []string{"HOME=" + home}}, "run", "--rw", vol, "--", "/bin/sh", "-c", "touch "+marker)
		if exists(marker) {
			t.Errorf("a sandbox wrote %s (backend = \"none\"), and the next run with HOME=%s and --rw %s ran unsandboxed: it wrote %s (exit %d, stderr %q)", filepath.Join(cfg, "config.toml"), home, vol, marker, r2.code, r2.stderr)
		}
	})
}

// HIGH (false negative). quarantineThroughLinks skips a link whose target
// has no skipped name (node_modules, target ...) below the writable
// directory that holds it: "the walk itself looked there". Not so in a
// --shallow writable directory, which no nested walk enters. Attack (one
// run, --rw OUTER --shallow OUTER, a cache the user never runs git in):
// the sandbox makes OUTER/sub/p/.git (core.fsmonitor = its program) and
// a link app -> OUTER/sub/p in the WORKSPACE, which is audited in full.
// Observed: the link stays, nothing is reported, and git on the host run
// in app (cd app && git status: in the workspace) enters
// OUTER/sub/p/.git. Should: a link into a shallow directory is looked
// through like one into a skipped tree (the target and the directories
// above it up to the shallow root searched), or a new one is quarantined.
func TestReview22LinkIntoShallowDir(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		base := u.visibleDir(t)
		ws := filepath.Join(base, "proj")
		outer := filepath.Join(base, "cache")
		u.mkdirs(t, ws, outer)
		r := u.sh(t, &runOpts{dir: ws}, []string{"--rw", outer, "--shallow", outer},
			`cd `+outer+` && `+plantRepo16("sub/p")+` && ln -s `+filepath.Join(outer, "sub", "p")+` `+filepath.Join(ws, "app")+` && echo planted`)
		expectCode(t, r, 0)
		if !strings.Contains(r.stdout, "planted") {
			t.Fatalf("the sandbox could not plant: %q %q", r.stdout, r.stderr)
		}
		app := filepath.Join(ws, "app")
		if g := hostGitDir(t, u, app); g != "" && strings.HasPrefix(g, outer) {
			t.Errorf("git on the host run in %s (a link the sandbox made in the workspace) enters %s, the sandbox's repository in the --shallow directory; stderr %q", app, g, r.stderr)
		}
	})
}
