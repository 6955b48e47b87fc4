package notify

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
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
