package mounts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestExcludePatternMatchesOnlyItsPath: each generated pattern, checked by
// git itself, ignores exactly the placeholder's path: not a file of the
// same name deeper down, not a name its glob characters would match.
func TestExcludePatternMatchesOnlyItsPath(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	if out, err := exec.Command(git, "init", "-q", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	names := []string{".npmrc", "a*b", "#hash", "!bang", "q?", "[x]", `back\slash`, "trail ", "sub/.envrc"}
	var rels []string
	for _, n := range names {
		rels = append(rels, n)
	}
	rels = append(rels, "line\nbreak") // left out
	orig := "# the user's own\n*.log"
	if err := os.WriteFile(filepath.Join(dir, ".git/info/exclude"), excludeText([]byte(orig), rels), 0o644); err != nil {
		t.Fatal(err)
	}
	text, _ := os.ReadFile(filepath.Join(dir, ".git/info/exclude"))
	if !strings.HasPrefix(string(text), orig+"\n") || strings.Contains(string(text), "line") {
		t.Errorf("generated file:\n%s", text)
	}
	ignored := func(p string) bool {
		cmd := exec.Command(git, "check-ignore", "-q", "--no-index", "--", p)
		cmd.Dir = dir
		return cmd.Run() == nil
	}
	for _, n := range append(names, "x.log") {
		if !ignored(n) {
			t.Errorf("%q is not ignored", n)
		}
	}
	for _, n := range []string{"aXb", "deeper/.npmrc", "qz", "x", "trail", "sub/.envrc2", "hash"} {
		if ignored(n) {
			t.Errorf("%q is ignored, but no placeholder is there", n)
		}
	}
}
