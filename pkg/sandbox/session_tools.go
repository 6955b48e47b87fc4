package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/nsbox/nsbox/pkg/ipc"
	"golang.org/x/sys/unix"
)

// CallTool runs a tool inside the sandbox and returns its result object
// ({success, output, error, reason}). Cancelling ctx stops the tool (and any
// command it runs), not the session. A call a limit ended returns the
// result, its reason "oom" or "pids", with a *ResourceLimitError.
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
	refusals := s.sockets.mark()
	rep, err := s.peer.CallCancelable(ctx, ipc.TypeCallTool, msg, nil)
	s.hostCalls.audit.recordTool(s.opts.id, name, args, rep, err, time.Since(start))
	if err != nil {
		return nil, s.channelErr(err)
	}
	// A limit the kernel reports during the call (a command the tool ran
	// was OOM-killed, or hit the pids limit) is the call's typed end; the
	// result is returned with it. The counters are the whole group's, also
	// of what earlier commands left running: a call that succeeded is not
	// blamed for them.
	if !toolSucceeded(rep.Payload) {
		var r Result
		if lerr := s.limitEnd(before, &r, true, true); lerr != nil {
			return setReason(rep.Payload, r.Reason), lerr
		}
		// A refused host socket connect during a failed call is its
		// typed end, as for Exec (sockets.go).
		if v := s.socketViolation(refusals); v != nil {
			return rep.Payload, v
		}
	}
	return rep.Payload, nil
}

// toolSucceeded reports whether a tool's result object says success: true.
func toolSucceeded(result json.RawMessage) bool {
	var ok bool
	err := ipc.DecodeFields(result, []ipc.Field{{Name: "success", Bool: &ok}})
	return err == nil && ok
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

// OnToolsChanged subscribes fn to the session's toolsChanged events. The
// events of a session are delivered one at a time, in the order they
// arrived, on a goroutine of their own: fn is never called concurrently with
// itself or another subscriber of the session. A slow fn holds back the
// events after it, not the session; if the subscribers fall more than
// maxQueuedToolsChanged events behind, the oldest waiting ones are dropped
// (each event is a full snapshot of the tool set: the newest is always
// delivered). It returns a function that unsubscribes.
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

// maxQueuedToolsChanged bounds the toolsChanged events waiting for slow
// subscribers: a program inside that registers tools in a loop cannot grow
// the supervisor's memory without end.
const maxQueuedToolsChanged = 1024

// toolsChanged runs on the channel's reading goroutine (HandleDirect), so
// events are queued in the order they arrived; it never blocks: one
// goroutine at a time delivers the queue.
func (s *Session) toolsChanged(ctx context.Context, req *ipc.Request) (any, error) {
	closeInts(req.FDs)
	var ev ToolsChanged
	if err := req.Decode(&ev); err != nil {
		return nil, err
	}
	s.subMu.Lock()
	defer s.subMu.Unlock()
	if len(s.subs) == 0 && !s.delivering {
		return nil, nil // nobody listens: nothing to deliver
	}
	if len(s.events) >= maxQueuedToolsChanged {
		s.events[0] = ToolsChanged{}
		s.events = s.events[1:]
	}
	s.events = append(s.events, ev)
	if !s.delivering {
		s.delivering = true
		go s.deliverToolsChanged()
	}
	return nil, nil
}

// deliverToolsChanged calls the subscribers with each queued event in turn,
// until the queue is empty.
func (s *Session) deliverToolsChanged() {
	for {
		s.subMu.Lock()
		if len(s.events) == 0 {
			s.events = nil
			s.delivering = false
			s.subMu.Unlock()
			return
		}
		ev := s.events[0]
		s.events[0] = ToolsChanged{}
		s.events = s.events[1:]
		ids := make([]int, 0, len(s.subs))
		for id := range s.subs {
			ids = append(ids, id)
		}
		sort.Ints(ids)
		subs := make([]func(ToolsChanged), len(ids))
		for i, id := range ids {
			subs[i] = s.subs[id]
		}
		s.subMu.Unlock()
		// In the order they subscribed.
		for _, f := range subs {
			callSubscriber(f, ev)
		}
	}
}

// callSubscriber calls f; a panic in it is dropped, as a handler's panic
// is, and does not stop the events after it.
func callSubscriber(f func(ToolsChanged), ev ToolsChanged) {
	defer func() { recover() }()
	f(ev)
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
	// events wait for delivery; delivering is set while a goroutine
	// delivers them (there is at most one).
	events     []ToolsChanged
	delivering bool
}
