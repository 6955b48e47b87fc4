package policy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
	workspace string
	roots     []string // writable directories: their top level is checked
	gitRoots  []string // writable directories that are git directories
	known     map[fileID]bool
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
	Repo string `json:"repo"` // the directory git would have used it in
	From string `json:"from"`
	To   string `json:"to"`
}

const quarantineSuffix = ".nsbox-quarantine"

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
// it protected for the run: the .git entries of "DIR/**/.git" (DIR is the
// workspace), the bare repositories found, the .git at the top of every
// writable root, and a writable root that is itself a git directory. Never
// a directory that merely holds a HEAD: a sandbox could prepare one and
// move it into place in a later run.
func (r *resolver) newGitAudit(dir string, gits, bare []string) *GitAudit {
	a := &GitAudit{workspace: dir, roots: r.rwRoots, known: map[fileID]bool{}}
	add := func(p string) {
		if id, ok := idOf(p); ok {
			a.known[id] = true
		}
	}
	for _, p := range gits {
		add(p)
	}
	for _, d := range bare {
		add(d)
	}
	for _, root := range r.rwRoots {
		add(filepath.Join(root, ".git"))
		if gitDirLayout(root) {
			a.gitRoots = append(a.gitRoots, root)
			add(root)
			add(filepath.Join(root, "commondir"))
		}
	}
	return a
}

// Run quarantines what the sandbox made (see GitAudit). It never follows a
// symlink on the way to what it renames. The error says what it could not
// check or rename; what it did rename is returned either way.
func (a *GitAudit) Run() ([]Quarantined, error) {
	if a == nil {
		return nil, nil
	}
	var out []Quarantined
	var errs []error
	var gits, heads []string
	if a.workspace != "" {
		// A directory the walk cannot look into (a sandbox, with the
		// user's uid, made it unreadable) could hold a repository git
		// still reaches through search permission: it is opened up
		// again (u+rx, it is the user's own) and walked once more.
		for try := 0; ; try++ {
			res, err := globAll([]globPattern{
				{path: filepath.Join(a.workspace, "**", ".git"), links: true},
				{path: filepath.Join(a.workspace, "**", "HEAD"), links: true},
			})
			if err != nil {
				return nil, err
			}
			gits, heads = res[0].matches, res[1].matches
			locked := dedupStrings(append(res[0].unlisted, res[1].unlisted...))
			if len(locked) > 0 && try < 3 {
				for _, d := range locked {
					if err := a.reopen(d); err != nil {
						errs = append(errs, err)
					} else {
						errs = append(errs, fmt.Errorf("the sandbox made %s unreadable; it is given u+rx back, so that the repositories it holds could be looked for", d))
					}
				}
				continue
			}
			if len(locked) > 0 {
				errs = append(errs, fmt.Errorf("cannot look into %s, which the sandbox made unreadable: do not run git there before you have looked", someOf(locked)))
			}
			if res[0].tooMany || res[1].tooMany {
				errs = append(errs, fmt.Errorf("the sandbox left more than %d directories in %s: repositories it made beyond them were not looked for; do not run git there before you have looked", walkMaxDirs, a.workspace))
			}
			if res[0].truncated || res[1].truncated {
				errs = append(errs, fmt.Errorf("repositories deeper than %d levels in %s (below %s) were not looked for: do not run git there before you have looked", walkMaxDepth, a.workspace, res[0].truncatedAt))
			}
			break
		}
	}
	for _, root := range a.roots {
		if a.workspace == "" || !within(root, a.workspace) {
			gits = append(gits, filepath.Join(root, ".git"))
			heads = append(heads, filepath.Join(root, "HEAD"))
		}
	}
	// A commondir that appeared in a bare repository given as a writable
	// directory would send git to a config and hooks of the sandbox's.
	for _, root := range a.gitRoots {
		c := filepath.Join(root, "commondir")
		if id, ok := idOf(c); ok && !a.known[id] {
			gits = append(gits, c)
		}
	}
	for _, g := range gits {
		id, ok := idOf(g)
		if !ok || a.known[id] || inert(g) {
			continue
		}
		q, err := a.quarantine(g, filepath.Dir(g))
		if err != nil {
			errs = append(errs, err)
		} else if q != nil {
			out = append(out, *q)
			// Its HEAD too: inside the quarantined name it would still
			// be a git directory to a git run in it, and to the next
			// run's search for bare repositories.
			if st, err := os.Lstat(q.To); err == nil && st.IsDir() {
				if _, err := os.Lstat(filepath.Join(q.To, "HEAD")); err == nil {
					if _, err := a.quarantine(filepath.Join(q.To, "HEAD"), q.Repo); err != nil {
						errs = append(errs, err)
					}
				}
			}
		}
	}
	for _, h := range heads {
		d := filepath.Dir(h)
		if filepath.Base(d) == ".git" || strings.HasSuffix(filepath.Base(d), quarantineSuffix) || !gitDirLayout(d) {
			continue
		}
		if id, ok := idOf(d); !ok || a.known[id] {
			continue
		}
		q, err := a.quarantine(h, d)
		if err != nil {
			errs = append(errs, err)
		} else if q != nil {
			out = append(out, *q)
		}
	}
	return out, errors.Join(errs...)
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
		f, err := os.Open(p)
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

// reopen gives the user back search and read permission on the directory
// d, below a writable root, by fd without following symlinks.
func (a *GitAudit) reopen(d string) error {
	parent, name, err := a.parentOf(d)
	if err != nil {
		return err
	}
	defer unix.Close(parent)
	var st unix.Stat_t
	if err := unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil
	}
	if err := unix.Fchmodat(parent, name, (st.Mode&0o7777)|0o500, 0); err != nil {
		return fmt.Errorf("cannot look into %s, which the sandbox made unreadable (chmod u+rx: %v): do not run git there before you have looked", d, err)
	}
	return nil
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
	rootFD, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, "", fmt.Errorf("open %s: %w", root, err)
	}
	defer unix.Close(rootFD)
	parent, err := unix.Openat2(rootFD, rel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		return -1, "", fmt.Errorf("open %s: %w", filepath.Dir(p), err)
	}
	return parent, filepath.Base(p), nil
}

// quarantine renames p to p+quarantineSuffix (or, if taken, with a number
// after it), relative to its parent (parentOf), with RENAME_NOREPLACE.
func (a *GitAudit) quarantine(p, repo string) (*Quarantined, error) {
	parent, name, err := a.parentOf(p)
	if err != nil {
		return nil, fmt.Errorf("the sandbox made a git repository at %s, and it could not be made inert (%v): do not run git there before you have looked at %s", repo, err, p)
	}
	defer unix.Close(parent)
	for i := 0; i < 100; i++ {
		to := name + quarantineSuffix
		if i > 0 {
			to = fmt.Sprintf("%s.%d", to, i)
		}
		err := unix.Renameat2(parent, name, parent, to, unix.RENAME_NOREPLACE)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("the sandbox made a git repository at %s, and it could not be made inert (rename %s: %v): do not run git there before you have looked at it", repo, p, err)
		}
		return &Quarantined{Repo: repo, From: p, To: filepath.Join(filepath.Dir(p), to)}, nil
	}
	return nil, fmt.Errorf("the sandbox made a git repository at %s, and it could not be made inert (100 quarantined copies next to it): do not run git there before you have looked at %s", repo, p)
}
