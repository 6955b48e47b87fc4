package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/pkg/ipc"
)

// hostCallTestServer is a hostCall server as a session makes it, allowing
// t.echo, with a client Peer on the socket of one command.
func hostCallTestServer(t *testing.T) (*hostCallServer, *ipc.Peer) {
	t.Helper()
	h := NewHandlers()
	h.Handle("t", "echo", func(ctx context.Context, c HostCall) (ipc.Value, error) { return c.Args, nil })
	s := newHostCallServer([]string{"t.echo"})
	s.handlers = h
	hc, err := s.newConn()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := ipc.NewConn(hc.child)
	if err != nil {
		t.Fatal(err)
	}
	p := ipc.NewPeer(conn, ipc.Options{})
	go p.Serve()
	t.Cleanup(func() { p.Close(); s.close() })
	return s, p
}

// connectRaw opens a private connection with a connect message over p and
// returns the program's end as a raw fd (closed at the end of the test).
func connectRaw(t *testing.T, p *ipc.Peer) (int, error) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Call(context.Background(), ipc.TypeConnect, nil, fds[1:])
	unix.Close(fds[1])
	if err != nil {
		unix.Close(fds[0])
		return -1, err
	}
	t.Cleanup(func() { unix.Close(fds[0]) })
	return fds[0], nil
}

func (s *hostCallServer) openConns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.peers)
}

// TestConnectCapSparesExec: the connections programs open with connect
// are bounded, with a clear refusal; the socket of a command the host
// starts is not counted, so a background program at the bound cannot make
// later Execs fail; a closed connection frees its place.
func TestConnectCapSparesExec(t *testing.T) {
	s, p := hostCallTestServer(t)
	var opened []int
	for i := 0; i < maxHostCallConns; i++ {
		fd, err := connectRaw(t, p)
		if err != nil {
			t.Fatalf("connect %d of %d: %v", i+1, maxHostCallConns, err)
		}
		opened = append(opened, fd)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Call(context.Background(), ipc.TypeConnect, nil, fds[1:])
	unix.Close(fds[1])
	var re *ipc.RemoteError
	if !errors.As(err, &re) || re.Code != ipc.CodeDenied || !strings.Contains(re.Message, strconv.Itoa(maxHostCallConns)) {
		unix.Close(fds[0])
		t.Fatalf("connect past the bound: %v, want a denied error naming the bound", err)
	}
	// The refused socket says why too (a connect sent as a notification
	// gets no reply), then hangs up.
	refused, err := ipc.NewConn(os.NewFile(uintptr(fds[0]), "refused"))
	if err != nil {
		t.Fatal(err)
	}
	defer refused.Close()
	if env, _, err := refused.ReadEnvelope(); err != nil || env.Type != ipc.TypeError || env.Error == nil || env.Error.Message != re.Message {
		t.Fatalf("on the refused socket: %+v, %v", env, err)
	}
	if _, _, err := refused.ReadMessage(); !errors.Is(err, ipc.ErrClosed) {
		t.Fatalf("refused socket not closed: %v", err)
	}
	// The next command still gets its socket, and it works.
	hc, err := s.newConn()
	if err != nil {
		t.Fatalf("a command's hostCall socket with %d connections open: %v", maxHostCallConns, err)
	}
	conn, err := ipc.NewConn(hc.child)
	if err != nil {
		t.Fatal(err)
	}
	cmd := ipc.NewPeer(conn, ipc.Options{})
	go cmd.Serve()
	defer cmd.Close()
	rep, err := cmd.Call(context.Background(), ipc.TypeHostCall, map[string]any{"api": "t", "method": "echo", "args": 1}, nil)
	if err != nil || !bytes.Contains(rep.Payload, []byte(`"ok":true`)) {
		t.Fatalf("hostCall on the command's socket: %v", err)
	}
	// One connection closed: its place is free again.
	n := s.openConns()
	unix.Shutdown(opened[0], unix.SHUT_RDWR)
	deadline := time.Now().Add(5 * time.Second)
	for s.openConns() == n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if _, err := connectRaw(t, p); err != nil {
		t.Fatalf("connect after one connection closed: %v", err)
	}
}

// TestHostCallBudgetPartialMessages: programs that open many connections
// and leave on each a 4 MiB message one fragment short make the
// supervisor hold at most the session's budget: the connections past it
// are closed.
func TestHostCallBudgetPartialMessages(t *testing.T) {
	s, p := hostCallTestServer(t)
	const conns = 40
	base := liveHeap()
	frame := bytes.Repeat([]byte{' '}, ipc.MaxFrame)
	frame[0] = 0x1e // a fragment, not the last
	for i := 0; i < conns; i++ {
		fd, err := connectRaw(t, p)
		if err != nil {
			t.Fatal(err)
		}
		for f := 0; f < (4<<20)/ipc.MaxFrame-1; f++ {
			if _, err := unix.Write(fd, frame); err != nil {
				break // closed over the budget
			}
		}
	}
	// The command's socket and the connections within the budget stay.
	within := 1 + hostCallBudgetBytes/(4<<20)
	deadline := time.Now().Add(5 * time.Second)
	for s.openConns() > within && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	grown := int64(liveHeap()) - int64(base)
	t.Logf("%d connections open of %d; budget holds %d bytes; live heap grew by %d", s.openConns(), conns+1, s.budget.Bytes(), grown)
	if n := s.openConns(); n > within {
		t.Fatalf("%d hostCall connections still open, each holding a half-built message; want at most %d", n, within)
	}
	if grown > hostCallBudgetBytes+32<<20 {
		t.Fatalf("live heap grew by %d bytes, budget %d", grown, hostCallBudgetBytes)
	}
}

// TestHostCallBudgetUnreadReplies: programs that send hostCalls on many
// connections and never read a reply pin a bounded number of goroutines
// in the supervisor, whatever the number of connections.
func TestHostCallBudgetUnreadReplies(t *testing.T) {
	_, p := hostCallTestServer(t)
	const conns = 32
	before := peerGoroutines()
	call := []byte(`{"type":"hostCall","id":1,"payload":{"api":"t","method":"echo","args":"` + strings.Repeat("x", 512) + `"}}`)
	for i := 0; i < conns; i++ {
		fd, err := connectRaw(t, p)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for j := 0; j < 2000; j++ {
				if _, err := unix.Write(fd, call); err != nil {
					return
				}
			}
		}()
	}
	peak := 0
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		peak = max(peak, peerGoroutines()-before)
	}
	t.Logf("peak %d supervisor goroutines for %d connections not reading their replies", peak, conns)
	// The budget's goroutines, and per connection its reader and the
	// goroutine waiting in Serve once reading was taken over from it; and,
	// for an instant, a timer goroutine trying a takeover, at most one per
	// connection (under load many fire together: 329 against a bound of
	// 2 per connection + 4 was seen on a busy machine). What must not be
	// is a goroutine per unread call (2000 a connection here).
	if bound := hostCallGoroutines + 3*conns + 4; peak > bound {
		t.Fatalf("%d supervisor goroutines for %d connections, bound %d", peak, conns, bound)
	}
}

// TestAuditArgsAreCut: a call's args are cut in its audit line (a refused
// call's as well), after redaction, with a marker and the length sent;
// strings from inside are cut too.
func TestAuditArgsAreCut(t *testing.T) {
	h := NewHandlers()
	h.Handle("t", "echo", func(ctx context.Context, c HostCall) (ipc.Value, error) { return nil, nil })
	var out bytes.Buffer
	s := newHostCallServer([]string{"t.echo"})
	s.handlers = h
	s.audit = &auditLog{w: &out}
	args := `{"a_token":"SECRET","text":"` + strings.Repeat("é<", 300<<10) + `"}`
	long := strings.Repeat("m", 1<<20)
	for _, c := range []struct{ name, payload string }{
		{"allowed", `{"api":"t","method":"echo","args":` + args + `}`},
		{"refused", `{"api":"t","method":"nope","args":` + args + `}`},
		// Nested deeper than a Value may be: decoded by encoding/json.
		{"not a value", `{"api":"t","method":"echo","args":` + strings.Repeat("[", 70) + args + strings.Repeat("]", 70) + `}`},
		{"long method", `{"api":"t","method":"` + long + `","args":` + args + `}`},
	} {
		out.Reset()
		if _, err := s.serveCall(context.Background(), &ipc.Request{Type: ipc.TypeHostCall, ID: 1, Payload: json.RawMessage(c.payload)}); err != nil {
			t.Fatal(err)
		}
		line := out.Bytes()
		if len(line) > 64<<10 {
			t.Errorf("%s: audit line of %d bytes", c.name, len(line))
			continue
		}
		var entry map[string]any
		if err := json.Unmarshal(line, &entry); err != nil {
			t.Errorf("%s: audit line is not JSON: %v", c.name, err)
			continue
		}
		var call hostCallRequest
		json.Unmarshal([]byte(c.payload), &call)
		text, _ := entry["args"].(string)
		if entry["args_truncated"] != true || entry["args_bytes"] != float64(len(call.Args)) || len(text) > maxAuditArgs+len("…") || !strings.HasSuffix(text, "…") {
			t.Errorf("%s: args %.80q…, args_bytes %v, args_truncated %v", c.name, text, entry["args_bytes"], entry["args_truncated"])
		}
		if bytes.Contains(line, []byte("SECRET")) {
			t.Errorf("%s: a redacted value in a cut line", c.name)
		}
		if !strings.HasPrefix(strings.TrimLeft(text, "["), `{"a_token":"[REDACTED]","text":"é\u003c`) {
			t.Errorf("%s: args %.80q…", c.name, text)
		}
		if m, _ := entry["method"].(string); len(m) > maxAuditText+64 {
			t.Errorf("%s: method of %d bytes in the audit line", c.name, len(m))
		}
		if e, _ := entry["error"].(string); len(e) > maxAuditText+64 {
			t.Errorf("%s: error of %d bytes in the audit line", c.name, len(e))
		}
	}
}

func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// peerGoroutines counts the goroutines running pkg/ipc Peer code.
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
