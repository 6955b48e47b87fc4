package rmtree

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
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
	if err := Tree(dir); err != nil {
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

// TestRemoveWorkDirDeeperThanTheDescent: a tree of 600 levels, several times deeper than
// maxRemoveDepth, unreadable at the bottom and with branches on the way,
// is removed whole (its deep parts moved up and removed from there); the
// review's 600 levels stayed in /tmp when the descent stopped at 512.
func TestRemoveWorkDirDeeperThanTheDescent(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "work")
	if err := mkdirDeep(dir, 600); err != nil {
		t.Fatal(err)
	}
	if err := Tree(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Fatalf("work directory still there: %v", err)
	}
}

// mkdirDeep makes dir and n levels of "a" below it, one level at a time
// relative to the last (a path that long passes PATH_MAX), with a side
// branch now and then, and an unreadable directory holding a file at the
// bottom.
func mkdirDeep(dir string, n int) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		if i%97 == 0 {
			unix.Mkdirat(fd, "side", 0o755)
		}
		if err := unix.Mkdirat(fd, "a", 0o755); err != nil {
			unix.Close(fd)
			return err
		}
		next, err := unix.Openat(fd, "a", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return err
		}
		fd = next
	}
	defer unix.Close(fd)
	if err := unix.Mkdirat(fd, "z", 0o755); err != nil {
		return err
	}
	z, err := unix.Openat(fd, "z", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(z)
	f, err := unix.Openat(z, "f", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	unix.Close(f)
	return unix.Fchmodat(fd, "z", 0, 0)
}
