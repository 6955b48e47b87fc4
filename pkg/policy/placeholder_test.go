package policy

import (
	"os"
	"path/filepath"
	"testing"
)

// What a killed run made is removed by a later nsbox: only while it is the
// inode the run made and empty, and not while a live run holds the root.
func TestRemoveLeftPlaceholders(t *testing.T) {
	root := t.TempDir()
	ph := []Placeholder{
		{Path: filepath.Join(root, ".git"), Dir: true, Root: root},
		{Path: filepath.Join(root, ".npmrc"), Root: root},
		{Path: filepath.Join(root, ".envrc"), Root: root},
		{Path: filepath.Join(root, ".vscode"), Dir: true, Root: root},
	}
	// What the sandbox's build does: make them empty.
	os.Mkdir(ph[0].Path, 0o755)
	os.WriteFile(ph[1].Path, nil, 0o644)
	os.WriteFile(ph[2].Path, nil, 0o644)
	// .vscode was not made (its parent was read-only, say).
	made := MadePlaceholders(ph)
	if len(made) != 3 {
		t.Fatalf("made: %+v", made)
	}
	// Since the kill: the user replaced .npmrc with a file of their own
	// (empty too), and wrote into .envrc.
	os.Remove(ph[1].Path)
	os.WriteFile(ph[1].Path, nil, 0o600)
	os.WriteFile(ph[2].Path, []byte("use nix\n"), 0o644)

	// A live run holds the root: nothing is removed, all is kept.
	live := HoldRoots([]string{root})
	removed, keep := RemoveLeftPlaceholders(made)
	if len(removed) != 0 || len(keep) != 3 {
		t.Fatalf("with a live run: removed %v, keep %+v", removed, keep)
	}
	live.Release(nil)

	removed, keep = RemoveLeftPlaceholders(keep)
	if len(removed) != 1 || removed[0] != ph[0].Path || len(keep) != 0 {
		t.Fatalf("removed %v, keep %+v", removed, keep)
	}
	if _, err := os.Lstat(ph[0].Path); !os.IsNotExist(err) {
		t.Fatal(".git placeholder still there")
	}
	for _, p := range ph[1:3] {
		if _, err := os.Lstat(p.Path); err != nil {
			t.Fatalf("removed the user's %s", p.Path)
		}
	}
	// A root that is gone: dropped.
	removed, keep = RemoveLeftPlaceholders([]MadePlaceholder{{Placeholder: Placeholder{Path: "/nonexistent/x/.git", Dir: true, Root: "/nonexistent/x"}}})
	if len(removed)+len(keep) != 0 {
		t.Fatalf("gone root: %v %v", removed, keep)
	}
}
