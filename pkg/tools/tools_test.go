package tools

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

func listPaths(t *testing.T, res Result) []string {
	t.Helper()
	if !res.Success {
		t.Fatalf("list_directory failed: %s", errText(res))
	}
	var out []string
	for _, e := range field(t, res, "entries").([]any) {
		out = append(out, e.(map[string]any)["path"].(string))
	}
	return out
}

func TestGitignore(t *testing.T) {
	ws := t.TempDir()
	for _, d := range []string{"src/gen", "build", "docs", ".git/info", "node_modules/x"} {
		os.MkdirAll(filepath.Join(ws, d), 0o755)
	}
	mustWrite(t, filepath.Join(ws, ".gitignore"), "# comment\n*.log\nbuild/\nnode_modules\n!keep.log\n")
	mustWrite(t, filepath.Join(ws, "src", ".gitignore"), "gen/\n")
	mustWrite(t, filepath.Join(ws, ".git", "info", "exclude"), "secret.txt\n")
	for _, f := range []string{"a.go", "x.log", "keep.log", "secret.txt", "build/out", "src/main.go", "src/gen/z.go", "docs/readme.md", "node_modules/x/i.js", ".git/HEAD"} {
		mustWrite(t, filepath.Join(ws, f), "package x // TODO\n")
	}
	r := NewBuiltinRegistry()
	env := &hostEnv{ws: ws}
	got := listPaths(t, call(t, r, env, "list_directory", `{"recursive":true}`))
	// .git is left out unless include_ignored (below: 10 entries with it).
	want := []string{".gitignore", "a.go", "docs", "docs/readme.md", "keep.log", "src", "src/.gitignore", "src/main.go"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("recursive listing:\n got %v\nwant %v", got, want)
	}
	// A subdirectory listing still applies the ancestors' .gitignore.
	got = listPaths(t, call(t, r, env, "list_directory", `{"path":"src"}`))
	if strings.Join(got, ",") != "src/.gitignore,src/main.go" {
		t.Errorf("src listing: %v", got)
	}
	got = listPaths(t, call(t, r, env, "list_directory", `{"include_ignored":true}`))
	if len(got) != 10 {
		t.Errorf("include_ignored: %v", got)
	}
	got = listPaths(t, call(t, r, env, "list_directory", `{"recursive":true,"pattern":"*.go"}`))
	if strings.Join(got, ",") != "a.go,src/main.go" {
		t.Errorf("pattern *.go: %v", got)
	}
	got = listPaths(t, call(t, r, env, "list_directory", `{"recursive":true,"pattern":"src/**/*.go","include_ignored":true}`))
	if strings.Join(got, ",") != "src/gen/z.go,src/main.go" {
		t.Errorf("pattern src/**/*.go: %v", got)
	}
	// search_files skips the ignored files too.
	res := call(t, r, env, "search_files", `{"pattern":"TODO"}`)
	var files []string
	for _, m := range field(t, res, "matches").([]any) {
		files = append(files, m.(map[string]any)["path"].(string))
	}
	sort.Strings(files)
	if strings.Join(files, ",") != "a.go,docs/readme.md,keep.log,src/main.go" {
		t.Errorf("search matches in %v", files)
	}
}

func TestListBounded(t *testing.T) {
	ws := t.TempDir()
	for i := 0; i < 30; i++ {
		mustWrite(t, filepath.Join(ws, fmt.Sprintf("f%02d", i)), "")
	}
	res := call(t, NewBuiltinRegistry(), &hostEnv{ws: ws}, "list_directory", `{"max_entries":10}`)
	if len(listPaths(t, res)) != 10 || field(t, res, "truncated") != true {
		t.Fatalf("max_entries: %v", res.Output)
	}
}

func TestSearchTruncatesAt50(t *testing.T) {
	ws := t.TempDir()
	for i := 0; i < 30; i++ {
		mustWrite(t, filepath.Join(ws, fmt.Sprintf("f%02d.txt", i)), "needle one\nhay\nneedle two\n")
	}
	mustWrite(t, filepath.Join(ws, "bin.dat"), "needle\x00binary")
	r := NewBuiltinRegistry()
	env := &hostEnv{ws: ws}
	res := call(t, r, env, "search_files", `{"pattern":"need+le"}`)
	if !res.Success {
		t.Fatal(errText(res))
	}
	if n := len(field(t, res, "matches").([]any)); n != 50 || field(t, res, "truncated") != true {
		t.Fatalf("%d matches, truncated=%v; want 50, true", n, field(t, res, "truncated"))
	}
	// The policy's bound, and the argument.
	res = call(t, r, &hostEnv{ws: ws, s: sandbox.ToolSettings{MaxResults: 7}}, "search_files", `{"pattern":"needle"}`)
	if n := len(field(t, res, "matches").([]any)); n != 7 {
		t.Fatalf("MaxResults 7: %d matches", n)
	}
	res = call(t, r, env, "search_files", `{"pattern":"needle","max_results":1000}`)
	if n := len(field(t, res, "matches").([]any)); n != 60 || field(t, res, "truncated") != false {
		t.Fatalf("max_results 1000: %d matches", n)
	}
	if field(t, res, "files_skipped") != float64(1) {
		t.Fatalf("binary file not skipped: %v", res.Output)
	}
	res = call(t, r, env, "search_files", `{"pattern":"NEEDLE ONE","case_insensitive":true,"glob":"f0*.txt"}`)
	if n := len(field(t, res, "matches").([]any)); n != 10 {
		t.Fatalf("case_insensitive+glob: %d matches", n)
	}
	res = call(t, r, env, "search_files", `{"pattern":"(a"}`)
	if res.Success || !strings.Contains(errText(res), `argument "pattern": invalid regular expression`) {
		t.Fatalf("bad regexp: %q", errText(res))
	}
	// RE2: a pattern that backtracks exponentially elsewhere is linear.
	mustWrite(t, filepath.Join(ws, "aaa.txt"), strings.Repeat("a", 100000)+"!\n")
	start := time.Now()
	res = call(t, r, env, "search_files", `{"pattern":"(a+)+$","glob":"aaa.txt"}`)
	if !res.Success || time.Since(start) > 5*time.Second {
		t.Fatalf("(a+)+$ took %s: %q", time.Since(start), errText(res))
	}
}

func TestReadFileRangesAndBounds(t *testing.T) {
	ws := t.TempDir()
	var b strings.Builder
	for i := 1; i <= 100; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	mustWrite(t, filepath.Join(ws, "f.txt"), b.String())
	mustWrite(t, filepath.Join(ws, "nonl"), "a\nb")
	mustWrite(t, filepath.Join(ws, "bin"), "ELF\x00\x01")
	r := NewBuiltinRegistry()
	env := &hostEnv{ws: ws}
	res := call(t, r, env, "read_file", `{"path":"f.txt","start_line":10,"end_line":12}`)
	if field(t, res, "content") != "line 10\nline 11\nline 12\n" || field(t, res, "end_line") != float64(12) {
		t.Fatalf("range: %v", res.Output)
	}
	res = call(t, r, env, "read_file", `{"path":"f.txt","start_line":99}`)
	if field(t, res, "content") != "line 99\nline 100\n" || field(t, res, "total_lines") != float64(100) {
		t.Fatalf("tail: %v", res.Output)
	}
	res = call(t, r, env, "read_file", `{"path":"f.txt","start_line":200}`)
	if res.Success || !strings.Contains(errText(res), "past the end of the file (100 lines)") {
		t.Fatalf("past the end: %v %q", res.Output, errText(res))
	}
	res = call(t, r, env, "read_file", `{"path":"f.txt","start_line":5,"end_line":4}`)
	if res.Success {
		t.Fatal("end before start accepted")
	}
	res = call(t, r, env, "read_file", `{"path":"nonl"}`)
	if field(t, res, "content") != "a\nb" || field(t, res, "total_lines") != float64(2) {
		t.Fatalf("no final newline: %v", res.Output)
	}
	res = call(t, r, env, "read_file", `{"path":"bin"}`)
	if res.Success || !strings.Contains(errText(res), "binary") {
		t.Fatalf("binary: %q", errText(res))
	}
	res = call(t, r, &hostEnv{ws: ws, s: sandbox.ToolSettings{MaxOutput: 20}}, "read_file", `{"path":"f.txt"}`)
	if len(field(t, res, "content").(string)) != 20 || field(t, res, "truncated") != true {
		t.Fatalf("MaxOutput 20: %v", res.Output)
	}
}

func TestRunCommand(t *testing.T) {
	ws := t.TempDir()
	os.Mkdir(filepath.Join(ws, "sub"), 0o755)
	os.Symlink("/etc", filepath.Join(ws, "etc"))
	r := NewBuiltinRegistry()
	env := &hostEnv{ws: ws}
	res := call(t, r, env, "run_command", `{"command":"echo out; echo err >&2; pwd"}`)
	if !res.Success || field(t, res, "stdout") != "out\n"+ws+"\n" || field(t, res, "stderr") != "err\n" {
		t.Fatalf("echo: %v %q", res.Output, errText(res))
	}
	res = call(t, r, env, "run_command", `{"argv":["pwd"],"cwd":"sub"}`)
	if field(t, res, "stdout") != filepath.Join(ws, "sub")+"\n" {
		t.Fatalf("cwd: %v", res.Output)
	}
	res = call(t, r, env, "run_command", `{"command":"exit 3"}`)
	if res.Success || field(t, res, "exit_code") != float64(3) || errText(res) != "command exited with code 3" {
		t.Fatalf("exit 3: %v %q", res.Output, errText(res))
	}
	for _, args := range []string{`{"command":"sudo id"}`, `{"command":"echo hi && sudo id"}`, `{"command":"(sudo id)"}`, `{"argv":["sudo","id"]}`, `{"command":"rm -rf /"}`} {
		res = call(t, r, env, "run_command", args)
		if res.Success || !strings.Contains(errText(res), "is blocked by the policy") {
			t.Errorf("%s: %v %q", args, res.Success, errText(res))
		}
	}
	for _, cwd := range []string{"..", "/", "etc"} {
		res = call(t, r, env, "run_command", fmt.Sprintf(`{"argv":["pwd"],"cwd":%q}`, cwd))
		if res.Success || !strings.Contains(errText(res), "outside the workspace") {
			t.Errorf("cwd %q: %v %q", cwd, res.Output, errText(res))
		}
	}
	res = call(t, r, env, "run_command", `{"command":"ls","argv":["ls"]}`)
	if res.Success || !strings.Contains(errText(res), "exactly one of") {
		t.Fatalf("both: %q", errText(res))
	}
	res = call(t, r, env, "run_command", `{"argv":["no-such-command-xyz"]}`)
	if res.Success || !strings.Contains(errText(res), "command not found") {
		t.Fatalf("not found: %q", errText(res))
	}
	start := time.Now()
	res = call(t, r, env, "run_command", `{"command":"sleep 30","timeout":0.5}`)
	if res.Success || field(t, res, "timed_out") != true || time.Since(start) > 10*time.Second {
		t.Fatalf("timeout: %v %q after %s", res.Output, errText(res), time.Since(start))
	}
	// The policy's blocked list replaces the default.
	res = call(t, r, &hostEnv{ws: ws, s: sandbox.ToolSettings{BlockedCommands: []string{"ls"}}}, "run_command", `{"command":"ls -la"}`)
	if res.Success || !strings.Contains(errText(res), `rule "ls"`) {
		t.Fatalf("custom list: %q", errText(res))
	}
}

func TestRunScriptTool(t *testing.T) {
	ws := t.TempDir()
	r := NewBuiltinRegistry()
	env := &hostEnv{ws: ws}
	for lang, code := range map[string]string{
		"python": "import os; print('py', os.getcwd())",
		"bash":   "echo bash $(pwd)",
		"node":   "console.log('node', process.cwd())",
		"ruby":   "puts \"ruby #{Dir.pwd}\"",
	} {
		res := call(t, r, env, "run_script", fmt.Sprintf(`{"language":%q,"script":%q}`, lang, code))
		if res.Success && !strings.HasSuffix(field(t, res, "stdout").(string), " "+ws+"\n") {
			t.Errorf("%s: %v", lang, res.Output)
		}
		if !res.Success && !strings.Contains(errText(res), "interpreter not found") {
			t.Errorf("%s: %q", lang, errText(res))
		}
	}
	res := call(t, r, env, "run_script", `{"language":"python","script":"pass","env":{"PATH":"/nonexistent"}}`)
	if res.Success || errText(res) != "interpreter not found: python" {
		t.Fatalf("hidden interpreter: %v %q", res.Output, errText(res))
	}
}
