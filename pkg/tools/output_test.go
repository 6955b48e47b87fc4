package tools

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

func TestOutputBudgetKeepsHeadAndTail(t *testing.T) {
	ws := t.TempDir()
	r, env := NewBuiltinRegistry(), &hostEnv{ws: ws}
	// 5 MB of output, then the error a failing build prints last.
	cmd := `head -c 5000000 /dev/zero | tr '\0' x; echo; echo "main.go:12: undefined: foo" >&2; echo FAILED; exit 2`
	res := call(t, r, env, "run_command", editArgs(t, map[string]any{"command": cmd}))
	if res.Success || field(t, res, "exit_code") != float64(2) {
		t.Fatalf("exit: %v %s", res.Output, errText(res))
	}
	stdout := field(t, res, "stdout").(string)
	if !strings.HasPrefix(stdout, "xxxx") || !strings.HasSuffix(stdout, "FAILED\n") {
		t.Errorf("stdout lost its head or its tail: %q ... %q", stdout[:20], stdout[len(stdout)-20:])
	}
	if !strings.Contains(stdout, "[... nsbox cut ") || !strings.Contains(stdout, `"keep_output": true`) {
		t.Errorf("no marker in stdout: %q", stdout[14000:15200])
	}
	if n := utf8.RuneCountInString(stdout); n > DefaultMaxOutput {
		t.Errorf("stdout has %d characters, over the budget of %d", n, DefaultMaxOutput)
	}
	if stderr := field(t, res, "stderr"); stderr != "main.go:12: undefined: foo\n" {
		t.Errorf("stderr %q", stderr)
	}
	if field(t, res, "truncated") != true {
		t.Error("truncated not set")
	}

	// A budget of the policy's, and the complete output kept on request.
	env.s.MaxOutput = 1000
	res = call(t, r, env, "run_command", editArgs(t, map[string]any{"command": cmd, "keep_output": true}))
	stdout = field(t, res, "stdout").(string)
	if n := utf8.RuneCountInString(stdout); n > 1000 || !strings.HasSuffix(stdout, "FAILED\n") {
		t.Errorf("budget 1000: %d characters, ends %q", n, stdout[len(stdout)-20:])
	}
	file, _ := field(t, res, "stdout_file").(string)
	if !strings.HasPrefix(file, ScratchDir+"/") || !strings.Contains(stdout, "all of it is in "+file) {
		t.Fatalf("stdout_file %q, marker: %q", file, stdout)
	}
	fi, err := os.Stat(filepath.Join(ws, file))
	if err != nil || fi.Size() != int64(5000000+1+len("FAILED\n")) {
		t.Errorf("kept stdout: %v %v", fi, err)
	}
	b, _ := os.ReadFile(filepath.Join(ws, field(t, res, "stderr_file").(string)))
	if string(b) != "main.go:12: undefined: foo\n" {
		t.Errorf("kept stderr %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, ".nsbox", ".gitignore")); !strings.Contains(string(b), "*") {
		t.Errorf(".nsbox/.gitignore: %q", b)
	}
	// Under the budget, output is untouched.
	res = call(t, r, env, "run_command", `{"command":"echo hello"}`)
	if field(t, res, "stdout") != "hello\n" || field(t, res, "truncated") != false {
		t.Errorf("short output: %v", res.Output)
	}
}

func TestOutputScratchNotThroughSymlink(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(ws, ".nsbox")); err != nil {
		t.Fatal(err)
	}
	res := call(t, NewBuiltinRegistry(), &hostEnv{ws: ws}, "run_command", `{"command":"echo hi","keep_output":true}`)
	if res.Success || !strings.Contains(errText(res), "keep_output") {
		t.Errorf("keep_output through a symlink out: success=%v error=%q", res.Success, errText(res))
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("written outside the workspace: %v", ents)
	}
}

func TestBinaryOutputFlagged(t *testing.T) {
	ws := t.TempDir()
	r, env := NewBuiltinRegistry(), &hostEnv{ws: ws}
	res := call(t, r, env, "run_command", `{"command":"printf 'PNG\\211\\0\\377'; echo text >&2"}`)
	if field(t, res, "binary") != true {
		t.Fatalf("binary output not flagged: %v", res.Output)
	}
	if s := field(t, res, "stdout").(string); strings.ContainsRune(s, utf8.RuneError) || !strings.Contains(s, "6 bytes of binary output") {
		t.Errorf("binary stdout as text: %q", s)
	}
	if field(t, res, "stderr") != "text\n" {
		t.Errorf("stderr %v", field(t, res, "stderr"))
	}
	res = call(t, r, env, "run_command", `{"command":"printf 'PNG\\211\\0\\377'","encoding":"base64"}`)
	got, err := base64.StdEncoding.DecodeString(field(t, res, "stdout").(string))
	if err != nil || string(got) != "PNG\x89\x00\xff" || field(t, res, "encoding") != "base64" {
		t.Errorf("base64 stdout: %q %v (%v)", got, err, res.Output)
	}

	// read_file: bytes as base64; Latin-1 text is flagged.
	mustWrite(t, filepath.Join(ws, "img"), "\x89PNG\x00\x01")
	res = call(t, r, env, "read_file", `{"path":"img"}`)
	if res.Success || !strings.Contains(errText(res), `"encoding": "base64"`) {
		t.Errorf("read_file of a binary file: %v %q", res.Success, errText(res))
	}
	res = call(t, r, env, "read_file", `{"path":"img","encoding":"base64"}`)
	got, _ = base64.StdEncoding.DecodeString(field(t, res, "content").(string))
	if string(got) != "\x89PNG\x00\x01" || field(t, res, "binary") != true {
		t.Errorf("read_file base64: %q %v", got, res.Output)
	}
	mustWrite(t, filepath.Join(ws, "latin1.txt"), "caf\xe9\n")
	res = call(t, r, env, "read_file", `{"path":"latin1.txt"}`)
	if field(t, res, "binary") != true {
		t.Errorf("Latin-1 text not flagged: %v", res.Output)
	}
}

// TestShapeCapturedStream: a stream the worker cut (head and tail kept,
// StdoutBytes counting all) is shaped at its split, and characters are
// never cut in two.
func TestShapeCapturedStream(t *testing.T) {
	env := &hostEnv{s: sandbox.ToolSettings{MaxOutput: 400}}
	capMax := int64(400 * captureFactor)
	head := strings.Repeat("é", int(capMax/4)) // 2 bytes each: the head half
	tail := strings.Repeat("ü", int(capMax/4)-1) + "\nerror: at the end\n"
	rr := sandbox.RunResult{Stdout: []byte(head + tail), StdoutBytes: 10 << 20}
	var out processOutput
	shapeProcess(&out, rr, env, outputArgs{}, nil)
	if !utf8.ValidString(out.Stdout) || out.Binary {
		t.Fatalf("not valid text: binary=%v", out.Binary)
	}
	if !strings.HasPrefix(out.Stdout, "éé") || !strings.HasSuffix(out.Stdout, "error: at the end\n") || !out.Truncated {
		t.Errorf("shaped %q", out.Stdout)
	}
	if n := utf8.RuneCountInString(out.Stdout); n > 400 {
		t.Errorf("%d characters over a budget of 400", n)
	}
	if !strings.Contains(out.Stdout, "bytes of stdout here") {
		t.Errorf("no marker: %q", out.Stdout)
	}
}
