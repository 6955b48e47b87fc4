package sandbox

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// workerGrace is how long the supervisor waits for the worker to answer
// once a command's timeout has passed or its context was cancelled. The
// worker kills the command and answers at once; one that stays silent is
// not serving any more (its serving thread was killed by a seccomp
// profile, it is stopped, or it hangs) and is killed, so that no timeout
// or signal ever waits on it forever.
const workerGrace = 5 * time.Second

// watchWorker kills the worker when it has not answered an execute request
// workerGrace after the command's timeout (0: none) or after ctx is done.
// The returned stop ends the watch and reports whether it killed the
// worker.
//
// Timers and context.AfterFunc, not a goroutine: a goroutine per Exec that
// waits for the reply is two more thread wake-ups on every command (its
// start, then its end), which measured on an Exec of /bin/true; a timer
// costs nothing until it fires.
func (s *Session) watchWorker(ctx context.Context, timeout time.Duration) (stop func() bool) {
	w := &watch{s: s}
	if timeout > 0 {
		w.deadline = time.AfterFunc(timeout+workerGrace, w.fire)
	}
	if ctx.Done() != nil {
		w.stopCtx = context.AfterFunc(ctx, func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			if !w.stopped {
				w.grace = time.AfterFunc(workerGrace, w.fire)
			}
		})
	}
	return w.stop
}

// watch is one execute request's watch (see watchWorker).
type watch struct {
	s        *Session
	deadline *time.Timer
	stopCtx  func() bool
	fired    atomic.Bool

	mu      sync.Mutex
	stopped bool
	grace   *time.Timer
}

func (w *watch) fire() {
	w.mu.Lock()
	stopped := w.stopped
	w.mu.Unlock()
	select {
	case <-w.s.exited:
		return // gone already: nothing to kill
	default:
	}
	if stopped {
		return
	}
	w.fired.Store(true)
	// SIGKILL through the pidfd ends every thread of the worker, and with
	// PID 1 the whole sandbox; the channel closes and the call returns
	// ErrClosed.
	w.s.kill()
}

func (w *watch) stop() bool {
	w.mu.Lock()
	w.stopped = true
	if w.grace != nil {
		w.grace.Stop()
	}
	w.mu.Unlock()
	if w.deadline != nil {
		w.deadline.Stop()
	}
	if w.stopCtx != nil {
		w.stopCtx()
	}
	return w.fired.Load()
}

// customProfile is the seccomp profile file the policy names, or "" for
// the built-in profile and for none.
func (s *Session) customProfile() string {
	switch s.policy.Seccomp {
	case "", "default", "unconfined":
		return ""
	}
	return s.policy.Seccomp
}

// customProfileHint names a custom seccomp profile as the likely cause of a
// worker that died or fell silent.
func (s *Session) customProfileHint() string {
	if p := s.customProfile(); p != "" {
		return fmt.Sprintf("; the seccomp profile %s is in use: it may deny a system call the sandbox's worker needs", p)
	}
	return ""
}
