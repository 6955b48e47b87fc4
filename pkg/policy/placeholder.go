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
			var list []Placeholder
			for _, p := range ph {
				if p.Root == root {
					list = append(list, p)
				}
			}
			removed = append(removed, removePlaceholders(fd, root, list, nil)...)
		}
		unix.Close(fd) // drops the lock
	}
	h.roots, h.fds = nil, map[string]int{}
	return removed
}

// removePlaceholders removes those of list (all in root, whose fd is
// rootFD) that are still empty directories or empty regular files and,
// with ids (ids[i] for list[i]), still the inode recorded; deepest first.
// Each parent is opened below root without following any symlink (openat2
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS), and each entry is examined and
// removed relative to that fd, never by a path a symlink could redirect.
//
// The placeholder files of one directory share an inode (the worker links
// them, mounts placeholderFile). Invariant: never a user's file: a file
// goes only while every link of its inode is a name of list, so an empty
// file of the user's that is also linked elsewhere stays.
func removePlaceholders(rootFD int, root string, list []Placeholder, ids []*MadePlaceholder) []string {
	type inode struct{ dev, ino uint64 }
	names := map[inode]int{}
	sts := make([]*unix.Stat_t, len(list))
	for i, p := range list {
		parent, _, st, err := statPlaceholder(rootFD, root, p)
		if err != nil {
			continue
		}
		unix.Close(parent)
		if ids != nil && ids[i] != nil && (uint64(st.Dev) != ids[i].Dev || st.Ino != ids[i].Ino || born(rootFD, root, p, &st) != ids[i].Born) {
			// The name is the same, the inode is not the one the killed
			// run made (the user removed the placeholder and made a file
			// of that name since): never removed.
			continue
		}
		sts[i] = &st
		if !p.Dir {
			names[inode{uint64(st.Dev), st.Ino}]++
		}
	}
	order := make([]int, len(list))
	for i := range order {
		order[i] = i
	}
	// Deepest first: a placeholder directory is never below another one,
	// but be safe with nested entries.
	sort.SliceStable(order, func(a, b int) bool { return len(list[order[a]].Path) > len(list[order[b]].Path) })
	var removed []string
	for _, i := range order {
		st, p := sts[i], list[i]
		if st == nil {
			continue
		}
		switch {
		case p.Dir && st.Mode&unix.S_IFMT == unix.S_IFDIR:
		case !p.Dir && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Size == 0 && int(st.Nlink) <= names[inode{uint64(st.Dev), st.Ino}]:
		default:
			continue
		}
		if removeOne(rootFD, root, p, st) {
			removed = append(removed, p.Path)
		}
	}
	return removed
}

// removeOne removes p if it is still the inode st and, for a file, empty.
// rmdir fails on a directory that is not empty.
func removeOne(rootFD int, root string, p Placeholder, st *unix.Stat_t) bool {
	parent, name, now, err := statPlaceholder(rootFD, root, p)
	if err != nil {
		return false
	}
	defer unix.Close(parent)
	if now.Dev != st.Dev || now.Ino != st.Ino {
		return false
	}
	if p.Dir {
		return unix.Unlinkat(parent, name, unix.AT_REMOVEDIR) == nil
	}
	return now.Size == 0 && unix.Unlinkat(parent, name, 0) == nil
}

// statPlaceholder opens p's parent below rootFD (root's fd) without
// following a symlink and stats p there; the caller closes parent.
func statPlaceholder(rootFD int, root string, p Placeholder) (parent int, name string, st unix.Stat_t, err error) {
	rel, err := filepath.Rel(root, filepath.Dir(p.Path))
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return -1, "", st, fmt.Errorf("%s is not below %s", p.Path, root)
	}
	parent, err = unix.Openat2(rootFD, rel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		return -1, "", st, err
	}
	name = filepath.Base(p.Path)
	if err := unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		unix.Close(parent)
		return -1, "", st, err
	}
	return parent, name, st, nil
}

// MadePlaceholder is a placeholder a sandbox's build made, with the
// identity of the inode it made: what a later nsbox removes when the run
// that made it was killed before its Release.
type MadePlaceholder struct {
	Placeholder
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
	// Born is the inode's birth time (statx btime), or its ctime where
	// the file system keeps none, in ns: an inode number the file system
	// reused for a file the user made since has another.
	Born int64 `json:"born"`
}

// born is the birth time of p (st its stat), as MadePlaceholder.Born.
func born(rootFD int, root string, p Placeholder, st *unix.Stat_t) int64 {
	parent, name, _, err := statPlaceholder(rootFD, root, p)
	if err != nil {
		return st.Ctim.Nano()
	}
	defer unix.Close(parent)
	var sx unix.Statx_t
	if unix.Statx(parent, name, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_INO|unix.STATX_BTIME, &sx) == nil && sx.Mask&unix.STATX_BTIME != 0 && sx.Ino == st.Ino {
		return sx.Btime.Sec*1e9 + int64(sx.Btime.Nsec)
	}
	return st.Ctim.Nano()
}

// MadePlaceholders returns the placeholders of ph that exist now, with
// their identities. Call it once the sandbox is built (its worker made
// them), while the roots are held: a placeholder another live run made
// for the same path is recorded too, and RemoveLeftPlaceholders leaves it
// to that run while it holds the root.
func MadePlaceholders(ph []Placeholder) []MadePlaceholder {
	var out []MadePlaceholder
	fds := map[string]int{}
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for _, p := range ph {
		fd, ok := fds[p.Root]
		if !ok {
			var err error
			if fd, err = unix.Open(p.Root, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err != nil {
				fd = -1
			}
			fds[p.Root] = fd
		}
		if fd < 0 {
			continue
		}
		parent, _, st, err := statPlaceholder(fd, p.Root, p)
		if err != nil {
			continue
		}
		unix.Close(parent)
		out = append(out, MadePlaceholder{Placeholder: p, Dev: uint64(st.Dev), Ino: st.Ino, Born: born(fd, p.Root, p, &st)})
	}
	return out
}

// RemoveLeftPlaceholders removes what a killed run's sandbox made (made,
// from MadePlaceholders): each that is still the inode it made, still
// empty, in a root no live run holds (flock LOCK_EX, as Release). It
// returns the paths removed, and the entries to keep for a later try:
// those of roots a live run holds now (its sandbox may rely on the same
// placeholder). Entries whose root is gone, or that are gone or changed,
// are dropped.
func RemoveLeftPlaceholders(made []MadePlaceholder) (removed []string, keep []MadePlaceholder) {
	byRoot := map[string][]MadePlaceholder{}
	var roots []string
	for _, m := range made {
		if _, ok := byRoot[m.Root]; !ok {
			roots = append(roots, m.Root)
		}
		byRoot[m.Root] = append(byRoot[m.Root], m)
	}
	sort.Strings(roots)
	for _, root := range roots {
		list := byRoot[root]
		fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			continue // the root is gone: so are its placeholders
		}
		if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil {
			unix.Close(fd)
			keep = append(keep, list...)
			continue
		}
		ph := make([]Placeholder, len(list))
		ids := make([]*MadePlaceholder, len(list))
		for i := range list {
			ph[i], ids[i] = list[i].Placeholder, &list[i]
		}
		removed = append(removed, removePlaceholders(fd, root, ph, ids)...)
		unix.Close(fd) // drops the lock
	}
	return removed, keep
}
