package script

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// maxRemoveDepth bounds how deep removeWorkDir descends: each level holds a
// descriptor open.
const maxRemoveDepth = 512

// removeWorkDir removes a script's fresh work directory and everything the
// script left in it, also what it made unreadable: os.RemoveAll cannot list
// a directory of mode 0 as an unprivileged user, and the scratch directory
// stayed in the host's /tmp.
//
// Invariant: the tree is the sandbox's, so hostile: nothing in it is
// followed. Each directory is opened relative to its parent's fd with
// O_NOFOLLOW|O_DIRECTORY, made searchable through an O_PATH fd (chmod on
// /proc/self/fd/N acts on the inode that fd pins, never on a path a
// symlink could redirect), and its entries are unlinked relative to it.
func removeWorkDir(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	return removeTree(dir)
}

// removeTree is removeWorkDir's descent by fd.
func removeTree(dir string) error {
	parent, err := unix.Open(filepath.Dir(dir), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("remove work directory %s: %w", dir, err)
	}
	defer unix.Close(parent)
	if err := removeAt(parent, filepath.Base(dir), 0); err != nil {
		return fmt.Errorf("remove work directory %s: %w", dir, err)
	}
	return nil
}

// removeAt removes name in the directory parent, recursively.
func removeAt(parent int, name string, depth int) error {
	err := unix.Unlinkat(parent, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return err
	}
	if depth > maxRemoveDepth {
		return fmt.Errorf("more than %d levels of directories", maxRemoveDepth)
	}
	pin, err := unix.Openat(parent, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	// u+rwx: list it, and unlink in it.
	cerr := unix.Chmod("/proc/self/fd/"+strconv.Itoa(pin), 0o700)
	unix.Close(pin)
	if cerr != nil {
		return cerr
	}
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	d := os.NewFile(uintptr(fd), name)
	defer d.Close()
	// All names first: unlinking while reading the same directory could
	// make the listing skip entries.
	names, err := d.Readdirnames(-1)
	if err != nil && err != io.EOF {
		return err
	}
	for _, n := range names {
		if err := removeAt(fd, n, depth+1); err != nil {
			return err
		}
	}
	return unix.Unlinkat(parent, name, unix.AT_REMOVEDIR)
}
