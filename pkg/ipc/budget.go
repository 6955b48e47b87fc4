package ipc

import (
	"fmt"
	"sync/atomic"
)

// Budget bounds what a group of Peers holds together: the bytes of the
// messages they are reassembling, of the requests they have read and not
// yet answered, and of the replies they are writing; and the goroutines
// they start beyond their reading goroutines (handler goroutines and
// goroutines taken over by a slow inline request). One Budget shared by
// every connection a sandbox session's programs open makes the
// supervisor's cost of that session bounded whatever the programs send,
// however many connections they open and whether or not they read their
// replies: the sandbox's memory limit does not count the supervisor.
//
// Over the byte bound, a message being read ends its connection with a
// protocol error (its sender made the group hold too much), and a reply
// that does not fit is replaced by a short error reply. At the goroutine
// bound no request is refused: a Peer without a free goroutine queues the
// request for one of its own handler goroutines, or runs it on its reading
// goroutine, which reads nothing more meanwhile (backpressure on that
// connection only). A Peer with a Budget may therefore run any handler on
// its reading goroutine: its handlers must not wait for a reply over the
// same Peer.
//
// A Budget is safe for concurrent use. The zero of a *Budget (nil) bounds
// nothing.
type Budget struct {
	maxBytes      int64
	maxGoroutines int32
	bytes         atomic.Int64
	goroutines    atomic.Int32
}

// NewBudget returns a budget of maxBytes bytes and maxGoroutines
// goroutines (a value <= 0 bounds nothing of that kind).
func NewBudget(maxBytes int64, maxGoroutines int) *Budget {
	if maxBytes <= 0 {
		maxBytes = 1<<63 - 1
	}
	if maxGoroutines <= 0 || maxGoroutines > 1<<30 {
		maxGoroutines = 1 << 30
	}
	return &Budget{maxBytes: maxBytes, maxGoroutines: int32(maxGoroutines)}
}

// Bytes returns the bytes held now.
func (b *Budget) Bytes() int64 {
	if b == nil {
		return 0
	}
	return b.bytes.Load()
}

// Goroutines returns the goroutines held now.
func (b *Budget) Goroutines() int {
	if b == nil {
		return 0
	}
	return int(b.goroutines.Load())
}

// take reserves n bytes; false, reserving nothing, when they do not fit.
// Lock-free: two takes racing near the bound may both fail where one
// would have fit, never both succeed past it.
func (b *Budget) take(n int64) bool {
	if b == nil || n <= 0 {
		return true
	}
	if b.bytes.Add(n) > b.maxBytes {
		b.bytes.Add(-n)
		return false
	}
	return true
}

// give returns n bytes taken with take.
func (b *Budget) give(n int64) {
	if b != nil && n > 0 {
		b.bytes.Add(-n)
	}
}

// Give returns n bytes a caller was charged (ParseValueBudget).
func (b *Budget) Give(n int64) { b.give(n) }

// takeGoroutine reserves one goroutine; false when none is left.
func (b *Budget) takeGoroutine() bool {
	if b == nil {
		return true
	}
	if b.goroutines.Add(1) > b.maxGoroutines {
		b.goroutines.Add(-1)
		return false
	}
	return true
}

// giveGoroutine returns a goroutine taken with takeGoroutine.
func (b *Budget) giveGoroutine() {
	if b != nil {
		b.goroutines.Add(-1)
	}
}

// errOverBudget is the read error of a message that does not fit in the
// budget: a protocol error, so the connection that sent it is closed.
func (b *Budget) errOverBudget() error {
	return fmt.Errorf("%w: message exceeds the %d bytes that this connection's group (the sandbox session) may have in flight", ErrProtocol, b.maxBytes)
}
