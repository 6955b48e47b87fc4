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

// The worker links the placeholder files of one directory to one inode:
// Release removes them all, but not an empty file of the user's that is
// also linked elsewhere.
func TestReleaseLinkedPlaceholders(t *testing.T) {
	root := t.TempDir()
	a, b, c := filepath.Join(root, ".npmrc"), filepath.Join(root, ".yarnrc"), filepath.Join(root, ".envrc")
	os.WriteFile(a, nil, 0o644)
	os.Link(a, b)
	ph := []Placeholder{{Path: a, Root: root}, {Path: b, Root: root}, {Path: c, Root: root}}
	// .envrc: the user's own empty file, with a second name outside.
	os.WriteFile(c, nil, 0o644)
	os.Link(c, filepath.Join(t.TempDir(), "keep"))
	got := HoldRoots([]string{root}).Release(ph)
	if len(got) != 2 {
		t.Fatalf("removed %v", got)
	}
	if _, err := os.Lstat(c); err != nil {
		t.Fatal("removed a file linked outside the placeholders")
	}
	// Made and killed: the record removes linked ones too, also after the
	// user removed one of the names and made a file of their own there.
	os.WriteFile(a, nil, 0o644)
	os.Link(a, b)
	made := MadePlaceholders(ph[:2])
	os.Remove(b)
	os.WriteFile(b, nil, 0o600)
	removed, keep := RemoveLeftPlaceholders(made)
	if len(removed) != 1 || removed[0] != a || len(keep) != 0 {
		t.Fatalf("removed %v keep %v", removed, keep)
	}
	if _, err := os.Lstat(b); err != nil {
		t.Fatal("removed the user's file")
	}
}

// TestPlaceholdersLeftToALaterRun: a Release that cannot take a root
// exclusively (another run holds it), or finds a placeholder directory not
// empty, says so (Pending); RemoveLeftPlaceholders keeps a directory that
// is not empty for a bounded number of tries, and removes it once empty.
func TestPlaceholdersLeftToALaterRun(t *testing.T) {
	root := t.TempDir()
	cargo := Placeholder{Path: filepath.Join(root, ".cargo"), Dir: true, Root: root}
	os.Mkdir(cargo.Path, 0o755)

	// Another run holds the root: nothing removed, pending.
	other := HoldRoots([]string{root})
	h := HoldRoots([]string{root})
	if removed := h.Release([]Placeholder{cargo}); len(removed) != 0 || !h.Pending() {
		t.Fatalf("with another run holding the root: removed %v, pending %v", removed, h.Pending())
	}
	other.Release(nil)
	if other.Pending() {
		t.Fatal("a release of no placeholders is pending")
	}

	// Not empty (another run's placeholder inside): pending.
	made := MadePlaceholders([]Placeholder{cargo})
	os.WriteFile(filepath.Join(cargo.Path, "config"), nil, 0o644)
	h = HoldRoots([]string{root})
	if removed := h.Release([]Placeholder{cargo}); len(removed) != 0 || !h.Pending() {
		t.Fatalf("not empty: removed %v, pending %v", removed, h.Pending())
	}
	removed, keep := RemoveLeftPlaceholders(made)
	if len(removed) != 0 || len(keep) != 1 || keep[0].Tries != 1 {
		t.Fatalf("not empty, first try: removed %v, keep %+v", removed, keep)
	}
	for try := 2; try < maxTries; try++ {
		if _, keep = RemoveLeftPlaceholders(keep); len(keep) != 1 || keep[0].Tries != try {
			t.Fatalf("try %d: keep %+v", try, keep)
		}
	}
	if _, k := RemoveLeftPlaceholders(keep); len(k) != 0 {
		t.Fatalf("tried %d times and still kept: %+v", maxTries, k)
	}
	// Once empty, a record's directory goes.
	os.Remove(filepath.Join(cargo.Path, "config"))
	if removed, keep := RemoveLeftPlaceholders(made); len(removed) != 1 || len(keep) != 0 {
		t.Fatalf("empty now: removed %v, keep %+v", removed, keep)
	}
}
