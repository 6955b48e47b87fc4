package tools

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func editArgs(t *testing.T, m map[string]any) string {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestEditFileReplace(t *testing.T) {
	ws := t.TempDir()
	src := "package main\n\nfunc a() { return 1 }\nfunc b() { return 1 }\n"
	mustWrite(t, filepath.Join(ws, "m.go"), src)
	os.Chmod(filepath.Join(ws, "m.go"), 0o600)
	r, env := NewBuiltinRegistry(), &hostEnv{ws: ws}
	read := func() string { b, _ := os.ReadFile(filepath.Join(ws, "m.go")); return string(b) }

	cases := []struct {
		name string
		args map[string]any
		want string // in the error; "" for success
	}{
		{"missing", map[string]any{"path": "m.go", "old_string": "func c()", "new_string": "x"}, "was not found"},
		{"ambiguous", map[string]any{"path": "m.go", "old_string": "return 1", "new_string": "return 2"}, "occurs 2 times (lines 3, 4)"},
		{"indentation hint", map[string]any{"path": "m.go", "old_string": "  func a()", "new_string": "x"}, "without its leading or trailing whitespace"},
		{"same", map[string]any{"path": "m.go", "old_string": "func a", "new_string": "func a"}, "nothing to change"},
		{"both forms", map[string]any{"path": "m.go", "old_string": "a", "new_string": "b", "diff": "@@ -1 +1 @@\n-a\n+b\n"}, "not both"},
		{"no form", map[string]any{"path": "m.go"}, "give \"old_string\""},
		{"absent file", map[string]any{"path": "nope.go", "old_string": "a", "new_string": "b"}, "does not exist"},
		{"protected", map[string]any{"path": ".git/config", "old_string": "a", "new_string": "b"}, "is protected"},
		{"outside", map[string]any{"path": "../x", "old_string": "a", "new_string": "b"}, "outside the workspace"},
	}
	for _, c := range cases {
		res := call(t, r, env, "edit_file", editArgs(t, c.args))
		if res.Success || !strings.Contains(errText(res), c.want) {
			t.Errorf("%s: success=%v error=%q, want an error with %q", c.name, res.Success, errText(res), c.want)
		}
		if read() != src {
			t.Fatalf("%s: the file changed on a failed edit: %q", c.name, read())
		}
	}

	res := call(t, r, env, "edit_file", editArgs(t, map[string]any{"path": "m.go", "old_string": "func b() { return 1 }", "new_string": "func b() { return 2 }"}))
	if !res.Success {
		t.Fatalf("unique replacement: %s", errText(res))
	}
	if got := field(t, res, "first_line"); got != float64(4) {
		t.Errorf("first_line %v, want 4", got)
	}
	if !strings.Contains(read(), "func b() { return 2 }") || !strings.Contains(read(), "func a() { return 1 }") {
		t.Errorf("after the edit: %q", read())
	}
	res = call(t, r, env, "edit_file", editArgs(t, map[string]any{"path": "m.go", "old_string": "return", "new_string": "yield", "replace_all": true}))
	if !res.Success || field(t, res, "replacements") != float64(2) {
		t.Fatalf("replace_all: %v %s", res.Output, errText(res))
	}
	if strings.Count(read(), "yield") != 2 {
		t.Errorf("after replace_all: %q", read())
	}
	if fi, _ := os.Stat(filepath.Join(ws, "m.go")); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode after edits: %v", fi.Mode().Perm())
	}
	noTemp(t, ws)
}

func TestEditFileDiff(t *testing.T) {
	ws := t.TempDir()
	var lines []string
	for i := 1; i <= 20; i++ {
		lines = append(lines, "line "+itoa(i))
	}
	src := strings.Join(lines, "\n") + "\n"
	mustWrite(t, filepath.Join(ws, "f.txt"), src)
	r, env := NewBuiltinRegistry(), &hostEnv{ws: ws}
	read := func() string { b, _ := os.ReadFile(filepath.Join(ws, "f.txt")); return string(b) }

	// Two hunks; the second's line number is off by two (models miscount):
	// it is found nearby.
	diff := `--- a/f.txt
+++ b/f.txt
@@ -2,3 +2,3 @@
 line 2
-line 3
+LINE THREE
 line 4
@@ -14,3 +14,4 @@
 line 16
 line 17
+inserted
 line 18
`
	res := call(t, r, env, "edit_file", editArgs(t, map[string]any{"path": "f.txt", "diff": diff}))
	if !res.Success {
		t.Fatalf("diff: %s", errText(res))
	}
	if field(t, res, "hunks_applied") != float64(2) || field(t, res, "first_line") != float64(2) {
		t.Errorf("output %v", res.Output)
	}
	want := strings.Replace(strings.Replace(src, "line 3\n", "LINE THREE\n", 1), "line 17\n", "line 17\ninserted\n", 1)
	if read() != want {
		t.Errorf("after the diff:\n%s\nwant\n%s", read(), want)
	}

	// A hunk that matches nowhere fails the whole edit and is named; the
	// first hunk (which would apply) is not applied either.
	before := read()
	bad := "@@ -1,2 +1,2 @@\n-line 1\n+first\n line 2\n@@ -10,2 +10,2 @@\n line 10\n-line eleven\n+x\n"
	res = call(t, r, env, "edit_file", editArgs(t, map[string]any{"path": "f.txt", "diff": bad}))
	if res.Success {
		t.Fatal("a diff with a hunk that does not match was applied")
	}
	for _, w := range []string{"hunk 2 (@@ -10,2 +10,2 @@) does not apply", `line 11 of the file is "line 11", the hunk expects "line eleven"`, "-line eleven", "unchanged"} {
		if !strings.Contains(errText(res), w) {
			t.Errorf("error %q does not say %q", errText(res), w)
		}
	}
	if read() != before {
		t.Errorf("the file changed on a failed diff")
	}
	for name, d := range map[string]string{
		"no hunk":    "just some text\n",
		"two files":  "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-line 1\n+a\n--- a/y\n+++ b/y\n@@ -1 +1 @@\n-a\n+b\n",
		"bad header": "@@ -x +1 @@\n-line 1\n+a\n",
		"no change":  "@@ -1 +1 @@\n line 1\n",
	} {
		res = call(t, r, env, "edit_file", editArgs(t, map[string]any{"path": "f.txt", "diff": d}))
		if res.Success || read() != before {
			t.Errorf("%s: success=%v error=%q", name, res.Success, errText(res))
		}
	}
}

func TestApplyUnifiedDiffEdges(t *testing.T) {
	cases := []struct{ name, in, diff, want string }{
		{"append to a file without a final newline", "a\nb", "@@ -2 +2,2 @@\n b\n+c\n", "a\nb\nc\n"},
		{"no newline at end, kept", "a\nb\n", "@@ -2 +2 @@\n-b\n+B\n\\ No newline at end of file\n", "a\nB"},
		{"CRLF file", "a\r\nb\r\n", "@@ -1,2 +1,2 @@\n a\n-b\n+c\n", "a\r\nc\r\n"},
		{"empty file", "", "@@ -0,0 +1,2 @@\n+x\n+y\n", "x\ny\n"},
		{"insert after line 1", "a\nb\n", "@@ -1,0 +2 @@\n+mid\n", "a\nmid\nb\n"},
		{"delete all", "a\nb\n", "@@ -1,2 +0,0 @@\n-a\n-b\n", ""},
		{"empty context line without its space", "a\n\nb\n", "@@ -1,3 +1,3 @@\n a\n\n-b\n+c\n", "a\n\nc\n"},
	}
	for _, c := range cases {
		got, _, _, err := applyUnifiedDiff([]byte(c.in), c.diff)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if string(got) != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}
