package sandbox

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nsbox/nsbox/pkg/ipc"
)

// TestHostCallArgsHeldWithinBudget: the session's Budget bounds what the
// supervisor holds for the requests it handles (hostCallBudgetBytes),
// whatever the programs inside send. The arguments parsed from a request
// take many times its bytes: "[{},{},...]" of 4 MiB became about 86 MiB
// of Maps, uncharged, so two such calls in a handler that works for a
// while held several times the whole budget (found by review). The parsed
// values are now charged as they are made (ipc.ParseValueBudget): a call
// whose arguments do not fit is answered with an error before its handler
// runs, and what the supervisor holds stays within the budget.
func TestHostCallArgsHeldWithinBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates a few hundred MiB")
	}
	const conns = 2
	entered, release := make(chan struct{}, conns), make(chan struct{})
	h := NewHandlers()
	h.Handle("t", "hold", func(ctx context.Context, c HostCall) (ipc.Value, error) {
		entered <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		runtime.KeepAlive(c.Args)
		return ipc.Null{}, nil
	})
	s := newHostCallServer([]string{"t.hold"})
	s.handlers = h
	defer s.close()
	defer close(release)

	head, tail := `{"type":"hostCall","id":1,"payload":{"api":"t","method":"hold","args":[`, `0]}}`
	unit := "{},"
	msg := []byte(head + strings.Repeat(unit, (4<<20-len(head)-len(tail))/len(unit)) + tail)
	replies := make(chan string, conns)
	for i := 0; i < conns; i++ {
		hc, err := s.newConn()
		if err != nil {
			t.Fatal(err)
		}
		c, err := ipc.NewConn(hc.child)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			if m, _, err := c.ReadMessage(); err == nil {
				replies <- string(m)
			}
		}()
		defer c.Close()
		if err := c.WriteMessage(msg, nil); err != nil {
			t.Fatal(err)
		}
	}
	before := heapInUse()
	refused := 0
	for i := 0; i < conns; i++ {
		select {
		case <-entered:
		case r := <-replies:
			if !strings.Contains(r, "exceed what the connection's group") {
				t.Fatalf("a call answered before its handler ran: %.200s", r)
			}
			refused++
		case <-time.After(2 * time.Minute): // deadlock guard only
			t.Fatalf("%d of %d calls reached the handler or were answered", i, conns)
		}
	}
	held := int64(heapInUse()) - int64(before)
	t.Logf("%d calls of %d bytes, %d refused: the budget counts %d MiB, the heap grew by %d MiB", conns, len(msg), refused, s.budget.Bytes()>>20, held>>20)
	if held > hostCallBudgetBytes {
		t.Fatalf("the supervisor holds %d MiB for %d calls the budget counts as %d MiB; the whole budget is %d MiB", held>>20, conns, s.budget.Bytes()>>20, hostCallBudgetBytes>>20)
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
