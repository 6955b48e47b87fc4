package ipc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// servePeer starts Serve on p and returns a channel that yields its result.
func servePeer(p *Peer) <-chan error {
	done := make(chan error, 1)
	go func() { done <- p.Serve() }()
	return done
}

// rawRequest is a request as a client in another language writes it.
func rawRequest(typ string, id int) []byte {
	return []byte(`{"type":"` + typ + `","id":` + strconv.Itoa(id) + `,"payload":` + strconv.Itoa(id) + `}`)
}

// TestHandlerGoroutinesAreBounded holds MaxInFlight handlers blocked and
// sends more requests: the extra ones are refused as busy, and the peer
// never starts more handler goroutines than MaxInFlight.
func TestHandlerGoroutinesAreBounded(t *testing.T) {
	const max = 4
	a, b := pair(t)
	pb := NewPeer(b, Options{MaxInFlight: max})
	release := make(chan struct{})
	var running, peak atomic.Int32
	entered := make(chan struct{}, 100)
	pb.Handle("block", func(ctx context.Context, r *Request) (any, error) {
		n := running.Add(1)
		for {
			old := peak.Load()
			if n <= old || peak.CompareAndSwap(old, n) {
				break
			}
		}
		entered <- struct{}{}
		<-release
		running.Add(-1)
		return nil, nil
	})
	served := servePeer(pb)
	for i := 1; i <= max; i++ {
		if err := a.WriteMessage(rawRequest("block", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < max; i++ {
		<-entered
	}
	// Every slot is taken: each further request is answered busy.
	for i := max + 1; i <= max+6; i++ {
		if err := a.WriteMessage(rawRequest("block", i), nil); err != nil {
			t.Fatal(err)
		}
		env, _, err := a.ReadEnvelope()
		if err != nil {
			t.Fatal(err)
		}
		if env.ID != uint64(i) || env.Error == nil || env.Error.Code != CodeBusy {
			t.Fatalf("request %d past the bound: %+v %+v", i, env, env.Error)
		}
	}
	close(release)
	for i := 0; i < max; i++ {
		env, _, err := a.ReadEnvelope()
		if err != nil || env.Error != nil {
			t.Fatalf("blocked request: %+v %v", env, err)
		}
	}
	// With the slots free again, a second wave is served by the same
	// goroutines.
	for i := 100; i < 100+max; i++ {
		if err := a.WriteMessage(rawRequest("block", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < max; i++ {
		env, _, err := a.ReadEnvelope()
		if err != nil || env.Error != nil {
			t.Fatalf("second wave: %+v %v", env, err)
		}
	}
	pb.Close()
	<-served
	if p := peak.Load(); p > max {
		t.Fatalf("%d handlers ran at once, bound %d", p, max)
	}
	if pb.workers > max {
		t.Fatalf("%d handler goroutines started, bound %d", pb.workers, max)
	}
}

// TestSlowHandlerDoesNotBlockOthers keeps one call blocked in its handler
// while many others complete on the same connection.
func TestSlowHandlerDoesNotBlockOthers(t *testing.T) {
	pa, pb := peers(t)
	release := make(chan struct{})
	entered := make(chan struct{})
	pb.Handle("slow", func(ctx context.Context, r *Request) (any, error) {
		close(entered)
		<-release
		return "slow done", nil
	})
	pb.Handle("fast", func(ctx context.Context, r *Request) (any, error) { return r.Payload, nil })
	go pa.Serve()
	go pb.Serve()
	slow := make(chan error, 1)
	go func() {
		_, err := pa.Call(context.Background(), "slow", nil, nil)
		slow <- err
	}()
	<-entered
	for i := 0; i < 200; i++ {
		rep, err := pa.Call(context.Background(), "fast", i, nil)
		if err != nil || string(rep.Payload) != strconv.Itoa(i) {
			t.Fatalf("fast call %d while a slow one runs: %v %s", i, err, rep.Payload)
		}
	}
	select {
	case err := <-slow:
		t.Fatalf("the slow call returned before it was released: %v", err)
	default:
	}
	close(release)
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
}

// TestNoBusyWithinTheBound: a client that keeps exactly MaxInFlight
// requests in flight, sending the next one as each reply arrives, is never
// refused. The in-flight slot is free before the reply is written.
func TestNoBusyWithinTheBound(t *testing.T) {
	const max = 2
	a, b := pair(t)
	pb := NewPeer(b, Options{MaxInFlight: max})
	pb.Handle("echo", func(ctx context.Context, r *Request) (any, error) { return r.Payload, nil })
	served := servePeer(pb)
	keepInFlight(t, a, max, 3000, "")
	pb.Close()
	<-served
}

// keepInFlight sends n echo requests over a, keeping max of them in flight
// (the next one goes out as each reply arrives), and fails on any error
// reply: a caller within MaxInFlight is never refused.
func keepInFlight(t *testing.T, a *Conn, max, n int, what string) {
	t.Helper()
	sent := 0
	for ; sent < max; sent++ {
		if err := a.WriteMessage(rawRequest("echo", sent+1), nil); err != nil {
			t.Fatal(err)
		}
	}
	for got := 0; got < n; got++ {
		env, _, err := a.ReadEnvelope()
		if err != nil {
			t.Fatal(err)
		}
		if env.Error != nil {
			t.Fatalf("%sreply %d of %d with %d in flight: %s: %s", what, got, n, max, env.Error.Code, env.Error.Message)
		}
		if sent < n {
			sent++
			if err := a.WriteMessage(rawRequest("echo", sent), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestNoGoroutineLeftAfterClose: once Serve has returned, every handler
// and reading goroutine of the peer has ended.
func TestNoGoroutineLeftAfterClose(t *testing.T) {
	before := handlerGoroutines()
	for round := 0; round < 3; round++ {
		a, b := pair(t)
		// Lone requests run inline, with takeovers (often in round 0).
		pa, pb := NewPeer(a, Options{}), NewPeer(b, Options{MaxInFlight: 16, InlineBudget: time.Duration(round*100+1) * time.Microsecond})
		pb.HandleInline("echo", func(ctx context.Context, r *Request) (any, error) { return r.Payload, nil })
		block := make(chan struct{})
		pb.HandleInline("block", func(ctx context.Context, r *Request) (any, error) {
			select {
			case <-block:
			case <-ctx.Done():
			}
			return nil, nil
		})
		servedA, servedB := servePeer(pa), servePeer(pb)
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 50; i++ {
					pa.Call(context.Background(), "echo", i, nil)
				}
			}()
		}
		wg.Wait()
		// One handler is still blocked when the peer closes: Close
		// cancels its context.
		go pa.Call(context.Background(), "block", nil, nil)
		pb.Close()
		pa.Close()
		<-servedB
		<-servedA
	}
	// A goroutine that has called wg.Done may not have exited yet: give
	// the scheduler a bounded number of turns.
	after := handlerGoroutines()
	for i := 0; i < 1000 && after > before; i++ {
		runtime.Gosched()
		after = handlerGoroutines()
	}
	if after > before {
		t.Fatalf("handler goroutines: %d before, %d after Close", before, after)
	}
}

func handlerGoroutines() int {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	return bytes.Count(buf[:n], []byte("ipc.(*Peer).handlerLoop")) + bytes.Count(buf[:n], []byte("ipc.(*Peer).readLoop"))
}

// TestInvalidRawResultIsAnErrorReply: a handler returning text that is not
// JSON gets the caller an error, and the channel stays usable.
func TestInvalidRawResultIsAnErrorReply(t *testing.T) {
	pa, pb := peers(t)
	pb.Handle("bad", func(ctx context.Context, r *Request) (any, error) { return json.RawMessage(`{"a":`), nil })
	pb.Handle("spaced", func(ctx context.Context, r *Request) (any, error) {
		return json.RawMessage(" { \"a\" : [1, 2] }\n"), nil
	})
	go pa.Serve()
	go pb.Serve()
	var re *RemoteError
	if _, err := pa.Call(context.Background(), "bad", nil, nil); !errors.As(err, &re) || re.Code != CodeHandlerFailed {
		t.Fatalf("invalid raw result: %v", err)
	}
	rep, err := pa.Call(context.Background(), "spaced", nil, nil)
	if err != nil || string(rep.Payload) != `{"a":[1,2]}` {
		t.Fatalf("raw result: %v %s", err, rep.Payload)
	}
}

// TestEnvelopeTextMatchesMarshal: the envelope written around the payload
// is the text json.Marshal gives for the same Envelope.
func TestEnvelopeTextMatchesMarshal(t *testing.T) {
	type result struct {
		OK   bool   `json:"ok"`
		Text string `json:"text,omitempty"`
	}
	for _, c := range []struct {
		typ     string
		id      uint64
		payload any
	}{
		{TypeReply, 7, result{OK: true, Text: "a<b>&\"c\"\n\u2028"}},
		{TypeHostCall, 1, map[string]any{"api": "x", "args": []any{1.5, nil, "é"}}},
		{TypeReply, math.MaxUint64, nil},
		{TypeToolsChanged, 0, json.RawMessage(`{"tools":[]}`)},
		{TypeCancel, 0, json.RawMessage(nil)},
		{"odd\"type<", 3, 42},
		{TypeReply, 9, Map{"b": List{Number(1e21), Number(1e-7), Bool(false), Null{}}, "a": String("\x01\xff")}},
	} {
		got, err := appendEnvelope(nil, c.typ, c.id, c.payload)
		if err != nil {
			t.Fatal(err)
		}
		var raw json.RawMessage
		switch x := c.payload.(type) {
		case nil:
		case json.RawMessage:
			raw = x
		case Value:
			raw, _ = json.Marshal(valueToAny(x))
		default:
			raw, _ = json.Marshal(x)
		}
		want, _ := json.Marshal(Envelope{Type: c.typ, ID: c.id, Payload: raw})
		if string(got) != string(want) {
			t.Errorf("envelope\n got %s\nwant %s", got, want)
		}
	}
}

// valueToAny is the encoding/json form of a Value, for comparisons.
func valueToAny(v Value) any {
	switch x := v.(type) {
	case Null:
		return nil
	case Bool:
		return bool(x)
	case Number:
		return float64(x)
	case String:
		return string(x)
	case List:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = valueToAny(e)
		}
		return out
	case Map:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = valueToAny(e)
		}
		return out
	}
	return nil
}

// FuzzValueEncoding checks the Value encoder against encoding/json on
// arbitrary strings and numbers.
func FuzzValueEncoding(f *testing.F) {
	f.Add("plain", 1.0)
	f.Add("<script>&\"\\\x00\x1f\x7f", -0.0)
	f.Add("\u2028\u2029\xff\xfe\xc3", 1e21)
	f.Add("é日本\U0001F600", 1e-7)
	f.Add("", 123456789.125)
	f.Fuzz(func(t *testing.T, s string, x float64) {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			if _, err := MarshalValue(Number(x)); err == nil {
				t.Fatalf("%v encoded", x)
			}
			return
		}
		v := Map{s: List{String(s), Number(x)}, "k" + s: Null{}}
		got, err := MarshalValue(v)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(valueToAny(v))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("value %q %v\n got %s\nwant %s", s, x, got, want)
		}
		if !strings.HasPrefix(string(got), "{") || !json.Valid(got) {
			t.Fatalf("invalid JSON %s", got)
		}
	})
}

// FuzzPlainPayload: a payload made of what encoding/json decodes into an
// any (maps, lists, strings, numbers, bools, nulls), as a caller builds
// one, is encoded to the text json.Marshal gives; one that json.Marshal
// refuses is refused.
func FuzzPlainPayload(f *testing.F) {
	f.Add([]byte(`{"api":"bench","method":"echo","args":"0123456789abcdefghij"}`))
	f.Add([]byte(`[1,2.5,-0,1e21,1e-7,"<&>",true,null,{"b":{},"a":[]}]`))
	f.Add([]byte(`"\u2028\ud800x\u00e9"`))
	f.Add([]byte(`{"z":1,"a":{"\u00ff":[[[[]]]],"A":"x"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		if json.Unmarshal(data, &v) != nil {
			return
		}
		for _, p := range []any{v, map[string]any{"wrapped": v, "n": 7, "xs": []any{v, nil}}} {
			want, werr := json.Marshal(p)
			got, gerr := appendPayload(nil, p)
			if (werr == nil) != (gerr == nil) || string(got) != string(want) {
				t.Fatalf("payload %s\n got %s %v\nwant %s %v", data, got, gerr, want, werr)
			}
		}
	})
}

// TestPlainPayloadFallsBack: values of other types inside a map go to
// json.Marshal, and come out as it writes them; a non-finite number is
// refused as it refuses it.
func TestPlainPayloadFallsBack(t *testing.T) {
	type item struct {
		Name string `json:"name"`
	}
	deep := any("x")
	for i := 0; i < maxDepth+5; i++ {
		deep = []any{deep}
	}
	for _, p := range []any{
		map[string]any{"s": item{"a<b"}, "r": json.RawMessage(` {"x": 1} `), "u": uint8(3), "f32": float32(0.1)},
		[]any{map[string]any(nil), []any(nil), int(-5), 3.0},
		deep,
	} {
		want, _ := json.Marshal(p)
		got, err := appendPayload(nil, p)
		if err != nil || string(got) != string(want) {
			t.Fatalf("payload %#v\n got %s %v\nwant %s", p, got, err, want)
		}
	}
	if _, err := appendPayload(nil, map[string]any{"x": math.Inf(1)}); err == nil {
		t.Fatal("an infinite number encoded")
	}
}

// TestInlineRequestsUseNoHandlerGoroutine: with InlineBudget, a caller that
// waits for each reply is served on the reading goroutine alone.
func TestInlineRequestsUseNoHandlerGoroutine(t *testing.T) {
	a, b := pair(t)
	pb := NewPeer(b, Options{InlineBudget: time.Hour})
	pb.HandleInline("echo", func(ctx context.Context, r *Request) (any, error) { return r.Payload, nil })
	served := servePeer(pb)
	for i := 1; i <= 200; i++ {
		if err := a.WriteMessage(rawRequest("echo", i), nil); err != nil {
			t.Fatal(err)
		}
		env, _, err := a.ReadEnvelope()
		if err != nil || env.ID != uint64(i) || string(env.Payload) != strconv.Itoa(i) {
			t.Fatalf("call %d: %+v %v", i, env, err)
		}
	}
	pb.Close()
	<-served
	if pb.workers != 0 {
		t.Fatalf("%d handler goroutines started for sequential calls", pb.workers)
	}
}

// TestInlineSlowHandlerIsTakenOver: a request run inline whose handler
// blocks does not hold back the requests after it: another goroutine takes
// reading over. Serve still returns only after that handler has returned.
func TestInlineSlowHandlerIsTakenOver(t *testing.T) {
	a, b := pair(t)
	pb := NewPeer(b, Options{InlineBudget: time.Millisecond, MaxInFlight: 4})
	release := map[uint64]chan struct{}{1: make(chan struct{}), 101: make(chan struct{}), 201: make(chan struct{})}
	entered := make(chan bool, 3)
	var slowReturned atomic.Bool
	pb.HandleInline("slow", func(ctx context.Context, r *Request) (any, error) {
		st := make([]byte, 64<<10)
		entered <- bytes.Contains(st[:runtime.Stack(st, false)], []byte("ipc.(*Peer).runInline"))
		<-release[r.ID] // ignores ctx: Serve must wait for it all the same
		slowReturned.Store(true)
		return "slow", nil
	})
	pb.HandleInline("echo", func(ctx context.Context, r *Request) (any, error) { return r.Payload, nil })
	served := servePeer(pb)
	// A slow call runs inline; calls behind it are answered while it
	// waits, and its own reply comes when it is released.
	slowThenEchoes := func(slow, n int, what string) {
		t.Helper()
		if err := a.WriteMessage(rawRequest("slow", slow), nil); err != nil {
			t.Fatal(err)
		}
		if inline := <-entered; !inline {
			t.Fatalf("%s: a lone request did not run on the reading goroutine", what)
		}
		for i := slow + 1; i <= slow+n; i++ {
			if err := a.WriteMessage(rawRequest("echo", i), nil); err != nil {
				t.Fatal(err)
			}
			env, _, err := a.ReadEnvelope()
			if err != nil || env.ID != uint64(i) || env.Error != nil {
				t.Fatalf("%s: call %d behind the slow one: %+v %v", what, i, env, err)
			}
		}
		close(release[uint64(slow)])
		env, _, err := a.ReadEnvelope()
		if err != nil || env.ID != uint64(slow) || string(env.Payload) != `"slow"` {
			t.Fatalf("%s: slow call: %+v %v", what, env, err)
		}
	}
	slowThenEchoes(1, 99, "first")
	// Again, on the goroutine that took over: the peer's one timer,
	// re-armed there, hands reading on once more.
	slowThenEchoes(201, 19, "after a takeover")
	// Close while another slow call runs: Serve returns after it.
	slowReturned.Store(false)
	if err := a.WriteMessage(rawRequest("slow", 101), nil); err != nil {
		t.Fatal(err)
	}
	<-entered
	pb.Close()
	close(release[101])
	<-served
	if !slowReturned.Load() {
		t.Fatal("Serve returned while a handler was still running")
	}
	if n := pb.detached.Load(); n != 0 {
		t.Fatalf("%d taken-over goroutines still counted after Serve returned", n)
	}
}

// TestPipelinedRequestsRunInline: a caller that keeps several requests in
// flight is served on the reading goroutine too, one request after the
// other, while the handlers return at once: no handler goroutine is
// started (a hand-off per request costs a goroutine wake-up each).
func TestPipelinedRequestsRunInline(t *testing.T) {
	a, b := pair(t)
	pb := NewPeer(b, Options{InlineBudget: time.Hour, MaxInFlight: 8})
	pb.HandleInline("echo", func(ctx context.Context, r *Request) (any, error) { return r.Payload, nil })
	served := servePeer(pb)
	keepInFlight(t, a, 8, 2000, "")
	pb.Close()
	<-served
	if pb.workers != 0 {
		t.Fatalf("%d handler goroutines started for fast pipelined requests", pb.workers)
	}
}

// TestTakeoversAreBounded: at most MaxInFlight goroutines may be taken over
// while their inline request is not done (each may be stuck writing a
// reply the other side never reads); past that, reading waits.
func TestTakeoversAreBounded(t *testing.T) {
	_, b := pair(t)
	pb := NewPeer(b, Options{MaxInFlight: 3})
	for i := uint64(1); i <= 3; i++ {
		pb.inline.Store(i << 1)
		if !pb.takeOver(i << 1) {
			t.Fatalf("takeover %d refused below the bound", i)
		}
	}
	pb.inline.Store(4 << 1)
	if pb.takeOver(4 << 1) {
		t.Fatal("a fourth goroutine taken over with MaxInFlight 3")
	}
	if got := pb.inline.Load(); got != 4<<1 {
		t.Fatalf("a refused takeover changed the inline state: %d", got)
	}
	pb.detached.Add(-1) // one of them finished its request
	if !pb.takeOver(4 << 1) {
		t.Fatal("takeover refused once below the bound again")
	}
	// A takeover that comes after the request ended is not one.
	pb.inline.Store(0)
	if pb.takeOver(5 << 1) {
		t.Fatal("took over a request that had ended")
	}
	if n := pb.detached.Load(); n != 3 {
		t.Fatalf("detached = %d, want 3", n)
	}
}

// TestInlineWithRequestsInFlight: callers that keep several requests in
// flight are served correctly and without busy replies on a peer that runs
// requests inline.
func TestInlineWithRequestsInFlight(t *testing.T) {
	a, b := pair(t)
	pb := NewPeer(b, Options{InlineBudget: time.Millisecond, MaxInFlight: 8})
	pb.HandleInline("echo", func(ctx context.Context, r *Request) (any, error) { return r.Payload, nil })
	served := servePeer(pb)
	const n, window = 2000, 8
	sent := 0
	for ; sent < window; sent++ {
		a.WriteMessage(rawRequest("echo", sent+1), nil)
	}
	seen := map[uint64]bool{}
	for got := 0; got < n; got++ {
		env, _, err := a.ReadEnvelope()
		if err != nil || env.Error != nil || string(env.Payload) != strconv.FormatUint(env.ID, 10) || seen[env.ID] {
			t.Fatalf("reply %d: %+v %+v %v", got, env, env.Error, err)
		}
		seen[env.ID] = true
		if sent < n {
			sent++
			a.WriteMessage(rawRequest("echo", sent), nil)
		}
	}
	pb.Close()
	<-served
}

// TestDirectHandlerAndWaitRunOnTheReadingThread: Serve on a locked thread,
// with SetWait, runs direct handlers and the wait function on that thread;
// a Deferred request keeps its in-flight slot until Reply.
func TestDirectHandlerAndWaitRunOnTheReadingThread(t *testing.T) {
	a, b := pair(t)
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(efd)
	readerTid := make(chan int, 1)
	woken := make(chan int, 1)
	b.SetWait(func(fd int) {
		for {
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(efd), Events: unix.POLLIN}}
			if _, err := unix.Poll(pfd, -1); err != nil && err != unix.EINTR {
				return
			}
			if pfd[1].Revents != 0 {
				var buf [8]byte
				unix.Read(efd, buf[:])
				woken <- unix.Gettid()
			}
			if pfd[0].Revents != 0 {
				return
			}
		}
	})
	pb := NewPeer(b, Options{MaxInFlight: 1})
	var directTid atomic.Int64
	deferredID := make(chan uint64, 1)
	pb.HandleDirect("start", func(ctx context.Context, r *Request) (any, error) {
		directTid.Store(int64(unix.Gettid()))
		deferredID <- r.ID
		return Deferred, nil
	})
	served := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		readerTid <- unix.Gettid()
		served <- pb.Serve()
	}()
	tid := <-readerTid
	if err := a.WriteMessage(rawRequest("start", 1), nil); err != nil {
		t.Fatal(err)
	}
	first := <-deferredID
	// The deferred request holds the only slot: the next one is refused.
	a.WriteMessage(rawRequest("start", 2), nil)
	env, _, err := a.ReadEnvelope()
	if err != nil || env.ID != 2 || env.Error == nil || env.Error.Code != CodeBusy {
		t.Fatalf("second request: %+v %v", env, err)
	}
	if got := directTid.Load(); got != int64(tid) {
		t.Fatalf("direct handler ran on thread %d, the reader is %d", got, tid)
	}
	unix.Write(efd, []byte{1, 0, 0, 0, 0, 0, 0, 0})
	if got := <-woken; got != tid {
		t.Fatalf("wait function ran on thread %d, the reader is %d", got, tid)
	}
	pb.Reply(first, "done", nil)
	env, _, err = a.ReadEnvelope()
	if err != nil || env.ID != 1 || string(env.Payload) != `"done"` {
		t.Fatalf("first request: %+v %v", env, err)
	}
	// The slot is free again.
	a.WriteMessage(rawRequest("start", 3), nil)
	pb.Reply(<-deferredID, nil, &RemoteError{Code: CodeDenied, Message: "no"})
	env, _, err = a.ReadEnvelope()
	if err != nil || env.ID != 3 || env.Error == nil || env.Error.Code != CodeDenied {
		t.Fatalf("third request: %+v %v", env, err)
	}
	pb.Close()
	<-served
}
