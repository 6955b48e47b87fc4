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
	opts []Option
	size int
	// replan and onError come from WithPoolReplan and WithPoolErrors.
	replan  func(context.Context, error) (Policy, error)
	onError func(*PoolFailure)

	mu     sync.Mutex
	policy Policy // what sessions are built from now
	gen    int    // bumped each time replan replaces policy
	ready  []*pooled
	closed bool
	// starting counts refills in flight.
	starting int
	// failures counts the starts (refills and on demand) that failed
	// since the last one that succeeded.
	failures int
	// recovering: after a failed refill, a recovery (backoff, then
	// replan) runs, and no refill starts until it is done.
	recovering bool
	// recoveries counts the recoveries since the pool last handed out
	// a sandbox: the backoff grows with it (poolBackoff).
	recoveries int
	stats      PoolStats
	// wg counts the pool's goroutines and starts: refills, on-demand
	// starts (take), recoveries and the watchers of idle sessions.
	// Close waits for it, so that no sandbox the pool started outlives
	// Close, whoever began it.
	wg      sync.WaitGroup
	closing sync.WaitGroup // sessions lent to Exec and CallTool, or dropped, until closed
	// inUse are the sessions lent now: Close ends them too, so that no
	// sandbox of the pool outlives Close (its caller releases what the
	// sandboxes relied on, such as a policy hold).
	inUse   map[*Session]struct{}
	onBuilt func()
	// onEnded is WithPoolEnded's: after a lent sandbox ended.
	onEnded func()
	// replanning makes one replan at a time: a one-slot semaphore, so
	// that a caller waiting behind another's replan still answers its
	// own ctx (a mutex kept a cancelled Exec waiting: second review).
	replanning chan struct{}
	// ctx bounds refills and on-demand starts: Close cancels it, so a
	// start that is still under way when the pool closes ends instead of
	// adding a session.
	ctx    context.Context
	cancel context.CancelFunc
}

// pooled is an idle session of the pool.
type pooled struct {
	s   *Session
	gen int // the policy generation it was built from
	// idle is set while it waits in ready (under mu).
	idle bool
	// taken is closed when it leaves ready (taken, dropped, Close): its
	// watcher stops.
	taken chan struct{}
	// release tells its worker it waits unused (notifyIdle,
	// idleRelease).
	release *time.Timer
}

// PoolStats counts what a Pool did.
type PoolStats struct {
	Ready        int   // idle sessions waiting now
	Starting     int   // refills in flight now
	Started      int   // sessions started by refills
	Taken        int   // sessions handed out (Exec, Get)
	ColdStarts   int   // sessions started on demand because none was ready
	RefillErrors int   // refills that failed
	StartErrors  int   // on-demand starts that failed
	Lost         int   // idle sessions that died before use (killed, a limit)
	Replans      int   // times the policy was resolved again (WithPoolReplan)
	LastError    error // the newest failure, nil if none
}

// PoolFailure is what went wrong in a pool's background work or in an
// on-demand start, as told to WithPoolErrors and kept as
// PoolStats.LastError. Op says what failed: "refill" (a background
// start), "start" (on demand, for a caller), "replan" (the policy could
// not be resolved again), "lost" (an idle sandbox died) or "lost-in-call"
// (a sandbox died under a call, killed from outside).
type PoolFailure struct {
	Op  string
	Err error
}

func (e *PoolFailure) Error() string {
	switch e.Op {
	case "refill":
		return "the pool could not start a sandbox in the background: " + e.Err.Error()
	case "start":
		return "the pool could not start a sandbox for a call: " + e.Err.Error()
	case "replan":
		return "the pool could not resolve its policy again: " + e.Err.Error()
	case "lost":
		return "an idle sandbox of the pool ended before use: " + e.Err.Error()
	case "lost-in-call":
		return "a sandbox of the pool ended under a call: " + e.Err.Error()
	case "teardown":
		return "a sandbox the pool discarded after a call did not end cleanly: " + e.Err.Error()
	}
	return "sandbox pool: " + e.Err.Error()
}
func (e *PoolFailure) Unwrap() error { return e.Err }

// ErrPoolSandboxDied: an idle sandbox's worker ended before any call used
// it (killed from outside, the OOM killer). The pool drops it and starts
// another.
var ErrPoolSandboxDied = errors.New("the sandbox's worker died while it waited")

// WithPoolReplan gives a Pool a way to build its policy anew. After a
// start of the pool fails (a refill or an on-demand start), the pool
// calls replan with the cause, one call at a time, and builds every later
// sandbox from the Policy it returns; idle sandboxes built from the old
// one are ended. A policy resolved from the host's files goes stale when
// they change (a hidden file removed, a directory made unreadable by a
// sandbox: ErrPlanChanged, a SetupError): without replan every later
// build fails the same way. Start ignores this option.
func WithPoolReplan(replan func(ctx context.Context, cause error) (Policy, error)) Option {
	return func(o *options) { o.poolReplan = replan }
}

// WithPoolErrors has a Pool tell f of every failure it meets (see
// PoolFailure), as it happens; f may be called from several goroutines at
// once and must not call the pool. Start ignores this option.
func WithPoolErrors(f func(*PoolFailure)) Option {
	return func(o *options) { o.poolErrors = f }
}

// WithPoolBuilt has a Pool call f after each sandbox it started (a refill
// or an on-demand start) is built, before the sandbox serves a call: what
// its build made on the host (the placeholders of a policy a replan
// returned) exists then, and can be recorded. f must not call the pool.
// Start ignores this option.
func WithPoolBuilt(f func()) Option {
	return func(o *options) { o.poolBuilt = f }
}

// WithPoolEnded has a Pool call f after each sandbox that served an Exec
// or a CallTool has ended, before that Exec or CallTool returns: the
// sandbox's processes are gone (a PID namespace is empty once its init is
// reaped; a Landlock session's worker killed its commands), so nothing of
// the call writes on the host after f begins, and the caller has its
// result only after f. An audit of what the call left belongs there: run
// as soon as the call's tool answered, it raced the call's detached
// processes, which write until the teardown kills them (review 24).
// Without this option the teardown runs in the background, after the
// call returned. f may run on several goroutines at once and must not
// call the pool. Start ignores this option.
func WithPoolEnded(f func()) Option {
	return func(o *options) { o.poolEnded = f }
}

// built tells WithPoolBuilt's function of a sandbox built.
func (pl *Pool) built() {
	if pl.onBuilt != nil {
		pl.onBuilt()
	}
}

// ErrPoolClosed is returned by a Pool used after Close.
var ErrPoolClosed = errors.New("sandbox pool closed")

// MaxPoolSize bounds NewPool's size: each idle session is a process and a
// set of namespaces, and a pool is for latency, not for capacity.
const MaxPoolSize = 64

// NewPool validates p and begins starting size sessions in the background;
// it returns at once. opts apply to every session (handlers, audit), and
// WithPoolReplan and WithPoolErrors to the pool. The policy is validated
// here so that a bad one fails the caller, not every refill.
func NewPool(p Policy, size int, opts ...Option) (*Pool, error) {
	if size < 1 || size > MaxPoolSize {
		return nil, fmt.Errorf("sandbox pool: size %d out of range 1..%d", size, MaxPoolSize)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	ctx, cancel := context.WithCancel(context.Background())
	opts = append(opts[:len(opts):len(opts)], withPooled())
	pl := &Pool{policy: p, opts: opts, size: size, replan: o.poolReplan, onError: o.poolErrors, onBuilt: o.poolBuilt, onEnded: o.poolEnded, inUse: map[*Session]struct{}{}, ctx: ctx, cancel: cancel, replanning: make(chan struct{}, 1)}
	pl.mu.Lock()
	pl.refillLocked()
	pl.mu.Unlock()
	return pl, nil
}

// refillLocked starts as many sessions as keep ready+starting at size.
// After a failed start it starts one at a time until one succeeds, and
// none while a recovery waits: a pool of N whose policy went stale must
// not start N builds that fail the same way after every call.
func (pl *Pool) refillLocked() {
	for !pl.closed && !pl.recovering && len(pl.ready)+pl.starting < pl.size {
		if pl.failures > 0 && pl.starting > 0 {
			return
		}
		pl.starting++
		pl.wg.Add(1)
		go pl.refillOne(pl.policy, pl.gen)
	}
}

func (pl *Pool) refillOne(p Policy, gen int) {
	defer pl.wg.Done()
	s, err := Start(pl.ctx, p, pl.opts...)
	if err == nil {
		pl.built()
	}
	pl.mu.Lock()
	pl.starting--
	if err != nil {
		if pl.closed {
			pl.mu.Unlock()
			return
		}
		pl.stats.RefillErrors++
		f := &PoolFailure{Op: "refill", Err: err}
		pl.stats.LastError = f
		pl.failures++
		if !pl.recovering {
			pl.recovering = true
			pl.wg.Add(1) // this goroutine's count is still held: no race with Wait
			go pl.recover(err, gen, true)
		}
		pl.mu.Unlock()
		pl.report(f)
		return
	}
	if pl.closed || gen != pl.gen {
		// Closed, or built from a policy a replan has replaced since.
		pl.refillLocked()
		pl.mu.Unlock()
		s.Close()
		return
	}
	pl.failures = 0
	pl.stats.Started++
	pl.addIdleLocked(s, gen)
	pl.refillLocked()
	pl.mu.Unlock()
}

// addIdleLocked puts s in ready, with a timer that tells its worker once
// it has waited unused for idleRelease (worker_idle.go), and a watcher
// that drops it if it dies while it waits. Called with a wg count held.
func (pl *Pool) addIdleLocked(s *Session, gen int) {
	e := &pooled{s: s, gen: gen, idle: true, taken: make(chan struct{})}
	pl.ready = append(pl.ready, e)
	e.release = time.AfterFunc(idleRelease, func() {
		pl.mu.Lock()
		waiting := e.idle
		pl.mu.Unlock()
		if waiting {
			s.notifyIdle()
		}
	})
	pl.wg.Add(1)
	go pl.watch(e)
}

// watch drops e if its sandbox ends while it waits in ready (its worker
// killed from outside, the OOM killer): a dead sandbox is not counted as
// ready, the loss is reported, and a refill replaces it.
func (pl *Pool) watch(e *pooled) {
	defer pl.wg.Done()
	select {
	case <-e.taken:
		return
	case <-e.s.Done():
	}
	pl.mu.Lock()
	if !e.idle {
		pl.mu.Unlock()
		return
	}
	pl.unreadyLocked(e)
	pl.stats.Lost++
	f := &PoolFailure{Op: "lost", Err: fmt.Errorf("%w (worker pid %d)", ErrPoolSandboxDied, e.s.Pid())}
	pl.stats.LastError = f
	pl.closing.Add(1) // under mu, not closed: no race with Close's Wait
	// Replaced as after a failed start: one at a time, behind a backoff
	// that grows while no caller is served, so that sandboxes killed as
	// soon as they are idle (a limit, a watchdog) do not make the pool
	// start them in a loop. The policy is not stale: no replan.
	pl.failures++
	if !pl.recovering {
		pl.recovering = true
		pl.wg.Add(1) // this goroutine's count is still held: no race with Wait
		go pl.recover(f.Err, e.gen, false)
	}
	pl.refillLocked()
	pl.mu.Unlock()
	pl.report(f)
	e.s.Close()
	pl.closing.Done()
}

// unreadyLocked takes e out of ready and stops its timer and watcher.
func (pl *Pool) unreadyLocked(e *pooled) {
	if !e.idle {
		return
	}
	e.idle = false
	e.release.Stop()
	close(e.taken)
	for i, r := range pl.ready {
		if r == e {
			pl.ready = append(pl.ready[:i], pl.ready[i+1:]...)
			break
		}
	}
}

// recover runs after a failed refill (or a lost idle sandbox): it waits
// (longer after each recovery while no caller is served), asks replan for
// a fresh policy if replan is set, and lets refills start again.
func (pl *Pool) recover(cause error, gen int, replan bool) {
	defer pl.wg.Done()
	pl.mu.Lock()
	pl.recoveries++
	delay := poolBackoff(pl.recoveries)
	pl.mu.Unlock()
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-pl.ctx.Done():
			t.Stop()
		}
	}
	if replan {
		pl.replanAfter(pl.ctx, cause, gen)
	}
	pl.mu.Lock()
	pl.recovering = false
	pl.refillLocked()
	pl.mu.Unlock()
}

// poolBackoff is the wait before the n-th recovery in a row (no caller
// served in between) lets refills start again: none for the first (its
// replan may have fixed the cause), then 0.1 s doubling up to 10 s. A
// pool whose sandboxes cannot start tries again about every 10 s, not
// after every call.
func poolBackoff(n int) time.Duration {
	if n <= 1 {
		return 0
	}
	d := 100 * time.Millisecond
	for i := 2; i < n && d < 10*time.Second; i++ {
		d *= 2
	}
	return min(d, 10*time.Second)
}

// replanAfter resolves the policy again after a start built from
// generation gen failed with cause, and reports whether a newer policy is
// in place now (by this call or another since that start began). A caller
// whose ctx ends while another replan runs stops waiting (false); the
// replan itself runs under the pool's ctx.
func (pl *Pool) replanAfter(ctx context.Context, cause error, gen int) bool {
	if pl.replan == nil {
		return false
	}
	select {
	case pl.replanning <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	defer func() { <-pl.replanning }()
	pl.mu.Lock()
	cur, closed := pl.gen, pl.closed
	pl.mu.Unlock()
	if closed {
		return false
	}
	if cur != gen {
		return true
	}
	p, err := pl.replan(pl.ctx, cause)
	if err == nil {
		err = p.Validate()
	}
	pl.mu.Lock()
	if pl.closed {
		pl.mu.Unlock()
		return false
	}
	if err != nil {
		f := &PoolFailure{Op: "replan", Err: err}
		pl.stats.LastError = f
		pl.mu.Unlock()
		pl.report(f)
		return false
	}
	pl.policy = p
	pl.gen++
	pl.stats.Replans++
	// Idle sandboxes of the old policy go: every sandbox handed out from
	// now on is built from the newest resolution.
	stale := append([]*pooled(nil), pl.ready...)
	for _, e := range stale {
		pl.unreadyLocked(e)
	}
	pl.closing.Add(len(stale)) // under mu, not closed: no race with Close's Wait
	pl.refillLocked()
	pl.mu.Unlock()
	for _, e := range stale {
		go func() {
			defer pl.closing.Done()
			e.s.Close()
		}()
	}
	return true
}

// report tells WithPoolErrors's function of f.
func (pl *Pool) report(f *PoolFailure) {
	if pl.onError != nil {
		pl.onError(f)
	}
}

// take returns an idle session that is still alive, or starts one. With
// lend set the session is recorded as in use (Exec, CallTool) in the same
// step, so that a Close from then on ends it.
//
// With later set (Exec, CallTool: the caller runs one command and gives
// the session back to discard), the refill waits for discard while another
// session is still idle: a start costs several times the CPU of an exec,
// and on a busy machine a refill running beside the call slows the very
// call the pool is there to make fast. With none idle left it starts at
// once, for the next caller.
func (pl *Pool) take(ctx context.Context, later, lend bool) (*Session, error) {
	pl.mu.Lock()
	for {
		if pl.closed {
			pl.mu.Unlock()
			return nil, ErrPoolClosed
		}
		if len(pl.ready) == 0 {
			break
		}
		e := pl.ready[0]
		pl.unreadyLocked(e)
		if e.s.workerExited() {
			// It died while idle and its watcher has not seen it yet
			// (Done closes only once the worker is reaped, ~1 ms after
			// its exit: review 68 was handed such a session, its call
			// failed, and the loss was nowhere): not a sandbox to hand
			// out. Reported as the watcher would; try the next one.
			pl.stats.Lost++
			f := &PoolFailure{Op: "lost", Err: fmt.Errorf("%w (worker pid %d)", ErrPoolSandboxDied, e.s.Pid())}
			pl.stats.LastError = f
			pl.closing.Add(1)
			pl.refillLocked()
			pl.mu.Unlock()
			pl.report(f)
			e.s.Close()
			pl.closing.Done()
			pl.mu.Lock()
			continue
		}
		pl.stats.Taken++
		pl.recoveries = 0 // the pool serves again
		if !later || len(pl.ready) == 0 {
			pl.refillLocked()
		}
		if lend {
			pl.lendLocked(e.s)
		}
		pl.mu.Unlock()
		return e.s, nil
	}
	pl.refillLocked()
	// None idle: start one for this caller. The start is the pool's
	// like a refill (Close cancels it and waits for it), so that no
	// sandbox of the pool outlives Close.
	pl.wg.Add(1) // under mu, not closed: no race with Close's Wait
	defer pl.wg.Done()
	for try := 0; ; try++ {
		if pl.closed {
			pl.mu.Unlock()
			return nil, ErrPoolClosed
		}
		p, gen := pl.policy, pl.gen
		pl.mu.Unlock()
		sctx, cancel := context.WithCancel(ctx)
		stop := context.AfterFunc(pl.ctx, cancel)
		s, err := Start(sctx, p, pl.opts...)
		stop()
		cancel()
		if err == nil {
			pl.built()
		}
		pl.mu.Lock()
		if pl.closed {
			pl.mu.Unlock()
			if s != nil {
				s.Close() // before wg.Done: Close waits for it
			}
			return nil, ErrPoolClosed
		}
		if err == nil {
			pl.failures, pl.recoveries = 0, 0 // the pool serves again
			pl.stats.Taken++
			pl.stats.ColdStarts++
			if lend {
				pl.lendLocked(s)
			}
			pl.mu.Unlock()
			return s, nil
		}
		if ctx.Err() != nil {
			pl.mu.Unlock()
			return nil, err
		}
		pl.stats.StartErrors++
		pl.failures++
		f := &PoolFailure{Op: "start", Err: err}
		pl.stats.LastError = f
		pl.mu.Unlock()
		pl.report(f)
		// Built from a stale policy: once more from a fresh one, as a
		// session's start does (cmd/nsbox startToolSession).
		if try > 0 || !pl.replanAfter(ctx, err, gen) {
			return nil, err
		}
		pl.mu.Lock()
	}
}

// Exec runs c in a fresh sandbox of the pool and then ends that sandbox,
// so nothing the command left (files in /tmp, processes) can reach a later
// call. The sandbox's teardown and a refill run in the background. When
// no sandbox could be had, the Result's Reason is ReasonSetupError (or
// ReasonCanceled, ctx having ended).
func (pl *Pool) Exec(ctx context.Context, c Command) (Result, error) {
	s, err := pl.take(ctx, true, true)
	if err != nil {
		if ctx.Err() != nil {
			return Result{Reason: ReasonCanceled}, err
		}
		return Result{Reason: ReasonSetupError}, err
	}
	res, err := s.Exec(ctx, c)
	pl.lostInCall(s, err)
	pl.discard(s)
	return res, err
}

// lostInCall reports a sandbox that died under a call, before or while it
// ran (killed from outside between take and the request: review 68), as
// the watcher reports one that dies idle. The call itself fails: what it
// did before the end is not known, so it is not run again.
func (pl *Pool) lostInCall(s *Session, err error) {
	// Not a worker nsbox itself killed for not answering after the
	// call's timeout or cancellation (session_exec.go): the call's own
	// end, already reported to the caller.
	if !errors.Is(err, ErrClosed) || errors.Is(err, errWorkerUnresponsive) {
		return
	}
	f := &PoolFailure{Op: "lost-in-call", Err: fmt.Errorf("%w (worker pid %d)", ErrPoolSandboxDied, s.Pid())}
	pl.mu.Lock()
	if pl.closed {
		pl.mu.Unlock()
		return // Close ended it
	}
	pl.stats.Lost++
	pl.stats.LastError = f
	pl.mu.Unlock()
	pl.report(f)
}

// CallTool runs the tool name in a fresh sandbox of the pool and then ends
// that sandbox, as Exec does for a command: what the tool left in /tmp,
// the processes it started and its environment changes are gone for the
// next call. Tools the sandbox defines at run time are gone as well, so a
// pool only serves the tools a session starts with.
//
// A pool that cannot hand out a sandbox (no idle one, and a fresh start
// failed, also once more after WithPoolReplan's function resolved the
// policy again) returns a *PoolStartError naming the cause; it does not
// wait for a refill that may never come. A refill already under way then
// is not waited for either: begun earlier, on a host where the start
// could still succeed (a bound directory not yet removed), it may land
// and serve a later call, so a call that failed can be followed by one
// that is served.
func (pl *Pool) CallTool(ctx context.Context, name string, args json.RawMessage, timeout time.Duration) (json.RawMessage, error) {
	s, err := pl.take(ctx, true, true)
	if err != nil {
		if errors.Is(err, ErrPoolClosed) || ctx.Err() != nil {
			return nil, err
		}
		return nil, &PoolStartError{Err: err}
	}
	raw, err := s.CallTool(ctx, name, args, timeout)
	pl.lostInCall(s, err)
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

// discard ends a sandbox a call used. Its processes are gone before the
// call returns; the rest of its teardown (the limits' groups, the
// network, the handlers) runs in the background, and Close waits for it.
// It then starts the refill take left for later. With WithPoolEnded, the
// whole end and f come before the call returns.
func (pl *Pool) discard(s *Session) {
	if pl.onEnded == nil {
		// Invariant: when Exec or CallTool returns, nothing the call
		// started still runs. A background loop of the call kept
		// writing into the shared workspace for up to 80 ms after Exec
		// returned, while the next call ran, when the whole teardown
		// was left to a goroutine that the refill and the next call
		// delayed (review 56). Before the refill, which would compete
		// for the CPUs.
		s.stopProcesses()
	}
	pl.mu.Lock()
	delete(pl.inUse, s)
	if pl.closed {
		// Close is ending it too and waits for this.
		pl.mu.Unlock()
		pl.end(s)
		pl.ended()
		pl.closing.Done()
		return
	}
	pl.refillLocked()
	pl.mu.Unlock()
	if pl.onEnded != nil {
		// The call's result waits for its sandbox's end and the
		// caller's audit of it (WithPoolEnded).
		pl.end(s)
		pl.ended()
		pl.closing.Done()
		return
	}
	go func() {
		defer pl.closing.Done()
		pl.end(s)
	}()
}

// end closes a sandbox a call used and reports a teardown that may have
// left its processes running (ErrTeardownIncomplete, the Landlock
// backend): never silently, since they could reach what later calls see.
func (pl *Pool) end(s *Session) {
	if err := s.Close(); errors.Is(err, ErrTeardownIncomplete) {
		f := &PoolFailure{Op: "teardown", Err: err}
		pl.mu.Lock()
		pl.stats.LastError = f
		pl.mu.Unlock()
		pl.report(f)
	}
}

// ended tells WithPoolEnded's function of a lent sandbox ended.
func (pl *Pool) ended() {
	if pl.onEnded != nil {
		pl.onEnded()
	}
}

// lendLocked records s as in use until discard. Called with mu held and
// the pool open: no Add races Close's Wait.
func (pl *Pool) lendLocked(s *Session) {
	pl.closing.Add(1)
	pl.inUse[s] = struct{}{}
}

// Get hands out a fresh session for the caller to use and Close; the pool
// forgets it. A refill starts in the background.
func (pl *Pool) Get(ctx context.Context) (*Session, error) {
	return pl.take(ctx, false, false)
}

// Stats returns the pool's counters.
func (pl *Pool) Stats() PoolStats {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	st := pl.stats
	st.Ready = len(pl.ready)
	st.Starting = pl.starting
	return st
}

// Close ends every idle session, every start in flight (refills and the
// on-demand starts of callers who found the pool empty) and every sandbox
// Exec and CallTool used, those still running a call included (the call
// fails with ErrClosed), and waits for them: no sandbox of the pool
// outlives Close. Sessions handed out by Get are the caller's and stay
// open.
func (pl *Pool) Close() error {
	pl.mu.Lock()
	if pl.closed {
		pl.mu.Unlock()
		return nil
	}
	pl.closed = true
	pl.cancel()
	idle := append([]*pooled(nil), pl.ready...)
	for _, e := range idle {
		pl.unreadyLocked(e)
	}
	lent := make([]*Session, 0, len(pl.inUse))
	for s := range pl.inUse {
		lent = append(lent, s)
	}
	pl.mu.Unlock()
	for _, s := range lent {
		s.Close()
	}
	var errs []error
	for _, e := range idle {
		if err := e.s.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	pl.wg.Wait() // no start adds a session after this
	pl.closing.Wait()
	return errors.Join(errs...)
}
