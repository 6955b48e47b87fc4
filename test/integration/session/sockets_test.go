package session

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// The unix socket gate through the Go API: a refused connect is a
// *sandbox.ViolationError from Exec when the command failed of it, and is
// heard as it happens through WithViolations; Unrestricted turns the gate
// off (the control that shows the refusal is the gate's).
func TestUnixSocketViolation(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	eachUser(t, func(t *testing.T) {
		dir, err := os.MkdirTemp("/var/tmp", "nsbox-it-sock-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		os.Chmod(dir, 0o755)
		p := filepath.Join(dir, "host.sock")
		l, err := net.Listen("unix", p)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		os.Chmod(p, 0o777)
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		var mu sync.Mutex
		var heard []*sandbox.ViolationError
		s := start(t, sandbox.Policy{}, sandbox.WithViolations(func(v *sandbox.ViolationError) {
			mu.Lock()
			heard = append(heard, v)
			mu.Unlock()
		}))
		connect := sandbox.Command{Argv: []string{"python3", "-c", "import socket,sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])", p}}
		res, err := s.Exec(context.Background(), connect)
		var v *sandbox.ViolationError
		if !errors.As(err, &v) || !errors.Is(err, sandbox.ErrSandboxViolation) || v.Operation != "unix connect" || v.Path != p || res.Reason != sandbox.ReasonViolation {
			t.Fatalf("err %v (%T), reason %q, exit %d, stderr %s", err, err, res.Reason, res.ExitCode, res.Stderr)
		}
		mu.Lock()
		if len(heard) != 1 || heard[0].Path != p {
			t.Errorf("WithViolations heard %v", heard)
		}
		mu.Unlock()
		// A command that recovers from the refusal keeps its clean exit.
		res, err = s.Exec(context.Background(), sandbox.Command{Argv: []string{"/bin/sh", "-c", "python3 -c 'import socket,sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])' " + p + " 2>/dev/null; exit 0"}})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("a recovered command: err %v exit %d", err, res.ExitCode)
		}
		// The control: without the gate the same connect succeeds.
		open := start(t, sandbox.Policy{UnixSockets: sandbox.UnixSocketPolicy{Unrestricted: true}})
		if res, err := open.Exec(context.Background(), connect); err != nil || res.ExitCode != 0 {
			t.Fatalf("unrestricted: err %v exit %d stderr %s", err, res.ExitCode, res.Stderr)
		}
	})
}

// TestUnixSocketGateLeaksNothing: sessions that used the gate (refused and
// allowed connects, a send with SCM_RIGHTS) leave no fd and no goroutine
// of theirs in the embedding program.
func TestUnixSocketGateLeaksNothing(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	eachUser(t, func(t *testing.T) {
		script := `
import os, socket
srv = socket.socket(socket.AF_UNIX); srv.bind("/tmp/s"); srv.listen()
c = socket.socket(socket.AF_UNIX); c.connect("/tmp/s")
a, b = socket.socketpair()
a.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, bytes(memoryview(__import__("array").array("i", [0]))))])
try:
    socket.socket(socket.AF_UNIX).connect("/etc/hostname")
except OSError:
    pass
`
		run := func() {
			s, err := sandbox.Start(context.Background(), sandbox.Policy{})
			if err != nil {
				t.Fatal(err)
			}
			if res, err := s.Exec(context.Background(), sandbox.Command{Argv: []string{"python3", "-c", script}}); err != nil || res.ExitCode != 0 {
				t.Fatalf("err %v exit %d stderr %s", err, res.ExitCode, res.Stderr)
			}
			s.Close()
		}
		run() // first use: lazily started runtime parts are not leaks
		fds, gs := countFDs(t), runtime.NumGoroutine()
		for i := 0; i < 5; i++ {
			run()
		}
		// Goroutines that end with a session may still be returning.
		for i := 0; i < 100 && runtime.NumGoroutine() > gs; i++ {
			time.Sleep(10 * time.Millisecond)
		}
		if n := countFDs(t); n > fds {
			t.Errorf("fds: %d before, %d after five sessions", fds, n)
		}
		if n := runtime.NumGoroutine(); n > gs {
			t.Errorf("goroutines: %d before, %d after five sessions", gs, n)
		}
	})
}

func countFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
