package ipc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// ProtocolVersion is exchanged in the handshake. A peer speaking another
// version is refused with a clear error, never half understood.
const ProtocolVersion = 1

// Message types. docs/protocol.md describes each payload.
const (
	TypeHandshake              = "handshake"
	TypeExecute                = "execute"
	TypeCancel                 = "cancel"
	TypeListSessionDefinitions = "listSessionDefinitions"
	TypeHostCall               = "hostCall"
	TypeRegisterTool           = "registerTool"
	TypeUnregisterTool         = "unregisterTool"
	TypeToolsChanged           = "toolsChanged"
	TypeCallTool               = "callTool"
	TypeConnect                = "connect"
	TypeOpenHostCall           = "openHostCall"
	TypeReply                  = "reply"
	TypeError                  = "error"
)

// Error codes carried in ErrorBody.Code.
const (
	CodeUnknownType     = "unknown_type"
	CodeBadRequest      = "bad_request"
	CodeBusy            = "busy"
	CodeDenied          = "denied"
	CodeHandlerFailed   = "handler_failed"
	CodeVersionMismatch = "version_mismatch"
	CodeSetupFailed     = "setup_failed"
	CodeProtocol        = "protocol_error"
)

// Envelope is the one message shape on the wire.
type Envelope struct {
	Type    string          `json:"type"`
	ID      uint64          `json:"id,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
	Error   *ErrorBody      `json:"error,omitempty"`
}

// ErrorBody is the error of a reply.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Step names the setup step that failed, for setup errors.
	Step string `json:"step,omitempty"`
}

// RemoteError is a failure reported by the other side: the channel works, the
// request did not. Use errors.As to tell it from ErrClosed.
type RemoteError struct {
	Code    string
	Message string
	Step    string
}

func (e *RemoteError) Error() string { return e.Message }

// Request is an incoming message handed to a Handler.
type Request struct {
	Type    string
	ID      uint64
	Payload json.RawMessage
	// FDs received with the request. The handler owns them.
	FDs []int
}

// Decode unmarshals the payload into v.
func (r *Request) Decode(v any) error {
	if len(r.Payload) == 0 {
		return nil
	}
	if err := json.Unmarshal(r.Payload, v); err != nil {
		return &RemoteError{Code: CodeBadRequest, Message: fmt.Sprintf("bad %s payload: %v", r.Type, err)}
	}
	return nil
}

// Handler serves one request type. A nil error with ID != 0 sends result as
// the reply payload; an error sends an error reply (a *RemoteError keeps its
// code). Notifications (ID 0) get no reply.
type Handler func(ctx context.Context, req *Request) (result any, err error)

// Reply is the answer to a Call.
type Reply struct {
	Payload json.RawMessage
	FDs     []int
}

// Decode unmarshals the reply payload into v.
func (r *Reply) Decode(v any) error {
	if len(r.Payload) == 0 {
		return nil
	}
	return json.Unmarshal(r.Payload, v)
}

type incoming struct {
	env *Envelope
	fds []int
}

// Options bound a Peer.
type Options struct {
	// MaxInFlight bounds the requests from the other side handled at once,
	// and with them the handler goroutines the peer keeps; more get a
	// "busy" error reply. 0 means 64.
	MaxInFlight int
	// MaxMessage bounds one message; 0 means DefaultMaxMessage.
	MaxMessage int
	// InlineBudget bounds how long a request for a handler registered
	// with HandleInline, run on the reading goroutine, holds back the
	// messages behind it: past it, another goroutine takes over reading.
	// 0 means 100 µs.
	InlineBudget time.Duration
	// Budget, when set, is shared with other Peers (one per connection
	// of a sandbox session, for example) and bounds what they hold
	// together: see Budget. nil bounds nothing beyond the limits above.
	Budget *Budget
	// OnHangup, when set, runs once the connection is gone, before the
	// handlers still running are waited for: what must not wait for
	// them (a sandbox worker's kill of the session's processes).
	OnHangup func()
}

// job is one admitted request waiting for a handler goroutine.
type job struct {
	h      Handler
	req    *Request
	inline bool // the handler was registered with HandleInline
	direct bool // ... with HandleDirect
	// charge is the bytes of the budget the request's message holds,
	// given back once its reply is written.
	charge int64
}

type handler struct {
	h              Handler
	inline, direct bool
}

// Deferred, returned as a handler's result, means the handler has arranged
// to answer later with Peer.Reply. The request keeps its in-flight slot
// until then.
var Deferred any = deferred{}

type deferred struct{}

// Peer runs request/response and notifications over a Conn, in both
// directions: each side may call the other. Replies are matched by id.
//
// Requests from the other side run on handler goroutines that live as long
// as the peer (their stacks stay grown, and no goroutine is created per
// request); there are never more of them than MaxInFlight. Handlers
// registered with HandleInline or HandleDirect may also run on the reading
// goroutine.
type Peer struct {
	conn        *Conn
	handlers    map[string]handler
	maxInFlight int32
	budget      *Budget
	onHangup    func() // Options.OnHangup
	ctx         context.Context
	cancel      context.CancelFunc

	// inFlight counts admitted requests whose reply is not yet being
	// written; it never exceeds maxInFlight.
	inFlight atomic.Int32
	// idle is the number of handler goroutines waiting for a job, less
	// the jobs queued for none in particular; it is negative while jobs
	// wait for a goroutine to finish its reply.
	idle atomic.Int32
	// workers is the number of handler goroutines started. Only the
	// reading goroutine changes it.
	workers int32
	// jobs hands admitted requests to handler goroutines. It holds at most
	// maxInFlight jobs (each holds an in-flight slot), so a send on it
	// never blocks the reader.
	jobs chan job

	inlineBudget time.Duration
	// inline is 2*n while the reader runs its n-th inline request, 2*n+1
	// once another goroutine has taken over reading from it, 0 otherwise.
	inline    atomic.Uint64
	inlineGen uint64 // only the reading goroutine changes it
	// inlineTimer, made on the first inline request and re-armed for each
	// one after, fires when an inline request has run for InlineBudget.
	// Only the reading goroutine arms or stops it. armed is the value of
	// inline it was last armed for.
	inlineTimer *time.Timer
	armed       atomic.Uint64
	// detached counts goroutines taken over while running an inline
	// request that is not done yet (see takeOver).
	detached atomic.Int32
	// stopped is closed, and stopErr set, once the reading goroutine has
	// stopped the peer and every handler has returned.
	stopped chan struct{}
	stopErr error

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan incoming
	err     error
	done    chan struct{}
	wg      sync.WaitGroup
}

// NewPeer wraps conn. Register handlers with Handle before calling Serve.
func NewPeer(conn *Conn, o Options) *Peer {
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 64
	}
	if o.MaxMessage > 0 {
		conn.SetMaxMessage(o.MaxMessage)
	}
	if o.InlineBudget <= 0 {
		o.InlineBudget = 100 * time.Microsecond
	}
	conn.budget = o.Budget
	ctx, cancel := context.WithCancel(context.Background())
	return &Peer{
		conn:         conn,
		handlers:     map[string]handler{},
		maxInFlight:  int32(o.MaxInFlight),
		budget:       o.Budget,
		jobs:         make(chan job, o.MaxInFlight),
		inlineBudget: o.InlineBudget,
		stopped:      make(chan struct{}),
		ctx:          ctx,
		cancel:       cancel,
		pending:      map[uint64]chan incoming{},
		done:         make(chan struct{}),
		onHangup:     o.OnHangup,
	}
}

// Handle registers h for messages of type typ. Not safe after Serve starts.
func (p *Peer) Handle(typ string, h Handler) { p.handlers[typ] = handler{h: h} }

// HandleInline is Handle for a handler that may run on the reading
// goroutine: when its request arrives while no other request is being
// handled by a handler goroutine, it runs where it was read, without the
// hand-off to a handler goroutine, also when more requests wait on the
// socket (a caller that keeps several in flight is served one request
// after the other, which for handlers that return at once is faster than
// waking a goroutine per request). If it has not returned within
// InlineBudget, another goroutine takes over reading, so a slow one holds
// the messages behind it back for about that long at most; while it runs,
// the requests read after it go to handler goroutines. h must not wait for
// a reply over this same peer (the reply would wait for the takeover).
func (p *Peer) HandleInline(typ string, h Handler) {
	p.handlers[typ] = handler{h: h, inline: true}
}

// HandleDirect is Handle for a handler that always runs on the reading
// goroutine, before the next message is read: it must not block (it
// returns Deferred and answers with Reply when its work waits). It is for
// work that must happen on the reading goroutine's thread: with
// Conn.SetWait, Serve can run on a locked thread and do other work there
// while it waits for messages. Not with HandleInline handlers on the same
// peer: their takeover would move reading to another goroutine.
func (p *Peer) HandleDirect(typ string, h Handler) {
	p.handlers[typ] = handler{h: h, direct: true}
}

// Done is closed when the peer stops serving.
func (p *Peer) Done() <-chan struct{} { return p.done }

// Err returns why the peer stopped (ErrClosed for a hang-up).
func (p *Peer) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Close stops the peer and fails every pending call with ErrClosed.
func (p *Peer) Close() error {
	p.conn.Close()
	p.shutdown(ErrClosed)
	return nil
}

func (p *Peer) shutdown(err error) {
	p.mu.Lock()
	if p.err != nil {
		p.mu.Unlock()
		return
	}
	p.err = err
	pend := p.pending
	p.pending = map[uint64]chan incoming{}
	p.mu.Unlock()
	p.cancel()
	for _, ch := range pend {
		close(ch)
	}
	close(p.done)
}

// Serve reads messages until the channel closes. It returns the reason,
// once every handler has returned.
func (p *Peer) Serve() error {
	if err := p.readLoop(); err != errTakenOver {
		return err
	}
	// Another goroutine reads now (see InlineBudget); Serve still returns
	// only once the peer has stopped.
	<-p.stopped
	return p.stopErr
}

// errTakenOver ends a reading loop whose inline request outlasted the
// budget: another goroutine reads from then on.
var errTakenOver = errors.New("ipc: reading taken over")

// readLoop reads and dispatches messages until the peer stops (it returns
// the reason) or another goroutine takes reading over (errTakenOver).
func (p *Peer) readLoop() error {
	var buf []byte // reply buffer for inline requests
	for {
		msg, fds, charge, err := p.conn.readMessage()
		if err != nil {
			if errors.Is(err, ErrProtocol) {
				p.sendError(0, CodeProtocol, err.Error())
			}
			return p.stop(err)
		}
		var env Envelope
		if err := decodeEnvelope(msg, &env); err != nil || env.Type == "" {
			closeFDs(fds)
			p.budget.give(charge)
			// Garbage: tell the peer why, then hang up. Guessing what a
			// malformed message meant is how parsers get confused.
			perr := fmt.Errorf("%w: malformed envelope", ErrProtocol)
			p.sendError(0, CodeProtocol, perr.Error())
			return p.stop(perr)
		}
		j, ok := p.dispatch(&env, fds)
		if ok {
			j.charge = charge
		} else {
			// Not kept: a reply belongs to its caller now, anything else
			// was answered or dropped.
			p.budget.give(charge)
		}
		if ok && j.direct {
			buf = p.serveRequest(j, buf)
			continue
		}
		// Inline while no handler goroutine holds a request (this one is
		// the only one in flight), whatever waits behind it: see
		// HandleInline.
		if ok && j.inline && p.inFlight.Load() == 1 {
			var done bool
			if buf, done = p.runInline(j, buf); !done {
				return errTakenOver
			}
			continue
		}
		if ok && !p.handOff(j) {
			// No goroutine for it within the budget: it runs here, and
			// this connection is not read until it is answered.
			buf = p.serveRequest(j, buf)
			continue
		}
		// Let the goroutine just made runnable (a waiting caller or a
		// handler) run on this P before this one blocks its thread in
		// recvmsg: a P held by a blocking syscall is only retaken by
		// sysmon, 20 µs to 10 ms later.
		runtime.Gosched()
	}
}

// stop ends serving: it hangs up, fails pending calls, waits for the
// handlers and closes the fds of requests no handler took.
func (p *Peer) stop(err error) error {
	p.conn.Close()
	p.shutdown(err)
	if p.onHangup != nil {
		p.onHangup()
	}
	p.wg.Wait()
	for drained := false; !drained; {
		select {
		case j := <-p.jobs:
			closeFDs(j.req.FDs)
			p.budget.give(j.charge)
		default:
			drained = true
		}
	}
	p.stopErr = err
	close(p.stopped)
	return err
}

// dispatch delivers replies to their callers and answers what no handler
// takes. It returns the job of an admitted request, which holds an
// in-flight slot.
func (p *Peer) dispatch(env *Envelope, fds []int) (job, bool) {
	if env.Type == TypeReply {
		p.mu.Lock()
		ch, ok := p.pending[env.ID]
		if ok {
			delete(p.pending, env.ID)
		}
		p.mu.Unlock()
		if !ok {
			// A reply to nothing we asked: drop it and its fds.
			closeFDs(fds)
			return job{}, false
		}
		// A copy for the caller: env itself stays on the reading
		// goroutine's stack, not allocated for every message.
		reply := *env
		ch <- incoming{&reply, fds}
		return job{}, false
	}
	h, ok := p.handlers[env.Type]
	if !ok {
		closeFDs(fds)
		if env.ID != 0 {
			p.sendError(env.ID, CodeUnknownType, fmt.Sprintf("unknown message type %q", Clip(env.Type, 64)))
		}
		return job{}, false
	}
	// Admission: at most maxInFlight requests are handled at once; the
	// others are refused at once, so a flood from the other side costs a
	// bounded number of goroutines and never queues without limit.
	if p.inFlight.Add(1) > p.maxInFlight {
		p.inFlight.Add(-1)
		closeFDs(fds)
		if env.ID != 0 {
			p.sendError(env.ID, CodeBusy, "too many requests in flight")
		}
		return job{}, false
	}
	return job{h: h.h, req: &Request{Type: env.Type, ID: env.ID, Payload: env.Payload, FDs: fds}, inline: h.inline, direct: h.direct}, true
}

// handOff gives j to a handler goroutine. It returns false, having given
// it to none, when the caller (the reading goroutine) must run it.
func (p *Peer) handOff(j job) bool {
	if p.idle.Add(-1) >= 0 {
		// A handler goroutine is idle: it takes the job.
		p.jobs <- j
		return true
	}
	if p.workers < p.maxInFlight {
		// Security: with a Budget, a new handler goroutine needs one of
		// the group's goroutines (held until the peer stops). A program
		// that never reads its replies leaves every handler goroutine
		// blocked writing one; without this bound each of its
		// connections would pin maxInFlight of them. No request is
		// refused for it (a caller within MaxInFlight is never told
		// "busy"): the job waits for one of this peer's own handler
		// goroutines, or runs on the reading goroutine, which then
		// reads no more from this connection until it is answered.
		if p.budget.takeGoroutine() {
			p.idle.Add(1)
			p.workers++
			p.wg.Add(1)
			go p.handlerLoop(j)
			return true
		}
		if p.workers == 0 {
			p.idle.Add(1)
			return false
		}
	}
	// Every handler goroutine is busy and their number is at the bound
	// (maxInFlight, or the budget's). This request holds a slot, so at
	// the bound of maxInFlight one of them has already released its own
	// and is writing its reply; either way one of them takes the job
	// when it is done (idle stays negative until then).
	p.jobs <- j
	return true
}

// handlerLoop runs jobs until the peer stops. It keeps a reply buffer
// between calls.
func (p *Peer) handlerLoop(j job) {
	defer p.wg.Done()
	defer p.budget.giveGoroutine()
	var buf []byte
	for {
		buf = p.serveRequest(j, buf)
		p.idle.Add(1)
		select {
		case j = <-p.jobs:
		case <-p.done:
			return
		}
	}
}

// maxKeptBuffer bounds the reply buffer a handler goroutine keeps between
// calls: one large reply does not pin its memory for the peer's life.
const maxKeptBuffer = 64 << 10

// serveRequest runs one handler and writes its reply.
func (p *Peer) serveRequest(j job, buf []byte) []byte {
	res, err := p.runHandler(j.h, j.req)
	if res == Deferred && err == nil {
		// The handler keeps what it needs of the request: not counted.
		p.budget.give(j.charge)
		return buf
	}
	return p.reply(j.req.ID, res, err, buf, j.charge)
}

// Reply answers a request whose handler returned Deferred, with what a
// handler would have returned. Call it exactly once for each such request
// (also for a notification, whose slot it frees), from any goroutine.
func (p *Peer) Reply(id uint64, result any, err error) {
	p.reply(id, result, err, nil, 0)
}

// reply frees the request's in-flight slot and writes its reply, encoded in
// buf, which it returns for the next reply. charge is the budget the
// request holds: given back once the reply is written.
func (p *Peer) reply(id uint64, res any, err error, buf []byte, charge int64) []byte {
	if id == 0 {
		p.inFlight.Add(-1)
		p.budget.give(charge)
		return buf
	}
	var fds []int
	closeAfter := false
	var msg []byte
	if err == nil {
		if r, ok := res.(ReplyWithFDs); ok {
			res, fds, closeAfter = r.Result, r.FDs, r.CloseAfter
		}
		msg, err = appendEnvelope(buf[:0], TypeReply, id, res)
		if err != nil {
			err = &RemoteError{Code: CodeHandlerFailed, Message: err.Error()}
		}
	}
	sendFDs := fds
	if err != nil {
		msg, sendFDs = encodeError(id, err), nil
	}
	kept := msg
	if p.budget != nil && len(msg) > MaxFrame {
		// Security: a reply is held until the caller has read it, which a
		// program inside may never do; with many such replies of up to
		// MaxMessage each the group's budget bounds what is held. One
		// that does not fit is answered with a short error instead, and
		// the large one is dropped at once. A reply of one frame is not
		// counted: the goroutines that can hold one are bounded already.
		charge += int64(len(msg))
		if !p.budget.take(int64(len(msg))) {
			charge -= int64(len(msg))
			msg = encodeError(id, &RemoteError{Code: CodeHandlerFailed, Message: fmt.Sprintf("reply of %d bytes not sent: the connection's group (the sandbox session) has too much in flight", len(msg))})
			sendFDs = nil
		}
	}
	// The slot is free before the reply can reach the caller: a caller
	// that answers each reply with a new request, keeping within
	// MaxInFlight, is never refused as busy.
	p.inFlight.Add(-1)
	werr := p.conn.WriteMessage(msg, sendFDs)
	p.budget.give(charge)
	if closeAfter {
		closeFDs(fds)
	}
	if werr != nil && !errors.Is(werr, ErrClosed) {
		// A result that cannot be sent (too large) still gets an answer:
		// the caller must never wait for a reply that will not come.
		p.sendError(id, CodeHandlerFailed, "reply not sent: "+werr.Error())
	}
	if cap(kept) > maxKeptBuffer {
		return nil
	}
	return kept
}

// runHandler turns a panicking handler into an error reply: the caller gets
// an answer, never a hang.
func (p *Peer) runHandler(h Handler, req *Request) (res any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &RemoteError{Code: CodeHandlerFailed, Message: fmt.Sprintf("handler for %s failed: %v", req.Type, r)}
		}
	}()
	return h(p.ctx, req)
}

// ReplyWithFDs lets a handler send fds along with its result.
type ReplyWithFDs struct {
	Result any
	FDs    []int
	// CloseAfter closes FDs once the reply is written (or failed).
	CloseAfter bool
}

// encodeError encodes the error reply to request id (an error message when
// id is 0). A *RemoteError keeps its code.
func encodeError(id uint64, err error) []byte {
	body := &ErrorBody{Code: CodeHandlerFailed, Message: err.Error()}
	var re *RemoteError
	if errors.As(err, &re) {
		body = &ErrorBody{Code: re.Code, Message: re.Message, Step: re.Step}
	}
	typ := TypeReply
	if id == 0 {
		typ = TypeError
	}
	data, _ := json.Marshal(&Envelope{Type: typ, ID: id, Error: body})
	return data
}

func (p *Peer) sendError(id uint64, code, msg string) {
	p.conn.WriteMessage(encodeError(id, &RemoteError{Code: code, Message: msg}), nil)
}

// appendEnvelope appends the envelope {"type","id","payload"} to buf, with
// the payload encoded in place: the same text json.Marshal gives for an
// Envelope, without encoding the payload twice.
func appendEnvelope(buf []byte, typ string, id uint64, payload any) ([]byte, error) {
	buf = append(buf, `{"type":`...)
	buf = appendJSONString(buf, typ)
	if id != 0 {
		buf = append(buf, `,"id":`...)
		buf = strconv.AppendUint(buf, id, 10)
	}
	mark := len(buf)
	buf = append(buf, `,"payload":`...)
	n := len(buf)
	buf, err := appendPayload(buf, payload)
	if err != nil {
		return nil, err
	}
	if len(buf) == n {
		// No payload (nil, or an empty json.RawMessage): omitted.
		buf = buf[:mark]
	}
	return append(buf, '}'), nil
}

// CallCancelable is Call, and when ctx ends first it also tells the other
// side, with a TypeCancel notification naming the request id, to stop
// working on it.
func (p *Peer) CallCancelable(ctx context.Context, typ string, payload any, fds []int) (*Reply, error) {
	return p.call(ctx, typ, payload, fds, true)
}

// Call sends a request and waits for its reply. A reply with an error is
// returned as *RemoteError; a broken channel as ErrClosed. Cancelling ctx
// abandons the wait (the late reply is dropped).
func (p *Peer) Call(ctx context.Context, typ string, payload any, fds []int) (*Reply, error) {
	return p.call(ctx, typ, payload, fds, false)
}

func (p *Peer) call(ctx context.Context, typ string, payload any, fds []int, cancelRemote bool) (*Reply, error) {
	ch := make(chan incoming, 1)
	p.mu.Lock()
	if p.err != nil {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	p.nextID++
	id := p.nextID
	p.pending[id] = ch
	p.mu.Unlock()
	msg, err := appendEnvelope(nil, typ, id, payload)
	if err != nil {
		p.forget(id)
		return nil, err
	}

	if err := p.conn.WriteMessage(msg, fds); err != nil {
		p.forget(id)
		return nil, err
	}
	select {
	case in, ok := <-ch:
		if !ok {
			return nil, ErrClosed
		}
		env, rfds := in.env, in.fds
		if env.Error != nil {
			closeFDs(rfds)
			return nil, &RemoteError{Code: env.Error.Code, Message: env.Error.Message, Step: env.Error.Step}
		}
		return &Reply{Payload: env.Payload, FDs: rfds}, nil
	case <-ctx.Done():
		p.forget(id)
		if cancelRemote {
			p.Notify(TypeCancel, map[string]uint64{"id": id})
		}
		select {
		case in, ok := <-ch: // a reply that raced the cancellation
			if ok {
				closeFDs(in.fds)
			}
		default:
		}
		return nil, ctx.Err()
	}
}

func (p *Peer) forget(id uint64) {
	p.mu.Lock()
	delete(p.pending, id)
	p.mu.Unlock()
}

// Notify sends a message that expects no reply (a push event).
func (p *Peer) Notify(typ string, payload any) error {
	msg, err := appendEnvelope(nil, typ, 0, payload)
	if err != nil {
		return err
	}
	return p.conn.WriteMessage(msg, nil)
}
