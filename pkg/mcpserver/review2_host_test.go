package mcpserver

// Repro tests from a second outside review (branch rv2dns) of nsbox mcp
// --http after the fixes of the first (rvhost). Each FAILS on purpose on
// the code it was written against, and passes once the finding is fixed.
// Only loopback listeners the tests open are contacted.

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestReview2HostHTTPUnauthenticatedHoldsConnSlots: Serve caps the
// connections it accepts (netutil.LimitListener, MaxConns, 512 by default)
// before anything is authenticated, and a connection whose request was
// refused (401 without a token, 403 for a foreign Host) stays open as a
// keep-alive connection: only connIdleTimeout (5 s) *between* requests
// closes one. So any local user, without the token (or anyone who reaches
// an address served with --token-file), who holds MaxConns connections and
// sends a tokenless request on each every few seconds holds every slot for
// as long as it likes; the client that has the token waits in the kernel's
// accept queue and is never served. Here MaxConns is 4 and four tokenless
// connections each send a GET a second; the client with the token gets no
// answer within the guard (on a fixed server it is answered at once).
func TestReview2HostHTTPUnauthenticatedHoldsConnSlots(t *testing.T) {
	defs, _ := json.Marshal(baseDefs)
	hs, err := NewHTTP(HTTPConfig{Token: testToken, MaxConns: 4, Session: func() Config {
		return Config{Definitions: defs, Start: func(ctx context.Context) (Session, error) { return newFake(), nil }}
	}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ctx, ln) }()
	defer func() { cancel(); <-served }()

	// The attacker: no token; one GET a second on each connection (well
	// under connIdleTimeout), each answered 401, the connection kept.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var statuses []string
	ready := make(chan struct{}, 4)
	for range 4 {
		c, err := net.Dial("tcp4", addr)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			br := bufio.NewReader(c)
			first := true
			for {
				c.SetDeadline(time.Now().Add(30 * time.Second))
				if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")); err != nil {
					return
				}
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					return
				}
				resp.Body.Close()
				if first {
					mu.Lock()
					statuses = append(statuses, resp.Status)
					mu.Unlock()
					ready <- struct{}{}
					first = false
				}
				select {
				case <-stop:
					return
				case <-time.After(time.Second):
				}
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	for range 4 {
		select {
		case <-ready:
		case <-time.After(30 * time.Second): // deadlock guard
			t.Fatal("the tokenless connections were not answered")
		}
	}
	mu.Lock()
	t.Logf("tokenless requests answered %q; their connections stay open", statuses)
	mu.Unlock()

	// The client that has the token: one initialize POST.
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	hc := &http.Client{Timeout: 20 * time.Second} // a deadlock guard: a fixed server answers at once
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("the client with the token was not served while %d tokenless connections (MaxConns %d) kept sending refused requests: %v", 4, 4, err)
	}
	resp.Body.Close()
}
