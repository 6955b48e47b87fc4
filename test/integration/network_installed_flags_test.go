package integration

import (
	"strings"
	"testing"
)

// The socket the filtered network installs in place of the sandbox's own
// (issue 18) answers as the sandbox's would have: its close-on-exec flag,
// its file status flags and the options set before connect are the
// program's. The supervisor keeps its reads of those flags open between
// connects and makes host sockets ahead of time: a loop that reuses one
// fd number with changing flags shows that neither carries one connect's
// state into the next.

// installedFlagsPy connects to good.test:PORT over and over on the same
// fd number, changing the socket's inheritability, blocking mode and
// TCP_NODELAY before each connect, and prints "ROUND want got" for each.
const installedFlagsPy = `
import os, socket, sys
port = int(sys.argv[1])
addr = (socket.gethostbyname("good.test"), port)
for i in range(12):
    s = socket.socket()
    inherit = i % 2 == 0
    nodelay = i % 3 == 0
    blocking = i % 4 != 1
    os.set_inheritable(s.fileno(), inherit)
    if nodelay:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if blocking:
        s.connect(addr)
    else:
        s.setblocking(False)
        err = s.connect_ex(addr)
        if err not in (0, 115):  # EINPROGRESS
            print(i, "connect", err); continue
        s.setblocking(True)  # waits in the next call
    want = "%s-%s-%s" % (inherit, nodelay, blocking)
    got = "%s-%s-%s" % (os.get_inheritable(s.fileno()),
        s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0,
        blocking and s.getblocking())
    s.sendall(b"GET / HTTP/1.0\r\n\r\n")
    ok = s.recv(64).startswith(b"HTTP/1.")
    print(i, want, got if ok else "no-answer")
    s.close()
`

func TestNetworkInstalledSocketKeepsFlags(t *testing.T) {
	requirePython(t)
	eachUser(t, func(t *testing.T, u user) {
		_, _, ws, prof, port := filteredRig(t, u)
		r := u.run(t, &runOpts{dir: ws}, "run", "--profile", prof,
			"--allow-host", "good.test:"+port, "--add-host", "good.test:127.0.0.1", "--",
			"/usr/bin/python3", "-c", installedFlagsPy, port)
		if r.code != 0 {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
		rounds := 0
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			f := strings.Fields(line)
			if len(f) != 3 || f[1] != f[2] {
				t.Errorf("round %q: the installed socket's inheritable-nodelay-blocking (as set, as found) differ", line)
				continue
			}
			rounds++
		}
		if rounds != 12 {
			t.Fatalf("%d rounds of 12 kept their flags\n%s", rounds, r.stdout)
		}
	})
}
