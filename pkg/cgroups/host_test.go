package cgroups

import (
	"errors"
	"strings"
	"testing"
)

const hybridMountinfo = `24 30 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
30 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
31 24 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
32 31 0:27 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
33 31 0:28 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,xattr,name=systemd
36 31 0:31 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:16 - cgroup cgroup rw,cpu,cpuacct
37 31 0:32 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:17 - cgroup cgroup rw,memory
38 31 0:33 /docker/abc /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:18 - cgroup cgroup rw,pids
39 31 0:34 / /sys/fs/cgroup/my\040freezer rw - cgroup cgroup rw,freezer
`

const v2Mountinfo = `22 1 0:21 / /proc rw - proc proc rw
26 24 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`

func TestParseMountinfo(t *testing.T) {
	h := parseMountinfo([]byte(hybridMountinfo))
	if h.version != "hybrid" || h.v2 == nil || h.v2.point != "/sys/fs/cgroup/unified" {
		t.Fatalf("hybrid: %+v", h)
	}
	want := map[string]string{"cpu": "/sys/fs/cgroup/cpu,cpuacct", "memory": "/sys/fs/cgroup/memory", "pids": "/sys/fs/cgroup/pids", "freezer": "/sys/fs/cgroup/my freezer"}
	for c, p := range want {
		if h.v1[c] == nil || h.v1[c].point != p {
			t.Errorf("v1 %s = %+v; want %s", c, h.v1[c], p)
		}
	}
	if h.v1["pids"].root != "/docker/abc" {
		t.Errorf("pids root = %q", h.v1["pids"].root)
	}
	h = parseMountinfo([]byte(v2Mountinfo))
	if h.version != "v2" || h.v2.point != "/sys/fs/cgroup" || len(h.v1) != 0 {
		t.Fatalf("v2: %+v", h)
	}
	if h := parseMountinfo([]byte("22 1 0:21 / /proc rw - proc proc rw\n")); h.version != "" {
		t.Fatalf("none: %+v", h)
	}
}

func TestParseProcCgroups(t *testing.T) {
	pc := parseProcCgroups([]byte("9:name=systemd:/\n4:memory:/process_api/x\n2:cpu,cpuacct:/a\n0::/user.slice/u.scope\n"))
	if pc.v2 != "/user.slice/u.scope" || pc.v1["memory"] != "/process_api/x" || pc.v1["cpu"] != "/a" || pc.v1["cpuacct"] != "/a" || pc.v1["name=systemd"] != "/" {
		t.Fatalf("%+v", pc)
	}
}

func TestHostDir(t *testing.T) {
	m := &mount{point: "/sys/fs/cgroup/pids", root: "/docker/abc"}
	cases := []struct {
		cg   string
		want string
		ok   bool
	}{
		{"/docker/abc", "/sys/fs/cgroup/pids", true},
		{"/docker/abc/x", "/sys/fs/cgroup/pids/x", true},
		{"/docker", "", false},
		{"/docker/abcd", "", false},
		{"/../x", "", false},
		{"", "", false},
	}
	for _, c := range cases {
		got, ok := hostDir(m, c.cg)
		if got != c.want || ok != c.ok {
			t.Errorf("hostDir(%q) = %q, %v", c.cg, got, ok)
		}
	}
	if _, ok := hostDir(nil, "/"); ok {
		t.Error("nil mount")
	}
}

func TestGroupNames(t *testing.T) {
	n, err := groupName("sess-1.a_b")
	if err != nil {
		t.Fatal(err)
	}
	pid, sup, ok := parseGroupName(n)
	if !ok || sup || pid <= 0 || !strings.HasSuffix(n, "-sess-1.a_b") {
		t.Fatalf("%q -> %d %v %v", n, pid, sup, ok)
	}
	if pid, sup, ok := parseGroupName(supName(42)); !ok || !sup || pid != 42 {
		t.Fatalf("sup: %d %v %v", pid, sup, ok)
	}
	for _, bad := range []string{"nsbox-", "nsbox-12", "nsbox-x-1", "nsbox--1", "other-12-ab", "nsbox-0-a", "nsbox-99999999999-a",
		"nsbox-99999-ci-build", "nsbox-12-0123456789a", "nsbox-12-0123456789AB", "nsbox-012-0123456789ab"} {
		if _, _, ok := parseGroupName(bad); ok {
			t.Errorf("parseGroupName(%q) accepted", bad)
		}
	}
	for _, bad := range []string{"a/b", "x y", strings.Repeat("a", 65), "a\x00"} {
		if err := validateID(bad); !errors.Is(err, ErrInvalidID) {
			t.Errorf("validateID(%q) = %v", bad, err)
		}
	}
	if _, err := New("a/b", Limits{}); !errors.Is(err, ErrInvalidID) {
		t.Errorf("New with bad id: %v", err)
	}
}

func TestScopeProperties(t *testing.T) {
	ps := scopeProperties(1234, []string{"memory", "pids", "cpu"}, Limits{Memory: 64 << 20, Pids: 32, CPU: 0.5})
	got := map[string]string{}
	for _, p := range ps {
		got[p.Name] = p.Value.String()
	}
	want := map[string]string{
		"PIDs": "@au [1234]", "Delegate": "true", "MemoryMax": "@t 67108864", "MemorySwapMax": "@t 0",
		"TasksMax": "@t 32", "CPUQuotaPerSecUSec": "@t 500000",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q; want %q (all: %v)", k, got[k], v, got)
		}
	}
	ps = scopeProperties(1, []string{"pids"}, Limits{Memory: 64 << 20, Pids: 32})
	for _, p := range ps {
		if p.Name == "MemoryMax" {
			t.Error("MemoryMax set without the memory controller")
		}
	}
}
