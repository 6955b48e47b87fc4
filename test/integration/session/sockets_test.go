package session

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

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
