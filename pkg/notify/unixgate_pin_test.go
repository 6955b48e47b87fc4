package notify

import (
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
	stdin, out := startGateChild(t, cmd, GateConfig{Allow: []string{allowed}}, nil)
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
