package integration

// Repro tests from a second outside review (branch rv2dns) of the filtered
// network's fixes (issue 18). Each TestReview2DNS* here FAILS on purpose on
// the code reviewed, and passes once the finding is fixed. Only the host's
// loopback and namespaces the sandboxes make are used.

import (
	"net"
	"strconv"
	"strings"
	"testing"
)

// pktoptionsPy connects an AF_INET6 socket to good.test:PORT (allowed;
// pinned to ::1, so the installed host socket is an IPv6 one) and sets,
// through IPV6_2292PKTOPTIONS (6), a sticky IPV6_RTHDR whose one segment
// is argv[2]: a type 2 routing header (the only type that option takes,
// when the kernel has CONFIG_IPV6_MIP6). It prints what the call answered.
const pktoptionsPy = `
import errno, socket, struct, sys
port, hop = int(sys.argv[1]), sys.argv[2]
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
# next header 0, length 2 (16 bytes after the first 8), type 2, segments
# left 1, reserved; the one address: the first hop.
rh = bytes([0, 2, 2, 1, 0, 0, 0, 0]) + socket.inet_pton(socket.AF_INET6, hop)
for label, typ in (("rthdr", 57), ("rthdr2292", 5)):
    cmsg = struct.pack("=QII", 16 + len(rh), socket.IPPROTO_IPV6, typ) + rh
    try:
        s.setsockopt(socket.IPPROTO_IPV6, 6, cmsg)
        print(label, "ok", flush=True)
    except OSError as e:
        print(label, name(e.errno), flush=True)
`

// TestReview2DNSStickyRoutingHeaderViaPktoptions: the filtered network
// refuses, on every socket, the setsockopt options that steer an
// installed host socket's traffic (pkg/notify filter.go: SO_BINDTODEVICE,
// SO_BINDTOIFINDEX, IPV6_RTHDR, IPV6_2292RTHDR, IP_OPTIONS; found by the
// first reviews). IPV6_2292PKTOPTIONS (6) is not among them, and it sets
// the same sticky routing header from a control-message buffer
// (ipv6_sockglue.c: ip6_datagram_send_ctl, then ipv6_update_options), with
// no privilege asked: on a kernel built with CONFIG_IPV6_MIP6 (Debian,
// Ubuntu and Fedora build it, =m) a type 2 header with one segment is
// taken, and fl6_update_dst then sends the allowed IPv6 connection's
// segments to that segment's address, a first hop of the program's
// choosing: the steering IPV6_RTHDR was refused for, by another
// option name. This machine's kernel has no CONFIG_IPV6_MIP6 and answers
// EINVAL itself; the test asks what the filter answers (EPERM, as for
// IPV6_RTHDR) whatever the kernel would do.
func TestReview2DNSStickyRoutingHeaderViaPktoptions(t *testing.T) {
	requirePython(t)
	eachUser(t, func(t *testing.T, u user) {
		ln, err := net.Listen("tcp6", "[::1]:0")
		if err != nil {
			t.Skipf("no IPv6 loopback: %v", err)
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		_, _, ws, prof, _ := filteredRig(t, u)
		// The first hop: another address of the host's loopback (no
		// packet leaves the machine; none is sent here anyway).
		r := u.run(t, &runOpts{dir: ws}, "run", "--profile", prof,
			"--allow-host", "good.test:"+port, "--add-host", "good.test:[::1]", "--",
			"/usr/bin/python3", "-c", pktoptionsPy, port, "::2")
		t.Logf("sandbox: %s", strings.ReplaceAll(strings.TrimSpace(r.stdout), "\n", "; "))
		res := netResults(r.stdout)
		if res["connect"] != "ok" {
			t.Fatalf("the allowed connect was not made (%v): nothing tested\nstderr: %s", res, r.stderr)
		}
		for _, k := range []string{"rthdr", "rthdr2292"} {
			if res[k] != "EPERM" {
				t.Errorf("setsockopt(IPPROTO_IPV6, IPV6_2292PKTOPTIONS) carrying a routing header (cmsg %s) on the installed host socket answered %s, not the filter's EPERM: the sticky routing header refused as IPV6_RTHDR is reached the kernel (which takes it when built with CONFIG_IPV6_MIP6)", k, res[k])
			}
		}
	})
}
