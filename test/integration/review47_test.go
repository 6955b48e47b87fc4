package integration

// Review 47: the fixes of review 46 (edit_file's bounded work, nsbox
// script's output cut), the sessions' directory hidden in every sandbox
// (review 45), and the store checker's meta choice.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestReview47EditFileDiffSearchMemory
//
// Finding (LOW): review 46 made edit_file's diff form keep the file as
// line offsets ("4 bytes a line") so that a one-line edit of a 16 MiB file
// of empty lines no longer takes 2 GB in the worker, outside the
// sandbox's memory limit. That holds only for a hunk at its right line. A
// hunk at a wrong line goes through findHunk's hashed search, which keeps
// a hash of every line (8 bytes a line, 128 MiB) and a slice of every
// candidate window, grown by append (8 bytes each, up to one per line, a
// new one for each hunk searched), and sorts it. A diff of 16 hunks that
// each remove one empty line, with a header that says line 1 (which is
// "x"), makes 16 searches of 16M candidates each: the call takes about
// 1.2 GB of the host's memory (Go heap of 1.25 GB measured in a unit
// run), as much as the 2 GB finding it fixed, and an MCP client's
// concurrent calls (56 at once by default) add up. Only the nearest
// matching window is ever used: it can be kept as the scan goes, without
// the candidates slice.
//
// Measured: 1.1-1.3 GiB (maximum RSS), against 121 MiB for the same
// file with its hunk at the right line.
//
// Attack: a file "x\n" + 16M-2 "\n", and edit_file {"diff": ("@@ -1,1
// +1,0 @@\n-\n") * 16}.
func TestReview47EditFileDiffSearchMemory(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		u.writeFile(t, filepath.Join(ws, "nl"), "x\n"+strings.Repeat("\n", 16<<20-1024), 0o644)
		args := jsonArgs(t, map[string]any{"path": "nl", "diff": strings.Repeat("@@ -1,1 +1,0 @@\n-\n", 16)})
		r, maxrss := u.runRusage(t, ws, "tools", "call", "edit_file", args, "--workspace", ws)
		tr := toolResultOf(t, r)
		t.Logf("maximum RSS of nsbox and its worker: %d MiB (success %v %s)", maxrss>>10, tr.Success, clip46(tr.err(), 200))
		// KiB: 768 MiB. Measured 1.1-1.3 GiB; the same file with the hunk
		// at its right line takes 121 MiB (TestReview46EditFileDiffMemory),
		// and a search that keeps only the nearest match (file, offsets,
		// line hashes and result live: about 230 MiB) stays well below.
		if maxrss > 768<<10 {
			t.Fatalf("a 16-hunk diff edit of a 16 MiB file took %d MiB of memory outside the sandbox's limit", maxrss>>10)
		}
	})
}

// TestReview47SessionsDirOfAnotherEnvironment
//
// Finding (MEDIUM, the review 45 fix bypassed): the sessions' directory
// a sandbox hides ($NSBOX_SESSIONS, hostForCLI) is the one of the nsbox
// that starts the sandbox, computed from its own environment:
// $XDG_RUNTIME_DIR/nsbox-sessions when XDG_RUNTIME_DIR is set, else
// /tmp/nsbox-sessions-UID. The user's sessions live in whichever of the
// two the nsbox that started them saw. A session started without
// XDG_RUNTIME_DIR (by an MCP client or an agent that spawns nsbox with a
// minimal environment, cron, `env -i`, a systemd service, ssh without
// pam_systemd) has its socket in /tmp/nsbox-sessions-UID; a later
// `nsbox run --rw /tmp` from the user's shell, where XDG_RUNTIME_DIR is
// set, hides only $XDG_RUNTIME_DIR/nsbox-sessions, and the session's
// socket is there under the sandbox's writable /tmp: the review 45 attack
// (a client of the sandbox's own, whose connect the unix gate makes as
// the supervisor, so the daemon's peer check passes root-less) drives the
// session again. Fix: hide and protect both places (the XDG one, when
// XDG_RUNTIME_DIR is usable, and the /tmp fallback), whatever this
// nsbox's environment.
//
// Attack: (no XDG_RUNTIME_DIR) nsbox tools call --session s ...; then
// XDG_RUNTIME_DIR=/run/user/UID nsbox run --profile strict --rw /tmp --
// perl <raw client> /tmp/nsbox-sessions-UID/s.sock '{"op":"call",...}'.
func TestReview47SessionsDirOfAnotherEnvironment(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		u.mkdirs(t, ws)
		name := fmt.Sprintf("rv47-env-%d-%d", os.Getpid(), u.uid)
		t.Cleanup(func() { u.run(t, nil, "session", "stop", name) })
		// The session: started without XDG_RUNTIME_DIR.
		tr, _ := u.callTool(t, ws, "run_command", `{"command":"echo up"}`, "--session", name)
		if !tr.Success {
			t.Fatalf("session start: %s", tr.err())
		}
		sock := filepath.Join(os.TempDir(), "nsbox-sessions-"+strconv.Itoa(u.uid), name+".sock")
		if _, err := os.Stat(sock); err != nil {
			t.Fatalf("the session's socket is not at %s: %v", sock, err)
		}
		// The sandbox: started by an nsbox whose XDG_RUNTIME_DIR is set
		// (a directory of the user's, mode 0700, as pam_systemd makes).
		xdg := u.tempDir(t)
		pwned := filepath.Join(ws, "pwned")
		req := jsonArgs(t, map[string]any{"op": "call", "tool": "run_command",
			"args": map[string]any{"command": "echo from-another-sandbox > " + pwned}})
		script := "perl -e '" + sessionRawClient + "' " + sock + " '" + req + "'; echo client-exit=$?"
		r := u.sh(t, &runOpts{env: []string{"XDG_RUNTIME_DIR=" + xdg}}, []string{"--profile", "strict", "--rw", "/tmp"}, script)
		t.Logf("run: code %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		if _, err := os.Stat(pwned); err == nil {
			t.Errorf("a sandbox (--profile strict --rw /tmp, XDG_RUNTIME_DIR set) drove the user's session %s, started without XDG_RUNTIME_DIR, through %s, and wrote %s", name, sock, pwned)
		}
		if strings.Contains(r.stdout, `"result"`) {
			t.Errorf("the session answered a call made from inside another sandbox: %s", r.stdout)
		}
	})
}
