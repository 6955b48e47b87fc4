package sandbox

import (
	"errors"
	"strings"
	"testing"
)

// PlanLandlock describes what a Landlock start would enforce and refuses
// what it refuses.
func TestPlanLandlock(t *testing.T) {
	if err := LandlockAvailable(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	p := Policy{Mounts: []Mount{{Kind: MountBind, Source: dir, Dest: dir}}, Network: NetworkNone}
	plan, err := PlanLandlock(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(plan.NotIsolated, "\n"), "PID visibility") {
		t.Errorf("the plan does not say what is left shared: %q", plan.NotIsolated)
	}
	found := false
	for _, r := range plan.Rules {
		if r.Path == dir && strings.Contains(r.Access, "write_file") {
			found = true
		}
		if strings.HasPrefix(r.Path, "/dev/pts") || r.Path == "/dev/ptmx" {
			t.Errorf("the host's terminals are granted: %+v", r)
		}
	}
	if !found {
		t.Errorf("the writable bind %s is not granted write: %+v", dir, plan.Rules)
	}
	p.Mounts = append(p.Mounts, Mount{Kind: MountTmpfs, Dest: "/mnt"})
	var pe *PolicyError
	if _, err := PlanLandlock(p); !errors.As(err, &pe) {
		t.Errorf("a tmpfs, which the landlock backend cannot make, was planned: %v", err)
	}
}
