package integration

// Repro tests from an outside review of the filtered network's resolver
// and name policy (issue 18; branch rvdns). They FAIL on purpose on the
// code they were written against, and pass once the finding is fixed.
// Only the host's loopback and the sandbox's own namespaces are used.

import (
	"errors"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestReviewDNSRelaySocketBindsHostPort: with --check-sni a connection to
// port 443 is installed as the client end of the supervisor's relay, a
// socket of the host's network namespace whose local port the kernel
// picked at connect. Once the relay cuts it (here: not a ClientHello) and
// the socket is closed from the sandbox's side too, the kernel gives that
// port back, and bind(2), which is not trapped, binds the host socket to a
// host port the sandbox names: a host service that binds that port then
// fails with EADDRINUSE for as long as the sandbox holds it. Root only
// (the TLS port 443 of the host's loopback); skipped when it is taken.
func TestReviewDNSRelaySocketBindsHostPort(t *testing.T) {
	requirePython(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:443")
	if err != nil {
		t.Skipf("cannot listen on the host's 127.0.0.1:443: %v", err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	script := `import socket, sys, time
port = int(sys.argv[1])
s = socket.create_connection(("good.test", 443), timeout=30)
s.sendall(b"GET / HTTP/1.0\r\n\r\n")
try:
    while s.recv(4096):
        pass
except OSError:
    pass
try:
    s.shutdown(socket.SHUT_WR)
except OSError:
    pass
for _ in range(3000):
    if s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0] == 7:
        break
    time.sleep(0.01)
res = "never"
for _ in range(2000):
    try:
        s.bind(("127.0.0.1", port))
        res = "bound"
        break
    except OSError as e:
        res = e.strerror
        if e.errno == 22:
            break
        time.sleep(0.01)
print("bind", res.replace(" ", "_"), flush=True)
if res == "bound":
    time.sleep(5)
`
	eachUser(t, func(t *testing.T, u user) {
		free, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := free.Addr().(*net.TCPAddr).Port
		free.Close()
		// The host service: tries to bind the port while the sandbox
		// runs, and counts the times it found it taken.
		var taken atomic.Int64
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
				}
				l, err := net.Listen("tcp4", "127.0.0.1:"+strconv.Itoa(port))
				if err == nil {
					l.Close()
				} else if errors.Is(err, syscall.EADDRINUSE) {
					taken.Add(1)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
		up := newFakeUpstream(t)
		ws := u.tempDir(t)
		prof := netProfile(t, u, filepath.Dir(ws), up)
		r := u.run(t, &runOpts{dir: ws}, "run", "--profile", prof, "--check-sni",
			"--allow-host", "good.test", "--add-host", "good.test:127.0.0.1", "--",
			"/usr/bin/python3", "-c", script, strconv.Itoa(port))
		close(stop)
		<-done
		got := netResults(r.stdout)
		if got["bind"] == "bound" {
			t.Errorf("the relayed host socket was bound to host port %d from inside the sandbox (a host service found the port taken %d times)\nstderr: %s", port, taken.Load(), r.stderr)
		} else if !strings.Contains(got["bind"], "Invalid") && got["bind"] != "Operation_not_permitted" {
			t.Logf("bind: %q (exit %d)\nstderr: %s", got["bind"], r.code, r.stderr)
		}
	})
}
