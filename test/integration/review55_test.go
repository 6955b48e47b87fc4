package integration

// Review 55: git config keys whose value git runs (or takes as a
// directory of hooks) that gitCommand (pkg/policy/gitconfig.go) does not
// list. The configs themselves are protected; what they name in a
// writable directory is protected only for the keys listed, so a file the
// user's own config (or the repository's) names through one of these
// keys stayed writable, and the host's git ran what the sandbox wrote.
// Each test below failed before the fix (gitDirPointer, the keys added
// to gitCommand, commandFiles, gitEnvPrograms).

import (
	"path/filepath"
	"strings"
	"testing"
)

// review55Setup makes, on the host as u, a repository ws (one commit)
// below a fresh directory base, and a global git config base/gitconfig
// (outside every writable directory, given to nsbox and to the host's
// later git as GIT_CONFIG_GLOBAL, as a user's ~/.gitconfig is) holding
// cfg, where "WS" stands for ws.
func review55Setup(t *testing.T, u user, cfg string) (base, ws string, env []string) {
	t.Helper()
	base = u.visibleDir(t)
	ws = filepath.Join(base, "proj")
	u.mkdirs(t, filepath.Join(ws, "tools"))
	gcfg := filepath.Join(base, "gitconfig")
	u.writeFile(t, gcfg, "[user]\n\tname = u\n\temail = u@example.invalid\n"+strings.ReplaceAll(cfg, "WS", ws), 0o644)
	env = []string{"GIT_CONFIG_GLOBAL=" + gcfg, "GIT_CONFIG_NOSYSTEM=1"}
	u.writeFile(t, filepath.Join(ws, "README"), "hi\n", 0o644)
	review55Host(t, u, ws, env, "git init -q && git add README && git commit -qm init")
	return base, ws, env
}

// review55Host runs script with /bin/sh on the host as u in dir.
func review55Host(t *testing.T, u user, dir string, env []string, script string) result {
	t.Helper()
	r := u.runAs(t, &runOpts{dir: dir, env: env}, "/bin/sh", "-c", script)
	if r.code != 0 && strings.Contains(r.stderr, "fatal") && !strings.Contains(script, "imap-send") {
		t.Logf("host %q: exit %d: %s", script, r.code, r.stderr)
	}
	return r
}

// review55Sandbox runs script in a sandbox of the workspace ws with env,
// and fails unless it ran to its end.
func review55Sandbox(t *testing.T, u user, ws string, env []string, script string) result {
	t.Helper()
	r := u.sh(t, &runOpts{dir: ws, env: env}, []string{"--workspace", ws}, script+"\necho done")
	if r.code != 0 || !strings.Contains(r.stdout, "done") {
		t.Fatalf("sandbox: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	return r
}

// TestReview55InitTemplateDirHooksProtected
//
// Finding (HIGH): init.templateDir names a directory whose hooks/ git
// copies into every repository it creates (git init, git clone, git
// submodule update) and then runs (clone runs post-checkout at once). It
// is the exact analogue of core.hooksPath, which is protected when a
// config names it in a writable directory; init.templateDir is not.
// Setup: the user's ~/.gitconfig (here GIT_CONFIG_GLOBAL) has
// init.templateDir = ~/dotfiles/git-template, and the workspace is
// ~/dotfiles (or the template directory is kept in any project).
// Attack: the sandbox writes git-template/hooks/post-checkout; the
// user's next `git clone` anywhere runs it.
func TestReview55InitTemplateDirHooksProtected(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		base, ws, env := review55Setup(t, u, "[init]\n\ttemplateDir = WS/git-template\n")
		u.mkdirs(t, filepath.Join(ws, "git-template", "hooks"))
		u.writeFile(t, filepath.Join(ws, "git-template", "description"), "x\n", 0o644)
		marker := filepath.Join(base, "pwned")
		r := review55Sandbox(t, u, ws, env, `(printf '#!/bin/sh\ntouch `+marker+`\n' > git-template/hooks/post-checkout && chmod +x git-template/hooks/post-checkout) 2>/dev/null && echo HOOK-WRITTEN`)
		review55Host(t, u, base, env, "git clone -q "+ws+" clone")
		if strings.Contains(r.stdout, "HOOK-WRITTEN") || exists(marker) {
			t.Fatalf("init.templateDir's hooks were writable (stdout %q); host `git clone` ran the sandbox's post-checkout: marker exists=%v", r.stdout, exists(marker))
		}
	})
}

// TestReview55ImapTunnelProtected
//
// Finding (MEDIUM): imap.tunnel is a command git imap-send runs through
// the shell; a program it names in a writable directory stays writable.
// Attack: the sandbox rewrites the tunnel script; the user's next
// `git format-patch ... | git imap-send` runs it.
func TestReview55ImapTunnelProtected(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		base, ws, env := review55Setup(t, u, "[imap]\n\ttunnel = WS/tools/imap-tunnel\n\tfolder = Drafts\n")
		u.writeFile(t, filepath.Join(ws, "tools", "imap-tunnel"), "#!/bin/sh\nexec ssh -q mail /usr/lib/dovecot/imap\n", 0o755)
		marker := filepath.Join(base, "pwned")
		r := review55Sandbox(t, u, ws, env, `(printf '#!/bin/sh\ntouch `+marker+`\n' > tools/imap-tunnel) 2>/dev/null && echo TUNNEL-WRITTEN`)
		review55Host(t, u, ws, env, "git format-patch -1 --root --stdout HEAD | git imap-send")
		if strings.Contains(r.stdout, "TUNNEL-WRITTEN") || exists(marker) {
			t.Fatalf("imap.tunnel's program was writable (stdout %q); host `git imap-send` ran it: marker exists=%v", r.stdout, exists(marker))
		}
	})
}

// TestReview55TarFormatCommandProtected
//
// Finding (LOW): tar.<format>.command (git-archive(1)) is a filter git
// archive runs through the shell.
func TestReview55TarFormatCommandProtected(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		base, ws, env := review55Setup(t, u, "[tar \"tar.zst\"]\n\tcommand = WS/tools/zstd-wrap -c\n")
		u.writeFile(t, filepath.Join(ws, "tools", "zstd-wrap"), "#!/bin/sh\nexec zstd \"$@\"\n", 0o755)
		marker := filepath.Join(base, "pwned")
		r := review55Sandbox(t, u, ws, env, `(printf '#!/bin/sh\ntouch `+marker+`\ncat >/dev/null\n' > tools/zstd-wrap) 2>/dev/null && echo TAR-WRITTEN`)
		review55Host(t, u, ws, env, "git archive --format=tar.zst HEAD >/dev/null")
		if strings.Contains(r.stdout, "TAR-WRITTEN") || exists(marker) {
			t.Fatalf("tar.<format>.command's program was writable (stdout %q); host `git archive` ran it: marker exists=%v", r.stdout, exists(marker))
		}
	})
}

// TestReview55AlternateRefsCommandProtected
//
// Finding (LOW): core.alternateRefsCommand is run through the shell by
// a fetch (and receive-pack) in a repository with alternates.
func TestReview55AlternateRefsCommandProtected(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		base, ws, env := review55Setup(t, u, "[core]\n\talternateRefsCommand = WS/tools/alt-refs\n")
		u.writeFile(t, filepath.Join(ws, "tools", "alt-refs"), "#!/bin/sh\ngit --git-dir=\"$1\" for-each-ref --format='%(objectname)'\n", 0o755)
		review55Host(t, u, base, env, "git clone -q --reference "+ws+" "+ws+" alt")
		marker := filepath.Join(base, "pwned")
		r := review55Sandbox(t, u, ws, env, `(printf '#!/bin/sh\ntouch `+marker+`\n' > tools/alt-refs) 2>/dev/null && echo ALT-WRITTEN`)
		review55Host(t, u, filepath.Join(base, "alt"), env, "git fetch -q "+ws)
		if strings.Contains(r.stdout, "ALT-WRITTEN") || exists(marker) {
			t.Fatalf("core.alternateRefsCommand's program was writable (stdout %q); host `git fetch` ran it: marker exists=%v", r.stdout, exists(marker))
		}
	})
}

// TestReview55NewerGitCommandKeysProtected
//
// Findings: keys the installed git (2.39) does not run but current git,
// or git's Perl commands, do: hook.<name>.command (config-based hooks,
// git 2.54: run at the named event, e.g. pre-commit, like a hook),
// gc.recentObjectsHook (git 2.42: run through the shell by git gc /
// repack --cruft, so also by auto gc after a commit), sendemail.toCmd,
// sendemail.ccCmd and sendemail.headerCmd (git send-email),
// instaweb.httpd (git instaweb), svn.authorsProg (git svn). Each names a
// program git runs; a program named in the workspace stays writable.
func TestReview55NewerGitCommandKeysProtected(t *testing.T) {
	keys := []struct{ section, key, file string }{
		{"[hook \"lint\"]\n\tevent = pre-commit\n", "command", "hook-lint"},
		{"[gc]\n", "recentObjectsHook", "recent-objects"},
		{"[sendemail]\n", "toCmd", "to-cmd"},
		{"[sendemail]\n", "ccCmd", "cc-cmd"},
		{"[sendemail]\n", "headerCmd", "header-cmd"},
		{"[instaweb]\n", "httpd", "lighttpd"},
		{"[svn]\n", "authorsProg", "authors-prog"},
	}
	eachUser(t, func(t *testing.T, u user) {
		var cfg, script string
		for _, k := range keys {
			cfg += k.section + "\t" + k.key + " = WS/tools/" + k.file + "\n"
			script += "(echo 'touch /tmp/pwned' >> tools/" + k.file + ") 2>/dev/null && echo " + k.key + "-WRITTEN\n"
		}
		_, ws, env := review55Setup(t, u, cfg)
		for _, k := range keys {
			u.writeFile(t, filepath.Join(ws, "tools", k.file), "#!/bin/sh\n", 0o755)
		}
		r := review55Sandbox(t, u, ws, env, script)
		var written []string
		for _, k := range keys {
			if strings.Contains(r.stdout, k.key+"-WRITTEN") {
				written = append(written, k.key)
			}
		}
		if len(written) > 0 {
			t.Fatalf("programs named by %v in the user's git config were writable in the sandbox", written)
		}
	})
}

// TestReview55InterpreterCommandProtected
//
// Finding (MEDIUM): commandPointers protects only the first word of a
// command. `core.fsmonitor = tools/fsmonitor.sh` is protected, but the
// same hook written `sh tools/fsmonitor.sh` (as with `python3
// tools/clean.py` for a filter, `node scripts/x.js` for a textconv, `!bash
// scripts/lint.sh` for an alias) leaves the script writable: the first
// word, sh, is looked up in PATH and names no file. git runs the value
// through the shell, so the script is what runs.
// Attack: the sandbox rewrites tools/fsmonitor.sh; the user's next plain
// `git status` runs it.
func TestReview55InterpreterCommandProtected(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		base, ws, env := review55Setup(t, u, "")
		u.writeFile(t, filepath.Join(ws, "tools", "fsmonitor.sh"), "#!/bin/sh\nexit 1\n", 0o755)
		review55Host(t, u, ws, env, "git config core.fsmonitor 'sh tools/fsmonitor.sh'")
		marker := filepath.Join(base, "pwned")
		r := review55Sandbox(t, u, ws, env, `(printf 'touch `+marker+`\nexit 1\n' > tools/fsmonitor.sh) 2>/dev/null && echo FSMON-WRITTEN`)
		review55Host(t, u, ws, env, "git status >/dev/null 2>&1")
		if strings.Contains(r.stdout, "FSMON-WRITTEN") || exists(marker) {
			t.Fatalf("the script of core.fsmonitor = 'sh tools/fsmonitor.sh' was writable (stdout %q); host `git status` ran it: marker exists=%v", r.stdout, exists(marker))
		}
	})
}

// TestReview55ControlListedKeyProtected: the same setup with a key
// gitCommand lists (core.fsmonitor naming the script itself) is
// protected: the harness above reaches nsbox's reading of
// GIT_CONFIG_GLOBAL. Passes on the current code.
func TestReview55ControlListedKeyProtected(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		_, ws, env := review55Setup(t, u, "[core]\n\tfsmonitor = WS/tools/fsmonitor.sh\n")
		u.writeFile(t, filepath.Join(ws, "tools", "fsmonitor.sh"), "#!/bin/sh\nexit 1\n", 0o755)
		r := review55Sandbox(t, u, ws, env, `(echo x >> tools/fsmonitor.sh) 2>/dev/null && echo FSMON-WRITTEN`)
		if strings.Contains(r.stdout, "FSMON-WRITTEN") {
			t.Fatalf("control: a listed key's program was writable: %q", r.stdout)
		}
	})
}

// TestReview55GitEnvProgramsProtected
//
// Finding (LOW): nsbox reads the environment's git configuration
// (GIT_CONFIG_PARAMETERS, GIT_CONFIG_KEY_n, GIT_CONFIG_GLOBAL) because "a
// git run later from the same shell reads them", but not the variables
// that are the environment's form of the same keys: GIT_TEMPLATE_DIR
// (init.templateDir), GIT_EXTERNAL_DIFF (diff.external), GIT_SSH_COMMAND
// and GIT_SSH (core.sshCommand), GIT_EDITOR, GIT_SEQUENCE_EDITOR,
// GIT_PAGER, GIT_ASKPASS. A program they name in the workspace (direnv's
// `export GIT_EXTERNAL_DIFF=$PWD/tools/difft`) stays writable.
// Attack: the sandbox rewrites tools/difft; the user's next `git diff` in
// the same shell runs it.
func TestReview55GitEnvProgramsProtected(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		base, ws, env := review55Setup(t, u, "")
		u.writeFile(t, filepath.Join(ws, "tools", "difft"), "#!/bin/sh\nexec diff -u \"$2\" \"$5\"\n", 0o755)
		u.mkdirs(t, filepath.Join(ws, "git-template", "hooks"))
		env = append(env, "GIT_EXTERNAL_DIFF="+filepath.Join(ws, "tools", "difft"), "GIT_TEMPLATE_DIR="+filepath.Join(ws, "git-template"))
		marker := filepath.Join(base, "pwned")
		r := review55Sandbox(t, u, ws, env, `(printf '#!/bin/sh\ntouch `+marker+`\n' > tools/difft) 2>/dev/null && echo DIFF-WRITTEN
(printf '#!/bin/sh\ntouch `+marker+`2\n' > git-template/hooks/post-checkout && chmod +x git-template/hooks/post-checkout) 2>/dev/null && echo TEMPLATE-WRITTEN
echo changed >> README`)
		review55Host(t, u, ws, env, "git diff >/dev/null; cd .. && git clone -q "+ws+" clone")
		if strings.Contains(r.stdout, "WRITTEN") || exists(marker) || exists(marker+"2") {
			t.Fatalf("programs named by GIT_EXTERNAL_DIFF / GIT_TEMPLATE_DIR in nsbox's environment were writable (stdout %q); host git diff ran it: %v, git clone ran the hook: %v", r.stdout, exists(marker), exists(marker+"2"))
		}
	})
}
