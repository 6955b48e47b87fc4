package integration

// Review 51: the review-49 fixes (host-run dotfiles protected where they
// exist, the user's git configs read through their links) in ordinary
// runs and one link further.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReview51LinkLoopInVimDirFailsEveryRun
//
// Finding (MEDIUM): protectHostRunFiles walks ~/.vim, ~/.config/nvim,
// fish's conf.d and functions, ~/.ssh/config.d (...) to depth 3 and
// hands every symlink it meets to protectOne, which resolves it and
// turns any resolution error other than EACCES into a policy error. A
// symlink loop anywhere there (a stale `x -> x`, a plugin checkout's
// test fixture, ~/.vim/bundle/foo -> foo left by a plugin manager)
// makes every nsbox run of the user fail with exit 125, before the
// sandbox starts: also runs that make nothing of $HOME writable, where
// the link could never be reached by a sandbox anyway. Before review 49
// only the base profile's fixed names (~/.bashrc, ...) were resolved.
// The same holds for a link whose readlink fails (a link into
// /proc/1/cwd for a non-root user: its error is not wrapped, so not
// skippable either).
//
// Attack/trigger: HOME with ~/.vim/bundle/loop -> loop (or a sandbox
// that could once write into a directory ~/.config/nvim's links lead
// to); `nsbox run -- true` fails: "base.toml:210: filesystem.protect
// [125]: symlink loop at ~/.vim/bundle/loop: more than 40 symlinks".
//
// Fix: a link that cannot be resolved leads nowhere a sandbox could
// write through it; skip it (protectPresent), or at most warn.
func TestReview51LinkLoopInVimDirFailsEveryRun(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		home := filepath.Join(filepath.Dir(ws), "home")
		bundle := filepath.Join(home, ".vim", "bundle")
		u.mkdirs(t, bundle)
		loop := filepath.Join(bundle, "loop")
		if err := os.Symlink("loop", loop); err != nil {
			t.Fatal(err)
		}
		if os.Getuid() == 0 {
			os.Lchown(loop, u.uid, u.gid)
		}
		env := []string{"HOME=" + home, "XDG_DATA_HOME=" + u.tempDir(t)}
		r := u.sh(t, &runOpts{dir: ws, env: env}, []string{"--workspace", ws}, "echo done")
		if r.code != 0 || !strings.Contains(r.stdout, "done") {
			t.Fatalf("a symlink loop in ~/.vim/bundle (out of every sandbox's reach) fails the run: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
	})
}

// TestReview51IncludeOfLinkedInclude
//
// Finding (MEDIUM): review 49 reads the user's ~/.gitconfig through its
// link and protects an include.path that is a link of the user's into
// the workspace (~/.gitconfig.local -> ~/dotfiles/gitconfig.local)
// where it leads. But the included file itself is still read with
// readConfigFile, which for a path outside the writable roots is
// readSmall (O_NOFOLLOW): ~/.gitconfig.local is a symlink, so it is not
// read at all, and what *it* points to (its core.hooksPath, its own
// include.path, a core.fsmonitor program) is never protected. The usual
// split of a dotfiles repository (shared gitconfig, a gitconfig.local
// per machine with the hooks and the signing setup) is exactly this.
//
// Attack: workspace ~/dotfiles; ~/.gitconfig -> dotfiles/gitconfig
// (include.path = ~/.gitconfig.local); ~/.gitconfig.local ->
// dotfiles/gitconfig.local, which says `[core] hooksPath =
// ~/dotfiles/hooks` and `[include] path = ~/dotfiles/extra.inc`. The
// sandbox writes dotfiles/hooks/pre-commit, or appends `[core] fsmonitor
// = "cmd #"` to dotfiles/extra.inc; the run exits 0, and the host's next
// git command runs cmd as the user.
//
// Fix: read every include of the user's configs where its link leads
// (as gitUserConfigs now does for the top file), not only the first.
func TestReview51IncludeOfLinkedInclude(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		home, tg := review48DotfilesHome(t, u, ws, map[string]string{
			".gitconfig":       "gitconfig",
			".gitconfig.local": "gitconfig.local",
		})
		hook := filepath.Join(ws, "hooks", "pre-commit")
		u.mkdirs(t, filepath.Dir(hook))
		u.writeFile(t, hook, "#!/bin/sh\n", 0o755)
		extra := filepath.Join(ws, "extra.inc")
		u.writeFile(t, extra, "# extra\n", 0o644)
		u.writeFile(t, tg[".gitconfig"], "[include]\n\tpath = ~/.gitconfig.local\n", 0o644)
		u.writeFile(t, tg[".gitconfig.local"], "[core]\n\thooksPath = "+filepath.Dir(hook)+"\n[include]\n\tpath = "+extra+"\n", 0o644)
		got := review48Appends(t, u, ws, []string{"HOME=" + home}, []string{tg[".gitconfig"], tg[".gitconfig.local"], extra, hook})
		if got[tg[".gitconfig"]] || got[tg[".gitconfig.local"]] {
			t.Fatalf("~/.gitconfig's or ~/.gitconfig.local's target was writable: the review-49 premise does not hold")
		}
		for _, f := range []string{extra, hook} {
			if got[f] {
				t.Errorf("%s: named by the linked ~/.gitconfig.local that the linked ~/.gitconfig includes, stayed writable; the host's next git runs what the sandbox wrote there", f)
			}
		}
	})
}
