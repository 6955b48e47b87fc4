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

// Found by review: againVerdict reads the installed socket's TCP state
// (TCP_INFO) and, finding it past the handshake, makes the program's
// second connect itself on the supervisor's copy of the socket. A socket
// whose nonblocking connect completed is still SS_CONNECTING; should the
// peer reset it between that read and the call, the kernel's connect
// meets TCP_CLOSE and its sock_error path marks it SS_UNCONNECTED
// (__inet_stream_connect): an unconnected socket of the host's network
// namespace, which listen(2) (not trapped) then opens on the host, on the
// wildcard address and nsbox's bound port. The window is the handler's
// few calls; the peer is the program's own allowed server, which resets
// on its cue, and the program tries again on fresh sockets.

// againRacePy: for each attempt, a nonblocking connect to the allowed
// name, wait until it is established, send the cue (the server resets
// on it), spin a varying while, connect again, then try listen.
const againRacePy = `
import errno, os, select, socket, sys, time
port, tries, portfile = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
def name(e): return errno.errorcode.get(e, str(e))
a = socket.gethostbyname("good.test")
seen = {}
for i in range(tries):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setblocking(False)
    s.connect_ex((a, port))
    select.select([], [s], [], 10)
    if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0:
        s.close(); continue
    s.send(b"x")
    end = time.perf_counter() + (i % 40) * 5e-6
    while time.perf_counter() < end:
        pass
    try:
        s.connect((a, port)); r = "0"
    except OSError as e:
        r = name(e.errno)
    seen[r] = seen.get(r, 0) + 1
    try:
        s.listen(1)
        print("listen ok", flush=True)
        print("bound", "%s:%d" % s.getsockname(), flush=True)
        print("attempt", i, flush=True)
        print("again", r, flush=True)
        with open(portfile + ".tmp", "w") as f: f.write(str(s.getsockname()[1]))
        os.rename(portfile + ".tmp", portfile)
        s.setblocking(True)
        s.settimeout(30)
        try:
            c, peer = s.accept()
            c.sendall(b"hello-from-the-sandbox\n")
            c.close()
            print("accept ok", flush=True)
        except OSError as e:
            print("accept", type(e).__name__, flush=True)
        sys.exit(0)
    except OSError:
        pass
    s.close()
print("answers", " ".join("%s=%d" % kv for kv in sorted(seen.items())), flush=True)
`

// TestNetworkAgainConnectRaceListensOnHost: a second connect racing a
// reset must not leave an unconnected host socket that can listen.
func TestNetworkAgainConnectRaceListensOnHost(t *testing.T) {
	requirePython(t)
	eachUser(t, func(t *testing.T, u user) {
		// Each connection is reset once the client has sent a byte.
		port := resetServer(t, true, func(c net.Conn, _ int) {
			_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
			_, _ = c.Read(make([]byte, 1))
		})
		up := newFakeUpstream(t)
		ws := u.tempDir(t)
		prof := netProfile(t, u, filepath.Dir(ws), up)
		portfile := filepath.Join(ws, "port")
		var got atomic.Value
		stop := hostClientFrom(portFile(portfile), 100*time.Millisecond, firstLine(&got))
		r := u.run(t, &runOpts{dir: ws, timeout: 5 * time.Minute}, "run", "--profile", prof,
			"--allow-host", "good.test:"+strconv.Itoa(port), "--add-host", "good.test:127.0.0.1", "--",
			"/usr/bin/python3", "-c", againRacePy, strconv.Itoa(port), "400", portfile)
		stop()
		t.Logf("sandbox: %s", strings.ReplaceAll(strings.TrimSpace(r.stdout), "\n", "; "))
		if g := got.Load().(string); g != "" {
			t.Errorf("a host client of 127.0.0.1 reached the sandbox's listener (read %q)", g)
		}
		res := netResults(r.stdout)
		if res["listen"] == "ok" {
			t.Errorf("listen(2) succeeded on an installed host socket after a second connect met a reset (bound %s, attempt %s, connect answered %s): it listens in the host's network namespace", res["bound"], res["attempt"], res["again"])
		} else if res["answers"] == "" {
			t.Fatalf("the attempts did not run (%v)\nstderr: %s", res, r.stderr)
		}
	})
}
