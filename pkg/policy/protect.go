// The protect step: what is read-only inside a writable bind (existing or
// not), with the pins that keep it in place, and the pattern walk that the
// protect and hide steps share. Git's part of it is in gitprotect.go.

package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// Providers of an inside path: a mount index, or one of these.
const (
	provHostRoot = -1 // the read-only host root (same path on the host)
	provFresh    = -2 // nsbox's own /proc, /dev, /tmp, /run, or nothing
)

// freshDirs are nsbox's own; the host's are never visible there.
var freshDirs = []string{"/proc", "/dev", "/tmp", "/run"}

// provider returns what the sandbox shows at inside path q: the deepest
// mount covering it, else the host root, else nothing of the host.
func (r *resolver) provider(q string) int {
	best, bestDepth := provFresh, -1
	for i, it := range r.mounts {
		if within(q, it.m.Dest) && depth(it.m.Dest) >= bestDepth {
			best, bestDepth = i, depth(it.m.Dest)
		}
	}
	if best >= 0 {
		return best
	}
	for _, f := range freshDirs {
		if within(q, f) {
			return provFresh
		}
	}
	if r.res.Policy.HostDirs == nil {
		return provHostRoot
	}
	for _, d := range r.res.Policy.HostDirs {
		if within(q, d) {
			return provHostRoot
		}
	}
	return provFresh
}

// insideLocations lists where host path h is visible inside: through the
// host root and through every bind of a directory above it. writable keeps
// only read-write binds.
func (r *resolver) insideLocations(h string, writable bool) []struct {
	q    string
	prov int
} {
	var out []struct {
		q    string
		prov int
	}
	if !writable && r.provider(h) == provHostRoot {
		out = append(out, struct {
			q    string
			prov int
		}{h, provHostRoot})
	}
	for i, it := range r.mounts {
		if it.m.Kind != sandbox.MountBind || !within(h, it.m.Source) || (writable && it.m.ReadOnly) {
			continue
		}
		q := rebase(h, it.m.Source, it.m.Dest)
		if r.provider(q) == i {
			out = append(out, struct {
				q    string
				prov int
			}{q, i})
		}
	}
	return out
}

// protectPass is the protect step's state: the inside paths that are
// mount points already (pins), the protected destinations (seen), and the
// pins the step adds.
type protectPass struct {
	pins, seen map[string]bool
	newPins    []mountItem
}

// protectedPath is a path a protect entry made read-only.
type protectedPath struct {
	x    expandedEntry
	path string
}

// protect makes read-only, inside writable binds, the run's policy files
// and what the protect entries name (existing or not: a missing path gets
// an empty placeholder), then what git on the host would run from the
// repositories among them (protectGit).
func (r *resolver) protect() error {
	pp := &protectPass{pins: map[string]bool{}, seen: map[string]bool{}}
	for _, it := range r.mounts {
		pp.pins[it.m.Dest] = true // already mount points
	}
	for _, e := range r.policyFiles {
		if err := r.protectOne(e, e.Path, pp); err != nil {
			return err
		}
	}
	var done []protectedPath
	for _, x := range r.protectList {
		e, paths := x.entry, []string{x.Path}
		if p := r.absolute(x.Path); x.pattern {
			g, ok, err := r.globEntry(x, p, protectGlob(x.Path), "protect")
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			paths = g.matches
			// Fail closed, as for hides: a sandbox could chmod a
			// directory the walk cannot look into back open and
			// write in it; such a directory is read-only whole.
			for _, d := range g.unlisted {
				if r.holdsRoot(d) {
					return e.at.err(fs.ErrPermission, "cannot look into %s (permission denied) for %s, and it holds a writable directory: make it readable (chmod u+rx %s)", d, e.Path, d)
				}
			}
			if len(g.unlisted) > 0 {
				r.warn(e.at.warn(false, "cannot look into %s (permission denied) to match %s: read-only whole", someOf(g.unlisted), e.Path))
				paths = append(paths, g.unlisted...)
			}
		}
		for _, p := range paths {
			ok, err := r.protectMatch(x, p, pp)
			if err != nil {
				return err
			}
			if ok {
				done = append(done, protectedPath{x, p})
			}
		}
	}
	if err := r.protectGit(pp, done); err != nil {
		return err
	}
	r.auditCreated()
	r.mounts = append(r.mounts, pp.newPins...)
	r.sortMounts()
	sort.SliceStable(r.protects, func(a, b int) bool { return depth(r.protects[a].Dest) < depth(r.protects[b].Dest) })
	return nil
}

// protectMatch protects p, which entry x names or matched; ok is false
// when a directory-only pattern ("PATTERN/") matched something else.
func (r *resolver) protectMatch(x expandedEntry, p string, pp *protectPass) (ok bool, err error) {
	e := x.entry
	if e.Dir && x.pattern {
		if st, err := os.Lstat(p); err != nil || !st.IsDir() {
			return false, nil // "PATTERN/" matches directories only
		}
	}
	if e.File && x.pattern {
		if st, err := os.Lstat(p); err == nil && st.IsDir() {
			return false, nil // {file = true}: no directory
		}
	}
	if x.pattern && r.linkOnly(p) {
		r.protectLink(e, p, pp)
		return true, r.protectBound(e, pp)
	}
	if err := r.protectOne(e, p, pp); err != nil {
		return false, err
	}
	return true, r.protectBound(e, pp)
}

// linkOnly reports whether p, a pattern's match, is a symlink of which
// only the link is protected (kept in place), not what it leads to: a
// target that is missing (a placeholder for it would be made wherever
// the link points, on the host, where the host may not even remove it
// again), or a writable directory itself or one above the link or a
// writable directory (a committed pkgs/x/.vscode -> ../.. made the whole
// workspace read-only; found by review). The end-of-run audit judges
// what such a link leads to (changedInRun).
func (r *resolver) linkOnly(p string) bool {
	st, err := r.lstat.lstat(p)
	if err != nil || st.Mode()&fs.ModeSymlink == 0 {
		return false
	}
	rp, err := r.resolvePath(p, r.h.Cwd)
	if err != nil || rp.Missing > 0 {
		return true
	}
	t := rp.Path
	return within(p, t) || slices.ContainsFunc(r.rwRoots, func(root string) bool { return within(root, t) })
}

// protectBound is the invariant that a run's protections are bounded:
// each is a mount (and pins above it) the worker makes at every start,
// from a tree a sandbox may have filled with decoy repositories or agent
// files.
func (r *resolver) protectBound(e entry, pp *protectPass) error {
	if n := len(r.protects) + len(pp.newPins); n > maxProtectMounts {
		var got []string
		for _, pe := range r.protects {
			got = append(got, pe.Dest)
		}
		return e.at.err(nil, "protecting %s takes more than %d mounts (%s); if a sandbox made these, remove them, else protect fewer paths", e.Path, maxProtectMounts, someOf(got[len(got)-min(len(got), 3):]))
	}
	return nil
}

func (r *resolver) protectOne(e entry, p string, pp *protectPass) error {
	rp, err := r.resolvePath(p, r.h.Cwd)
	if skippable(err) {
		return nil
	}
	if err != nil {
		return e.at.err(err, "%v", err)
	}
	r.protectLinks(e, p, pp)
	for _, loc := range r.insideLocations(rp.Path, true) {
		b := r.mounts[loc.prov].m
		// The path to make read-only: the protected path itself when it
		// exists, else the first component that does not exist (or the
		// file standing where a directory should be), so that nothing
		// on the way can be created either.
		t, dir, missing := rp.Path, false, false
		switch {
		case rp.Missing == 0:
			// Resolved: no component, the last included, is a
			// symlink, so lstat's answer (remembered) is stat's.
			st, err := r.lstat.lstat(t)
			dir = err == nil && st.IsDir()
		case rp.NotDir:
			t = rp.firstMissing()
		default:
			t, missing = rp.firstMissing(), true
			dir = t != rp.Path || e.Dir
		}
		if !within(t, b.Source) {
			continue
		}
		dest := rebase(t, b.Source, b.Dest)
		if pp.seen[dest] {
			continue
		}
		pp.seen[dest] = true
		// Invariant: every directory between the writable bind and
		// the protected path is a mount point (a "pin"). A mount point
		// cannot be renamed or removed (EBUSY), so the sandbox cannot
		// move .git away and put a .git of its own, with hooks, in
		// its place.
		pp.newPins = r.pinChain(pp.newPins, pp.pins, t, b, e.at, dest+" stays protected")
		why := "protected: read-only inside a writable bind (" + r.whereText(e.at) + ")"
		if missing {
			why = "protected: does not exist; an empty read-only placeholder keeps it from being created (" + r.whereText(e.at) + ")"
			r.res.Placeholders = append(r.res.Placeholders, Placeholder{Path: t, Dir: dir, Root: b.Source})
		}
		r.protects = append(r.protects, PlanEntry{Mount: sandbox.Mount{Kind: sandbox.MountProtect, Dest: dest, Dir: dir}, Why: why})
		if dir && !missing {
			r.protectLinksInside(e, t, pp)
		}
	}
	return nil
}

// Bounds of protectLinksInside's look into one protected directory.
const (
	linksInsideMaxEntries = 1024
	linksInsideMaxDepth   = 6
)

// protectLinksInside protects what the symlinks inside the protected
// directory dir lead to, where that is in a writable directory: the
// directory is read-only, but a link in it is followed to a file the
// sandbox could write (a monorepo's pkgs/a/.vscode/tasks.json ->
// ../../../shared/tasks.json, .claude/settings.json -> ../shared/x.json:
// the host's editor or agent read the sandbox's tasks and hooks; found by
// review). Not in a repository's .git, whose links the git protections
// follow their own way (gitLinks) and whose objects would make this walk
// long. Bounded: past linksInsideMaxEntries entries or
// linksInsideMaxDepth levels a warning says what was not looked at.
func (r *resolver) protectLinksInside(e entry, dir string, pp *protectPass) {
	if slices.Contains(splitPath(dir), ".git") {
		return
	}
	n := 0
	var walk func(d string, depth int) bool
	walk = func(d string, depth int) bool {
		ents, err := readDirNoWait(d)
		if err != nil {
			return true // unreadable: the sandbox cannot read it either
		}
		for _, de := range ents {
			if n++; n > linksInsideMaxEntries {
				return false
			}
			p := filepath.Join(d, de.Name())
			switch {
			case de.Type()&fs.ModeSymlink != 0:
				if rp, err := r.resolvePath(p, r.h.Cwd); err == nil && rp.Missing == 0 && !within(rp.Path, dir) && r.inWritableRoot(rp.Path) && !r.linkOnly(p) && !pp.seen[rp.Path+"\x00inside"] {
					pp.seen[rp.Path+"\x00inside"] = true
					if err := r.protectOne(e, p, pp); err != nil {
						return true // its own step names what it could not protect
					}
				}
			case de.IsDir():
				if depth+1 >= linksInsideMaxDepth {
					return false
				}
				if !walk(p, depth+1) {
					return false
				}
			}
		}
		return true
	}
	if !walk(dir, 0) && !e.quiet {
		r.warn(e.at.warn(false, "%s holds more than %d entries or %d levels: what symlinks beyond those lead to is not protected", dir, linksInsideMaxEntries, linksInsideMaxDepth))
	}
}

// protectLinks keeps in place every symlink the kernel would follow on
// p's way that lies inside a writable bind: a NoFollow protect of the link
// itself, at its resolved place, and pins above it. Invariant: a protected
// path reached through symlinks of the workspace (.claude -> shared/claude,
// or a chain .claude -> sub/l2 -> ../real) cannot be re-pointed: the
// target is read-only, and the sandbox could otherwise remove a link and
// make a directory of its own, with hooks, where the host's agent looks
// (found by review). The walk resolves as resolvePath does (a link's
// target is walked in its place, ".." after a link is the target's
// parent, at most maxSymlinks links), so every link it pins has a parent
// without symlinks, which is what the worker's mount and Landlock's rule
// need.
func (r *resolver) protectLinks(e entry, p string, pp *protectPass) {
	if !filepath.IsAbs(p) {
		p = r.h.Cwd + "/" + p
	}
	todo := splitPath(p)
	cur := "/" // resolved: no component of it is a symlink
	for hops := 0; len(todo) > 0; {
		next := filepath.Join(cur, todo[0])
		todo = todo[1:]
		st, err := r.lstat.lstat(next)
		if err != nil {
			return // missing from here on: nothing more to pin
		}
		if st.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		r.protectLink(e, next, pp)
		if hops++; hops > maxSymlinks {
			return
		}
		target, err := r.lstat.readlink(next)
		if err != nil {
			return
		}
		if filepath.IsAbs(target) {
			cur = "/"
		}
		todo = append(splitPath(target), todo...)
	}
}

// protectLink adds the NoFollow protect of the symlink link (its parent
// resolved) in every writable bind that shows it, with pins above it.
func (r *resolver) protectLink(e entry, link string, pp *protectPass) {
	for _, loc := range r.insideLocations(link, true) {
		b := r.mounts[loc.prov].m
		key := loc.q + "\x00link"
		if pp.seen[key] {
			continue
		}
		pp.seen[key] = true
		pp.newPins = r.pinChain(pp.newPins, pp.pins, link, b, e.at, loc.q+" stays in place")
		r.protects = append(r.protects, PlanEntry{Mount: sandbox.Mount{Kind: sandbox.MountProtect, Dest: loc.q, NoFollow: true},
			Why: "protected: a symlink on the way to a protected path, kept in place (" + r.whereText(e.at) + ")"})
	}
}

// pinChain appends to out a pin (a read-write bind of itself) for each
// directory between bind b's source and t, parents first, skipping the
// destinations already in pins.
func (r *resolver) pinChain(out []mountItem, pins map[string]bool, t string, b sandbox.Mount, at origin, what string) []mountItem {
	var chain []string
	for x := filepath.Dir(t); x != b.Source && within(x, b.Source); x = filepath.Dir(x) {
		chain = append(chain, x)
	}
	for i := len(chain) - 1; i >= 0; i-- {
		x := chain[i]
		xd := rebase(x, b.Source, b.Dest)
		if pins[xd] {
			continue
		}
		pins[xd] = true
		out = append(out, mountItem{
			m:   sandbox.Mount{Kind: sandbox.MountBind, Source: x, Dest: xd},
			why: "pin: a mount point cannot be renamed, so " + what + " (" + r.whereText(at) + ")",
			at:  at, rank: at.rank,
		})
	}
	return out
}

// patterns expands the variables of the protect and hide entries, then
// matches all their patterns in one walk: the workspace's "**/.env*" and
// "**/.git" share its listings (globAll).
func (r *resolver) patterns() error {
	for _, l := range []struct {
		in  []entry
		out *[]expandedEntry
	}{{r.m.protect, &r.protectList}, {r.m.hide, &r.hideList}} {
		for _, e := range l.in {
			// Invariant: a pattern matches below the directories its
			// variables (and the current directory, for a relative
			// one) name, whatever characters their paths hold. Their
			// values go into the pattern escaped: pasted as they are,
			// below /src/app[v2] "$NSBOX_WORKSPACE/**/.env*" was a
			// character class that matched nothing, and the
			// workspace's secrets and .git were left open with no word
			// (review). Whether an entry is a pattern is read from its
			// written text alone: "$NSBOX_RW/.git/" stays a path (with
			// its placeholder) in that workspace.
			pattern := writtenPattern(e.Path)
			ps, err := r.expandEach(e.Path, e.at, pattern)
			if err != nil {
				return err
			}
			for _, p := range ps {
				x := e
				x.Path = p
				isPattern := pattern && hasGlob(p)
				switch {
				case isPattern && !filepath.IsAbs(p):
					x.Path = filepath.Join(escapeGlob(r.h.Cwd), p)
				case pattern && !isPattern:
					// Escapes alone ("a\\[b"): the path they spell.
					x.Path = unescapeGlob(p)
				}
				*l.out = append(*l.out, expandedEntry{x, e.Path, isPattern})
			}
		}
	}
	var pats []globPattern
	add := func(p string, gp globPattern) {
		p = r.absolute(p)
		// What cannot be walked (a missing prefix, a bad pattern) is
		// left to the entry's own step, which skips it or names it.
		if pat, ok, err := r.globPatternOf(p); ok && err == nil {
			gp.path = pat
			pats = append(pats, gp)
		}
	}
	for _, e := range r.protectList {
		if !e.pattern {
			continue
		}
		if head, ok := bareRepoPattern(e.Path); ok {
			add(e.Path, globPattern{maxDepth: auditMaxDepth})
			add(head, globPattern{fileOnly: true, links: true, maxDepth: auditMaxDepth})
			add(e.Path, globPattern{links: true, maxDepth: auditMaxDepth}) // for the git audit
		} else {
			add(e.Path, protectGlob(e.Path))
		}
	}
	for _, e := range r.hideList {
		if e.pattern {
			add(e.Path, hidePattern(e))
		}
	}
	if len(pats) == 0 {
		return nil
	}
	// The links it meets too: one the end's audit meets that the start
	// did not see was made, or moved into view, during the run.
	res, links, err := globAllLinks(pats, walkMaxDepth, true)
	if errors.Is(err, errTooManyLinks) {
		// More links than a walk keeps: none is recorded, and the end's
		// audit judges every link by its times (targetMoved).
		links, err = nil, nil
	}
	if err != nil {
		return nil // a bad pattern: its entry's step says which
	}
	r.startLinks = links
	// How deep the walk listed directories: the deepest "**" pattern's
	// bound (a pattern's own, or the walk's).
	r.startLinkDepth = 0
	for _, p := range pats {
		d := p.maxDepth
		if d == 0 {
			d = walkMaxDepth
		}
		if slices.Contains(splitPath(p.path), "**") && d > r.startLinkDepth {
			r.startLinkDepth = d
		}
	}
	r.globbed = map[globPattern]globResult{}
	for i, p := range pats {
		r.globbed[p] = res[i]
	}
	return nil
}

// absolute is p, made absolute against the current directory.
func (r *resolver) absolute(p string) string {
	if !filepath.IsAbs(p) {
		return filepath.Join(r.h.Cwd, p)
	}
	return p
}

// globPatternOf resolves the part of p (absolute) before its first
// wildcard, the walk's start. ok is false when that part does not exist,
// so that nothing can match.
func globPatternOf(c lstatCache, p string) (pattern string, ok bool, err error) {
	parts := splitPath(p)
	lit, i := literalPrefix(parts)
	prefix, err := resolvePathWith(c, lit, "/")
	if skippable(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	if prefix.Missing > 0 {
		return "", false, nil
	}
	// The resolved prefix goes back into the pattern escaped: the walk
	// reads it as the names it is, whatever characters they hold.
	return filepath.Join(append([]string{escapeGlob(prefix.Path)}, parts[i:]...)...), true, nil
}

// globPatternOf is the package function with the resolver's lstat cache:
// the protect and hide lists share their fixed prefixes (the workspace and
// its ancestors), which were looked up once per pattern without it.
func (r *resolver) globPatternOf(p string) (string, bool, error) {
	if r.lstat == nil {
		r.lstat = lstatCache{}
	}
	return globPatternOf(r.lstat, p)
}

// globEntry matches the pattern p of a hide or protect entry (list names
// which) with gp's matching. ok is false when nothing can match. Running
// out of the walk's directories is an error, its depth a warning.
func (r *resolver) globEntry(x expandedEntry, p string, gp globPattern, list string) (globResult, bool, error) {
	e := x.entry
	g, ok, err := r.globAs(p, gp)
	if err != nil || !ok {
		return g, false, e.at.errOrNil(err)
	}
	done, section := "protected", "Protected paths"
	if list == "hide" {
		done, section = "hidden", "Hidden paths"
	}
	if g.tooMany {
		// Fail closed: an earlier sandbox could create that many
		// directories, sorted before a repository or a .env, to leave it
		// writable or readable in the next run.
		return g, false, e.at.err(nil, "matching %s stopped after %d directories, so what lies beyond cannot be %s: if a sandbox made them, remove them (for a workspace that big, see %q in docs/profiles.md)%s", e.Path, walkMaxDirs, done, section, r.shallowHint(p))
	}
	if g.truncated {
		depth := gp.maxDepth
		if depth == 0 {
			depth = walkMaxDepth
		}
		r.truncations = append(r.truncations, truncation{x: x, list: list, done: done, depth: depth, at: g.truncatedAt})
	}
	return g, true, nil
}

// truncation is an entry whose walk stopped at its depth bound, said once
// the protect and hide steps are done (warnTruncations).
type truncation struct {
	x              expandedEntry
	list, done, at string
	depth          int
}

// warnTruncations says which entries stopped at their depth bound: one
// warning for all the entries of a list that stopped below the same
// directory (a deep Java tree stops the two dozen agent-file patterns of
// the built-in profile together), the entry's own for one alone.
func (r *resolver) warnTruncations() {
	type key struct {
		list, at string
		depth    int
	}
	groups := map[key][]truncation{}
	var order []key
	for _, t := range r.truncations {
		k := key{t.list, t.at, t.depth}
		if groups[k] == nil {
			order = append(order, k)
		}
		groups[k] = append(groups[k], t)
	}
	for _, k := range order {
		ts := groups[k]
		t := ts[0]
		if len(ts) == 1 {
			r.warn(t.x.at.warn(false, "stopped matching %s at %d levels, below %s: matches deeper down are not %s (%s them explicitly, or remove this entry with \"!%s\" in your config)", t.x.Path, t.depth, t.at, t.done, t.list, t.x.written))
			continue
		}
		var names []string
		for _, t := range ts {
			names = append(names, t.x.written)
		}
		r.warn(Warning{Msg: fmt.Sprintf("stopped matching %d %s entries (%s) at %d levels, below %s: matches deeper down are not %s (%s them explicitly, or remove an entry with \"!ENTRY\" in your config)", len(ts), t.list, someOf(names), t.depth, t.at, t.done, t.list)})
	}
	r.truncations = nil
}

// globAs matches the pattern p (absolute), matched as gp says (fileOnly,
// links, maxDepth): from the patterns step's walk, or, for a pattern it did
// not see, alone.
func (r *resolver) globAs(p string, gp globPattern) (globResult, bool, error) {
	pat, ok, err := r.globPatternOf(p)
	if !ok || err != nil {
		return globResult{}, false, err
	}
	gp.path = pat
	if g, ok := r.globbed[gp]; ok {
		return g, true, nil
	}
	res, err := globAll([]globPattern{gp})
	if err != nil {
		return globResult{}, false, err
	}
	return res[0], true, nil
}
