package mcpintegration

// --isolation per-call after the workspace changed under the pool's
// policy: the server resolves again, says so on stderr without --verbose,
// and leaves nothing of its resolutions behind.

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPerCallReplanWarnsAndCleansUp: the host removes a hidden .env while
// a per-call server runs. Every later call is served (a call whose start
// fails is tried once more on the new resolution), the failed build is
// logged as a warning naming the file although --verbose is not given,
// and once the server has ended the workspace holds no placeholder of
// either resolution.
func TestPerCallReplanWarnsAndCleansUp(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		h := newHome(t, u)
		h.writeFile(t, "sub/.env", "TOKEN=secret\n")
		before := listDir(t, h.ws)
		s := startServer(t, h, serverOpts{args: []string{"--isolation", "per-call", "--pool-size", "2"}})
		s.ok("run_command", map[string]any{"command": "true"})
		if err := os.Remove(filepath.Join(h.ws, "sub/.env")); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 4; i++ {
			s.ok("run_command", map[string]any{"command": "echo served"})
		}
		deadline := time.Now().Add(30 * time.Second) // a deadlock guard
		for {
			out := s.stderr.String()
			if strings.Contains(out, "level=WARN") && strings.Contains(out, "sub/.env") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no warning naming sub/.env on stderr:\n%s", out)
			}
			time.Sleep(20 * time.Millisecond)
		}
		s.stop(t)
		if after := listDir(t, h.ws); !slices.Equal(after, before) {
			t.Fatalf("the workspace held %v before the server and %v after it: placeholders left", before, after)
		}
	})
}

// listDir lists dir's names, sorted.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}
