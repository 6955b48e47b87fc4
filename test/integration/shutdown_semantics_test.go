package integration

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// shutdownPy calls shutdown(2) through libc on descriptors of every kind
// and prints what the kernel (or, under the socket gate, the supervisor
// that now makes the call: 6e2ddb6) answers, one line per case.
const shutdownPy = `
import ctypes, errno, os, socket
libc = ctypes.CDLL(None, use_errno=True)
def sh(name, fd, how):
    r = libc.shutdown(fd, how)
    print(name, "ok" if r == 0 else errno.errorcode.get(ctypes.get_errno(), "?"), flush=True)
r, w = os.pipe()
a, b = socket.socketpair()
u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
t6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
ud = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
sh("badfd", 999, socket.SHUT_RDWR)
sh("negfd", -1, socket.SHUT_RDWR)
sh("pipe", r, socket.SHUT_RDWR)
sh("pair-wr", a.fileno(), socket.SHUT_WR)
sh("pair-how3", a.fileno(), 3)
sh("pair-howneg", a.fileno(), -1)
sh("pair-howbig", a.fileno(), 1 << 31 - 1)
sh("unix-unconnected", u.fileno(), socket.SHUT_RDWR)
sh("unix-dgram", d.fileno(), socket.SHUT_RDWR)
sh("tcp-unconnected", t.fileno(), socket.SHUT_RDWR)
sh("tcp6-unconnected", t6.fileno(), socket.SHUT_WR)
sh("tcp-how3", t.fileno(), 3)
sh("udp", ud.fileno(), socket.SHUT_RD)
sh("listen-rd", l.fileno(), socket.SHUT_RD)
`

// TestShutdownAnswersAsTheKernel: shutdown(2) is now trapped and made by
// the supervisor (6e2ddb6); every answer a program gets must be the one
// the kernel gives without nsbox (EBADF, ENOTSOCK, EINVAL for a bad how,
// ENOTCONN...). The same script runs on the host for the reference.
func TestShutdownAnswersAsTheKernel(t *testing.T) {
	requirePython(t)
	ref, err := exec.Command("/usr/bin/python3", "-c", shutdownPy).CombinedOutput()
	if err != nil {
		t.Fatalf("reference run on the host: %v\n%s", err, ref)
	}
	want := netResults(string(ref))
	eachUser(t, func(t *testing.T, u user) {
		up := newFakeUpstream(t)
		ws := u.tempDir(t)
		for _, mode := range []string{"default", "filtered"} {
			args := []string{"run", "--"}
			if mode == "filtered" {
				args = []string{"run", "--profile", netProfile(t, u, filepath.Dir(ws), up), "--"}
			}
			r := u.run(t, &runOpts{dir: ws}, append(args, "/usr/bin/python3", "-c", shutdownPy)...)
			got := netResults(r.stdout)
			if len(got) < len(want) {
				t.Fatalf("%s: the script did not run to its end: %q\nstderr: %s", mode, r.stdout, r.stderr)
			}
			var diff []string
			for k, v := range want {
				if got[k] != v {
					diff = append(diff, k+": "+got[k]+" (kernel: "+v+")")
				}
			}
			if len(diff) > 0 {
				t.Errorf("%s: shutdown answers differ from the kernel's: %s", mode, strings.Join(diff, "; "))
			}
		}
	})
}
