package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestRemoveDeadLandlockTmpDirs(t *testing.T) {
	base := t.TempDir()
	t.Setenv("TMPDIR", base)
	pat := landlockTmpPattern()
	if pat == landlockTmpPrefix {
		t.Skip("no /proc: TMPDIRs are not named after their owner")
	}
	ns, pid, start, ok := parseTmpOwner(pat + "x")
	if !ok || pid != os.Getpid() {
		t.Fatalf("this process's pattern %q does not parse back (%v %d)", pat, ok, pid)
	}
	// Runs make them in the user's own directory (landlockTmpParent).
	priv := landlockTmpParent()
	if priv != filepath.Join(base, "nsbox-"+strconv.Itoa(os.Geteuid())) {
		t.Fatalf("TMPDIRs are made in %s, not in a private directory of %s", priv, base)
	}
	mk := func(name string) string {
		p := filepath.Join(priv, name)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(p, "data"), []byte("x"), 0o600)
		return p
	}
	live := mk(pat + "live")
	// The same pid, started at another time: a reused pid, a dead owner.
	dead := mk(fmt.Sprintf("%s%d.%d.%d-dead", landlockTmpPrefix, ns, pid, start+1))
	foreign := mk(fmt.Sprintf("%s%d.%d.%d-foreign", landlockTmpPrefix, ns+1, pid, start+1))
	old := mk(landlockTmpPrefix + "123456")
	outside := t.TempDir()
	link := filepath.Join(priv, fmt.Sprintf("%s%d.%d.%d-link", landlockTmpPrefix, ns, pid, start+2))
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	// Inside a dead one, a symlink out: removed, not followed.
	os.Symlink(outside, filepath.Join(dead, "out"))
	os.WriteFile(filepath.Join(outside, "keep"), []byte("x"), 0o600)

	removed, err := RemoveDeadLandlockTmpDirs()
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != dead {
		t.Errorf("removed %v, want only %s", removed, dead)
	}
	if _, err := os.Lstat(dead); !os.IsNotExist(err) {
		t.Errorf("the dead owner's TMPDIR is still there: %v", err)
	}
	for _, p := range []string{live, foreign, old, link, filepath.Join(outside, "keep")} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s was removed: %v", strings.TrimPrefix(p, base), err)
		}
	}
}

// TestLandlockTmpParentRefusesOthersDirectory: a private directory name
// that is not the caller's own directory of mode 0700 (a symlink, a
// directory others may enter) is not used: TMPDIRs go to the shared
// directory, and what killed runs left is looked for there.
func TestLandlockTmpParentRefusesOthersDirectory(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(p string) error
	}{
		{"symlink", func(p string) error { return os.Symlink(t.TempDir(), p) }},
		{"open directory", func(p string) error { return os.Mkdir(p, 0o755) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			t.Setenv("TMPDIR", base)
			priv := filepath.Join(base, "nsbox-"+strconv.Itoa(os.Geteuid()))
			if err := tc.make(priv); err != nil {
				t.Fatal(err)
			}
			if got := landlockTmpParent(); got != base {
				t.Errorf("TMPDIRs are made in %s, want the shared %s", got, base)
			}
			if got := landlockTmpLeftAt(); got != base {
				t.Errorf("leftovers are looked for in %s, want the shared %s", got, base)
			}
		})
	}
	// Nothing there: no run made one, nothing to look for (and nothing made).
	base := t.TempDir()
	t.Setenv("TMPDIR", base)
	if got := landlockTmpLeftAt(); got != "" {
		t.Errorf("with no private directory, leftovers are looked for in %q", got)
	}
	if _, err := os.Lstat(filepath.Join(base, "nsbox-"+strconv.Itoa(os.Geteuid()))); err == nil {
		t.Error("looking for leftovers made the private directory")
	}
}
