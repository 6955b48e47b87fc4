package integration

// Review 53: the last three commits (fda54fb, 43ec23f, 56e4d79): a
// symlink on the way to what a git config names kept in place instead of
// refused, best-effort (quiet) dotfile protections, a tagged recall
// through recent.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReview53RwHomeVimUndoUnprotectsTmuxConf
//
// Finding (MEDIUM): the best-effort dotfile protections (hostrc.go,
// protectPresent) share one budget of 512 entries across every path of
// hostRunFiles, hostRunConfigs and $ZDOTDIR, and count every entry of a
// real directory they walk (three levels deep), not only links. Once the
// budget is spent, every later path is skipped silently, also at depth 0:
// the file itself gets no protection. ~/.vim comes early in the list, so
// an ordinary ~/.vim/undo of 600 files (vim's persistent undo, the very
// case 56e4d79's message cites) spends it, and ~/.tmux.conf, ~/.inputrc,
// ~/.emacs, fish's config.fish, conf.d and functions, nvim/, and zsh's
// $ZDOTDIR/.zshrc are writable with `--rw ~`, though the warning of that
// run (reworded in 56e4d79) says "the editor and tmux configs that exist
// ... stay read-only", and docs/profiles.md lists them as protected.
//
// Attack: with --rw ~ (an agent setup with home writable), a sandbox
// appends `run-shell "..."` to ~/.tmux.conf (or a line to $ZDOTDIR/.zshrc,
// config.fish): the user's next tmux / shell on the host runs it. No
// warning names what was left out.
func TestReview53RwHomeVimUndoUnprotectsTmuxConf(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		home := filepath.Join(filepath.Dir(ws), "home")
		undo := filepath.Join(home, ".vim", "undo")
		u.mkdirs(t, undo)
		for i := 0; i < 600; i++ {
			u.writeFile(t, filepath.Join(undo, fmt.Sprintf("%%home%%me%%src%%file%d.go", i)), "u", 0o600)
		}
		tmux := filepath.Join(home, ".tmux.conf")
		u.writeFile(t, tmux, "set -g mouse on\n", 0o644)
		review53Run(t, u, ws, home, []string{"--rw", home}, `echo 'run-shell "touch /tmp/pwned"' >> '`+tmux+`' 2>/dev/null; echo done`)
		if b, _ := os.ReadFile(tmux); strings.Contains(string(b), "run-shell") {
			t.Fatalf("~/.tmux.conf was writable with --rw ~ once ~/.vim/undo held 600 files (the shared budget of hostrc.go ran out):\n%s", b)
		}
	})
}

// review53Run runs script in a sandbox of the workspace ws (flags after
// --workspace) with HOME=home, and fails the test unless the script ran to
// its end (it echoes "done").
func review53Run(t *testing.T, u user, ws, home string, flags []string, script string) {
	t.Helper()
	env := []string{"HOME=" + home, "XDG_DATA_HOME=" + u.tempDir(t)}
	r := u.sh(t, &runOpts{dir: ws, env: env}, append([]string{"--workspace", ws}, flags...), script)
	if r.code != 0 || !strings.Contains(r.stdout, "done") {
		t.Fatalf("the run failed: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
}

// TestReview53IncludeLinkChainRepointed
//
// Finding (MEDIUM): protectPointers takes an include of the user's git
// config that lies outside every writable directory but leads into one
// (include.path = ~/.gitconfig.local, a link into the dotfiles
// workspace) at filepath.EvalSymlinks' answer, and protects that: the
// last file of the chain. protectOne's protectLinks then walks the
// resolved path, which holds no link, so a link on the way inside the
// writable directory (~/dotfiles/local -> git/gitconfig.local: a
// machine-local file chosen by a link in the dotfiles checkout, or any
// chain of two links) is neither pinned nor read-only. 56e4d79 relies on
// protectLinks to keep "the link in place" for such chains; it is never
// given the link. The base entries (~/.gitconfig itself) are protected
// with their unresolved path and keep every link of their chain.
//
// Attack: in a run with the dotfiles checkout as the workspace, the
// sandbox removes ~/dotfiles/local and writes a file of its own there
// with [core] fsmonitor = "cmd": the host's next `git status` anywhere
// reads ~/.gitconfig -> include ~/.gitconfig.local -> ~/dotfiles/local
// and runs cmd. The target the run protected is untouched.
func TestReview53IncludeLinkChainRepointed(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		home := filepath.Join(filepath.Dir(ws), "home")
		u.mkdirs(t, home, filepath.Join(ws, "git"))
		u.writeFile(t, filepath.Join(home, ".gitconfig"), "[user]\n\tname = QA\n[include]\n\tpath = ~/.gitconfig.local\n", 0o644)
		u.writeFile(t, filepath.Join(ws, "git", "gitconfig.local"), "[core]\n\teditor = vi\n", 0o644)
		link := filepath.Join(ws, "local")
		review52Link(t, u, "git/gitconfig.local", link)
		review52Link(t, u, link, filepath.Join(home, ".gitconfig.local"))
		review53Run(t, u, ws, home, nil, `rm -f '`+link+`' 2>/dev/null && printf '[core]\n\tfsmonitor = "touch /tmp/pwned #"\n' > '`+link+`' 2>/dev/null; echo done`)
		if b, _ := os.ReadFile(filepath.Join(home, ".gitconfig.local")); strings.Contains(string(b), "fsmonitor") {
			t.Fatalf("the link %s on the way to the include ~/.gitconfig.local was re-pointed by the sandbox: git on the host now reads\n%s", link, b)
		}
	})
}

// TestReview53IncludeDanglingLinkIntoWorkspace
//
// Finding (MEDIUM): protectPointers follows an include outside every
// writable directory into one with filepath.EvalSymlinks, which fails
// when the link's target does not exist; the include is then skipped as
// "read-only" and gets neither a placeholder nor a pinned link, although
// every other protected path reached through a dangling link gets a
// placeholder where the link leads (protectOne, and hostrc.go's "a
// dangling link still resolves, to a placeholder"). git ignores a missing
// include, so ~/.gitconfig.local -> dotfiles/git/gitconfig.local before
// the machine-local file is made is a working setup.
//
// Attack: in a run with the dotfiles checkout as the workspace, the
// sandbox creates dotfiles/git/gitconfig.local with [core] fsmonitor =
// "cmd"; the host's next `git status` anywhere runs cmd.
func TestReview53IncludeDanglingLinkIntoWorkspace(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		home := filepath.Join(filepath.Dir(ws), "home")
		u.mkdirs(t, home, filepath.Join(ws, "git"))
		u.writeFile(t, filepath.Join(home, ".gitconfig"), "[user]\n\tname = QA\n[include]\n\tpath = ~/.gitconfig.local\n", 0o644)
		target := filepath.Join(ws, "git", "gitconfig.local")
		review52Link(t, u, target, filepath.Join(home, ".gitconfig.local"))
		review53Run(t, u, ws, home, nil, `printf '[core]\n\tfsmonitor = "touch /tmp/pwned #"\n' > '`+target+`' 2>/dev/null; echo done`)
		if b, _ := os.ReadFile(filepath.Join(home, ".gitconfig.local")); strings.Contains(string(b), "fsmonitor") {
			t.Fatalf("the sandbox created %s, where the dangling include ~/.gitconfig.local leads: git on the host now reads\n%s", target, b)
		}
	})
}

// TestReview53LoopLinkInDotfilesLeftWritable
//
// Finding (LOW): fda54fb made the dotfile protections of hostrc.go best
// effort: protectOne's error is dropped, on the reasoning that "a link
// that does not resolve (a stale loop) is one no sandbox writes
// through". But protectOne returns on resolvePath's error before
// protectLinks, so none of the loop's links is pinned, and a sandbox
// writes through the loop by breaking it: it replaces the link of the
// loop that lies in its writable directory with a file. Before fda54fb
// the same run stopped with an error naming the loop.
//
// Attack: ~/.tmux.conf -> dotfiles/tmux.conf, and dotfiles/tmux.conf a
// stale link back to ~/.tmux.conf (a half-undone stow). In a run with
// the dotfiles checkout as the workspace the sandbox replaces
// dotfiles/tmux.conf with a file of its own (run-shell ...): the host's
// next tmux runs it.
func TestReview53LoopLinkInDotfilesLeftWritable(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		home := filepath.Join(filepath.Dir(ws), "home")
		u.mkdirs(t, home)
		inner := filepath.Join(ws, "tmux.conf")
		review52Link(t, u, inner, filepath.Join(home, ".tmux.conf"))
		review52Link(t, u, filepath.Join(home, ".tmux.conf"), inner)
		env := []string{"HOME=" + home, "XDG_DATA_HOME=" + u.tempDir(t)}
		script := `rm -f '` + inner + `' 2>/dev/null && echo 'run-shell "touch /tmp/pwned"' > '` + inner + `' 2>/dev/null; echo done`
		r := u.sh(t, &runOpts{dir: ws, env: env}, []string{"--workspace", ws}, script)
		if b, _ := os.ReadFile(filepath.Join(home, ".tmux.conf")); strings.Contains(string(b), "run-shell") {
			t.Fatalf("the sandbox broke the link loop ~/.tmux.conf -> %s and wrote what the host's tmux reads (exit %d):\n%s", inner, r.code, b)
		}
	})
}
