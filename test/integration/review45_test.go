package integration

// Review 45: the session peer checks of review 44 (pkg/sessiond checkPeer,
// dialChecked), the end-of-session report, the ethtool emulation and the
// store checker's meta choice.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// sessionRawClient is a session client that checks nothing of the daemon
// (perl, core modules only): what a sandboxed program would use instead of
// the nsbox binary, whose own dialChecked refuses a daemon it cannot see
// from inside the sandbox's PID namespace.
const sessionRawClient = `use IO::Socket::UNIX; ` +
	`my $s = IO::Socket::UNIX->new(Type => SOCK_STREAM(), Peer => $ARGV[0]) or die "connect: $!\n"; ` +
	`print $s $ARGV[1], "\n"; my $l = <$s>; print "reply: ", (defined $l ? $l : "EOF\n");`

// FINDING 1 (MEDIUM, root-less): the review 44 fix is bypassed by the
// unix-socket gate itself. checkPeer trusts SO_PEERCRED / SO_PEERPIDFD of
// the connecting socket, which the kernel takes from the task that called
// connect(2). A sandbox's connect to a path socket in one of its writable
// places is not made by the sandbox: the seccomp notification gate
// (pkg/notify, "the supervisor never answers with CONTINUE") takes the
// socket with pidfd_getfd and calls connect itself. The peer the daemon
// sees is therefore the root-less supervisor, which runs as the user in
// the host's user namespace: uid and namespace both match, the call is
// served. The review 44 test passes only because the client used there is
// the nsbox binary, whose own dialChecked refuses the daemon it cannot see
// from inside the sandbox's PID namespace; any other client (perl, python,
// a static binary written into the workspace) drives the session exactly
// as before the fix.
//
// Attack: nsbox run --profile strict --rw /tmp -- perl -MIO::Socket::UNIX
// ... connects /tmp/nsbox-sessions-UID/NAME.sock and sends
// {"op":"call","tool":"run_command","args":{"command":"touch pwned"}}:
// the command runs in the other session's workspace, past this run's
// policy and timeout.
//
// Reproduce (root-less): nsbox session start s --workspace ~/proj; then
// nsbox run --profile strict --rw /tmp -- perl -e '<sessionRawClient>' \
// /tmp/nsbox-sessions-$(id -u)/s.sock '{"op":"call",...}' -> ~/proj/pwned.
func TestReview45SessionPeerIsTheGatesSupervisor(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		u.mkdirs(t, ws)
		name := fmt.Sprintf("rv45-peer-%d-%d", os.Getpid(), u.uid)
		t.Cleanup(func() { u.run(t, nil, "session", "stop", name) })
		tr, _ := u.callTool(t, ws, "run_command", `{"command":"echo up"}`, "--session", name)
		if !tr.Success {
			t.Fatalf("session start: %s", tr.err())
		}
		pwned := filepath.Join(ws, "pwned")
		req := jsonArgs(t, map[string]any{"op": "call", "tool": "run_command",
			"args": map[string]any{"command": "echo from-another-sandbox > " + pwned}})
		sock := filepath.Join("/tmp", "nsbox-sessions-"+strconv.Itoa(u.uid), name+".sock")
		if _, err := os.Stat(sock); err != nil {
			t.Skipf("the session's socket is not at %s here (XDG_RUNTIME_DIR set?): %v", sock, err)
		}
		script := "perl -e '" + sessionRawClient + "' " + sock + " '" + req + "'; echo client-exit=$?"
		r := u.sh(t, nil, []string{"--profile", "strict", "--rw", "/tmp"}, script)
		if _, err := os.Stat(pwned); err == nil {
			t.Errorf("a sandbox (--profile strict --rw /tmp) drove the user's session %s with a client of its own and wrote %s: the daemon's peer check saw the supervisor that made the connect for the sandbox\nrun stdout: %s\nrun stderr: %s", name, pwned, r.stdout, r.stderr)
		}
		if strings.Contains(r.stdout, `"result"`) {
			t.Errorf("the session answered a call made from inside another sandbox: %s", r.stdout)
		}
		t.Logf("run: code %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	})
}
