package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReviewLead3RepoRWDirKeepsVCSStampsWithoutWorkspace: review of
// 429e78c (gitPlaceholder: "without a workspace ... there are no stamps to
// keep, and any placeholder counts").
// Severity: LOW (build provenance, the case rvlead2 reported coming back).
// The premise is false: a run without a workspace (--profile strict, run
// from a repository with `--rw .`) can have a --rw directory that IS a
// repository. A second --rw directory without one (a build output
// directory) gets its .git placeholder, and now any placeholder adds
// GOFLAGS=-buildvcs=false to the whole run: `go build` in the repository
// the run started in loses vcs.revision and vcs.modified, the stamp that
// says a binary came from a tree the agent changed (rvlead2's
// TestReviewLead2GoBuildVCSOffOnlyForPlaceholderWorkspace, fixed for runs
// with a workspace, is back for runs without one).
// Expected: the placeholder of an unrelated --rw directory does not take the
// stamps of a repository --rw directory's builds away, as with a workspace
// (no -buildvcs=false here); 429e78c's rule ("no stamps to keep", any
// placeholder counts) holds only when no --rw directory is a repository,
// which keeps TestReviewFix3GoBuildVCSOffWithoutWorkspace's case building.
func TestReviewLead3RepoRWDirKeepsVCSStampsWithoutWorkspace(t *testing.T) {
	h := testHost(t)
	// The current directory is a repository, made writable with --rw .
	if err := os.Mkdir(filepath.Join(h.Cwd, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(filepath.Dir(h.Home), "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	res := mustLoad(t, h, Request{Profile: "strict", ConfigFile: "-", Flags: flags(Config{Filesystem: Filesystem{RW: []PathEntry{{Path: "."}, {Path: out}}}})})
	if res.Workspace != "" {
		t.Skipf("precondition: the strict profile has workspace %q", res.Workspace)
	}
	placeholder := false
	for _, p := range res.Placeholders {
		if p.Dir && p.Path == filepath.Join(h.Cwd, ".git") {
			t.Fatalf("precondition: the repository %s got a .git placeholder", h.Cwd)
		}
		if p.Dir && p.Path == filepath.Join(out, ".git") {
			placeholder = true
		}
	}
	if !placeholder {
		t.Skipf("no .git placeholder planned for the --rw %s (%v): nothing to show", out, res.Placeholders)
	}
	if v, _ := envValue(res.Policy.Env, "GOFLAGS"); strings.Contains(v, "-buildvcs=false") {
		t.Fatalf("GOFLAGS=%q: the run starts in the repository %s (--rw .), yet the .git placeholder of the unrelated --rw %s turns VCS stamps off for every build (resolve.go gitPlaceholder counts any placeholder when Workspace is \"\")", v, h.Cwd, out)
	}
}
