package mcpintegration

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestConcurrentCalls sends 150 run_command calls at once. The worker
// handles at most 64 requests in flight; the server used to pass every
// call through and 86 failed with "too many requests in flight". They now
// wait for a turn and all succeed.
func TestConcurrentCalls(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		h := newHome(t, u)
		s := startServer(t, h, serverOpts{})
		s.ok("run_command", map[string]any{"command": "true"}) // the session is up
		const n = 150
		var wg sync.WaitGroup
		var mu sync.Mutex
		var failures []string
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_command", Arguments: map[string]any{"command": "sleep 0.2"}})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					failures = append(failures, err.Error())
				case res.IsError:
					failures = append(failures, text(res))
				}
			}()
		}
		wg.Wait()
		if len(failures) > 0 {
			t.Errorf("%d of %d calls failed, e.g. %q", len(failures), n, failures[0])
		}
	})
}
