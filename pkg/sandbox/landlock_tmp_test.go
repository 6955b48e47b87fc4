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
	// Runs make them in the user's own directory (makeLandlockTmp).
	first, err := makeLandlockTmp()
	if err != nil {
		t.Fatal(err)
	}
	priv := filepath.Dir(first)
	if priv != filepath.Join(base, "nsbox-"+strconv.Itoa(os.Geteuid())) || landlockTmpParent() != priv {
		t.Fatalf("TMPDIRs are made in %s, not in a private directory of %s", priv, base)
	}
	os.Remove(first)
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
// that is not the caller's own directory (a symlink) is not used: TMPDIRs
// go to the shared directory, and what killed runs left is looked for
// there. One of the caller's whose mode was changed (a Landlock command
// runs as the caller and may chmod it: 000 stopped every later run, 755
// hid it from the cleanup) gets its mode 0700 back and is used.
func TestLandlockTmpParentRefusesOthersDirectory(t *testing.T) {
	base := t.TempDir()
	t.Setenv("TMPDIR", base)
	priv := filepath.Join(base, "nsbox-"+strconv.Itoa(os.Geteuid()))
	if err := os.Symlink(t.TempDir(), priv); err != nil {
		t.Fatal(err)
	}
	if got := landlockTmpParent(); got != base {
		t.Errorf("TMPDIRs would be made in %s, want the shared %s", got, base)
	}
	if got := landlockTmpLeftAt(); got != base {
		t.Errorf("leftovers are looked for in %s, want the shared %s", got, base)
	}
	tmp, err := makeLandlockTmp()
	if err != nil || filepath.Dir(tmp) != base {
		t.Errorf("a TMPDIR was made at %s (%v), want one in the shared %s", tmp, err, base)
	}

	for _, mode := range []os.FileMode{0, 0o755, 0o1777} {
		base := t.TempDir()
		t.Setenv("TMPDIR", base)
		priv := filepath.Join(base, "nsbox-"+strconv.Itoa(os.Geteuid()))
		if err := os.Mkdir(priv, 0o700); err != nil {
			t.Fatal(err)
		}
		os.Chmod(priv, mode)
		if got := landlockTmpLeftAt(); got != priv {
			t.Errorf("mode %o: leftovers are looked for in %q, want %s", mode, got, priv)
		}
		os.Chmod(priv, mode)
		tmp, err := makeLandlockTmp()
		if err != nil || filepath.Dir(tmp) != priv {
			t.Errorf("mode %o: a TMPDIR was made at %s (%v), want one in %s", mode, tmp, err, priv)
		}
		if fi, err := os.Lstat(priv); err != nil || fi.Mode().Perm() != 0o700 || fi.Mode()&os.ModeSticky != 0 {
			t.Errorf("mode %o: the private directory's mode is %v (%v), want 0700", mode, fi.Mode(), err)
		}
	}

	// Nothing there: no run made one, nothing to look for (and nothing made).
	base = t.TempDir()
	t.Setenv("TMPDIR", base)
	if got := landlockTmpLeftAt(); got != "" {
		t.Errorf("with no private directory, leftovers are looked for in %q", got)
	}
	if _, err := os.Lstat(filepath.Join(base, "nsbox-"+strconv.Itoa(os.Geteuid()))); err == nil {
		t.Error("looking for leftovers made the private directory")
	}
}
