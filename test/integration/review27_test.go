package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Review 27: the trust store for project policy files (nsbox trust).

// HIGH. A trusted project profile swapped for a symlink that leads out of
// .nsbox/policy/ is read with no trust record.
//
// Weakness: whether a profile needs trust is decided on its *real* path
// only (pkg/policy/trust.go, resolver.trust: IsProjectPolicyFile(f) with f
// from resolver.policyFile, symlinks resolved; the same for the seccomp
// file). The user names .nsbox/policy/ci.toml; when that name is a
// symlink to a file outside every .nsbox/policy/ directory, the file is
// "not a project policy file" and is read without any record, and the
// ErrWritablePolicyFile check only covers the current run's writable
// directories.
//
// Attack: the gap the trust store exists for. A run with --shallow above
// the project (base) does not protect team/proj/.nsbox/policy/; its
// sandbox replaces the trusted ci.toml by a symlink to a file it wrote
// elsewhere in base (base/other/evil.toml, with network = "host"). The
// user's next run in the project, --profile .nsbox/policy/ci.toml, has
// only team/proj writable, so base/other/evil.toml is outside its writable
// directories, outside .nsbox/policy/, and is obeyed without a prompt:
// the sandbox chose the next sandbox's policy.
//
// Fix: a file named through a .nsbox/policy/ path (the name as given, or
// any layer's path on the way to it) needs trust too, or a symlink in a
// .nsbox/policy/ directory that leads out of it is refused.
func TestReview27SymlinkOutOfPolicyDirSkipsTrust(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		requireSandbox(t, u)
		env := trustEnv(t, u)
		base := u.tempDir(t)
		proj := filepath.Join(base, "team", "proj")
		pol := filepath.Join(proj, ".nsbox", "policy")
		u.mkdirs(t, pol, filepath.Join(base, "other"))
		prof := filepath.Join(pol, "ci.toml")
		u.writeFile(t, prof, "description = \"the project's\"\nextend = \"workspace\"\n", 0o644)
		u.trust(t, env, proj, ".nsbox/policy/ci.toml")
		o := &runOpts{dir: proj, env: env}
		expectCode(t, u.run(t, o, "run", "--profile", ".nsbox/policy/ci.toml", "--", "/bin/true"), 0)

		// The earlier sandbox, with base writable and --shallow.
		r1 := u.sh(t, &runOpts{dir: base, env: env}, []string{"--shallow", base},
			`printf 'description = "the sandbox'"'"'s"\nextend = "workspace"\nnetwork = "host"\n' > other/evil.toml &&
			 rm -f team/proj/.nsbox/policy/ci.toml &&
			 ln -s ../../../../other/evil.toml team/proj/.nsbox/policy/ci.toml && echo swapped`)
		if st, err := os.Lstat(prof); err != nil || st.Mode()&os.ModeSymlink == 0 {
			t.Skipf("the sandbox could not swap %s here (%q %q): layout protected", prof, r1.stdout, r1.stderr)
		}

		r := u.run(t, o, "run", "--profile", ".nsbox/policy/ci.toml", "--", "/bin/echo", "obeyed")
		if r.code != 125 || strings.Contains(r.stdout, "obeyed") {
			t.Fatalf("a sandbox replaced the trusted %s by a symlink to a file it wrote outside .nsbox/policy/, and the next run obeyed it with no trust record: exit %d, stdout %q, stderr %q; want exit 125",
				prof, r.code, r.stdout, r.stderr)
		}
	})
}

// HIGH. The same bypass for a project seccomp file, through the
// .nsbox/policy directory itself: replaced by a symlink to a directory
// outside any .nsbox/policy/, the seccomp file the user names as
// .nsbox/policy/sc.json is read from there with no trust record.
//
// Weakness: pkg/policy/resolve.go resolver.seccomp keeps only the real
// path (r.seccompFile = rp.Path) and pkg/policy/trust.go resolver.trust
// asks IsProjectPolicyFile of that real path alone.
//
// Attack: a sandbox that could write the project (a --shallow run above
// it, as in the test above) moves .nsbox/policy aside and links
// .nsbox/policy -> ../../sc (a directory it filled) holding a sc.json with
// the same name that allows everything (here: lifts the trusted profile's
// EPERM for mkdir). The next `nsbox run --seccomp .nsbox/policy/sc.json`
// installs the sandbox's filter, unasked.
//
// Fix: as above; judge the path as named as well as the real one, or
// refuse a .nsbox/policy path that leads out of a .nsbox/policy/ dir.
func TestReview27PolicyDirSymlinkSeccompSkipsTrust(t *testing.T) {
	hdRequireRunFlag(t, "--seccomp")
	eachUser(t, func(t *testing.T, u user) {
		requireSandbox(t, u)
		env := trustEnv(t, u)
		base := u.tempDir(t)
		proj := filepath.Join(base, "proj")
		pol := filepath.Join(proj, ".nsbox", "policy")
		u.mkdirs(t, pol, filepath.Join(base, "sc"))
		u.writeFile(t, filepath.Join(pol, "sc.json"), `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdir","mkdirat"],"action":"SCMP_ACT_ERRNO"}]}`, 0o644)
		u.trust(t, env, proj, ".nsbox/policy/sc.json")
		o := &runOpts{dir: proj, env: env}
		r := u.sh(t, o, []string{"--seccomp", ".nsbox/policy/sc.json"}, `mkdir d 2>/dev/null && echo made || echo refused`)
		expectCode(t, r, 0)
		if strings.TrimSpace(r.stdout) != "refused" {
			t.Fatalf("the trusted profile did not filter: %q %q", r.stdout, r.stderr)
		}

		// What an earlier sandbox that could write base left (done here
		// directly; the test above shows such a sandbox).
		u.writeFile(t, filepath.Join(base, "sc", "sc.json"), `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[]}`, 0o644)
		if err := os.Rename(pol, filepath.Join(proj, ".nsbox", "old")); err != nil {
			t.Fatal(err)
		}
		u.symlinkAs(t, "../../sc", pol)

		r = u.sh(t, o, []string{"--seccomp", ".nsbox/policy/sc.json"}, `mkdir d 2>/dev/null && echo made || echo refused`)
		if r.code != 125 || strings.Contains(r.stdout, "made") {
			t.Fatalf(".nsbox/policy became a symlink to a directory outside every .nsbox/policy/, and its sc.json was installed with no trust record: exit %d, stdout %q, stderr %q; want exit 125",
				r.code, r.stdout, r.stderr)
		}
	})
}

// MEDIUM. The "trust store in a writable directory is not read" check
// compares the store's path as spelled, not its real path.
//
// Weakness: pkg/policy/trust.go resolver.trust tests
// within(path, root) with path = h.TrustStorePath() straight from
// $XDG_CONFIG_HOME (symlinks not resolved), while r.rwRoots are real
// paths. Every other check of a policy file (resolver.policyFile,
// trustedPolicyFile) resolves symlinks first.
//
// Attack: XDG_CONFIG_HOME reaches the config directory through a symlink
// (a dotfiles checkout, ~/cfg -> ~/src/dotfiles/config). An earlier run
// with that checkout writable but without XDG_CONFIG_HOME (so its
// $NSBOX_CONFIG protection was elsewhere) could add a trust record for a
// profile of its choosing; this run, whose writable directory holds the
// store, reads it anyway because the spelled path does not lie in the
// writable directory. The same layout spelled directly is refused (the
// existing TestTrustStoreNotWritableInside).
//
// Fix: resolve the store's path (filepath.EvalSymlinks of its directory,
// or r.resolvePath) before comparing it with the writable roots.
func TestReview27TrustStoreViaSymlinkedConfigHome(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		requireSandbox(t, u)
		ws := u.tempDir(t)
		outside := u.tempDir(t)
		pol := filepath.Join(ws, "proj", ".nsbox", "policy")
		u.mkdirs(t, pol, filepath.Join(ws, ".xdg"))
		u.writeFile(t, filepath.Join(pol, "ci.toml"), "extend = \"workspace\"\n", 0o644)
		link := filepath.Join(outside, "cfg")
		u.symlinkAs(t, filepath.Join(ws, ".xdg"), link)
		direct := []string{"XDG_CONFIG_HOME=" + filepath.Join(ws, ".xdg")}
		viaLink := []string{"XDG_CONFIG_HOME=" + link}
		u.trust(t, direct, ws, "proj/.nsbox/policy")

		o := &runOpts{dir: filepath.Join(ws, "proj"), env: direct}
		r := u.run(t, o, "run", "--rw", ws, "--profile", ".nsbox/policy/ci.toml", "--", "/bin/true")
		if r.code != 125 || !strings.Contains(r.stderr, "trust store") {
			t.Fatalf("control: the store spelled inside the writable directory was read: exit %d, stderr %q", r.code, r.stderr)
		}
		o.env = viaLink
		r = u.run(t, o, "run", "--rw", ws, "--profile", ".nsbox/policy/ci.toml", "--", "/bin/echo", "store-read")
		if r.code != 125 || !strings.Contains(r.stderr, "trust store") {
			t.Fatalf("the trust store %s/nsbox/trusted.json lies in the writable %s (through the symlinked XDG_CONFIG_HOME %s) and was read: exit %d, stdout %q, stderr %q; want 125 naming the trust store",
				filepath.Join(ws, ".xdg"), ws, link, r.code, r.stdout, r.stderr)
		}
	})
}
