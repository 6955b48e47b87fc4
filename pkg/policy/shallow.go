package policy

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Every writable directory is searched like the workspace: the base
// profile's nested entries ("$NSBOX_RW/**/.git", "$NSBOX_RW/**/.env*",
// "$NSBOX_RW/*/**/.vscode" ...) expand once per writable directory, and
// the run's audit looks for the repositories and agent files a run made in
// each. A directory given with --rw is no less the host's than the
// workspace: git run in a repository there, an editor or agent opened on
// a project there, runs what the sandbox left in it.
//
// A tree too big for the walk's bound (a package cache of 60,000
// directories) stops the run, as a workspace that big does: an earlier
// sandbox could have made it that big to hide what it planted. The user
// who will not run git, an editor or an agent there says so by name,
// `--shallow DIR` (filesystem.shallow): the nested entries skip DIR, whose
// top level stays hidden and protected ($NSBOX_RW/NAME) and audited.

// shallowDirs is the "shallow" step: the writable directories the nested
// walks skip, each named by its real path. One on the command line must
// be a writable directory of this run (anything else would loosen
// nothing, and a typo would stay unnoticed); a config file's or
// profile's for another directory is skipped with a note.
//
// Invariant: a removal ("!DIR") names a directory as an entry does, by
// its real path, never by its text: --shallow '!/w/' must undo a config's
// shallow = ["$NSBOX_WORKSPACE"] for /w, or the user's request for the
// protections back was dropped without a word (review 15); one that
// removes nothing says so. The order is the merge's for lists: the
// layers below the command line, the config file's removals after them
// (it ranks below the profile, and dropping a profile's entry is what
// they are for), then the command line's entries.
func (r *resolver) shallowDirs() error {
	set := []string{}
	apply := func(l *Layer, i int, raw string) error {
		at := origin{layer: l, key: fmt.Sprintf("filesystem.shallow[%d]", i)}
		remove := strings.HasPrefix(raw, "!")
		v, ok, err := r.expandAt(strings.TrimPrefix(raw, "!"), at)
		if !ok {
			return err
		}
		rp, err := r.resolvePath(v, r.h.Cwd)
		if err != nil {
			return at.err(err, "%v", err)
		}
		if !remove {
			if !slices.Contains(r.rwRoots, rp.Path) && l.Kind != KindFlags {
				// A config's or profile's entry for a directory this run
				// does not make writable (a cache given with --rw in
				// other runs) applies to no run but those (review 16).
				r.warn(at.warn(true, "%s is not a writable directory of this run; shallow entry skipped", rp.Path))
				return nil
			}
			if !slices.Contains(r.rwRoots, rp.Path) {
				return at.err(ErrNotWritableDir, "%s is not a writable directory of this run (writable: %s): only a whole writable directory can be left unsearched", rp.Path, strings.Join(r.rwRoots, ", "))
			}
			if !slices.Contains(set, rp.Path) {
				set = append(set, rp.Path)
			}
			return nil
		}
		n := len(set)
		set = slices.DeleteFunc(set, func(d string) bool { return d == rp.Path })
		if len(set) == n {
			r.warn(at.warn(false, "%s removes nothing: %s is not a shallow directory of this run", raw, rp.Path))
		}
		return nil
	}
	each := func(keep func(l *Layer, raw string) bool) error {
		for _, l := range r.layers {
			for i, raw := range l.Config.Filesystem.Shallow {
				if keep(l, raw) {
					if err := apply(l, i, raw); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	isRemoval := func(raw string) bool { return strings.HasPrefix(raw, "!") }
	if err := each(func(l *Layer, raw string) bool {
		return l.Kind != KindFlags && (l.Kind != KindConfig || !isRemoval(raw))
	}); err != nil {
		return err
	}
	if err := each(func(l *Layer, raw string) bool { return l.Kind == KindConfig && isRemoval(raw) }); err != nil {
		return err
	}
	if err := each(func(l *Layer, raw string) bool { return l.Kind == KindFlags }); err != nil {
		return err
	}
	sort.Strings(set)
	r.shallow = set
	r.res.Shallow = set
	r.oldSpellings()
	return nil
}

// nestedWalk reports whether a hide or protect entry searches below the
// top of a writable directory ("**"): what a shallow directory skips.
func nestedWalk(s string) bool { return strings.Contains(s, "**") }

// shallowHint is the end of a walk's too-big error for the pattern p:
// the knob that skips the writable directory it searches (the innermost
// one that holds its start).
func (r *resolver) shallowHint(p string) string {
	dir := ""
	for _, root := range r.rwRoots {
		if within(fixedPart(p), root) && len(root) > len(dir) {
			dir = root
		}
	}
	if dir == "" {
		return ""
	}
	// Both spellings: every command that resolves a policy takes the
	// flag, and the config file's key reaches them all.
	return fmt.Sprintf("; a writable directory you will not run git, an editor or an agent in can be left unsearched with --shallow %s (or shallow = [%q] under [filesystem] in your config file)", dir, dir)
}

// usesRW reports whether s names $NSBOX_RW: "${NSBOX_RW}", or
// "$NSBOX_RW" not followed by a letter, digit or underscore. (A compiled
// regexp said the same, at ~40 µs of every run's start.)
func usesRW(s string) bool {
	for {
		i := strings.IndexByte(s, '$')
		if i < 0 {
			return false
		}
		s = s[i+1:]
		if strings.HasPrefix(s, "{NSBOX_RW}") {
			return true
		}
		if rest, ok := strings.CutPrefix(s, "NSBOX_RW"); ok && (rest == "" || !isNameByte(rest[0])) {
			return true
		}
	}
}

func isNameByte(c byte) bool { return c == '_' || isASCIIAlpha(c) || ('0' <= c && c <= '9') }

// expandEach expands a hide or protect entry: once, or, when it uses
// $NSBOX_RW, once per writable bind directory (for a nested entry, each
// one not shallow).
func (r *resolver) expandEach(s string, at origin, escape bool) ([]string, error) {
	saved := r.vars
	defer func() { r.vars = saved }()
	if !usesRW(s) {
		r.vars = r.varsFor("", escape)
		v, ok, err := r.expandAt(s, at)
		if !ok {
			return nil, err
		}
		return []string{v}, nil
	}
	var out []string
	for _, root := range r.rwRoots {
		if nestedWalk(s) && slices.Contains(r.shallow, root) {
			if _, ok := bareRepoPattern(s); ok {
				r.shallowRepos = true
			}
			continue
		}
		// From the caller's values, not the last root's (review 57:
		// each further root escaped them again).
		r.vars = saved
		r.vars = r.varsFor(root, escape)
		v, ok, err := r.expandAt(s, at)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, v)
		}
	}
	return out, nil
}

type varsKey struct {
	rw     string
	escape bool
}

// varsFor returns the values an entry expands with: r.vars, with
// $NSBOX_RW set to rw when rw is not "", each value escaped (escapeGlob)
// for a pattern, where the values must match themselves. Each is made
// once a resolution: building one for every entry was a fifth of a run's
// policy resolution.
func (r *resolver) varsFor(rw string, escape bool) vars {
	if rw == "" && !escape {
		return r.vars
	}
	key := varsKey{rw, escape}
	if v, ok := r.varsCache[key]; ok {
		return v
	}
	v := make(vars, len(r.vars)+1)
	for k, x := range r.vars {
		if escape {
			x = escapeGlob(x)
		}
		v[k] = x
	}
	if rw != "" {
		if escape {
			rw = escapeGlob(rw)
		}
		v["NSBOX_RW"] = rw
	}
	if r.varsCache == nil {
		r.varsCache = map[varsKey]vars{}
	}
	r.varsCache[key] = v
	return v
}

// oldSpellings warns about a removal that names a base-profile entry by
// its spelling before every writable directory was searched
// ("!$NSBOX_WORKSPACE/**/.git"): it removes nothing now, and the entry it
// meant to drop, "$NSBOX_RW/**/.git", stays.
func (r *resolver) oldSpellings() {
	for _, l := range r.layers {
		fs := &l.Config.Filesystem
		for i, list := range [][]PathEntry{fs.Hide, fs.Protect} {
			key, merged := "filesystem.hide", r.m.hide
			if i == 1 {
				key, merged = "filesystem.protect", r.m.protect
			}
			for j, e := range list {
				rest, ok := strings.CutPrefix(e.Path, "$NSBOX_WORKSPACE/")
				if !e.Remove || !ok || !nestedWalk(rest) {
					continue
				}
				now := "$NSBOX_RW/" + rest
				if slices.ContainsFunc(merged, func(m entry) bool { return m.Path == now }) {
					at := origin{layer: l, key: fmt.Sprintf("%s[%d]", key, j)}
					r.warn(at.warn(false, "!%s removes nothing: the base profile names it %s (every writable directory is searched, the workspace included); write !%s", e.Path, now, now))
				}
			}
		}
	}
}
