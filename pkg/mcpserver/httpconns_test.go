package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serveHTTP runs Serve with maxConns on a loopback listener until the
// test ends and returns its address.
func serveHTTP(t *testing.T, maxConns int) string {
	t.Helper()
	defs, _ := json.Marshal(baseDefs)
	hs, err := NewHTTP(HTTPConfig{Token: testToken, MaxConns: maxConns, Session: func() Config {
		return Config{Definitions: defs, Start: func(ctx context.Context) (Session, error) { return newFake(), nil }}
	}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-served })
	return ln.Addr().String()
}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`

// rawConn is one HTTP/1.1 connection the test writes requests on by hand.
type rawConn struct {
	c  net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second)) // a deadlock guard
	return &rawConn{c: c, br: bufio.NewReader(c)}
}

// do sends one request (headers: extra lines, each ending in \r\n) and
// reads its answer whole.
func (rc *rawConn) do(t *testing.T, method, host, headers, body string) (*http.Response, error) {
	t.Helper()
	req := method + " / HTTP/1.1\r\nHost: " + host + "\r\n" + headers
	if body != "" {
		req += "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: " + itoa(len(body)) + "\r\n"
	}
	if _, err := io.WriteString(rc.c, req+"\r\n"+body); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(rc.br, nil)
	if err != nil {
		return nil, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, err // resp also with err: the status was read
}

// closedByServer reports whether the server closed the connection (a read
// gets EOF or a reset; the guard is the connection's deadline).
func (rc *rawConn) closedByServer() bool {
	_, err := rc.br.ReadByte()
	return err != nil && !isTimeout(err)
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestHTTPRefusalClosesConnection: a 401 (no token, a wrong one) or a 403
// (a foreign Host on a loopback address) ends its connection (Connection:
// close), so a tokenless client gets one answer per connection; a request
// with the token keeps it.
func TestHTTPRefusalClosesConnection(t *testing.T) {
	addr := serveHTTP(t, 0)
	for _, c := range []struct {
		name, host, headers string
		status              int
	}{
		{"no token", "127.0.0.1", "", http.StatusUnauthorized},
		{"wrong token", "127.0.0.1", "Authorization: Bearer not-the-token-0123456789\r\n", http.StatusUnauthorized},
		{"foreign Host", "evil.example", "Authorization: Bearer " + testToken + "\r\n", http.StatusForbidden},
	} {
		rc := dialRaw(t, addr)
		resp, err := rc.do(t, http.MethodGet, c.host, c.headers, "")
		if err != nil || resp.StatusCode != c.status {
			t.Fatalf("%s: %v %v, want %d", c.name, resp, err, c.status)
		}
		if !resp.Close || !rc.closedByServer() {
			t.Errorf("%s: the connection stays open after a %d (Connection: %q)", c.name, c.status, resp.Header.Get("Connection"))
		}
	}
	rc := dialRaw(t, addr)
	resp, err := rc.do(t, http.MethodPost, "127.0.0.1", "Authorization: Bearer "+testToken+"\r\n", initializeBody)
	if err != nil || resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("initialize with the token: %v %v", resp, err)
	}
}

// TestHTTPHeaderBytesBounded: a request whose headers pass 64 KiB is
// refused (431) before any check reads it.
func TestHTTPHeaderBytesBounded(t *testing.T) {
	addr := serveHTTP(t, 0)
	rc := dialRaw(t, addr)
	resp, err := rc.do(t, http.MethodGet, "127.0.0.1", "X-Filler: "+strings.Repeat("a", 100<<10)+"\r\n", "")
	// (The server may reset the connection while the body is read: the
	// status is what counts.)
	if resp == nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("100 KiB of headers: %v %v, want 431", resp, err)
	}
}

// TestHTTPSilentConnectionsDoNotStarveToken: connections that never send
// a request (each held until the header timeout, 10 s) do not keep a
// client with the token waiting behind them: a new connection takes the
// slot of the oldest one. Before, 24 of them with MaxConns 8 made it wait
// some 30 s in the accept queue.
func TestHTTPSilentConnectionsDoNotStarveToken(t *testing.T) {
	addr := serveHTTP(t, 8)
	for range 24 {
		dialRaw(t, addr) // silent; closed at the test's end
	}
	rc := dialRaw(t, addr)
	rc.c.SetDeadline(time.Now().Add(20 * time.Second)) // a deadlock guard: answered at once
	resp, err := rc.do(t, http.MethodPost, "127.0.0.1", "Authorization: Bearer "+testToken+"\r\n", initializeBody)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the client with the token, behind 24 silent connections (MaxConns 8): %v %v", resp, err)
	}
}

// TestHTTPAuthenticatedConnectionKept: a connection that made a request
// with the token is in a pool of its own: tokenless connections opened
// afterwards, many more than MaxConns, never take its slot, and its next
// request is answered on it.
func TestHTTPAuthenticatedConnectionKept(t *testing.T) {
	addr := serveHTTP(t, 4)
	rc := dialRaw(t, addr)
	auth := "Authorization: Bearer " + testToken + "\r\n"
	resp, err := rc.do(t, http.MethodPost, "127.0.0.1", auth, initializeBody)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize: %v %v", resp, err)
	}
	sid := resp.Header.Get("Mcp-Session-Id")
	for range 16 {
		dialRaw(t, addr) // silent
	}
	// One tokenless request more on a fresh connection: it is accepted
	// (it took a silent one's slot) and refused.
	if resp, err := dialRaw(t, addr).do(t, http.MethodGet, "127.0.0.1", "", ""); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("tokenless request: %v %v", resp, err)
	}
	resp, err = rc.do(t, http.MethodPost, "127.0.0.1", auth+"Mcp-Session-Id: "+sid+"\r\nMcp-Protocol-Version: 2025-06-18\r\n", `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("the authenticated connection's next request, after 17 tokenless connections (MaxConns 4): %v %v", resp, err)
	}
}
