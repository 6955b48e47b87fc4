package integration

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// setsockopt(2) is not trapped, and the socket the filtered network
// installs lives in the host's network namespace: an option that names a
// route sends the connection's data, from the host, wherever the program
// chooses. An IPv4 loose source route (IP_OPTIONS, LSRR) would: the kernel
// routes to its first hop (ip_queue_xmit: daddr = opt.faddr) once the
// cached route is dropped, which IP_TOS on a stream socket does
// (sk_dst_reset). This kernel asks CAP_NET_RAW of the host's user
// namespace for it (EPERM inside): the test guards that it stays so. The
// first hop is 127.0.0.2 (the host's loopback: nothing leaves the
// machine); the host drops source-routed packets there
// (accept_source_route), so a packet socket on lo watches for them.

// lsrrPy connects to good.test:PORT (allowed), sets a loose source route
// through 127.0.0.2 and a TOS, and sends a marker.
const lsrrPy = `
import errno, socket, sys, time
port, marker = int(sys.argv[1]), sys.argv[2].encode()
def name(e): return errno.errorcode.get(e, str(e))
a = socket.gethostbyname("good.test")
s = socket.create_connection((a, port), timeout=20)
print("connect ok", flush=True)
# NOP, LSRR (0x83), length 7, pointer 4, first hop 127.0.0.2
opt = bytes([1, 0x83, 7, 4, 127, 0, 0, 2])
try:
    s.setsockopt(socket.IPPROTO_IP, socket.IP_OPTIONS, opt)
    print("ipoptions ok", flush=True)
except OSError as e:
    print("ipoptions", name(e.errno), flush=True)
try:
    s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, 0x10)
    print("tos ok", flush=True)
except OSError as e:
    print("tos", name(e.errno), flush=True)
try:
    s.send(marker)
    print("send ok", flush=True)
except OSError as e:
    print("send", name(e.errno), flush=True)
time.sleep(3)
`

// loSniffer reads IPv4 packets on the host's loopback (a packet socket:
// root only) and reports whether one to dst carried marker.
func loSniffer(t *testing.T, dst [4]byte, marker []byte) *atomic.Bool {
	t.Helper()
	return sniffLo(t, unix.ETH_P_IP, func(p []byte) bool {
		return len(p) >= 20 && p[0]>>4 == 4 && bytes.Equal(p[16:20], dst[:]) && bytes.Contains(p, marker)
	})
}

// sniffLo reads the host loopback's packets of ethernet protocol ethProto
// with a packet socket (root only; it skips otherwise) until the test
// ends, and reports whether match held for one of them.
func sniffLo(t *testing.T, ethProto uint16, match func(packet []byte) bool) *atomic.Bool {
	t.Helper()
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Skipf("no lo: %v", err)
	}
	proto := int(htons(ethProto))
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		t.Skipf("a packet socket on lo is needed to see where packets go: %v", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: uint16(proto), Ifindex: lo.Index}); err != nil {
		unix.Close(fd)
		t.Skipf("bind a packet socket to lo: %v", err)
	}
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200000})
	seen := &atomic.Bool{}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 65536)
		for {
			select {
			case <-stop:
				return
			default:
			}
			n, _, err := unix.Recvfrom(fd, buf, 0)
			if err == nil && match(buf[:n]) {
				seen.Store(true)
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done; unix.Close(fd) })
	return seen
}

func htons(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}

// TestNetworkInstalledSocketSourceRouted: the data of an allowed
// connection must reach only the allowed peer (passes here: IP_OPTIONS
// with LSRR is EPERM for the sandbox).
func TestNetworkInstalledSocketSourceRouted(t *testing.T) {
	requirePython(t)
	if os.Geteuid() != 0 {
		t.Skip("a packet socket on lo (root) is needed to see where packets go")
	}
	eachUser(t, func(t *testing.T, u user) {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		marker := []byte("lsrr-marker-" + strconv.FormatInt(time.Now().UnixNano(), 36))
		atPeer := markerServer(ln, marker)
		port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		seen := loSniffer(t, [4]byte{127, 0, 0, 2}, marker)
		_, _, ws, prof, _ := filteredRig(t, u)
		r := u.run(t, &runOpts{dir: ws}, "run", "--profile", prof,
			"--allow-host", "good.test:"+port, "--add-host", "good.test:127.0.0.1", "--",
			"/usr/bin/python3", "-c", lsrrPy, port, string(marker))
		t.Logf("sandbox: %s (the allowed peer got the marker: %v)", strings.ReplaceAll(strings.TrimSpace(r.stdout), "\n", "; "), atPeer.Load())
		res := netResults(r.stdout)
		if res["connect"] != "ok" {
			t.Fatalf("the allowed connect was not made (%v): nothing tested\nstderr: %s", res, r.stderr)
		}
		if seen.Load() {
			t.Errorf("a segment of the installed host socket went to 127.0.0.2, the first hop of the sandbox's source route (IP_OPTIONS %s, IP_TOS %s), not to the allowed peer", res["ipoptions"], res["tos"])
		}
	})
}

// IPv6 has its own source route, and the kernel takes it from anyone:
// IPV6_RTHDR with a segment routing header (type 4) needs no privilege
// (ipv6_setsockopt checks CAP_NET_RAW for the other sticky headers, not
// this one) and resets the socket's route (ipv6_update_options:
// sk_dst_reset). The next segment leaves for the header's current
// segment (fl6_update_dst), an address the program chose. When an
// allowed name has only IPv6 addresses, the filtered network dials the
// host socket over IPv6, and the program sets that header on it.

// srhPy connects an AF_INET6 socket to good.test:PORT (allowed; the
// virtual address it gets, as a mapped one when it is IPv4), sets a
// segment routing header whose first hop is argv[3] and whose last
// segment is ::1 (the allowed peer), and sends a marker.
const srhPy = `
import errno, socket, sys, time
port, marker, hop = int(sys.argv[1]), sys.argv[2].encode(), sys.argv[3]
def name(e): return errno.errorcode.get(e, str(e))
try:
    a = socket.getaddrinfo("good.test", port, socket.AF_INET6, socket.SOCK_STREAM)[0][4][0]
except OSError:
    a = "::ffff:" + socket.gethostbyname("good.test")
s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
s.settimeout(20)
try:
    s.connect((a, port))
    print("connect ok", flush=True)
except OSError as e:
    print("connect", name(e.errno), flush=True); sys.exit(0)
print("peer", s.getpeername()[0], flush=True)
# next header, length 4 (32 bytes after the first 8), type 4 (SRH),
# segments left 1, last entry 1, flags, tag; segments[0] = the final
# destination, segments[1] = the first hop.
srh = bytes([0, 4, 4, 1, 1, 0, 0, 0]) + socket.inet_pton(socket.AF_INET6, "::1") + socket.inet_pton(socket.AF_INET6, hop)
try:
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_RTHDR, srh)
    print("rthdr ok", flush=True)
except OSError as e:
    print("rthdr", name(e.errno), flush=True)
try:
    s.send(marker)
    print("send ok", flush=True)
except OSError as e:
    print("send", name(e.errno), flush=True)
time.sleep(3)
`

// localIPv6 returns an IPv6 address of this host other than ::1 (a packet
// to it is delivered on lo and never leaves the machine), or skips.
func localIPv6(t *testing.T) net.IP {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Skipf("interface addresses: %v", err)
	}
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if ok && n.IP.To4() == nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP
		}
	}
	t.Skip("this host has no IPv6 address but ::1: no local first hop to route to")
	return nil
}

// lo6Sniffer reports whether an IPv6 packet to dst carrying marker passed
// on the host's loopback (a packet socket: root only).
func lo6Sniffer(t *testing.T, dst net.IP, marker []byte) *atomic.Bool {
	t.Helper()
	return sniffLo(t, unix.ETH_P_IPV6, func(p []byte) bool {
		return len(p) >= 40 && p[0]>>4 == 6 && net.IP(p[24:40]).Equal(dst) && bytes.Contains(p, marker)
	})
}

// TestNetworkInstalledSocketSegmentRouted: the data of an allowed IPv6
// connection must reach only the allowed peer (found by review: the marker
// went to the host's own fd00::2, the header's first hop, and never
// reached ::1; IPV6_RTHDR is now refused with a filtered network).
func TestNetworkInstalledSocketSegmentRouted(t *testing.T) {
	requirePython(t)
	if os.Geteuid() != 0 {
		t.Skip("a packet socket on lo (root) is needed to see where packets go")
	}
	hop := localIPv6(t)
	eachUser(t, func(t *testing.T, u user) {
		ln, err := net.Listen("tcp6", "[::1]:0")
		if err != nil {
			t.Skipf("no IPv6 loopback: %v", err)
		}
		defer ln.Close()
		marker := []byte("srh-marker-" + strconv.FormatInt(time.Now().UnixNano(), 36))
		atPeer := markerServer(ln, marker)
		port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		seen := lo6Sniffer(t, hop, marker)
		_, _, ws, prof, _ := filteredRig(t, u)
		r := u.run(t, &runOpts{dir: ws}, "run", "--profile", prof,
			"--allow-host", "good.test:"+port, "--add-host", "good.test:[::1]", "--",
			"/usr/bin/python3", "-c", srhPy, port, string(marker), hop.String())
		t.Logf("sandbox: %s (the allowed peer got the marker: %v)", strings.ReplaceAll(strings.TrimSpace(r.stdout), "\n", "; "), atPeer.Load())
		res := netResults(r.stdout)
		if res["connect"] != "ok" {
			t.Fatalf("the allowed connect was not made (%v): nothing tested\nstderr: %s", res, r.stderr)
		}
		if seen.Load() {
			t.Errorf("a segment of the installed host socket went to %s, the first hop of the sandbox's routing header (IPV6_RTHDR %s), not to the allowed peer ::1", hop, res["rthdr"])
		}
	})
}

// SO_BINDTODEVICE needs no privilege on a socket not yet bound to a
// device (Linux 5.7), and the name is looked up in the socket's network
// namespace: on an installed socket, the host's. The program then pins
// its allowed connection to any host interface it names, whatever the
// host's routes say (the route is looked up again on that device; with
// no route there the kernel takes the destination for on-link and asks
// that link for it), and learns which interface names the host has
// (ENODEV for the others). The program here sends nothing after the
// call: no packet leaves the machine.

// bindDevicePy connects to good.test:PORT and binds the installed socket
// to argv[2], a host interface that the sandbox does not have.
const bindDevicePy = `
import errno, socket, sys
port, dev = int(sys.argv[1]), sys.argv[2]
def name(e): return errno.errorcode.get(e, str(e))
print("own", dev in [n for _, n in socket.if_nameindex()], flush=True)
a = socket.gethostbyname("good.test")
s = socket.create_connection((a, port), timeout=20)
print("connect ok", flush=True)
for label, d in (("host", dev), ("nosuch", "nsbox-nosuch0")):
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, d.encode() + b"\0")
        print(label, "ok", flush=True)
    except OSError as e:
        print(label, name(e.errno), flush=True)
try:
    print("bound", s.getsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, 16).rstrip(b"\0").decode(), flush=True)
except OSError as e:
    print("bound", name(e.errno), flush=True)
`

// TestNetworkInstalledSocketBindsHostDevice: a program must not bind its
// installed host socket to a host interface it names (found by review:
// "host ok", bound to the host's interface; a name the host lacks answered
// ENODEV, which told the program the host's interface names).
// SO_BINDTODEVICE is now refused with a filtered network.
func TestNetworkInstalledSocketBindsHostDevice(t *testing.T) {
	requirePython(t)
	ifs, err := net.Interfaces()
	if err != nil {
		t.Skipf("host interfaces: %v", err)
	}
	dev := ""
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback == 0 {
			dev = i.Name
			break
		}
	}
	if dev == "" {
		t.Skip("the host has no interface but lo")
	}
	eachUser(t, func(t *testing.T, u user) {
		_, _, ws, prof, port := filteredRig(t, u)
		r := u.run(t, &runOpts{dir: ws}, "run", "--profile", prof,
			"--allow-host", "good.test:"+port, "--add-host", "good.test:127.0.0.1", "--",
			"/usr/bin/python3", "-c", bindDevicePy, port, dev)
		t.Logf("sandbox: %s", strings.ReplaceAll(strings.TrimSpace(r.stdout), "\n", "; "))
		res := netResults(r.stdout)
		if res["connect"] != "ok" || res["own"] != "False" {
			t.Fatalf("the allowed connect was not made, or the sandbox has %s itself (%v): nothing tested\nstderr: %s", dev, res, r.stderr)
		}
		if res["host"] == "ok" {
			t.Errorf("SO_BINDTODEVICE %s on the installed socket succeeded (bound %s): the program picks the host interface its allowed connection leaves by", dev, res["bound"])
		}
		if res["host"] != res["nosuch"] {
			t.Errorf("SO_BINDTODEVICE answers %s for the host's %s and %s for a name the host lacks: the program learns the host's interface names", res["host"], dev, res["nosuch"])
		}
	})
}

// markerServer serves ln until it is closed, reading each connection to
// its end (30 s at most), and reports whether one carried marker.
func markerServer(ln net.Listener, marker []byte) *atomic.Bool {
	atPeer := &atomic.Bool{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
				b, _ := io.ReadAll(c)
				if bytes.Contains(b, marker) {
					atPeer.Store(true)
				}
			}()
		}
	}()
	return atPeer
}
