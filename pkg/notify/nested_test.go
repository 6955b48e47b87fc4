package notify

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// A thread in a user namespace it made inside the sandbox (with
// AllowUserns): the capabilities it holds there count for the gate only
// where the kernel honours them.

// nestedChildEnv names the scenario of a grandchild started by
// nestedChild, under the filter it inherited; dispatched in init, before
// TestMain, so that it installs no filter of its own.
const nestedChildEnv = "NSBOX_NOTIFY_NESTED_CHILD"

func init() {
	if mode := os.Getenv(nestedChildEnv); mode != "" {
		os.Exit(nestedGrandchild(mode))
	}
}

// nestedGrandchild: "access" prints the kernel's own write check of each
// path for this task (effective ids and capabilities: AT_EACCESS), what a
// connect of its own would meet (unix(7)); "connect" connects to each.
func nestedGrandchild(mode string) int {
	for _, p := range strings.Fields(os.Getenv("NSBOX_NOTIFY_TEST_ARGS")) {
		r := "ok"
		if mode == "connect" {
			r = connectResult(p)
		} else if err := unix.Faccessat2(unix.AT_FDCWD, p, unix.W_OK, unix.AT_EACCESS); err != nil {
			r = errName(err)
		}
		fmt.Println(p, r)
	}
	return 0
}

// nestedChild, a scenario of child (the filter installed), runs this
// binary again in a user namespace of its own that maps only its own uid
// and gid (what any user may make: unshare -r), where it holds every
// capability of that namespace: first "access", then "connect", over the
// same paths. It prints their lines.
func nestedChild() int {
	for _, mode := range []string{"access", "connect"} {
		c := exec.Command(os.Args[0], "-test.run=^$")
		c.Env = append(os.Environ(), nestedChildEnv+"="+mode)
		c.SysProcAttr = &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}},
		}
		b, err := c.Output()
		if err != nil {
			fmt.Println("error", mode, err)
			return 1
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			fmt.Println(mode, line)
		}
	}
	return 0
}

// TestGateDACOverrideOfANestedNamespace: a thread in a user namespace it
// made inside the sandbox (allowed with AllowUserns) holds
// CAP_DAC_OVERRIDE there, and the kernel grants it only on inodes whose
// owner and group that namespace maps (capable_wrt_inode_uidgid): one
// that maps only the thread's own id reaches no socket of another sandbox
// uid. Were the capability counted against the sandbox's own map, the
// gate would let the connect through, and a supervisor the kernel lets
// reach the socket (root without AsTarget here; a root-less supervisor on
// its own sockets or those of the sandbox's root, which it is in a range
// map) would make it. The gate now counts it only in the sandbox's own
// namespace (inSandboxUserns); this failed before (found by review).
func TestGateDACOverrideOfANestedNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making a socket of another owner and a mapped child needs root")
	}
	testNestedDACOverride(t, false)
}

// TestGateDACOverrideOfANestedNamespaceAsTarget: the same thread served by
// a root supervisor with AsTarget is refused, by the kernel: the serving
// thread connects with the thread's host ids and no capability. So root
// sessions were not exposed even before the gate's own check.
func TestGateDACOverrideOfANestedNamespaceAsTarget(t *testing.T) {
	requireAsTarget(t)
	testNestedDACOverride(t, true)
}

// testNestedDACOverride: uid 1000 of a sandbox mapped to host 100000+,
// in a user namespace of its own, checks and connects to the sandbox
// root's 0600 socket in a writable place; both are refused, and the
// socket sees no connection.
func testNestedDACOverride(t *testing.T, asTarget bool) {
	rw, _ := places(t)
	os.Chmod(rw, 0o755) // the child, host uid 101000, searches it
	other := filepath.Join(rw, "root.sock")
	otherN := hostServer(t, other)
	// The sandbox's root's socket (host 100000), its owner's alone.
	if err := os.Chown(other, 100000, 100000); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(other, 0o600); err != nil {
		t.Fatal(err)
	}
	m := []syscall.SysProcIDMap{{ContainerID: 0, HostID: 100000, Size: 65536}}
	// uid 1000 of the sandbox (host 101000), no capability.
	attr := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER, UidMappings: m, GidMappings: m,
		Credential: &syscall.Credential{Uid: 1000, Gid: 1000}}
	_, lines := runChildAttr(t, "nested", []string{other}, GateConfig{Writable: []string{rw}}, Options{AsTarget: asTarget}, attr)
	want := []string{"access " + other + " EACCES", "connect " + other + " EACCES"}
	if strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q, want %q: the gate let through a connect the kernel refuses the thread itself", lines, want)
	}
	if n := otherN.Load(); n != 0 {
		t.Fatalf("the sandbox root's socket saw %d connections", n)
	}
}
