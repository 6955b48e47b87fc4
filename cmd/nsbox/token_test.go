package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadTokenFile: a token file others can read is refused, one only
// the server's own group can read is taken (a Kubernetes Secret with
// fsGroup), and the shipped manifest's placeholder is refused (review 41).
func TestReadTokenFile(t *testing.T) {
	dir := t.TempDir()
	tok := strings.Repeat("ab12", 8)
	for _, c := range []struct {
		name, content string
		mode          os.FileMode
		gid           int // -1: the file's group stays the creator's
		ok            bool
	}{
		{"owner only", tok, 0o600, -1, true},
		{"own group", tok, 0o640, os.Getegid(), true},
		{"others", tok, 0o604, -1, false},
		{"another group", tok, 0o640, os.Getegid() + 1, false},
		{"placeholder", "REPLACE-WITH-A-LONG-RANDOM-TOKEN", 0o600, -1, false},
		{"short", "abc", 0o600, -1, false},
	} {
		p := filepath.Join(dir, c.name)
		if err := os.WriteFile(p, []byte(c.content+"\n"), c.mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, c.mode)
		if c.gid >= 0 {
			if err := os.Chown(p, -1, c.gid); err != nil {
				t.Skipf("chown to group %d: %v (run as root)", c.gid, err)
			}
		}
		got, real, err := readTokenFile(p)
		if c.ok && (err != nil || got != c.content || real != p) {
			t.Errorf("%s: %q %q %v", c.name, got, real, err)
		}
		if !c.ok && err == nil {
			t.Errorf("%s: taken", c.name)
		}
	}
}

// TestAtomicVolume: the directory of a file in a volume the kubelet
// writes (a ..data link beside it) is hidden whole; any other is not.
func TestAtomicVolume(t *testing.T) {
	vol := t.TempDir()
	os.Mkdir(filepath.Join(vol, "..2026_11_27"), 0o755)
	os.WriteFile(filepath.Join(vol, "..2026_11_27", "token"), []byte("x"), 0o600)
	os.Symlink("..2026_11_27", filepath.Join(vol, "..data"))
	os.Symlink("..data/token", filepath.Join(vol, "token"))
	if got := atomicVolume(filepath.Join(vol, "token")); got != vol {
		t.Errorf("atomicVolume in a kubelet volume: %q, want %q", got, vol)
	}
	// An item at a nested path: VOL/auth links to ..data/auth.
	os.MkdirAll(filepath.Join(vol, "..2026_11_27", "auth"), 0o755)
	os.Symlink("..data/auth", filepath.Join(vol, "auth"))
	if got := atomicVolume(filepath.Join(vol, "auth", "token")); got != vol {
		t.Errorf("atomicVolume of a nested item: %q, want %q", got, vol)
	}
	plain := t.TempDir()
	if got := atomicVolume(filepath.Join(plain, "token")); got != "" {
		t.Errorf("atomicVolume in a plain directory: %q", got)
	}
}
