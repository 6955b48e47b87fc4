package tools

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// warmSession starts one session with a workspace holding a 4 KiB file,
// reused by every iteration of a benchmark (what an agent's conversation
// does).
func warmSession(b *testing.B) (*sandbox.Session, string) {
	b.Helper()
	ws := b.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "f.txt"), []byte(strings.Repeat("0123456789abcdef\n", 240)), 0o644); err != nil {
		b.Fatal(err)
	}
	s, err := sandbox.Start(context.Background(), sandbox.Policy{
		Mounts:    []sandbox.Mount{{Kind: sandbox.MountBind, Source: ws, Dest: ws}},
		Cwd:       ws,
		Workspace: ws,
	})
	if err != nil {
		b.Skipf("no sandbox here: %v", err)
	}
	b.Cleanup(func() { s.Close() })
	return s, ws
}

// BenchmarkReadFileTool is one read_file call in a warm session: the
// channel round trip, argument validation, the confined open, the read.
func BenchmarkReadFileTool(b *testing.B) {
	s, _ := warmSession(b)
	ctx := context.Background()
	args := json.RawMessage(`{"path":"f.txt"}`)
	for b.Loop() {
		raw, err := s.CallTool(ctx, "read_file", args, 0)
		if err != nil || !strings.HasPrefix(string(raw), `{"success":true`) {
			b.Fatalf("%v %s", err, raw)
		}
	}
}

// BenchmarkReadFileHost is the same read on the host, for comparison.
func BenchmarkReadFileHost(b *testing.B) {
	ws := b.TempDir()
	p := filepath.Join(ws, "f.txt")
	os.WriteFile(p, []byte(strings.Repeat("0123456789abcdef\n", 240)), 0o644)
	for b.Loop() {
		if _, err := os.ReadFile(p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadFileToolDirect is the tool without a sandbox or channel:
// what confinement and validation cost on their own.
func BenchmarkReadFileToolDirect(b *testing.B) {
	ws := b.TempDir()
	os.WriteFile(filepath.Join(ws, "f.txt"), []byte(strings.Repeat("0123456789abcdef\n", 240)), 0o644)
	r := NewBuiltinRegistry()
	env := &hostEnv{ws: ws}
	ctx := context.Background()
	args := json.RawMessage(`{"path":"f.txt"}`)
	for b.Loop() {
		r.Call(ctx, env, "read_file", args)
	}
}

func python(b *testing.B) string {
	for _, p := range []string{"/usr/bin/python3", "/usr/local/bin/python3"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	b.Skip("no python3")
	return ""
}

// BenchmarkPythonPassSession runs `python3 -c pass` in a warm session.
func BenchmarkPythonPassSession(b *testing.B) {
	py := python(b)
	s, _ := warmSession(b)
	ctx := context.Background()
	for b.Loop() {
		res, err := s.Exec(ctx, sandbox.Command{Argv: []string{py, "-c", "pass"}})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("%v %d %s", err, res.ExitCode, res.Stderr)
		}
	}
}

// BenchmarkPythonPassTool is the same through the run_command tool.
func BenchmarkPythonPassTool(b *testing.B) {
	py := python(b)
	s, _ := warmSession(b)
	ctx := context.Background()
	args, _ := json.Marshal(map[string]any{"argv": []string{py, "-c", "pass"}})
	for b.Loop() {
		raw, err := s.CallTool(ctx, "run_command", args, 0)
		if err != nil || !strings.HasPrefix(string(raw), `{"success":true`) {
			b.Fatalf("%v %s", err, raw)
		}
	}
}

// BenchmarkPythonPassHost runs it on the host, for comparison.
func BenchmarkPythonPassHost(b *testing.B) {
	py := python(b)
	for b.Loop() {
		if err := exec.Command(py, "-c", "pass").Run(); err != nil {
			b.Fatal(err)
		}
	}
}
