package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestGitStatusHidesPlaceholders: inside the sandbox, git does not list
// the placeholders that stand where protected agent files are missing
// (.npmrc, .mcp.json, ...) as untracked, while it still lists what the
// command made and still applies the repository's own exclude patterns;
// the host's .git/info/exclude is not changed, and after the run the
// host's git sees neither the placeholders nor anything nsbox added.
func TestGitStatusHidesPlaceholders(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	eachUser(t, func(t *testing.T, u user) {
		ws, gitEnv := gitRepoOf(t, u)
		exclude := filepath.Join(ws, ".git", "info", "exclude")
		u.writeFile(t, exclude, "*.log\n", 0o644)
		before, _ := os.ReadFile(exclude)

		r := u.sh(t, &runOpts{dir: ws}, []string{"--rw", ws},
			`test -e .npmrc || { echo "no placeholder for .npmrc: nothing to test"; exit 3; }
: > made.txt; : > debug.log
git status --porcelain --untracked-files=all`)
		expectCode(t, r, 0)
		lines := strings.Fields(strings.ReplaceAll(r.stdout, "??", ""))
		if len(lines) != 1 || lines[0] != "made.txt" {
			t.Errorf("git status inside lists %q, want only made.txt\nstderr: %s", r.stdout, r.stderr)
		}
		if after, _ := os.ReadFile(exclude); string(after) != string(before) {
			t.Errorf("the host's .git/info/exclude changed: %q -> %q", before, after)
		}
		out := u.runAs(t, gitEnv, "git", "status", "--porcelain", "--untracked-files=all")
		for _, l := range strings.Split(strings.TrimSpace(out.stdout), "\n") {
			if l = strings.TrimSpace(strings.TrimPrefix(l, "??")); l != "" && l != "made.txt" && l != "debug.log" {
				t.Errorf("after the run the host's git lists %q", l)
			}
		}

		// A workspace below the repository's top: its placeholders
		// (.git among them, an empty directory git looks past) are
		// named from the top of the work tree.
		sub := filepath.Join(ws, "sub")
		u.mkdirs(t, sub)
		r = u.sh(t, &runOpts{dir: sub}, []string{"--workspace", sub, "--rw", sub},
			`test -e .npmrc || { echo "no placeholder for .npmrc: nothing to test"; exit 3; }
: > made2.txt
git status --porcelain --untracked-files=all 2>&1; echo "git=$?"`)
		expectCode(t, r, 0)
		if strings.Contains(r.stdout, "dubious ownership") {
			// The repository above the workspace is not idmapped: its
			// owner is not the sandbox's user, and git refuses it.
			t.Logf("git refuses the repository above the workspace here: %s", r.stdout)
			return
		}
		if !strings.Contains(r.stdout, "git=0") || !strings.Contains(r.stdout, "?? sub/made2.txt") || strings.Contains(r.stdout, ".npmrc") || strings.Contains(r.stdout, ".mcp.json") {
			t.Errorf("git status inside a workspace below the top lists:\n%s", r.stdout)
		}
	})
}

// gitRepoOf makes a repository of u's with one commit (tracked.txt) in a
// directory nsbox may use as a workspace, and the options that run git
// there as u.
func gitRepoOf(t *testing.T, u user) (string, *runOpts) {
	t.Helper()
	ws := filepath.Join(u.visibleDir(t), "repo")
	u.mkdirs(t, ws)
	gitEnv := &runOpts{dir: ws, env: []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t"}}
	if r := u.runAs(t, gitEnv, "git", "init", "-q", ws); r.code != 0 {
		t.Fatalf("git init: %s", r.stderr)
	}
	u.writeFile(t, filepath.Join(ws, "tracked.txt"), "x\n", 0o644)
	if r := u.runAs(t, gitEnv, "sh", "-c", "git add tracked.txt && git commit -qm init"); r.code != 0 {
		t.Fatalf("git commit: %s", r.stderr)
	}
	return ws, gitEnv
}

// TestGitExcludeHostileFiles: a repository's exclude file that is a
// symlink, a FIFO or over the size bound, or a .git that is a file, is
// left alone: the run starts (no wait on the FIFO), nothing is mounted
// over the link or what it names, and the host's files are unchanged.
func TestGitExcludeHostileFiles(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	eachUser(t, func(t *testing.T, u user) {
		for _, tc := range []struct {
			name  string
			setup func(t *testing.T, ws, exclude string)
		}{
			{"symlink", func(t *testing.T, ws, exclude string) {
				u.writeFile(t, filepath.Join(ws, "target.txt"), "mine\n", 0o644)
				os.Remove(exclude)
				if err := os.Symlink("../../target.txt", exclude); err != nil {
					t.Fatal(err)
				}
			}},
			{"fifo", func(t *testing.T, ws, exclude string) {
				os.Remove(exclude)
				if err := syscall.Mkfifo(exclude, 0o644); err != nil {
					t.Fatal(err)
				}
				os.Lchown(exclude, u.uid, u.uid)
			}},
			{"oversized", func(t *testing.T, ws, exclude string) {
				u.writeFile(t, exclude, strings.Repeat("# padding\n", 30000), 0o644)
			}},
			{"gitfile", func(t *testing.T, ws, exclude string) {
				os.RemoveAll(filepath.Join(ws, ".git"))
				u.writeFile(t, filepath.Join(ws, ".git"), "gitdir: /nonexistent\n", 0o644)
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				ws, _ := gitRepoOf(t, u)
				exclude := filepath.Join(ws, ".git", "info", "exclude")
				tc.setup(t, ws, exclude)
				r := u.sh(t, &runOpts{dir: ws, timeout: time.Minute}, []string{"--rw", ws},
					`test -e .npmrc || { echo "no placeholder for .npmrc"; exit 3; }
if grep -qs nsbox target.txt; then echo "target.txt was covered"; fi
if [ -f .git/info/exclude ] && [ ! -p .git/info/exclude ] && grep -qs 'nsbox: placeholders' .git/info/exclude; then echo "exclude was covered"; fi
echo done`)
				expectCode(t, r, 0)
				if !strings.Contains(r.stdout, "done") || strings.Contains(r.stdout, "covered") {
					t.Errorf("inside: %q (stderr %q)", r.stdout, r.stderr)
				}
				if tc.name == "symlink" {
					if b, _ := os.ReadFile(filepath.Join(ws, "target.txt")); string(b) != "mine\n" {
						t.Errorf("the link's target changed on the host: %q", b)
					}
				}
			})
		}
	})
}
