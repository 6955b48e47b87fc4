package integration

import (
	"archive/zip"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// The filtered network (issue 18): egress by a domain allowlist, DNS
// answered by nsbox, connects to allowed names dialled from the host's
// namespace. Only loopback servers this test runs are contacted.

// testServer is an HTTP server on the host's 127.0.0.1 that counts the
// requests it served and the connections it holds open. It serves a PEP
// 503 index of one wheel under /simple/ for pip.
type testServer struct {
	port     int
	requests atomic.Int64
	open     atomic.Int64
}

func newTestServer(t *testing.T) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &testServer{port: ln.Addr().(*net.TCPAddr).Port}
	wheel := demoWheel(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/simple/nsboxdemo/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!DOCTYPE html><html><body><a href="/files/nsboxdemo-1.0-py3-none-any.whl">nsboxdemo-1.0-py3-none-any.whl</a></body></html>`)
	})
	mux.HandleFunc("/files/nsboxdemo-1.0-py3-none-any.whl", func(w http.ResponseWriter, r *http.Request) {
		w.Write(wheel)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello from the host\n") })
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.requests.Add(1)
			mux.ServeHTTP(w, r)
		}),
		ConnState: func(c net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				s.open.Add(1)
			case http.StateClosed, http.StateHijacked:
				s.open.Add(-1)
			}
		},
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return s
}

// demoWheel is a minimal valid wheel of the package nsboxdemo 1.0.
func demoWheel(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	z := zip.NewWriter(&b)
	files := [][2]string{
		{"nsboxdemo/__init__.py", "X = 1\n"},
		{"nsboxdemo-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: nsboxdemo\nVersion: 1.0\n"},
		{"nsboxdemo-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: nsbox-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
		{"nsboxdemo-1.0.dist-info/RECORD", "nsboxdemo/__init__.py,,\nnsboxdemo-1.0.dist-info/METADATA,,\nnsboxdemo-1.0.dist-info/WHEEL,,\nnsboxdemo-1.0.dist-info/RECORD,,\n"},
	}
	for _, f := range files {
		w, err := z.Create(f[0])
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(f[1]))
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// fakeUpstream is a DNS server on the host's loopback standing in for the
// host's resolver: it counts every query and answers names under
// "up.test" with 127.0.0.1.
type fakeUpstream struct {
	addr    string
	queries atomic.Int64
	mu      sync.Mutex
	names   []string
}

func newFakeUpstream(t *testing.T) *fakeUpstream {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	u := &fakeUpstream{addr: pc.LocalAddr().String()}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var p dnsmessage.Parser
			h, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, err := p.Question()
			if err != nil {
				continue
			}
			u.queries.Add(1)
			u.mu.Lock()
			u.names = append(u.names, q.Name.String())
			u.mu.Unlock()
			exists := strings.HasSuffix(q.Name.String(), "up.test.")
			rc := dnsmessage.RCodeNameError
			if exists {
				rc = dnsmessage.RCodeSuccess
			}
			b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true, RCode: rc})
			b.StartQuestions()
			b.Question(q)
			if exists && q.Type == dnsmessage.TypeA {
				b.StartAnswers()
				b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}, dnsmessage.AResource{A: [4]byte{127, 0, 0, 1}})
			}
			if out, err := b.Finish(); err == nil {
				pc.WriteTo(out, from)
			}
		}
	}()
	return u
}

func (u *fakeUpstream) seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.names...)
}

// netProfile writes a profile that points the filter's upstream resolver
// at up (the host's own would be asked otherwise).
func netProfile(t *testing.T, u user, dir string, up *fakeUpstream) string {
	t.Helper()
	p := filepath.Join(dir, "net-test.toml")
	u.writeFile(t, p, fmt.Sprintf("description = \"network test\"\nextend = \"workspace\"\n\n[network]\nupstream = [%q]\n", up.addr), 0o644)
	return p
}

// netPy runs the checks inside the sandbox: each line of its output is
// "NAME ok|ERROR". It makes no assumption about the order of the checks.
const netPy = `
import errno, socket, sys, urllib.request
port = int(sys.argv[1])
def check(name, f):
    try:
        print(name, f())
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, type(e).__name__) if e.errno else type(e).__name__)
    except Exception as e:
        print(name, type(e).__name__)
    sys.stdout.flush()
# No proxy: urllib connects by itself.
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
check("allowed", lambda: opener.open("http://good.test:%d/" % port, timeout=30).read().decode().strip())
def resolve(n):
    return socket.getaddrinfo(n, port, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
check("lookup-allowed", lambda: resolve("good.test"))
check("lookup-denied", lambda: resolve("evil.example"))
check("lookup-random", lambda: resolve("c2vjcmv0.exfil.example"))
def direct(a):
    s = socket.create_connection((a, port), timeout=10)
    s.close()
    return "connected"
check("direct-loopback", lambda: direct("127.0.0.1"))
check("direct-ip", lambda: direct("192.0.2.1"))
check("other-port", lambda: socket.create_connection(("good.test", 22), timeout=10) and "connected")
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"x", (resolve("good.test"), port))
    return "sent"
check("udp", udp)
def udp_connect():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.connect((resolve("good.test"), port))
    return "connected"
check("udp-connect", udp_connect)
check("v6", lambda: socket.create_connection(("2001:db8::1", port), timeout=10) and "connected")
def nonblocking():
    import select
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setblocking(False)
    try:
        s.connect((resolve("good.test"), port))
    except BlockingIOError:
        pass
    select.select([], [s], [], 30)
    err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    if err:
        return errno.errorcode.get(err, err)
    s.setblocking(True)
    s.sendall(b"GET / HTTP/1.0\r\nHost: good.test\r\n\r\n")
    data = b""
    while True:
        b = s.recv(4096)
        if not b:
            break
        data += b
    return "nonblocking-" + data.split(b"\r\n")[0].decode().replace(" ", "_")
check("nonblocking", nonblocking)
`

func netResults(out string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), " "); ok {
			m[k] = v
		}
	}
	return m
}

// filteredRig makes what a filtered-network test runs against: a test
// server, a fake upstream resolver, a workspace, a profile that points
// the filter at that resolver, and the server's port as text.
func filteredRig(t *testing.T, u user) (srv *testServer, up *fakeUpstream, ws, prof, port string) {
	t.Helper()
	srv = newTestServer(t)
	up = newFakeUpstream(t)
	ws = u.tempDir(t)
	prof = netProfile(t, u, filepath.Dir(ws), up)
	return srv, up, ws, prof, strconv.Itoa(srv.port)
}

func TestNetworkFiltered(t *testing.T) {
	requirePython(t)
	eachUser(t, func(t *testing.T, u user) {
		srv, up, ws, prof, port := filteredRig(t, u)
		r := u.run(t, &runOpts{dir: ws}, "run", "--profile", prof, "--json-status", "fd:2",
			"--allow-host", "good.test:"+port, "--add-host", "good.test:127.0.0.1", "--",
			"/usr/bin/python3", "-c", netPy, port)
		if r.code != 0 {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
		got := netResults(r.stdout)
		want := map[string]string{
			"allowed":         "hello from the host",
			"lookup-denied":   "gaierror",
			"lookup-random":   "gaierror",
			"direct-loopback": "ECONNREFUSED", // the sandbox's own lo: nothing listens there
			"direct-ip":       "EACCES",
			"other-port":      "EACCES",
			"udp":             "EACCES",
			"udp-connect":     "EACCES",
			"v6":              "EACCES",
			"nonblocking":     "nonblocking-HTTP/1.0_200_OK",
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %q, want %q", k, got[k], v)
			}
		}
		if a := got["lookup-allowed"]; !strings.HasPrefix(a, "198.18.") {
			t.Errorf("good.test resolved to %q, want an address of nsbox's (198.18.0.0/15)", a)
		}
		if srv.requests.Load() != 2 {
			t.Errorf("the host server served %d requests, want 2", srv.requests.Load())
		}
		// Names that are not allowed never reach the upstream; the
		// pinned allowed name does not either.
		if n := up.queries.Load(); n != 0 {
			t.Errorf("%d queries reached the upstream resolver: %q", n, up.seen())
		}
		// Every refusal is a violation event naming the host.
		hosts := map[string]bool{}
		for _, v := range violationLines(t, r.stderr) {
			if v["kind"] != "network" {
				t.Errorf("violation %v is not of kind network", v)
			}
			h, _ := v["host"].(string)
			if p, _ := v["port"].(float64); p != 0 {
				h += ":" + strconv.Itoa(int(p))
			}
			hosts[h] = true
		}
		for _, h := range []string{"evil.example", "c2vjcmv0.exfil.example", "192.0.2.1:" + port, "good.test:22", "good.test:" + port, "2001:db8::1:" + port} {
			if !hosts[h] {
				t.Errorf("no violation event names %s (got %v)", h, hosts)
			}
		}
	})
}

// TestNetworkUpstreamOnlyForAllowed: an allowed name that is not pinned is
// looked up at the upstream, and only it.
func TestNetworkUpstreamOnlyForAllowed(t *testing.T) {
	requirePython(t)
	eachUser(t, func(t *testing.T, u user) {
		_, up, ws, prof, port := filteredRig(t, u)
		// The fake upstream answers 127.0.0.1: an answer of the host's
		// own, which an unpinned name is refused (DNS rebinding, see
		// TestNetworkUpstreamLoopbackAnswerRefused); the lookup itself
		// is what this test counts.
		script := `import socket, sys
for n in ("a.up.test", "b.other.test", "x.a.up.test"):
    try:
        print(n, socket.gethostbyname(n))
    except OSError as e:
        print(n, type(e).__name__)
`
		r := u.run(t, &runOpts{dir: ws}, "run", "--profile", prof, "--allow-host", "a.up.test:"+port, "--",
			"/usr/bin/python3", "-c", script, port)
		if r.code != 0 {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
		got := netResults(r.stdout)
		if got["a.up.test"] != "gaierror" || got["b.other.test"] != "gaierror" || got["x.a.up.test"] != "gaierror" {
			t.Fatalf("results %v\nstderr: %s", got, r.stderr)
		}
		for _, n := range up.seen() {
			if n != "a.up.test." {
				t.Errorf("the upstream was asked for %q", n)
			}
		}
		if up.queries.Load() == 0 {
			t.Error("the allowed name was not looked up at the upstream")
		}
	})
}

// TestNetworkPipDownload: pip, which neither knows nor needs a proxy,
// downloads from an allowed index as it would from PyPI.
func TestNetworkPipDownload(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-m", "pip", "--version").Run(); err != nil {
		t.Skipf("pip is not installed for /usr/bin/python3: %v", err)
	}
	eachUser(t, func(t *testing.T, u user) {
		_, _, ws, prof, port := filteredRig(t, u)
		r := u.run(t, &runOpts{dir: ws, timeout: 5 * time.Minute}, "run", "--profile", prof,
			"--allow-host", "pypi.test:"+port, "--add-host", "pypi.test:127.0.0.1", "--",
			"/usr/bin/python3", "-m", "pip", "download", "--isolated", "--no-cache-dir", "--disable-pip-version-check",
			"--no-deps", "--index-url", "http://pypi.test:"+port+"/simple/", "--trusted-host", "pypi.test",
			"-d", "/tmp/dl", "nsboxdemo")
		if r.code != 0 || !strings.Contains(r.stdout, "nsboxdemo-1.0-py3-none-any.whl") {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
	})
}

// TestNetworkConnectionsEndWithSession: a connection a background process
// keeps open is closed when the session ends.
func TestNetworkConnectionsEndWithSession(t *testing.T) {
	requirePython(t)
	eachUser(t, func(t *testing.T, u user) {
		srv, _, ws, prof, port := filteredRig(t, u)
		// The background process opens a connection, says so, and sleeps
		// holding it; the command itself exits at once.
		script := `python3 -c '
import socket, sys, time
s = socket.create_connection(("good.test", int(sys.argv[1])))
s.sendall(b"GET / HTTP/1.1\r\nHost: good.test\r\n\r\n")
s.recv(100)
print("held", flush=True)
time.sleep(3600)
' ` + port + ` &
for i in $(seq 300); do [ -s /tmp/held ] && break; sleep 0.1; done
`
		script = strings.Replace(script, "&\n", "> /tmp/held &\n", 1)
		r := u.sh(t, &runOpts{dir: ws}, []string{"--profile", prof, "--allow-host", "good.test:" + port, "--add-host", "good.test:127.0.0.1"}, script)
		if r.code != 0 {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
		if srv.requests.Load() != 1 {
			t.Fatalf("the background connection made %d requests, want 1", srv.requests.Load())
		}
		// The session has ended: the host server sees the connection
		// closed (the wait is a deadlock guard, not a timed assertion).
		deadline := time.Now().Add(60 * time.Second)
		for srv.open.Load() != 0 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if n := srv.open.Load(); n != 0 {
			t.Fatalf("%d connections still open after the session ended", n)
		}
	})
}

// TestNetworkPolicyErrors: what the user gets for a bad allowlist.
func TestNetworkPolicyErrors(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"--allow-host", "10.0.0.1"}, "--allow-host: host pattern \"10.0.0.1\": an IP address is not a host name"},
			{[]string{"--allow-host", "*"}, "every name"},
			{[]string{"--allow-host", "a.test", "--add-host", "b.test:127.0.0.1"}, "--add-host: b.test is pinned but not allowed"},
			{[]string{"--net", "host", "--allow-host", "a.test"}, "needs network mode \"filtered\""},
		} {
			r := u.run(t, &runOpts{dir: ws}, append(append([]string{"run"}, c.args...), "--", "/bin/true")...)
			if r.code != 125 || !strings.Contains(r.stderr, c.want) {
				t.Errorf("%v: exit %d, stderr %q, want 125 and %q", c.args, r.code, r.stderr, c.want)
			}
		}
		// --dry-run shows the mode, the allowlist and the resolv.conf.
		r := u.run(t, &runOpts{dir: ws}, "run", "--dry-run", "--profile", "network-registries", "--deny-host", "sum.golang.org", "--", "/bin/true")
		for _, want := range []string{`"network": "filtered"`, `"registry.npmjs.org"`, `"files.pythonhosted.org"`, `"deny": [`, `"/etc/resolv.conf"`} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("--dry-run lacks %s:\n%s", want, r.stdout)
			}
		}
	})
}

// TestNetworkStatus: nsbox status names the profile's network and its
// allowlist, and whether the filter can run here.
func TestNetworkStatus(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		r := u.run(t, nil, "status", "--profile", "network-registries")
		for _, want := range []string{"network (profile network-registries): filtered; allow: registry.npmjs.org, pypi.org, files.pythonhosted.org", "filtered network: "} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("status lacks %q:\n%s", want, r.stdout)
			}
		}
	})
}

// TestNetworkCheckSNI: with --check-sni a TLS connection to an allowed name
// on port 443 goes through when its ClientHello names that host, and is
// cut (and reported) when it names another one: domain fronting.
func TestNetworkCheckSNI(t *testing.T) {
	requirePython(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:443")
	if err != nil {
		t.Skipf("cannot listen on the host's 127.0.0.1:443 for the TLS stand-in: %v", err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "tls ok") }))
	srv.Listener.Close()
	srv.Listener = ln
	srv.StartTLS()
	defer srv.Close()
	script := `import socket, ssl, sys
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
for name in ("good.test", "fronted.example"):
    try:
        s = ctx.wrap_socket(socket.create_connection(("good.test", 443), timeout=30), server_hostname=name)
        s.sendall(b"GET / HTTP/1.0\r\nHost: " + name.encode() + b"\r\n\r\n")
        print(name, s.recv(4096).split(b"\r\n")[0].decode().replace(" ", "_"))
    except (OSError, ssl.SSLError) as e:
        print(name, type(e).__name__)
`
	eachUser(t, func(t *testing.T, u user) {
		up := newFakeUpstream(t)
		ws := u.tempDir(t)
		prof := netProfile(t, u, filepath.Dir(ws), up)
		r := u.run(t, &runOpts{dir: ws}, "run", "--profile", prof, "--json-status", "fd:2", "--check-sni",
			"--allow-host", "good.test", "--add-host", "good.test:127.0.0.1", "--", "/usr/bin/python3", "-c", script)
		got := netResults(r.stdout)
		if !strings.HasSuffix(got["good.test"], "_200_OK") || got["fronted.example"] == "" || strings.HasPrefix(got["fronted.example"], "HTTP") {
			t.Fatalf("exit %d results %v\nstderr: %s", r.code, got, r.stderr)
		}
		found := false
		for _, v := range violationLines(t, r.stderr) {
			if v["host"] == "good.test" && v["port"] == float64(443) && strings.Contains(fmt.Sprint(v["detail"]), "fronted.example") {
				found = true
			}
		}
		if !found {
			t.Errorf("no violation names the fronted connection: %s", r.stderr)
		}
	})
}

// TestNetworkNodeClient: node's http client (nonblocking connects, libuv's
// getaddrinfo with AI_ADDRCONFIG), as npm uses it, reaches an allowed name
// without any proxy setting.
func TestNetworkNodeClient(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed")
	}
	eachUser(t, func(t *testing.T, u user) {
		_, _, ws, prof, port := filteredRig(t, u)
		js := `require("http").get("http://registry.test:` + port + `/simple/nsboxdemo/", r => { let b = ""; r.on("data", d => b += d); r.on("end", () => console.log(r.statusCode, b.includes("nsboxdemo-1.0"))) }).on("error", e => { console.log("error", e.code); process.exit(1) })`
		r := u.run(t, &runOpts{dir: ws}, "run", "--profile", prof, "--allow-host", "registry.test:"+port, "--add-host", "registry.test:127.0.0.1", "--", "node", "-e", js)
		if r.code != 0 || strings.TrimSpace(r.stdout) != "200 true" {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
	})
}

// installedPy takes an allowed connection (a socket of the host's network
// namespace, installed by nsbox), then tries to repurpose it: dissolve it
// with connect(AF_UNSPEC), connect it to the host's loopback, listen on it.
const installedPy = `
import ctypes, errno, socket, sys
port, secret = int(sys.argv[1]), int(sys.argv[2])
def name(e): return errno.errorcode.get(e, str(e))
s = socket.create_connection(("good.test", port), timeout=10)
s.sendall(b"GET / HTTP/1.0\r\nHost: good.test\r\n\r\n")
print("allowed", s.recv(200).split(b"\r\n")[0].decode().replace(" ", "_"))
libc = ctypes.CDLL(None, use_errno=True)
unspec = (ctypes.c_ubyte * 16)()
r = libc.connect(s.fileno(), unspec, 16)
print("unspec", "ok" if r == 0 else name(ctypes.get_errno()))
try:
    s.connect(("127.0.0.1", secret)); print("reconnect", "CONNECTED")
except OSError as e:
    print("reconnect", name(e.errno))
try:
    s.listen(1); print("listen", "LISTENING")
except OSError as e:
    print("listen", name(e.errno))
`

// TestNetworkInstalledSocketStaysPut: a socket nsbox installed for an
// allowed name is the host's; it cannot be disconnected and pointed at
// the host's loopback, nor made to listen on the host (a review finding).
func TestNetworkInstalledSocketStaysPut(t *testing.T) {
	requirePython(t)
	eachUser(t, func(t *testing.T, u user) {
		srv := newTestServer(t)
		secret, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer secret.Close()
		var accepted atomic.Int64
		go func() {
			for {
				c, err := secret.Accept()
				if err != nil {
					return
				}
				accepted.Add(1)
				c.Close()
			}
		}()
		up := newFakeUpstream(t)
		ws := u.tempDir(t)
		prof := netProfile(t, u, filepath.Dir(ws), up)
		port := strconv.Itoa(srv.port)
		r := u.run(t, &runOpts{dir: ws}, "run", "--profile", prof,
			"--allow-host", "good.test:"+port, "--add-host", "good.test:127.0.0.1", "--",
			"/usr/bin/python3", "-c", installedPy, port, strconv.Itoa(secret.Addr().(*net.TCPAddr).Port))
		if r.code != 0 {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
		got := netResults(r.stdout)
		if !strings.HasPrefix(got["allowed"], "HTTP/1.") {
			t.Fatalf("the allowed connection did not work: %q\n%s", got["allowed"], r.stdout)
		}
		if got["unspec"] == "ok" || got["reconnect"] == "CONNECTED" || got["listen"] == "LISTENING" {
			t.Errorf("the installed host socket was repurposed: %v", got)
		}
		if n := accepted.Load(); n != 0 {
			t.Errorf("the host's loopback service accepted %d connections from the sandbox", n)
		}
	})
}
