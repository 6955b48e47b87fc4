package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReviewFix3GoBuildInRWDirWithoutWorkspace: review of a14f26f
// (rvlead2's GOFLAGS finding). Severity: MEDIUM (correctness, a
// regression of that fix).
//
// Finding: gitPlaceholder (pkg/policy/resolve.go) now adds
// -buildvcs=false only for the workspace's own .git placeholder and
// returns false outright when the run has no workspace. A run without a
// workspace (started from /, or a profile without one) still gets an
// empty read-only .git placeholder in every --rw directory ("$NSBOX_RW/.git/"),
// and cmd/go takes that for a repository: `go build` there stops with
// "error obtaining VCS status: exit status 128". Before a14f26f any
// .git placeholder turned VCS stamping off, and such builds worked. With
// no workspace there are no workspace builds whose stamps the fix meant
// to keep, so nothing is gained by the change in this case.
//
// Attack/trigger: none needed; `nsbox run --rw DIR -- sh -c 'cd DIR && go build'`
// from / with DIR a Go module that is not a repository.
//
// Expected: the build succeeds (GOFLAGS gets -buildvcs=false whenever a
// placeholder stands in for the .git of a --rw directory and no workspace
// stamps are at stake).
func TestReviewFix3GoBuildInRWDirWithoutWorkspace(t *testing.T) {
	goBin := goToolchain(t)
	eachUser(t, func(t *testing.T, u user) {
		lib := u.tempDir(t)
		u.writeGoModule(t, lib, "example.com/lib")
		// dir "/": no workspace ("the current directory is /").
		r := u.run(t, &runOpts{dir: "/", env: []string{"GOTOOLCHAIN=local"}}, "run", "--pass-env", "GOTOOLCHAIN", "--rw", lib, "--",
			"/bin/sh", "-c", `test -d `+lib+`/.git || { echo "no .git placeholder in the --rw directory: nothing to show" >&2; exit 77; }
cd `+lib+` && `+goBin+` build -o hello . && ./hello`)
		if r.code == 77 {
			t.Skip(strings.TrimSpace(r.stderr))
		}
		if r.code != 0 || !strings.Contains(r.stderr, "built inside") {
			t.Fatalf("go build in a --rw directory of a run without a workspace failed (exit %d): %s\nGOFLAGS gets -buildvcs=false only for the workspace's own .git placeholder (a14f26f, resolve.go gitPlaceholder returns false when Workspace is \"\"), and cmd/go stops on the empty .git placeholder nsbox put in %s", r.code, strings.TrimSpace(r.stderr), lib)
		}
	})
}

// TestReviewFix3GoBuildStrictProfileRW: the same finding as
// TestReviewFix3GoBuildInRWDirWithoutWorkspace (a14f26f, MEDIUM) in its
// most common form: the strict profile has no workspace, and the way to
// work on a project under it is `nsbox run --profile strict --rw .`
// (the advice ErrUnsafeWorkspace gives). The project directory gets an
// empty .git placeholder when it is not a repository, GOFLAGS no longer
// says -buildvcs=false, and `go build` in the current directory fails
// ("error obtaining VCS status"). Expected: the build succeeds, as it
// did before a14f26f.
func TestReviewFix3GoBuildStrictProfileRW(t *testing.T) {
	goBin := goToolchain(t)
	eachUser(t, func(t *testing.T, u user) {
		proj := u.tempDir(t)
		u.writeGoModule(t, proj, "example.com/proj")
		r := u.run(t, &runOpts{dir: proj, env: []string{"GOTOOLCHAIN=local"}}, "run", "--profile", "strict", "--pass-env", "GOTOOLCHAIN", "--rw", proj, "--",
			"/bin/sh", "-c", `cd `+proj+` && { test -d .git || { echo "no .git placeholder in the --rw directory: nothing to show" >&2; exit 77; }; } && `+goBin+` build -o hello . && ./hello`)
		if r.code == 77 {
			t.Skip(strings.TrimSpace(r.stderr))
		}
		if r.code != 0 || !strings.Contains(r.stderr, "built inside") {
			t.Fatalf("go build under --profile strict --rw %s failed (exit %d): %s\nthe strict profile has no workspace, so a14f26f's gitPlaceholder never adds -buildvcs=false, and cmd/go stops on the empty .git placeholder", proj, r.code, strings.TrimSpace(r.stderr))
		}
	})
}

// TestReviewFix3ExtraRWDirBuildsWithBuildvcsFlag: review of a14f26f
// found (LOW, the other side of rvlead2's trade-off) that with a workspace
// that is a repository and one more --rw directory that is not, `go build`
// in the extra directory stops on its empty .git placeholder ("error
// obtaining VCS status"), since GOFLAGS keeps the workspace's VCS stamps.
// Kept, as docs/security.md says: cmd/go's message names -buildvcs=false,
// and a caller who sets it (here with --env) builds there. This test
// shows both halves; the workspace keeping its stamps is pkg/policy's
// TestReviewLead2GoBuildVCSOffOnlyForPlaceholderWorkspace.
func TestReviewFix3ExtraRWDirBuildsWithBuildvcsFlag(t *testing.T) {
	goBin := goToolchain(t)
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		// The workspace is a repository: no placeholder of its own.
		if err := os.Mkdir(filepath.Join(ws, ".git"), 0o755); err != nil {
			t.Fatal(err)
		}
		if os.Getuid() == 0 {
			os.Chown(filepath.Join(ws, ".git"), u.uid, u.gid)
		}
		lib := u.tempDir(t)
		u.writeGoModule(t, lib, "example.com/lib")
		build := `cd ` + lib + ` && { test -e .git || { echo "no .git placeholder in the extra --rw directory: nothing to show" >&2; exit 77; }; } && ` + goBin + ` build -o hello . && ./hello`
		r := u.run(t, &runOpts{dir: ws, env: []string{"GOTOOLCHAIN=local"}}, "run", "--pass-env", "GOTOOLCHAIN", "--rw", lib, "--", "/bin/sh", "-c", build)
		if r.code == 77 {
			t.Skip(strings.TrimSpace(r.stderr))
		}
		if r.code == 0 || !strings.Contains(r.stderr, "-buildvcs=false") {
			t.Fatalf("go build in the extra --rw %s beside a repository workspace: exit %d, want a failure whose message names -buildvcs=false (the workspace keeps its stamps): %s", lib, r.code, strings.TrimSpace(r.stderr))
		}
		r = u.run(t, &runOpts{dir: ws, env: []string{"GOTOOLCHAIN=local"}}, "run", "--pass-env", "GOTOOLCHAIN", "--env", "GOFLAGS=-buildvcs=false", "--rw", lib, "--", "/bin/sh", "-c", build)
		if r.code != 0 || !strings.Contains(r.stderr, "built inside") {
			t.Fatalf("go build in the extra --rw %s with --env GOFLAGS=-buildvcs=false failed (exit %d): %s", lib, r.code, strings.TrimSpace(r.stderr))
		}
	})
}
