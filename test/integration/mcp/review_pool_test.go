package mcpintegration

// Outside review of `nsbox mcp --isolation per-call` (issue 22, "pool"):
// repro tests that FAIL on the code reviewed (branch rvpool) and pass once
// the weakness each one names is fixed.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReviewPoolPerCallNeverRecoversFromPlanChange: the pool of
// --isolation per-call builds every sandbox from the one resolution made
// when it started. When the host's workspace changes under that
// resolution in a way the build checks (here the user deletes a .env file
// the profile hides; equally a vendored clone whose .git is protected, or a
// --rw directory a host build tool recreates), every later refill and every
// on-demand start fails with "recheck hide ...: run again", and so does
// every tool call from then on: the server never resolves again, so "run
// again" never helps until it is restarted. A session (--isolation
// session, startToolSession) resolves again and retries on exactly this
// error (planChanged), and its sandbox is not rebuilt per call at all: the
// same deletion costs it nothing.
func TestReviewPoolPerCallNeverRecoversFromPlanChange(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		h := newHome(t, u)
		h.writeFile(t, "sub/.env", "TOKEN=secret\n")
		s := startServer(t, h, serverOpts{args: []string{"--isolation", "per-call", "--pool-size", "1"}})
		s.ok("run_command", map[string]any{"command": "true"})
		// An ordinary host action while the server runs.
		if err := os.Remove(filepath.Join(h.ws, "sub/.env")); err != nil {
			t.Fatal(err)
		}
		failed, last := s.servedAfter(4)
		if last != "" {
			t.Fatalf("after the host removed a hidden .env file, %d of the next 4 per-call tool calls failed, the last too (the server never recovers): %s", failed, last)
		}
	})
}

// TestReviewPoolPerCallRefillFailureNotLogged: issue 22 asks that "a
// failed refill is reported, not hidden". sandbox.Pool keeps the count and
// the last error in Stats, but nsbox mcp never reads them: a refill that
// fails is written nowhere (not even with --verbose), so the operator
// learns of it only when the pool has run dry and tool calls fail. Here
// the host removes a hidden file (as in the test above), a call is served
// by an idle sandbox, and the refill behind it fails: the server's stderr
// must say so.
func TestReviewPoolPerCallRefillFailureNotLogged(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		h := newHome(t, u)
		h.writeFile(t, "sub/.env", "TOKEN=secret\n")
		s := startServer(t, h, serverOpts{args: []string{"--isolation", "per-call", "--pool-size", "2", "--verbose"}})
		s.ok("run_command", map[string]any{"command": "true"})
		if err := os.Remove(filepath.Join(h.ws, "sub/.env")); err != nil {
			t.Fatal(err)
		}
		// Served by whatever is idle or started on demand; its refill
		// (or the earlier one, begun after the removal) cannot start.
		s.call("run_command", map[string]any{"command": "true"})
		deadline := time.Now().Add(15 * time.Second) // a deadlock guard
		for !strings.Contains(s.stderr.String(), "sub/.env") {
			if time.Now().After(deadline) {
				t.Fatalf("a refill of the per-call pool failed (the host removed a hidden file) and nsbox mcp --verbose logged nothing about it; stderr:\n%s", s.stderr)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

// TestReviewPoolPerCallSandboxBreaksLaterCalls: the same weakness as
// TestReviewPoolPerCallNeverRecoversFromPlanChange, triggered from inside:
// a tool call makes the directories above a hidden .env and a nested
// repository unreadable (chmod 000, its own files). Its own sandbox is
// built already, but every later sandbox of the pool fails to build
// ("mount ...: permission denied"), so every later call fails until the
// server restarts: one call breaks all the calls after it, the state that
// per-call isolation promises not to carry. In a session the sandbox is
// not rebuilt, and the repair nsbox already makes at the end of a sandbox
// ("the sandbox made DIR unreadable; it is given u+rwx back") runs before
// any later build; a pool makes it only when it closes.
func TestReviewPoolPerCallSandboxBreaksLaterCalls(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		h := newHome(t, u)
		h.writeFile(t, "sub/.env", "TOKEN=secret\n")
		h.writeFile(t, "vendor/lib/.git/HEAD", "ref: refs/heads/main\n")
		t.Cleanup(func() {
			for _, d := range []string{"sub", "vendor", "vendor/lib"} {
				os.Chmod(filepath.Join(h.ws, d), 0o755)
			}
		})
		s := startServer(t, h, serverOpts{args: []string{"--isolation", "per-call", "--pool-size", "1"}})
		s.ok("run_command", map[string]any{"command": "chmod 000 sub vendor/lib vendor"})
		failed, last := s.servedAfter(4)
		if last != "" {
			t.Fatalf("after one call made two workspace directories unreadable, %d of the next 4 per-call tool calls failed, the last too: %s", failed, last)
		}
	})
}

// servedAfter makes n run_command calls and returns how many failed and
// the text of the last one when it failed ("" when the last was served):
// whether a per-call server recovered from what the test did.
func (s *server) servedAfter(n int) (failed int, last string) {
	for i := 0; i < n; i++ {
		res := s.call("run_command", map[string]any{"command": "echo served"})
		if res.IsError {
			failed++
			last = text(res)
		} else {
			last = ""
		}
	}
	return failed, last
}
