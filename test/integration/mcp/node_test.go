package mcpintegration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

var (
	npmOnce sync.Once
	npmErr  error
)

// nodeClient returns the directory of the TypeScript SDK client, with its
// dependencies installed from package-lock.json (npm ci) when they are
// missing. It skips when node or npm is not installed.
func nodeClient(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := lookSys(tool); err != nil {
			t.Skipf("%v: the TypeScript SDK client is not tested (apt-get install nodejs npm)", err)
		}
	}
	dir, err := filepath.Abs("node")
	if err != nil {
		t.Fatal(err)
	}
	npmOnce.Do(func() {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err == nil {
			return
		}
		npm, _ := lookSys("npm")
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			npmErr = fmt.Errorf("npm ci in %s: %v\n%s", dir, err, out)
		}
	})
	if npmErr != nil {
		t.Fatal(npmErr)
	}
	return dir
}

// TestTypeScriptClient drives nsbox mcp with the official TypeScript SDK's
// client: it lists the tools and calls them against the same server binary.
func TestTypeScriptClient(t *testing.T) {
	dir := nodeClient(t)
	node, err := lookSys("node")
	if err != nil {
		t.Skip(err)
	}
	eachUser(t, func(t *testing.T, u user) {
		h := newHome(t, u)
		h.writeFile(t, "README.md", "hello\n")
		cmd := exec.Command(node, filepath.Join(dir, "client.mjs"), nsboxBin(t), h.ws, "--allow-tool-registration")
		h.setup(cmd)
		var stderr syncBuffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("node client: %v\nstderr:\n%s", err, stderr.String())
		}
		var got struct {
			Server        struct{ Name string }
			ProtocolTools []struct {
				Name            string
				Title           string
				Annotations     map[string]any
				SchemaType      string
				HasOutputSchema bool
			}
			Cancelled      string
			ProtocolErrors []string
			Calls          map[string]struct {
				IsError    bool
				Text       string
				Structured struct {
					Success bool
					Output  json.RawMessage
					Error   *string
				}
			}
			UnknownTool struct{ Error any }
			ListChanged int
			ListedAfter []string
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("node client printed %q: %v", out, err)
		}
		if got.Server.Name != "nsbox" {
			t.Errorf("server name %q", got.Server.Name)
		}
		var names []string
		for _, tl := range got.ProtocolTools {
			names = append(names, tl.Name)
			if tl.SchemaType != "object" {
				t.Errorf("%s: input schema type %q", tl.Name, tl.SchemaType)
			}
		}
		for _, tl := range got.ProtocolTools {
			if tl.Title == "" || len(tl.Annotations) < 4 {
				t.Errorf("%s: title %q, annotations %v: want a title and all four hints", tl.Name, tl.Title, tl.Annotations)
			}
			if ro := tl.Annotations["readOnlyHint"] == true; ro != (tl.Name == "read_file" || tl.Name == "list_directory" || tl.Name == "search_files" || tl.Name == "memory_recall" || strings.HasPrefix(tl.Name, "notepad_get") || tl.Name == "notepad_list_tabs" || tl.Name == "document_read") {
				t.Errorf("%s: readOnlyHint %v", tl.Name, ro)
			}
		}
		checkCancelled(t, got.Cancelled, got.Calls["afterCancel"].IsError, got.Calls["afterCancel"].Text, got.ProtocolErrors)
		for _, want := range builtinTools {
			if !slices.Contains(names, want) {
				t.Errorf("the TypeScript client does not see %s: %v", want, names)
			}
		}
		for _, call := range []string{"write", "read", "run", "list"} {
			c := got.Calls[call]
			if c.IsError || !c.Structured.Success {
				t.Errorf("%s failed: %s", call, c.Text)
			}
		}
		if !strings.Contains(got.Calls["read"].Text, "written by the TypeScript client") {
			t.Errorf("read: %s", got.Calls["read"].Text)
		}
		if run := got.Calls["run"].Text; !strings.Contains(run, "written by the TypeScript client") || !strings.Contains(run, fmt.Sprintf(`\n%d\n`, u.uid)) {
			t.Errorf("run_command: %s", run)
		}
		if b, err := os.ReadFile(filepath.Join(h.ws, "from-node.txt")); err != nil || !strings.Contains(string(b), "TypeScript") {
			t.Errorf("from-node.txt: %q %v", b, err)
		}
		if esc := got.Calls["escape"]; !esc.IsError || !strings.Contains(esc.Text, "workspace") {
			t.Errorf("path escape: %+v", esc)
		}
		if got.ListChanged == 0 {
			t.Error("the TypeScript client got no notifications/tools/list_changed after register_tool")
		}
		if !slices.Contains(got.ListedAfter, "shout") {
			t.Errorf("registered tool not listed: %v", got.ListedAfter)
		}
		if c := got.Calls["registered"]; c.IsError || !strings.Contains(c.Text, "QUIET") {
			t.Errorf("registered tool: %+v (register: %+v)", c, got.Calls["register"])
		}
		if got.UnknownTool.Error != float64(-32602) {
			t.Errorf("unknown tool: %v, want JSON-RPC error -32602", got.UnknownTool.Error)
		}
	})
}

// checkCancelled: the call the client aborted was not answered (the
// TypeScript SDK reports an answer to it as "a response for an unknown
// message ID"), and the next call works.
func checkCancelled(t *testing.T, cancelled string, afterIsError bool, afterText string, protocolErrors []string) {
	t.Helper()
	if cancelled != "aborted" {
		t.Errorf("the aborted call: %q", cancelled)
	}
	if afterIsError || !strings.Contains(afterText, "after-cancel") {
		t.Errorf("the call after the cancellation: %s", afterText)
	}
	if len(protocolErrors) > 0 {
		t.Errorf("the TypeScript SDK reported protocol errors: %q", protocolErrors)
	}
}

// TestTypeScriptClientHTTP: the TypeScript SDK's streamable HTTP client
// against nsbox mcp --http with a token.
func TestTypeScriptClientHTTP(t *testing.T) {
	dir := nodeClient(t)
	node, err := lookSys("node")
	if err != nil {
		t.Skip(err)
	}
	eachUser(t, func(t *testing.T, u user) {
		h := newHome(t, u)
		const token = "typescript-client-token-0123456789"
		tf := filepath.Join(h.cfg, "token")
		if err := os.WriteFile(tf, []byte(token), 0o600); err != nil {
			t.Fatal(err)
		}
		u.chown(t, tf)
		s := startHTTPServer(t, h, "--token-file", tf)
		cmd := exec.Command(node, filepath.Join(dir, "client.mjs"), "--http", s.url, token)
		h.setup(cmd)
		var stderr syncBuffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("node client: %v\nstderr:\n%s", err, stderr.String())
		}
		var got struct {
			ProtocolTools []struct{ Name string }
			Cancelled     string
			Calls         map[string]struct {
				IsError bool
				Text    string
			}
			ProtocolErrors []string
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("node client printed %q: %v", out, err)
		}
		if len(got.ProtocolTools) < len(builtinTools) {
			t.Errorf("tools over HTTP: %v", got.ProtocolTools)
		}
		if c := got.Calls["run"]; c.IsError || !strings.Contains(c.Text, "over-http") {
			t.Errorf("run_command over HTTP: %+v", c)
		}
		checkCancelled(t, got.Cancelled, got.Calls["afterCancel"].IsError, got.Calls["afterCancel"].Text, got.ProtocolErrors)
		// terminateSession sent DELETE: the session's sandbox is gone.
		waitWorkers(t, s.cmd.Process.Pid, 0, "after the TypeScript client's DELETE")
	})
}
