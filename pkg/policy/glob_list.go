package policy

import (
	"encoding/binary"
	"errors"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Reading a directory for the walk (glob.go): only what it uses of it.

// keep reports whether walk can use the entry name (of type typ) of a
// directory it lists for the states plain (sorted by name) and wild, and
// for "**" when deep: a directory "**" goes into (or one of unknown
// type), a symlink it collects, a plain name it looks up, a name a
// wildcard matches. Nothing else is kept.
//
// Invariant: a listing holds what the walk uses of it, not the whole
// directory: a sandbox writes the workspace, and a directory of
// 2,000,000 files it left made every later start and audit hold ~213 MB
// for its listing (review 71 #7). Directories are kept (and, on a file
// system that gives no d_type, every entry): "**" goes into them, and
// more than walkMaxDirs stop the walk.
func (w *walker) keep(name []byte, typ uint8, plain, wild []walkState, deep bool) bool {
	if deep && (typ == unix.DT_DIR || typ == unix.DT_UNKNOWN) && !walkSkip[string(name)] {
		return true // descend (subdirs)
	}
	if deep && w.collectLinks && typ == unix.DT_UNKNOWN {
		return true // collected if it is a link (walk)
	}
	// Counted here, as the listing is read: a directory of millions of
	// links holds no more than the bound.
	if deep && w.collectLinks && typ == unix.DT_LNK && w.linkCount.Add(1) <= walkMaxLinks {
		return true // collected (walk)
	}
	if _, found := slices.BinarySearchFunc(plain, name, func(s walkState, n []byte) int {
		// Compared, not converted: string(n) in a comparison is not
		// copied to the heap, once per entry of the directory.
		switch p := s.parts[0]; {
		case p < string(n):
			return -1
		case p > string(n):
			return 1
		}
		return 0
	}); found {
		return true
	}
	for _, s := range wild {
		if w.matchPart(s, string(name)) {
			return true
		}
	}
	return false
}

// list reads the directory d, the entries keep says to keep only, sorted
// by name so that the walk bounds cut at the same place every run. ok is
// false when d cannot be read. It reads in batches of w.buf and filters
// each before the next: what it holds is what it keeps, whatever the
// size of the directory.
func (w *walker) list(d dirFD, keep func(name []byte, typ uint8) bool) (ents []dirent, ok bool) {
	if !d.listable {
		return nil, false
	}
	if w.buf == nil {
		w.buf = make([]byte, 32<<10)
	}
	read := 0
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
		var got int
		ents, got = appendDirents(ents, w.buf[:n], keep)
		read += got
	}
	slices.SortFunc(ents, func(a, b dirent) int { return strings.Compare(a.name, b.name) })
	if onList != nil {
		onList(read, len(ents))
	}
	return ents, true
}

// direntTypeUnknown, when set (tests only), has every listing read as a
// file system that gives no d_type would give it.
var direntTypeUnknown = false

// isLinkAt reports whether the entry name of the directory open at fd is a
// symlink (fstatat, not followed).
func isLinkAt(fd int, name string) bool {
	var st unix.Stat_t
	for {
		err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return err == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
	}
}

// walkListAll keeps every entry of a listing, as the walk did before
// keep. A variable only so that a test can compare.
var walkListAll = false

// onList, when set (tests only), is told, for each directory the walk
// lists, how many entries it read and how many it kept.
var onList func(read, kept int)

// appendDirents parses getdents64 records (struct linux_dirent64: d_ino
// u64, d_off s64, d_reclen u16, d_type u8, d_name NUL-terminated), skipping
// "." and "..", and appends those keep keeps (all when keep is nil). read
// counts the entries parsed. A malformed record ends the parse.
func appendDirents(ents []dirent, b []byte, keep func(name []byte, typ uint8) bool) (_ []dirent, read int) {
	const hdr = 19 // offset of d_name
	for len(b) >= hdr {
		reclen := int(binary.NativeEndian.Uint16(b[16:18]))
		if reclen < hdr || reclen > len(b) {
			break
		}
		typ := b[18]
		if direntTypeUnknown {
			typ = unix.DT_UNKNOWN
		}
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
		read++
		if keep == nil || keep(name, typ) {
			ents = append(ents, dirent{name: string(name), typ: typ})
		}
	}
	return ents, read
}
