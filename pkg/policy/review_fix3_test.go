package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReviewFix3GoBuildVCSOffWithoutWorkspace: review of a14f26f.
// Severity: MEDIUM (correctness, a regression of rvlead2's GOFLAGS fix).
// A run without a workspace (started from /) still plans an empty .git
// placeholder in each --rw directory ("$NSBOX_RW/.git/"), but
// gitPlaceholder now returns false whenever Workspace is "", so GOFLAGS
// lacks -buildvcs=false and `go build` in that directory stops on the
// placeholder ("error obtaining VCS status"; the built binary's test is
// TestReviewFix3GoBuildInRWDirWithoutWorkspace). No workspace means no
// workspace stamps to keep. Expected: -buildvcs=false in GOFLAGS.
func TestReviewFix3GoBuildVCSOffWithoutWorkspace(t *testing.T) {
	h := testHost(t)
	out := filepath.Join(filepath.Dir(h.Home), "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	h.Cwd = "/" // no workspace
	res := mustLoad(t, h, Request{ConfigFile: "-", Flags: flags(Config{Filesystem: Filesystem{RW: []PathEntry{{Path: out}}}})})
	if res.Workspace != "" {
		t.Skipf("precondition: a run from / has workspace %q", res.Workspace)
	}
	placeholder := false
	for _, p := range res.Placeholders {
		if p.Dir && p.Path == filepath.Join(out, ".git") {
			placeholder = true
		}
	}
	if !placeholder {
		t.Skipf("no .git placeholder planned for the --rw directory (%v): nothing to show", res.Placeholders)
	}
	if v, _ := envValue(res.Policy.Env, "GOFLAGS"); !strings.Contains(v, "-buildvcs=false") {
		t.Fatalf("GOFLAGS=%q: the --rw %s gets an empty .git placeholder and the run has no workspace, yet -buildvcs=false is not set (resolve.go gitPlaceholder returns false for Workspace \"\"): go build there fails", v, out)
	}
}
