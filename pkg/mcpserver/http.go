package mcpserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HTTPConfig configures the streamable HTTP transport (the MCP
// specification's, as the official Go SDK serves it): one Server, and so
// one sandbox session, per MCP session id.
type HTTPConfig struct {
	// Session returns the configuration of the server of a new MCP
	// session. Required.
	Session func() Config
	// Token, when set, is the bearer token every request must carry
	// (Authorization: Bearer TOKEN); others get 401.
	Token string
	// IdleTimeout ends a session (and its sandbox) that received no request
	// for this long; 0: DefaultIdleTimeout.
	IdleTimeout time.Duration
	// MaxSessions bounds the sessions alive at once (each is a sandbox);
	// 0: DefaultMaxSessions.
	MaxSessions int
	// Logger receives the transport's log; nil discards it.
	Logger *slog.Logger
}

// DefaultIdleTimeout is how long an HTTP session lives without requests.
const DefaultIdleTimeout = 30 * time.Minute

// DefaultMaxSessions bounds the HTTP sessions (sandboxes) alive at once.
const DefaultMaxSessions = 64

// ErrNoToken refuses to serve a non-loopback address without a token.
var ErrNoToken = errors.New("serving MCP over HTTP on an address other machines reach needs a bearer token (--token-file): anyone who reaches it could run commands in the sandbox")

// CheckListenAddr refuses an address that is not loopback when there is
// no token. Only literal loopback addresses and "localhost" count as
// loopback: a name could resolve anywhere, and an empty host or 0.0.0.0
// listens on every interface.
func CheckListenAddr(addr string, haveToken bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %v (want HOST:PORT, e.g. 127.0.0.1:8080)", addr, err)
	}
	if haveToken || isLoopback(host) {
		return nil
	}
	return fmt.Errorf("address %q: %w", addr, ErrNoToken)
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// HTTPServer serves MCP sessions over HTTP.
type HTTPServer struct {
	cfg     HTTPConfig
	log     *slog.Logger
	handler http.Handler
	filter  *cancelFilter

	mu      sync.Mutex
	live    map[*Server]bool
	closing bool
}

// NewHTTP returns an HTTP server for cfg.
func NewHTTP(cfg HTTPConfig) (*HTTPServer, error) {
	if cfg.Session == nil {
		return nil, errors.New("mcpserver: HTTPConfig.Session is required")
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	h := &HTTPServer{cfg: cfg, log: cfg.Logger, live: map[*Server]bool{}}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	var handler http.Handler = mcp.NewStreamableHTTPHandler(h.newSession, &mcp.StreamableHTTPOptions{
		// The SDK ends a session after this long without a request, and on
		// DELETE; either way its Server closes the sandbox (watchSession).
		SessionTimeout: cfg.IdleTimeout,
		Logger:         cfg.Logger,
	})
	h.filter = &cancelFilter{next: handler, cancelled: map[string]map[string]bool{}}
	handler = h.filter
	if cfg.Token != "" {
		want := sha256.Sum256([]byte(cfg.Token))
		verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
			// Compared in constant time (of hashes, so that the length
			// leaks nothing either): a timing side channel must not
			// reveal the token byte by byte.
			got := sha256.Sum256([]byte(token))
			if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
				return nil, auth.ErrInvalidToken
			}
			// One user: the SDK ties each session to the user that made
			// it, so a session id alone cannot be replayed without the
			// token.
			return &auth.TokenInfo{UserID: "nsbox-token"}, nil
		}
		handler = auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(handler)
	}
	h.handler = handler
	return h, nil
}

// Handler is the http.Handler of the MCP endpoint.
func (h *HTTPServer) Handler() http.Handler { return h.handler }

// newSession makes the Server of a new MCP session (the SDK calls it for an
// initialize without a session id). nil answers 400.
func (h *HTTPServer) newSession(r *http.Request) *mcp.Server {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closing {
		return nil
	}
	if len(h.live) >= h.cfg.MaxSessions {
		h.log.Warn("refusing a new MCP session: too many sessions", "limit", h.cfg.MaxSessions)
		return nil
	}
	s, err := New(h.cfg.Session())
	if err != nil {
		h.log.Error("cannot make the server of a new MCP session", "error", err)
		return nil
	}
	s.served = true
	h.live[s] = true
	s.onClose = func() {
		h.mu.Lock()
		delete(h.live, s)
		h.mu.Unlock()
	}
	if s.cfg.Eager {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.session(s.life)
		}()
	}
	h.log.Info("new MCP session", "remote", r.RemoteAddr)
	return s.srv
}

// Serve serves on ln until ctx is cancelled, then stops accepting, answers
// the calls in flight with an error (as Server.Serve does) and closes every
// session's sandbox.
func (h *HTTPServer) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{Handler: h.handler, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	var err error
	select {
	case err = <-served:
	case <-ctx.Done():
	}
	h.mu.Lock()
	h.closing = true
	live := make([]*Server, 0, len(h.live))
	for s := range h.live {
		live = append(live, s)
	}
	h.mu.Unlock()
	for _, s := range live {
		s.Shutdown()
	}
	// The cancelled calls return at once, with server_closing, and their
	// answers go out on their POSTs: wait for those to end. Only then are
	// the SDK's sessions closed (a closing session writes no more answers),
	// which also ends their event streams, else hs.Shutdown would wait on
	// them.
	deadline := time.Now().Add(ShutdownGrace)
	for h.filter.activePosts() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	var wg sync.WaitGroup
	for _, s := range live {
		for ss := range s.srv.Sessions() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ss.Close()
			}()
		}
	}
	closed := make(chan struct{})
	go func() { wg.Wait(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(ShutdownGrace):
	}
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
	defer cancel()
	hs.Shutdown(sctx)
	hs.Close()
	var errs []error
	for _, s := range live {
		errs = append(errs, s.Close())
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return errors.Join(append(errs, err)...)
}

// cancelFilter keeps the answer of a request the client cancelled
// (notifications/cancelled) from reaching it, as the specification asks
// and as the stdio transport does (lineConn): the SDK's HTTP transport
// writes it, and clients report it as a response to an unknown request.
// It notes the cancellations in the POST bodies it passes on, and drops
// the response event for such a request from the session's streams.
type cancelFilter struct {
	next      http.Handler
	mu        sync.Mutex
	cancelled map[string]map[string]bool // session id → request ids (JSON)
	posts     int                        // POSTs being served
}

func (f *cancelFilter) activePosts() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.posts
}

// Bounds of the filter: a body larger than maxFilterBody is passed on
// unread (the SDK refuses it anyway), and a session keeps at most
// maxCancelled cancellations not yet matched by an answer.
const (
	maxFilterBody = mcp.DefaultMaxRequestBodyBytes
	maxCancelled  = 1024
)

func (f *cancelFilter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		f.mu.Lock()
		f.posts++
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			f.posts--
			f.mu.Unlock()
		}()
	}
	sid := r.Header.Get("Mcp-Session-Id")
	switch {
	case sid == "":
	case r.Method == http.MethodDelete:
		f.mu.Lock()
		delete(f.cancelled, sid)
		f.mu.Unlock()
	case r.Method == http.MethodPost:
		body, err := io.ReadAll(io.LimitReader(r.Body, maxFilterBody+1))
		if err != nil {
			http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
			return
		}
		if len(body) <= maxFilterBody {
			f.note(sid, body)
		}
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
		w = &filterWriter{ResponseWriter: w, f: f, sid: sid}
	}
	f.next.ServeHTTP(w, r)
}

// note records the request a notifications/cancelled names.
func (f *cancelFilter) note(sid string, body []byte) {
	var m struct {
		Method string `json:"method"`
		Params struct {
			RequestID any `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &m) != nil || m.Method != "notifications/cancelled" || m.Params.RequestID == nil {
		return
	}
	key, err := json.Marshal(m.Params.RequestID)
	if err != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	set := f.cancelled[sid]
	if set == nil {
		set = map[string]bool{}
		f.cancelled[sid] = set
	}
	if len(set) < maxCancelled {
		set[string(key)] = true
	}
}

// drop reports whether msg (one JSON-RPC message) answers a cancelled
// request of the session, and forgets the cancellation.
func (f *cancelFilter) drop(sid string, msg []byte) bool {
	var m struct {
		ID     any     `json:"id"`
		Method *string `json:"method"`
	}
	if json.Unmarshal(msg, &m) != nil || m.Method != nil || m.ID == nil {
		return false
	}
	key, err := json.Marshal(m.ID)
	if err != nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.cancelled[sid][string(key)] {
		return false
	}
	delete(f.cancelled[sid], string(key))
	return true
}

// filterWriter drops the answers of cancelled requests. The SDK writes
// each server-sent event with one Write ("event: ...\nid: ...\ndata:
// JSON\n\n"), and a JSON response as the whole body.
type filterWriter struct {
	http.ResponseWriter
	f   *cancelFilter
	sid string
}

func (w *filterWriter) Write(p []byte) (int, error) {
	msg := bytes.TrimSpace(p)
	if i := bytes.Index(p, []byte("data: ")); i >= 0 && (i == 0 || p[i-1] == '\n') {
		msg = bytes.TrimSpace(p[i+len("data: "):])
	}
	if len(msg) > 0 && msg[0] == '{' && w.f.drop(w.sid, msg) {
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

// Flush and Unwrap let the SDK flush each event through the wrapper
// (http.ResponseController).
func (w *filterWriter) Flush() {
	if fl, ok := w.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}

func (w *filterWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
