package script

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

func TestStaleWorkDirsOfKilledRunsAreRemoved(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Skip(err)
	}
	dead := strconv.Itoa(c.Process.Pid) // exited and reaped
	mk := func(name string) string {
		p := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Join(p, "sub"), 0o700); err != nil {
			t.Fatal(err)
		}
		return p
	}
	stale := mk(workDirPrefix + dead + "-abc")
	live := mk(workDirPrefix + strconv.Itoa(os.Getpid()) + "-abc")
	locked := mk(workDirPrefix + dead + "-locked")
	other := mk("nsbox-scriptx-" + dead + "-abc")
	// A symlink named like a stale work directory is never followed.
	target := mk("target")
	os.Symlink(target, filepath.Join(tmp, workDirPrefix+dead+"-link"))
	f, err := os.Open(locked)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH); err != nil {
		t.Fatal(err)
	}

	wd, err := newWorkDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the dead run's work directory is still there (%v)", err)
	}
	for _, keep := range []string{live, locked, other, filepath.Join(target, "sub"), wd.path} {
		if _, err := os.Stat(keep); err != nil {
			t.Errorf("%s was removed: %v", keep, err)
		}
	}
	wd.remove()
	if _, err := os.Stat(wd.path); !os.IsNotExist(err) {
		t.Errorf("remove left %s", wd.path)
	}
}
