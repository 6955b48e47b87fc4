package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// groupsOfSupervisor lists the limit groups named after one nsbox
// supervisor (nsbox-<pid>-*) in every hierarchy, at the depths the hosts
// in use put them.
func groupsOfSupervisor(t *testing.T, pid int) []string {
	t.Helper()
	prefix := "nsbox-" + strconv.Itoa(pid) + "-"
	var out []string
	for _, pat := range []string{"/sys/fs/cgroup/", "/sys/fs/cgroup/*/", "/sys/fs/cgroup/*/*/", "/sys/fs/cgroup/*/*/*/", "/sys/fs/cgroup/*/*/*/*/"} {
		m, err := filepath.Glob(pat + prefix + "*")
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m...)
	}
	return out
}

// TestLimitsTeardownRemovesGroupWithStragglers: the limits' groups are
// removed beside the worker's exit, not after it. A run whose command
// leaves a process behind in the group still ends with that process
// killed and every group of the run removed by the time nsbox exits:
// nothing is left for a later run's stale cleanup.
func TestLimitsTeardownRemovesGroupWithStragglers(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		marker := fmt.Sprintf("%d", 555000+os.Getpid()%1000)
		cmd := exec.Command(nsboxBin(t), "run", "--json-status", "fd:1", "--memory", "128M", "--pids", "64", "--",
			"/bin/sh", "-c", "setsid sleep "+marker+" & setsid sleep "+marker+" & exit 0")
		cmd.Dir = "/"
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + u.home()}
		u.asUser(cmd)
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("nsbox run: %v, stderr %q", err, errb.String())
		}
		mode, exited := limitStatus(t, out.String())
		switch mode {
		case "cgroup1", "cgroup2", "cgroup2-delegated":
		default:
			t.Skipf("limits are not enforced by a cgroup here (mode %q): no group to remove", mode)
		}
		if exited["exit_code"] != float64(0) {
			t.Fatalf("exited status %v, stderr %q", exited, errb.String())
		}
		// No wait here: nsbox exits only after its groups are empty and gone.
		if left := pidsOfMarker("sleep\x00" + marker); len(left) > 0 {
			t.Errorf("processes of the sandbox outlived nsbox: %v", left)
		}
		if left := groupsOfSupervisor(t, cmd.Process.Pid); len(left) > 0 {
			t.Errorf("the run's groups outlived nsbox: %v", left)
		}
	})
}
