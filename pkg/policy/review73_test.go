package policy

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// Review 73 #1: OpenHostDir judged a symlink by where the kernel resolved
// it at one instant and walked on by its text read a moment later: a link
// swapped between the two was judged by its old target and walked by its
// new one, and the final check compared the kernel's open with the walked
// path, so it passed too. Another sandbox of the same policy, running,
// that flipped ws/out between "build" (in the workspace) and a directory
// outside got nsbox to open the outside directory for its status or
// audit file (4,111 of 200,000 tries).
func TestReview73OpenHostDirLinkSwapped(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(base, "ws")
	victim := filepath.Join(base, "victim")
	for _, d := range []string{filepath.Join(ws, "build"), victim} {
		os.MkdirAll(d, 0o755)
	}
	out := filepath.Join(ws, "out")
	inA, outA := filepath.Join(ws, ".in"), filepath.Join(ws, ".out")
	writable := func() ([]string, error) { return []string{ws}, nil }
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; !stop.Load(); i++ {
			if i%2 == 0 {
				os.Symlink("build", inA)
				unix.Rename(inA, out)
			} else {
				os.Symlink(victim, outA)
				unix.Rename(outA, out)
			}
		}
	}()
	escaped, refused, ok, other := 0, 0, 0, 0
	for i := 0; i < 50000; i++ {
		fd, real, err := OpenHostDir(out, writable)
		switch {
		case err == nil && real == victim:
			escaped++
			unix.Close(fd)
		case err == nil:
			ok++
			unix.Close(fd)
		case err != nil:
			if _, pl := err.(*PlantedLinkError); pl {
				refused++
			} else {
				other++
			}
		}
	}
	stop.Store(true)
	<-done
	t.Logf("opened inside %d, refused (planted) %d, other errors %d, OPENED OUTSIDE %d", ok, refused, other, escaped)
	if escaped > 0 {
		t.Errorf("OpenHostDir opened %s (outside the writable %s) through %s in %d of 50000 tries", victim, ws, out, escaped)
	}
}
