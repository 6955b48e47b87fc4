package sessiond

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

func TestValidName(t *testing.T) {
	for _, ok := range []string{"a", "work-1", "x.y_z", "A9"} {
		if !ValidName(ok) {
			t.Errorf("%q refused", ok)
		}
	}
	for _, bad := range []string{"", ".hidden", "../x", "a/b", "a b", string(make([]byte, 65))} {
		if ValidName(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}

// testRoots moves /run/user and /tmp into the test's own directories and
// returns the test's standard $XDG_RUNTIME_DIR (its /run/user/UID).
func testRoots(t *testing.T) string {
	t.Helper()
	oldRun, oldTmp := runUserRoot, tmpRoot
	runUserRoot, tmpRoot = t.TempDir(), t.TempDir()
	t.Cleanup(func() { runUserRoot, tmpRoot = oldRun, oldTmp })
	xdg := runUserDir(os.Geteuid())
	if err := os.Mkdir(xdg, 0o700); err != nil {
		t.Fatal(err)
	}
	return xdg
}

func TestRuntimeDirMustBePrivate(t *testing.T) {
	xdg := testRoots(t)
	env := func(k string) string {
		if k == "XDG_RUNTIME_DIR" {
			return xdg
		}
		return ""
	}
	d, err := RuntimeDir(env)
	if err != nil {
		t.Fatal(err)
	}
	if d.Path != filepath.Join(xdg, "nsbox-sessions") {
		t.Errorf("dir %s", d.Path)
	}
	if fi, _ := os.Stat(d.Path); fi.Mode().Perm() != 0o700 {
		t.Errorf("mode %v", fi.Mode().Perm())
	}
	// A directory someone made readable, or a symlink planted in its
	// place, is refused.
	os.Chmod(d.Path, 0o755)
	if _, err := RuntimeDir(env); !errors.Is(err, ErrUnsafeDir) {
		t.Errorf("0755 directory: %v", err)
	}
	os.Remove(d.Path)
	os.Symlink(t.TempDir(), d.Path)
	if _, err := RuntimeDir(env); !errors.Is(err, ErrUnsafeDir) {
		t.Errorf("symlink: %v", err)
	}
}

func TestListenCallRoundTrip(t *testing.T) {
	xdg := testRoots(t)
	d, err := RuntimeDir(func(k string) string { return map[string]string{"XDG_RUNTIME_DIR": xdg}[k] })
	if err != nil {
		t.Fatal(err)
	}
	lock, err := d.Lock("s")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := d.Lock("s"); !errors.Is(err, ErrExists) {
		t.Errorf("second lock: %v", err)
	}
	l, err := d.Listen("s")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if fi, err := os.Stat(d.Socket("s")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode: %v %v", fi, err)
	}
	if err := d.WriteInfo(Info{Name: "s", PID: os.Getpid(), BootID: BootID()}); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			req, err := ReadRequest(c)
			if err == nil {
				WriteMessage(c, Response{Result: json.RawMessage(`{"tool":` + strconv.Quote(req.Tool) + `}`)})
			}
			c.Close()
		}
	}()
	resp, err := d.Call("s", Request{Op: "call", Tool: "read_file"})
	if err != nil || string(resp.Result) != `{"tool":"read_file"}` {
		t.Fatalf("call: %v %s", err, resp.Result)
	}
	if list, _ := d.List(); len(list) != 1 || list[0].Name != "s" {
		t.Errorf("list %v", list)
	}
	// A record of another boot is a leftover: removed, not listed.
	d.WriteInfo(Info{Name: "s", BootID: "another-boot"})
	if _, err := d.Lookup("s"); !errors.Is(err, ErrNoSession) {
		t.Errorf("record of another boot: %v", err)
	}
	if _, err := os.Stat(d.Socket("s")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale socket kept: %v", err)
	}
}
