package policy

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// What a git config points git to, protected in the writable
// directories: the pointers of gitconfig.go and gitcommand.go applied.

// protectPointers protects what the git config file points git to (ptrs,
// from gitConfigPointers), when it lies in a writable directory. Those
// paths are looked up only below that directory, and a symlink on the way
// stops the run: the sandbox could point it elsewhere once the run has
// protected its target, and following it could make the host look up a
// path of the sandbox's choosing outside (an automounter's /net/HOST).
func (r *resolver) protectPointers(e entry, config string, ptrs []gitPointer, pp *protectPass) error {
	for _, ptr := range ptrs {
		if ptr.pythonCwd != "" {
			r.warnPythonCwd(config, ptr.pythonCwd, ptr.envIgnored)
			continue
		}
		if ptr.glob {
			// sh hooks/*.sh: the shell matches again each time git runs
			// it, so a file the sandbox adds (hooks/0.sh, taken first)
			// would run: the directory is kept read-only whole when
			// the pattern is in its last name only (review 62).
			// Beyond that, or when that directory is a writable root
			// itself, a warning says so. Nothing is listed on the host
			// for it (a pattern of a config could reach anywhere).
			dir := filepath.Dir(ptr.path)
			if !strings.ContainsAny(dir, "*?[") && r.writableRootOf(dir) != dir {
				// Only a directory that is there (no placeholder) and
				// holds no writable root of the run.
				if st, err := os.Stat(dir); err == nil && st.IsDir() && !r.holdsRoot(dir) {
					if err := r.protectPointers(e, config, []gitPointer{{path: dir, dir: true}}, pp); err != nil {
						return err
					}
				}
			} else if r.writableRootOf(dir) != "" || strings.ContainsAny(dir, "*?[") {
				r.warn(e.at.warn(false, "%s: a git command runs what the pattern %s matches when it runs, in a directory sandboxes can write: a file a sandbox adds there runs as you; name the files instead", config, ptr.path))
			}
			continue
		}
		if ptr.ifExists {
			// A word that may only look like a path: protected where it
			// names a regular file, which it may run. Not a directory
			// (`!ruff check src/` must not make src/ read-only,
			// review 57), and no placeholder where nothing is.
			if st, err := os.Stat(ptr.path); err != nil || !st.Mode().IsRegular() {
				continue
			}
		}
		if root := r.writableRootOf(ptr.path); root == "" {
			// A path outside the writable directories may still lead
			// into one through a link of the user's
			// (include.path = ~/.gitconfig.local, a dotfiles link):
			// what it leads to is what git reads (review 49). It goes
			// to protectOne as written, so that every link of the
			// chain inside a writable directory is pinned and a
			// missing target gets its placeholder (review 53: given
			// the resolved path, it pinned none, and a dangling link
			// was skipped); it does nothing where the path stays out.
			if !r.linkOnPath(ptr.path) {
				continue // no link: it stays outside, read-only inside
			}
			if real, err := filepath.EvalSymlinks(ptr.path); err == nil {
				if root := r.writableRootOf(real); root == "" || root == real {
					continue // read-only inside, or the whole directory
				}
			}
		} else if ptr.path == root {
			continue // the whole writable directory
		}
		// A symlink on the way inside the writable directory (stow's
		// ~/.gitconfig.local, with --rw ~) is kept in place by
		// protectOne (protectLinks: the link pinned, what it leads to
		// read-only), as for every protected path: refusing the run for
		// it made every run with a stow-linked git config fail (review
		// 52).
		pe := e
		pe.Dir = ptr.dir
		if err := r.protectOne(pe, ptr.path, pp); err != nil {
			return err
		}
	}
	return nil
}

// warnPythonCwd says, once per command, that a git command runs Python
// with the current directory first on its import path: what a sandbox
// makes at a work tree's top (json.py for -m json.tool, json.pyc,
// json.abi3.so, or a module that one imports) runs as the user on the
// next git command there, and no list of names closes it (review 61).
// PYTHONSAFEPATH in nsbox's environment (and so, usually, git's) does.
func (r *resolver) warnPythonCwd(config, cmd string, envIgnored bool) {
	if r.h.LookupEnv != nil && !envIgnored {
		if v, ok := r.h.LookupEnv("PYTHONSAFEPATH"); ok && v != "" {
			return
		}
	}
	// Once per command, however its value was read (with its tabs, or
	// spaced).
	key := config + "\x00" + strings.Join(strings.Fields(cmd), " ")
	if r.warnedPython[key] {
		return
	}
	if r.warnedPython == nil {
		r.warnedPython = map[string]bool{}
	}
	r.warnedPython[key] = true
	// Not at the protect entry that led here (the base profile's .git):
	// the config file is the place to change.
	r.warn(Warning{Msg: fmt.Sprintf("%s: %q puts the work tree on Python's import path: a module a sandbox makes there runs as you on your next git command; add -P to it (Python 3.11+) or set PYTHONSAFEPATH=1", config, cmd)})
}
