package policy

import (
	"os"
	"path/filepath"
	"testing"
)

// Review of 1fde825 (goBuildVCSOff): GOFLAGS gets -buildvcs=false when ANY
// writable directory gets a .git placeholder ("$NSBOX_RW/.git/" is expanded
// for every --rw directory), not only when the workspace itself has no
// repository. A workspace that is a real repository plus one --rw output
// directory without .git: every `go build` in the repository loses its VCS
// stamp (vcs.revision, vcs.modified), which docs/security.md says cannot
// happen ("the binary loses a VCS stamp a directory without a repository
// would not have had"). A binary an agent built from a tree it modified
// then carries no vcs.modified=true for a reviewer to see; release and
// SBOM tooling that reads vcs.revision gets nothing.
func TestReviewLead2GoBuildVCSOffOnlyForPlaceholderWorkspace(t *testing.T) {
	h := testHost(t)
	// The workspace is a repository: no placeholder of its own.
	if err := os.Mkdir(filepath.Join(h.Cwd, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if res := mustLoad(t, h, Request{ConfigFile: "-"}); hasEnvKey(res.Policy.Env, "GOFLAGS") {
		t.Fatalf("precondition: GOFLAGS set in a plain repository workspace: %q", res.Policy.Env)
	}
	// One more writable directory, without a repository (a build output
	// directory): it gets its own .git placeholder.
	out := filepath.Join(filepath.Dir(h.Home), "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	res := mustLoad(t, h, Request{ConfigFile: "-", Flags: flags(Config{Filesystem: Filesystem{RW: []PathEntry{{Path: out}}}})})
	placeholder := false
	for _, p := range res.Placeholders {
		if p.Dir && p.Path == filepath.Join(out, ".git") {
			placeholder = true
		}
	}
	if !placeholder {
		t.Skipf("no .git placeholder planned for the extra --rw directory (%v): nothing to show", res.Placeholders)
	}
	if v, ok := envValue(res.Policy.Env, "GOFLAGS"); ok {
		t.Fatalf("GOFLAGS=%q although the workspace %s is a repository: go build there loses its VCS stamp because an unrelated --rw %s has a .git placeholder (resolve.go gitPlaceholder looks at every placeholder)", v, h.Cwd, out)
	}
}

func hasEnvKey(env []string, k string) bool {
	_, ok := envValue(env, k)
	return ok
}
