package mcpserver

import (
	"bytes"
	"context"
	"crypto/rand"
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
	// Token is the bearer token every request must carry (Authorization:
	// Bearer TOKEN); others get 401. Required: NewTokenFile makes one.
	Token string
	// IdleTimeout ends a session (and its sandbox) that received no request
	// for this long; 0: DefaultIdleTimeout.
	IdleTimeout time.Duration
	// MaxSessions bounds the sessions alive at once (each is a sandbox);
	// 0: DefaultMaxSessions.
	MaxSessions int
	// MaxConns bounds the connections open at once in each of two pools:
	// those that have not yet made an authenticated request, and those
	// that have (connPools); 0: DefaultMaxConns.
	MaxConns int
	// Logger receives the transport's log; nil discards it.
	Logger *slog.Logger
}

// DefaultIdleTimeout is how long an HTTP session lives without requests.
const DefaultIdleTimeout = 30 * time.Minute

// DefaultMaxSessions bounds the HTTP sessions (sandboxes) alive at once.
const DefaultMaxSessions = 64

// DefaultMaxConns bounds the HTTP connections open at once in each pool
// (connPools): 512 in all, the bound of a single pool before.
const DefaultMaxConns = 256

// Timeouts of a connection: a keep-alive connection between requests is
// closed after connIdleTimeout, a request's headers must arrive within
// headerTimeout and its body within bodyTimeout.
const (
	connIdleTimeout = 5 * time.Second
	headerTimeout   = 10 * time.Second
	bodyTimeout     = 30 * time.Second
)

// maxHeaderBytes bounds a request's headers (net/http's default is 1 MiB):
// an MCP request's are a few hundred bytes, and a connection without the
// token must not make the server read and hold a megabyte before it is
// refused (found by review).
const maxHeaderBytes = 64 << 10

// ErrNoToken refuses to serve a non-loopback address without a token.
var ErrNoToken = errors.New("serving MCP over HTTP on an address other machines reach needs a bearer token (--token-file): anyone who reaches it could run commands in the sandbox")

// ErrTokenRequired is an HTTP server configured without a bearer token.
var ErrTokenRequired = errors.New("mcpserver: serving MCP over HTTP needs a bearer token (HTTPConfig.Token): any local process or user could otherwise run commands in the sandbox")

// CheckListenAddr refuses an address that is not loopback when there is
// no token file the user chose (a token nsbox makes for the run is for
// local clients only). Only literal loopback addresses and "localhost"
// count as loopback: a name could resolve anywhere, and an empty host or
// 0.0.0.0 listens on every interface.
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

// isLoopbackHostPort is isLoopback of a HOST[:PORT] (a Host header, an
// address).
func isLoopbackHostPort(hp string) bool {
	if host, _, err := net.SplitHostPort(hp); err == nil {
		return isLoopback(host)
	}
	return isLoopback(hp)
}

// HTTPServer serves MCP sessions over HTTP.
type HTTPServer struct {
	cfg     HTTPConfig
	log     *slog.Logger
	handler http.Handler
	filter  *cancelFilter
	// versions answers the SDK's look-up of the protocol versions for a
	// request that makes no session: a server never connected.
	versions *mcp.Server

	mu      sync.Mutex
	live    map[*Server]bool
	bySID   map[string]*Server // MCP session id → its server
	closing bool
}

// NewHTTP returns an HTTP server for cfg.
func NewHTTP(cfg HTTPConfig) (*HTTPServer, error) {
	if cfg.Session == nil {
		return nil, errors.New("mcpserver: HTTPConfig.Session is required")
	}
	// No token, no server: loopback is no boundary (every local user and
	// every sandbox with the host's network reaches it).
	if cfg.Token == "" {
		return nil, ErrTokenRequired
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	h := &HTTPServer{cfg: cfg, log: cfg.Logger, live: map[*Server]bool{}, bySID: map[string]*Server{}}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.versions = mcp.NewServer(&mcp.Implementation{Name: "nsbox", Version: "dev"}, nil)
	var handler http.Handler = mcp.NewStreamableHTTPHandler(h.newSession, &mcp.StreamableHTTPOptions{
		// The SDK ends a session after this long without a request, and on
		// DELETE; either way its Server closes the sandbox (settle).
		SessionTimeout: cfg.IdleTimeout,
		Logger:         cfg.Logger,
	})
	h.filter = &cancelFilter{next: handler, h: h, cancelled: map[string]*cancelNotes{}}
	handler = h.filter
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
	// A request past both checks moves its connection to the
	// authenticated pool (connPools), which tokenless clients cannot fill.
	handler = auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(promoted(handler))
	h.handler = closeRefused(hostCheck(handler))
	return h, nil
}

// hostCheck refuses, before anything else reads the request, a request
// that reached a loopback address under a Host that is not loopback: a web
// page whose name was rebound to 127.0.0.1 (DNS rebinding; the MCP
// specification's security best practices). The SDK checks the same, but
// after the filters in front of it.
func hostCheck(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && la != nil {
			if isLoopbackHostPort(la.String()) && !isLoopbackHostPort(r.Host) {
				http.Error(w, fmt.Sprintf("Forbidden: invalid Host header %q", r.Host), http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// Handler is the http.Handler of the MCP endpoint.
func (h *HTTPServer) Handler() http.Handler { return h.handler }

// newSlot carries the Server made for one POST without a session id: the
// SDK asks for it twice in the request (its protocol versions, then the
// session's server), and it is settled once the request is served.
type newSlot struct {
	once sync.Once
	s    *Server
	// initialize: the request is an initialize, the only one that makes
	// a session. Any other POST without a session id (a client's
	// server/discover probe before it falls back to initialize) is
	// answered 400 and takes no session slot: one that did held it until
	// settle, after its answer, and the initialize that followed at once
	// found the server full (--max-sessions 1).
	initialize bool
}

type newSlotKey struct{}

// newSession gives the SDK the Server of a new MCP session. It is called
// for every request; only a POST without a session id (which the filter
// marks with a newSlot) can make a session, the others get a server that
// is never connected. nil answers 400.
func (h *HTTPServer) newSession(r *http.Request) *mcp.Server {
	slot, _ := r.Context().Value(newSlotKey{}).(*newSlot)
	if slot == nil {
		return h.versions
	}
	if !slot.initialize {
		return nil
	}
	slot.once.Do(func() { slot.s = h.makeServer(r) })
	if slot.s == nil {
		return nil
	}
	return slot.s.srv
}

// makeServer makes the Server of a session about to be made; it holds one
// of MaxSessions until settle (or the session's end) closes it.
func (h *HTTPServer) makeServer(r *http.Request) *Server {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closing {
		return nil
	}
	if len(h.live) >= h.cfg.MaxSessions {
		h.log.Warn("refusing a new MCP session: too many sessions", "limit", h.cfg.MaxSessions)
		return nil
	}
	cfg := h.cfg.Session()
	// The session id is chosen here, so that the filter knows the session
	// from its first answer on (a random 128-bit text, as the SDK's own).
	cfg.sessionID = rand.Text()
	s, err := New(cfg)
	if err != nil {
		h.log.Error("cannot make the server of a new MCP session", "error", err)
		return nil
	}
	s.served = true
	sid := cfg.sessionID
	h.live[s] = true
	h.bySID[sid] = s
	s.onClose = func() {
		h.mu.Lock()
		delete(h.live, s)
		delete(h.bySID, sid)
		h.mu.Unlock()
		h.filter.forget(sid)
	}
	h.log.Info("new MCP session", "remote", r.RemoteAddr)
	return s
}

// settle ties the Server made for a POST without a session id to the SDK
// session it made, once that POST is served: no session (a body that is no
// initialize, a failed initialize) closes the Server at once and frees its
// slot; a session closes it when it ends (DELETE, idle timeout). Only then
// does --eager start the sandbox, so that no request starts one for a
// session nobody can address.
func (h *HTTPServer) settle(slot *newSlot) {
	s := slot.s
	if s == nil {
		return
	}
	var ss *mcp.ServerSession
	for x := range s.srv.Sessions() {
		ss = x
		break
	}
	if ss == nil || ss.InitializeParams() == nil {
		s.Close()
		return
	}
	s.watching.Do(func() {
		go func() {
			ss.Wait()
			s.Close()
		}()
	})
	if !s.cfg.Eager {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		// A failure is logged by the start, and the first call tries
		// again.
		s.session(s.life)
	}()
}

// known reports whether sid is the id of a live session's server.
func (h *HTTPServer) known(sid string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.bySID[sid] != nil
}

// Serve serves on ln until ctx is cancelled, then stops accepting, answers
// the calls in flight with an error (as Server.Serve does) and closes every
// session's sandbox.
func (h *HTTPServer) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler: h.handler,
		// A client, with the token or without, holds a descriptor and a
		// goroutine only while it sends a request or waits for an answer:
		// slow headers and idle keep-alive connections are closed. (No
		// ReadTimeout: it would end event streams and long calls; the
		// body's deadline is the filter's.)
		ReadHeaderTimeout: headerTimeout,
		IdleTimeout:       connIdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ConnContext:       withPoolConn,
	}
	// At most MaxConns connections are open: clients cannot exhaust the
	// descriptors a new sandbox needs. They are counted in two pools,
	// unauthenticated and authenticated, so that clients without the
	// token cannot hold the slots of the one that has it (connPools).
	ln = &poolListener{Listener: ln, p: newConnPools(h.cfg.MaxConns)}
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
//
// It also reads every POST body before the SDK does, under a deadline, and
// marks a POST without a session id as one that may make a session
// (newSlot).
type cancelFilter struct {
	next      http.Handler
	h         *HTTPServer
	mu        sync.Mutex
	cancelled map[string]*cancelNotes // session id → cancelled requests
	posts     int                     // POSTs being served
}

// cancelNotes are the cancelled requests of one session not yet matched
// by an answer: set, and order (oldest first) to forget the oldest past
// maxCancelled.
type cancelNotes struct {
	set   map[string]bool
	order []string
}

func (f *cancelFilter) activePosts() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.posts
}

// Bounds of the filter: a body larger than maxFilterBody is refused (413),
// a session keeps at most maxCancelled cancellations not yet matched by an
// answer, and a request id longer than maxCancelID is not noted (a
// JSON-RPC id is a short string or a number).
const (
	maxFilterBody = mcp.DefaultMaxRequestBodyBytes
	maxCancelled  = 256
	maxCancelID   = 256
)

func (f *cancelFilter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		f.next.ServeHTTP(w, r)
		return
	}
	f.mu.Lock()
	f.posts++
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.posts--
		f.mu.Unlock()
	}()
	// The body is read whole, within bodyTimeout: a client that sends it
	// slowly (or never) does not hold its connection and goroutine for
	// good. The deadline is lifted once it is read, as the answer may take
	// as long as the call.
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(bodyTimeout))
	body, err := io.ReadAll(io.LimitReader(r.Body, maxFilterBody+1))
	rc.SetReadDeadline(time.Time{})
	if err != nil {
		http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(body) > maxFilterBody {
		http.Error(w, fmt.Sprintf("request body exceeds %d bytes", maxFilterBody), http.StatusRequestEntityTooLarge)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	sid := r.Header.Get("Mcp-Session-Id")
	if sid == "" {
		slot := &newSlot{initialize: isInitialize(body)}
		r = r.WithContext(context.WithValue(r.Context(), newSlotKey{}, slot))
		f.next.ServeHTTP(w, r)
		f.h.settle(slot)
		return
	}
	f.note(sid, body)
	f.next.ServeHTTP(&filterWriter{ResponseWriter: w, f: f, sid: sid}, r)
}

// forget drops the notes of a session that ended.
// isInitialize reports whether body is one JSON-RPC request whose method
// is initialize.
func isInitialize(body []byte) bool {
	var m struct {
		Method string `json:"method"`
	}
	return json.Unmarshal(body, &m) == nil && m.Method == "initialize"
}

func (f *cancelFilter) forget(sid string) {
	f.mu.Lock()
	delete(f.cancelled, sid)
	f.mu.Unlock()
}

// note records the request a notifications/cancelled names.
func (f *cancelFilter) note(sid string, body []byte) {
	var m struct {
		Method string `json:"method"`
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &m) != nil || m.Method != "notifications/cancelled" {
		return
	}
	// Only a short string or number is an id worth noting: whoever holds
	// the token must not grow the server's memory by sending long ones.
	if len(m.Params.RequestID) > maxCancelID || validID(m.Params.RequestID) == nil {
		return
	}
	var id any
	if json.Unmarshal(m.Params.RequestID, &id) != nil {
		return
	}
	key, err := json.Marshal(id)
	if err != nil {
		return
	}
	// Only for a session that exists (so at most MaxSessions of them), and
	// dropped when it ends (forget).
	if !f.h.known(sid) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.cancelled[sid]
	if n == nil {
		n = &cancelNotes{set: map[string]bool{}}
		f.cancelled[sid] = n
	}
	if n.set[string(key)] {
		return
	}
	if len(n.set) >= maxCancelled {
		// The oldest note goes: a cancellation of a request that never
		// existed is not kept forever.
		for len(n.order) > 0 && len(n.set) >= maxCancelled {
			delete(n.set, n.order[0])
			n.order = n.order[1:]
		}
	}
	if len(n.order) >= 2*maxCancelled {
		// Keep order as short as set: drop the ids already answered.
		kept := n.order[:0]
		for _, k := range n.order {
			if n.set[k] {
				kept = append(kept, k)
			}
		}
		n.order = kept
	}
	n.set[string(key)] = true
	n.order = append(n.order, string(key))
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
	n := f.cancelled[sid]
	if n == nil || !n.set[string(key)] {
		return false
	}
	delete(n.set, string(key))
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
