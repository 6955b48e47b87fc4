package integration

// Review 49: the review-48 fix (the user's git and ssh configs protected
// where their links lead) against the rest of a dotfiles checkout given
// as the workspace.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestReview49LinkedGitConfigPointers
//
// Finding (MEDIUM): what the user's global git config points to is left
// writable in exactly the dotfiles setup review 48 fixed. gitUserConfigs
// reads ~/.gitconfig to protect its include.path, core.hooksPath and
// command pointers that lie in a writable directory, but it reads it with
// readSmall (O_NOFOLLOW): a ~/.gitconfig that is a symlink (stow, rcm,
// dotbot) is not read at all, so nothing it points to is protected. And a
// pointer that is itself a symlink in $HOME (include.path =
// ~/.gitconfig.local, linked into the checkout) is compared by its
// unresolved path, which is in no writable directory. The config is now
// read-only; the files it pulls in are not.
//
// Attack: workspace ~/dotfiles, ~/.gitconfig -> ~/dotfiles/gitconfig,
// which says `[core] hooksPath = ~/dotfiles/git/hooks` and
// `[include] path = ~/.gitconfig.local` (-> ~/dotfiles/gitconfig.local).
// The sandbox appends `[core] fsmonitor = "cmd #"` to gitconfig.local,
// or writes git/hooks/pre-commit; the run exits 0 silently, and the next
// `git status` / `git commit` on the host, in any repository, runs cmd.
//
// Fix: read the user's configs through their links (they are the user's
// files, the link's target is what git reads) and resolve each pointer's
// links before deciding whether it lies in a writable directory, as the
// base profile's "~/..." entries are.
func TestReview49LinkedGitConfigPointers(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		home, tg := review48DotfilesHome(t, u, ws, map[string]string{
			".gitconfig":       "gitconfig",
			".gitconfig.local": "gitconfig.local",
		})
		hook := filepath.Join(ws, "git", "hooks", "pre-commit")
		u.mkdirs(t, filepath.Dir(hook))
		u.writeFile(t, hook, "#!/bin/sh\n", 0o755)
		u.writeFile(t, tg[".gitconfig"], "[core]\n\thooksPath = ~/dotfiles-hooks\n[include]\n\tpath = ~/.gitconfig.local\n\tpath = "+filepath.Join(ws, "extra.inc")+"\n", 0o644)
		if err := os.Symlink(filepath.Dir(hook), filepath.Join(home, "dotfiles-hooks")); err != nil {
			t.Fatal(err)
		}
		extra := filepath.Join(ws, "extra.inc")
		u.writeFile(t, extra, "# extra\n", 0o644)
		got := review48Appends(t, u, ws, []string{"HOME=" + home}, []string{tg[".gitconfig"], tg[".gitconfig.local"], extra, hook})
		if got[tg[".gitconfig"]] {
			t.Fatalf("~/.gitconfig's target was writable: the review-48 premise does not hold")
		}
		for _, f := range []string{tg[".gitconfig.local"], extra, hook} {
			if got[f] {
				t.Errorf("%s: what the user's linked ~/.gitconfig pulls in (include.path, core.hooksPath) stayed writable; the host's next git runs what the sandbox wrote there", f)
			}
		}
	})
}

// TestReview49LinkedShellStartupFiles
//
// Finding (MEDIUM): the base profile's list of shell startup files is
// bash's and half of zsh's. ~/.bashrc, ~/.zshrc and the rest are
// protected where their links lead (a dotfiles checkout as the
// workspace), but the startup files the same shells run and that the same
// dotfiles repositories hold are not: ~/.zlogin, ~/.zlogout,
// ~/.bash_logout, fish's ~/.config/fish/config.fish (and conf.d/,
// functions/, which fish autoloads in place of commands), and zsh's
// $ZDOTDIR/.zshrc (XDG-style setups: ZDOTDIR=~/.config/zsh, so ~/.zshrc
// is not the file zsh reads at all).
//
// Attack: workspace ~/dotfiles with ~/.config/fish -> ~/dotfiles/fish (or
// ~/.zlogin -> ~/dotfiles/zlogin); the sandbox appends a command to
// fish/config.fish; the run exits 0 silently (the audit knows none of
// these), and the user's next terminal runs it outside the sandbox. The
// docs say shell startup files "stay read-only".
//
// Fix: protect the other startup files of the shells (zsh's login/logout
// files, bash's logout, fish's config.fish, conf.d/ and functions/, the
// files under the caller's $ZDOTDIR) as ~/.bashrc is: only where they
// exist and lead into a writable place, so an ordinary run pays nothing.
func TestReview49LinkedShellStartupFiles(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		tg, got := review49Linked(t, u, map[string]string{
			".bashrc":                        "bashrc",
			".zlogin":                        "zlogin",
			".zlogout":                       "zlogout",
			".bash_logout":                   "bash_logout",
			".config/fish/config.fish":       "fish/config.fish",
			".config/fish/conf.d/x.fish":     "fish/conf.d/x.fish",
			".config/fish/functions/ls.fish": "fish/functions/ls.fish",
			".config/zsh/.zshrc":             "zsh/zshrc",
		}, func(home string, _ map[string]string) []string {
			return []string{"ZDOTDIR=" + filepath.Join(home, ".config/zsh")}
		})
		if got[".bashrc"] {
			t.Fatalf("~/.bashrc's target was writable: the premise does not hold")
		}
		for _, l := range []string{".zlogin", ".zlogout", ".bash_logout", ".config/fish/config.fish", ".config/fish/conf.d/x.fish", ".config/fish/functions/ls.fish", ".config/zsh/.zshrc"} {
			if got[l] {
				t.Errorf("~/%s -> %s: a shell startup file stayed writable through the dotfiles checkout (~/.bashrc beside it is protected); the user's next shell runs what the sandbox appended", l, tg[l])
			}
		}
	})
}

// review49Linked makes a dotfiles home whose links (name below home →
// file in the checkout) lead into the workspace, lets prepare write what
// it needs and name the run's environment beyond HOME, appends a line to
// every link's target from a sandbox of the checkout, and returns the
// targets and, by link name, whether the line reached the host's file.
func review49Linked(t *testing.T, u user, links map[string]string, prepare func(home string, tg map[string]string) []string) (map[string]string, map[string]bool) {
	t.Helper()
	ws := u.tempDir(t)
	home, tg := review48DotfilesHome(t, u, ws, links)
	env := append([]string{"HOME=" + home}, prepare(home, tg)...)
	var files []string
	for _, f := range tg {
		files = append(files, f)
	}
	appended := review48Appends(t, u, ws, env, files)
	got := map[string]bool{}
	for l, f := range tg {
		got[l] = appended[f]
	}
	return tg, got
}

// TestReview49LinkedHostRunFiles
//
// Finding (LOW): other files of the user's that programs on the host run
// as code, kept in the same dotfiles checkouts: ~/.vimrc and
// ~/.config/nvim/init.lua (vim/neovim run them on every start: `:!`,
// autocmds, lua), ~/.tmux.conf (run-shell), ~/.emacs, ~/.ssh/rc (sshd
// runs it at every login to this host) and ~/.ssh/authorized_keys (a
// key added is a login), and a file ~/.ssh/config's `Include config.d/*`
// reads (ProxyCommand, Match exec: as ~/.ssh/config itself, protected
// since review 48, which named rc and authorized_keys as well). The hide
// of ~/.ssh covers only the links there, not what they lead to in the
// workspace. docs/profiles.md says editor configs are not protected for an
// explicit `--rw ~`; the dotfiles case is the one review 48 fixed for git
// and shells, and an editor's rc is the dotfile most such checkouts hold.
//
// Attack: workspace ~/dotfiles with ~/.vimrc -> ~/dotfiles/vimrc: the
// sandbox appends `autocmd VimEnter * silent !cmd`; the next vim on the
// host runs cmd. Or ~/.ssh/config.d -> ~/dotfiles/ssh/config.d: `Match
// exec "cmd"` in a file there runs on the next ssh/git push.
//
// Fix: protect these where they exist and lead into a writable place (no
// placeholder), and ~/.ssh/config's Include targets as git's includes are.
func TestReview49LinkedHostRunFiles(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		tg, got := review49Linked(t, u, map[string]string{
			".bashrc":               "bashrc",
			".vimrc":                "vimrc",
			".config/nvim/init.lua": "nvim/init.lua",
			".tmux.conf":            "tmux.conf",
			".emacs":                "emacs",
			".ssh/rc":               "ssh/rc",
			".ssh/authorized_keys":  "ssh/authorized_keys",
			".ssh/config":           "ssh/config",
			".ssh/config.d/work":    "ssh/config.d/work",
		}, func(_ string, tg map[string]string) []string {
			u.writeFile(t, tg[".ssh/config"], "Include config.d/*\n", 0o644)
			return nil
		})
		if got[".bashrc"] || got[".ssh/config"] {
			t.Fatalf("~/.bashrc's or ~/.ssh/config's target was writable: the premise does not hold")
		}
		for _, l := range []string{".vimrc", ".config/nvim/init.lua", ".tmux.conf", ".emacs", ".ssh/rc", ".ssh/authorized_keys", ".ssh/config.d/work"} {
			if got[l] {
				t.Errorf("~/%s -> %s: stayed writable through the dotfiles checkout; a program on the host runs it as the user", l, tg[l])
			}
		}
	})
}

// TestReview49SessionsDirOfAnotherTMPDIR
//
// Finding (LOW, the review 47 fix narrowed, not closed): SandboxedDirs
// hides the sessions' directory of $TMPDIR as the *running* nsbox sees
// it. A session started from an environment without XDG_RUNTIME_DIR and
// with another TMPDIR (an MCP client's or a service's TMPDIR=/var/tmp or
// ~/tmp) keeps its socket in that TMPDIR's nsbox-sessions-UID, which no
// later sandbox from the user's shell hides; with that directory
// writable (--rw /var/tmp), the unix gate lets the connect through (a
// socket in a writable place), and the sandbox drives the session, whose
// policy may be wider than its own. The sandbox could even make the
// directory first (0700, its files land as the user), so a session
// started later uses it.
//
// Attack: (TMPDIR=D, no XDG_RUNTIME_DIR) nsbox tools call --session s ...;
// then from the shell (XDG_RUNTIME_DIR set, TMPDIR=/tmp)
// nsbox run --profile strict --rw D -- <raw client> D/nsbox-sessions-UID/s.sock.
//
// Fix: refuse a session directory in a TMPDIR other than /tmp (use /tmp's,
// which every sandbox hides), or refuse every connect to a socket named
// nsbox-sessions-*/ *.sock whatever its directory, or authenticate
// session clients (SO_PEERCRED pid outside every sandbox).
func TestReview49SessionsDirOfAnotherTMPDIR(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		u.mkdirs(t, ws)
		tmpdir := u.tempDir(t)
		name := fmt.Sprintf("rv49-tmpdir-%d-%d", os.Getpid(), u.uid)
		t.Cleanup(func() { u.run(t, &runOpts{env: []string{"TMPDIR=" + tmpdir}}, "session", "stop", name) })
		r := u.run(t, &runOpts{dir: ws, env: []string{"TMPDIR=" + tmpdir}}, "tools", "call", "run_command", `{"command":"echo up"}`, "--workspace", ws, "--session", name)
		if !strings.Contains(r.stdout, "up") {
			t.Fatalf("session start: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
		sock := filepath.Join(tmpdir, "nsbox-sessions-"+strconv.Itoa(u.uid), name+".sock")
		if _, err := os.Stat(sock); err != nil {
			// The fix: a session keeps its socket in /tmp (or
			// /run/user/UID) whatever TMPDIR says, where every
			// sandbox hides it.
			if fixed := filepath.Join("/tmp", "nsbox-sessions-"+strconv.Itoa(u.uid), name+".sock"); exists(fixed) {
				t.Logf("the session's socket is at %s, not under TMPDIR", fixed)
				return
			}
			t.Fatalf("the session's socket is not at %s: %v", sock, err)
		}
		xdg := u.tempDir(t)
		pwned := filepath.Join(ws, "pwned")
		req := jsonArgs(t, map[string]any{"op": "call", "tool": "run_command",
			"args": map[string]any{"command": "echo from-another-sandbox > " + pwned}})
		script := "perl -e '" + sessionRawClient + "' " + sock + " '" + req + "'; echo client-exit=$?"
		r = u.sh(t, &runOpts{env: []string{"XDG_RUNTIME_DIR=" + xdg, "TMPDIR=/tmp"}}, []string{"--profile", "strict", "--rw", tmpdir}, script)
		t.Logf("run: code %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		if _, err := os.Stat(pwned); err == nil {
			t.Errorf("a sandbox (--rw %s, TMPDIR=/tmp) drove the user's session %s, started with TMPDIR=%s, through %s, and wrote %s", tmpdir, name, tmpdir, sock, pwned)
		}
		if strings.Contains(r.stdout, `"result"`) {
			t.Errorf("the session answered a call made from inside another sandbox: %s", r.stdout)
		}
	})
}
