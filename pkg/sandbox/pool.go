package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Pool keeps started, idle sessions of one policy so that a caller who
// wants a fresh sandbox for every call pays about the price of an exec for
// it, not a cold start. Each session serves exactly one caller (Exec or
// Get) and is then closed: no file in /tmp, process or environment change
// crosses from one call to the next, because the next call runs in another
// sandbox. Writable binds of the policy (the workspace) are the host's and
// are shared by design, as between two `nsbox run`.
//
// Refills happen in the background as sessions are taken. A refill that
// fails is not hidden: it is counted in Stats, kept as Stats.LastError, and
// a caller who finds the pool empty gets a fresh Start's own error.
//
// Idle sessions hold a worker each (PID 1 of its sandbox); they die with
// the pool's process, as every session does (their parent death signal),
// and Close ends them.
type Pool struct {
	policy Policy
	opts   []Option
	size   int

	ready chan *Session

	mu       sync.Mutex
	closed   bool
	starting int // refills in flight
	stats    PoolStats
	wg       sync.WaitGroup // refills
	closing  sync.WaitGroup // sessions lent to Exec and CallTool, until closed
	// inUse are the sessions lent now: Close ends them too, so that no
	// sandbox of the pool outlives Close (its caller releases what the
	// sandboxes relied on, such as a policy hold).
	inUse map[*Session]struct{}
	// idle are the ready sessions whose worker has not yet been told it
	// waits unused (notifyIdle, idleRelease): each one's timer.
	idle map[*Session]*time.Timer
	// ctx bounds refills: Close cancels it, so a refill that is still
	// starting when the pool closes ends instead of adding a session.
	ctx    context.Context
	cancel context.CancelFunc
}

// PoolStats counts what a Pool did.
type PoolStats struct {
	Ready        int   // idle sessions waiting now
	Started      int   // sessions started by refills
	Taken        int   // sessions handed out (Exec, Get)
	ColdStarts   int   // sessions started on demand because none was ready
	RefillErrors int   // refills that failed
	LastError    error // the newest refill error, nil if none
}

// ErrPoolClosed is returned by a Pool used after Close.
var ErrPoolClosed = errors.New("sandbox pool closed")

// MaxPoolSize bounds NewPool's size: each idle session is a process and a
// set of namespaces, and a pool is for latency, not for capacity.
const MaxPoolSize = 64

// NewPool validates p and begins starting size sessions in the background;
// it returns at once. opts apply to every session (handlers, audit). The
// policy is validated here so that a bad one fails the caller, not every
// refill.
func NewPool(p Policy, size int, opts ...Option) (*Pool, error) {
	if size < 1 || size > MaxPoolSize {
		return nil, fmt.Errorf("sandbox pool: size %d out of range 1..%d", size, MaxPoolSize)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	opts = append(opts[:len(opts):len(opts)], withPooled())
	pl := &Pool{policy: p, opts: opts, size: size, ready: make(chan *Session, size), inUse: map[*Session]struct{}{}, idle: map[*Session]*time.Timer{}, ctx: ctx, cancel: cancel}
	pl.mu.Lock()
	pl.refillLocked()
	pl.mu.Unlock()
	return pl, nil
}

// refillLocked starts as many sessions as keep ready+starting at size.
func (pl *Pool) refillLocked() {
	for !pl.closed && len(pl.ready)+pl.starting < pl.size {
		pl.starting++
		pl.wg.Add(1)
		go pl.refillOne()
	}
}

func (pl *Pool) refillOne() {
	defer pl.wg.Done()
	s, err := Start(pl.ctx, pl.policy, pl.opts...)
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.starting--
	if err != nil {
		if !pl.closed {
			pl.stats.RefillErrors++
			pl.stats.LastError = err
		}
		return
	}
	if pl.closed {
		s.Close()
		return
	}
	pl.stats.Started++
	// Never blocks: ready has room for size sessions and ready+starting
	// never exceeds size under mu.
	pl.ready <- s
	// Still unused after idleRelease, its worker gives back the
	// mappings of the binary's pages (worker_idle.go).
	pl.idle[s] = time.AfterFunc(idleRelease, func() {
		pl.mu.Lock()
		_, waiting := pl.idle[s]
		delete(pl.idle, s)
		pl.mu.Unlock()
		if waiting {
			s.notifyIdle()
		}
	})
}

// take returns an idle session that is still alive, or starts one.
//
// With later set (Exec, CallTool: the caller runs one command and gives
// the session back to discard), the refill waits for discard while another
// session is still idle: a start costs several times the CPU of an exec,
// and on a busy machine a refill running beside the call slows the very
// call the pool is there to make fast. With none idle left it starts at
// once, for the next caller.
func (pl *Pool) take(ctx context.Context, later bool) (*Session, error) {
	for {
		pl.mu.Lock()
		if pl.closed {
			pl.mu.Unlock()
			return nil, ErrPoolClosed
		}
		var s *Session
		select {
		case s = <-pl.ready:
		default:
		}
		if s != nil {
			pl.stats.Taken++
			if t, ok := pl.idle[s]; ok {
				t.Stop()
				delete(pl.idle, s)
			}
		}
		if !later || s == nil || len(pl.ready) == 0 {
			pl.refillLocked()
		}
		pl.mu.Unlock()
		if s == nil {
			break
		}
		select {
		case <-s.Done():
			// It died while idle (killed from outside, its limits): not
			// a sandbox to hand out. Try the next one.
			s.Close()
			continue
		default:
			return s, nil
		}
	}
	s, err := Start(ctx, pl.policy, pl.opts...)
	if err != nil {
		return nil, err
	}
	pl.mu.Lock()
	pl.stats.Taken++
	pl.stats.ColdStarts++
	pl.mu.Unlock()
	return s, nil
}

// Exec runs c in a fresh sandbox of the pool and then ends that sandbox,
// so nothing the command left (files in /tmp, processes) can reach a later
// call. The sandbox's teardown and a refill run in the background.
func (pl *Pool) Exec(ctx context.Context, c Command) (Result, error) {
	s, err := pl.take(ctx, true)
	if err == nil {
		err = pl.lend(s)
	}
	if err != nil {
		return Result{}, err
	}
	res, err := s.Exec(ctx, c)
	pl.discard(s)
	return res, err
}

// CallTool runs the tool name in a fresh sandbox of the pool and then ends
// that sandbox, as Exec does for a command: what the tool left in /tmp,
// the processes it started and its environment changes are gone for the
// next call. Tools the sandbox defines at run time are gone as well, so a
// pool only serves the tools a session starts with.
//
// A pool that cannot hand out a sandbox (no idle one, and a fresh start
// failed) returns a *PoolStartError naming the cause; it does not wait for
// a refill that may never come. A refill already under way then is not
// waited for either: begun earlier, on a host where the start could still
// succeed (a bound directory not yet removed), it may land and serve a
// later call, so a call that failed can be followed by one that is served.
func (pl *Pool) CallTool(ctx context.Context, name string, args json.RawMessage, timeout time.Duration) (json.RawMessage, error) {
	s, err := pl.take(ctx, true)
	if err == nil {
		err = pl.lend(s)
	}
	if err != nil {
		if errors.Is(err, ErrPoolClosed) || ctx.Err() != nil {
			return nil, err
		}
		return nil, &PoolStartError{Err: err}
	}
	raw, err := s.CallTool(ctx, name, args, timeout)
	pl.discard(s)
	return raw, err
}

// PoolStartError is a pool that found no idle sandbox and could not start
// one.
type PoolStartError struct{ Err error }

func (e *PoolStartError) Error() string {
	return "no fresh sandbox for the call: " + e.Err.Error()
}
func (e *PoolStartError) Unwrap() error { return e.Err }

// discard ends a sandbox a call used, in the background: the caller has its
// result, and the next call runs in another sandbox whatever this one
// still holds for the few hundred microseconds its teardown takes. Close
// waits for these. It then starts the refill take left for later.
func (pl *Pool) discard(s *Session) {
	pl.mu.Lock()
	delete(pl.inUse, s)
	if pl.closed {
		// Close is ending it too and waits for this.
		pl.mu.Unlock()
		s.Close()
		pl.closing.Done()
		return
	}
	pl.refillLocked()
	pl.mu.Unlock()
	go func() {
		defer pl.closing.Done()
		s.Close()
	}()
}

// lend records s as in use until discard. A pool closed since take ends s
// at once.
func (pl *Pool) lend(s *Session) error {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.closed {
		go s.Close()
		return ErrPoolClosed
	}
	// Under mu and before closed is set: no Add races Close's Wait.
	pl.closing.Add(1)
	pl.inUse[s] = struct{}{}
	return nil
}

// Get hands out a fresh session for the caller to use and Close; the pool
// forgets it. A refill starts in the background.
func (pl *Pool) Get(ctx context.Context) (*Session, error) {
	return pl.take(ctx, false)
}

// Stats returns the pool's counters.
func (pl *Pool) Stats() PoolStats {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	st := pl.stats
	st.Ready = len(pl.ready)
	return st
}

// Close ends every idle session, every refill in flight and every
// sandbox Exec and CallTool used, those still running a call included
// (the call fails with ErrClosed), and waits for them. Sessions handed out
// by Get are the caller's and stay open.
func (pl *Pool) Close() error {
	pl.mu.Lock()
	if pl.closed {
		pl.mu.Unlock()
		return nil
	}
	pl.closed = true
	pl.cancel()
	for s, t := range pl.idle {
		t.Stop()
		delete(pl.idle, s)
	}
	lent := make([]*Session, 0, len(pl.inUse))
	for s := range pl.inUse {
		lent = append(lent, s)
	}
	pl.mu.Unlock()
	for _, s := range lent {
		s.Close()
	}
	pl.wg.Wait() // no refill adds a session after this
	pl.closing.Wait()
	var errs []error
	for {
		select {
		case s := <-pl.ready:
			if err := s.Close(); err != nil {
				errs = append(errs, err)
			}
		default:
			return errors.Join(errs...)
		}
	}
}
