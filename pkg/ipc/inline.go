package ipc

import "time"

// Requests run on the reading goroutine (HandleInline), and the
// goroutine that takes reading over when one outlasts InlineBudget.

// runInline runs j on the reading goroutine. If the handler outlasts the
// budget, a timer's goroutine becomes the reader; runInline then reports
// false and this goroutine reads no more.
func (p *Peer) runInline(j job, buf []byte) ([]byte, bool) {
	p.wg.Add(1) // Serve waits for inline handlers too
	defer p.wg.Done()
	p.inlineGen++
	running := p.inlineGen << 1
	p.armed.Store(running)
	p.inline.Store(running)
	// One timer per peer, re-armed, not one per request. A firing that
	// started just as an earlier inline request ended reads the current
	// armed value and may take over from this request before its budget:
	// harmless, a takeover is correct at any point (takeOver's CAS only
	// succeeds while the request it names still runs).
	if p.inlineTimer == nil {
		p.inlineTimer = time.AfterFunc(p.inlineBudget, p.inlineExpired)
	} else {
		p.inlineTimer.Reset(p.inlineBudget)
	}
	buf = p.serveRequest(j, buf)
	if p.inline.CompareAndSwap(running, 0) {
		p.inlineTimer.Stop()
		return buf, true
	}
	p.detached.Add(-1)
	p.budget.giveGoroutine()
	return buf, false
}

// inlineExpired runs on the timer's goroutine when an inline request has
// run for InlineBudget: that goroutine becomes the reader if the request
// still runs.
func (p *Peer) inlineExpired() {
	p.tryTakeOver(p.armed.Load(), p.inlineBudget)
}

// maxTakeoverWait bounds the wait between two tries of a refused takeover.
const maxTakeoverWait = 50 * time.Millisecond

// tryTakeOver makes this goroutine the reader in place of the inline
// request running, if it still runs and a goroutine is to be had. A
// takeover refused for want of one (the group's Budget, or MaxInFlight,
// held by other requests for now) is tried again, at doubling intervals,
// for as long as the request runs: otherwise a connection whose inline
// request outlasted a busy moment of its group stayed unread until that
// request returned, whenever goroutines came free (found by review). One
// chain of tries per request, on its own timer: the reading goroutine
// alone arms inlineTimer.
func (p *Peer) tryTakeOver(running uint64, wait time.Duration) {
	if p.takeOver(running) {
		p.readLoop()
		return
	}
	if running == 0 || p.inline.Load() != running {
		return // the request ended: its goroutine reads on
	}
	wait = min(2*wait, maxTakeoverWait)
	time.AfterFunc(wait, func() { p.tryTakeOver(running, wait) })
}

// takeOver decides whether the goroutine calling it becomes the reader in
// place of the one running the inline request running (2*n).
//
// The goroutine taken over is counted in detached until its request is
// done, and there are never more than maxInFlight of them: the slot of an
// inline request is free once its reply is being written, so a program that
// sends lone requests and never reads the replies would otherwise leave one
// goroutine blocked in a write per takeover, without end. At the bound
// there is no takeover: reading waits for the inline request, as it waits
// for any reply the socket cannot take.
//
// With a Budget, each goroutine taken over also holds one of the budget's
// goroutines until its request is done: the bound above is per Peer, and
// a group of Peers (a session's connections) would otherwise pin
// maxInFlight goroutines each. Without one left there is no takeover
// either.
func (p *Peer) takeOver(running uint64) bool {
	if p.detached.Add(1) > p.maxInFlight {
		p.detached.Add(-1)
		return false
	}
	if !p.budget.takeGoroutine() {
		p.detached.Add(-1)
		return false
	}
	if !p.inline.CompareAndSwap(running, running|1) {
		p.detached.Add(-1) // the request ended first
		p.budget.giveGoroutine()
		return false
	}
	return true
}
