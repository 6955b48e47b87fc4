// Package rmtree removes a directory tree that a sandbox wrote, whatever it
// left in it: directories without permissions, trees deeper than a
// descriptor per level allows, symlinks (never followed). It is a leaf:
// it imports nothing of nsbox.
package rmtree

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// maxRemoveDepth bounds how deep removeAt descends with a descriptor open
// per level. A directory found below it is moved up to the top of the
// tree being removed (renameat2 RENAME_NOREPLACE, within that tree) and
// removed from there: a script that nested 600 directories above an
// unreadable one left its whole tree in the host's /tmp when the descent
// simply stopped (found by review).
const maxRemoveDepth = 128

// maxRemoveMoves bounds those moves (a static tree needs one per
// maxRemoveDepth levels of each deep branch).
const maxRemoveMoves = 1 << 16

// remover is one removal's state: the top directory's fd (where deep
// directories are moved to), and the moves made.
type remover struct {
	top   int
	moves int
	moved bool // since the top was last listed
}

// All removes dir and everything a sandbox left in it, also what it made
// unreadable: os.RemoveAll cannot list a directory of mode 0 as an
// unprivileged user (a script's scratch directory stayed in the host's
// /tmp), nor descend past the descriptor limit.
//
// Invariant: the tree is the sandbox's, so hostile: nothing in it is
// followed. Each directory is opened relative to its parent's fd with
// O_NOFOLLOW|O_DIRECTORY, made searchable through an O_PATH fd (chmod on
// /proc/self/fd/N acts on the inode that fd pins, never on a path a
// symlink could redirect), and its entries are unlinked relative to it.
func All(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	return Tree(dir)
}

// Tree is All's descent by fd, without trying os.RemoveAll first.
func Tree(dir string) error {
	parent, err := unix.Open(filepath.Dir(dir), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	defer unix.Close(parent)
	r := &remover{top: -1}
	if err := r.removeAt(parent, filepath.Base(dir), 0); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}

// removeAt removes name in the directory parent, recursively.
func (r *remover) removeAt(parent int, name string, depth int) error {
	err := unix.Unlinkat(parent, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return err
	}
	if depth > maxRemoveDepth {
		return r.moveUp(parent, name)
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
	if depth == 0 {
		r.top = fd
	}
	for {
		// All names first: unlinking while reading the same directory
		// could make the listing skip entries.
		names, err := d.Readdirnames(-1)
		if err != nil && err != io.EOF {
			return err
		}
		for _, n := range names {
			if err := r.removeAt(fd, n, depth+1); err != nil {
				return err
			}
		}
		// The top is listed again while deep directories were moved
		// into it meanwhile.
		if depth != 0 || !r.moved {
			break
		}
		r.moved = false
		if _, err := d.Seek(0, io.SeekStart); err != nil {
			return err
		}
	}
	return unix.Unlinkat(parent, name, unix.AT_REMOVEDIR)
}

// moveUp moves the directory name (in parent, too deep to descend further)
// to the top of the tree under a fresh name, never over an existing entry.
func (r *remover) moveUp(parent int, name string) error {
	for {
		if r.moves++; r.moves > maxRemoveMoves {
			return fmt.Errorf("more than %d levels of directories, %d times", maxRemoveDepth, maxRemoveMoves)
		}
		err := unix.Renameat2(parent, name, r.top, ".nsbox-deep-"+strconv.Itoa(r.moves), unix.RENAME_NOREPLACE)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err == nil {
			r.moved = true
		}
		return err
	}
}
