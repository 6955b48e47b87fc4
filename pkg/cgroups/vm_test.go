package cgroups

// Tests that need a pure cgroup v2 host and root: they run in the throw-away
// VM of hack/run-in-vm.sh, whose /init sets NSBOX_VM=1. Elsewhere they skip.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func requireVM(t *testing.T) {
	t.Helper()
	if !inVM() {
		t.Skip("cgroup v2 test: runs only in the VM (make test-vm; NSBOX_VM=1)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root in the VM")
	}
}

// TestVMCgroup2 checks mode, limit files and CLONE_INTO_CGROUP.
func TestVMCgroup2(t *testing.T) {
	requireVM(t)
	m := newManager(t, Limits{Memory: 64 << 20, Pids: 32, CPU: 0.5})
	if m.Mode() != ModeCgroup2 {
		t.Fatalf("mode %s (%s)", m.Mode(), m.Detection().Reason)
	}
	b := m.b.(*v2Backend)
	for f, want := range map[string]string{"memory.max": "67108864", "pids.max": "32", "cpu.max": "50000 100000"} {
		if got := strings.TrimSpace(readString(filepath.Join(b.dir, f))); got != want {
			t.Errorf("%s = %q; want %q", f, got, want)
		}
	}
	if b.swap {
		if got := strings.TrimSpace(readString(filepath.Join(b.dir, "memory.swap.max"))); got != "0" {
			t.Errorf("memory.swap.max = %q", got)
		}
	}
	enf := m.Enforcement()
	if enf["memory"] == "" || !strings.HasPrefix(enf["memory"], "cgroup2 memory.max") || enf["pids"] != "cgroup2 pids.max" || enf["cpu"] != "cgroup2 cpu.max" {
		t.Errorf("enforcement %v", enf)
	}
	if len(m.Rlimits()) != 1 {
		t.Errorf("rlimits %v; want only CORE in cgroup mode", m.Rlimits())
	}
	fd, ok := m.CgroupFD()
	if !ok {
		t.Fatal("no CgroupFD in cgroup2 mode")
	}
	// Cloned straight into the group: /proc/<pid>/cgroup names it before
	// the child has run a single instruction of its own.
	cmd := exec.Command("/bin/sh", "-c", "read x")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	stdin, _ := cmd.StdinPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pc, err := readProcCgroups(strconv.Itoa(cmd.Process.Pid))
	if err != nil || pc.v2 != b.cg {
		t.Errorf("child cgroup %q; want %q (%v)", pc.v2, b.cg, err)
	}
	stdin.Close()
	_ = cmd.Wait()
}

// TestVMDelegated runs a helper as uid 1000 in a cgroup delegated to it (as
// systemd does for user@.service): it must find cgroup2-delegated, move
// itself into its own leaf, and enforce a memory limit.
func TestVMDelegated(t *testing.T) {
	requireVM(t)
	root := getMounts().v2.point
	deleg := filepath.Join(root, "nsbox-vmtest-deleg")
	if err := os.Mkdir(deleg, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := removeTree(deleg); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	// Delegation, the way cgroup-v2.rst describes it: the directory and its
	// cgroup.procs, cgroup.subtree_control and cgroup.threads.
	for _, f := range []string{"", "cgroup.procs", "cgroup.subtree_control", "cgroup.threads"} {
		if err := os.Chown(filepath.Join(deleg, f), 1000, 1000); err != nil {
			t.Fatal(err)
		}
	}
	fd, err := unix.Open(deleg, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	cmd := exec.Command("/proc/self/exe", "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=delegated")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential:  &syscall.Credential{Uid: 1000, Gid: 1000, NoSetGroups: true},
		UseCgroupFD: true, CgroupFD: fd,
	}
	out, err := cmd.CombinedOutput()
	t.Logf("helper as uid 1000:\n%s", out)
	if err != nil || !strings.Contains(string(out), "DELEGATED OK") {
		t.Fatalf("delegated helper failed: %v", err)
	}
	// What the dead helper left: only its (empty) supervisor leaf.
	n, err := CleanupStale()
	t.Logf("CleanupStale from root: %d %v", n, err)
}

// runDelegatedHelper is the uid 1000 side of TestVMDelegated.
func runDelegatedHelper() int {
	fail := func(f string, a ...any) int { fmt.Printf("FAIL: "+f+"\n", a...); return 1 }
	d := Detect()
	fmt.Printf("uid %d detect: %+v\n", os.Geteuid(), d)
	if d.Mode != ModeCgroup2Delegated {
		return fail("mode %s", d.Mode)
	}
	m, err := New("deleg", Limits{Memory: 64 << 20, Pids: 32, CPU: 0.5})
	if err != nil || m.Mode() != ModeCgroup2Delegated {
		return fail("New: %v %+v", err, m.Detection())
	}
	defer m.Destroy()
	pc, _ := readProcCgroups("self")
	if filepath.Base(pc.v2) != supName(os.Getpid()) {
		return fail("supervisor not in its leaf: %s", pc.v2)
	}
	fmt.Printf("supervisor now in %s; group %s; enforcement %v\n", pc.v2, m.b.(*v2Backend).dir, m.Enforcement())
	fd, ok := m.CgroupFD()
	if !ok {
		return fail("no CgroupFD")
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = append(os.Environ(), helperEnv+"=alloc")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	err = cmd.Run()
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		return fail("allocator not OOM-killed: %v", err)
	}
	ev, err := m.Events()
	if err != nil || ev.OOMKills == 0 {
		return fail("events %+v %v", ev, err)
	}
	fmt.Printf("allocator OOM-killed, events %+v\n", ev)
	// A second sandbox of the same supervisor: already evacuated.
	m2, err := New("deleg2", Limits{Pids: 32})
	if err != nil || m2.Mode() != ModeCgroup2Delegated {
		return fail("second New: %v %+v", err, m2.Detection())
	}
	dirs := []string{m.b.(*v2Backend).dir, m2.b.(*v2Backend).dir}
	if err := m2.Destroy(); err != nil {
		return fail("Destroy 2: %v", err)
	}
	if err := m.Destroy(); err != nil {
		return fail("Destroy: %v", err)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			return fail("%s left behind", d)
		}
	}
	fmt.Println("DELEGATED OK")
	return 0
}
