package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Outside review 21 of b24b14d..2998779. Each test FAILS on the code
// reviewed, for the reason stated above it, and passes once fixed.

// HIGH. Attack (one run): the sandbox makes node_modules/.git/p, a plain
// directory below a directory NAMED .git inside a skipped tree (nothing
// protects it: the start's walk never enters node_modules), plants a
// full repository in it (node_modules/.git/p/.git, core.fsmonitor = its
// program) and a link app -> node_modules/.git/p. quarantineThroughLinks
// sets inGitDir because the target's path holds a ".git" component and
// then skips every repository check, below the target and above it, on
// the reasoning that "the protection of .git decides": but this .git was
// never protected, it is the sandbox's own directory. git on the host run
// in app resolves its physical cwd, finds node_modules/.git/p/.git first
// and runs core.fsmonitor on `git status`. Observed: the link and the
// repository stay, nothing is reported. Should: inGitDir only for a .git
// the run protected (known); otherwise the link (new) is quarantined or
// the repository below it is.
func TestReview21RepoBelowUnprotectedGitNamedDir(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		u.mkdirs(t, ws)
		r := u.sh(t, &runOpts{dir: ws}, nil, plantRepo16("node_modules/.git/p")+
			` && ln -s node_modules/.git/p app && echo planted`)
		expectCode(t, r, 0)
		if !strings.Contains(r.stdout, "planted") {
			t.Fatalf("the sandbox could not plant: %q %q", r.stdout, r.stderr)
		}
		app := filepath.Join(ws, "app")
		if g := hostGitDir(t, u, app); g != "" && strings.HasPrefix(g, filepath.Join(ws, "node_modules")) {
			t.Errorf("git on the host run in app (a link the sandbox made) enters %s, the sandbox's repository below node_modules/.git; stderr: %q", g, r.stderr)
		}
		if exists(filepath.Join(ws, "node_modules", ".git", "p", ".git", "config")) && exists(app) {
			t.Errorf("node_modules/.git/p/.git (core.fsmonitor) and the link app to it are both left in place; stderr: %q", r.stderr)
		}
	})
}

// HIGH. Attack (two runs): the link is made in an earlier run where the
// walk does not look, then moved into place with its parent directory,
// so that its own change time stays old. Run 1: target/hold/app ->
// ../../node_modules/p (target/ is skipped by the walk: no link found)
// and a repository laid out in node_modules (a bare layout with
// core.fsmonitor, or node_modules/.git); no walked link leads there, so
// nothing is quarantined. Run 2: mv target/hold sub/pkgs. rename(2)
// stamps only the moved directory; the link sub/pkgs/app keeps run 1's
// ctime, so newLink is false, and the repository above its target is
// judged by layoutChanged/changedInRun, whose entries all date from run 1.
// Observed: sub/pkgs/app leads git into node_modules' repository.
// Should: a link below a directory changed in the run (as changedInRun
// already does for created patterns between the fixed part and a match)
// counts as new, and is quarantined when a repository is on git's way up.
func TestReview21StashedLinkMovedIntoPlace(t *testing.T) {
	for name, plant := range map[string]string{
		"bare":   plantBare("node_modules"),
		"dotgit": plantRepo16("node_modules"),
	} {
		t.Run(name, func(t *testing.T) {
			eachUser(t, func(t *testing.T, u user) {
				ws := filepath.Join(u.visibleDir(t), "proj")
				u.mkdirs(t, filepath.Join(ws, "sub"))
				r1 := u.sh(t, &runOpts{dir: ws}, nil, `mkdir -p node_modules/p target/hold && `+
					`ln -s ../../node_modules/p target/hold/app && `+plant+` && echo planted`)
				expectCode(t, r1, 0)
				if !strings.Contains(r1.stdout, "planted") {
					t.Fatalf("run 1 could not plant: %q %q", r1.stdout, r1.stderr)
				}
				time.Sleep(50 * time.Millisecond) // run 2's changes in a later clock tick
				r2 := u.sh(t, &runOpts{dir: ws}, nil, `mv target/hold sub/pkgs && echo moved`)
				if !strings.Contains(r2.stdout, "moved") {
					t.Fatalf("run 2 could not move: %q %q", r2.stdout, r2.stderr)
				}
				app := filepath.Join(ws, "sub", "pkgs", "app")
				nm := filepath.Join(ws, "node_modules")
				if g := hostGitDir(t, u, app); g != "" && strings.HasPrefix(g, nm) {
					t.Errorf("git on the host run in sub/pkgs/app enters %s, the sandbox's repository; run 1 stderr: %q; run 2 exit %d stderr: %q", g, r1.stderr, r2.code, r2.stderr)
				}
			})
		})
	}
}

// MEDIUM. trustedPolicyFile accepts a profile in the .nsbox/policy/ at
// the TOP of a writable directory unconditionally (i == 0), on the
// premise that every run protects it. Only the runs in which that
// directory is itself a writable root do ($NSBOX_RW/.nsbox/polic[y]); a
// run whose writable directory is an ANCESTOR protects it only through
// the nested pattern $NSBOX_RW/*/**/.nsbox/policy, which skips a
// --shallow directory (and the end-of-run audit does not look below its
// top either). Attack: the user
// keeps ~/src/proj/.nsbox/policy/ci.toml (the documented place) and once
// runs `nsbox run --shallow ~/src` in ~/src (a tree too big to walk); that sandbox
// rewrites proj/.nsbox/policy/ci.toml (network = "host"). Observed: the
// write succeeds, and the next `nsbox run --profile
// .nsbox/policy/ci.toml` in proj is accepted (exit 0). Should: a run
// protects every .nsbox/policy a later run would accept (looked up by
// name below shallow directories too, and audited there), or the file is
// refused. (Deeper than the walk the audit quarantines the change: held.)
func TestReview21TopPolicyDirUnprotectedFromAncestorRun(t *testing.T) {
	for name, c := range map[string]struct {
		rel     string // the project below the ancestor run's workspace
		shallow bool
	}{
		"shallow": {"proj", true},
	} {
		t.Run(name, func(t *testing.T) {
			eachUser(t, func(t *testing.T, u user) {
				base := u.tempDir(t)
				ws := filepath.Join(base, c.rel)
				pol := filepath.Join(ws, ".nsbox", "policy")
				u.mkdirs(t, pol)
				prof := filepath.Join(pol, "ci.toml")
				u.writeFile(t, prof, "description = \"the project's\"\nextend = \"workspace\"\n", 0o644)
				// The user trusts the profile as written (nsbox trust).
				env := trustEnv(t, u)
				u.trust(t, env, ws, prof)
				var flags []string
				if c.shallow {
					flags = []string{"--shallow", base}
				}
				r1 := u.sh(t, &runOpts{dir: base, env: env}, flags, `printf 'description = "the sandbox'"'"'s"\nextend = "workspace"\nnetwork = "host"\n' > `+filepath.Join(c.rel, ".nsbox", "policy", "ci.toml")+` 2>/dev/null; echo wrote=$?`)
				b, _ := os.ReadFile(prof)
				rewritten := strings.Contains(string(b), "sandbox's")
				r2 := u.run(t, &runOpts{dir: ws, env: env}, "run", "--profile", prof, "--", "/bin/true")
				if rewritten && r2.code != 125 {
					t.Errorf("a run in %s (flags %v) rewrote %s (%s; stderr %q), and the next run in the project with --profile it was accepted (exit %d, stderr %q)",
						base, flags, prof, strings.TrimSpace(r1.stdout), r1.stderr, r2.code, r2.stderr)
				}
				if !rewritten {
					t.Logf("not rewritten: %q %q", r1.stdout, r1.stderr)
				}
			})
		})
	}
}

// MEDIUM. trustedPolicyFile exempts every file in nsbox's config
// directory ($XDG_CONFIG_HOME/nsbox) because "the config directory is
// protected in every run". It is protected only in the runs with the
// same XDG_CONFIG_HOME. Attack: the user's XDG_CONFIG_HOME lies in the
// project (a per-project setup through direnv or a devcontainer:
// XDG_CONFIG_HOME=$PWD/.xdg); one run started without it (another
// shell, an agent's own environment) has that directory writable, and
// its sandbox writes .xdg/nsbox/config.toml with `backend = "none"`.
// Observed: the next run with XDG_CONFIG_HOME=$PWD/.xdg runs its command
// with no sandbox at all (it writes a directory outside every writable
// one). Should: a config directory that lies inside a writable directory
// of the run is not exempt (its files are refused as any other policy
// file there, exit 125), or the run refuses such a config directory.
func TestReview21ConfigDirInsideWorkspace(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		outside := u.tempDir(t)
		u.mkdirs(t, filepath.Join(ws, ".xdg", "nsbox"))
		u.writeFile(t, filepath.Join(ws, ".xdg", "nsbox", "config.toml"), "# the user's\n", 0o644)
		r1 := u.sh(t, &runOpts{dir: ws}, nil, `printf 'backend = "none"\n' > .xdg/nsbox/config.toml; echo wrote=$?`)
		b, _ := os.ReadFile(filepath.Join(ws, ".xdg", "nsbox", "config.toml"))
		if !strings.Contains(string(b), "none") {
			t.Skipf("the earlier run could not rewrite the config: %q %q", r1.stdout, r1.stderr)
		}
		marker := filepath.Join(outside, "escaped")
		r2 := u.run(t, &runOpts{dir: ws, env: []string{"XDG_CONFIG_HOME=" + filepath.Join(ws, ".xdg")}}, "run", "--", "/bin/sh", "-c", "touch "+marker)
		if exists(marker) {
			t.Errorf("a sandbox wrote %s/.xdg/nsbox/config.toml (backend = \"none\"), and the next run with XDG_CONFIG_HOME=%s/.xdg ran unsandboxed: it wrote %s (exit %d, stderr %q)", ws, ws, marker, r2.code, r2.stderr)
		}
	})
}

// LOW. docs/security.md, "What the loosening options give up", lists
// `--host-api API.METHOD` (commands get the hostCall socket and trigger
// those handlers on the host), and says the loosenings a policy file
// chooses, "where the command line does not show them", are warned about
// and carried in the started line's `loosened` member. Attack: a profile
// (the user's, or a project's .nsbox/policy/ci.toml an orchestrator runs
// with) sets host_apis = ["memory.save"]. Observed: no warning, and the
// started event of --json-status names no host API at all (it carries
// the socket gate, not the API list): an orchestrator cannot tell the run
// from a default one. Should: the started line names the host APIs the
// run allows (in `loosened`, or a warning there).
func TestReview21HostAPIsFromProfileSilent(t *testing.T) {
	hdRequireRunFlag(t, "--json-status")
	eachUser(t, func(t *testing.T, u user) {
		pd := u.tempDir(t)
		prof := filepath.Join(pd, "p.toml")
		u.writeFile(t, prof, "extend = \"workspace\"\nhost_apis = [\"memory.save\"]\n", 0o644)
		ws := u.tempDir(t)
		r := u.run(t, &runOpts{dir: ws}, "run", "--profile", prof, "--json-status", "/dev/stdout", "--", "/bin/true")
		expectCode(t, r, 0)
		b := startedLine(t, r.stdout)
		if !strings.Contains(string(b), "memory.save") {
			t.Errorf("a profile's host_apis = [\"memory.save\"] is not named by the started event of --json-status (%s), nor warned about (stderr %q)", b, r.stderr)
		}
	})
}

// HIGH. Attack: a writable directory nested below a name the walk skips
// in another one (workspace ~/src/app/node_modules/lib, a package being
// worked on, with --rw ~/src; review 15's layout), the workspace holding
// no repository of its own. The sandbox makes ~/src/app/node_modules/.git
// (core.fsmonitor = its program), or lays ~/src/app/node_modules out as
// a bare repository. git on the host run in the workspace walks up from
// it and enters that repository. The ~/src walk never enters
// node_modules, the workspace's own walk starts below it, and the roots'
// check looks at each root's own .git and HEAD only, not the directories
// between an enclosing root's skipped name and the nested root. Observed:
// the repository is left in place, nothing reported. Should: as for a
// link's target (2998779), the directories between the outer root's
// first skipped name and a nested root are checked for a .git or a git
// directory's layout the run made.
func TestReview21RepoAboveNestedRootInSkippedTree(t *testing.T) {
	for name, plant := range map[string]string{
		"dotgit": plantRepo16("../../node_modules"),
		"bare":   plantBare("../../node_modules"),
	} {
		t.Run(name, func(t *testing.T) {
			eachUser(t, func(t *testing.T, u user) {
				base := u.tempDir(t)
				ws := filepath.Join(base, "app", "node_modules", "lib")
				u.mkdirs(t, ws)
				r := u.sh(t, &runOpts{dir: ws}, []string{"--rw", base}, plant+` && echo planted`)
				if !strings.Contains(r.stdout, "planted") {
					t.Fatalf("the sandbox could not plant: exit %d %q %q", r.code, r.stdout, r.stderr)
				}
				nm := filepath.Join(base, "app", "node_modules")
				if g := hostGitDir(t, u, ws); g != "" && strings.HasPrefix(g, nm) {
					t.Errorf("git on the host run in the workspace %s enters %s, the sandbox's repository above it in node_modules (exit %d, stderr %q)", ws, g, r.code, r.stderr)
				}
			})
		})
	}
}
