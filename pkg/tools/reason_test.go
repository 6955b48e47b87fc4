package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/pkg/sandbox"
	"golang.org/x/sys/unix"
)

// TestReasonThroughGoAPI: a run_command that outlives its timeout answers,
// through sandbox.Session.CallTool, with reason "timeout" (the same field
// nsbox tools call prints: test/integration/reason_test.go).
func TestReasonThroughGoAPI(t *testing.T) {
	ws := t.TempDir()
	s, err := sandbox.Start(context.Background(), sandbox.Policy{
		Mounts:    []sandbox.Mount{{Kind: sandbox.MountBind, Source: ws, Dest: ws}},
		Cwd:       ws,
		Workspace: ws,
	})
	if err != nil {
		t.Skipf("no sandbox here: %v", err)
	}
	defer s.Close()
	raw, err := s.CallTool(context.Background(), "run_command", json.RawMessage(`{"command":"sleep 60","timeout":0.5}`), 0)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Success bool   `json:"success"`
		Reason  string `json:"reason"`
	}
	if err := json.Unmarshal(raw, &res); err != nil || res.Success || res.Reason != ReasonTimeout {
		t.Errorf("result %s: want success false, reason %q", raw, ReasonTimeout)
	}
	// The call's own timeout (not the command's) gives the same reason.
	raw, err = s.CallTool(context.Background(), "run_command", json.RawMessage(`{"command":"sleep 60"}`), 500e6)
	if err != nil || !strings.Contains(string(raw), `"reason":"timeout"`) {
		t.Errorf("call timeout: %v %s", err, raw)
	}
}

func TestHiddenFileReadsAsHidden(t *testing.T) {
	// The mount layer hides a file by binding /dev/null over it; a
	// device node with /dev/null's numbers stands for that here.
	ws := t.TempDir()
	if os.Geteuid() != 0 {
		t.Skip("making a /dev/null device node in the workspace needs root")
	}
	if err := mknodNull(filepath.Join(ws, ".env")); err != nil {
		t.Skipf("mknod: %v", err)
	}
	r, env := NewBuiltinRegistry(), &hostEnv{ws: ws}
	for _, c := range []struct{ tool, args string }{
		{"read_file", `{"path":".env"}`},
		{"write_file", `{"path":".env","content":"x"}`},
		{"edit_file", `{"path":".env","old_string":"a","new_string":"b"}`},
	} {
		res := call(t, r, env, c.tool, c.args)
		if res.Success || !strings.Contains(errText(res), "is hidden by policy") {
			t.Errorf("%s of a hidden .env: success=%v error=%q", c.tool, res.Success, errText(res))
		}
	}
}

func mknodNull(p string) error {
	return unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3)))
}
