package policy

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Hold keeps a run's writable bind roots locked (flock LOCK_SH on the
// directory) while its sandbox runs, so that the empty placeholders a
// sandbox creates for missing protected paths (a .git directory, a
// ~/.bashrc) can be removed afterwards without racing another sandbox that
// shares the directory and still relies on them.
//
// Use: pv := Peek(); h := HoldRoots(pv.Roots); res := Load() (under the
// lock, so that it sees placeholders as they will stay);
// h.Add(res.Roots()); run; h.Release(res.Placeholders).
type Hold struct {
	fds   map[string]int // root -> locked directory fd
	roots []string
	err   error
}

// Roots returns the writable bind sources of a result: the directories
// whose placeholders Release may remove.
func (r *Result) Roots() []string {
	var out []string
	for _, m := range r.Policy.Mounts {
		if m.Kind == "bind" && !m.ReadOnly {
			out = append(out, m.Source)
		}
	}
	sort.Strings(out)
	return dedupStrings(out)
}

// holdTimeout bounds the wait for a root another process holds
// exclusively. nsbox itself only ever holds LOCK_EX for the few syscalls of
// a cleanup; a longer hold is a process (perhaps sandboxed code, which can
// open the directory too) keeping the lock, and waiting forever for it
// would let it stall every later run.
const holdTimeout = 3 * time.Second

// ErrRootLocked: a writable directory stayed locked exclusively.
var ErrRootLocked = errors.New("writable directory locked by another process")

// HoldRoots takes a shared lock on each root. Roots that cannot be opened
// are skipped: their placeholders are then never removed. A root that stays
// locked exclusively is recorded in Err (ErrRootLocked); a caller must then
// not start the sandbox: running without the lock would let another run
// remove placeholders this one relies on.
func HoldRoots(roots []string) *Hold {
	h := &Hold{fds: map[string]int{}}
	h.Add(roots)
	return h
}

// Err is the first root that could not be locked (ErrRootLocked), or nil.
func (h *Hold) Err() error {
	if h == nil {
		return nil
	}
	return h.err
}

// Add locks more roots; its error is also kept in Err.
func (h *Hold) Add(roots []string) error {
	for _, r := range roots {
		if _, ok := h.fds[r]; ok {
			continue
		}
		fd, err := unix.Open(r, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			continue
		}
		deadline := time.Now().Add(holdTimeout)
		for {
			err = unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB)
			if err == nil || !(errors.Is(err, unix.EWOULDBLOCK) || errors.Is(err, unix.EINTR)) || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if errors.Is(err, unix.EWOULDBLOCK) {
			unix.Close(fd)
			h.err = fmt.Errorf("%w: %s has been locked (flock LOCK_EX) for %s by another process; find it with: fuser -v %s", ErrRootLocked, r, holdTimeout, r)
			return h.err
		}
		if err != nil {
			unix.Close(fd)
			continue
		}
		h.fds[r] = fd
		h.roots = append(h.roots, r)
	}
	return nil
}

// Release removes the placeholders of res that are still empty, in every
// root no other run holds, and unlocks. It returns the paths removed. Call
// it only after the sandbox has ended.
func (h *Hold) Release(ph []Placeholder) []string {
	if h == nil {
		return nil
	}
	var removed []string
	for _, root := range h.roots {
		fd := h.fds[root]
		// Exclusive only if no other run holds this root: its sandbox
		// may have the same placeholder mounted, and removing a mount
		// point from another mount namespace detaches that mount.
		if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) == nil {
			// Deepest first: a placeholder directory is never below
			// another one, but be safe with nested entries.
			list := append([]Placeholder(nil), ph...)
			sort.Slice(list, func(a, b int) bool { return len(list[a].Path) > len(list[b].Path) })
			for _, p := range list {
				if p.Root == root && removePlaceholder(fd, root, p) {
					removed = append(removed, p.Path)
				}
			}
		}
		unix.Close(fd) // drops the lock
	}
	h.roots, h.fds = nil, map[string]int{}
	return removed
}

// removePlaceholder removes p if it is still an empty directory or an empty
// regular file. The parent is opened below root without following any
// symlink (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS), and the entry is
// examined and removed relative to that fd, never by a path a symlink could
// redirect.
func removePlaceholder(rootFD int, root string, p Placeholder) bool {
	rel, err := filepath.Rel(root, filepath.Dir(p.Path))
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return false
	}
	parent, err := unix.Openat2(rootFD, rel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		return false
	}
	defer unix.Close(parent)
	name := filepath.Base(p.Path)
	var st unix.Stat_t
	if err := unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return false
	}
	switch {
	case p.Dir && st.Mode&unix.S_IFMT == unix.S_IFDIR:
		// rmdir fails on a directory that is not empty.
		return unix.Unlinkat(parent, name, unix.AT_REMOVEDIR) == nil
	case !p.Dir && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Size == 0 && st.Nlink == 1:
		return unix.Unlinkat(parent, name, 0) == nil
	}
	return false
}
