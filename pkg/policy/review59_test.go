package policy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Review 59.

// writableOrUnaudited reports whether the sandbox of res can make p (a
// path below the workspace) and keep it: p is writable inside, and no
// created pattern of the run's audit matches it.
func writableOrUnaudited(res *Result, p string) bool {
	acc, _, err := res.CheckPath(p)
	if err != nil || acc != AccessReadWrite {
		return false
	}
	if a := res.GitAudit; a != nil {
		for _, cp := range a.created {
			if ok, _ := filepath.Match(cp.Path, p); ok {
				return false
			}
		}
	}
	return true
}

// TestReview59PythonModuleFromWorkTreeTop
//
// Finding (HIGH; fixed for the module named, documented for what it
// imports): `python3 -m MOD` puts the current directory first on
// sys.path, and git runs filters, textconv, aliases and fsmonitor from
// the work tree's top. commandFiles names MOD.py and MOD/__main__.py
// ifExists only, so where they do not exist (the usual case: the module
// is installed, not the project's) nothing is protected, and the
// sandbox makes <top>/json.py (or <top>/json/__init__.py, or a module
// the installed one imports, <top>/argparse.py). The widely given
// `diff.json.textconv = python3 -m json.tool`, or what
// `nbstripout --install` writes (`filter.nbstripout.clean = "…/python3"
// -m nbstripout`, `diff.ipynb.textconv = … -m nbstripout -t`), then runs
// the sandbox's file as the user on the next `git diff` / `git status`.
// Checked by hand: a json.py in the current directory makes
// `python3 -m json.tool` print what it says (Python 3.11).
func TestReview59PythonModuleFromWorkTreeTop(t *testing.T) {
	// Closed by the warning of review 61 (TestReview61PythonModule-
	// BytecodeAndExtension): a placeholder json.py shadowed the standard
	// library inside, and json.pyc or json.abi3.so did what json.py did.
	_, res := repoWithGitConfig(t, "[diff \"json\"]\n\ttextconv = python3 -m json.tool\n[filter \"nbstripout\"]\n\tclean = \"/usr/bin/python3\" -m nbstripout\n", nil)
	n := 0
	for _, w := range res.Warnings {
		if strings.Contains(w.Msg, "import path") {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d warnings about Python's import path, want one for each command: %+v", n, res.Warnings)
	}
}

// TestReview59PythonModuleParentPackage
//
// Finding (MEDIUM): `python3 -m tools.lint` imports the package tools
// first: tools/__init__.py runs before tools/lint.py, and it is
// neither protected when it exists nor kept from being made.
func TestReview59PythonModuleParentPackage(t *testing.T) {
	got := commandFiles("!python3 -m tools.lint --fix")
	if !slices.ContainsFunc(got, func(f cmdFile) bool { return f.word == "tools/__init__.py" }) {
		t.Errorf("%+v: want tools/__init__.py (run first by -m tools.lint)", got)
	}
}

// TestReview59SubshellCd
//
// Finding (MEDIUM): "(" and ")" are not word boundaries to shellWord, so
// `!(cd tools && ./run.sh)` (a subshell, the usual way to run a script
// from its directory) reads as the program "(cd" and the program
// "./run.sh)": tools/run.sh, which runs, stays writable, and a
// placeholder named "run.sh)" is made at the work tree's top for the run.
func TestReview59SubshellCd(t *testing.T) {
	ws, res := repoWithGitConfig(t, "[alias]\n\trel = \"!(cd tools && ./run.sh)\"\n", map[string]string{"tools/run.sh": "#!/bin/sh\necho ok\n"})
	if acc, _, _ := res.CheckPath(filepath.Join(ws, "tools", "run.sh")); acc == AccessReadWrite {
		t.Errorf("tools/run.sh, which `git rel` runs, is writable")
	}
	for _, m := range res.Policy.Mounts {
		if strings.ContainsAny(m.Dest, "()") {
			t.Errorf("a %s mount at %s", m.Kind, m.Dest)
		}
	}
}

// TestReview59CommandFilesOptionForms
//
// Finding (LOW): spellings the reader misses, each leaving the file that
// runs writable (or, for perl -x, taking the script for -x's argument):
//   - node's file options with "=": --import=./x.mjs, --require=./x.js,
//     --loader=./x.mjs (scriptWord drops an attached fileFlags value);
//   - ssh's attached -F (-F./cfg), -o with a space ("ProxyCommand CMD",
//     as ssh_config writes it), and the other command options
//     KnownHostsCommand and LocalCommand;
//   - perl -x takes no separate argument (-x or -xDIR);
//   - `cd "$(git rev-parse --show-toplevel)/tools"` (cd does not go
//     through place()): the directory is lost, and ./x.sh is only
//     ifExists.
func TestReview59CommandFilesOptionForms(t *testing.T) {
	for in, want := range map[string]string{
		"node --import=./tools/r.mjs tools/x.js":                   "tools/r.mjs",
		"node --require=./tools/p.js tools/x.js":                   "tools/p.js",
		"node --loader=./tools/l.mjs tools/x.js":                   "tools/l.mjs",
		"ssh -F./tools/ssh_config":                                 "tools/ssh_config",
		"ssh -o 'ProxyCommand ./tools/proxy %h %p'":                "tools/proxy",
		"ssh -o KnownHostsCommand=./tools/kh":                      "tools/kh",
		"ssh -o PermitLocalCommand=yes -o LocalCommand=./tools/lc": "tools/lc",
		"perl -x tools/x.pl":                                       "tools/x.pl",
		"cd \"$(git rev-parse --show-toplevel)/tools\" && ./x.sh":  "tools/x.sh",
	} {
		got := commandFiles(in)
		if !slices.ContainsFunc(got, func(f cmdFile) bool { return filepath.Clean(f.word) == want && !f.ifExists }) {
			t.Errorf("%q: %+v, want %s", in, got, want)
		}
	}
}

// TestReview59DotEnvVirtualenvStaysWritable
//
// Finding (MEDIUM, breaks normal use; docs say otherwise): "$NSBOX_RW/.en[v]"
// matches directories too, while the hide of .env* takes regular files
// only. A virtualenv named .env (`python -m venv .env`, a name the Python
// docs' own examples, VS Code's Python extension and many tutorials use)
// is made read-only whole: pip install, a new console script, __pycache__
// all fail. docs/security.md says existing .env files are hidden; it
// does not say a .env directory becomes read-only, nor that one a run
// makes (`python -m venv .env`) is renamed .env.nsbox-quarantine at its
// end.
func TestReview59DotEnvVirtualenvStaysWritable(t *testing.T) {
	h := testHost(t)
	ws := h.Cwd
	write(t, filepath.Join(ws, ".git", "HEAD"), "ref: refs/heads/main\n")
	write(t, filepath.Join(ws, ".env", "pyvenv.cfg"), "home = /usr/bin\n")
	write(t, filepath.Join(ws, ".env", "lib", "python3.11", "site-packages", "x.py"), "\n")
	if err := os.MkdirAll(filepath.Join(ws, ".env", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	res := mustLoad(t, h, Request{ConfigFile: "-"})
	for _, rel := range []string{".env/lib/python3.11/site-packages/x.py", ".env/bin/newtool"} {
		if acc, rule, _ := res.CheckPath(filepath.Join(ws, rel)); acc != AccessReadWrite {
			t.Errorf("%s in a virtualenv named .env is %s (%s %s: %s)", rel, acc, rule.Kind, rule.Dest, rule.Why)
		}
	}
}

// TestReview59NestedGlobalJSON
//
// Finding (LOW, breaks normal use): "$NSBOX_RW/*/**/global.json" makes
// every global.json at any depth read-only, and quarantines one a run
// makes. The name is a common data file (i18next namespaces:
// public/locales/en/global.json; app configs); .NET reads global.json
// only from the directory dotnet runs in and its parents, i.e. beside a
// project or solution. An agent editing a translation file gets "is
// protected".
func TestReview59NestedGlobalJSON(t *testing.T) {
	ws, res := repoWithGitConfig(t, "", map[string]string{"package.json": "{}\n", "public/locales/en/global.json": `{"save":"Save"}` + "\n"})
	p := filepath.Join(ws, "public", "locales", "en", "global.json")
	if acc, rule, _ := res.CheckPath(p); acc != AccessReadWrite {
		t.Errorf("a translation file public/locales/en/global.json is %s (%s)", acc, rule.Why)
	}
}
