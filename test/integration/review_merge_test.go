package integration

import (
	"strings"
	"testing"
)

// reviewReconnectPy: a socket already connected over the sandbox's own
// loopback, and one listening there, are each connected once more, to an
// allowed name. Linux answers EISCONN to both (a TCP socket connects
// once). It prints "<case>=<outcome>" lines, and for a connect that was
// taken, whether the old socket still acted in the sandbox's namespace
// right after it returned: the loopback peer had no EOF yet ("peer-open"),
// the listener still completed a handshake ("still-accepting").
const reviewReconnectPy = `
import errno, select, socket, sys
port = int(sys.argv[1])
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(8)
a = socket.socket(); a.connect(srv.getsockname())
peer, _ = srv.accept()
try:
    a.connect(("good.test", port))
    r, _, _ = select.select([peer], [], [], 0.05)
    print("connected=taken", "peer-eof" if r and peer.recv(1) == b"" else "peer-open", flush=True)
except OSError as e:
    print("connected=" + errno.errorcode.get(e.errno, str(e.errno)), flush=True)
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(8)
where = l.getsockname()
try:
    l.connect(("good.test", port))
    c = socket.socket(); c.settimeout(2)
    try:
        c.connect(where); print("listening=taken still-accepting", flush=True)
    except OSError as e:
        print("listening=taken", errno.errorcode.get(e.errno, str(e.errno)), flush=True)
except OSError as e:
    print("listening=" + errno.errorcode.get(e.errno, str(e.errno)), flush=True)
`

// TestReviewMergeConnectReplacesConnectedSocket (netspeed3 merge, and the
// filter's connect before it). Attack: under the filtered network the
// sandbox connects a socket that is already connected (to its own
// loopback) or listening there, to an allowed name. The filter does not
// look at the sandbox socket's state: it dials and installs the host
// socket over it (InstallFD), so a socket that the kernel would refuse
// (EISCONN) becomes a host connection, and the replaced socket, which
// notify's dropReplaced comment assumes was "never connected", is now
// kept by the supervisor for up to a second (batch of 8 or reap's tick):
// its loopback peer gets no FIN and the listener keeps completing
// handshakes in the sandbox's namespace after the connect returned.
// Expected safe behaviour: both connects fail with EISCONN, as the kernel
// answers; nothing is installed, nothing is dialled.
func TestReviewMergeConnectReplacesConnectedSocket(t *testing.T) {
	requirePython(t)
	eachUser(t, func(t *testing.T, u user) {
		_, _, ws, prof, port := filteredRig(t, u)
		r := u.run(t, &runOpts{dir: ws}, "run", "--profile", prof,
			"--allow-host", "good.test:"+port, "--add-host", "good.test:127.0.0.1", "--",
			"/usr/bin/python3", "-c", reviewReconnectPy, port)
		if r.code != 0 {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
		for _, want := range []string{"connected=EISCONN", "listening=EISCONN"} {
			if !strings.Contains(r.stdout, want+"\n") {
				t.Errorf("want %s; the sandbox printed:\n%s", want, r.stdout)
			}
		}
	})
}
