package notify

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Second outside review of the unix gate (fixgate: a323409..149fbc3):
// tests that fail on the code reviewed and pass once the finding is fixed.

func init() {
	childModes["review2nestedfirst"] = review2NestedFirstChild
}

// review2NestedFirstChild: when args[0] is "nested", a grandchild in a
// user namespace of its own that maps only this child's uid and gid
// (unshare -r, allowed with AllowUserns) connects to args[1] first, under
// the filter it inherited; then this child connects to each of args[2:]
// and prints each result.
func review2NestedFirstChild(args []string, _ *bufio.Reader) int {
	if args[0] == "nested" {
		c := exec.Command(os.Args[0], "-test.run=^$")
		c.Env = append(os.Environ(), nestedChildEnv+"=connect", "NSBOX_NOTIFY_TEST_ARGS="+args[1])
		c.SysProcAttr = &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}},
		}
		b, err := c.Output()
		if err != nil {
			fmt.Println("error nested", err)
			return 1
		}
		fmt.Println("nested", strings.TrimSpace(string(b)))
	}
	for _, p := range args[2:] {
		fmt.Println(p, connectResult(p))
	}
	return 0
}

// TestReview2GateOpenGateIsNotTheFirstCallers: without a unix handler
// (UnixSockets.Unrestricted with the filtered network) the Server builds
// its open gate once, at the first path call, from THAT caller's id maps
// and user namespace (Server.ungatedGate, newOpenGate(c.proc.dir)), and
// uses it for every later caller. With AllowUserns a process inside may
// make a user namespace of its own (unshare -r) and be that first caller:
// the gate then takes the nested namespace for "the sandbox's" (userns,
// uids, gids, onlyUID, skipDAC). Here the sandbox's root (every
// capability in the sandbox's namespace, which maps 100000-165535)
// connects to a socket of mode 0777 in a 0700 directory of its mapped uid
// 100005: the kernel lets it through (CAP_DAC_READ_SEARCH over mapped
// inodes, as TestGateSearchIsTheTargets shows for the gate), and so does
// the open gate when the sandbox's root calls first. Once a nested
// namespace's process has called first, the same connect is refused:
// inSandboxUserns compares with the nested namespace. The same field
// decides the other way for a root-less supervisor of a full-range
// sandbox: a nested namespace that maps only the caller's own uid (the
// supervisor's, which runs the sandbox's commands) sets skipDAC for the
// whole session, and every later caller, any uid of the range, is looked
// up and write-checked with the supervisor's rights (lookupAs, writableBy).
func TestReview2GateOpenGateIsNotTheFirstCallers(t *testing.T) {
	requireAsTarget(t)
	rw, _ := places(t)
	os.Chmod(rw, 0o755)
	d := filepath.Join(rw, "mapped")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(d, "s.sock")
	hostServer(t, sock)
	os.Chmod(sock, 0o777)
	if err := os.Chown(d, 100005, 100005); err != nil {
		t.Fatal(err)
	}
	first := filepath.Join(rw, "first.sock") // any path: the call makes the gate
	hostServer(t, first)
	os.Chmod(first, 0o777)
	m := []syscall.SysProcIDMap{{ContainerID: 0, HostID: 100000, Size: 65536}}
	for _, sticky := range []bool{false, true} {
		for _, who := range []string{"self", "nested"} {
			t.Run(fmt.Sprintf("OwnPIDNamespace=%v/first=%s", sticky, who), func(t *testing.T) {
				attr := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER, UidMappings: m, GidMappings: m,
					Credential: &syscall.Credential{Uid: 0, Gid: 0}}
				args := []string{who, first, first, sock}
				res, lines := runChildAttr(t, "review2nestedfirst", args, GateConfig{}, Options{AsTarget: true, OwnPIDNamespace: sticky, Unix: noGate}, attr)
				if res[sock] != "ok" {
					t.Errorf("the sandbox's root through its mapped uid's 0700 directory, after a first call by %s: got %q, want ok (the kernel's answer to it; the gate's view must be the caller's sandbox, not the first caller's namespace)\n%q", who, res[sock], lines)
				}
			})
		}
	}
}

func init() {
	childModes["review2rootless"] = review2RootlessChild
}

// review2RootlessChild, the sandbox's root in a full-range sandbox of a
// root-less supervisor: when args[0] is "nested", a grandchild of its uid
// 65534 (the supervisor's own uid, mapped to itself as a root-less
// sandbox maps the caller's) in a user namespace of its own (unshare -r)
// connects to args[1] first; then a process of the sandbox's uid 1000
// connects to args[2]. Each result line is printed.
func review2RootlessChild(args []string, _ *bufio.Reader) int {
	run := func(label, path string, attr *syscall.SysProcAttr) bool {
		c := exec.Command(os.Args[0], "-test.run=^$")
		c.Env = append(os.Environ(), nestedChildEnv+"=connect", "NSBOX_NOTIFY_TEST_ARGS="+path)
		c.SysProcAttr = attr
		b, err := c.Output()
		if err != nil {
			fmt.Println("error", label, err)
			return false
		}
		fmt.Println(label, strings.TrimSpace(string(b)))
		return true
	}
	if args[0] == "nested" {
		one := []syscall.SysProcIDMap{{ContainerID: 0, HostID: nobody, Size: 1}}
		if !run("nested", args[1], &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER, UidMappings: one, GidMappings: one,
			Credential: &syscall.Credential{Uid: 0, Gid: 0}}) {
			return 1
		}
	}
	if !run("uid1000", args[2], &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1000, Gid: 1000, Groups: []uint32{}}}) {
		return 1
	}
	return 0
}

// TestReview2GateRootlessOpenGateSkipDACFromNestedCaller: the escalation
// the first caller's view gives a root-less supervisor (Options.AsTarget
// unset: the supervisor connects with its own ids). A root-less
// full-range sandbox maps 0-65533 to a sub-id range and the caller's own
// uid to itself (namespaces.callerRange), and its commands run as that
// uid. Here the supervisor's uid is 65534; its sandbox (a user namespace
// it owns, as newuidmap makes one) maps 0-65533 to 100000- and 65534 to
// itself. A command of uid 65534 inside that makes a user namespace of its
// own (unshare -r: "0 65534 1") and connects first makes the open gate
// take that one-line map for the sandbox's: onlyUID 65534, the
// supervisor's uid, so skipDAC ("one id, the supervisor's own: its rights
// are the target's") holds for the rest of the session. Then the
// sandbox's uid 1000 (host 101000) connects to uid 65534's socket of mode
// 0600 in its 0700 directory: lookupAs resolves with the supervisor's
// rights and writableBy lets it through, and the supervisor connects as
// 65534: the kernel would refuse uid 1000 twice (search, write). Without
// the nested first call the same connect is refused (the control case).
func TestReview2GateRootlessOpenGateSkipDACFromNestedCaller(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making a user namespace owned by uid 65534 with a range map, and dropping to 65534, needs root")
	}
	if err := Supported(); err != nil {
		t.Skip(err)
	}
	for _, tool := range []string{"setpriv", "unshare", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s(1) (util-linux): %v", tool, err)
		}
	}
	rw, _ := places(t)
	os.Chmod(rw, 0o755)
	first := filepath.Join(rw, "first.sock")
	hostServer(t, first)
	os.Chmod(first, 0o777)
	d := filepath.Join(rw, "user")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(d, "s.sock")
	secretN := hostServer(t, secret)
	os.Chmod(secret, 0o600)
	for _, p := range []string{secret, d} {
		if err := os.Chown(p, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	for _, who := range []string{"uid1000", "nested"} {
		t.Run("first="+who, func(t *testing.T) {
			// The sandbox's user namespace, owned by uid 65534 (made by a
			// process of that uid), its maps written by root as newuidmap
			// would write them from /etc/subuid.
			holder := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "unshare", "-U", "sleep", "600")
			if err := holder.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
			hp := fmt.Sprint(holder.Process.Pid)
			self, _ := os.Readlink("/proc/self/ns/user")
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) { // deadlock guard only
				if ns, err := os.Readlink("/proc/" + hp + "/ns/user"); err == nil && ns != self {
					if exe, _ := os.Readlink("/proc/" + hp + "/exe"); strings.HasSuffix(exe, "/sleep") {
						break
					}
				}
				if time.Now().After(deadline) {
					t.Fatal("the namespace holder did not start")
				}
			}
			m := "0 100000 65534\n65534 65534 1\n"
			for _, f := range []string{"uid_map", "gid_map"} {
				if err := os.WriteFile("/proc/"+hp+"/"+f, []byte(m), 0); err != nil {
					t.Fatalf("write %s: %v", f, err)
				}
			}
			nsenter, _ := exec.LookPath("nsenter")
			cmd := childCmd(t, "review2rootless", []string{who, first, secret}, &syscall.SysProcAttr{})
			cmd.Args = append([]string{"nsenter", "-U", "-t", hp, "--", cmd.Path}, cmd.Args[1:]...)
			cmd.Path, cmd.SysProcAttr = nsenter, nil
			stdin, out := startGateChild(t, cmd, GateConfig{}, Options{Unix: noGate})
			// The supervisor is root-less from here on: uid 65534, the
			// owner of the sandbox's namespace (every thread; the saved
			// uid 0 gives root back at the end).
			if err := syscall.Setresgid(nobody, nobody, 0); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Setresuid(nobody, nobody, 0); err != nil {
				syscall.Setresgid(0, 0, 0)
				t.Fatal(err)
			}
			back := func() {
				if syscall.Setresuid(0, 0, 0) != nil || syscall.Setresgid(0, 0, 0) != nil {
					panic("cannot take root's ids back")
				}
			}
			stdin.Write([]byte("go\n"))
			deadline := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() }) // deadlock guard only
			var lines []string
			for out.Scan() {
				lines = append(lines, out.Text())
			}
			deadline.Stop()
			back()
			want := "uid1000 " + secret + " EACCES"
			if !slices.Contains(lines, want) {
				t.Errorf("uid 1000 of a root-less sandbox to uid 65534's 0600 socket in its 0700 directory, after a first call by %s: got %q, want %q (the kernel's answer to uid 1000)", who, lines, want)
			}
			if n := secretN.Load(); n != 0 {
				t.Errorf("uid 65534's private socket accepted %d connections", n)
				secretN.Store(0)
			}
		})
	}
}
