package integration

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestToolsCallReason: nsbox tools call gives a failed call the same
// reason field as the Go API (pkg/tools TestReasonThroughGoAPI) and MCP,
// and a hidden .env reads as hidden by policy (issue 19, item 5).
func TestToolsCallReason(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		var withReason struct {
			Reason string `json:"reason"`
		}
		for _, c := range []struct {
			args  string
			extra []string
		}{
			{`{"command":"sleep 60","timeout":0.5}`, nil},           // the command's own timeout
			{`{"command":"sleep 60"}`, []string{"--timeout", "1s"}}, // the call's
		} {
			tr, r := u.callTool(t, ws, "run_command", c.args, c.extra...)
			if err := jsonUnmarshal(r.stdout, &withReason); err != nil || tr.Success || withReason.Reason != "timeout" {
				t.Errorf("run_command %s %v: reason %q (err %v), want timeout\n%s", c.args, c.extra, withReason.Reason, err, r.stdout)
			}
		}
		u.writeFile(t, filepath.Join(ws, ".env"), "API_TOKEN=hunter2\n", 0o644)
		tr, _ := u.callTool(t, ws, "read_file", `{"path":".env"}`)
		if tr.Success || !strings.Contains(tr.err(), "hidden by policy") || strings.Contains(tr.err(), "hunter2") {
			t.Errorf("read_file .env: success=%v error=%q", tr.Success, tr.err())
		}
	})
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
