package integration

import (
	"os/exec"
	"strings"
	"testing"
)

// Outside review of the unix socket gate (pkg/notify, the sticky target
// ids of c8968a3 and eef9c57): black-box tests that fail on the code
// reviewed and pass once the finding is fixed.

// reviewSearchScript: the sandbox's root makes a private directory (0700)
// in the sandbox's own /tmp and serves a socket of mode 0777 in it; a
// second process takes uid 1000 inside, with no capability at all (the
// sandbox's processes keep theirs across a uid change: they are cleared
// with capset), and tries to list the directory, then to connect to the
// socket. The kernel refuses both to uid 1000 (no search permission on
// the directory: path_resolution(7)); the gate's connect must not let it
// through.
const reviewSearchScript = `
mkdir -m 700 /tmp/priv || exit 9
python3 - <<'PY' &
import os, socket
s = socket.socket(socket.AF_UNIX)
s.bind("/tmp/priv/s.sock")
os.chmod("/tmp/priv/s.sock", 0o777)
s.listen(8)
open("/tmp/ready", "w").close()
while True:
    s.accept()[0].close()
PY
n=0
while [ ! -e /tmp/ready ]; do
  n=$((n+1)); [ $n -gt 1200 ] && exit 8   # a deadlock guard, not a timing check
  sleep 0.05
done
python3 - <<'PY'
import ctypes, errno, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
try:
    os.setgroups([])
    os.setresgid(1000, 1000, 1000)
    os.setresuid(1000, 1000, 1000)
except OSError as e:
    print("nouid", e.errno)
    sys.exit(0)
hdr = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
data = (ctypes.c_uint32 * 6)()
if libc.capset(hdr, data) != 0:
    print("nocapset", ctypes.get_errno())
    sys.exit(0)
def res(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
print("list", res(lambda: os.listdir("/tmp/priv")))
print("connect", res(lambda: socket.socket(socket.AF_UNIX).connect("/tmp/priv/s.sock")))
PY
kill $! 2>/dev/null
exit 0
`

// TestReviewGateSearchPermission: a process inside reaches, through the
// gate, a socket in a directory it may not search. The gate resolves the
// path with a root supervisor's lookup rights (pkg/notify UnixGate.decidePath,
// openInRoot; on a sticky serving thread CAP_DAC_READ_SEARCH, stickyCaps),
// checks the socket's write bit alone (writableBy), and connects through
// /proc/PID/fd/N, so no directory's search bit is ever checked for the
// target. Inside one sandbox that breaks the separation of its users (the
// sandbox's root's private directory in /tmp, /run or the workspace);
// the same holds for a host user's private directory in a --rw bind that
// the supervisor may search. (Root-less with a full range, where the
// supervisor connects as itself, the owner of the sandbox root's files,
// should fail the same way; a one-id sandbox has no second user and skips.)
func TestReviewGateSearchPermission(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	eachUser(t, func(t *testing.T, u user) {
		r := u.sh(t, nil, nil, reviewSearchScript)
		expectCode(t, r, 0)
		out := strings.TrimSpace(r.stdout)
		if strings.HasPrefix(out, "nouid") || strings.HasPrefix(out, "nocapset") {
			t.Skipf("no second user without capabilities inside this sandbox (%s): a one-id sandbox has none", out)
		}
		if !strings.Contains(out, "list EACCES") {
			t.Fatalf("the control failed: uid 1000 inside should not list root's 0700 directory\n%s\nstderr: %s", out, r.stderr)
		}
		if !strings.Contains(out, "connect EACCES") {
			t.Fatalf("uid 1000 inside reached a socket in root's 0700 directory through the gate (its own connect(2) fails with EACCES)\n%s", out)
		}
	})
}
