package integration

import (
	"runtime"
	"strings"
	"testing"
)

// TestReview68SessionKeyringNotInherited
//
// Finding (LOW; needs a seccomp profile that allows keyctl): keyrings
// belong to no namespace, and the sandbox inherited its caller's session
// keyring: with --seccomp unconfined a command found (and could read) a
// key of the caller's login session, and in `nsbox mcp --isolation
// per-call` one call's key reached the next call. The worker now joins a
// new anonymous session keyring before any command runs.
func TestReview68SessionKeyringNotInherited(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the probe calls keyctl(2) and add_key(2) by their x86-64 numbers")
	}
	reviewRequirePython(t)
	// The session keyring (-3), the user keyring (-4; review 70: reached
	// under landlock, which has no user namespace of its own) and the
	// persistent one (KEYCTL_GET_PERSISTENT, 22).
	const probe = `import ctypes
l = ctypes.CDLL(None, use_errno=True)
found = l.syscall(250, 10, -3, b"user", b"nsbox-review68", 0) > 0
found = found or l.syscall(250, 10, -4, b"user", b"nsbox-review68-u", 0) > 0
p = l.syscall(250, 22, -1, 0)
found = found or (p > 0 and l.syscall(250, 10, p, b"user", b"nsbox-review68-p", 0) > 0)
print("FOUND_CALLER_KEY" if found else "NOT_FOUND")
`
	eachBackend(t, func(t *testing.T, backend string, u user) {
		ws := u.tempDir(t)
		// The caller: a session keyring of its own with a key in it
		// (a login session's, as PAM's pam_keyinit makes), then
		// nsbox in its place.
		wrapper := `import ctypes, os, sys
l = ctypes.CDLL(None, use_errno=True)
if l.syscall(250, 1, b"nsbox-review68-session") < 0 or l.syscall(248, b"user", b"nsbox-review68", b"secret", 6, -3) < 0:
    print("NO_CALLER_KEY", ctypes.get_errno()); sys.exit(0)
l.syscall(248, b"user", b"nsbox-review68-u", b"secret", 6, -4)
p = l.syscall(250, 22, -1, 0)
if p > 0:
    l.syscall(248, b"user", b"nsbox-review68-p", b"secret", 6, p)
os.execv(sys.argv[1], sys.argv[1:])
`
		r := u.runAs(t, &runOpts{dir: ws}, reviewPython, "-c", wrapper, nsboxBin(t), "run", "--backend", backend, "--workspace", ws, "--seccomp", "unconfined", "--", reviewPython, "-c", probe)
		t.Logf("code %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		if strings.Contains(r.stdout, "NO_CALLER_KEY") {
			t.Skipf("the caller cannot make a session keyring here: %s", r.stdout)
		}
		if !strings.Contains(r.stdout, "NOT_FOUND") && !strings.Contains(r.stdout, "FOUND_CALLER_KEY") {
			t.Fatalf("the probe did not run (exit %d)", r.code)
		}
		if strings.Contains(r.stdout, "FOUND_CALLER_KEY") {
			t.Errorf("a command found a key of its caller's session keyring")
		}
	})
}
