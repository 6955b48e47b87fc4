package policy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"
)

// PlantedLinkError refuses a file nsbox would write on the host (a
// --json-status or --audit file) whose directory is reached through a
// symlink that leads out of the directory holding it and lies in a
// directory a sandbox of the run can write: one an earlier sandbox could
// have planted (out -> ~/.config/autostart), through which nsbox, with
// the caller's rights, would create and fill a file where the sandbox
// chose.
type PlantedLinkError struct {
	Link   string // the symlink
	Target string // where it leads
}

func (e *PlantedLinkError) Error() string {
	return fmt.Sprintf("its directory is reached through the symlink %s (to %s), which lies in a directory the sandbox can write, where an earlier sandbox could have made it: name the file by its real path, %s", e.Link, e.Target, e.Target)
}

// maxLinkHops bounds the symlinks followed on the way to a host file's
// directory (as the kernel's own 40: path_resolution(7)).
const maxLinkHops = 40

// OpenHostDir opens the directory dir (absolute) for nsbox to create or
// open a file of its own in, relative to the fd returned (O_PATH), and
// returns its real path. writable lists the directories a sandbox of the
// run can write; it is called only when a symlink that leads out of its
// directory is met on the way (most paths have none), and an error from it
// refuses the open.
//
// Invariant: nothing nsbox writes on the host is steered by a symlink a
// sandbox could have made. Each symlink on the way is looked at where it
// lies: one that leads out of its directory and lies in a writable
// directory of the run is refused (PlantedLinkError); the others (a /home
// that leads to /var/home, ~/code -> /mnt/data/code) are followed. The
// real path so found is then opened from "/" with no symlink at all
// (openat2 RESOLVE_NO_SYMLINKS), so a link swapped in after the check
// fails the open instead of being followed (review 71).
func OpenHostDir(dir string, writable func() ([]string, error)) (int, string, error) {
	if !filepath.IsAbs(dir) {
		return -1, "", fmt.Errorf("%s: not an absolute path", dir)
	}
	var roots []string
	rootsRead := false
	cur, parts, hops := "/", splitPath(dir), 0
	for len(parts) > 0 {
		name := parts[0]
		parts = parts[1:]
		if name == ".." {
			cur = filepath.Dir(cur) // cur has no symlink: ".." is lexical
			continue
		}
		next := filepath.Join(cur, name)
		var st unix.Stat_t
		if err := unix.Lstat(next, &st); err != nil {
			return -1, "", &os.PathError{Op: "lstat", Path: next, Err: err}
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			cur = next
			continue
		}
		if hops++; hops > maxLinkHops {
			return -1, "", &os.PathError{Op: "open", Path: dir, Err: unix.ELOOP}
		}
		t, err := os.Readlink(next)
		if err != nil {
			return -1, "", err
		}
		if !filepath.IsAbs(t) {
			t = filepath.Join(cur, t)
		}
		t = filepath.Clean(t)
		if !within(t, cur) {
			if !rootsRead {
				if roots, err = writable(); err != nil {
					return -1, "", fmt.Errorf("%s leads out of its directory, and the directories the sandbox can write are not known: %w", next, err)
				}
				rootsRead = true
			}
			if slices.ContainsFunc(roots, func(r string) bool { return within(next, r) && next != r }) {
				return -1, "", &PlantedLinkError{Link: next, Target: t}
			}
		}
		// The target's own names are looked at again, from "/".
		cur, parts = "/", append(splitPath(t), parts...)
	}
	fd, err := openat2Retry(unix.AT_FDCWD, cur, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ELOOP) {
		return -1, "", fmt.Errorf("%s: a symlink was put on its way while it was opened: %w", dir, err)
	}
	if err != nil {
		return -1, "", &os.PathError{Op: "open", Path: cur, Err: err}
	}
	return fd, cur, nil
}
