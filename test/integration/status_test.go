package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

type statusReport struct {
	Backend string `json:"backend"`
	UID     int    `json:"uid"`
	Checks  []struct {
		Name   string `json:"name"`
		OK     bool   `json:"ok"`
		Value  string `json:"value"`
		Detail string `json:"detail"`
		Fix    string `json:"fix"`
	} `json:"checks"`
	Limits struct {
		Mode string `json:"mode"`
	} `json:"limits"`
}

// hostCgroups says how this host mounts cgroups: "v2", "hybrid" or "v1".
func hostCgroups() string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	v1, v2 := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		_, after, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		switch strings.Fields(after)[0] {
		case "cgroup2":
			v2 = true
		case "cgroup":
			v1 = true
		}
	}
	switch {
	case v1 && v2:
		return "hybrid"
	case v2:
		return "v2"
	case v1:
		return "v1"
	}
	return ""
}

func TestStatus(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		r := u.run(t, nil, "status", "--json")
		expectCode(t, r, 0)
		var rep statusReport
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("%v\n%s", err, r.stdout)
		}
		if rep.Backend != "native" || rep.UID != u.uid {
			t.Fatalf("backend %q uid %d", rep.Backend, rep.UID)
		}
		checks := map[string]int{}
		for i, c := range rep.Checks {
			checks[c.Name] = i
			if !c.OK && c.Detail == "" {
				t.Errorf("%s fails without a reason", c.Name)
			}
		}
		for _, n := range []string{"user namespaces", "fresh /proc", "sandbox", "cgroups", "cgroup attach", "seccomp", "landlock", "pidfd", "clone3 into cgroup"} {
			if _, ok := checks[n]; !ok {
				t.Fatalf("no %q line: %s", n, r.stdout)
			}
		}
		cg := rep.Checks[checks["cgroups"]]
		// On a hybrid host (controllers on cgroup v1): root gets cgroup v1
		// groups, other users rlimits (cgroup v1 has no safe delegation).
		if hostCgroups() == "hybrid" {
			want := "rlimit"
			if u.uid == 0 {
				want = "cgroup1"
			}
			if cg.Value != want || !strings.Contains(cg.Detail, "hybrid") {
				t.Errorf("cgroups on a hybrid host as %s: %+v", u.name, cg)
			}
			if want == "rlimit" && (cg.OK || cg.Fix == "") {
				t.Errorf("rlimit mode must say how to get cgroups: %+v", cg)
			}
		}
		// The attach line follows the limit mode: no group, no attach.
		at := rep.Checks[checks["cgroup attach"]]
		switch cg.Value {
		case "rlimit", "none":
			if at.Value != "not used" {
				t.Errorf("cgroup attach with %s limits: %+v", cg.Value, at)
			}
		default:
			if at.Value != "slow" && at.Value != "fast" {
				t.Errorf("cgroup attach with %s limits: %+v", cg.Value, at)
			}
			if at.Value == "slow" && !strings.Contains(at.Fix, "favordynmods") {
				t.Errorf("a slow attach must name the knob: %+v", at)
			}
		}
		// What a run does matches what status says.
		run := u.run(t, nil, "run", "--memory", "128M", "--pids", "64", "--json-status", "fd:1", "--", "/bin/true")
		expectCode(t, run, 0)
		var started struct {
			Event  string `json:"event"`
			Limits struct {
				Mode string `json:"mode"`
			} `json:"limits"`
		}
		json.Unmarshal([]byte(strings.SplitN(run.stdout, "\n", 2)[0]), &started)
		if started.Event != "started" || started.Limits.Mode != cg.Value || rep.Limits.Mode != cg.Value {
			t.Errorf("status says %s (test sandbox %s), a run used %q", cg.Value, rep.Limits.Mode, started.Limits.Mode)
		}
		// Landlock: the ABI the kernel reports to us.
		ll := rep.Checks[checks["landlock"]]
		abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
		if errno == 0 && (!ll.OK || ll.Value != fmt.Sprintf("ABI %d", abi)) {
			t.Errorf("landlock: %+v, kernel says ABI %d", ll, abi)
		}
		if errno != 0 && ll.OK {
			t.Errorf("landlock reported with %v from the kernel", errno)
		}
		for _, n := range []string{"user namespaces", "fresh /proc", "sandbox", "pidfd"} {
			if c := rep.Checks[checks[n]]; !c.OK {
				t.Errorf("%s fails although sandboxes run here: %+v", n, c)
			}
		}
		// The text form names every mechanism too.
		txt := u.run(t, nil, "status")
		expectCode(t, txt, 0)
		if !strings.Contains(txt.stdout, "backend: native") || !strings.Contains(txt.stdout, "landlock") {
			t.Errorf("text status: %s", txt.stdout)
		}
	})
}

// Without user namespaces, status says so and names the knob; it exits 1
// for --backend required (the namespace sandbox or nothing), and for auto
// it reports the landlock backend where the kernel has Landlock.
func TestStatusWithoutUserns(t *testing.T) {
	bin := nsboxBin(t)
	eachUser(t, func(t *testing.T, u user) {
		unshareAvailable(t, u)
		if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION); errno == 0 {
			r := u.runAs(t, nil, "unshare", "-U", "-r", "sh", "-c", `echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"`, "sh", bin, "status")
			if r.code != 0 || !strings.Contains(r.stdout, "backend: landlock") || !strings.Contains(r.stdout, "does not isolate") || !strings.Contains(r.stdout, "user.max_user_namespaces is 0") {
				t.Fatalf("auto with Landlock: code %d stdout %s stderr %s", r.code, r.stdout, r.stderr)
			}
		}
		r := u.runAs(t, nil, "unshare", "-U", "-r", "sh", "-c", `echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"`, "sh", bin, "status", "--backend", "required")
		if r.code != 1 || !strings.Contains(r.stdout, "user.max_user_namespaces is 0") || !strings.Contains(r.stdout, "sudo sysctl -w user.max_user_namespaces=") {
			t.Fatalf("code %d stdout %s stderr %s", r.code, r.stdout, r.stderr)
		}
	})
}
