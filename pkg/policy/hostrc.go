package policy

import (
	"io/fs"
	"os"
	"path/filepath"
)

// hostRunFiles are files of the user's that programs on the host run or
// take commands from later, beyond the shell rc files the base profile
// protects always: fish's startup and autoloaded functions, the other
// zsh and bash login and logout files, ssh's rc and authorized keys (a
// command= option), editors' and tmux's configs. Dotfile managers (stow,
// rcm, dotbot) make them links into a checkout, and a sandbox given the
// checkout as its workspace rewrote them (review 49); a placeholder for
// each missing one would be made in every run with a writable home, so
// they are protected only where they exist (a file, a link, a
// directory), as the base profile's entries are: where their links lead.
// Relative to the home directory; fish's and nvim's below
// $XDG_CONFIG_HOME.
var hostRunFiles = []string{
	".zlogin", ".zlogout", ".bash_logout",
	".ssh/rc", ".ssh/authorized_keys", ".ssh/config.d",
	".vimrc", ".vim", ".gvimrc", ".emacs", ".emacs.d/init.el", ".tmux.conf", ".inputrc",
}

var hostRunConfigs = []string{"fish/config.fish", "fish/conf.d", "fish/functions", "nvim", "tmux/tmux.conf", "git/attributes"}

// zdotFiles are zsh's startup files below $ZDOTDIR, where zsh reads them
// instead of the home directory's.
var zdotFiles = []string{".zshrc", ".zshenv", ".zprofile", ".zlogin", ".zlogout"}

// protectHostRunFiles protects hostRunFiles that exist, with the entry
// that protects ~/.bashrc (none when a layer removed it: the user's
// choice, kept).
func (r *resolver) protectHostRunFiles(pp *protectPass) error {
	var e *entry
	for _, x := range r.protectList {
		if r.home != "" && filepath.Clean(x.Path) == filepath.Join(r.home, ".bashrc") {
			e = &x.entry
			break
		}
	}
	if e == nil {
		return nil
	}
	var paths []string
	if r.home != "" {
		for _, f := range hostRunFiles {
			paths = append(paths, filepath.Join(r.home, f))
		}
	}
	if r.h.ConfigHome != "" {
		for _, f := range hostRunConfigs {
			paths = append(paths, filepath.Join(r.h.ConfigHome, f))
		}
	}
	if lookup := r.h.LookupEnv; lookup != nil {
		if z, ok := lookup("ZDOTDIR"); ok && filepath.IsAbs(z) {
			for _, f := range zdotFiles {
				paths = append(paths, filepath.Join(z, f))
			}
		}
	}
	for _, p := range paths {
		// A budget of its own for each: a shared one, spent by a big
		// ~/.vim (an undo directory), left every later file of the
		// list unprotected, ~/.tmux.conf among them (review 53).
		st, err := r.lstat.lstat(p)
		if err != nil {
			continue // missing: no placeholder (see hostRunFiles)
		}
		budget := maxHostRunEntries
		if err := r.protectPresent(*e, p, st.Mode().Type(), 0, &budget, pp); err != nil {
			return err
		}
	}
	return nil
}

// maxHostRunEntries bounds the entries protectPresent looks at below each
// of hostRunFiles' directories (an nvim config of plugins can be large);
// the file or directory itself is always protected.
const maxHostRunEntries = 512

// protectPresent protects p where it exists, and, for a real directory
// (a link is protected whole, where it leads), each link below it to a
// depth of 3: a dotfile manager links the files one by one
// (~/.config/fish/conf.d/x.fish, ~/.config/nvim/init.lua) into a
// directory of the user's (review 49). The directory's own files are in
// its protection already, or out of every sandbox's reach: only links
// get a protection (a bind) of their own. typ is p's type (Lstat's, or
// the directory entry's).
func (r *resolver) protectPresent(e entry, p string, typ fs.FileMode, depth int, budget *int, pp *protectPass) error {
	if depth > 0 && *budget <= 0 {
		return nil
	}
	*budget--
	if depth == 0 || typ&fs.ModeSymlink != 0 {
		e.Dir, e.quiet = typ.IsDir(), true
		// Best effort: a link that does not resolve (a stale loop in a
		// plugin directory) is one no sandbox writes through, and
		// failing on it stopped every run (review 51). A dangling link
		// still resolves, to a placeholder for what it names.
		if err := r.protectOne(e, p, pp); err != nil {
			// Its links are pinned all the same: a loop broken by a
			// sandbox that replaced one of its links with a file
			// would otherwise be read by the host (review 53).
			r.protectLinks(e, p, pp)
			return nil
		}
	}
	if !typ.IsDir() || depth >= 3 {
		return nil
	}
	ents, err := os.ReadDir(p)
	if err != nil {
		return nil
	}
	for _, d := range ents {
		if err := r.protectPresent(e, filepath.Join(p, d.Name()), d.Type(), depth+1, budget, pp); err != nil {
			return err
		}
	}
	return nil
}
