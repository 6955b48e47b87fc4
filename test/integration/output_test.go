package integration

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

type processOut struct {
	ExitCode   int    `json:"exit_code"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	Truncated  bool   `json:"truncated"`
	Binary     bool   `json:"binary"`
	Encoding   string `json:"encoding"`
	StdoutFile string `json:"stdout_file"`
}

// TestToolsOutputBudget: 5 MB of output with the error at its end comes
// back within the budget with the error, the full output kept on request,
// and binary output flagged (issue 19, item 4).
func TestToolsOutputBudget(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		build := `head -c 5000000 /dev/zero | tr '\0' x; echo; echo 'main.go:12:2: undefined: frobnicate'; exit 1`
		tr, _ := u.callTool(t, ws, "run_command", jsonArgs(t, map[string]any{"command": build}))
		out := outputOf[processOut](t, tr)
		if tr.Success || out.ExitCode != 1 {
			t.Fatalf("exit %d success %v", out.ExitCode, tr.Success)
		}
		if !strings.HasSuffix(out.Stdout, "main.go:12:2: undefined: frobnicate\n") {
			t.Errorf("the error at the end is lost; stdout ends %q", out.Stdout[max(0, len(out.Stdout)-80):])
		}
		if !strings.HasPrefix(out.Stdout, "xxx") || !strings.Contains(out.Stdout, "[... nsbox cut ") || !out.Truncated {
			t.Errorf("head or marker missing (truncated=%v)", out.Truncated)
		}
		if n := utf8.RuneCountInString(out.Stdout); n > 30000 {
			t.Errorf("stdout has %d characters, over the default budget of 30000", n)
		}

		// --max-output and keep_output.
		tr, _ = u.callTool(t, ws, "run_command", jsonArgs(t, map[string]any{"command": build, "keep_output": true}), "--max-output", "2000")
		out = outputOf[processOut](t, tr)
		if n := utf8.RuneCountInString(out.Stdout); n > 2000 || !strings.HasSuffix(out.Stdout, "frobnicate\n") {
			t.Errorf("--max-output 2000: %d characters, ends %q", n, out.Stdout[max(0, len(out.Stdout)-40):])
		}
		fi, err := os.Stat(filepath.Join(ws, out.StdoutFile))
		if out.StdoutFile == "" || err != nil || fi.Size() != int64(5000000+1+len("main.go:12:2: undefined: frobnicate\n")) {
			t.Errorf("kept output %q: %v %v", out.StdoutFile, fi, err)
		}

		// Binary output: flagged, and base64 when asked.
		tr, _ = u.callTool(t, ws, "run_command", `{"command":"printf '\\211PNG\\0\\377'"}`)
		out = outputOf[processOut](t, tr)
		if !out.Binary || strings.ContainsRune(out.Stdout, utf8.RuneError) {
			t.Errorf("binary output: binary=%v stdout=%q", out.Binary, out.Stdout)
		}
		tr, _ = u.callTool(t, ws, "run_command", `{"command":"printf '\\211PNG\\0\\377'","encoding":"base64"}`)
		out = outputOf[processOut](t, tr)
		if b, err := base64.StdEncoding.DecodeString(out.Stdout); err != nil || string(b) != "\x89PNG\x00\xff" {
			t.Errorf("base64 output %q: %q %v", out.Stdout, b, err)
		}
	})
}

func jsonArgs(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
