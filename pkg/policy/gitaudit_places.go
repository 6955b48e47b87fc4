package policy

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The places the audit works in: the writable roots and searched
// directories, checked at its start and held open until its end.

// afterVerify, when set (tests only), runs between the check of the places
// and the audit that uses them: where another sandbox's rename would land.
var afterVerify func()

// release closes the places verifyPlaces opened.
func (a *GitAudit) release() {
	for _, fd := range a.held {
		unix.Close(fd)
	}
	a.held = nil
}

// stillInPlace reports, once the audit is done, the places held that no
// longer lie at their paths: the walk and the renames went by the held
// directories, but the lookups by path between them (whether a .git was
// there before, whether it is empty) may have seen another tree, and
// what the audit missed there is the user's to look at.
func (a *GitAudit) stillInPlace() error {
	var moved []string
	for p := range a.held {
		if !sameDirNoSymlink(p, a.places[p]) {
			moved = append(moved, p)
		}
	}
	if len(moved) == 0 {
		return nil
	}
	sort.Strings(moved)
	return fmt.Errorf("%w: %s (or a directory above it) was moved or replaced while the audit ran, by a process outside this run (another sandbox that can write above it?): what the audit found there may be incomplete; a repository or agent file made there may run its code when you use git or open it in an editor or agent: look before you do", ErrGitAuditIncomplete, strings.Join(moved, ", "))
}

// placeAll records the directories ps (real paths, no symlink in them)
// as they are now.
func (a *GitAudit) placeAll(ps []string) {
	if a.places == nil {
		a.places = map[string]fileID{}
	}
	for _, p := range ps {
		if id, ok := idOf(p); ok {
			a.places[p] = id
		}
	}
}

// verifyPlaces returns the audit without the writable roots, searched
// directories and created patterns whose place the sandbox moved or
// replaced, and an error naming them.
//
// Invariant: the audit uses a root's or a searched directory's path only
// while it still leads, with no symlink, to the directory it named at the
// start. Their paths are real paths, but one inside another writable
// directory runs through names the sandbox could rename: it moved
// ~/o/node_modules away and put a link to ../victim in its place, and the
// audit, walking and renaming below the workspace ~/o/node_modules/ws by
// its path, quarantined the .git of a project it could never write; or it
// moved the --rw ./sub/inner the workspace's walk was to cover below
// node_modules, which that walk never enters (review 16). Every sandbox
// process is dead when the audit runs, so nothing changes after the
// check. A place it cannot verify is left out, loudly: the user is told
// to look before using git there.
//
// Invariant: a sandbox of another nsbox run, still running, may be able to
// write above a place (this run's workspace in its --rw ~/src) and swap
// it for a symlink after this check: each place is opened here, from "/"
// without following a symlink (openat2 RESOLVE_NO_SYMLINKS), and checked
// by that fd; the walk starts at it and every rename or chmod below it
// resolves beneath it. Before this, 1 of 40 such races renamed files
// outside every writable directory of the run (review 71).
func (a *GitAudit) verifyPlaces() (*GitAudit, error) {
	c := *a
	c.held = map[string]int{}
	var moved []string
	for p, id := range a.places {
		fd, ok := openPlace(p, id)
		if !ok {
			moved = append(moved, p)
			continue
		}
		c.held[p] = fd
	}
	for _, fd := range c.held {
		// One probe: at's /proc/self/fd/N paths lead to the held
		// directory, or none is used (review 73: with no /proc every
		// lookup failed, and every repository the walk found was
		// skipped as gone).
		var want, got unix.Stat_t
		c.noProc = unix.Fstat(fd, &want) != nil || unix.Stat(procFD+strconv.Itoa(fd)+"/.", &got) != nil ||
			want.Dev != got.Dev || want.Ino != got.Ino
		break
	}
	if afterVerify != nil {
		afterVerify()
	}
	if len(moved) == 0 {
		return &c, nil
	}
	sort.Strings(moved)
	in := func(p string) bool { return slices.ContainsFunc(moved, func(m string) bool { return within(p, m) }) }
	c.roots = slices.DeleteFunc(slices.Clone(a.roots), in)
	c.dirs = slices.DeleteFunc(slices.Clone(a.dirs), in)
	c.created = slices.DeleteFunc(slices.Clone(a.created), func(cp createdPattern) bool { return in(fixedPart(cp.Path)) })
	return &c, fmt.Errorf("%w: the sandbox moved or replaced %s (or a directory above it) during the run: it was not searched; a repository or agent file it made there may run its code when you use git or open it in an editor or agent: look before you do", ErrGitAuditIncomplete, strings.Join(moved, ", "))
}

// sameDirNoSymlink reports whether the absolute path p leads, without a
// symlink on the way, to the directory id. Looked up component by
// component with lstat: nothing races it (see verifyPlaces).
func sameDirNoSymlink(p string, id fileID) bool {
	cur := "/"
	for _, c := range strings.Split(strings.Trim(p, "/"), "/") {
		if c == "" {
			continue
		}
		cur = filepath.Join(cur, c)
		var st unix.Stat_t
		if unix.Lstat(cur, &st) != nil || st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return false
		}
	}
	got, ok := idOf(p)
	return ok && got.dev == id.dev && got.ino == id.ino
}

// at is the path by which the audit looks p up: below the held place
// that holds p (the deepest), through that place's fd
// (/proc/self/fd/N/REST), so that what it decides by (is this .git new,
// empty, changed in the run?) is read in the directory it checked and
// renames in, whatever the path above leads to by then; p itself when no
// held place holds it. Before, a sandbox of another run that swapped the
// workspace for a decoy and back during the audit hid a repository from
// it, silently, in 1 of 20 tries (review 72).
func (a *GitAudit) at(p string) string {
	if a.noProc {
		return p
	}
	best := ""
	for r := range a.held {
		if within(p, r) && len(r) > len(best) {
			best = r
		}
	}
	if best == "" {
		return p
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(p, best), "/")
	if rel == "" {
		rel = "."
	}
	return procFD + strconv.Itoa(a.held[best]) + "/" + rel
}

// procFD is where at finds the held places' fds (a variable only so that a
// test can take /proc away).
var procFD = "/proc/self/fd/"

// openPlace opens the directory at the absolute path p, looked up from
// "/" with no symlink on the way, when it is the directory id; the
// caller closes the fd.
func openPlace(p string, id fileID) (int, bool) {
	fd, err := openat2Retry(unix.AT_FDCWD, p, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return -1, false
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || uint64(st.Dev) != id.dev || st.Ino != id.ino {
		unix.Close(fd)
		return -1, false
	}
	return fd, true
}
