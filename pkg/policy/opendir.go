package policy

import (
	"errors"
	"os"
	"sort"

	"golang.org/x/sys/unix"
)

// openDirNoWait opens d, a directory a sandbox may replace at any moment,
// for reading its entries. O_DIRECTORY makes the open fail at once
// (ENOTDIR) when a FIFO or a device stands there by the time of the
// call, where a plain open(2) of a FIFO waits for a writer that never
// comes: a sandbox that swapped one in after an Lstat (renameat2
// RENAME_EXCHANGE in a loop) held nsbox mcp's after-call audit, and with
// it every later call and the server's exit, for good (review 68).
// O_NONBLOCK as well, for whatever open(2) of a directory could wait on.
// noFollow refuses a symlink at d (ENOTDIR with O_DIRECTORY).
func openDirNoWait(d string, noFollow bool) (*os.File, error) {
	flags := unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NONBLOCK | unix.O_CLOEXEC
	if noFollow {
		flags |= unix.O_NOFOLLOW
	}
	for {
		fd, err := unix.Open(d, flags, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: d, Err: err}
		}
		return os.NewFile(uintptr(fd), d), nil
	}
}

// readDirNoWait is os.ReadDir (sorted by name) through openDirNoWait,
// following a symlink at d as os.ReadDir does.
func readDirNoWait(d string) ([]os.DirEntry, error) { return readDirNoWaitAt(d, false) }

// readDirNoWaitAt is readDirNoWait, refusing a symlink at d with noFollow
// (one swapped in after the listing that named d a directory).
func readDirNoWaitAt(d string, noFollow bool) ([]os.DirEntry, error) {
	f, err := openDirNoWait(d, noFollow)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	return ents, err
}
