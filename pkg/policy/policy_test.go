package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/pkg/sandbox"
	"github.com/nsbox/nsbox/profiles"
	"golang.org/x/sys/unix"
)

// testHost is a home, a workspace and a config directory under a temp dir,
// with symlinks resolved (t.TempDir may live below a symlink).
func testHost(t *testing.T) Host {
	t.Helper()
	// Not below /tmp: a sandbox has a private /tmp, so host paths there
	// are only visible through binds, and these tests also cover paths
	// seen through the read-only host root.
	dir, err := os.MkdirTemp("/var/tmp", "nsbox-policy-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	base, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := Host{
		Cwd:        filepath.Join(base, "home", "proj"),
		Home:       filepath.Join(base, "home"),
		TmpDir:     "/tmp",
		ConfigHome: filepath.Join(base, "home", ".config"),
		LookupEnv: func(k string) (string, bool) {
			v, ok := map[string]string{"PATH": "/usr/bin:/bin", "HOME": filepath.Join(base, "home"), "GOPATH": "/go", "SECRET": "x"}[k]
			return v, ok
		},
	}
	for _, d := range []string{h.Cwd, h.ConfigHome} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func flags(c Config) *Layer {
	return &Layer{Kind: KindFlags, Name: "command line", Config: c, KeyNames: map[string]string{
		"filesystem.rw": "--rw", "limits.memory": "--memory", "network": "--net", "workspace": "--workspace",
	}}
}

func mustLoad(t *testing.T, h Host, req Request) *Result {
	t.Helper()
	res, err := Load(h, req)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return res
}

// trustAll records the project policy files named (nsbox trust).
func trustAll(t *testing.T, h Host, paths ...string) {
	t.Helper()
	if _, err := Trust(h, paths); err != nil {
		t.Fatalf("Trust: %v", err)
	}
}

func findMount(p sandbox.Policy, kind sandbox.Mount, dest string) (sandbox.Mount, bool) {
	for _, m := range p.Mounts {
		if m.Kind == kind.Kind && m.Dest == dest {
			return m, true
		}
	}
	return sandbox.Mount{}, false
}

func hasMount(p sandbox.Policy, kind string, dest string) bool {
	for _, m := range p.Mounts {
		if string(m.Kind) == kind && m.Dest == dest {
			return true
		}
	}
	return false
}

func TestShippedProfilesLoadAndValidate(t *testing.T) {
	h := testHost(t)
	names := builtinNames()
	for _, want := range []string{"base", "workspace", "strict", "network", "batch"} {
		found := false
		for _, n := range names {
			found = found || n == want
		}
		if !found {
			t.Fatalf("built-in profile %s missing (have %v)", want, names)
		}
	}
	for _, n := range names {
		t.Run(n, func(t *testing.T) {
			data, err := profiles.Policies.ReadFile(n + ".toml")
			if err != nil {
				t.Fatal(err)
			}
			l, err := ParseLayer(data, n+".toml", KindProfile)
			if err != nil {
				t.Fatal(err)
			}
			if strings.TrimSpace(l.Config.Description) == "" {
				t.Errorf("%s has no description", n)
			}
			if err := CheckLayer(l); err != nil {
				t.Fatal(err)
			}
			res, err := Load(h, Request{Profile: n, ConfigFile: "-"})
			if err != nil {
				t.Fatalf("resolve: %v", err)
			}
			if err := res.Policy.Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestProfileSemantics(t *testing.T) {
	h := testHost(t)
	os.MkdirAll(filepath.Join(h.Home, ".ssh"), 0o700)
	write(t, filepath.Join(h.Home, ".ssh", "id_rsa"), "KEY")
	write(t, filepath.Join(h.Cwd, ".env"), "A=1")

	ws := mustLoad(t, h, Request{ConfigFile: "-"})
	if ws.Profile != "workspace" || ws.Workspace != h.Cwd || ws.Policy.Cwd != h.Cwd {
		t.Fatalf("default profile: %+v", ws)
	}
	if m, ok := findMount(ws.Policy, sandbox.Mount{Kind: sandbox.MountBind}, h.Cwd); !ok || m.ReadOnly {
		t.Fatalf("workspace not bound read-write: %+v", ws.Policy.Mounts)
	}
	if !hasMount(ws.Policy, "hide", filepath.Join(h.Home, ".ssh")) || !hasMount(ws.Policy, "hide", filepath.Join(h.Cwd, ".env")) {
		t.Fatalf("secrets not hidden: %+v", ws.Policy.Mounts)
	}
	if ws.Policy.Network != sandbox.NetworkNone {
		t.Fatalf("network %q", ws.Policy.Network)
	}

	st := mustLoad(t, h, Request{Profile: "strict", ConfigFile: "-"})
	for _, m := range st.Policy.Mounts {
		if m.Kind == sandbox.MountBind && !m.ReadOnly {
			t.Fatalf("strict has a writable bind: %+v", m)
		}
	}
	if st.Policy.Limits.Memory != 512<<20 || st.Policy.Limits.Pids != 128 || st.Policy.Limits.Time != 2*time.Minute {
		t.Fatalf("strict limits: %+v", st.Policy.Limits)
	}

	nw := mustLoad(t, h, Request{Profile: "network", ConfigFile: "-"})
	if nw.Policy.Network != sandbox.NetworkHost || nw.Workspace != h.Cwd {
		t.Fatalf("network profile: %+v", nw.Policy)
	}

	in, out := filepath.Join(h.Home, "in"), filepath.Join(h.Home, "out")
	os.Mkdir(in, 0o755)
	os.Mkdir(out, 0o755)
	b := mustLoad(t, h, Request{Profile: "batch", ConfigFile: "-", Flags: flags(Config{Filesystem: Filesystem{Input: &in, Output: &out}})})
	if b.Policy.Cwd != "/work" || !hasMount(b.Policy, "tmpfs", "/work") || !hasMount(b.Policy, "hide", h.Home) {
		t.Fatalf("batch: %+v", b.Policy)
	}
	if m, ok := findMount(b.Policy, sandbox.Mount{Kind: sandbox.MountBind}, "/input"); !ok || !m.ReadOnly || m.Source != in {
		t.Fatalf("batch /input: %+v", b.Policy.Mounts)
	}
	if m, ok := findMount(b.Policy, sandbox.Mount{Kind: sandbox.MountBind}, "/output"); !ok || m.ReadOnly || m.Source != out {
		t.Fatalf("batch /output: %+v", b.Policy.Mounts)
	}
	// Hides below the hidden home are folded into it.
	if hasMount(b.Policy, "hide", filepath.Join(h.Home, ".ssh")) {
		t.Fatalf("nested hide kept: %+v", b.Policy.Mounts)
	}
}

// errorAt checks that err is an *Error naming file, line and key.
func errorAt(t *testing.T, err error, file string, line int, key string) *Error {
	t.Helper()
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *policy.Error", err, err)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("errors.Is(ErrInvalid) false for %v", err)
	}
	if pe.Source != file || pe.Line != line || pe.Key != key {
		t.Fatalf("error %q at %s:%d key %q, want %s:%d key %q", err, pe.Source, pe.Line, pe.Key, file, line, key)
	}
	if !strings.Contains(err.Error(), file) || (line > 0 && !strings.Contains(err.Error(), ":"+strconv.Itoa(line)+":")) || !strings.Contains(err.Error(), key) {
		t.Fatalf("message %q does not name %s, line %d and %s", err, file, line, key)
	}
	return pe
}

func TestFileErrorsNameFileLineKey(t *testing.T) {
	h := testHost(t)
	dir := filepath.Join(h.ConfigHome, "nsbox", "profiles")
	cases := []struct {
		name, body string
		line       int
		key        string
		want       string
	}{
		{"unknown-key", "description = \"x\"\n\n[limits]\nmemory = \"1G\"\nmemroy = \"2G\"\n", 5, "limits.memroy", "unknown key"},
		{"unknown-top", "description = \"x\"\nnetwrok = \"host\"\n", 2, "netwrok", "unknown key"},
		{"unknown-inline", "[filesystem]\nrw = [\"/tmp\",\n  {path = \"/x\", trry = true}]\n", 3, "filesystem.trry", "unknown key"},
		{"wrong-type", "description = \"x\"\n[limits]\npids = \"many\"\n", 3, "limits.pids", "wrong type: got a string, want an integer"},
		{"wrong-type-bool", "allow_userns = \"yes\"\n", 1, "allow_userns", "want true or false"},
		{"wrong-type-list", "[filesystem]\nrw = \"/tmp\"\n", 2, "filesystem.rw", "want a list"},
		{"bad-variable", "description = \"x\"\n[filesystem]\nro = [\n  \"/usr\",\n  \"${HOME\",\n]\n", 5, "filesystem.ro[1]", "bad variable"},
		{"bad-variable-lone", "[filesystem]\nhide = [\"$/x\"]\n", 2, "filesystem.hide[0]", "lone $"},
		{"bad-size", "[limits]\nmemory = \"12XB\"\n", 2, "limits.memory", "unknown unit"},
		{"bad-network", "\n\nnetwork = \"wifi\"\n", 3, "network", "want none or host"},
		{"nul-path", "[filesystem]\nrw = [\"/tmp/a\\u0000b\"]\n", 2, "filesystem.rw[0]", "NUL"},
		{"fallback-in-profile", "backend_fallback = true\n", 1, "backend_fallback", "only allowed in config.toml"},
		{"syntax", "description = \"x\"\nrw = [\n", 2, "", "array is incomplete"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, c.name+".toml")
			write(t, path, c.body)
			_, err := Load(h, Request{Profile: c.name, ConfigFile: "-"})
			if err == nil {
				t.Fatal("no error")
			}
			var pe *Error
			if !errors.As(err, &pe) || pe.Source != path || pe.Line != c.line || (c.key != "" && pe.Key != c.key) {
				t.Fatalf("error %q (%+v), want %s:%d key %q", err, pe, path, c.line, c.key)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path+":"+strconv.Itoa(c.line)) {
				t.Fatalf("message %q does not say %q at %s:%d", err, c.want, path, c.line)
			}
		})
	}
}

func TestExtendCycle(t *testing.T) {
	h := testHost(t)
	dir := filepath.Join(h.ConfigHome, "nsbox", "profiles")
	write(t, filepath.Join(dir, "a.toml"), "description = \"a\"\nextend = \"b\"\n")
	write(t, filepath.Join(dir, "b.toml"), "description = \"b\"\n\nextend = \"c\"\n")
	write(t, filepath.Join(dir, "c.toml"), "description = \"c\"\n\n\nextend = \"a\"\n")
	_, err := Load(h, Request{Profile: "a", ConfigFile: "-"})
	if !errors.Is(err, ErrCycle) {
		t.Fatalf("want ErrCycle, got %v", err)
	}
	pe := errorAt(t, err, filepath.Join(dir, "c.toml"), 4, "extend")
	if !strings.Contains(pe.Msg, "a -> b -> c -> a") {
		t.Fatalf("cycle not spelled out: %q", pe.Msg)
	}
	// Self-extension of a file given by path is a cycle too.
	self := filepath.Join(h.Home, "self.toml")
	write(t, self, "extend = \"./self.toml\"\n")
	if _, err := Load(h, Request{Profile: self, ConfigFile: "-"}); !errors.Is(err, ErrCycle) {
		t.Fatalf("self extend: %v", err)
	}
	// A user profile that extends its own name builds on the built-in one.
	write(t, filepath.Join(dir, "workspace.toml"), "description = \"mine\"\nextend = \"workspace\"\nnetwork = \"host\"\n")
	res := mustLoad(t, h, Request{ConfigFile: "-"})
	if res.Policy.Network != sandbox.NetworkHost || res.Workspace != h.Cwd {
		t.Fatalf("override extending the built-in: %+v", res.Policy)
	}
	if len(res.Layers) != 5 { // defaults, base, built-in workspace, user workspace, (no flags)
		t.Logf("layers: %v", res.Layers)
	}
	// Unknown extend target names the line.
	write(t, filepath.Join(dir, "d.toml"), "description = \"d\"\nextend = \"nope\"\n")
	_, err = Load(h, Request{Profile: "d", ConfigFile: "-"})
	if !errors.Is(err, ErrProfileNotFound) {
		t.Fatalf("want ErrProfileNotFound: %v", err)
	}
	errorAt(t, err, filepath.Join(dir, "d.toml"), 2, "extend")
}

func TestBadFiles(t *testing.T) {
	h := testHost(t)
	big := filepath.Join(h.Home, "big.toml")
	write(t, big, "description = \""+strings.Repeat("a", 10<<20)+"\"\n")
	_, err := Load(h, Request{Profile: big, ConfigFile: "-"})
	if err == nil || !strings.Contains(err.Error(), "larger than") || !strings.Contains(err.Error(), big) {
		t.Fatalf("10 MB profile: %v", err)
	}
	garbage := filepath.Join(h.Home, "garbage.toml")
	os.WriteFile(garbage, []byte{0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0xff, 0xfe, 0, 0, '\n', 0x80}, 0o644)
	_, err = Load(h, Request{Profile: garbage, ConfigFile: "-"})
	if err == nil || !strings.Contains(err.Error(), garbage) || !strings.Contains(err.Error(), "not a text file") {
		t.Fatalf("binary profile: %v", err)
	}
	ctrl := filepath.Join(h.Home, "ctrl.toml")
	os.WriteFile(ctrl, []byte("description = \"x\"\n\x00\x01\x02 = 1\n"), 0o644)
	_, err = Load(h, Request{Profile: ctrl, ConfigFile: "-"})
	errorAt(t, err, ctrl, 2, "")
	// A FIFO is refused without blocking.
	fifo := filepath.Join(h.Home, "fifo.toml")
	if err := mkfifo(fifo); err == nil {
		_, err = Load(h, Request{Profile: fifo, ConfigFile: "-"})
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("fifo: %v", err)
		}
	}
}

func TestVariables(t *testing.T) {
	h := testHost(t)
	h.RuntimeDir = ""
	v := h.withDefaults().vars("/ws")
	cases := []struct{ in, want, err string }{
		{"$HOME/x", h.Home + "/x", ""},
		{"${HOME}/x", h.Home + "/x", ""},
		{"~/x", h.Home + "/x", ""},
		{"~", h.Home, ""},
		{"$CWD", h.Cwd, ""},
		{"$TMPDIR/a", "/tmp/a", ""},
		{"$NSBOX_WORKSPACE/.git", "/ws/.git", ""},
		{"$NSBOX_CONFIG", h.ConfigHome + "/nsbox", ""},
		{"a$$b", "a$b", ""},
		{"$XDG_RUNTIME_DIR/bus", "", "not set"},
		{"$FOO/x", "", "unknown variable $FOO"},
		{"${HOME", "", "bad variable"},
		{"${}", "", "bad variable"},
		{"${1x}", "", "bad variable"},
		{"a$", "", "lone $"},
		{"$-x", "", "lone $"},
		{"~root/x", "", "not ~user"},
	}
	for _, c := range cases {
		got, err := expand(c.in, v)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("expand(%q) = %q, %v; want error %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("expand(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	// An unknown variable is an error with file, line and key: the run
	// does not go on without the entry.
	p := filepath.Join(h.Home, "vars.toml")
	write(t, p, "extend = \"workspace\"\n[filesystem]\nro = [\n  \"$NOPE/x\",\n]\n")
	_, err := Load(h, Request{Profile: p, ConfigFile: "-"})
	var pe *Error
	if !errors.Is(err, ErrUnknownVariable) || !errors.As(err, &pe) || pe.Source != p || pe.Line != 4 || pe.Key != "filesystem.ro[0]" || !strings.Contains(pe.Msg, "$NOPE") {
		t.Fatalf("$NOPE in a profile: %v", err)
	}
	// A known variable that is unset leaves the entry out, with a note.
	write(t, p, "extend = \"workspace\"\n[filesystem]\nro = [\n  \"$XDG_RUNTIME_DIR/x\",\n]\n")
	res := mustLoad(t, h, Request{Profile: p, ConfigFile: "-"})
	found := false
	for _, w := range res.Warnings {
		if w.Note && w.Line == 4 && strings.Contains(w.Msg, "XDG_RUNTIME_DIR") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no note for an unset $XDG_RUNTIME_DIR: %+v", res.Warnings)
	}
	// In --workspace and --rw: an error naming the variable, also for a
	// known one that is unset in the workspace.
	for _, c := range []Config{
		{Workspace: ptr("${nope}")},
		{Workspace: ptr("${workspaceFolder}/src")},
		{Workspace: ptr("$XDG_RUNTIME_DIR/ws")},
		{Filesystem: Filesystem{RW: []PathEntry{ParseEntry("${workspaceFolder}")}}},
		{Filesystem: Filesystem{Hide: []PathEntry{ParseEntry("$NSBOX_RW/${secret}")}}},
	} {
		_, err := Load(h, Request{ConfigFile: "-", Flags: flags(c)})
		if !errors.Is(err, ErrUnknownVariable) || !strings.Contains(err.Error(), "$") {
			t.Errorf("%+v: %v", c, err)
		}
	}
}

func TestPathsResolvedAndDeduplicated(t *testing.T) {
	h := testHost(t)
	real := filepath.Join(h.Home, "real")
	os.MkdirAll(filepath.Join(real, "sub"), 0o755)
	os.Symlink(real, filepath.Join(h.Home, "link"))
	os.Symlink("real/sub", filepath.Join(h.Home, "rel"))
	rw := []PathEntry{
		{Path: filepath.Join(h.Home, "link")}, // symlink -> real
		{Path: "../real"},                     // relative to $CWD
		{Path: real},                          // the same again
		{Path: filepath.Join(h.Home, "rel")},  // relative symlink
		{Path: "$HOME/link/sub/../sub"},       // variable, link, ..
		{Path: "~/.cache", Try: true},         // optional, missing
	}
	res := mustLoad(t, h, Request{ConfigFile: "-", Profile: "strict", Flags: flags(Config{Filesystem: Filesystem{RW: rw}})})
	var binds []string
	for _, m := range res.Policy.Mounts {
		if m.Kind == sandbox.MountBind && !m.ReadOnly {
			binds = append(binds, m.Source+"->"+m.Dest)
		}
	}
	want := []string{real + "->" + real, filepath.Join(real, "sub") + "->" + filepath.Join(real, "sub")}
	if strings.Join(binds, " ") != strings.Join(want, " ") {
		t.Fatalf("binds %v, want %v", binds, want)
	}
	note := false
	for _, w := range res.Warnings {
		note = note || (w.Note && strings.Contains(w.Msg, ".cache") && strings.Contains(w.Msg, "optional"))
	}
	if !note {
		t.Fatalf("no note for the missing optional entry: %+v", res.Warnings)
	}
	// A missing rw path is an error naming the mount.
	_, err := Load(h, Request{ConfigFile: "-", Flags: flags(Config{Filesystem: Filesystem{RW: []PathEntry{{Path: "/nonexistent/x"}}}})})
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "--rw: mount /nonexistent/x on /nonexistent/x: no such file or directory") {
		t.Fatalf("missing rw: %v", err)
	}
	// A symlink loop is a clear error.
	os.Symlink("loop-b", filepath.Join(h.Home, "loop-a"))
	os.Symlink("loop-a", filepath.Join(h.Home, "loop-b"))
	_, err = Load(h, Request{ConfigFile: "-", Flags: flags(Config{Filesystem: Filesystem{RW: []PathEntry{{Path: filepath.Join(h.Home, "loop-a")}}}})})
	if !errors.Is(err, ErrSymlinkLoop) || !strings.Contains(err.Error(), "--rw: symlink loop") {
		t.Fatalf("loop: %v", err)
	}
	// NUL bytes never reach a path.
	_, err = Load(h, Request{ConfigFile: "-", Flags: flags(Config{Filesystem: Filesystem{RW: []PathEntry{{Path: "/tmp/a\x00b"}}}})})
	if err == nil || !strings.Contains(err.Error(), "NUL") {
		t.Fatalf("NUL: %v", err)
	}
}

func TestWorkspaceRefusals(t *testing.T) {
	h := testHost(t)
	// Run from /: no workspace, nothing writable, a note.
	root := h
	root.Cwd = "/"
	res := mustLoad(t, root, Request{ConfigFile: "-"})
	if res.Workspace != "" || res.Policy.Cwd != "/" {
		t.Fatalf("cwd /: %+v", res)
	}
	for _, m := range res.Policy.Mounts {
		if m.Kind == sandbox.MountBind && !m.ReadOnly {
			t.Fatalf("cwd /: writable bind %+v", m)
		}
	}
	// From $HOME, an ancestor of it, or a system directory: refused.
	for _, cwd := range []string{h.Home, filepath.Dir(h.Home), "/etc", "/usr"} {
		hh := h
		hh.Cwd = cwd
		_, err := Load(hh, Request{ConfigFile: "-"})
		if !errors.Is(err, ErrUnsafeWorkspace) {
			t.Errorf("workspace %s: %v", cwd, err)
		}
	}
	// --workspace / is refused (not silently dropped).
	slash := "/"
	_, err := Load(h, Request{ConfigFile: "-", Flags: flags(Config{Workspace: &slash})})
	if !errors.Is(err, ErrUnsafeWorkspace) || !strings.Contains(err.Error(), "--workspace") {
		t.Fatalf("--workspace /: %v", err)
	}
	// strict has no workspace: running from $HOME is fine.
	hh := h
	hh.Cwd = h.Home
	if _, err := Load(hh, Request{ConfigFile: "-", Profile: "strict"}); err != nil {
		t.Fatalf("strict from home: %v", err)
	}
}

func TestProtectAndPin(t *testing.T) {
	h := testHost(t)
	ws := h.Cwd
	// No .git: .git itself becomes an empty read-only placeholder.
	res := mustLoad(t, h, Request{ConfigFile: "-"})
	if !hasMount(res.Policy, "protect", filepath.Join(ws, ".git")) {
		t.Fatalf("missing .git not protected: %+v", res.Policy.Mounts)
	}
	if len(res.Placeholders) == 0 || res.Placeholders[0] != (Placeholder{Path: filepath.Join(ws, ".git"), Dir: true, Root: ws}) {
		t.Fatalf("placeholders: %+v", res.Placeholders)
	}
	// .git without hooks: .git is pinned and read-only as a whole, hooks
	// and config are protected too (for a run that removes the .git entry).
	os.Mkdir(filepath.Join(ws, ".git"), 0o755)
	res = mustLoad(t, h, Request{ConfigFile: "-"})
	pin, ok := findMount(res.Policy, sandbox.Mount{Kind: sandbox.MountBind}, filepath.Join(ws, ".git"))
	if !ok || pin.ReadOnly || pin.Source != filepath.Join(ws, ".git") {
		t.Fatalf("no pin of .git: %+v", res.Policy.Mounts)
	}
	for _, d := range []string{".git", ".git/hooks", ".git/config"} {
		if !hasMount(res.Policy, "protect", filepath.Join(ws, d)) {
			t.Fatalf("%s not protected: %+v", d, res.Policy.Mounts)
		}
	}
	// Order: the workspace, then the pin, then the protections.
	var order []string
	for _, m := range res.Policy.Mounts {
		if rel := strings.TrimPrefix(m.Dest, ws); rel == "" || strings.HasPrefix(rel, "/.git/") || rel == "/.git" {
			order = append(order, string(m.Kind)+":"+rel)
		}
	}
	if o := strings.Join(order, " "); o != "bind: bind:/.git protect:/.git protect:/.git/hooks protect:/.git/config" {
		t.Fatalf("order %v", order)
	}
	for _, p := range res.Placeholders {
		if p.Path == filepath.Join(ws, ".git/hooks") && !p.Dir || p.Path == filepath.Join(ws, ".git/config") && p.Dir {
			t.Fatalf("placeholder kinds: %+v", res.Placeholders)
		}
	}
	// A .git file (worktree, submodule) is itself protected.
	os.Remove(filepath.Join(ws, ".git"))
	write(t, filepath.Join(ws, ".git"), "gitdir: ../x\n")
	res = mustLoad(t, h, Request{ConfigFile: "-"})
	if m, ok := findMount(res.Policy, sandbox.Mount{Kind: sandbox.MountProtect}, filepath.Join(ws, ".git")); !ok || m.Dir {
		t.Fatalf(".git file not protected: %+v", res.Policy.Mounts)
	}
	// Shell rc files only when a bind makes $HOME writable, and mapped
	// through the bind.
	if hasMount(res.Policy, "protect", filepath.Join(h.Home, ".bashrc")) {
		t.Fatalf("rc file protected under a read-only home")
	}
	res = mustLoad(t, h, Request{ConfigFile: "-", Flags: flags(Config{Filesystem: Filesystem{RW: []PathEntry{{Path: h.Home, Dest: "/h"}}}})})
	if !hasMount(res.Policy, "protect", "/h/.bashrc") || !hasMount(res.Policy, "protect", "/h/.config/nsbox") {
		t.Fatalf("home bound at /h: rc files / nsbox config not protected there: %+v", res.Policy.Mounts)
	}
	warned := false
	for _, w := range res.Warnings {
		warned = warned || (!w.Note && strings.Contains(w.Msg, "home directory"))
	}
	if !warned {
		t.Fatalf("no warning for a writable home: %+v", res.Warnings)
	}
}

// $NSBOX_RW applies an entry to every writable directory, not just the
// workspace: strict with --rw DIR protects DIR/.git and hides DIR/.env.
func TestEveryWritableDir(t *testing.T) {
	h := testHost(t)
	other := filepath.Join(h.Home, "other")
	os.MkdirAll(filepath.Join(other, ".git"), 0o755)
	write(t, filepath.Join(other, ".env"), "S")
	write(t, filepath.Join(h.Home, "file"), "f")
	res := mustLoad(t, h, Request{ConfigFile: "-", Profile: "strict", Flags: flags(Config{Filesystem: Filesystem{RW: []PathEntry{{Path: other}, {Path: "~/file"}}}})})
	for _, want := range []string{"protect:" + other + "/.git/hooks", "protect:" + other + "/.git/config", "bind:" + other + "/.git", "hide:" + other + "/.env"} {
		kind, dest, _ := strings.Cut(want, ":")
		if !hasMount(res.Policy, kind, dest) {
			t.Errorf("no %s: %+v", want, res.Policy.Mounts)
		}
	}
	// Used elsewhere, it is a warning.
	res = mustLoad(t, h, Request{ConfigFile: "-", Flags: flags(Config{Filesystem: Filesystem{RO: []PathEntry{{Path: "$NSBOX_RW"}}}})})
	warned := false
	for _, w := range res.Warnings {
		warned = warned || (!w.Note && strings.Contains(w.Msg, "only meaningful in hide and protect"))
	}
	if !warned {
		t.Fatalf("%+v", res.Warnings)
	}
}

// A profile file inside the writable workspace is kept read-only there:
// it decides the next run's policy. It must lie in .nsbox/policy/, which every
// run protects: anywhere else an earlier run could have rewritten it
// (review 19), and it is refused, naming the place to keep it.
func TestPolicyFileInWorkspaceProtected(t *testing.T) {
	h := testHost(t)
	p := filepath.Join(h.Cwd, ".nsbox", "policy", "nsbox.toml")
	write(t, p, "extend = \"workspace\"\n")
	trustAll(t, h, filepath.Dir(p))
	res := mustLoad(t, h, Request{ConfigFile: "-", Profile: "./.nsbox/policy/nsbox.toml"})
	if !hasMount(res.Policy, "protect", p) {
		t.Fatalf("%+v", res.Policy.Mounts)
	}
	// Every run protects .nsbox/policy/ (the base profile), also one
	// that does not read the profile.
	res = mustLoad(t, h, Request{ConfigFile: "-"})
	if !hasMount(res.Policy, "protect", filepath.Dir(p)) {
		t.Fatalf(".nsbox/policy/ not protected in a plain run: %+v", res.Policy.Mounts)
	}
	// Nested: where the walk protects it, not below a name it skips
	// (review 20).
	write(t, filepath.Join(h.Cwd, "sub", ".nsbox", "policy", "p.toml"), "extend = \"workspace\"\n")
	trustAll(t, h, filepath.Join(h.Cwd, "sub", ".nsbox", "policy"))
	mustLoad(t, h, Request{ConfigFile: "-", Profile: "./sub/.nsbox/policy/p.toml"})
	write(t, filepath.Join(h.Cwd, "node_modules", "x", ".nsbox", "policy", "p.toml"), "extend = \"workspace\"\n")
	if _, err := Load(h, Request{ConfigFile: "-", Profile: "./node_modules/x/.nsbox/policy/p.toml"}); !errors.Is(err, ErrWritablePolicyFile) {
		t.Fatalf("a .nsbox/policy/ below node_modules, which no run protects: %v", err)
	}
	write(t, filepath.Join(h.Cwd, "nsbox.toml"), "extend = \"workspace\"\n")
	_, err := Load(h, Request{ConfigFile: "-", Profile: "./nsbox.toml"})
	if !errors.Is(err, ErrWritablePolicyFile) || !strings.Contains(fmt.Sprint(err), filepath.Join(h.Cwd, ".nsbox", "policy")+"/") {
		t.Fatalf("a profile at the workspace's top: %v", err)
	}
}

// The repositories nested in the workspace are protected, .git
// directories and .git files alike, with pins above them; what the walk
// skips (node_modules) is not, and a user's pattern with a trailing "/"
// matches directories only.
func TestProtectPatterns(t *testing.T) {
	h := testHost(t)
	os.MkdirAll(filepath.Join(h.Cwd, "vendor", "lib", ".git"), 0o755)
	write(t, filepath.Join(h.Cwd, "tools", "wt", ".git"), "gitdir: ../../.git/worktrees/wt\n")
	os.MkdirAll(filepath.Join(h.Cwd, "node_modules", "dep", ".git"), 0o755)
	os.MkdirAll(filepath.Join(h.Cwd, "a", "keys"), 0o755)
	write(t, filepath.Join(h.Cwd, "b", "keys"), "a file, not a directory")
	res := mustLoad(t, h, Request{ConfigFile: "-", Flags: flags(Config{Filesystem: Filesystem{Protect: []PathEntry{ParseEntry("$NSBOX_WORKSPACE/**/keys/")}}})})
	for _, d := range []string{"vendor/lib/.git", "tools/wt/.git", "a/keys"} {
		if !hasMount(res.Policy, "protect", filepath.Join(h.Cwd, d)) {
			t.Errorf("%s not protected: %+v", d, res.Policy.Mounts)
		}
	}
	for _, d := range []string{"vendor/lib", "vendor", "tools/wt"} {
		if !hasMount(res.Policy, "bind", filepath.Join(h.Cwd, d)) {
			t.Errorf("%s not pinned", d)
		}
	}
	for _, d := range []string{"node_modules/dep/.git", "b/keys"} {
		if hasMount(res.Policy, "protect", filepath.Join(h.Cwd, d)) {
			t.Errorf("%s protected", d)
		}
	}
	// Past the bound, the run stops: decoys that sort first must not
	// leave a real repository writable.
	for i := 0; i <= maxProtectMounts/2; i++ {
		if err := os.MkdirAll(filepath.Join(h.Cwd, "decoys", fmt.Sprintf("d%04d", i), ".git"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Load(h, Request{ConfigFile: "-"})
	if err == nil || !strings.Contains(err.Error(), "more than 2048 mounts") || !strings.Contains(err.Error(), "**/.git") || !strings.Contains(err.Error(), "if a sandbox made these, remove them") {
		t.Fatalf("Load with %d nested repositories: %v", maxProtectMounts/2+1, err)
	}
}

// A pattern that runs out of directories stops the run, for hides and
// protections alike: an earlier sandbox could fill the workspace with
// directories sorted before a .env or a repository to have the next run
// miss it. Each pattern has a budget of its own: a hide with another base
// does not run out on the workspace's directories.
func TestWalkBoundFailsClosed(t *testing.T) {
	h := testHost(t)
	defer func(n int) { walkMaxDirs = n }(walkMaxDirs)
	walkMaxDirs = 20
	other := filepath.Join(filepath.Dir(h.Cwd), "other")
	for i := 0; i < 10; i++ {
		os.MkdirAll(filepath.Join(other, fmt.Sprintf("d%d", i)), 0o755)
	}
	write(t, filepath.Join(other, "d9", "secret"), "S")
	for i := 0; i < 15; i++ {
		os.MkdirAll(filepath.Join(h.Cwd, fmt.Sprintf("a%02d", i)), 0o755)
	}
	hide := Config{Filesystem: Filesystem{Hide: []PathEntry{{Path: other + "/**/secret"}}}}
	res := mustLoad(t, h, Request{ConfigFile: "-", Flags: flags(hide)})
	if !hasMount(res.Policy, "hide", filepath.Join(other, "d9", "secret")) {
		t.Fatalf("the hide with its own base ran out on the workspace's directories: %+v", res.Policy.Mounts)
	}
	for i := 15; i < 25; i++ {
		os.MkdirAll(filepath.Join(h.Cwd, fmt.Sprintf("a%02d", i)), 0o755)
	}
	_, err := Load(h, Request{ConfigFile: "-", Flags: flags(hide)})
	if err == nil || !strings.Contains(err.Error(), "stopped after 20 directories") || !strings.Contains(err.Error(), "if a sandbox made them, remove them") {
		t.Fatalf("a workspace past the bound: %v", err)
	}
}

// A .git file leads to the directories git on the host will use: the
// worktree's gitdir and the main repository its commondir names. In a
// workspace that holds a bare repository and its worktrees, those are
// protected too. The scan of submodules is bounded, and fails closed.
func TestProtectGitfileTargets(t *testing.T) {
	h := testHost(t)
	bare := filepath.Join(h.Cwd, "proj.git")
	gitDir := func(d string) {
		write(t, filepath.Join(d, "HEAD"), "ref: refs/heads/main\n")
		os.MkdirAll(filepath.Join(d, "objects"), 0o755)
		os.MkdirAll(filepath.Join(d, "refs"), 0o755)
	}
	// A bare repository whose only worktree is outside the workspace: it
	// is found by its HEAD, objects/ and refs/.
	lone := filepath.Join(h.Cwd, "vendor", "lone")
	gitDir(lone)
	write(t, filepath.Join(lone, "logs", "HEAD"), "a reflog, not a repository\n")
	gitDir(bare)
	write(t, filepath.Join(bare, "config"), "[core]\n\tbare = true\n")
	write(t, filepath.Join(bare, "worktrees", "main", "HEAD"), "ref: refs/heads/main\n")
	write(t, filepath.Join(bare, "worktrees", "main", "commondir"), "../..\n")
	write(t, filepath.Join(h.Cwd, "main", ".git"), "gitdir: "+filepath.Join(bare, "worktrees", "main")+"\n")
	write(t, filepath.Join(h.Cwd, "sep", ".git"), "gitdir: ../gitdirs/sep.git\n")
	gitDir(filepath.Join(h.Cwd, "gitdirs", "sep.git"))
	// What a sandbox could plant: a gitdir above the .git file (the
	// workspace made to look like a git directory), one outside every
	// writable directory, and a directory that is no git directory.
	gitDir(h.Cwd)
	write(t, filepath.Join(h.Cwd, "up", ".git"), "gitdir: ..\n")
	write(t, filepath.Join(h.Cwd, "out", ".git"), "gitdir: /etc\n")
	write(t, filepath.Join(h.Cwd, "plain", ".git"), "gitdir: ../gitdirs\n")
	res := mustLoad(t, h, Request{ConfigFile: "-"})
	for _, d := range []string{"main/.git", "proj.git/worktrees/main", "proj.git", "sep/.git", "gitdirs/sep.git", "vendor/lone"} {
		if !hasMount(res.Policy, "protect", filepath.Join(h.Cwd, d)) {
			t.Errorf("%s not protected: %+v", d, res.Policy.Mounts)
		}
	}
	for _, d := range []string{h.Cwd, "/etc", filepath.Join(h.Cwd, "gitdirs"), filepath.Join(lone, "logs")} {
		if hasMount(res.Policy, "protect", d) {
			t.Errorf("%s protected through a planted gitdir", d)
		}
	}
	// A gitdir through a symlink: the sandbox could repoint the link
	// after the run protected its target. The run stops, naming it.
	os.Symlink("proj.git", filepath.Join(h.Cwd, "lnk"))
	write(t, filepath.Join(h.Cwd, "wt", ".git"), "gitdir: ../lnk/worktrees/main\n")
	if _, err := Load(h, Request{ConfigFile: "-"}); err == nil || !strings.Contains(err.Error(), "through a symlink") || !strings.Contains(err.Error(), filepath.Join(h.Cwd, "wt", ".git")) {
		t.Fatalf("a gitdir through a symlink: %v", err)
	}
	os.Remove(filepath.Join(h.Cwd, "wt", ".git"))
	// Submodule directories past the scan's budget: the run stops.
	for i := 0; i <= maxGitScanDirs; i++ {
		if err := os.MkdirAll(filepath.Join(h.Cwd, ".git", "modules", fmt.Sprintf("m%05d", i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Load(h, Request{ConfigFile: "-"})
	if err == nil || !strings.Contains(err.Error(), "more than 8192 directories") {
		t.Fatalf("a .git/modules past the bound: %v", err)
	}
}

func TestHideMapping(t *testing.T) {
	h := testHost(t)
	write(t, filepath.Join(h.Home, ".aws", "credentials"), "K")
	write(t, filepath.Join(h.Cwd, ".env.local"), "S")
	write(t, filepath.Join(h.Cwd, "a", "b", ".env"), "S")
	os.MkdirAll(filepath.Join(h.Cwd, ".env-venv"), 0o755) // a directory: not a .env file
	write(t, filepath.Join(h.Cwd, "node_modules", "x", ".env"), "pkg")
	res := mustLoad(t, h, Request{ConfigFile: "-", Flags: flags(Config{Filesystem: Filesystem{RO: []PathEntry{{Path: h.Home, Dest: "/mnt/home"}}}})})
	for _, d := range []string{filepath.Join(h.Home, ".aws"), "/mnt/home/.aws", filepath.Join(h.Cwd, ".env.local"), filepath.Join(h.Cwd, "a/b/.env")} {
		if !hasMount(res.Policy, "hide", d) {
			t.Errorf("%s not hidden: %+v", d, res.Policy.Mounts)
		}
	}
	for _, d := range []string{filepath.Join(h.Cwd, ".env-venv"), filepath.Join(h.Cwd, "node_modules/x/.env")} {
		if hasMount(res.Policy, "hide", d) {
			t.Errorf("%s hidden", d)
		}
	}
	// "!PATH" removes a profile's entry.
	res = mustLoad(t, h, Request{ConfigFile: "-", Flags: flags(Config{Filesystem: Filesystem{Hide: []PathEntry{{Path: "~/.aws", Remove: true}}}})})
	if hasMount(res.Policy, "hide", filepath.Join(h.Home, ".aws")) {
		t.Fatalf("!~/.aws did not unhide")
	}
}

func TestGlobBounds(t *testing.T) {
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	p := dir
	for i := 0; i < walkMaxDepth+3; i++ {
		p = filepath.Join(p, "d")
	}
	write(t, filepath.Join(p, ".env"), "deep")
	write(t, filepath.Join(dir, "d", ".env"), "shallow")
	g, err := glob(filepath.Join(dir, "**", ".env*"), true)
	if err != nil {
		t.Fatal(err)
	}
	if !g.truncated || len(g.matches) != 1 || g.matches[0] != filepath.Join(dir, "d", ".env") {
		t.Fatalf("glob: %+v", g)
	}
}

// The precedence table: flags > profile > config file > built-in defaults,
// case by case.
func TestPrecedence(t *testing.T) {
	h := testHost(t)
	cfgDir := filepath.Join(h.ConfigHome, "nsbox")
	cfg := filepath.Join(cfgDir, "config.toml")
	os.Mkdir(filepath.Join(h.Home, ".ssh"), 0o700)
	os.Mkdir(filepath.Join(h.Home, ".gnupg"), 0o700)
	extra := filepath.Join(h.Home, "extra")
	os.Mkdir(extra, 0o755)
	prof := func(body string) string {
		p := filepath.Join(cfgDir, "profiles", "p.toml")
		write(t, p, "description = \"p\"\n"+body)
		return "p"
	}
	str := func(s string) *string { return &s }
	cases := []struct {
		name    string
		config  string
		profile string // body of profile p; "" = the default profile
		flags   Config
		check   func(t *testing.T, r *Result)
	}{
		{"defaults only", "", "", Config{}, func(t *testing.T, r *Result) {
			if r.Policy.Network != "none" || r.Policy.Hostname != "nsbox" || r.Policy.Seccomp != "default" || r.Backend != "auto" || r.BackendFallback || r.Profile != "workspace" {
				t.Fatalf("%+v", r)
			}
		}},
		{"config over defaults", "network = \"host\"\nhostname = \"cfg\"\nbackend = \"native\"\nbackend_fallback = true\n", "", Config{}, func(t *testing.T, r *Result) {
			if r.Policy.Network != "host" || r.Policy.Hostname != "cfg" || r.Backend != "native" || !r.BackendFallback {
				t.Fatalf("%+v", r.Policy)
			}
		}},
		{"config chooses the profile", "profile = \"strict\"\n", "", Config{}, func(t *testing.T, r *Result) {
			if r.Profile != "strict" || r.Policy.Limits.Pids != 128 {
				t.Fatalf("%+v", r)
			}
		}},
		{"--profile over config's profile", "profile = \"strict\"\n", "network = \"host\"\n", Config{}, func(t *testing.T, r *Result) {
			if r.Profile != "p" || r.Policy.Limits.Pids != 0 || r.Policy.Network != "host" {
				t.Fatalf("%+v", r)
			}
		}},
		{"profile over config", "hostname = \"cfg\"\nnetwork = \"host\"\n", "hostname = \"prof\"\n", Config{}, func(t *testing.T, r *Result) {
			if r.Policy.Hostname != "prof" || r.Policy.Network != "host" {
				t.Fatalf("profile must win where it sets a key, config elsewhere: %+v", r.Policy)
			}
		}},
		{"flags over profile", "hostname = \"cfg\"\n", "hostname = \"prof\"\n[limits]\nmemory = \"1G\"\n", Config{Hostname: str("flag"), Limits: Limits{Memory: str("64M")}}, func(t *testing.T, r *Result) {
			if r.Policy.Hostname != "flag" || r.Policy.Limits.Memory != 64<<20 {
				t.Fatalf("%+v", r.Policy)
			}
		}},
		{"strict limits over config limits", "[limits]\nmemory = \"4G\"\npids = 4096\n", "extend = \"strict\"\n", Config{}, func(t *testing.T, r *Result) {
			if r.Policy.Limits.Memory != 512<<20 || r.Policy.Limits.Pids != 128 {
				t.Fatalf("%+v", r.Policy.Limits)
			}
		}},
		{"lists add up across layers", "[filesystem]\nro = [\"" + extra + "\"]\n[env]\npass = [\"GOPATH\"]\n", "extend = \"workspace\"\n[env]\nset = {A = \"p\"}\n", Config{Env: Env{Set: map[string]string{"B": "f"}}}, func(t *testing.T, r *Result) {
			if !hasMount(r.Policy, "bind", extra) || !hasMount(r.Policy, "bind", h.Cwd) {
				t.Fatalf("binds %+v", r.Policy.Mounts)
			}
			env := strings.Join(r.Policy.Env, " ")
			if !strings.Contains(env, "GOPATH=/go") || !strings.Contains(env, "A=p") || !strings.Contains(env, "B=f") || strings.Contains(env, "SECRET") {
				t.Fatalf("env %v", r.Policy.Env)
			}
		}},
		{"env.set: flag over profile over config", "[env]\nset = {K = \"cfg\"}\n", "[env]\nset = {K = \"prof\"}\n", Config{Env: Env{Set: map[string]string{"K": "flag"}}}, func(t *testing.T, r *Result) {
			if !strings.Contains(strings.Join(r.Policy.Env, " "), "K=flag") || strings.Count(strings.Join(r.Policy.Env, " "), "K=") != 1 {
				t.Fatalf("env %v", r.Policy.Env)
			}
		}},
		{"same destination: flag --ro over profile rw", "", "extend = \"workspace\"\n", Config{Filesystem: Filesystem{RO: []PathEntry{{Path: "$CWD"}}}}, func(t *testing.T, r *Result) {
			m, ok := findMount(r.Policy, sandbox.Mount{Kind: sandbox.MountBind}, h.Cwd)
			if !ok || !m.ReadOnly {
				t.Fatalf("%+v", r.Policy.Mounts)
			}
		}},
		{"flag removes a profile hide", "", "extend = \"workspace\"\n", Config{Filesystem: Filesystem{Hide: []PathEntry{{Path: "~/.ssh", Remove: true}}}}, func(t *testing.T, r *Result) {
			if hasMount(r.Policy, "hide", filepath.Join(h.Home, ".ssh")) || !hasMount(r.Policy, "hide", filepath.Join(h.Home, ".gnupg")) {
				t.Fatalf("%+v", r.Policy.Mounts)
			}
		}},
		{"backend_fallback only from config", "", "", Config{}, func(t *testing.T, r *Result) {
			if r.BackendFallback {
				t.Fatal("fallback on by default")
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			os.RemoveAll(cfgDir)
			if c.config != "" {
				write(t, cfg, c.config)
			}
			req := Request{Flags: flags(c.flags)}
			if c.profile != "" {
				req.Profile = prof(c.profile)
			}
			res, err := Load(h, req)
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, res)
		})
	}
}

func TestHostAPIPatterns(t *testing.T) {
	h := testHost(t)
	h.KnownHostAPIs = []string{"memory.save", "memory.recall", "notepad.open"}
	res := mustLoad(t, h, Request{ConfigFile: "-", Flags: flags(Config{HostAPIs: []string{"memory.*", "memory.save"}})})
	if strings.Join(res.Policy.HostAPIs, ",") != "memory.recall,memory.save" {
		t.Fatalf("%v", res.Policy.HostAPIs)
	}
	if _, err := Load(h, Request{ConfigFile: "-", Flags: flags(Config{HostAPIs: []string{"mail.*"}})}); err == nil {
		t.Fatal("mail.* matched")
	}
}

func TestPlaceholderCleanup(t *testing.T) {
	h := testHost(t)
	res := mustLoad(t, h, Request{ConfigFile: "-"})
	// The .git placeholder alone (the agent files have theirs too).
	res.Placeholders = res.Placeholders[:1]
	ph := res.Placeholders[0]
	if ph.Path != filepath.Join(h.Cwd, ".git") {
		t.Fatalf("%+v", res.Placeholders)
	}
	// What the sandbox does: create it.
	os.Mkdir(ph.Path, 0o755)
	a := HoldRoots(res.Roots())
	if a.Err() != nil {
		t.Fatal(a.Err())
	}
	b := HoldRoots(res.Roots()) // a second run on the same workspace
	if got := a.Release(res.Placeholders); len(got) != 0 {
		t.Fatalf("removed %v while another run holds the workspace", got)
	}
	if _, err := os.Stat(ph.Path); err != nil {
		t.Fatal("placeholder gone while in use")
	}
	if got := b.Release(res.Placeholders); len(got) != 1 {
		t.Fatalf("last run did not remove the placeholder: %v", got)
	}
	// Not empty: kept.
	os.Mkdir(ph.Path, 0o755)
	write(t, filepath.Join(ph.Path, "HEAD"), "ref")
	if got := HoldRoots(res.Roots()).Release(res.Placeholders); len(got) != 0 {
		t.Fatalf("removed a non-empty directory")
	}
	// A root held exclusively (by sandboxed code, say) is an error after a
	// bounded wait, not a hang.
	fd, err := unix.Open(h.Cwd, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	unix.Flock(fd, unix.LOCK_EX)
	start := time.Now()
	if err := HoldRoots(res.Roots()).Err(); !errors.Is(err, ErrRootLocked) || time.Since(start) > holdTimeout+2*time.Second {
		t.Fatalf("locked root: %v after %s", err, time.Since(start))
	}
}

// Peek finds the backend and the writable roots that Load's result holds
// (pins below them aside), and fails where Load fails in those steps.
func TestPeekAgreesWithLoad(t *testing.T) {
	h := testHost(t)
	extra := filepath.Join(h.Home, "extra")
	os.Mkdir(extra, 0o755)
	ro := filepath.Join(h.Home, "ro")
	os.Mkdir(ro, 0o755)
	os.MkdirAll(filepath.Join(h.Cwd, ".git"), 0o755) // pins .git/hooks below the workspace
	for _, c := range []struct {
		name string
		req  Request
	}{
		{"workspace", Request{ConfigFile: "-"}},
		{"strict", Request{ConfigFile: "-", Profile: "strict"}},
		{"--rw and --ro", Request{ConfigFile: "-", Flags: flags(Config{
			Backend:    ptr(BackendNative),
			Filesystem: Filesystem{RW: []PathEntry{{Path: extra}}, RO: []PathEntry{{Path: ro}}},
		})}},
	} {
		pv, err := Peek(h, c.req)
		if err != nil {
			t.Fatalf("%s: Peek: %v", c.name, err)
		}
		res := mustLoad(t, h, c.req)
		full, err := pv.Load()
		if err != nil {
			t.Fatalf("%s: Preview.Load: %v", c.name, err)
		}
		if full.GitAudit != nil && res.GitAudit != nil {
			full.GitAudit.since = res.GitAudit.since // the time each was resolved at
		}
		if !reflect.DeepEqual(full, res) {
			t.Errorf("%s: Preview.Load differs from Load:\n%+v\n%+v", c.name, full, res)
		}
		if c.name != "strict" && len(pv.Roots) == 0 {
			t.Errorf("%s: no roots", c.name)
		}
		if pv.Backend != res.Backend || pv.BackendFallback != res.BackendFallback {
			t.Errorf("%s: Peek backend %q/%v, Load %q/%v", c.name, pv.Backend, pv.BackendFallback, res.Backend, res.BackendFallback)
		}
		for _, r := range res.Roots() {
			covered := false
			for _, p := range pv.Roots {
				covered = covered || within(r, p)
			}
			if !covered {
				t.Errorf("%s: Load holds %s, Peek's roots %v do not cover it", c.name, r, pv.Roots)
			}
		}
		for _, p := range pv.Roots {
			if !slices.Contains(res.Roots(), p) {
				t.Errorf("%s: Peek root %s is not one of Load's %v", c.name, p, res.Roots())
			}
		}
	}
	bad := Request{ConfigFile: "-", Flags: flags(Config{Filesystem: Filesystem{RW: []PathEntry{{Path: filepath.Join(h.Home, "missing")}}}})}
	_, perr := Peek(h, bad)
	_, lerr := Load(h, bad)
	if perr == nil || lerr == nil || perr.Error() != lerr.Error() {
		t.Fatalf("missing --rw: Peek %v, Load %v", perr, lerr)
	}
}

// A profile named through a symlinked directory (the shell's $PWD when
// /home -> /var/home) is still protected: the bind's source is the real
// path, and the file is compared with it by its real path.
func TestPolicyFileThroughSymlinkProtected(t *testing.T) {
	h := testHost(t)
	real := filepath.Join(filepath.Dir(h.Home), "real")
	if err := os.MkdirAll(filepath.Join(real, "proj"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(filepath.Dir(h.Home), "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(real, "proj", ".nsbox", "policy", "nsbox.toml"), "extend = \"workspace\"\n")
	h.Cwd = filepath.Join(link, "proj")
	trustAll(t, h, ".nsbox/policy/nsbox.toml")
	res := mustLoad(t, h, Request{ConfigFile: "-", Profile: "./.nsbox/policy/nsbox.toml"})
	if !hasMount(res.Policy, "protect", filepath.Join(real, "proj", ".nsbox", "policy", "nsbox.toml")) {
		t.Fatalf("the profile is not protected: %+v", res.Policy.Mounts)
	}
}

// backend = "none" switches sandboxing off: only the user's config file or
// the command line may say it, never a profile (which may lie in a
// directory an earlier sandbox could write).
func TestProfileCannotDisableSandbox(t *testing.T) {
	h := testHost(t)
	write(t, filepath.Join(h.Cwd, "p.toml"), "extend = \"workspace\"\nbackend = \"none\"\n")
	_, err := Load(h, Request{ConfigFile: "-", Profile: "./p.toml"})
	if err == nil || !strings.Contains(err.Error(), "backend") {
		t.Fatalf("a profile chose backend none: %v", err)
	}
	cfg := filepath.Join(h.ConfigHome, "nsbox", "config.toml")
	write(t, cfg, "backend = \"none\"\n")
	if res, err := Load(h, Request{ConfigFile: cfg}); err != nil || res.Backend != BackendNone {
		t.Fatalf("config.toml backend none: %v", err)
	}
	none := BackendNone
	if res, err := Load(h, Request{ConfigFile: "-", Flags: flags(Config{Backend: &none})}); err != nil || res.Backend != BackendNone {
		t.Fatalf("--backend none: %v", err)
	}
}

// No directory below /etc, /usr and the other system trees can be the
// workspace: as root it would make host configuration writable.
func TestWorkspaceInsideSystemTreeRefused(t *testing.T) {
	h := testHost(t)
	n := 0
	for _, d := range []string{"/etc/default", "/etc/apt", "/usr/share/doc", "/usr/lib"} {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			continue
		}
		n++
		hh := h
		hh.Cwd = d
		if _, err := Load(hh, Request{ConfigFile: "-"}); !errors.Is(err, ErrUnsafeWorkspace) {
			t.Errorf("workspace %s: %v", d, err)
		}
	}
	if n == 0 {
		t.Skip("none of the system directories probed exists here")
	}
	// Where users keep sources and media, below those trees, is fine.
	for _, d := range []string{"/usr/src", "/usr/local/src"} {
		sub, err := os.MkdirTemp(d, "nsbox-policy-test-")
		if err != nil {
			continue
		}
		defer os.RemoveAll(sub)
		hh := h
		hh.Cwd = sub
		if _, err := Load(hh, Request{ConfigFile: "-"}); err != nil {
			t.Errorf("workspace %s: %v", sub, err)
		}
	}
}

// With $HOME unset the home directory comes from the user database, so
// "~" entries (credential hides, startup files) still apply.
func TestHomeWithoutHOME(t *testing.T) {
	u, err := user.Current()
	if err != nil || !filepath.IsAbs(u.HomeDir) {
		t.Skipf("no user database entry for this uid: %v", err)
	}
	t.Setenv("HOME", "")
	h, err := HostFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if h.Home != u.HomeDir {
		t.Fatalf("Home %q, want %q from the user database", h.Home, u.HomeDir)
	}
	t.Setenv("HOME", "relative/home")
	if h, _ := HostFromEnv(); h.Home != u.HomeDir {
		t.Fatalf("relative HOME: Home %q, want %q", h.Home, u.HomeDir)
	}
}

// A seccomp profile in the writable workspace is kept read-only inside: a
// sandbox that emptied it would switch the next run's filter off.
func TestSeccompProfileInWorkspaceProtected(t *testing.T) {
	h := testHost(t)
	p := filepath.Join(h.Cwd, ".nsbox", "policy", "sc.json")
	write(t, p, `{"defaultAction":"SCMP_ACT_ALLOW"}`)
	sc := "./.nsbox/policy/sc.json"
	trustAll(t, h, p)
	res := mustLoad(t, h, Request{ConfigFile: "-", Flags: &Layer{Kind: KindFlags, Name: "command line", Config: Config{Seccomp: &sc}}})
	if res.Policy.Seccomp != p || !hasMount(res.Policy, "protect", p) {
		t.Fatalf("seccomp %q, mounts %+v", res.Policy.Seccomp, res.Policy.Mounts)
	}
	write(t, filepath.Join(h.Cwd, "sc.json"), `{"defaultAction":"SCMP_ACT_ALLOW"}`)
	sc = "./sc.json"
	if _, err := Load(h, Request{ConfigFile: "-", Flags: &Layer{Kind: KindFlags, Name: "command line", Config: Config{Seccomp: &sc}}}); !errors.Is(err, ErrWritablePolicyFile) {
		t.Fatalf("a seccomp file at the workspace's top: %v", err)
	}
}

// A plan path that is not valid UTF-8 would reach the worker garbled (the
// plan crosses as JSON) and its hide would miss: an earlier sandbox could
// rename a directory holding a .env to such a name. Refused, with a clear
// error, instead of a run with the secret visible.
func TestNonUTF8PlanPathRefused(t *testing.T) {
	h := testHost(t)
	write(t, filepath.Join(h.Cwd, "sub\xff", ".env"), "SECRET=1\n")
	_, err := Load(h, Request{ConfigFile: "-"})
	if err == nil || !strings.Contains(err.Error(), "not valid UTF-8") || !strings.Contains(err.Error(), `sub\xff`) {
		t.Fatalf("err %v", err)
	}
}

// The directories between the workspace and a hidden .env are pinned
// (mount points cannot be renamed): a sandbox cannot move the directory
// holding the secret where the next run's walk does not look.
func TestHiddenFileAncestorsPinned(t *testing.T) {
	h := testHost(t)
	write(t, filepath.Join(h.Cwd, "a", "b", ".env"), "SECRET=1\n")
	res := mustLoad(t, h, Request{ConfigFile: "-"})
	if !hasMount(res.Policy, "hide", filepath.Join(h.Cwd, "a", "b", ".env")) {
		t.Fatalf("not hidden: %+v", res.Policy.Mounts)
	}
	for _, d := range []string{"a", "a/b"} {
		m, ok := findMount(res.Policy, sandbox.Mount{Kind: sandbox.MountBind}, filepath.Join(h.Cwd, d))
		if !ok || m.ReadOnly || m.Source != filepath.Join(h.Cwd, d) {
			t.Fatalf("%s not pinned: %+v", d, res.Policy.Mounts)
		}
	}
}

// profile = "my.toml" in config.toml names the file next to the config,
// never one in the current (project) directory.
func TestConfigProfileRelativeToConfig(t *testing.T) {
	h := testHost(t)
	cfg := filepath.Join(h.ConfigHome, "nsbox", "config.toml")
	write(t, cfg, "profile = \"my.toml\"\n")
	write(t, filepath.Join(h.Cwd, "my.toml"), "extend = \"workspace\"\nhostname = \"from-project\"\n")
	if _, err := Load(h, Request{ConfigFile: cfg}); err == nil {
		t.Fatal("the project's my.toml was used")
	}
	write(t, filepath.Join(h.ConfigHome, "nsbox", "my.toml"), "extend = \"workspace\"\nhostname = \"from-config-dir\"\n")
	res, err := Load(h, Request{ConfigFile: cfg})
	if err != nil || res.Policy.Hostname != "from-config-dir" {
		t.Fatalf("hostname %q err %v", res.Policy.Hostname, err)
	}
}

// A "!" entry in config.toml removes a profile's list entry, as the docs
// and the walk's warnings say; a flag can still add it back.
func TestConfigRemovalsApplyToProfile(t *testing.T) {
	h := testHost(t)
	os.MkdirAll(filepath.Join(h.Home, ".ssh"), 0o700)
	write(t, filepath.Join(h.Cwd, "sub", ".env"), "S=1\n")
	cfg := filepath.Join(h.ConfigHome, "nsbox", "config.toml")
	// The spelling before every writable directory was searched
	// removes nothing, and says so.
	write(t, cfg, "[filesystem]\nhide = [\"!$NSBOX_WORKSPACE/**/.env*\"]\n")
	res := mustLoad(t, h, Request{ConfigFile: cfg})
	if !hasMount(res.Policy, "hide", filepath.Join(h.Cwd, "sub", ".env")) || !slices.ContainsFunc(res.Warnings, func(w Warning) bool {
		return strings.Contains(w.Msg, "write !$NSBOX_RW/**/.env*")
	}) {
		t.Fatalf("old spelling: want the .env hidden and a warning naming the new one: %+v", res.Warnings)
	}
	write(t, cfg, "[filesystem]\nhide = [\"!~/.ssh\", \"!$NSBOX_RW/**/.env*\"]\n")
	res = mustLoad(t, h, Request{ConfigFile: cfg})
	if hasMount(res.Policy, "hide", filepath.Join(h.Home, ".ssh")) || hasMount(res.Policy, "hide", filepath.Join(h.Cwd, "sub", ".env")) {
		t.Fatalf("config removals did not apply: %+v", res.Policy.Mounts)
	}
	res = mustLoad(t, h, Request{ConfigFile: cfg, Flags: flags(Config{Filesystem: Filesystem{Hide: []PathEntry{{Path: "~/.ssh"}}}})})
	if !hasMount(res.Policy, "hide", filepath.Join(h.Home, ".ssh")) {
		t.Fatalf("--hide ~/.ssh after a config removal: %+v", res.Policy.Mounts)
	}
}

// Every hidden file is pinned, and hides with their pins are bounded: past
// the bound the run stops, naming some of the files. (A warning and a
// hidden file left unpinned let an earlier sandbox create 256 decoy
// .env.example files sorted first, then move the directory of a real .env
// into node_modules, where the next run does not look.)
func TestHideMountsBounded(t *testing.T) {
	h := testHost(t)
	for i := 0; i < 300; i++ {
		write(t, filepath.Join(h.Cwd, fmt.Sprintf("d%03d", i), ".env.example"), "X=1\n")
	}
	res := mustLoad(t, h, Request{ConfigFile: "-"})
	pins := 0
	for _, pe := range res.Plan {
		if strings.HasPrefix(pe.Why, "pin:") {
			pins++
		}
	}
	if pins != 300 {
		t.Fatalf("%d pins for 300 hidden files", pins)
	}
	for i := 300; i < maxHideMounts/2+1; i++ {
		write(t, filepath.Join(h.Cwd, fmt.Sprintf("d%04d", i), ".env.example"), "X=1\n")
	}
	_, err := Load(h, Request{ConfigFile: "-"})
	if err == nil || !strings.Contains(err.Error(), "hiding takes more than 2048 mounts") || !strings.Contains(err.Error(), ".env.example") {
		t.Fatalf("past the bound: %v", err)
	}
}

// A directory at the walk's depth bound truncates it only when it has
// subdirectories: an empty one is no reason for a warning on every run.
func TestWalkDepthWarnsOnlyWithSomewhereToGo(t *testing.T) {
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	p := dir
	for i := 0; i < walkMaxDepth; i++ {
		p = filepath.Join(p, "d")
	}
	os.MkdirAll(p, 0o755)
	g, err := glob(filepath.Join(dir, "**", ".env*"), true)
	if err != nil || g.truncated {
		t.Fatalf("an empty directory at the bound: %+v %v", g, err)
	}
	os.Mkdir(filepath.Join(p, "deeper"), 0o755)
	if g, err = glob(filepath.Join(dir, "**", ".env*"), true); err != nil || !g.truncated || g.truncatedAt != p {
		t.Fatalf("a subdirectory past the bound: %+v %v", g, err)
	}
}

// A bare repository given as a writable directory keeps its config and
// hooks read-only, as a .git would: its worktrees run them on the host. A
// repository-like directory a sandbox planted above a writable directory
// makes nothing above that directory read-only.
func TestProtectGitRoot(t *testing.T) {
	h := testHost(t)
	bare := filepath.Join(h.Cwd, "store", "proj.git")
	write(t, filepath.Join(bare, "HEAD"), "ref: refs/heads/main\n")
	write(t, filepath.Join(bare, "config"), "[core]\n\tbare = true\n")
	os.MkdirAll(filepath.Join(bare, "objects"), 0o755)
	os.MkdirAll(filepath.Join(bare, "refs"), 0o755)
	os.MkdirAll(filepath.Join(bare, "worktrees", "wt"), 0o755)
	planted := filepath.Join(h.Cwd, "a")
	write(t, filepath.Join(planted, "HEAD"), "ref: refs/heads/main\n")
	os.MkdirAll(filepath.Join(planted, "objects"), 0o755)
	os.MkdirAll(filepath.Join(planted, "refs"), 0o755)
	os.MkdirAll(filepath.Join(planted, "out"), 0o755)
	res := mustLoad(t, h, Request{ConfigFile: "-", Flags: flags(Config{Filesystem: Filesystem{RW: []PathEntry{{Path: bare}, {Path: filepath.Join(planted, "out")}}}})})
	for _, d := range []string{"config", "hooks", "worktrees"} {
		if !hasMount(res.Policy, "protect", filepath.Join(bare, d)) {
			t.Errorf("%s of a bare --rw repository not protected: %+v", d, res.Policy.Mounts)
		}
	}
	for _, d := range []string{bare, planted} {
		if hasMount(res.Policy, "protect", d) {
			t.Errorf("%s read-only whole: it is or holds a writable directory", d)
		}
	}
	// A submodule's core.worktree outside every writable directory is
	// not looked up at all (an automounter could act on it).
	write(t, filepath.Join(h.Cwd, ".git", "HEAD"), "ref: refs/heads/main\n")
	write(t, filepath.Join(h.Cwd, ".git", "modules", "x", "config"), "[core]\n\tworktree = /nsbox-test-nonexistent/share\n")
	if _, err := Load(h, Request{ConfigFile: "-"}); err != nil {
		t.Fatal(err)
	}
}

// What a protected git config points git to is protected when it lies in
// a writable directory: a hooks directory (husky's .husky/_), an included
// file, also one the user's own config includes; placeholders keep them
// from being created. A symlink on the way stops the run.
func TestProtectGitConfigPointers(t *testing.T) {
	h := testHost(t)
	write(t, filepath.Join(h.Cwd, ".git", "HEAD"), "ref: refs/heads/main\n")
	write(t, filepath.Join(h.Cwd, ".git", "config"), "[core]\n\thooksPath = .husky/_ # husky\n[include]\n\tpath = \"../.gitconfig.shared\"\n")
	write(t, filepath.Join(h.Cwd, ".gitconfig.shared"), "[include]\n\tpath = deeper.conf\n")
	write(t, filepath.Join(h.Cwd, "vendor", "lib", ".git", "config"), "[core]\n\thooksPath = hooks-here\n")
	write(t, filepath.Join(h.ConfigHome, "git", "config"), "[includeIf \"gitdir:"+h.Cwd+"/\"]\n\tpath = "+h.Cwd+"/.git-local.conf\n[x] [core] hooksPath = .git\\\nhooks\n")
	write(t, filepath.Join(h.Cwd, ".husky", "pre-commit"), "npm test\n")
	res := mustLoad(t, h, Request{ConfigFile: "-"})
	// The user's own relative core.hooksPath (written with a section on
	// the line of another and a value continued on the next line, as git
	// allows) counts
	// for every repository found.
	for _, d := range []string{".husky/_", ".gitconfig.shared", "deeper.conf", "vendor/lib/hooks-here", ".git-local.conf", ".githooks", "vendor/lib/.githooks"} {
		if !hasMount(res.Policy, "protect", filepath.Join(h.Cwd, d)) {
			t.Errorf("%s not protected: %+v", d, res.Policy.Mounts)
		}
	}
	// A symlink on the way is kept in place and what it leads to is
	// protected, as for any protected path (protectLinks); refusing the
	// run made every run with a stow-linked git config fail (review 52).
	os.RemoveAll(filepath.Join(h.Cwd, ".husky"))
	os.MkdirAll(filepath.Join(h.Cwd, "real-hooks"), 0o755)
	os.Symlink("real-hooks", filepath.Join(h.Cwd, ".husky"))
	res, err := Load(h, Request{ConfigFile: "-"})
	if err != nil {
		t.Fatalf("a hooksPath through a symlink: %v", err)
	}
	if !hasMount(res.Policy, "protect", filepath.Join(h.Cwd, "real-hooks", "_")) && !hasMount(res.Policy, "protect", filepath.Join(h.Cwd, "real-hooks")) {
		t.Errorf("the hooks directory a link leads to is not protected: %+v", res.Policy.Mounts)
	}
	if !hasMount(res.Policy, "protect", filepath.Join(h.Cwd, ".husky")) {
		t.Errorf("the link on the way is not kept in place: %+v", res.Policy.Mounts)
	}
}

// The .git files of a repository's checked-out submodules are protected
// with its .git: git on the host recurses into them, and a rewritten one
// ("gitdir: ../evil") would point it at a config the sandbox wrote.
func TestSubmoduleGitfilesProtected(t *testing.T) {
	h := testHost(t)
	ws := h.Cwd
	write(t, filepath.Join(ws, ".git", "HEAD"), "ref: refs/heads/main\n")
	write(t, filepath.Join(ws, ".git", "modules", "lib", "a", "config"), "[core]\n\tbare = false\n\tworktree = ../../../../lib/a\n")
	write(t, filepath.Join(ws, ".git", "modules", "lib", "a", "modules", "inner", "config"), "[core]\n\tworktree = \"../../../../../../lib/a/inner\"\n")
	write(t, filepath.Join(ws, ".git", "modules", "gone", "config"), "[core]\n\tworktree = ../../../gone\n")
	write(t, filepath.Join(ws, "lib", "a", ".git"), "gitdir: ../../.git/modules/lib/a\n")
	write(t, filepath.Join(ws, "lib", "a", "inner", ".git"), "gitdir: ../../../.git/modules/lib/a/modules/inner\n")
	res := mustLoad(t, h, Request{ConfigFile: "-"})
	for _, g := range []string{"lib/a/.git", "lib/a/inner/.git"} {
		if !hasMount(res.Policy, "protect", filepath.Join(ws, g)) {
			t.Errorf("%s not protected: %+v", g, res.Policy.Mounts)
		}
	}
	// A submodule that is not checked out gets no placeholder.
	for _, p := range res.Placeholders {
		if strings.Contains(p.Path, "gone") {
			t.Errorf("placeholder for a submodule not checked out: %+v", p)
		}
	}
}

// A writable bind named through a symlink that leads to a system directory
// or the home directory is refused (a planted out/run2 -> /etc); named by
// its real path it is the caller's choice.
func TestWritableBindThroughSymlinkRefused(t *testing.T) {
	h := testHost(t)
	if err := os.Symlink("/etc", filepath.Join(h.Cwd, "run2")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(h.Home, filepath.Join(h.Cwd, "myhome")); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(h.Home, ".config", "systemd"), 0o755)
	os.Mkdir(filepath.Join(h.Cwd, "out"), 0o755)
	if err := os.Symlink(filepath.Join(h.Home, ".config"), filepath.Join(h.Cwd, "out", "cfg")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"./run2", "./myhome", "./out/cfg", "./out/cfg/systemd"} {
		_, err := Load(h, Request{ConfigFile: "-", Flags: flags(Config{Filesystem: Filesystem{RW: []PathEntry{{Path: p}}}})})
		if !errors.Is(err, ErrUnsafeWorkspace) || !strings.Contains(err.Error(), "symlink") {
			t.Errorf("--rw %s: %v", p, err)
		}
	}
	if _, err := Load(h, Request{ConfigFile: "-", Flags: flags(Config{Filesystem: Filesystem{RW: []PathEntry{{Path: "/etc"}}}})}); err != nil {
		t.Errorf("--rw /etc named by its real path: %v", err)
	}
	// A link that stays in its tree is fine. One in the workspace that
	// leads elsewhere on the host (a data disk) is refused too, read-only
	// or not: a sandbox may have planted it (review 71: a later --output
	// wrote through one into another user's directory, and --input read
	// what the strict profile keeps out); its real path is accepted.
	os.MkdirAll(filepath.Join(h.Cwd, "real"), 0o755)
	os.Symlink("real", filepath.Join(h.Cwd, "alias"))
	dataDir := t.TempDir()
	os.Symlink(dataDir, filepath.Join(h.Cwd, "data"))
	if _, err := Load(h, Request{ConfigFile: "-", Flags: flags(Config{Filesystem: Filesystem{RW: []PathEntry{{Path: "./alias"}}}})}); err != nil {
		t.Errorf("--rw ./alias: %v", err)
	}
	for _, c := range []Filesystem{{RW: []PathEntry{{Path: "./data"}}}, {RO: []PathEntry{{Path: "./data"}}}, {RO: []PathEntry{{Path: "./run2"}}}} {
		if _, err := Load(h, Request{ConfigFile: "-", Flags: flags(Config{Filesystem: c})}); !errors.Is(err, ErrUnsafeWorkspace) || !strings.Contains(err.Error(), "symlink") {
			t.Errorf("%+v through a link in the workspace: %v", c, err)
		}
	}
	for _, c := range []Filesystem{{RW: []PathEntry{{Path: dataDir}}}, {RO: []PathEntry{{Path: "/etc"}}}} {
		if _, err := Load(h, Request{ConfigFile: "-", Flags: flags(Config{Filesystem: c})}); err != nil {
			t.Errorf("%+v by its real path: %v", c, err)
		}
	}
}

// The built-in profiles keep what editors and agents run read-only in each
// writable directory: a missing one gets a placeholder (a directory for
// the directory entries), an existing one a protect mount, and "!ENTRY"
// lifts that entry alone.
func TestProtectAgentFiles(t *testing.T) {
	h := testHost(t)
	ws := h.Cwd
	os.Mkdir(filepath.Join(ws, ".vscode"), 0o755)
	write(t, filepath.Join(ws, ".mcp.json"), "{}")
	write(t, filepath.Join(ws, "pip.conf"), "[global]\n")
	res := mustLoad(t, h, Request{ConfigFile: "-"})
	for _, p := range []string{".mcp.json", ".vscode", ".claude", ".cursor", ".envrc", ".npmrc", ".cargo", "pip.conf"} {
		if !hasMount(res.Policy, "protect", filepath.Join(ws, p)) {
			t.Errorf("%s not protected", p)
		}
	}
	ph := map[string]bool{}
	for _, p := range res.Placeholders {
		ph[strings.TrimPrefix(p.Path, ws+"/")] = p.Dir
	}
	for name, dir := range map[string]bool{".claude": true, ".cargo": true, ".idea": true, ".npmrc": false, ".yarnrc.yml": false} {
		if d, ok := ph[name]; !ok || d != dir {
			t.Errorf("placeholder %s: present %v, dir %v (want dir %v)", name, ok, d, dir)
		}
	}
	if _, ok := ph[".mcp.json"]; ok {
		t.Error("an existing .mcp.json got a placeholder")
	}
	os.Remove(filepath.Join(ws, "pip.conf"))
	if res := mustLoad(t, h, Request{ConfigFile: "-"}); hasMount(res.Policy, "protect", filepath.Join(ws, "pip.conf")) {
		t.Error("a missing pip.conf got a placeholder")
	}
	if _, ok := ph[".vscode"]; ok {
		t.Error("an existing .vscode got a placeholder")
	}
	res = mustLoad(t, h, Request{ConfigFile: "-", Flags: flags(Config{Filesystem: Filesystem{Protect: []PathEntry{ParseEntry("!$NSBOX_RW/.mcp.json")}}})})
	if hasMount(res.Policy, "protect", filepath.Join(ws, ".mcp.json")) {
		t.Error("!$NSBOX_RW/.mcp.json did not lift it")
	}
	if !hasMount(res.Policy, "protect", filepath.Join(ws, ".vscode")) {
		t.Error("lifting .mcp.json lifted .vscode")
	}
}
