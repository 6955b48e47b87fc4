package integration

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestProfileTraceOnSetgroupsHolds: a custom seccomp profile whose rule
// traces setgroups (SCMP_ACT_TRACE; nsbox runs no tracer, so the call
// fails with ENOSYS) keeps that effect with the socket gate on. The gate's
// filter notifies setgroups, and a notification outranks a trace result:
// the call ran (root: it succeeded) until the profile compiler gave
// SCMP_ACT_TRACE the errno the kernel gives without a tracer (found by
// review).
func TestProfileTraceOnSetgroupsHolds(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed here")
	}
	eachUser(t, func(t *testing.T, u user) {
		dir := u.tempDir(t)
		profile := filepath.Join(dir, "trace-setgroups.json")
		u.writeFile(t, profile, `{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["setgroups"], "action": "SCMP_ACT_TRACE"}]}`, 0o644)
		r := u.run(t, nil, "run", "--seccomp", profile, "--", "python3", "-c",
			"import os\ntry:\n    os.setgroups([]); print('setgroups ok')\nexcept OSError as e: print('setgroups errno', e.errno)")
		expectCode(t, r, 0)
		if got := strings.TrimSpace(r.stdout); got != "setgroups errno 38" {
			t.Fatalf("a setgroups the profile traces gave %q, want ENOSYS (errno 38)\nstderr: %s", got, r.stderr)
		}
	})
}
