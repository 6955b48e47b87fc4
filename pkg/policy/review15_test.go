package policy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Review of d293527 ("search every writable directory as the workspace;
// --shallow DIR to skip one").

// MEDIUM. GitAudit.addDir keeps one walk per tree: the workspace, lying
// inside another writable directory (--rw ~/src, workspace
// ~/src/lib/node_modules/app), is dropped from the audit's directories
// and left to the outer directory's "**" walk. That walk never enters
// node_modules, .venv, venv, target, .cache ... (walkSkip), so a
// repository the sandbox makes in such a workspace is not quarantined, and
// neither is the layout of a bare repository at the workspace's top (the
// roots' top-level check skips a root "within" a searched directory). No
// error or warning is given: adding a --rw directory silently switches the
// workspace's audit off. Without --rw the same run is quarantined.
func TestReview15AuditWorkspaceBelowSkippedNameOfRWDir(t *testing.T) {
	h := testHost(t)
	outer := filepath.Join(filepath.Dir(h.Home), "src")
	ws := filepath.Join(outer, "node_modules", "app")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	h.Cwd = ws
	res := mustLoad(t, h, Request{ConfigFile: "-", Flags: flags(Config{Filesystem: withRW(outer)})})
	// What the sandbox makes: a nested repository and a bare repository's
	// layout at the workspace's top.
	made := filepath.Join(ws, "made")
	for _, d := range []string{".git/objects", ".git/refs"} {
		os.MkdirAll(filepath.Join(made, d), 0o755)
	}
	write(t, filepath.Join(made, ".git", "HEAD"), "ref: refs/heads/main\n")
	write(t, filepath.Join(made, ".git", "config"), "[core]\n\tfsmonitor = /bin/evil\n")
	for _, d := range []string{"objects", "refs"} {
		os.MkdirAll(filepath.Join(ws, d), 0o755)
	}
	write(t, filepath.Join(ws, "HEAD"), "ref: refs/heads/main\n")
	q, err := res.GitAudit.Run()
	t.Logf("audit dirs %q, quarantined %+v, err %v", res.GitAudit.Plan().Repositories, q, err)
	if _, err := os.Lstat(filepath.Join(made, ".git")); err == nil {
		t.Errorf("with --rw %s, a repository the run made in the workspace %s was not quarantined (no error either)", outer, ws)
	}
	if _, err := os.Lstat(filepath.Join(ws, "HEAD")); err == nil {
		t.Errorf("with --rw %s, a bare repository the run made at the top of the workspace %s was not quarantined", outer, ws)
	}
}

// MEDIUM. --shallow of the workspace when it is the run's only writable
// directory (the fix the too-big error names, and docs/profiles.md
// recommends as shallow = ["$NSBOX_WORKSPACE"]) drops the run's git audit
// to its created-patterns part (noGit): the check of each writable
// directory's top level (the layout of a bare repository: HEAD, objects/,
// refs/ at the top) no longer runs. docs/profiles.md says of a shallow
// directory "the audit still looks at its top level". git on the host run
// in that directory (no .git there) takes it for a bare repository and
// runs its config (core.pager, aliases, hooks).
func TestReview15ShallowOnlyDirStillAuditsTopLevel(t *testing.T) {
	h := testHost(t)
	fs := Filesystem{Shallow: []string{h.Cwd}}
	res := mustLoad(t, h, Request{ConfigFile: "-", Flags: flags(Config{Filesystem: fs})})
	for _, d := range []string{"objects", "refs"} {
		os.MkdirAll(filepath.Join(h.Cwd, d), 0o755)
	}
	write(t, filepath.Join(h.Cwd, "HEAD"), "ref: refs/heads/main\n")
	write(t, filepath.Join(h.Cwd, "config"), "[core]\n\tpager = touch /tmp/pwned\n")
	q, err := res.GitAudit.Run()
	if _, lerr := os.Lstat(filepath.Join(h.Cwd, "HEAD")); lerr == nil {
		t.Fatalf("--shallow %s: a bare repository made at its top was left in place (quarantined %+v, err %v)", h.Cwd, q, err)
	}
}

// LOW. A shallow entry is matched by its exact string when removed
// ("!DIR" compares the text), while an added one is resolved to a real
// path and checked. A config's shallow = ["$NSBOX_WORKSPACE"] (the
// spelling docs/profiles.md gives) or ["/abs/dir"] is not dropped by the
// user's --shallow '!/abs/dir/' or '!<the workspace's path>': the
// directory stays unsearched for that run, with no warning, though the
// user asked for its nested protections back. A typo in an entry that
// loosens is an error; one in the entry that tightens is silent.
func TestReview15ShallowRemovalOtherSpelling(t *testing.T) {
	h, other := rwBesideWorkspace(t)
	cfg := filepath.Join(h.ConfigHome, "nsbox", "config.toml")
	write(t, cfg, "[filesystem]\nrw = [\""+other+"\"]\nshallow = [\"$NSBOX_WORKSPACE\", \""+other+"\"]\n")
	res := mustLoad(t, h, Request{ConfigFile: cfg, Flags: flags(Config{Filesystem: Filesystem{Shallow: []string{"!" + h.Cwd, "!" + other + "/"}}})})
	warned := slices.ContainsFunc(res.Warnings, func(w Warning) bool { return strings.Contains(w.Msg, "shallow") || strings.Contains(w.Msg, other) })
	if len(res.Shallow) != 0 && !warned {
		t.Fatalf("--shallow '!%s' --shallow '!%s/' left %q shallow, with no warning (warnings %+v)", h.Cwd, other, res.Shallow, res.Warnings)
	}
}
