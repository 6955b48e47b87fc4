// Git's part of the protect step (protectGit): bare repositories,
// gitlinks and submodules, gitdir: and commondir targets, and what git
// configs point to. gitconfig.go parses the configs; gitaudit.go checks the
// repositories after the run.

package policy

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// gitScan is the state of one protectGit: what its scans of .git
// directories may still visit (the trees they read are the sandbox's to
// write), the .git paths already read, and the work trees of the
// repositories protected.
type gitScan struct {
	budget    int
	scanned   map[string]bool
	repoTrees []string
}

// protectGit is git's part of the protect step, run on what the protect
// entries made read-only (done). git on the host runs code from a
// repository (hooks, core.fsmonitor, filters) and follows what it points
// to, so with a protected .git also goes read-only:
//
//   - for a pattern of repositories ("DIR/**/.git"): the bare repositories
//     and checked-out submodules below DIR, and the git audit of the run;
//   - for each protected .git or bare repository: the git directories its
//     .git files and submodules link to, and what its config points git to
//     (hooks directories, included files) inside a writable directory;
//   - what the user's own git configs point every repository to;
//   - a writable root that is itself a git directory: its config, hooks
//     and the like.
func (r *resolver) protectGit(pp *protectPass, done []protectedPath) error {
	gs := &gitScan{budget: maxGitScanDirs, scanned: map[string]bool{}}
	for _, x := range r.protectList {
		more, err := r.gitRepositories(x, pp)
		if err != nil {
			return err
		}
		done = append(done, more...)
	}
	for _, d := range done {
		if err := r.gitLinks(d.x.entry, d.path, gs, pp); err != nil {
			return err
		}
		if err := r.protectBound(d.x.entry, pp); err != nil {
			return err
		}
	}
	if err := r.gitUserConfigs(gs, pp); err != nil {
		return err
	}
	if err := r.protectHostRunFiles(pp); err != nil {
		return err
	}
	if err := r.gitEnclosing(pp); err != nil {
		return err
	}
	return r.gitRoots(pp)
}

// protectGlob is how a protect pattern is matched: a pattern of
// repositories goes as deep as the git audit looks, since what it trusts
// after the run must have been protected during it. Any other pattern
// matches symlinks too, protected as a named entry's are (protectOne:
// the link kept in place, what it leads to in a writable directory
// read-only): a monorepo package's .npmrc that links to a shared file in
// the workspace was otherwise left out, and the sandbox changed what it
// says through the shared file (the audit at the end judges a link by its
// own inode).
func protectGlob(p string) globPattern {
	if _, ok := bareRepoPattern(p); ok {
		return globPattern{maxDepth: auditMaxDepth}
	}
	return globPattern{links: true}
}

// gitRepositories protects, for a pattern of repositories x
// ("DIR/**/.git"), the bare repositories below DIR and the .git files of
// the checked-out submodules the indexes record (also where the walk does
// not go, node_modules/x, target/: git status at the top enters them). The
// run's git audit searches the DIR of every such pattern again when the
// sandbox has ended.
func (r *resolver) gitRepositories(x expandedEntry, pp *protectPass) ([]protectedPath, error) {
	e := x.entry
	head, ok := bareRepoPattern(x.Path)
	p := r.absolute(x.Path)
	if !ok || !x.pattern {
		return nil, nil
	}
	// The protect loop matched it already (and named its errors).
	g, ok, err := r.globAs(p, protectGlob(x.Path))
	if err != nil || !ok || g.tooMany {
		return nil, nil
	}
	bare, err := r.bareRepos(head)
	if err != nil {
		return nil, e.at.err(err, "%v", err)
	}
	paths := bare
	subs, present, err := r.submoduleCheckouts(g.matches)
	if err != nil {
		return nil, e.at.err(err, "%v", err)
	}
	for _, sm := range present {
		if _, err := os.Lstat(filepath.Join(sm, ".git")); err == nil {
			paths = append(paths, filepath.Join(sm, ".git"))
		}
	}
	withLinks, _, err := r.globAs(p, globPattern{links: true, maxDepth: auditMaxDepth})
	if err != nil {
		return nil, e.at.err(err, "%v", err)
	}
	if r.res.GitAudit == nil {
		r.res.GitAudit = r.newGitAudit()
	}
	// The audit's directory is a path, not a pattern: the pattern's
	// fixed part, its escapes removed (a workspace at /src/app[v2] stands
	// escaped in head; kept so, the audit looked for repositories below
	// a directory named "app\[v2]" and found none: review).
	r.res.GitAudit.addDir(fixedPart(head), withLinks.matches, bare, g.unlisted, subs)
	var out []protectedPath
	for _, q := range paths {
		ok, err := r.protectMatch(x, q, pp)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, protectedPath{x, q})
		}
	}
	return out, nil
}

// gitLinks protects what the protected path p, when it is a repository,
// points git to: for a bare repository, what its config names; for a
// .git, the git directories its .git file and its submodules link to
// (gitLinked) and what the configs of all of them name.
func (r *resolver) gitLinks(e entry, p string, gs *gitScan, pp *protectPass) error {
	p = filepath.Clean(p)
	if filepath.Base(p) != ".git" && gitDirLayout(p) {
		// A bare repository: hooks run in it.
		gs.repoTrees = append(gs.repoTrees, p)
		config := filepath.Join(p, "config")
		return r.protectPointers(e, config, gitConfigPointers(config, p, r.home, r.rwRoots, nil), pp)
	}
	if filepath.Base(p) != ".git" || gs.scanned[p] {
		return nil
	}
	gs.scanned[p] = true
	more, err := r.gitLinked(p, &gs.budget)
	if err != nil {
		return e.at.err(err, "%v", err)
	}
	for _, g := range more {
		if err := r.protectOne(e, g, pp); err != nil {
			return err
		}
	}
	// What the repository's config points git to.
	gs.repoTrees = append(gs.repoTrees, filepath.Dir(p))
	gitDirs := more
	if st, err := os.Lstat(p); err == nil && st.IsDir() {
		gitDirs = append([]string{p}, more...)
	}
	var configs, hookDirs []string
	for _, d := range gitDirs {
		if st, err := os.Lstat(d); err != nil || !st.IsDir() {
			continue
		}
		hookDirs = append(hookDirs, filepath.Join(d, "hooks"))
		configs = append(configs, filepath.Join(d, "config"), filepath.Join(d, "config.worktree"))
	}
	if err := r.protectRepoConfigs(e, filepath.Dir(p), configs, hookDirs, pp); err != nil {
		return err
	}
	// Invariant: the configs of this repository's linked worktrees
	// (extensions.worktreeConfig: .git/worktrees/NAME/config.worktree,
	// read by git in that worktree only) are read too, relative to that
	// worktree's top, which may lie outside: an include.path or
	// core.fsmonitor there naming a file in this workspace made the
	// host's git status in the outside worktree run what the sandbox
	// wrote (review). Read by fd below the writable root, as every file
	// of a .git inside one (readConfigFile).
	for _, d := range gitDirs {
		for _, wt := range linkedWorktrees(d, r.rwRoots) {
			// The worktree's own .git file, where the walk may not look
			// (.cache/wt, node_modules/x): rewritten to "gitdir:" a
			// directory the sandbox made, the host's git in that
			// worktree ran the sandbox's config (review).
			if gf := filepath.Join(wt.top, ".git"); r.beneathAnyRoot(gf) && present(gf, r.rwRoots) {
				if err := r.protectOne(e, gf, pp); err != nil {
					return err
				}
			}
			cfg := filepath.Join(d, "worktrees", wt.name, "config.worktree")
			if err := r.protectPointers(e, cfg, gitConfigPointers(cfg, wt.top, r.home, r.rwRoots, nil), pp); err != nil {
				return err
			}
		}
	}
	return nil
}

// gitUserConfigs: the user's own git configs may point every repository
// to a hooks directory or an included file in a writable directory: those
// are protected with the entries that protect a .git.
func (r *resolver) gitUserConfigs(gs *gitScan, pp *protectPass) error {
	for _, x := range r.protectList {
		if filepath.Base(filepath.Clean(x.Path)) != ".git" {
			continue
		}
		var files []string
		if r.h.ConfigHome != "" {
			files = append(files, filepath.Join(r.h.ConfigHome, "git", "config"))
		}
		if r.home != "" {
			files = append(files, filepath.Join(r.home, ".gitconfig"))
		}
		files = append(files, "/etc/gitconfig")
		// The configs the caller's environment gives git instead (a
		// git run later from the same shell reads them), read beside
		// the usual ones: at worst more is protected.
		// And the variables it sets itself (GIT_CONFIG_PARAMETERS,
		// GIT_CONFIG_KEY_n).
		var envVars []gitConfigVar
		if lookup := r.h.LookupEnv; lookup != nil {
			for _, k := range []string{"GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM"} {
				if f, ok := lookup(k); ok && filepath.IsAbs(f) {
					files = append(files, filepath.Clean(f))
					// The file itself too, where it lies in a writable
					// place (a dev.gitconfig in the workspace that a
					// Makefile or direnv names): the next git from the
					// caller's shell runs what it says (review 48). The
					// usual configs are in the base profile's list.
					if err := r.protectOne(x.entry, filepath.Clean(f), pp); err != nil {
						return err
					}
				}
			}
			envVars = append(gitEnvConfig(lookup), gitEnvPrograms(lookup)...)
		}
		// A relative core.hooksPath there counts for every repository:
		// each writable root, and each repository found in them.
		trees := dedupStrings(append(append([]string(nil), r.rwRoots...), gs.repoTrees...))
		for _, f := range dedupStrings(files) {
			// Read where its link leads: a dotfiles manager's
			// ~/.gitconfig is a symlink into a checkout, and read with
			// O_NOFOLLOW (gitConfigPointers) it was never read, what it
			// includes or names as hooks left writable (review 49). The
			// user's own file, outside the sandbox's reach or protected
			// itself (the base profile).
			real := f
			if p, err := filepath.EvalSymlinks(f); err == nil {
				real = p
			}
			// Relative includes against both directories: git's (the
			// link's) and the target's; at worst more is protected.
			ptrs := gitVarsPointersAt(nil, real, f, "", r.home, r.rwRoots, trees)
			if real != f {
				ptrs = append(ptrs, gitConfigPointers(real, "", r.home, r.rwRoots, trees)...)
			}
			if err := r.protectPointers(x.entry, f, ptrs, pp); err != nil {
				return err
			}
		}
		if envVars != nil {
			return r.protectPointers(x.entry, "the environment's git configuration (GIT_CONFIG_PARAMETERS, GIT_CONFIG_KEY_n, GIT_TEMPLATE_DIR, GIT_EXTERNAL_DIFF, GIT_SSH_COMMAND, EDITOR, ...)", gitVarsPointers(envVars, "", "", r.home, r.rwRoots, trees), pp)
		}
		return nil
	}
	return nil
}

// gitRoots: invariant: a writable root that is itself a git directory (a
// bare repository given with --rw) keeps what git runs read-only, as its
// .git would be: its worktrees, also outside the sandbox, run its config
// and hooks. Done for the entries that protect something of the root's
// .git ("$NSBOX_RW/.git/", its hooks or config).
func (r *resolver) gitRoots(pp *protectPass) error {
	for _, root := range r.rwRoots {
		if !gitDirLayout(root) {
			continue
		}
		for _, x := range r.protectList {
			if !within(filepath.Clean(r.absolute(x.Path)), filepath.Join(root, ".git")) {
				continue
			}
			for _, m := range gitRootMeta {
				mp := filepath.Join(root, m.name)
				if _, err := os.Lstat(mp); err != nil && !m.always {
					continue
				}
				me := x.entry
				me.Dir = m.dir
				if err := r.protectOne(me, mp, pp); err != nil {
					return err
				}
			}
			config := filepath.Join(root, "config")
			if err := r.protectPointers(x.entry, config, gitConfigPointers(config, root, r.home, r.rwRoots, nil), pp); err != nil {
				return err
			}
			break
		}
	}
	return nil
}

// bareRepoPattern returns, for a protect pattern of repositories
// ("DIR/**/.git"), the pattern that finds the bare ones by their HEAD
// ("DIR/**/HEAD"), walked with it.
func bareRepoPattern(p string) (string, bool) {
	if dir, ok := strings.CutSuffix(p, "/**/.git"); ok && hasGlob(p) {
		return dir + "/**/HEAD", true
	}
	return "", false
}

// bareRepos returns the bare repositories among the directories that hold
// a file matching head: a HEAD file next to objects/ and refs/ directories,
// not in a .git (those are protected as such). git on the host runs what
// such a repository's config and hooks say for every worktree of it, even
// one outside the workspace, and for every push to it.
func (r *resolver) bareRepos(head string) ([]string, error) {
	g, ok, err := r.globAs(r.absolute(head), globPattern{fileOnly: true, links: true, maxDepth: auditMaxDepth})
	if !ok || err != nil {
		return nil, err
	}
	if g.tooMany {
		return nil, fmt.Errorf("matching %s stopped after %d directories, so the bare repositories beyond cannot be protected; if a sandbox made them, remove them%s", head, walkMaxDirs, r.shallowHint(r.absolute(head)))
	}
	var out []string
	for _, m := range g.matches {
		d := filepath.Dir(m)
		if filepath.Base(d) == ".git" || strings.HasSuffix(filepath.Base(d), quarantineSuffix) || r.holdsRoot(d) {
			// A writable directory, or one above it, is never made
			// read-only whole: a sandbox could plant HEAD, objects/
			// and refs/ above a --rw directory to stop the next run's
			// work (a root that is a git directory: gitRoot).
			continue
		}
		if gitDirLayout(d) {
			out = append(out, d)
		}
	}
	return out, nil
}

// submoduleCheckouts returns the checkouts of the gitlinks (submodules)
// that the index of each .git directory in gits records (all), and those
// of them that exist as directories (present). They are looked up by fd
// below their writable root, never through a symlink (git refuses a
// submodule path beyond one; a symlink on the way was put there by a
// sandbox, and is an error).
func (r *resolver) submoduleCheckouts(gits []string) (all, present []string, err error) {
	for _, g := range gits {
		if st, err := os.Lstat(g); err != nil || !st.IsDir() {
			continue
		}
		index := filepath.Join(g, "index")
		sha256 := strings.Contains(strings.ToLower(string(readSmall(filepath.Join(g, "config"), maxSubmoduleConfig))), "objectformat = sha256")
		for _, l := range gitlinks(index, sha256) {
			sm := filepath.Join(filepath.Dir(g), filepath.FromSlash(l))
			fd, _, err := r.openBeneath(index, sm)
			if err != nil {
				return nil, nil, err
			}
			all = append(all, sm)
			if fd >= 0 {
				unix.Close(fd)
				present = append(present, sm)
			}
			if len(all) > maxProtectMounts {
				return nil, nil, fmt.Errorf("%s records more than %d submodules; if a sandbox made them, remove them", index, maxProtectMounts)
			}
		}
	}
	return all, present, nil
}

// holdsRoot reports whether d is a writable root or above one.
func (r *resolver) holdsRoot(d string) bool {
	for _, rw := range r.rwRoots {
		if within(rw, d) {
			return true
		}
	}
	return false
}

// gitRootMeta are the entries of a git directory that make git on the host
// run code or take settings from it; always: protected also when missing.
var gitRootMeta = []struct {
	name        string
	dir, always bool
}{
	{"config", false, true}, {"hooks", true, true}, {"config.worktree", false, true},
	{"info", true, true}, {"worktrees", true, true}, {"modules", true, true},
	{"remotes", true, true}, {"branches", true, true},
	// Not created when missing: an empty commondir breaks git on the
	// host for the run's length. One the sandbox creates is renamed by
	// the git audit.
	{"commondir", false, false},
}

// someOf names a few of paths, and how many there are.
func someOf(paths []string) string {
	if len(paths) <= 3 {
		return strings.Join(paths, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(paths[:3], ", "), len(paths)-3)
}

// Bounds of what protect reads of a repository the sandbox may have
// written before, and of what it protects.
const (
	maxProtectMounts    = 2048 // protected paths and their pins, in all
	maxGitScanDirs      = 8192 // directories the .git scans visit, in all
	maxSubmodules       = 256
	maxSubmoduleDepth   = 8
	maxSubmoduleConfig  = 64 << 10
	maxGitfile          = 4 << 10
	submoduleConfigName = "config"
)

// gitLinked returns what the repository at dotGit (a .git directory or
// file) points git on the host to, so that it is protected with it:
//
//   - The .git files of its checked-out submodules. The index records each
//     submodule and git recurses into it (git status runs git in every
//     one); a .git file rewritten to "gitdir: ../evil" would make that git
//     read a config, core.fsmonitor and all, the sandbox wrote.
//   - For a .git file (a worktree, a submodule, --separate-git-dir): the
//     git directory its "gitdir:" names, and the one that directory's
//     commondir names (a worktree's main repository, whose config and
//     hooks git uses). Inside a writable directory they would otherwise be
//     writable: a workspace holding a bare repository and its worktrees.
//
// Only what exists is returned, and every read is bounded (budget counts
// the directories visited, across calls). The paths a .git file names are
// the sandbox's to choose: see gitTarget.
func (r *resolver) gitLinked(dotGit string, budget *int) ([]string, error) {
	st, err := os.Lstat(dotGit)
	if err != nil {
		return nil, nil
	}
	if st.Mode().IsRegular() {
		var out []string
		dirs, err := r.gitTargets(dotGit, "gitdir:", dotGit)
		if err != nil {
			return nil, err
		}
		for _, dir := range dirs {
			out = append(out, dir)
			commons, err := r.gitTargets(filepath.Join(dir, "commondir"), "", dotGit)
			out = append(out, commons...)
			if err != nil {
				return out, err
			}
		}
		return out, nil
	}
	if !st.IsDir() {
		return nil, nil
	}
	return r.submoduleGitfiles(dotGit, budget)
}

// gitTargets reads the file at file (a .git file, "gitdir: DIR", or a
// commondir, "DIR") and returns DIR as a host path when it is a git
// directory inside the writable directory that holds file; nothing when
// it names anything else (outside, it is read-only inside anyway) or a
// directory above dotGit, the .git file the chain started from.
//
// Invariant: a path the sandbox wrote is looked up only below a writable
// root, by fd, never through a symlink and never past the root (openat2
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_XDEV): a lookup on the
// host of /net/HOST/... could have an automounter act for a sandbox that
// has no network. A symlink on the way is an error, not a skip: the
// sandbox could point it elsewhere after the run has protected its
// target. A directory above file or above a writable root is never
// protected this way: a planted "gitdir: .." would make the whole
// workspace read-only.
func (r *resolver) gitTargets(file, prefix, dotGit string) ([]string, error) {
	var out []string
	for _, v := range gitfileValues(readSmall(file, maxGitfile), prefix) {
		t, err := r.gitTarget(file, v, dotGit)
		if err != nil {
			return out, err
		}
		if t != "" {
			out = append(out, t)
		}
	}
	return out, nil
}

// gitfileValues is DIR of a .git file's content b ("gitdir: DIR", prefix
// "gitdir:") or of a commondir's ("DIR", prefix ""), as git reads it
// (setup.c: the whole file after "gitdir: ", less the newlines and
// carriage returns that end it, up to a NUL; spaces kept) and as a
// lenient reader would (the first line, trimmed): where the two differ,
// both are protected, the one git uses among them.
func gitfileValues(b []byte, prefix string) []string {
	var out []string
	add := func(v string) {
		if v, _, _ = strings.Cut(v, "\x00"); v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	gitPrefix := prefix
	if prefix != "" {
		gitPrefix += " "
	}
	if v, ok := strings.CutPrefix(string(b), gitPrefix); ok {
		add(strings.TrimRight(v, "\r\n"))
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if v, ok := strings.CutPrefix(line, prefix); ok {
		add(strings.TrimSpace(v))
	}
	return out
}

// gitTarget is gitTargets for one value v that file names.
func (r *resolver) gitTarget(file, v, dotGit string) (string, error) {
	fd, root, err := r.openBeneath(file, v)
	if fd < 0 || err != nil {
		return "", err
	}
	defer unix.Close(fd)
	// A git directory, as git decides (setup.c is_git_directory): HEAD,
	// and objects of its own or a commondir. Anything else git ignores.
	var st unix.Stat_t
	if unix.Fstatat(fd, "HEAD", &st, unix.AT_SYMLINK_NOFOLLOW) != nil ||
		(unix.Fstatat(fd, "objects", &st, unix.AT_SYMLINK_NOFOLLOW) != nil && unix.Fstatat(fd, "commondir", &st, unix.AT_SYMLINK_NOFOLLOW) != nil) {
		return "", nil
	}
	target, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil || !within(target, root) {
		return "", nil
	}
	if within(dotGit, target) {
		return "", nil // above the .git file: its own work tree
	}
	for _, rw := range r.rwRoots {
		// A writable root itself, or above one: never read-only whole
		// (a root that is a git directory keeps its config and hooks
		// read-only instead: gitRoot).
		if within(rw, target) {
			return "", nil
		}
	}
	return target, nil
}

// openBeneath opens the directory v, a path that file (inside a writable
// root) names, relative to file's directory unless absolute: by fd below
// the longest writable root that lexically holds it, never through a
// symlink and never past that root (openat2 RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV). fd is -1 when v is outside
// every writable root (read-only inside anyway, and not looked up at all:
// a lookup of /net/HOST/... on the host could wake an automounter), or
// missing, or not a directory. Any other failure is an error naming file:
// a directory a sandbox made unsearchable must not make the run skip what
// it holds.
func (r *resolver) openBeneath(file, v string) (fd int, root string, err error) {
	if strings.ContainsRune(v, 0) {
		return -1, "", nil
	}
	lexical := v
	if !filepath.IsAbs(v) {
		lexical = filepath.Join(filepath.Dir(file), v)
	}
	lexical = filepath.Clean(lexical)
	if root = r.writableRootOf(lexical); root == "" {
		return -1, "", nil
	}
	// Relative to the root, as written when it starts inside the
	// root's directory (".." is the kernel's to resolve, beneath it).
	rel := ""
	if dir, err := filepath.Rel(root, filepath.Dir(file)); err == nil && !filepath.IsAbs(v) && dir != ".." && !strings.HasPrefix(dir, "../") {
		rel = dir + "/" + v
	} else if rel, err = filepath.Rel(root, lexical); err != nil {
		return -1, "", nil
	}
	fd, err = openBeneathRoot(root, rel, unix.O_PATH|unix.O_DIRECTORY)
	switch {
	case err == nil:
		return fd, root, nil
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.EXDEV):
		return -1, "", nil // missing, not a directory, or past the root
	case errors.Is(err, unix.ELOOP):
		return -1, "", fmt.Errorf("%s names %s through a symlink, which a sandbox could point elsewhere once the run has protected its target; write the path without symlinks into %s, or remove it if a sandbox made it", file, v, file)
	}
	return -1, "", fmt.Errorf("cannot look up %s, which %s names: %w (if a sandbox made a directory on the way unreadable, chmod u+rx it)", v, file, err)
}

// readSmall reads at most limit bytes of the regular file at path, not
// through a symlink and never blocking on a FIFO; nil when it cannot.
func readSmall(path string, limit int64) []byte {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(f, limit))
	return b
}

// submoduleGitfiles returns the ".git" files of the checked-out submodules
// that gitDir knows: git keeps each submodule's repository in
// gitDir/modules/NAME (NAME may hold slashes; nested submodules have
// modules of their own) and its checkout in that config's core.worktree.
// Only .git files that exist are returned. Nothing is followed through a
// symlink, and the walk and the reads are bounded: past budget, an error,
// as an unread submodule would stay writable.
func (r *resolver) submoduleGitfiles(gitDir string, budget *int) ([]string, error) {
	var out []string
	var visit func(dir string, depth int) error
	visit = func(dir string, depth int) error {
		if depth > maxSubmoduleDepth || len(out) >= maxSubmodules {
			return nil
		}
		if *budget--; *budget < 0 {
			return fmt.Errorf("reading the submodules of %s: more than %d directories under the workspace's .git directories; if a sandbox made them, remove them", gitDir, maxGitScanDirs)
		}
		// Below gitDir, not through a symlink a sandbox running beside
		// this one swapped in after the listing (review 70).
		ents, err := readDirNoWaitAt(dir, depth > 0)
		if err != nil {
			return nil
		}
		for _, e := range ents {
			if len(out) >= maxSubmodules {
				return nil
			}
			// DirEntry types come from the listing: a symlink is never a
			// directory here, so none is followed.
			if !e.IsDir() {
				continue
			}
			switch e.Name() {
			case "objects", "refs", "logs", "hooks", "info", "lfs":
				continue // a repository's own data, no submodules in it
			}
			sub := filepath.Join(dir, e.Name())
			config := filepath.Join(sub, submoduleConfigName)
			for _, wt := range configWorktrees(config) {
				// The work tree is looked up as a gitdir is: by fd,
				// below a writable root only (openBeneath).
				fd, _, err := r.openBeneath(config, wt)
				if err != nil {
					return err
				}
				if fd >= 0 {
					var st unix.Stat_t
					real, lerr := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
					if unix.Fstatat(fd, ".git", &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && lerr == nil {
						out = append(out, filepath.Join(real, ".git"))
					}
					unix.Close(fd)
				}
			}
			if err := visit(sub, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if _, err := os.Lstat(filepath.Join(gitDir, "modules")); err != nil {
		return nil, nil // no submodules: nothing to count
	}
	err := visit(filepath.Join(gitDir, "modules"), 0)
	return out, err
}

// configWorktrees are the values of core.worktree in the git config file
// at path, each reading of each (parseGitConfig): git takes the last, but
// every one is a checkout whose .git file is worth protecting.
func configWorktrees(path string) []string {
	var out []string
	for _, v := range parseGitConfig(readSmall(path, maxSubmoduleConfig)) {
		if v.section == "core" && v.key == "worktree" {
			for _, wt := range v.values {
				if wt != "" {
					out = append(out, wt)
				}
			}
		}
	}
	return out
}

// linkOnPath reports whether a component of the absolute path p, up to
// the first that does not exist, is a symbolic link: only then can a path
// outside the writable directories lead into one. Checked first, so that
// the pointers of an ordinary configuration (most name nothing that
// exists) cost a few lstat calls, not a resolution each.
func (r *resolver) linkOnPath(p string) bool {
	cur := "/"
	for _, c := range splitPath(strings.TrimPrefix(filepath.Clean(p), "/")) {
		cur = filepath.Join(cur, c)
		st, err := r.lstat.lstat(cur)
		if err != nil {
			return false
		}
		if st.Mode()&os.ModeSymlink != 0 {
			return true
		}
	}
	return false
}
