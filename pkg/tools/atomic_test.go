package tools

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// failWrites makes every content write fail as a full disk does, after
// writing half of it (a real ENOSPC often comes mid-write).
func failWrites(t *testing.T) {
	t.Helper()
	orig := writeContent
	writeContent = func(f *os.File, b []byte) error {
		f.Write(b[:len(b)/2])
		return &os.PathError{Op: "write", Path: f.Name(), Err: unix.ENOSPC}
	}
	t.Cleanup(func() { writeContent = orig })
}

// noTemp fails when a temporary file was left in dir.
func noTemp(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), tempPrefix) {
			t.Errorf("temporary file left behind: %s", e.Name())
		}
	}
}

func TestWriteFileFullDiskKeepsOldContent(t *testing.T) {
	ws := t.TempDir()
	mustWrite(t, filepath.Join(ws, "precious"), "precious data\n")
	failWrites(t)
	r, env := NewBuiltinRegistry(), &hostEnv{ws: ws}
	res := call(t, r, env, "write_file", `{"path":"precious","content":"new content that does not fit"}`)
	if res.Success {
		t.Fatal("write_file succeeded with every write failing")
	}
	for _, want := range []string{"no space left", "nothing was changed", "old content is intact"} {
		if !strings.Contains(errText(res), want) {
			t.Errorf("error %q does not say %q", errText(res), want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "precious")); string(b) != "precious data\n" {
		t.Errorf("old content lost: %q", b)
	}
	// A new file is not left half-written either.
	res = call(t, r, env, "write_file", `{"path":"fresh.txt","content":"0123456789"}`)
	if res.Success || !strings.Contains(errText(res), "no file was created") {
		t.Errorf("new file on a full disk: success=%v error=%q", res.Success, errText(res))
	}
	if _, err := os.Lstat(filepath.Join(ws, "fresh.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("fresh.txt exists after a failed write: %v", err)
	}
	noTemp(t, ws)
}

func TestWriteFileErrorsMatch(t *testing.T) {
	ws := t.TempDir()
	mustWrite(t, filepath.Join(ws, "f"), "x")
	failWrites(t)
	root, err := OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	_, err = writeFile(root, "f", []byte("yyyy"), false)
	if !errors.Is(err, ErrNothingChanged) || !errors.Is(err, unix.ENOSPC) {
		t.Errorf("error %v: want it to match ErrNothingChanged and ENOSPC", err)
	}
}

func TestWriteFileKeepsModeAndLinks(t *testing.T) {
	ws := t.TempDir()
	script := filepath.Join(ws, "run.sh")
	mustWrite(t, script, "#!/bin/sh\n")
	if err := os.Chmod(script, 0o751); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("run.sh", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	r, env := NewBuiltinRegistry(), &hostEnv{ws: ws}
	if res := call(t, r, env, "write_file", `{"path":"link","content":"#!/bin/sh\necho hi\n"}`); !res.Success {
		t.Fatalf("write through a symlink: %s", errText(res))
	}
	fi, err := os.Lstat(script)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o751 {
		t.Errorf("mode after the write: %v, want 0751", fi.Mode().Perm())
	}
	if b, _ := os.ReadFile(script); string(b) != "#!/bin/sh\necho hi\n" {
		t.Errorf("content: %q", b)
	}
	if fi, err := os.Lstat(filepath.Join(ws, "link")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink was replaced: %v %v", fi, err)
	}
	noTemp(t, ws)
}

func TestWriteFileRespectsFileMode(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root opens a 0444 file for writing: the permission check cannot fail")
	}
	ws := t.TempDir()
	ro := filepath.Join(ws, "ro.txt")
	mustWrite(t, ro, "keep\n")
	os.Chmod(ro, 0o444)
	res := call(t, NewBuiltinRegistry(), &hostEnv{ws: ws}, "write_file", `{"path":"ro.txt","content":"changed"}`)
	if res.Success || !strings.Contains(errText(res), "permission denied") {
		t.Errorf("write to a 0444 file: success=%v error=%q", res.Success, errText(res))
	}
	if b, _ := os.ReadFile(ro); string(b) != "keep\n" {
		t.Errorf("0444 file replaced by a rename: %q", b)
	}
}
