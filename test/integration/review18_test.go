package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startAs starts nsbox with args as u in the background and returns a
// channel that gets its result when it ends (killed at the test's end).
func (u user) startAs(t *testing.T, o *runOpts, args ...string) <-chan result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cmd := exec.CommandContext(ctx, nsboxBin(t), args...)
	cmd.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + u.home(), "LANG=C.UTF-8"}, o.env...)
	cmd.Dir = o.dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	u.asUser(cmd)
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	ch := make(chan result, 1)
	go func() {
		err := cmd.Wait()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		ch <- result{stdout: stdout.String(), stderr: stderr.String(), code: code}
		cancel()
	}()
	t.Cleanup(func() { cancel() })
	return ch
}

// waitFile waits (at most a minute) for p to exist; false if it never did.
func waitFile(p string) bool {
	for i := 0; i < 600; i++ {
		if exists(p) {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// TestReview18DataDirMissingAtStartReadable
//
// Severity: MEDIUM.
//
// Attack: the built-in defaults hide $NSBOX_DATA (the memory and notepad
// stores) in every sandbox, but a hide only applies to a path that exists
// when the run starts. On a host where nsbox's data directory does not
// exist yet (the first runs of a user, or after the user removed it), a
// sandbox started then sees the data directory through the read-only host
// root once nsbox itself creates it (the run's own pending records are
// written right after the sandbox starts) and reads every store file a
// concurrent session creates there: here a second `nsbox run` (another
// agent) saves a memory through `nsbox call memory save`, and the first
// sandbox — which has no host API allowed at all — reads the secret
// straight out of memory.db (and the run's own placeholder and audit
// records in placeholders-pending/ and audit-pending/).
//
// Should: the stores are never readable as files inside a sandbox
// (docs/hostapi.md: "Sandboxes must not see DATA directly"): create the
// data directory (0700) before the policy is resolved so that the hide
// applies, or hide the nearest existing ancestor's entry for it.
func TestReview18DataDirMissingAtStartReadable(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		base := u.visibleDir(t)
		xdg := filepath.Join(base, "xdg")
		ws := filepath.Join(base, "ws")
		u.mkdirs(t, xdg, ws)
		env := []string{"XDG_DATA_HOME=" + xdg}
		data := filepath.Join(xdg, "nsbox")
		if exists(data) {
			t.Fatal("the data directory exists before the first run")
		}
		script := `touch ready; i=0; while [ ! -e saved ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
ls -la "$1" "$1"/* 2>&1
grep -c secret-7f3a-memory "$1/memory.db" 2>/dev/null && echo LEAKED-MEMORY
true`
		bg := u.startAs(t, &runOpts{dir: ws, env: env}, "run", "--", "/bin/sh", "-c", script, "sh", data)
		if !waitFile(filepath.Join(ws, "ready")) {
			r := <-bg
			t.Fatalf("the sandbox never started: %d %s %s", r.code, r.stdout, r.stderr)
		}
		// Another agent, in a sandbox of its own, saves a memory.
		r := u.run(t, &runOpts{env: env}, "run", "--host-api", "memory.save", "--",
			"/run/nsbox/bin/nsbox", "call", "memory", "save", `{"key":"token","text":"deploy token secret-7f3a-memory"}`)
		expectCode(t, r, 0)
		u.writeFile(t, filepath.Join(ws, "saved"), "", 0o644)
		r = <-bg
		expectCode(t, r, 0)
		if strings.Contains(r.stdout, "LEAKED-MEMORY") {
			t.Fatalf("a sandbox with no host API allowed read another session's memory straight from %s/memory.db (the data directory did not exist when it started, so it was not hidden):\n%s", data, r.stdout)
		}
	})
}

// TestReview18QuarantineWarningCarriesEscapes
//
// Severity: LOW.
//
// Attack: under `nsbox tools call` (and `nsbox mcp`, `nsbox script`) the
// command's own output reaches the user only as JSON, escaped, so a
// sandbox cannot drive the user's terminal through it. But the warnings
// nsbox itself prints on stderr after the run name paths the sandbox
// chose: a git repository made in a directory named "x ESC[2K CR ESC[8m"
// gives "nsbox: warning: the sandbox made a git repository at
// .../x\x1b[2K\r\x1b[8m: ..." with the raw escape sequences, which on a
// terminal erase that line and conceal the rest: the user never sees the
// warning that a repository was planted (or sees text the sandbox wrote in
// its place). The rename itself still happens.
//
// Should: paths from the sandbox are printed quoted or with control
// characters escaped (as `nsbox memory`/`notepad` do for stored text) in
// every warning, so that the warning always reads as nsbox wrote it.
func TestReview18QuarantineWarningCarriesEscapes(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		u.mkdirs(t, ws)
		cmd := `d=$(printf 'x\033[2K\r\033[8m'); mkdir -p "$d/.git" && echo x > "$d/.git/config" && echo ref > "$d/.git/HEAD"; printf '\033[31mok'`
		args, _ := json.Marshal(map[string]string{"command": cmd})
		r := u.run(t, &runOpts{dir: ws}, "tools", "call", "run_command", string(args), "--workspace", ws)
		expectCode(t, r, 0)
		if strings.Contains(r.stdout, "\x1b") {
			t.Fatalf("the command's output reached stdout unescaped: %q", r.stdout)
		}
		if !strings.Contains(r.stderr, "made a git repository") {
			t.Fatalf("no quarantine warning: %q", r.stderr)
		}
		if strings.ContainsAny(r.stderr, "\x1b\r") {
			t.Fatalf("nsbox's warning carries the sandbox's raw escape sequences to the user's terminal (they erase and conceal it):\n%q", r.stderr)
		}
	})
}

// TestReview18StatusFileHardLinkForgesExit
//
// Severity: MEDIUM.
//
// Attack: a --json-status FILE in the workspace is kept read-only inside
// the run (run.go: "the command must not append a forged "exited" line to
// what the caller will read"), by a read-only bind over that one name. An
// earlier sandbox of the same workspace creates the file before the
// caller's first --json-status run and gives its inode a second name
// (`: > status.jsonl; ln status.jsonl notes.txt`). nsbox then opens the
// planted file (O_APPEND, no check of its link count) and protects only
// the name status.jsonl: the command appends an "exited" line with
// exit_code 0 through notes.txt while it runs (it could as well truncate
// the file, erasing the "started" and violation lines). The caller reads
// a success before nsbox's own "exited" line with the real exit code 3.
//
// Should: nsbox refuses a status file with more than one link (or one it
// did not create), or writes the status through a file no name in a
// writable bind reaches; the command cannot write what the caller reads.
func TestReview18StatusFileHardLinkForgesExit(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		u.mkdirs(t, ws)
		status := filepath.Join(ws, "status.jsonl")
		// The earlier run plants the file and a second name for it.
		r := u.sh(t, &runOpts{dir: ws}, nil, `: > status.jsonl && ln status.jsonl notes.txt`)
		expectCode(t, r, 0)
		r = u.sh(t, &runOpts{dir: ws}, []string{"--json-status", status},
			`echo '{"event":"exited","exit_code":0,"reason":"exited","forged":true}' >> notes.txt; exit 3`)
		if r.code == 125 && strings.Contains(r.stderr, "json-status") {
			return // refused the planted file: fixed
		}
		expectCode(t, r, 3)
		b, err := os.ReadFile(status)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), `"forged":true`) {
			t.Fatalf("the command wrote a forged exit line into the --json-status file through a hard link of it:\n%s", b)
		}
	})
}

// TestReview18AuditFileHardLinkErased
//
// Severity: MEDIUM.
//
// Attack: `nsbox mcp --audit FILE` keeps FILE (and FILE.1) read-only
// inside when it lies in the workspace, by a read-only bind over those
// names, and refuses a symlink or FIFO there; it does not look at the
// link count. An earlier sandbox of the same workspace plants the file
// and a second name for its inode (`: > audit.log; ln audit.log
// notes.txt`). In the server's session the agent's command then truncates
// the audit log through notes.txt — every line of the calls before it is
// gone — and appends a forged line of its choosing.
//
// Should: the audit log is out of the sandbox's reach whatever names an
// earlier sandbox gave its inode: refuse an audit file with more than one
// link (as a symlink is refused), or keep it where no writable bind
// reaches it.
func TestReview18AuditFileHardLinkErased(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := filepath.Join(u.visibleDir(t), "proj")
		u.mkdirs(t, ws)
		audit := filepath.Join(ws, "audit.log")
		r := u.sh(t, &runOpts{dir: ws}, nil, `: > audit.log && ln audit.log notes.txt`)
		expectCode(t, r, 0)
		// Fixed: the server refuses the file, before any call.
		if r := u.run(t, &runOpts{dir: ws}, "mcp", "--workspace", ws, "--audit", audit); r.code != 0 {
			if !strings.Contains(r.stderr, "hard links") {
				t.Fatalf("nsbox mcp ended %d without naming the hard links: %s", r.code, r.stderr)
			}
			return
		}
		m := startMCP(t, u, ws, "--workspace", ws, "--audit", audit)
		text, _ := m.call("run_command", map[string]any{"command": `echo first-call-5d1e`})
		if !strings.Contains(text, "first-call-5d1e") {
			t.Fatalf("first call: %s; stderr %s", text, m.stderr.String())
		}
		m.call("run_command", map[string]any{"command": `: > notes.txt; echo '{"kind":"forged-9b2c"}' >> notes.txt; true`})
		m.call("list_directory", map[string]any{"path": "."})
		b, err := os.ReadFile(audit)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "first-call-5d1e") || strings.Contains(string(b), "forged-9b2c") {
			t.Fatalf("the sandbox erased or forged the audit log through a hard link of it:\n%s", b)
		}
	})
}
