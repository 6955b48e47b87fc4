package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// toolResult is the structured result `nsbox tools call` prints.
type toolResult struct {
	Success bool            `json:"success"`
	Output  json.RawMessage `json:"output"`
	Error   *string         `json:"error"`
}

func (r toolResult) err() string {
	if r.Error == nil {
		return ""
	}
	return *r.Error
}

// callTool runs `nsbox tools call NAME ARGS --workspace ws` as u.
func (u user) callTool(t *testing.T, ws, name, args string, extra ...string) (toolResult, result) {
	t.Helper()
	argv := append([]string{"tools", "call", name, args, "--workspace", ws}, extra...)
	r := u.run(t, &runOpts{dir: ws}, argv...)
	var tr toolResult
	if err := json.Unmarshal([]byte(r.stdout), &tr); err != nil {
		t.Fatalf("tools call %s %s: output is not a result (exit %d): %v\nstdout: %s\nstderr: %s", name, args, r.code, err, r.stdout, r.stderr)
	}
	want := 0
	if !tr.Success {
		want = 1
	}
	if r.code != want {
		t.Fatalf("tools call %s: exit %d with success=%v\nstderr: %s", name, r.code, tr.Success, r.stderr)
	}
	return tr, r
}

func outputOf[T any](t *testing.T, tr toolResult) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(tr.Output, &v); err != nil {
		t.Fatalf("output %s: %v", tr.Output, err)
	}
	return v
}

// mkdirAs creates directories owned by u.
func (u user) mkdirAs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if os.Getuid() == 0 {
			os.Chown(d, u.uid, u.gid)
		}
	}
}

func (u user) symlinkAs(t *testing.T, target, name string) {
	t.Helper()
	if err := os.Symlink(target, name); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() == 0 {
		os.Lchown(name, u.uid, u.gid)
	}
}

func TestToolsList(t *testing.T) {
	u := users()[0]
	r := u.run(t, nil, "tools", "list")
	expectCode(t, r, 0)
	var openai []struct {
		Type     string `json:"type"`
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &openai); err != nil || len(openai) < 6 || openai[0].Type != "function" {
		t.Fatalf("openai format: %v %s", err, r.stdout)
	}
	names := map[string]bool{}
	for _, d := range openai {
		names[d.Function.Name] = true
	}
	for _, n := range []string{"read_file", "write_file", "list_directory", "run_command", "search_files", "run_script"} {
		if !names[n] {
			t.Errorf("%s not listed", n)
		}
	}
	r = u.run(t, nil, "tools", "list", "--format", "mcp")
	expectCode(t, r, 0)
	var mcp []map[string]json.RawMessage
	if err := json.Unmarshal([]byte(r.stdout), &mcp); err != nil || mcp[0]["inputSchema"] == nil {
		t.Fatalf("mcp format: %v %s", err, r.stdout)
	}
	r = u.run(t, nil, "tools", "list", "--format", "ollama")
	expectCode(t, r, 0)
	r = u.run(t, nil, "tools", "list", "--format", "xml")
	if r.code == 0 || !strings.Contains(r.stderr, "unknown format") {
		t.Fatalf("--format xml: %d %s", r.code, r.stderr)
	}
}

func TestToolsHappyPath(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		u.mkdirAs(t, filepath.Join(ws, "src"))
		u.writeFile(t, filepath.Join(ws, "src", "main.go"), "package main\n\nfunc main() {} // TODO\n", 0o644)

		tr, _ := u.callTool(t, ws, "write_file", `{"path":"notes/today.md","content":"hello\nworld\n"}`)
		if !tr.Success {
			t.Fatalf("write_file: %s", tr.err())
		}
		if b, _ := os.ReadFile(filepath.Join(ws, "notes", "today.md")); string(b) != "hello\nworld\n" {
			t.Fatalf("write_file wrote %q", b)
		}

		tr, _ = u.callTool(t, ws, "read_file", `{"path":"notes/today.md","start_line":2}`)
		if out := outputOf[map[string]any](t, tr); !tr.Success || out["content"] != "world\n" {
			t.Fatalf("read_file: %s %s", tr.Output, tr.err())
		}

		tr, _ = u.callTool(t, ws, "list_directory", `{"recursive":true}`)
		out := outputOf[struct {
			Entries []struct{ Path, Type string }
		}](t, tr)
		var paths []string
		for _, e := range out.Entries {
			paths = append(paths, e.Path)
		}
		if strings.Join(paths, ",") != "notes,notes/today.md,src,src/main.go" {
			t.Fatalf("list_directory: %v", paths)
		}

		tr, _ = u.callTool(t, ws, "search_files", `{"pattern":"TODO|world"}`)
		sr := outputOf[struct {
			Matches []struct {
				Path string
				Line int
			}
		}](t, tr)
		if len(sr.Matches) != 2 || sr.Matches[0].Path != "notes/today.md" || sr.Matches[1].Path != "src/main.go" || sr.Matches[1].Line != 3 {
			t.Fatalf("search_files: %s", tr.Output)
		}

		tr, _ = u.callTool(t, ws, "run_command", `{"command":"pwd; id -u; ls src | wc -l"}`)
		cr := outputOf[map[string]any](t, tr)
		if !tr.Success || cr["stdout"] != fmt.Sprintf("%s\n%d\n1\n", ws, u.uid) {
			t.Fatalf("run_command: %s %s", tr.Output, tr.err())
		}

		tr, _ = u.callTool(t, ws, "run_script", `{"language":"bash","script":"ls; echo err >&2"}`)
		cr = outputOf[map[string]any](t, tr)
		if !tr.Success || cr["stdout"] != "notes\nsrc\n" || cr["stderr"] != "err\n" {
			t.Fatalf("run_script: %s %s", tr.Output, tr.err())
		}
	})
}

func TestToolsHostileInputsRefused(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		outside := filepath.Join(filepath.Dir(ws), "outside")
		u.mkdirAs(t, outside, filepath.Join(ws, ".git", "hooks"), filepath.Join(ws, "sub"))
		u.writeFile(t, filepath.Join(outside, "secret"), "outside secret\n", 0o644)
		u.writeFile(t, filepath.Join(ws, ".git", "config"), "[core]\n", 0o644)
		u.symlinkAs(t, "/etc", filepath.Join(ws, "etc"))
		u.symlinkAs(t, "../outside", filepath.Join(ws, "up"))
		u.symlinkAs(t, ".git/config", filepath.Join(ws, "cfg"))

		cases := []struct{ tool, args, want string }{
			{"read_file", `{"path":"../../etc/passwd"}`, `path "../../etc/passwd" is outside the workspace`},
			{"read_file", `{"path":"/etc/passwd"}`, `path "/etc/passwd" is outside the workspace`},
			{"read_file", `{"path":"etc/passwd"}`, `path "etc/passwd" is outside the workspace`},
			{"read_file", `{"path":"up/secret"}`, `is outside the workspace`},
			{"read_file", `{"path":5}`, `argument "path": expected string, got number`},
			{"write_file", `{"path":"up/planted","content":"x"}`, `is outside the workspace`},
			{"write_file", `{"path":"/tmp/planted","content":"x"}`, `is outside the workspace`},
			{"write_file", `{"path":".git/hooks/pre-commit","content":"#!/bin/sh\nid\n"}`, `is protected`},
			{"write_file", `{"path":".git/config","content":"[core]\nfsmonitor=evil\n"}`, `is protected`},
			{"write_file", `{"path":"cfg","content":"x"}`, `is protected`},
			// Anything in .git, and gitfiles: ".git/commondir" = "../evil"
			// sent the user's next git run to a config the agent wrote.
			{"write_file", `{"path":".git/commondir","content":"../evil\n"}`, `is protected`},
			{"write_file", `{"path":".git/config.worktree","content":"[core]\nfsmonitor=evil\n"}`, `is protected`},
			{"write_file", `{"path":".git/worktrees/w/config","content":"x"}`, `is protected`},
			{"write_file", `{"path":".git/info/exclude","content":"x"}`, `is protected`},
			{"write_file", `{"path":".GIT/config","content":"x"}`, `is protected`},
			{"write_file", `{"path":"sub/.git","content":"gitdir: ../evil\n"}`, `is protected`},
			{"write_file", `{"path":"sub/.git/config","content":"x"}`, `is protected`},
			{"list_directory", `{"path":"etc"}`, `is outside the workspace`},
			{"list_directory", `{"path":".."}`, `is outside the workspace`},
			{"search_files", `{"pattern":"root","path":"/etc"}`, `is outside the workspace`},
			{"run_command", `{"command":"sudo id"}`, `command "sudo id" is blocked`},
			{"run_command", `{"command":"echo hi && (sudo id)"}`, `is blocked`},
			{"run_command", `{"command":"rm -rf /"}`, `is blocked`},
			{"run_command", `{"argv":["pwd"],"cwd":"../"}`, `is outside the workspace`},
			{"no_such_tool", `{}`, `unknown tool "no_such_tool"`},
		}
		for _, c := range cases {
			tr, _ := u.callTool(t, ws, c.tool, c.args)
			if tr.Success || !strings.Contains(tr.err(), c.want) {
				t.Errorf("%s %s: success=%v error=%q, want %q", c.tool, c.args, tr.Success, tr.err(), c.want)
			}
			if strings.Contains(string(tr.Output), "root:") || strings.Contains(string(tr.Output), "outside secret") {
				t.Errorf("%s %s leaked: %s", c.tool, c.args, tr.Output)
			}
		}
		// The host is unchanged.
		if ents, _ := os.ReadDir(outside); len(ents) != 1 {
			t.Errorf("files planted outside: %v", ents)
		}
		if _, err := os.Stat("/tmp/planted"); err == nil {
			t.Errorf("/tmp/planted exists on the host")
		}
		if b, _ := os.ReadFile(filepath.Join(ws, ".git", "config")); string(b) != "[core]\n" {
			t.Errorf(".git/config changed: %q", b)
		}
		if ents, _ := os.ReadDir(filepath.Join(ws, ".git", "hooks")); len(ents) != 0 {
			t.Errorf("hook planted: %v", ents)
		}
		if ents, _ := os.ReadDir(filepath.Join(ws, ".git")); len(ents) != 2 {
			t.Errorf("files planted in .git: %v", ents)
		}
		for _, p := range []string{".GIT", "sub/.git"} {
			if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
				t.Errorf("%s was created", p)
			}
		}
		// The mount layer protects .git too, for commands that bypass the
		// tools' own checks.
		tr, _ := u.callTool(t, ws, "run_command", `{"command":"echo evil > .git/config; echo x > .git/hooks/pre-commit"}`)
		if tr.Success {
			t.Errorf("run_command wrote into .git: %s", tr.Output)
		}
		if b, _ := os.ReadFile(filepath.Join(ws, ".git", "config")); string(b) != "[core]\n" {
			t.Errorf(".git/config changed by a command: %q", b)
		}
	})
}

func TestToolsGitignoreAndSearchBound(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		u.mkdirAs(t, filepath.Join(ws, "build"), filepath.Join(ws, "data"))
		u.writeFile(t, filepath.Join(ws, ".gitignore"), "build/\n*.log\n", 0o644)
		u.writeFile(t, filepath.Join(ws, "build", "out.txt"), "needle\n", 0o644)
		u.writeFile(t, filepath.Join(ws, "debug.log"), "needle\n", 0o644)
		for i := 0; i < 60; i++ {
			u.writeFile(t, filepath.Join(ws, "data", fmt.Sprintf("f%02d.txt", i)), "a needle here\n", 0o644)
		}
		tr, _ := u.callTool(t, ws, "list_directory", `{}`)
		out := outputOf[struct{ Entries []struct{ Path string } }](t, tr)
		var paths []string
		for _, e := range out.Entries {
			paths = append(paths, e.Path)
		}
		if strings.Join(paths, ",") != ".gitignore,data" {
			t.Fatalf("ignored files listed: %v", paths)
		}
		tr, _ = u.callTool(t, ws, "search_files", `{"pattern":"needle"}`)
		sr := outputOf[struct {
			Matches   []struct{ Path string }
			Truncated bool
		}](t, tr)
		if !tr.Success || len(sr.Matches) != 50 || !sr.Truncated {
			t.Fatalf("search: %d matches, truncated=%v; want 50, true", len(sr.Matches), sr.Truncated)
		}
		for _, m := range sr.Matches {
			if !strings.HasPrefix(m.Path, "data/") {
				t.Fatalf("ignored file searched: %s", m.Path)
			}
		}
	})
}

func TestToolsTimeout(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		start := time.Now()
		tr, _ := u.callTool(t, ws, "run_command", `{"command":"sleep 60"}`, "--timeout", "1s")
		if tr.Success || time.Since(start) > 20*time.Second || !strings.Contains(tr.err(), "timed out") {
			t.Fatalf("sleep 60 with --timeout 1s: %v %q after %s", tr.Success, tr.err(), time.Since(start))
		}
		start = time.Now()
		tr, _ = u.callTool(t, ws, "run_command", `{"command":"sleep 60","timeout":1}`)
		if tr.Success || time.Since(start) > 20*time.Second || outputOf[map[string]any](t, tr)["timed_out"] != true {
			t.Fatalf("sleep 60 with timeout 1: %s %q after %s", tr.Output, tr.err(), time.Since(start))
		}
	})
}

func TestToolsCallBadInput(t *testing.T) {
	u := users()[0]
	ws := u.tempDir(t)
	r := u.run(t, nil, "tools", "call", "read_file", "{not json", "--workspace", ws)
	if r.code != 1 || !strings.Contains(r.stdout, "not valid JSON") {
		t.Fatalf("bad JSON: %d %s %s", r.code, r.stdout, r.stderr)
	}
	r = u.run(t, nil, "tools", "call", "read_file", "{}", "--workspace", "/nonexistent/ws")
	if r.code != 125 || !strings.Contains(r.stderr, "/nonexistent/ws does not exist") {
		t.Fatalf("bad workspace: %d %s", r.code, r.stderr)
	}
}

// A profile that binds no workspace, run from a directory under /tmp (the
// sandbox's own inside): the tools could reach nothing, so the call stops
// at the start with 125 and says why, instead of a tool failure.
func TestToolsCallWorkspaceNotVisible(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		if !strings.HasPrefix(ws, "/tmp/") {
			t.Skipf("needs a temporary directory under /tmp, got %s (TMPDIR is set)", ws)
		}
		r := u.run(t, &runOpts{dir: ws}, "tools", "call", "list_directory", `{"path":"."}`, "--profile", "strict")
		expectCode(t, r, 125)
		if !strings.Contains(r.stderr, "the workspace is not visible inside the sandbox: "+ws) || !strings.Contains(r.stderr, "profile strict") {
			t.Fatalf("stderr %q", r.stderr)
		}
		oneLine(t, r)
	})
}

// fakeHome makes a home directory for u outside /tmp (a sandbox's /tmp is
// private, so a secret there would be out of reach anyway) holding an ssh
// key, and returns it.
func (u user) fakeHome(t *testing.T) string {
	t.Helper()
	home, err := os.MkdirTemp("/var/tmp", "nsbox-it-home-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	os.Chmod(home, 0o755)
	u.mkdirAs(t, filepath.Join(home, ".ssh"))
	u.writeFile(t, filepath.Join(home, ".ssh", "id_ed25519"), "PRIVATE-KEY\n", 0o600)
	return home
}

// tools call builds the sandbox nsbox mcp builds (the workspace profile):
// credentials and .env files read as empty, the workspace's .git is
// read-only.
func TestToolsCallHidesSecrets(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		home := u.fakeHome(t)
		u.writeFile(t, filepath.Join(ws, ".env"), "API_TOKEN=hunter2\n", 0o644)
		u.mkdirAs(t, filepath.Join(ws, ".git"))
		u.writeFile(t, filepath.Join(ws, ".git", "config"), "[core]\n", 0o644)
		r := u.run(t, &runOpts{env: []string{"HOME=" + home}}, "tools", "call", "run_command",
			`{"command":"wc -c < .env; ls -A `+home+`/.ssh | wc -l; echo x 2>/dev/null > .git/commondir || echo refused"}`, "--workspace", ws)
		expectCode(t, r, 0)
		out := outputOf[struct{ Stdout string }](t, toolResultOf(t, r))
		if strings.Fields(out.Stdout) == nil || strings.Join(strings.Fields(out.Stdout), " ") != "0 0 refused" {
			t.Fatalf("want .env empty, ~/.ssh empty and .git/commondir refused; stdout %q", out.Stdout)
		}
		if _, err := os.Stat(filepath.Join(ws, ".git", "commondir")); err == nil {
			t.Fatalf(".git/commondir was written")
		}
	})
}

// toolResultOf parses what `nsbox tools call` printed.
func toolResultOf(t *testing.T, r result) toolResult {
	t.Helper()
	var tr toolResult
	if err := json.Unmarshal([]byte(r.stdout), &tr); err != nil {
		t.Fatalf("output is not a tool result: %v\nstdout: %s\nstderr: %s", err, r.stdout, r.stderr)
	}
	return tr
}
