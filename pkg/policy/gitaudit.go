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

type fileID struct{ dev, ino uint64 }

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
	return fileID{uint64(st.Dev), st.Ino}, true
}

// newGitAudit records the git metadata that exists before the run: the
// matches of "DIR/**/.git" and "DIR/**/HEAD" (walked with the hides; DIR
// is the workspace), and the top of every writable root.
func (r *resolver) newGitAudit(dir string, gits, heads []string) *GitAudit {
	a := &GitAudit{workspace: dir, roots: r.rwRoots, known: map[fileID]bool{}}
	add := func(p string) {
		if id, ok := idOf(p); ok {
			a.known[id] = true
		}
	}
	for _, p := range gits {
		add(p)
	}
	for _, h := range heads {
		add(filepath.Dir(h))
	}
	for _, root := range r.rwRoots {
		add(filepath.Join(root, ".git"))
		add(root)
		if isGitDir(root) {
			a.gitRoots = append(a.gitRoots, root)
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
		res, err := globAll([]globPattern{
			{path: filepath.Join(a.workspace, "**", ".git"), links: true},
			{path: filepath.Join(a.workspace, "**", "HEAD"), fileOnly: true},
		})
		if err != nil {
			return nil, err
		}
		gits, heads = res[0].matches, res[1].matches
		if res[0].tooMany || res[1].tooMany {
			errs = append(errs, fmt.Errorf("the sandbox left more than %d directories in %s: repositories it made beyond them were not looked for; do not run git there before you have looked", walkMaxDirs, a.workspace))
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
		}
	}
	for _, h := range heads {
		d := filepath.Dir(h)
		if filepath.Base(d) == ".git" || !gitDirLayout(d) {
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

// gitDirLayout reports whether git would take d as a git directory: HEAD,
// and objects/ and refs/ or a commondir.
func gitDirLayout(d string) bool {
	if _, err := os.Lstat(filepath.Join(d, "HEAD")); err != nil {
		return false
	}
	if _, err := os.Lstat(filepath.Join(d, "commondir")); err == nil {
		return true
	}
	objects, err1 := os.Lstat(filepath.Join(d, "objects"))
	refs, err2 := os.Lstat(filepath.Join(d, "refs"))
	return err1 == nil && err2 == nil && objects.IsDir() && refs.IsDir()
}

// quarantine renames p to p+quarantineSuffix (or, if taken, with a number
// after it), relative to its parent opened below the writable root that
// holds it without following a symlink (openat2 RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS), with RENAME_NOREPLACE.
func (a *GitAudit) quarantine(p, repo string) (*Quarantined, error) {
	root := ""
	for _, rw := range a.roots {
		if within(p, rw) && p != rw && len(rw) > len(root) {
			root = rw
		}
	}
	if root == "" {
		return nil, nil
	}
	rel, err := filepath.Rel(root, filepath.Dir(p))
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil, nil
	}
	rootFD, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("the sandbox made a git repository at %s, and it could not be made inert (open %s: %v): do not run git there before you have looked at %s", repo, root, err, p)
	}
	defer unix.Close(rootFD)
	parent, err := unix.Openat2(rootFD, rel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		return nil, fmt.Errorf("the sandbox made a git repository at %s, and it could not be made inert (%v): do not run git there before you have looked at %s", repo, err, p)
	}
	defer unix.Close(parent)
	name := filepath.Base(p)
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
