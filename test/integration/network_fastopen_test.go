package integration

import (
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Found by a review of the half-open fix: an installed host socket whose
// connect failed is still SS_CONNECTING in TCP_CLOSE. send(2) with
// MSG_FASTOPEN and no address (then never trapped: a send without an
// address cost nothing) ran tcp_sendmsg_fastopen -> __inet_stream_connect,
// whose sock_error path sets SS_UNCONNECTED (net.ipv4.tcp_fastopen's
// client bit is on by default). listen(2) then succeeded in the host's
// network namespace on nsbox's own bindLocked port, on the wildcard
// address: every host interface. Now a fast-open send is trapped and
// refused on such a socket (EOPNOTSUPP), and a blocking dial's socket is
// marked connected once its connect completed.

// fastOpenPy: nonblocking connect to an allowed name on a closed host port
// (EINPROGRESS, installed, then refused), send(MSG_FASTOPEN), listen, write
// the port to argv[2], accept one client and greet it.
const fastOpenPy = `
import errno, os, select, socket, sys
port, portfile = int(sys.argv[1]), sys.argv[2]
six = len(sys.argv) > 3 and sys.argv[3] == "6"
def name(e): return errno.errorcode.get(e, str(e))
a = socket.getaddrinfo("slow.test", port, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
s = socket.socket(socket.AF_INET6 if six else socket.AF_INET, socket.SOCK_STREAM)
if six: a = "::ffff:" + a  # the same address, through an IPv6 socket
s.setblocking(False)
print("connect", name(s.connect_ex((a, port))), flush=True)
select.select([], [s], [], 20)
print("soerror", name(s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)), flush=True)
try:
    s.send(b"x", socket.MSG_FASTOPEN)
    print("fastopen ok", flush=True)
except OSError as e:
    print("fastopen", name(e.errno), flush=True)
try:
    s.sendmsg([b"x"], [], socket.MSG_FASTOPEN)
    print("fastopenmsg ok", flush=True)
except OSError as e:
    print("fastopenmsg", name(e.errno), flush=True)
try:
    s.listen(1)
    print("listen ok", flush=True)
except OSError as e:
    print("listen", name(e.errno), flush=True); sys.exit(0)
print("bound", s.getsockname()[0], flush=True)
with open(portfile + ".tmp", "w") as f: f.write(str(s.getsockname()[1]))
os.rename(portfile + ".tmp", portfile)
` + acceptGreetPy

// TestNetworkFailedConnectFastOpenListensOnHost: a program inside must not
// get a listening socket in the host's network namespace by way of a
// failed connect and a Fast Open send (it got one: "listen ok", bound
// 0.0.0.0, and a host client on 127.0.0.1:PORT was greeted by the
// sandbox).
func TestNetworkFailedConnectFastOpenListensOnHost(t *testing.T) {
	testFastOpenListen(t, "4")
}

// TestNetworkFailedConnectFastOpenListensOnHostV6: the same through an
// AF_INET6 socket connecting to the allowed name's v4-mapped address (its
// listen would take the wildcard of both families).
func TestNetworkFailedConnectFastOpenListensOnHostV6(t *testing.T) {
	testFastOpenListen(t, "6")
}

func testFastOpenListen(t *testing.T, family string) {
	requirePython(t)
	eachUser(t, func(t *testing.T, u user) {
		closed := freeLoopbackPort(t)
		up := newFakeUpstream(t)
		ws := u.tempDir(t)
		prof := netProfile(t, u, filepath.Dir(ws), up)
		portfile := filepath.Join(ws, "port")
		var got atomic.Value
		stop := hostClientFrom(portFile(portfile), 100*time.Millisecond, firstLine(&got))
		r := u.run(t, &runOpts{dir: ws}, "run", "--profile", prof,
			"--allow-host", "slow.test:"+strconv.Itoa(closed), "--add-host", "slow.test:127.0.0.1", "--",
			"/usr/bin/python3", "-c", fastOpenPy, strconv.Itoa(closed), portfile, family)
		stop()
		t.Logf("sandbox: %s", strings.ReplaceAll(strings.TrimSpace(r.stdout), "\n", "; "))
		res := netResults(r.stdout)
		if res["connect"] != "EINPROGRESS" || res["soerror"] != "ECONNREFUSED" {
			t.Fatalf("the connect was not installed in progress and then refused (%v): nothing tested\nstderr: %s", res, r.stderr)
		}
		for _, k := range []string{"fastopen", "fastopenmsg"} {
			if res[k] == "ok" {
				t.Errorf("a Fast Open send (%s) on an installed host socket whose connect failed was made", k)
			}
		}
		if res["listen"] == "ok" {
			t.Errorf("listen(2) on an installed host socket succeeded after send(MSG_FASTOPEN) (bound %s): it listens in the host's network namespace", res["bound"])
		}
		if g := got.Load().(string); g != "" {
			t.Errorf("a host client of 127.0.0.1 reached the sandbox's listener (read %q)", g)
		}
	})
}

// resetPy: a BLOCKING connect to an allowed name (the supervisor's dial
// waits for the handshake, but on a nonblocking socket of its own, so the
// socket stays SS_CONNECTING), the host server resets the connection,
// then send(MSG_FASTOPEN) and listen.
const resetPy = `
import errno, socket, sys
port = int(sys.argv[1])
def name(e): return errno.errorcode.get(e, str(e))
a = socket.getaddrinfo("slow.test", port, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.settimeout(20)
s.connect((a, port))
print("connect ok", flush=True)
s.sendall(b"go")
try:
    print("recv", repr(s.recv(1)), flush=True)
except OSError as e:
    print("recv", name(e.errno), flush=True)
try:
    s.send(b"x", socket.MSG_FASTOPEN)
    print("fastopen ok", flush=True)
except OSError as e:
    print("fastopen", name(e.errno), flush=True)
try:
    s.listen(1)
    print("listen ok", flush=True)
    print("bound", s.getsockname()[0], flush=True)
except OSError as e:
    print("listen", name(e.errno), flush=True)
`

// TestNetworkResetConnectionListensOnHost: the same way back to an
// unconnected host socket from an ordinary, established connection that
// the peer resets (a server closing with unread data does): not only a
// connect in progress (it was "listen ok").
func TestNetworkResetConnectionListensOnHost(t *testing.T) {
	requirePython(t)
	eachUser(t, func(t *testing.T, u user) {
		// Once the client has sent, close with RST.
		port := resetServer(t, false, func(c net.Conn, _ int) {
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			c.Read(make([]byte, 2))
		})
		up := newFakeUpstream(t)
		ws := u.tempDir(t)
		prof := netProfile(t, u, filepath.Dir(ws), up)
		r := u.run(t, &runOpts{dir: ws}, "run", "--profile", prof,
			"--allow-host", "slow.test:"+strconv.Itoa(port), "--add-host", "slow.test:127.0.0.1", "--",
			"/usr/bin/python3", "-c", resetPy, strconv.Itoa(port))
		t.Logf("sandbox: %s", strings.ReplaceAll(strings.TrimSpace(r.stdout), "\n", "; "))
		res := netResults(r.stdout)
		if res["connect"] != "ok" {
			t.Fatalf("the connect was not made (%v): nothing tested\nstderr: %s", res, r.stderr)
		}
		if res["listen"] == "ok" {
			t.Errorf("listen(2) on an installed host socket succeeded after a reset and send(MSG_FASTOPEN) (bound %s): it listens in the host's network namespace", res["bound"])
		}
	})
}

// acceptGreetPy ends a script whose socket s listens: it accepts one
// client (30 s at most) and greets it with a line the test looks for.
const acceptGreetPy = `s.setblocking(True)
s.settimeout(30)
try:
    c, peer = s.accept()
    c.sendall(b"hello-from-the-sandbox\n")
    c.close()
    print("accept ok", flush=True)
except OSError as e:
    print("accept", type(e).__name__, flush=True)
`

// TestNetworkFilteredOwnListener: with a filtered network, listen(2) is
// handed to the supervisor (refused on the host's sockets): a server the
// program starts on its own loopback still listens and serves, as do a
// unix socket's.
func TestNetworkFilteredOwnListener(t *testing.T) {
	requirePython(t)
	eachUser(t, func(t *testing.T, u user) {
		_, _, ws, prof, port := filteredRig(t, u)
		script := `import os, socket, tempfile
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(4)
c = socket.create_connection(l.getsockname()); a, _ = l.accept()
a.sendall(b"hi"); print("tcp", c.recv(2).decode())
p = os.path.join(tempfile.mkdtemp(), "s")
u = socket.socket(socket.AF_UNIX); u.bind(p); u.listen(1)
v = socket.socket(socket.AF_UNIX); v.connect(p); w, _ = u.accept()
w.sendall(b"hi"); print("unix", v.recv(2).decode())
`
		r := u.run(t, &runOpts{dir: ws}, "run", "--profile", prof,
			"--allow-host", "good.test:"+port, "--add-host", "good.test:127.0.0.1", "--", "/usr/bin/python3", "-c", script)
		got := netResults(r.stdout)
		if got["tcp"] != "hi" || got["unix"] != "hi" {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
	})
}

// resetServer listens on the host's 127.0.0.1 until the test ends and
// resets every connection (SO_LINGER 0, then close) once wait returns
// for it (n counts the connections from 1); concurrently, each on a
// goroutine of its own, or one after the other. It returns the port.
func resetServer(t *testing.T, concurrently bool, wait func(c net.Conn, n int)) int {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for n := 1; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			reset := func(c net.Conn, n int) {
				wait(c, n)
				c.(*net.TCPConn).SetLinger(0)
				c.Close() // RST
			}
			if concurrently {
				go reset(c, n)
			} else {
				reset(c, n)
			}
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}
