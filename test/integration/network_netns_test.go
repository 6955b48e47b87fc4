package integration

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// otherNamespaceServer starts an HTTP server in a network namespace this
// test creates (unshare --net: no /run/netns mount is left on the host),
// joined to the host's by a veth pair of its own, and returns the
// server's address and port. The namespace and the pair end with the
// server. Root only: the pair's host end lives in the host's namespace.
func otherNamespaceServer(t *testing.T) (addr, port string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a network namespace joined to the host's by a veth pair needs root")
	}
	for _, tool := range []string{"ip", "unshare", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (apt-get install iproute2 util-linux)", tool)
		}
	}
	id := os.Getpid() % 250
	host, peer := fmt.Sprintf("nsbx%dh", os.Getpid()), fmt.Sprintf("nsbx%dp", os.Getpid())
	hostAddr, nsAddr := fmt.Sprintf("10.213.%d.1", id), fmt.Sprintf("10.213.%d.2", id)

	// The server waits for its address: the pair is set up once its
	// namespace exists.
	srv := exec.Command("unshare", "--net", "--", "python3", "-c", `
import http.server, sys, time
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        b = b"hello from another namespace\n"
        self.send_response(200); self.send_header("Content-Length", str(len(b))); self.end_headers(); self.wfile.write(b)
    def log_message(self, *a): pass
for _ in range(600):
    try:
        s = http.server.HTTPServer((sys.argv[1], 0), H)
        break
    except OSError:
        time.sleep(0.05)
print(s.server_address[1], flush=True)
s.serve_forever()
`, nsAddr)
	out, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Skipf("cannot create a network namespace here (unshare --net: %v)", err)
	}
	t.Cleanup(func() {
		// The namespace ends with its last process, and its end of the
		// pair with it, and so the host's end.
		srv.Process.Kill()
		srv.Wait()
		exec.Command("ip", "link", "del", host).Run()
	})
	pid := strconv.Itoa(srv.Process.Pid)
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	inNS := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("nsenter", append([]string{"--target", pid, "--net", "ip"}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s in the test's namespace: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	ip("link", "add", host, "type", "veth", "peer", "name", peer)
	ip("link", "set", peer, "netns", pid)
	ip("addr", "add", hostAddr+"/30", "dev", host)
	ip("link", "set", host, "up")
	inNS("addr", "add", nsAddr+"/30", "dev", peer)
	inNS("link", "set", peer, "up")
	inNS("link", "set", "lo", "up")

	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		lines <- strings.TrimSpace(line)
	}()
	select {
	case port = <-lines:
	case <-time.After(60 * time.Second):
		t.Fatal("the server in the test's namespace did not start")
	}
	if port == "" {
		t.Fatal("the server in the test's namespace did not start")
	}
	return nsAddr, port
}

// An allowed name pinned to an address beyond the host's loopback (a
// server in a network namespace the test made) is dialled from the host's
// namespace like any real address; the address written directly is
// refused, as every address nsbox did not hand out is.
func TestNetworkFilteredOtherNamespace(t *testing.T) {
	requirePython(t)
	addr, port := otherNamespaceServer(t)
	eachUser(t, func(t *testing.T, u user) {
		_, up, ws, prof, _ := filteredRig(t, u)
		r := u.run(t, &runOpts{dir: ws}, "run", "--profile", prof, "--json-status", "fd:2",
			"--allow-host", "far.test:"+port, "--add-host", "far.test:"+addr, "--",
			"/usr/bin/python3", "-c", `
import socket, sys, urllib.request
print(urllib.request.urlopen("http://far.test:%s/" % sys.argv[2], timeout=20).read().decode().strip())
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=20)
    print("direct: connected")
except OSError as e:
    print("direct:", e.errno)
`, addr, port)
		if r.code != 0 {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stdout, "hello from another namespace") || !strings.Contains(r.stdout, "direct: 13") {
			t.Fatalf("stdout %q stderr %q", r.stdout, r.stderr)
		}
		if n := up.queries.Load(); n != 0 {
			t.Errorf("%d queries reached the upstream for a pinned name", n)
		}
		found := false
		for _, v := range violationLines(t, r.stderr) {
			found = found || v["host"] == addr
		}
		if !found {
			t.Errorf("no violation event names %s: %s", addr, r.stderr)
		}
	})
}
