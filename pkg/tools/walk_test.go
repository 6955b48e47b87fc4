package tools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// nestedIgnores makes depth nested directories d0/d1/..., each with a
// .gitignore of size bytes ("aN" lines, all different) and a file "f".
func nestedIgnores(t *testing.T, depth, size int) string {
	t.Helper()
	ws := t.TempDir()
	dir := ws
	for i := 0; i < depth; i++ {
		dir = filepath.Join(dir, fmt.Sprintf("d%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for n := 0; b.Len() < size; n++ {
			fmt.Fprintf(&b, "p%d_%d\n", i, n)
		}
		mustWrite(t, filepath.Join(dir, ".gitignore"), b.String()[:size])
		mustWrite(t, filepath.Join(dir, "f"), "needle\n")
	}
	return ws
}

// Nested directories with large .gitignore files: the worker (PID 1,
// outside the memory cgroup) used to copy every ancestor's patterns at each
// level and load up to 256 × 1 MiB of them (4.46 GB for 40 levels of
// 1 MiB). The walk now holds at most maxIgnorePatterns patterns, shares
// the parents' sets, and says when it stopped honouring ignore files.
func TestGitignoreBoundedPerWalk(t *testing.T) {
	ws := nestedIgnores(t, 20, 256<<10)
	r := NewBuiltinRegistry()
	env := &hostEnv{ws: ws}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res := call(t, r, env, "list_directory", `{"recursive":true}`)
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 100<<20 {
		t.Errorf("list_directory allocated %d MiB", alloc>>20)
	}
	if !res.Success {
		t.Fatal(errText(res))
	}
	// Every level's "f" is listed (no pattern ignores it), and the result
	// says that ignore files stopped being honoured.
	if n := len(listPaths(t, res)); n != 20*3 {
		t.Errorf("%d entries, want 60", n)
	}
	warns, _ := field(t, res, "warnings").([]any)
	if len(warns) != 1 || !strings.Contains(warns[0].(string), "bound of 10000 ignore patterns") || !strings.Contains(warns[0].(string), "not honoured") {
		t.Errorf("warnings = %v", field(t, res, "warnings"))
	}
	res = call(t, r, env, "search_files", `{"pattern":"needle"}`)
	if n := len(field(t, res, "matches").([]any)); n != 20 {
		t.Errorf("search: %d matches", n)
	}
	if warns, _ := field(t, res, "warnings").([]any); len(warns) != 1 || !strings.Contains(warns[0].(string), "ignore patterns") {
		t.Errorf("search warnings = %v", field(t, res, "warnings"))
	}
}

func TestGitignoreBytesBound(t *testing.T) {
	ws := nestedIgnores(t, 3, 1<<20+1) // over one file's bound
	res := call(t, NewBuiltinRegistry(), &hostEnv{ws: ws}, "list_directory", `{"recursive":true}`)
	warns, _ := field(t, res, "warnings").([]any)
	if len(warns) != 1 || !strings.Contains(warns[0].(string), "d0/.gitignore is larger than 1048576 bytes") {
		t.Errorf("warnings = %v", field(t, res, "warnings"))
	}
	// Files under one file's bound, with long lines: the total bound
	// (2 MiB) is reached at the 4th file, before the patterns' bound.
	ws = t.TempDir()
	dir := ws
	for i := 0; i < 5; i++ {
		dir = filepath.Join(dir, fmt.Sprintf("d%d", i))
		os.MkdirAll(dir, 0o755)
		mustWrite(t, filepath.Join(dir, ".gitignore"), strings.Repeat(strings.Repeat("z", 199)+"\n", 600<<10/200))
	}
	w := &walker{root: mustRoot(t, ws), recursive: true, gitignore: true}
	w.walk(context.Background(), ".", func(walkEntry) error { return nil })
	if w.ignoreBytes > maxIgnoreBytes || !w.ignoreFull || !strings.Contains(w.ignoreWarning(), "bound of 2097152 bytes of ignore files at d0/d1/d2/d3/.gitignore") {
		t.Errorf("ignoreBytes %d, warning %q", w.ignoreBytes, w.ignoreWarning())
	}
}

// Sharing the parents' patterns keeps git's rules: the last matching
// pattern decides, a directory's own patterns after its ancestors'.
func TestGitignoreNestedOverrides(t *testing.T) {
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "sub", "deep"), 0o755)
	mustWrite(t, filepath.Join(ws, ".gitignore"), "*.log\n")
	mustWrite(t, filepath.Join(ws, "sub", ".gitignore"), "!keep.log\ndrop.txt\n")
	mustWrite(t, filepath.Join(ws, "sub", "deep", ".gitignore"), "!drop.txt\n")
	for _, f := range []string{"a.log", "keep.log", "sub/keep.log", "sub/x.log", "sub/drop.txt", "sub/deep/keep.log", "sub/deep/drop.txt"} {
		mustWrite(t, filepath.Join(ws, f), "")
	}
	got := listPaths(t, call(t, NewBuiltinRegistry(), &hostEnv{ws: ws}, "list_directory", `{"recursive":true}`))
	want := ".gitignore,sub,sub/.gitignore,sub/deep,sub/deep/.gitignore,sub/deep/drop.txt,sub/deep/keep.log,sub/keep.log"
	if strings.Join(got, ",") != want {
		t.Errorf("got  %s\nwant %s", strings.Join(got, ","), want)
	}
}

// A cancelled call stops before loading ignore files.
func TestGitignoreLoadingChecksContext(t *testing.T) {
	ws := nestedIgnores(t, 2, 100)
	os.MkdirAll(filepath.Join(ws, ".git", "info"), 0o755)
	mustWrite(t, filepath.Join(ws, ".git", "info", "exclude"), "x\n")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w := &walker{root: mustRoot(t, ws), recursive: true, gitignore: true}
	_, err := w.walk(ctx, "d0", func(walkEntry) error { return nil })
	if !errors.Is(err, context.Canceled) || w.ignoreFiles != 0 {
		t.Fatalf("err %v, %d ignore files loaded", err, w.ignoreFiles)
	}
}

// A line over maxLineLen used to end a file's search silently.
func TestSearchLongLineIsReported(t *testing.T) {
	ws := t.TempDir()
	mustWrite(t, filepath.Join(ws, "long.txt"), "needle 1\n"+strings.Repeat("x", maxLineLen+10)+"\nneedle 3\n")
	mustWrite(t, filepath.Join(ws, "short.txt"), "needle\n")
	res := call(t, NewBuiltinRegistry(), &hostEnv{ws: ws}, "search_files", `{"pattern":"needle"}`)
	if !res.Success {
		t.Fatal(errText(res))
	}
	if field(t, res, "files_truncated") != float64(1) || field(t, res, "files_searched") != float64(2) {
		t.Errorf("output %v", res.Output)
	}
	warns, _ := field(t, res, "warnings").([]any)
	if len(warns) != 1 || !strings.Contains(warns[0].(string), "long.txt (from line 2)") {
		t.Errorf("warnings = %v", field(t, res, "warnings"))
	}
	// A complete search has no warning.
	res = call(t, NewBuiltinRegistry(), &hostEnv{ws: ws}, "search_files", `{"pattern":"needle","glob":"short.txt"}`)
	if field(t, res, "files_truncated") != float64(0) || field(t, res, "warnings") != nil {
		t.Errorf("output %v", res.Output)
	}
}

func mustRoot(t *testing.T, dir string) *Root {
	t.Helper()
	r, err := OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// Past a bound, an ignore file is applied up to the bound, not dropped: a
// .gitignore over 1 MiB used to be read up to 1 MiB and applied, then the
// bounds made the walk skip it (and every later one) wholesale, so build/
// reappeared in every listing.
func TestGitignoreOverBoundAppliesWhatFits(t *testing.T) {
	ws := t.TempDir()
	var b strings.Builder
	b.WriteString("build/\n")
	for n := 0; b.Len() < 3<<19; n++ { // 1.5 MiB of 200-byte lines: under the patterns' bound
		fmt.Fprintf(&b, "%-199s\n", fmt.Sprintf("filler%d", n))
	}
	b.WriteString("tail/\n") // past 1 MiB: not honoured
	mustWrite(t, filepath.Join(ws, ".gitignore"), b.String())
	for _, f := range []string{"build/out.o", "src/main.go", "tail/t"} {
		os.MkdirAll(filepath.Dir(filepath.Join(ws, f)), 0o755)
		mustWrite(t, filepath.Join(ws, f), "needle\n")
	}
	r := NewBuiltinRegistry()
	env := &hostEnv{ws: ws}
	res := call(t, r, env, "list_directory", `{"recursive":true}`)
	if !res.Success {
		t.Fatal(errText(res))
	}
	if got, want := strings.Join(listPaths(t, res), ","), ".gitignore,src,src/main.go,tail,tail/t"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	warns, _ := field(t, res, "warnings").([]any)
	if len(warns) != 1 || !strings.Contains(warns[0].(string), ".gitignore is larger than 1048576 bytes") {
		t.Errorf("warnings = %v", field(t, res, "warnings"))
	}
	res = call(t, r, env, "search_files", `{"pattern":"needle"}`)
	if n := len(field(t, res, "matches").([]any)); n != 2 {
		t.Errorf("search: %d matches, want src/main.go and tail/t", n)
	}

	// The patterns' bound: the first maxIgnorePatterns patterns apply.
	b.Reset()
	b.WriteString("build/\n")
	for n := 1; n < maxIgnorePatterns; n++ {
		fmt.Fprintf(&b, "filler%d\n", n)
	}
	b.WriteString("tail/\n")
	mustWrite(t, filepath.Join(ws, ".gitignore"), b.String())
	res = call(t, r, env, "list_directory", `{"recursive":true}`)
	if got, want := strings.Join(listPaths(t, res), ","), ".gitignore,src,src/main.go,tail,tail/t"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	warns, _ = field(t, res, "warnings").([]any)
	if len(warns) != 1 || !strings.Contains(warns[0].(string), "bound of 10000 ignore patterns at .gitignore") {
		t.Errorf("warnings = %v", field(t, res, "warnings"))
	}
}
