package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/pkg/ipc"
	"github.com/nsbox/nsbox/pkg/mounts"
	"github.com/nsbox/nsbox/pkg/namespaces"
)

// The sandbox's identity: which ids its user namespace maps (a full range
// or the caller's own id), who the worker is inside, and, for a root
// caller, the idmapped binds that let a sandbox running as
// unprivileged host ids write files owned by the caller.

// Environment variables that point the range choice at other sub-id files,
// for tests and for admins trying a range before they reserve it. They
// change which range nsbox asks for; newuidmap (root-less) still checks the
// request against /etc/subuid and /etc/subgid.
const (
	EnvSubUID = "NSBOX_SUBUID"
	EnvSubGID = "NSBOX_SUBGID"
)

// ErrIdmapUnsupported is wrapped when a bind of a root-started
// sandbox is on a filesystem that cannot be idmapped.
var ErrIdmapUnsupported = mounts.ErrIdmapUnsupported

// identityMsg is the worker's part of the identity, sent in the handshake.
type identityMsg struct {
	UID       uint32 `json:"uid"`
	GID       uint32 `json:"gid"`
	Setgroups bool   `json:"setgroups,omitempty"`
}

// Identity describes the ids a sandbox runs with, for status and tests.
type Identity struct {
	// Mode is "full" (a 65,536-id range for users and groups) or
	// "single" (the caller's own uid and gid only).
	Mode string
	// UID and GID are the ids inside; HostUID and HostGID what the host
	// sees of them.
	UID, GID, HostUID, HostGID uint32
	// Helper: newuidmap/newgidmap write the maps (root-less full range).
	Helper bool
	// Setgroups: setgroups(2) works inside.
	Setgroups bool
	// IdmappedBinds: the policy's binds are idmapped (root callers).
	IdmappedBinds bool
	// Reason says why the single-id map is used when a full range was
	// not available.
	Reason string
}

// chooseIdentity is the identity of a sandbox started now by this process.
func chooseIdentity(single bool) (*namespaces.Identity, error) {
	o := namespaces.ChooseOptions{
		EUID: os.Geteuid(), EGID: os.Getegid(),
		SubUID: os.Getenv(EnvSubUID), SubGID: os.Getenv(EnvSubGID),
		Single: single,
	}
	if u, err := user.LookupId(strconv.Itoa(o.EUID)); err == nil {
		o.User = u.Username
	}
	if o.EUID == 0 {
		o.RootNotHostAdmin = rootNotHostAdmin()
	}
	return namespaces.ChooseIdentity(o)
}

// rootNotHostAdmin says why uid 0 here cannot make idmapped mounts of the
// host's file systems ("" when it can): mount_setattr(2) MOUNT_ATTR_IDMAP
// wants CAP_SYS_ADMIN in the user namespace that owns the mount, the
// initial one for the host's file systems. A container's root usually has
// neither (containerd's and Docker's default capabilities lack
// CAP_SYS_ADMIN; a rootless or userns container is not the initial
// namespace).
func rootNotHostAdmin() string {
	if b, err := os.ReadFile("/proc/self/uid_map"); err == nil && !initialUIDMap(string(b)) {
		return "uid 0 of a user namespace other than the host's (a container): idmapped mounts of the host's file systems are refused"
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "cannot read /proc/self/status: " + err.Error()
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil || caps&(1<<unix.CAP_SYS_ADMIN) == 0 {
				return "uid 0 without CAP_SYS_ADMIN (a container's default capabilities): idmapped mounts are refused"
			}
			return ""
		}
	}
	return "no CapEff in /proc/self/status"
}

// initialUIDMap: the map of the initial user namespace, "0 0 4294967295".
func initialUIDMap(m string) bool {
	f := strings.Fields(m)
	return len(f) == 3 && f[0] == "0" && f[1] == "0" && f[2] == "4294967295"
}

// CurrentIdentity is the identity a sandbox started by this process with
// p gets, without starting one (for `nsbox status`). A malformed sub-id
// file is an error, as it is for Start.
func CurrentIdentity(p Policy) (Identity, error) {
	id, err := chooseIdentity(p.SingleID)
	if err != nil {
		return Identity{}, err
	}
	return describeIdentity(id), nil
}

func describeIdentity(id *namespaces.Identity) Identity {
	return Identity{Mode: string(id.Mode), UID: id.UID, GID: id.GID, HostUID: id.HostUID(), HostGID: id.HostGID(),
		Helper: id.Helper, Setgroups: id.Setgroups(), IdmappedBinds: idmapsBinds(id), Reason: id.Reason}
}

// idmapsBinds: a root caller's full range needs its writable binds
// idmapped, or the sandbox (host ids of the range) could not write the
// caller's files. A root-less full range keeps the caller's own uid
// mapped to itself, which owns its files already.
func idmapsBinds(id *namespaces.Identity) bool {
	return id != nil && id.Mode == namespaces.ModeFull && !id.Helper
}

// IdmapSupport says whether a directory's filesystem accepts idmapped
// mounts here, by making one (detached, never attached) with a throwaway
// user namespace. Only root can: for anyone else it returns an error
// saying so.
func IdmapSupport(dir string) error {
	if os.Geteuid() != 0 {
		return errors.New("idmapped mounts are made by root only (root-less sandboxes map the caller's own uid to itself and need none)")
	}
	// A user namespace to map through: a child in a new one, its maps
	// written, held until the mount is made.
	id := &namespaces.Identity{Mode: namespaces.ModeFull,
		UIDMap: []namespaces.IDRange{{Inside: 0, Outside: namespaces.DefaultRootStart, Count: 1}},
		GIDMap: []namespaces.IDRange{{Inside: 0, Outside: namespaces.DefaultRootStart, Count: 1}}}
	return withProbeUserns(id, func(nsfd int) error {
		fd, err := mounts.IdmappedBind(dir, nsfd, true)
		if err == nil {
			unix.Close(fd)
		}
		return err
	})
}

// idmapBinds makes the idmapped binds of a root-started sandbox
// in the supervisor, through the worker's user namespace (its maps must be
// written): the fds to send with the handshake and the plan indices they
// stand for. A filesystem that refuses is an error naming the bind and the
// way out.
func (s *Session) idmapBinds(plan *mounts.Plan) (fds []*os.File, idx []int, err error) {
	ns, err := os.Open("/proc/" + strconv.Itoa(s.pid) + "/ns/user")
	if err != nil {
		return nil, nil, err
	}
	defer ns.Close()
	defer func() {
		if err != nil {
			for _, f := range fds {
				f.Close()
			}
			fds, idx = nil, nil
		}
	}()
	for i, m := range plan.Mounts {
		// Read-only binds too: a bind the policy names is one the user
		// wants to see, and through the idmap root inside reads it as the
		// files' owners allow. Only the host root stays unmapped, where
		// root's files (/etc/shadow) are out of the sandbox's reach.
		if m.Kind != mounts.Bind {
			continue
		}
		if len(idx) == maxPremade {
			return fds, idx, fmt.Errorf("more than %d binds", maxPremade)
		}
		fd, err := mounts.IdmappedBind(m.Source, int(ns.Fd()), m.ReadOnly)
		if err != nil {
			if m.Optional && errors.Is(err, unix.ENOENT) {
				continue
			}
			if errors.Is(err, unix.ENOENT) {
				// Seen by the policy (checkSources), gone now: moved by a
				// process sharing the tree, as the worker reports it
				// (mounts.StepSourceChanged); the caller resolves again.
				return fds, idx, &SetupError{Step: mounts.StepSourceChanged, Err: &planChangedError{
					msg: (&mounts.Error{Step: mounts.StepSourceChanged, Source: m.Source, Dest: m.Dest, Err: errors.New("it was there when the policy was resolved and is gone or moved now")}).Error()}}
			}
			if errors.Is(err, mounts.ErrIdmapUnsupported) {
				return fds, idx, fmt.Errorf("%w: cannot bind %s: %v; a root-started sandbox runs as unprivileged host ids and writes through an idmapped mount: put it on ext4, xfs, btrfs or tmpfs (Linux 6.3+), or pass --allow-single-id to run as host root with the single-id map", ErrIdmapUnsupported, m.Source, err)
			}
			return fds, idx, err
		}
		fds = append(fds, os.NewFile(uintptr(fd), "idmapped "+m.Source))
		idx = append(idx, i)
	}
	return fds, idx, nil
}

// withProbeUserns runs fn with an fd of a fresh user namespace mapped as id
// says: that of a worker started for the purpose, which exits when its
// channel closes, before any handshake.
func withProbeUserns(id *namespaces.Identity, fn func(nsfd int) error) error {
	sup, wk, err := ipc.Socketpair()
	if err != nil {
		return err
	}
	defer sup.Close()
	type started struct {
		p   *os.Process
		err error
	}
	st := make(chan started, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // the parent death signal's thread; ends with the goroutine
		p, err := namespaces.Spawn(namespaces.Options{}, namespaces.SpawnArgs{
			Path: "/proc/self/exe", Argv: []string{"nsbox-init"}, Env: []string{initEnv + "=1"}, Extra: wk})
		wk.Close()
		st <- started{p, err}
		if err == nil {
			p.Wait()
		}
	}()
	r := <-st
	if r.err != nil {
		return describeStartError(r.err)
	}
	defer func() { sup.Close(); r.p.Kill(); <-done }()
	if err := namespaces.WriteMaps(r.p.Pid, id); err != nil {
		return err
	}
	ns, err := os.Open("/proc/" + strconv.Itoa(r.p.Pid) + "/ns/user")
	if err != nil {
		return err
	}
	defer ns.Close()
	return fn(int(ns.Fd()))
}

// reachableAncestors returns read-only binds, to be idmapped like the
// policy's own, of the host directories that a root-started sandbox could
// not enter on the way to one of its binds: a workspace in /root/project
// is below /root (0700, host root's), which the sandbox's root, a host id
// of its range, may not search through the plain read-only host root. Shown
// through the sandbox's idmap, such a directory is its root's to enter, as
// the caller's home is to a root-less sandbox; the policy's hides apply on
// top (they come later in the plan). Only the topmost such directory of
// each path is bound; ones below the sandbox's own /tmp are skipped (the
// worker makes those paths).
func reachableAncestors(p *Policy) []Mount {
	var out []Mount
	seen := map[string]bool{}
	for _, m := range p.Mounts {
		if m.Kind != MountBind {
			continue
		}
		for _, a := range ancestors(m.Dest) {
			if a == "/tmp" || strings.HasPrefix(a, "/tmp/") || seen[a] {
				break
			}
			var st unix.Stat_t
			if unix.Lstat(a, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
				break // not a host directory: the worker creates the path
			}
			if st.Mode&0o001 != 0 {
				continue // others may search it: so may the sandbox
			}
			seen[a] = true
			out = append(out, Mount{Kind: MountBind, Source: a, Dest: a, ReadOnly: true})
			break
		}
	}
	return out
}

// ancestors lists the directories above p, outermost first ("/" left
// out): /a/b/c gives /a, /a/b.
func ancestors(p string) []string {
	var out []string
	for i := 1; i < len(p); i++ {
		if p[i] == '/' {
			out = append(out, p[:i])
		}
	}
	return out
}

// idMaps is the writing of a worker's id maps, begun on its own goroutine
// as soon as the worker's pid is known and waited for only by the step
// that needs the maps ("write id maps"). A root-less full range execs
// newuidmap and newgidmap (set-uid helpers of ~2 ms of CPU each on a
// 2-CPU VM); begun when a prestarted worker starts, they run while the
// caller still resolves its policy instead of after it. A worker made in
// the identity holder's namespace has its maps written by its stage
// instead (namespaces.SpawnInHolder), without either helper.
type idMaps struct {
	chosen chan struct{} // closed once id is set
	id     *namespaces.Identity
	done   chan struct{} // closed once the write is over; err is its outcome
	err    error
	// staged: a stage writes them; unsuitable: the holder it joined does
	// not map id (nothing was written: the worker is not to be used).
	staged, unsuitable bool
}

// startMaps begins writing the maps of pid, a just-started worker, with
// id; with id nil (a prestarted worker, its policy not known yet), with
// the identity a policy gets unless it asks for the single-id map. Root
// then writes nothing here: its choice depends on the policy's binds
// (AllowSingleID) and its maps are two writes, nothing to hide. A failed
// choice writes nothing either; Start makes it again and reports it.
// With st, the worker's stage writes them. With newHolder, once the maps
// are written through newuidmap, an identity holder is started for the
// starts to come (holderIdle). It returns nil when nothing is to be
// written.
func startMaps(pid int, id *namespaces.Identity, st *namespaces.Stage, newHolder bool) *idMaps {
	if id == nil && os.Geteuid() == 0 && st == nil {
		return nil
	}
	m := &idMaps{chosen: make(chan struct{}), done: make(chan struct{}), staged: st != nil}
	go func() {
		defer close(m.done)
		if id == nil {
			var err error
			if id, err = chooseIdentity(false); err != nil {
				if st != nil {
					st.Close()
				}
				close(m.chosen)
				return
			}
		}
		m.id = id
		close(m.chosen)
		if st != nil {
			m.err = st.WriteMaps(id)
			m.unsuitable = errors.Is(m.err, namespaces.ErrHolderUnsuitable)
			return
		}
		m.err = namespaces.WriteMaps(pid, id)
		if m.err == nil && newHolder && id.Helper {
			// For the next starts; this one goes on without waiting.
			// A holder that cannot start leaves them as this one was.
			go func() {
				if h, err := namespaces.StartHolder(id, holderIdle()); err == nil {
					h.Close()
				}
			}()
		}
	}()
	return m
}

// EnvIDHolder set to "off" keeps nsbox from starting or using an identity
// holder; EnvIDHolderIdle is its idle time in seconds (DefaultHolderIdle;
// at most a day).
const (
	EnvIDHolder       = "NSBOX_IDHOLDER"
	EnvIDHolderIdle   = "NSBOX_IDHOLDER_IDLE"
	DefaultHolderIdle = 2 * time.Minute
)

// holderIdle is how long a holder this process starts waits for a start.
func holderIdle() time.Duration {
	if v, err := strconv.Atoi(os.Getenv(EnvIDHolderIdle)); err == nil && v > 0 {
		return time.Duration(min(v, 86400)) * time.Second // at most a day
	}
	return DefaultHolderIdle
}

// holderFor returns the running identity holder in which a worker with id
// (nil: the identity a prestarted worker gets) may be made, and whether a
// holder should be started after this start because none suits. Only a
// root-less full range has one: root writes any map itself, and the
// single-id map is one write without helpers.
//
// It also returns the identity it decided on (id, or the prestarted
// worker's default it chose; nil when it chose none), for startMaps to
// take instead of choosing again: the choice reads the sub-id files and
// the user database, on every start's path.
func holderFor(id *namespaces.Identity) (h *namespaces.Holder, start bool, chosen *namespaces.Identity) {
	if os.Geteuid() == 0 || os.Getenv(EnvIDHolder) == "off" {
		return nil, false, id
	}
	if id == nil {
		var err error
		if id, err = chooseIdentity(false); err != nil {
			return nil, false, nil
		}
	}
	if !id.Helper {
		return nil, false, id
	}
	h = namespaces.ConnectHolder()
	if h != nil && h.Suits(id) != nil {
		h.Close()
		h = nil
	}
	return h, h == nil, id
}

// identity is the identity the maps are written with, once chosen; nil
// when none is written.
func (m *idMaps) identity() *namespaces.Identity {
	if m == nil {
		return nil
	}
	<-m.chosen
	return m.id
}

// wait returns the outcome of the write once it is over (nil when there
// is none), any number of times.
func (m *idMaps) wait() error {
	if m == nil {
		return nil
	}
	<-m.done
	return m.err
}

// suits says whether a worker with these maps may serve a policy: the
// kernel takes a user namespace's maps once, so a worker given the full
// range ahead of its policy cannot serve one that asks for the single-id
// map; nor can one made in a holder that does not map its identity.
func (m *idMaps) suits(singleID bool) bool {
	id := m.identity()
	if m != nil && m.staged {
		if singleID {
			return false // made for the full range's holder
		}
		// Only a full range written by the helpers has a holder. A
		// staged worker of any other identity was made in a namespace
		// that whatever answered on the holder's socket handed out: a
		// sandbox with that directory writable can answer with its own
		// user namespace, whose processes would then own the next
		// sandbox's (review 69).
		if id == nil || !id.Helper {
			return false
		}
		if m.wait(); m.unsuitable {
			return false
		}
	}
	return !singleID || id == nil || id.Mode == namespaces.ModeSingle
}

// HolderStatus is the state of the caller's identity holder, for status.
type HolderStatus struct {
	// State: "unused" (root, or no full range: no holder is needed),
	// "off" (EnvIDHolder), "none" (the next start makes one), "running",
	// "unsuitable" (it maps other ids: the next start replaces it), or
	// "blocked" (its directory is not the caller's alone: Why).
	State string
	Pid   int
	Path  string
	Idle  time.Duration // what a holder started now waits
	Why   string        // for "unsuitable" and "blocked"
}

// IdentityHolder says whether starts here use an identity holder.
func IdentityHolder() HolderStatus {
	st := HolderStatus{State: "unused", Idle: holderIdle()}
	st.Path, _ = namespaces.HolderPath()
	id, err := chooseIdentity(false)
	if os.Geteuid() == 0 || err != nil || !id.Helper {
		return st
	}
	if os.Getenv(EnvIDHolder) == "off" {
		st.State = "off"
		return st
	}
	h := namespaces.ConnectHolder()
	if h == nil {
		st.State = "none"
		if err := namespaces.HolderDirProblem(); err != nil {
			st.State, st.Why = "blocked", err.Error()
		}
		return st
	}
	defer h.Close()
	st.Pid = h.Pid
	st.State = "running"
	if err := h.Suits(id); err != nil {
		st.State, st.Why = "unsuitable", err.Error()
	}
	return st
}
