package mcpintegration

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestHTTPStoresOfKilledServerRemoved: the memory a session of `nsbox mcp
// --http` saved stays while its server lives; a server killed with SIGKILL
// cannot remove it, and the next server does (they were kept for good).
func TestHTTPStoresOfKilledServerRemoved(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		h := newHome(t, u)
		runs := func() []string {
			m, _ := filepath.Glob(filepath.Join(h.data, "nsbox", "http-sessions", "run-*"))
			return m
		}
		s := startHTTPServer(t, h)
		cs, err := connectHTTP(t, s.url, s.token)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "memory_save", Arguments: map[string]any{"key": "k", "text": "said-in-a-killed-server"}})
		if err != nil || res.IsError {
			t.Fatalf("memory_save: %v %s", err, text_(res))
		}
		first := runs()
		if len(first) != 1 {
			t.Fatalf("run directories of one live server: %q", first)
		}
		if ents, _ := os.ReadDir(first[0]); len(ents) < 2 { // the lock and the session's stores
			t.Fatalf("the session's stores are not in %s: %v", first[0], ents)
		}
		cs.Close()
		s.cmd.Process.Kill()
		waitExited(s)
		if _, err := os.Stat(first[0]); err != nil {
			t.Fatalf("a SIGKILLed server's run directory is gone already (%v): the test shows nothing", err)
		}

		s2 := startHTTPServer(t, h)
		if _, err := os.Stat(first[0]); !os.IsNotExist(err) {
			t.Fatalf("the killed server's stores are still there after a new server started: %v", err)
		}
		second := runs()
		if len(second) != 1 {
			t.Fatalf("run directories of the new server: %q", second)
		}
		// A live server's directory is not another server's to remove.
		s3 := startHTTPServer(t, h)
		if _, err := os.Stat(second[0]); err != nil {
			t.Fatalf("a new server removed a live server's stores: %v", err)
		}
		s3.cmd.Process.Signal(os.Interrupt)
		waitExited(s3)
		s2.cmd.Process.Signal(os.Interrupt)
		waitExited(s2)
		if left := runs(); len(left) != 0 {
			t.Fatalf("servers that exited left run directories: %q", left)
		}
	})
}

// waitExited waits for s to exit and leaves its exit for the cleanup of
// startHTTPServer, which waits for it too.
func waitExited(s *httpServer) {
	err := <-s.exited
	s.exited <- err
}
