package policy

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// linkMaxEntries bounds what quarantineThroughLinks looks at below one
// symlink's target; linkPassMaxEntries, below all targets of one pass.
// Each target is walked once, however many links lead to it: a sandbox
// made 5,000 links to one directory of 19,990 files, and the pass walked
// it 5,000 times (291 s after the command ended, in every later per-call
// tool call, and again at the next nsbox start; review 71).
const linkMaxEntries = 20000

var linkPassMaxEntries = 200000 // a variable for the tests only

// linkTail is the part of a created pattern after its last "**".
type linkTail struct {
	parts   []string
	written string
}

// quarantineThroughLinks looks through the symlinks the walk found
// (links) that lead into a directory the walk skips (walkSkip:
// node_modules, .venv, target ...), which a tool on the host follows
// (an editor opened on pkgs/proj -> node_modules/p, git run in it; found
// by reviews). Below such a target, what the host would read or run is
// an entry that the tail of a created pattern (its parts after the last
// "**") matches, and, when repositories are audited, a .git or a bare
// repository's HEAD: a link the run made or changed is quarantined
// itself when it leads to one; an older link, when the run made or
// changed one, has that entry quarantined.
func (a *GitAudit) quarantineThroughLinks(links []string, globs []globPattern, of []createdPattern, done []string) ([]Quarantined, []error) {
	var tails []linkTail
	for i, g := range globs {
		parts := splitPath(g.path)
		for j := len(parts) - 1; j >= 0; j-- {
			if parts[j] == "**" {
				if j+1 < len(parts) {
					tails = append(tails, linkTail{parts[j+1:], of[i].Written})
				}
				break
			}
		}
	}
	repos := len(a.dirs) > 0 && !a.noGit
	if (len(tails) == 0 && !repos) || a.since == 0 {
		return nil, nil
	}
	var out []Quarantined
	var errs []error
	add := func(q *Quarantined, err error) {
		if err != nil {
			errs = append(errs, err)
		} else if q != nil {
			out = append(out, *q)
		}
	}
	inRoot := func(p string) string {
		for _, root := range a.roots {
			if within(p, root) && p != root {
				return root
			}
		}
		return ""
	}
	// What the walk below each target found, by the target's real path.
	scans := map[string]*linkScan{}
	total := 0
	for i, l := range links {
		if total > linkPassMaxEntries {
			errs = append(errs, fmt.Errorf("%w: the links the sandbox left lead to more than %d entries in all; %d links were not followed (%s, ...): look before an editor, agent or tool on the host opens them, or git runs there", ErrGitAuditIncomplete, linkPassMaxEntries, len(links)-i, l))
			break
		}
		if slices.ContainsFunc(done, func(d string) bool { return within(l, d) }) || inRoot(l) == "" || a.wasLocked(l) {
			continue
		}
		real, _, err := a.resolve(l)
		if err != nil {
			continue // dangling: nothing is read through it
		}
		root := inRoot(real)
		if root == "" || within(l, real) {
			continue // outside the writable places, or an ancestor the walk covers
		}
		rel, _ := filepath.Rel(root, real)
		relParts := strings.Split(rel, "/")
		// from: the first directory on the way to real that no walk
		// lists: a name the walk skips, or, below a root no nested walk
		// entered (--shallow), the root's own entry (review 22).
		from := slices.IndexFunc(relParts, func(c string) bool { return walkSkip[c] })
		if from < 0 {
			if a.walkedThere(real, globs) {
				continue // the walk itself looked there
			}
			from = 0
		}
		var lst unix.Stat_t
		if unix.Lstat(a.at(l), &lst) != nil {
			continue
		}
		// New: made or changed in the run; moved into the walk's view
		// with a directory above it (a link stashed below target/ in an
		// earlier run keeps that run's times; review 21); or leading to
		// another directory than at the start (the sandbox renamed a
		// directory into the target's place, or made the target a link
		// to another; review 22).
		newLink := lst.Ctim.Nano() >= a.since || a.unseenAtStart(l, root) || a.targetMoved(l, real)
		sc := scans[real]
		if sc == nil {
			fd, err := unix.Open(a.at(real), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				continue // not a directory: the walk judged a matching name already
			}
			sc = a.scanLinkTarget(fd, root, real, relParts, from, tails, repos)
			scans[real] = sc
			total += sc.entries
		}
		found, written, gits, heads, upHeads, complete := sc.found, sc.written, sc.gits, sc.heads, sc.upHeads, sc.complete
		switch {
		case newLink && (len(found)+len(gits)+len(heads)+len(upHeads) > 0 || !complete):
			add(a.quarantineAs(l, filepath.Dir(l), written))
		case !complete:
			errs = append(errs, fmt.Errorf("%s leads to %s, which holds more than %d entries: what the sandbox made there was not all looked at; look before an editor, agent or tool on the host opens %s, or git runs there", l, real, linkMaxEntries, l))
		default:
			for _, p := range found {
				if a.changedInRun(p, real) {
					add(a.quarantineAs(p, filepath.Dir(p), written))
				}
			}
			for _, g := range gits {
				if id, ok := idOf(a.at(g)); ok && !a.known[id] && a.changedInRun(g, real) {
					add(a.quarantine(g, filepath.Dir(g)))
				}
			}
			for _, h := range heads {
				d := filepath.Dir(h)
				if id, ok := idOf(a.at(d)); ok && !a.known[id] && a.changedInRun(d, real) {
					add(a.quarantine(h, d))
				}
			}
			// A directory above the target laid out as a git directory:
			// judged by the entries that make it one, not by all it
			// holds (node_modules).
			for _, h := range upHeads {
				d := filepath.Dir(h)
				if id, ok := idOf(a.at(d)); ok && !a.known[id] && a.layoutChanged(d) {
					add(a.quarantine(h, d))
				}
			}
			// Judged: what was quarantined is gone from the target, as a
			// walk for the next link to it would find.
			sc.found, sc.gits, sc.heads, sc.upHeads = nil, nil, nil, nil
		}
	}
	return out, errs
}

// layoutChanged reports whether the run made or changed an entry that
// makes d a git directory (HEAD, config, commondir, objects, refs): their
// change times, which a sandbox cannot set back.
func (a *GitAudit) layoutChanged(d string) bool {
	for _, name := range []string{"HEAD", "config", "commondir", "objects", "refs"} {
		var st unix.Stat_t
		if unix.Lstat(a.at(filepath.Join(d, name)), &st) == nil && st.Ctim.Nano() >= a.since {
			return true
		}
	}
	return false
}

// matchAll reports whether each name matches its pattern (path.Match).
func matchAll(pats, names []string) bool {
	for i := range pats {
		if ok, _ := filepath.Match(pats[i], names[i]); !ok {
			return false
		}
	}
	return true
}

// findTails walks the directory fd (path dir, closed here) by fd, never
// following a symlink, calling match with every entry's path and its
// parts below the walk's start; what match takes is not descended into.
// false: the walk stopped at linkMaxEntries or auditMaxDepth.
func findTails(fd int, dir string, rel []string, depth int, n *int, match func(p string, relParts []string) bool) bool {
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		return false
	}
	complete := true
	for _, e := range ents {
		if *n++; *n > linkMaxEntries || depth >= auditMaxDepth {
			return false
		}
		parts := append(slices.Clip(rel), e.Name())
		p := filepath.Join(dir, e.Name())
		if match(p, parts) || !e.IsDir() {
			continue
		}
		sub, err := unix.Openat(fd, e.Name(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		if !findTails(sub, p, parts, depth+1, n, match) {
			complete = false
			break
		}
	}
	return complete
}

// walkedThere reports whether an end-of-run walk lists dir's entries: a
// searched directory, or the fixed part of a created pattern's "**",
// reaches it with no name the walk skips on the way.
func (a *GitAudit) walkedThere(dir string, globs []globPattern) bool {
	if slices.ContainsFunc(a.dirs, func(d string) bool { return walkedWith(dir, d) }) {
		return true
	}
	for _, g := range globs {
		if slices.Contains(splitPath(g.path), "**") && walkedWith(dir, fixedPart(g.path)) {
			return true
		}
	}
	return false
}

// unseenAtStart reports whether the link l, below root, lies where the
// start's walk looked and was not among the links it met.
func (a *GitAudit) unseenAtStart(l, root string) bool {
	if a.startLinks == nil {
		return false
	}
	rel, err := filepath.Rel(root, l)
	if err != nil || (a.startLinkDepth > 0 && strings.Count(rel, "/")+1 >= a.startLinkDepth) {
		return false // deeper than the start looked (targetMoved judges it)
	}
	id, ok := idOf(a.at(l))
	if !ok {
		return false
	}
	_, met := a.startLinks[id]
	return !met
}

// targetMoved reports whether the link l (resolved: real) leads to
// another directory than at the start. For a link the start met with its
// target, by that target's device and inode. For one it did not record
// (deeper than it looked, dangling then, or a record of an earlier
// version), by times: the target itself, or a link on the way, made or
// changed in the run (a stash renamed into the target's place, the
// target made a link to another; reviews 22, 23).
func (a *GitAudit) targetMoved(l, real string) bool {
	if id, ok := idOf(a.at(l)); ok {
		if was, met := a.startLinks[id]; met && was != (fileID{}) {
			now, _ := a.targetOf(l)
			return now != was
		}
	}
	var st unix.Stat_t
	if unix.Lstat(a.at(real), &st) == nil && st.Ctim.Nano() >= a.since {
		return true
	}
	_, links, _ := a.resolve(l)
	for _, s := range links {
		if unix.Lstat(a.at(s), &st) == nil && st.Ctim.Nano() >= a.since {
			return true
		}
	}
	return false
}

// resolve returns the real path p leads to and the symlinks met on the
// way (p itself first when it is one), at most 40 (the kernel's bound,
// path_resolution(7)); err when it leads nowhere. Each name is looked up
// through a.at: below a held root, in the directory the audit checked,
// whatever the path above it leads to by then. filepath.EvalSymlinks,
// by path from "/", read a decoy swapped in for the workspace and back
// during the audit, and what the run made behind a link went unseen (71
// of 300 audits, review 73).
func (a *GitAudit) resolve(p string) (real string, links []string, err error) {
	cur := "/"
	todo := splitPath(p)
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		if c == ".." {
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, c)
		var st unix.Stat_t
		if err := unix.Lstat(a.at(next), &st); err != nil {
			return "", links, &os.PathError{Op: "lstat", Path: next, Err: err}
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			cur = next
			continue
		}
		if len(links) >= 40 {
			return "", links, &os.PathError{Op: "lstat", Path: p, Err: unix.ELOOP}
		}
		t, err := os.Readlink(a.at(next))
		if err != nil {
			return "", links, err
		}
		links = append(links, next)
		if filepath.IsAbs(t) {
			cur = "/"
		}
		todo = append(splitPath(t), todo...)
	}
	return cur, links, nil
}

// targetOf is the package's targetOf at the end of a run: the link l
// resolved through the held roots (resolve).
func (a *GitAudit) targetOf(l string) (fileID, bool) {
	real, _, err := a.resolve(l)
	if err != nil {
		return fileID{}, false
	}
	return targetOf(a.at(real))
}

// targetOf is the device and inode of the directory the link l leads to
// (zero when it leads nowhere, or not to a directory).
func targetOf(l string) (fileID, bool) {
	var st unix.Stat_t
	if unix.Stat(l, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fileID{}, false
	}
	return fileID{dev: uint64(st.Dev), ino: st.Ino}, true
}

// linkScan is what the walk below one link target found (scanLinkTarget).
type linkScan struct {
	found, gits, heads, upHeads []string
	written                     string
	complete                    bool
	entries                     int // how many entries the walk looked at
}

// scanLinkTarget walks the directory fd (real, below root; relParts its
// path below root, from the first directory no walk lists) for what
// quarantineThroughLinks judges: matches of the created patterns' tails,
// and, with repos, repositories git on the host would find there.
func (a *GitAudit) scanLinkTarget(fd int, root, real string, relParts []string, from int, tails []linkTail, repos bool) *linkScan {
	var found []string
	var written string
	// A repository git on the host finds from below the link: a
	// .git (directory, gitfile or link), or a directory laid out as
	// a git directory (a HEAD beside objects and refs), which git
	// takes as a bare repository when run in it. Each is the
	// sandbox's config, hooks and fsmonitor (review 16).
	// Inside a repository's own git directory (a link to
	// .git/modules/sub) the protection of .git decides, as in the
	// walk, which never enters one.
	var gits, heads, upHeads []string
	// Invariant: only a .git the run protected (known at the start)
	// is left to its protection; a .git-named directory the sandbox
	// made in node_modules is nobody's (review 21).
	inGitDir := false
	if i := slices.Index(relParts, ".git"); i >= 0 {
		if id, ok := idOf(a.at(filepath.Join(root, filepath.Join(relParts[:i+1]...)))); ok && a.known[id] {
			inGitDir = true
		}
	}
	if repos && !inGitDir {
		// git run below the link starts at real and walks up: a
		// repository in a directory between the first skipped name
		// and real (node_modules/.git, or node_modules laid out as
		// a git directory, for a link to node_modules/p) is entered
		// too, and the walk never lists those directories (review
		// 20). Above the skipped name, the walk looked.
		for i := from; i < len(relParts)-1; i++ {
			d := filepath.Join(root, filepath.Join(relParts[:i+1]...))
			if g := filepath.Join(d, ".git"); !inert(a.at(g)) {
				gits = append(gits, g)
			}
			if gitDirLayout(a.at(d)) {
				upHeads = append(upHeads, filepath.Join(d, "HEAD"))
			}
		}
	}
	n := 0
	complete := findTails(fd, real, nil, 0, &n, func(p string, relParts []string) bool {
		if repos && !inGitDir {
			switch relParts[len(relParts)-1] {
			case ".git":
				if !inert(a.at(p)) {
					gits = append(gits, p)
				}
				return true
			case "HEAD":
				if gitDirLayout(a.at(filepath.Dir(p))) {
					heads = append(heads, p)
					return true
				}
			}
		}
		for _, t := range tails {
			if len(relParts) >= len(t.parts) && matchAll(t.parts, relParts[len(relParts)-len(t.parts):]) {
				found, written = append(found, p), t.written
				return true
			}
		}
		return false
	})
	return &linkScan{found: found, gits: gits, heads: heads, upHeads: upHeads, written: written, complete: complete, entries: n}
}
