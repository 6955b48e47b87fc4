package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/pkg/cgroups"
)

// ourGroups lists the limit groups of this process (nsbox-<our pid>-*,
// not the "-sup" leaf of cgroup v2 delegation) in every hierarchy, at the
// depths the hosts in use put them.
func ourGroups(t *testing.T) []string {
	t.Helper()
	prefix := "nsbox-" + strconv.Itoa(os.Getpid()) + "-"
	var out []string
	for _, pat := range []string{"/sys/fs/cgroup/", "/sys/fs/cgroup/*/", "/sys/fs/cgroup/*/*/", "/sys/fs/cgroup/*/*/*/", "/sys/fs/cgroup/*/*/*/*/"} {
		m, err := filepath.Glob(pat + prefix + "*")
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range m {
			if !strings.HasSuffix(g, "-sup") {
				out = append(out, g)
			}
		}
	}
	return out
}

// limitedPolicy asks for limits that this host enforces with a cgroup,
// or skips: without a group there is nothing that could leak.
func limitedPolicy(t *testing.T) Policy {
	t.Helper()
	switch d := cgroups.Detect(); d.Mode {
	case cgroups.ModeCgroup1, cgroups.ModeCgroup2, cgroups.ModeCgroup2Delegated:
	default:
		t.Skipf("limits are not enforced by a cgroup here (mode %s: %s)", d.Mode, d.Reason)
	}
	if g := ourGroups(t); len(g) > 0 {
		t.Fatalf("groups of this process before the test: %v", g)
	}
	return Policy{Limits: Limits{Memory: 256 << 20, Pids: 64}}
}

// TestStartFailureBeforeLimitsLeavesNoGroup: Start makes the limits'
// groups on a goroutine beside its first steps. A step that fails before
// "create limits" takes their result must still remove them.
func TestStartFailureBeforeLimitsLeavesNoGroup(t *testing.T) {
	p := limitedPolicy(t)
	missing := filepath.Join(t.TempDir(), "missing")
	p.Mounts = []Mount{{Kind: MountBind, Source: missing, Dest: "/mnt/missing"}}
	s, err := Start(context.Background(), p)
	if err == nil {
		s.Close()
		t.Fatal("Start with a missing bind source succeeded")
	}
	// checkSources names the step "mount", like the worker's own check.
	var se *SetupError
	if !errors.As(err, &se) || se.Step != "mount" {
		t.Fatalf("err = %v, want a SetupError of step %q", err, "mount")
	}
	if g := ourGroups(t); len(g) > 0 {
		t.Errorf("a failed Start left groups: %v", g)
	}
}

// TestStartInvalidPolicyWithLimitsLeavesNoGroup: the same when the policy
// itself is refused (its first step), with limits valid for the cgroup.
func TestStartInvalidPolicyWithLimitsLeavesNoGroup(t *testing.T) {
	p := limitedPolicy(t)
	p.Cwd = "relative"
	if _, err := Start(context.Background(), p); !errors.Is(err, ErrInvalidPolicy) {
		t.Fatalf("err = %v, want ErrInvalidPolicy", err)
	}
	if g := ourGroups(t); len(g) > 0 {
		t.Errorf("a refused Start left groups: %v", g)
	}
}
