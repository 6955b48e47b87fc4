package integration

import (
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Found by review: for a blocking connect, the supervisor's dial waits
// for the handshake, then calls connect again on its socket so that the
// kernel marks it SS_CONNECTED, and ignores that call's answer. Should the
// peer reset the connection between the two, the second connect meets
// TCP_CLOSE and its sock_error path marks the socket SS_UNCONNECTED
// (__inet_stream_connect); the socket is installed all the same and the
// program's connect answers 0. listen(2) (not trapped) then opens it in
// the host's network namespace. The peer is the program's own allowed
// server, which resets each connection a varying while after it accepts it.

// dialRacePy: blocking connects to the allowed name, each followed by
// listen, until one listens.
const dialRacePy = `
import errno, socket, sys
port, tries = int(sys.argv[1]), int(sys.argv[2])
def name(e): return errno.errorcode.get(e, str(e))
a = socket.gethostbyname("good.test")
seen = {}
for i in range(tries):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(10)
    try:
        s.connect((a, port)); r = "0"
    except OSError as e:
        r = name(e.errno) if e.errno else type(e).__name__
    seen[r] = seen.get(r, 0) + 1
    try:
        s.listen(1)
        print("listen ok", flush=True)
        print("bound", "%s:%d" % s.getsockname(), flush=True)
        print("attempt", i, flush=True)
        print("connect", r, flush=True)
        sys.exit(0)
    except OSError:
        pass
    s.close()
print("answers", " ".join("%s=%d" % kv for kv in sorted(seen.items())), flush=True)
`

// TestNetworkBlockingDialRaceListensOnHost: a blocking connect whose peer
// resets at once must not hand the program an unconnected host socket.
func TestNetworkBlockingDialRaceListensOnHost(t *testing.T) {
	requirePython(t)
	eachUser(t, func(t *testing.T, u user) {
		// A reset after a varying while (a spin: sleeps are coarser
		// than the window).
		port := resetServer(t, false, func(_ net.Conn, n int) {
			end := time.Now().Add(time.Duration(n%60) * 3 * time.Microsecond)
			for time.Now().Before(end) {
			}
		})
		up := newFakeUpstream(t)
		ws := u.tempDir(t)
		prof := netProfile(t, u, filepath.Dir(ws), up)
		r := u.run(t, &runOpts{dir: ws, timeout: 5 * time.Minute}, "run", "--profile", prof,
			"--allow-host", "good.test:"+strconv.Itoa(port), "--add-host", "good.test:127.0.0.1", "--",
			"/usr/bin/python3", "-c", dialRacePy, strconv.Itoa(port), "600")
		t.Logf("sandbox: %s", strings.ReplaceAll(strings.TrimSpace(r.stdout), "\n", "; "))
		res := netResults(r.stdout)
		if res["listen"] == "ok" {
			t.Errorf("listen(2) succeeded on an installed host socket whose peer reset during the dial (bound %s, attempt %s, connect answered %s): it listens in the host's network namespace", res["bound"], res["attempt"], res["connect"])
		} else if res["answers"] == "" {
			t.Fatalf("the attempts did not run (%v)\nstderr: %s", res, r.stderr)
		}
	})
}
