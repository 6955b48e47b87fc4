package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestWriteFileFullDiskKeepsOldContent: write_file onto a full 1 MiB tmpfs
// fails with a message saying nothing changed, and the file it would have
// replaced keeps its content (issue 21, item 4).
func TestWriteFileFullDiskKeepsOldContent(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting the 1 MiB tmpfs that plays the full disk needs root")
	}
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		if err := unix.Mount("tmpfs", ws, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=1m,mode=0700"); err != nil {
			t.Skipf("cannot mount a tmpfs here: %v", err)
		}
		t.Cleanup(func() { unix.Unmount(ws, unix.MNT_DETACH) })
		if err := os.Chown(ws, u.uid, u.gid); err != nil {
			t.Fatal(err)
		}
		u.writeFile(t, filepath.Join(ws, "precious"), "precious data\n", 0o640)
		// Fill the disk but for 32 KiB.
		u.writeFile(t, filepath.Join(ws, "filler"), strings.Repeat("f", 1<<20-32<<10), 0o644)

		big := strings.Repeat("n", 100<<10)
		tr, _ := u.callTool(t, ws, "write_file", `{"path":"precious","content":"`+big+`"}`)
		if tr.Success {
			t.Fatal("write_file of 100 KiB onto a disk with 32 KiB free succeeded")
		}
		for _, want := range []string{"no space left", "nothing was changed"} {
			if !strings.Contains(tr.err(), want) {
				t.Errorf("error %q does not say %q", tr.err(), want)
			}
		}
		b, err := os.ReadFile(filepath.Join(ws, "precious"))
		if err != nil || string(b) != "precious data\n" {
			t.Errorf("precious after a failed write: %q %v", b, err)
		}
		if fi, err := os.Stat(filepath.Join(ws, "precious")); err == nil && fi.Mode().Perm() != 0o640 {
			t.Errorf("precious mode changed to %v", fi.Mode().Perm())
		}
		ents, _ := os.ReadDir(ws)
		for _, e := range ents {
			if e.Name() != "precious" && e.Name() != "filler" {
				t.Errorf("left behind on the full disk: %s", e.Name())
			}
		}
		// A small write still fits, and replaces the file keeping its mode.
		tr, _ = u.callTool(t, ws, "write_file", `{"path":"precious","content":"v2\n"}`)
		if !tr.Success {
			t.Fatalf("small write: %s", tr.err())
		}
		if b, _ := os.ReadFile(filepath.Join(ws, "precious")); string(b) != "v2\n" {
			t.Errorf("precious after a small write: %q", b)
		}
		if fi, err := os.Stat(filepath.Join(ws, "precious")); err == nil && fi.Mode().Perm() != 0o640 {
			t.Errorf("precious mode after a replace: %v, want 0640", fi.Mode().Perm())
		}
	})
}
