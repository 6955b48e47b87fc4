package policy

import (
	"path/filepath"
	"strings"
	"testing"
)

// Review 61.

// TestReview61PythonModuleBytecodeAndExtension
//
// Finding (MEDIUM): review 59 keeps `python3 -m MOD`'s MOD.py (and its
// packages' __init__.py) from being made at the work tree's top, and
// protects them where they exist, but Python's path finder takes a
// module from any of its loaders' suffixes, extension modules first:
// MOD.cpython-311-x86_64-linux-gnu.so, MOD.abi3.so, MOD.so, then MOD.py,
// then a sourceless MOD.pyc. The sandbox makes <top>/json.pyc (checked
// by hand: `python3 -c 'import py_compile; …'` inside, then
// `echo {} | python3 -m json.tool` on the host printed the sandbox's
// text), or tools/lint.abi3.so beside the protected tools/lint.py
// (which Python then no longer reads), and the next git diff / git lint
// on the host runs it. docs/profiles.md says the named module is "kept
// from being made at the top".
func TestReview61PythonModuleBytecodeAndExtension(t *testing.T) {
	// Fixed by saying so: no list of names closes it (json.pyc,
	// json.abi3.so, json.cpython-311-x86_64-linux-gnu.so, a module the
	// named one imports), and a placeholder json.py shadowed the
	// standard library inside the sandbox (TestReview61PythonModule-
	// PlaceholderShadowsStdlib). The project's own module files are
	// protected where they are; the run warns, naming the command and
	// the knob (-P, PYTHONSAFEPATH) that closes it.
	ws, res := repoWithGitConfig(t, "[diff \"json\"]\n\ttextconv = python3 -m json.tool\n[alias]\n\tlint = !python3 -m tools.lint\n[alias]\n\tsafe = !python3 -P -m tools.safe\n",
		map[string]string{"tools/__init__.py": "", "tools/lint.py": "print('lint')\n"})
	for _, rel := range []string{"tools/__init__.py", "tools/lint.py"} {
		if acc, _, _ := res.CheckPath(filepath.Join(ws, rel)); acc == AccessReadWrite {
			t.Errorf("%s, which `git lint` runs, is writable", rel)
		}
	}
	if acc, _, _ := res.CheckPath(filepath.Join(ws, "json.py")); acc != AccessReadWrite {
		t.Errorf("json.py is %s: a placeholder there shadows the standard library's json inside", acc)
	}
	var warned []string
	for _, w := range res.Warnings {
		if strings.Contains(w.Msg, "import path") {
			warned = append(warned, w.Msg)
		}
	}
	if len(warned) != 2 || !strings.Contains(strings.Join(warned, "\n"), "-m json.tool") || !strings.Contains(warned[0], "PYTHONSAFEPATH") {
		t.Errorf("want one warning for each of the two commands without -P, naming it and the knob; got %q", warned)
	}
}

// TestReview61SubshellArithmetic
//
// Finding (LOW): shellWord ends "$((1+1))" at its first ")", and read
// takes the second for the end of the enclosing subshell: the cd before
// it is undone, so `(cd tools && n=$((n+1)) && ./fsmon.sh)` protects a
// placeholder fsmon.sh at the top and leaves tools/fsmon.sh, which git
// runs, writable. The same for a `case` pattern's ")" inside a subshell.
func TestReview61SubshellArithmetic(t *testing.T) {
	for _, c := range []struct{ cmd, want string }{
		{"!(cd tools && n=$((1+1)) && ./fsmon.sh)", "tools/fsmon.sh"},
		{"!(cd tools && echo $((1+2)) && ./fsmon.sh)", "tools/fsmon.sh"},
	} {
		got := commandFiles(c.cmd)
		ok := false
		for _, f := range got {
			if f.word == c.want && !f.ifExists {
				ok = true
			}
		}
		if !ok {
			t.Errorf("commandFiles(%q) = %+v, want %s", c.cmd, got, c.want)
		}
	}
}

// TestReview61GlobAndBraceWords
//
// Finding (LOW): a word with a glob or a brace expansion is taken as one
// literal path: `sh tools/{a,b}.sh` and `sh tools/*.sh` make placeholder
// files named "{a,b}.sh" and "*.sh" in the user's tools/ for the run (a
// later `sh tools/*.sh` inside runs the empty one too) and leave
// tools/a.sh and tools/b.sh, which the shell expands them to and git
// runs, writable.
func TestReview61GlobAndBraceWords(t *testing.T) {
	h := testHost(t)
	ws := h.Cwd
	write(t, filepath.Join(ws, ".git", "HEAD"), "ref: refs/heads/main\n")
	write(t, filepath.Join(ws, "tools", "a.sh"), "echo a\n")
	write(t, filepath.Join(ws, "tools", "b.sh"), "echo b\n")
	write(t, filepath.Join(ws, "hooks", "c.sh"), "echo c\n")
	write(t, filepath.Join(h.Home, ".gitconfig"), "[alias]\n\tab = !sh tools/{a,b}.sh\n\tall = !sh hooks/*.sh\n")
	res := mustLoad(t, h, Request{ConfigFile: "-"})
	for _, m := range res.Policy.Mounts {
		if strings.ContainsAny(m.Dest, "{*?[") {
			t.Errorf("a %s mount (placeholder) at %s", m.Kind, m.Dest)
		}
	}
	for _, rel := range []string{"tools/a.sh", "tools/b.sh", "hooks/c.sh"} {
		if acc, _, _ := res.CheckPath(filepath.Join(ws, rel)); acc == AccessReadWrite {
			t.Errorf("%s, which the alias runs, is writable", rel)
		}
	}
}

// TestReview61PrefixOptionArguments
//
// Finding (LOW-MEDIUM, not new in 048e65e): a command prefix's option
// that takes an argument (`env -C DIR`, `env --chdir=DIR`, `nice -n 5`,
// `timeout -s KILL 5`, `sudo -u bob`, `ionice -c 3`, `stdbuf -o L`) has
// its argument read as the program; the real program becomes an
// argument, ifExists (no placeholder where it is missing, so the sandbox
// makes it), and env -C's directory is not followed (sub/x.sh, which
// runs, stays writable; a placeholder x.sh is made at the top). The same
// for uv run --directory DIR and bun --cwd DIR. A line break is no
// command separator to read either: the second line's program is an
// argument of the first's.
func TestReview61PrefixOptionArguments(t *testing.T) {
	for _, c := range []struct{ cmd, want string }{
		{"!nice -n 5 ./x.sh", "x.sh"},
		{"!timeout -s KILL 5 ./x.sh", "x.sh"},
		{"!sudo -u bob ./x.sh", "x.sh"},
		{"!env -u FOO ./x.sh", "x.sh"},
		{"!env -C sub ./x.sh", "sub/x.sh"},
		{"!env --chdir=sub ./x.sh", "sub/x.sh"},
		{"!uv run --directory sub x.py", "sub/x.py"},
		{"!./a.sh\n./x.sh", "x.sh"},
	} {
		got := commandFiles(c.cmd)
		ok := false
		for _, f := range got {
			if filepath.Clean(f.word) == c.want && !f.ifExists {
				ok = true
			}
		}
		if !ok {
			t.Errorf("commandFiles(%q) = %+v, want %s (kept from being made)", c.cmd, got, c.want)
		}
	}
}

// TestReview61PythonAttachedModuleOption
//
// Finding (LOW): python's -m attached to its name or after other flags
// in one word (-mjson.tool, -um json.tool, -Bm tools.lint) is not read:
// the module's files are neither protected nor kept from being made.
// (-I/-P forms keep the current directory off sys.path and are safe.)
func TestReview61PythonAttachedModuleOption(t *testing.T) {
	for _, c := range []struct{ cmd, want string }{
		{"!python3 -mtools.lint", "tools/lint.py"},
		{"!python3 -um tools.lint", "tools/lint.py"},
		{"!python3 -Bm tools.lint", "tools/lint.py"},
	} {
		got := commandFiles(c.cmd)
		ok := false
		// Protected where it is (ifExists: no placeholder, which would
		// shadow an installed module inside), and the command noted.
		noted := false
		for _, f := range got {
			if f.word == c.want {
				ok = true
			}
			noted = noted || f.pythonCwd
		}
		if !ok || !noted {
			t.Errorf("commandFiles(%q) = %+v, want %s and a pythonCwd note", c.cmd, got, c.want)
		}
	}
}
