package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// dircheck.c's helper thread answers what checkDirOpenat2 answers, magic
// links refused included.
func TestDirCheckHelperAgrees(t *testing.T) {
	if err := startDirCheck(); err != nil {
		t.Fatalf("startDirCheck: %v", err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := os.Symlink(dir, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	magic := "/proc/self/fd/" + strconv.Itoa(int(d.Fd()))
	for _, c := range []struct {
		path string
		ok   bool
	}{
		{"/", true},
		{dir, true},
		{filepath.Join(dir, "link"), true},
		{filepath.Join(dir, "missing"), false},
		{file, false},
		// A directory through a magic link: refused (CVE-2024-21626
		// class), though it resolves.
		{magic, false},
		{"/proc/self/cwd", false},
		{dir + "\x00x", false},
	} {
		handled, got := checkDirHelper(c.path)
		if !handled {
			t.Fatalf("%q: the helper did not answer", c.path)
		}
		want := checkDirOpenat2(c.path)
		if (got == nil) != c.ok || !errors.Is(got, want) && !(got == nil && want == nil) {
			t.Errorf("%q: helper %v, openat2 %v, want ok=%v", c.path, got, want, c.ok)
		}
		if err := checkDir(c.path); (err == nil) != c.ok {
			t.Errorf("checkDir(%q) = %v, want ok=%v", c.path, err, c.ok)
		}
	}
	if err := checkDir("relative"); err == nil {
		t.Error("checkDir accepted a relative path")
	}
}
