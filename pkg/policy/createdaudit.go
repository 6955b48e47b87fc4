package policy

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// A protect pattern with a wildcard ("$NSBOX_WORKSPACE/*/**/.vscode",
// "$NSBOX_RW/pip.con[f]") can protect only what matches it when the run
// starts, and only as deep as the start's walk looks (walkMaxDepth): a
// path that does not exist has no inode to bind read-only, and a
// placeholder for every directory a nested project could be made in is
// not an option. What the sandbox makes or changes that matches such a
// pattern (sub/.vscode/tasks.json, packages/x/.cargo/config.toml, a
// project's .envrc) would then wait on the host for an editor, an agent,
// cargo, npm or direnv opened or run there. So the run's GitAudit also
// walks these patterns once the sandbox has ended (as deep as it looks
// for repositories) and quarantines every match the run made or changed,
// as it does a repository the sandbox made: NAME is renamed
// NAME.nsbox-quarantine, which none of those tools reads, and the user
// can look and rename it back.
//
// What the run made or changed is told by the inode's change time: the
// kernel sets ctime to the current time at every creation, write,
// rename (ext4, xfs, btrfs, tmpfs), link and mode change, and nothing
// sets it back (utimensat(2) sets only atime and mtime; setting the
// clock takes CAP_SYS_TIME of the host, and a time namespace moves only
// the monotonic clocks). A match whose ctime, or for a directory the
// ctime of anything in it, is not older than the audit's start was
// touched during the run. What the run protected read-only (a match of
// the start's walk, known to the audit by device, inode and ctime) is
// skipped: the sandbox could not change it, and the host may have. An
// empty file or directory (a placeholder, or one left by one) is inert
// and left alone.

// createdPattern is one such pattern as the audit keeps it: absolute,
// variables expanded, its fixed part resolved again when the audit runs
// (a prefix missing at the start, such as .yarn/ for
// "$NSBOX_RW/.yarn/release[s]", may exist by its end).
type createdPattern struct {
	Path    string `json:"path"`
	Written string `json:"written"`        // the entry as written: what a "!" removal names
	Dir     bool   `json:"dir,omitempty"`  // "PATTERN/": directories only
	File    bool   `json:"file,omitempty"` // {file = true}: no directory
}

// createdGlob is how the audit matches a created pattern after the run:
// symlinks match too (a tool reads through a .npmrc that is a link), as
// deep as the git audit looks.
func createdGlob() globPattern { return globPattern{links: true, maxDepth: auditMaxDepth} }

// createdPatternOf says whether the protect entry x is audited for what
// the run creates: a pattern (not the repositories' "DIR/**/.git", which
// the git audit covers its own way) that can reach into a writable
// directory. Elsewhere the sandbox cannot create anything.
func (r *resolver) createdPatternOf(x expandedEntry) (createdPattern, bool) {
	if _, ok := bareRepoPattern(x.Path); ok {
		return createdPattern{}, false
	}
	p := r.absolute(x.Path)
	if !x.pattern {
		return createdPattern{}, false
	}
	fixed := fixedPart(p)
	if !slices.ContainsFunc(r.rwRoots, func(root string) bool { return within(fixed, root) || within(root, fixed) }) {
		return createdPattern{}, false
	}
	return createdPattern{Path: p, Written: x.written, Dir: x.Dir, File: x.File}, true
}

// literalPattern is a pattern that matches the path p alone: its last
// component a one-character class, so that the audit takes it for a
// pattern, and the glob characters of every component escaped. ok is
// false for a path it cannot express that way.
func literalPattern(p string) (string, bool) {
	parts := splitPath(filepath.Clean(p))
	if len(parts) == 0 {
		return "", false
	}
	for i, c := range parts[:len(parts)-1] {
		parts[i] = escapeGlob(c)
	}
	last := parts[len(parts)-1]
	r, size := utf8.DecodeLastRuneInString(last)
	if r == utf8.RuneError || strings.ContainsRune(`]-^!\`, r) {
		return "", false
	}
	parts[len(parts)-1] = escapeGlob(last[:len(last)-size]) + "[" + string(r) + "]"
	return "/" + strings.Join(parts, "/"), true
}

// fixedPart is p up to its first component with a wildcard.
func fixedPart(p string) string {
	prefix, _ := literalPrefix(splitPath(p))
	return filepath.Clean(prefix)
}

// auditCreated adds the run's created patterns to its audit, with the
// matches the protect step made read-only (trusted by device and inode,
// and a file's ctime, as the git audit trusts what it knew) and the time
// from which a change counts as the run's. It runs after the protections,
// so that the git audit, when there is one, exists and is extended.
func (r *resolver) auditCreated() {
	var pats []createdPattern
	known := map[fileID]bool{}
	var locked []string
	for _, x := range r.protectList {
		cp, ok := r.createdPatternOf(x)
		if !ok || slices.ContainsFunc(pats, func(c createdPattern) bool { return c.Path == cp.Path }) {
			continue
		}
		// The protect step's own walk (no second one): its matches are
		// the read-only mounts of this run.
		if g, ok, err := r.globAs(cp.Path, protectGlob(x.Path)); err == nil && ok {
			for _, m := range g.matches {
				if id, ok := idOf(m); ok {
					known[id] = true
				}
			}
			// Made read-only whole by the protect step: nothing can be
			// made in them, and the audit leaves them as they are.
			locked = append(locked, g.unlisted...)
		}
		pats = append(pats, cp)
	}
	for _, cp := range r.hookCreated {
		if !slices.ContainsFunc(pats, func(c createdPattern) bool { return c.Path == cp.Path }) {
			pats = append(pats, cp)
		}
	}
	if r.res.GitAudit == nil && r.shallowRepos {
		// The pattern of repositories is there, only shallow
		// directories left it no expansion: their top level is still
		// audited (a bare repository's layout made there: the roots'
		// check in Run).
		r.res.GitAudit = r.newGitAudit()
	}
	if a := r.res.GitAudit; a != nil {
		a.startLinkDepth = r.startLinkDepth
		a.startLinks = startLinkIDs(r.startLinks)
	}
	if len(pats) == 0 {
		r.res.GitAudit.stamp() // for its directories of other users (foreignDirs)
		return
	}
	a := r.res.GitAudit
	if a == nil {
		// No repositories are audited (their pattern was removed): the
		// audit looks for the created patterns' matches only.
		a = &GitAudit{noGit: true, roots: r.rwRoots, known: map[fileID]bool{}, startLinks: startLinkIDs(r.startLinks), startLinkDepth: r.startLinkDepth}
		a.placeAll(r.rwRoots)
		r.res.GitAudit = a
	}
	for id := range known {
		a.known[id] = true
	}
	a.locked = dedupStrings(append(a.locked, locked...))
	a.created = append(a.created, pats...)
	a.stamp()
}

// startLinkIDs are the links' ids, each with its target's.
func startLinkIDs(links []string) map[fileID]fileID {
	out := map[fileID]fileID{}
	for _, l := range links {
		if id, ok := idOf(l); ok {
			out[id], _ = targetOf(l)
		}
	}
	return out
}

// stamp sets the time from which a change is the run's, when not set.
// Invariant: every change the sandbox makes is stamped at or after since.
// File times come from the coarse real-time clock (or a finer one, never
// earlier: multigrain timestamps), read here before the sandbox exists; a
// change by the host in the same clock tick before it is taken for the
// run's, never the reverse.
func (a *GitAudit) stamp() {
	if a == nil || a.since != 0 {
		return
	}
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &ts) == nil {
		a.since = ts.Nano()
	}
}

// createdGlobs are the audit's walk patterns for its created patterns; a
// pattern whose fixed part does not exist (now) matches nothing and is
// left out.
func (a *GitAudit) createdGlobs() (globs []globPattern, of []createdPattern) {
	c := lstatCache{} // the patterns share their prefixes
	for _, cp := range a.created {
		pat, ok, err := globPatternOf(c, cp.Path)
		if err != nil || !ok {
			continue
		}
		g := createdGlob()
		g.path = pat
		globs = append(globs, g)
		of = append(of, cp)
	}
	return globs, of
}

// quarantineCreated makes inert what the sandbox made that matches cp:
// matches is the walk's result for it, done what is already renamed (a
// match inside one is gone with it).
func (a *GitAudit) quarantineCreated(cp createdPattern, pattern string, matches []string, done []string) ([]Quarantined, []error) {
	fixed := fixedPart(pattern)
	var out []Quarantined
	var errs []error
	slices.Sort(matches) // a directory before what it holds
	for _, m := range matches {
		if slices.ContainsFunc(done, func(d string) bool { return within(m, d) }) {
			continue
		}
		// Only what the sandbox could have made: below a writable
		// directory, not in one the run locked whole.
		if !slices.ContainsFunc(a.roots, func(root string) bool { return within(m, root) && m != root }) || a.wasLocked(m) {
			continue
		}
		id, ok := idOf(a.at(m))
		if !ok || a.known[id] || inert(a.at(m)) {
			continue
		}
		// Within the start's walk, a match it did not see is new to this
		// path, whatever its times (a directory stashed in an earlier run
		// where the walk does not look, node_modules, and renamed into
		// place in this one keeps its old ctime: found by review).
		// Deeper, what was there before is unknown: the times decide.
		if !withinStartWalk(pattern, m) && !a.changedInRun(m, fixed) {
			continue
		}
		if cp.Dir {
			if st, err := os.Lstat(a.at(m)); err != nil || !st.IsDir() {
				continue
			}
		}
		if cp.File {
			if st, err := os.Lstat(a.at(m)); err == nil && st.IsDir() {
				continue
			}
		}
		q, err := a.quarantineAs(m, filepath.Dir(m), cp.Written)
		if l := a.linkOnTheWay(m); err != nil && l != "" {
			// Invariant: what the run made beyond a symlink inside a
			// writable directory (sub/.github -> ../node_modules/gh,
			// and node_modules/gh/hooks/evil.json made) is made
			// unreachable by that path. quarantineAs never follows a
			// symlink, so it cannot rename the match itself: it renames
			// the link, through which the host's tool would have read
			// it (review: a warning only, the hook still ran).
			q, err = a.quarantineAs(l, filepath.Dir(l), cp.Written)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if q != nil {
			out = append(out, *q)
			done = append(done, m)
		}
	}
	return out, errs
}

// linkOnTheWay is the first symlink on the path to p below the writable
// directory that holds it, "" when there is none.
func (a *GitAudit) linkOnTheWay(p string) string {
	root := ""
	for _, r := range a.roots {
		if within(p, r) && len(r) > len(root) {
			root = r
		}
	}
	if root == "" {
		return ""
	}
	rel, err := filepath.Rel(root, filepath.Dir(p))
	if err != nil || rel == "." {
		return ""
	}
	cur := root
	for _, c := range splitPath(rel) {
		cur = filepath.Join(cur, c)
		st, err := os.Lstat(a.at(cur))
		if err != nil {
			return ""
		}
		if st.Mode()&os.ModeSymlink != 0 {
			return cur
		}
	}
	return ""
}

// createdFailure is the error of a created match that could not be made
// inert.
func createdFailure(p, pattern string, err error) error {
	return fmt.Errorf("the sandbox made or changed %s, which matches the protected pattern %s, and it could not be made inert (%v): look at it before an editor, agent or tool on the host opens %s", p, pattern, err, filepath.Dir(p))
}

// withinStartWalk reports whether the start's walk of pattern (one "**",
// walkMaxDepth levels: protectGlob) reached as deep as m: then it saw m
// if m was there. A pattern with no "**" was matched whole at the start.
func withinStartWalk(pattern, m string) bool {
	parts := splitPath(pattern)
	fixed, n := literalPrefix(parts)
	fixed = filepath.Clean(fixed)
	rest := parts[n:]
	switch strings.Count("/"+strings.Join(rest, "/")+"/", "/**/") {
	case 0:
		// Invariant: a match of a pattern with no "**" that the
		// start did not protect is the run's, whatever its times. Its
		// fixed part is a directory the sandbox can make itself:
		// stashed in an earlier run (stash/hooks/evil.json, which
		// matched nothing) and renamed or linked into place in this one
		// (mv stash .github), the match kept its old ctime, and so did
		// everything between the fixed part and it (review).
		return within(m, fixed) && m != fixed
	case 1:
	default:
		return false
	}
	if !within(m, fixed) || m == fixed {
		return false
	}
	k := len(splitPath(strings.TrimPrefix(m, fixed))) - (len(rest) - 1) // levels "**" stands for
	return k >= 0 && k <= walkMaxDepth
}

// changedMaxEntries bounds the entries changedInRun looks at in one
// directory match; past it the match counts as changed (fail closed).
const changedMaxEntries = 20000

// changedInRun reports whether the run made or changed p, a match of a
// pattern whose fixed part is fixed (see the top of this file): its
// ctime, or for a directory the ctime of anything below it, is at or
// after the audit's start; or so is a directory between fixed and p (a
// directory stashed in an earlier run where the walk does not look, such
// as node_modules, and renamed into place in this one keeps its own old
// ctime: only the renamed directory is stamped; found by review); or p
// is a symlink and what it leads to changed (a shared file a nested
// .npmrc links to). What cannot be read counts as changed.
func (a *GitAudit) changedInRun(p, fixed string) bool {
	if a.since == 0 {
		return true // no start recorded: everything is new
	}
	var st unix.Stat_t
	if unix.Lstat(a.at(p), &st) != nil {
		return true
	}
	if st.Ctim.Nano() >= a.since {
		return true
	}
	for d := filepath.Dir(p); d != fixed && within(d, fixed) && d != "/"; d = filepath.Dir(d) {
		var dst unix.Stat_t
		if unix.Lstat(a.at(d), &dst) != nil || dst.Ctim.Nano() >= a.since {
			return true
		}
	}
	n := 0
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		fd, err := unix.Open(a.at(p), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return true
		}
		return changedBelow(fd, a.since, 0, &n)
	case unix.S_IFLNK:
		// What the tool on the host reads: the link followed (only
		// looked at, never written). A target that is gone is not
		// read either.
		// Resolved through the held roots (resolve), as the link pass.
		real, _, err := a.resolve(p)
		if err != nil {
			return false
		}
		var tst unix.Stat_t
		if err := unix.Stat(a.at(real), &tst); err != nil {
			return false
		}
		if tst.Ctim.Nano() >= a.since {
			return true
		}
		if tst.Mode&unix.S_IFMT != unix.S_IFDIR {
			return false
		}
		fd, err := unix.Open(a.at(real), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return true
		}
		return changedBelow(fd, a.since, 0, &n)
	}
	return false
}

// foreignDirs are errors for the directories the walk could not look
// into, not the user's, that the run made or changed: a sandbox with a
// range of host ids chowns a directory to one of them and makes it 0711,
// and the user still reaches, by name, what it planted inside (found by
// review). Not renamed (the user may not own it): the audit is
// incomplete, said so, and the run fails closed.
func (a *GitAudit) foreignDirs(res []globResult) []error {
	if a.since == 0 {
		return nil
	}
	var dirs []string
	for _, r := range res {
		dirs = append(dirs, r.foreign...)
	}
	var errs []error
	for _, d := range dedupStrings(dirs) {
		if !slices.ContainsFunc(a.roots, func(root string) bool { return within(d, root) }) || a.wasLocked(d) {
			continue
		}
		var st unix.Stat_t
		if unix.Lstat(a.at(d), &st) == nil && st.Ctim.Nano() < a.since {
			continue // as it was before the run: not the sandbox's doing
		}
		errs = append(errs, fmt.Errorf("%w: the sandbox made %s a directory of another user (uid %d) that nsbox cannot look into; a repository or agent file in it may run its code when you use git or open it in an editor or agent: look (as root) before you do", ErrGitAuditIncomplete, d, st.Uid))
	}
	return errs
}

// changedBelow is changedInRun for what the directory fd holds (closed
// here), by fd all the way down (fstatat AT_SYMLINK_NOFOLLOW, openat
// O_NOFOLLOW): a symlink swapped in since the walk leads nowhere else.
func changedBelow(fd int, since int64, depth int, n *int) bool {
	f := os.NewFile(uintptr(fd), "")
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return true
	}
	for _, name := range names {
		if *n++; *n > changedMaxEntries || depth >= auditMaxDepth {
			return true
		}
		var st unix.Stat_t
		if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Ctim.Nano() >= since {
			return true
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil || changedBelow(sub, since, depth+1, n) {
				return true
			}
		}
	}
	return false
}

// toolPatterns are the created patterns below the workspace, relative to
// it, for the file tools (sandbox.ToolSettings.ProtectedPatterns): the
// workspace is bound at its own path, so a path relative to it is the
// same inside.
func (r *resolver) toolPatterns() []string {
	ws := escapeGlob(r.res.Workspace) // as it stands in the patterns
	if ws == "" {
		return nil
	}
	var out []string
	for _, x := range r.protectList {
		cp, ok := r.createdPatternOf(x)
		if !ok || !within(cp.Path, ws) || cp.Path == ws {
			continue
		}
		rel := strings.TrimPrefix(cp.Path, ws+"/")
		if ws == "/" {
			rel = strings.TrimPrefix(cp.Path, "/")
		}
		if !slices.Contains(out, rel) {
			out = append(out, rel)
		}
	}
	return out
}

// AuditPlan is what a run's audit will look for when the sandbox has
// ended, as --dry-run shows it.
type AuditPlan struct {
	// Repositories are the directories searched for repositories the
	// run made.
	Repositories []string `json:"repositories,omitempty"`
	// Patterns are the protect entries, as written, whose matches the run
	// makes or changes are quarantined.
	Patterns []string `json:"patterns,omitempty"`
}

// Plan returns what the audit looks for (nil for no audit).
func (a *GitAudit) Plan() *AuditPlan {
	if a == nil {
		return nil
	}
	p := &AuditPlan{}
	if !a.noGit {
		p.Repositories = a.dirs
	}
	for _, cp := range a.created {
		p.Patterns = append(p.Patterns, cp.Written)
	}
	return p
}

// CreatedOnly is the part of the audit that looks for the created
// patterns' matches (nil when it has none): no repository is quarantined
// or looked for. A pool of fresh sandboxes runs it after every call.
func (a *GitAudit) CreatedOnly() *GitAudit {
	if a == nil || len(a.created) == 0 {
		return nil
	}
	c := *a
	c.noGit = true
	return &c
}
