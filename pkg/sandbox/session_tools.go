package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/nsbox/nsbox/pkg/ipc"
	"golang.org/x/sys/unix"
)

// CallTool runs a tool inside the sandbox and returns its result object
// ({success, output, error}). Cancelling ctx stops the tool (and any command
// it runs), not the session.
func (s *Session) CallTool(ctx context.Context, name string, args json.RawMessage, timeout time.Duration) (json.RawMessage, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	msg := callToolMsg{Name: name, Args: args}
	if timeout > 0 {
		msg.TimeoutMs = timeout.Milliseconds()
	}
	start := time.Now()
	before := s.limits.events()
	rep, err := s.peer.CallCancelable(ctx, ipc.TypeCallTool, msg, nil)
	s.hostCalls.audit.recordTool(s.opts.id, name, args, rep, err, time.Since(start))
	if err != nil {
		return nil, s.channelErr(err)
	}
	// A limit the kernel reports during the call (a command the tool ran
	// was OOM-killed, or hit the pids limit) is the call's typed end; the
	// result is returned with it.
	var r Result
	if lerr := s.limits.check(before, &r); lerr != nil {
		return rep.Payload, lerr
	}
	return rep.Payload, nil
}

// openHostCall gives a command started by a worker tool its own hostCall
// socket: the reply carries the sandbox's end.
func (s *Session) openHostCall(ctx context.Context, req *ipc.Request) (any, error) {
	closeInts(req.FDs)
	if len(s.policy.HostAPIs) == 0 && !s.policy.AllowToolRegistration {
		return nil, &ipc.RemoteError{Code: ipc.CodeDenied, Message: "the policy allows no host APIs"}
	}
	hc, err := s.hostCalls.newConn()
	if err != nil {
		return nil, err
	}
	fd, err := unix.Dup(hc.childFD())
	hc.closeChild()
	if err != nil {
		return nil, err
	}
	// The dup is closed once sent: the peer closes reply fds after
	// writing them.
	return ipc.ReplyWithFDs{Result: map[string]bool{"ok": true}, FDs: []int{fd}, CloseAfter: true}, nil
}

// ToolDefinitions lists the tools of the running session: the worker is the
// source of truth (listSessionDefinitions).
func (s *Session) ToolDefinitions(ctx context.Context) (json.RawMessage, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	rep, err := s.peer.Call(ctx, ipc.TypeListSessionDefinitions, nil, nil)
	if err != nil {
		return nil, s.channelErr(err)
	}
	return rep.Payload, nil
}

// RegisterTool adds a tool defined at run time (a definition with an
// implementation: an inline script or an argv). The worker pushes one
// toolsChanged event.
func (s *Session) RegisterTool(ctx context.Context, def json.RawMessage) error {
	if err := s.usable(); err != nil {
		return err
	}
	_, err := s.peer.Call(ctx, ipc.TypeRegisterTool, registerToolMsg{Definition: def}, nil)
	return s.channelErr(err)
}

// UnregisterTool removes a tool registered at run time.
func (s *Session) UnregisterTool(ctx context.Context, name string) error {
	if err := s.usable(); err != nil {
		return err
	}
	_, err := s.peer.Call(ctx, ipc.TypeUnregisterTool, unregisterToolMsg{Name: name}, nil)
	return s.channelErr(err)
}

// OnToolsChanged subscribes fn to the session's toolsChanged events. It is
// called from the session's reader goroutine, one event at a time; it must
// not block for long. It returns a function that unsubscribes.
func (s *Session) OnToolsChanged(fn func(ToolsChanged)) (cancel func()) {
	s.subMu.Lock()
	defer s.subMu.Unlock()
	s.subID++
	id := s.subID
	if s.subs == nil {
		s.subs = map[int]func(ToolsChanged){}
	}
	s.subs[id] = fn
	return func() {
		s.subMu.Lock()
		delete(s.subs, id)
		s.subMu.Unlock()
	}
}

func (s *Session) toolsChanged(ctx context.Context, req *ipc.Request) (any, error) {
	closeInts(req.FDs)
	var ev ToolsChanged
	if err := req.Decode(&ev); err != nil {
		return nil, err
	}
	s.subMu.Lock()
	subs := make([]func(ToolsChanged), 0, len(s.subs))
	for _, f := range s.subs {
		subs = append(subs, f)
	}
	s.subMu.Unlock()
	for _, f := range subs {
		f(ev)
	}
	return nil, nil
}

// forwardToWorker passes a registerTool/unregisterTool request from a
// program inside (allowed by the policy) to the worker, the source of truth
// for the tool set.
func (s *Session) forwardToWorker(ctx context.Context, typ string, payload json.RawMessage) (json.RawMessage, error) {
	rep, err := s.peer.Call(ctx, typ, payload, nil)
	if err != nil {
		return nil, err
	}
	return rep.Payload, nil
}

func (s *Session) usable() error {
	select {
	case <-s.exited:
		return ErrClosed
	default:
	}
	if s.peer == nil {
		return ErrClosed
	}
	return nil
}

func (s *Session) channelErr(err error) error {
	if errors.Is(err, ipc.ErrClosed) {
		return ErrClosed
	}
	return err
}

// subscriptions live on the Session.
type subscriptions struct {
	subMu sync.Mutex
	subID int
	subs  map[int]func(ToolsChanged)
}
