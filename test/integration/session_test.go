package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

type sessionInfo struct {
	Name string `json:"name"`
	PID  int    `json:"pid"`
}

func (u user) sessions(t *testing.T) map[string]sessionInfo {
	t.Helper()
	r := u.run(t, nil, "session", "list", "--json")
	if r.code != 0 {
		t.Fatalf("session list: exit %d: %s", r.code, r.stderr)
	}
	var list []sessionInfo
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("session list: %v: %s", err, r.stdout)
	}
	m := map[string]sessionInfo{}
	for _, s := range list {
		m[s.Name] = s
	}
	return m
}

// waitGone waits until session name is no longer listed; the bound only
// guards against a hang.
func (u user) waitGone(t *testing.T, name string) {
	t.Helper()
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if _, ok := u.sessions(t)[name]; !ok {
			return
		}
	}
	t.Fatalf("session %s still running", name)
}

// hostProcessesWith counts host processes whose command line has token.
func hostProcessesWith(token string) int {
	n := 0
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range dirs {
		if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), token) {
			n++
		}
	}
	return n
}

// TestToolsCallSession: --session keeps /tmp and a background process
// between two calls, until nsbox session stop; a session ends when its
// owner ends and after its idle timeout; its socket refuses other users
// (issue 19, item 6).
func TestToolsCallSession(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		name := fmt.Sprintf("it-%d-%d", os.Getpid(), u.uid)
		t.Cleanup(func() { u.run(t, nil, "session", "stop", name) })
		token := strconv.FormatInt(900000+time.Now().UnixNano()%90000, 10)

		tr, _ := u.callTool(t, ws, "run_command", jsonArgs(t, map[string]any{
			"command": "echo kept > /tmp/state; sleep " + token + " >/dev/null 2>&1 & echo $!"}), "--session", name)
		if !tr.Success {
			t.Fatalf("first call: %s", tr.err())
		}
		pid := strings.TrimSpace(outputOf[processOut](t, tr).Stdout)
		tr, _ = u.callTool(t, ws, "run_command", jsonArgs(t, map[string]any{
			"command": "cat /tmp/state; kill -0 " + pid + " && echo alive"}), "--session", name)
		if out := outputOf[processOut](t, tr).Stdout; out != "kept\nalive\n" {
			t.Errorf("second call: %q, want the file in /tmp and the background process", out)
		}
		if hostProcessesWith("sleep\x00"+token) != 1 {
			t.Errorf("the background process is not running on the host")
		}
		if _, ok := u.sessions(t)[name]; !ok {
			t.Errorf("session %s not listed", name)
		}

		if os.Getuid() == 0 && u.uid != 0 {
			// SO_PEERCRED: root is not the session's user and gets no
			// answer, although the directory does not stop root.
			sock := filepath.Join(os.TempDir(), "nsbox-sessions-"+strconv.Itoa(u.uid), name+".sock")
			c, err := net.DialTimeout("unix", sock, 5*time.Second)
			if err != nil {
				t.Fatalf("root cannot even connect to %s: %v", sock, err)
			}
			c.SetDeadline(time.Now().Add(10 * time.Second))
			fmt.Fprintln(c, `{"op":"stop"}`)
			if line, _ := bufio.NewReader(c).ReadString('\n'); line != "" {
				t.Errorf("a peer of another uid got an answer: %q", line)
			}
			c.Close()
			if _, ok := u.sessions(t)[name]; !ok {
				t.Fatalf("a peer of another uid stopped the session")
			}
			if fi, err := os.Stat(filepath.Dir(sock)); err != nil || fi.Mode().Perm() != 0o700 {
				t.Errorf("runtime dir: %v %v", fi, err)
			}
		}

		if r := u.run(t, nil, "session", "stop", name); r.code != 0 {
			t.Fatalf("session stop: exit %d: %s", r.code, r.stderr)
		}
		if n := hostProcessesWith("sleep\x00" + token); n != 0 {
			t.Errorf("%d background processes survived session stop", n)
		}
		if _, ok := u.sessions(t)[name]; ok {
			t.Errorf("session %s listed after stop", name)
		}
		// A new session of the same name starts afresh.
		tr, _ = u.callTool(t, ws, "run_command", `{"command":"cat /tmp/state 2>/dev/null || echo fresh"}`, "--session", name)
		if out := outputOf[processOut](t, tr).Stdout; out != "fresh\n" {
			t.Errorf("after a stop: %q", out)
		}
		u.run(t, nil, "session", "stop", name)

		// Ends when its owner ends.
		owner := exec.Command("sleep", "600")
		if err := owner.Start(); err != nil {
			t.Fatal(err)
		}
		defer owner.Process.Kill()
		r := u.run(t, &runOpts{dir: ws}, "session", "start", name+"-o", "--workspace", ws, "--owner", strconv.Itoa(owner.Process.Pid))
		if r.code != 0 {
			t.Fatalf("session start: exit %d: %s", r.code, r.stderr)
		}
		if _, ok := u.sessions(t)[name+"-o"]; !ok {
			t.Fatalf("session %s-o not listed", name)
		}
		owner.Process.Kill()
		owner.Wait()
		u.waitGone(t, name+"-o")

		// Ends after its idle timeout.
		r = u.run(t, &runOpts{dir: ws}, "session", "start", name+"-i", "--workspace", ws, "--idle", "1s", "--owner", "0")
		if r.code != 0 {
			t.Fatalf("session start --idle: exit %d: %s", r.code, r.stderr)
		}
		u.waitGone(t, name+"-i")

		if r := u.run(t, nil, "session", "stop", "no-such-session"); r.code == 0 {
			t.Error("stopping a missing session succeeded")
		}
		if r := u.run(t, nil, "session", "start", "../evil"); r.code == 0 || !strings.Contains(r.stderr, "invalid") {
			t.Errorf("a name with a slash: exit %d: %s", r.code, r.stderr)
		}
	})
}
