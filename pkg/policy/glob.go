package policy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"sort"

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
func glob(pattern string, fileOnly bool) (globResult, error) {
	parts := splitPath(pattern)
	for _, p := range parts {
		if p != "**" && hasGlob(p) {
			if _, err := filepath.Match(p, ""); err != nil {
				return globResult{}, fmt.Errorf("bad pattern %q: %v", pattern, err)
			}
		}
	}
	w := walker{fileOnly: fileOnly}
	root, err := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return globResult{}, fmt.Errorf("open /: %w", err)
	}
	w.walk(root, "/", nil, false, parts, 0)
	unix.Close(root)
	sort.Strings(w.res.matches)
	w.res.matches = dedupStrings(w.res.matches)
	return w.res, nil
}

// dirent is one entry of a directory listing.
type dirent struct {
	name string
	typ  uint8 // unix.DT_*; DT_UNKNOWN when the file system does not say
}

type walker struct {
	fileOnly bool
	dirs     int // directories entered by "**"
	res      globResult
	buf      []byte
}

// walk matches parts below the directory open at fd, whose path is dir.
// ents is its listing when listed is set (read at most once per
// directory).
func (w *walker) walk(fd int, dir string, ents []dirent, listed bool, parts []string, depth int) {
	if len(parts) == 0 {
		// The directory itself matches (a "**" at the end).
		if !w.fileOnly {
			w.res.matches = append(w.res.matches, dir)
		}
		return
	}
	part, rest := parts[0], parts[1:]
	if part != "**" && !hasGlob(part) {
		w.step(fd, dir, part, unix.DT_UNKNOWN, rest, depth)
		return
	}
	if !listed {
		ents = w.list(fd)
	}
	if part != "**" {
		for _, e := range ents {
			if ok, _ := filepath.Match(part, e.name); ok {
				w.step(fd, dir, e.name, e.typ, rest, depth)
			}
		}
		return
	}
	// "**" is zero directories, matching rest here with the same listing...
	w.walk(fd, dir, ents, true, rest, depth)
	// ...or one more, recursively.
	if depth >= walkMaxDepth {
		w.res.truncated = true
		return
	}
	for _, e := range ents {
		if (e.typ != unix.DT_DIR && e.typ != unix.DT_UNKNOWN) || walkSkip[e.name] {
			continue
		}
		sub, ok := w.open(fd, e.name, false)
		if !ok {
			continue // not a directory (DT_UNKNOWN), or gone
		}
		w.dirs++
		if w.dirs > walkMaxDirs {
			unix.Close(sub)
			w.res.truncated = true
			return
		}
		w.walk(sub, filepath.Join(dir, e.name), nil, false, parts, depth+1)
		unix.Close(sub)
	}
}

// step goes to the entry name of the directory open at fd: a match when
// no parts are left, else a directory to walk on.
func (w *walker) step(fd int, dir, name string, typ uint8, rest []string, depth int) {
	p := filepath.Join(dir, name)
	if len(rest) == 0 {
		if typ == unix.DT_UNKNOWN {
			var st unix.Stat_t
			if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
				return
			}
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFREG:
				typ = unix.DT_REG
			case unix.S_IFDIR:
				typ = unix.DT_DIR
			}
		}
		if typ == unix.DT_REG || (typ == unix.DT_DIR && !w.fileOnly) {
			w.res.matches = append(w.res.matches, p)
		}
		return
	}
	// A symlink here is followed only when a plain name comes next, as a
	// lookup of the whole path would; a directory to be listed (for a
	// wildcard or "**") must be a real one.
	follow := rest[0] != "**" && !hasGlob(rest[0])
	if typ != unix.DT_DIR && typ != unix.DT_UNKNOWN && !(follow && typ == unix.DT_LNK) {
		return
	}
	sub, ok := w.open(fd, name, follow)
	if !ok {
		return
	}
	w.walk(sub, p, nil, false, rest, depth)
	unix.Close(sub)
}

// open opens the directory name below fd. Unless follow is set, a symlink
// there is not followed (O_NOFOLLOW), also when it replaced a directory
// after the listing: "**" stays on the tree below the pattern's prefix.
func (w *walker) open(fd int, name string, follow bool) (int, bool) {
	flags := unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC
	if !follow {
		flags |= unix.O_NOFOLLOW
	}
	for {
		sub, err := unix.Openat(fd, name, flags, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return sub, err == nil
	}
}

// list reads the directory open at fd, sorted by name so that the walk
// bounds cut at the same place every run. An unreadable directory lists
// as empty: there is nothing in it this user, or the sandbox, could read.
func (w *walker) list(fd int) []dirent {
	if w.buf == nil {
		w.buf = make([]byte, 32<<10)
	}
	var ents []dirent
	for {
		n, err := unix.Getdents(fd, w.buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n <= 0 {
			break
		}
		ents = appendDirents(ents, w.buf[:n])
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].name < ents[j].name })
	return ents
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
