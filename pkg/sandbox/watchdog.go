package sandbox

import (
	"context"
	"fmt"
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
func (s *Session) watchWorker(ctx context.Context, timeout time.Duration) (stop func() bool) {
	done := make(chan struct{})
	var fired atomic.Bool
	var (
		deadline <-chan time.Time
		t        *time.Timer
	)
	if timeout > 0 {
		t = time.NewTimer(timeout + workerGrace)
		deadline = t.C
	}
	go func() {
		if t != nil {
			defer t.Stop()
		}
		select {
		case <-done:
			return
		case <-deadline:
		case <-ctx.Done():
			g := time.NewTimer(workerGrace)
			defer g.Stop()
			select {
			case <-done:
				return
			case <-g.C:
			}
		case <-s.exited:
			return
		}
		fired.Store(true)
		// SIGKILL through the pidfd ends every thread of the worker, and
		// with PID 1 the whole sandbox; the channel closes and the call
		// returns ErrClosed.
		s.kill()
	}()
	return func() bool {
		close(done)
		return fired.Load()
	}
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
