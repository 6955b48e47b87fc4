package policy

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"

	"golang.org/x/sys/unix"
)

// Giving back what the sandbox made unreadable, so that the audit can
// look into it (GitAudit.run's passes).

// reopen gives the user back read, write and search permission on the
// directory d (the rename of what it holds needs the write), below a
// writable root, by fd without following symlinks.
func (a *GitAudit) reopen(d string) error {
	fd, err := a.openUp(d)
	if err != nil {
		return err
	}
	unix.Close(fd)
	return nil
}

// reopenTree is reopen of d, then of the directories below it that are
// unreadable too (reopener.below), listing at most *budget directories;
// below are those it opened up. One it could not open up is left to the
// audit's next walk, which finds it and reopens it (or says why it
// could not).
func (a *GitAudit) reopenTree(d string, budget *int) (below []string, err error) {
	fd, err := a.openUp(d)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	levels := a.levelsBelow(d)
	if levels <= 0 {
		return nil, nil
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return nil, nil
	}
	mnt, ok := mountID(fd)
	if !ok {
		return nil, nil // the next walk finds what is below, one level a pass
	}
	r := reopener{a: a, dev: uint64(st.Dev), mnt: mnt, uid: os.Geteuid(), budget: budget, buf: make([]byte, 32<<10)}
	return r.below(fd, d, levels), nil
}

// levelsBelow is how many levels below d the audit's walk for
// repositories ("DIR/**/.git") lists directories: auditMaxDepth below
// the DIR whose walk enters d, 0 when none does. The descent opens up
// no more than that walk would have found and reported, one pass after
// another: nothing in a directory "**" skips (node_modules), nothing
// deeper than it goes, nothing when no repositories are audited.
func (a *GitAudit) levelsBelow(d string) int {
	levels := 0
	if a.noGit {
		return 0
	}
	for _, dir := range a.dirs {
		if walkedWith(d, dir) {
			levels = max(levels, auditMaxDepth-(len(splitPath(d))-len(splitPath(dir))))
		}
	}
	return levels
}

// mountID is the id of the mount fd lies on (statx STATX_MNT_ID).
func mountID(fd int) (uint64, bool) {
	var stx unix.Statx_t
	if unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &stx) != nil || stx.Mask&unix.STATX_MNT_ID == 0 {
		return 0, false
	}
	return stx.Mnt_id, true
}

// sameMount reports whether fd lies on the descent's mount.
func (r *reopener) sameMount(fd int) bool {
	m, ok := mountID(fd)
	return ok && m == r.mnt
}

// reopener is one descent of reopenTree below a directory it opened up.
type reopener struct {
	a      *GitAudit
	mnt    uint64 // the mount of that directory
	dev    uint64 // the file system of that directory
	uid    int    // this user (the euid)
	budget *int   // directories it may still list, shared by one walk's descents
	buf    []byte // for getdents64
}

// below gives u+rwx back to each directory below fd (the directory d,
// which openUp has just opened up), levels deep, that is this user's and
// that this user may not list or search, as reopen does, and returns
// their paths. It lists at most *budget directories in all (so the
// names it holds are bounded too), and goes into them in name order,
// depth first; those "**" does not enter (walkSkip) are left as they
// are, as the walk leaves them.
//
// Invariant: everything it changes is reached by fd from d's fd, one
// name of a listing at a time (never "." or ".."), without following a
// symlink, on d's file system: below d, so within d's writable root,
// whatever the sandbox left in the tree. A link it planted to ~/.ssh or
// to another user's tree is never opened, let alone made u+rwx.
func (r *reopener) below(fd int, d string, levels int) (opened []string) {
	// "." of d's fd is d itself (it may be listed and searched now): the
	// listing is of the directory openUp changed, not of a path looked
	// up again.
	dir, err := openatRetry(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
	if err != nil {
		return nil
	}
	defer unix.Close(dir)
	subdirs := r.list(dir)
	for _, name := range subdirs {
		p := d + "/" + name
		if r.a.wasLocked(p) {
			continue // protected whole at the start: as the user left it
		}
		// Invariant: O_NOFOLLOW on a name of d's listing: a symlink
		// the sandbox left here (in place of a directory since the
		// listing, too) is not followed, the open fails.
		sub, err := openatRetry(dir, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC)
		if err != nil {
			continue
		}
		var st unix.Stat_t
		// Invariant: only this user's directories, on d's file system:
		// never another user's (a directory of the sandbox's range of
		// ids, a root-owned volume), never across a mount point, as
		// parentOf never crosses one (RESOLVE_NO_XDEV).
		// The mount too: a bind mount of the same file system has the
		// same st_dev, and one in the workspace led the descent to a
		// directory outside it (review 73).
		if unix.Fstat(sub, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || uint64(st.Dev) != r.dev || int(st.Uid) != r.uid || !r.sameMount(sub) {
			unix.Close(sub)
			continue
		}
		if st.Mode&0o500 != 0o500 {
			// Invariant: the mode change lands on the directory
			// examined (its fd), never on a path looked up again.
			if unix.Chmod("/proc/self/fd/"+strconv.Itoa(sub), (st.Mode&0o7777)|0o700) != nil {
				unix.Close(sub)
				continue // left to the next walk, which says why
			}
			opened = append(opened, p)
		}
		if levels > 1 {
			opened = append(opened, r.below(sub, p, levels-1)...)
		}
		unix.Close(sub)
	}
	return opened
}

// list returns the names of the entries of the directory open (for
// reading) at fd that may be directories, but those "**" does not enter
// (walkSkip), sorted; no more than the budget left, which it takes
// from. Read in batches, each filtered before the next: a directory of
// many files costs no more than an empty one.
func (r *reopener) list(fd int) []string {
	var ents []dirent
	keep := func(name []byte, typ uint8) bool {
		return (typ == unix.DT_DIR || typ == unix.DT_UNKNOWN) && !walkSkip[string(name)]
	}
	for len(ents) < *r.budget {
		n, err := unix.Getdents(fd, r.buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n <= 0 {
			break
		}
		ents, _ = appendDirents(ents, r.buf[:n], keep)
	}
	ents = ents[:min(len(ents), max(*r.budget, 0))]
	*r.budget -= len(ents)
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.name)
	}
	sort.Strings(names)
	return names
}

// openUp is reopen, and returns an O_PATH fd of d (the caller closes it).
func (a *GitAudit) openUp(d string) (int, error) {
	fail := func(err error) (int, error) {
		return -1, fmt.Errorf("cannot look into %s, which the sandbox made unreadable (chmod u+rwx: %v): do not run git there before you have looked", d, err)
	}
	var fd int
	var mode uint32
	if slices.Contains(a.roots, d) {
		// A writable root itself (chmod 000 of the workspace: it has
		// no parent below a root): the directory verifyPlaces holds,
		// else (an audit with no places: tests) its path, opened
		// without following a symlink.
		var f int
		var err error
		if h, ok := a.held[d]; ok {
			f, err = unix.FcntlInt(uintptr(h), unix.F_DUPFD_CLOEXEC, 0)
		} else if _, placed := a.places[d]; placed {
			err = errors.New("it was moved during the run")
		} else {
			f, err = unix.Open(d, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		}
		if err != nil {
			return fail(err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(f, &st); err != nil {
			unix.Close(f)
			return fail(err)
		}
		fd, mode = f, st.Mode
	} else {
		parent, name, m, ok := a.dirAt(d)
		if !ok {
			return fail(errors.New("not reached below its writable directory without a symlink"))
		}
		// Invariant: the mode change lands on the directory examined,
		// never through a symlink swapped in since (fchmodat follows
		// one): chmod goes through an O_PATH|O_NOFOLLOW|O_DIRECTORY fd
		// of it.
		f, err := unix.Openat(parent, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		unix.Close(parent)
		if err != nil {
			return fail(err)
		}
		fd, mode = f, m
	}
	if err := unix.Chmod("/proc/self/fd/"+strconv.Itoa(fd), (mode&0o7777)|0o700); err != nil {
		unix.Close(fd)
		return fail(err)
	}
	return fd, nil
}
