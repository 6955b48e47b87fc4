package ipc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// peerGoroutines counts the goroutines running a Peer's code: readers,
// handler goroutines, goroutines taken over or waiting in Serve.
func peerGoroutines() int {
	buf := make([]byte, 64<<20)
	n := runtime.Stack(buf, true)
	count := 0
	for _, g := range bytes.Split(buf[:n], []byte("\n\n")) {
		if bytes.Contains(g, []byte("ipc.(*Peer).")) {
			count++
		}
	}
	return count
}

func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// waitFor polls cond for up to d.
func waitFor(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(5 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// TestBudgetBoundsPartialMessages is the reviewer's first attack, scaled
// down: many connections sharing one budget each get every fragment of a
// message but the last. Without the budget every connection keeps its
// half-built message for good (24 MiB here); with it, the connections past
// the budget are closed with a protocol error and what stays held is
// within the budget.
func TestBudgetBoundsPartialMessages(t *testing.T) {
	const (
		conns     = 24
		fragments = 16 // 1 MiB a connection
		limit     = 4 << 20
	)
	budget := NewBudget(limit, 0)
	base := liveHeap()
	clients := make([]*Conn, conns)
	served := make([]<-chan error, conns)
	frame := bytes.Repeat([]byte{' '}, MaxFrame)
	frame[0] = fragmentMark
	for i := range clients {
		a, b := pair(t)
		clients[i] = a
		served[i] = servePeer(NewPeer(b, Options{MaxMessage: 4 << 20, Budget: budget}))
		for f := 0; f < fragments; f++ {
			if err := a.send(frame, nil); err != nil {
				break // closed over the budget
			}
		}
	}
	isClosed := make([]bool, conns)
	closed := func() int {
		n := 0
		for i, s := range served {
			select {
			case err := <-s:
				if !errors.Is(err, ErrProtocol) && !errors.Is(err, ErrClosed) {
					t.Errorf("peer stopped with %v, want a protocol error", err)
				}
				isClosed[i] = true
				n++
			default:
			}
		}
		return n
	}
	// Those within the budget hold at most limit/1 MiB whole ones.
	stopped := 0
	if !waitFor(5*time.Second, func() bool { stopped += closed(); return stopped >= conns-limit>>20 }) {
		t.Fatalf("%d of %d connections closed; every half-built message is still held", stopped, conns)
	}
	if got := budget.Bytes(); got > limit {
		t.Fatalf("budget holds %d bytes, over its %d", got, limit)
	}
	// Measured, not only counted: the live heap grew by the budget and the
	// connections' own frame buffers, not by every half-built message.
	grown := int64(liveHeap()) - int64(base)
	t.Logf("%d of %d connections closed; budget holds %d bytes; live heap grew by %d", stopped, conns, budget.Bytes(), grown)
	if grown > limit+conns*(2*MaxFrame)+4<<20 {
		t.Fatalf("live heap grew by %d bytes with a budget of %d", grown, limit)
	}
	// A connection closed over the budget was told why.
	found := false
	for i, a := range clients {
		if !isClosed[i] {
			continue
		}
		env, _, err := a.ReadEnvelope()
		if err == nil && env.Error != nil && env.Error.Code == CodeProtocol && strings.Contains(env.Error.Message, "in flight") {
			found = true
			break
		}
	}
	if !found {
		t.Error("no client got a protocol_error naming the budget")
	}
	for _, a := range clients {
		a.Close()
	}
	if !waitFor(5*time.Second, func() bool { stopped += closed(); return stopped == conns }) {
		t.Fatal("peers did not stop")
	}
	if got := budget.Bytes(); got != 0 {
		t.Fatalf("budget holds %d bytes after every peer stopped", got)
	}
}

// TestBudgetBoundsUnreadReplies is the reviewer's second attack, scaled
// down: clients send requests and never read a reply. Without a budget
// each connection pins up to MaxInFlight handler goroutines blocked in a
// write, with as many jobs queued and goroutines taken over; with one,
// the goroutines of all connections together stay within it plus about
// one reader each.
func TestBudgetBoundsUnreadReplies(t *testing.T) {
	const (
		conns      = 8
		goroutines = 16
	)
	budget := NewBudget(0, goroutines)
	before := peerGoroutines()
	reply := strings.Repeat("x", 1024)
	served := make([]<-chan error, conns)
	peers := make([]*Peer, conns)
	for i := range served {
		a, b := pair(t)
		pb := NewPeer(b, Options{MaxInFlight: 64, InlineBudget: 20 * time.Microsecond, Budget: budget})
		pb.HandleInline("get", func(ctx context.Context, r *Request) (any, error) { return reply, nil })
		pb.Handle("slow", func(ctx context.Context, r *Request) (any, error) {
			time.Sleep(time.Millisecond)
			return reply, nil
		})
		peers[i] = pb
		served[i] = servePeer(pb)
		go func() {
			for id := 1; id <= 3000; id++ {
				typ := "get"
				if id%3 == 0 {
					typ = "slow"
				}
				if a.WriteMessage(rawRequest(typ, id), nil) != nil {
					return
				}
			}
		}()
	}
	peak := 0
	for deadline := time.Now().Add(1500 * time.Millisecond); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		peak = max(peak, peerGoroutines()-before)
	}
	t.Logf("peak %d peer goroutines for %d connections", peak, conns)
	// Per connection: its reader, and the goroutine that called Serve,
	// waiting once reading was taken over from it; and, for an instant,
	// a timer goroutine trying a takeover, at most one per connection
	// (under load they fire together: pkg/sandbox's twin of this bound
	// failed in CI at 2 per connection).
	if bound := goroutines + 3*conns + 4; peak > bound {
		t.Fatalf("%d peer goroutines for %d connections that never read their replies, bound %d", peak, conns, bound)
	}
	if budget.Goroutines() > goroutines {
		t.Fatalf("budget holds %d goroutines, over its %d", budget.Goroutines(), goroutines)
	}
	for i, p := range peers {
		p.Close()
		<-served[i]
	}
	if g, b := budget.Goroutines(), budget.Bytes(); g != 0 || b != 0 {
		t.Fatalf("budget holds %d goroutines and %d bytes after every peer stopped", g, b)
	}
}

// TestNoBusyWithinTheBoundWithBudget: the budget never makes a peer refuse
// a caller that keeps within MaxInFlight, also when another peer holds
// every goroutine of the budget (requests then run on the reader).
func TestNoBusyWithinTheBoundWithBudget(t *testing.T) {
	for _, inline := range []bool{false, true} {
		budget := NewBudget(1<<20, 2)
		// Another connection of the group holds both goroutines.
		hogA, hogB := pair(t)
		hog := NewPeer(hogB, Options{Budget: budget})
		release := make(chan struct{})
		hog.Handle("block", func(ctx context.Context, r *Request) (any, error) { <-release; return nil, nil })
		hogServed := servePeer(hog)
		for i := 1; i <= 3; i++ {
			hogA.WriteMessage(rawRequest("block", i), nil)
		}
		if !waitFor(5*time.Second, func() bool { return budget.Goroutines() == 2 }) {
			t.Fatalf("the other peer holds %d goroutines, want 2", budget.Goroutines())
		}

		const max = 8
		a, b := pair(t)
		pb := NewPeer(b, Options{MaxInFlight: max, Budget: budget})
		echo := func(ctx context.Context, r *Request) (any, error) { return r.Payload, nil }
		if inline {
			pb.HandleInline("echo", echo)
		} else {
			pb.Handle("echo", echo)
		}
		served := servePeer(pb)
		keepInFlight(t, a, max, 3000, fmt.Sprintf("inline %v: ", inline))
		pb.Close()
		<-served
		close(release)
		hog.Close()
		<-hogServed
		if g, b := budget.Goroutines(), budget.Bytes(); g != 0 || b != 0 {
			t.Fatalf("budget holds %d goroutines and %d bytes after every peer stopped", g, b)
		}
	}
}

// TestBudgetReplyTooLarge: a reply larger than what is left of the budget
// is replaced by a short error reply; the connection stays usable.
func TestBudgetReplyTooLarge(t *testing.T) {
	a, b := pair(t)
	budget := NewBudget(1<<20, 0)
	pa, pb := NewPeer(a, Options{}), NewPeer(b, Options{Budget: budget})
	big := strings.Repeat("x", 2<<20)
	pb.Handle("big", func(ctx context.Context, r *Request) (any, error) { return big, nil })
	pb.Handle("small", func(ctx context.Context, r *Request) (any, error) { return "ok", nil })
	servedA, servedB := servePeer(pa), servePeer(pb)
	_, err := pa.Call(context.Background(), "big", nil, nil)
	var re *RemoteError
	if !errors.As(err, &re) || re.Code != CodeHandlerFailed || !strings.Contains(re.Message, "in flight") {
		t.Fatalf("a reply over the budget: %v, want a handler_failed error naming the budget", err)
	}
	var s string
	if rep, err := pa.Call(context.Background(), "small", nil, nil); err != nil || rep.Decode(&s) != nil || s != "ok" {
		t.Fatalf("a small call after it: %v %q", err, s)
	}
	pa.Close()
	pb.Close()
	<-servedA
	<-servedB
	if got := budget.Bytes(); got != 0 {
		t.Fatalf("budget holds %d bytes after the peer stopped", got)
	}
}

// TestBudgetChargesRequestsUntilAnswered: a request's bytes stay charged
// while its handler runs and are given back once it is answered.
func TestBudgetChargesRequestsUntilAnswered(t *testing.T) {
	a, b := pair(t)
	budget := NewBudget(0, 0)
	pa, pb := NewPeer(a, Options{}), NewPeer(b, Options{Budget: budget})
	entered, release := make(chan struct{}), make(chan struct{})
	pb.Handle("hold", func(ctx context.Context, r *Request) (any, error) {
		close(entered)
		<-release
		return nil, nil
	})
	servedA, servedB := servePeer(pa), servePeer(pb)
	arg := strings.Repeat("y", 300<<10)
	done := make(chan error, 1)
	go func() { _, err := pa.Call(context.Background(), "hold", arg, nil); done <- err }()
	<-entered
	if got := budget.Bytes(); got < int64(len(arg)) {
		t.Errorf("budget holds %d bytes while a request of %d is handled", got, len(arg))
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !waitFor(5*time.Second, func() bool { return budget.Bytes() == 0 }) {
		t.Errorf("budget holds %d bytes once the request is answered", budget.Bytes())
	}
	pa.Close()
	pb.Close()
	<-servedA
	<-servedB
}

// TestParseValueBudget: the values a parse makes are charged to the budget
// as they are made; a parse that does not fit fails and keeps nothing
// charged; what a successful one charged is given back by its caller.
func TestParseValueBudget(t *testing.T) {
	b := NewBudget(1<<20, 0)
	v, n, err := ParseValueBudget([]byte(`{"a":[1,2,3],"b":"x"}`), b)
	if err != nil {
		t.Fatal(err)
	}
	if n <= 0 || b.Bytes() != n {
		t.Fatalf("charged %d, budget holds %d", n, b.Bytes())
	}
	if got, _ := MarshalValue(v); string(got) != `{"a":[1,2,3],"b":"x"}` {
		t.Fatalf("parsed %s", got)
	}
	b.Give(n)
	// 20,000 small values: ~1.2 MiB at valueCost each, more than the
	// budget, from 60 KB of text.
	big := []byte("[" + strings.Repeat("{},", 20000) + "0]")
	if _, n, err := ParseValueBudget(big, b); err == nil || n != 0 {
		t.Fatalf("a parse past the budget: charged %d, err %v", n, err)
	}
	if b.Bytes() != 0 {
		t.Fatalf("a failed parse left %d bytes charged", b.Bytes())
	}
	// Without a budget, the same text parses, and nothing is charged.
	if _, n, err := ParseValueBudget(big, nil); err != nil || n != 0 {
		t.Fatalf("no budget: charged %d, err %v", n, err)
	}
}
