package tools

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// The policy's protect patterns below the workspace (a nested project's
// agent files, which a pattern cannot bind read-only before they exist)
// are refused by the file tools by name: a write, an edit, a directory on
// the way, and a path reached through a symlink.
func TestWriteFileProtectedPatterns(t *testing.T) {
	ws := t.TempDir()
	for _, d := range []string{"sub/deep", "pkg/.vscode"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "pkg", ".vscode", "settings.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub/deep", filepath.Join(ws, "deep-link")); err != nil {
		t.Fatal(err)
	}
	env := &hostEnv{ws: ws, s: sandbox.ToolSettings{ProtectedPatterns: []string{"*/**/.vscode", "*/**/.envrc", ".yarn/release[s]"}}}
	r := NewBuiltinRegistry()
	for _, p := range []string{"sub/.vscode/tasks.json", "sub/deep/.envrc", "deep-link/.envrc", "sub/deep/.vscode/x/y.json", ".yarn/releases/yarn.cjs"} {
		res := call(t, r, env, "write_file", fmt.Sprintf(`{"path":%q,"content":"pwned"}`, p))
		if res.Success || !strings.Contains(errText(res), "is protected") {
			t.Errorf("write_file %s: %v %q", p, res.Success, errText(res))
		}
	}
	res := call(t, r, env, "edit_file", `{"path":"pkg/.vscode/settings.json","old_string":"{}","new_string":"{\"evil\":1}"}`)
	if res.Success || !strings.Contains(errText(res), "is protected") {
		t.Errorf("edit_file of a matched file: %v %q", res.Success, errText(res))
	}
	for _, p := range []string{"sub/.vscode", "sub/deep/.vscode", ".yarn/releases"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
			t.Errorf("%s was created", p)
		}
	}
	// Not matched: the workspace's own .vscode ("*/**/" is one level
	// down or more), and other files.
	for _, p := range []string{".vscode-notes.txt", "sub/vscode.txt", "sub/deep/envrc.txt"} {
		if res := call(t, r, env, "write_file", fmt.Sprintf(`{"path":%q,"content":"ok"}`, p)); !res.Success {
			t.Errorf("write_file %s refused: %q", p, errText(res))
		}
	}
}
