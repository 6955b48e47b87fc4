package integration

// Review 48: what the host does later with what a sandbox wrote (the
// perimeter: git configs, shell rc files, ssh config, placeholders, the
// end-of-run audit).

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// review48DotfilesHome makes a home directory (owned by u, beside the
// workspace ws) whose dotfiles are symlinks into ws, as GNU stow, rcm,
// dotbot or yadm-style setups make them: the workspace is the user's
// dotfiles repository. It returns the home and, by the name of each link
// below home, the regular file in ws it leads to (written with a harmless
// first line).
func review48DotfilesHome(t *testing.T, u user, ws string, links map[string]string) (string, map[string]string) {
	t.Helper()
	home := filepath.Join(filepath.Dir(ws), "home")
	u.mkdirs(t, home)
	targets := map[string]string{}
	for link, name := range links {
		target := filepath.Join(ws, name)
		u.mkdirs(t, filepath.Dir(target))
		u.writeFile(t, target, "# "+name+"\n", 0o644)
		l := filepath.Join(home, link)
		u.mkdirs(t, filepath.Dir(l))
		if err := os.Symlink(target, l); err != nil {
			t.Fatal(err)
		}
		if os.Getuid() == 0 {
			os.Lchown(l, u.uid, u.gid)
		}
		targets[link] = target
	}
	return home, targets
}

// review48Appends runs a sandbox in ws with env that appends a line to each
// of files through its workspace path, and returns, for each file, whether
// the line reached the host's file.
func review48Appends(t *testing.T, u user, ws string, env []string, files []string) map[string]bool {
	t.Helper()
	var script []string
	for _, f := range files {
		script = append(script, `printf '[core]\n\tfsmonitor = "touch /tmp/pwned #"\n' >> '`+f+`' 2>/dev/null`)
	}
	script = append(script, `echo done`)
	env = append([]string{"XDG_DATA_HOME=" + u.tempDir(t)}, env...)
	r := u.sh(t, &runOpts{dir: ws, env: env}, []string{"--workspace", ws}, strings.Join(script, "\n"))
	if !strings.Contains(r.stdout, "done") {
		t.Fatalf("the probe did not run (exit %d)\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	out := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[f] = strings.Contains(string(b), "fsmonitor")
	}
	return out
}

// TestReview48UserGitConfigLinkedIntoWorkspace
//
// Finding (MEDIUM): the user's own global git config is writable by the
// sandbox when it is a symlink into a writable directory. nsbox reads
// ~/.gitconfig, $XDG_CONFIG_HOME/git/config (and the file
// GIT_CONFIG_GLOBAL names, see the next test) to protect what they *point
// to* in a writable directory (include.path, core.hooksPath, a
// core.fsmonitor program: docs/profiles.md, "What a config points git
// to"), and it protects ~/.bashrc and the other shell rc files at the
// place a symlink of theirs resolves to in a writable directory
// (docs/security.md, "A protected name that is a symlink"). But the git
// configs themselves are in no protect list: read-only only because $HOME
// is, they become plain workspace files when ~/.gitconfig ->
// ~/dotfiles/gitconfig and the workspace is ~/dotfiles (stow, rcm,
// dotbot, chezmoi's symlink mode). The same run that cannot touch
// dotfiles/bashrc rewrites dotfiles/gitconfig.
//
// Attack: an agent asked to tidy the user's dotfiles (or any prompt
// injection it meets there) appends `[core] fsmonitor = "cmd #"` (or an
// alias, core.pager, a credential.helper) to ./gitconfig. No audit looks
// at it, the run exits 0 with no warning, and the user's next git command
// in any repository on the host runs cmd as the user, outside the
// sandbox.
//
// Fix: protect the user's global git configs as the shell rc files are
// (~/.gitconfig, $XDG_CONFIG_HOME/git/config, the GIT_CONFIG_GLOBAL and
// GIT_CONFIG_SYSTEM files): a link of theirs into a writable directory
// makes its target read-only, with the links on the way.
func TestReview48UserGitConfigLinkedIntoWorkspace(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		home, tg := review48DotfilesHome(t, u, ws, map[string]string{
			".bashrc":            "bashrc",
			".gitconfig":         "gitconfig",
			".config/git/config": "config/git/config",
		})
		got := review48Appends(t, u, ws, []string{"HOME=" + home}, []string{
			tg[".bashrc"], tg[".gitconfig"], tg[".config/git/config"],
		})
		if got[tg[".bashrc"]] {
			t.Fatalf("~/.bashrc's target in the workspace was writable: the premise (rc files' links are protected) does not hold")
		}
		for _, l := range []string{".gitconfig", ".config/git/config"} {
			if got[tg[l]] {
				t.Errorf("~/%s -> %s: the sandbox appended core.fsmonitor to the user's global git config through the workspace (its ~/.bashrc link beside it is protected); the host's next git command anywhere runs it", l, tg[l])
			}
		}
	})
}

// TestReview48GitConfigGlobalInWorkspace
//
// Finding (MEDIUM, same root as above): GIT_CONFIG_GLOBAL naming a file in
// the workspace. nsbox reads the caller's GIT_CONFIG_GLOBAL and
// GIT_CONFIG_SYSTEM ("a git run later from the same shell reads them",
// gitprotect.go gitUserConfigs) and protects what that file points to in
// a writable directory, but not the file: a project that keeps its git
// settings in the tree (direnv's `export GIT_CONFIG_GLOBAL=$PWD/.gitconfig-dev`,
// a dev container's or a Makefile's environment) hands the sandbox the
// config every later git of that shell reads.
//
// Attack: the sandbox appends core.fsmonitor to the file; the run exits 0
// silently; the user's next `git status` from that shell runs it.
//
// Fix: protect the files GIT_CONFIG_GLOBAL and GIT_CONFIG_SYSTEM name when
// they lie in a writable directory (a placeholder when missing), as the
// files they include are.
func TestReview48GitConfigGlobalInWorkspace(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		cfg := filepath.Join(ws, "dev.gitconfig")
		u.writeFile(t, cfg, "[user]\n\tname = dev\n", 0o644)
		got := review48Appends(t, u, ws, []string{"GIT_CONFIG_GLOBAL=" + cfg}, []string{cfg})
		if got[cfg] {
			t.Errorf("GIT_CONFIG_GLOBAL=%s: the sandbox appended core.fsmonitor to the git config the caller's shell gives every later git; nsbox reads this file for the files it points to, but leaves the file itself writable", cfg)
		}
	})
}

// TestReview48SSHConfigLinkedIntoWorkspace
//
// Finding (LOW): ~/.ssh/config as a symlink into a writable directory.
// ~/.ssh is hidden (an empty directory over it), which hides the link but
// not the regular file it leads to in the workspace (only a `.env` link's
// target is hidden, docs/security.md). ssh runs ProxyCommand,
// LocalCommand and `Match exec` of that file as the user: the host's next
// `ssh`, `git fetch` or `git push` over ssh.
//
// Attack: workspace ~/dotfiles with ~/.ssh/config -> ~/dotfiles/ssh/config;
// the sandbox prepends `Match exec "cmd"` to ssh/config; the run exits 0
// silently and the next ssh connection on the host runs cmd.
//
// Fix: treat ~/.ssh/config (and ~/.ssh/rc, authorized_keys...) like the
// shell rc files: a link of theirs into a writable directory makes the
// target read-only (and, being in a hidden directory, hidden).
func TestReview48SSHConfigLinkedIntoWorkspace(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		home, tg := review48DotfilesHome(t, u, ws, map[string]string{
			".bashrc":     "bashrc",
			".ssh/config": "ssh/config",
		})
		got := review48Appends(t, u, ws, []string{"HOME=" + home}, []string{tg[".bashrc"], tg[".ssh/config"]})
		if got[tg[".bashrc"]] {
			t.Fatalf("~/.bashrc's target in the workspace was writable: the premise does not hold")
		}
		if got[tg[".ssh/config"]] {
			t.Errorf("~/.ssh/config -> %s: the sandbox rewrote the user's ssh config through the workspace (ProxyCommand / Match exec run on the host's next ssh); the hide of ~/.ssh covers only the link", tg[".ssh/config"])
		}
	})
}
