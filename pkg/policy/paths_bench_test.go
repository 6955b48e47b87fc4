package policy

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
)

// benchTree makes a project-like tree: 10 top-level directories of 10
// subdirectories of 3 leaves each (410 directories), five source files in
// each, a .env in every tenth directory, and a .git that the walk skips.
func benchTree(tb testing.TB) string {
	tb.Helper()
	root, err := filepath.EvalSymlinks(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	n := 0
	mk := func(dir string) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			tb.Fatal(err)
		}
		for i := 0; i < 5; i++ {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d.go", i)), nil, 0o644); err != nil {
				tb.Fatal(err)
			}
		}
		if n%10 == 0 {
			if err := os.WriteFile(filepath.Join(dir, ".env"), nil, 0o600); err != nil {
				tb.Fatal(err)
			}
		}
		n++
	}
	for a := 0; a < 10; a++ {
		da := filepath.Join(root, fmt.Sprintf("a%d", a))
		mk(da)
		for b := 0; b < 10; b++ {
			db := filepath.Join(da, fmt.Sprintf("b%d", b))
			mk(db)
			for c := 0; c < 3; c++ {
				mk(filepath.Join(db, fmt.Sprintf("c%d", c)))
			}
		}
	}
	for i := 0; i < 50; i++ {
		mk(filepath.Join(root, ".git", "objects", fmt.Sprintf("%02x", i)))
	}
	return root
}

// BenchmarkGlobWorkspace is the "$NSBOX_WORKSPACE/**/.env*" walk that
// every `nsbox run` with a built-in profile pays, over a 410-directory
// project.
func BenchmarkGlobWorkspace(b *testing.B) {
	root := benchTree(b)
	pattern := filepath.Join(root, "**", ".env*")
	for b.Loop() {
		g, err := glob(pattern, true)
		if err != nil || len(g.matches) != 41 {
			b.Fatalf("glob: %d matches, %v", len(g.matches), err)
		}
	}
}

// BenchmarkGlobWorkspaceShared is what every run walks since the .git
// protect joined the .env hide: both patterns in one walk.
func BenchmarkGlobWorkspaceShared(b *testing.B) {
	root := benchTree(b)
	pats := []globPattern{{path: filepath.Join(root, "**", ".env*"), fileOnly: true}, {path: filepath.Join(root, "**", ".git")}}
	for b.Loop() {
		g, err := globAll(pats)
		if err != nil || len(g[0].matches) != 41 || len(g[1].matches) != 1 {
			b.Fatalf("globAll: %v, %v", g, err)
		}
	}
}

// globByPath is the walk by path that glob replaced, kept as the oracle of
// TestGlobMatchesPathWalk: lstat before every listing, os.ReadDir.
func globByPath(pattern string, fileOnly bool) globResult {
	parts := splitPath(pattern)
	var res globResult
	dirs := 0
	readDir := func(dir string) []os.DirEntry {
		st, err := os.Lstat(dir)
		if err != nil || !st.IsDir() {
			return nil
		}
		ents, _ := os.ReadDir(dir)
		return ents
	}
	var walk func(dir string, parts []string, depth int)
	walk = func(dir string, parts []string, depth int) {
		if len(parts) == 0 {
			st, err := os.Lstat(dir)
			if err != nil || !(st.Mode().IsRegular() || (!fileOnly && st.IsDir())) {
				return
			}
			res.matches = append(res.matches, dir)
			return
		}
		part := parts[0]
		if part == "**" {
			walk(dir, parts[1:], depth)
			if depth >= walkMaxDepth {
				for _, e := range readDir(dir) {
					if e.IsDir() && !walkSkip[e.Name()] {
						res.truncated = true
						break
					}
				}
				return
			}
			for _, e := range readDir(dir) {
				if !e.IsDir() || walkSkip[e.Name()] {
					continue
				}
				dirs++
				if dirs > walkMaxDirs {
					res.tooMany = true
					return
				}
				walk(filepath.Join(dir, e.Name()), parts, depth+1)
			}
			return
		}
		if !hasGlob(part) {
			walk(filepath.Join(dir, part), parts[1:], depth)
			return
		}
		for _, e := range readDir(dir) {
			if len(parts) > 1 && parts[1] == "**" && walkSkip[e.Name()] {
				continue // a wildcard never leads "**" into what it skips
			}
			if ok, _ := filepath.Match(part, e.Name()); ok {
				walk(filepath.Join(dir, e.Name()), parts[1:], depth)
			}
		}
	}
	walk("/", parts, 0)
	sort.Strings(res.matches)
	res.matches = dedupStrings(res.matches)
	return res
}

// The walk by fd finds what the walk by path found, on a tree with the
// things a hostile workspace holds: symlinks to directories and files
// outside, a symlink and a fifo named .env, a file where a directory is
// expected. (Directories this user cannot read: TestGlobUnreadable.)
func TestGlobMatchesPathWalk(t *testing.T) {
	root := benchTree(t)
	outside := t.TempDir()
	write(t, filepath.Join(outside, ".env"), "outside")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(outside, filepath.Join(root, "a1", "link")))
	must(os.Symlink(filepath.Join(outside, ".env"), filepath.Join(root, "a2", ".env.link")))
	must(syscall.Mkfifo(filepath.Join(root, "a3", ".env.fifo"), 0o600))
	write(t, filepath.Join(root, "a4", "c0"), "a file where b*/c0 expects a directory")
	must(os.MkdirAll(filepath.Join(root, "a5", ".env.d"), 0o755))
	must(os.MkdirAll(filepath.Join(root, "node_modules", "x"), 0o755))
	write(t, filepath.Join(root, "node_modules", "x", ".env"), "skipped")

	for _, c := range []struct {
		pattern  string
		fileOnly bool
	}{
		{"**/.env*", true},
		{"**/.env*", false},
		{"a*/**", false},
		{"a*/b?/*", false},
		{"*/b1/c[01]", false},
		{"a1/link/.env", true},
		{"*/link/.env", true},
		{"**/link/.env", true},
		{"a1/*/.env", true},
		{"**/c2", false},
		{"a4/c0/*", false},
		{"**", false},
	} {
		pattern := filepath.Join(root, c.pattern)
		got, err := glob(pattern, c.fileOnly)
		if err != nil {
			t.Fatalf("%s: %v", c.pattern, err)
		}
		want := globByPath(pattern, c.fileOnly)
		if fmt.Sprint(got.matches, got.truncated, got.tooMany) != fmt.Sprint(want.matches, want.truncated, want.tooMany) || len(got.unlisted) != 0 {
			t.Errorf("%s (fileOnly %v):\n got %v\nwant %v", c.pattern, c.fileOnly, got, want)
		}
		for _, m := range got.matches {
			// A symlink is followed only when a plain name comes after it
			// in the pattern; "**" never descends into one.
			viaLink := strings.Contains(m, "/link/") && !strings.HasSuffix(c.pattern, "/.env")
			if !within(m, root) || viaLink || strings.HasSuffix(m, ".link") || strings.HasSuffix(m, ".fifo") {
				t.Errorf("%s: matched %s", c.pattern, m)
			}
		}
	}
}

// One walk for several patterns finds, pattern by pattern, what a walk for
// each alone finds: the workspace's .env hide and .git protect share their
// listings, and must not share their results.
func TestGlobAllMatchesEach(t *testing.T) {
	root := benchTree(t)
	for _, d := range []string{"a1/vendored/.git", "a2/b3/nested/.git/modules/x", "node_modules/dep/.git"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(root, "a4", "wt", ".git"), "gitdir: ../../.git/worktrees/wt\n")
	if err := os.Symlink(filepath.Join(root, "a1"), filepath.Join(root, "a5", "link")); err != nil {
		t.Fatal(err)
	}
	pats := []globPattern{
		{path: filepath.Join(root, "**/.env*"), fileOnly: true},
		{path: filepath.Join(root, "**/.git"), fileOnly: false},
		{path: filepath.Join(root, "**/.git"), fileOnly: true},
		{path: filepath.Join(root, "a*/b?/*"), fileOnly: false},
		{path: filepath.Join(root, "a5/link/vendored/.git"), fileOnly: false},
		{path: filepath.Join(root, "**"), fileOnly: false},
		{path: filepath.Join(root, "a1/**/.git"), fileOnly: false},
		// A wildcard before "**", beside "**" patterns: walked on the
		// same descent (walk's carried states), never into node_modules.
		{path: filepath.Join(root, "*/**/.git"), fileOnly: false},
		{path: filepath.Join(root, "a*/**/.env*"), fileOnly: true},
		{path: filepath.Join(root, "*/b?/**/c*"), fileOnly: false},
	}
	all, err := globAll(pats)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range pats {
		one, err := glob(p.path, p.fileOnly)
		if err != nil {
			t.Fatal(err)
		}
		want := globByPath(p.path, p.fileOnly)
		if fmt.Sprint(all[i]) != fmt.Sprint(one) || fmt.Sprint(one.matches, one.truncated, one.tooMany) != fmt.Sprint(want.matches, want.truncated, want.tooMany) {
			t.Errorf("%s (fileOnly %v):\n together %v\n alone    %v\n by path  %v", p.path, p.fileOnly, all[i], one, want)
		}
	}
	gits := all[1].matches
	wantGits := []string{filepath.Join(root, ".git"), filepath.Join(root, "a1/vendored/.git"), filepath.Join(root, "a2/b3/nested/.git"), filepath.Join(root, "a4/wt/.git")}
	if fmt.Sprint(gits) != fmt.Sprint(wantGits) {
		t.Errorf("**/.git: %v, want %v (the top one too, but nothing in the skipped .git or node_modules)", gits, wantGits)
	}
}

// A gitdir the run cannot look up (a sandbox made a directory on the way
// unsearchable, where the walk does not go) stops the run: skipping it
// would leave a bare repository's config writable. Root reads every
// directory: make unit re-runs this test as uid 65534.
func TestGlobGitTargetUnsearchable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root searches every directory; make unit re-runs this test as uid 65534 (hack/unit-rootless.sh)")
	}
	h := testHost(t)
	bare := filepath.Join(h.Cwd, "node_modules", "foo.git")
	write(t, filepath.Join(bare, "HEAD"), "ref: refs/heads/main\n")
	os.MkdirAll(filepath.Join(bare, "objects"), 0o755)
	write(t, filepath.Join(h.Cwd, "wt", ".git"), "gitdir: ../node_modules/foo.git\n")
	res := mustLoad(t, h, Request{ConfigFile: "-"})
	if !hasMount(res.Policy, "protect", bare) {
		t.Fatalf("the gitdir was not protected: %+v", res.Policy.Mounts)
	}
	nm := filepath.Join(h.Cwd, "node_modules")
	if err := os.Chmod(nm, 0); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(nm, 0o755)
	_, err := Load(h, Request{ConfigFile: "-"})
	if err == nil || !strings.Contains(err.Error(), "cannot look up ../node_modules/foo.git") {
		t.Fatalf("an unsearchable gitdir: %v", err)
	}
}

// Directories this user cannot read or search: a search-only ancestor does
// not stop the walk (a shared /home is 0711), and a directory the walk
// cannot look into below the pattern's first wildcard is reported, so that
// hide covers it whole. An earlier sandbox with the workspace writable
// could otherwise chmod 0 the directory of a .env, and the next one chmod
// it back and read it. Root reads everything: make unit re-runs this test
// as uid 65534.
func TestGlobUnreadable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads every directory; make unit re-runs this test as uid 65534 (hack/unit-rootless.sh)")
	}
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	anc := filepath.Join(dir, "anc")
	ws := filepath.Join(anc, "ws")
	for _, f := range []string{".env", "sub/.env", "r/.env", "app/config/.env", "ok/.env"} {
		write(t, filepath.Join(ws, f), "S")
	}
	modes := []struct {
		path string
		mode os.FileMode
	}{
		{filepath.Join(ws, "sub"), 0},     // neither read nor search
		{filepath.Join(ws, "r"), 0o400},   // read, no search
		{filepath.Join(ws, "app"), 0o100}, // search, no read
		{anc, 0o100},                      // an ancestor: search only
	}
	for _, m := range modes {
		if err := os.Chmod(m.path, m.mode); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, m := range modes {
			os.Chmod(m.path, 0o755)
		}
	})
	check := func(pattern string, wantMatches, wantUnlisted []string) {
		t.Helper()
		g, err := glob(filepath.Join(ws, pattern), true)
		if err != nil {
			t.Fatal(err)
		}
		for i := range wantMatches {
			wantMatches[i] = filepath.Join(ws, wantMatches[i])
		}
		for i := range wantUnlisted {
			wantUnlisted[i] = filepath.Join(ws, wantUnlisted[i])
		}
		if fmt.Sprint(g.matches) != fmt.Sprint(wantMatches) || fmt.Sprint(g.unlisted) != fmt.Sprint(wantUnlisted) {
			t.Errorf("%s: matches %v unlisted %v; want %v and %v", pattern, g.matches, g.unlisted, wantMatches, wantUnlisted)
		}
	}
	check("**/.env*", []string{".env", "ok/.env"}, []string{"app", "r", "sub"})
	check(".env*", []string{".env"}, nil)
	check("*/config/.env", []string{"app/config/.env"}, []string{"r", "sub"})
}

// BenchmarkGlobWorkspaceNested is the walk with the base profile's
// nested-project patterns ("$NSBOX_WORKSPACE/*/**/NAME", one per agent or
// tool config) beside the .env hide and the .git protect. Its bytes per
// op caught the walk's state arena being thrown away and made again in
// every directory once the patterns outgrew it (13 MB a walk with 31
// patterns against 0.46 MB with 18).
func BenchmarkGlobWorkspaceNested(b *testing.B) {
	root := benchTree(b)
	pats := []globPattern{{path: filepath.Join(root, "**", ".env*"), fileOnly: true}, {path: filepath.Join(root, "**", ".git")}}
	for _, n := range []string{".mcp.json", ".claude", ".codex", ".agents", ".gemini", ".cursor", ".vscode", ".idea", ".zed",
		".devcontainer", ".devcontainer.json", ".envrc", ".npmrc", ".yarnrc", ".yarnrc.yml", ".pnpmfile.cjs", ".cargo", "pip.conf",
		".amazonq", ".roo", ".kiro", ".continue", "opencode.json", "opencode.jsonc", ".opencode", ".aider.conf.yml",
		"mise.toml", ".mise.toml", "mise.local.toml", ".mise.local.toml", ".mise", ".config/mise.toml", ".config/mise",
		".crushrc", "crushrc", ".crush.json", "crush.json", ".crush", "kilo.json", "kilo.jsonc", ".kilo", ".kilocode",
		".github/hooks", ".github/lsp.json", ".qwen", ".lsp.json", ".helix", ".devin", ".windsurf", ".factory",
		".clinerules/hooks", ".amp", ".pi/extensions"} {
		pats = append(pats, globPattern{path: filepath.Join(root, "*", "**", n)})
	}
	b.ReportAllocs()
	for b.Loop() {
		g, err := globAll(pats)
		if err != nil || len(g[0].matches) != 41 || len(g[1].matches) != 1 {
			b.Fatalf("globAll: %v, %v", g, err)
		}
	}
}

// BenchmarkPeekLoad is what `nsbox run` resolves before it starts a
// sandbox: Peek (the backend and the writable roots) and Load (the rest),
// the default profile from "/" (no workspace), with the caller's
// environment.
func BenchmarkPeekLoad(b *testing.B) {
	b.Chdir("/")
	b.ReportAllocs()
	for b.Loop() {
		h, err := HostFromEnv()
		if err != nil {
			b.Fatal(err)
		}
		pv, err := Peek(h, Request{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := pv.Load(); err != nil {
			b.Fatal(err)
		}
	}
}
