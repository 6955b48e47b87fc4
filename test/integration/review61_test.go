package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Review 61.

// Finding (MEDIUM, breaks normal use; new in 048e65e): review 59's
// placeholders for `python3 -m json.tool` (the widely given
// `diff.json.textconv`) are an empty json.py and a json/__init__.py at
// the work tree's top. Inside the sandbox they are what `import json`
// finds first from there (python3 -c, python3 -m pytest, a REPL: the
// current directory leads sys.path): every program that uses json
// fails with "module 'json' has no attribute 'dumps'", for a reason the
// agent cannot see. (A placeholder that blocks the name without being
// importable, a directory named json.py, or no placeholder and the
// end-of-run audit, would not shadow the standard library.)
func TestReview61PythonModulePlaceholderShadowsStdlib(t *testing.T) {
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		u.mkdirs(t, filepath.Join(ws, ".git"))
		u.writeFile(t, filepath.Join(ws, ".git", "HEAD"), "ref: refs/heads/main\n", 0o644)
		u.writeFile(t, filepath.Join(ws, ".git", "config"), "[core]\n\trepositoryformatversion = 0\n[diff \"json\"]\n\ttextconv = python3 -m json.tool\n", 0o644)
		r := u.sh(t, &runOpts{dir: ws}, nil, py+` -c 'import json; print(json.dumps({"ok": 1}))'`)
		if r.code != 0 || !strings.Contains(r.stdout, `{"ok": 1}`) {
			t.Errorf("`import json` at the top of a repository whose git config runs python3 -m json.tool fails inside: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
	})
}
