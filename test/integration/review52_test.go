package integration

// Review 52: practical regression QA of reviews 44-51 (sessions'
// directory, host-run dotfiles protected where their links lead,
// edit_file, script, the stores, device ioctls) in ordinary use, against
// bb453b9.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// review52Link makes the symlink link -> target, owned by u.
func review52Link(t *testing.T, u user, target, link string) {
	t.Helper()
	u.mkdirs(t, filepath.Dir(link))
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() == 0 {
		os.Lchown(link, u.uid, u.gid)
	}
}

// TestReview52RwHomeStowLinkedIncludeFailsEveryRun
//
// Finding (MEDIUM, a regression of e4c752c): since review 49 the user's
// ~/.gitconfig is read through its link (a GNU stow / rcm / dotbot
// setup: ~/.gitconfig -> dotfiles/git/.gitconfig). Its include.path =
// ~/.gitconfig.local is, in the same setup, a link too (->
// dotfiles/git/.gitconfig.local). With $HOME writable (`--rw ~`, which
// nsbox allows with a warning) protectPointers meets that link inside the
// writable root and refuses the whole run: "~/.gitconfig points git to
// ~/.gitconfig.local through the symlink ~/.gitconfig.local, which a
// sandbox could point elsewhere" (exit 125), for every command, also
// `true`. Before review 49 the linked ~/.gitconfig was not read and the
// same runs worked. The user cannot fix it as the message says without
// giving up their dotfile manager's layout (stow makes exactly these
// links; with tree folding ~/.config/git is one such link too).
//
// nsbox already keeps a link inside a writable bind in place with a
// no-follow protect of the link itself (protectLinks; ~/.zlogin ->
// dotfiles/zsh/.zlogin in the same --rw ~ run is protected that way:
// rm gets EBUSY, its target is read-only). A link the user made, on the
// way to an include, can be protected the same way instead of stopping
// the run.
//
// How a user hits it: dotfiles managed with stow, a machine-local
// include linked the same way, and `nsbox run --rw ~ -- ...` (or an
// agent setup with home writable): every run exits 125 after the
// upgrade.
func TestReview52RwHomeStowLinkedIncludeFailsEveryRun(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		home := filepath.Join(filepath.Dir(ws), "home")
		git := filepath.Join(home, "dotfiles", "git")
		u.mkdirs(t, git)
		u.writeFile(t, filepath.Join(git, ".gitconfig"), "[user]\n\tname = QA\n[include]\n\tpath = ~/.gitconfig.local\n", 0o644)
		local := filepath.Join(git, ".gitconfig.local")
		u.writeFile(t, local, "[core]\n\teditor = vi\n", 0o644)
		review52Link(t, u, "dotfiles/git/.gitconfig", filepath.Join(home, ".gitconfig"))
		review52Link(t, u, "dotfiles/git/.gitconfig.local", filepath.Join(home, ".gitconfig.local"))
		env := []string{"HOME=" + home, "XDG_DATA_HOME=" + u.tempDir(t)}
		script := `printf '[core]\n\tfsmonitor = "touch /tmp/pwned #"\n' >> '` + local + `' 2>/dev/null; echo done`
		r := u.sh(t, &runOpts{dir: ws, env: env}, []string{"--workspace", ws, "--rw", home}, script)
		if r.code != 0 || !strings.Contains(r.stdout, "done") {
			t.Fatalf("--rw ~ with a stow-linked ~/.gitconfig whose include is a stow link too: the run fails (it ran before review 49): exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
		if b, _ := os.ReadFile(local); strings.Contains(string(b), "fsmonitor") {
			t.Fatalf("the include's target %s was writable", local)
		}
	})
}

// review52VimWarning runs `true` in the dotfiles workspace ws with HOME =
// home and fails when the run fails or warns that a ~/.vim "holds more
// than" the links walk's bound.
func review52VimWarning(t *testing.T, u user, ws, home string) {
	t.Helper()
	env := []string{"HOME=" + home, "XDG_DATA_HOME=" + u.tempDir(t)}
	r := u.sh(t, &runOpts{dir: ws, env: env}, []string{"--workspace", ws}, "echo done")
	if r.code != 0 || !strings.Contains(r.stdout, "done") {
		t.Fatalf("the run failed: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stderr, "holds more than") {
		t.Fatalf("an ordinary ~/.vim makes every run in the dotfiles workspace warn (new since review 49):\n%s", r.stderr)
	}
}

// TestReview52VimPackPluginWarnsEveryRun
//
// Finding (LOW, new warning in ordinary runs since e4c752c): ~/.vim is
// now protected where its link leads; when that is inside a writable
// directory (the dotfiles workspace of a stow user: ~/.vim ->
// dotfiles/vim/.vim; or --rw ~ with a real ~/.vim) protectLinksInside
// walks it with linksInsideMaxDepth = 6 and warns "... holds more than
// 1024 entries or 6 levels: what symlinks beyond those lead to is not
// protected" on every run. Six levels is what one plugin installed the
// standard way already has: pack/plugins/start/NAME/autoload/NAME/x.vim
// (vim's autoload namespacing: airline, fugitive's, lsp plugins). The
// warning names "filesystem.protect[125]" of the built-in base.toml,
// which the user did not write and cannot act on short of lifting the
// protection of ~/.vim. The old code ran the same workspace silently
// (the hide and protect globs stop at 8 levels, not 6).
//
// How a user hits it: an agent working in ~/dotfiles with one vim
// package plugin; every tool call's stderr carries the warning.
func TestReview52VimPackPluginWarnsEveryRun(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		home := filepath.Join(filepath.Dir(ws), "home")
		vim := filepath.Join(ws, "vim", ".vim")
		ns := filepath.Join(vim, "pack", "plugins", "start", "airline", "autoload", "airline")
		u.mkdirs(t, ns, home)
		u.writeFile(t, filepath.Join(ns, "util.vim"), "\" util\n", 0o644)
		u.writeFile(t, filepath.Join(filepath.Dir(ns), "airline.vim"), "\" airline\n", 0o644)
		review52Link(t, u, vim, filepath.Join(home, ".vim"))
		review52VimWarning(t, u, ws, home)
	})
}

// TestReview52VimUndoFilesWarnEveryRun
//
// Finding (LOW, same cause as above, the entries bound): vim's persistent
// undo (`set undofile undodir=~/.vim/undo`), swap and backup directories
// collect one file per edited file: past 1024 entries in ~/.vim every
// run in the dotfiles workspace warns that links beyond are not
// protected, though ~/.vim is read-only whole and none of these is a
// link.
func TestReview52VimUndoFilesWarnEveryRun(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		home := filepath.Join(filepath.Dir(ws), "home")
		vim := filepath.Join(ws, "vim", ".vim")
		undo := filepath.Join(vim, "undo")
		u.mkdirs(t, undo, home)
		u.writeFile(t, filepath.Join(vim, "vimrc"), "set undofile\n", 0o644)
		for i := 0; i < 1100; i++ {
			u.writeFile(t, filepath.Join(undo, fmt.Sprintf("%%home%%me%%src%%file%d.go", i)), "u", 0o600)
		}
		review52Link(t, u, vim, filepath.Join(home, ".vim"))
		review52VimWarning(t, u, ws, home)
	})
}
