package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// .gitignore support uses go-git's gitignore package: it is maintained
// (with go-git), implements git's pattern rules (negation, anchoring,
// "**", directory-only patterns, per-directory domains) and takes patterns
// as strings, so the files themselves are read here, by fd, like every
// other file.

// Bounds of a walk. The ignore bounds are per walk, over every ignore file
// it loads: the worker is PID 1 of the sandbox and not in its memory
// cgroup, so what a walk holds must not depend on what the workspace holds.
const (
	maxWalkDepth      = 64       // deeper directories are not entered
	maxDirNames       = 100_000  // entries read from one directory
	maxWalkNameBytes  = 16 << 20 // names held by the levels of a walk at once
	maxIgnoreFile     = 1 << 20  // bytes of one .gitignore
	maxIgnoreFiles    = 256      // ignore files loaded per walk
	maxIgnoreBytes    = 2 << 20  // bytes of all ignore files of a walk
	maxIgnorePatterns = 10_000   // patterns of all ignore files of a walk
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
	case unix.S_IFCHR:
		// The /dev/null the mount layer binds over a hidden file
		// (notRegular): said as what it means.
		var st unix.Stat_t
		if e.dirfd >= 0 && unix.Fstatat(e.dirfd, e.name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && hiddenNode(&st) {
			return "hidden"
		}
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
	// truncated is set when a directory had more than maxDirNames entries,
	// the levels in progress held maxWalkNameBytes of names, or the depth
	// bound was hit.
	truncated bool
	// nameBytes is what the names of the levels in progress take.
	nameBytes int
	// What the walk's ignore files have used of the bounds above.
	ignoreFiles, ignoreBytes, ignorePatterns int
	// ignoreCuts says which ignore files were honoured only in part (or
	// not at all) and why: at most a few, since a file is cut only at a
	// bound and the walk's bounds end loading (ignoreFull).
	ignoreCuts []string
	// ignoreFull is set once a bound of the walk is reached: later ignore
	// files cannot add patterns. Those already loaded keep applying.
	ignoreFull bool
	// placeholders are workspace-relative paths the walk leaves out: the
	// empty placeholders the sandbox made for missing protected paths
	// (.mcp.json, .vscode/ ...), which are not the workspace's content.
	placeholders map[string]bool
}

// placeholderEnv is a ToolEnv that knows the placeholders its sandbox made
// (the worker's does).
type placeholderEnv interface{ Placeholders() []string }

// placeholdersIn returns env's placeholders below the workspace root, as
// paths relative to it; nil when env does not know them.
func placeholdersIn(env sandbox.ToolEnv, root *Root) map[string]bool {
	pe, ok := env.(placeholderEnv)
	if !ok {
		return nil
	}
	out := map[string]bool{}
	for _, p := range pe.Placeholders() {
		for _, base := range []string{root.dir, root.real} {
			if rel, ok := strings.CutPrefix(p, strings.TrimSuffix(base, "/")+"/"); ok {
				out[rel] = true
			}
		}
	}
	return out
}

// ignoreWarning is what a tool's result says when ignore files were not
// wholly honoured, "" when they were.
func (w *walker) ignoreWarning() string {
	if len(w.ignoreCuts) == 0 {
		return ""
	}
	msg := strings.Join(w.ignoreCuts, "; ")
	if w.ignoreFull {
		msg += "; later .gitignore files were not honoured"
	}
	return msg + `, so ignored files may be included, or files that a dropped "!" pattern re-includes left out (narrow the path, or set include_ignored)`
}

// ignoreSet is the ignore patterns that apply in one directory: its own,
// and through parent every ancestor's. A child shares its parent's set,
// so nothing is copied per level: the patterns a walk holds are those of
// the files it loaded, once.
type ignoreSet struct {
	parent   *ignoreSet
	patterns []gitignore.Pattern
}

// with returns the set for a directory whose own file gave ps.
func (s *ignoreSet) with(ps []gitignore.Pattern) *ignoreSet {
	if len(ps) == 0 {
		return s
	}
	return &ignoreSet{parent: s, patterns: ps}
}

// match is go-git's matcher over the chain: the last pattern that matches
// decides, and a directory's own patterns come after its ancestors'.
func (s *ignoreSet) match(p []string, isDir bool) bool {
	for ; s != nil; s = s.parent {
		for i := len(s.patterns) - 1; i >= 0; i-- {
			if m := s.patterns[i].Match(p, isDir); m != gitignore.NoMatch {
				return m == gitignore.Exclude
			}
		}
	}
	return false
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
	var ig *ignoreSet
	if w.gitignore {
		if ig, err = w.ancestorsIgnore(ctx, rel); err != nil {
			dir.Close()
			return "", err
		}
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

func (w *walker) dir(ctx context.Context, dir *os.File, rel, label string, depth int, ig *ignoreSet, fn func(walkEntry) error) error {
	defer dir.Close()
	// Security (worker memory): a level's names are held while the walk
	// is below it, so they are bounded over the levels in progress, not
	// per directory alone: 64 levels of 100,000 long names (hard links
	// cost no inode, a .gitignore hides them from max_entries) would be
	// ~1.7 GB outside the sandbox's memory limit (review 26).
	names, held, full, err := readNames(dir, maxWalkNameBytes-w.nameBytes)
	w.nameBytes += held
	defer func() { w.nameBytes -= held }()
	if full {
		w.truncated = true
	}
	if err != nil && len(names) == 0 {
		return nil // unreadable directory: nothing to list
	}
	sort.Strings(names)
	if w.gitignore {
		// Security (worker memory): the parent's set is shared, not
		// copied, and readIgnore keeps the walk's total under its bounds.
		ps, err := w.readIgnore(ctx, joinRel(rel, ".gitignore"), splitRel(rel))
		if err != nil {
			return err
		}
		ig = ig.with(ps)
	}
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
		if w.gitignore && ig.match(splitRel(e.rel), e.isDir()) {
			continue
		}
		if w.placeholders[e.rel] {
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
		if !e.isDir() || !w.recursive || strings.EqualFold(name, ".git") {
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

// readNames reads at most maxDirNames entry names, and no more once
// they take budget bytes (counted with a string header each); held is
// what they take, full whether a bound stopped the read.
func readNames(dir *os.File, budget int) (names []string, held int, full bool, err error) {
	const header = 16
	for {
		if len(names) >= maxDirNames || held >= budget {
			return names, held, true, nil
		}
		batch, err := dir.Readdirnames(min(1024, maxDirNames-len(names)))
		for _, n := range batch {
			held += len(n) + header
		}
		names = append(names, batch...)
		if err == io.EOF {
			return names, held, false, nil
		}
		if err != nil {
			return names, held, false, err
		}
	}
}

// ancestorsIgnore loads .git/info/exclude and the .gitignore files of the
// root and of every directory above rel (rel's own is loaded by dir).
func (w *walker) ancestorsIgnore(ctx context.Context, rel string) (*ignoreSet, error) {
	var ig *ignoreSet
	add := func(file string, domain []string) error {
		ps, err := w.readIgnore(ctx, file, domain)
		ig = ig.with(ps)
		return err
	}
	if err := add(".git/info/exclude", nil); err != nil || rel == "." {
		return ig, err
	}
	if err := add(".gitignore", nil); err != nil {
		return nil, err
	}
	parts := splitRel(rel)
	for i := 1; i < len(parts); i++ {
		if err := add(strings.Join(parts[:i], "/")+"/.gitignore", parts[:i:i]); err != nil {
			return nil, err
		}
	}
	return ig, nil
}

// readIgnore parses one ignore file (opened by fd, no symlink followed,
// size-bounded); domain is the directory it applies to. A file is honoured
// up to the bounds: one past them is read up to what is left of the walk's
// bytes (at most maxIgnoreFile), cut at its last complete line, and its
// patterns kept up to the walk's pattern bound; the cut is recorded for the
// result's warning. Once a bound of the walk is reached, later files are
// not read: a workspace cannot make a walk hold more than maxIgnoreFiles
// files, maxIgnoreBytes of ignore text or maxIgnorePatterns patterns. The
// only error is the context's.
func (w *walker) readIgnore(ctx context.Context, rel string, domain []string) ([]gitignore.Pattern, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if w.ignoreFull {
		return nil, nil
	}
	fd, err := w.root.openNoFollow(rel, unix.O_PATH)
	if err != nil {
		return nil, nil
	}
	f, err := regularFile(fd, rel)
	if err != nil {
		return nil, nil
	}
	defer f.Close()
	// Security (worker memory): every bound is checked before the file
	// is read or its patterns are kept.
	if w.ignoreFiles >= maxIgnoreFiles {
		w.cutIgnore(fmt.Sprintf("the walk reached its bound of %d ignore files at %s, which was not honoured", maxIgnoreFiles, rel))
		return nil, nil
	}
	w.ignoreFiles++
	room := min(maxIgnoreFile, maxIgnoreBytes-w.ignoreBytes)
	data, err := io.ReadAll(io.LimitReader(f, int64(room)+1))
	if err != nil {
		return nil, nil
	}
	var cut string
	if len(data) > room {
		// What fits, up to its last complete line: a line cut in
		// the middle would be another pattern.
		data = data[:room]
		if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
			data = data[:i+1]
		} else {
			data = data[:0]
		}
		// What was read counts, kept or not: the walk's byte budget is
		// what it reads.
		w.ignoreBytes += room
		switch {
		case room < maxIgnoreFile:
			cut = fmt.Sprintf("the walk reached its bound of %d bytes of ignore files at %s", maxIgnoreBytes, rel)
		case w.ignoreBytes >= maxIgnoreBytes:
			cut = fmt.Sprintf("%s is larger than %d bytes, and the walk reached its bound of %d bytes of ignore files there", rel, maxIgnoreFile, maxIgnoreBytes)
		default:
			cut = fmt.Sprintf("%s is larger than %d bytes", rel, maxIgnoreFile)
		}
	} else {
		w.ignoreBytes += len(data)
	}
	ps, lines, err := parseIgnore(ctx, string(data), domain, maxIgnorePatterns-w.ignorePatterns)
	if err != nil && err != errTooManyPatterns {
		return nil, err
	}
	w.ignorePatterns += len(ps)
	if err == errTooManyPatterns {
		// The patterns' cut comes before the bytes' one (if any) in
		// the file: it says where the file stopped being honoured.
		if cut != "" {
			w.ignoreCuts = append(w.ignoreCuts, cut)
		}
		cut = fmt.Sprintf("the walk reached its bound of %d ignore patterns at %s", maxIgnorePatterns, rel)
	}
	if cut != "" {
		if len(ps) > 0 {
			cut += fmt.Sprintf(", honoured up to line %d", lines)
		} else {
			cut += ", which was not honoured"
		}
		w.cutIgnore(cut)
	}
	return ps, nil
}

// cutIgnore records that an ignore file was honoured in part or not at all.
// Once a bound of the walk is reached, later files are not read (they
// could add no pattern), so a file that is not honoured always has a cut
// that says so.
func (w *walker) cutIgnore(msg string) {
	w.ignoreCuts = append(w.ignoreCuts, msg)
	if w.ignoreFiles >= maxIgnoreFiles || w.ignoreBytes >= maxIgnoreBytes || w.ignorePatterns >= maxIgnorePatterns {
		w.ignoreFull = true
	}
}

var errTooManyPatterns = errors.New("too many ignore patterns")

// parseIgnore parses at most max patterns. It returns them and the number
// of lines they take, with errTooManyPatterns if the data has more.
func parseIgnore(ctx context.Context, data string, domain []string, max int) ([]gitignore.Pattern, int, error) {
	var ps []gitignore.Pattern
	i := 0
	for ; data != ""; i++ {
		if i%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, 0, err
			}
		}
		var line string
		line, data, _ = strings.Cut(data, "\n")
		line = strings.TrimSuffix(line, "\r")
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		if len(ps) >= max {
			return ps, i, errTooManyPatterns
		}
		ps = append(ps, gitignore.ParsePattern(line, domain))
	}
	return ps, i, nil
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
		return nil, notRegular(name, &st)
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
