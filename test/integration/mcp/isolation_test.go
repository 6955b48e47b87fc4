package mcpintegration

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// hostPidsOf lists the host's processes whose command line is cmdline
// (NUL-separated, as /proc shows it).
func hostPidsOf(cmdline string) []int {
	var out []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(d + "/cmdline")
		if err != nil || !bytes.Equal(bytes.TrimRight(b, "\x00"), []byte(cmdline)) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(d))
		out = append(out, pid)
	}
	return out
}

// leaveState is a run_command that leaves a file in /tmp and a background
// process behind.
func leaveState(marker string) map[string]any {
	return map[string]any{"command": fmt.Sprintf("echo left > /tmp/x; setsid sleep %s >/dev/null 2>&1 < /dev/null & echo started", marker)}
}

// seeState reports what a later call sees of it: FILE when /tmp/x is
// there, and the number of sleep MARKER processes in its sandbox.
func seeState(marker string) map[string]any {
	return map[string]any{"command": fmt.Sprintf(`test -e /tmp/x && echo FILE; n=0; for c in /proc/[0-9]*/cmdline; do tr '\0' ' ' < $c | grep -q '^sleep %s' && n=$((n+1)); done; echo "sleepers=$n"`, marker)}
}

// TestIsolationPerCall: with --isolation per-call, a tool call that leaves
// a file in /tmp and a background process is followed by one that sees
// neither (each ran in its own sandbox from the pool), and the background
// process is gone once the server is.
func TestIsolationPerCall(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		h := newHome(t, u)
		s := startServer(t, h, serverOpts{args: []string{"--isolation", "per-call", "--pool-size", "2"}})
		// tools/list needs no sandbox: the definitions are the host's.
		if names := s.toolNames(); !slices.Contains(names, "run_command") || slices.Contains(names, "register_tool") {
			t.Fatalf("tools/list: %v", names)
		}
		marker := strconv.Itoa(600000 + os.Getpid()%100000)
		s.ok("run_command", leaveState(marker))
		out := string(s.ok("run_command", seeState(marker)).Output)
		if strings.Contains(out, "FILE") {
			t.Errorf("/tmp/x of the first call is seen by the second: %s", out)
		}
		if !strings.Contains(out, "sleepers=0") {
			t.Errorf("the first call's background sleep is seen by the second: %s", out)
		}
		// The workspace is the host's and shared by every call, as always.
		s.ok("write_file", map[string]any{"path": "kept.txt", "content": "kept"})
		if r := s.ok("read_file", map[string]any{"path": "kept.txt"}); !strings.Contains(string(r.Output), "kept") {
			t.Errorf("read_file of a file the previous call wrote: %s", r.Output)
		}
		s.stop(t)
		if left := hostPidsOf("sleep\x00" + marker); len(left) > 0 {
			t.Errorf("a call's background process outlived nsbox mcp: pids %v", left)
		}
	})
}

// TestIsolationSessionDefault: without --isolation, calls share the
// connection's sandbox, so the second call sees the first's /tmp/x.
func TestIsolationSessionDefault(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		h := newHome(t, u)
		s := startServer(t, h, serverOpts{})
		marker := strconv.Itoa(700000 + os.Getpid()%100000)
		s.ok("run_command", leaveState(marker))
		out := string(s.ok("run_command", seeState(marker)).Output)
		if !strings.Contains(out, "FILE") || !strings.Contains(out, "sleepers=1") {
			t.Errorf("the connection's sandbox lost the first call's /tmp/x or sleep: %s", out)
		}
		s.stop(t)
	})
}

// TestIsolationRefusals: per-call with run-time tool registration, an
// unknown mode and a pool size out of range are refused before anything
// starts, with exit 125 and the reason.
func TestIsolationRefusals(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		h := newHome(t, u)
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"--isolation", "per-call", "--allow-tool-registration"}, "register_tool"},
			{[]string{"--isolation", "per-process"}, "--isolation"},
			{[]string{"--isolation", "per-call", "--pool-size", "0"}, "--pool-size"},
			{[]string{"--pool-size", "4"}, "--pool-size"},
		} {
			cmd := h.mcpCmd(t, c.args...)
			out, err := cmd.CombinedOutput()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 125 || !strings.Contains(string(out), c.want) {
				t.Errorf("nsbox mcp %v: exit %v, output %q: want 125 and %q", c.args, err, out, c.want)
			}
		}
	})
}
