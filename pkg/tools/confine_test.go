package tools

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// hostile builds a workspace with an outside directory next to it and the
// classic escapes planted inside.
func hostile(t *testing.T) (ws, outside string) {
	t.Helper()
	base := t.TempDir()
	ws = filepath.Join(base, "ws")
	outside = filepath.Join(base, "outside")
	for _, d := range []string{ws, outside, filepath.Join(ws, "sub"), filepath.Join(ws, ".git", "hooks")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(t, filepath.Join(outside, "secret"), "outside secret\n")
	mustWrite(t, filepath.Join(ws, "inside.txt"), "inside\n")
	mustWrite(t, filepath.Join(ws, "sub", "deep.txt"), "deep\n")
	mustWrite(t, filepath.Join(ws, ".git", "config"), "[core]\n")
	mustWrite(t, filepath.Join(ws, ".git", "HEAD"), "ref: refs/heads/main\n")
	links := map[string]string{
		"etc":          "/etc",                   // absolute, outside
		"up":           "../outside",             // relative, outside
		"secret-link":  "../outside/secret",      // a file outside
		"dangling":     "../outside/not-yet",     // a file that does not exist yet, outside
		"dangling-in":  "not-yet.txt",            // one inside: still refused (O_EXCL)
		"proc-root":    "/proc/self/root/etc",    // through a magic link
		"ok-link":      "inside.txt",             // inside: allowed
		"sub/back":     "../inside.txt",          // inside, through "..": allowed
		"cfg":          ".git/config",            // a protected file
		"hooks":        ".git/hooks",             // a protected directory
		"gitdir-link":  ".git",                   // the git directory itself
		"head-link":    ".git/HEAD",              // any file in it
		"loop":         "loop",                   // ELOOP
		"sub/escape":   "../../outside",          // from a subdirectory
		"sub/absolute": filepath.Join(ws, "sub"), // absolute but inside: refused by RESOLVE_BENEATH
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	return ws, outside
}

func TestRelLexical(t *testing.T) {
	r, err := OpenRoot("/tmp")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for in, want := range map[string]string{"": ".", ".": ".", "a/b": "a/b", "a/../b": "b", "/tmp/x": "x", "/tmp": ".", "./a//b/": "a/b"} {
		got, err := r.Rel(in)
		if err != nil || got != want {
			t.Errorf("Rel(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"..", "../x", "a/../../x", "/etc/passwd", "/tmpx/y", "../../etc/passwd", "a\x00b"} {
		if _, err := r.Rel(in); err == nil {
			t.Errorf("Rel(%q) succeeded, want an error", in)
		}
	}
}

func TestReadFileConfined(t *testing.T) {
	ws, outside := hostile(t)
	env := &hostEnv{ws: ws}
	r := NewBuiltinRegistry()
	refused := map[string]string{
		"../../etc/passwd":      "is outside the workspace",
		"../outside/secret":     "is outside the workspace",
		"/etc/passwd":           "is outside the workspace",
		outside + "/secret":     "is outside the workspace",
		"etc/passwd":            "is outside the workspace",
		"up/secret":             "is outside the workspace",
		"secret-link":           "is outside the workspace",
		"sub/escape/secret":     "is outside the workspace",
		"proc-root/passwd":      "is outside the workspace",
		"sub/absolute/deep.txt": "is outside the workspace",
		"loop":                  "symbolic links",
		"missing":               "does not exist",
		"sub":                   "is a directory",
	}
	for p, want := range refused {
		res := call(t, r, env, "read_file", fmt.Sprintf(`{"path":%q}`, p))
		if res.Success || !strings.Contains(errText(res), want) {
			t.Errorf("read_file %q: success=%v error=%q, want an error containing %q", p, res.Success, errText(res), want)
		}
		if strings.Contains(fmt.Sprint(res.Output), "outside secret") || strings.Contains(fmt.Sprint(res.Output), "root:") {
			t.Errorf("read_file %q leaked outside content: %v", p, res.Output)
		}
	}
	for p, want := range map[string]string{"inside.txt": "inside\n", ws + "/inside.txt": "inside\n", "ok-link": "inside\n", "sub/back": "inside\n", "sub/../sub/deep.txt": "deep\n"} {
		res := call(t, r, env, "read_file", fmt.Sprintf(`{"path":%q}`, p))
		if !res.Success || field(t, res, "content") != want {
			t.Errorf("read_file %q = %v %q, want %q", p, res.Output, errText(res), want)
		}
	}
}

func TestReadFileFIFODoesNotHang(t *testing.T) {
	ws := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
		t.Skip("mkfifo:", err)
	}
	start := time.Now()
	res := call(t, NewBuiltinRegistry(), &hostEnv{ws: ws}, "read_file", `{"path":"fifo"}`)
	if res.Success || !strings.Contains(errText(res), "not a regular file") || time.Since(start) > 5*time.Second {
		t.Fatalf("read_file on a FIFO: %v %q after %s", res.Success, errText(res), time.Since(start))
	}
}

func TestWriteFileConfined(t *testing.T) {
	ws, outside := hostile(t)
	env := &hostEnv{ws: ws}
	r := NewBuiltinRegistry()
	refused := map[string]string{
		"../escape.txt":             "is outside the workspace",
		"/etc/nsbox-escape":         "is outside the workspace",
		"up/new.txt":                "is outside the workspace",
		"secret-link":               "is outside the workspace",
		"dangling":                  "is outside the workspace",
		"dangling-in":               "symlink to a missing file",
		"up/a/b/c.txt":              "is outside the workspace", // MkdirAll through a symlink
		"sub/escape/x":              "is outside the workspace",
		".git/config":               "is protected",
		".git/hooks/pre-commit":     "is protected",
		"sub/.git/hooks/post-merge": "is protected", // nested repositories too
		".git/commondir":            "is protected", // redirects git to another config
		".git/config.worktree":      "is protected",
		".git/worktrees/w/config":   "is protected",
		".git/info/exclude":         "is protected",
		".git/HEAD":                 "is protected", // anything in .git
		"sub/.git/commondir":        "is protected",
		"sub/.git":                  "is protected", // a gitfile ("gitdir: ../evil")
		"newrepo/.git":              "is protected",
		".GIT/config":               "is protected", // casefold file systems
		".Git/commondir":            "is protected",
		"gitdir-link/commondir":     "is protected", // a symlinked directory to .git
		"head-link":                 "is protected", // a symlink to .git/HEAD
		"cfg":                       "is protected", // a symlink to .git/config
		"hooks/pre-push":            "is protected", // a symlinked directory to .git/hooks
		"hooks/newdir/x":            "is protected", // no directory is created there either
		"sub":                       "is a directory",
	}
	for p, want := range refused {
		res := call(t, r, env, "write_file", fmt.Sprintf(`{"path":%q,"content":"pwned"}`, p))
		if res.Success || !strings.Contains(errText(res), want) {
			t.Errorf("write_file %q: success=%v error=%q, want an error containing %q", p, res.Success, errText(res), want)
		}
	}
	// Nothing changed outside, and the protected files are intact.
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "outside secret\n" {
		t.Errorf("outside file changed: %q", b)
	}
	ents, _ := os.ReadDir(outside)
	if len(ents) != 1 {
		t.Errorf("files created outside the workspace: %v", ents)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, ".git", "config")); string(b) != "[core]\n" {
		t.Errorf(".git/config changed: %q", b)
	}
	if ents, _ := os.ReadDir(filepath.Join(ws, ".git", "hooks")); len(ents) != 0 {
		t.Errorf("hooks planted: %v", ents)
	}
	if ents, _ := os.ReadDir(filepath.Join(ws, ".git")); len(ents) != 3 { // config, hooks, HEAD
		t.Errorf("files planted in .git: %v", ents)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, ".git", "HEAD")); string(b) != "ref: refs/heads/main\n" {
		t.Errorf(".git/HEAD changed: %q", b)
	}
	for _, p := range []string{"sub/.git", "newrepo"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
			t.Errorf("%s was created", p)
		}
	}

	// Allowed: new files in new directories, overwrite through an inside
	// symlink, absolute paths inside.
	for p, file := range map[string]string{"new/dir/f.txt": "new/dir/f.txt", "ok-link": "inside.txt", ws + "/abs.txt": "abs.txt"} {
		res := call(t, r, env, "write_file", fmt.Sprintf(`{"path":%q,"content":"v2"}`, p))
		if !res.Success {
			t.Errorf("write_file %q failed: %s", p, errText(res))
			continue
		}
		if b, _ := os.ReadFile(filepath.Join(ws, file)); string(b) != "v2" {
			t.Errorf("write_file %q: %s holds %q", p, file, b)
		}
	}
	res := call(t, r, env, "write_file", `{"path":"nodirs/x","content":"","create_dirs":false}`)
	if res.Success || !strings.Contains(errText(res), "does not exist") {
		t.Errorf("create_dirs=false: %v %q", res.Success, errText(res))
	}
}

func TestListDirectoryDoesNotFollowSymlinks(t *testing.T) {
	ws, _ := hostile(t)
	res := call(t, NewBuiltinRegistry(), &hostEnv{ws: ws}, "list_directory", `{"recursive":true,"include_ignored":true}`)
	if !res.Success {
		t.Fatal(errText(res))
	}
	seen := map[string]string{}
	for _, e := range field(t, res, "entries").([]any) {
		m := e.(map[string]any)
		seen[m["path"].(string)] = m["type"].(string)
	}
	if seen["etc"] != "symlink" || seen["up"] != "symlink" {
		t.Errorf("symlinks not reported as such: %v", seen)
	}
	for p := range seen {
		if strings.HasPrefix(p, "etc/") || strings.HasPrefix(p, "up/") || strings.HasPrefix(p, ".git/") {
			t.Errorf("walk entered %q", p)
		}
	}
	if seen["sub/deep.txt"] != "file" {
		t.Errorf("sub/deep.txt missing: %v", seen)
	}
	for _, p := range []string{"etc", "up", "../", "/"} {
		res := call(t, NewBuiltinRegistry(), &hostEnv{ws: ws}, "list_directory", fmt.Sprintf(`{"path":%q}`, p))
		if res.Success || !strings.Contains(errText(res), "outside the workspace") {
			t.Errorf("list_directory %q: %v %q", p, res.Success, errText(res))
		}
	}
}

// TestSearchSymlinkRace swaps a directory for a symlink to /etc while
// searches run: no search may ever return a line from outside.
func TestSearchSymlinkRace(t *testing.T) {
	ws := t.TempDir()
	dir := filepath.Join(ws, "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		mustWrite(t, filepath.Join(dir, fmt.Sprintf("f%d", i)), "nothing here\n")
	}
	// "d" alternates between the real directory and a symlink to /etc
	// (where passwd has "root:" lines), as fast as it can.
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		real := filepath.Join(ws, "d-real")
		link := filepath.Join(ws, "d-link")
		os.Symlink("/etc", link)
		for !stop.Load() {
			os.Rename(dir, real)
			os.Rename(link, dir)
			os.Rename(dir, link)
			os.Rename(real, dir)
		}
	}()
	r := NewBuiltinRegistry()
	env := &hostEnv{ws: ws}
	deadline := time.Now().Add(2 * time.Second)
	n := 0
	for time.Now().Before(deadline) {
		res := call(t, r, env, "search_files", `{"pattern":"^root:","include_ignored":true}`)
		if res.Success {
			if m := field(t, res, "matches").([]any); len(m) > 0 {
				stop.Store(true)
				wg.Wait()
				t.Fatalf("search returned lines from outside the workspace: %v", m)
			}
		}
		res = call(t, r, env, "read_file", `{"path":"d/passwd"}`)
		if res.Success {
			stop.Store(true)
			wg.Wait()
			t.Fatalf("read_file followed the swapped symlink: %v", res.Output)
		}
		n++
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d searches raced against the swap", n)
}

func TestPathErrorMatching(t *testing.T) {
	ws, _ := hostile(t)
	r, err := OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = r.OpenFile("etc/passwd")
	if !errors.Is(err, ErrOutsideWorkspace) {
		t.Fatalf("OpenFile(etc/passwd) = %v, want ErrOutsideWorkspace", err)
	}
	_, err = r.OpenFile("missing")
	if !errors.Is(err, ErrNotExist) {
		t.Fatalf("OpenFile(missing) = %v, want ErrNotExist", err)
	}
	if err := r.MkdirAll("up/x"); !errors.Is(err, ErrOutsideWorkspace) {
		t.Fatalf("MkdirAll(up/x) = %v", err)
	}
}

func TestIsProtected(t *testing.T) {
	for p, want := range map[string]bool{
		".git/config": true, ".git/hooks": true, ".git/hooks/pre-commit": true, "a/.git/hooks/x": true,
		".git/modules/sub/hooks/x": true, ".git/modules/sub/config": true, "bare.git/hooks/update": true, "bare.git/config": true,
		// Everything in a .git directory, at any depth, and a gitfile.
		".git": true, ".git/commondir": true, ".git/config.worktree": true, ".git/worktrees/w/config": true,
		".git/worktrees/w/commondir": true, ".git/info/exclude": true, ".git/info/attributes": true, ".git/HEAD": true,
		".git/config.d": true, ".git/objects/ab/cdef": true, "sub/.git": true, "a/b/.git/HEAD": true, "sub/.git/commondir": true,
		// Case-insensitive file systems.
		".GIT/config": true, ".Git/hooks/x": true, "sub/.gIt": true, "BARE.GIT/HOOKS/x": true, "bare.GIT/Config": true,
		// Bare repositories: what executes code or redirects git.
		"bare.git/config.worktree": true, "bare.git/commondir": true, "bare.git/worktrees/w/HEAD": true, "bare.git/modules/m/config": true,
		"bare.git/HEAD": false, "bare.git/description": false,
		"git/hooks": false, ".gitconfig": false, ".gitignore": false, "sub/.gitattributes": false, "src/config": false, "a.git.txt": false,
		"git": false, "x/.gitx/config": false,
	} {
		if got := isProtected(p); got != want {
			t.Errorf("isProtected(%q) = %v, want %v", p, got, want)
		}
	}
}
