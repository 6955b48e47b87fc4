package session

import (
	"context"
	"strings"
	"testing"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// TestExecWorkingDirectory: a command runs in Command.Dir when that resolves
// inside the sandbox without a magic link. A magic link (a /proc/PID/cwd,
// root or fd path can name a directory outside the sandbox's root:
// CVE-2024-21626 class), a missing directory and a relative path are refused
// with the directory named, and nothing runs. The worker checks the
// directory while the command's child gets ready (cmdspawn.c, dircheck.c);
// with limits the start goes through the limit shim, checked the same way.
func TestExecWorkingDirectory(t *testing.T) {
	eachUser(t, func(t *testing.T) {
		for _, p := range []sandbox.Policy{{}, {Limits: sandbox.Limits{Pids: 64}}} {
			s := start(t, p)
			ctx := context.Background()
			res, err := s.Exec(ctx, sandbox.Command{Argv: []string{"/bin/pwd"}, Dir: "/tmp"})
			if err != nil || string(res.Stdout) != "/tmp\n" {
				t.Fatalf("pwd in /tmp: %v, %q %q", err, res.Stdout, res.Stderr)
			}
			for _, c := range []struct{ dir, want string }{
				{"/proc/self/cwd", "too many levels of symbolic links"},
				{"/proc/1/root", "too many levels of symbolic links"},
				{"/nsbox-it-no-such-dir", "no such file or directory"},
				{"/etc/hostname", "not a directory"},
				{"tmp", "not an absolute path"},
			} {
				res, err := s.Exec(ctx, sandbox.Command{Argv: []string{"/bin/sh", "-c", "echo ran"}, Dir: c.dir})
				if err == nil || !strings.Contains(err.Error(), "working directory "+c.dir+": "+c.want) {
					t.Errorf("limits %v, dir %s: %v, want %q", p.Limits, c.dir, err, c.want)
				}
				if strings.Contains(string(res.Stdout), "ran") {
					t.Errorf("limits %v, dir %s: the command ran", p.Limits, c.dir)
				}
			}
		}
	})
}
