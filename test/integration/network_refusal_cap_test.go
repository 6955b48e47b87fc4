package integration

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestNetworkRefusalPastTargetCapReported: refusals are reported once
// per target, 256 targets in full and more from a bounded bucket. A
// program inside first makes 300 distinct refused connects (literal
// addresses nsbox never handed out: refused before any packet) and then
// the connect that matters, to 203.0.113.77:4444: a violation event names
// it (a cap of 256 and nothing after made it silent; found by review).
func TestNetworkRefusalPastTargetCapReported(t *testing.T) {
	requirePython(t)
	eachUser(t, func(t *testing.T, u user) {
		_, _, ws, prof, port := filteredRig(t, u)
		script := `import socket
n = 0
for i in range(1, 301):
    s = socket.socket()
    try:
        s.connect(("192.0.2.1", i))
    except OSError:
        n += 1
    s.close()
s = socket.socket()
try:
    s.connect(("203.0.113.77", 4444))
except OSError:
    n += 1
print("refused", n)
`
		r := u.run(t, &runOpts{dir: ws}, "run", "--profile", prof, "--json-status", "fd:2",
			"--allow-host", "good.test:"+port, "--add-host", "good.test:127.0.0.1", "--", "/usr/bin/python3", "-c", script)
		if got := netResults(r.stdout)["refused"]; got != "301" {
			t.Fatalf("refused %q, want 301\nstdout: %s\nstderr: %.2000s", got, r.stdout, r.stderr)
		}
		vs := violationLines(t, r.stderr)
		found := false
		for _, v := range vs {
			b, _ := json.Marshal(v)
			if strings.Contains(string(b), "203.0.113.77") {
				found = true
			}
		}
		if !found {
			t.Errorf("the refused connect to 203.0.113.77:4444, made after 300 other refused targets, was never reported (%d violation events in all)", len(vs))
		}
	})
}
