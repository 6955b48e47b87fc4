package notify

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// GateConfig describes what the unix socket gate lets through.
type GateConfig struct {
	// RootPid is a process whose root directory is the sandbox's root
	// (the worker, PID 1 inside), read once by NewUnixGate.
	RootPid int
	// Writable lists the sandbox's own writable places, as paths inside
	// the sandbox (the workspace, --rw binds, /tmp, /run...). A path
	// socket is let through when it lies on the very mount one of them
	// names: its mount id is compared, not its path.
	Writable []string
	// Allow lists socket paths inside the sandbox let through wherever
	// they are (--allow-socket): looked up once, by NewUnixGate, before
	// any command runs; a connect is let through to the very sockets
	// found then, which the gate holds open until Close (so their inode
	// numbers are not reused). A server restarted during the session makes
	// a new inode, which is refused: start a new session. A path that
	// goes through a symlink on a writable place's mount is an error
	// (ErrAllowedThroughLink).
	Allow []string
	// OnRefuse is called, on a Server goroutine holding the supervisor's
	// own ids (never a target's: SockCall.ownIDs), with the path (inside
	// the sandbox) of each refused connect or send.
	OnRefuse func(path string)
	// RootMayChange says that a process inside may change its root
	// directory or mount namespace (chroot, pivot_root, setns or
	// unshare(CLONE_NEWNS) allowed by its seccomp profile and
	// capabilities): the gate then checks the root of each caller at
	// every call. No shipped profile allows that (pkg/seccomp's
	// dangerous set), and the check costs every connect a statx of a
	// /proc link (~10 µs here).
	RootMayChange bool
}

// UnixGate is the Handler for AF_UNIX sockets: it refuses connects and
// sends to path sockets outside the sandbox's own writable places, and
// performs the others through an O_PATH pin of the inode it checked.
type UnixGate struct {
	writable map[uint64]bool
	mntMask  int
	// allow holds the sockets GateConfig.Allow named when the gate
	// started: never their paths, which the sandbox may change (below).
	allow map[fileID]bool
	// pins are O_PATH fds of the allowed sockets, held for the gate's
	// life: a socket file removed while its inode is held keeps its
	// number, which the filesystem would otherwise give the next file it
	// makes (another host socket, in another directory: found by review).
	pins     []int
	onRefuse func(string)
	// rootMayChange: GateConfig.RootMayChange.
	rootMayChange bool
	// skipDAC: the sandbox holds one id, the supervisor's own, and the
	// supervisor is not root: a target has the supervisor's rights on
	// every file, so the supervisor's connect is the target's.
	skipDAC bool
	// onlyUID is the one host uid the sandbox maps (-1: several): every
	// process inside has it.
	onlyUID int64
	// uids and gids are the host ids the sandbox's maps name.
	uids, gids []hostRange
	// userns is the sandbox's user namespace (its nsfs inode; zero when
	// it could not be read, which matches no thread's).
	userns fileID
	// open: no mount policy (a Server without a unix handler,
	// Server.ungatedGate): every path the target may reach is let
	// through, but still resolved in its root, as the target, and
	// connected through a pin.
	open bool
	// sup are this process's own file-system ids and groups (lookup: a
	// supervisor that does not switch ids resolves with them).
	sup supIDs
}

// supIDs are the supervisor's file-system uid and gid and its groups.
type supIDs struct {
	uid, gid uint32
	groups   []uint32
}

func readSupIDs() supIDs {
	// The file-system ids follow the effective ones (setfsuid(2) is never
	// called here).
	s := supIDs{uid: uint32(unix.Geteuid()), gid: uint32(unix.Getegid())}
	if gs, err := unix.Getgroups(); err == nil {
		for _, g := range gs {
			s.groups = append(s.groups, uint32(g))
		}
	}
	return s
}

// mntIDMask is STATX_MNT_ID_UNIQUE (6.8: never reused) where the kernel
// has it, else STATX_MNT_ID. Mount ids are global; a sandbox cannot make
// a mount with the id of one of its writable places (it cannot mount at
// all, and a nested mount namespace copies its mounts with new ids, where
// the gate then refuses: it fails closed).
func mntIDMask(fd int) int {
	var st unix.Statx_t
	if unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID_UNIQUE, &st) == nil && st.Mask&unix.STATX_MNT_ID_UNIQUE != 0 {
		return unix.STATX_MNT_ID_UNIQUE
	}
	return unix.STATX_MNT_ID
}

// NewUnixGate records the mount ids of the writable places in the
// sandbox's root.
func NewUnixGate(cfg GateConfig) (*UnixGate, error) {
	root, err := unix.Open("/proc/"+strconv.Itoa(cfg.RootPid)+"/root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(root)
	g := &UnixGate{writable: map[uint64]bool{}, mntMask: mntIDMask(root), allow: map[fileID]bool{}, onRefuse: cfg.OnRefuse, rootMayChange: cfg.RootMayChange, onlyUID: -1, sup: readSupIDs()}
	dir, err := unix.Open("/proc/"+strconv.Itoa(cfg.RootPid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	g.readIDMap(dir)
	unix.Close(dir)
	for _, p := range cfg.Writable {
		fd, err := openInRoot(root, p)
		if err != nil {
			continue // not in this sandbox (an optional bind): nothing to allow
		}
		var st unix.Statx_t
		err = unix.Statx(fd, "", unix.AT_EMPTY_PATH, g.mntMask, &st)
		unix.Close(fd)
		if err == nil && st.Mask&uint32(g.mntMask) != 0 {
			g.writable[st.Mnt_id] = true
		}
	}
	// The allowed sockets are pinned here, before this sandbox has run
	// anything, and never looked up by path again: a path looked up at
	// each connect was the sandbox's to change. The directories above a
	// host socket bound into the private /tmp or /run are the sandbox's
	// tmpfs: it renamed them and put a symlink to another host socket
	// (visible read-only) at the allowed path, and the gate let that one
	// through (found by review). "Before it has run anything" is not
	// enough for the writable places bound from the host: an earlier run
	// in the same workspace may have left a symlink there (ws/dev.sock ->
	// a host socket), so pinAllowed refuses a path through one.
	for _, p := range cfg.Allow {
		fd, err := g.pinAllowed(root, p)
		if errors.Is(err, ErrAllowedThroughLink) {
			g.Close()
			return nil, err
		}
		if err != nil {
			continue // not there at the start: nothing to let through
		}
		var st unix.Statx_t
		err = unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_TYPE|unix.STATX_INO, &st)
		if err == nil && st.Mode&unix.S_IFMT == unix.S_IFSOCK {
			g.allow[idOf(&st)] = true
			g.pins = append(g.pins, fd)
			continue
		}
		unix.Close(fd)
	}
	return g, nil
}

// Close drops the pins of the allowed sockets.
func (g *UnixGate) Close() {
	for _, fd := range g.pins {
		unix.Close(fd)
	}
	g.pins = nil
}

// ErrAllowedThroughLink is wrapped when an allowed socket's path goes
// through a symlink on one of the sandbox's writable places.
var ErrAllowedThroughLink = errors.New("the path goes through a symlink in a writable place, which a sandbox may have written")

// pinAllowed opens p beneath root as openInRoot does, one component at a
// time so that it sees each symlink on the way (walkInRoot), and refuses
// (with ErrAllowedThroughLink) a path that goes through one on a writable
// place's mount: such a link may be a sandbox's work, left by an earlier
// run in the same workspace, and would point the allow entry at any host
// socket the sandbox can see (found by review).
func (g *UnixGate) pinAllowed(root int, p string) (int, error) {
	return walkInRoot(root, p, g.mntMask, nil, func(st *unix.Statx_t, walked string) error {
		if g.writable[st.Mnt_id] {
			return fmt.Errorf("allowed socket %s: %w (%s); allow the socket by its own path", p, ErrAllowedThroughLink, walked)
		}
		return nil
	})
}

// walkInRoot opens p beneath root as openInRoot does (".." never above
// root, an absolute symlink's text from root, the final component
// followed as connect(2) follows it, at most 40 links), one component at
// a time, so that the caller sees each step: search (if set) with each
// directory a name is looked up in, before the lookup (path_resolution(7):
// every component, "." and ".." too, needs search permission on the
// directory it is looked up in), and link (if set) with each symlink
// about to be followed (its statx, with mntMask). Either stops the walk
// with its error. The kernel's own resolution (openInRoot: no magic link
// followed) must then reach the same inode, or the walk fails (ENOENT: a
// rename raced it; ELOOP: a magic link, which the walk would have taken
// for a plain symlink). The result is an O_PATH pin of the inode.
func walkInRoot(root int, p string, mntMask int, search func(dir int) error, link func(st *unix.Statx_t, walked string) error) (int, error) {
	stack := []int{root} // the directories walked; root is the caller's
	defer func() {
		for _, fd := range stack[1:] {
			unix.Close(fd)
		}
	}()
	parts := strings.Split(p, "/")
	walked, links := "", 0
	for len(parts) > 0 {
		c := parts[0]
		parts = parts[1:]
		if c == "" {
			continue
		}
		cur := stack[len(stack)-1]
		if search != nil {
			if err := search(cur); err != nil {
				return -1, err
			}
		}
		switch c {
		case ".":
			continue
		case "..":
			if len(stack) > 1 { // never above root, as RESOLVE_IN_ROOT
				unix.Close(stack[len(stack)-1])
				stack = stack[:len(stack)-1]
			}
			continue
		}
		walked += "/" + c
		var st unix.Statx_t
		if err := unix.Statx(cur, c, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_TYPE|mntMask, &st); err != nil {
			return -1, err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			if link != nil {
				if err := link(&st, walked); err != nil {
					return -1, err
				}
			}
			if links++; links > 40 {
				return -1, unix.ELOOP
			}
			t, err := readlinkat(cur, c)
			if err != nil {
				return -1, err
			}
			if strings.HasPrefix(t, "/") {
				for _, fd := range stack[1:] {
					unix.Close(fd)
				}
				stack = stack[:1]
			}
			parts = append(strings.Split(t, "/"), parts...)
			continue
		}
		fd, err := unix.Openat(cur, c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, err
		}
		stack = append(stack, fd)
	}
	if len(stack) == 1 {
		return -1, unix.EISDIR // p names the root itself
	}
	fd := stack[len(stack)-1]
	stack = stack[:len(stack)-1]
	kfd, err := openInRoot(root, p)
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	defer unix.Close(kfd)
	var a, b unix.Statx_t
	if unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_INO, &a) != nil || unix.Statx(kfd, "", unix.AT_EMPTY_PATH, unix.STATX_INO, &b) != nil || idOf(&a) != idOf(&b) {
		unix.Close(fd)
		return -1, unix.ENOENT // the two resolutions differ: a rename raced, or a magic link
	}
	return fd, nil
}

// fileID names an inode: its device and number.
type fileID struct {
	major, minor uint32
	ino          uint64
}

func idOf(st *unix.Statx_t) fileID {
	return fileID{st.Dev_major, st.Dev_minor, st.Ino}
}

// Mechanism names what enforces the gate, for `nsbox status`.
func (g *UnixGate) Mechanism() string { return "seccomp user notification" }

// openInRoot opens p (absolute, inside the sandbox) beneath root as the
// sandbox's kernel would resolve it: ".." and absolute symlinks stay in
// root (RESOLVE_IN_ROOT), and no /proc magic link is followed
// (RESOLVE_NO_MAGICLINKS: /proc/self/fd/N inside names a file the
// sandbox holds, which this supervisor must not be led to). The final
// component is followed when it is a symlink, as connect(2) does; the
// result is an O_PATH pin of the inode.
func openInRoot(root int, p string) (int, error) {
	for {
		fd, err := unix.Openat2(root, p, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
		})
		if err == unix.EAGAIN || err == unix.EINTR {
			continue // a rename raced the lookup (openat2(2) EAGAIN)
		}
		return fd, err
	}
}

// Decide implements Handler.
func (g *UnixGate) Decide(ctx context.Context, c *SockCall) Verdict {
	a := c.Addr
	if len(a) > 2 && c.Family() == unix.AF_UNIX && a[2] == 0 {
		return g.decideAbstract(c, a[2:])
	}
	if len(a) <= 2 || c.Family() != unix.AF_UNIX {
		// No address (a send to the connected peer: the peer was
		// checked at connect), AF_UNSPEC or an unnamed address:
		// performed as asked, with the supervisor's copy.
		return Allow()
	}
	p, _ := unixPath(a)
	return g.decidePath(c, p)
}

// decideAbstract: an abstract name is looked up in the socket's own
// network namespace (net/unix: sock_net). In the sandbox's own namespace
// every listener is the sandbox's, and the call is performed as asked.
// Under --net host that namespace is the host's, whose abstract sockets
// (X11's @/tmp/.X11-unix, D-Bus, containerd shims: CVE-2020-15257) would
// answer, and would see the supervisor, not the sandbox, as the peer; the
// Landlock scope that refuses them to commands (LANDLOCK_SCOPE_ABSTRACT_
// UNIX_SOCKET) does not bind the supervisor that performs the call. So
// there they are refused (EPERM, as the scope answers), the sandbox's own
// abstract sockets included. An error telling the namespace fails closed.
func (g *UnixGate) decideAbstract(c *SockCall, name []byte) Verdict {
	host, err := OnSupervisorNetns(c.Sock)
	if err == nil && !host {
		return Allow()
	}
	if g.onRefuse != nil && c.ownIDs() {
		g.onRefuse("@" + strings.TrimRight(string(name[1:]), "\x00"))
	}
	return Deny(unix.EPERM)
}

func (g *UnixGate) refuse(c *SockCall, p string) Verdict {
	if g.onRefuse != nil && c.ownIDs() {
		g.onRefuse(p)
	}
	return Deny(unix.EACCES)
}

func (g *UnixGate) decidePath(c *SockCall, p string) Verdict {
	if c.proc == nil || c.srv == nil {
		return Deny(unix.ESRCH)
	}
	// From here on, as the target: a root supervisor's serving thread
	// holds the target's host ids with CAP_SYS_PTRACE alone (holdTarget,
	// stickyCaps), so that the lookup below is checked by the kernel for
	// the target's own ids (found by review: made with root's rights, it
	// let a target through directories it may not search).
	if e := c.holdTarget(); e != 0 {
		return Deny(e)
	}
	// The target thread's own root, kept from its first gated call
	// (Server.rootFD says why that is the root it has, and why a root
	// changed since cannot widen what is reached). Opened through the
	// thread's own /proc/TID (c.proc.dir): the root of the target, or
	// nothing once it is gone, never the root of a process that took
	// its id; so no ID_VALID check is needed here.
	root, err := c.srv.rootFD(c.proc, g.rootMayChange)
	if err != nil {
		return Deny(unix.ESRCH)
	}
	if !strings.HasPrefix(p, "/") {
		// A relative path starts at the target thread's working
		// directory. The link's text is the directory's path in the
		// target's own mount namespace; whatever it says, it is resolved
		// below inside the target's root, and the inode found there is
		// the one checked and the one connected: a lying text can only
		// make the connect miss, never leave the root.
		cwd, err := readlinkat(c.proc.dir, "cwd")
		if err != nil || !strings.HasPrefix(cwd, "/") {
			return g.refuse(c, p)
		}
		p = strings.TrimSuffix(cwd, "/") + "/" + p
	}
	pin, err := g.lookup(c, root, p)
	if err != nil {
		return Deny(errnoOf(err))
	}
	keep := false
	defer func() {
		if !keep {
			unix.Close(pin)
		}
	}()
	var st unix.Statx_t
	if err := unix.Statx(pin, "", unix.AT_EMPTY_PATH, unix.STATX_TYPE|unix.STATX_MODE|unix.STATX_INO|unix.STATX_UID|unix.STATX_GID|g.mntMask, &st); err != nil {
		return Deny(errnoOf(err))
	}
	// The decision is on the inode pinned, by the mount it lies on: a
	// socket on the mount of a writable place was made by the sandbox (or
	// lies in a directory the user gave it to write); every other mount
	// is the host's, read-only, where a socket is a host service.
	ok := g.open || st.Mask&uint32(g.mntMask) != 0 && g.writable[st.Mnt_id]
	if !ok {
		ok = g.allowed(&st)
	}
	if !ok {
		return g.refuse(c, p)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return Deny(unix.ECONNREFUSED) // what connect(2) says for a non-socket
	}
	if !g.writableBy(c, &st) {
		// The supervisor may write where the target may not (a root
		// supervisor, or the owner of a socket a sandbox user may not
		// use): the target's own permission is checked here, so the
		// supervisor is never a confused deputy.
		return Deny(unix.EACCES)
	}
	// Connect through the pin: the kernel follows /proc/PID/fd/N to the
	// inode checked above, so no rename or symlink swap in the sandbox
	// between the check and the connect can change what is reached.
	// "/proc/PID/fd/" plus two ints is far below sun_path's 108 bytes.
	addr := make([]byte, 2, 2+40)
	addr[0], addr[1] = byte(unix.AF_UNIX), byte(unix.AF_UNIX>>8)
	addr = append(addr, selfFDDir()...)
	addr = strconv.AppendInt(addr, int64(pin), 10)
	addr = append(addr, 0)
	keep = true
	c.pinned, c.pin = true, pin
	return PerformAt(addr, pin)
}

// lookup opens p beneath root (the target's root) as the target's own
// connect(2) would resolve it: search permission on every directory of
// the path is the target's (path_resolution(7)). The supervisor's rights
// never stand in for the target's: a root supervisor could search any
// directory, a root-less one those of the ids it owns (found by review:
// a process of the sandbox reached a socket of mode 0777 in a 0700
// directory of another of its users, which its own connect fails with
// EACCES).
//
//   - A root supervisor (Options.AsTarget) resolves on its thread that
//     holds the target's host ids with CAP_SYS_PTRACE alone
//     (holdTarget): the kernel checks each directory for those ids,
//     ACLs and security modules included. A target that holds
//     CAP_DAC_READ_SEARCH or CAP_DAC_OVERRIDE in the sandbox's user
//     namespace may also search the directories whose owner and group
//     that namespace maps (capabilities(7), capable_wrt_inode_uidgid):
//     only after the kernel refused, and only then, the path is walked
//     again one directory at a time (walkInRoot) with
//     CAP_DAC_READ_SEARCH, each directory passed either by that rule or
//     by the kernel's check of the target's ids (faccessat2 AT_EACCESS on
//     the thread without that capability).
//   - A supervisor that does not switch ids (root-less) resolves with its
//     own rights when they are no more than the target's (a one-id
//     sandbox, or a target with the supervisor's uid, gid and groups);
//     otherwise it walks the path and checks each directory's mode bits
//     for the target's file-system ids and groups itself (searchByMode).
//
// A magic link is never followed (openInRoot): the kernel would follow
// one only for a target that passes a ptrace access check (proc(5)),
// which the supervisor cannot make as the target, so the answer is the
// one the kernel gives a target that fails it: EACCES (a symlink loop is
// answered EACCES too).
func (g *UnixGate) lookup(c *SockCall, root int, p string) (int, error) {
	pin, err := g.lookupAs(c, root, p)
	if err == unix.ELOOP {
		err = unix.EACCES
	}
	return pin, err
}

func (g *UnixGate) lookupAs(c *SockCall, root int, p string) (int, error) {
	if g.skipDAC {
		// One id, the supervisor's own (root-less): its rights are the
		// target's.
		return openInRoot(root, p)
	}
	cr, err := c.creds()
	if err != nil {
		return -1, unix.EACCES // fail closed: whose lookup it is is unknown
	}
	// The target's own capabilities count in the sandbox's user
	// namespace only, on inodes it maps (as in writableByStatus).
	capable := func() bool {
		return cr.capEff&(1<<unix.CAP_DAC_READ_SEARCH|1<<unix.CAP_DAC_OVERRIDE) != 0 && g.inSandboxUserns(c)
	}
	if c.srv != nil && c.srv.o.AsTarget {
		th := c.th
		if th == nil || !th.held {
			return -1, unix.EACCES // fail closed: holdTarget did not run
		}
		// The kernel's own check, for the target's ids, with no
		// capability that passes a search bit (path_resolution(7)).
		pin, err := openInRoot(root, p)
		if err != unix.EACCES || !capable() {
			return pin, err
		}
		// Walked with CAP_DAC_READ_SEARCH, each directory checked for the
		// target by searchAsTarget; stickyCaps again after.
		if !th.setEff(stickyCaps | 1<<unix.CAP_DAC_READ_SEARCH) {
			c.tainted = !th.release()
			return -1, unix.EACCES
		}
		pin, err = walkInRoot(root, p, 0, g.searchAsTarget(c, th), nil)
		if !th.setEff(stickyCaps) {
			if pin >= 0 {
				unix.Close(pin)
			}
			c.tainted = !th.release()
			return -1, unix.EACCES
		}
		return pin, err
	}
	sup := &g.sup
	if cr.uid[3] == sup.uid && cr.gid[3] == sup.gid && subset(sup.groups, cr.groups) {
		// The supervisor's rights are no more than the target's.
		return openInRoot(root, p)
	}
	return walkInRoot(root, p, 0, g.searchByMode(cr, capable()), nil)
}

// subset says whether every id of a is in b.
func subset(a, b []uint32) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// searchAsTarget checks a directory's search permission for a capable
// target (lookup): passed by its capability when the sandbox's user
// namespace maps the directory's owner and group (capable_wrt_inode_uidgid:
// the target holds CAP_DAC_READ_SEARCH or CAP_DAC_OVERRIDE there), else by
// the kernel, for the target's ids, on this thread, with stickyCaps only
// for the check (faccessat2(2) AT_EACCESS: the thread's file-system ids,
// groups and effective capabilities, which override no mode then).
func (g *UnixGate) searchAsTarget(c *SockCall, th *servingThread) func(dir int) error {
	return func(dir int) error {
		var st unix.Statx_t
		if err := unix.Statx(dir, "", unix.AT_EMPTY_PATH, unix.STATX_UID|unix.STATX_GID, &st); err != nil {
			return err
		}
		if mapped(g.uids, st.Uid) && mapped(g.gids, st.Gid) {
			return nil
		}
		if !th.setEff(stickyCaps) {
			c.tainted = !th.release()
			return unix.EACCES
		}
		err := unix.Faccessat2(dir, "", unix.X_OK, unix.AT_EMPTY_PATH|unix.AT_EACCESS)
		if !th.setEff(stickyCaps | 1<<unix.CAP_DAC_READ_SEARCH) {
			c.tainted = !th.release()
			return unix.EACCES
		}
		return err
	}
}

// searchByMode checks a directory's search permission for the target's
// credentials cr from its mode bits (lookup, a supervisor that cannot
// take the target's ids): the owner's x bit for the owner, the group's
// for a member, the others' for the rest (acl_permission_check), or the
// target's capability on a directory whose owner and group the sandbox's
// namespace maps. A directory with a POSIX ACL is refused unless the
// target owns it: the ACL's entries, not the bits, decide for the others,
// and this check does not read them (it fails closed).
func (g *UnixGate) searchByMode(cr *procStatus, capable bool) func(dir int) error {
	return func(dir int) error {
		var st unix.Statx_t
		if err := unix.Statx(dir, "", unix.AT_EMPTY_PATH, unix.STATX_MODE|unix.STATX_UID|unix.STATX_GID, &st); err != nil {
			return err
		}
		if capable && mapped(g.uids, st.Uid) && mapped(g.gids, st.Gid) {
			return nil
		}
		if cr.uid[3] == st.Uid {
			if st.Mode&0o100 != 0 {
				return nil
			}
			return unix.EACCES
		}
		if hasACL(dir) {
			return unix.EACCES
		}
		bit := uint16(0o001)
		if cr.gid[3] == st.Gid || slices.Contains(cr.groups, st.Gid) {
			bit = 0o010
		}
		if st.Mode&bit != 0 {
			return nil
		}
		return unix.EACCES
	}
}

// hasACL says whether the directory dir (an O_PATH descriptor) may carry
// a POSIX access ACL: true unless the filesystem says it has none
// (ENODATA) or does not support them (EOPNOTSUPP).
func hasACL(dir int) bool {
	_, err := unix.Getxattr(selfFDDir()+strconv.Itoa(dir), "system.posix_acl_access", nil)
	return err != unix.ENODATA && err != unix.EOPNOTSUPP
}

// readlinkat reads the symbolic link name beneath dir.
func readlinkat(dir int, name string) (string, error) {
	for n := 256; ; n *= 2 {
		b := make([]byte, n)
		k, err := unix.Readlinkat(dir, name, b)
		if err != nil {
			return "", err
		}
		if k < n {
			return string(b[:k]), nil
		}
		if n >= 1<<16 {
			return "", unix.ENAMETOOLONG
		}
	}
}

// selfFDDir is "/proc/PID/fd/" of this process where /proc shows it under
// its own id, else "/proc/self/fd/". The kernel then follows no "self"
// link at each connect (~0.7 µs of the path walk). /proc/self names this
// process in the /proc mounted here; when its text is this process's own
// id, /proc/ID is this process in that same /proc, whatever namespaces
// the supervisor runs in.
var selfFDDir = sync.OnceValue(func() string {
	pid := strconv.Itoa(os.Getpid())
	if link, err := os.Readlink("/proc/self"); err == nil && link == pid {
		return "/proc/" + pid + "/fd/"
	}
	return "/proc/self/fd/"
})

// allowed says whether st is one of the sockets the policy lets through.
func (g *UnixGate) allowed(st *unix.Statx_t) bool { return g.allow[idOf(st)] }
