package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Review 19: the loosening options and the config/profile layers
// (docs/security.md "What the loosening options give up", docs/profiles.md
// "Precedence").

// rv19Project makes a workspace owned by u holding a git repository's
// .git/config and a project profile nsbox.toml (docs/profiles.md's own
// example: `--profile ./nsbox.toml` in the workspace).
func rv19Project(t *testing.T, u user) (ws, gitConfig, profile string) {
	t.Helper()
	ws = u.tempDir(t)
	if err := os.Mkdir(filepath.Join(ws, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() == 0 {
		os.Chown(filepath.Join(ws, ".git"), u.uid, u.gid)
	}
	gitConfig = filepath.Join(ws, ".git", "config")
	u.writeFile(t, gitConfig, "[core]\n\trepositoryformatversion = 0\n\tbare = false\n", 0o644)
	profile = filepath.Join(ws, "nsbox.toml")
	u.writeFile(t, profile, "description = \"this project's profile\"\nextend = \"workspace\"\n", 0o644)
	return ws, gitConfig, profile
}

// MEDIUM. A project profile in the workspace, which any plain run there
// may rewrite, silently loosens the next run that uses it.
//
// Attack: the project keeps its nsbox profile in the workspace and runs
// `nsbox run --profile ./nsbox.toml` (docs/profiles.md's own example of a
// policy file "inside a writable directory"). A policy file is protected
// only in the runs that use it: an ordinary `nsbox run` in the same
// workspace (profile workspace) does not know it, so code in that sandbox
// rewrites nsbox.toml to lift the built-in protections
// (`protect = ["!$NSBOX_RW/.git/", ...]`; it could as well set
// `seccomp = "unconfined"`, `network = "host"`, `hide = ["!~/.ssh"]`).
// The next run with the project profile gives its sandbox a writable
// .git/config, which appends `core.fsmonitor`: the user's next `git
// status` on the host runs it. docs/profiles.md refuses `backend = "none"`
// in a profile for exactly this reason ("a profile may lie in a directory
// an earlier sandbox could write"), yet every other loosening key is
// honoured from such a file, and the protect/hide removals without any
// warning.
//
// Observed: the second run writes .git/config (exit 0, no warning on
// stderr).
//
// Should: a policy file that lies in a directory a sandbox can write
// loosens nothing (its loosening keys refused with an error, as `backend
// = "none"` is), or such files are never writable to any run.
func TestReview19ProjectProfileRewrittenByEarlierRun(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws, gitConfig, _ := rv19Project(t, u)
		before, err := os.ReadFile(gitConfig)
		if err != nil {
			t.Fatal(err)
		}
		// Run 1: an ordinary run of the default profile in the workspace.
		r1 := u.sh(t, &runOpts{dir: ws}, nil, `cat > nsbox.toml <<'EOF' 2>/dev/null; echo wrote=$?
description = "this project's profile"
extend = "workspace"
[filesystem]
protect = ["!$NSBOX_RW/.git/", "!$NSBOX_RW/.git/config", "!$NSBOX_RW/.git/hooks/", "!$NSBOX_RW/**/.git"]
EOF`)
		expectCode(t, r1, 0)
		// Run 2: the user's run with the project's profile.
		r2 := u.sh(t, &runOpts{dir: ws}, []string{"--profile", "./nsbox.toml"},
			`printf '\tfsmonitor = "touch /tmp/rv19-pwned"\n' >> .git/config 2>/dev/null; echo appended=$?`)
		after, err := os.ReadFile(gitConfig)
		if err != nil {
			t.Fatal(err)
		}
		if string(after) != string(before) {
			t.Errorf("a plain run rewrote the project profile (%s) and the next `nsbox run --profile ./nsbox.toml` (exit %d) wrote the host's %s:\n%s\nstderr of that run (no warning about the lifted protections):\n%s",
				strings.TrimSpace(r1.stdout), r2.code, gitConfig, after, r2.stderr)
		}
	})
}

// LOW. Loosenings read from a policy file print no warning.
//
// Attack: a profile (or config.toml) sets `network = "host"`, removes a
// built-in credential hide (`hide = ["!~/.ssh"]`) and the protection of
// the workspace's .git (`protect = ["!$NSBOX_RW/.git/", ...]`). Each gives
// up something docs/security.md lists (the host's network, its loopback
// services and abstract sockets; the secrets the profiles hide; the
// protection of git metadata against planted hooks and fsmonitor), and
// `seccomp = "unconfined"`, `allow_*` and `env.clear = false` in the same
// file are each printed as a `nsbox: warning: FILE:LINE: KEY: ...` line.
//
// Observed: none of the three gets a warning line on stderr; only
// --dry-run's JSON shows the resulting policy.
//
// Should: every loosening of a built-in default, from any layer, is a
// warning naming the file, line and key, as the others are.
func TestReview19ProfileLooseningsWithoutWarning(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws, _, _ := rv19Project(t, u)
		// Outside the workspace: one inside is refused outside
		// .nsbox/policy/ (TestReview19ProjectProfileRewrittenByEarlierRun).
		profile := filepath.Join(u.tempDir(t), "loosens.toml")
		u.writeFile(t, profile, `description = "loosens"
extend = "workspace"
network = "host"
[filesystem]
hide = ["!~/.ssh"]
protect = ["!$NSBOX_RW/.git/", "!$NSBOX_RW/.git/config", "!$NSBOX_RW/.git/hooks/", "!$NSBOX_RW/**/.git"]
`, 0o644)
		r := u.run(t, &runOpts{dir: ws}, "run", "--profile", profile, "--", "/bin/true")
		expectCode(t, r, 0)
		var warned []string
		for _, l := range strings.Split(r.stderr, "\n") {
			if strings.HasPrefix(l, "nsbox: warning: ") {
				warned = append(warned, l)
			}
		}
		all := strings.Join(warned, "\n")
		for _, key := range []string{"network", "filesystem.hide", "filesystem.protect"} {
			if !strings.Contains(all, ": "+key+": ") && !strings.Contains(all, ":"+key+":") {
				t.Errorf("%s in %s loosens the sandbox without a warning; warnings were:\n%s", key, filepath.Base(profile), all)
			}
		}
	})
}

// MEDIUM. A --seccomp FILE that allows everything is --seccomp unconfined
// without the warning, and without --allow-userns.
//
// Attack: a profile (or a project's seccomp file, or a policy file's
// `seccomp = "./seccomp.json"`) reads {"defaultAction":"SCMP_ACT_ALLOW"}.
// nsbox parses it before the run and keeps only its set-id filter and the
// socket gate beside it, so every call the default profile closes is open
// (bpf, keyctl, userfaultfd, perf_event_open, the mount API, unshare of
// new namespaces); that is what `--seccomp unconfined` gives up, and that
// one prints "nsbox: warning: ... seccomp unconfined: commands may use
// every system call". The FILE prints nothing, not even for the nested
// user namespace that --allow-userns exists to name.
//
// Observed: exit 0, `unshare -U` succeeds inside, stderr has no warning.
//
// Should: a FILE profile that allows any call of seccomp.DangerousSet()
// (or new user namespaces) is warned about like unconfined, naming what it
// opens.
func TestReview19AllowAllSeccompFileSilent(t *testing.T) {
	hdRequireRunFlag(t, "--seccomp")
	eachUser(t, func(t *testing.T, u user) {
		dir := u.tempDir(t)
		prof := filepath.Join(dir, "allow.json")
		u.writeFile(t, prof, `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[]}`, 0o644)
		r := u.sh(t, nil, []string{"--seccomp", prof}, `unshare -U true 2>/dev/null && echo userns=allowed || echo userns=refused`)
		expectCode(t, r, 0)
		if !strings.Contains(r.stderr, "nsbox: warning: ") {
			t.Errorf("--seccomp %s (defaultAction SCMP_ACT_ALLOW) ran with no warning (inside: %s); --seccomp unconfined warns for the same loosening",
				filepath.Base(prof), strings.TrimSpace(r.stdout))
		}
	})
}

// rv19VisibleDir makes a directory outside /tmp (private inside) that u
// can read, removed after the test.
func rv19VisibleDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/var/tmp", "nsbox-rv19-")
	if err != nil {
		t.Skipf("no /var/tmp to make a visible directory in: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// LOW. `nsbox script --read-host` shows the .env of the project it was
// started from.
//
// Attack: an agent in a project directory runs an inline script with
// `nsbox script --read-host` (an interpreter under the home directory
// needs it). Its help says "read-only; credentials and .env files still
// hidden", docs/tools.md "with what the strict profile and your config
// hide (credentials, .env*) still hidden". But the strict profile hides
// .env files only in writable directories ($NSBOX_RW/**/.env*), and a
// script without --workdir has none but its fresh work directory: the
// script reads the project's .env (and every other on the host) in
// clear.
//
// Observed: the script prints the .env's secret.
//
// Should: under --read-host the .env files nsbox promises to hide read as
// empty, at least those of the directory it was started from (walked as a
// workspace's are), or the flag's help and docs stop promising it.
func TestReview19ScriptReadHostShowsProjectEnv(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		proj := filepath.Join(rv19VisibleDir(t), "project")
		if err := os.Mkdir(proj, 0o755); err != nil {
			t.Fatal(err)
		}
		if os.Getuid() == 0 {
			os.Chown(proj, u.uid, u.gid)
		}
		env := filepath.Join(proj, ".env")
		u.writeFile(t, env, "API_TOKEN=rv19-secret-value\n", 0o644)
		r := u.run(t, &runOpts{dir: proj}, "script", "--lang", "bash", "--read-host", "-c", "cat "+env+" 2>/dev/null; true")
		expectCode(t, r, 0)
		if strings.Contains(r.stdout, "rv19-secret-value") {
			t.Errorf("nsbox script --read-host, started in %s, read its .env in clear (%q); --read-host promises .env files stay hidden",
				proj, strings.TrimSpace(r.stdout))
		}
	})
}

// LOW. --json-status says nothing of the loosenings a run was started
// with.
//
// Attack: an orchestrator that reads `--json-status` (the machine
// interface: started, violation, exited events) to record or gate what
// ran cannot tell a default sandbox from one started with `--seccomp
// unconfined --allow-privileged --net host` (by a flag, its config file or
// a profile file): the warnings go to stderr only. The landlock backend's
// weaker isolation is listed in the started event (`not_isolated`), the
// loosenings, which give up more, are not.
//
// Observed: the started event holds backend, pid, profile, limits and the
// socket gate; nothing names seccomp unconfined, allow_privileged or the
// host network.
//
// Should: the started event lists the run's loosenings (e.g. a
// "loosened"/"warnings" member with seccomp, allow_privileged, network).
func TestReview19JSONStatusOmitsLoosenings(t *testing.T) {
	hdRequireRunFlag(t, "--json-status")
	eachUser(t, func(t *testing.T, u user) {
		r := u.run(t, nil, "run", "--json-status", "/dev/stdout", "--seccomp", "unconfined", "--allow-privileged", "--net", "host", "--", "/bin/true")
		expectCode(t, r, 0)
		b := startedLine(t, r.stdout)
		for _, want := range []string{"unconfined", "privileged", "host"} {
			if !strings.Contains(string(b), want) {
				t.Errorf("the started event of --json-status does not name the loosening %q: %s", want, b)
			}
		}
	})
}

// startedLine is the "started" event of --json-status lines, as JSON text.
func startedLine(t *testing.T, lines string) []byte {
	t.Helper()
	for _, l := range strings.Split(lines, "\n") {
		var ev map[string]any
		if json.Unmarshal([]byte(l), &ev) == nil && ev["event"] == "started" {
			return []byte(l)
		}
	}
	t.Fatalf("no started event in --json-status: %q", lines)
	return nil
}
