package sandbox

// extern int nsbox_landlock_state;
import "C"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/nsbox/nsbox/pkg/landlock"
	"github.com/nsbox/nsbox/pkg/notify"
	"github.com/nsbox/nsbox/pkg/rmtree"
	"golang.org/x/sys/unix"
)

// The Landlock backend (WithLandlock) runs the same worker and protocol as
// the namespace sandbox, but without any namespace: for hosts where user
// namespaces or a fresh /proc are refused (a container's default seccomp
// profile, a masked /proc). The worker is a plain child of the supervisor,
// confined by a Landlock ruleset the supervisor builds from the same policy
// (landlock_init.c applies it before the worker's Go runtime starts), the
// same seccomp filter plus a socket filter, no_new_privs, the same limits,
// and a kill of every process it started when the session ends. What it
// does not isolate is LandlockInfo.NotIsolated.

// landlockArg0 is the Landlock worker's argv[0] (landlock_arg0 in
// landlock_init.c).
const landlockArg0 = "nsbox-landlock-init"

// landlockTmpPrefix begins the name of a session's private TMPDIR.
const landlockTmpPrefix = "nsbox-tmp-"

// landlockFDEnv names the inherited ruleset fd.
const landlockFDEnv = "_NSBOX_LANDLOCK_FD"

// WithLandlock starts the session with the Landlock backend instead of
// namespaces. Start fails with ErrUnavailable when the kernel has no
// Landlock.
func WithLandlock() Option { return func(o *options) { o.landlock = true } }

// LandlockAvailable says whether the Landlock backend can run here.
func LandlockAvailable() error {
	if _, err := landlock.ABI(); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return nil
}

// LandlockInfo is what a Landlock session enforces and what it does not.
type LandlockInfo struct {
	ABI    int             `json:"abi"`
	Report landlock.Report `json:"report"`
	// TmpDir is the session's private temporary directory (TMPDIR).
	TmpDir string `json:"tmpDir"`
	// NotIsolated lists, for users, what this backend leaves shared with
	// the host here.
	NotIsolated []string `json:"notIsolated"`
}

// Landlock returns what the session's Landlock backend enforces, or nil for
// a namespace sandbox.
func (s *Session) Landlock() *LandlockInfo { return s.llInfo }

// metadataGap says what is left of a file's mode and times: with the
// metadata gate (seccomp user notification: landlock_meta.go), only the
// refusals that apply in writable places too.
func metadataGap() string {
	const refused = "every extended attribute write (EOPNOTSUPP: an ACL would grant the same), a change of a file's group to one other than the caller's own, and of its inode flags or project id (EPERM)"
	if metaGateSupported() == nil {
		return "file modes, owners and times: Landlock has no right for chmod(2), chown(2) or utimensat(2); nsbox's supervisor makes them for commands (seccomp user notification) only on files Landlock lets them write, and on pipes, sockets and files with no name left (a memfd) wherever they are, and refuses the rest (EACCES), device nodes but for \"now\" and the host's shared anonymous inode (EPERM), and /proc magic links other than the command's own fds (ELOOP); a signal that arrives before the supervisor has taken such a call interrupts it (EINTR where the handler was installed without SA_RESTART), which these calls never are natively; an nsbox without CAP_SYS_PTRACE (root-less, or root in a container's default capabilities) refuses prctl(PR_SET_DUMPABLE, 0) (EPERM) so that it can read those calls, and a command running a program it may not read (not dumpable either) gets EPERM for them; seccomp refuses " + refused
	}
	return "file modes, owners and times: Landlock has no right for chmod(2), chown(2) or utimensat(2), and seccomp user notification is not available here (kernel or architecture) for nsbox to decide them; a mode that lets the group or others write is refused by seccomp (in writable directories too), and so are " + refused + ", but commands can still change the other mode bits (make a private file readable by every local user), the times of every file the caller owns that they can name, read-only and hidden ones included (a root caller: root's files), and with a chown to the caller's own ids clear the set-user-ID and set-group-ID bits and file capabilities of such a file; the mount namespace backend refuses all three outside writable directories"
}

// LandlockGaps lists what the Landlock backend cannot isolate on a kernel
// of the given ABI, whatever the policy.
func LandlockGaps(abi int, network Network) []string {
	gaps := []string{
		"PID visibility: processes of the host (and their command lines in /proc) are visible; there is no PID namespace",
		"no mount namespace: /proc, /sys and file metadata (names, sizes, times reachable by stat, extended attributes and symlink targets) of the host stay visible, hidden paths' included; hidden directories can be listed by name where a directory above them is readable, but their files not read",
		"a hidden or protected path inside a readable or writable directory is expressed by splitting that directory: entries can no longer be created, removed or renamed directly in it (status lists them)",
		"/tmp, /var/tmp, /run and /dev/shm of the host are not reachable; the session gets a private directory as TMPDIR instead of a /tmp of its own",
		"no pseudo-terminals: /dev/ptmx and /dev/pts are the host's (its users' terminals) and are not granted, so programs that allocate a terminal (script, expect, tmux) fail",
		"inotify and fanotify watches need no Landlock right: a command can watch a hidden directory and learn when the host opens or reads what is in it (names and times, not contents)",
		"the hostname and IPC namespace are the host's: System V IPC and POSIX message queues are refused (EACCES) instead, so programs that use them (shared-memory caches, some databases) fail; the host's objects stay listed, with keys, ids, owners and sizes, in /proc/sysvipc",
		metadataGap(),
		"socket(2) of every family is refused by seccomp with network none (AF_UNIX with network host), and so are socketpair(2) of datagram sockets and, with network none, bind(2) and connect(2): there is no private loopback",
	}
	if network == NetworkHost {
		gaps = append(gaps, "network host: the network is the host's; only socket(AF_UNIX) and datagram socketpair(2) are refused, and a stream socketpair can still bind (squat) an abstract unix name of the host's")
	}
	if abi < 4 && network != NetworkHost {
		gaps = append(gaps, fmt.Sprintf("Landlock ABI %d has no TCP rules (ABI 4, Linux 6.7): network none rests on the seccomp socket filter alone", abi))
	}
	if abi < 6 {
		gaps = append(gaps, fmt.Sprintf("Landlock ABI %d has no scopes (ABI 6, Linux 6.12): commands can signal processes of the same user outside the sandbox, and the threads the worker starts after its setup by their ids (which ends the session early: what a command detached then outlives it unless cgroup limits are on), and the teardown has no atomic kill: processes that fork faster than it kills them can outlive the session (reported: exit 125); abstract unix sockets outside stay closed only because socket(AF_UNIX) is refused", abi))
	}
	if abi < 5 {
		gaps = append(gaps, fmt.Sprintf("Landlock ABI %d cannot restrict ioctl on device files (ABI 5, Linux 6.10)", abi))
	}
	if abi < 3 {
		gaps = append(gaps, fmt.Sprintf("Landlock ABI %d cannot restrict truncate(2) (ABI 3, Linux 6.2)", abi))
	}
	if os.Geteuid() == 0 {
		gaps = append(gaps, "host root: there is no user namespace, so a root caller's commands run as host uid 0 (every capability dropped) and read every file root owns by its owner or group bits; nsbox denies /etc/shadow, the SSH host keys, TLS private keys and Kerberos keytabs, but not a root-only file elsewhere (an application's secret mounted 0600): run nsbox as a non-root user (a container's USER, runAsNonRoot), or where user namespaces work use the native backend, whose root owns nothing on the host")
	}
	gaps = append(gaps, "where limits fall back to rlimits (no cgroup), the process limit (RLIMIT_NPROC) counts every process of the user on the host, not only the sandbox's: there is no user namespace of its own")
	gaps = append(gaps, "processes a command detached (setsid) are killed by the worker when the session ends; if the supervisor is SIGKILLed they are killed when the worker sees its channel close, and with cgroup limits by cgroup.kill")
	return gaps
}

// landlockGrants turns the policy's file system into Landlock grants:
// the read-only root (or HostDirs), the writable binds, hidden paths
// (no access), protected paths (read-only), the private TMPDIR, the
// devices a command needs, and the nsbox binary (read and execute only:
// never writable, even inside a writable bind).
func landlockGrants(p *Policy, tmpDir, self string) ([]landlock.Grant, error) {
	var g []landlock.Grant
	if p.HostDirs == nil {
		g = append(g, landlock.Grant{Path: "/", Access: landlock.ReadExec})
	} else {
		for _, d := range p.HostDirs {
			g = append(g, landlock.Grant{Path: d, Access: landlock.ReadExec})
		}
	}
	// What the namespace sandbox replaces with fresh file systems is not
	// reachable here: the host's /tmp, /run and /dev/shm hold other
	// programs' sockets, locks and shared memory.
	for _, d := range []string{"/tmp", "/var/tmp", "/run", "/dev"} {
		g = append(g, landlock.Grant{Path: d, Access: 0})
	}
	dev := landlock.ReadFile | landlock.WriteFile | landlock.IoctlDev | landlock.ReadDir
	// Never /dev/pts or /dev/ptmx: without a mount namespace they are
	// the host's devpts, where a command would open the user's other
	// terminals, read what is typed there (a password at a sudo prompt)
	// and write into them. nsbox hands a Landlock session no terminal
	// (commands start in a session of their own, so /dev/tty names none).
	for _, d := range []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"} {
		// A symlink is decided at its target, which would have to be
		// granted itself.
		if st, err := os.Lstat(d); err == nil && st.Mode()&os.ModeSymlink == 0 {
			g = append(g, landlock.Grant{Path: d, Access: dev})
		}
	}
	// /proc is needed by most programs (/proc/self); the host's processes
	// in it are visible (LandlockGaps), and Landlock refuses ptrace-class
	// access to those outside the domain (environ, mem, fd).
	g = append(g, landlock.Grant{Path: "/proc", Access: landlock.ReadOnly})
	g = append(g, landlock.Grant{Path: tmpDir, Access: landlock.ReadWrite})
	for _, m := range p.Mounts {
		switch m.Kind {
		case MountBind:
			if m.Source != m.Dest {
				return nil, &PolicyError{Field: "mounts", Msg: fmt.Sprintf("the landlock backend cannot place %s at %s: without a mount namespace a path is only reachable where it is", m.Source, m.Dest)}
			}
			if _, err := os.Lstat(m.Source); err != nil {
				if m.Optional {
					continue
				}
				return nil, fmt.Errorf("bind %s: %w", m.Source, err)
			}
			a := landlock.ReadWrite
			if m.ReadOnly {
				a = landlock.ReadExec
			}
			g = append(g, landlock.Grant{Path: m.Dest, Access: a})
		case MountTmpfs:
			return nil, &PolicyError{Field: "mounts", Msg: fmt.Sprintf("the landlock backend cannot give %s a tmpfs of its own (no mount namespace); use the native backend, or drop --tmpfs %s", m.Dest, m.Dest)}
		case MountHide:
			if _, err := os.Lstat(m.Dest); err != nil {
				continue // nothing there to read
			}
			g = append(g, landlock.Grant{Path: m.Dest, Access: 0})
		case MountProtect:
			// A missing protected path is granted anyway: its parent is
			// then split (frozen), so the name cannot be created. So is
			// a protected symlink (NoFollow): frozen, its parent keeps
			// it from being removed or renamed.
			g = append(g, landlock.Grant{Path: m.Dest, Access: landlock.ReadExec})
		}
	}
	// A hidden path missing at resolve time is denied all the same: its
	// parent is split (frozen), so what the host creates there later is
	// not readable (review 67). The namespace backend cannot do this
	// (docs/security.md, "Hidden paths").
	for _, d := range p.AbsentHidden {
		g = append(g, landlock.Grant{Path: d, Access: 0})
	}
	// A root caller's commands keep host uid 0 here (no user namespace):
	// with every capability dropped they still read every file root owns
	// by its owner bits. The secrets every system has are denied (review
	// 67); the rest is listed in LandlockGaps.
	if os.Geteuid() == 0 {
		for _, d := range rootSecrets() {
			g = append(g, landlock.Grant{Path: d, Access: 0})
		}
	}
	if self != "" {
		g = append(g, landlock.Grant{Path: self, Access: landlock.ReadExec})
	}
	return g, nil
}

// rootSecretPaths are the root-only secrets a Debian, Ubuntu or Fedora
// system keeps outside home directories: password hashes, the SSH host
// keys (a command reading them could impersonate the host), TLS private
// keys, and the Kubernetes service account token (hidden by the base
// profile too).
var rootSecretPaths = []string{
	"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-",
	"/var/backups/shadow.bak", "/var/backups/gshadow.bak",
	"/etc/security/opasswd", "/etc/ssl/private", "/etc/pki/tls/private",
	"/etc/ssh/ssh_host_*_key",
	"/var/lib/sss", "/etc/krb5.keytab", "/var/lib/systemd/credential.secret",
}

// rootSecrets lists the rootSecretPaths that exist here. A symlink at one
// is denied at its target (access through a link is decided there; a
// keytab or key linked into a secrets mount stayed readable: review 70).
func rootSecrets() []string {
	var out []string
	for _, pat := range rootSecretPaths {
		ms, _ := filepath.Glob(pat) // the pattern is ours: never ErrBadPattern
		for _, m := range ms {
			st, err := os.Lstat(m)
			if err != nil {
				continue
			}
			if st.Mode()&os.ModeSymlink != 0 {
				if m, err = filepath.EvalSymlinks(m); err != nil {
					continue
				}
			}
			out = append(out, m)
		}
	}
	return out
}

// landlockNotIsolated is LandlockGaps plus what the expansion of this
// policy's grants could not express exactly.
func landlockNotIsolated(abi int, network Network, e landlock.Expansion) []string {
	gaps := LandlockGaps(abi, network)
	n := len(gaps)
	for _, d := range e.Frozen {
		gaps = append(gaps, "frozen: no entry can be created, removed or renamed directly in "+d+", nor its own mode, owner or times changed")
	}
	for _, d := range e.Listable {
		gaps = append(gaps, "listable: the names in hidden "+d+" can be listed (not read)")
	}
	sort.Strings(gaps[n:])
	return gaps
}

// LandlockPlan is what the Landlock backend would enforce for a policy,
// computed as Start computes it but without building a ruleset or
// creating anything: for a dry run, which must describe this backend (no
// mount is made) and refuse what its start refuses.
type LandlockPlan struct {
	ABI int `json:"abi"`
	// Rules are the Landlock path rules: each path and the rights granted
	// beneath it. Everything else of the file system gets nothing.
	Rules []LandlockRule `json:"rules"`
	// TmpDir stands for the private TMPDIR, created at start.
	TmpDir string `json:"tmpDir"`
	// NotIsolated is LandlockInfo.NotIsolated for this policy.
	NotIsolated []string `json:"notIsolated"`
}

// LandlockRule is one path rule of a LandlockPlan.
type LandlockRule struct {
	Path   string `json:"path"`
	Access string `json:"access"`
}

// PlanLandlock describes the Landlock backend's confinement of p. It
// fails as Start with WithLandlock would on the policy (a tmpfs, a bind
// to another path, a missing bind source), and with ErrUnavailable when
// the kernel has no Landlock.
func PlanLandlock(p Policy) (*LandlockPlan, error) {
	if err := landlockRefuses(&p); err != nil {
		return nil, err
	}
	abi, err := landlock.ABI()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	tmp := filepath.Join(landlockTmpParent(), landlockTmpPattern()+"*")
	self, err := os.Executable()
	if err != nil {
		self = ""
	} else if r, rerr := filepath.EvalSymlinks(self); rerr == nil {
		self = r
	}
	grants, err := landlockGrants(&p, tmp, self)
	if err != nil {
		return nil, err
	}
	e, err := landlock.Expand(grants)
	if err != nil {
		return nil, err
	}
	plan := &LandlockPlan{ABI: abi, TmpDir: tmp, NotIsolated: landlockNotIsolated(abi, p.Network, e)}
	for _, r := range e.Rules {
		plan.Rules = append(plan.Rules, LandlockRule{Path: r.Path, Access: r.Access.String()})
	}
	return plan, nil
}

// landlockRefuses is what a Landlock run refuses of a policy, said by its
// dry run too (PlanLandlock): a plan the run would then refuse misleads
// (second review). The run itself refuses the same two, in the filtered
// network's preparation (prepareNetFilter) and in the worker's
// "drop capabilities" step, with these words.
func landlockRefuses(p *Policy) error {
	if p.AllowPrivileged {
		return errors.New("--allow-privileged needs the native backend: without a user namespace the capabilities would be the host's")
	}
	if p.Network == NetworkFiltered {
		return fmt.Errorf("%w: it needs the native backend (a network namespace of its own), not landlock", ErrNetFilterUnavailable)
	}
	// The socket filter refuses socket(AF_UNIX) whatever the policy
	// allows: an --allow-socket it accepted would be refused at every
	// connect, silently (review 67).
	if len(p.UnixSockets.Allow) > 0 {
		return &PolicyError{Field: "unixSockets.allow", Msg: fmt.Sprintf("--allow-socket %s needs the native backend: the landlock backend refuses every unix socket (socket(AF_UNIX) is refused by its filter)", p.UnixSockets.Allow[0])}
	}
	return nil
}

// landlockState is a Landlock session's supervisor-side state.
type landlockState struct {
	ruleset *landlock.Ruleset
	tmpDir  string
	// metaGate: the worker was asked for the metadata gate's filter
	// (setupMsg.MetaGate); meta serves it once started.
	metaGate bool
	meta     *notify.Server
}

// prepareLandlock builds the session's ruleset and private TMPDIR.
func (s *Session) prepareLandlock(setup *setupMsg) error {
	// What the dry run refuses (PlanLandlock), the start refuses too.
	if err := landlockRefuses(&s.policy); err != nil {
		return err
	}
	abi, err := landlock.ABI()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	// Named after this supervisor (landlock_tmp.go): if it is killed
	// before Close removes the directory, a later nsbox removes it.
	tmp, err := makeLandlockTmp()
	if err != nil {
		return fmt.Errorf("private TMPDIR: %w", err)
	}
	s.ll = &landlockState{tmpDir: tmp}
	// Rules are opened without following symlinks: name the directory by
	// its real path ($TMPDIR may run through one).
	if real, err := filepath.EvalSymlinks(tmp); err == nil {
		tmp = real
	}
	self, err := os.Executable()
	if err != nil {
		self = ""
	} else if r, rerr := filepath.EvalSymlinks(self); rerr == nil {
		self = r
	}
	grants, err := landlockGrants(&s.policy, tmp, self)
	if err != nil {
		return err
	}
	e, err := landlock.Expand(grants)
	if err != nil {
		return err
	}
	cfg := landlock.Config{
		HandledFS: landlock.ReadWrite,
		Paths:     e.Rules,
		// Both scopes: a command cannot signal the host's processes or
		// reach the host's abstract unix sockets (X11, D-Bus, containerd's
		// shims), which share no namespace boundary with it here.
		Scoped:      landlock.ScopeAbstractUnix | landlock.ScopeSignal,
		BestEffort:  true,
		SkipMissing: true,
	}
	if s.policy.Network != NetworkHost {
		// Network none: every TCP bind and connect is refused (no port
		// rule), loopback included: the host's loopback services are
		// the host's. UDP and the rest: the socket filter.
		cfg.HandledNet = landlock.BindTCP | landlock.ConnectTCP
	}
	rs, err := landlock.Build(cfg)
	if err != nil {
		return err
	}
	s.ll.ruleset = rs
	s.llInfo = &LandlockInfo{ABI: abi, Report: rs.Report, TmpDir: tmp, NotIsolated: landlockNotIsolated(abi, s.policy.Network, e)}
	if os.Geteuid() == 0 {
		// Said at every run, as the single-id map's host root is: the
		// namespace backend never runs a command as host root unasked.
		s.warnings = append(s.warnings, "the landlock backend runs a root caller's commands as host root (no capabilities, no user namespace): root-only files other than the system secrets nsbox denies are readable inside; run nsbox as a non-root user")
	}
	setup.Landlock = true
	// Modes and times: Landlock has no right for them; the metadata
	// gate decides them where this kernel has seccomp user notification
	// (5.6; every kernel with Landlock has it on x86-64 and arm64), else
	// LandlockGaps says what is left open.
	setup.MetaGate = metaGateSupported() == nil
	// Without CAP_SYS_PTRACE (root-less, or root in a container's
	// default capability set) the supervisor reads a command's calls
	// with the command's own rights, which a non-dumpable command takes
	// away (found by review: a root nsbox in a container).
	setup.MetaDumpable = setup.MetaGate && !hasCapSysPtrace()
	s.ll.metaGate = setup.MetaGate
	setup.NewNet = false
	setup.SocketFilter = socketFilterNone
	if s.policy.Network == NetworkHost {
		setup.SocketFilter = socketFilterUnix
	}
	// No mount namespace: the nsbox binary cannot be placed at SelfPath.
	setup.Plan.SelfDest = ""
	setup.Env = withPrivateCacheIn(append(setup.Env[:len(setup.Env):len(setup.Env)], "TMPDIR="+tmp), s.policy.Mounts, tmp)
	s.policy.Env = withPrivateCacheIn(append(s.policy.env()[:len(s.policy.env()):len(s.policy.env())], "TMPDIR="+tmp), s.policy.Mounts, tmp)
	return nil
}

// startLandlockWorker starts the worker as a plain child in a session of
// its own (no terminal: no TIOCSTI), with the channel at fd 3 and the
// ruleset at fd 4. No parent death signal: the worker must outlive a
// killed supervisor long enough to kill what it started; it sees its
// channel close instead.
func (s *Session) startLandlockWorker(workerEnd *os.File) error {
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer devnull.Close()
	stderr := devnull
	if os.Getenv("NSBOX_DEBUG_WORKER") != "" {
		stderr = os.Stderr
	}
	// The child gets a duplicate, owned by this *os.File and closed right
	// after the start: wrapping the ruleset's own number would leave two
	// owners of it (Ruleset.Close and the *os.File's finalizer), and the
	// finalizer would close the number again later, by then another
	// file's (a later session's channel in a long-lived supervisor).
	dup, err := unix.FcntlInt(uintptr(s.ll.ruleset.FD()), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return fmt.Errorf("duplicate landlock ruleset: %w", err)
	}
	rs := os.NewFile(uintptr(dup), "landlock-ruleset")
	defer rs.Close()
	proc, err := os.StartProcess("/proc/self/exe", []string{landlockArg0}, &os.ProcAttr{
		Env:   []string{initEnv + "=1", landlockFDEnv + "=4"},
		Files: []*os.File{devnull, devnull, stderr, workerEnd, rs},
		Sys:   &syscall.SysProcAttr{Setsid: true},
	})
	if err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	s.pid, s.proc = proc.Pid, proc
	s.holdWorker()
	go func() {
		s.reaped(waitExit(proc))
	}()
	return nil
}

// closeLandlock ends a Landlock session: the worker, told by its channel
// closing, kills every process it started and exits; after a grace period
// it is killed. Then the private TMPDIR is removed.
//
// The grace outlasts the worker's own kill loop (killDescendantsDeadline):
// a worker killed while it still kills would leave the commands it had
// not reached yet running with no session (there is no PID namespace to
// end them with it; review 29's note).
//
// It returns ErrTeardownIncomplete when the worker did not exit 0 by
// itself: it could not list or kill every process of the session, or had
// to be killed while it still tried, so some may still run.
func (s *Session) closeLandlock() error {
	var err error
	select {
	case <-s.exited:
		if s.waitErr != nil {
			err = fmt.Errorf("%w: the Landlock worker ended with %v", ErrTeardownIncomplete, s.waitErr)
		}
	case <-time.After(killDescendantsDeadline + 2*time.Second):
		err = fmt.Errorf("%w: the Landlock worker was still killing them after %v", ErrTeardownIncomplete, killDescendantsDeadline+2*time.Second)
	}
	s.kill()
	<-s.exited
	if s.ll != nil {
		s.ll.ruleset.Close()
		if s.ll.tmpDir != "" {
			// Whatever the session's commands left in it (rmtree):
			// os.RemoveAll gave up on a mode-0 directory, and the
			// TMPDIR with the calls' files stayed in /tmp.
			rmtree.All(s.ll.tmpDir)
		}
	}
	return err
}

// landlockApplied is the outcome of landlock_init.c's constructor: nil when
// this process is a Landlock worker confined before its runtime started.
func landlockApplied() error {
	switch st := int(C.nsbox_landlock_state); {
	case st == 0:
		return nil
	case st < 0:
		return errors.New("the worker was not confined: it was not started as a Landlock worker")
	default:
		return fmt.Errorf("landlock_restrict_self: %w", syscall.Errno(st))
	}
}

// isLandlockWorker: this process was started as a Landlock worker.
func isLandlockWorker() bool { return len(os.Args) > 0 && os.Args[0] == landlockArg0 }
