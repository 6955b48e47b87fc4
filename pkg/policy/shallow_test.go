package policy

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// rwBesideWorkspace is a host with a second writable directory, other,
// that holds a repository, a nested project's editor config and a .env
// below its top.
func rwBesideWorkspace(t *testing.T) (Host, string) {
	t.Helper()
	h := testHost(t)
	other := filepath.Join(filepath.Dir(h.Home), "other")
	for _, d := range []string{"repo/.git/hooks", "repo/.git/objects", "repo/.git/refs", "proj/.vscode", "deep/er"} {
		if err := os.MkdirAll(filepath.Join(other, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(other, "repo", ".git", "HEAD"), "ref: refs/heads/main\n")
	write(t, filepath.Join(other, "proj", ".vscode", "tasks.json"), "{}")
	write(t, filepath.Join(other, "deep", "er", ".env"), "TOKEN=1\n")
	return h, other
}

func withRW(dirs ...string) Filesystem {
	var fs Filesystem
	for _, d := range dirs {
		fs.RW = append(fs.RW, PathEntry{Path: d})
	}
	return fs
}

// A writable directory beside the workspace is searched as the workspace
// is: its nested repository and editor config are read-only, its nested
// .env hidden, and the run's audit looks for repositories in it too.
func TestRWDirectoryNestedEntries(t *testing.T) {
	h, other := rwBesideWorkspace(t)
	res := mustLoad(t, h, Request{ConfigFile: "-", Flags: flags(Config{Filesystem: withRW(other)})})
	for _, m := range []struct{ kind, dest string }{
		{"protect", filepath.Join(other, "repo", ".git")},
		{"protect", filepath.Join(other, "proj", ".vscode")},
		{"hide", filepath.Join(other, "deep", "er", ".env")},
	} {
		if !hasMount(res.Policy, m.kind, m.dest) {
			t.Errorf("no %s mount for %s", m.kind, m.dest)
		}
	}
	got := res.GitAudit.Plan().Repositories
	if !slices.Contains(got, h.Cwd) || !slices.Contains(got, other) {
		t.Errorf("audit searches %q, want the workspace and %s", got, other)
	}
}

// --shallow DIR leaves DIR's nested entries out, and only them: its top
// level is still protected, the workspace still searched.
func TestShallowSkipsNestedEntries(t *testing.T) {
	h, other := rwBesideWorkspace(t)
	fs := withRW(other)
	fs.Shallow = []string{other}
	res := mustLoad(t, h, Request{ConfigFile: "-", Flags: flags(Config{Filesystem: fs})})
	for _, m := range []struct{ kind, dest string }{
		{"protect", filepath.Join(other, "repo", ".git")},
		{"protect", filepath.Join(other, "proj", ".vscode")},
		{"hide", filepath.Join(other, "deep", "er", ".env")},
	} {
		if hasMount(res.Policy, m.kind, m.dest) {
			t.Errorf("shallow %s: still a %s mount for %s", other, m.kind, m.dest)
		}
	}
	if !hasMount(res.Policy, "protect", filepath.Join(other, ".git")) {
		t.Errorf("shallow %s: its top-level .git is no longer protected", other)
	}
	if got := res.GitAudit.Plan().Repositories; slices.Contains(got, other) || !slices.Contains(got, h.Cwd) {
		t.Errorf("audit searches %q", got)
	}
	if !slices.Equal(res.Shallow, []string{other}) {
		t.Errorf("Result.Shallow = %q", res.Shallow)
	}
	// A higher layer's "!DIR" drops it again.
	fs.Shallow = append(fs.Shallow, "!"+other)
	res = mustLoad(t, h, Request{ConfigFile: "-", Flags: flags(Config{Filesystem: fs})})
	if !hasMount(res.Policy, "protect", filepath.Join(other, "repo", ".git")) || len(res.Shallow) != 0 {
		t.Errorf("!DIR did not drop the shallow entry: %q", res.Shallow)
	}
}

// A shallow entry must name a writable directory of the run: anything
// else (a typo, a read-only bind) would loosen nothing and go unnoticed.
func TestShallowMustNameWritableDir(t *testing.T) {
	h, other := rwBesideWorkspace(t)
	_, err := Load(h, Request{ConfigFile: "-", Flags: flags(Config{Filesystem: Filesystem{Shallow: []string{other}}})})
	if !errors.Is(err, ErrNotWritableDir) {
		t.Fatalf("want ErrNotWritableDir, got %v", err)
	}
	// A directory inside a writable one is not one either.
	fs := withRW(other)
	fs.Shallow = []string{filepath.Join(other, "deep")}
	if _, err := Load(h, Request{ConfigFile: "-", Flags: flags(Config{Filesystem: fs})}); !errors.Is(err, ErrNotWritableDir) {
		t.Fatalf("subdirectory: want ErrNotWritableDir, got %v", err)
	}
}

// A writable directory too big for the walk stops the run (an earlier
// sandbox could have grown it to hide what it planted), and the error
// names the knob for that directory.
func TestRWDirectoryTooBigNamesShallow(t *testing.T) {
	h, other := rwBesideWorkspace(t)
	for i := 0; i < 12; i++ {
		os.MkdirAll(filepath.Join(other, "many", string(rune('a'+i))), 0o755)
	}
	saved := walkMaxDirs
	walkMaxDirs = 8
	t.Cleanup(func() { walkMaxDirs = saved })
	_, err := Load(h, Request{ConfigFile: "-", Flags: flags(Config{Filesystem: withRW(other)})})
	if err == nil || !strings.Contains(err.Error(), "--shallow "+other) {
		t.Fatalf("want an error naming --shallow %s, got %v", other, err)
	}
	fs := withRW(other)
	fs.Shallow = []string{other}
	if _, err := Load(h, Request{ConfigFile: "-", Flags: flags(Config{Filesystem: fs})}); err != nil {
		t.Fatalf("with --shallow %s: %v", other, err)
	}
}

// The audit quarantines a repository the run made in any searched
// directory, not only the workspace's.
func TestAuditQuarantinesInEveryRWDirectory(t *testing.T) {
	h, other := rwBesideWorkspace(t)
	res := mustLoad(t, h, Request{ConfigFile: "-", Flags: flags(Config{Filesystem: withRW(other)})})
	made := filepath.Join(other, "made")
	for _, d := range []string{".git/objects", ".git/refs"} {
		os.MkdirAll(filepath.Join(made, d), 0o755)
	}
	write(t, filepath.Join(made, ".git", "HEAD"), "ref: refs/heads/main\n")
	write(t, filepath.Join(made, ".git", "config"), "[core]\n\tfsmonitor = /bin/evil\n")
	q, err := res.GitAudit.Run()
	if err != nil {
		t.Fatal(err)
	}
	if len(q) != 1 || q[0].From != filepath.Join(made, ".git") {
		t.Fatalf("quarantined %+v, want %s/.git", q, made)
	}
	if _, err := os.Lstat(filepath.Join(made, ".git"+quarantineSuffix)); err != nil {
		t.Fatal(err)
	}
	// The repository that was there before is not the run's.
	if _, err := os.Lstat(filepath.Join(other, "repo", ".git")); err != nil {
		t.Fatalf("the existing repository was moved: %v", err)
	}
}

// A record written before the audit searched several directories names
// the one it searched as "workspace"; it is read as that directory.
func TestGitAuditRecordOldWorkspaceKey(t *testing.T) {
	var a GitAudit
	if err := json.Unmarshal([]byte(`{"workspace":"/w","roots":["/w"],"known":[]}`), &a); err != nil {
		t.Fatal(err)
	}
	if got := a.Plan().Repositories; !slices.Equal(got, []string{"/w"}) {
		t.Fatalf("dirs %q", got)
	}
	b, err := json.Marshal(&a)
	if err != nil {
		t.Fatal(err)
	}
	var c GitAudit
	if err := json.Unmarshal(b, &c); err != nil || !slices.Equal(c.dirs, []string{"/w"}) {
		t.Fatalf("round trip %s: %v %q", b, err, c.dirs)
	}
}
