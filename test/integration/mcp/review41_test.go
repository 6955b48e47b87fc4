package mcpintegration

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Review 41: nsbox mcp --http as the network-facing server of
// contrib/kubernetes.

// review41Dir is a fresh directory owned by u outside /tmp (private inside
// a sandbox, so a file there is out of a command's sight anyway), removed
// after the test.
func review41Dir(t *testing.T, u user) string {
	t.Helper()
	base, err := os.MkdirTemp("/var/tmp", "nsbox-rv41-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	u.chown(t, dir)
	return dir
}

// review41Write writes a file (mode) owned by u, its parents too.
func review41Write(t *testing.T, u user, root, rel, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	for d := p; d != root; d = filepath.Dir(d) {
		u.chown(t, d)
	}
	return p
}

// review41Symlink makes link → target, owned by u.
func review41Symlink(t *testing.T, u user, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	u.chown(t, link)
}

// review41Call runs command with run_command in cs and returns its output.
func review41Call(t *testing.T, cs *mcp.ClientSession, command string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_command", Arguments: map[string]any{"command": command}})
	if err != nil {
		t.Fatal(err)
	}
	return text(res)
}

// TestReview41HTTPRotatedSecretTokenReadableInside
//
// Finding (MEDIUM): --token-file hides only the file's real path as it was
// when the server started (readTokenFile: /proc/self/fd), not the path the
// operator named nor its directory. contrib/kubernetes mounts the token
// from a Secret volume, which the kubelet writes as an atomic-writer tree:
// token → ..data/token, ..data → ..2024_xx_yy (a timestamped directory).
// Rotating the Secret (`kubectl create secret ... | kubectl apply`, the
// answer to a leaked token) makes the kubelet write a new timestamped
// directory, swap ..data to it and delete the old one. From then on the
// hide entry names a path that no longer exists, and --token-file's path
// (/var/run/secrets/nsbox/token) reads the NEW token in every sandbox the
// server runs: in a session started before the rotation (the hide is a
// mount over the old inode only) and in every session started after it.
// The directory is not hidden by default (only the data directory and the
// credentials the profile names are).
//
// Attack: the operator rotates the token because it leaked; a prompt
// injection in any live or new session runs `cat
// /var/run/secrets/nsbox/token` and prints it into the conversation (or
// sends it out with a network). Whoever reads it holds the credential every
// replica accepts once it restarts (the running server still accepts only
// the old one: it reads the file once). The rotation that was to revoke
// the token hands its successor to the sandboxes.
//
// The test reproduces the kubelet's layout and swap in a directory outside
// /tmp, starts nsbox mcp --http --token-file DIR/token, rotates, and reads
// DIR/token with run_command in a session started before the rotation and
// in one started after it. Fixed when neither reads the new token (e.g. the
// token's directory, or every path on the way to the file, is hidden, or the
// server follows the file and hides what it points to for new sessions and
// refuses to keep serving sessions that could see it).
//
// As root the run passes by accident: a sandbox of root's cannot read
// root's 0400 files (its user is not the host's root). The Deployment runs
// nsbox as uid 65532: the rootless run is the one that matters, and fails.
func TestReview41HTTPRotatedSecretTokenReadableInside(t *testing.T) {
	// The kubelet's atomic writer: token → ..data/token, ..data → ..TS.
	checkSecretRotation(t, "token", "rv41-old-token-0123456789abcdef", "rv41-NEW-token-after-rotation-fedcba9876543210")
}

// checkSecretRotation lays out a Secret volume as the kubelet's atomic
// writer does, with the key projected to item (its first element links to
// ..data/ITEM-TOP, ..data links to the timestamped directory), serves
// nsbox mcp --http with --token-file VOL/item, rotates the Secret as the
// kubelet does (a new timestamped directory, ..data swapped by rename, the
// old one removed), and fails when a session started before or after the
// rotation reads the new token at VOL/item.
func checkSecretRotation(t *testing.T, item, oldToken, newToken string) {
	const oldTS, newTS = "..2024_01_01_00_00_00.000000001", "..2024_02_02_00_00_00.000000002"
	top := strings.SplitN(item, "/", 2)[0]
	eachUser(t, func(t *testing.T, u user) {
		h := newHome(t, u)
		sec := review41Dir(t, u)
		review41Write(t, u, sec, oldTS+"/"+item, oldToken, 0o400)
		review41Symlink(t, u, oldTS, filepath.Join(sec, "..data"))
		review41Symlink(t, u, "..data/"+top, filepath.Join(sec, top))
		tokenPath := filepath.Join(sec, item)

		s := startHTTPServer(t, h, "--token-file", tokenPath, "--idle-timeout", "1h")
		before, err := connectHTTP(t, s.url, oldToken)
		if err != nil {
			t.Fatalf("with the token: %v", err)
		}
		defer before.Close()
		if out := review41Call(t, before, "cat "+tokenPath+" 2>&1; echo END"); strings.Contains(out, oldToken) {
			t.Fatalf("control: the token at start is readable inside (TestReviewHostHTTPTokenFileReadableInside):\n%s", out)
		}

		review41Write(t, u, sec, newTS+"/"+item, newToken, 0o400)
		review41Symlink(t, u, newTS, filepath.Join(sec, "..data_tmp"))
		if err := os.Rename(filepath.Join(sec, "..data_tmp"), filepath.Join(sec, "..data")); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(filepath.Join(sec, oldTS)); err != nil {
			t.Fatal(err)
		}

		if out := review41Call(t, before, "cat "+tokenPath+" 2>&1; echo END"); strings.Contains(out, newToken) {
			t.Errorf("a session started before the Secret's rotation reads the new bearer token at %s:\n%s", tokenPath, out)
		}
		// The running server still accepts the old token (it read the file
		// once): a new session is made with it.
		after, err := connectHTTP(t, s.url, oldToken)
		if err != nil {
			t.Fatalf("a new session after the rotation: %v", err)
		}
		defer after.Close()
		if out := review41Call(t, after, "cat "+tokenPath+" 2>&1; echo END"); strings.Contains(out, newToken) {
			t.Errorf("a session started after the Secret's rotation reads the new bearer token at %s:\n%s", tokenPath, out)
		}
	})
}

// TestReview41HTTPManifestPlaceholderTokenServed
//
// Finding (MEDIUM): contrib/kubernetes/secret.yaml ships the Secret with
// stringData.token "REPLACE-WITH-A-LONG-RANDOM-TOKEN", and the README's
// quick start is `kubectl apply -f secret.yaml -f service.yaml -f
// deployment.yaml`. nsbox accepts that value as a bearer token (32
// characters, one word: readTokenFile's only checks are length >= 16 and no
// white space), so a Deployment applied as shown serves, behind a ClusterIP
// Service every pod of the cluster reaches, with a token printed in a public
// repository: a default credential.
//
// Attack: any pod in the cluster (or anything that reaches the Service)
// sends Authorization: Bearer REPLACE-WITH-A-LONG-RANDOM-TOKEN, opens an
// MCP session and runs commands in a sandbox with the pod's workspace and
// network policy.
//
// The test writes the manifest's token value to a 0600 file and starts
// nsbox mcp --http --token-file on it. Fixed when nsbox refuses to start
// with it (or refuses clients that send it), or when the manifest no longer
// carries a value nsbox would accept.
func TestReview41HTTPManifestPlaceholderTokenServed(t *testing.T) {
	manifest, err := os.ReadFile("../../../contrib/kubernetes/secret.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s+token:\s*"?([^"\s#]+)`).FindSubmatch(manifest)
	if m == nil || len(m[1]) < 16 {
		return // no value nsbox would take: nothing is served with it
	}
	placeholder := string(m[1])
	eachUser(t, func(t *testing.T, u user) {
		h := newHome(t, u)
		tf := filepath.Join(h.cfg, "token")
		if err := os.WriteFile(tf, []byte(placeholder+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		u.chown(t, tf)
		cmd := h.mcpCmd(t, "--http", "127.0.0.1:0", "--token-file", tf)
		pr, pw := io.Pipe()
		cmd.Stderr = pw
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait(); pw.Close() }()
		t.Cleanup(func() {
			cmd.Process.Signal(os.Interrupt)
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				<-exited
			}
		})
		found := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(pr)
			for sc.Scan() {
				if m := servingAt.FindStringSubmatch(sc.Text()); m != nil {
					found <- m[1]
					io.Copy(io.Discard, pr)
					return
				}
			}
			close(found)
		}()
		var url string
		select {
		case a, ok := <-found:
			if !ok {
				return // refused to serve with the manifest's placeholder: fixed
			}
			url = a
		case <-time.After(time.Minute): // a deadlock guard
			t.Fatal("nsbox mcp --http neither served nor exited")
		}
		cs, err := connectHTTP(t, url, placeholder)
		if err != nil {
			return // the placeholder is refused: fixed
		}
		defer cs.Close()
		t.Errorf("nsbox mcp --http serves with the token contrib/kubernetes/secret.yaml ships (%q): a client sending it opened an MCP session", placeholder)
	})
}

// TestReview41HTTPAuditFileReadsOtherSessionsMemories
//
// Finding (MEDIUM): over HTTP each MCP session has memory and notepad
// stores of its own because "a command of one must not plant or read
// another's memories" (docs/agents.md, TestReviewHostHTTPSessionsShareMemory).
// But with --audit, one file takes the lines of every session, tool calls
// and hostCalls with their arguments (memory_save's text, notepad
// documents, write_file's content, commands: only values under
// secret-looking keys are redacted), and that file is only protected
// (read-only) inside the sandboxes, not hidden (mcpMain: f.protect, no
// f.hide for auditPath). Any command of any session reads the others'.
//
// Attack: two agents (two MCP sessions, e.g. two users' agents on one
// sandbox host, the "many agents on one sandbox host" of docs/agents.md)
// share a server started with --audit ~/.local/state/nsbox-mcp.jsonl (the
// path docs/agents.md suggests; the home is readable inside). Session A's
// model saves a memory or a notepad document; a command of session B (a
// prompt injection, an install script) runs `cat` on the audit file and
// reads A's memory text and A's commands and file contents: the
// separation of the stores is undone by the audit log.
//
// Fixed when a command of session B cannot read session A's memory text
// through the audit file (e.g. the audit file is hidden inside, as the
// data directory and the token file are).
//
// As root the run passes by accident: the audit file is root's 0600 and a
// sandbox of root's is not root on the host. A server run by a user (the
// rootless run, and uid 65532 in contrib/kubernetes) fails.
func TestReview41HTTPAuditFileReadsOtherSessionsMemories(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		h := newHome(t, u)
		state := review41Dir(t, u)
		audit := filepath.Join(state, "nsbox-mcp.jsonl")
		s := startHTTPServer(t, h, "--audit", audit, "--idle-timeout", "1h")
		a, err := connectHTTP(t, s.url, s.token)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		b, err := connectHTTP(t, s.url, s.token)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		const secret = "session-a-private-memory-rv41-7c1e"
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		res, err := a.CallTool(ctx, &mcp.CallToolParams{Name: "memory_save", Arguments: map[string]any{"key": "rv41", "text": secret}})
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError {
			t.Fatalf("session A's memory_save: %s", text(res))
		}
		// B's own store does not have it (the per-session stores hold).
		res, err = b.CallTool(ctx, &mcp.CallToolParams{Name: "memory_recall", Arguments: map[string]any{"key": "rv41"}})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(text(res), secret) {
			t.Fatalf("session B recalls session A's memory from its own store (TestReviewHostHTTPSessionsShareMemory):\n%s", text(res))
		}
		out := review41Call(t, b, "cat "+audit+" 2>&1; echo END")
		if strings.Contains(out, secret) {
			t.Errorf("a command of session B reads session A's memory text in the audit file %s:\n%s", audit, out)
		}
	})
}
