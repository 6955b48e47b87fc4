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
	// pending: Release left placeholders for a later nsbox (Pending).
	pending bool
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
		var list []Placeholder
		for _, p := range ph {
			if p.Root == root {
				list = append(list, p)
			}
		}
		if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) == nil {
			r, busy := removePlaceholders(fd, root, list, nil)
			removed = append(removed, r...)
			// A placeholder directory that holds something now: perhaps
			// another run's placeholder, made inside it while both ran
			// and left to this one (below); a later nsbox tries again.
			h.pending = h.pending || len(busy) > 0
		} else if len(list) > 0 {
			// Another run holds the root (and may rely on these very
			// placeholders): they are left to a later nsbox.
			h.pending = true
		}
		unix.Close(fd) // drops the lock
	}
	h.roots, h.fds = nil, map[string]int{}
	return removed
}

// Pending says whether the last Release left placeholders for a later
// nsbox to remove: a root another run held, or a placeholder directory
// that was not empty. The caller then keeps its record of what the
// sandbox made (MadePlaceholders) for RemoveLeftPlaceholders, as a killed
// run's; otherwise two runs sharing a workspace could leave each other's
// placeholders behind for good.
func (h *Hold) Pending() bool { return h != nil && h.pending }

// removePlaceholders removes those of list (all in root, whose fd is
// rootFD) that are still empty directories or empty regular files and,
// with ids (ids[i] for list[i]), still the inode recorded; deepest first.
// Each parent is opened below root without following any symlink (openat2
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS), and each entry is examined and
// removed relative to that fd, never by a path a symlink could redirect.
//
// Invariant: never a user's file: a file goes only while every link of its
// inode is a name of list, so an empty file of the user's that is also
// linked elsewhere stays. (Today's worker makes an inode per placeholder;
// an older one linked the files of a directory to one inode.)
//
// busy are the indices of directories that were still the placeholder but
// not empty (rmdir's ENOTEMPTY).
func removePlaceholders(rootFD int, root string, list []Placeholder, ids []*MadePlaceholder) (removed []string, busy []int) {
	type inode struct{ dev, ino uint64 }
	ps := newParents(rootFD, root)
	defer ps.close()
	names := map[inode]int{}
	sts := make([]*placeholderStat, len(list))
	for i, p := range list {
		st, err := ps.stat(p)
		if err != nil {
			// Gone: nothing to remove. Not looked up (the sandbox made
			// the workspace, or a directory on the way, unreadable; the
			// audit gives it back only later): left to a later nsbox,
			// which removes it once it can (review 16: ~22 empty
			// placeholders stayed in the workspace for good).
			if errors.Is(err, unix.EACCES) {
				busy = append(busy, i)
			}
			continue
		}
		if ids != nil && ids[i] != nil && (st.dev != ids[i].Dev || st.ino != ids[i].Ino || st.born != ids[i].Born) {
			// The name is the same, the inode is not the one the killed
			// run made (the user removed the placeholder and made a file
			// of that name since): never removed.
			continue
		}
		sts[i] = &st
		if !p.Dir {
			names[inode{st.dev, st.ino}]++
		}
	}
	order := make([]int, len(list))
	for i := range order {
		order[i] = i
	}
	// Deepest first: a placeholder directory is never below another one,
	// but be safe with nested entries.
	sort.SliceStable(order, func(a, b int) bool { return len(list[order[a]].Path) > len(list[order[b]].Path) })
	for _, i := range order {
		st, p := sts[i], list[i]
		if st == nil {
			continue
		}
		switch {
		case p.Dir && st.mode&unix.S_IFMT == unix.S_IFDIR:
		case !p.Dir && st.mode&unix.S_IFMT == unix.S_IFREG && st.size == 0 && int(st.nlink) <= names[inode{st.dev, st.ino}]:
		default:
			continue
		}
		switch err := removeOne(ps, p, st); {
		case err == nil:
			removed = append(removed, p.Path)
		case errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST):
			busy = append(busy, i)
		}
	}
	return removed, busy
}

// removeOne removes p if it is still the inode st and, for a file, empty.
// rmdir fails on a directory that is not empty (ENOTEMPTY).
func removeOne(ps *parents, p Placeholder, st *placeholderStat) error {
	now, err := ps.stat(p)
	if err != nil {
		return err
	}
	if now.dev != st.dev || now.ino != st.ino {
		return errChanged
	}
	parent, name, err := ps.parent(p)
	if err != nil {
		return err
	}
	if p.Dir {
		return unix.Unlinkat(parent, name, unix.AT_REMOVEDIR)
	}
	if now.size != 0 {
		return errChanged
	}
	return unix.Unlinkat(parent, name, 0)
}

// errChanged: the placeholder is not the inode it was, or was written.
var errChanged = errors.New("placeholder changed since")

// parents opens the parent directories of placeholders below one root,
// each once (a run's placeholders share a few parents: mostly the root
// itself), without following any symlink.
type parents struct {
	rootFD int
	root   string
	fds    map[string]int // relative directory -> O_PATH fd, or -1
}

func newParents(rootFD int, root string) *parents {
	return &parents{rootFD: rootFD, root: root, fds: map[string]int{}}
}

func (ps *parents) close() {
	for _, fd := range ps.fds {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

// parent returns an O_PATH fd of p's parent (owned by ps) and p's name.
func (ps *parents) parent(p Placeholder) (int, string, error) {
	rel, err := filepath.Rel(ps.root, filepath.Dir(p.Path))
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return -1, "", fmt.Errorf("%s is not below %s", p.Path, ps.root)
	}
	fd, ok := ps.fds[rel]
	if !ok {
		// Invariant: every parent is below the held root, reached
		// without a symlink or a mount crossing, whatever the sandbox
		// (which could write there) made of the path since.
		fd, err = openat2Retry(ps.rootFD, rel, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
		})
		if errors.Is(err, unix.EACCES) {
			// Unsearchable (the sandbox's chmod): said as such, so that
			// the placeholders in it are left for a later nsbox.
			return -1, "", err
		}
		if err != nil {
			fd = -1
		}
		ps.fds[rel] = fd
	}
	if fd < 0 {
		return -1, "", unix.ENOENT
	}
	return fd, filepath.Base(p.Path), nil
}

// placeholderStat is what one statx tells of a placeholder.
type placeholderStat struct {
	dev, ino, size uint64
	mode, nlink    uint32
	// born is the inode's birth time (btime), or its ctime where the
	// file system keeps none, in ns (MadePlaceholder.Born).
	born int64
}

// stat examines p (never following a symlink) with one statx.
func (ps *parents) stat(p Placeholder) (placeholderStat, error) {
	parent, name, err := ps.parent(p)
	if err != nil {
		return placeholderStat{}, err
	}
	var sx unix.Statx_t
	if err := unix.Statx(parent, name, unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_SYNC_AS_STAT, unix.STATX_BASIC_STATS|unix.STATX_BTIME, &sx); err != nil {
		return placeholderStat{}, err
	}
	st := placeholderStat{
		dev: unix.Mkdev(sx.Dev_major, sx.Dev_minor), ino: sx.Ino, size: sx.Size,
		mode: uint32(sx.Mode), nlink: sx.Nlink,
		born: sx.Ctime.Sec*1e9 + int64(sx.Ctime.Nsec),
	}
	if sx.Mask&unix.STATX_BTIME != 0 {
		st.born = sx.Btime.Sec*1e9 + int64(sx.Btime.Nsec)
	}
	return st, nil
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
	// Tries counts the later nsbox runs that found this directory not
	// empty; after maxTries it is no longer tried (it holds the user's
	// files now, or what no record names).
	Tries int `json:"tries,omitempty"`
}

// maxTries bounds how often a placeholder directory that is not empty is
// tried again: about three later nsbox runs (each may try twice, see
// cmd/nsbox's removeLeftPlaceholders).
const maxTries = 6

// MadePlaceholders returns the placeholders of ph that exist now, with
// their identities. Call it once the sandbox is built (its worker made
// them), while the roots are held: a placeholder another live run made
// for the same path is recorded too, and RemoveLeftPlaceholders leaves it
// to that run while it holds the root.
func MadePlaceholders(ph []Placeholder) []MadePlaceholder {
	var out []MadePlaceholder
	roots := map[string]*parents{}
	defer func() {
		for _, ps := range roots {
			ps.close()
			if ps.rootFD >= 0 {
				unix.Close(ps.rootFD)
			}
		}
	}()
	for _, p := range ph {
		ps, ok := roots[p.Root]
		if !ok {
			fd, err := unix.Open(p.Root, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				fd = -1
			}
			ps = newParents(fd, p.Root)
			roots[p.Root] = ps
		}
		if ps.rootFD < 0 {
			continue
		}
		st, err := ps.stat(p)
		if err != nil {
			continue
		}
		out = append(out, MadePlaceholder{Placeholder: p, Dev: st.dev, Ino: st.ino, Born: st.born})
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
		r, busy := removePlaceholders(fd, root, ph, ids)
		removed = append(removed, r...)
		for _, i := range busy {
			// Not empty: another run's leftovers inside, whose record
			// may come next, or the user's files (bounded tries).
			if m := list[i]; m.Tries+1 < maxTries {
				m.Tries++
				keep = append(keep, m)
			}
		}
		unix.Close(fd) // drops the lock
	}
	return removed, keep
}
