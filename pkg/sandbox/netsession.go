package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nsbox/nsbox/pkg/netfilter"
	"github.com/nsbox/nsbox/pkg/notify"
	"golang.org/x/sys/unix"
)

// netSession is a session's filtered network: the filter (resolver, connect
// decisions, connections), the generated resolv.conf, and the refusals.
type netSession struct {
	filter *netfilter.Filter
	dir    string // holds the generated resolv.conf until the worker mounted it

	mu      sync.Mutex
	refused int64                // refusals since the start
	last    []*netfilter.Refusal // the latest, at most maxNetRefusals
	// reported holds the targets (operation, host, port) whose refusal
	// was reported, at most maxReportedTargets: each is reported once.
	// Past that, new targets are reported from a bucket of
	// overTokens, which refills overRate a second up to overBurst.
	reported   map[refusalKey]struct{}
	overTokens float64
	overFilled time.Time
}

const (
	maxNetRefusals     = 16
	maxReportedTargets = 256
	overBurst          = 64
	overRate           = 10 // a second
)

// refusalKey is what makes two refusals the same for reporting.
type refusalKey struct {
	op, host string
	port     uint16
}

// resolverFDs are the worker's numbers of the resolver's sockets (bound in
// the sandbox's network namespace); the supervisor takes them with
// pidfd_getfd. 0: none.
type resolverFDs struct {
	UDP int `json:"udp,omitempty"`
	TCP int `json:"tcp,omitempty"`
}

// prepareNetFilter builds the session's network filter (NetworkFiltered):
// the filter itself, and the resolv.conf the worker mounts. The resolver's
// sockets are bound by the worker (step "bind resolver") and served from
// the handshake on (startResolver).
func (s *Session) prepareNetFilter(setup *setupMsg) error {
	if s.policy.Network != NetworkFiltered {
		return nil
	}
	if s.opts.landlock {
		// The resolver and the trap need a network namespace of the
		// sandbox's own; the Landlock backend shares the host's.
		return fmt.Errorf("%w: it needs the native backend (a network namespace of its own), not landlock", ErrNetFilterUnavailable)
	}
	if err := netTrapSupported(); err != nil {
		// Fail closed: without the connect trap a filtered network would
		// be no network at all while the user believes the allowed
		// names reachable.
		return fmt.Errorf("%w: %v", ErrNetFilterUnavailable, err)
	}
	if err := notify.NetnsCookieSupported(); err != nil {
		// The trap tells the sockets it installed from the sandbox's own
		// by their network namespace (nettrap.go): without SO_NETNS_COOKIE
		// (Linux 5.14) it could not, so it does not start.
		return fmt.Errorf("%w: SO_NETNS_COOKIE: %v (Linux 5.14 or newer is needed)", ErrNetFilterUnavailable, err)
	}
	nf := s.policy.NetFilter
	if nf == nil {
		nf = &NetFilter{}
	}
	cfg, err := nf.filterConfig()
	if err != nil {
		return err
	}
	n := &netSession{}
	cfg.OnRefusal = func(r *netfilter.Refusal) { s.netRefused(n, r) }
	if n.filter, err = netfilter.New(cfg); err != nil {
		return err
	}
	s.net = n
	if err := s.useNetTrap(n, setup); err != nil {
		return err
	}
	dest, err := resolvConfDest()
	if err != nil {
		return err
	}
	// The file is the supervisor's, in a directory only its user can
	// enter, and bound read-only: nothing inside can point the sandbox's
	// resolver elsewhere.
	if n.dir, err = makeResolvConfDir(); err != nil {
		return err
	}
	// Search only, for the worker: under a root caller it runs as ids
	// that own nothing on the host. The name is random and unlisted.
	if err := os.Chmod(n.dir, 0o711); err != nil {
		return err
	}
	file := filepath.Join(n.dir, "resolv.conf")
	if err := os.WriteFile(file, netfilter.ResolvConf(), 0o444); err != nil {
		return err
	}
	setup.Plan.Mounts = append(slices.Clip(setup.Plan.Mounts), Mount{Kind: MountBind, Source: file, Dest: dest, ReadOnly: true})
	setup.Resolver = true
	return nil
}

// resolvConfPrefix begins the name of a filtered start's resolv.conf
// directory, the owner's identity after it (ownedPattern).
const resolvConfPrefix = "nsbox-net-"

// deadResolvConfDirs removes, once a process, the resolv.conf
// directories of filtered starts whose supervisor was killed before the
// worker had made its mount (the file is removed right after, and by
// Close): a pool's owner killed while it refilled left about three a
// kill, for good, in the RAM of /dev/shm (review 56).
var deadResolvConfDirs sync.Once

// makeResolvConfDir makes the directory of a filtered start's
// resolv.conf, named for its owner.
func makeResolvConfDir() (string, error) {
	base := resolvConfBase()
	deadResolvConfDirs.Do(func() { removeDeadOwned(base, resolvConfPrefix) })
	return os.MkdirTemp(base, ownedPattern(resolvConfPrefix))
}

// resolvConfBase is where the generated resolv.conf is written: /dev/shm
// when it is the usual world-writable sticky tmpfs, else the temporary
// directory. On a disk file system (/tmp here) the directory, the file and
// their removal cost up to a millisecond of each filtered start (measured
// 0.1–0.5 ms for the mkdir alone); on tmpfs a few µs. In a sticky
// directory that root owns no other user can rename or remove what nsbox
// made there (the owner of a sticky directory could: hence the uid check).
func resolvConfBase() string {
	var st unix.Stat_t
	var fs unix.Statfs_t
	const shm = "/dev/shm"
	if unix.Lstat(shm, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR && st.Mode&0o1777 == 0o1777 && st.Uid == 0 &&
		unix.Statfs(shm, &fs) == nil && fs.Type == unix.TMPFS_MAGIC {
		return shm
	}
	return os.TempDir()
}

// resolvConfDest is where the generated resolv.conf is bound: over
// /etc/resolv.conf, or, where that is a symlink (systemd-resolved's
// ../run/systemd/resolve/stub-resolv.conf), at its target when that lies
// in the sandbox's private /run or /tmp (so the link resolves inside to
// nsbox's file). A link elsewhere would be followed onto a host file: it
// is refused.
func resolvConfDest() (string, error) { return resolvConfDestAt("/", "/etc/resolv.conf") }

// resolvConfDestAt is resolvConfDest for the host root at root (tests).
func resolvConfDestAt(root, etc string) (string, error) {
	fi, err := os.Lstat(filepath.Join(root, etc))
	if err != nil || fi.Mode()&os.ModeSymlink == 0 {
		return etc, nil
	}
	t, err := os.Readlink(filepath.Join(root, etc))
	if err != nil {
		return "", err
	}
	if !path.IsAbs(t) {
		t = path.Join(path.Dir(etc), t)
	}
	t = path.Clean(t)
	for _, private := range []string{"/run/", "/tmp/"} {
		if strings.HasPrefix(t, private) {
			return t, nil
		}
	}
	return "", fmt.Errorf("%w: /etc/resolv.conf is a symlink to %s, outside the sandbox's private /run and /tmp", ErrNetFilterUnavailable, t)
}

// startResolver takes the resolver's sockets from the worker and serves
// DNS on them for the session's life.
func (s *Session) startResolver(fds resolverFDs) error {
	n := s.net
	if n == nil {
		return nil
	}
	// The mount is made: the host copy of resolv.conf is not needed.
	n.removeResolvConf()
	if fds.UDP <= 0 || fds.TCP <= 0 {
		return &SetupError{Step: "network filter", Err: errors.New("the worker named no resolver sockets")}
	}
	udp, tcp, err := s.takeWorkerFDs(fds.UDP, fds.TCP)
	if err != nil {
		return &SetupError{Step: "network filter", Err: err}
	}
	pc, err := net.FilePacketConn(udp)
	udp.Close()
	if err != nil {
		tcp.Close()
		return &SetupError{Step: "network filter", Err: err}
	}
	ln, err := net.FileListener(tcp)
	tcp.Close()
	if err != nil {
		pc.Close()
		return &SetupError{Step: "network filter", Err: err}
	}
	if err := n.filter.ServeDNS(pc, ln); err != nil {
		pc.Close()
		ln.Close()
		return &SetupError{Step: "network filter", Err: err}
	}
	return nil
}

// removeResolvConf removes the host copy of resolv.conf and its
// directory: the two entries prepareNetFilter made, by name (RemoveAll
// would read the directory first, several system calls more on the
// start's path).
func (n *netSession) removeResolvConf() {
	if n.dir == "" {
		return
	}
	if err := unix.Unlink(filepath.Join(n.dir, "resolv.conf")); err != nil && err != unix.ENOENT {
		os.RemoveAll(n.dir) // not as made: whatever is there goes
	} else if err := unix.Rmdir(n.dir); err != nil && err != unix.ENOENT {
		os.RemoveAll(n.dir)
	}
	n.dir = ""
}

// takeWorkerFDs copies the worker's fds a and b (pidfd_getfd(2) through
// one pidfd; the supervisor, owner of the sandbox's user namespace, passes
// the ptrace check).
func (s *Session) takeWorkerFDs(a, b int) (*os.File, *os.File, error) {
	var files [2]*os.File
	for i, n := range []int{a, b} {
		fd, err := s.workerFD(n)
		if err != nil {
			if files[0] != nil {
				files[0].Close()
			}
			if errors.Is(err, errWorkerGone) {
				return nil, nil, err
			}
			return nil, nil, fmt.Errorf("take the resolver's socket (pidfd_getfd): %w; kernel.yama.ptrace_scope above 1 forbids it", err)
		}
		files[i] = os.NewFile(uintptr(fd), "nsbox-resolver")
	}
	return files[0], files[1], nil
}

// closeNet ends the filtered network: the resolver stops; connections
// already installed belong to the sandbox's processes, which are gone.
func (s *Session) closeNet() {
	if n := s.net; n != nil {
		n.filter.Close()
		n.removeResolvConf()
	}
}

// netRefused records a refusal and reports it.
//
// Every refusal is kept for the command's result (netViolationSince), but
// a violation event and an audit line are written once per target: a
// loop of refused connects wrote one of each per try (3,000 refusals, 549
// kB of status; found by review). Past maxReportedTargets distinct
// targets, new ones are still reported, from a bucket of overBurst that
// refills overRate a second: a program that first makes up hundreds of
// targets does not silence the one that matters (found by a second
// review), and one that makes up millions writes a bounded stream.
func (s *Session) netRefused(n *netSession, r *netfilter.Refusal) {
	n.mu.Lock()
	n.refused++
	n.last = append(n.last, r)
	if len(n.last) > maxNetRefusals {
		n.last = append(n.last[:0], n.last[len(n.last)-maxNetRefusals:]...)
	}
	if n.reported == nil {
		n.reported = map[refusalKey]struct{}{}
	}
	k := refusalKey{r.Op, r.Host, r.Port}
	_, seen := n.reported[k]
	report := false
	switch {
	case seen:
	case len(n.reported) < maxReportedTargets:
		n.reported[k] = struct{}{}
		report = true
	default:
		now := time.Now()
		if n.overFilled.IsZero() {
			n.overTokens = overBurst
		} else {
			n.overTokens = min(overBurst, n.overTokens+now.Sub(n.overFilled).Seconds()*overRate)
		}
		n.overFilled = now
		if n.overTokens >= 1 {
			n.overTokens--
			report = true
		}
	}
	n.mu.Unlock()
	if report {
		s.reportViolation(netViolation(r))
	}
}

// netMark returns the refusal count, for netViolationSince.
func (s *Session) netMark() int64 {
	n := s.net
	if n == nil {
		return 0
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.refused
}

// netViolationSince is the violation of a command that failed after the
// filter refused something it did: the first refusal since mark.
func (s *Session) netViolationSince(mark int64) *ViolationError {
	n := s.net
	if n == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	k := n.refused - mark
	if k <= 0 {
		return nil
	}
	k = min(k, int64(len(n.last)))
	if k == 0 {
		return &ViolationError{Operation: "network connect", Detail: "refused by the network filter"}
	}
	return netViolation(n.last[len(n.last)-int(k)])
}

// NetworkViolationOp is the Operation of a network filter refusal's
// ViolationError: "network connect" (connect, send) or "network lookup".
const (
	OpNetworkConnect = "network connect"
	OpNetworkLookup  = "network lookup"
)

func netViolation(r *netfilter.Refusal) *ViolationError {
	op := OpNetworkConnect
	if r.Op == netfilter.OpLookup {
		op = OpNetworkLookup
	}
	return &ViolationError{Operation: op, Path: r.Target(), Detail: r.Reason, Host: r.Host, Port: int(r.Port)}
}

// NetStats are the counters of a session's filtered network.
type NetStats = netfilter.Stats

// NetStats returns the filtered network's counters (ok false without one).
func (s *Session) NetStats() (st NetStats, ok bool) {
	if s.net == nil {
		return st, false
	}
	st = s.net.filter.Stats()
	st.OpenConns = s.net.filter.OpenConns()
	return st, true
}
