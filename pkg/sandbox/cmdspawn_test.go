package sandbox

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The tests below run cmdspawn.c's start and syscall.ForkExec (the worker's
// fallback) side by side and want the same command: same files, same
// session, same directory, same errors.

func requireSpawnC(t *testing.T) {
	t.Helper()
	if fd, err := unix.PidfdOpen(os.Getpid(), 0); err != nil {
		t.Skipf("no pidfds on this kernel (%v): the worker uses syscall.ForkExec", err)
	} else {
		unix.Close(fd)
	}
	if err := initSpawnC(false); err != nil {
		t.Fatalf("initSpawnC: %v", err)
	}
}

type spawnFunc func(path string, argv, env []string, dir string, files []uintptr) (int, error)

func viaC(t *testing.T) spawnFunc {
	return func(path string, argv, env []string, dir string, files []uintptr) (int, error) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		syscall.ForkLock.Lock()
		pid, pidfd, ok, err := spawnC(path, argv, env, dir, files, false)
		syscall.ForkLock.Unlock()
		if !ok {
			t.Fatal("cmdspawn.c refused: busy or not initialized")
		}
		if err == nil {
			unix.Close(pidfd)
		}
		return pid, err
	}
}

func viaGo(path string, argv, env []string, dir string, files []uintptr) (int, error) {
	return syscall.ForkExec(path, argv, &syscall.ProcAttr{Dir: dir, Env: env, Files: files, Sys: &syscall.SysProcAttr{Setsid: true}})
}

// runBoth starts the command both ways with stdout on a pipe (slot 1 of
// files, which must hold -1 there) and returns both outputs and exit
// statuses.
func runBoth(t *testing.T, path string, argv, env []string, dir string, files []uintptr) (outs [2]string) {
	t.Helper()
	for i, spawn := range []spawnFunc{viaC(t), viaGo} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		f := append([]uintptr(nil), files...)
		f[1] = w.Fd()
		pid, err := spawn(path, argv, env, dir, f)
		w.Close()
		if err != nil {
			r.Close()
			t.Fatalf("spawn %d: %v", i, err)
		}
		var buf bytes.Buffer
		buf.ReadFrom(r)
		r.Close()
		var ws unix.WaitStatus
		if _, err := unix.Wait4(pid, &ws, 0, nil); err != nil {
			t.Fatalf("wait4: %v", err)
		}
		if !ws.Exited() || ws.ExitStatus() != 0 {
			t.Fatalf("spawn %d: %v exited %v: %s", i, argv, ws, buf.String())
		}
		outs[i] = buf.String()
	}
	return outs
}

func devNull(t *testing.T) uintptr {
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f.Fd()
}

func TestSpawnCArgsEnvDir(t *testing.T) {
	requireSpawnC(t)
	dir := t.TempDir()
	null := devNull(t)
	outs := runBoth(t, "/bin/sh", []string{"sh", "-c", `echo "$0|$1|$FOO|$(pwd)|$#"`, "zero", "one"},
		[]string{"FOO=bar baz", "PATH=/usr/bin:/bin"}, dir, []uintptr{null, ^uintptr(0), null})
	want := "zero|one|bar baz|" + dir + "|1\n"
	if outs[0] != want || outs[1] != want {
		t.Errorf("C %q, Go %q, want %q", outs[0], outs[1], want)
	}
}

// Only the files given reach the command: every other fd of the worker is
// close-on-exec, in the C start as in Go's.
func TestSpawnCInheritsOnlyItsFiles(t *testing.T) {
	requireSpawnC(t)
	null := devNull(t)
	extra, err := os.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	outs := runBoth(t, "/bin/sh", []string{"sh", "-c", `exec ls /proc/self/fd`}, nil, "/", []uintptr{null, ^uintptr(0), null})
	// The test binary may itself have inherited fds without close-on-exec
	// (they pass both ways, as they would pass into any child): the two
	// starts must agree, and the fd opened here, close-on-exec as every
	// fd the Go runtime makes, must not be there.
	if outs[0] != outs[1] {
		t.Errorf("fds: C %q, Go %q", outs[0], outs[1])
	}
	for _, fd := range strings.Fields(outs[0]) {
		if fd == strconv.Itoa(int(extra.Fd())) {
			t.Errorf("fd %s leaked into the command: %q", fd, outs[0])
		}
	}
	for _, fd := range []string{"0", "1", "2"} {
		if !strings.Contains("\n"+outs[0], "\n"+fd+"\n") {
			t.Errorf("fd %s missing: %q", fd, outs[0])
		}
	}
}

// The files land on their slots even when one of them sits below its slot
// (fd 0 given as file 2) or on the slot of another: cmdspawn.c moves them in
// Go's two passes.
func TestSpawnCFileShuffle(t *testing.T) {
	requireSpawnC(t)
	dir := t.TempDir()
	var fds []uintptr
	for _, name := range []string{"a", "b"} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fds = append(fds, f.Fd())
	}
	stdin, err := os.Readlink("/proc/self/fd/0")
	if err != nil {
		t.Skipf("fd 0 of the test: %v", err)
	}
	outs := runBoth(t, "/bin/sh", []string{"sh", "-c", `readlink /proc/self/fd/0 /proc/self/fd/2 /proc/self/fd/3`}, nil, "/",
		[]uintptr{fds[1], ^uintptr(0), 0, fds[0]})
	want := filepath.Join(dir, "b") + "\n" + stdin + "\n" + filepath.Join(dir, "a") + "\n"
	if outs[0] != want || outs[1] != want {
		t.Errorf("C %q, Go %q, want %q", outs[0], outs[1], want)
	}
}

// The command leads a new session (no controlling terminal: TIOCSTI,
// CVE-2017-5226) and its own process group.
func TestSpawnCSessionLeader(t *testing.T) {
	requireSpawnC(t)
	null := devNull(t)
	outs := runBoth(t, "/bin/sh", []string{"sh", "-c", `exec cat /proc/self/stat`}, nil, "/", []uintptr{null, ^uintptr(0), null})
	for i, out := range outs {
		// pid (comm) state ppid pgrp session ...; comm is "cat".
		_, rest, _ := strings.Cut(out, ") ")
		f := strings.Fields(rest)
		pid, _, _ := strings.Cut(out, " ")
		if len(f) < 4 || f[2] != pid || f[3] != pid {
			t.Errorf("spawn %d: pgrp/session %v, want both %s: %q", i, f[2:4], pid, out)
		}
	}
}

// A command that cannot start gives the same error, so the same message and
// exit code, through either start.
func TestSpawnCStartErrors(t *testing.T) {
	requireSpawnC(t)
	null := devNull(t)
	dir := t.TempDir()
	notExec := filepath.Join(dir, "script")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, path, dir string
		argv            []string
	}{
		{"missing command", filepath.Join(dir, "missing"), "/", []string{"missing"}},
		{"not executable", notExec, "/", []string{"script"}},
		{"a directory", dir, "/", []string{"dir"}},
		{"missing directory", "/bin/true", filepath.Join(dir, "gone"), []string{"true"}},
		{"NUL in an argument", "/bin/true", "/", []string{"true", "a\x00b"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			files := []uintptr{null, null, null}
			_, errC := viaC(t)(c.path, c.argv, nil, c.dir, files)
			_, errGo := viaGo(c.path, c.argv, nil, c.dir, files)
			if errC == nil || errGo == nil {
				t.Fatalf("started: C %v, Go %v", errC, errGo)
			}
			var ec, eg syscall.Errno
			if !errors.As(errC, &ec) || !errors.As(errGo, &eg) || ec != eg {
				t.Fatalf("C %v, Go %v: want the same errno", errC, errGo)
			}
			rc, rg := startFailure(c.argv[0], errC), startFailure(c.argv[0], errGo)
			if rc != rg {
				t.Errorf("reply C %+v, Go %+v", rc, rg)
			}
		})
	}
	// No child is left behind by the failed starts: each was reaped.
	var ws unix.WaitStatus
	if pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil); pid > 0 {
		t.Errorf("a failed start left child %d (%v)", pid, err)
	}
}

// The signal dispositions the command starts with are the ones Go's start
// gives: caught signals back to default, ignored ones still ignored.
func TestSpawnCSignalDispositions(t *testing.T) {
	requireSpawnC(t)
	null := devNull(t)
	outs := runBoth(t, "/bin/sh", []string{"sh", "-c", `exec cat /proc/self/status`}, nil, "/", []uintptr{null, ^uintptr(0), null})
	var sig [2]string
	for i, out := range outs {
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "SigIgn:") || strings.HasPrefix(line, "SigCgt:") || strings.HasPrefix(line, "SigBlk:") {
				sig[i] += line + "\n"
			}
		}
	}
	if sig[0] != sig[1] {
		t.Errorf("C:\n%sGo:\n%s", sig[0], sig[1])
	}
	if !strings.Contains(sig[0], "SigCgt:\t0000000000000000") {
		t.Errorf("a caught signal survived the exec:\n%s", sig[0])
	}
}

// With the working directory's check asked of dircheck.c's helper, the
// command runs only in a directory that passed it; a refusal (a magic link,
// a missing directory) is a *dirError with the check's errno, and nothing
// ran.
func TestSpawnCChecksDir(t *testing.T) {
	requireSpawnC(t)
	if err := startDirCheck(); err != nil {
		t.Fatalf("startDirCheck: %v", err)
	}
	dir := t.TempDir()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	marker := filepath.Join(dir, "ran")
	for _, c := range []struct {
		dir  string
		want error // nil: runs
	}{
		{dir, nil},
		{"/proc/self/fd/" + strconv.Itoa(int(d.Fd())), unix.ELOOP},
		{"/proc/self/cwd", unix.ELOOP},
		{filepath.Join(dir, "gone"), unix.ENOENT},
	} {
		os.Remove(marker)
		runtime.LockOSThread()
		syscall.ForkLock.Lock()
		pid, pidfd, ok, err := spawnC("/bin/sh", []string{"sh", "-c", "touch " + marker}, nil, c.dir, []uintptr{0, 1, 2}, true)
		syscall.ForkLock.Unlock()
		runtime.UnlockOSThread()
		if !ok {
			t.Fatal("cmdspawn.c refused")
		}
		if c.want == nil {
			if err != nil {
				t.Errorf("%s: %v", c.dir, err)
				continue
			}
			unix.Close(pidfd)
			var ws unix.WaitStatus
			unix.Wait4(pid, &ws, 0, nil)
			if _, err := os.Stat(marker); err != nil {
				t.Errorf("%s: the command did not run (%v)", c.dir, err)
			}
			continue
		}
		var de *dirError
		if !errors.As(err, &de) || !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want a *dirError %v", c.dir, err, c.want)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Errorf("%s: the command ran", c.dir)
		}
	}
}

// A start in the directory approved last asks nothing of dircheck.c's
// helper (the kept directory); its child still compares its working
// directory with the approved one. When the path names something else by
// the next start, the answer is what a fresh check gives: a magic link
// swapped in is refused (ELOOP), a removed directory is missing (ENOENT),
// and a new directory at the same path runs. Files that the child moves
// (fd 0 and 1 onto slots 1 and 2) are moved again from their original
// numbers on the second start that a changed directory takes.
func TestSpawnCKeptDirRechecked(t *testing.T) {
	requireSpawnC(t)
	if err := startDirCheck(); err != nil {
		t.Fatalf("startDirCheck: %v", err)
	}
	base := t.TempDir()
	dir := filepath.Join(base, "w")
	other := t.TempDir()
	o, err := os.Open(other)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	marker := filepath.Join(base, "ran")
	spawn := func() error {
		os.Remove(marker)
		runtime.LockOSThread()
		syscall.ForkLock.Lock()
		pid, pidfd, ok, err := spawnC("/bin/sh", []string{"sh", "-c", "touch " + marker}, nil, dir, []uintptr{2, 0, 1}, true)
		syscall.ForkLock.Unlock()
		runtime.UnlockOSThread()
		if !ok {
			t.Fatal("cmdspawn.c refused")
		}
		if err != nil {
			if _, serr := os.Stat(marker); serr == nil {
				t.Errorf("refused (%v), yet the command ran", err)
			}
			return err
		}
		unix.Close(pidfd)
		var ws unix.WaitStatus
		unix.Wait4(pid, &ws, 0, nil)
		if _, err := os.Stat(marker); err != nil {
			t.Errorf("the command did not run (%v)", err)
		}
		return nil
	}
	refused := func(step string, err, want error) {
		t.Helper()
		var de *dirError
		if !errors.As(err, &de) || !errors.Is(err, want) {
			t.Errorf("%s: %v, want a *dirError %v", step, err, want)
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ { // the second start is the kept directory's
		if err := spawn(); err != nil {
			t.Fatalf("start %d in %s: %v", i, dir, err)
		}
	}
	// A magic link to a directory the check never approved, in its place.
	if err := os.Rename(dir, dir+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/proc/self/fd/"+strconv.Itoa(int(o.Fd())), dir); err != nil {
		t.Fatal(err)
	}
	refused("magic link swapped in", spawn(), unix.ELOOP)
	// The approved directory back, kept again, then removed.
	os.Remove(dir)
	if err := os.Rename(dir+".old", dir); err != nil {
		t.Fatal(err)
	}
	if err := spawn(); err != nil {
		t.Fatalf("approved directory back: %v", err)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	refused("directory removed", spawn(), unix.ENOENT)
	// Another directory at the same path: a fresh check approves it.
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := spawn(); err != nil {
		t.Fatalf("new directory at the same path: %v", err)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Once more, the command's stdout being this process's fd 0 (a pipe
	// for the test), which the child moves out of the way first.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	saved, err := unix.Dup(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Dup2(int(w.Fd()), 0); err != nil {
		t.Fatal(err)
	}
	w.Close()
	null := devNull(t)
	runtime.LockOSThread()
	syscall.ForkLock.Lock()
	pid, pidfd, ok, err := spawnC("/bin/sh", []string{"sh", "-c", "echo moved"}, nil, dir, []uintptr{null, 0, null}, true)
	syscall.ForkLock.Unlock()
	runtime.UnlockOSThread()
	unix.Dup2(saved, 0)
	unix.Close(saved)
	if !ok || err != nil {
		t.Fatalf("new directory at the same path, kept one replaced: %v %v", ok, err)
	}
	unix.Close(pidfd)
	var ws unix.WaitStatus
	unix.Wait4(pid, &ws, 0, nil)
	out, _ := io.ReadAll(r)
	if string(out) != "moved\n" {
		t.Errorf("stdout of the second start: %q, want %q", out, "moved\n")
	}
}
