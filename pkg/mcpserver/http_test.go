package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// bearer adds a token to every request of a client.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// testToken is the bearer token of the tests that are not about tokens.
const testToken = "token-of-the-http-tests-0123456789"

type httpHarness struct {
	url      string
	hs       *HTTPServer
	mu       sync.Mutex
	sessions []*fakeSession
}

func (h *httpHarness) all() []*fakeSession {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*fakeSession(nil), h.sessions...)
}

func startHTTP(t *testing.T, token string, idle time.Duration) *httpHarness {
	t.Helper()
	h := &httpHarness{}
	defs, _ := json.Marshal(baseDefs)
	hs, err := NewHTTP(HTTPConfig{Token: token, IdleTimeout: idle, Session: func() Config {
		return Config{Definitions: defs, Start: func(ctx context.Context) (Session, error) {
			f := newFake()
			h.mu.Lock()
			h.sessions = append(h.sessions, f)
			h.mu.Unlock()
			return f, nil
		}}
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(hs.Handler())
	t.Cleanup(srv.Close)
	h.url = srv.URL
	h.hs = hs
	return h
}

func connectHTTP(t *testing.T, url, token string) (*mcp.ClientSession, error) {
	t.Helper()
	hc := &http.Client{Transport: http.DefaultTransport}
	if token != "" {
		hc.Transport = bearer{token, http.DefaultTransport}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, nil)
}

// waitFor polls cond; the bound is a deadlock guard, not a timing claim.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestHTTPToken(t *testing.T) {
	const token = "s3cret-token-for-the-test"
	h := startHTTP(t, token, 0)
	for _, bad := range []string{"", "wrong"} {
		if cs, err := connectHTTP(t, h.url, bad); err == nil {
			cs.Close()
			t.Fatalf("token %q: connected", bad)
		}
		req, _ := http.NewRequest("POST", h.url, strings.NewReader(initLine))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if bad != "" {
			req.Header.Set("Authorization", "Bearer "+bad)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("token %q: status %d, want 401", bad, resp.StatusCode)
		}
	}
	if len(h.all()) != 0 {
		t.Fatal("a sandbox was started for a client without the token")
	}
	cs, err := connectHTTP(t, h.url, token)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "over http"}})
	if err != nil || res.IsError || text(res) != "over http" {
		t.Fatalf("call: %v %v", err, res)
	}
}

// TestHTTPSessionPerClient: each MCP session has its own sandbox session,
// ended by the client's DELETE (ClientSession.Close sends it).
func TestHTTPSessionPerClient(t *testing.T) {
	h := startHTTP(t, testToken, 0)
	a, err := connectHTTP(t, h.url, testToken)
	if err != nil {
		t.Fatal(err)
	}
	b, err := connectHTTP(t, h.url, testToken)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, cs := range []*mcp.ClientSession{a, b} {
		if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}); err != nil || res.IsError {
			t.Fatalf("call: %v %v", err, res)
		}
	}
	s := h.all()
	if len(s) != 2 {
		t.Fatalf("%d sandbox sessions for 2 MCP sessions", len(s))
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first session's sandbox to close after DELETE", func() bool { return s[0].closed.Load() > 0 })
	if s[1].closed.Load() != 0 {
		t.Fatal("the other session's sandbox was closed too")
	}
}

func TestHTTPIdleTimeout(t *testing.T) {
	h := startHTTP(t, testToken, 200*time.Millisecond)
	cs, err := connectHTTP(t, h.url, testToken)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	s := h.all()
	waitFor(t, "the idle session's sandbox to close", func() bool { return s[0].closed.Load() > 0 })
}

func TestCheckListenAddr(t *testing.T) {
	for _, c := range []struct {
		addr  string
		token bool
		ok    bool
	}{
		{"127.0.0.1:8080", false, true},
		{"[::1]:8080", false, true},
		{"localhost:8080", false, true},
		{"0.0.0.0:8080", false, false},
		{":8080", false, false},
		{"192.0.2.1:8080", false, false},
		{"example.com:8080", false, false},
		{"0.0.0.0:8080", true, true},
		{"nonsense", true, false},
	} {
		err := CheckListenAddr(c.addr, c.token)
		if (err == nil) != c.ok {
			t.Errorf("%s token=%v: %v", c.addr, c.token, err)
		}
		if err != nil && !c.token && c.addr != "nonsense" && !errors.Is(err, ErrNoToken) {
			t.Errorf("%s: %v is not ErrNoToken", c.addr, err)
		}
	}
}

// TestHTTPCancelledNotAnswered: over HTTP too, a cancelled request gets no
// answer on its stream (raw HTTP: clients differ in what they do with one).
func TestHTTPCancelledNotAnswered(t *testing.T) {
	h := startHTTP(t, testToken, 0)
	post := func(sid, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("POST", h.url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		req.Header.Set("Authorization", "Bearer "+testToken)
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := post("", initLine)
	sid := resp.Header.Get("Mcp-Session-Id")
	io.ReadAll(resp.Body)
	resp.Body.Close()
	if sid == "" {
		t.Fatalf("no session id (HTTP %d)", resp.StatusCode)
	}
	post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`).Body.Close()
	stream := make(chan string, 1)
	go func() {
		r := post(sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sleep","arguments":{}}}`)
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		stream <- string(b)
	}()
	waitFor(t, "the call to start", func() bool {
		s := h.all()
		return len(s) == 1 && s[0].calls.Load() > 0
	})
	post(sid, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`).Body.Close()
	<-h.all()[0].canceled
	got := <-stream
	if strings.Contains(got, `"id":2`) {
		t.Fatalf("the cancelled request was answered: %s", got)
	}
	r := post(sid, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"next"}}}`)
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if !strings.Contains(string(b), `"id":3`) || !strings.Contains(string(b), "next") {
		t.Fatalf("the next call: %s", b)
	}
}
