package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// trustEnv is a private config directory for a test's trust records.
func trustEnv(t *testing.T, u user) []string {
	t.Helper()
	return []string{"XDG_CONFIG_HOME=" + u.tempDir(t)}
}

// trust runs `nsbox trust paths...` in dir with env.
func (u user) trust(t *testing.T, env []string, dir string, paths ...string) {
	t.Helper()
	r := u.run(t, &runOpts{dir: dir, env: env}, append([]string{"trust"}, paths...)...)
	expectCode(t, r, 0)
	if !strings.Contains(r.stderr, "trusted: ") {
		t.Fatalf("nsbox trust %v: stderr %q", paths, r.stderr)
	}
}

// A project profile runs only once trusted, as it is: refused while new
// and again after a change, with the command to run named.
func TestTrustProjectProfile(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		requireSandbox(t, u)
		env := trustEnv(t, u)
		ws := u.tempDir(t)
		pol := filepath.Join(ws, ".nsbox", "policy")
		u.mkdirs(t, pol)
		prof := filepath.Join(pol, "ci.toml")
		u.writeFile(t, prof, "description = \"the project's\"\nextend = \"workspace\"\n", 0o644)
		o := &runOpts{dir: ws, env: env}
		r := u.run(t, o, "run", "--profile", ".nsbox/policy/ci.toml", "--", "/bin/true")
		if r.code != 125 || !strings.Contains(r.stderr, "nsbox trust "+prof) || !strings.Contains(r.stderr, "is new") {
			t.Fatalf("an untrusted project profile: exit %d, stderr %q; want 125 naming nsbox trust %s", r.code, r.stderr, prof)
		}
		u.trust(t, env, ws, ".nsbox/policy/ci.toml")
		r = u.run(t, o, "run", "--profile", ".nsbox/policy/ci.toml", "--", "/bin/echo", "ran")
		expectCode(t, r, 0)
		if strings.TrimSpace(r.stdout) != "ran" {
			t.Fatalf("stdout %q", r.stdout)
		}
		l := u.run(t, o, "trust", "--list")
		expectCode(t, l, 0)
		if !strings.Contains(l.stdout, prof) {
			t.Fatalf("nsbox trust --list: %q", l.stdout)
		}
		u.writeFile(t, prof, "description = \"changed\"\nextend = \"workspace\"\nnetwork = \"host\"\n", 0o644)
		r = u.run(t, o, "run", "--profile", ".nsbox/policy/ci.toml", "--", "/bin/true")
		if r.code != 125 || !strings.Contains(r.stderr, "changed since it was trusted") {
			t.Fatalf("a trusted profile changed since: exit %d, stderr %q; want 125", r.code, r.stderr)
		}
		r = u.run(t, o, "trust", "--remove", ".nsbox")
		expectCode(t, r, 0)
		if l := u.run(t, o, "trust", "--list"); strings.Contains(l.stdout, prof) {
			t.Fatalf("still listed after --remove: %q", l.stdout)
		}
	})
}

// The gap the protections leave: a run with --shallow above a project
// does not find its .nsbox/policy/ two levels down, and its sandbox can
// rewrite the project's profile. The next run in the project reads the
// profile only as trusted, so the rewrite is refused there.
func TestTrustShallowRewriteRefused(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		requireSandbox(t, u)
		env := trustEnv(t, u)
		base := u.tempDir(t)
		proj := filepath.Join(base, "team", "proj")
		pol := filepath.Join(proj, ".nsbox", "policy")
		u.mkdirs(t, pol)
		prof := filepath.Join(pol, "ci.toml")
		u.writeFile(t, prof, "description = \"the project's\"\nextend = \"workspace\"\n", 0o644)
		u.trust(t, env, proj, ".nsbox/policy")
		o := &runOpts{dir: proj, env: env}
		expectCode(t, u.run(t, o, "run", "--profile", prof, "--", "/bin/true"), 0)
		r1 := u.sh(t, &runOpts{dir: base, env: env}, []string{"--shallow", base},
			`printf 'description = "the sandbox'"'"'s"\nextend = "workspace"\nnetwork = "host"\n' > team/proj/.nsbox/policy/ci.toml 2>/dev/null; echo wrote=$?`)
		b, _ := os.ReadFile(prof)
		if !strings.Contains(string(b), "sandbox's") {
			t.Logf("this layout is protected now too (%q %q): the trust check is the second line", r1.stdout, r1.stderr)
		}
		r := u.run(t, o, "run", "--profile", prof, "--", "/bin/true")
		if strings.Contains(string(b), "sandbox's") && (r.code != 125 || !strings.Contains(r.stderr, "changed since")) {
			t.Fatalf("a sandbox rewrote %s and the next run read it: exit %d, stderr %q", prof, r.code, r.stderr)
		}
	})
}

// The trust store is nsbox's config directory's, read-only in every run
// that has it; one in a writable directory of the run is not read, since
// a run started with another environment could have written it.
func TestTrustStoreNotWritableInside(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		requireSandbox(t, u)
		ws := u.tempDir(t)
		pol := filepath.Join(ws, "proj", ".nsbox", "policy")
		u.mkdirs(t, pol, filepath.Join(ws, ".xdg"))
		u.writeFile(t, filepath.Join(pol, "ci.toml"), "extend = \"workspace\"\n", 0o644)
		env := []string{"XDG_CONFIG_HOME=" + filepath.Join(ws, ".xdg")}
		u.trust(t, env, ws, "proj/.nsbox/policy")
		store := filepath.Join(ws, ".xdg", "nsbox", "trusted.json")
		before, err := os.ReadFile(store)
		if err != nil {
			t.Fatal(err)
		}
		r := u.sh(t, &runOpts{dir: ws, env: env}, nil, `echo '{"version":1,"files":{}}' > .xdg/nsbox/trusted.json; echo $?`)
		expectCode(t, r, 0)
		if after, _ := os.ReadFile(store); string(after) != string(before) {
			t.Fatalf("a sandbox rewrote the trust store in its workspace: %q", after)
		}
		r = u.run(t, &runOpts{dir: filepath.Join(ws, "proj"), env: env}, "run", "--rw", ws, "--profile", ".nsbox/policy/ci.toml", "--", "/bin/true")
		if r.code != 125 || !strings.Contains(r.stderr, "trust store") {
			t.Fatalf("a trust store inside a writable directory was read: exit %d, stderr %q", r.code, r.stderr)
		}
	})
}

// A project's seccomp file needs trust too; a trusted one filters.
func TestTrustProjectSeccompFile(t *testing.T) {
	hdRequireRunFlag(t, "--seccomp")
	eachUser(t, func(t *testing.T, u user) {
		requireSandbox(t, u)
		env := trustEnv(t, u)
		ws := u.tempDir(t)
		pol := filepath.Join(ws, ".nsbox", "policy")
		u.mkdirs(t, pol)
		// The default action allows; mkdir fails with EPERM.
		u.writeFile(t, filepath.Join(pol, "sc.json"), `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdir","mkdirat"],"action":"SCMP_ACT_ERRNO"}]}`, 0o644)
		o := &runOpts{dir: ws, env: env}
		r := u.run(t, o, "run", "--seccomp", ".nsbox/policy/sc.json", "--", "/bin/true")
		if r.code != 125 || !strings.Contains(r.stderr, "nsbox trust") {
			t.Fatalf("an untrusted project seccomp file: exit %d, stderr %q", r.code, r.stderr)
		}
		u.trust(t, env, ws, ".nsbox/policy/sc.json")
		r = u.sh(t, o, []string{"--seccomp", ".nsbox/policy/sc.json"}, `mkdir d 2>/dev/null && echo made || echo refused`)
		expectCode(t, r, 0)
		if strings.TrimSpace(r.stdout) != "refused" {
			t.Fatalf("the trusted profile did not filter: %q %q", r.stdout, r.stderr)
		}
	})
}
