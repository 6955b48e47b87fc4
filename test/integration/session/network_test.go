package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// supervisorSockets counts the sockets this process (the supervisor)
// holds.
func supervisorSockets(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestFilteredNetworkSession: through the Go API, a filtered session
// reaches an allowed name, a refused connect is a ViolationError, reported
// as it happens and in the audit log, and once the session is closed the
// supervisor holds no socket more than before it started.
func TestFilteredNetworkSession(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed: the test connects from it")
	}
	eachUser(t, func(t *testing.T) {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		// The echo server's connections are sockets of this process too:
		// each is closed by its goroutine once the peer is, a moment after
		// the session's end, so the count waits for them (echoes).
		var echoes sync.WaitGroup
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				echoes.Add(1)
				go func() { defer echoes.Done(); defer c.Close(); io.Copy(c, c) }()
			}
		}()
		port := ln.Addr().(*net.TCPAddr).Port
		before := supervisorSockets(t)

		var mu sync.Mutex
		var seen []*sandbox.ViolationError
		audit := &syncBuf{}
		s, err := sandbox.Start(context.Background(), sandbox.Policy{
			Network:   sandbox.NetworkFiltered,
			NetFilter: &sandbox.NetFilter{Allow: []string{fmt.Sprintf("good.test:%d", port)}, Hosts: []string{"good.test:127.0.0.1"}},
		}, sandbox.WithAudit(audit), sandbox.WithID("net-test"), sandbox.WithViolations(func(v *sandbox.ViolationError) {
			mu.Lock()
			seen = append(seen, v)
			mu.Unlock()
		}))
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		defer s.Close()
		// Ten connections held at once, each echoing.
		py := fmt.Sprintf(`import socket
cs = [socket.create_connection(("good.test", %d), timeout=30) for _ in range(10)]
for i, c in enumerate(cs):
    c.sendall(b"%%d" %% i)
print(sum(int(c.recv(10)) for c in cs))
`, port)
		res, err := s.Exec(context.Background(), sandbox.Command{Argv: []string{"python3", "-c", py}})
		if err != nil || strings.TrimSpace(string(res.Stdout)) != "45" {
			t.Fatalf("allowed: %v %q %s", err, res.Stdout, res.Stderr)
		}
		st, ok := s.NetStats()
		if !ok || st.Connects != 10 || st.OpenConns != 0 {
			t.Fatalf("stats after the command: %+v %v", st, ok)
		}
		res, err = s.Exec(context.Background(), sandbox.Command{Argv: []string{"python3", "-c", `import socket; socket.create_connection(("good.test", 443), timeout=30)`}})
		var v *sandbox.ViolationError
		if !errors.As(err, &v) || v.Operation != "network connect" || v.Path != "good.test:443" || res.Reason != sandbox.ReasonViolation {
			t.Fatalf("refused connect: %v %+v %s", err, v, res.Stderr)
		}
		mu.Lock()
		if len(seen) != 1 || seen[0].Host != "good.test" || seen[0].Port != 443 {
			t.Errorf("violations reported: %+v", seen)
		}
		mu.Unlock()
		var line map[string]any
		for _, l := range strings.Split(audit.String(), "\n") {
			if json.Unmarshal([]byte(l), &line) == nil && line["kind"] == "violation" {
				break
			}
			line = nil
		}
		if line == nil || line["host"] != "good.test" || line["port"] != float64(443) || line["session"] != "net-test" {
			t.Errorf("audit: %s", audit.String())
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { echoes.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			// Left open: the session kept a connection, counted below.
		}
		if after := supervisorSockets(t); after != before {
			t.Fatalf("the supervisor holds %d sockets after the session, %d before", after, before)
		}
	})
}
