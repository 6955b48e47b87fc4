// Package mcpserver serves the tools of one nsbox session over the Model
// Context Protocol (MCP), on the official Go SDK.
//
// One Server serves one MCP connection and owns at most one sandbox session
// at a time. The session is started lazily, by the first tools/call (or at
// once with Config.Eager), and closed when the connection ends. Before the
// session exists, tools/list answers with Config.Definitions, the tool set a
// new session starts with; from then on the session's worker is the source
// of truth: its definitions are re-read for every tools/list, and its
// toolsChanged events become notifications/tools/list_changed.
//
// The package does not print, exit or read flags; errors are values and log
// lines go to Config.Logger.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nsbox/nsbox/pkg/sandbox"
	"github.com/nsbox/nsbox/pkg/tools"
)

// Session is what the server needs of a running sandbox session.
// *sandbox.Session implements it.
type Session interface {
	// CallTool runs a tool in the session and returns its result object
	// ({success, output, error}). Cancelling ctx stops the tool, not the
	// session.
	CallTool(ctx context.Context, name string, args json.RawMessage, timeout time.Duration) (json.RawMessage, error)
	// ToolDefinitions lists the session's tools (a JSON array of
	// {name, description, parameters}).
	ToolDefinitions(ctx context.Context) (json.RawMessage, error)
	// OnToolsChanged subscribes to changes of the tool set.
	OnToolsChanged(fn func(sandbox.ToolsChanged)) (cancel func())
	// RegisterTool and UnregisterTool change the tool set at run time.
	RegisterTool(ctx context.Context, def json.RawMessage) error
	UnregisterTool(ctx context.Context, name string) error
	// Close ends the session and everything in it.
	Close() error
}

var _ Session = (*sandbox.Session)(nil)

// Starter starts a session. ctx lives as long as the server.
type Starter func(ctx context.Context) (Session, error)

// Definition is a tool definition as a session lists it.
type Definition struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	// Title and Annotations are taken from Config.Definitions only (the
	// host's own list): a session's list comes from inside the sandbox,
	// and a tool defined there must not call itself read-only to be run
	// without the user's consent.
	Title       string             `json:"title,omitempty"`
	Annotations *tools.Annotations `json:"annotations,omitempty"`
}

// Names of the tools the server itself serves when Config.AllowRegistration
// is set. They are reserved: a session tool of the same name is not listed.
const (
	RegisterToolName   = "register_tool"
	UnregisterToolName = "unregister_tool"
)

// DefaultMaxArgs bounds the arguments of one tool call.
const DefaultMaxArgs = 8 << 20

// sessionInFlight is how many requests a session's worker handles at once:
// the bound of its channel (ipc.Options.MaxInFlight, 64 by default, which
// the worker uses). Past it the worker refuses a request at once with "too
// many requests in flight".
const sessionInFlight = 64

// DefaultMaxConcurrentCalls is how many tool calls the server has in the
// session at once; more wait for a turn (as long as their client lets
// them) instead of being refused by the worker. It leaves a few of the
// worker's slots to the server's own requests (reading the tool
// definitions) and to calls whose answer has come back while the worker
// is still finishing them.
const DefaultMaxConcurrentCalls = sessionInFlight - 8

// DefaultProgressInterval is how often a running call reports progress when
// the client asked for it.
const DefaultProgressInterval = time.Second

// Config configures a Server.
type Config struct {
	// Start starts the session. Required.
	Start Starter
	// Definitions are the tools listed before the session exists: the
	// tool set a new session starts with (a JSON array of
	// {name, description, parameters}, as sandbox.WorkerTools lists it).
	Definitions json.RawMessage
	// Tools, when set, are the only tools of Definitions served (nsbox mcp
	// --tools); the others are neither listed nor callable. Tools defined
	// at run time (register_tool) are served whatever it says.
	Tools []string
	// Eager starts the session when Serve begins instead of on the first
	// tool call.
	Eager bool
	// AllowRegistration adds the register_tool and unregister_tool tools,
	// which define tools in the session at run time. Set it only when the
	// session's policy allows tool registration.
	AllowRegistration bool
	// RegistrationSchema is the input schema of register_tool (the run-time
	// tool definition the session's worker accepts). nil: a generic one.
	RegistrationSchema json.RawMessage
	// Timeout is passed to every CallTool (0: the session's default).
	Timeout time.Duration
	// ProgressInterval is the period of progress notifications
	// (0: DefaultProgressInterval).
	ProgressInterval time.Duration
	// MaxArgs bounds the arguments of a call in bytes (0: DefaultMaxArgs).
	MaxArgs int
	// MaxConcurrentCalls bounds the tool calls (register_tool and
	// unregister_tool included) in the session at once; the others wait
	// (0: DefaultMaxConcurrentCalls). It must stay below the session's
	// in-flight bound (64).
	MaxConcurrentCalls int
	// MaxMessage bounds one JSON-RPC message in bytes
	// (0: DefaultMaxMessage).
	MaxMessage int
	// Name, Version and Instructions describe the server to clients.
	Name, Version, Instructions string
	// Audit, when set, gets one JSON line per call of the server's own
	// tools (register_tool, unregister_tool); the session audits the rest
	// (sandbox.WithAudit).
	Audit io.Writer
	// AuditID names the session in those lines (as sandbox.WithID).
	AuditID string
	// Logger receives the server's log; nil discards it.
	Logger *slog.Logger
	// SDKLogger receives the MCP SDK's own log; nil discards it.
	SDKLogger *slog.Logger

	// Closed, when set, runs once the server is closed (its session gone):
	// to release what the configuration made for it.
	Closed func()

	// sessionID, when set, is the MCP session id the SDK gives the one
	// session of this server (HTTP: known before the session is made).
	sessionID string
}

// ErrClosed is returned once the server has been closed.
var ErrClosed = errors.New("the MCP server is shutting down")

// StartError is a session that could not start.
type StartError struct{ Err error }

func (e *StartError) Error() string { return "the sandbox could not start: " + e.Err.Error() }
func (e *StartError) Unwrap() error { return e.Err }

// Server is an MCP server for one connection.
type Server struct {
	cfg Config
	srv *mcp.Server
	log *slog.Logger

	life   context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	sess     Session
	unsub    func()
	starting *startAttempt
	closed   bool
	// closeDone is closed when Close has finished.
	closeDone chan struct{}
	served    bool
	syncing   sync.Once

	// syncMu orders reads of the session's definitions with their
	// application, so a slow read never overwrites a newer one.
	syncMu sync.Mutex
	listed map[string]string // tool name → fingerprint of what is served
	// builtin are the tools of Config.Definitions, by name: their title
	// and annotations, and whether Config.Tools lets them be served.
	builtin map[string]builtinTool
	dirty   chan struct{}
	// schemas holds the compiled input schema of each served tool.
	schemas sync.Map
	// slots holds one token per call in the session (a semaphore of
	// MaxConcurrentCalls).
	slots chan struct{}
	// queued counts the calls waiting in turn for a slot.
	queued atomic.Int32

	auditMu sync.Mutex

	// watching: the end of the SDK's session is watched (watchSession).
	watching sync.Once
	// onClose, when set, runs once the server is closed.
	onClose func()
}

type startAttempt struct {
	done chan struct{}
	sess Session
	err  error
}

// New returns a server for cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Start == nil {
		return nil, errors.New("mcpserver: Config.Start is required")
	}
	if cfg.MaxArgs <= 0 {
		cfg.MaxArgs = DefaultMaxArgs
	}
	if cfg.MaxMessage <= 0 {
		cfg.MaxMessage = DefaultMaxMessage
	}
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = DefaultProgressInterval
	}
	if cfg.MaxConcurrentCalls <= 0 {
		cfg.MaxConcurrentCalls = DefaultMaxConcurrentCalls
	}
	if cfg.Name == "" {
		cfg.Name = "nsbox"
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	var defs []Definition
	if len(cfg.Definitions) > 0 {
		var err error
		if defs, err = parseDefinitions(cfg.Definitions); err != nil {
			return nil, err
		}
	}
	builtin, err := builtinTools(defs, cfg.Tools)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:     cfg,
		log:     cfg.Logger,
		listed:  map[string]string{},
		builtin: builtin,
		dirty:   make(chan struct{}, 1),
		slots:   make(chan struct{}, cfg.MaxConcurrentCalls),

		closeDone: make(chan struct{}),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	sdkLog := cfg.SDKLogger
	if sdkLog == nil {
		sdkLog = slog.New(slog.DiscardHandler)
	}
	s.life, s.cancel = context.WithCancel(context.Background())
	opts := &mcp.ServerOptions{
		Instructions: cfg.Instructions,
		Logger:       sdkLog,
		// Tools only, and they may change while the connection lives.
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
	}
	if cfg.sessionID != "" {
		id := cfg.sessionID
		opts.GetSessionID = func() string { return id }
	}
	s.srv = mcp.NewServer(&mcp.Implementation{Name: cfg.Name, Title: "nsbox sandbox", Version: cfg.Version}, opts)
	s.srv.AddReceivingMiddleware(s.middleware)
	if cfg.AllowRegistration {
		s.addRegistrationTools()
	}
	s.syncMu.Lock()
	s.apply(defs)
	s.syncMu.Unlock()
	return s, nil
}

// Serve speaks MCP over in and out (newline-delimited JSON-RPC, the stdio
// transport) until the input ends or ctx is cancelled, then closes the
// session. A Server serves once.
//
// Every request read is answered before Serve returns: when the input ends,
// the requests in flight run to their end first. When ctx is cancelled (the
// process got SIGTERM), no further request is read, the calls in flight are
// cancelled and answered with an error (reason server_closing), and the
// session is closed.
func (s *Server) Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	if err := s.serveOnce(); err != nil {
		return err
	}
	conn := newLineConn(out)
	t := &lineTransport{in: in, out: out, max: s.cfg.MaxMessage, conn: conn}
	// The SDK's run context is not ctx: cancelling it closes the
	// connection at once, before the cancelled calls' answers are written.
	runCtx, cancelRun := context.WithCancel(context.Background())
	defer cancelRun()
	go func() {
		select {
		case <-ctx.Done():
		case <-runCtx.Done():
			return
		}
		s.Shutdown()
		conn.Stop()
		// A backstop: answers that cannot be written in time (a client
		// that does not read) are not waited for.
		select {
		case <-time.After(ShutdownGrace):
			cancelRun()
		case <-runCtx.Done():
		}
	}()
	err := s.srv.Run(runCtx, t)
	cancelRun()
	closeErr := s.Close()
	if err != nil && (disconnected(err) || ctx.Err() != nil || errors.Is(err, context.Canceled)) {
		err = nil
	}
	return errors.Join(err, closeErr)
}

// ShutdownGrace bounds how long Serve waits, once ctx is cancelled, for the
// answers of the cancelled calls to be written.
const ShutdownGrace = 2 * time.Second

func (s *Server) serveOnce() error {
	s.mu.Lock()
	if s.served || s.closed {
		s.mu.Unlock()
		return errors.New("mcpserver: Serve called twice, or after Close")
	}
	s.served = true
	s.mu.Unlock()
	if s.cfg.Eager {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			// A failure is logged by the start, and the first call tries
			// again.
			s.session(s.life)
		}()
	}
	return nil
}

// Shutdown cancels the calls in flight (they are answered with an error
// whose reason is server_closing) and refuses new ones; Close ends the
// session.
func (s *Server) Shutdown() { s.cancel() }

// callContext is the context a call runs in: the request's, also cancelled
// (with cause ErrClosed) when the server shuts down.
func (s *Server) callContext(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(s.life, func() { cancel(ErrClosed) })
	return ctx, func() {
		stop()
		cancel(nil)
	}
}

// cause is err, or ErrClosed when the call ended because the server shuts
// down.
func cause(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(context.Cause(ctx), ErrClosed) {
		return ErrClosed
	}
	return err
}

// disconnected reports the ways a client ends a stdio connection: closing
// our input, or going away while we write.
func disconnected(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) || errors.Is(err, syscall.EPIPE)
}

// Close ends the session (if one runs) and waits for the server's own
// goroutines. It is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		// A second caller returns once the first is done: the session is
		// gone when Close returns, whoever called first.
		<-s.closeDone
		return nil
	}
	s.closed = true
	defer close(s.closeDone)
	s.cancel()
	st := s.starting
	s.mu.Unlock()
	if st != nil {
		// A start in progress closes its own session when it sees closed.
		<-st.done
	}
	s.mu.Lock()
	sess, unsub := s.sess, s.unsub
	s.sess, s.unsub = nil, nil
	s.mu.Unlock()
	var err error
	if sess != nil {
		unsub()
		err = sess.Close()
		s.log.Info("sandbox session closed")
	}
	s.wg.Wait()
	if s.onClose != nil {
		s.onClose()
	}
	if s.cfg.Closed != nil {
		s.cfg.Closed()
	}
	return err
}

// watchSession closes the server, and so the sandbox, when the SDK's
// session ends: over HTTP that is a DELETE from the client or the idle
// timeout, and no Serve call is there to notice.
func (s *Server) watchSession(req mcp.Request) {
	ss, ok := req.GetSession().(*mcp.ServerSession)
	if !ok || ss == nil {
		return
	}
	s.watching.Do(func() {
		go func() {
			ss.Wait()
			s.Close()
		}()
	})
}

// session returns the running session, starting it if needed. Concurrent
// callers share one start; a start that failed is tried again by the next
// call.
func (s *Server) session(ctx context.Context) (Session, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	if s.sess != nil {
		sess := s.sess
		s.mu.Unlock()
		return sess, nil
	}
	st := s.starting
	if st == nil {
		st = &startAttempt{done: make(chan struct{})}
		s.starting = st
		s.wg.Add(1)
		// The start is not the caller's: a cancelled first call does not
		// waste it.
		go s.runStart(st)
	}
	s.mu.Unlock()
	select {
	case <-st.done:
		return st.sess, st.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *Server) runStart(st *startAttempt) {
	defer s.wg.Done()
	defer close(st.done)
	begin := time.Now()
	sess, err := s.cfg.Start(s.life)
	if err != nil {
		s.mu.Lock()
		s.starting = nil
		s.mu.Unlock()
		if s.life.Err() != nil {
			st.err = ErrClosed
			return
		}
		st.err = &StartError{Err: err}
		s.log.Error("sandbox session did not start", "error", err)
		return
	}
	// Subscribed before the first read of the definitions: no change can
	// fall between the two.
	unsub := sess.OnToolsChanged(func(sandbox.ToolsChanged) { s.markDirty() })
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.sess, s.unsub = sess, unsub
	}
	s.starting = nil
	s.mu.Unlock()
	if closed {
		unsub()
		sess.Close()
		st.err = ErrClosed
		return
	}
	s.syncing.Do(func() {
		s.wg.Add(1)
		go s.syncLoop()
	})
	if err := s.syncTools(s.life); err != nil {
		s.log.Warn("cannot read the session's tool definitions", "error", err)
	}
	s.log.Info("sandbox session ready", "took", time.Since(begin).Round(time.Millisecond))
	st.sess = sess
}

// dropSession forgets a session whose worker has died, so that the next call
// starts a new one, and releases what it held.
func (s *Server) dropSession(sess Session) {
	s.mu.Lock()
	if s.sess != sess {
		s.mu.Unlock()
		return
	}
	unsub := s.unsub
	s.sess, s.unsub = nil, nil
	s.mu.Unlock()
	unsub()
	if err := sess.Close(); err != nil {
		s.log.Warn("cleaning up the ended session", "error", err)
	}
	s.log.Warn("the sandbox session ended unexpectedly; the next tool call starts a new one")
}

// turn waits until the call may go to the session: at most
// MaxConcurrentCalls are there at once, so a burst of calls from a client
// queues here instead of being refused by the worker's in-flight bound.
// The wait ends with the call's context (a client's cancellation or
// deadline) or the server. release gives the turn back.
func (s *Server) turn(ctx context.Context) (release func(), err error) {
	s.queued.Add(1)
	defer s.queued.Add(-1)
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.life.Done():
		return nil, ErrClosed
	}
	return func() { <-s.slots }, nil
}

func (s *Server) running() Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sess
}

func (s *Server) markDirty() {
	select {
	case s.dirty <- struct{}{}:
	default:
	}
}

// syncLoop applies toolsChanged events. Each event only marks the tool set
// dirty: the definitions are read again from the worker, so events that
// arrive late or out of order never roll the list back.
func (s *Server) syncLoop() {
	defer s.wg.Done()
	for {
		select {
		case <-s.life.Done():
			return
		case <-s.dirty:
			if err := s.syncTools(s.life); err != nil && s.life.Err() == nil {
				s.log.Warn("cannot read the session's tool definitions", "error", err)
			}
		}
	}
}

// syncTools reads the session's definitions and serves exactly those.
func (s *Server) syncTools(ctx context.Context) error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	sess := s.running()
	if sess == nil {
		return nil
	}
	raw, err := sess.ToolDefinitions(ctx)
	if err != nil {
		if errors.Is(err, sandbox.ErrClosed) {
			go s.dropSession(sess)
		}
		return err
	}
	defs, err := parseDefinitions(raw)
	if err != nil {
		return err
	}
	s.apply(defs)
	return nil
}

func (s *Server) known(name string) bool {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	_, ok := s.listed[name]
	return ok
}

// middleware keeps the SDK's tool table in step with the session before the
// SDK answers from it.
func (s *Server) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		s.watchSession(req)
		switch method {
		case "tools/list":
			// During a session the worker is the source of truth.
			if s.running() != nil {
				if err := s.syncTools(ctx); err != nil {
					s.log.Warn("cannot read the session's tool definitions", "error", err)
				}
			}
		case "tools/call":
			// A tool registered inside the session is callable as soon as
			// its registration returned, even if the toolsChanged event
			// has not been applied yet.
			if r, ok := req.(*mcp.CallToolRequest); ok && r.Params != nil && !s.reserved(r.Params.Name) &&
				!s.known(r.Params.Name) && s.running() != nil {
				if err := s.syncTools(ctx); err != nil {
					s.log.Warn("cannot read the session's tool definitions", "error", err)
				}
			}
		}
		return next(ctx, method, req)
	}
}

func (s *Server) reserved(name string) bool {
	return s.cfg.AllowRegistration && (name == RegisterToolName || name == UnregisterToolName)
}

func parseDefinitions(raw json.RawMessage) ([]Definition, error) {
	var defs []Definition
	if err := json.Unmarshal(raw, &defs); err != nil {
		return nil, fmt.Errorf("tool definitions: %v", err)
	}
	return defs, nil
}

// fingerprint identifies what a definition looks like to a client.
func fingerprint(d Definition) string {
	params := d.Parameters
	var v any
	if json.Unmarshal(params, &v) == nil {
		params, _ = json.Marshal(v) // canonical: sorted keys, no spaces
	}
	ann, _ := json.Marshal(d.Annotations)
	return d.Description + "\x00" + string(params) + "\x00" + d.Title + "\x00" + string(ann)
}

type builtinTool struct {
	title  string
	ann    *tools.Annotations
	served bool
}

// ErrUnknownTool is a name in Config.Tools that no tool has.
var ErrUnknownTool = errors.New("unknown tool")

func builtinTools(defs []Definition, choose []string) (map[string]builtinTool, error) {
	out := make(map[string]builtinTool, len(defs))
	for _, d := range defs {
		out[d.Name] = builtinTool{title: d.Title, ann: d.Annotations, served: choose == nil}
	}
	for _, name := range choose {
		b, ok := out[name]
		if !ok {
			return nil, fmt.Errorf("%w %q", ErrUnknownTool, name)
		}
		b.served = true
		out[name] = b
	}
	return out, nil
}

// apply serves exactly defs (plus the server's own tools). The caller holds
// syncMu. Every change makes the SDK send notifications/tools/list_changed
// (debounced).
func (s *Server) apply(defs []Definition) {
	want := map[string]bool{}
	for _, d := range defs {
		if s.reserved(d.Name) {
			s.log.Warn("a session tool has a name the MCP server reserves; it is not listed", "tool", d.Name)
			continue
		}
		if want[d.Name] {
			continue
		}
		b, isBuiltin := s.builtin[d.Name]
		if isBuiltin && !b.served {
			continue // not chosen (Config.Tools)
		}
		// Presentation from the host's list only (see Definition).
		d.Title, d.Annotations = b.title, b.ann
		fp := fingerprint(d)
		if old, ok := s.listed[d.Name]; ok && old == fp {
			want[d.Name] = true
			continue
		}
		tool, err := toMCPTool(d)
		if err != nil {
			s.log.Warn("a session tool cannot be served over MCP", "tool", d.Name, "error", err)
			continue
		}
		if err := s.addTool(tool, s.sessionToolHandler(d.Name)); err != nil {
			s.log.Warn("a session tool cannot be served over MCP", "tool", d.Name, "error", err)
			continue
		}
		s.setSchema(d.Name, d.Parameters)
		s.listed[d.Name] = fp
		want[d.Name] = true
	}
	var gone []string
	for name := range s.listed {
		if !want[name] {
			gone = append(gone, name)
			delete(s.listed, name)
			s.schemas.Delete(name)
		}
	}
	if len(gone) > 0 {
		s.srv.RemoveTools(gone...)
	}
}

// addTool is Server.AddTool with its panics (a schema the SDK refuses)
// turned into errors: a tool defined inside the sandbox must not take the
// server down.
func (s *Server) addTool(t *mcp.Tool, h mcp.ToolHandler) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	s.srv.AddTool(t, h)
	return nil
}
