package integration

import (
	"os/exec"
	"strings"
	"testing"
)

// TestReviewLead3StrictRepoBuildKeepsVCSStamp: review of 429e78c (Fix
// review rvfix3). Severity: LOW (build provenance; rvlead2's finding back
// for runs without a workspace).
//
// Finding: without a workspace, gitPlaceholder (pkg/policy/resolve.go)
// counts any .git placeholder, on the premise that such a run has "no
// stamps to keep". Under --profile strict (no workspace) a project that
// IS a repository, worked on with `--rw .` as ErrUnsafeWorkspace advises,
// plus one more --rw directory without a repository (a build output
// directory), gets GOFLAGS=-buildvcs=false for the whole run: `go build`
// in the repository makes a binary without vcs.revision and vcs.modified,
// the stamp that says it came from a tree the agent changed. The same run
// with a repository workspace keeps them (rvlead2's
// TestReviewLead2GoBuildVCSOffOnlyForPlaceholderWorkspace).
//
// Expected: the binary built in the repository carries vcs.revision; a
// placeholder counts for the whole run only when no --rw directory is a
// repository (the unit test is TestReviewLead3RepoRWDirKeepsVCSStampsWithoutWorkspace).
func TestReviewLead3StrictRepoBuildKeepsVCSStamp(t *testing.T) {
	goBin := goToolchain(t)
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git on this host")
	}
	eachUser(t, func(t *testing.T, u user) {
		proj := u.tempDir(t)
		out := u.tempDir(t)
		u.writeGoModule(t, proj, "example.com/proj")
		gitEnv := []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com"}
		for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"commit", "-q", "-m", "one"}} {
			if r := u.runAs(t, &runOpts{dir: proj, env: gitEnv}, git, args...); r.code != 0 {
				t.Skipf("git %v on the host failed (exit %d): %s", args, r.code, r.stderr)
			}
		}
		script := `cd ` + proj + ` && { test -d ` + out + `/.git || { echo "no .git placeholder in the extra --rw directory: nothing to show" >&2; exit 77; }; } && ` +
			goBin + ` build -o ` + out + `/hello . && ` + goBin + ` version -m ` + out + `/hello >&2 && echo "GOFLAGS=$GOFLAGS" >&2`
		r := u.run(t, &runOpts{dir: proj, env: []string{"GOTOOLCHAIN=local"}}, "run", "--profile", "strict", "--pass-env", "GOTOOLCHAIN",
			"--rw", proj, "--rw", out, "--", "/bin/sh", "-c", script)
		if r.code == 77 {
			t.Skip(strings.TrimSpace(r.stderr))
		}
		if r.code != 0 {
			t.Fatalf("go build in the repository %s under --profile strict failed (exit %d): %s", proj, r.code, strings.TrimSpace(r.stderr))
		}
		if !strings.Contains(r.stderr, "vcs.revision=") {
			t.Fatalf("the binary built in the repository %s has no vcs.revision: the .git placeholder of the unrelated --rw %s made the whole run -buildvcs=false (resolve.go gitPlaceholder counts any placeholder without a workspace):\n%s", proj, out, strings.TrimSpace(r.stderr))
		}
	})
}
