package policy

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Walk bounds for "**", per pattern: deeper directories are not searched
// (a warning says so); more than walkMaxDirs of them stop the run, as an
// earlier sandbox could create that many to push a secret or a
// repository past the bound (resolve.go). ~6 µs a directory here: the
// bound is ~0.15 s of walking.
const walkMaxDepth = 8

// walkMaxDirs is a variable only so that tests can lower it.
var walkMaxDirs = 25000

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
	matches []string
	// truncated: directories deeper than walkMaxDepth were not searched;
	// truncatedAt is the first directory whose subdirectories were not.
	truncated   bool
	truncatedAt string
	// tooMany: the pattern entered walkMaxDirs directories and stopped
	// there; what it would have matched beyond is unknown.
	tooMany bool
	// unlisted are directories the walk had to list and could not (no
	// read or no search permission): what they hold is unknown, so a
	// hide pattern hides them whole. A sandbox runs with the caller's
	// uid; it could chmod such a directory back and read it.
	unlisted []string
	// foreign are the directories the walk could not look into that are
	// not the user's (a sandbox with a range of host ids can make one):
	// the user may still reach what they hold by name. Only the audit
	// looks at them.
	foreign []string
}

// globPattern is one pattern for globAll: an absolute, clean path whose
// parts may hold wildcards. fileOnly keeps just regular files.
type globPattern struct {
	path     string
	fileOnly bool
	links    bool // symlinks match too (the git audit: git follows a .git symlink)
	maxDepth int  // levels "**" goes down; 0: the walk's (walkMaxDepth)
}

// glob expands one pattern; see globAll.
func glob(pattern string, fileOnly bool) (globResult, error) {
	res, err := globAll([]globPattern{{path: pattern, fileOnly: fileOnly}})
	if err != nil {
		return globResult{}, err
	}
	return res[0], nil
}

// globAll expands patterns, in one walk: a directory that several
// patterns reach is opened and listed once for all of them. Only the
// parts with wildcards are patterns; "**" matches any number of
// directories, walked without following symlinks and within the bounds
// above (which hold for the walk as a whole). Only regular files and
// directories match (not symlinks, devices or sockets).
//
// Every `nsbox run` with a built-in profile walks its workspace this way
// ("$NSBOX_WORKSPACE/**/.env*" to hide, "$NSBOX_WORKSPACE/**/.git" to
// protect), so the walk goes by directory fd: each directory is opened
// once, relative to its parent, and listed once with getdents64, whose
// d_type spares a stat per entry. From the first level of "**" with
// walkForkDirs directories on, two goroutines share the walk (walkForks;
// 0.62× for 410 directories). (A walk by path, with an lstat before each
// open and a second listing for the "zero directories" case of "**", cost
// 23 µs a directory here, 3.5× the serial walk by fd; a second walk for
// the second pattern would cost the whole walk again.) A directory that is only
// passed through (a plain name comes next) is opened O_PATH, which needs
// no read permission: a search-only (0711) ancestor such as a shared /home
// does not stop the walk.
func globAll(patterns []globPattern) ([]globResult, error) {
	return globAllDepth(patterns, walkMaxDepth)
}

// globAllDepth is globAll with another depth bound (the git audit's).
func globAllDepth(patterns []globPattern, maxDepth int) ([]globResult, error) {
	res, _, err := globAllLinks(patterns, maxDepth, false)
	return res, err
}

// globAllLinks is globAllDepth that also returns, when collect is set,
// the symlinks in every directory a "**" walked (the audit follows those
// to what the walk does not enter).
func globAllLinks(patterns []globPattern, maxDepth int, collect bool) ([]globResult, []string, error) {
	return globAllLinksAt(nil, patterns, maxDepth, collect)
}

// globAllLinksAt is globAllLinks that starts each pattern whose plain
// prefix runs through a directory of anchors (path → an open directory
// fd, the caller's) at that fd instead of looking the prefix up from
// "/": the end-of-run audit holds its writable roots open once it has
// checked them, and a running sandbox of another nsbox that can rename
// a directory above a root cannot steer this walk into a tree of its
// choosing (review 71).
func globAllLinksAt(anchors map[string]int, patterns []globPattern, maxDepth int, collect bool) ([]globResult, []string, error) {
	for _, gp := range patterns {
		for _, p := range splitPath(gp.path) {
			if p != "**" && hasGlob(p) {
				if _, err := filepath.Match(p, ""); err != nil {
					return nil, nil, fmt.Errorf("bad pattern %q: %v", gp.path, err)
				}
			}
		}
	}
	walked, alts, of := groupNames(patterns)
	res, links, err := globWalk(anchors, walked, alts, maxDepth, collect)
	if err != nil && !errors.Is(err, errTooManyLinks) {
		return nil, nil, err
	}
	// errTooManyLinks comes with what the walk found: the caller decides.
	walkErr := err
	if of == nil {
		return res, links, walkErr
	}
	// Each pattern's result from its group's: the matches of its name,
	// and the rest (bounds, unlisted directories) as the group's, which
	// is what its own walk would have met.
	out := make([]globResult, len(patterns))
	for i, g := range of {
		r := res[g]
		out[i] = r
		if alts[g] == nil {
			continue
		}
		name := unescapeGlob(filepath.Base(patterns[i].path))
		out[i].matches = nil
		for _, m := range r.matches {
			if filepath.Base(m) == name {
				out[i].matches = append(out[i].matches, m)
			}
		}
		out[i].unlisted, out[i].foreign = slices.Clone(r.unlisted), slices.Clone(r.foreign)
	}
	return out, links, walkErr
}

// globWalk is globAllLinksAt for valid patterns, with alts[i] the names
// the last part of patterns[i] stands for (nil: the part itself).
func globWalk(anchors map[string]int, patterns []globPattern, alts []map[string]bool, maxDepth int, collect bool) ([]globResult, []string, error) {
	n := len(patterns)
	w := walker{pats: make([]walkPattern, n), res: make([]globResult, n), dirs: make([]atomic.Int64, n), seen: make([]int, n), forks: walkForks, maxDepth: maxDepth, collectLinks: collect, linkCount: new(atomic.Int64)}
	states := make([]walkState, len(patterns))
	for i, gp := range patterns {
		parts := splitPath(gp.path)
		w.pats[i] = walkPattern{fileOnly: gp.fileOnly, links: gp.links, base: "/", maxDepth: gp.maxDepth, glob: make([]bool, len(parts)), alts: alts[i]}
		for j, p := range parts {
			w.pats[i].glob[j] = p != "**" && hasGlob(p)
			if p != "**" && !w.pats[i].glob[j] {
				parts[j] = unescapeGlob(p) // a plain name: looked up as it is
			}
		}
		for j, p := range parts {
			if p == "**" || w.pats[i].glob[j] {
				w.pats[i].base = "/" + strings.Join(parts[:j], "/")
				break
			}
		}
		states[i] = walkState{pat: i, parts: parts}
	}
	// Each state from "/", or from the deepest anchor its plain prefix
	// runs through (the walk counts depth from a pattern's first "**",
	// so where it starts does not change its bounds).
	from := map[string][]walkState{}
	for i, s := range states {
		at := anchorOf(anchors, s.parts, w.pats[i].glob)
		n := len(splitPath(at))
		from[at] = append(from[at], walkState{pat: i, parts: s.parts[n:]})
	}
	for _, at := range slices.Sorted(maps.Keys(from)) {
		list := slices.ContainsFunc(from[at], w.needsList)
		var d dirFD
		var err error
		if at == "/" {
			d, err = w.open(unix.AT_FDCWD, "/", true, list)
		} else {
			// The anchor itself, opened again for reading: "." below
			// its fd is that directory whatever its path leads to now.
			d, err = w.open(anchors[at], ".", true, list)
			if errors.Is(err, unix.EACCES) {
				// "." is a lookup, which needs search permission
				// on the anchor itself (a workspace the sandbox
				// made 0000): walked from the fd as it is, not
				// listable, as a step into it would have been.
				var fd int
				fd, err = unix.FcntlInt(uintptr(anchors[at]), unix.F_DUPFD_CLOEXEC, 0)
				d = dirFD{fd: fd}
			}
		}
		if err != nil {
			return nil, nil, fmt.Errorf("open %s: %w", at, err)
		}
		w.walk(d, at, nil, false, from[at], 0)
		unix.Close(d.fd)
	}
	for i := range w.res {
		r := &w.res[i]
		sort.Strings(r.matches)
		r.matches = dedupStrings(r.matches)
		sort.Strings(r.unlisted)
		r.unlisted = dedupStrings(r.unlisted)
		sort.Strings(r.foreign)
		r.foreign = dedupStrings(r.foreign)
	}
	sort.Strings(w.links)
	if w.linkCount.Load() > walkMaxLinks {
		return w.res, dedupStrings(w.links), errTooManyLinks
	}
	return w.res, dedupStrings(w.links), nil
}

// anchorOf returns the deepest path of anchors whose parts lead parts
// (a pattern's, as plain names: glob tells the wildcards), with a part of
// the pattern left below it; "/" when there is none.
func anchorOf(anchors map[string]int, parts []string, glob []bool) string {
	best, bestLen := "/", 0
	for p := range anchors {
		ap := splitPath(p)
		if len(ap) <= bestLen || len(ap) >= len(parts) {
			continue
		}
		ok := true
		for j, c := range ap {
			if glob[j] || parts[j] == "**" || parts[j] != c {
				ok = false
				break
			}
		}
		if ok {
			best, bestLen = p, len(ap)
		}
	}
	return best
}

// needsList reports whether matching the parts s has left at a directory
// needs its listing (a wildcard or "**" comes first). Read from the
// pattern's flags, not the part: a plain name may hold "[" or "*"
// (unescaped from the pattern).
func (w *walker) needsList(s walkState) bool {
	return len(s.parts) > 0 && (s.parts[0] == "**" || w.isGlob(s))
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

type walkPattern struct {
	fileOnly, links bool
	base            string // the pattern up to its first wildcard
	maxDepth        int    // 0: the walk's
	// glob says, for each part of the pattern, whether it is a wildcard
	// (not "**"): looked up by a state's place instead of scanning the
	// part in every directory (isGlob).
	glob []bool
	// alts, when set, are the names the last part stands for
	// (groupNames).
	alts map[string]bool
}

// walkState is where one pattern stands in the walk: the parts it has
// left to match below the directory at hand.
type walkState struct {
	pat   int
	parts []string
	// lag is how many of the directories above that "**" did not count
	// were entered by the "**" descent all the same (a wildcard's
	// directory walked on with it, see walk): depth-lag is this state's
	// own depth.
	lag int
}

type walker struct {
	pats []walkPattern
	res  []globResult // by pattern
	// dirs counts, by pattern, the directories "**" entered: each
	// pattern has its own budget, so that one (a hide with a base of its
	// own) does not run out on the directories another one walked. Shared
	// with a forked walker.
	dirs []atomic.Int64
	// seen marks, for admit, the patterns a directory was counted for.
	seen []int
	gen  int
	buf  []byte
	// arena holds the per-directory state lists of the calls of walk in
	// progress (take).
	arena []walkState
	// forks is how many more walkers this walk may start (fork).
	forks    int
	maxDepth int
	// links, when collecting (globAllLinks), are the symlinks found in
	// the directories "**" walked.
	collectLinks bool
	links        []string
	// linkCount counts the links collected, shared with forked walkers:
	// past walkMaxLinks no more are kept (errTooManyLinks).
	linkCount *atomic.Int64
}

// walkMaxLinks bounds the symlinks a walk collects: a sandbox that leaves
// millions of them must not make every later start and audit hold them
// all (review 73). A variable only so that tests can lower it.
var walkMaxLinks int64 = 100000

// errTooManyLinks is a walk that met more than walkMaxLinks symlinks: it
// did not collect the rest.
var errTooManyLinks = errors.New("more symlinks than the walk collects")

// walkForks is how many walkers a walk adds to its own at the first level
// of "**" with enough directories: the directories a run walks are opened
// and listed on two CPUs (the worker that waits for the policy leaves one
// idle). Each walker lists into a buffer of its own; results are merged.
const (
	walkForks    = 1
	walkForkDirs = 8 // fewer directories at that level: not worth a goroutine
)

// fork returns a walker for a share of the walk: the same patterns and
// budgets, results of its own (merge adds them back).
func (w *walker) fork() *walker {
	return &walker{pats: w.pats, res: make([]globResult, len(w.res)), dirs: w.dirs, seen: make([]int, len(w.seen)), maxDepth: w.maxDepth, collectLinks: w.collectLinks, linkCount: w.linkCount}
}

// take returns an empty slice of capacity n from the arena. Calls of walk
// nest, and each gives back what it took when it returns; a nested call
// that outgrows the arena moves to a new one, twice as big, the outer
// calls keep the lists they hold in the old one, and the walk goes on in
// the new one (walk).
func (w *walker) take(n int) []walkState {
	if cap(w.arena)-len(w.arena) < n {
		w.arena = make([]walkState, 0, max(2*cap(w.arena), n+256))
	}
	l := len(w.arena)
	w.arena = w.arena[:l+n]
	return w.arena[l : l : l+n]
}

// matchPart reports whether name matches the next part of s.
func (w *walker) matchPart(s walkState, name string) bool {
	if a := w.pats[s.pat].alts; a != nil && len(s.parts) == 1 {
		return a[name]
	}
	ok, _ := filepath.Match(s.parts[0], name)
	return ok
}

// isGlob reports whether the next part of s is a wildcard (not "**").
func (w *walker) isGlob(s walkState) bool {
	g := w.pats[s.pat].glob
	return g[len(g)-len(s.parts)]
}

// depthOf is the depth bound of pattern i.
func (w *walker) depthOf(i int) int {
	if d := w.pats[i].maxDepth; d > 0 {
		return d
	}
	return w.maxDepth
}

// merge adds what a forked walker found.
func (w *walker) merge(o *walker) {
	w.links = append(w.links, o.links...)
	for i := range w.res {
		r, x := &w.res[i], &o.res[i]
		r.matches = append(r.matches, x.matches...)
		r.unlisted = append(r.unlisted, x.unlisted...)
		r.foreign = append(r.foreign, x.foreign...)
		r.tooMany = r.tooMany || x.tooMany
		if x.truncated && (!r.truncated || x.truncatedAt < r.truncatedAt) {
			r.truncated, r.truncatedAt = true, x.truncatedAt
		}
	}
}

// walk matches states below the directory d, whose path is dir. ents is
// its listing when listed is set (read at most once per directory).
func (w *walker) walk(d dirFD, dir string, ents []dirent, listed bool, states []walkState, depth int) {
	// Sort the states by what they need next. A "**" also stands for
	// zero directories: its rest is matched here too, with the same
	// listing.
	// Sized once, from the walker's arena (given back when this call
	// returns): growing and allocating these slices in every directory
	// was most of the walk's CPU with the base profile's twenty patterns.
	saved := w.arena
	defer func() {
		// A call below this one that outgrew the arena moved to a
		// bigger one (take). Its lists are dead now, and no call in
		// progress holds any of that arena (all take at their start,
		// before they call walk), so it is kept, empty, for the calls
		// that follow: going back to the small one made every later
		// call that needed as much allocate its own again (13 MB a
		// walk with 31 "**" patterns, against 0.46 MB with 18).
		if cap(w.arena) != cap(saved) {
			w.arena = w.arena[:0]
			return
		}
		w.arena = saved
	}()
	plain := w.take(2 * len(states))
	wild := w.take(len(states))
	deep := w.take(len(states))
	var sortOut func(s walkState)
	sortOut = func(s walkState) {
		switch {
		case len(s.parts) == 0:
			// The directory itself matches (a "**" at the end).
			if !w.pats[s.pat].fileOnly {
				w.res[s.pat].matches = append(w.res[s.pat].matches, dir)
			}
		case s.parts[0] == "**":
			deep = append(deep, s)
			sortOut(walkState{s.pat, s.parts[1:], s.lag})
		case w.isGlob(s):
			wild = append(wild, s)
		default:
			plain = append(plain, s)
		}
	}
	for _, s := range states {
		sortOut(s)
	}
	if !listed && len(wild)+len(deep) > 0 {
		// Sorted first, for the listing's lookups of the names (keep).
		slices.SortStableFunc(plain, func(a, b walkState) int { return strings.Compare(a.parts[0], b.parts[0]) })
		var ok bool
		p, wl, dp := plain, wild, len(deep) > 0
		keep := func(name []byte, typ uint8) bool { return w.keep(name, typ, p, wl, dp) }
		if walkListAll {
			keep = nil
		}
		if ents, ok = w.list(d, keep); !ok {
			w.unlisted(d.fd, dir, append(wild, deep...))
		}
		listed = ok
		if !ok {
			// Unlisted, a plain name is still looked up (the loop
			// below), as a lookup of the whole path would: so is each
			// name a group of patterns stands for.
			for _, s := range wild {
				if a := w.pats[s.pat].alts; a != nil && len(s.parts) == 1 {
					for _, name := range slices.Sorted(maps.Keys(a)) {
						w.step(d.fd, dir, name, unix.DT_UNKNOWN, []walkState{{s.pat, nil, s.lag}}, depth)
					}
				}
			}
		}
	}
	// A plain name is looked up as in a path without wildcards, once for
	// all the states that name it (patterns with a common prefix walk on
	// together). When the directory was listed anyway, the listing says
	// whether the name is there (and spares a stat of every directory for
	// "**/.git").
	if listed {
		// Most names are not there ("**/.vscode" looks in every
		// directory): those are dropped.
		kept := plain[:0]
		for _, s := range plain {
			if _, found := slices.BinarySearchFunc(ents, s.parts[0], func(e dirent, n string) int { return strings.Compare(e.name, n) }); found {
				kept = append(kept, s)
			}
		}
		plain = kept
	}
	slices.SortStableFunc(plain, func(a, b walkState) int { return strings.Compare(a.parts[0], b.parts[0]) })
	for i := 0; i < len(plain); {
		name, typ := plain[i].parts[0], uint8(unix.DT_UNKNOWN)
		var next []walkState
		for ; i < len(plain) && plain[i].parts[0] == name; i++ {
			next = append(next, walkState{plain[i].pat, plain[i].parts[1:], plain[i].lag})
		}
		if listed {
			j, found := slices.BinarySearchFunc(ents, name, func(e dirent, n string) int { return strings.Compare(e.name, n) })
			if !found {
				continue
			}
			typ = ents[j].typ
		}
		w.step(d.fd, dir, name, typ, next, depth)
	}
	// The subdirectories "**" goes on into, and the states that still
	// may (patterns at their depth bound stop here, truncated only when
	// there was somewhere to go).
	var subdirs []dirent
	var deeper []walkState
	if len(deep) > 0 {
		for _, e := range ents {
			if (e.typ == unix.DT_DIR || e.typ == unix.DT_UNKNOWN) && !walkSkip[e.name] {
				subdirs = append(subdirs, e)
			}
			switch {
			case !w.collectLinks:
			case e.typ == unix.DT_LNK:
				// Counted as the listing was read (keep), or kept for
				// a pattern all the same.
				w.links = append(w.links, dir+"/"+e.name)
			case e.typ == unix.DT_UNKNOWN && isLinkAt(d.fd, e.name):
				// A file system that gives no d_type (ext2 without
				// its filetype feature, some network ones) names no
				// entry a link: each is looked at (review 73; the
				// audit's link pass saw no link there).
				if w.linkCount.Add(1) <= walkMaxLinks {
					w.links = append(w.links, dir+"/"+e.name)
				}
			}
		}
		deeper = deep[:0] // filtered in place: deep is this call's own
		for _, s := range deep {
			if depth-s.lag < w.depthOf(s.pat) {
				deeper = append(deeper, s)
			} else if len(subdirs) > 0 {
				w.truncate([]walkState{s}, dir)
			}
		}
	}
	// What a wildcard leads into a directory that "**" enters too is
	// walked there on the same descent (carried): "*/**/.vscode" beside
	// "**/.git" walked the whole tree twice, once for each. A wildcard
	// followed by "**" never leads into a directory "**" skips
	// (walkSkip: node_modules, .venv ...), which "**" would walk whole.
	var carried map[string][]walkState
	if len(wild) > 0 {
		descended := len(deeper) > 0
		var next []walkState
		for _, e := range ents {
			next = next[:0]
			for _, s := range wild {
				if !w.matchPart(s, e.name) {
					continue
				}
				n := walkState{s.pat, s.parts[1:], s.lag}
				switch {
				case len(n.parts) > 0 && n.parts[0] == "**" && walkSkip[e.name]:
				case descended && w.needsList(n) && (e.typ == unix.DT_DIR || e.typ == unix.DT_UNKNOWN) && !walkSkip[e.name]:
					// One level deeper than step would count it.
					n.lag++
					if carried == nil {
						carried = map[string][]walkState{}
					}
					carried[e.name] = append(carried[e.name], n)
				default:
					next = append(next, n)
				}
			}
			if len(next) > 0 {
				w.step(d.fd, dir, e.name, e.typ, next, depth)
			}
		}
	}
	if deep = deeper; len(deep) == 0 {
		return
	}
	if w.forks > 0 && len(subdirs) >= walkForkDirs {
		// Every other subdirectory to a second walker. The parent's fd
		// stays open until both are done.
		w.forks = 0
		o := w.fork()
		var mine, theirs []dirent
		for i, e := range subdirs {
			if i%2 == 0 {
				mine = append(mine, e)
			} else {
				theirs = append(theirs, e)
			}
		}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			o.descend(d, dir, theirs, deep, carried, depth)
		}()
		w.descend(d, dir, mine, deep, carried, depth)
		wg.Wait()
		w.merge(o)
		return
	}
	w.descend(d, dir, subdirs, deep, carried, depth)
}

// descend walks on the deep states into each of subdirs, entries of the
// directory d (path dir), one level down, with the states a wildcard
// carried into each (walk).
func (w *walker) descend(d dirFD, dir string, subdirs []dirent, deep []walkState, carried map[string][]walkState, depth int) {
	budget := true // deep states left within their patterns' budgets
	for _, e := range subdirs {
		extra := carried[e.name]
		if !budget && len(extra) == 0 {
			continue
		}
		var in []walkState
		admitted := false
		if budget && e.typ == unix.DT_DIR {
			in, admitted = w.admit(deep), true
			budget = len(in) > 0
		}
		sub, err := w.open(d.fd, e.name, false, true)
		if err != nil {
			if e.typ == unix.DT_DIR && errors.Is(err, unix.EACCES) {
				// dir is readable but not searchable: its
				// subdirectories cannot even be opened.
				w.unlisted(d.fd, dir, append(append([]walkState(nil), deep...), extra...))
			}
			continue // not a directory (DT_UNKNOWN), or gone
		}
		if budget && !admitted {
			in = w.admit(deep)
			budget = len(in) > 0
		}
		if len(extra) > 0 {
			in = append(append([]walkState(nil), in...), extra...)
		}
		if len(in) > 0 {
			w.walk(sub, filepath.Join(dir, e.name), nil, false, in, depth+1)
		}
		unix.Close(sub.fd)
	}
}

// unlisted records dir (open at fd) as one the walk could not look into
// for states, when a sandbox could open it up again: only a directory
// owned by this uid, whose mode a sandbox (this uid, mapped) may chmod.
// Another user's directory (a root-owned 0700 volume) stays as closed
// inside as here. Only directories from a pattern's first wildcard down
// count: the part before it was resolved already, and hiding an ancestor
// of it (a shared /home) is not what a pattern asks.
func (w *walker) unlisted(fd int, dir string, states []walkState) {
	owned := -1
	for _, s := range states {
		if !within(dir, w.pats[s.pat].base) {
			continue
		}
		if owned < 0 {
			var st unix.Stat_t
			owned = 0
			if unix.Fstat(fd, &st) == nil && int(st.Uid) == os.Geteuid() {
				owned = 1
			}
		}
		if owned == 1 {
			w.res[s.pat].unlisted = append(w.res[s.pat].unlisted, dir)
		} else {
			w.res[s.pat].foreign = append(w.res[s.pat].foreign, dir)
		}
	}
}

// admit counts one more directory entered by "**" for the patterns of
// states, once each, and returns the states whose pattern is still within
// its budget (states itself when all are).
func (w *walker) admit(states []walkState) []walkState {
	w.gen++
	over := false
	for _, s := range states {
		if w.seen[s.pat] == w.gen {
			continue
		}
		w.seen[s.pat] = w.gen
		if w.dirs[s.pat].Add(1) > int64(walkMaxDirs) {
			w.res[s.pat].tooMany = true
		}
		over = over || w.res[s.pat].tooMany
	}
	if !over {
		return states
	}
	var in []walkState
	for _, s := range states {
		if !w.res[s.pat].tooMany {
			in = append(in, s)
		}
	}
	return in
}

func (w *walker) truncate(states []walkState, dir string) {
	for _, s := range states {
		r := &w.res[s.pat]
		if !r.truncated {
			r.truncated, r.truncatedAt = true, dir
		}
	}
}

// step goes to the entry name of the directory open at fd: a match for
// the states with no parts left, a directory to walk on for the others.
func (w *walker) step(fd int, dir, name string, typ uint8, states []walkState, depth int) {
	p := filepath.Join(dir, name)
	var ends []walkState
	var passThrough, toList []walkState // the next part is a plain name, or not
	for _, s := range states {
		switch {
		case len(s.parts) == 0:
			ends = append(ends, s)
		case w.needsList(s):
			toList = append(toList, s)
		default:
			passThrough = append(passThrough, s)
		}
	}
	if len(ends) > 0 {
		w.match(fd, dir, name, p, ends)
	}
	// A symlink here is followed only when a plain name comes next, as a
	// lookup of the whole path would; a directory to be listed (for a
	// wildcard or "**") must be a real one.
	for _, g := range []struct {
		states []walkState
		follow bool
	}{{passThrough, true}, {toList, false}} {
		if len(g.states) == 0 {
			continue
		}
		if typ != unix.DT_DIR && typ != unix.DT_UNKNOWN && !(g.follow && typ == unix.DT_LNK) {
			continue
		}
		sub, err := w.open(fd, name, g.follow, !g.follow)
		if errors.Is(err, unix.EACCES) {
			w.unlisted(fd, dir, g.states) // dir is not searchable
		}
		if err != nil {
			continue
		}
		w.walk(sub, p, nil, false, g.states, depth)
		unix.Close(sub.fd)
	}
}

// match records p, the entry name of the directory open at fd, for the
// states that end there. The type of a candidate comes from lstat, not
// from d_type: a file this user cannot reach (its directory not
// searchable) is no match, as in a lookup of the whole path.
func (w *walker) match(fd int, dir, name, p string, states []walkState) {
	var st unix.Stat_t
	for {
		err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.EACCES) {
			w.unlisted(fd, dir, states) // dir is not searchable
		}
		if err != nil {
			return
		}
		break
	}
	for _, s := range states {
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			w.res[s.pat].matches = append(w.res[s.pat].matches, p)
		case unix.S_IFDIR:
			if !w.pats[s.pat].fileOnly {
				w.res[s.pat].matches = append(w.res[s.pat].matches, p)
			}
		case unix.S_IFLNK:
			if w.pats[s.pat].links {
				w.res[s.pat].matches = append(w.res[s.pat].matches, p)
			}
		}
	}
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
