package cgroups

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func inVM() bool { return os.Getenv("NSBOX_VM") == "1" }

// TestDetectHost checks Detect against what this machine is known to be:
// the VM (cgroup v2, root), a hybrid host with the controllers on v1 (root:
// cgroup1; another uid: rlimit).
func TestDetectHost(t *testing.T) {
	d := Detect()
	t.Logf("uid %d: %+v", os.Geteuid(), d)
	if d.Mode == "" || d.Version == "" && d.Mode != ModeRlimit {
		t.Fatalf("incomplete detection %+v", d)
	}
	if d.Mode == ModeRlimit && (d.Reason == "" || d.Knob == "") {
		t.Errorf("rlimit mode must say why and what to change: %+v", d)
	}
	h := getMounts()
	v2ctrls := h.v2 != nil && len(intersect([]string{ctrlMemory, ctrlPids, ctrlCPU}, readFields(filepath.Join(h.v2.point, "cgroup.controllers")))) > 0
	switch {
	case inVM():
		if os.Geteuid() == 0 && (d.Mode != ModeCgroup2 || d.Version != "v2") {
			t.Errorf("in the VM as root: %+v; want cgroup2/v2", d)
		}
	case h.version == "hybrid" && !v2ctrls && h.v1[ctrlMemory] != nil:
		want := ModeRlimit
		if os.Geteuid() == 0 {
			want = ModeCgroup1
		}
		if d.Mode != want || d.Version != "hybrid" {
			t.Errorf("hybrid host, uid %d: %+v; want %s", os.Geteuid(), d, want)
		}
		if !strings.Contains(d.Reason, "cgroup v1") {
			t.Errorf("reason should explain the v1 controllers: %q", d.Reason)
		}
	default:
		t.Logf("no expectation for this host kind (%s)", h.version)
	}
}

func TestNoLimits(t *testing.T) {
	m, err := New("", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Mode() != ModeNone {
		t.Errorf("mode %s; want none", m.Mode())
	}
	// Read on demand, but the same as for a manager with limits.
	if got, want := m.Detection().Version, getMounts().version; got != want || m.Detection().Version != want {
		t.Errorf("Detection().Version = %q, want %q", got, want)
	}
	if r, k := m.Fallback(); r != "" || k != "" {
		t.Errorf("Fallback() = %q, %q without limits", r, k)
	}
	rl := m.Rlimits()
	if len(rl) != 1 || rl[0].Resource != unix.RLIMIT_CORE || rl[0].Cur != 0 || rl[0].Max != 0 {
		t.Errorf("rlimits %+v; want only RLIMIT_CORE=0", rl)
	}
	if _, ok := m.CgroupFD(); ok {
		t.Error("CgroupFD in mode none")
	}
	if err := m.AddProcess(os.Getpid()); err != nil {
		t.Error(err)
	}
	if ev, err := m.Events(); err != nil || ev != (Events{}) {
		t.Errorf("events %+v %v", ev, err)
	}
	if err := m.Kill(); err != nil {
		t.Error(err)
	}
	if err := m.Destroy(); err != nil {
		t.Error(err)
	}
	if err := m.Destroy(); err != nil {
		t.Error(err)
	}
	if err := m.AddProcess(os.Getpid()); !errors.Is(err, ErrDestroyed) {
		t.Errorf("AddProcess after Destroy: %v", err)
	}
	if _, err := New("", Limits{Memory: 1}); !errors.Is(err, ErrInvalidLimit) {
		t.Errorf("New with a bad limit: %v", err)
	}
}

func TestCPUTimeOnly(t *testing.T) {
	m := newManager(t, Limits{CPUTime: 2500 * time.Millisecond})
	if m.Mode() != ModeRlimit {
		t.Errorf("mode %s", m.Mode())
	}
	found := false
	for _, r := range m.Rlimits() {
		if r.Resource == unix.RLIMIT_CPU && r.Cur == 3 && r.Max == 3 {
			found = true
		}
	}
	if !found || m.Enforcement()["cputime"] == "" {
		t.Errorf("rlimits %+v enforcement %v", m.Rlimits(), m.Enforcement())
	}
}

// TestRlimitMode runs where no cgroup is usable (as nobody on a hybrid or
// undelegated host).
func TestRlimitMode(t *testing.T) {
	if Detect().Mode != ModeRlimit {
		t.Skipf("a cgroup mode (%s) is available here; run as an unprivileged user without delegation", Detect().Mode)
	}
	l := Limits{Memory: 64 << 20, Pids: 64, CPU: 0.5, CPUTime: time.Second}
	m := newManager(t, l)
	if m.Mode() != ModeRlimit {
		t.Fatalf("mode %s", m.Mode())
	}
	if r, k := m.Fallback(); r == "" || k == "" || r != m.Detection().Reason || k != m.Detection().Knob {
		t.Errorf("Fallback() = %q, %q; Detection %+v", r, k, m.Detection())
	}
	got := map[string]Rlimit{}
	for _, r := range m.Rlimits() {
		got[r.Name] = r
	}
	if r := got["RLIMIT_DATA"]; r.Resource != unix.RLIMIT_DATA || r.Cur != 64<<20 || r.Max != 64<<20 {
		t.Errorf("RLIMIT_DATA %+v", r)
	}
	if r := got["RLIMIT_NPROC"]; r.Resource != unix.RLIMIT_NPROC || r.Cur != 64 {
		t.Errorf("RLIMIT_NPROC %+v", r)
	}
	if r := got["RLIMIT_CORE"]; r.Resource != unix.RLIMIT_CORE || r.Max != 0 {
		t.Errorf("RLIMIT_CORE %+v", r)
	}
	if r := got["RLIMIT_CPU"]; r.Cur != 1 {
		t.Errorf("RLIMIT_CPU %+v", r)
	}
	enf := m.Enforcement()
	if !strings.Contains(enf["memory"], "RLIMIT_DATA") || !strings.Contains(enf["pids"], "per user") || !strings.Contains(enf["cpu"], "not enforced") {
		t.Errorf("enforcement %v", enf)
	}
	// The kernel enforces the RLIMIT_DATA value we hand out.
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = append(os.Environ(), helperEnv+"=rlimit-mmap", "NSBOX_CGTEST_AS="+strconv.FormatUint(got["RLIMIT_DATA"].Cur, 10))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("RLIMIT_DATA not enforced: %v %s", err, out)
	}
}

// cgroupManager returns a Manager in a real cgroup mode, or skips.
func cgroupManager(t *testing.T, l Limits) *Manager {
	t.Helper()
	d := Detect()
	switch d.Mode {
	case ModeCgroup1, ModeCgroup2, ModeCgroup2Delegated:
	default:
		t.Skipf("no cgroup mode for uid %d here (%s: %s)", os.Geteuid(), d.Mode, d.Reason)
	}
	m := newManager(t, l)
	if m.Mode() != d.Mode {
		t.Fatalf("New fell back to %s: %s", m.Mode(), m.Detection().Reason)
	}
	return m
}

func TestMemoryOOM(t *testing.T) {
	m := cgroupManager(t, Limits{Memory: 64 << 20})
	checkMemoryFiles(t, m, 64<<20)
	p := startIn(t, m, "alloc", nil)
	sig, code := p.wait()
	if sig != syscall.SIGKILL {
		t.Fatalf("allocator ended with signal %v code %d (output %q); want SIGKILL by the OOM killer", sig, code, p.out)
	}
	ev, err := m.Events()
	if err != nil {
		t.Fatal(err)
	}
	if ev.OOMKills == 0 {
		t.Errorf("OOMKills = 0 after an OOM kill; events %+v", ev)
	}
	t.Logf("events %+v enforcement %v", ev, m.Enforcement())
	// The counters outlive the group: a supervisor may read them after
	// Destroy.
	if err := m.Destroy(); err != nil {
		t.Fatal(err)
	}
	if after, err := m.Events(); err != nil || after.OOMKills != ev.OOMKills {
		t.Errorf("events after Destroy %+v %v; want %+v", after, err, ev)
	}
}

func checkMemoryFiles(t *testing.T, m *Manager, limit int64) {
	t.Helper()
	want := strconv.FormatInt(limit, 10)
	switch b := m.b.(type) {
	case *v1Backend:
		d := b.dirs[ctrlMemory]
		if got := strings.TrimSpace(readString(filepath.Join(d, "memory.limit_in_bytes"))); got != want {
			t.Errorf("memory.limit_in_bytes = %s", got)
		}
		if b.memsw {
			if got := strings.TrimSpace(readString(filepath.Join(d, "memory.memsw.limit_in_bytes"))); got != want {
				t.Errorf("memory.memsw.limit_in_bytes = %s", got)
			}
		}
		if got := strings.TrimSpace(readString(filepath.Join(d, "memory.use_hierarchy"))); got != "1" {
			t.Errorf("memory.use_hierarchy = %s", got)
		}
	case *v2Backend:
		if got := strings.TrimSpace(readString(filepath.Join(b.dir, "memory.max"))); got != want {
			t.Errorf("memory.max = %s", got)
		}
		if b.swap {
			if got := strings.TrimSpace(readString(filepath.Join(b.dir, "memory.swap.max"))); got != "0" {
				t.Errorf("memory.swap.max = %s", got)
			}
		}
	}
}

func TestPidsLimit(t *testing.T) {
	m := cgroupManager(t, Limits{Pids: 16})
	// A fork loop well past the limit; the shell reports the failed forks.
	p := startIn(t, m, "", nil, "/bin/sh", "-c", `read x; i=0; while [ $i -lt 64 ]; do sleep 30 & i=$((i+1)); done; wait`)
	deadline := time.Now().Add(10 * time.Second)
	var ev Events
	for time.Now().Before(deadline) {
		var err error
		if ev, err = m.Events(); err != nil {
			t.Fatal(err)
		}
		if ev.PidsMax > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if ev.PidsMax == 0 {
		t.Fatalf("PidsMax = 0 after a fork loop past pids.max=16 (output %q)", p.out)
	}
	if err := m.Kill(); err != nil {
		t.Fatal(err)
	}
	if sig, code := p.wait(); sig == 0 && code == 0 {
		t.Errorf("shell survived Kill")
	}
	if pids := readPids(groupDirs(m)); len(pids) != 0 {
		t.Errorf("processes left after Kill: %v", pids)
	}
	t.Logf("events %+v enforcement %v", ev, m.Enforcement())
}

func TestKillAndDestroy(t *testing.T) {
	m := cgroupManager(t, Limits{Memory: 256 << 20, Pids: 64})
	// A small tree: the shell and two background children.
	p := startIn(t, m, "", nil, "/bin/sh", "-c", `read x; sleep 60 & sleep 60 & wait`)
	deadline := time.Now().Add(5 * time.Second)
	for len(readPids(groupDirs(m))) < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := len(readPids(groupDirs(m))); n < 3 {
		t.Fatalf("%d processes in the group; want 3", n)
	}
	start := time.Now()
	if err := m.Kill(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Kill took %v", time.Since(start))
	if sig, _ := p.wait(); sig != syscall.SIGKILL {
		t.Errorf("shell ended with %v; want SIGKILL", sig)
	}
	dirs := groupDirs(m)
	if err := m.Destroy(); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s still exists", d)
		}
	}
	if err := m.Destroy(); err != nil {
		t.Errorf("second Destroy: %v", err)
	}
	if _, ok := m.CgroupFD(); ok {
		t.Error("CgroupFD after Destroy")
	}
}

// TestDestroyBeforeReap destroys while the killed worker is still an
// unreaped child (a zombie), as a supervisor may.
func TestDestroyBeforeReap(t *testing.T) {
	m := cgroupManager(t, Limits{Pids: 32})
	p := startIn(t, m, "", nil, "/bin/sh", "-c", `read x; exec sleep 60`)
	time.Sleep(20 * time.Millisecond)
	if err := m.Destroy(); err != nil {
		t.Fatal(err)
	}
	if sig, _ := p.wait(); sig != syscall.SIGKILL {
		t.Errorf("ended with %v", sig)
	}
}

// TestCleanupStale fakes a SIGKILLed supervisor: a group named after a dead
// pid, with a process still inside.
func TestCleanupStale(t *testing.T) {
	cgroupManager(t, Limits{Pids: 32}) // skips without a cgroup mode
	dead := exec.Command("/bin/true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	deadPid := dead.Process.Pid
	if alive(deadPid) {
		t.Skip("pid reused already")
	}
	// The dead supervisor's group, made the way New makes it.
	name := "nsbox-" + strconv.Itoa(deadPid) + "-0123456789ab-stale"
	l := Limits{Pids: 32}
	p := makePlan([]string{ctrlPids})
	var b backend
	var err error
	if p.det.Mode == ModeCgroup1 {
		b, err = newV1(name, p, l)
	} else {
		b, err = newV2(name, p.v2, l)
	}
	if err != nil {
		t.Fatal(err)
	}
	stale := &Manager{b: b, det: p.det}
	dirs := groupDirs(stale)
	t.Cleanup(func() { _ = b.destroy() })
	// What a dead supervisor's groups lack: its locks, gone with its fds.
	dropLocks(b)
	proc := startIn(t, stale, "", nil, "/bin/sh", "-c", `read x; exec sleep 60`)
	// A live supervisor's group (ours) must survive.
	live := newManager(t, Limits{Pids: 32})
	start := time.Now()
	n, err := CleanupStale()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("CleanupStale removed %d group(s) in %v", n, time.Since(start))
	// Not n == len(dirs): every sandbox start cleans the same parent,
	// and another package's test (make unit runs two at once) may have
	// removed these groups, or be removing them, first. What counts is
	// that they go; the wait is a deadlock guard, not a timing check.
	for _, d := range dirs {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(d); os.IsNotExist(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%s survived", d)
				break
			}
		}
	}
	if sig, _ := proc.wait(); sig != syscall.SIGKILL {
		t.Errorf("process in the stale group ended with %v; want SIGKILL", sig)
	}
	for _, d := range groupDirs(live) {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("live group removed: %v", err)
		}
	}
	start = time.Now()
	if _, err := CleanupStale(); err != nil {
		t.Errorf("second CleanupStale: %v", err)
	}
	t.Logf("CleanupStale with nothing to do: %v", time.Since(start))
}

// dropLocks releases b's group locks, as the death of its supervisor would.
func dropLocks(b backend) {
	switch x := b.(type) {
	case *v1Backend:
		releaseGroups(x.locks)
		x.locks = nil
	case *v2Backend:
		releaseGroups([]int{x.lock})
		x.lock = -1
	}
}

// TestCleanupSparesLockedGroups: a group whose name holds a pid that looks
// dead here, but whose supervisor holds its lock (a live run in another PID
// namespace), is never touched.
func TestCleanupSparesLockedGroups(t *testing.T) {
	cgroupManager(t, Limits{Pids: 32}) // skips without a cgroup mode
	dead := exec.Command("/bin/true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	if alive(dead.Process.Pid) {
		t.Skip("pid reused already")
	}
	name := "nsbox-" + strconv.Itoa(dead.Process.Pid) + "-0123456789ab-otherns"
	p := makePlan([]string{ctrlPids})
	var b backend
	var err error
	if p.det.Mode == ModeCgroup1 {
		b, err = newV1(name, p, Limits{Pids: 32})
	} else {
		b, err = newV2(name, p.v2, Limits{Pids: 32})
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.destroy() })
	m := &Manager{b: b, det: p.det}
	proc := startIn(t, m, "", nil, "/bin/sh", "-c", `read x; exec sleep 60`)
	if _, err := CleanupStale(); err != nil {
		t.Fatal(err)
	}
	for _, d := range groupDirs(m) {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("a locked group was removed: %v", err)
		}
	}
	if err := unix.Kill(proc.cmd.Process.Pid, 0); err != nil {
		t.Errorf("the process of a locked group was killed: %v", err)
	}
}

func TestCPULimit(t *testing.T) {
	m := cgroupManager(t, Limits{CPU: 0.2})
	if !strings.Contains(m.Enforcement()["cpu"], "cpu") || strings.Contains(m.Enforcement()["cpu"], "not") {
		t.Skipf("cpu not enforced here: %v", m.Enforcement())
	}
	var statDir string
	switch b := m.b.(type) {
	case *v1Backend:
		statDir = b.dirs[ctrlCPU]
		if q := strings.TrimSpace(readString(filepath.Join(statDir, "cpu.cfs_quota_us"))); q != "20000" {
			t.Errorf("cfs_quota_us = %s", q)
		}
	case *v2Backend:
		statDir = b.dir
		if q := strings.TrimSpace(readString(filepath.Join(statDir, "cpu.max"))); q != "20000 100000" {
			t.Errorf("cpu.max = %s", q)
		}
	}
	wall := 1000 * time.Millisecond
	start := time.Now()
	p := startIn(t, m, "spin", []string{"NSBOX_CGTEST_MS=" + strconv.Itoa(int(wall/time.Millisecond))})
	if sig, code := p.wait(); sig != 0 || code != 0 {
		t.Fatalf("spinner: %v %d %s", sig, code, p.out)
	}
	elapsed := time.Since(start)
	throttled, _ := readKey(filepath.Join(statDir, "cpu.stat"), "nr_throttled")
	used := p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime()
	t.Logf("cpu 0.2 for %v wall: used %v, nr_throttled %d", elapsed, used, throttled)
	if throttled == 0 {
		t.Errorf("never throttled")
	}
	if used > elapsed*4/10 {
		t.Errorf("used %v of CPU in %v with a 0.2 CPU limit", used, elapsed)
	}
}

// A process that writes "0" to each join file is in the group in every
// hierarchy, and so is what it forks afterwards. On v1 the files are the
// tasks files (a thread-level move, which spares the cgroup-wide lock).
func TestJoinFiles(t *testing.T) {
	m := cgroupManager(t, Limits{Memory: 256 << 20, Pids: 64})
	files, err := m.JoinFiles()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	dirs := groupDirs(m)
	if len(files) != len(dirs) {
		t.Fatalf("%d join files for %d group directories", len(files), len(dirs))
	}
	want := "cgroup.procs"
	if m.Mode() == ModeCgroup1 {
		want = "tasks"
	}
	script := ""
	for i, f := range files {
		if filepath.Base(f.Name()) != want {
			t.Errorf("join file %s; want %s", f.Name(), want)
		}
		script += "echo 0 >&" + strconv.Itoa(3+i) + " || exit 1; "
	}
	script += "sleep 30 & echo $!; read x"
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.ExtraFiles = files
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	// The shell prints its child's pid after the writes, or exits.
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	child := strings.TrimSpace(line)
	if _, err := strconv.Atoi(child); err != nil {
		t.Fatalf("shell output %q", line)
	}
	defer func() { n, _ := strconv.Atoi(child); unix.Kill(n, unix.SIGKILL) }()
	for _, d := range dirs {
		procs := readFields(filepath.Join(d, "cgroup.procs"))
		for _, pid := range []string{strconv.Itoa(cmd.Process.Pid), child} {
			found := false
			for _, p := range procs {
				found = found || p == pid
			}
			if !found {
				t.Errorf("pid %s not in %s (%v)", pid, d, procs)
			}
		}
	}
}
