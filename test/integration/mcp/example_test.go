package mcpintegration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestFunctionCallingExample runs examples/function-calling: canned model
// replies (OpenAI and Ollama) whose tool calls run with nsbox tools call.
func TestFunctionCallingExample(t *testing.T) {
	python, err := lookSys("python3")
	if err != nil {
		t.Skip(err.Error() + ": the example script cannot run")
	}
	dir, err := filepath.Abs("../../../examples/function-calling")
	if err != nil {
		t.Fatal(err)
	}
	eachUser(t, func(t *testing.T, u user) {
		h := newHome(t, u)
		run := func(reply string) []map[string]string {
			t.Helper()
			cmd := exec.Command(python, filepath.Join(dir, "run_tool_calls.py"), "--nsbox", nsboxBin(t), "--workspace", h.ws, filepath.Join(dir, reply))
			h.setup(cmd)
			var stderr syncBuffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%s: %v\n%s", reply, err, stderr.String())
			}
			var msgs []map[string]string
			if err := json.Unmarshal(out, &msgs); err != nil {
				t.Fatalf("%s: output %q: %v", reply, out, err)
			}
			return msgs
		}
		result := func(m map[string]string) (r toolResult) {
			t.Helper()
			if m["role"] != "tool" {
				t.Errorf("message role %q", m["role"])
			}
			if err := json.Unmarshal([]byte(m["content"]), &r); err != nil {
				t.Fatalf("content %q: %v", m["content"], err)
			}
			return r
		}

		msgs := run("reply.openai.json")
		if len(msgs) != 3 {
			t.Fatalf("%d tool messages, want 3: %v", len(msgs), msgs)
		}
		for i, id := range []string{"call_1", "call_2", "call_3"} {
			if msgs[i]["tool_call_id"] != id {
				t.Errorf("message %d answers %q, want %q", i, msgs[i]["tool_call_id"], id)
			}
		}
		if r := result(msgs[0]); !r.Success {
			t.Errorf("write_file: %+v", r)
		}
		if b, err := os.ReadFile(filepath.Join(h.ws, "hello.py")); err != nil || !strings.Contains(string(b), "hello from the sandbox") {
			t.Errorf("hello.py: %q %v", b, err)
		}
		if r := result(msgs[1]); !r.Success || !strings.Contains(string(r.Output), "hello from the sandbox 45") {
			t.Errorf("run_command: %+v", r)
		}
		if r := result(msgs[2]); r.Success || r.Error == nil || !strings.Contains(*r.Error, "outside the workspace") {
			t.Errorf("path escape: %+v", r)
		}

		msgs = run("reply.ollama.json")
		if len(msgs) != 2 || msgs[0]["tool_name"] != "list_directory" || msgs[1]["tool_name"] != "search_files" {
			t.Fatalf("ollama messages: %v", msgs)
		}
		if r := result(msgs[0]); !r.Success || !strings.Contains(string(r.Output), "hello.py") {
			t.Errorf("list_directory: %+v", r)
		}
		if r := result(msgs[1]); !r.Success || !strings.Contains(string(r.Output), "hello.py") {
			t.Errorf("search_files: %+v", r)
		}
	})
}
