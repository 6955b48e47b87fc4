package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEditFile: edit_file through nsbox tools call, in the sandbox: a
// unique replacement, an ambiguous and a missing old_string refused with
// the file unchanged, a unified diff, and a protected path refused
// (issue 19, item 7).
func TestEditFile(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		f := filepath.Join(ws, "app.py")
		u.writeFile(t, f, "x = 1\ny = 1\nprint(x + y)\n", 0o640)
		read := func() string { b, _ := os.ReadFile(f); return string(b) }

		for args, want := range map[string]string{
			`{"path":"app.py","old_string":"= 1","new_string":"= 2"}`:     "occurs 2 times (lines 1, 2)",
			`{"path":"app.py","old_string":"z = 1","new_string":"z = 2"}`: "was not found",
			`{"path":".git/config","old_string":"a","new_string":"b"}`:    "protected",
		} {
			tr, _ := u.callTool(t, ws, "edit_file", args)
			if tr.Success || !strings.Contains(tr.err(), want) {
				t.Errorf("edit_file %s: success=%v error=%q, want %q", args, tr.Success, tr.err(), want)
			}
		}
		if read() != "x = 1\ny = 1\nprint(x + y)\n" {
			t.Fatalf("the file changed on failed edits: %q", read())
		}
		tr, _ := u.callTool(t, ws, "edit_file", `{"path":"app.py","old_string":"y = 1","new_string":"y = 41"}`)
		if !tr.Success {
			t.Fatalf("unique replacement: %s", tr.err())
		}
		diff := "--- a/app.py\n+++ b/app.py\n@@ -2,2 +2,2 @@\n y = 41\n-print(x + y)\n+print(x + y, 'done')\n"
		tr, _ = u.callTool(t, ws, "edit_file", jsonArgs(t, map[string]any{"path": "app.py", "diff": diff}))
		if !tr.Success {
			t.Fatalf("diff: %s", tr.err())
		}
		if got := read(); got != "x = 1\ny = 41\nprint(x + y, 'done')\n" {
			t.Errorf("after the edits: %q", got)
		}
		if fi, _ := os.Stat(f); fi.Mode().Perm() != 0o640 {
			t.Errorf("mode after the edits: %v", fi.Mode().Perm())
		}
		tr, _ = u.callTool(t, ws, "edit_file", jsonArgs(t, map[string]any{"path": "app.py", "diff": "@@ -1 +1 @@\n-x = 7\n+x = 8\n"}))
		if tr.Success || !strings.Contains(tr.err(), "hunk 1 (@@ -1 +1 @@) does not apply") {
			t.Errorf("a hunk that does not apply: %v %q", tr.Success, tr.err())
		}
	})
}
