package tools

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
	"golang.org/x/sys/unix"
)

// .gitignore support uses go-git's gitignore package: it is maintained
// (with go-git), implements git's pattern rules (negation, anchoring,
// "**", directory-only patterns, per-directory domains) and takes patterns
// as strings, so the files themselves are read here, by fd, like every
// other file.

// Bounds of a walk.
const (
	maxWalkDepth    = 64      // deeper directories are not entered
	maxDirNames     = 100_000 // entries read from one directory
	maxIgnoreFile   = 1 << 20 // bytes of one .gitignore
	maxIgnoreFilesz = 256     // .gitignore files loaded per walk
)

// walkEntry is one entry found by a walk.
type walkEntry struct {
	// rel is the entry's path relative to the workspace root, as the
	// kernel resolved it (no symlink in it): what the walk opens.
	rel string
	// label is its path relative to where the walk started, as the user
	// named it: what the output shows.
	label string
	name  string
	// dirfd is the open directory holding the entry, valid during the
	// callback only (for *at calls on name).
	dirfd int
	mode  uint32 // S_IFMT bits
	size  int64
	depth int
}

func (e walkEntry) isDir() bool  { return e.mode == unix.S_IFDIR }
func (e walkEntry) isReg() bool  { return e.mode == unix.S_IFREG }
func (e walkEntry) isLink() bool { return e.mode == unix.S_IFLNK }

func (e walkEntry) typeName() string {
	switch e.mode {
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFREG:
		return "file"
	case unix.S_IFLNK:
		return "symlink"
	}
	return "other"
}

// walker walks a directory tree below a Root by fd.
type walker struct {
	root      *Root
	recursive bool
	// gitignore hides what .gitignore files (and .git/info/exclude)
	// ignore; .git directories are never entered either way.
	gitignore bool
	// truncated is set when a directory had more than maxDirNames entries
	// or the depth bound was hit.
	truncated   bool
	ignoreFiles int
}

// errStop ends a walk early without an error.
var errStop = errors.New("stop walking")

// walk calls fn for each entry below the user path start, in sorted,
// depth-first order. fn returns fs.SkipDir to not enter a directory, errStop
// to end the walk.
func (w *walker) walk(ctx context.Context, start string, fn func(walkEntry) error) (string, error) {
	dir, _, err := w.root.OpenDir(start)
	if err != nil {
		return "", err
	}
	// The start may have been named through a symlink (inside the root):
	// below it, everything is opened by its real path with no symlink
	// allowed, so the real path is what the walk builds on.
	rel, err := w.root.RelOf(int(dir.Fd()))
	if err != nil {
		dir.Close()
		return "", &PathError{Path: start, Err: ErrOutsideWorkspace}
	}
	var ig []gitignore.Pattern
	if w.gitignore {
		ig = w.ancestorsIgnore(rel)
	}
	// Labels start from the path as the user named it (cleaned), so that
	// they can be handed back to the other tools.
	label, _ := w.root.Rel(start)
	if label == "." {
		label = ""
	}
	err = w.dir(ctx, dir, rel, label, 0, ig, fn)
	if err == errStop {
		err = nil
	}
	return rel, err
}

func (w *walker) dir(ctx context.Context, dir *os.File, rel, label string, depth int, ig []gitignore.Pattern, fn func(walkEntry) error) error {
	defer dir.Close()
	names, err := readNames(dir)
	if len(names) >= maxDirNames {
		w.truncated = true
	}
	if err != nil && len(names) == 0 {
		return nil // unreadable directory: nothing to list
	}
	sort.Strings(names)
	if w.gitignore {
		ig = append(ig[:len(ig):len(ig)], w.readIgnore(joinRel(rel, ".gitignore"), splitRel(rel))...)
	}
	m := gitignore.NewMatcher(ig)
	dfd := int(dir.Fd())
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		var st unix.Stat_t
		// Metadata of a single name in this directory, not following a
		// symlink: cannot leave the directory.
		if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue
		}
		e := walkEntry{rel: joinRel(rel, name), label: joinRel(label, name), name: name, dirfd: dfd,
			mode: st.Mode & unix.S_IFMT, size: st.Size, depth: depth}
		if w.gitignore && m.Match(splitRel(e.rel), e.isDir()) {
			continue
		}
		err := fn(e)
		switch {
		case err == fs.SkipDir:
			continue
		case err != nil:
			return err
		}
		// .git holds objects and hooks, never workspace content.
		if !e.isDir() || !w.recursive || name == ".git" {
			continue
		}
		if depth+1 >= maxWalkDepth {
			w.truncated = true
			continue
		}
		// The child is opened from the root by its full path with no
		// symlink allowed anywhere (RESOLVE_NO_SYMLINKS|RESOLVE_BENEATH):
		// a directory swapped for a symlink since it was listed fails
		// here (ELOOP) and is skipped, it is not followed.
		cfd, err := w.root.openNoFollow(e.rel, unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			continue
		}
		if err := w.dir(ctx, os.NewFile(uintptr(cfd), e.rel), e.rel, e.label, depth+1, ig, fn); err != nil {
			return err
		}
	}
	return nil
}

// readNames reads at most maxDirNames entry names.
func readNames(dir *os.File) ([]string, error) {
	var names []string
	for len(names) < maxDirNames {
		batch, err := dir.Readdirnames(1024)
		names = append(names, batch...)
		if err == io.EOF {
			return names, nil
		}
		if err != nil {
			return names, err
		}
	}
	return names, nil
}

// ancestorsIgnore loads .git/info/exclude and the .gitignore files of the
// root and of every directory above rel (rel's own is loaded by dir).
func (w *walker) ancestorsIgnore(rel string) []gitignore.Pattern {
	ps := w.readIgnore(".git/info/exclude", nil)
	if rel == "." {
		return ps
	}
	ps = append(ps, w.readIgnore(".gitignore", nil)...)
	parts := splitRel(rel)
	for i := 1; i < len(parts); i++ {
		d := strings.Join(parts[:i], "/")
		ps = append(ps, w.readIgnore(d+"/.gitignore", parts[:i])...)
	}
	return ps
}

// readIgnore parses one ignore file (opened by fd, no symlink followed,
// size-bounded); domain is the directory it applies to.
func (w *walker) readIgnore(rel string, domain []string) []gitignore.Pattern {
	if w.ignoreFiles >= maxIgnoreFilesz {
		return nil
	}
	fd, err := w.root.openNoFollow(rel, unix.O_PATH)
	if err != nil {
		return nil
	}
	f, err := regularFile(fd, rel)
	if err != nil {
		return nil
	}
	defer f.Close()
	w.ignoreFiles++
	data, _ := io.ReadAll(io.LimitReader(f, maxIgnoreFile))
	return parseIgnore(string(data), domain)
}

func parseIgnore(data string, domain []string) []gitignore.Pattern {
	var ps []gitignore.Pattern
	for _, line := range strings.Split(data, "\n") {
		line = strings.TrimSuffix(line, "\r")
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		ps = append(ps, gitignore.ParsePattern(line, domain))
	}
	return ps
}

// regularFile checks that the O_PATH fd is a regular file and reopens it for
// reading (the same inode, not the path again). It closes fd.
func regularFile(fd int, name string) (*os.File, error) {
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, &PathError{Path: name, Err: errNotRegular}
	}
	rfd, err := reopen(fd, unix.O_RDONLY|unix.O_NOCTTY)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(rfd), name), nil
}

func joinRel(dir, name string) string {
	if dir == "" || dir == "." {
		return name
	}
	return dir + "/" + name
}

func splitRel(rel string) []string {
	if rel == "" || rel == "." {
		return nil
	}
	return strings.Split(rel, "/")
}

// globMatch matches a glob against an entry: a pattern without "/" against
// its name, one with "/" against its path (relative to where the walk
// started), where "**" matches any number of directories.
func globMatch(pattern, label, name string) bool {
	if !strings.Contains(pattern, "/") {
		ok, _ := path.Match(pattern, name)
		return ok
	}
	return matchParts(strings.Split(strings.TrimPrefix(pattern, "/"), "/"), strings.Split(label, "/"))
}

func matchParts(pat, parts []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			if len(pat) == 1 {
				return true
			}
			for i := 0; i <= len(parts); i++ {
				if matchParts(pat[1:], parts[i:]) {
					return true
				}
			}
			return false
		}
		if len(parts) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], parts[0]); !ok {
			return false
		}
		pat, parts = pat[1:], parts[1:]
	}
	return len(parts) == 0
}

// validGlob checks a glob's syntax. The number of "**" is bounded: each
// one multiplies the matching work.
func validGlob(pattern string) error {
	if strings.Count(pattern, "**") > 4 {
		return errors.New(`at most 4 "**" are allowed`)
	}
	for _, p := range strings.Split(pattern, "/") {
		if p == "**" {
			continue
		}
		if _, err := path.Match(p, ""); err != nil {
			return err
		}
	}
	return nil
}
