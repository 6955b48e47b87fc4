package policy

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// Review 71 #7: the walk read a directory's whole listing into memory
// before it matched anything. A sandbox writes the workspace: it could
// leave a directory of 2,000,000 files, and every later start and every
// end-of-run audit then held ~213 MB for its listing. The walk now keeps
// only the entries it can use (directories, symlinks, entries of unknown
// type, and the names and wildcards its patterns look for there), so what
// it holds is bounded by those, not by the size of the directory. Counted
// by the walk's own listing (onList), not by timing or RSS.
func TestGlobListKeepsOnlyWhatTheWalkUses(t *testing.T) {
	const files = 50000
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(ws, "big")
	for _, d := range []string{filepath.Join(big, "sub"), filepath.Join(ws, "a", ".vscode")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fd, err := unix.Open(big, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	for i := 0; i < files; i++ {
		f, err := unix.Openat(fd, "f"+strconv.Itoa(i), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		unix.Close(f)
	}
	// What the patterns below look for in big: a plain name, names a
	// wildcard matches, a symlink (collected), a directory to go into.
	for _, f := range []string{".vscode", ".env", ".env.local", "sub/.vscode"} {
		if err := os.WriteFile(filepath.Join(big, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("sub", filepath.Join(big, "link")); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	mostRead, keptThere := 0, 0
	onList = func(read, kept int) {
		mu.Lock()
		defer mu.Unlock()
		if read > mostRead {
			mostRead, keptThere = read, kept
		}
	}
	defer func() { onList = nil }()
	pr := escapeGlob(ws)
	res, links, err := globAllLinks([]globPattern{{path: pr + "/**/.vscode"}, {path: pr + "/**/.env*", fileOnly: true}}, walkMaxDepth, true)
	if err != nil {
		t.Fatal(err)
	}
	if mostRead < files {
		t.Fatalf("the walk read at most %d entries of a directory of %d", mostRead, files)
	}
	// .vscode, .env, .env.local, sub and link.
	if keptThere > 5 {
		t.Errorf("the walk kept %d of the %d entries of %s; it can use 5 of them", keptThere, mostRead, big)
	}
	want := [][]string{
		{filepath.Join(ws, "a", ".vscode"), filepath.Join(big, ".vscode"), filepath.Join(big, "sub", ".vscode")},
		{filepath.Join(big, ".env"), filepath.Join(big, ".env.local")},
	}
	for i, w := range want {
		if !reflect.DeepEqual(res[i].matches, w) {
			t.Errorf("pattern %d matched %q, want %q", i, res[i].matches, w)
		}
	}
	if !reflect.DeepEqual(links, []string{filepath.Join(big, "link")}) {
		t.Errorf("links %q, want %q", links, filepath.Join(big, "link"))
	}
}
