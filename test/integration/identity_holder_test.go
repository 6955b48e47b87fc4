package integration

import (
	"bytes"
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

// The identity holder: a root-less full range's sandboxes are made inside
// the user namespace of a long-lived holder of the caller's, so their
// maps are written without newuidmap and newgidmap (pkg/namespaces,
// holder.c). These tests need an /etc/subuid entry for uid 65534, so they
// run only as root (which edits the files and restores them) and drive
// nsbox as uid 65534.

const holderSock = "/tmp/nsbox-idholder-65534.sock"

// holderPids lists the running holders of uid 65534.
func holderPids(t *testing.T) []int {
	t.Helper()
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if !bytes.HasPrefix(cmd, []byte("nsbox-idholder\x00"+holderSock+"\x00")) {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat("/proc/"+e.Name(), &st) == nil && st.Uid == 65534 {
			out = append(out, pid)
		}
	}
	return out
}

// killHolders ends every holder of uid 65534 and waits until none is left
// (a deadlock guard, not a timing check).
func killHolders(t *testing.T) {
	t.Helper()
	for i := 0; i < 200; i++ {
		ps := holderPids(t)
		if len(ps) == 0 {
			os.Remove(holderSock)
			return
		}
		for _, p := range ps {
			syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("holders of uid 65534 survive SIGKILL")
}

// waitHolder waits for a holder of uid 65534 to run and returns its pid.
func waitHolder(t *testing.T, u user, env []string) int {
	t.Helper()
	for i := 0; i < 100; i++ {
		if ps := holderPids(t); len(ps) == 1 {
			if _, err := os.Stat(holderSock); err == nil {
				return ps[0]
			}
		}
		// The holder starts beside a start that found none; a run that
		// ends first may take it along: another run tries again.
		u.run(t, &runOpts{env: env}, "run", "--", "/bin/true")
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no identity holder of uid 65534 after 100 starts; status:\n%s", u.run(t, &runOpts{env: env}, "status").stdout)
	return 0
}

func requireHolderTest(t *testing.T) user {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("adding an /etc/subuid entry for the root-less user needs root")
	}
	for _, h := range []string{"/usr/bin/newuidmap", "/usr/bin/newgidmap"} {
		if _, err := os.Stat(h); err != nil {
			t.Skipf("%s is not installed (package uidmap): the root-less full range cannot be tested here", h)
		}
	}
	u := users()[1]
	requireSandbox(t, u)
	killHolders(t)
	t.Cleanup(func() { killHolders(t) })
	return u
}

// userNSParent is the inode of the parent of pid's user namespace
// (ioctl_ns(2) NS_GET_PARENT; the test runs in the initial namespace,
// an ancestor of every one).
func userNSParent(t *testing.T, pid int) uint64 {
	t.Helper()
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/user")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := unix.IoctlRetInt(int(f.Fd()), unix.NS_GET_PARENT)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p)
	var st unix.Stat_t
	if err := unix.Fstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

func nsInode(t *testing.T, pid int) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat("/proc/"+strconv.Itoa(pid)+"/ns/user", &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// sandboxedSleep starts `nsbox run -- sleep` as u and returns the host pid
// of the sleep and a function that ends the run.
func sandboxedSleep(t *testing.T, u user, env []string) (int, func()) {
	t.Helper()
	cmd := exec.Command(nsboxBin(t), "run", "--", "/bin/sh", "-c", "echo started; exec sleep 60")
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "HOME=/tmp"}, env...)
	cmd.Dir = "/"
	u.asUser(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop := func() { cmd.Process.Kill(); cmd.Wait() }
	b := make([]byte, 8)
	if n, _ := out.Read(b); string(b[:n]) != "started\n" {
		stop()
		t.Fatalf("the sandboxed command did not start: %q", b[:n])
	}
	// The sleep, below this run's supervisor, once the shell has exec'd it.
	for i := 0; i < 500; i++ {
		for _, e := range mustReadDir(t, "/proc") {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			comm, _ := os.ReadFile("/proc/" + e.Name() + "/comm")
			if string(comm) == "sleep\n" && isDescendant(pid, cmd.Process.Pid) {
				return pid, stop
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	t.Fatal("the sandboxed sleep is not found")
	return 0, nil
}

func mustReadDir(t *testing.T, dir string) []os.DirEntry {
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return ents
}

func isDescendant(pid, of int) bool {
	for i := 0; i < 16 && pid > 1; i++ {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return false
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) < 2 {
			return false
		}
		pid, _ = strconv.Atoi(f[1])
		if pid == of {
			return true
		}
	}
	return false
}

func TestIdentityHolderMakesSandboxesInItsNamespace(t *testing.T) {
	u := requireHolderTest(t)
	addSubIDEntry(t, "65534:1000000:65536")
	env := []string{"NSBOX_IDHOLDER_IDLE=30"}
	holder := waitHolder(t, u, env)
	st := u.run(t, &runOpts{env: env}, "status").stdout
	if !strings.Contains(st, "identity holder: pid "+strconv.Itoa(holder)) {
		t.Errorf("status does not name the holder %d:\n%s", holder, st)
	}
	// The holder maps the range's host ids, each to itself.
	for _, f := range []string{"uid_map", "gid_map"} {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(holder) + "/" + f)
		if got := strings.Join(strings.Fields(string(b)), " "); !strings.Contains(" "+got+" ", " 1000000 1000000 65534 ") || !strings.Contains(" "+got+" ", " 65534 65534 1 ") {
			t.Errorf("holder's %s = %q", f, got)
		}
	}
	// A sandbox now: its user namespace is a child of the holder's, its
	// maps and its files' owners are those of the newuidmap path.
	sleep, stop := sandboxedSleep(t, u, env)
	parent := userNSParent(t, sleep)
	stop()
	if parent != nsInode(t, holder) {
		t.Errorf("the sandbox's user namespace is not a child of the holder's (parent %d, holder %d)", parent, nsInode(t, holder))
	}
	ws := u.tempDir(t)
	r := u.sh(t, &runOpts{dir: ws, env: env}, []string{"--rw", ws}, `cat /proc/self/uid_map; echo x > own
python3 -c 'import os; os.setgroups([7]); os.chown("own", 65534, 7); print("ok")'`)
	expectCode(t, r, 0)
	if !strings.Contains(r.stdout, "1000000") || !strings.Contains(r.stdout, "ok\n") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	fi, _ := os.Stat(filepath.Join(ws, "own"))
	if s := fi.Sys().(*syscall.Stat_t); s.Uid != 65534 || s.Gid != 1000007 {
		t.Errorf("own is %d:%d on the host, want 65534:1000007 (gid 7 of the range)", s.Uid, s.Gid)
	}
}

func TestIdentityHolderOff(t *testing.T) {
	u := requireHolderTest(t)
	addSubIDEntry(t, "65534:1000000:65536")
	env := []string{"NSBOX_IDHOLDER=off"}
	for i := 0; i < 3; i++ {
		r := u.run(t, &runOpts{env: env}, "run", "--", "/bin/sh", "-c", "cat /proc/self/uid_map")
		expectCode(t, r, 0)
		if !strings.Contains(r.stdout, "1000000") {
			t.Fatalf("full range without a holder: %q", r.stdout)
		}
	}
	if ps := holderPids(t); len(ps) != 0 {
		t.Errorf("NSBOX_IDHOLDER=off started holders %v", ps)
	}
	if st := u.run(t, &runOpts{env: env}, "status").stdout; !strings.Contains(st, "identity holder     ok  off") {
		t.Errorf("status with NSBOX_IDHOLDER=off:\n%s", st)
	}
}

// A holder made for one range is not used for another: after the sub-id
// files change, sandboxes get the new range and a new holder takes the
// socket.
func TestIdentityHolderOfOtherIDsIsNotUsed(t *testing.T) {
	u := requireHolderTest(t)
	addSubIDEntry(t, "65534:1000000:65536")
	env := []string{"NSBOX_IDHOLDER_IDLE=30"}
	old := waitHolder(t, u, env)
	for _, p := range []string{"/etc/subuid", "/etc/subgid"} {
		b, _ := os.ReadFile(p)
		os.WriteFile(p, bytes.ReplaceAll(b, []byte("65534:1000000:65536"), []byte("65534:2000000:65536")), 0o644)
	}
	for i := 0; i < 3; i++ {
		r := u.run(t, &runOpts{env: env}, "run", "--", "/bin/sh", "-c", "cat /proc/self/uid_map")
		expectCode(t, r, 0)
		if !strings.Contains(r.stdout, "2000000") || strings.Contains(r.stdout, "1000000") {
			t.Fatalf("run %d after the range moved: uid_map\n%s", i, r.stdout)
		}
	}
	// A new holder answers on the socket now (the old one leaves when idle).
	for i := 0; i < 100; i++ {
		if st := u.run(t, &runOpts{env: env}, "status").stdout; strings.Contains(st, "identity holder     ok  running") {
			if strings.Contains(st, "identity holder: pid "+strconv.Itoa(old)+",") {
				t.Fatalf("the old holder still serves:\n%s", st)
			}
			return
		}
		u.run(t, &runOpts{env: env}, "run", "--", "/bin/true")
	}
	t.Fatal("no holder of the new range")
}

func TestIdentityHolderLeavesWhenIdle(t *testing.T) {
	u := requireHolderTest(t)
	addSubIDEntry(t, "65534:1000000:65536")
	env := []string{"NSBOX_IDHOLDER_IDLE=1"}
	waitHolder(t, u, env)
	// A deadlock guard, not a timing check: one idle second, then it
	// leaves and takes its socket along.
	for i := 0; i < 200; i++ {
		if len(holderPids(t)) == 0 {
			if _, err := os.Stat(holderSock); !os.IsNotExist(err) {
				t.Errorf("the holder left %s behind", holderSock)
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the holder is still running 10 s after an idle time of 1 s")
}
