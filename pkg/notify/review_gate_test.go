package notify

import (
	"bufio"
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

// Outside review of the sticky target ids (c8968a3, eef9c57): tests that
// fail on the code reviewed and pass once the finding is fixed.

// TestReviewGateUngatedLookupHasNoCapabilities: without a unix handler
// (Options.Unix nil: a session with UnixSockets.Unrestricted and the
// filtered network, pkg/sandbox/sockets.go) the supervisor connects to the
// path the target wrote, resolved by the kernel on the serving thread. A
// sticky thread makes that connect with CAP_DAC_READ_SEARCH and
// CAP_SYS_PTRACE effective (take sets them before the call, not only
// between calls), so a target of uid 65534 reaches a socket in a root
// directory of mode 0700, and a socket through /proc/PID/root of a root
// process (another mount namespace, a container's, in general), both of
// which the kernel refuses to that uid and the per-call switch refused
// too. stickyIDs lets a nil handler keep ids: the "reads checked with
// those ids" are the gate's, but with no gate the call itself is the
// path lookup.
func TestReviewGateUngatedLookupHasNoCapabilities(t *testing.T) {
	requireAsTarget(t)
	dir := stickyDir(t)
	private := filepath.Join(dir, "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	hidden := filepath.Join(private, "h.sock")
	hiddenPeers := peerServer(t, hidden) // mode 0777, in a 0700 root directory
	open := filepath.Join(dir, "o.sock")
	openPeers := peerServer(t, open)
	// A root process other than this one: its /proc/PID/root needs
	// PTRACE_MODE_READ_FSCREDS, which uid 65534 does not have on it.
	sleeper := exec.Command("sleep", "600")
	if err := sleeper.Start(); err != nil {
		t.Skipf("no sleep(1): %v", err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	viaProc := "/proc/" + strconv.Itoa(sleeper.Process.Pid) + "/root" + open
	if len(viaProc) >= 108 {
		t.Skipf("path too long for sun_path: %s", viaProc)
	}
	for _, sticky := range []bool{false, true} {
		t.Run(fmt.Sprintf("OwnPIDNamespace=%v", sticky), func(t *testing.T) {
			// Each twice: the first call takes the ids, the second finds
			// them kept.
			steps := []string{"connect:" + hidden, "connect:" + hidden, "connect:" + viaProc, "connect:" + viaProc}
			next := stepper(t, steps, GateConfig{Writable: []string{dir}}, Options{AsTarget: true, OwnPIDNamespace: sticky, Unix: noGate},
				&syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}})
			for i, s := range steps {
				line := next()
				if !strings.HasPrefix(line, s+" EACCES ") {
					t.Errorf("call %d (%s) as uid %d: got %q, want EACCES (the kernel's answer to that uid)", i, s, nobody, line)
				}
			}
			select {
			case u := <-hiddenPeers:
				t.Errorf("the socket in root's 0700 directory accepted uid %d", u.Uid)
			case u := <-openPeers:
				t.Errorf("the socket reached through /proc/%d/root accepted uid %d", sleeper.Process.Pid, u.Uid)
			default:
			}
		})
	}
}

func init() {
	childModes["reviewchroot"] = reviewChrootChild
}

// reviewChrootChild confines itself to args[0] (chroot, as a process in a
// mount namespace of its own sees only its own tree), then connects to
// each of args[1:] and prints each result.
func reviewChrootChild(args []string, _ *bufio.Reader) int {
	if err := unix.Chroot(args[0]); err != nil {
		fmt.Println("error", err)
		return 1
	}
	if err := unix.Chdir("/"); err != nil {
		fmt.Println("error", err)
		return 1
	}
	for _, p := range args[1:] {
		fmt.Println(p, connectResult(p))
	}
	return 0
}

// TestReviewGateUngatedPathIsResolvedInTargetRoot: without a unix handler
// (Options.Unix nil: UnixSockets.Unrestricted with the filtered network,
// pkg/sandbox/sockets.go) the supervisor performs connect(2) with the
// target's own path bytes, and the kernel resolves them in the
// supervisor's root and mount namespace, not the target's
// (Server.perform, vAllow: op(c.Addr)). A sandbox then reaches host
// sockets it cannot see (the host's /tmp/.X11-unix/X0 behind its private
// /tmp: "every visible socket" becomes every host socket its ids may
// write), and misses its own. Here a child confined to a directory (chroot)
// connects to a host socket outside it, which its kernel would answer
// with ENOENT, and to its own socket inside, which its kernel would
// connect. Not new in the sticky change, but on the same path.
func TestReviewGateUngatedPathIsResolvedInTargetRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the child chroots: run as root")
	}
	if err := Supported(); err != nil {
		t.Skip(err)
	}
	root := stickyDir(t)
	own := peerServer(t, filepath.Join(root, "in.sock")) // "/in.sock" inside
	hostDir := stickyDir(t)
	host := filepath.Join(hostDir, "host.sock") // not under root
	hostPeers := peerServer(t, host)
	cmd := childCmd(t, "reviewchroot", []string{root, host, "/in.sock"}, nil)
	stdin, out := startGateChild(t, cmd, GateConfig{Writable: []string{root}}, Options{Unix: noGate})
	stdin.Write([]byte("go\n"))
	want := []string{host + " ENOENT", "/in.sock ok"}
	for i, w := range want {
		if !out.Scan() {
			t.Fatal("the child ended")
		}
		if line := out.Text(); line != w {
			t.Errorf("call %d: got %q, want %q (the path as the target's own root names it)", i, line, w)
		}
	}
	select {
	case <-hostPeers:
		t.Errorf("a host socket outside the target's root accepted its connect")
	case <-own:
	default:
	}
}

// TestReviewGateSearchPermissionIsTheTargets: connect(2) to a path needs
// search (x) permission on every directory on the way (path_resolution(7));
// the gate resolves the path with a root supervisor's lookup rights (as
// root per call, with CAP_DAC_READ_SEARCH on a sticky thread: stickyCaps,
// "the gate's path lookups") and then checks only the socket's own write
// bit (writableBy), and the connect through /proc/PID/fd/N walks no
// directory of the target's. So a target reaches a socket in a directory
// it may not search: uid 65534 connects to a socket of mode 0777 in a
// 0700 directory of root's, on a writable place's mount (inside a
// sandbox: the sandbox's root user's private directory in /tmp, or a
// host user's in a --rw bind), which its own connect(2) would fail with
// EACCES. Per call and sticky alike.
func TestReviewGateSearchPermissionIsTheTargets(t *testing.T) {
	requireAsTarget(t)
	for _, sticky := range []bool{false, true} {
		t.Run(fmt.Sprintf("OwnPIDNamespace=%v", sticky), func(t *testing.T) {
			dir := stickyDir(t)
			private := filepath.Join(dir, "private")
			if err := os.Mkdir(private, 0o700); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(private, "s.sock")
			peers := peerServer(t, p) // mode 0777
			steps := []string{"connect:" + p, "connect:" + p}
			next := stepper(t, steps, GateConfig{Writable: []string{dir}}, Options{AsTarget: true, OwnPIDNamespace: sticky},
				&syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}})
			for i, s := range steps {
				if line := next(); !strings.HasPrefix(line, s+" EACCES ") {
					t.Errorf("call %d as uid %d through root's 0700 directory: got %q, want EACCES", i, nobody, line)
				}
			}
			select {
			case u := <-peers:
				t.Errorf("the socket in root's 0700 directory accepted uid %d", u.Uid)
			default:
			}
		})
	}
}
