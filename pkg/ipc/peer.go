package ipc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"
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
	// MaxInFlight bounds the requests from the other side handled at once;
	// more get a "busy" error reply. 0 means 64.
	MaxInFlight int
	// MaxMessage bounds one message; 0 means DefaultMaxMessage.
	MaxMessage int
}

// Peer runs request/response and notifications over a Conn, in both
// directions: each side may call the other. Replies are matched by id.
type Peer struct {
	conn     *Conn
	handlers map[string]Handler
	sem      chan struct{}
	ctx      context.Context
	cancel   context.CancelFunc

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
	ctx, cancel := context.WithCancel(context.Background())
	return &Peer{
		conn:     conn,
		handlers: map[string]Handler{},
		sem:      make(chan struct{}, o.MaxInFlight),
		ctx:      ctx,
		cancel:   cancel,
		pending:  map[uint64]chan incoming{},
		done:     make(chan struct{}),
	}
}

// Handle registers h for messages of type typ. Not safe after Serve starts.
func (p *Peer) Handle(typ string, h Handler) { p.handlers[typ] = h }

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

// Serve reads messages until the channel closes. It returns the reason.
func (p *Peer) Serve() error {
	for {
		msg, fds, err := p.conn.ReadMessage()
		if err != nil {
			if errors.Is(err, ErrProtocol) {
				p.sendError(0, CodeProtocol, err.Error())
			}
			p.conn.Close()
			p.shutdown(err)
			p.wg.Wait()
			return err
		}
		var env Envelope
		if err := json.Unmarshal(msg, &env); err != nil || env.Type == "" {
			closeFDs(fds)
			// Garbage: tell the peer why, then hang up. Guessing what a
			// malformed message meant is how parsers get confused.
			perr := fmt.Errorf("%w: malformed envelope", ErrProtocol)
			p.sendError(0, CodeProtocol, perr.Error())
			p.conn.Close()
			p.shutdown(perr)
			p.wg.Wait()
			return perr
		}
		p.dispatch(&env, fds)
		// Let the goroutine just made runnable (a waiting caller or a
		// handler) run on this P before this one blocks its thread in
		// recvmsg: a P held by a blocking syscall is only retaken by
		// sysmon, 20 µs to 10 ms later.
		runtime.Gosched()
	}
}

func (p *Peer) dispatch(env *Envelope, fds []int) {
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
			return
		}
		ch <- incoming{env, fds}
		return
	}
	h, ok := p.handlers[env.Type]
	if !ok {
		closeFDs(fds)
		if env.ID != 0 {
			p.sendError(env.ID, CodeUnknownType, fmt.Sprintf("unknown message type %q", env.Type))
		}
		return
	}
	select {
	case p.sem <- struct{}{}:
	default:
		closeFDs(fds)
		if env.ID != 0 {
			p.sendError(env.ID, CodeBusy, "too many requests in flight")
		}
		return
	}
	req := &Request{Type: env.Type, ID: env.ID, Payload: env.Payload, FDs: fds}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer func() { <-p.sem }()
		res, err := p.runHandler(h, req)
		if req.ID == 0 {
			return
		}
		if err != nil {
			var re *RemoteError
			if errors.As(err, &re) {
				p.sendErrorBody(req.ID, &ErrorBody{Code: re.Code, Message: re.Message, Step: re.Step})
			} else {
				p.sendError(req.ID, CodeHandlerFailed, err.Error())
			}
			return
		}
		p.sendReply(req.ID, res)
	}()
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

func (p *Peer) sendReply(id uint64, res any) {
	var fds []int
	if r, ok := res.(ReplyWithFDs); ok {
		res, fds = r.Result, r.FDs
		if r.CloseAfter {
			defer closeFDs(fds)
		}
	}
	payload, err := marshalPayload(res)
	if err != nil {
		p.sendError(id, CodeHandlerFailed, err.Error())
		return
	}
	if err := p.write(&Envelope{Type: TypeReply, ID: id, Payload: payload}, fds); err != nil && !errors.Is(err, ErrClosed) {
		// A result that cannot be sent (too large) still gets an answer:
		// the caller must never wait for a reply that will not come.
		p.sendError(id, CodeHandlerFailed, "reply not sent: "+err.Error())
	}
}

func (p *Peer) sendError(id uint64, code, msg string) {
	p.sendErrorBody(id, &ErrorBody{Code: code, Message: msg})
}

func (p *Peer) sendErrorBody(id uint64, body *ErrorBody) {
	typ := TypeReply
	if id == 0 {
		typ = TypeError
	}
	p.write(&Envelope{Type: typ, ID: id, Error: body}, nil)
}

func (p *Peer) write(env *Envelope, fds []int) error {
	data, err := json.Marshal(env)
	if err != nil {
		return err
	}
	return p.conn.WriteMessage(data, fds)
}

func marshalPayload(v any) (json.RawMessage, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return x, nil
	case Value:
		return MarshalValue(x)
	}
	return json.Marshal(v)
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
	data, err := marshalPayload(payload)
	if err != nil {
		return nil, err
	}
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

	if err := p.write(&Envelope{Type: typ, ID: id, Payload: data}, fds); err != nil {
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
	data, err := marshalPayload(payload)
	if err != nil {
		return err
	}
	return p.write(&Envelope{Type: typ, Payload: data}, nil)
}
