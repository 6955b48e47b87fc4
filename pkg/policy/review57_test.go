package policy

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Review 57.

// TestReview57VarsForNotStaleAcrossRoots
//
// Finding (LOW): expandEach (shallow.go) sets r.vars to varsFor(root,
// escape) for each writable root but restores it only at return (defer),
// so the second root's values are built from the first root's map: each
// other variable is escaped twice (escapeGlob(escapeGlob(v))) and that
// map is cached under {root2, true} for every later entry. A pattern
// entry that uses $NSBOX_RW and another variable whose value holds
// * ? [ or \ ("/home/u/proj[v2]") matches nothing below the second
// and later writable directories: the hide or protect is silently lost
// there.
func TestReview57VarsForNotStaleAcrossRoots(t *testing.T) {
	r := &resolver{vars: vars{"HOME": "/h[1]"}, rwRoots: []string{"/a", "/b", "/c"}, res: &Result{}}
	for i := 0; i < 2; i++ { // the second pass reads the cache
		got, err := r.expandEach("$NSBOX_RW/*$HOME", origin{}, true)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{`/a/*/h\[1]`, `/b/*/h\[1]`, `/c/*/h\[1]`}
		if !slices.Equal(got, want) {
			t.Fatalf("pass %d: %q, want %q", i, got, want)
		}
	}
}

// TestReview57CommandFilesCombinedShellFlags
//
// Finding (MEDIUM): commandFiles treats only a "-c" word as sh's code
// flag. `bash -lc '...'`, `sh -ec '...'`, `bash -euc '...'` are the usual
// spellings; there the code string is taken as the script's path: the
// pointer is "<top>/tools/lint.sh --fix" (a placeholder file of that
// name is created in the workspace), and tools/lint.sh, which is what
// runs, stays writable.
func TestReview57CommandFilesCombinedShellFlags(t *testing.T) {
	for _, in := range []string{
		"bash -lc 'tools/lint.sh --fix'",
		"sh -ec 'tools/lint.sh --fix'",
		"!bash -euc \"tools/lint.sh --fix\"",
	} {
		got := commandFiles(in)
		if !slices.Contains(got, cmdFile{word: "tools/lint.sh"}) {
			t.Errorf("%q: %+v, want tools/lint.sh (the program the code runs)", in, got)
		}
		for _, f := range got {
			if strings.Contains(f.word, " ") {
				t.Errorf("%q: a pointer named by the whole code string: %q", in, f.word)
			}
		}
	}
}

// TestReview57CommandFilesCd
//
// Finding (MEDIUM): after `cd DIR`, a relative program runs from DIR, but
// commandFiles still takes it from the work tree's top (its own test even
// expects "!cd sub && ./build.sh" -> ./build.sh). The alias
// `!cd frontend && ./scripts/lint.sh` protects <top>/scripts/lint.sh (a
// placeholder where nothing is) and leaves frontend/scripts/lint.sh,
// which git runs, writable.
func TestReview57CommandFilesCd(t *testing.T) {
	got := commandFiles("!cd frontend && ./scripts/lint.sh")
	ok := false
	for _, f := range got {
		if filepath.Clean(f.word) == "frontend/scripts/lint.sh" && !f.ifExists {
			ok = true
		}
	}
	if !ok {
		t.Errorf("%+v: want frontend/scripts/lint.sh", got)
	}
}

// TestReview57CommandFilesToplevelSubstitution
//
// Finding (MEDIUM): the common idiom
// `"$(git rev-parse --show-toplevel)"/tools/x` (aliases, hook.*.command)
// gives the word "$(git rev-parse --show-toplevel)/tools/x": a relative
// path, joined to the work tree as
// "<top>/$(git rev-parse --show-toplevel)/tools/x", for which a
// placeholder (a directory of that name in the user's repository) is
// made; <top>/tools/x, what runs, stays writable. Backquotes give no
// pointer at all.
func TestReview57CommandFilesToplevelSubstitution(t *testing.T) {
	for _, in := range []string{
		`!"$(git rev-parse --show-toplevel)"/tools/x`,
		`!"$(git rev-parse --show-toplevel)/tools/x" --all`,
		"!`git rev-parse --show-toplevel`/tools/x",
	} {
		got := commandFiles(in)
		found := false
		for _, f := range got {
			if strings.ContainsAny(f.word, "$`") {
				t.Errorf("%q: pointer %q holds an unexpanded substitution", in, f.word)
			}
			if filepath.Clean(f.word) == "tools/x" {
				found = true
			}
		}
		if !found {
			t.Errorf("%q: %+v, want tools/x", in, got)
		}
	}
}

// TestReview57CommandFilesInterpreterOptionArguments
//
// Finding (MEDIUM, breaks normal use): after an interpreter, the first
// word that does not start with "-" is taken as its script, so the
// argument of an option or a subcommand becomes a protected path (a
// placeholder where nothing is, read-only where something is), and the
// real script drops to ifExists (no placeholder when missing):
// `bun test` protects <top>/test (a usual tests directory: the agent can
// no longer edit its tests), `deno run -A tools/x.ts` makes a "run"
// placeholder, `python3 -W ignore x.py` an "ignore" one, `node --loader
// ts-node/esm x.ts` a ts-node/ directory, `bash -o pipefail x.sh` a
// "pipefail" file.
func TestReview57CommandFilesInterpreterOptionArguments(t *testing.T) {
	for in, bogus := range map[string]string{
		"bun test":                             "test",
		"deno run -A tools/x.ts":               "run",
		"python3 -W ignore tools/x.py":         "ignore",
		"node --loader ts-node/esm tools/x.ts": "ts-node/esm",
		"bash -o pipefail tools/x.sh":          "pipefail",
	} {
		got := commandFiles(in)
		if slices.Contains(got, cmdFile{word: bogus}) {
			t.Errorf("%q: %q taken as the script: %+v", in, bogus, got)
		}
	}
}

// TestReview57CommandFilesPythonModule
//
// Finding (LOW): `python3 -m tools.lint` (git runs it from the work
// tree's top, and -m puts the current directory first on sys.path) runs
// tools/lint.py, which is not protected.
func TestReview57CommandFilesPythonModule(t *testing.T) {
	got := commandFiles("!python3 -m tools.lint --fix")
	for _, f := range got {
		if f.word == "tools/lint.py" || f.word == "tools/lint" {
			return
		}
	}
	t.Errorf("%+v: want tools/lint.py", got)
}

// TestReview57ExistingDirectoryArgumentStaysWritable
//
// Finding (MEDIUM, breaks normal use): every other word with a "/" that
// names something existing is protected, directories included. A global
// `alias.lint = !ruff check src/` (or `!rm -rf build/`, `!pytest tests/`)
// makes src/ read-only inside every sandbox of every repository: the
// agent cannot edit the project's sources. An argument directory is not
// a file that runs.
func TestReview57ExistingDirectoryArgumentStaysWritable(t *testing.T) {
	ws, res := repoWithGitConfig(t, "[alias]\n\tlint = !ruff check src/\n", map[string]string{"src/main.py": "print(1)\n"})
	for _, m := range res.Policy.Mounts {
		if within(filepath.Join(ws, "src", "main.py"), m.Dest) && m.Kind == "protect" {
			t.Errorf("alias `!ruff check src/` protects %s: src/ is read-only in the sandbox", m.Dest)
		}
	}
}

// repoWithGitConfig resolves the default policy in a repository holding
// files (relative path: content) whose user's git config is gitconfig
// ("" for none), and returns the workspace and the result.
func repoWithGitConfig(t *testing.T, gitconfig string, files map[string]string) (string, *Result) {
	t.Helper()
	h := testHost(t)
	ws := h.Cwd
	write(t, filepath.Join(ws, ".git", "HEAD"), "ref: refs/heads/main\n")
	for rel, content := range files {
		write(t, filepath.Join(ws, rel), content)
	}
	if gitconfig != "" {
		write(t, filepath.Join(h.Home, ".gitconfig"), gitconfig)
	}
	return ws, mustLoad(t, h, Request{ConfigFile: "-"})
}
