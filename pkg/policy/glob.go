package policy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// Walk bounds for "**" in hide patterns: deeper directories, or more than
// walkMaxDirs of them, are not searched (a warning says so).
const (
	walkMaxDepth = 8
	walkMaxDirs  = 4000
)

// walkSkip are directory names a "**" walk does not enter: VCS metadata and
// package trees that hold no secrets of the project and can be huge.
var walkSkip = map[string]bool{
	".git": true, ".hg": true, ".svn": true,
	"node_modules": true, ".venv": true, "venv": true, "__pycache__": true,
	".tox": true, ".mypy_cache": true, ".pytest_cache": true, ".cache": true,
	"target": true, ".gradle": true, ".terraform": true,
}

// globResult is the expansion of one pattern.
type globResult struct {
	matches   []string
	truncated bool
	// unlisted are directories the walk had to list and could not (no
	// read or no search permission): what they hold is unknown, so a
	// hide pattern hides them whole. A sandbox runs with the caller's
	// uid; it could chmod such a directory back and read it.
	unlisted []string
}

// glob expands pattern (absolute, clean). Only the parts with wildcards are
// patterns; "**" matches any number of directories, walked without
// following symlinks and within the bounds above. Only regular files and
// directories match (not symlinks, devices or sockets); fileOnly keeps just
// regular files.
//
// Every `nsbox run` with a built-in profile walks its workspace this way
// ("$NSBOX_WORKSPACE/**/.env*"), so the walk goes by directory fd: each
// directory is opened once, relative to its parent, and listed once with
// getdents64, whose d_type spares a stat per entry. (A walk by path, with
// an lstat before each open and a second listing for the "zero
// directories" case of "**", cost 23 µs a directory here, 3.5× this.)
// A directory that is only passed through (a plain name comes next) is
// opened O_PATH, which needs no read permission: a search-only (0711)
// ancestor such as a shared /home does not stop the walk.
func glob(pattern string, fileOnly bool) (globResult, error) {
	parts := splitPath(pattern)
	for _, p := range parts {
		if p != "**" && hasGlob(p) {
			if _, err := filepath.Match(p, ""); err != nil {
				return globResult{}, fmt.Errorf("bad pattern %q: %v", pattern, err)
			}
		}
	}
	w := walker{fileOnly: fileOnly, base: "/"}
	for i, p := range parts {
		if p == "**" || hasGlob(p) {
			w.base = "/" + strings.Join(parts[:i], "/")
			break
		}
	}
	root, err := w.open(unix.AT_FDCWD, "/", true, needsList(parts))
	if err != nil {
		return globResult{}, fmt.Errorf("open /: %w", err)
	}
	w.walk(root, "/", nil, false, parts, 0)
	unix.Close(root.fd)
	sort.Strings(w.res.matches)
	w.res.matches = dedupStrings(w.res.matches)
	sort.Strings(w.res.unlisted)
	w.res.unlisted = dedupStrings(w.res.unlisted)
	return w.res, nil
}

// needsList reports whether matching parts at a directory needs its
// listing (a wildcard or "**" comes first).
func needsList(parts []string) bool {
	return len(parts) > 0 && (parts[0] == "**" || hasGlob(parts[0]))
}

// dirent is one entry of a directory listing.
type dirent struct {
	name string
	typ  uint8 // unix.DT_*; DT_UNKNOWN when the file system does not say
}

// dirFD is a directory the walk holds open.
type dirFD struct {
	fd int
	// listable: opened for reading (O_RDONLY). Otherwise O_PATH: passed
	// through, or not readable by this user.
	listable bool
}

type walker struct {
	fileOnly bool
	base     string // the pattern up to its first wildcard
	dirs     int    // directories entered by "**"
	res      globResult
	buf      []byte
}

// walk matches parts below the directory d, whose path is dir. ents is its
// listing when listed is set (read at most once per directory).
func (w *walker) walk(d dirFD, dir string, ents []dirent, listed bool, parts []string, depth int) {
	if len(parts) == 0 {
		// The directory itself matches (a "**" at the end).
		if !w.fileOnly {
			w.res.matches = append(w.res.matches, dir)
		}
		return
	}
	part, rest := parts[0], parts[1:]
	if part != "**" && !hasGlob(part) {
		w.step(d.fd, dir, part, unix.DT_UNKNOWN, rest, depth)
		return
	}
	if !listed {
		var ok bool
		if ents, ok = w.list(d); !ok {
			w.unlisted(d.fd, dir)
		}
	}
	if part != "**" {
		for _, e := range ents {
			if ok, _ := filepath.Match(part, e.name); ok {
				w.step(d.fd, dir, e.name, e.typ, rest, depth)
			}
		}
		return
	}
	// "**" is zero directories, matching rest here with the same listing...
	w.walk(d, dir, ents, true, rest, depth)
	// ...or one more, recursively.
	if depth >= walkMaxDepth {
		w.res.truncated = true
		return
	}
	for _, e := range ents {
		if (e.typ != unix.DT_DIR && e.typ != unix.DT_UNKNOWN) || walkSkip[e.name] {
			continue
		}
		if e.typ == unix.DT_DIR && !w.count() {
			return
		}
		sub, err := w.open(d.fd, e.name, false, true)
		if err != nil {
			if e.typ == unix.DT_DIR && errors.Is(err, unix.EACCES) {
				// dir is readable but not searchable: its
				// subdirectories cannot even be opened.
				w.unlisted(d.fd, dir)
			}
			continue // not a directory (DT_UNKNOWN), or gone
		}
		if e.typ == unix.DT_UNKNOWN && !w.count() {
			unix.Close(sub.fd)
			return
		}
		w.walk(sub, filepath.Join(dir, e.name), nil, false, parts, depth+1)
		unix.Close(sub.fd)
	}
}

// unlisted records dir (open at fd) as one the walk could not look into,
// when a sandbox could open it up again: only a directory owned by this
// uid, whose mode a sandbox (this uid, mapped) may chmod. Another user's
// directory (a root-owned 0700 volume) stays as closed inside as here.
// Only directories from the pattern's first wildcard down count: the part
// before it was resolved already, and hiding an ancestor of it (a shared
// /home) is not what a pattern asks.
func (w *walker) unlisted(fd int, dir string) {
	if !within(dir, w.base) {
		return
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || int(st.Uid) != os.Geteuid() {
		return
	}
	w.res.unlisted = append(w.res.unlisted, dir)
}

// count counts one more directory entered by "**"; false when that is one
// past the bound.
func (w *walker) count() bool {
	w.dirs++
	if w.dirs > walkMaxDirs {
		w.res.truncated = true
		return false
	}
	return true
}

// step goes to the entry name of the directory open at fd: a match when
// no parts are left, else a directory to walk on.
func (w *walker) step(fd int, dir, name string, typ uint8, rest []string, depth int) {
	p := filepath.Join(dir, name)
	if len(rest) == 0 {
		// The type of a candidate comes from lstat, not from d_type:
		// a file this user cannot reach (its directory not searchable)
		// is no match, as in a lookup of the whole path.
		var st unix.Stat_t
		for {
			err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if errors.Is(err, unix.EACCES) {
				w.unlisted(fd, dir) // dir is not searchable
			}
			if err != nil {
				return
			}
			break
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			w.res.matches = append(w.res.matches, p)
		case unix.S_IFDIR:
			if !w.fileOnly {
				w.res.matches = append(w.res.matches, p)
			}
		}
		return
	}
	// A symlink here is followed only when a plain name comes next, as a
	// lookup of the whole path would; a directory to be listed (for a
	// wildcard or "**") must be a real one.
	follow := !needsList(rest)
	if typ != unix.DT_DIR && typ != unix.DT_UNKNOWN && !(follow && typ == unix.DT_LNK) {
		return
	}
	sub, err := w.open(fd, name, follow, !follow)
	if errors.Is(err, unix.EACCES) {
		w.unlisted(fd, dir) // dir is not searchable
	}
	if err != nil {
		return
	}
	w.walk(sub, p, nil, false, rest, depth)
	unix.Close(sub.fd)
}

// open opens the directory name below fd: for reading when list is set
// (falling back to O_PATH when this user may not read it), else O_PATH.
// Unless follow is set, a symlink there is not followed (O_NOFOLLOW), also
// when it replaced a directory after the listing: "**" stays on the tree
// below the pattern's prefix.
func (w *walker) open(fd int, name string, follow, list bool) (dirFD, error) {
	flags := unix.O_DIRECTORY | unix.O_CLOEXEC
	if !follow {
		flags |= unix.O_NOFOLLOW
	}
	if list {
		sub, err := openatRetry(fd, name, flags|unix.O_RDONLY)
		if !errors.Is(err, unix.EACCES) {
			return dirFD{fd: sub, listable: err == nil}, err
		}
	}
	sub, err := openatRetry(fd, name, flags|unix.O_PATH)
	return dirFD{fd: sub}, err
}

func openatRetry(fd int, name string, flags int) (int, error) {
	for {
		sub, err := unix.Openat(fd, name, flags, 0)
		if !errors.Is(err, unix.EINTR) {
			return sub, err
		}
	}
}

// list reads the directory d, sorted by name so that the walk bounds cut
// at the same place every run. ok is false when d cannot be read.
func (w *walker) list(d dirFD) (ents []dirent, ok bool) {
	if !d.listable {
		return nil, false
	}
	if w.buf == nil {
		w.buf = make([]byte, 32<<10)
	}
	for {
		n, err := unix.Getdents(d.fd, w.buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, false
		}
		if n <= 0 {
			break
		}
		ents = appendDirents(ents, w.buf[:n])
	}
	slices.SortFunc(ents, func(a, b dirent) int { return strings.Compare(a.name, b.name) })
	return ents, true
}

// appendDirents parses getdents64 records (struct linux_dirent64: d_ino
// u64, d_off s64, d_reclen u16, d_type u8, d_name NUL-terminated), skipping
// "." and "..". A malformed record ends the parse.
func appendDirents(ents []dirent, b []byte) []dirent {
	const hdr = 19 // offset of d_name
	for len(b) >= hdr {
		reclen := int(binary.NativeEndian.Uint16(b[16:18]))
		if reclen < hdr || reclen > len(b) {
			break
		}
		typ := b[18]
		name := b[hdr:reclen]
		for i, c := range name {
			if c == 0 {
				name = name[:i]
				break
			}
		}
		b = b[reclen:]
		if len(name) == 0 || string(name) == "." || string(name) == ".." {
			continue
		}
		ents = append(ents, dirent{name: string(name), typ: typ})
	}
	return ents
}
