package notify

// The gate's view of the sandbox's ids: the open gate, the id maps and
// user namespace read from the sandbox's PID 1, and the write check a
// socket's mode and owner make for the target.

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// newOpenGate is the gate of a Server without a unix handler
// (UnixGate.open): no mount policy, the id maps and user namespace of the
// process whose /proc/PID (or /proc/TID) directory dir is.
func newOpenGate(dir int) *UnixGate {
	g := &UnixGate{open: true, onlyUID: -1, rootMayChange: true, sup: readSupIDs()}
	g.readIDMap(dir)
	return g
}

// readIDMap reads the sandbox's uid and gid maps (of the process whose
// /proc directory dir is, RootPid's) for writableBy and lookup: the host
// ids they map (as this process sees them: the kernel writes a map's
// outer ids as the opener's namespace has them), and its user namespace.
func (g *UnixGate) readIDMap(dir int) {
	var ns unix.Statx_t
	if unix.Statx(dir, "ns/user", 0, unix.STATX_INO, &ns) == nil {
		g.userns = idOf(&ns)
	}
	for _, f := range []struct {
		file string
		out  *[]hostRange
	}{{"uid_map", &g.uids}, {"gid_map", &g.gids}} {
		b, err := readAt(dir, f.file)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		for _, line := range lines {
			fs := strings.Fields(line)
			if len(fs) != 3 {
				continue
			}
			out, err1 := strconv.ParseUint(fs[1], 10, 32)
			n, err2 := strconv.ParseUint(fs[2], 10, 33)
			if err1 != nil || err2 != nil {
				continue
			}
			*f.out = append(*f.out, hostRange{uint32(out), n})
			if f.file == "uid_map" && len(lines) == 1 && n == 1 {
				g.onlyUID = int64(out)
				g.skipDAC = int64(out) == int64(os.Geteuid()) && os.Geteuid() != 0
			}
		}
	}
}

// readAt reads the small file name beneath dir.
func readAt(dir int, name string) ([]byte, error) {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var out []byte
	buf := make([]byte, 4096)
	for len(out) < 1<<16 { // an id map has at most 340 lines
		n, err := unix.Read(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			break
		}
		out = append(out, buf[:n]...)
	}
	return out, nil
}

// inSandboxUserns reports whether the calling thread is in the sandbox's
// own user namespace (read through its /proc/TID: the thread's own, and
// it cannot change namespaces while it waits in the call).
func (g *UnixGate) inSandboxUserns(c *SockCall) bool {
	if c.proc == nil || g.userns == (fileID{}) {
		return false
	}
	var st unix.Statx_t
	if unix.Statx(c.proc.dir, "ns/user", 0, unix.STATX_INO, &st) != nil {
		return false
	}
	return idOf(&st) == g.userns
}

// hostRange is count host ids from start that a sandbox's map names.
type hostRange struct {
	start uint32
	count uint64
}

func mapped(rs []hostRange, id uint32) bool {
	for _, r := range rs {
		if id >= r.start && uint64(id-r.start) < r.count {
			return true
		}
	}
	return false
}

// writableBy checks the socket's write permission (what connect(2) asks
// of a path socket, unix(7)) for the target: the supervisor connects with
// its own credentials, and must not be a confused deputy that reaches a
// socket the target itself may not. A world-writable socket, or one owned
// with the owner's write bit by the one uid a single-id sandbox has,
// passes at once; everything else is decided on the thread's credentials
// (creds: filesystem ids, groups, CAP_DAC_OVERRIDE: a privileged sandbox is left
// to the kernel's own check).
func (g *UnixGate) writableBy(c *SockCall, st *unix.Statx_t) bool {
	if g.skipDAC || st.Mode&0o002 != 0 {
		return true
	}
	if g.onlyUID >= 0 && int64(st.Uid) == g.onlyUID && st.Mode&0o200 != 0 {
		return true
	}
	return g.writableByStatus(c, st)
}

func (g *UnixGate) writableByStatus(c *SockCall, st *unix.Statx_t) bool {
	ps, err := c.creds()
	if err != nil {
		return false
	}
	// CAP_DAC_OVERRIDE of the sandbox's namespace counts only on an inode
	// whose owner and group that namespace maps (capabilities(7),
	// capable_wrt_inode_uidgid): the kernel would refuse the target on any
	// other, while the supervisor's own connect could pass on its host
	// groups, which the sandbox does not hold (found by review).
	// And only in that namespace: a thread in a user namespace of its
	// own (unshare -r, with --allow-userns) holds every capability there,
	// which the kernel honours only on inodes that namespace maps (found
	// by review: such a thread reached the sandbox's 0600 sockets).
	if ps.capEff&(1<<unix.CAP_DAC_OVERRIDE) != 0 && mapped(g.uids, st.Uid) && mapped(g.gids, st.Gid) && g.inSandboxUserns(c) {
		return true
	}
	switch {
	case ps.uid[3] == st.Uid: // the file system uid
		return st.Mode&0o200 != 0
	case ps.gid[3] == st.Gid:
		return st.Mode&0o020 != 0
	}
	for _, g := range ps.groups {
		if g == st.Gid {
			return st.Mode&0o020 != 0
		}
	}
	return false
}
