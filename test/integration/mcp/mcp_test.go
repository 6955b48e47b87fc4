package mcpintegration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// builtinTools must be served by every nsbox mcp.
var builtinTools = []string{"read_file", "write_file", "list_directory", "run_command", "search_files", "run_script"}

// registryTools is what the binary itself says its tools are (nsbox tools
// list, no sandbox): the MCP list must hold all of them.
func registryTools(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command(nsboxBin(t), "tools", "list", "--format", "mcp").Output()
	if err != nil {
		t.Fatalf("nsbox tools list: %v", err)
	}
	var defs []struct{ Name string }
	if err := json.Unmarshal(out, &defs); err != nil {
		t.Fatalf("nsbox tools list: %v", err)
	}
	var names []string
	for _, d := range defs {
		names = append(names, d.Name)
	}
	return names
}

func TestToolsList(t *testing.T) {
	want := append(append([]string(nil), builtinTools...), registryTools(t)...)
	eachUser(t, func(t *testing.T, u user) {
		for _, protocol := range []string{"", "2025-06-18"} {
			t.Run("protocol="+protocol, func(t *testing.T) {
				s := startServer(t, newHome(t, u), serverOpts{protocol: protocol})
				res, err := s.cs.ListTools(context.Background(), nil)
				if err != nil {
					t.Fatal(err)
				}
				got := map[string]*mcp.Tool{}
				for _, tl := range res.Tools {
					got[tl.Name] = tl
				}
				for _, name := range want {
					if got[name] == nil {
						t.Errorf("tools/list lacks %s", name)
					}
				}
				if got["memory_save"] == nil {
					t.Errorf("tools/list has no memory tools: the binary's tool registry (toolRegistry in cmd/nsbox) does not include hostapi.Tools()")
				}
				if got["register_tool"] != nil {
					t.Errorf("register_tool is listed without --allow-tool-registration")
				}
				for _, tl := range res.Tools {
					compileSchema(t, tl.Name, tl.InputSchema)
					if tl.OutputSchema != nil {
						compileSchema(t, tl.Name+" (output)", tl.OutputSchema)
					}
					if tl.Description == "" {
						t.Errorf("%s has no description", tl.Name)
					}
				}
				s.stop(t)
			})
		}
	})
}

// compileSchema checks that a tool's schema is a valid JSON schema of an
// object.
func compileSchema(t *testing.T, name string, schema any) {
	t.Helper()
	raw, err := json.Marshal(schema)
	if err != nil {
		t.Fatalf("%s: schema: %v", name, err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("%s: schema is not JSON: %v", name, err)
	}
	c := jsonschema.NewCompiler()
	url := "mem:///" + name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if _, err := c.Compile(url); err != nil {
		t.Errorf("%s: invalid JSON schema: %v\n%s", name, err, raw)
	}
	if m, ok := doc.(map[string]any); !ok || m["type"] != "object" {
		t.Errorf("%s: schema type is not object: %s", name, raw)
	}
}

func TestWorkspaceTools(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		h := newHome(t, u)
		h.writeFile(t, "src/main.go", "package main\n\n// nsbox-marker here\nfunc main() {}\n")
		h.writeFile(t, "README.md", "hello\n")
		s := startServer(t, h, serverOpts{})

		s.ok("write_file", map[string]any{"path": "notes/todo.txt", "content": "one\ntwo\n", "create_dirs": true})
		got, err := os.ReadFile(filepath.Join(h.ws, "notes/todo.txt"))
		if err != nil || string(got) != "one\ntwo\n" {
			t.Fatalf("write_file wrote %q, %v", got, err)
		}
		if st, err := os.Stat(filepath.Join(h.ws, "notes/todo.txt")); err == nil {
			if sys := st.Sys().(*syscall.Stat_t); int(sys.Uid) != u.uid {
				t.Errorf("written file is owned by uid %d, want %d", sys.Uid, u.uid)
			}
		}

		r := s.ok("read_file", map[string]any{"path": "notes/todo.txt"})
		if !strings.Contains(string(r.Output), `one\ntwo`) {
			t.Errorf("read_file output %s", r.Output)
		}
		r = s.ok("list_directory", map[string]any{"recursive": true})
		for _, want := range []string{"README.md", "main.go", "todo.txt"} {
			if !strings.Contains(string(r.Output), want) {
				t.Errorf("list_directory lacks %s: %s", want, r.Output)
			}
		}
		r = s.ok("search_files", map[string]any{"pattern": "nsbox-marker"})
		if !strings.Contains(string(r.Output), "main.go") {
			t.Errorf("search_files: %s", r.Output)
		}
		r = s.ok("run_command", map[string]any{"command": "cat README.md; id -u; pwd"})
		out := string(r.Output)
		if !strings.Contains(out, `hello`) || !strings.Contains(out, fmt.Sprintf(`\n%d\n`, u.uid)) || !strings.Contains(out, h.ws) {
			t.Errorf("run_command: %s", out)
		}
		if _, err := lookSys("python3"); err != nil {
			t.Log("python3 is not installed: run_script python not tested")
		} else {
			r = s.ok("run_script", map[string]any{"language": "python", "script": "import os\nprint(sum(range(10)), os.path.exists('README.md'))"})
			if !strings.Contains(string(r.Output), "45 True") {
				t.Errorf("run_script python: %s", r.Output)
			}
		}
		s.stop(t)
	})
}

func TestPathEscape(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		s := startServer(t, newHome(t, u), serverOpts{})
		for _, tc := range []struct {
			tool string
			args map[string]any
		}{
			{"read_file", map[string]any{"path": "../../etc/passwd"}},
			{"read_file", map[string]any{"path": "/etc/passwd"}},
			{"write_file", map[string]any{"path": "../escape.txt", "content": "x"}},
			{"list_directory", map[string]any{"path": "../.."}},
		} {
			res := s.call(tc.tool, tc.args)
			r := structured(t, res)
			if !res.IsError || r.Success {
				t.Errorf("%s %v: not refused: %s", tc.tool, tc.args, text(res))
				continue
			}
			if msg := text(res); !strings.Contains(msg, "workspace") {
				t.Errorf("%s %v: the reason does not say why: %q", tc.tool, tc.args, msg)
			}
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(s.h.ws), "escape.txt")); err == nil {
			t.Error("write_file escaped the workspace")
		}
		// A command that runs out of time is a typed failure.
		res := s.call("run_command", map[string]any{"command": "sleep 30", "timeout": 1})
		if r := structured(t, res); !res.IsError || r.Reason != "timeout" || !strings.Contains(text(res), "timed out") {
			t.Errorf("timeout: reason %q, text %q", r.Reason, text(res))
		}
		s.stop(t)
	})
}

// TestRegisteredTool defines a tool during the session (register_tool, with
// --allow-tool-registration): the client is told the list changed, the tool
// is listed and can be called at once, and it runs inside the sandbox.
func TestRegisteredTool(t *testing.T) {
	if _, err := lookSys("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	eachUser(t, func(t *testing.T, u user) {
		for _, protocol := range []string{"", "2025-06-18"} {
			t.Run("protocol="+protocol, func(t *testing.T) {
				s := startServer(t, newHome(t, u), serverOpts{args: []string{"--allow-tool-registration"}, protocol: protocol})
				if !slices.Contains(s.toolNames(), "register_tool") {
					t.Fatal("register_tool is not listed with --allow-tool-registration")
				}
				def := map[string]any{
					"name":        "word_count",
					"description": "Count the words of a text.",
					"parameters": map[string]any{"type": "object", "required": []string{"text"},
						"properties": map[string]any{"text": map[string]any{"type": "string"}}},
					"implementation": map[string]any{"language": "python", "script": "import json, os, sys\n" +
						"a = json.load(sys.stdin)\nprint(json.dumps({'words': len(a['text'].split()), 'uid': os.getuid()}))\n"},
				}
				s.ok("register_tool", def)
				// Callable right after the registration returned.
				r := s.ok("word_count", map[string]any{"text": "one two three"})
				if !strings.Contains(string(r.Output), `"words":3`) || !strings.Contains(string(r.Output), fmt.Sprintf(`"uid":%d`, u.uid)) {
					t.Errorf("word_count: %s", r.Output)
				}
				select {
				case <-s.changed:
				case <-time.After(10 * time.Second):
					t.Fatal("no notifications/tools/list_changed after register_tool")
				}
				if !slices.Contains(s.toolNames(), "word_count") {
					t.Fatal("word_count is not listed")
				}
				// Its schema is enforced.
				res, err := s.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "word_count", Arguments: map[string]any{"text": 7}})
				if err == nil && !res.IsError {
					t.Error("word_count accepted a number for text")
				}
				// A built-in cannot be replaced.
				bad := s.call("register_tool", map[string]any{"name": "read_file", "description": "x", "implementation": map[string]any{"argv": []string{"true"}}})
				if !bad.IsError || !strings.Contains(text(bad), "built in") {
					t.Errorf("replacing read_file: %v %s", bad.IsError, text(bad))
				}
				for len(s.changed) > 0 {
					<-s.changed
				}
				s.ok("unregister_tool", map[string]any{"name": "word_count"})
				select {
				case <-s.changed:
				case <-time.After(10 * time.Second):
					t.Fatal("no notifications/tools/list_changed after unregister_tool")
				}
				if slices.Contains(s.toolNames(), "word_count") {
					t.Fatal("word_count is still listed")
				}
				s.stop(t)
			})
		}
	})
}

// TestCancel cancels a long run_command: the client gets progress while it
// runs, the call ends at once, the command is killed, and the session (the
// same worker) serves the next call.
func TestCancel(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		s := startServer(t, newHome(t, u), serverOpts{})
		s.ok("run_command", map[string]any{"command": "true"})
		worker := s.worker(t)
		secs := 600 + rand.IntN(10000)
		sleepCmd := fmt.Sprintf("sleep %d", secs)

		ctx, cancel := context.WithCancel(context.Background())
		params := &mcp.CallToolParams{Name: "run_command", Arguments: map[string]any{"command": sleepCmd, "timeout": 300}}
		params.SetProgressToken("long-1")
		done := make(chan error, 1)
		go func() {
			_, err := s.cs.CallTool(ctx, params)
			done <- err
		}()
		var prog []*mcp.ProgressNotificationParams
		for len(prog) < 2 {
			select {
			case p := <-s.progress:
				if p.ProgressToken == "long-1" {
					prog = append(prog, p)
				}
			case <-time.After(15 * time.Second):
				cancel()
				t.Fatalf("no progress notifications for a long call (got %d)", len(prog))
			}
		}
		if prog[1].Progress <= prog[0].Progress || prog[0].Message == "" {
			t.Errorf("progress does not advance: %+v then %+v", prog[0], prog[1])
		}
		var sleeping []proc
		for _, p := range descendants(s.pid()) {
			if p.cmd == sleepCmd {
				sleeping = append(sleeping, p)
			}
		}
		if len(sleeping) == 0 {
			t.Fatalf("%q is not running in the sandbox", sleepCmd)
		}
		start := time.Now()
		cancel()
		select {
		case err := <-done:
			if err == nil {
				t.Error("the cancelled call returned no error")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the cancelled call did not return")
		}
		// notifications/cancelled reached the worker: the command is killed.
		waitGone(t, sleeping, nil, 10*time.Second)
		t.Logf("cancel to command gone: %s", time.Since(start).Round(time.Millisecond))
		r := s.ok("run_command", map[string]any{"command": "echo still-here"})
		if !strings.Contains(string(r.Output), "still-here") {
			t.Errorf("after cancel: %s", r.Output)
		}
		if w := s.worker(t); w != worker {
			t.Errorf("the session was replaced: worker %+v, then %+v", worker, w)
		}
		s.stop(t)
	})
}

// TestNothingLeftBehind ends the connection — stdin EOF, or SIGTERM/SIGINT —
// with commands still running inside: the server exits by itself and no
// process of the sandbox and no cgroup of it remains.
func TestNothingLeftBehind(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		for _, how := range []string{"eof", "SIGTERM", "SIGINT"} {
			t.Run(how, func(t *testing.T) {
				// Limits, so that the sandbox gets a cgroup where this host
				// can give one.
				s := startServer(t, newHome(t, u), serverOpts{args: []string{"--memory", "512M", "--pids", "512"}})
				secs := 600 + rand.IntN(10000)
				marker := fmt.Sprintf("sleep %d", secs)
				// Detached from the command: only the end of the sandbox
				// can take it.
				s.ok("run_command", map[string]any{"command": fmt.Sprintf("setsid %s </dev/null >/dev/null 2>&1 &", marker)})
				// And one still in flight. At EOF the server finishes the
				// calls it read before it exits (they are answered): this
				// one ends at its timeout.
				inFlight := map[string]any{"command": "sleep 300"}
				if how == "eof" {
					inFlight["timeout"] = 2
				}
				go s.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_command", Arguments: inFlight})
				worker := s.worker(t)
				var procs []proc
				deadline := time.Now().Add(10 * time.Second)
				for {
					procs = descendants(s.pid())
					if slices.ContainsFunc(procs, func(p proc) bool { return p.cmd == marker }) &&
						slices.ContainsFunc(procs, func(p proc) bool { return p.cmd == "sleep 300" }) {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("markers not running in the sandbox: %+v", procs)
					}
					time.Sleep(50 * time.Millisecond)
				}
				var dirs []string
				for _, d := range cgroupDirs(worker.pid) {
					if _, err := os.Stat(d); err == nil {
						dirs = append(dirs, d)
					}
				}
				if len(dirs) == 0 {
					t.Logf("the worker is in no nsbox cgroup visible here (limits by rlimits): only processes are checked")
				} else {
					t.Logf("sandbox cgroups: %v", dirs)
				}
				switch how {
				case "eof":
					s.stop(t)
				default:
					sig := map[string]syscall.Signal{"SIGTERM": syscall.SIGTERM, "SIGINT": syscall.SIGINT}[how]
					if err := s.cmd.Process.Signal(sig); err != nil {
						t.Fatal(err)
					}
					select {
					case <-s.exited:
					case <-time.After(10 * time.Second):
						t.Fatalf("the server did not exit within 10s of %s", how)
					}
					if s.waitErr != nil {
						t.Fatalf("after %s: %v\nstderr: %s", how, s.waitErr, s.stderr)
					}
				}
				waitGone(t, append(procs, worker), dirs, 5*time.Second)
				if left := procsWithCmd(marker); len(left) > 0 {
					t.Fatalf("%q survived the session: %+v", marker, left)
				}
			})
		}
	})
}

// TestAudit checks --audit: one JSON line per tool call and hostCall, with
// secrets redacted.
func TestAudit(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		h := newHome(t, u)
		audit := filepath.Join(h.data, "audit.jsonl")
		s := startServer(t, h, serverOpts{args: []string{"--audit", audit}})
		s.ok("run_command", map[string]any{"command": "true"})
		s.call("read_file", map[string]any{"path": "../../etc/shadow"})
		withMemory := slices.Contains(s.toolNames(), "memory_save")
		if withMemory {
			s.ok("memory_save", map[string]any{"key": "k1", "text": "remember", "tags": []string{"t"}})
		}
		s.stop(t)
		data, err := os.ReadFile(audit)
		if err != nil {
			t.Fatal(err)
		}
		var tools, hostCalls []map[string]any
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var e map[string]any
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("audit line %q: %v", line, err)
			}
			switch e["kind"] {
			case "tool":
				tools = append(tools, e)
			case "hostCall":
				hostCalls = append(hostCalls, e)
			}
		}
		names := []string{}
		for _, e := range tools {
			names = append(names, fmt.Sprint(e["tool"]))
		}
		for _, want := range []string{"run_command", "read_file"} {
			if !slices.Contains(names, want) {
				t.Errorf("no audit line for %s: %s", want, data)
			}
		}
		if withMemory && len(hostCalls) == 0 {
			t.Errorf("memory_save made no hostCall audit line: %s", data)
		}
		if strings.Contains(string(data), `"key":"k1"`) {
			t.Errorf("a secret-looking key was not redacted: %s", data)
		}
	})
}

// TestHostAPITools calls the memory and notepad tools: they run inside the
// sandbox and reach their stores on the host through hostCall, which nsbox
// mcp allows and serves; the data lands in the user's data directory.
func TestHostAPITools(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		h := newHome(t, u)
		s := startServer(t, h, serverOpts{})
		names := s.toolNames()
		if !slices.Contains(names, "memory_save") || !slices.Contains(names, "document_overwrite") {
			t.Skip("this binary serves no memory/notepad tools (see TestToolsList)")
		}
		s.ok("memory_save", map[string]any{"key": "deploy", "text": "deploys go through the staging cluster first", "tags": []string{"ops"}})
		r := s.ok("memory_recall", map[string]any{"query": "staging deploys"})
		if !strings.Contains(string(r.Output), "staging cluster") {
			t.Errorf("memory_recall: %s", r.Output)
		}
		s.ok("document_overwrite", map[string]any{"title": "plan", "content": "1. test\n2. ship\n"})
		r = s.ok("notepad_list_tabs", map[string]any{})
		if !strings.Contains(string(r.Output), "plan") {
			t.Errorf("notepad_list_tabs: %s", r.Output)
		}
		s.stop(t)
		st, err := os.Stat(filepath.Join(h.data, "nsbox", "memory.db"))
		if err != nil {
			t.Fatalf("the memory store is not in XDG_DATA_HOME: %v", err)
		}
		if uid := int(st.Sys().(*syscall.Stat_t).Uid); uid != u.uid {
			t.Errorf("memory.db is owned by uid %d, want %d", uid, u.uid)
		}
	})
}
