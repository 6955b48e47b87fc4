package notify

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// socketInodesOpen lists the inodes of the sockets this process holds.
func socketInodesOpen(t *testing.T) map[uint64]bool {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	m := map[uint64]bool{}
	for _, e := range ents {
		l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err != nil || len(l) < 9 || l[:8] != "socket:[" {
			continue
		}
		if ino, err := strconv.ParseUint(l[8:len(l)-1], 10, 64); err == nil {
			m[ino] = true
		}
	}
	return m
}

// TestInstallFDClosesReplacedSockets: the supervisor's copies of the
// sockets InstallFD took out of the target's fd table are all closed: in
// batches while the Server serves (reap), and the rest by Close; none is
// left open.
func TestInstallFDClosesReplacedSockets(t *testing.T) {
	l := redirectListener(t)
	var mu sync.Mutex
	var replaced []uint64 // the inodes of the target's sockets, replaced
	// Registered first, so run after the Server's Close (cleanups run
	// last-in first-out).
	t.Cleanup(func() {
		open := socketInodesOpen(t)
		mu.Lock()
		defer mu.Unlock()
		for _, ino := range replaced {
			if open[ino] {
				t.Errorf("replaced socket inode %d still open after Close", ino)
			}
		}
	})
	h := HandlerFunc(func(_ context.Context, c *SockCall) Verdict {
		if c.Syscall != Connect || c.Domain != unix.AF_INET {
			return Allow()
		}
		var st unix.Stat_t
		if err := unix.Fstat(c.Sock, &st); err != nil {
			return Deny(unix.EIO)
		}
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return Deny(unix.EIO)
		}
		sa := &unix.SockaddrInet4{Port: l.Addr().(*net.TCPAddr).Port, Addr: [4]byte{127, 0, 0, 1}}
		if err := unix.Connect(fd, sa); err != nil {
			unix.Close(fd)
			return Deny(unix.EIO)
		}
		mu.Lock()
		replaced = append(replaced, st.Ino)
		mu.Unlock()
		return InstallFD(fd, 0)
	})
	n := replacedBatch + 1
	args := make([]string, n)
	for i := range args {
		args[i] = "127.0.0.3:" + strconv.Itoa(9+i)
	}
	res, lines := runChildWith(t, "inet", args, GateConfig{}, h)
	for _, a := range args {
		if res[a] != "read redirected" {
			t.Fatalf("connects: %v", lines)
		}
	}
	// A full batch is closed while the Server serves (the deadline is a
	// deadlock guard, not a timing check).
	for deadline := time.Now().Add(30 * time.Second); ; {
		open := socketInodesOpen(t)
		left := 0
		mu.Lock()
		for _, ino := range replaced {
			if open[ino] {
				left++
			}
		}
		total := len(replaced)
		mu.Unlock()
		if total != n {
			t.Fatalf("%d sockets replaced, want %d", total, n)
		}
		if left <= n-replacedBatch {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d replaced sockets still open", left, n)
		}
		time.Sleep(time.Millisecond)
	}
}
