package policy

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

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
	return fmt.Sprintf("its directory is reached through the symlink %s, which lies in a directory the sandbox can write and leads out of it (to %s): an earlier sandbox could have made it to choose where nsbox writes; look at the link and remove it, or name a file outside the directories the sandbox writes", e.Link, e.Target)
}

// OpenHostDir opens the directory dir (absolute) for nsbox to create or
// open a file of its own in, relative to the fd returned (O_PATH), and
// returns its real path. writable lists the directories a sandbox of the
// run can write; it is called only when a symlink is met on the way (most
// paths have none), and an error from it refuses the open.
//
// Invariant: nothing nsbox writes on the host is steered by a symlink a
// sandbox of this run's policy could have made. Every symlink on the way
// that lies in a writable directory of the run must lead, its whole text
// resolved, to a place in that same directory; one that leads out of it
// is refused (PlantedLinkError), as binds are (binds.go). Links elsewhere
// (a /home that leads to /var/home, ~/code -> /mnt/data/code) are
// followed. The directory is then opened by the kernel (so
// fs.protected_symlinks holds for every link on the way) and must be the
// one the walk arrived at: a link swapped in between fails the open
// (reviews 71, 72, 73).
// Links a sandbox of another policy planted in a directory this run does
// not write are not judged (docs/security.md).
func OpenHostDir(dir string, writable func() ([]string, error)) (int, string, error) {
	if !filepath.IsAbs(dir) {
		return -1, "", fmt.Errorf("%s: not an absolute path", dir)
	}
	var roots []string
	rootsRead := false
	// A link that lies in a writable root is judged where its own text
	// leads, by this walk, once the walk has taken all of it: a marker
	// ("\x00N", which no path name holds) after the text's names stands
	// for checks[N]. The text judged is the text walked, read once: a
	// link swapped between two looks cannot be judged by one and walked
	// by the other (review 73).
	type check struct{ link, root string }
	var checks []check
	// cur has no symlink in it: a link met is replaced by its target's
	// names, looked at one by one in turn (a ".." after a link is taken
	// where the link led, as the kernel does, never cleaned away).
	cur, parts, hops := "/", splitPath(dir), 0
	for len(parts) > 0 {
		name := parts[0]
		parts = parts[1:]
		if n, ok := strings.CutPrefix(name, "\x00"); ok {
			c := checks[atoiOr(n, 0)]
			if !within(cur, c.root) {
				return -1, "", &PlantedLinkError{Link: c.link, Target: cur}
			}
			continue
		}
		if name == ".." {
			cur = filepath.Dir(cur)
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
		if !rootsRead {
			if roots, err = writable(); err != nil {
				return -1, "", fmt.Errorf("%s is a symlink, and the directories the sandbox can write are not known: %w", next, err)
			}
			rootsRead = true
		}
		rest := parts
		parts = splitPath(t)
		// The deepest writable root the link lies in: its target must
		// stay in it.
		root := ""
		for _, r := range roots {
			if within(next, r) && next != r && len(r) > len(root) {
				root = r
			}
		}
		if root != "" {
			checks = append(checks, check{link: next, root: root})
			parts = append(parts, "\x00"+strconv.Itoa(len(checks)-1))
		}
		parts = append(parts, rest...)
		if filepath.IsAbs(t) {
			cur = "/"
		}
	}
	// The kernel opens the path itself (fs.protected_symlinks holds): it
	// must arrive where the walk did, or a link changed in between.
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, "", &os.PathError{Op: "open", Path: dir, Err: err}
	}
	// The walk's directory, looked up now with no symlink at all (and no
	// /proc needed), must be the one the kernel opened.
	same := false
	if cfd, err := openat2Retry(unix.AT_FDCWD, cur, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}); err == nil {
		var a, b unix.Stat_t
		same = unix.Fstat(fd, &a) == nil && unix.Fstat(cfd, &b) == nil && a.Dev == b.Dev && a.Ino == b.Ino
		unix.Close(cfd)
	}
	if !same {
		unix.Close(fd)
		return -1, "", fmt.Errorf("%s: it changed while it was opened (it led to %s, then elsewhere): a symlink on its way was replaced", dir, cur)
	}
	return fd, cur, nil
}

// maxLinkHops bounds the symlinks followed on the way to a host file's
// directory (the kernel's own bound: path_resolution(7)).
const maxLinkHops = 40

// atoiOr is strconv.Atoi, or def when s is not a number.
func atoiOr(s string, def int) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	return def
}
