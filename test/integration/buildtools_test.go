package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPrivateCacheDefault: commands get XDG_CACHE_HOME in the sandbox's
// private /tmp, writable, while $HOME stays read-only; the host's /tmp
// gets nothing of it.
func TestPrivateCacheDefault(t *testing.T) {
	_, hostHad := os.Lstat("/tmp/.cache/nsbox-cache-probe")
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		r := u.sh(t, &runOpts{dir: ws}, nil, `echo "cache=$XDG_CACHE_HOME"
mkdir -p "$XDG_CACHE_HOME/nsbox-cache-probe" && echo made
mkdir "$HOME/.nsbox-cache-probe" 2>/dev/null && echo home-writable
exit 0`)
		expectCode(t, r, 0)
		if !strings.Contains(r.stdout, "cache=/tmp/.cache\n") || !strings.Contains(r.stdout, "made\n") {
			t.Fatalf("no private, writable cache directory inside: %q (stderr %q)", r.stdout, r.stderr)
		}
		if strings.Contains(r.stdout, "home-writable") {
			t.Fatalf("$HOME is writable inside: %q", r.stdout)
		}
		if _, err := os.Lstat("/tmp/.cache/nsbox-cache-probe"); err == nil && hostHad != nil {
			t.Fatal("the sandbox's cache directory reached the host's /tmp")
		}
	})
}

// TestPrivateCacheCallerChoiceWins: a variable the caller sets, and a
// writable place the policy gives at $HOME/.cache, are left alone.
func TestPrivateCacheCallerChoiceWins(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		r := u.sh(t, &runOpts{dir: ws}, []string{"--env", "XDG_CACHE_HOME=/tmp/mine"}, `echo "cache=$XDG_CACHE_HOME"`)
		expectCode(t, r, 0)
		if strings.TrimSpace(r.stdout) != "cache=/tmp/mine" {
			t.Fatalf("--env XDG_CACHE_HOME not kept: %q", r.stdout)
		}
		// $HOME inside the (writable) workspace: the caller put the
		// caches there.
		r = u.sh(t, &runOpts{dir: ws}, []string{"--env", "HOME=" + ws}, `echo "cache=${XDG_CACHE_HOME-unset}"`)
		expectCode(t, r, 0)
		if strings.TrimSpace(r.stdout) != "cache=unset" {
			t.Fatalf("XDG_CACHE_HOME set although $HOME/.cache is writable: %q", r.stdout)
		}
		// A host directory bound over /tmp: the cache would be the host's.
		tmp := u.tempDir(t)
		r = u.sh(t, &runOpts{dir: ws}, []string{"--rw", tmp + ":/tmp"}, `echo "cache=${XDG_CACHE_HOME-unset}"`)
		expectCode(t, r, 0)
		if strings.TrimSpace(r.stdout) != "cache=unset" {
			t.Fatalf("XDG_CACHE_HOME set in a host directory bound at /tmp: %q", r.stdout)
		}
	})
}

// TestPrivateCacheLandlock: under the Landlock backend the cache is in the
// session's private TMPDIR.
func TestPrivateCacheLandlock(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		requireLandlock(t, u)
		ws := u.tempDir(t)
		r := u.sh(t, &runOpts{dir: ws}, []string{"--backend", "landlock"}, `test "$XDG_CACHE_HOME" = "$TMPDIR/.cache" && mkdir -p "$XDG_CACHE_HOME/x" && echo ok`)
		expectCode(t, r, 0)
		if strings.TrimSpace(r.stdout) != "ok" {
			t.Fatalf("cache not in the private TMPDIR: %q %q", r.stdout, r.stderr)
		}
	})
}

// TestPrivateCacheGoBuild: `go build` works in the default profile, in a
// workspace without a repository: its build cache is the sandbox's (it
// failed with "mkdir /root/.cache: permission denied" before), and the
// .git placeholder does not make it fail on VCS stamping ("error
// obtaining VCS status").
func TestPrivateCacheGoBuild(t *testing.T) {
	goBin := goToolchain(t)
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		u.writeGoModule(t, ws, "example.com/hello")
		r := u.run(t, &runOpts{dir: ws, env: []string{"GOTOOLCHAIN=local"}}, "run", "--pass-env", "GOTOOLCHAIN", "--",
			"/bin/sh", "-c", goBin+` env GOCACHE && `+goBin+` build -o hello . && ./hello`)
		expectCode(t, r, 0)
		if !strings.HasPrefix(r.stdout, "/tmp/.cache/go-build\n") || !strings.Contains(r.stderr, "built inside") {
			t.Fatalf("go build inside: %q %q", r.stdout, r.stderr)
		}
	})
}

// goToolchain is the host's go command, for the tests that build inside
// a sandbox; the test is skipped without one.
func goToolchain(t *testing.T) string {
	t.Helper()
	if goBin, err := exec.LookPath("go"); err == nil {
		return goBin
	}
	goBin := "/usr/local/go/bin/go"
	if _, err := os.Stat(goBin); err != nil {
		t.Skip("no Go toolchain on this host")
	}
	return goBin
}

// writeGoModule writes, as u, a Go module in dir whose program prints
// "built inside" on stderr.
func (u user) writeGoModule(t *testing.T, dir, module string) {
	t.Helper()
	u.writeFile(t, filepath.Join(dir, "go.mod"), "module "+module+"\n\ngo 1.21\n", 0o644)
	u.writeFile(t, filepath.Join(dir, "main.go"), "package main\n\nfunc main() { println(\"built inside\") }\n", 0o644)
}
