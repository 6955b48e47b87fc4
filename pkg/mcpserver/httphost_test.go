package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

func TestHTTPNeedsToken(t *testing.T) {
	_, err := NewHTTP(HTTPConfig{Session: func() Config { return Config{} }})
	if !errors.Is(err, ErrTokenRequired) {
		t.Fatalf("NewHTTP without a token: %v, want ErrTokenRequired", err)
	}
}

// rawPost POSTs body with the test token (and sid when set).
func rawPost(t *testing.T, url, sid, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+testToken)
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id")
}

// TestHTTPNoSessionFreesSlot: a POST without a session id that makes no
// session (no initialize in it) holds no session slot afterwards, and the
// servers the SDK asks for on other requests hold none either.
func TestHTTPNoSessionFreesSlot(t *testing.T) {
	defs, _ := json.Marshal(baseDefs)
	var made atomic.Int32
	hs, err := NewHTTP(HTTPConfig{Token: testToken, MaxSessions: 1, Session: func() Config {
		made.Add(1)
		return Config{Definitions: defs, Eager: true, Start: func(ctx context.Context) (Session, error) {
			t.Error("a sandbox was started for a request that made no session")
			return newFake(), nil
		}}
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(hs.Handler())
	defer srv.Close()
	for _, body := range []string{`{}`, `not json`, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}`, `[{"jsonrpc":"2.0","id":1,"method":"initialize"}]`} {
		rawPost(t, srv.URL, "", body)
		rawPost(t, srv.URL, "no-such-session", body)
	}
	// Only an initialize makes a session's server: a client's
	// server/discover probe took the only slot until after its answer,
	// and the initialize it sent next was refused (--max-sessions 1).
	if n := made.Load(); n != 0 {
		t.Fatalf("%d session servers made for requests that were no initialize", n)
	}
	hs.mu.Lock()
	n := len(hs.live)
	hs.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d servers alive after requests that made no session", n)
	}
}

// TestHTTPCancelNotesBounded: cancellations are noted for live sessions
// only, short ids only, at most maxCancelled per session, and forgotten
// with the session.
func TestHTTPCancelNotesBounded(t *testing.T) {
	h := startHTTP(t, testToken, 0)
	code, sid := rawPost(t, h.url, "", initLine)
	if sid == "" {
		t.Fatalf("no session (HTTP %d)", code)
	}
	hs := h.hs
	cancel := func(sid, id string) {
		rawPost(t, h.url, sid, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`+id+`}}`)
	}
	cancel("no-such-session", "1")
	cancel(sid, `"`+strings.Repeat("x", maxCancelID)+`"`)
	for i := 0; i < maxCancelled+20; i++ {
		cancel(sid, `"id-`+strings.Repeat("y", i%7)+string(rune('a'+i%26))+`-`+itoa(i)+`"`)
	}
	f := hs.filter
	f.mu.Lock()
	sessions := len(f.cancelled)
	var kept int
	if n := f.cancelled[sid]; n != nil {
		kept = len(n.set)
	}
	f.mu.Unlock()
	if sessions != 1 || kept != maxCancelled {
		t.Fatalf("notes for %d sessions (want 1), %d for the live one (want %d)", sessions, kept, maxCancelled)
	}
	req, _ := http.NewRequest("DELETE", h.url, nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Mcp-Session-Id", sid)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	waitFor(t, "the session's notes to go with it", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.cancelled) == 0
	})
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// TestHTTPForeignHostRefusedFirst: a loopback server refuses a foreign
// Host before reading the body.
func TestHTTPForeignHostRefusedFirst(t *testing.T) {
	h := startHTTP(t, testToken, 0)
	req, _ := http.NewRequest("POST", h.url, strings.NewReader(initLine))
	req.Host = "rebind.example"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("HTTP %d, want 403", resp.StatusCode)
	}
	if len(h.all()) != 0 {
		t.Fatal("a session was made")
	}
}

func TestTokenFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	tf, err := NewTokenFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(tf.Path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(b)) != tf.Token || len(tf.Token) != 2*tokenBytes {
		t.Fatalf("file holds %q, token %q", b, tf.Token)
	}
	for _, p := range []string{dir, tf.Path} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm()&0o077 != 0 {
			t.Fatalf("%s: mode %v", p, st.Mode())
		}
	}
	// A token file of a server that is gone (pid 2^22+1 is past
	// pid_max's bound) is removed by the next one.
	stale := filepath.Join(dir, "mcp-http-4194305-0badcafe.token")
	if err := os.WriteFile(stale, []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tf2, err := NewTokenFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer tf2.Remove()
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("stale token file left: %v", err)
	}
	if _, err := os.Stat(tf.Path); err != nil {
		t.Fatalf("a live server's token file was removed: %v", err)
	}
	if err := tf.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tf.Path); !os.IsNotExist(err) {
		t.Fatalf("token file left: %v", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := NewTokenFile(dir); !errors.Is(err, ErrTokenDir) {
		t.Fatalf("a directory others can enter: %v, want ErrTokenDir", err)
	}
}
