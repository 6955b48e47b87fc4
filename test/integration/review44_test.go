package integration

// Review 44: long-lived sessions driven from the shell (nsbox session,
// nsbox tools call --session, pkg/sessiond, cmd/nsbox/session.go).

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FINDING 1 (MEDIUM, root-less). The session daemon answers every peer
// whose SO_PEERCRED uid is its own (sessiond.Listener.Accept), and the
// 0700 runtime directory is the only other boundary. A root-less
// sandbox's commands run as the caller's own host uid (single-id map, and
// the caller's own id in a full range), so for the daemon a sandboxed
// process is the user. A sandbox that can see the runtime directory as a
// writable place reaches the socket: `nsbox run --rw /tmp` (the runtime
// directory is /tmp/nsbox-sessions-UID without XDG_RUNTIME_DIR), the
// unix-socket gate lets connects in writable places through, and the
// nsbox binary visible inside is a ready client. Attack: a run confined
// to --profile strict --rw /tmp drives the user's session of another
// project: it writes into that session's workspace (which the run cannot
// write), starts processes there that outlive the run and its --timeout
// (until the session ends), reads that workspace's files, lists and
// stops the user's sessions, and, with the directory writable, can put a
// socket of its own in place of a session's (the client checks nothing
// of the daemon) to read the next calls' arguments and forge their
// results. The identity holder was found open the same way (review,
// TestIdentityHolderSpoofedBySandboxIsRefused) and now checks the
// namespace; the session daemon and its clients do not. As root the
// sandbox's ids own nothing, so only the root-less leg fails.
//
// Reproduce (root-less): nsbox session start s --workspace ~/proj; then
// nsbox run --profile strict --rw /tmp -- nsbox tools call --session s \
// run_command '{"command":"touch pwned"}'  -> ~/proj/pwned exists.
func TestReview44SandboxDrivesAnotherSession(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		u.mkdirs(t, ws)
		name := fmt.Sprintf("rv44-drive-%d-%d", os.Getpid(), u.uid)
		t.Cleanup(func() { u.run(t, nil, "session", "stop", name) })
		// Started by the first call, owned by this test process.
		tr, _ := u.callTool(t, ws, "run_command", `{"command":"echo up"}`, "--session", name)
		if !tr.Success {
			t.Fatalf("session start: %s", tr.err())
		}
		pwned := filepath.Join(ws, "pwned")
		inner := jsonArgs(t, map[string]any{"command": "echo from-another-sandbox > " + pwned})
		script := nsboxBin(t) + " tools call --session " + name + " run_command '" + inner + "'; echo inner-exit=$?"
		r := u.sh(t, nil, []string{"--profile", "strict", "--rw", "/tmp"}, script)
		if _, err := os.Stat(pwned); err == nil {
			t.Errorf("a sandbox (--profile strict --rw /tmp) drove the user's session %s and wrote %s in its workspace, which the sandbox cannot write itself\nrun stdout: %s\nrun stderr: %s", name, pwned, r.stdout, r.stderr)
		}
		if strings.Contains(r.stdout, "from-another-sandbox") || strings.Contains(r.stdout, `"success": true`) {
			t.Errorf("the session answered a call made from inside another sandbox: %s", r.stdout)
		}
	})
}

// FINDING 2 (MEDIUM). A session runs the end-of-run audit (git
// repositories and agent files the sandbox made in the workspace) when it
// ends, in the daemon, whose stdout and stderr are its log file; the
// daemon then removes that log (sessiond.Dir.Remove in stopThen). So
// everything the audit says is lost: `nsbox session stop` prints nothing
// and exits 0 even when the audit could not search the whole workspace,
// where `nsbox run` fails closed (exit 125, the directory named) and
// `nsbox tools call` prints the error; and the warnings naming what was
// renamed to *.nsbox-quarantine are never shown either (ended by idle
// timeout or owner, the same). Attack: a command in the session plants
// deep/d/…(70 levels)/.vscode/tasks.json (past the audit's 64 levels),
// which stays in place, unreported, for the user's editor to run; the
// user who stops the session is told all is well.
//
// Reproduce: nsbox tools call --session s run_command '{"command":"p=deep;
// for i in $(seq 70); do p=$p/d; done; mkdir -p $p/.vscode && echo {} >
// $p/.vscode/tasks.json"}'; nsbox session stop s; echo $?  -> 0, silent
// (nsbox run of the same script: exit 125, "the git audit could not
// search the whole workspace").
func TestReview44SessionStopSwallowsAudit(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		u.mkdirs(t, ws)
		name := fmt.Sprintf("rv44-audit-%d-%d", os.Getpid(), u.uid)
		t.Cleanup(func() { u.run(t, nil, "session", "stop", name) })
		tr, _ := u.callTool(t, ws, "run_command", jsonArgs(t, map[string]any{
			"command": `mkdir -p pkgs/x/.vscode && echo '{}' > pkgs/x/.vscode/tasks.json && ` +
				`p=deep; for i in $(seq 70); do p=$p/d; done; mkdir -p $p/.vscode && echo '{}' > $p/.vscode/tasks.json && echo planted`,
		}), "--session", name)
		if out := outputOf[processOut](t, tr).Stdout; !strings.Contains(out, "planted") {
			t.Fatalf("the session could not plant: %q %s", out, tr.err())
		}
		r := u.run(t, nil, "session", "stop", name)
		if !strings.Contains(r.stderr, "could not search the whole workspace") || r.code == 0 {
			t.Errorf("the audit at the session's end could not search the whole workspace (a .vscode 70 levels deep is left in place), yet nsbox session stop exited %d and said %q; nsbox run fails closed (125) and names it", r.code, r.stderr)
		}
		if _, err := os.Stat(filepath.Join(ws, "pkgs", "x", ".vscode.nsbox-quarantine")); err != nil {
			t.Fatalf("the audit did not quarantine pkgs/x/.vscode: %v", err)
		}
		if !strings.Contains(r.stderr, ".nsbox-quarantine") {
			t.Errorf("the audit renamed pkgs/x/.vscode to .vscode.nsbox-quarantine at the session's end, but nsbox session stop said nothing of it (stderr %q): the warning went to the daemon's log, which the daemon then removed", r.stderr)
		}
	})
}
