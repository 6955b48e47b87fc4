package integration

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Ways a program inside could reach the host's network that the allowlist
// does not allow, found by review of the filtered network (issue 18), and
// fixed. Only loopback servers this test runs are contacted.

// TestNetworkUpstreamLoopbackAnswerRefused: the host's loopback is reached
// only through a name the user pinned there with --add-host. An allowed
// name that is not pinned and that the upstream resolver answers with
// 127.0.0.1 (DNS rebinding: whoever controls an allowed zone, or any
// "*.nip.io"-like public name under an allowed wildcard, chooses the
// answer) must not lead to the host's loopback services.
//
// The fake upstream answers every name under up.test with 127.0.0.1.
//
// Found by review; such answers are now refused at the lookup.
func TestNetworkUpstreamLoopbackAnswerRefused(t *testing.T) {
	requirePython(t)
	eachUser(t, func(t *testing.T, u user) {
		srv, _, ws, prof, port := filteredRig(t, u)
		script := `import sys, urllib.request
try:
    print("get", urllib.request.build_opener(urllib.request.ProxyHandler({})).open("http://rebind.up.test:%s/" % sys.argv[1], timeout=30).read().decode().strip().replace(" ", "_"))
except Exception as e:
    print("get", type(e).__name__)
`
		r := u.run(t, &runOpts{dir: ws}, "run", "--profile", prof, "--json-status", "fd:2",
			"--allow-host", "rebind.up.test:"+port, "--", "/usr/bin/python3", "-c", script, port)
		got := netResults(r.stdout)
		if got["get"] == "" {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
		if n := srv.requests.Load(); n != 0 || strings.HasPrefix(got["get"], "hello") {
			t.Errorf("an unpinned allowed name answered 127.0.0.1 by the upstream reached the host's loopback server (%d requests, get %q)", n, got["get"])
		}
	})
}

// TestNetworkRefusalEventsBounded: every refused connect was a violation
// event (--json-status) and an audit line (MCP), with no aggregation and
// no bound: a program inside that loops over a refused connect (each
// costs it a few µs) wrote the host's status stream and audit log as fast
// as it could (found by review: 3000 refused connects gave 3000 events).
// Each target is now reported once.
func TestNetworkRefusalEventsBounded(t *testing.T) {
	requirePython(t)
	eachUser(t, func(t *testing.T, u user) {
		_, _, ws, prof, port := filteredRig(t, u)
		script := `import socket, sys
n = 0
for i in range(3000):
    s = socket.socket()
    try:
        s.connect(("192.0.2.1", int(sys.argv[1])))
    except OSError:
        n += 1
    s.close()
print("refused", n)
`
		r := u.run(t, &runOpts{dir: ws}, "run", "--profile", prof, "--json-status", "fd:2",
			"--allow-host", "good.test:"+port, "--add-host", "good.test:127.0.0.1", "--", "/usr/bin/python3", "-c", script, port)
		if got := netResults(r.stdout)["refused"]; got != "3000" {
			t.Fatalf("refused %q, want 3000\nstdout: %s\nstderr: %.2000s", got, r.stdout, r.stderr)
		}
		if n := len(violationLines(t, r.stderr)); n > 100 {
			t.Errorf("3000 refusals of one target gave %d violation events (%d bytes of status): unbounded", n, len(r.stderr))
		}
	})
}

// TestNetworkFilteredRefusesVsockUnconfined: vsock ignores network
// namespaces, so an AF_VSOCK socket leaves a filtered network without
// passing the connect trap (to the hypervisor, CID 2, or the VM host's
// vsock services). The default seccomp profile refuses the family; the
// filtered network's own notification filter (notify.Program) does not,
// although it does close io_uring "also under --seccomp unconfined" for
// the same reason (a way out the trap does not see): with --seccomp
// unconfined the filtered network did not fail closed (found by review).
// The notification filter now refuses the family (EAFNOSUPPORT).
func TestNetworkFilteredRefusesVsockUnconfined(t *testing.T) {
	requirePython(t)
	eachUser(t, func(t *testing.T, u user) {
		_, _, ws, prof, port := filteredRig(t, u)
		script := `import socket
try:
    socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM); print("vsock created")
except OSError as e:
    print("vsock", e.errno)
`
		r := u.run(t, &runOpts{dir: ws}, "run", "--profile", prof, "--seccomp", "unconfined",
			"--allow-host", "good.test:"+port, "--", "/usr/bin/python3", "-c", script)
		got := netResults(r.stdout)["vsock"]
		if got == "" {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
		if got == "created" {
			t.Errorf("under a filtered network with --seccomp unconfined, socket(AF_VSOCK) succeeds: a way out that no connect trap sees")
		}
	})
}

// synDropper is a listener on the host's 127.0.0.1 whose accept queue is
// full (backlog 0, one connection never accepted): the kernel drops every
// further SYN (tcp_conn_request, sk_acceptq_is_full), so a connect to it
// stays in SYN_SENT, as a connect to a slow or filtered real host does for
// one round trip.
func synDropper(t *testing.T) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	port := sa.(*unix.SockaddrInet4).Port
	// The one connection the queue holds: never accepted.
	c, err := net.DialTimeout("tcp4", "127.0.0.1:"+strconv.Itoa(port), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return port
}

// freeLoopbackPort returns a port on the host's 127.0.0.1 nothing listens
// on (just now).
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// halfOpenPy makes a nonblocking connect to an allowed name whose host
// does not answer the SYN: nsbox installs its host socket still in
// SYN_SENT (EINPROGRESS). shutdown(2) in SYN_SENT would disconnect the
// socket (inet_shutdown calls the protocol's disconnect and sets
// SS_UNCONNECTED): a socket of the host's network namespace, unconnected,
// on which neither bind(2) nor listen(2) passes through the trap. It then
// listened on the host's 127.0.0.1:LPORT and sent a line to whoever
// connected (found by review). The trap now refuses that shutdown
// (ENOTCONN), and the script stops at the first step refused.
const halfOpenPy = `
import errno, socket, sys
port, lport = int(sys.argv[1]), int(sys.argv[2])
def name(e): return errno.errorcode.get(e, str(e))
a = socket.getaddrinfo("slow.test", port, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setblocking(False)
print("connect", name(s.connect_ex((a, port))), flush=True)
for step, f in (("shutdown", lambda: s.shutdown(socket.SHUT_RDWR)),
                ("bind", lambda: s.bind(("127.0.0.1", lport))),
                ("listen", lambda: s.listen(1))):
    try:
        f(); print(step, "ok", flush=True)
    except OSError as e:
        print(step, name(e.errno), flush=True); sys.exit(0)
` + acceptGreetPy

// TestNetworkHalfOpenSocketListensOnHost: a program inside must not get a
// listening socket in the host's network namespace. The installed-socket
// test (TestNetworkInstalledSocketStaysPut) covers an established
// connection, whose shutdown keeps it SS_CONNECTED; a connection still in
// SYN_SENT was dissolved by shutdown and could then bind and listen on
// the host: a host process connecting to 127.0.0.1:LPORT reached the
// sandbox.
func TestNetworkHalfOpenSocketListensOnHost(t *testing.T) {
	requirePython(t)
	eachUser(t, func(t *testing.T, u user) {
		slow := synDropper(t)
		lport := freeLoopbackPort(t)
		up := newFakeUpstream(t)
		ws := u.tempDir(t)
		prof := netProfile(t, u, filepath.Dir(ws), up)
		// A host client that keeps trying 127.0.0.1:LPORT while the
		// sandbox runs.
		var got atomic.Value
		stop := hostClient(strconv.Itoa(lport), 100*time.Millisecond, firstLine(&got))
		r := u.run(t, &runOpts{dir: ws}, "run", "--profile", prof,
			"--allow-host", "slow.test:"+strconv.Itoa(slow), "--add-host", "slow.test:127.0.0.1", "--",
			"/usr/bin/python3", "-c", halfOpenPy, strconv.Itoa(slow), strconv.Itoa(lport))
		stop()
		t.Logf("sandbox: %s", strings.ReplaceAll(strings.TrimSpace(r.stdout), "\n", "; "))
		res := netResults(r.stdout)
		if res["connect"] != "EINPROGRESS" {
			t.Fatalf("the connect was not left in progress (%q): nothing tested\nstderr: %s", res["connect"], r.stderr)
		}
		if res["shutdown"] != "ENOTCONN" {
			t.Errorf("shutdown of an installed socket still connecting: %q, want ENOTCONN", res["shutdown"])
		}
		if g := got.Load().(string); g != "" {
			t.Errorf("a host process connecting to the host's 127.0.0.1:%d reached the sandbox (read %q): the sandbox listens in the host's network namespace", lport, g)
		}
		if res["listen"] == "ok" {
			t.Errorf("listen(2) on a socket nsbox installed succeeded (%v): it listens in the host's network namespace", res)
		}
	})
}

// reusePortSvc is a host service of the kind many servers are (nginx's
// "reuseport", envoy, Go servers that scale accept): it listens on the
// host's 127.0.0.1 with SO_REUSEPORT and answers every client "SERVICE".
const reusePortSvc = `
import socket, threading
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
l.bind(("127.0.0.1", 0))
l.listen(64)
print(l.getsockname()[1], flush=True)
while True:
    c, _ = l.accept()
    c.sendall(b"SERVICE\n")
    c.close()
`

// stealPy dissolves a half-open installed socket as halfOpenPy does, then
// joins the host service's SO_REUSEPORT group on 127.0.0.1:LPORT (the
// socket was made by the supervisor, so it carries the supervisor's uid,
// the same as the service's) and answers the clients it is given.
const stealPy = `
import socket, sys
port, lport = int(sys.argv[1]), int(sys.argv[2])
a = socket.getaddrinfo("slow.test", port, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setblocking(False)
s.connect_ex((a, port))
try:
    s.shutdown(socket.SHUT_RDWR)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.bind(("127.0.0.1", lport))
    s.listen(8)
    print("joined", flush=True)
except OSError as e:
    print("joined", e.errno); sys.exit(0)
s.setblocking(True)
s.settimeout(30)
try:
    c, _ = s.accept()
    c.sendall(b"STOLEN\n")
    c.close()
except OSError:
    pass
`

// TestNetworkHalfOpenSocketStealsHostService: the half-open socket of
// TestNetworkHalfOpenSocketListensOnHost also joins the SO_REUSEPORT group
// of a host service run by the user who runs nsbox (the kernel lets
// sockets of one uid share a port, and the supervisor made this one):
// the kernel then handed part of that service's clients to the sandbox
// (found by review).
func TestNetworkHalfOpenSocketStealsHostService(t *testing.T) {
	requirePython(t)
	eachUser(t, func(t *testing.T, u user) {
		slow := synDropper(t)
		svc := exec.Command("/usr/bin/python3", "-c", reusePortSvc)
		u.asUser(svc)
		out, err := svc.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := svc.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { svc.Process.Kill(); svc.Wait() }()
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		lport := strings.TrimSpace(line)
		up := newFakeUpstream(t)
		ws := u.tempDir(t)
		prof := netProfile(t, u, filepath.Dir(ws), up)
		var stolen, served atomic.Int64
		stop := hostClient(lport, 20*time.Millisecond, func(line string) bool {
			switch line {
			case "STOLEN":
				stolen.Add(1)
				return false
			case "SERVICE":
				served.Add(1)
			}
			return true
		})
		r := u.run(t, &runOpts{dir: ws}, "run", "--profile", prof,
			"--allow-host", "slow.test:"+strconv.Itoa(slow), "--add-host", "slow.test:127.0.0.1", "--",
			"/usr/bin/python3", "-c", stealPy, strconv.Itoa(slow), lport)
		stop()
		t.Logf("sandbox: %s; service answered %d clients", strings.TrimSpace(r.stdout), served.Load())
		if stolen.Load() != 0 {
			t.Errorf("a client of the host service on 127.0.0.1:%s was answered by the sandbox", lport)
		}
	})
}

// TestNetworkSecondConnect: a second connect on a socket the filter
// installed answers as the kernel would, without the kernel making it:
// EALREADY while it connects, EISCONN once connected (it answered
// EISCONN to all; found by review). The kernel's own second connect on a
// socket whose connect failed would disconnect it, and an unconnected
// socket of the host's namespace could listen there.
func TestNetworkSecondConnect(t *testing.T) {
	requirePython(t)
	eachUser(t, func(t *testing.T, u user) {
		slow := synDropper(t)
		_, _, ws, prof, port := filteredRig(t, u)
		script := `import errno, socket, sys
def name(e): return errno.errorcode.get(e, str(e))
slow, port = int(sys.argv[1]), int(sys.argv[2])
a, g = socket.gethostbyname("slow.test"), socket.gethostbyname("good.test")
s = socket.socket(); s.setblocking(False)
print("slow1", name(s.connect_ex((a, slow))))
print("slow2", name(s.connect_ex((a, slow))))
t = socket.socket(); t.connect((g, port))
print("good2", name(t.connect_ex((g, port))))
`
		r := u.run(t, &runOpts{dir: ws}, "run", "--profile", prof,
			"--allow-host", "slow.test:"+strconv.Itoa(slow), "--add-host", "slow.test:127.0.0.1",
			"--allow-host", "good.test:"+port, "--add-host", "good.test:127.0.0.1", "--",
			"/usr/bin/python3", "-c", script, strconv.Itoa(slow), port)
		got := netResults(r.stdout)
		if got["slow1"] != "EINPROGRESS" || got["slow2"] != "EALREADY" || got["good2"] != "EISCONN" {
			t.Fatalf("results %v\nstderr: %s", got, r.stderr)
		}
	})
}

// hostClient connects to the host's 127.0.0.1:port every interval, reads
// one line and hands it to seen (trimmed; "" when none came) until seen
// returns false or the returned stop is called, which waits for it. The
// timeouts are deadlock guards, not assertions.
func hostClient(port string, interval time.Duration, seen func(line string) bool) (stop func()) {
	return hostClientFrom(func() string { return port }, interval, seen)
}

// hostClientFrom is hostClient with the port asked of portOf at each try
// ("": none yet).
func hostClientFrom(portOf func() string, interval time.Duration, seen func(line string) bool) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-time.After(interval):
			}
			port := portOf()
			if port == "" {
				continue
			}
			c, err := net.DialTimeout("tcp4", "127.0.0.1:"+port, 5*time.Second)
			if err != nil {
				continue
			}
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if !seen(strings.TrimSpace(line)) {
				return
			}
		}
	}()
	return func() { close(quit); <-done }
}

// portFile returns the port a script wrote to file, or "" before it did.
func portFile(file string) func() string {
	return func() string {
		b, err := os.ReadFile(file)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
}

// firstLine is a seen function for hostClient that keeps the first line
// that came in got and stops.
func firstLine(got *atomic.Value) func(string) bool {
	got.Store("")
	return func(line string) bool {
		if line != "" {
			got.Store(line)
			return false
		}
		return true
	}
}
