package mcpintegration

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHTTPMadeToken: without --token-file, nsbox mcp --http makes a token
// for the run in a 0600 file of a 0700 directory, prints the file's path
// (not the token), refuses clients without it, serves those with it, and
// removes the file at exit. (That the file is hidden inside is
// TestReviewHostHTTPTokenFileReadableInside's, for --token-file: both go
// through the same hide entry.)
func TestHTTPMadeToken(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		s := startHTTPServer(t, newHome(t, u))
		if s.token == "" || s.tokenFile == "" {
			t.Fatalf("no token file announced on stderr:\n%s", s.stderr)
		}
		if strings.Contains(s.stderr.String(), s.token) {
			t.Fatal("the token itself was printed on stderr")
		}
		if len(s.token) != 64 {
			t.Fatalf("a token of %d characters, want 64 (32 random bytes, hex)", len(s.token))
		}
		for p, want := range map[string]os.FileMode{s.tokenFile: 0o600, filepath.Dir(s.tokenFile): 0o700} {
			st, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != want {
				t.Errorf("%s: mode %04o, want %04o", p, st.Mode().Perm(), want)
			}
		}
		req, _ := http.NewRequest("POST", s.url, strings.NewReader(rawInit))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("a client without the token: HTTP %d, want 401", resp.StatusCode)
		}
		cs, err := connectHTTP(t, s.url, s.token)
		if err != nil {
			t.Fatalf("with the made token: %v", err)
		}
		callEcho(t, cs, "made-token")
		cs.Close()

		s.cmd.Process.Signal(os.Interrupt)
		select {
		case err := <-s.exited:
			s.exited <- err // for the cleanup's wait
		case <-time.After(time.Minute): // a deadlock guard only
			t.Fatal("nsbox mcp --http did not exit on SIGINT")
		}
		if _, err := os.Stat(s.tokenFile); !os.IsNotExist(err) {
			t.Errorf("the token file %s is still there after exit (%v)", s.tokenFile, err)
		}
	})
}
