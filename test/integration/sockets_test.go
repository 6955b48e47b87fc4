package integration

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The unix socket gate (issue 17 item 2): a read-only bind does not stop
// connect(2) to a socket file, so nsbox refuses connects and sends to path
// sockets outside the sandbox's own writable places, while sockets the
// sandbox makes itself keep working.

// connectPy connects to each argument and prints "PATH ok" or "PATH
// ERRNO"; it exits 3 when any connect was refused with EACCES.
const connectPy = `
import errno, socket, sys
bad = 0
for p in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(p)
        print(p, "ok")
    except OSError as e:
        print(p, errno.errorcode.get(e.errno, e.errno))
        bad |= e.errno == errno.EACCES
    s.close()
sys.exit(3 if bad else 0)
`

// hostSocket listens on a path socket in a fresh directory under base
// (mode 0755, the socket 0777: only the gate stands in the way) and counts
// the connections it accepts.
func hostSocket(t *testing.T, base string) (string, *atomic.Int64) {
	t.Helper()
	dir, err := os.MkdirTemp(base, "nsbox-it-sock-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	p := filepath.Join(dir, "host.sock")
	l, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, 0o777)
	var n atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { l.Close() })
	return p, &n
}

func requirePython(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed: the sockets tests drive sockets from it")
	}
}

// settle lets the host server's accept loop count what reached it (a
// connect that succeeded is queued before connect returns; this is not an
// assertion on speed).
func settle() { time.Sleep(100 * time.Millisecond) }

// waitAccepted waits until the host server counted want connections: a
// connect that succeeded is queued, and its accept may come late on a
// busy machine (the deadline is a deadlock guard, not a timing check).
func waitAccepted(n *atomic.Int64, want int64) {
	for deadline := time.Now().Add(30 * time.Second); n.Load() < want && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
}

// violationLines returns the "violation" events of a --json-status stream.
func violationLines(t *testing.T, out string) []map[string]any {
	var v []map[string]any
	for _, line := range strings.Split(out, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["event"] == "violation" {
			v = append(v, m)
		}
	}
	return v
}

func TestSocketsHostRefused(t *testing.T) {
	requirePython(t)
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		// A host socket under /var/tmp and one under the user's home
		// ($HOME points at a directory under /home for both identities:
		// nobody's own home does not exist).
		varTmp, varN := hostSocket(t, "/var/tmp")
		home, err := os.MkdirTemp("/home", "nsbox-it-home-")
		if err != nil {
			t.Skipf("no home directory to make: %v", err)
		}
		t.Cleanup(func() { os.RemoveAll(home) })
		os.Chmod(home, 0o755)
		os.Chown(home, u.uid, u.gid)
		inHome, homeN := hostSocket(t, home)
		r := u.run(t, &runOpts{dir: ws, env: []string{"HOME=" + home}}, "run", "--json-status", "fd:2", "--",
			"python3", "-c", connectPy, varTmp, inHome)
		if r.code != 3 {
			t.Fatalf("exit code %d, want the command's 3\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
		for _, p := range []string{varTmp, inHome} {
			if !strings.Contains(r.stdout, p+" EACCES") {
				t.Errorf("connect to %s not refused with EACCES: %s", p, r.stdout)
			}
		}
		settle()
		if varN.Load() != 0 || homeN.Load() != 0 {
			t.Fatalf("host servers saw %d and %d connections", varN.Load(), homeN.Load())
		}
		v := violationLines(t, r.stderr)
		if len(v) != 2 || v[0]["kind"] != "unix_socket" || v[0]["path"] != varTmp || v[1]["path"] != inHome {
			t.Fatalf("violation lines: %v\nstderr: %s", v, r.stderr)
		}
		if !strings.Contains(r.stderr, `"reason":"violation"`) || !strings.Contains(r.stderr, "sandbox violation: unix connect "+varTmp) {
			t.Fatalf("the end is not reported as a violation: %s", r.stderr)
		}
	})
}

// ownSocketsPy runs a server and a client in the directory it is given:
// both inside the sandbox.
const ownSocketsPy = `
import os, socket, sys
for d in sys.argv[1:]:
    p = os.path.join(d, "own.sock")
    if os.path.exists(p):
        os.unlink(p)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(p)
    srv.listen(1)
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(p)
    a, _ = srv.accept()
    c.sendall(b"ping")
    got = a.recv(4)
    # A datagram socket of the sandbox's own, reached by name.
    q = os.path.join(d, "own.dgram")
    if os.path.exists(q):
        os.unlink(q)
    r = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    r.bind(q)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.sendto(b"dgram", q)
    print(d, got.decode(), r.recv(16).decode())
`

func TestSocketsOwnWork(t *testing.T) {
	requirePython(t)
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		r := u.run(t, &runOpts{dir: ws}, "run", "--", "python3", "-c", ownSocketsPy, ws, "/tmp", "/run")
		expectCode(t, r, 0)
		for _, d := range []string{ws, "/tmp", "/run"} {
			if !strings.Contains(r.stdout, d+" ping dgram") {
				t.Fatalf("sockets in %s: %s\nstderr: %s", d, r.stdout, r.stderr)
			}
		}
	})
}

// racePy: a child flips a symlink in the workspace between a socket there
// and the host socket's path; the parent connects through the link in a
// loop. Whatever the timing, only the workspace's server may answer.
const racePy = `
import os, socket, sys
ws, host = sys.argv[1], sys.argv[2]
own = os.path.join(ws, "own.sock")
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(own)
srv.listen(128)
srv.setblocking(False)
link = os.path.join(ws, "link")
pid = os.fork()
if pid == 0:
    i = 0
    while True:
        tmp = link + ".new"
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        os.symlink(own if i % 2 == 0 else host, tmp)
        os.rename(tmp, link)
        i += 1
ok = refused = 0
for _ in range(1500):
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        c.connect(link)
        ok += 1
    except OSError:
        refused += 1
    c.close()
    try:
        while True:
            srv.accept()[0].close()
    except BlockingIOError:
        pass
os.kill(pid, 9)
print("ok", ok, "refused", refused)
`

func TestSocketsSymlinkRace(t *testing.T) {
	requirePython(t)
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		host, hostN := hostSocket(t, "/var/tmp")
		r := u.run(t, &runOpts{dir: ws}, "run", "--", "python3", "-c", racePy, ws, host)
		if !strings.HasPrefix(r.stdout, "ok ") {
			t.Fatalf("race did not run: code %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
		settle()
		if n := hostN.Load(); n != 0 {
			t.Fatalf("the host server saw %d connections through the swapped link (%s)", n, strings.TrimSpace(r.stdout))
		}
		t.Log(strings.TrimSpace(r.stdout))
	})
}

func TestSocketsAllow(t *testing.T) {
	requirePython(t)
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		allowed, allowedN := hostSocket(t, "/var/tmp")
		other, otherN := hostSocket(t, "/var/tmp")
		// Through a variable, as an ssh agent's socket is named.
		env := []string{"NSBOX_IT_SOCK=" + allowed}
		r := u.run(t, &runOpts{dir: ws, env: env}, "run", "--allow-socket", "$NSBOX_IT_SOCK", "--", "python3", "-c", connectPy, allowed, other)
		if r.code != 3 || !strings.Contains(r.stdout, allowed+" ok") || !strings.Contains(r.stdout, other+" EACCES") {
			t.Fatalf("code %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
		// The status line lists it with the gate in force.
		r2 := u.run(t, &runOpts{dir: ws, env: env}, "run", "--json-status", "fd:1", "--allow-socket", "$NSBOX_IT_SOCK", "--", "true")
		if !strings.Contains(r2.stdout, `"unix_sockets":{"allow":["`+allowed+`"],"gate":"seccomp user notification"}`) {
			t.Fatalf("started line: %s", r2.stdout)
		}
		waitAccepted(allowedN, 1)
		settle()
		if allowedN.Load() != 1 || otherN.Load() != 0 {
			t.Fatalf("allowed server saw %d connections (want 1), the other %d (want 0)", allowedN.Load(), otherN.Load())
		}
		// --dry-run lists it, expanded.
		r = u.run(t, &runOpts{dir: ws, env: env}, "run", "--dry-run", "--allow-socket", "$NSBOX_IT_SOCK", "--", "true")
		expectCode(t, r, 0)
		var dr struct {
			Policy struct {
				UnixSockets struct {
					Allow []string `json:"allow"`
				} `json:"unixSockets"`
			} `json:"policy"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &dr); err != nil || fmt.Sprint(dr.Policy.UnixSockets.Allow) != fmt.Sprint([]string{allowed}) {
			t.Fatalf("--dry-run: %v %s", err, r.stdout)
		}
	})
}

func TestSocketsStatus(t *testing.T) {
	eachUser(t, func(t *testing.T, u user) {
		r := u.run(t, nil, "status")
		if !strings.Contains(r.stdout, "unix sockets: seccomp user notification") {
			t.Fatalf("status does not say what guards unix sockets:\n%s", r.stdout)
		}
	})
}

// peerPy connects to a unix socket and waits for the server to close it
// (no send: the server may close first).
const peerPy = `
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.recv(1)
s.close()
print("sent")
`

// TestSocketsPeerIsTheSandbox: a host service behind --allow-socket sees
// the sandbox's ids as its peer (SO_PEERCRED), never the root supervisor
// that performs the connect for it (a review finding: a service trusting
// a root peer would have trusted the sandbox as root).
func TestSocketsPeerIsTheSandbox(t *testing.T) {
	requirePython(t)
	eachUser(t, func(t *testing.T, u user) {
		dir, err := os.MkdirTemp("/var/tmp", "nsbox-it-peer-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		os.Chmod(dir, 0o755)
		p := filepath.Join(dir, "peer.sock")
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		os.Chmod(p, 0o777)
		peers := make(chan uint32, 4)
		go func() {
			for {
				c, err := l.AcceptUnix()
				if err != nil {
					return
				}
				raw, _ := c.SyscallConn()
				raw.Control(func(fd uintptr) {
					if cr, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
						peers <- cr.Uid
					}
				})
				c.Close()
			}
		}()
		ws := u.tempDir(t)
		r := u.run(t, &runOpts{dir: ws}, "run", "--allow-socket", p, "--", "python3", "-c", peerPy, p)
		if r.code != 0 || !strings.Contains(r.stdout, "sent") {
			t.Fatalf("code %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
		select {
		case uid := <-peers:
			if u.uid != 0 && uid != uint32(u.uid) {
				t.Errorf("peer uid %d, want the caller's own %d", uid, u.uid)
			}
			if u.uid == 0 && uid == 0 {
				t.Errorf("the host service saw uid 0 as its peer: the root supervisor's, not the sandbox's")
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the host service saw no connection")
		}
	})
}

// connectOnePy connects to argv[1] and prints "ok" or the errno name.
const connectOnePy = `
import errno, socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1]); print("ok")
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))
`

// TestSocketsAllowRefusesPlantedSymlink: a workspace outlives its
// sandbox, so a first run can plant a symlink at the path a later run
// allows (--allow-socket), pointing at any host socket it can see. The
// later run's gate refuses an allowed path that goes through a symlink on
// a writable place: the run does not start, and says why. Found by
// review: the gate pinned, and let through, the host socket. The control
// is the first run itself: the same connect is refused there.
func TestSocketsAllowRefusesPlantedSymlink(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	eachUser(t, func(t *testing.T, u user) {
		// Both outside /tmp, /run and /dev/shm, which are private inside.
		base, err := os.MkdirTemp("/var/tmp", "nsbox-review-")
		if err != nil {
			t.Skip(err)
		}
		t.Cleanup(func() { os.RemoveAll(base) })
		os.Chmod(base, 0o755)
		hostDir, ws := filepath.Join(base, "host"), filepath.Join(base, "ws")
		if err := os.Mkdir(hostDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(ws, 0o755); err != nil {
			t.Fatal(err)
		}
		if os.Getuid() == 0 {
			os.Chown(ws, u.uid, u.gid)
		}
		secret := filepath.Join(hostDir, "secret.sock")
		l, err := net.Listen("unix", secret)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		os.Chmod(secret, 0o777) // the sandbox's own ids may write it: only the gate stands between
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		planted := filepath.Join(ws, "dev.sock")
		r := u.run(t, &runOpts{dir: ws}, "run", "--workspace", ws, "--", "/bin/sh", "-c",
			`ln -s "$1" "$2" && python3 -c "$3" "$1"`, "sh", secret, planted, connectOnePy)
		expectCode(t, r, 0)
		if strings.TrimSpace(r.stdout) != "EACCES" {
			t.Fatalf("control: the host socket from the first run: %q, want EACCES (the gate)", r.stdout)
		}
		r = u.run(t, &runOpts{dir: ws}, "run", "--workspace", ws, "--allow-socket", planted, "--",
			"python3", "-c", connectOnePy, secret)
		if r.code == 0 || strings.Contains(r.stdout, "ok") || !strings.Contains(r.stderr, "symlink in a writable place") {
			t.Fatalf("the next run, allowing %s (a symlink the first run planted): exit %d, stdout %q, stderr %q; want a refused start naming the symlink", planted, r.code, r.stdout, r.stderr)
		}
	})
}
