package notify

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// pinChildEnv runs this test binary as pinInodeChild: under the
// filter, it connects to its argument once told to (a second stdin line),
// so that the test can change the host between the gate's start and the
// connect.
const pinChildEnv = "NSBOX_NOTIFY_PIN_CHILD"

func init() {
	if p := os.Getenv(pinChildEnv); p != "" {
		os.Exit(pinInodeChild(p))
	}
}

func pinInodeChild(p string) int {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fmt.Println("error", err)
		return 1
	}
	fd, err := Install()
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Printf("fd %d\n", fd)
	in := bufio.NewReader(os.Stdin)
	if line, _ := in.ReadString('\n'); line != "go\n" {
		return 1
	}
	unix.Close(fd)
	if line, _ := in.ReadString('\n'); line != "now\n" {
		return 1
	}
	fmt.Println("connect", connectResult(p))
	return 0
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
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), pinChildEnv+"="+other)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	out := bufio.NewScanner(stdout)
	if !out.Scan() {
		t.Fatal("child said nothing")
	}
	var n int
	if _, err := fmt.Sscanf(out.Text(), "fd %d", &n); err != nil {
		t.Fatalf("child: %s", out.Text())
	}
	pidfd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	listener, err := unix.PidfdGetfd(pidfd, n, 0)
	unix.Close(pidfd)
	if err != nil {
		t.Fatal(err)
	}
	gate, err := NewUnixGate(GateConfig{RootPid: cmd.Process.Pid, Allow: []string{allowed}})
	if err != nil {
		t.Fatal(err)
	}
	defer gate.Close()
	srv, err := NewServer(listener, Options{Unix: gate})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	defer srv.Close()
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
