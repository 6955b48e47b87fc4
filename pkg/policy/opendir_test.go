package policy

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// A FIFO where a directory was expected fails the open at once; before
// review 68 the walks' os.ReadDir (and inert's os.Open) waited in open(2)
// for a writer: this test then never returned.
func TestOpenDirNoWaitFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readDirNoWait(fifo); !errors.Is(err, unix.ENOTDIR) {
		t.Errorf("readDirNoWait(FIFO): %v, want ENOTDIR", err)
	}
	if _, err := openDirNoWait(fifo, true); !errors.Is(err, unix.ENOTDIR) {
		t.Errorf("openDirNoWait(FIFO): %v, want ENOTDIR", err)
	}
}

func TestOpenDirNoWaitSymlinkAndOrder(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"b", "a", "c"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	// O_NOFOLLOW with O_DIRECTORY: ENOTDIR (open(2)).
	if _, err := openDirNoWait(link, true); !errors.Is(err, unix.ENOTDIR) && !errors.Is(err, unix.ELOOP) {
		t.Errorf("openDirNoWait(symlink, noFollow): %v, want ENOTDIR or ELOOP", err)
	}
	ents, err := readDirNoWait(link)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if len(got) != 3 || got[0] != "a" || got[1] != "b" || got[2] != "c" {
		t.Errorf("readDirNoWait: %v, want [a b c] (sorted, as os.ReadDir)", got)
	}
	// inert: an empty directory is inert, one with an entry is not.
	if !inert(t.TempDir()) || inert(dir) {
		t.Errorf("inert: empty directory %v, full one %v", inert(t.TempDir()), inert(dir))
	}
}
