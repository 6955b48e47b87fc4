// The hide step: what reads as empty inside, wherever it is visible.

package policy

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// maxHideMounts bounds the hides and the pins above them: each is a mount
// of every run (a tree with thousands of .env.example files cost 0.1 ->
// 0.4 s a start, measured), and an earlier sandbox can create files that
// match. Past it the run stops: leaving a hidden file unpinned would let
// a sandbox move it where the next run does not look.
const maxHideMounts = 2048

func (r *resolver) hide() error {
	type target struct {
		path string
		at   origin
	}
	var targets []target
	for _, e := range r.hideList {
		p := r.absolute(e.Path)
		if !e.pattern {
			rp, err := r.resolvePath(p, "/")
			if skippable(err) {
				continue
			}
			if err != nil {
				return e.at.err(err, "%v", err)
			}
			if rp.Missing == 0 {
				targets = append(targets, target{rp.Path, e.at})
			} else if first := rp.firstMissing(); !rp.NotDir && first == lexicalFirstMissing(p, rp.Missing) && !slices.Contains(r.res.Policy.AbsentHidden, first) {
				// Nothing to mount over now; the Landlock backend still
				// denies the name (found by review 67: a token `gh auth
				// login` wrote to ~/.config/gh mid-session was readable).
				// Only where the name is what it says: not past a file in
				// the way (NotDir: firstMissing is then that existing
				// file), nor through a symlink, which a sandbox may have
				// planted to point the denial at a host file every run
				// needs (review 70: lib -> libc.so.6 broke every later
				// landlock run).
				r.res.Policy.AbsentHidden = append(r.res.Policy.AbsentHidden, first)
			}
			continue
		}
		g, ok, err := r.globEntry(e, p, hidePattern(e), "hide")
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		for _, m := range g.matches {
			st, err := os.Lstat(m)
			if err == nil && st.Mode()&os.ModeSymlink != 0 {
				// A hidden file's content is hidden also when the name
				// is a symlink to it (".env -> conf/prod-values"): the
				// regular file it leads to is hidden, when it lies in a
				// writable directory of this run (review: such a .env
				// was not hidden at all). Never elsewhere: a sandbox
				// writes these links, and ".env.sh -> /bin/sh" would
				// hide the host's shell from every later sandbox of the
				// workspace (second review). A file outside stays as
				// visible as it is at its own path.
				if rp, err := r.resolvePath(m, "/"); err == nil && rp.Missing == 0 && r.inWritableRoot(rp.Path) {
					if tst, err := os.Stat(rp.Path); err == nil && tst.Mode().IsRegular() {
						targets = append(targets, target{rp.Path, e.at})
					}
				}
				continue
			}
			if err == nil && e.Dir != st.IsDir() {
				continue
			}
			targets = append(targets, target{m, e.at})
		}
		// Fail closed: what a directory the walk cannot look into holds
		// is unknown, and a sandbox (same uid) could chmod it back and
		// read a match an earlier sandbox chmod'ed away from the walk.
		for _, d := range g.unlisted {
			// Not over a bind the run asked for (the workspace itself
			// made unreadable): stop instead of replacing it.
			for _, it := range r.mounts {
				if it.m.Kind == sandbox.MountBind && within(it.m.Source, d) {
					return e.at.err(fs.ErrPermission, "cannot look into %s (permission denied) for %s, and it holds %s (%s): make it readable (chmod u+rx %s), or remove the entry with \"!%s\" in your config", d, e.Path, it.m.Source, it.why, d, e.written)
				}
			}
			targets = append(targets, target{d, e.at})
		}
		if len(g.unlisted) > 0 {
			r.warn(e.at.warn(false, "cannot look into %s (permission denied) to match %s: hidden whole", someOf(g.unlisted), e.Path))
		}
	}
	// Invariant: a hidden path is hidden wherever it is visible inside,
	// through the host root and through every bind above it; a hide is
	// applied after every other mount, so no later mount uncovers it.
	seen := map[string]bool{}
	pins := map[string]bool{}
	for _, it := range r.mounts {
		pins[it.m.Dest] = true
	}
	var newPins []mountItem
	for _, t := range targets {
		// Invariant: inside a writable bind, every directory between the
		// bind and a hidden path is pinned (a mount point cannot be
		// renamed). Otherwise a sandbox could move the directory that
		// holds a .env where the next run's walk does not look
		// (node_modules/, past its depth) or under a name that run
		// cannot hide, and that run would read the secret. The hidden
		// path itself is a mount point inside already.
		for _, loc := range r.insideLocations(t.path, true) {
			b := r.mounts[loc.prov].m
			newPins = r.pinChain(newPins, pins, t.path, b, t.at, rebase(t.path, b.Source, b.Dest)+" stays where its hide is")
		}
		for _, loc := range r.insideLocations(t.path, false) {
			if seen[loc.q] {
				continue
			}
			seen[loc.q] = true
			// A hidden directory above another mount would bury it: the
			// empty read-only tmpfs has no room for its mount point.
			for _, it := range r.mounts {
				if it.m.Dest != loc.q && within(it.m.Dest, loc.q) && !strings.HasPrefix(it.why, "pin:") {
					return t.at.err(nil, "hiding %s would also hide %s (%s); hide a narrower path or mount it elsewhere", loc.q, it.m.Dest, it.why)
				}
			}
			r.hides = append(r.hides, PlanEntry{Mount: sandbox.Mount{Kind: sandbox.MountHide, Dest: loc.q}, Why: "hidden: reads as empty (" + r.whereText(t.at) + ")"})
		}
		if n := len(r.hides) + len(newPins); n > maxHideMounts {
			var got []string
			for _, h := range r.hides[len(r.hides)-min(len(r.hides), 3):] {
				got = append(got, h.Dest)
			}
			return t.at.err(nil, "hiding takes more than %d mounts (%s); if a sandbox made these files, remove them, else hide fewer paths (.env.example and the like match .env*)", maxHideMounts, someOf(got))
		}
	}
	// A hide inside another hide is already hidden: drop it, looking up
	// each ancestor among the kept ones (a set: n hides cost n·depth).
	sort.SliceStable(r.hides, func(a, b int) bool { return r.hides[a].Dest < r.hides[b].Dest })
	kept := map[string]bool{}
	var out []PlanEntry
	for _, h := range r.hides {
		covered := false
		for p := h.Dest; !covered; p = filepath.Dir(p) {
			covered = kept[p]
			if p == "/" || p == "." {
				break
			}
		}
		if !covered {
			kept[h.Dest] = true
			out = append(out, h)
		}
	}
	r.hides = out
	r.mounts = append(r.mounts, newPins...)
	r.sortMounts()
	return nil
}

// hidePattern is the walk's pattern for a hide entry: a file entry
// matches regular files and symlinks (whose targets hide hides), a
// directory entry directories.
func hidePattern(e expandedEntry) globPattern {
	return globPattern{fileOnly: !e.Dir, links: !e.Dir}
}

// inWritableRoot reports whether p lies in one of the run's writable
// directories.
func (r *resolver) inWritableRoot(p string) bool { return r.writableRootOf(p) != "" }

// writableRootOf is the deepest writable root that holds p (p itself,
// when it is one), "" when none does.
func (r *resolver) writableRootOf(p string) string {
	root := ""
	for _, rw := range r.rwRoots {
		if within(p, rw) && len(rw) > len(root) {
			root = rw
		}
	}
	return root
}

// lexicalFirstMissing is the path the first missing component of p would
// have if nothing on the way were a symlink: p without its last
// missing-1 components.
func lexicalFirstMissing(p string, missing int) string {
	for i := 1; i < missing; i++ {
		p = filepath.Dir(p)
	}
	return p
}
