package backend

import (
	"strings"
	"testing"

	"github.com/nsbox/nsbox/pkg/cgroups"
)

// A hybrid host like the one nsbox is developed on, and a v2 host.
const (
	hybridMountinfo = `30 23 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
31 30 0:27 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
35 30 0:31 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,memory
36 30 0:32 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:16 - cgroup cgroup rw,pids
37 30 0:33 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:17 - cgroup cgroup rw,cpu,cpuacct
38 30 0:34 / /sys/fs/cgroup/freezer rw,nosuid,nodev,noexec,relatime shared:18 - cgroup cgroup rw,freezer
`
	v2Mountinfo = `30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`
	v2FastMountinfo = `30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,favordynmods
`
)

func TestCgroupAttach(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mode      cgroups.Mode
		mountinfo string
		cmdline   string
		value     string
		inDetail  string
		inFix     string
	}{
		// v1: through the tasks files, without the lock since 5.2,
		// whatever the mounts.
		{"v1", cgroups.ModeCgroup1, hybridMountinfo, "root=/dev/vda ro", "fast", "tasks files", ""},
		{"v1 command line off", cgroups.ModeCgroup1, hybridMountinfo, "cgroup_favordynmods=off", "fast", "tasks files", ""},
		{"v1 before 5.2", cgroups.ModeCgroup1, hybridMountinfo, "root=/dev/vda ro", "slow", "/sys/fs/cgroup/memory, /sys/fs/cgroup/pids, /sys/fs/cgroup/cpu,cpuacct not mounted", "5.2 or later"},
		{"v2 slow", cgroups.ModeCgroup2, v2Mountinfo, "", "slow", "/sys/fs/cgroup not mounted", "mount -o remount,favordynmods /sys/fs/cgroup"},
		{"v2 command line", cgroups.ModeCgroup2, v2Mountinfo, "ro cgroup_favordynmods=1 quiet", "fast", "cgroup_favordynmods=1", ""},
		{"v2 command line off", cgroups.ModeCgroup2, v2FastMountinfo, "cgroup_favordynmods=off", "fast", "mounted with favordynmods", ""},
		{"v2 delegated fast", cgroups.ModeCgroup2Delegated, v2FastMountinfo, "", "fast", "mounted with favordynmods: /sys/fs/cgroup", ""},
		{"v2 mode, no v2 mount", cgroups.ModeCgroup2, "35 30 0:31 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n", "", "unknown", "no cgroup hierarchy", ""},
		{"rlimits", cgroups.ModeRlimit, hybridMountinfo, "", "not used", "rlimit", ""},
		{"garbage", cgroups.ModeCgroup2, "x\n - \n1 2 3\n", "cgroup_favordynmods", "unknown", "no cgroup hierarchy", ""},
	} {
		major, minor := 6, 18
		if strings.HasSuffix(tc.name, "before 5.2") {
			major, minor = 4, 19
		}
		c := cgroupAttach(tc.mode, []byte(tc.mountinfo), tc.cmdline, major, minor)
		if !c.OK || c.Name != "cgroup attach" || c.Value != tc.value || !strings.Contains(c.Detail, tc.inDetail) || !strings.Contains(c.Fix, tc.inFix) || (tc.inFix == "" && c.Fix != "") {
			t.Errorf("%s: %+v", tc.name, c)
		}
	}
}
