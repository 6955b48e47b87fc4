package policy

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// GitAudit finds, once a sandbox has ended, the git repositories it made
// in its writable directories, and makes them inert on the host.
//
// What a run protects is what exists when it starts (protect): a sandbox
// can still create a repository, with a core.fsmonitor or hooks of its
// choosing, where none was: a .git in an existing directory (an
// uninitialised submodule's empty checkout, src/), or the layout of a bare
// repository (HEAD, objects/, refs/) in a directory with no .git at all.
// git on the host then runs that config in that directory, or, for a
// submodule, from a plain `git status` at the top. The audit walks the
// workspace again after every process of the sandbox is dead (so nothing
// inside races it), and every .git or git directory that was not there
// before (by device and inode) is renamed: ".git" to
// ".git.nsbox-quarantine", a git directory's HEAD to
// "HEAD.nsbox-quarantine". git then ignores both; the user can look and
// rename them back. An empty .git (a placeholder nsbox made, or left by
// one) is inert and left alone.
type GitAudit struct {
	// reportOnly: find and report, change nothing (a record of a killed
	// run: the tree may have been the user's since, see Deferred).
	reportOnly bool
	// repairOnly: give back what the sandbox made unreadable, and
	// quarantine nothing (Repair).
	repairOnly bool
	// locked are the directories the run could not look into and
	// protected whole: the sandbox could not write in them, and the
	// audit leaves them (and their modes) as they are.
	locked []string
	// dirs are the directories searched for repositories the run made:
	// the DIR of every "DIR/**/.git" pattern (the workspace and each
	// other writable directory, with the base profile).
	dirs     []string
	roots    []string // writable directories: their top level is checked
	gitRoots []string // writable directories that are git directories
	// submodules are the checkouts the protected indexes record as
	// gitlinks, read before the run (an index is read-only in it).
	submodules []string
	known      map[fileID]bool
	// noGit: no repositories are audited (the run had no "DIR/**/.git"
	// pattern), only created.
	noGit bool
	// created are the protect patterns whose matches the run made or
	// changed the audit quarantines too (createdaudit.go), since the
	// time (ns, real-time clock) from which a change is the run's.
	created []createdPattern
	since   int64
	// places are the writable roots and searched directories as they
	// were at the start: checked again before the audit uses their paths
	// (verifyPlaces).
	places map[string]fileID
	// held are the places verifyPlaces found where they were, open
	// (O_PATH) from then until Run returns: the walk starts at them and
	// every rename and mode change below a root goes through them, never
	// through their paths again (review 71).
	held map[string]int
	// noProc: /proc/self/fd does not lead to the held places (no /proc,
	// or another pid namespace's): at looks paths up as they are, as
	// the audit did before it held its places.
	noProc bool
	// startLinks are the symlinks the start's walk saw (nil: none
	// recorded), with the directory each led to: one the end's walk
	// meets that is not among them was made, or moved into view, during
	// the run, and one that leads elsewhere now was redirected
	// (quarantineThroughLinks).
	startLinks map[fileID]fileID // each link's own id → its target's (zero: none)
	// startLinkDepth: how deep below a writable root the start's walk
	// listed directories; links deeper are judged by their times only.
	startLinkDepth int
}

// fileID is what the audit trusts a pre-existing entry by. Directories
// known to the audit are protected (read-only mount points, which a
// sandbox can neither remove nor replace), so their inode is theirs; a
// symlink or a file adds its ctime, which a sandbox cannot set back, so
// that one removed and made anew, with its inode number reused, is new.
type fileID struct {
	dev, ino uint64
	ctime    int64
}

// Quarantined is one repository the audit made inert.
type Quarantined struct {
	Repo string `json:"repo"` // the directory git (or a tool) would have used it in
	From string `json:"from"`
	To   string `json:"to"`
	// Pattern is the protect entry, as written, that a quarantined file
	// matched ("" for a repository): "!PATTERN" lifts it.
	Pattern string `json:"pattern,omitempty"`
}

const quarantineSuffix = ".nsbox-quarantine"

// auditMaxDepth is the audit walk's depth bound: deeper than the
// protections' (a Java tree passes 8 levels), and past it the audit is
// incomplete, an error.
const auditMaxDepth = 64

// ErrGitAuditIncomplete is matched by the error of GitAudit.Run when the
// sandbox left a tree the audit could not search whole: a repository it
// made may be left in it. cmd/nsbox exits 125 on it.
var ErrGitAuditIncomplete = errors.New("the git audit could not search the whole workspace")

func idOf(p string) (fileID, bool) {
	var st unix.Stat_t
	if unix.Lstat(p, &st) != nil {
		return fileID{}, false
	}
	id := fileID{dev: uint64(st.Dev), ino: st.Ino}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		id.ctime = st.Ctim.Nano()
	}
	return id, true
}

// newGitAudit records the git metadata that exists before the run, all of
// it protected for the run: the .git at the top of every writable root,
// and a writable root that is itself a git directory; addDir adds what
// each "DIR/**/.git" pattern found. Never a directory that merely holds a
// HEAD: a sandbox could prepare one and move it into place in a later run.
func (r *resolver) newGitAudit() *GitAudit {
	a := &GitAudit{roots: r.rwRoots, known: map[fileID]bool{}}
	a.placeAll(r.rwRoots)
	for _, root := range r.rwRoots {
		a.addKnown(filepath.Join(root, ".git"))
		if gitDirLayout(root) {
			a.gitRoots = append(a.gitRoots, root)
			a.addKnown(root)
			a.addKnown(filepath.Join(root, "commondir"))
		}
	}
	return a
}

// walkedWith reports whether the walk of dir reaches inner: inner lies
// within dir, and no directory on the way is one the walk skips.
// Invariant: a directory is only left to another's walk when that walk
// enters it. A workspace in ~/src/app/node_modules/lib with --rw ~/src,
// or --rw ./node_modules beside the workspace, lies below a name the
// "**" walk never enters (walkSkip): searched "with" the outer one, a
// repository the run made there went unseen (review 15).
func walkedWith(inner, dir string) bool {
	if !within(inner, dir) {
		return false
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(inner, dir), "/")
	return rel == "" || !slices.ContainsFunc(strings.Split(rel, "/"), func(c string) bool { return walkSkip[c] })
}

func (a *GitAudit) addKnown(p string) {
	if id, ok := idOf(p); ok {
		a.known[id] = true
	}
}

// addDir adds a directory searched for repositories (the DIR of a
// "DIR/**/.git" pattern) with what its start's walk found there: the .git
// entries, the bare repositories, the directories it could not look into
// and the submodule checkouts of the indexes.
func (a *GitAudit) addDir(dir string, gits, bare, locked, submodules []string) {
	// One walk per tree: a writable directory the walk of another one
	// enters (--rw ./sub beside the workspace) is searched with it.
	a.placeAll([]string{dir})
	if !slices.ContainsFunc(a.dirs, func(d string) bool { return walkedWith(dir, d) }) {
		a.dirs = slices.DeleteFunc(a.dirs, func(d string) bool { return walkedWith(d, dir) })
		a.dirs = append(a.dirs, dir)
	}
	a.locked = dedupStrings(append(a.locked, locked...))
	a.submodules = dedupStrings(append(a.submodules, submodules...))
	add := a.addKnown
	for _, p := range gits {
		add(p)
	}
	// The submodules' .git entries, protected with the others (also
	// under a name the walk skips).
	for _, sm := range submodules {
		add(filepath.Join(sm, ".git"))
		if gitDirLayout(sm) {
			add(sm)
		}
	}
	for _, d := range bare {
		add(d)
	}
}

// Repair does the first part of Run only: a directory the walk cannot
// look into (a sandbox made it unreadable, the workspace itself
// included) is given u+rwx back, and nothing is quarantined. A pool of
// fresh sandboxes repairs before it resolves its policy again, while
// other sandboxes of it still run: a rename then would pull a repository
// from under a call still using it (second review), and the pool's first
// audit, run when it closes, quarantines every repository its calls made.
func (a *GitAudit) Repair() error {
	if a == nil || a.reportOnly {
		return nil
	}
	c := *a
	c.repairOnly = true
	_, err := c.Run()
	return err
}

// Run quarantines what the sandbox made (see GitAudit). It never follows a
// symlink on the way to what it renames. The error says what it could not
// check or rename; what it did rename is returned either way.
func (a *GitAudit) Run() ([]Quarantined, error) {
	if a == nil {
		return nil, nil
	}
	c, moved := a.verifyPlaces()
	defer c.release()
	out, err := c.run()
	return out, errors.Join(moved, err, c.stillInPlace())
}

// onAuditPass, when set (tests only), is called at each walk of the
// audit's loop (run).
var onAuditPass func()

// run is Run on verified places.
func (a *GitAudit) run() ([]Quarantined, error) {
	var out []Quarantined
	var errs []error
	var gits, heads []string
	// One walk for the repositories ("**/.git", "**/HEAD" in each
	// directory searched) and the created patterns.
	var pats []globPattern
	gitWalk := len(a.dirs) > 0 && !a.noGit
	if gitWalk {
		for _, d := range a.dirs {
			pats = append(pats,
				globPattern{path: filepath.Join(escapeGlob(d), "**", ".git"), links: true},
				globPattern{path: filepath.Join(escapeGlob(d), "**", "HEAD"), links: true})
		}
	}
	createdGlobs, createdOf := a.createdGlobs()
	pats = append(pats, createdGlobs...)
	var res []globResult
	var links []string
	if len(pats) > 0 {
		// A directory the walk cannot look into (a sandbox, with the
		// user's uid, made it unreadable) could hold a repository git
		// still reaches through search permission: it is opened up
		// again (u+rx, it is the user's own) and walked once more.
		reopened := map[string]bool{}
		linksCut := false
		for {
			if onAuditPass != nil {
				onAuditPass()
			}
			var err error
			res, links, err = globAllLinksAt(a.held, pats, auditMaxDepth, len(createdGlobs) > 0 || gitWalk)
			if errors.Is(err, errTooManyLinks) {
				// The links past the bound are not followed: said once.
				if !linksCut {
					linksCut = true
					errs = append(errs, fmt.Errorf("%w: the sandbox left more than %d symlinks in %s; those past that were not followed, and a repository or agent file it made behind one may run its code when you use git or open it in an editor or agent: look before you do", ErrGitAuditIncomplete, walkMaxLinks, strings.Join(a.roots, ", ")))
				}
				err = nil
			}
			if err != nil {
				return nil, err
			}
			var unlisted []string
			for _, r := range res {
				unlisted = append(unlisted, r.unlisted...)
			}
			var fresh []string
			for _, d := range dedupStrings(unlisted) {
				if !a.wasLocked(d) && !reopened[d] {
					fresh = append(fresh, d)
				}
			}
			if len(fresh) > 0 && a.reportOnly {
				errs = append(errs, fmt.Errorf("cannot look into %s: do not run git, or open an editor or agent, there before you have looked", someOf(fresh)))
			}
			if len(fresh) > 0 && !a.reportOnly {
				// Until no new one turns up: each pass opens what the
				// last one could not reach (depth-bounded). Each one
				// opened up opens up the unreadable directories below
				// it too (reopenTree): a sandbox that left d1/.../d60
				// each chmod 000 made the audit walk 60 times (130 s
				// root-less, review 71 #7); it walks twice now.
				budget := walkMaxDirs // this pass's descents, in all
				for _, d := range fresh {
					if reopened[d] {
						continue // opened up below another one
					}
					reopened[d] = true
					below, err := a.reopenTree(d, &budget)
					if err != nil {
						errs = append(errs, err)
						continue
					}
					for _, p := range append([]string{d}, below...) {
						reopened[p] = true
						errs = append(errs, fmt.Errorf("the sandbox made %s unreadable; it is given u+rwx back, so that the repositories and agent files it holds could be looked for", p))
					}
				}
				continue
			}
			if a.repairOnly {
				return nil, errors.Join(errs...)
			}
			errs = append(errs, a.foreignDirs(res)...)
			if slices.ContainsFunc(res, func(r globResult) bool { return r.tooMany || r.truncated }) {
				where := strings.Join(a.dirs, ", ")
				if where == "" {
					where = strings.Join(a.roots, ", ")
				}
				errs = append(errs, fmt.Errorf("%w: the sandbox left more than %d directories, or deeper than %d levels, in %s; a repository or agent file it made there may run its code when you use git or open it in an editor or agent: look before you do", ErrGitAuditIncomplete, walkMaxDirs, auditMaxDepth, where))
			}
			break
		}
	} else if a.repairOnly {
		return nil, nil
	}
	if gitWalk {
		for i := range a.dirs {
			gits = append(gits, res[2*i].matches...)
			heads = append(heads, res[2*i+1].matches...)
		}
		res = res[2*len(a.dirs):]
	}
	if a.noGit {
		return a.finishCreated(res, createdGlobs, createdOf, links, out, errs)
	}
	for _, root := range a.roots {
		if !slices.ContainsFunc(a.dirs, func(d string) bool { return walkedWith(root, d) }) {
			gits = append(gits, filepath.Join(root, ".git"))
			heads = append(heads, filepath.Join(root, "HEAD"))
		}
	}
	// git run in a writable directory nested below a name another's walk
	// skips (the workspace ~/src/app/node_modules/lib with --rw ~/src)
	// walks up through directories no walk lists: a .git or a git
	// directory's layout the run made there is entered (review 21).
	for _, d := range a.skippedAbove() {
		if g := filepath.Join(d, ".git"); !inert(a.at(g)) && a.changedInRun(g, d) {
			gits = append(gits, g)
		}
		if gitDirLayout(a.at(d)) && a.layoutChanged(d) {
			heads = append(heads, filepath.Join(d, "HEAD"))
		}
	}
	// Every gitlink of a protected index, also where the walk does not go
	// (node_modules/x, target/): a plain git status at the top enters it.
	// Looked up below its root without following a symlink.
	for _, sm := range a.submodules {
		if !a.beneath(sm) {
			continue
		}
		gits = append(gits, filepath.Join(sm, ".git"))
		heads = append(heads, filepath.Join(sm, "HEAD"))
	}
	// A commondir that appeared in a bare repository given as a writable
	// directory would send git to a config and hooks of the sandbox's.
	for _, root := range a.gitRoots {
		c := filepath.Join(root, "commondir")
		if id, ok := idOf(a.at(c)); ok && !a.known[id] {
			gits = append(gits, c)
		}
	}
	for _, g := range gits {
		id, ok := idOf(a.at(g))
		if !ok || a.known[id] || inert(a.at(g)) || a.wasLocked(g) {
			continue
		}
		q, err := a.quarantine(g, filepath.Dir(g))
		if err != nil {
			errs = append(errs, err)
		} else if q != nil {
			// One rename to undo. Under its new name git finds it only
			// when run inside it, and the next run's search for bare
			// repositories skips quarantined names.
			out = append(out, *q)
		}
	}
	for _, h := range heads {
		d := filepath.Dir(h)
		if filepath.Base(d) == ".git" || strings.HasSuffix(filepath.Base(d), quarantineSuffix) || a.wasLocked(d) || !gitDirLayout(a.at(d)) {
			continue
		}
		if id, ok := idOf(a.at(d)); !ok || a.known[id] {
			continue
		}
		q, err := a.quarantine(h, d)
		if err != nil {
			errs = append(errs, err)
		} else if q != nil {
			out = append(out, *q)
		}
	}
	return a.finishCreated(res, createdGlobs, createdOf, links, out, errs)
}

// finishCreated quarantines the created patterns' new matches (res,
// one per pattern of of, walked as globs says) after the repositories,
// then what the walk's symlinks lead to (links), and returns Run's
// result.
func (a *GitAudit) finishCreated(res []globResult, globs []globPattern, of []createdPattern, links []string, out []Quarantined, errs []error) ([]Quarantined, error) {
	var done []string
	for _, q := range out {
		done = append(done, q.From)
	}
	for i, cp := range of {
		qs, es := a.quarantineCreated(cp, globs[i].path, res[i].matches, done)
		for _, q := range qs {
			done = append(done, q.From)
		}
		out = append(out, qs...)
		errs = append(errs, es...)
	}
	qs, es := a.quarantineThroughLinks(links, globs, of, done)
	out = append(out, qs...)
	errs = append(errs, es...)
	return out, errors.Join(errs...)
}

// skippedAbove are the directories between a writable root and another
// root nested below a name its walk skips: from that name down to the
// nested root's parent, which no walk lists.
func (a *GitAudit) skippedAbove() []string {
	var out []string
	for _, inner := range a.roots {
		for _, outer := range a.roots {
			if inner == outer || !within(inner, outer) || walkedWith(inner, outer) {
				continue
			}
			rel, err := filepath.Rel(outer, inner)
			if err != nil {
				continue
			}
			parts := strings.Split(rel, "/")
			first := slices.IndexFunc(parts, func(c string) bool { return walkSkip[c] })
			for i := first; i >= 0 && i < len(parts)-1; i++ {
				out = append(out, filepath.Join(outer, filepath.Join(parts[:i+1]...)))
			}
		}
	}
	return dedupStrings(out)
}

// inert reports whether the .git at p cannot make git do anything: an
// empty directory or an empty file (git ignores the one and refuses the
// other).
func inert(p string) bool {
	st, err := os.Lstat(p)
	if err != nil {
		return true
	}
	switch {
	case st.Mode().IsRegular():
		return st.Size() == 0
	case st.IsDir():
		// Replaced since the Lstat: not followed, never waited on.
		f, err := openDirNoWait(p, true)
		if err != nil {
			return false
		}
		defer f.Close()
		names, _ := f.Readdirnames(1)
		return len(names) == 0
	}
	return false
}

// gitDirLayout reports whether git could take d as a git directory: a
// HEAD, and objects and refs or a commondir, each of any type (git
// follows a symlinked HEAD, objects or refs). Nothing is followed here: a
// lookup through a symlink of the sandbox's would be a host lookup of a
// path of its choosing.
func gitDirLayout(d string) bool {
	has := func(name string) bool {
		_, err := os.Lstat(filepath.Join(d, name))
		return err == nil
	}
	return has("HEAD") && (has("commondir") || (has("objects") && has("refs")))
}

// dirAt opens the parent of d (parentOf) when d is a directory there,
// not a symlink; the caller closes parent when ok.
func (a *GitAudit) dirAt(d string) (parent int, name string, mode uint32, ok bool) {
	parent, name, err := a.parentOf(d)
	if err != nil {
		return -1, "", 0, false
	}
	var st unix.Stat_t
	if unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		unix.Close(parent)
		return -1, "", 0, false
	}
	return parent, name, st.Mode, true
}

// beneath reports whether the directory d can be reached below its
// writable root without a symlink (openat2 RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS): only then are the paths in it looked at.
func (a *GitAudit) beneath(d string) bool {
	parent, _, _, ok := a.dirAt(d)
	if ok {
		unix.Close(parent)
	}
	return ok
}

// wasLocked reports whether p lies in a directory the run protected whole
// because it could not look into it.
func (a *GitAudit) wasLocked(p string) bool {
	return slices.ContainsFunc(a.locked, func(d string) bool { return within(p, d) })
}

// parentOf opens the directory that holds p, below the writable root that
// holds p, without following a symlink (openat2 RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV), and returns it with p's name.
func (a *GitAudit) parentOf(p string) (int, string, error) {
	root := ""
	for _, rw := range a.roots {
		if within(p, rw) && p != rw && len(rw) > len(root) {
			root = rw
		}
	}
	if root == "" {
		return -1, "", fmt.Errorf("%s is in no writable directory", p)
	}
	rel, err := filepath.Rel(root, filepath.Dir(p))
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return -1, "", fmt.Errorf("%s is in no writable directory", p)
	}
	var parent int
	if h, ok := a.held[root]; ok {
		// Beneath the root verifyPlaces holds, not beneath whatever its
		// path leads to now (see verifyPlaces).
		parent, err = openat2Retry(h, rel, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
		})
	} else if _, placed := a.places[root]; placed {
		err = errors.New("it was moved during the run")
	} else {
		parent, err = openBeneathRoot(root, rel, unix.O_PATH|unix.O_DIRECTORY)
	}
	if err != nil {
		return -1, "", fmt.Errorf("open %s: %w", filepath.Dir(p), err)
	}
	return parent, filepath.Base(p), nil
}

// quarantine renames p to p+quarantineSuffix (or, if taken, with a number
// or a random tail after it), relative to its parent (parentOf), with
// RENAME_NOREPLACE. A parent the sandbox made read-only gets u+wx back
// first. A report-only audit renames nothing: To is "".
func (a *GitAudit) quarantine(p, repo string) (*Quarantined, error) {
	return a.quarantineAs(p, repo, "")
}

// quarantineAs is quarantine of a match of the created pattern pattern
// ("" for a repository).
func (a *GitAudit) quarantineAs(p, repo, pattern string) (*Quarantined, error) {
	if a.reportOnly {
		return &Quarantined{Repo: repo, From: p, Pattern: pattern}, nil
	}
	fail := func(err error) (*Quarantined, error) {
		if pattern != "" {
			return nil, createdFailure(p, pattern, err)
		}
		return nil, fmt.Errorf("the sandbox made a git repository at %s, and it could not be made inert (%v): do not run git there before you have looked at %s", repo, err, p)
	}
	parent, name, err := a.parentOf(p)
	if err != nil {
		return fail(err)
	}
	defer unix.Close(parent)
	// What is renamed is judged by fd, as it is renamed: never a file the
	// run protected at its start (a known .git, a protected match, the
	// HEAD of a known bare repository), whatever a lookup by path saw.
	var st, pst unix.Stat_t
	if err := unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fail(err)
	}
	id := fileID{dev: uint64(st.Dev), ino: st.Ino}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		id.ctime = st.Ctim.Nano()
	}
	if a.known[id] {
		return nil, nil
	}
	if name == "HEAD" && unix.Fstat(parent, &pst) == nil && a.known[fileID{dev: uint64(pst.Dev), ino: pst.Ino}] {
		return nil, nil
	}
	var tail [6]byte
	for i := 0; i < 120; i++ {
		to := name + quarantineSuffix
		switch {
		case i >= 100:
			// Names the sandbox made beforehand to use them up.
			if _, err := rand.Read(tail[:]); err != nil {
				return fail(err)
			}
			to = fmt.Sprintf("%s.%x", to, tail)
		case i > 0:
			to = fmt.Sprintf("%s.%d", to, i)
		}
		err := unix.Renameat2(parent, name, parent, to, unix.RENAME_NOREPLACE)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
			if rerr := a.reopen(filepath.Dir(p)); rerr == nil {
				err = unix.Renameat2(parent, name, parent, to, unix.RENAME_NOREPLACE)
			}
		}
		if err != nil {
			return fail(fmt.Errorf("rename: %w", err))
		}
		return &Quarantined{Repo: repo, From: p, To: filepath.Join(filepath.Dir(p), to), Pattern: pattern}, nil
	}
	return fail(errors.New("120 names taken next to it"))
}

// maxGitIndex bounds the index the audit reads for gitlinks.
const maxGitIndex = 64 << 20

// gitlinks returns the paths of the gitlinks (submodules, mode 160000) that
// the index file at path records, relative to its work tree; nil when it
// cannot read or parse it. git status enters each checked-out one, also
// where the walk does not go (a submodule at node_modules/x or target/).
// Index versions 2 to 4 (git's Documentation/gitformat-index.txt).
func gitlinks(path string, sha256 bool) []string {
	b := readSmall(path, maxGitIndex)
	if len(b) < 12 || string(b[:4]) != "DIRC" {
		return nil
	}
	be := func(x []byte) uint32 { return uint32(x[0])<<24 | uint32(x[1])<<16 | uint32(x[2])<<8 | uint32(x[3]) }
	version, n := be(b[4:8]), be(b[8:12])
	if version < 2 || version > 4 {
		return nil
	}
	hashLen := 20
	if sha256 {
		hashLen = 32
	}
	var out []string
	prev := ""
	off := 12
	for i := uint32(0); i < n; i++ {
		start := off
		if off+40+hashLen+2 > len(b) {
			return out
		}
		mode := be(b[off+24 : off+28])
		off += 40 + hashLen
		flags := uint16(b[off])<<8 | uint16(b[off+1])
		off += 2
		if version >= 3 && flags&0x4000 != 0 {
			off += 2
		}
		var name string
		if version == 4 {
			// A varint of how many bytes of the previous path to drop,
			// then the rest, NUL-terminated.
			var drop int
			for k := 0; ; k++ {
				if off >= len(b) || k > 8 {
					return out
				}
				c := b[off]
				off++
				if k > 0 {
					drop++
				}
				drop = drop<<7 | int(c&127)
				// Never more than the previous path: checked at
				// each byte, so that a long varint cannot overflow
				// into a negative count and slice past it (a panic
				// on a crafted index, found by FuzzGitlinks).
				if drop > len(prev) {
					return out
				}
				if c&128 == 0 {
					break
				}
			}
			end := off
			for end < len(b) && b[end] != 0 {
				end++
			}
			if end >= len(b) || drop > len(prev) {
				return out
			}
			name = prev[:len(prev)-drop] + string(b[off:end])
			off = end + 1
		} else {
			end := off
			for end < len(b) && b[end] != 0 {
				end++
			}
			if end >= len(b) {
				return out
			}
			name = string(b[off:end])
			// Padded with 1 to 8 NULs to a multiple of 8 bytes.
			off = start + ((end-start)/8+1)*8
		}
		prev = name
		if mode&0o170000 == 0o160000 {
			out = append(out, name)
		}
	}
	return out
}

// Deferred returns the audit of a run that was killed before it ran it
// (read back from its record): it reports what it would have made inert
// and changes nothing, since the user may have worked in the tree since.
func (a *GitAudit) Deferred() *GitAudit {
	d := *a
	d.reportOnly = true
	return &d
}
