package store

import (
	"os"
	"path/filepath"
	"testing"
)

// Review 71: a store directory given through a symlink (a workspace's
// `state -> /usr/lib`, planted by an earlier sandbox) had its target
// chmod'ed 0700. The target keeps its mode now, and the open fails,
// naming it.
func TestReview71StoreDirThroughLinkNotChmodded(t *testing.T) {
	base := t.TempDir()
	victim := filepath.Join(base, "victim")
	if err := os.Mkdir(victim, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(victim, 0o755)
	link := filepath.Join(base, "state")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	err := ensureDir(link)
	st, _ := os.Stat(victim)
	if st.Mode().Perm() != 0o755 {
		t.Errorf("the link's target was chmod'ed to %o", st.Mode().Perm())
	}
	if err == nil {
		t.Errorf("a loose store directory behind a link was accepted silently")
	}
	// Through a link in a directory above, too.
	up := filepath.Join(base, "up")
	if err := os.Symlink(base, up); err != nil {
		t.Fatal(err)
	}
	if err := ensureDir(filepath.Join(up, "victim")); err == nil {
		t.Errorf("a loose store directory behind a link above it was accepted silently")
	}
	if st, _ := os.Stat(victim); st.Mode().Perm() != 0o755 {
		t.Errorf("the target was chmod'ed to %o through a link above it", st.Mode().Perm())
	}
	// A directory of its own, loose: made 0700.
	own := filepath.Join(base, "own")
	if err := os.Mkdir(own, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(own, 0o755)
	if err := ensureDir(own); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(own); st.Mode().Perm() != 0o700 {
		t.Errorf("a loose store directory of its own was left %o", st.Mode().Perm())
	}
}
