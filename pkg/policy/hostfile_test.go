package policy

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestOpenHostDir(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(base, "ws")
	for _, d := range []string{filepath.Join(ws, "build"), filepath.Join(base, "victim"), filepath.Join(base, "data")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, at string) {
		if err := os.Symlink(target, at); err != nil {
			t.Fatal(err)
		}
	}
	link(filepath.Join(base, "victim"), filepath.Join(ws, "out"))    // planted: leads out
	link("../victim", filepath.Join(ws, "up"))                       // planted, relative
	link("build", filepath.Join(ws, "inner"))                        // stays in its directory
	link(filepath.Join(base, "data"), filepath.Join(base, "mydata")) // the user's own, outside ws
	link(filepath.Join(ws, "out"), filepath.Join(base, "via"))       // outside, but on to the planted one
	// Review 72: a relative link that stays in the workspace through
	// "..", a link spelled through a symlinked home, and a ".." after a
	// link, taken where the link led.
	if err := os.MkdirAll(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	link("../build", filepath.Join(ws, "sub", "cur"))
	link(".", filepath.Join(base, "home"))
	link(filepath.Join(base, "home", "ws", "build"), filepath.Join(ws, "out2"))
	for _, d := range []string{filepath.Join(base, "x", "y"), filepath.Join(base, "x", "b")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link("x/y", filepath.Join(base, "a"))
	link("a/../b", filepath.Join(base, "lx"))
	for _, c := range []struct {
		dir, want string
		planted   string
	}{
		{dir: ws, want: ws},
		{dir: filepath.Join(ws, "inner"), want: filepath.Join(ws, "build")},
		{dir: filepath.Join(base, "mydata"), want: filepath.Join(base, "data")},
		{dir: filepath.Join(ws, "build", "..", "inner"), want: filepath.Join(ws, "build")},
		{dir: filepath.Join(ws, "sub", "cur"), want: filepath.Join(ws, "build")},
		{dir: filepath.Join(ws, "out2"), want: filepath.Join(ws, "build")},
		{dir: filepath.Join(base, "lx"), want: filepath.Join(base, "x", "b")},
		{dir: filepath.Join(ws, "out"), planted: filepath.Join(ws, "out")},
		{dir: filepath.Join(ws, "up"), planted: filepath.Join(ws, "up")},
		{dir: filepath.Join(base, "via"), planted: filepath.Join(ws, "out")},
	} {
		calls := 0
		fd, real, err := OpenHostDir(c.dir, func() ([]string, error) { calls++; return []string{ws}, nil })
		var pl *PlantedLinkError
		switch {
		case c.planted != "":
			if !errors.As(err, &pl) || pl.Link != c.planted {
				t.Errorf("%s: %v, want the planted link %s refused", c.dir, err, c.planted)
			}
		case err != nil:
			t.Errorf("%s: %v", c.dir, err)
		default:
			var st, want unix.Stat_t
			if unix.Fstat(fd, &st) != nil || unix.Stat(c.want, &want) != nil || st.Ino != want.Ino || real != c.want {
				t.Errorf("%s: opened %s (ino %d), want %s (ino %d)", c.dir, real, st.Ino, c.want, want.Ino)
			}
			unix.Close(fd)
			if c.dir == ws && calls != 0 {
				t.Errorf("%s: the writable directories were asked for with no link on the way", c.dir)
			}
		}
	}
	// Unknown writable directories refuse a link that leads out.
	if _, _, err := OpenHostDir(filepath.Join(base, "via"), func() ([]string, error) { return nil, errors.New("no policy") }); err == nil {
		t.Errorf("a link out of its directory was followed with the writable directories unknown")
	}
	// A loop ends.
	link("loop", filepath.Join(base, "loop"))
	if _, _, err := OpenHostDir(filepath.Join(base, "loop"), func() ([]string, error) { return nil, nil }); !errors.Is(err, unix.ELOOP) {
		t.Errorf("a symlink loop: %v, want ELOOP", err)
	}
}
