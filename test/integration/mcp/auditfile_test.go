package mcpintegration

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Files nsbox mcp itself writes (issue 17, item 3): the audit file and the
// data directory, which a sandbox must not redirect, forge or read.

// TestAuditSymlinkRefused: a symlink at the audit path (a sandbox left it
// in the workspace, pointing at ~/.bashrc) is refused, and its target is
// untouched.
func TestAuditSymlinkRefused(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		h := newHome(t, u)
		h.writeFile(t, "bashrc", "# the user's rc\n")
		link := filepath.Join(h.ws, "audit.jsonl")
		if err := os.Symlink(filepath.Join(h.ws, "bashrc"), link); err != nil {
			t.Fatal(err)
		}
		u.chown(t, link)
		cmd := h.mcpCmd(t, "--audit", link)
		cmd.Stdin = strings.NewReader(rawInit + "\n")
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 125 || !strings.Contains(string(out), "not a regular file") {
			t.Fatalf("exit %v, output %q: want 125, not a regular file", err, out)
		}
		if b, _ := os.ReadFile(filepath.Join(h.ws, "bashrc")); string(b) != "# the user's rc\n" {
			t.Fatalf("the symlink's target changed: %q", b)
		}
	})
}

// TestAuditReadOnlyInside: an audit file in the workspace cannot be read,
// replaced or removed from inside, and what is appended to it there never
// reaches it (hidden: the path shows /dev/null, review 41); a --data-dir
// in the workspace reads as empty inside.
func TestAuditReadOnlyInside(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		h := newHome(t, u)
		audit := filepath.Join(h.ws, "audit.jsonl")
		h.writeFile(t, "data/secret", "host store\n")
		s := startServer(t, h, serverOpts{args: []string{"--audit", audit, "--data-dir", filepath.Join(h.ws, "data")}})
		s.call("run_command", map[string]any{"command": "true"}) // a line to read
		res := s.call("run_command", map[string]any{"command": `
			grep -q run_command audit.jsonl && echo READ_AUDIT
			echo '{"forged":true}' >> audit.jsonl
			ln -sf "$PWD/victim" audit.jsonl && echo LINKED
			mv audit.jsonl moved.jsonl && echo MOVED
			rm -f audit.jsonl && echo REMOVED
			cat data/secret && echo READ
			echo planted > data/planted && echo PLANTED
			true`})
		got := text(res)
		for _, bad := range []string{"READ_AUDIT", "LINKED", "MOVED", "REMOVED", "host store", "PLANTED"} {
			if strings.Contains(got, bad) {
				t.Errorf("inside: %s succeeded:\n%s", bad, got)
			}
		}
		s.stop(t)
		st, err := os.Lstat(audit)
		if err != nil || !st.Mode().IsRegular() {
			t.Fatalf("the audit file: %v %v", st, err)
		}
		b, _ := os.ReadFile(audit)
		if strings.Contains(string(b), `{"forged":true}`+"\n") || strings.HasPrefix(string(b), `{"forged"`) {
			t.Fatalf("a forged line reached the audit: %s", b)
		}
		if !strings.Contains(string(b), `"tool":"run_command"`) {
			t.Fatalf("the audit lacks the call: %s", b)
		}
		if _, err := os.Stat(filepath.Join(h.ws, "data", "planted")); err == nil {
			t.Fatal("a file was planted in the data directory")
		}
	})
}

// TestAuditBounded: a loop of refused hostCalls from inside (ones that all
// differ, then the same one again and again) leaves an audit under its cap: identical
// refusals are counted, and the file rotates at --audit-max.
func TestAuditBounded(t *testing.T) {
	python, err := lookSys("python3")
	if err != nil {
		t.Skip(err)
	}
	eachUser(t, func(t *testing.T, u user) {
		h := newHome(t, u)
		audit := filepath.Join(h.data, "audit.jsonl")
		const capBytes = 64 << 10
		s := startServer(t, h, serverOpts{args: []string{"--audit", audit, "--audit-max", "64K", "--timeout", "5m"}})
		script := `
import json, os, socket
shared = socket.socket(fileno=int(os.environ["NSBOX_HOSTCALL_FD"]))
sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
socket.send_fds(shared, [json.dumps({"type": "connect"}).encode()], [theirs.fileno()])
theirs.close()
refused = 0
for i in range(20000):
    method = "m%d" % i if i < 10000 else "x"
    sock.send(json.dumps({"type": "hostCall", "id": i + 1,
        "payload": {"api": "evil", "method": method, "args": {"pad": "A" * 512}}}).encode())
    reply = json.loads(sock.recv(65536))
    if reply.get("error") or not reply["payload"]["ok"]:
        refused += 1
print("refused", refused)
`
		res := s.call("run_command", map[string]any{"argv": []string{python, "-c", script}, "timeout": 300})
		if out := text(res); !strings.Contains(out, "refused 20000") {
			t.Fatalf("the loop: %s", out)
		}
		s.stop(t)
		repeated := 0
		for _, p := range []string{audit, audit + ".1"} {
			st, err := os.Stat(p)
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if st.Size() > capBytes {
				t.Fatalf("%s is %d bytes, over the %d cap", p, st.Size(), capBytes)
			}
			f, _ := os.Open(p)
			sc := bufio.NewScanner(f)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				var m map[string]any
				if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
					t.Fatalf("%s: line %q: %v", p, sc.Text(), err)
				}
				if m["kind"] == "repeated" {
					repeated += int(m["count"].(float64))
				}
			}
			f.Close()
		}
		if repeated < 9000 {
			t.Fatalf("%d of the 10000 identical refusals were counted", repeated)
		}
		t.Logf("20000 refused hostCalls: %d counted in 'repeated' lines, the rest rotated under 2 × 64 KiB", repeated)
	})
}
