package script

import (
	"os"
	"path/filepath"
	"testing"
)

// What a script may leave: directories without permissions, nested, a
// file in them, and a symlink out of the tree, which must not be followed.
func TestRemoveWorkDirUnreadable(t *testing.T) {
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	os.Mkdir(outside, 0o755)
	os.WriteFile(filepath.Join(outside, "keep"), []byte("x"), 0o644)
	dir := filepath.Join(base, "work")
	deep := filepath.Join(dir, "a", "b", "c")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(deep, "f"), []byte("x"), 0o644)
	os.Symlink(outside, filepath.Join(dir, "a", "link"))
	os.Chmod(filepath.Join(dir, "a", "b", "c"), 0)
	os.Chmod(filepath.Join(dir, "a", "b"), 0)
	os.Chmod(dir, 0o500)
	// removeTree itself: as root, os.RemoveAll would not need it.
	if err := removeTree(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Fatalf("work directory still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "keep")); err != nil {
		t.Fatalf("followed the symlink: %v", err)
	}
	if st, _ := os.Stat(outside); st.Mode().Perm() != 0o755 {
		t.Fatalf("chmod reached the symlink's target: %v", st.Mode())
	}
}
