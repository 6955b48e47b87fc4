package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The git repositories a sandbox makes in the workspace (where nothing
// protected could stop it: a .git in an existing directory, the layout of
// a bare repository, a .git symlink) are made inert when the run ends,
// before the caller can run git there; those that existed stay as they
// are, and so does an empty .git.
func TestWorkspaceGitAudit(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		u.mkdirs(t, filepath.Join(ws, "src"), filepath.Join(ws, "docs"), filepath.Join(ws, "vendor", "lib", ".git"), filepath.Join(ws, "elsewhere"))
		u.writeFile(t, filepath.Join(ws, "vendor", "lib", ".git", "config"), "[core]\n", 0o644)
		status := filepath.Join(u.visibleDir(t), "status.jsonl")
		r := u.sh(t, &runOpts{dir: ws}, []string{"--json-status", status}, `
mkdir src/.git && printf '[core]\n\tfsmonitor = evil\n' > src/.git/config && echo ref > src/.git/HEAD
mkdir docs/objects docs/refs && echo 'ref: refs/heads/main' > docs/HEAD
mkdir elsewhere/gitdir && echo x > elsewhere/gitdir/HEAD && ln -s gitdir elsewhere/.git
mkdir empty && mkdir empty/.git
echo made`)
		expectCode(t, r, 0)
		for _, p := range []string{"src/.git.nsbox-quarantine", "docs/HEAD.nsbox-quarantine", "elsewhere/.git.nsbox-quarantine", "vendor/lib/.git", "empty/.git"} {
			if !exists(filepath.Join(ws, p)) {
				t.Errorf("%s missing after the run", p)
			}
		}
		for _, p := range []string{"src/.git", "docs/HEAD", "elsewhere/.git", "vendor/lib/.git.nsbox-quarantine"} {
			if exists(filepath.Join(ws, p)) {
				t.Errorf("%s still there after the run", p)
			}
		}
		if strings.Count(r.stderr, "the sandbox made a git repository") != 3 {
			t.Errorf("stderr %q", r.stderr)
		}
		b, _ := os.ReadFile(status)
		if strings.Count(string(b), `"event":"quarantined"`) != 3 || !strings.HasSuffix(strings.TrimSpace(string(b)), "}") || !strings.Contains(string(b)[strings.LastIndex(string(b), "quarantined"):], `"event":"exited"`) {
			t.Errorf("status %s", b)
		}

		// What a review got past the first audit: the layout of a bare
		// repository at the top of the workspace; a symlinked HEAD; a
		// directory prepared in one run (a HEAD in it, no repository
		// yet) and moved into place as .git in the next; and, root-less,
		// a repository in a directory the sandbox made unreadable.
		u.mkdirs(t, filepath.Join(ws, "src2"), filepath.Join(ws, "src3"), filepath.Join(ws, "libs", "foo"))
		expectCode(t, u.sh(t, &runOpts{dir: ws}, nil, `mkdir -p build/a && : > build/a/HEAD`), 0)
		r = u.sh(t, &runOpts{dir: ws}, nil, `
mkdir objects refs && echo 'ref: refs/heads/main' > HEAD
mkdir src2/objects src2/refs && ln -s refs/heads/main src2/HEAD
mv build/a src3/.git && mkdir src3/.git/objects src3/.git/refs && echo x > src3/.git/config
mkdir libs/foo/.git && echo x > libs/foo/.git/config && echo ref > libs/foo/.git/HEAD && chmod a-r libs
echo made`)
		expectCode(t, r, 0)
		os.Chmod(filepath.Join(ws, "libs"), 0o755)
		for _, p := range []string{"HEAD.nsbox-quarantine", "src2/HEAD.nsbox-quarantine", "src3/.git.nsbox-quarantine", "libs/foo/.git.nsbox-quarantine"} {
			if !exists(filepath.Join(ws, p)) {
				t.Errorf("%s missing after the second run; stderr %q", p, r.stderr)
			}
		}

		// And past the second audit: a read-only parent, the quarantine
		// names taken beforehand, four locked levels. A directory of
		// the user's that was locked before the run, with a repository
		// in it, is left exactly as it was.
		u.mkdirs(t, filepath.Join(ws, "mine", "proj", ".git"))
		u.writeFile(t, filepath.Join(ws, "mine", "proj", ".git", "HEAD"), "ref: refs/heads/main\n", 0o644)
		if err := os.Chmod(filepath.Join(ws, "mine"), 0o100); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(filepath.Join(ws, "mine"), 0o755)
		r = u.sh(t, &runOpts{dir: ws}, nil, `
mkdir -p ro/lib/.git && echo x > ro/lib/.git/config && chmod a-w ro/lib
mkdir -p q/.git.nsbox-quarantine && for i in $(seq 1 99); do mkdir q/.git.nsbox-quarantine.$i; done && mkdir q/.git && echo x > q/.git/config
mkdir -p a/b/c/d/lib/.git && echo x > a/b/c/d/lib/.git/config && chmod 100 a/b/c/d a/b/c a/b a
echo made`)
		expectCode(t, r, 0)
		for _, d := range []string{"a", "a/b", "a/b/c", "a/b/c/d", "ro/lib"} {
			os.Chmod(filepath.Join(ws, d), 0o755)
		}
		for _, p := range []string{"ro/lib/.git", "q/.git", "a/b/c/d/lib/.git"} {
			if exists(filepath.Join(ws, p)) {
				t.Errorf("%s still there after the third run; stderr %q", p, r.stderr)
			}
		}
		if st, err := os.Stat(filepath.Join(ws, "mine")); err != nil || st.Mode().Perm() != 0o100 {
			t.Errorf("the audit changed the mode of a directory locked before the run: %v %v", st.Mode(), err)
		}
		os.Chmod(filepath.Join(ws, "mine"), 0o755)
		if !exists(filepath.Join(ws, "mine", "proj", ".git", "HEAD")) {
			t.Errorf("the audit renamed a repository that was there before the run")
		}
	})
}

// A submodule the index records under a name the walk skips (target/,
// node_modules/): a plain git status at the top enters it, so the audit
// looks at every gitlink of the protected index.
func TestWorkspaceGitAuditSubmodules(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed (apt-get install git)")
	}
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		u.mkdirs(t, ws)
		for _, args := range [][]string{{"init", "-q", ws}, {"-C", ws, "update-index", "--add", "--cacheinfo", "160000,dac72e276fa85887776d88cb9ed1a446900e3dea,target/lib"}} {
			if out, err := exec.Command("git", append([]string{"-c", "safe.directory=*"}, args...)...).CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v %s", args, err, out)
			}
		}
		if os.Getuid() == 0 {
			filepath.Walk(ws, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, u.uid, u.gid) })
		}
		r := u.sh(t, &runOpts{dir: ws}, nil, `mkdir -p target/lib/.git && printf '[core]\n\tfsmonitor = evil\n' > target/lib/.git/config && echo made`)
		expectCode(t, r, 0)
		if exists(filepath.Join(ws, "target", "lib", ".git")) || !exists(filepath.Join(ws, "target", "lib", ".git.nsbox-quarantine")) {
			t.Fatalf("the submodule checkout under target/ was not audited; stderr %q", r.stderr)
		}

		// The user's own: an initialised submodule under node_modules/
		// (an absorbed .git file) and a repository 10 levels deep stay
		// as they are, run after run; inside, they are read-only.
		sub := filepath.Join(u.visibleDir(t), "sub")
		deep := filepath.Join(ws, "a", "b", "c", "d", "e", "f", "g", "h", "i", "deep")
		for _, args := range [][]string{
			{"init", "-q", sub}, {"-C", sub, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "x"},
			{"-C", ws, "-c", "protocol.file.allow=always", "submodule", "add", "-q", sub, "node_modules/dep"},
			{"init", "-q", deep},
		} {
			if out, err := exec.Command("git", append([]string{"-c", "safe.directory=*"}, args...)...).CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v %s", args, err, out)
			}
		}
		if os.Getuid() == 0 {
			filepath.Walk(ws, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, u.uid, u.gid) })
		}
		for i := 0; i < 2; i++ {
			r = u.sh(t, &runOpts{dir: ws}, nil, `(echo x >> node_modules/dep/.git) 2>/dev/null && echo GITFILE-WRITTEN; (echo x >> a/b/c/d/e/f/g/h/i/deep/.git/config) 2>/dev/null && echo DEEP-WRITTEN; echo ok`)
			expectCode(t, r, 0)
			if strings.Contains(r.stdout, "WRITTEN") || strings.Contains(r.stderr, "the sandbox made a git repository") {
				t.Fatalf("run %d: stdout %q stderr %q", i, r.stdout, r.stderr)
			}
		}
		for _, p := range []string{"node_modules/dep/.git", "a/b/c/d/e/f/g/h/i/deep/.git"} {
			if !exists(filepath.Join(ws, p)) {
				t.Errorf("%s renamed", p)
			}
		}
	})
}

// A run killed with SIGKILL cannot run its git audit; the next nsbox
// finishes it from the record the run left in nsbox's data directory
// (hidden in every sandbox), before anything else. It reports and changes
// nothing: the tree may have been the user's since.
func TestWorkspaceGitAuditAfterKill(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		base := u.visibleDir(t)
		ws := filepath.Join(base, "proj")
		data := filepath.Join(base, "data")
		u.mkdirs(t, filepath.Join(ws, "src"), data)
		env := []string{"XDG_DATA_HOME=" + data}
		cmd := exec.Command(nsboxBin(t), "run", "--", "/bin/sh", "-c", `mkdir src/.git && echo x > src/.git/config && touch made && sleep 60`)
		cmd.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + u.home(), "LANG=C.UTF-8"}, env...)
		cmd.Dir = ws
		u.asUser(cmd)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 200 && !exists(filepath.Join(ws, "made")); i++ {
			time.Sleep(25 * time.Millisecond)
		}
		cmd.Process.Kill()
		cmd.Wait()
		if !exists(filepath.Join(ws, "src", ".git")) {
			t.Fatalf("the killed run did not get to plant its repository")
		}
		r := u.run(t, &runOpts{dir: ws, env: env}, "run", "--", "true")
		expectCode(t, r, 0)
		if !strings.Contains(r.stderr, "killed before its git audit") || !strings.Contains(r.stderr, "may have made the git repository at "+filepath.Join(ws, "src")) {
			t.Fatalf("the next run did not finish the killed run's audit; stderr %q", r.stderr)
		}
		if !exists(filepath.Join(ws, "src", ".git")) {
			t.Fatalf("a deferred audit renamed something")
		}
		// Reported once: the record is gone.
		r = u.run(t, &runOpts{dir: ws, env: env}, "run", "--", "true")
		if strings.Contains(r.stderr, "killed before its git audit") {
			t.Fatalf("the record was reported twice: %q", r.stderr)
		}
	})
}

// A crafted git index in the workspace (an index v4 entry whose path
// compression says to drop more of the previous path than there is, in a
// varint long enough to overflow) is read as git reads a broken index:
// as the end of it. It stopped every run there with an internal error.
func TestWorkspaceCraftedGitIndex(t *testing.T) {
	entry := func(name string, drop ...byte) string {
		e := make([]byte, 62)
		e[24], e[25], e[26], e[27] = 0, 0, 0xe0, 0 // mode 0160000: a gitlink
		e[61] = byte(len(name))
		return string(e) + string(drop) + name + "\x00"
	}
	index := "DIRC\x00\x00\x00\x04\x00\x00\x00\x02" + entry("lib/a", 0) + entry("x", 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f)
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		u.mkdirs(t, filepath.Join(ws, ".git"), filepath.Join(ws, "vendor", "lib", ".git", "objects"))
		u.writeFile(t, filepath.Join(ws, ".git", "HEAD"), "ref: refs/heads/main\n", 0o644)
		u.writeFile(t, filepath.Join(ws, ".git", "index"), index, 0o644)
		u.writeFile(t, filepath.Join(ws, "vendor", "lib", ".git", "HEAD"), "ref: refs/heads/main\n", 0o644)
		u.writeFile(t, filepath.Join(ws, "vendor", "lib", ".git", "index"), index, 0o644)
		r := u.sh(t, &runOpts{dir: ws}, nil, `echo ran`)
		expectCode(t, r, 0)
		if !strings.Contains(r.stdout, "ran") || strings.Contains(r.stderr, "internal error") {
			t.Fatalf("stdout %q stderr %q", r.stdout, r.stderr)
		}
	})
}
