package sandbox

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// The shim's fd is duplicated above every number ForkExec's child may
// overwrite: the files' slots and the slots right above the largest file.
func TestShimFDForStaysClearOfForkExec(t *testing.T) {
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, files := range [][]uintptr{{0, 1, 2}, {0, 1, 2, 40, 41}, {9, 8, 7, 6, 5, 4, 3}} {
		fd, err := shimFDFor(int(f.Fd()), files)
		if err != nil {
			t.Fatal(err)
		}
		top := len(files)
		for _, x := range files {
			top = max(top, int(x))
		}
		if fd <= top+len(files)+1 {
			t.Errorf("files %v: shim fd %d may be overwritten (top %d)", files, fd, top)
		}
		if flags, _ := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); flags&unix.FD_CLOEXEC == 0 {
			t.Errorf("shim fd %d is not close-on-exec", fd)
		}
		unix.Close(fd)
	}
}
