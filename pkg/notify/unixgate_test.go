package notify

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The unix socket gate's tests: each runs a child under the notification
// filter (child, in notify_test.go) whose socket calls a UnixGate decides.

func TestGateConnect(t *testing.T) {
	rw, host := places(t)
	hostSock, okSock := filepath.Join(host, "host.sock"), filepath.Join(rw, "ok.sock")
	hostN, okN := hostServer(t, hostSock), hostServer(t, okSock)
	allowed := filepath.Join(host, "allowed.sock")
	allowedN := hostServer(t, allowed)
	var refused []string
	var mu sync.Mutex
	res, lines := runChild(t, "connect", []string{hostSock, okSock, allowed, "@nsbox-abstract-none", filepath.Join(rw, "missing")}, GateConfig{
		Writable: []string{rw},
		Allow:    []string{allowed},
		OnRefuse: func(p string) { mu.Lock(); refused = append(refused, p); mu.Unlock() },
	})
	t.Log(lines)
	if res[hostSock] != "EACCES" {
		t.Errorf("connect to a host socket: %q, want EACCES", res[hostSock])
	}
	if res[okSock] != "ok" || res[allowed] != "ok" {
		t.Errorf("connect to a writable place's socket %q, to an allowed one %q; want ok", res[okSock], res[allowed])
	}
	if res[filepath.Join(rw, "missing")] != "ENOENT" {
		t.Errorf("errors of the kernel not passed through: %v", lines)
	}
	// The child shares this process's network namespace, as a sandbox
	// under --net host shares the host's: an abstract name there is the
	// host's, refused as Landlock's scope would refuse it.
	if res["@nsbox-abstract-none"] != "EPERM" {
		t.Errorf("connect to an abstract name of the supervisor's network namespace: %q, want EPERM", res["@nsbox-abstract-none"])
	}
	// Wait for the allowed connects to be counted (guards, not speed
	// assertions); one to the host server would have been queued before
	// the child's connect returned.
	waitAccepted(okN)
	waitAccepted(allowedN)
	time.Sleep(50 * time.Millisecond) // and let its accept loop count
	if hostN.Load() != 0 {
		t.Errorf("the host server saw %d connections", hostN.Load())
	}
	if okN.Load() != 1 || allowedN.Load() != 1 {
		t.Errorf("servers saw %d and %d connections, want 1 each", okN.Load(), allowedN.Load())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(refused) != 2 || refused[0] != hostSock || refused[1] != "@nsbox-abstract-none" {
		t.Errorf("refusals reported: %v", refused)
	}
}

func TestGateSendto(t *testing.T) {
	rw, host := places(t)
	hostSock, okSock := filepath.Join(host, "host.dgram"), filepath.Join(rw, "ok.dgram")
	recv := func(p string) *net.UnixConn {
		c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: p, Net: "unixgram"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	hc, oc := recv(hostSock), recv(okSock)
	res, lines := runChild(t, "sendto", []string{hostSock, okSock}, GateConfig{Writable: []string{rw}})
	t.Log(lines)
	if res[hostSock] != "EACCES" || res[okSock] != "ok" {
		t.Fatalf("sendto: %v", lines)
	}
	oc.SetReadDeadline(time.Now().Add(time.Minute))
	buf := make([]byte, 16)
	if n, err := oc.Read(buf); err != nil || string(buf[:n]) != "ping" {
		t.Errorf("datagram in the writable place: %q %v", buf[:n], err)
	}
	hc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, err := hc.Read(buf); err == nil {
		t.Errorf("the host socket got %q", buf[:n])
	}
}

// TestGateAllowIsPinnedAtStart: an allowed socket is the inode its path
// named when the gate started. The sandbox may change the directories on
// the way (a host socket bound into its private /tmp sits below the
// sandbox's own tmpfs directories): pointing the allowed path at another
// host socket must not let that one through (found by review: the path
// was looked up again at each connect).
func TestGateAllowIsPinnedAtStart(t *testing.T) {
	rw, host := places(t)
	allowed, secret := filepath.Join(host, "allowed.sock"), filepath.Join(host, "secret.sock")
	allowedN, secretN := hostServer(t, allowed), hostServer(t, secret)
	link := filepath.Join(rw, "agent.sock")
	if err := os.Symlink(allowed, link); err != nil {
		t.Fatal(err)
	}
	// Allowed by its own path: a symlink in a writable place is refused
	// as an allow entry (TestGateRefusesAllowThroughWritableLink), and
	// re-pointing one at another host socket gets nothing through.
	res, lines := runChild(t, "relink", []string{link, secret, link, allowed}, GateConfig{Writable: []string{rw}, Allow: []string{allowed}})
	t.Log(lines)
	if res[link] != "EACCES" || res[allowed] != "ok" {
		t.Fatalf("through the re-pointed allowed path %q (want EACCES), to the allowed socket %q (want ok)", res[link], res[allowed])
	}
	// Wait for the allowed connect to be accepted (a guard, not a
	// speed assertion); a connect to the other server would have been
	// made before the child's returned, so it is in that server's queue
	// by now (the EACCES above is the main check).
	waitAccepted(allowedN)
	if secretN.Load() != 0 || allowedN.Load() != 1 {
		t.Fatalf("the other host socket saw %d connections (want 0), the allowed one %d (want 1)", secretN.Load(), allowedN.Load())
	}
}

// TestGateDACOverrideOnlyOnMappedOwners: a target's CAP_DAC_OVERRIDE
// counts only for a socket whose owner and group its user namespace maps,
// as the kernel decides for the target itself. A root-less supervisor
// connecting on its own credentials (its host groups among them, which
// the sandbox does not hold) would otherwise reach a socket the sandbox may
// not (found by review). The child is root of a namespace mapping 100000
// to 165535; one socket belongs to 100005 (mapped), one to 4242 (not), both
// mode 0600 in a writable place.
func TestGateDACOverrideOnlyOnMappedOwners(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making sockets of other owners and a mapped child needs root")
	}
	rw, _ := places(t)
	os.Chmod(rw, 0o755) // the child, host uid 100000, searches it
	mine, other := filepath.Join(rw, "mapped.sock"), filepath.Join(rw, "unmapped.sock")
	mineN, otherN := hostServer(t, mine), hostServer(t, other)
	for _, f := range []struct {
		p  string
		id int
	}{{mine, 100005}, {other, 4242}} {
		if err := os.Chown(f.p, f.id, f.id); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(f.p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	m := []syscall.SysProcIDMap{{ContainerID: 0, HostID: 100000, Size: 65536}}
	res, lines := runChildAttr(t, "connect", []string{mine, other}, GateConfig{Writable: []string{rw}}, Options{},
		// Credential: uid 0 of the new namespace (host 100000), root
		// there with every capability; without it the child keeps host
		// uid 0, unmapped inside, and no capability.
		&syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER, UidMappings: m, GidMappings: m, Credential: &syscall.Credential{Uid: 0, Gid: 0}})
	t.Log(lines)
	if res[mine] != "ok" || res[other] != "EACCES" {
		t.Fatalf("the mapped owner's socket %q (want ok), the unmapped owner's %q (want EACCES)", res[mine], res[other])
	}
	waitAccepted(mineN)
	if mineN.Load() != 1 || otherN.Load() != 0 {
		t.Fatalf("mapped socket saw %d connections (want 1), unmapped %d (want 0)", mineN.Load(), otherN.Load())
	}
}

// TestGateRefusesAllowThroughWritableLink: an allowed socket's path that
// goes through a symlink on a writable place's mount (which an earlier run
// in the same workspace may have planted, pointing at any host socket it
// can see) stops the gate with ErrAllowedThroughLink; the socket's own
// path, and a symlink outside the writable places, are pinned.
func TestGateRefusesAllowThroughWritableLink(t *testing.T) {
	rw, host := places(t)
	allowed := filepath.Join(host, "allowed.sock")
	hostServer(t, allowed)
	for _, l := range [][2]string{{allowed, filepath.Join(rw, "agent.sock")}, {host, filepath.Join(rw, "hostdir")}, {allowed, filepath.Join(host, "link.sock")}} {
		if err := os.Symlink(l[0], l[1]); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{filepath.Join(rw, "agent.sock"), filepath.Join(rw, "hostdir", "allowed.sock")} {
		g, err := NewUnixGate(GateConfig{RootPid: os.Getpid(), Writable: []string{rw}, Allow: []string{p}})
		if !errors.Is(err, ErrAllowedThroughLink) {
			if g != nil {
				g.Close()
			}
			t.Errorf("allow %s: err = %v, want ErrAllowedThroughLink", p, err)
		}
	}
	g, err := NewUnixGate(GateConfig{RootPid: os.Getpid(), Writable: []string{rw}, Allow: []string{allowed, filepath.Join(host, "link.sock")}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if len(g.allow) != 1 || len(g.pins) != 2 {
		t.Errorf("the socket by its own path and through a host symlink: %d inodes allowed (want 1), %d pins (want 2)", len(g.allow), len(g.pins))
	}
}

// TestGateFollowsChroot: where the profile lets a thread change its root
// (RootMayChange), a thread that changes it after a gated call is
// resolved from its new root (a program inside that confines
// itself with chroot stays confined: found by review, when the root of a
// thread's first call was kept for good).
func TestGateFollowsChroot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chroot(2) needs root")
	}
	rw, _ := places(t)
	jail := filepath.Join(rw, "jail")
	if err := os.Mkdir(jail, 0o755); err != nil {
		t.Fatal(err)
	}
	outer := filepath.Join(rw, "outer.sock")
	outerN, innerN := hostServer(t, outer), hostServer(t, filepath.Join(jail, "inner.sock"))
	res, lines := runChild(t, "chroot", []string{outer, jail, "/inner.sock"}, GateConfig{Writable: []string{rw}, RootMayChange: true})
	t.Log(lines)
	if res["before"] != "ok" || res["after"] != "ENOENT" || res["inner"] != "ok" {
		t.Fatalf("before the chroot %q (want ok), the outer socket after it %q (want ENOENT), the jail's %q (want ok)", res["before"], res["after"], res["inner"])
	}
	// Both accept loops may count after the child has printed.
	waitAccepted(outerN)
	waitAccepted(innerN)
	if outerN.Load() != 1 || innerN.Load() != 1 {
		t.Fatalf("outer server saw %d connections (want 1), the jail's %d (want 1)", outerN.Load(), innerN.Load())
	}
}

// TestGateSendmmsg: each message of a sendmmsg is sent and its msg_len
// written back into the caller (through its /proc/TID/mem).
func TestGateSendmmsg(t *testing.T) {
	rw, _ := places(t)
	okSock := filepath.Join(rw, "ok.dgram")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: okSock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, lines := runChild(t, "sendmmsg", []string{okSock}, GateConfig{Writable: []string{rw}})
	if res["sendmmsg"] != "2 3 5" {
		t.Fatalf("sendmmsg: %v", lines)
	}
	c.SetReadDeadline(time.Now().Add(time.Minute))
	buf := make([]byte, 16)
	for _, want := range []string{"one", "three"} {
		if n, err := c.Read(buf); err != nil || string(buf[:n]) != want {
			t.Errorf("datagram: %q %v, want %q", buf[:n], err, want)
		}
	}
}

// TestGateSymlinkRace flips a symlink in the writable place between a
// socket there and the host's while the child connects through it: the
// host server never sees a connection.
func TestGateSymlinkRace(t *testing.T) {
	rw, host := places(t)
	hostSock, okSock := filepath.Join(host, "host.sock"), filepath.Join(rw, "ok.sock")
	hostN, okN := hostServer(t, hostSock), hostServer(t, okSock)
	link := filepath.Join(rw, "link")
	res, lines := runChild(t, "race", []string{link, okSock, hostSock}, GateConfig{Writable: []string{rw}})
	t.Log(lines)
	if res["race-ok"] == "" {
		t.Fatalf("race did not run: %v", lines)
	}
	time.Sleep(50 * time.Millisecond)
	if hostN.Load() != 0 {
		t.Fatalf("the host server saw %d connections through the swapped link", hostN.Load())
	}
	t.Logf("connects through the link to the allowed socket: %s (server saw %d)", res["race-ok"], okN.Load())
}

// TestUnixGateAllowPinOutlivesItsInode: the gate holds each allowed
// socket's inode (an O_PATH pin for its life), not only its device and
// number. Once the allowed socket is removed (its server restarts) a
// number alone would be free, and on a disk file system the next file
// made gets it at once: here another host socket, in another directory,
// which the gate let the sandbox reach as if it were the allowed one
// (found by review).
func TestUnixGateAllowPinOutlivesItsInode(t *testing.T) {
	if err := Supported(); err != nil {
		t.Skip(err)
	}
	host := t.TempDir()
	var fs unix.Statfs_t
	if err := unix.Statfs(host, &fs); err != nil || fs.Type == unix.TMPFS_MAGIC {
		t.Skip("the temporary directory is on tmpfs, which does not give an inode number again soon")
	}
	allowed := filepath.Join(host, "allowed.sock")
	l, err := net.Listen("unix", allowed)
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(allowed, &st); err != nil {
		t.Fatal(err)
	}
	elsewhere := filepath.Join(host, "elsewhere")
	if err := os.Mkdir(elsewhere, 0o755); err != nil {
		t.Fatal(err)
	}

	// The child connects to other: the socket of elsewhere that gets the
	// freed number is given that name.
	other := filepath.Join(elsewhere, "other.sock")
	// The child (child's "later" mode) connects to other once told to by
	// a second line, so that the host can change between the gate's start
	// and the connect.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=later", "NSBOX_NOTIFY_TEST_ARGS="+other)
	stdin, out := startGateChild(t, cmd, GateConfig{Allow: []string{allowed}}, Options{})
	stdin.Write([]byte("go\n"))

	// The allowed server goes away (Close unlinks its socket).
	l.Close()
	os.Remove(allowed)
	// Another host socket, not allowed, made afterwards on the same file
	// system: the first one that gets the freed number stays.
	var otherL net.Listener
	for i := 0; i < 64 && otherL == nil; i++ {
		p := other
		if i > 0 {
			p = filepath.Join(elsewhere, fmt.Sprintf("miss%d.sock", i))
		}
		ol, err := net.Listen("unix", p)
		if err != nil {
			t.Fatal(err)
		}
		var ost unix.Stat_t
		unix.Stat(p, &ost)
		if ost.Ino == st.Ino && ost.Dev == st.Dev {
			if p != other {
				// Named as the child expects.
				ol.(*net.UnixListener).SetUnlinkOnClose(false)
				os.Rename(p, other)
			}
			otherL = ol
			break
		}
		defer ol.Close()
	}
	if otherL == nil {
		t.Skip("no new socket got the freed inode number here")
	}
	defer otherL.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := otherL.Accept(); err == nil {
			c.Close()
			accepted <- struct{}{}
		}
	}()
	stdin.Write([]byte("now\n"))
	deadline := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() }) // deadlock guard only
	defer deadline.Stop()
	var got string
	for out.Scan() {
		if k, v, _ := strings.Cut(out.Text(), " "); k == "connect" {
			got = v
		}
	}
	if got != "EACCES" {
		t.Fatalf("connect to %s, a host socket that only reuses the removed allowed socket's inode number: %q, want EACCES", other, got)
	}
}
