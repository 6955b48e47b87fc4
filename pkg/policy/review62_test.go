package policy

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Review 62: commit 3afe74d (python -m/-c warning, glob/brace words,
// prefix options) and the command reader as it stands.

// hasFile reports whether fs holds want (cleaned), and whether it is
// kept from being made (not ifExists).
func hasFile(fs []cmdFile, want string) (found, kept bool) {
	for _, f := range fs {
		if filepath.Clean(f.word) == want {
			found = true
			kept = kept || !f.ifExists
		}
	}
	return
}

func hasPythonNote(fs []cmdFile) bool {
	for _, f := range fs {
		if f.pythonCwd {
			return true
		}
	}
	return false
}

// TestReview62GlobWordNewMatch
//
// Finding (MEDIUM): a glob word protects the files it matches when the
// run starts, and nothing else: the directory stays writable. The shell
// on the host expands the pattern again when git runs the command, so a
// file the sandbox adds that matches runs too; for `sh hooks/*.sh` the
// first match (in sort order) is the script, the rest are its arguments:
// the sandbox makes hooks/0.sh and `git all` on the host runs it.
func TestReview62GlobWordNewMatch(t *testing.T) {
	ws, res := repoWithGitConfig(t, "[alias]\n\tall = !sh hooks/*.sh\n\teach = !for f in tools/*.sh; do sh \"$f\"; done\n",
		map[string]string{"hooks/c.sh": "echo c\n", "tools/a.sh": "echo a\n"})
	for _, rel := range []string{"hooks/0.sh", "tools/0.sh"} {
		if acc, _, _ := res.CheckPath(filepath.Join(ws, rel)); acc == AccessReadWrite {
			t.Errorf("%s can be made inside, and the host's shell expands the alias's pattern to it", rel)
		}
	}
}

// TestReview62EnvSplitString
//
// Finding (LOW-MEDIUM, regression in 3afe74d): prefixArgFlags lists
// env's -S/--split-string as an option whose argument is skipped; but
// that argument is the command (split on spaces). Before 3afe74d,
// `/usr/bin/env -S python3 -u tools/x.py` protected tools/x.py; now
// python3 is skipped, -u is read as env's option and tools/x.py is the
// "program" (protected only because of the slash; x.py at the top is
// not protected at all), and `env -S 'python3 x.py'` names nothing.
func TestReview62EnvSplitString(t *testing.T) {
	for _, c := range []struct{ cmd, want string }{
		{"!/usr/bin/env -S python3 -u x.py", "x.py"},
		{"!env -S 'python3 x.py'", "x.py"},
		{"!env --split-string='sh x.sh'", "x.sh"},
		{"!env -S \"sh -c ./x\"", "x"},
	} {
		got := commandFiles(c.cmd)
		if _, kept := hasFile(got, c.want); !kept {
			t.Errorf("commandFiles(%q) = %+v, want %s kept from being made", c.cmd, got, c.want)
		}
	}
}

// TestReview62BraceExpansionExponential
//
// Finding (LOW-MEDIUM, new in 3afe74d): braceExpand stops at 16 words
// only after it has expanded the next alternative in full: every level
// makes (at least) two recursive calls, 2^n for n brace groups. One word
// of 18 "{a,b}" took 0.15 s; 40 of them in a config nsbox reads (the
// user's, GIT_CONFIG_PARAMETERS, a repository's .git/config a killed or
// concurrent run left) hang `nsbox run` before the sandbox starts.
func TestReview62BraceExpansionExponential(t *testing.T) {
	word := "!sh " + strings.Repeat("{a,b}", 40)
	done := make(chan []cmdFile, 1)
	go func() { done <- commandFiles(word) }()
	select {
	case got := <-done:
		if len(got) > maxBraceWords {
			t.Errorf("%d words, want at most %d", len(got), maxBraceWords)
		}
	case <-time.After(2 * time.Second):
		t.Fatalf("commandFiles of 40 brace groups still running after 2s (exponential)")
	}
}

// TestReview62PythonSafePathInCommand
//
// Finding (LOW, harm to normal work): the warning tells the user to "set
// PYTHONSAFEPATH=1"; set where git runs it, in the command
// (`PYTHONSAFEPATH=1 python3 -m nbstripout`, `env PYTHONSAFEPATH=1
// python3 -m x`), it closes the hole, and every run still warns. Only
// nsbox's own environment silences it.
func TestReview62PythonSafePathInCommand(t *testing.T) {
	for _, c := range []string{
		"!PYTHONSAFEPATH=1 python3 -m x",
		"!env PYTHONSAFEPATH=1 python3 -m x",
		"PYTHONSAFEPATH=1 python3 -c 'import x'",
	} {
		if got := commandFiles(c); hasPythonNote(got) {
			t.Errorf("commandFiles(%q) = %+v: notes a cwd import path that PYTHONSAFEPATH=1 closes", c, got)
		}
	}
	// And -P attached to -c (-Pc CODE): the code is not a script.
	if got := commandFiles("!python3 -Pc 'import tools/x'"); len(got) != 0 {
		t.Errorf("python3 -Pc CODE: %+v, want nothing (the code read as a script path)", got)
	}
}

// TestReview62PythonScriptDirectory
//
// Finding (MEDIUM): `python3 tools/fsmon.py` puts tools/ first on
// sys.path (as -m and -c put the current directory there, which 3afe74d
// warns about): the script is protected, but tools/json.py (or
// subprocess.py, or any module the script imports that is not built in
// or frozen), which the sandbox may make, runs as the user on the next
// git status. Checked by hand with the host's python3. Neither warned
// nor closed; -P / PYTHONSAFEPATH close it too.
func TestReview62PythonScriptDirectory(t *testing.T) {
	ws, res := repoWithGitConfig(t, "[core]\n\tfsmonitor = python3 tools/fsmon.py\n",
		map[string]string{"tools/fsmon.py": "import json\n"})
	warned := false
	for _, w := range res.Warnings {
		warned = warned || strings.Contains(w.Msg, "import path")
	}
	if acc, _, _ := res.CheckPath(filepath.Join(ws, "tools", "json.py")); acc == AccessReadWrite && !warned {
		t.Errorf("tools/json.py is writable (python3 tools/fsmon.py imports it before the standard library's) and the run does not warn")
	}
}

// TestReview62UvRunCommand
//
// Finding (LOW-MEDIUM): `uv run` (and poetry run, pdm run, conda run,
// bundle exec, ...) runs a command, not only a script: `uv run python -m
// tools.lint` takes "python" for the script (ifExists), and tools/lint.py
// is neither protected nor warned about; `uv run python x.py` leaves
// x.py writable. 3afe74d taught the reader uv run --directory.
func TestReview62UvRunCommand(t *testing.T) {
	got := commandFiles("!uv run python -m tools.lint")
	if found, _ := hasFile(got, "tools/lint.py"); !found || !hasPythonNote(got) {
		t.Errorf("uv run python -m tools.lint: %+v, want tools/lint.py and a pythonCwd note", got)
	}
	got = commandFiles("!uv run --with ruff python x.py")
	if _, kept := hasFile(got, "x.py"); !kept {
		t.Errorf("uv run --with ruff python x.py: %+v, want x.py kept from being made", got)
	}
}

// TestReview62CdOptions
//
// Finding (LOW, not new): cd's options are read as its directory:
// `cd -P tools && ./x` protects a placeholder "-P/x" (a directory named
// -P made in the user's work tree for the run) and leaves tools/x, which
// runs, writable. The same for `cd -- tools` and `cd -L tools`.
func TestReview62CdOptions(t *testing.T) {
	for _, c := range []string{"!cd -P tools && ./x", "!cd -- tools && ./x", "!cd -L tools; ./x"} {
		got := commandFiles(c)
		if _, kept := hasFile(got, "tools/x"); !kept {
			t.Errorf("commandFiles(%q) = %+v, want tools/x kept from being made", c, got)
		}
	}
}

// TestReview62EnvSafePathWarningOnce: holds (no finding) — recorded for
// the report: a nbstripout repository's two commands warn twice per run.
