package mcpintegration

// Second outside review of `nsbox mcp --isolation per-call` (issue 22,
// the fixes 9074c3f..d2037a8: replan, one hold, one placeholder record,
// the mid-session git audit, the rate-limited failure log): repro tests
// that FAIL on the code reviewed (branch rv2pool) and pass once the
// weakness each one names is fixed.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// pendingPlaceholderPaths lists the paths the live and dead placeholder
// records of h's data directory name (cmd/nsbox leftovers.go: one JSON
// list of policy.MadePlaceholder per run).
func pendingPlaceholderPaths(t *testing.T, h *home) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	files, _ := filepath.Glob(filepath.Join(h.data, "nsbox", "placeholders-pending", "run-*.json"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var made []struct {
			Path string `json:"path"`
		}
		if err := json.Unmarshal(b, &made); err != nil {
			t.Fatalf("record %s: %v", f, err)
		}
		for _, m := range made {
			out[m.Path] = true
		}
	}
	return out
}

// emptyFile reports whether p is an empty regular file (what a file
// placeholder is).
func emptyFile(p string) bool {
	st, err := os.Lstat(p)
	return err == nil && st.Mode().IsRegular() && st.Size() == 0
}

// TestReview2PoolReplanPlaceholderLeftAfterKill: after a replan, poolPlan
// writes the one record of every resolution's placeholders at once, right
// after the new resolution (recordPlaceholders -> policy.MadePlaceholders,
// which stats what exists NOW), i.e. before any sandbox was built from it.
// A placeholder that only the new resolution needs (a protected file the
// user removed while the server ran, here .mcp.json) is made later, by the
// refill's build, and is in no record: when nsbox mcp is then killed
// (SIGKILL, the OOM killer, a closed terminal's SIGKILL after SIGHUP), the
// next nsbox removes the first resolution's placeholders but leaves the
// empty .mcp.json in the user's workspace for good. docs/security.md
// ("Placeholders a killed run left") leaves uncovered only "a kill between
// the sandbox's build and the record"; here the window is the rest of the
// pool's life. The host removes the pinned sub/ with its hidden .env (the
// next build fails before making any placeholder: the pool replans) and
// .mcp.json in the same step.
func TestReview2PoolReplanPlaceholderLeftAfterKill(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		h := newHome(t, u)
		h.writeFile(t, "sub/.env", "TOKEN=secret\n")
		h.writeFile(t, ".mcp.json", "{\"mcpServers\":{}}\n")
		s := startServer(t, h, serverOpts{args: []string{"--isolation", "per-call", "--pool-size", "1"}})
		s.ok("run_command", map[string]any{"command": "true"})
		if err := os.RemoveAll(filepath.Join(h.ws, "sub")); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(h.ws, ".mcp.json")); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 3; i++ {
			s.ok("run_command", map[string]any{"command": "echo served"})
		}
		mcpJSON := filepath.Join(h.ws, ".mcp.json")
		if !emptyFile(mcpJSON) {
			t.Fatalf("precondition: the pool's sandboxes built after the replan were expected to protect the missing .mcp.json with an empty placeholder; got none (stderr:\n%s)", s.stderr)
		}
		recorded := pendingPlaceholderPaths(t, h)
		if !recorded[filepath.Join(h.ws, ".vscode")] {
			t.Fatalf("precondition: the record of the first resolution's placeholders (.vscode) is not in %s: %v", h.data, recorded)
		}
		unrecorded := !recorded[mcpJSON]
		procs := descendants(s.pid())
		s.kill() // SIGKILL
		waitGone(t, procs, nil, 30*time.Second)
		// The next nsbox (any run) removes what killed runs left.
		cmd := exec.Command(nsboxBin(t), "run", "--workspace", h.ws, "--", "/bin/true")
		h.setup(cmd)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("the next nsbox run: %v\n%s", err, out)
		}
		if _, err := os.Lstat(filepath.Join(h.ws, ".vscode")); err == nil {
			t.Fatalf("control failed: the first resolution's recorded placeholder .vscode was not removed by the next run either")
		}
		if emptyFile(mcpJSON) {
			t.Fatalf("nsbox mcp was killed after a replan; the next nsbox removed the first resolution's placeholders but left the empty %s the replan's sandboxes made (recorded: %v): the replan's record was written before any sandbox of that resolution was built", mcpJSON, !unrecorded)
		}
	})
}

// TestReview2PoolUnreadableWorkspaceBreaksLaterCalls: the fix for
// TestReviewPoolPerCallSandboxBreaksLaterCalls repairs, before the replan,
// what the git audit's walk finds unreadable BELOW the workspace. One call
// that makes the workspace directory itself unreadable (chmod 000 on its
// own bind root, "a directory above a hidden file", docs/agents.md) is
// not repaired: GitAudit.reopen finds no writable root strictly above it
// (parentOf) and silently does nothing, yet the audit's message says "it
// is given u+rwx back"; the new resolution then fails ("cannot look into
// WS ... make it readable"), and so does every later call of the
// connection: one call's state breaks all calls after it. Root builds
// bypass permission bits (the chmod breaks nothing there).
func TestReview2PoolUnreadableWorkspaceBreaksLaterCalls(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		h := newHome(t, u)
		h.writeFile(t, "sub/.env", "TOKEN=secret\n")
		t.Cleanup(func() { os.Chmod(h.ws, 0o700) })
		s := startServer(t, h, serverOpts{args: []string{"--isolation", "per-call", "--pool-size", "1"}})
		s.ok("run_command", map[string]any{"command": "chmod 000 " + h.ws})
		failed, last := s.servedAfter(4)
		if last != "" {
			t.Fatalf("after one call made the workspace directory unreadable (chmod 000 on its own files), %d of the next 4 per-call tool calls failed, the last too (no repair of the workspace root before the replan): %s\nstderr:\n%s", failed, last, s.stderr)
		}
	})
}

// TestReview2PoolReplanAuditFloodsLog: the failure log is rate-limited
// (one warning per 10 s, "so that a pool that keeps failing does not flood
// the log"), but every replan now also runs the git audits mid-session,
// and auditGit writes one unlimited stderr line per directory a call made
// unreadable (and per repository it made). A call that makes N
// directories unreadable and breaks the next build (chmod 000 above a
// hidden .env two levels down) makes nsbox mcp print N lines, with names
// of its choosing, and again on every such call: the operator's log
// grows with calls x N, not at the rate the fix promises. (Root builds bypass permission bits:
// no build fails, no replan runs; the test then has nothing to show.)
func TestReview2PoolReplanAuditFloodsLog(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		if u.uid == 0 {
			t.Skip("as root a chmod inside breaks no build (permission bits do not bind root's build): no replan to look at")
		}
		h := newHome(t, u)
		// sub and sub/inner are pins (bind mounts of themselves) above
		// the hidden .env: sub unreadable, the supervisor cannot open
		// sub/inner and the build fails.
		h.writeFile(t, "sub/inner/.env", "TOKEN=secret\n")
		t.Cleanup(func() {
			filepath.Walk(h.ws, func(p string, info os.FileInfo, err error) error {
				os.Chmod(p, 0o755)
				return nil
			})
		})
		s := startServer(t, h, serverOpts{args: []string{"--isolation", "per-call", "--pool-size", "1"}})
		const perCall, rounds = 100, 3
		for r := 0; r < rounds; r++ {
			attack := fmt.Sprintf("cd %s && mkdir r%d && cd r%d && for i in $(seq %d); do mkdir d$i && chmod 000 d$i; done; chmod 000 %s/sub", h.ws, r, r, perCall, h.ws)
			s.ok("run_command", map[string]any{"command": attack})
			for i := 0; i < 3; i++ {
				s.call("run_command", map[string]any{"command": "echo served"})
			}
		}
		count := func() int { return strings.Count(s.stderr.String(), "unreadable") }
		deadline := time.Now().Add(20 * time.Second) // a deadlock guard
		for count() < perCall*rounds && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if n := count(); n > 30 {
			t.Fatalf("%d tool calls made nsbox mcp write %d warning lines about directories they made unreadable while it served (the failure log allows one per 10 s)", rounds, n)
		}
	})
}

// TestReview2PoolReplanAuditRacesRunningCall: GitAudit is written for a
// tree no process writes any more ("the audit walks the workspace again
// after every process of the sandbox is dead (so nothing inside races
// it)", pkg/policy/gitaudit.go): its checks are by path, and it renames
// what it finds. A replan now runs the audits while other calls of the
// connection still run in their sandboxes (calls are served concurrently).
// Here a call makes a scratch repository, and while it still works in it
// the host removes a hidden .env (the next build fails, the pool
// replans): the audit renames the running call's .git under it, and the
// call's next git command fails. The audit of a call's work belongs after
// that call's sandbox is gone (as at close), not in the middle of it.
func TestReview2PoolReplanAuditRacesRunningCall(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		h := newHome(t, u)
		h.writeFile(t, "sub/.env", "TOKEN=secret\n")
		s := startServer(t, h, serverOpts{args: []string{"--isolation", "per-call", "--pool-size", "1"}})
		s.ok("run_command", map[string]any{"command": "true"})
		// The call: a repository of its own, then (once the test says go;
		// at most 60 s) one more git command in it.
		script := fmt.Sprintf(`cd %s && git init -q scratch && touch ready && i=0; while [ ! -e go ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; git -C scratch rev-parse --git-dir`, h.ws)
		type answer struct {
			ok  bool
			out string
		}
		done := make(chan answer, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_command", Arguments: map[string]any{"command": script}})
			if err != nil {
				done <- answer{false, err.Error()}
				return
			}
			done <- answer{!res.IsError && structured(t, res).Success, text(res)}
		}()
		deadline := time.Now().Add(60 * time.Second) // deadlock guards
		for !fileExists(filepath.Join(h.ws, "ready")) {
			if time.Now().After(deadline) {
				t.Fatalf("the call never made its repository; stderr:\n%s", s.stderr)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err := os.Remove(filepath.Join(h.ws, "sub/.env")); err != nil {
			t.Fatal(err)
		}
		// Other calls meanwhile: their refills fail, the pool replans.
		for i := 0; i < 3; i++ {
			s.call("run_command", map[string]any{"command": "true"})
		}
		// Until the pool has resolved its policy again (a replan ran
		// while the call works in its repository); then a moment for
		// anything that replan does to the workspace.
		for !strings.Contains(s.stderr.String(), "resolved again") && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(500 * time.Millisecond)
		h.writeFile(t, "go", "")
		a := <-done
		if !a.ok || !strings.Contains(a.out, ".git") {
			t.Fatalf("a call's own scratch repository was renamed by the mid-session git audit while the call still worked in it; its git command failed: %s\nstderr:\n%s", a.out, s.stderr)
		}
	})
}

func fileExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// TestReview2PoolReplanHidesWhatACallChose: a replan resolves the policy
// again from the workspace as the calls left it, and since 7056717 a .env*
// name that is a symlink makes the resolution hide the regular file it
// leads to, wherever that is on the host. One call plants
// ".env.sh -> /bin/sh" (a link, nothing else: no build fails on it); the
// next time the pool replans (here the user removes a hidden .env on the
// host, an everyday change the fix is there to survive) the new policy
// hides the host's shell in every later sandbox, and every run_command of
// the connection fails (sh reads as empty), until the user finds the link.
// The same link aimed at libc breaks every program.
func TestReview2PoolReplanHidesWhatACallChose(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		h := newHome(t, u)
		h.writeFile(t, "sub/.env", "TOKEN=secret\n")
		s := startServer(t, h, serverOpts{args: []string{"--isolation", "per-call", "--pool-size", "1"}})
		s.ok("run_command", map[string]any{"command": "ln -s /bin/sh " + h.ws + "/.env.sh"})
		if err := os.Remove(filepath.Join(h.ws, "sub/.env")); err != nil {
			t.Fatal(err)
		}
		failed, last := s.servedAfter(4)
		if last != "" {
			t.Fatalf("after one call planted a .env.sh symlink to /bin/sh and the pool replanned, %d of the next 4 calls failed, the last too: %s", failed, last)
		}
	})
}
