package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

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
// Session.Close waits for the handlers running for its session: a HostFunc
// must not call Close of the session it serves (neither would return); it
// calls `go s.Close()` instead.
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

func (h *Handlers) lookup(key []byte) HostFunc {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.funcs[string(key)]
}

// hostCallRequest and hostCallResult are the hostCall payloads.
type hostCallRequest struct {
	API    string          `json:"api"`
	Method string          `json:"method"`
	Args   json.RawMessage `json:"args,omitempty"`
	// api and method as sent, before API and Method are set from them.
	// Here, not in variables of serveCall, so that decoding into them
	// allocates nothing more (call is on the heap already).
	api, method json.RawMessage
}

type hostCallResult struct {
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// hostCallServer serves the hostCall sockets of one session's commands.
type hostCallServer struct {
	// allow maps each allowed "api.method" to itself: a call's API and
	// Method are cut from the stored key, so an allowed call allocates no
	// strings for them.
	allow    map[string]string
	handlers *Handlers
	audit    *auditLog
	session  string
	// forward, when set (the policy allows programs inside to define
	// tools), passes registerTool/unregisterTool to the worker.
	forward func(ctx context.Context, typ string, payload json.RawMessage) (json.RawMessage, error)

	// budget is shared by every hostCall connection of the session: see
	// hostCallBudgetBytes.
	budget *ipc.Budget

	mu    sync.Mutex
	peers map[*ipc.Peer]bool
	// connected counts the open connections that programs opened with
	// connect messages; maxHostCallConns bounds it.
	connected int
	wg        sync.WaitGroup
}

func newHostCallServer(allow []string) *hostCallServer {
	s := &hostCallServer{
		allow:  map[string]string{},
		peers:  map[*ipc.Peer]bool{},
		budget: ipc.NewBudget(hostCallBudgetBytes, hostCallGoroutines),
	}
	for _, a := range allow {
		s.allow[a] = a
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
	// Not counted against maxHostCallConns: this socket is the host's
	// own, one per command it starts, so the commands bound them. Counted,
	// a background program that opened that many connections would make
	// every later Exec fail.
	if err := s.serve(host, false); err != nil {
		child.Close()
		return nil, fmt.Errorf("hostCall socket for the command: %w", err)
	}
	return &hostCallConn{child: child}, nil
}

// hostCallInline is how long a hostCall run on the socket's reading
// goroutine may hold back the calls behind it before another goroutine
// reads them.
const hostCallInline = 100 * time.Microsecond

// maxHostCallConns bounds the connections a session's programs may open
// with connect messages: a loop of them cannot exhaust the supervisor's
// fds and goroutines. The socket of each command the host starts is not
// counted (see newConn).
const maxHostCallConns = 256

// hostCallBudgetBytes and hostCallGoroutines bound what the supervisor
// holds for all the hostCall connections of one session together: the
// bytes of messages being reassembled, of requests being handled and of
// large replies being written, and the goroutines beyond each
// connection's reader (see ipc.Budget). Per connection the bounds are
// 64 calls in flight and 4 MiB a message; without a bound per session a
// program with maxHostCallConns connections could make the supervisor
// hold a thousand times that (half-sent messages, replies it never
// reads), outside the sandbox's memory limit. 64 MiB is 16 messages of
// the largest size in flight at once; 256 goroutines are 4 connections'
// worth of 64 calls in flight, past which calls wait rather than fail.
const (
	hostCallBudgetBytes = 64 << 20
	hostCallGoroutines  = 256
)

// errTooManyHostCallConns refuses a connect past maxHostCallConns.
var errTooManyHostCallConns = fmt.Errorf("connect refused: the session's programs already hold %d open hostCall connections, the most allowed; close one first", maxHostCallConns)

// serve answers hostCalls on one socket until it closes. counted says the
// connection was opened by a program inside (a connect message), which
// maxHostCallConns bounds.
func (s *hostCallServer) serve(host *os.File, counted bool) error {
	if counted {
		// Security: the check and the count are one step under mu, so
		// concurrent connects (one per connection being read) cannot
		// pass the bound together.
		s.mu.Lock()
		if s.connected >= maxHostCallConns {
			s.mu.Unlock()
			refuseConn(host, errTooManyHostCallConns)
			return errTooManyHostCallConns
		}
		s.connected++
		s.mu.Unlock()
	}
	conn, err := ipc.NewConn(host)
	if err != nil {
		if counted {
			s.mu.Lock()
			s.connected--
			s.mu.Unlock()
		}
		return err
	}
	// Bounded: a program inside can hold at most 64 calls in flight and
	// send at most 4 MiB in one message per connection, and all the
	// session's connections together share s.budget.
	peer := ipc.NewPeer(conn, ipc.Options{MaxInFlight: 64, MaxMessage: 4 << 20, InlineBudget: hostCallInline, Budget: s.budget})
	// Calls run on the reading goroutine, one after the other, while no
	// handler goroutine holds one (no hand-off per call, also for a
	// program that keeps several in flight); one whose handler takes
	// longer than hostCallInline lets the next calls on this socket be
	// read by another goroutine, and those go to handler goroutines
	// while it runs. Neither handler calls back over the socket.
	peer.HandleInline(ipc.TypeHostCall, s.serveCall)
	// connect hands us the end of a fresh private socketpair: a process
	// inside gets a connection of its own instead of sharing replies.
	peer.HandleInline(ipc.TypeConnect, s.connect)
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
		if counted {
			s.connected--
		}
		s.mu.Unlock()
	}()
	return nil
}

// refuseConn closes a connection refused before it is served, after
// telling its other end why with an error message: a connect sent as a
// notification (as nsbox call sends it) gets no reply, and the client sees
// this message on its new socket before the hang-up. The send never
// blocks: the socket comes from inside.
func refuseConn(f *os.File, err error) {
	fd := int(f.Fd())
	if typ, terr := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE); terr == nil && typ == unix.SOCK_SEQPACKET {
		msg, _ := json.Marshal(&ipc.Envelope{Type: ipc.TypeError, Error: &ipc.ErrorBody{Code: ipc.CodeDenied, Message: err.Error()}})
		unix.Sendmsg(fd, msg, nil, nil, unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL)
	}
	f.Close()
}

func (s *hostCallServer) connect(ctx context.Context, req *ipc.Request) (any, error) {
	if len(req.FDs) != 1 {
		closeInts(req.FDs)
		return nil, &ipc.RemoteError{Code: ipc.CodeBadRequest, Message: "connect needs exactly one fd"}
	}
	// Only a socket is accepted: NewConn checks SOCK_SEQPACKET.
	if err := s.serve(os.NewFile(uintptr(req.FDs[0]), "hostcall"), true); err != nil {
		code := ipc.CodeBadRequest
		if err == errTooManyHostCallConns {
			code = ipc.CodeDenied
		}
		return nil, &ipc.RemoteError{Code: code, Message: err.Error()}
	}
	return nil, nil
}

func (s *hostCallServer) serveCall(ctx context.Context, req *ipc.Request) (any, error) {
	closeInts(req.FDs) // fds from inside are never used
	var call hostCallRequest
	err := ipc.DecodeFields(req.Payload, []ipc.Field{
		{Name: "api", Raw: &call.api},
		{Name: "method", Raw: &call.method},
		{Name: "args", Raw: &call.Args},
	})
	var api, method []byte
	if err == nil && (isNull(call.api) || isNull(call.method)) {
		// A null member leaves the field as an earlier duplicate set it,
		// which the raw value no longer shows: decoded again, the slow way.
		err = ipc.DecodeFields(req.Payload, []ipc.Field{
			{Name: "api", String: &call.API},
			{Name: "method", String: &call.Method},
		})
		api, method = []byte(call.API), []byte(call.Method)
	} else if err == nil {
		api, err = rawString("api", call.api)
		if err == nil {
			method, err = rawString("method", call.method)
		}
	}
	if err != nil {
		return nil, &ipc.RemoteError{Code: ipc.CodeBadRequest, Message: "bad hostCall payload: " + err.Error()}
	}
	var start time.Time
	if s.audit.enabled() {
		start = time.Now()
	}
	out, args, charged, errMsg := s.dispatch(ctx, &call, api, method)
	// The parsed arguments are charged to the session's budget while the
	// handler and the audit hold them (ipc.ParseValueBudget).
	defer s.budget.Give(charged)
	var result json.RawMessage
	if errMsg == "" {
		// {"ok":true,"result":...}, the text json.Marshal gives for a
		// hostCallResult, with the result encoded once.
		buf := make([]byte, 0, 64)
		buf = append(buf, `{"ok":true,"result":`...)
		buf, err := ipc.AppendValue(buf, out)
		if err != nil {
			errMsg = "handler result is not plain data: " + err.Error()
		} else {
			result = append(buf, '}')
		}
	}
	if s.audit.enabled() {
		s.audit.record(s.session, &call, args, errMsg, time.Since(start))
	}
	if errMsg != "" {
		return hostCallResult{Error: errMsg}, nil
	}
	return result, nil
}

func isNull(raw json.RawMessage) bool { return len(raw) > 0 && raw[0] == 'n' }

// rawString returns the text of the JSON string raw (a member of a payload
// DecodeFields has checked, not null): a sub-slice when it is plain ASCII
// without escapes, else decoded as encoding/json decodes it (invalid UTF-8
// becomes U+FFFD, as before); nothing when raw is absent.
func rawString(name string, raw json.RawMessage) ([]byte, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	if raw[0] != '"' {
		return nil, fmt.Errorf("%s is not a string", name)
	}
	plain := true
	for _, c := range raw {
		if c == '\\' || c >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if plain {
		return raw[1 : len(raw)-1], nil
	}
	var str string
	if err := json.Unmarshal(raw, &str); err != nil {
		return nil, err
	}
	return []byte(str), nil
}

// dispatch checks the call (api.method) against the policy and runs its
// handler; it fills call.API and call.Method. It returns the handler's
// result, the parsed arguments (nil when they were not parsed), the bytes
// of the session's budget they are charged (given back by the caller)
// and, for a failed call, the message the caller gets.
func (s *hostCallServer) dispatch(ctx context.Context, call *hostCallRequest, api, method []byte) (out, args ipc.Value, charged int64, errMsg string) {
	// "api.method" without allocating: map lookups by string(bytes) do
	// not copy.
	var keyBuf [64]byte
	key := append(append(append(keyBuf[:0], api...), '.'), method...)
	// The allowlist is checked before anything else: a method that is not
	// on it never reaches a handler, whatever handlers exist.
	allowed, ok := s.allow[string(key)]
	if !ok {
		call.API, call.Method = string(api), string(method)
		// The name as sent may be megabytes: the message quotes its start.
		return nil, nil, 0, fmt.Sprintf("host API %s is not allowed by the policy", ipc.Clip(string(key), 128))
	}
	// allowed equals key byte for byte, so its two parts are exactly the
	// api and method the caller sent (an allowed name with several dots
	// is cut where this call's api ends).
	call.API, call.Method = allowed[:len(api)], allowed[len(api)+1:]
	var fn HostFunc
	if s.handlers != nil {
		fn = s.handlers.lookup(key)
	}
	if fn == nil {
		// string(key): key itself stays in keyBuf, on the stack.
		return nil, nil, 0, fmt.Sprintf("host API %s has no handler", string(key))
	}
	args = ipc.Null{}
	if len(call.Args) > 0 {
		// Security: parsed, a message of small values holds ~20 times
		// its size; charged as it is parsed, the session's budget bounds
		// it like the message itself (found by review: two 4 MiB calls
		// held 184 MiB while the budget counted 8).
		v, n, err := ipc.ParseValueBudget(call.Args, s.budget)
		if err != nil {
			return nil, nil, 0, "bad arguments: " + err.Error()
		}
		args, charged = v, n
	}
	out, err := runHostFunc(ctx, fn, HostCall{API: call.API, Method: call.Method, Args: args})
	if err != nil {
		return nil, args, charged, err.Error()
	}
	return out, args, charged, ""
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

func (a *auditLog) enabled() bool { return a != nil && a.w != nil }

var secretKey = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)(token|password|passwd|secret|key|credential|auth)`)
})

// secretWords are secretKey's alternatives, for keys in plain ASCII.
var secretWords = []string{"token", "password", "passwd", "secret", "key", "credential", "auth"}

// isSecretKey reports whether values under key are redacted: key contains
// one of secretWords, in any case. A key with non-ASCII characters goes
// through the regexp, whose case folding also matches, for example, the
// Kelvin sign for k and the long s for s: no spelling slips through.
func isSecretKey(key string) bool {
	var lower [64]byte
	if len(key) > len(lower) {
		return secretKey().MatchString(key)
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c >= utf8.RuneSelf {
			return secretKey().MatchString(key)
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower[i] = c
	}
	k := lower[:len(key)]
	for _, w := range secretWords {
		if bytes.Contains(k, []byte(w)) {
			return true
		}
	}
	return false
}

// auditBuffers holds line buffers between hostCalls.
var auditBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// maxAuditArgs bounds the JSON text of the args written in one audit line,
// and maxAuditText each of its strings that come from inside (api, method,
// error). Longer ones are cut, with a marker and their full length.
const (
	maxAuditArgs = 4 << 10
	maxAuditText = 1 << 10
)

// maxKeptAuditBuffer bounds the line buffer kept in auditBuffers: one long
// line does not pin its memory.
const maxKeptAuditBuffer = 64 << 10

// appendAuditText appends s as a JSON string, cut to maxAuditText bytes
// (at a character boundary) with a marker naming its length when longer.
func appendAuditText(b []byte, s string) []byte {
	if len(s) <= maxAuditText {
		return ipc.AppendString(b, s)
	}
	return ipc.AppendString(b, cutUTF8(s, maxAuditText)+"…[truncated, "+strconv.Itoa(len(s))+" bytes]")
}

// cutUTF8 returns s cut to at most n bytes, not inside a character.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// record writes the line for one hostCall: {api, args, duration_us,
// error?, kind, method, ok, session, time}, members in this (sorted) order,
// the text json.Marshal gives for the same map. args is the parsed Value,
// or nil when the call failed before its arguments were parsed.
func (a *auditLog) record(session string, call *hostCallRequest, args ipc.Value, errMsg string, d time.Duration) {
	if !a.enabled() {
		return
	}
	bp := auditBuffers.Get().(*[]byte)
	defer auditBuffers.Put(bp)
	b := (*bp)[:0]
	b = append(b, `{"api":`...)
	b = appendAuditText(b, call.API)
	b = append(b, `,"args":`...)
	// Security: the args written are cut at maxAuditArgs bytes of JSON
	// text. A program inside chooses them (up to 4 MiB a call, also for a
	// call the policy refuses), and each call writes a line to the host's
	// audit log: uncut, a loop of refused calls fills the host's disk at
	// the speed of the socket. Redaction comes first, so a cut never
	// shows what redaction hides.
	start := len(b)
	stop := start + maxAuditArgs
	switch {
	case args != nil:
		b = appendRedacted(b, args, stop)
	case len(call.Args) == 0:
		b = append(b, "null"...)
	default:
		// Not parsed (refused before, or not a Value): read here as a
		// stream, only as far as the line takes. Decoding all of it
		// (encoding/json into maps, Redact's copy, json.Marshal) made
		// 4 MiB of "[{},{},…]" allocate ~300 MiB outside the session's
		// budget for a 4 KiB line, 16 calls at a time (review 40).
		b = appendRedactedJSON(b, call.Args, stop)
	}
	if len(b) > stop {
		// Cut: the start of the (redacted) JSON text, as a string, then
		// how long the args were as sent.
		text := cutUTF8(string(b[start:stop+1]), maxAuditArgs) // a copy: b is rewritten
		b = ipc.AppendString(b[:start], text+"…")
		b = append(b, `,"args_bytes":`...)
		b = strconv.AppendInt(b, int64(len(call.Args)), 10)
		b = append(b, `,"args_truncated":true`...)
	}
	b = append(b, `,"duration_us":`...)
	b = strconv.AppendInt(b, d.Microseconds(), 10)
	if errMsg != "" {
		b = append(b, `,"error":`...)
		// One cut, naming the error's own length (redacting cut it
		// to what can reach the line already).
		text, cut := redactErrorCut(errMsg, args, maxAuditText)
		if cut {
			text += "…[truncated, " + strconv.Itoa(len(errMsg)) + " bytes]"
		}
		b = ipc.AppendString(b, text)
	}
	b = append(b, `,"kind":"hostCall","method":`...)
	b = appendAuditText(b, call.Method)
	b = append(b, `,"ok":`...)
	b = strconv.AppendBool(b, errMsg == "")
	b = append(b, `,"session":`...)
	b = ipc.AppendString(b, session)
	b = append(b, `,"time":"`...)
	b = time.Now().UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, "\"}\n"...)
	if cap(b) <= maxKeptAuditBuffer {
		*bp = b
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.w.Write(b)
}

// appendRedacted appends v as JSON with the values under secret-looking
// keys replaced by "[REDACTED]", at any depth: what json.Marshal(Redact(v))
// gives for the same data. Once b is longer than stop it may end early,
// with text that is only a prefix of that (the caller cuts it).
func appendRedacted(b []byte, v ipc.Value, stop int) []byte {
	if len(b) > stop {
		return b
	}
	switch x := v.(type) {
	case ipc.Map:
		if len(x) == 0 {
			return append(b, "{}"...)
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for i, k := range keys {
			if i == 0 {
				b = append(b, '{')
			} else {
				b = append(b, ',')
			}
			b = appendStringUpTo(b, k, stop)
			b = append(b, ':')
			if isSecretKey(k) {
				b = append(b, `"[REDACTED]"`...)
			} else {
				b = appendRedacted(b, x[k], stop)
			}
			if len(b) > stop {
				return b
			}
		}
		return append(b, '}')
	case ipc.List:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendRedacted(b, e, stop)
			if len(b) > stop {
				return b
			}
		}
		return append(b, ']')
	case ipc.String:
		return appendStringUpTo(b, string(x), stop)
	}
	// A scalar: it was parsed from JSON, so it encodes (finite number,
	// nesting within the parser's bound).
	out, err := ipc.AppendValue(b, v)
	if err != nil {
		return append(b, "null"...)
	}
	return out
}

// appendStringUpTo appends s as a JSON string, or, when the text would run
// past stop, a part of it that still does: text whose first stop-len(b)
// bytes are those of the whole.
func appendStringUpTo(b []byte, s string, stop int) []byte {
	// Each byte of s gives at least one byte of text, so k bytes of s,
	// cut at a character boundary, give more than room bytes.
	if room := max(stop-len(b), 0); len(s) > room+utf8.UTFMax {
		s = cutUTF8(s, room+utf8.UTFMax)
	}
	return ipc.AppendString(b, s)
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
		entry["ok"], entry["error"] = false, redactError(err.Error(), argv)
	} else if rep != nil {
		var res struct {
			Success bool    `json:"success"`
			Error   *string `json:"error"`
		}
		json.Unmarshal(rep.Payload, &res)
		entry["ok"] = res.Success
		if res.Error != nil {
			entry["error"] = redactError(*res.Error, argv)
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
			if isSecretKey(k) {
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
