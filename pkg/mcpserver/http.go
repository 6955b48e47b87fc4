package mcpserver

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
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
	// The cancelled calls' answers go out on their open requests.
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
