package policy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A killed run's record keeps what the audit of created files needs: the
// patterns, whether repositories are audited, and the start.
func TestCreatedAuditRecordRoundTrip(t *testing.T) {
	a := &GitAudit{noGit: true, roots: []string{"/w"}, known: map[fileID]bool{{dev: 1, ino: 2, ctime: 3}: true},
		created: []createdPattern{{Path: "/w/*/**/.vscode", Written: "$NSBOX_WORKSPACE/*/**/.vscode"}, {Path: "/w/.yarn/release[s]", Written: "$NSBOX_RW/.yarn/release[s]", Dir: true}},
		since:   12345}
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var back GitAudit
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, a) {
		t.Errorf("round trip: %+v, want %+v", back, *a)
	}
}

// changedInRun: a directory counts as changed when anything below it
// changed after the start, however deep; untouched, it does not.
func TestChangedInRun(t *testing.T) {
	d := t.TempDir()
	m := filepath.Join(d, ".vscode")
	if err := os.MkdirAll(filepath.Join(m, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(m, "a", "b", "settings.json")
	if err := os.WriteFile(f, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * time.Millisecond) // past the file system clock's tick
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &ts)
	a := &GitAudit{since: ts.Nano()}
	if a.changedInRun(m, d) {
		t.Fatalf("an untouched directory counts as changed")
	}
	time.Sleep(30 * time.Millisecond)
	if err := os.WriteFile(f, []byte(`{"evil":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if !a.changedInRun(m, d) {
		t.Errorf("a file changed three levels down is not seen")
	}
	if !a.changedInRun(filepath.Join(d, "missing"), d) {
		t.Errorf("what cannot be looked at must count as changed")
	}
}

// The workspace profile hands the file tools its nested agent-file
// patterns, relative to the workspace; a lifted one is not among them.
func TestToolPatternsFromProfile(t *testing.T) {
	h := testHost(t)
	res := mustLoad(t, h, Request{ConfigFile: "-"})
	got := res.Policy.Tools.ProtectedPatterns
	for _, want := range []string{"*/**/.vscode", "*/**/.envrc", "*/**/.cargo", "pip.con[f]", ".yarn/release[s]"} {
		if !slices.Contains(got, want) {
			t.Errorf("ProtectedPatterns %q lacks %q", got, want)
		}
	}
	res = mustLoad(t, h, Request{ConfigFile: "-", Flags: flags(Config{Filesystem: Filesystem{Protect: []PathEntry{ParseEntry("!$NSBOX_RW/*/**/.envrc")}}})})
	if slices.Contains(res.Policy.Tools.ProtectedPatterns, "*/**/.envrc") {
		t.Errorf("a lifted pattern reached the tools: %q", res.Policy.Tools.ProtectedPatterns)
	}
}

// literalPattern's pattern matches its path, and only it, component by
// component as the walk matches them.
func TestLiteralPattern(t *testing.T) {
	for _, p := range []string{"/w/lefthook.yml", "/w/.config/lefthook-local.jsonc", "/w/a[1]/b*c/x?.yml", `/w/back\slash/y\z.toml`, "/w/é/ü", "/x"} {
		pat, ok := literalPattern(p)
		if !ok {
			t.Errorf("literalPattern(%q): not expressed", p)
			continue
		}
		if !hasGlob(splitPath(pat)[len(splitPath(pat))-1]) {
			t.Errorf("literalPattern(%q) = %q: the last component is no pattern", p, pat)
		}
		pp, ps := splitPath(pat), splitPath(p)
		if len(pp) != len(ps) {
			t.Fatalf("literalPattern(%q) = %q: %d components", p, pat, len(pp))
		}
		for i := range pp {
			if !hasGlob(pp[i]) {
				if unescapeGlob(pp[i]) != ps[i] {
					t.Errorf("literalPattern(%q) = %q: literal component %q", p, pat, pp[i])
				}
				continue
			}
			if ok, err := filepath.Match(pp[i], ps[i]); !ok || err != nil {
				t.Errorf("literalPattern(%q) = %q: %q does not match %q (%v)", p, pat, pp[i], ps[i], err)
			}
			if ok, _ := filepath.Match(pp[i], ps[i]+"x"); ok {
				t.Errorf("literalPattern(%q) = %q: %q matches more than %q", p, pat, pp[i], ps[i])
			}
		}
	}
	for _, p := range []string{"/", "/w/a]", "/w/b-", `/w/c\`} {
		if pat, ok := literalPattern(p); ok {
			t.Errorf("literalPattern(%q) = %q, want not expressed", p, pat)
		}
	}
}
