//go:build amd64

package integration

// Repro tests from review 39 (branch rv39), an outside review of two
// fixes: the filtered network's device-ioctl trap (pkg/notify/ioctl.go,
// commit 2877a53) and the Landlock backend's kill(-1) teardown (commit
// aa80d02). Each TestReview39* here FAILS on purpose on the code reviewed
// and passes once its finding is fixed. Only loopback and the sandbox's
// own namespaces are used.

import (
	"net"
	"strconv"
	"strings"
	"testing"
)

// hostIPv4Interface returns a host interface (not lo, up) with an IPv4
// address, its index, and that address; "" when there is none.
func hostIPv4Interface() (name string, index int, addr string) {
	ifs, err := net.Interfaces()
	if err != nil {
		return "", 0, ""
	}
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback != 0 || i.Flags&net.FlagUp == 0 {
			continue
		}
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			if ip, ok := a.(*net.IPNet); ok && ip.IP.To4() != nil {
				return i.Name, i.Index, ip.IP.String()
			}
		}
	}
	return "", 0, ""
}

// hostCallIfconfPy runs SIOCGIFCONF on a socket of the sandbox's own
// ("own NAME=ADDR,...") and on fd 3, the hostCall socket nsbox places in
// every command when a host API is allowed ("fd3 NAME=ADDR,..." or
// "fd3 errno=N"); then SIOCGARP on fd 3 for each address in argv[1:] on
// each interface fd 3 listed ("arp ADDR MAC" when one answers).
const hostCallIfconfPy = ifconfPyLib + `
print("own", ",".join(n + "=" + a for n, a in ifconf(socket.socket())), flush=True)
print("fd3sock", stat.S_ISSOCK(os.fstat(3).st_mode), flush=True)
try:
    ifs = ifconf(3)
    print("fd3", ",".join(n + "=" + a for n, a in ifs), flush=True)
except OSError as e:
    ifs = []
    print("fd3", "errno=" + str(e.errno), flush=True)
for ip in sys.argv[1:]:
    for name, _ in ifs:
        req = (struct.pack("=H2x4s8x", socket.AF_INET, socket.inet_aton(ip)) + struct.pack("=H14x", 1)
               + struct.pack("=i", 0) + struct.pack("=H14x", 0) + name.encode().ljust(16, b"\0"))
        try:
            r = fcntl.ioctl(3, SIOCGARP, req)
            print("arp", ip, r[18:24].hex(":"), flush=True)
        except OSError:
            pass
`

// TestReview39HostCallSocketAnswersHostIoctls (MEDIUM, information
// disclosure; the default network, no --allow-host): review 38's leak
// through another socket. The fix traps device ioctls only under a
// filtered network (ProgramOptions.Filtered) and only thinks of the
// sockets that network installs; but every command of a session with a
// host API (every `nsbox mcp` session: mcp.go and mcppool.go always add
// hostapi.Methods(); `nsbox run --host-api ...`; `nsbox tools call`)
// gets at fd 3 one end of a socketpair the supervisor made
// (hostCallServer.newConn) — an AF_UNIX socket of the host's network
// namespace. sock_ioctl answers a socket's device ioctls for
// sock_net(sk) whatever the family (unix_ioctl returns ENOIOCTLCMD, then
// sock_do_ioctl -> dev_ioctl), so under --net none, whose promise is "a
// new network namespace with only lo", SIOCGIFCONF on fd 3 lists every
// host interface with its IPv4 address (VPNs, container bridges, the
// LAN's) and SIOCGARP on fd 3 reads the host's neighbour table. Attack:
// `ioctl(3, SIOCGIFCONF, &ifc)` from any MCP run_command. Fix: trap (and
// refuse on a socket of the supervisor's netns) the read-type device
// ioctls whenever a host-namespace socket can reach a command — with a
// hostCall socket, not only with a filtered network — or make the
// hostCall socketpair inside the sandbox's network namespace.
func TestReview39HostCallSocketAnswersHostIoctls(t *testing.T) {
	requirePython(t)
	hostIf, _, hostAddr := hostIPv4Interface()
	if hostIf == "" {
		t.Skip("the host has no interface with an IPv4 address besides lo: nothing to disclose")
	}
	neigh := hostNeighbours()
	eachUser(t, func(t *testing.T, u user) {
		ws := u.tempDir(t)
		args := append([]string{"run", "--host-api", "memory.*", "--",
			"/usr/bin/python3", "-c", hostCallIfconfPy}, neigh...)
		r := u.run(t, &runOpts{dir: ws}, args...)
		t.Logf("sandbox: %s", strings.ReplaceAll(strings.TrimSpace(r.stdout), "\n", "; "))
		res := netResults(r.stdout)
		if !strings.HasPrefix(res["own"], "lo=") || strings.Contains(res["own"], ",") {
			t.Fatalf("control: the sandbox's own socket lists %q, not lo alone\nstdout: %s\nstderr: %s", res["own"], r.stdout, r.stderr)
		}
		if res["fd3sock"] != "True" {
			t.Fatalf("control: fd 3 is not the hostCall socket (%q)\nstdout: %s\nstderr: %s", res["fd3sock"], r.stdout, r.stderr)
		}
		if strings.Contains(res["fd3"], hostIf+"=") || strings.Contains(res["fd3"], "="+hostAddr) {
			t.Errorf("--net none: SIOCGIFCONF on the hostCall socket (fd 3) lists the host's interfaces and addresses (%s)", res["fd3"])
		}
		if a, ok := res["arp"]; ok {
			t.Errorf("--net none: SIOCGARP on the hostCall socket (fd 3) reads the host's neighbour table (%s)", a)
		}
		// The tools' default (what an MCP session runs): no flag at all.
		tr := u.run(t, &runOpts{dir: ws}, "tools", "call", "run_command",
			`{"command":"/usr/bin/python3 -c \"import array,fcntl,socket,struct; b=array.array('B',bytes(4096)); n=struct.unpack('iL',fcntl.ioctl(3,0x8912,struct.pack('iL',4096,b.buffer_info()[0])))[0]; print('FD3IFS',[bytes(b[i:i+16]).split(bytes(1))[0].decode() for i in range(0,n,40)])\""}`)
		t.Logf("tools call: %s", strings.TrimSpace(tr.stdout))
		if !strings.Contains(tr.stdout, "FD3IFS") && !strings.Contains(tr.stdout, "Errno") {
			t.Fatalf("control: the tools call did not run the probe\nstdout: %s\nstderr: %s", tr.stdout, tr.stderr)
		}
		if strings.Contains(tr.stdout, "'"+hostIf+"'") {
			t.Errorf("nsbox tools call run_command (the MCP tools' defaults, --net none): SIOCGIFCONF on fd 3 lists the host's interface %s", hostIf)
		}
	})
}

// unicastIfPy connects to good.test:argv[1] (the filtered network installs
// a socket of the host's namespace) and sets IP_UNICAST_IF on it to each
// index in argv[2:], printing "uif<N> ok" or "uif<N> ERRNO"; and the same
// on a socket of the sandbox's own for index argv[2] ("own<N> ...").
const unicastIfPy = `
import errno, socket, struct, sys
IP_UNICAST_IF = 50
def try_(s, idx):
    try:
        s.setsockopt(socket.IPPROTO_IP, IP_UNICAST_IF, struct.pack("!I", idx))
        s.setsockopt(socket.IPPROTO_IP, IP_UNICAST_IF, struct.pack("!I", 0))
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
own = socket.socket()
print("own" + sys.argv[2], try_(own, int(sys.argv[2])), flush=True)
s = socket.create_connection(("good.test", int(sys.argv[1])), timeout=20)
print("connect ok", flush=True)
for a in sys.argv[2:]:
    print("uif" + a, try_(s, int(a)), flush=True)
`

// TestReview39InstalledSocketUnicastIfIndexOracle (LOW, information
// disclosure): the filtered network refuses SO_BINDTODEVICE and
// SO_BINDTOIFINDEX on every socket because, on an installed socket, their
// answer "named the host's interfaces", and now traps SIOCGIFINDEX and
// SIOCGIFNAME for the same reason. IP_UNICAST_IF (IPPROTO_IP, 50; and
// IPV6_UNICAST_IF, 76) is the same oracle by another name: the kernel
// looks the index up in the socket's namespace (dev_get_by_index(
// sock_net(sk))) and answers EADDRNOTAVAIL when the host has no such
// interface, with no SOCK_STREAM check and no privilege; Program's
// sockopt-ip block lets every name >= 49 through. On an installed socket
// a program enumerates which interface indices the host has (how many
// interfaces, bridges and veths come and go: containers starting), which
// its own namespace (lo alone) cannot tell it. Fix: refuse IP_UNICAST_IF
// and IPV6_UNICAST_IF with EPERM under a filtered network, as
// SO_BINDTOIFINDEX.
func TestReview39InstalledSocketUnicastIfIndexOracle(t *testing.T) {
	requirePython(t)
	_, idx, _ := hostIPv4Interface()
	if idx <= 1 {
		t.Skip("the host has no interface besides lo with an index above 1")
	}
	// An index the host does not have.
	ifs, _ := net.Interfaces()
	missing := 1000
	for _, i := range ifs {
		if i.Index >= missing {
			missing = i.Index + 1
		}
	}
	eachUser(t, func(t *testing.T, u user) {
		_, _, ws, prof, port := filteredRig(t, u)
		r := u.run(t, &runOpts{dir: ws}, "run", "--profile", prof,
			"--allow-host", "good.test:"+port, "--add-host", "good.test:127.0.0.1", "--",
			"/usr/bin/python3", "-c", unicastIfPy, port, strconv.Itoa(idx), strconv.Itoa(missing))
		t.Logf("sandbox: %s", strings.ReplaceAll(strings.TrimSpace(r.stdout), "\n", "; "))
		res := netResults(r.stdout)
		if res["connect"] != "ok" {
			t.Fatalf("the allowed connect was not made: nothing tested\nstdout: %s\nstderr: %s", r.stdout, r.stderr)
		}
		if res["own"+strconv.Itoa(idx)] == "ok" {
			t.Fatalf("control: the sandbox's own namespace has an interface of index %d", idx)
		}
		have, lack := res["uif"+strconv.Itoa(idx)], res["uif"+strconv.Itoa(missing)]
		if have != lack {
			t.Errorf("IP_UNICAST_IF on the installed socket answers %s for the host's interface index %d and %s for index %d, which the host lacks: the program enumerates the host's interfaces", have, idx, lack, missing)
		}
	})
}
