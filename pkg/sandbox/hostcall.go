package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/nsbox/nsbox/pkg/ipc"
)

// HostCall is one request from inside the sandbox to a host API.
type HostCall struct {
	API    string
	Method string
	// Args is plain JSON data; it never holds a host object.
	Args ipc.Value
}

// HostFunc serves one host API method. It runs on the host, with the
// supervisor's rights: it must treat Args as hostile input. Its result must
// be plain data (ipc.Value), so no host object can reach the sandbox.
type HostFunc func(ctx context.Context, call HostCall) (ipc.Value, error)

// Handlers is a set of host API methods. It is safe for concurrent use, and
// methods may be added while sessions run.
type Handlers struct {
	mu    sync.RWMutex
	funcs map[string]HostFunc
}

// ErrHandlerExists is returned when a method is registered twice.
var ErrHandlerExists = errors.New("host API method already registered")

// NewHandlers returns an empty set.
func NewHandlers() *Handlers { return &Handlers{funcs: map[string]HostFunc{}} }

// Handle registers fn for api.method.
func (h *Handlers) Handle(api, method string, fn HostFunc) error {
	if api == "" || method == "" || strings.Contains(api, ".") || fn == nil {
		return fmt.Errorf("invalid host API method %q.%q", api, method)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	key := api + "." + method
	if _, ok := h.funcs[key]; ok {
		return fmt.Errorf("%w: %s", ErrHandlerExists, key)
	}
	h.funcs[key] = fn
	return nil
}

func (h *Handlers) lookup(key string) HostFunc {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.funcs[key]
}

// hostCallRequest and hostCallResult are the hostCall payloads.
type hostCallRequest struct {
	API    string          `json:"api"`
	Method string          `json:"method"`
	Args   json.RawMessage `json:"args,omitempty"`
}

type hostCallResult struct {
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// hostCallServer serves the hostCall sockets of one session's commands.
type hostCallServer struct {
	allow    map[string]bool
	handlers *Handlers
	audit    *auditLog
	session  string
	// forward, when set (the policy allows programs inside to define
	// tools), passes registerTool/unregisterTool to the worker.
	forward func(ctx context.Context, typ string, payload json.RawMessage) (json.RawMessage, error)

	mu    sync.Mutex
	peers map[*ipc.Peer]bool
	wg    sync.WaitGroup
}

func newHostCallServer(allow []string) *hostCallServer {
	s := &hostCallServer{allow: map[string]bool{}, peers: map[*ipc.Peer]bool{}}
	for _, a := range allow {
		s.allow[a] = true
	}
	return s
}

// hostCallConn is one command's hostCall socket.
type hostCallConn struct {
	child *os.File
}

func (c *hostCallConn) childFD() int { return int(c.child.Fd()) }
func (c *hostCallConn) closeChild()  { c.child.Close() }

// newConn makes the socket a command reaches the host through. The host end
// is served here directly: a call from inside is one round trip, and the
// worker never parses this traffic.
func (s *hostCallServer) newConn() (*hostCallConn, error) {
	host, child, err := ipc.Socketpair()
	if err != nil {
		return nil, err
	}
	if err := s.serve(host); err != nil {
		child.Close()
		return nil, err
	}
	return &hostCallConn{child: child}, nil
}

// maxHostCallConns bounds the connections a session's programs may open:
// a loop of connect messages cannot exhaust the supervisor.
const maxHostCallConns = 256

// serve answers hostCalls on one socket until it closes.
func (s *hostCallServer) serve(host *os.File) error {
	s.mu.Lock()
	n := len(s.peers)
	s.mu.Unlock()
	if n >= maxHostCallConns {
		host.Close()
		return fmt.Errorf("too many hostCall connections (at most %d)", maxHostCallConns)
	}
	conn, err := ipc.NewConn(host)
	if err != nil {
		return err
	}
	// Bounded: a program inside can hold at most 64 calls in flight and
	// send at most 4 MiB in one message.
	peer := ipc.NewPeer(conn, ipc.Options{MaxInFlight: 64, MaxMessage: 4 << 20})
	peer.Handle(ipc.TypeHostCall, s.serveCall)
	// connect hands us the end of a fresh private socketpair: a process
	// inside gets a connection of its own instead of sharing replies.
	peer.Handle(ipc.TypeConnect, s.connect)
	if s.forward != nil {
		for _, typ := range []string{ipc.TypeRegisterTool, ipc.TypeUnregisterTool, ipc.TypeListSessionDefinitions} {
			typ := typ
			peer.Handle(typ, func(ctx context.Context, req *ipc.Request) (any, error) {
				closeInts(req.FDs)
				return s.forward(ctx, typ, req.Payload)
			})
		}
	}
	s.mu.Lock()
	s.peers[peer] = true
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		peer.Serve()
		s.mu.Lock()
		delete(s.peers, peer)
		s.mu.Unlock()
	}()
	return nil
}

func (s *hostCallServer) connect(ctx context.Context, req *ipc.Request) (any, error) {
	if len(req.FDs) != 1 {
		closeInts(req.FDs)
		return nil, &ipc.RemoteError{Code: ipc.CodeBadRequest, Message: "connect needs exactly one fd"}
	}
	// Only a socket is accepted: NewConn checks SOCK_SEQPACKET.
	if err := s.serve(os.NewFile(uintptr(req.FDs[0]), "hostcall")); err != nil {
		return nil, &ipc.RemoteError{Code: ipc.CodeBadRequest, Message: err.Error()}
	}
	return nil, nil
}

func (s *hostCallServer) serveCall(ctx context.Context, req *ipc.Request) (any, error) {
	closeInts(req.FDs) // fds from inside are never used
	var call hostCallRequest
	if err := json.Unmarshal(req.Payload, &call); err != nil {
		return nil, &ipc.RemoteError{Code: ipc.CodeBadRequest, Message: "bad hostCall payload: " + err.Error()}
	}
	start := time.Now()
	key := call.API + "." + call.Method
	res := s.dispatch(ctx, key, call)
	s.audit.record(s.session, call, res, time.Since(start))
	return res, nil
}

func (s *hostCallServer) dispatch(ctx context.Context, key string, call hostCallRequest) hostCallResult {
	// The allowlist is checked before anything else: a method that is not
	// on it never reaches a handler, whatever handlers exist.
	if !s.allow[key] {
		return hostCallResult{Error: fmt.Sprintf("host API %s is not allowed by the policy", key)}
	}
	var fn HostFunc
	if s.handlers != nil {
		fn = s.handlers.lookup(key)
	}
	if fn == nil {
		return hostCallResult{Error: fmt.Sprintf("host API %s has no handler", key)}
	}
	var args ipc.Value = ipc.Null{}
	if len(call.Args) > 0 {
		v, err := ipc.ParseValue(call.Args)
		if err != nil {
			return hostCallResult{Error: "bad arguments: " + err.Error()}
		}
		args = v
	}
	out, err := runHostFunc(ctx, fn, HostCall{API: call.API, Method: call.Method, Args: args})
	if err != nil {
		return hostCallResult{Error: err.Error()}
	}
	data, err := ipc.MarshalValue(out)
	if err != nil {
		return hostCallResult{Error: "handler result is not plain data: " + err.Error()}
	}
	return hostCallResult{OK: true, Result: data}
}

// runHostFunc turns a panicking handler into an error for the caller: it
// gets an answer, never a hang, and the supervisor keeps running.
func runHostFunc(ctx context.Context, fn HostFunc, call HostCall) (v ipc.Value, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("host API %s.%s failed: %v", call.API, call.Method, r)
		}
	}()
	return fn(ctx, call)
}

func (s *hostCallServer) close() {
	s.mu.Lock()
	for p := range s.peers {
		p.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// auditLog writes one JSON line per hostCall. Values under keys that look
// secret are redacted before they are written.
type auditLog struct {
	mu sync.Mutex
	w  io.Writer
}

var secretKey = regexp.MustCompile(`(?i)(token|password|passwd|secret|key|credential|auth)`)

func (a *auditLog) record(session string, call hostCallRequest, res hostCallResult, d time.Duration) {
	if a == nil || a.w == nil {
		return
	}
	var args any
	if len(call.Args) > 0 && json.Unmarshal(call.Args, &args) != nil {
		args = "<invalid JSON>"
	}
	entry := map[string]any{
		"time":        time.Now().UTC().Format(time.RFC3339Nano),
		"session":     session,
		"kind":        "hostCall",
		"api":         call.API,
		"method":      call.Method,
		"args":        Redact(args),
		"ok":          res.OK,
		"duration_us": d.Microseconds(),
	}
	if res.Error != "" {
		entry["error"] = res.Error
	}
	a.write(entry)
}

// recordTool writes one line for a tool call.
func (a *auditLog) recordTool(session, name string, args json.RawMessage, rep *ipc.Reply, err error, d time.Duration) {
	if a == nil || a.w == nil {
		return
	}
	var argv any
	if len(args) > 0 && json.Unmarshal(args, &argv) != nil {
		argv = "<invalid JSON>"
	}
	entry := map[string]any{
		"time":        time.Now().UTC().Format(time.RFC3339Nano),
		"session":     session,
		"kind":        "tool",
		"tool":        name,
		"args":        Redact(argv),
		"duration_us": d.Microseconds(),
	}
	if err != nil {
		entry["ok"], entry["error"] = false, err.Error()
	} else if rep != nil {
		var res struct {
			Success bool    `json:"success"`
			Error   *string `json:"error"`
		}
		json.Unmarshal(rep.Payload, &res)
		entry["ok"] = res.Success
		if res.Error != nil {
			entry["error"] = *res.Error
		}
	}
	a.write(entry)
}

func (a *auditLog) write(entry map[string]any) {
	line, err := json.Marshal(entry)
	if err != nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.w.Write(append(line, '\n'))
}

// Redact returns v with the values of secret-looking keys (token, password,
// key, secret, credential, auth) replaced by "[REDACTED]", recursively.
func Redact(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if secretKey.MatchString(k) {
				out[k] = "[REDACTED]"
			} else {
				out[k] = Redact(e)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = Redact(e)
		}
		return out
	}
	return v
}
