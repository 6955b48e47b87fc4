package policy

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Review 66: commits 3afe74d..5510c0b (runners, env -S splicing, glob
// words protecting their directory, the Python import-path warning).

// TestReview66EnvSplitQuadratic
//
// Finding (MEDIUM, new in 43b66f3): env -S=VAL splices VAL in front of the
// rest of the line (cmd = val + " " + cmd) with no bound on how often. A
// value of env -S=-S=-S=... re-reads the whole remaining word after every
// three bytes: quadratic. 64 KiB (what readConfigFile takes from one
// config file, which a sandbox can write in the workspace's .git/config)
// took 14 s in commandFiles alone, before the sandbox starts, on every run.
func TestReview66EnvSplitQuadratic(t *testing.T) {
	val := "!env " + strings.Repeat("-S=", (60<<10)/3) + "sh x.sh"
	done := make(chan []cmdFile, 1)
	go func() { done <- commandFiles(val) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatalf("commandFiles of a 60 KiB env -S=-S=... value still running after 2s (quadratic splicing)")
	}
}

// TestReview66GlobArgumentPlaceholderDir
//
// Finding (MEDIUM, new in 43b66f3): a pattern word's directory is
// protected whole, as a pointer that is not ifExists, so a directory that
// does not exist gets a placeholder; and any word with a slash counts,
// arguments too. A sed expression (`sed 's/^.*: //'`, which filepath reads
// as s/^.*: ) makes an empty read-only directory "s" at the work tree's top
// (the old code globbed existing files only: nothing), and `!eslint
// src/*.js` (an argument, not something that runs) makes src/ read-only
// whole, the directory the agent edits.
func TestReview66GlobArgumentPlaceholderDir(t *testing.T) {
	ws, res := repoWithGitConfig(t, "[alias]\n\tremotes = !git remote -v | sed 's/^.*: //'\n\tlint = !eslint src/*.js\n",
		map[string]string{"src/a.js": "1\n"})
	for _, p := range res.Placeholders {
		if p.Path == filepath.Join(ws, "s") || strings.HasPrefix(p.Path, filepath.Join(ws, "s")+"/") {
			t.Errorf("placeholder %+v made for a sed expression", p)
		}
	}
	for _, rel := range []string{"src/b.js", "src/a.js"} {
		if acc, _, _ := res.CheckPath(filepath.Join(ws, rel)); acc != AccessReadWrite {
			t.Errorf("%s: %v, want read-write (`eslint src/*.js` lints, it does not run them)", rel, acc)
		}
	}
}

// TestReview66RunnerAfterPrefix
//
// Finding (MEDIUM, regression in 43b66f3): uv left interpreterFamily for
// commandRunners, which are recognized only as the first program word
// (prefix == ""). `env uv run x.py`, `exec uv run x.py` (and `timeout 60
// poetry run python x.py`, `nice bundle exec ruby x.rb`) name nothing
// now; at 3afe74d the first two protected x.py. A runner's global option
// with an argument before its subcommand (`uv --directory tools run
// x.py`, `poetry -C tools run ...`) is taken for another subcommand: at
// 3afe74d the first protected tools/x.py. conda run's --cwd DIR is
// skipped as an argument, not followed: tools/x.py, what runs, stays
// writable and x.py at the top is protected instead.
func TestReview66RunnerAfterPrefix(t *testing.T) {
	for _, c := range []struct{ cmd, want string }{
		{"!env uv run x.py", "x.py"},
		{"!exec uv run x.py", "x.py"},
		{"!timeout 60 poetry run python x.py", "x.py"},
		{"!nice bundle exec ruby x.rb", "x.rb"},
		{"!uv --directory tools run x.py", "tools/x.py"},
		{"!poetry -C tools run python x.py", "tools/x.py"},
		{"!conda run --cwd tools python x.py", "tools/x.py"},
		{"!mise exec python@3.12 -- python x.py", "x.py"},
		{"!npx -c 'sh x.sh'", "x.sh"},
	} {
		got := commandFiles(c.cmd)
		if _, kept := hasFile(got, c.want); !kept {
			t.Errorf("commandFiles(%q) = %+v, want %s kept from being made", c.cmd, got, c.want)
		}
	}
}

// TestReview66PythonSafePathIgnoredByE
//
// Finding (LOW): python -E ignores every PYTHON* variable, PYTHONSAFEPATH
// included, so `PYTHONSAFEPATH=1 python3 -E -m json.tool` (or -Es, the
// flags of many system scripts) imports from the work tree again; the
// reader takes PYTHONSAFEPATH for -P and notes nothing. (And nsbox's own
// PYTHONSAFEPATH silences the warning for such a command too.)
func TestReview66PythonSafePathIgnoredByE(t *testing.T) {
	for _, c := range []string{"!PYTHONSAFEPATH=1 python3 -E -m json.tool", "!PYTHONSAFEPATH=1 python3 -Es tools/x.py"} {
		if got := commandFiles(c); !hasPythonNote(got) {
			t.Errorf("commandFiles(%q) = %+v: no note, and -E drops PYTHONSAFEPATH", c, got)
		}
	}
}

// TestReview66PythonWarningOncePerCommand
//
// Finding (LOW): a value with whitespace inside (a tab, as `git config`
// writes none but an editor may) is two values to the parser (spaced and
// kept), and the warning's key is the value's text: one command, two
// warnings.
func TestReview66PythonWarningOncePerCommand(t *testing.T) {
	_, res := repoWithGitConfig(t, "[alias]\n\tj = !python3\t-m json.tool\n", nil)
	n := 0
	for _, w := range res.Warnings {
		if strings.Contains(w.Msg, "import path") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d import-path warnings for one command, want 1", n)
	}
}
