package policy

import (
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"
)

// gitEnclosing: invariant: when a writable root is a linked worktree
// (its .git a file naming a git directory outside) or lies inside a
// repository whose .git is above it (a monorepo package given as the
// workspace), what that repository's configs point git to inside the
// writable directories stays read-only, as for a .git inside one. The
// configs themselves are outside, read-only inside; what they name in the
// workspace was not: a core.hooksPath of .githooks (or husky's
// frontend/.husky/_), a core.fsmonitor of ./tools/fsmon in the worktree's
// config.worktree, or pre-commit's config, which the host's next git
// commit or status in that worktree ran (review). Done for the entries
// that protect a .git, as gitUserConfigs is.
//
// Only a .git outside every writable directory, or the root's own .git
// file (protected read-only, so the host's, like the rest of the root's
// .git), is followed out of the writable directories: the sandbox cannot
// have written either.
func (r *resolver) gitEnclosing(pp *protectPass) error {
	var x *expandedEntry
	for i := range r.protectList {
		if filepath.Base(filepath.Clean(r.protectList[i].Path)) == ".git" {
			x = &r.protectList[i]
			break
		}
	}
	if x == nil {
		return nil
	}
	for _, root := range r.rwRoots {
		top, dotGit, st := "", "", os.FileInfo(nil)
		for d := root; ; d = filepath.Dir(d) {
			if fi, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
				top, dotGit, st = d, filepath.Join(d, ".git"), fi
				break
			}
			if d == "/" {
				break
			}
		}
		if top == "" || (top == root && st.IsDir()) {
			continue // none, or the root's own .git directory (gitLinks)
		}
		if top != root && st.Mode()&os.ModeSymlink != 0 && !r.beneathAnyRoot(top) {
			// Above the writable directories the link is the host's,
			// and git follows it.
			if fi, err := os.Stat(dotGit); err == nil {
				st = fi
			}
		}
		var gitDirs []string
		switch {
		case st.IsDir():
			gitDirs = []string{dotGit}
		case st.Mode().IsRegular():
			for _, v := range gitfileValues(readSmall(dotGit, maxGitfile), "gitdir:") {
				if !filepath.IsAbs(v) {
					v = filepath.Join(top, v)
				}
				gitDirs = append(gitDirs, filepath.Clean(v))
			}
		}
		var configs, hookDirs []string
		for _, g := range gitDirs {
			if r.beneathAnyRoot(g) {
				continue // inside: gitLinks protects it and what it names
			}
			if fi, err := os.Stat(filepath.Join(g, "HEAD")); err != nil || !fi.Mode().IsRegular() {
				continue // not a git directory: git ignores it
			}
			common := g
			for _, v := range gitfileValues(readSmall(filepath.Join(g, "commondir"), maxGitfile), "") {
				if !filepath.IsAbs(v) {
					v = filepath.Join(g, v)
				}
				common = filepath.Clean(v)
				break
			}
			configs = append(configs, filepath.Join(g, "config.worktree"), filepath.Join(common, "config"), filepath.Join(common, "config.worktree"))
			hookDirs = append(hookDirs, filepath.Join(common, "hooks"))
		}
		var outside []string
		for _, c := range dedupStrings(configs) {
			if !r.beneathAnyRoot(c) {
				outside = append(outside, c)
			}
		}
		if err := r.protectRepoConfigs(x.entry, top, outside, hookDirs, pp); err != nil {
			return err
		}
	}
	return nil
}

// protectRepoConfigs protects what the configs of a repository whose work
// tree's top is top point git to, and what the hooks in hookDirs and in
// the hooks directories those configs name (core.hooksPath) run from the
// work tree (hook managers).
func (r *resolver) protectRepoConfigs(e entry, top string, configs, hookDirs []string, pp *protectPass) error {
	hookDirs = slices.Clone(hookDirs)
	for _, c := range configs {
		ptrs := gitConfigPointers(c, top, r.home, r.rwRoots, nil)
		if err := r.protectPointers(e, c, ptrs, pp); err != nil {
			return err
		}
		for _, ptr := range ptrs {
			if ptr.dir {
				hookDirs = append(hookDirs, ptr.path) // a core.hooksPath
			}
		}
	}
	for _, d := range dedupStrings(hookDirs) {
		held, audited := hookManagerPointers(d, top, r.rwRoots)
		if err := r.protectPointers(e, d, held, pp); err != nil {
			return err
		}
		r.auditPointers(audited)
	}
	return nil
}

// auditPointers adds to the run's audit (auditCreated) the files hooks
// would run that do not exist now: one the run makes inside a
// writable directory is quarantined when the run ends.
func (r *resolver) auditPointers(ptrs []gitPointer) {
	for _, ptr := range ptrs {
		if !slices.ContainsFunc(r.rwRoots, func(rw string) bool { return within(ptr.path, rw) && ptr.path != rw }) {
			continue // read-only inside: nothing can be made there
		}
		pat, ok := literalPattern(ptr.path)
		if !ok || slices.ContainsFunc(r.hookCreated, func(c createdPattern) bool { return c.Path == pat }) {
			continue
		}
		// Written (what --dry-run's audit plan and a quarantine
		// report name) is the path itself: no entry of a policy wrote it.
		r.hookCreated = append(r.hookCreated, createdPattern{Path: pat, Written: ptr.path, Dir: ptr.dir})
	}
}

// beneathAnyRoot: p is a writable root or inside one.
func (r *resolver) beneathAnyRoot(p string) bool {
	for _, rw := range r.rwRoots {
		if within(p, rw) {
			return true
		}
	}
	return false
}

// maxLinkedWorktrees bounds how many entries of a .git/worktrees are read.
const maxLinkedWorktrees = 256

type linkedWorktree struct{ name, top string }

// linkedWorktrees lists the linked worktrees that the git directory d
// records (d/worktrees/NAME, a directory, not a symlink) with the top of
// each, from its gitdir file (the path of the worktree's .git file).
func linkedWorktrees(d string, roots []string) []linkedWorktree {
	dir := filepath.Join(d, "worktrees")
	if st, err := os.Lstat(dir); err != nil || !st.IsDir() {
		return nil
	}
	f, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	ents, _ := f.ReadDir(maxLinkedWorktrees)
	var out []linkedWorktree
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		top := ""
		for _, v := range gitfileValues(readConfigFile(filepath.Join(dir, e.Name(), "gitdir"), roots), "") {
			if filepath.IsAbs(v) {
				top = filepath.Dir(filepath.Clean(v))
				break
			}
		}
		if top != "" {
			out = append(out, linkedWorktree{e.Name(), top})
		}
	}
	return out
}
