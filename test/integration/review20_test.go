package integration

import (
	"os"
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

// MEDIUM. Attack: the user's config.toml (trusted, in the config
// directory) names a seccomp file of the project's in the workspace,
// outside .nsbox/policy/ (`seccomp = "/ws/seccomp.json"`). Any run in
// which that file is not the run's seccomp (`--seccomp default`, another
// config) has it writable, and its sandbox rewrites it; every later run
// filters with the sandbox's profile. trustedPolicyFile accepts every
// file a KindConfig layer names (it exempts the layer, not the file), so
// the seccomp file is read from the writable directory where a profile
// naming it is refused. Observed: exit 0, the run uses the file. Should:
// refused with exit 125 and ErrWritablePolicyFile's message naming
// .nsbox/policy/, as for the same `seccomp` key in a profile.
func TestReview20ConfigSeccompFileInWorkspace(t *testing.T) {
	hdRequireRunFlag(t, "--seccomp")
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		sc := filepath.Join(ws, "seccomp.json")
		u.writeFile(t, sc, `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[]}`, 0o644)
		cfg := u.tempDir(t)
		u.mkdirs(t, filepath.Join(cfg, "nsbox"))
		u.writeFile(t, filepath.Join(cfg, "nsbox", "config.toml"), "seccomp = \""+sc+"\"\n", 0o644)
		o := &runOpts{dir: ws, env: []string{"XDG_CONFIG_HOME=" + cfg}}
		// The earlier run that does not use it writes it.
		r1 := u.run(t, o, "run", "--seccomp", "default", "--", "/bin/sh", "-c", "echo '{\"defaultAction\":\"SCMP_ACT_ALLOW\"}' > seccomp.json && echo rewrote")
		if !strings.Contains(r1.stdout, "rewrote") {
			t.Logf("the earlier run could not rewrite %s: %q", sc, r1.stderr)
		}
		r := u.run(t, o, "run", "--", "/bin/true")
		if r.code != 125 || !strings.Contains(r.stderr, ".nsbox/policy") {
			t.Errorf("config.toml's seccomp = %q, a file in the writable workspace outside .nsbox/policy/ (rewritable by any run not using it: earlier run %q), was used: exit %d, stderr %q; want exit 125 naming .nsbox/policy/",
				sc, strings.TrimSpace(r1.stdout), r.code, r.stderr)
		}
	})
}

// LOW. trustedPolicyFile accepts a profile in ANY .nsbox/policy/ below a
// writable directory (any two path components ".nsbox", "policy"), but
// runs protect only $NSBOX_RW/.nsbox/policy and the nested ones the
// "**" walk finds, and that walk skips node_modules, target, .venv .... Attack: the project's profile is
// ws/node_modules/tool/.nsbox/policy/ci.toml (a tool's own profile; the
// same for target/, .venv/ ...).
// A plain run in ws rewrites it (no protection there, no quarantine),
// and the next `nsbox run --profile .../.nsbox/policy/ci.toml` reads the
// sandbox's policy. Observed: the first run writes the file (exit 0),
// the second is accepted. Should: a policy file is accepted only in a
// .nsbox/policy/ that every run protects (the top one of a writable
// directory, or nested ones the walk reaches), else exit 125.
func TestReview20NestedPolicyDirUnprotected(t *testing.T) {
	for name, sub := range map[string]string{
		"node_modules": "node_modules/tool",
	} {
		t.Run(name, func(t *testing.T) {
			eachUser(t, func(t *testing.T, u user) {
				ws := u.tempDir(t)
				pol := filepath.Join(ws, sub, ".nsbox", "policy")
				u.mkdirs(t, pol)
				prof := filepath.Join(pol, "ci.toml")
				u.writeFile(t, prof, "description = \"the project's\"\nextend = \"workspace\"\n", 0o644)
				env := trustEnv(t, u)
				u.trust(t, env, ws, prof)
				r1 := u.sh(t, &runOpts{dir: ws, env: env}, nil, `printf 'description = "the sandbox'"'"'s"\nextend = "workspace"\nnetwork = "host"\n' > `+filepath.Join(sub, ".nsbox", "policy", "ci.toml")+` 2>/dev/null; echo wrote=$?`)
				b, _ := os.ReadFile(prof)
				rewritten := strings.Contains(string(b), "sandbox's")
				r2 := u.run(t, &runOpts{dir: ws, env: env}, "run", "--profile", prof, "--", "/bin/true")
				if rewritten && r2.code != 125 {
					t.Errorf("a plain run rewrote %s (%s; stderr %q), and the next run with --profile it was accepted (exit %d, stderr %q): no run protects that .nsbox/policy/",
						prof, strings.TrimSpace(r1.stdout), r1.stderr, r2.code, r2.stderr)
				}
			})
		})
	}
}

// LOW. Attack: the project's .env is a link to where the secrets live
// (`.env -> config/prod.env`, a common layout), and an agent runs
// `nsbox script --read-host` there. The new hides are `DIR/.env*` of the
// start directory and its ancestors, and a matching symlink hides its
// target only inside a writable directory of the run, which --read-host
// without --workdir has none of: reading .env (or config/prod.env)
// prints the secret. Should: under --read-host the file a start
// directory's .env link leads to reads as empty too (or the link is
// refused), as the flag's help promises.
func TestReview20ScriptReadHostEnvSymlink(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		proj := filepath.Join(u.visibleDir(t), "project")
		u.mkdirs(t, filepath.Join(proj, "config"))
		u.writeFile(t, filepath.Join(proj, "config", "prod.env"), "API_TOKEN=rv20-secret-value\n", 0o644)
		u.symlinkAs(t, "config/prod.env", filepath.Join(proj, ".env"))
		r := u.run(t, &runOpts{dir: proj}, "script", "--lang", "bash", "--read-host", "-c", "cat "+filepath.Join(proj, ".env")+" 2>/dev/null; true")
		expectCode(t, r, 0)
		if strings.Contains(r.stdout, "rv20-secret-value") {
			t.Errorf("nsbox script --read-host, started in %s, read its .env (a link to config/prod.env) in clear: %q", proj, strings.TrimSpace(r.stdout))
		}
	})
}
