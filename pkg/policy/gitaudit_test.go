package policy

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
)

// gitlinks reads the submodule paths of an index as git writes it, in each
// index version (v4 compresses paths against the previous one; v3 adds
// extended flags, here from an intent-to-add entry).
func TestGitlinksIndexVersions(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed (apt-get install git)")
	}
	dir := t.TempDir()
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	run("init", "-q", ".")
	write(t, filepath.Join(dir, "a.txt"), "a")
	write(t, filepath.Join(dir, "zz", "new.txt"), "n")
	run("add", "a.txt")
	run("add", "-N", "zz/new.txt")
	const sha = "dac72e276fa85887776d88cb9ed1a446900e3dea"
	for _, p := range []string{"node_modules/dep", "target/x", "third_party/lib/inner"} {
		run("update-index", "--add", "--cacheinfo", "160000,"+sha+","+p)
	}
	for _, v := range []string{"2", "3", "4"} {
		run("update-index", "--index-version", v)
		got := gitlinks(filepath.Join(dir, ".git", "index"), false)
		if fmt.Sprint(got) != "[node_modules/dep target/x third_party/lib/inner]" {
			t.Errorf("index v%s: %v", v, got)
		}
	}
}
