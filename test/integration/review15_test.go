package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Review of d293527 ("search every writable directory as the workspace;
// --shallow DIR to skip one").

// MEDIUM. Giving a --rw directory that holds the workspace switches the
// workspace's repository audit off when the workspace lies below a name
// the "**" walk skips (node_modules, .venv, venv, target, .cache ...):
// GitAudit.addDir keeps only the outer directory ("one walk per tree"),
// and its walk never enters node_modules, so a repository the sandbox
// makes in the workspace (a .git with core.fsmonitor) and a bare
// repository's layout at the workspace's top are left in place, with no
// warning. git status in the workspace on the host then runs the
// sandbox's code. The same run without --rw quarantines both (a workspace
// in a dependency's checkout, ~/src/app/node_modules/lib, or in a
// virtualenv's site-packages, with --rw ~/src). A regression: the
// parent commit's binary quarantines both in this very test.
func TestReview15WorkspaceBelowSkippedNameOfRWDir(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		outer := filepath.Join(u.visibleDir(t), "src")
		ws := filepath.Join(outer, "app", "node_modules", "lib")
		u.mkdirs(t, ws)
		r := u.sh(t, &runOpts{dir: ws}, []string{"--rw", outer}, `
mkdir -p made/.git/objects made/.git/refs && printf 'ref: refs/heads/main\n' > made/.git/HEAD
printf '[core]\n\tfsmonitor = touch /tmp/pwned\n' > made/.git/config
mkdir objects refs && printf 'ref: refs/heads/main\n' > HEAD
echo done`)
		expectCode(t, r, 0)
		if exists(filepath.Join(ws, "made", ".git")) {
			t.Errorf("with --rw %s, the repository the run made in the workspace was not quarantined; stderr: %s", outer, r.stderr)
		}
		if exists(filepath.Join(ws, "HEAD")) {
			t.Errorf("with --rw %s, the bare repository the run made at the workspace's top was not quarantined; stderr: %s", outer, r.stderr)
		}
	})
}

// MEDIUM. --shallow of the run's only writable directory (what the
// too-big error proposes for a big workspace; docs/profiles.md:
// `shallow = ["$NSBOX_WORKSPACE"]`) leaves no repository audit at all:
// the audit is reduced to its created patterns (noGit), so the check of
// the directory's top level is gone, though docs/profiles.md says "the
// audit still looks at its top level". A sandbox makes HEAD, objects/,
// refs/ and a config at the workspace's top; git run there on the host
// (the workspace has no .git) takes it for a bare repository and runs the
// config's programs (core.pager, aliases).
func TestReview15ShallowWorkspaceTopBareRepo(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		u.mkdirs(t, filepath.Join(ws, "src"))
		r := u.sh(t, &runOpts{dir: ws}, []string{"--shallow", ws}, `
mkdir objects refs && printf 'ref: refs/heads/main\n' > HEAD
printf '[core]\n\tpager = touch /tmp/pwned\n' > config
echo done`)
		expectCode(t, r, 0)
		if exists(filepath.Join(ws, "HEAD")) || !exists(filepath.Join(ws, "HEAD.nsbox-quarantine")) {
			t.Errorf("--shallow %s: the bare repository made at its top was not quarantined; stderr: %s", ws, r.stderr)
		}
	})
}

// LOW (pre-existing before d293527, but the change claims it fixed). A
// --rw directory inside the workspace is "searched with it, once"
// (docs/profiles.md), but when its name is one the walk skips (--rw
// ./node_modules, --rw ./.venv, --output ./target) the workspace's walk
// does not enter it and its own walk is dropped: the start protects the
// repositories already nested in it ($NSBOX_RW/**/.git expands for it),
// yet one the run makes there is never looked for, nor a bare repository
// at its top (the top-level check skips a root inside a searched one).
func TestReview15RWDirSkippedNameInsideWorkspace(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		nm := filepath.Join(ws, "node_modules")
		u.mkdirs(t, nm)
		r := u.sh(t, &runOpts{dir: ws}, []string{"--rw", nm}, `cd node_modules
mkdir -p pkg/.git/objects pkg/.git/refs && printf 'ref: refs/heads/main\n' > pkg/.git/HEAD
printf '[core]\n\tfsmonitor = touch /tmp/pwned\n' > pkg/.git/config
mkdir objects refs && printf 'ref: refs/heads/main\n' > HEAD
echo done`)
		expectCode(t, r, 0)
		for _, p := range []string{"pkg/.git", "HEAD"} {
			if exists(filepath.Join(nm, p)) {
				t.Errorf("--rw %s: %s, made by the run, was not quarantined; stderr: %s", nm, p, r.stderr)
			}
		}
	})
}

// LOW. The too-big error now tells the user to pass --shallow DIR, but
// nsbox script (--workdir DIR gets a workspace's protections, so the same
// walks) has no such flag: following the advice gives "unknown flag".
func TestReview15TooBigHintNamesMissingFlag(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		dir := filepath.Join(u.visibleDir(t), "big")
		for i := 0; i < 126; i++ {
			for j := 0; j < 200; j++ {
				if err := os.MkdirAll(filepath.Join(dir, fmt.Sprintf("d%03d", i), fmt.Sprintf("e%03d", j)), 0o755); err != nil {
					t.Fatal(err)
				}
			}
		}
		if os.Getuid() == 0 {
			filepath.Walk(dir, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, u.uid, u.gid) })
		}
		r := u.run(t, &runOpts{dir: dir}, "script", "--lang", "bash", "--workdir", dir, "-c", "true")
		if r.code != 125 || !strings.Contains(r.stderr, "--shallow") {
			t.Fatalf("want exit 125 and the too-big error naming --shallow, got exit %d: %s", r.code, r.stderr)
		}
		r2 := u.run(t, &runOpts{dir: dir}, "script", "--lang", "bash", "--workdir", dir, "--shallow", dir, "-c", "true")
		if r2.code != 0 {
			t.Errorf("the error says %q, but following it fails (exit %d): %s", strings.TrimSpace(r.stderr), r2.code, r2.stderr)
		}
	})
}
