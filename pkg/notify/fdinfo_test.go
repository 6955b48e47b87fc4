package notify

import (
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

// TestFdinfoCacheFollowsTheFdTable: a cached fdinfo file reads the flags
// of whatever the thread's fd number is at the time of the read, so a
// number reused with another close-on-exec flag is answered right.
func TestFdinfoCacheFollowsTheFdTable(t *testing.T) {
	var fc fdinfoCache
	defer fc.close()
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(s)
	c := &SockCall{Pid: os.Getpid(), FD: s}
	for i, want := range []bool{true, false, true, false} {
		// The same number, now with the flag as wanted (dup3 onto it
		// replaces the file and sets the flag).
		n, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
		if err != nil {
			t.Fatal(err)
		}
		fl := 0
		if want {
			fl = unix.O_CLOEXEC
		}
		if err := unix.Dup3(n, s, fl); err != nil {
			t.Fatal(err)
		}
		unix.Close(n)
		got, err := fc.cloexec(c)
		if err != nil || got != want {
			t.Fatalf("round %d: cloexec %v, %v; want %v", i, got, err, want)
		}
	}
	if len(fc.m) != 1 {
		t.Fatalf("%d files cached for one thread and number, want 1", len(fc.m))
	}
}

// TestFdinfoCacheDropsEndedThreads: the cached file of a process that
// ended fails its read and is dropped; it never answers for another
// process.
func TestFdinfoCacheDropsEndedThreads(t *testing.T) {
	var fc fdinfoCache
	defer fc.close()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	c := &SockCall{Pid: cmd.Process.Pid, FD: 1}
	if _, err := fc.cloexec(c); err != nil {
		cmd.Process.Kill()
		t.Fatal(err)
	}
	if len(fc.m) != 1 {
		t.Fatalf("%d files cached, want 1", len(fc.m))
	}
	cmd.Process.Kill()
	cmd.Wait()
	if _, err := fc.cloexec(c); err == nil {
		t.Fatal("read the fd flags of a process that ended")
	}
	if len(fc.m) != 0 {
		t.Fatalf("%d files cached after the process ended, want 0", len(fc.m))
	}
}

// TestFdinfoCacheBounded: at most maxFdinfos files stay open.
func TestFdinfoCacheBounded(t *testing.T) {
	var fc fdinfoCache
	defer fc.close()
	var fds []int
	for range maxFdinfos + 8 {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		fds = append(fds, fd)
		if got, err := fc.cloexec(&SockCall{Pid: os.Getpid(), FD: fd}); err != nil || !got {
			t.Fatalf("fd %d: %v, %v", fd, got, err)
		}
	}
	for _, fd := range fds {
		unix.Close(fd)
	}
	if len(fc.m) != maxFdinfos {
		t.Fatalf("%d files cached, want the bound %d", len(fc.m), maxFdinfos)
	}
}
