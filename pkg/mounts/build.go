package mounts

import (
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	pathrs "github.com/cyphar/filepath-securejoin/pathrs-lite"
	"golang.org/x/sys/unix"
)

// skipHost are top-level host entries the sandbox gets fresh instead.
var skipHost = map[string]bool{"proc": true, "dev": true, "tmp": true, "run": true}

// devices are bound from the host's /dev into the minimal /dev.
var devices = []string{"null", "zero", "full", "random", "urandom", "tty"}

// stagingDir is where the new root tmpfs is attached before pivot_root. It is
// only ever a mount point in the sandbox's private mount namespace.
const stagingDir = "/tmp"

// hostEntry is a top-level entry of the host root, cloned before the new root
// exists.
type hostEntry struct {
	name    string
	tree    int // detached clone (dirs and files), -1 for symlinks
	isDir   bool
	symlink string // target, for symlinks
}

type builder struct {
	plan    *Plan
	selfFD  int
	host    []hostEntry
	sources map[int]int // plan.Mounts index -> detached clone fd
	devs    map[string]int
	root    *os.File // the new root tmpfs
	// owner serves asOwner (nil until first used).
	owner   chan ownerCall
	onOwner bool // fn of an ownerCall is running
	// shown are the plan's binds and tmpfs mounts, in plan order, each
	// with an O_PATH fd of its root as attached: plan hides are resolved
	// below the mount that shows them (see hide).
	shown []shownMount
	// placeholders are O_PATH fds of the placeholders makePlaceholders
	// made, by destination, until protect mounts over them;
	// notCreatable are the missing destinations it could not make.
	placeholders map[string]int
	notCreatable map[string]bool
	// emptyProtected: protected or hidden paths that were there, empty
	// files (gitExclude names them as it names placeholders).
	emptyProtected []string
}

// shownMount is a mount of the plan attached at dest; fd names its root.
type shownMount struct {
	dest string
	fd   int
}

// Build carries out the plan in the current mount namespace, which must be a
// new, unshared one, with CAP_SYS_ADMIN in its owning user namespace, and
// pivots into the new root. selfFD (or -1) is an O_PATH fd of the running
// binary for Plan.SelfDest. On return the process's root and cwd are the
// sandbox root, and no fd refers to the host's tree.
func Build(p *Plan, selfFD int) (err error) {
	defer func() {
		// Premade mounts not taken (an earlier step failed) are closed
		// too: no fd naming a host tree outlives Build.
		for i, fd := range p.Premade {
			unix.Close(fd)
			delete(p.Premade, i)
		}
	}()
	if err := p.Validate(); err != nil {
		return &Error{Step: "validate mount plan", Err: err}
	}
	b := &builder{plan: p, selfFD: selfFD, sources: map[int]int{}, devs: map[string]int{}}
	defer b.closeAll()
	steps := []struct {
		name string
		fn   func() error
	}{
		// Private first: nothing we mount may propagate back to the host's
		// mount namespace (mount_namespaces(7), "Shared subtrees").
		{"make mounts private", b.makePrivate},
		// Every host path is opened (cloned) before the staging tmpfs hides
		// anything, so a source under /tmp still means the host's /tmp.
		{"clone host root", b.cloneHost},
		{"clone mount sources", b.cloneSources},
		{"mount new root", b.mountRoot},
		{"attach host root", b.attachHost},
		{"mount /proc", b.mountProc},
		{"mount /dev", b.mountDev},
		{"mount /tmp", b.mountTmp},
		{"mount /run", b.mountRun},
		{"user mounts", b.userMounts},
		// After the placeholders exist (user mounts made them).
		{"hide placeholders from git", b.gitExclude},
		{"pivot_root", b.pivot},
		// Sealed last: until here the root tmpfs must accept mount points.
		{"seal root read-only", b.seal},
	}
	run := func(i int) error {
		if err := steps[i].fn(); err != nil {
			var me *Error
			if errors.As(err, &me) {
				return err
			}
			return &Error{Step: steps[i].name, Err: err}
		}
		return nil
	}
	for i := 0; i < len(steps); {
		if steps[i].name == "user mounts" {
			// User mounts choose per entry (hides and protected
			// paths are resolved as the worker's own ids).
			if err := run(i); err != nil {
				return err
			}
			i++
			continue
		}
		// The other steps create the new root as the sandbox's owner
		// (see asOwner): each run of them in one call on the owner
		// thread, not a hand-off per step.
		j := i
		for j < len(steps) && steps[j].name != "user mounts" {
			j++
		}
		if err := b.asOwner(func() error {
			for k := i; k < j; k++ {
				if err := run(k); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			var me *Error
			if errors.As(err, &me) {
				return err
			}
			// The owner thread itself could not start.
			return &Error{Step: steps[i].name, Err: err}
		}
		i = j
	}
	return nil
}

func (b *builder) closeAll() {
	if b.owner != nil {
		close(b.owner)
	}
	for _, fd := range b.placeholders {
		unix.Close(fd)
	}
	for _, e := range b.host {
		if e.tree >= 0 {
			unix.Close(e.tree)
		}
	}
	for _, fd := range b.sources {
		unix.Close(fd)
	}
	for _, fd := range b.devs {
		unix.Close(fd)
	}
	for _, m := range b.shown {
		unix.Close(m.fd)
	}
	if b.root != nil {
		b.root.Close()
	}
}

func (b *builder) makePrivate() error {
	return unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "")
}

// cloneTree returns a detached copy of the mount tree at path (host view).
func cloneTree(dirfd int, p string, recursive bool) (int, error) {
	flags := uint(unix.OPEN_TREE_CLONE | unix.OPEN_TREE_CLOEXEC)
	if recursive {
		flags |= unix.AT_RECURSIVE
	}
	if p == "" {
		flags |= unix.AT_EMPTY_PATH
	}
	return unix.OpenTree(dirfd, p, flags)
}

func setAttr(fd int, set uint64, recursive bool) error {
	flags := uint(unix.AT_EMPTY_PATH)
	if recursive {
		flags |= unix.AT_RECURSIVE
	}
	return unix.MountSetattr(fd, "", flags, &unix.MountAttr{Attr_set: set})
}

const roAttrs = unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV

func (b *builder) cloneHost() error {
	names := b.plan.HostDirs
	if names == nil {
		ents, err := os.ReadDir("/")
		if err != nil {
			return err
		}
		for _, e := range ents {
			if !skipHost[e.Name()] {
				names = append(names, "/"+e.Name())
			}
		}
	}
	// Parents first: a nested entry ("/etc/ssl") is attached after the
	// entry that holds it, never buried under it; sorted paths put every
	// ancestor before its descendants.
	names = append([]string(nil), names...)
	for i := range names {
		names[i] = path.Clean(names[i])
	}
	sort.Strings(names)
	var dirs []string
	for _, n := range names {
		// Inside a directory entry already: its recursive clone shows
		// this entry as the host has it (a symlink, a submount) too.
		if slices.ContainsFunc(dirs, func(d string) bool { return within(n, d) }) {
			continue
		}
		var st unix.Stat_t
		if err := unix.Lstat(n, &st); err != nil {
			if errors.Is(err, unix.ENOENT) && b.plan.HostDirs != nil {
				continue
			}
			return &Error{Step: "clone host root", Dest: n, Err: err}
		}
		e := hostEntry{name: n, tree: -1}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			t, err := os.Readlink(n)
			if err != nil {
				return &Error{Step: "read host symlink", Dest: n, Err: err}
			}
			e.symlink = t
		case unix.S_IFDIR, unix.S_IFREG:
			fd, err := cloneTree(unix.AT_FDCWD, n, true)
			if err != nil {
				return &Error{Step: "clone host root", Dest: n, Err: err}
			}
			e.tree, e.isDir = fd, st.Mode&unix.S_IFMT == unix.S_IFDIR
			if e.isDir {
				dirs = append(dirs, n)
			}
			// The host tree is read-only, setuid-less and device-less
			// inside, recursively: every submount too, in one syscall
			// (mount_setattr(2) AT_RECURSIVE). Flags the host locked can
			// only be tightened here, never relaxed.
			if err := setAttr(fd, roAttrs, true); err != nil {
				return &Error{Step: "make host root read-only", Dest: n, Err: err}
			}
		default:
			continue
		}
		b.host = append(b.host, e)
	}
	for _, d := range devices {
		fd, err := cloneTree(unix.AT_FDCWD, "/dev/"+d, false)
		if err != nil {
			if errors.Is(err, unix.ENOENT) && d == "tty" {
				continue
			}
			return &Error{Step: "clone device", Source: "/dev/" + d, Err: err}
		}
		// Device nodes keep working (no nodev) but can never be setuid
		// or executed.
		if err := setAttr(fd, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC, false); err != nil {
			unix.Close(fd)
			return &Error{Step: "clone device", Source: "/dev/" + d, Err: err}
		}
		b.devs[d] = fd
	}
	return nil
}

func (b *builder) cloneSources() error {
	for i, m := range b.plan.Mounts {
		if m.Kind != Bind {
			continue
		}
		if fd, ok := b.plan.Premade[i]; ok {
			// Made by the supervisor with the same checks and
			// attributes (IdmappedBind); owned by the builder now.
			b.sources[i] = fd
			delete(b.plan.Premade, i)
			continue
		}
		// The source is opened without following any symlink: the policy
		// resolved it, and a symlink swapped into its path since (by a
		// sandbox sharing the directory, say) must not redirect a
		// writable bind somewhere else.
		src, err := unix.Openat2(unix.AT_FDCWD, m.Source, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_NO_SYMLINKS,
		})
		if err != nil {
			if m.Optional && errors.Is(err, unix.ENOENT) {
				continue
			}
			if errors.Is(err, unix.ENOENT) {
				// The supervisor saw it (checkSources): it was moved
				// or removed since, by another process sharing the
				// directory (a pin of a hidden file's parent, say).
				return &Error{Step: StepSourceChanged, Source: m.Source, Dest: m.Dest, Err: &reasonError{errSourceGone, err}}
			}
			if errors.Is(err, unix.ELOOP) {
				err = fmt.Errorf("the path has a symlink in it; give the resolved path")
			}
			return &Error{Step: "mount", Source: m.Source, Dest: m.Dest, Err: err}
		}
		fd, err := cloneTree(src, "", true)
		unix.Close(src)
		if err != nil {
			return &Error{Step: "mount", Source: m.Source, Dest: m.Dest, Err: err}
		}
		set := uint64(unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV)
		if m.ReadOnly {
			set |= unix.MOUNT_ATTR_RDONLY
		}
		// Recursive: a read-only bind must not leave a writable submount
		// below it.
		if err := setAttr(fd, set, true); err != nil {
			unix.Close(fd)
			return &Error{Step: "mount", Source: m.Source, Dest: m.Dest, Err: err}
		}
		b.sources[i] = fd
	}
	return nil
}

// newFS creates a detached mount of a fresh filesystem with the new mount
// API (fsopen(2), fsmount(2)): it exists nowhere until it is attached by fd.
func newFS(fstype string, opts [][2]string, attrs int) (int, error) {
	fsfd, err := unix.Fsopen(fstype, unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("fsopen %s: %w", fstype, err)
	}
	defer unix.Close(fsfd)
	for _, o := range opts {
		if o[1] == "" {
			err = unix.FsconfigSetFlag(fsfd, o[0])
		} else {
			err = unix.FsconfigSetString(fsfd, o[0], o[1])
		}
		if err != nil {
			return -1, fmt.Errorf("%s option %s: %w", fstype, o[0], err)
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return -1, fmt.Errorf("create %s: %w", fstype, err)
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, attrs)
	if err != nil {
		return -1, fmt.Errorf("fsmount %s: %w", fstype, err)
	}
	return mfd, nil
}

func attach(tree, target int) error {
	return unix.MoveMount(tree, "", target, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
}

func tmpfsOpts(mode string, size int64) [][2]string {
	o := [][2]string{{"mode", mode}}
	if size > 0 {
		o = append(o, [2]string{"size", strconv.FormatInt(size, 10)})
	}
	return o
}

// minTmpfsInodes is the fewest inodes a bounded tmpfs gets, whatever its
// size: room for the small files a /dev or a /run holds.
const minTmpfsInodes = 1024

// writableTmpfsOpts are the options of a tmpfs the sandbox can write, of
// size bytes (0: unbounded, the kernel's half of RAM).
func (b *builder) writableTmpfsOpts(mode string, size int64) [][2]string {
	return b.owned(b.boundedTmpfsOpts(mode, size))
}

// owned adds Plan.Owner as the owner of a tmpfs's root (uid=, gid= are
// read in the mounter's user namespace, tmpfs(5)).
func (b *builder) owned(o [][2]string) [][2]string {
	if b.plan.Owner == nil {
		return o
	}
	return append(o, [2]string{"uid", strconv.FormatUint(uint64(b.plan.Owner.UID), 10)},
		[2]string{"gid", strconv.FormatUint(uint64(b.plan.Owner.GID), 10)})
}

func (b *builder) boundedTmpfsOpts(mode string, size int64) [][2]string {
	max := b.plan.TmpfsMax
	if max <= 0 {
		return tmpfsOpts(mode, size)
	}
	// Invariant: with TmpfsMax set, no tmpfs the sandbox writes holds more
	// than TmpfsMax bytes or one inode per 4 KiB of it. tmpfs pages and
	// inodes are not counted by RLIMIT_DATA/RLIMIT_AS: without this a
	// sandbox whose memory limit fell back to rlimits could fill
	// /dev/shm or /tmp up to half of the host's RAM, or pin unbounded
	// kernel memory with millions of empty files.
	if size <= 0 || size > max {
		size = max
	}
	inodes := size / 4096
	if inodes < minTmpfsInodes {
		inodes = minTmpfsInodes
	}
	return append(tmpfsOpts(mode, size), [2]string{"nr_inodes", strconv.FormatInt(inodes, 10)})
}

func (b *builder) mountRoot() error {
	mfd, err := newFS("tmpfs", b.owned(tmpfsOpts("0755", 1<<20)), unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return err
	}
	root := os.NewFile(uintptr(mfd), "/")
	// The staging point is opened without following a symlink: the new
	// root is attached to the real directory or not at all.
	stage, err := unix.Open(stagingDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		root.Close()
		return fmt.Errorf("open staging directory %s: %w", stagingDir, err)
	}
	defer unix.Close(stage)
	if err := attach(mfd, stage); err != nil {
		root.Close()
		return fmt.Errorf("attach new root: %w", err)
	}
	b.root = root
	return nil
}

// rootFD is the new root; the fd from fsmount keeps naming the root of that
// mount after it is attached.
func (b *builder) rootFD() int { return int(b.root.Fd()) }

func (b *builder) attachHost() error {
	for i := range b.host {
		e := &b.host[i]
		if e.symlink != "" {
			if err := b.symlinkAt(e.name, e.symlink); err != nil {
				return &Error{Step: "recreate host symlink", Dest: e.name, Err: err}
			}
			continue
		}
		target, err := b.target(e.name, e.isDir)
		if err != nil {
			return &Error{Step: "bind host root", Source: e.name, Dest: e.name, Err: err}
		}
		err = attach(e.tree, target)
		unix.Close(target)
		if err == nil {
			err = b.show(e.name, e.tree)
		}
		if err != nil {
			return &Error{Step: "bind host root", Source: e.name, Dest: e.name, Err: err}
		}
	}
	return nil
}

// show records that the mount whose root fd names is attached at dest (fd
// is duplicated; the caller keeps its own).
func (b *builder) show(dest string, fd int) error {
	d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return err
	}
	b.shown = append(b.shown, shownMount{dest: path.Clean(dest), fd: d})
	return nil
}

// symlinkAt creates the symlink name -> target inside the new root, at its
// full path: a nested host entry ("/etc/localtime") is recreated below its
// parents, which are created if missing.
func (b *builder) symlinkAt(name, target string) error {
	return b.asOwner(func() error { return b.symlinkAtOwned(name, target) })
}

func (b *builder) symlinkAtOwned(name, target string) error {
	// The parent is resolved, and created, inside the new root by fd
	// (filepath-securejoin's MkdirAllHandle: RESOLVE_IN_ROOT semantics),
	// and the link is made relative to that fd with symlinkat(2), which
	// never follows a symlink in its last component: nothing planted on the
	// way can place the link, or a directory, outside the root.
	if path.Dir(name) == "/" {
		// A top-level entry (/bin -> usr/bin): the root fd is its parent.
		// The common case, and MkdirAllHandle costs ~50 µs a call.
		return unix.Symlinkat(target, b.rootFD(), path.Base(name))
	}
	parent, err := pathrs.MkdirAllHandle(b.root, path.Dir(name), 0o755)
	if err != nil {
		return createError(name, err)
	}
	defer parent.Close()
	return unix.Symlinkat(target, int(parent.Fd()), path.Base(name))
}

// target returns an O_PATH fd of dest inside the new root, creating it (a
// directory, or an empty file when !dir) if it is missing. The path is
// resolved by the kernel as if the new root were "/": "..", absolute
// symlinks and magic links cannot leave it (openat2(2) RESOLVE_IN_ROOT,
// RESOLVE_NO_MAGICLINKS). This is what stops a symlink planted in a writable
// directory from redirecting a mount onto the host (CVE-2021-30465 class).
func (b *builder) target(dest string, dir bool) (int, error) {
	fd, err := openInRoot(b.rootFD(), dest)
	if err == nil {
		return fd, nil
	}
	if !errors.Is(err, unix.ENOENT) {
		return -1, err
	}
	err = b.asOwner(func() error {
		fd, err = b.create(dest, dir)
		return err
	})
	return fd, err
}

// create makes the missing dest of target.
func (b *builder) create(dest string, dir bool) (int, error) {
	// Fast path: the parent exists. It is resolved inside the root like
	// every path here; the last component is created relative to that fd
	// with O_EXCL/mkdirat, which never follow a symlink.
	if pfd, perr := openInRoot(b.rootFD(), path.Dir(dest)); perr == nil {
		defer unix.Close(pfd)
		base := path.Base(dest)
		if dir {
			if err := unix.Mkdirat(pfd, base, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
				return -1, createError(dest, err)
			}
		} else {
			f, err := unix.Openat(pfd, base, unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
			if err != nil && !errors.Is(err, unix.EEXIST) {
				return -1, createError(dest, err)
			}
			if err == nil {
				unix.Close(f)
			}
		}
		return unix.Openat(pfd, base, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	if dir {
		h, err := pathrs.MkdirAllHandle(b.root, dest, 0o755)
		if err != nil {
			return -1, createError(dest, err)
		}
		fd, err := unix.Dup(int(h.Fd()))
		h.Close()
		return fd, err
	}
	parent, err := pathrs.MkdirAllHandle(b.root, path.Dir(dest), 0o755)
	if err != nil {
		return -1, createError(dest, err)
	}
	defer parent.Close()
	// O_NOFOLLOW|O_EXCL on a single name relative to a trusted parent fd:
	// no symlink can stand in for the file we create.
	f, err := unix.Openat(int(parent.Fd()), path.Base(dest), unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, createError(dest, err)
	}
	if err == nil {
		unix.Close(f)
	}
	return openInRoot(b.rootFD(), dest)
}

func createError(dest string, err error) error {
	if errors.Is(err, unix.EROFS) {
		return fmt.Errorf("mount point does not exist and cannot be created in a read-only directory (%w)", unix.EROFS)
	}
	return err
}

func openInRoot(root int, p string) (int, error) {
	return openat2Retry(root, p, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	})
}

// mountFresh mounts a new filesystem at dest (a directory inside the root).
func (b *builder) mountFresh(dest, fstype string, opts [][2]string, attrs int) error {
	mfd, err := b.mountFreshFD(dest, fstype, opts, attrs)
	if err == nil {
		unix.Close(mfd)
	}
	return err
}

// mountFreshFD is mountFresh, returning an fd of the new mount's root.
func (b *builder) mountFreshFD(dest, fstype string, opts [][2]string, attrs int) (int, error) {
	mfd, err := newFS(fstype, opts, attrs)
	if err != nil {
		return -1, &Error{Step: "mount " + fstype, Dest: dest, Err: err}
	}
	t, err := b.target(dest, true)
	if err != nil {
		unix.Close(mfd)
		return -1, &Error{Step: "mount " + fstype, Dest: dest, Err: err}
	}
	defer unix.Close(t)
	if err := attach(mfd, t); err != nil {
		unix.Close(mfd)
		return -1, &Error{Step: "mount " + fstype, Dest: dest, Err: err}
	}
	return mfd, nil
}

// ReadOnlyClone returns a detached mount of the single file or directory fd
// names (an O_PATH fd will do), read-only, nosuid and nodev. A file reached
// through it, also as a process's /proc/PID/exe, cannot be opened for
// writing (EROFS) whatever its owner and mode: what runs from it cannot be
// turned into a writable handle of the host's file.
func ReadOnlyClone(fd int) (int, error) {
	c, err := cloneTree(fd, "", false)
	if err != nil {
		return -1, err
	}
	if err := setAttr(c, roAttrs, false); err != nil {
		unix.Close(c)
		return -1, err
	}
	return c, nil
}

func isDirFD(fd int) (bool, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, err
	}
	return st.Mode&unix.S_IFMT == unix.S_IFDIR, nil
}

// Messages of a plan hide that cannot be applied: the policy put it in the
// plan because the path was there, so it was moved since, and running
// without it would show the secret.
const (
	errHideGone    = "it was there when the policy was resolved and is gone or moved now: run again"
	errHideSymlink = "a symlink is in the way now where the policy saw none: run again (hides never follow symlinks: name the path without them)"
)

// StepHideChanged, StepSourceChanged and StepProtectChanged name the step
// of an Error whose hide, bind source or protected symlink found the path changed since the policy was
// resolved: resolving it again, and building a new sandbox, is the answer.
const (
	StepHideChanged    = "recheck hide"
	StepSourceChanged  = "recheck mount"
	StepProtectChanged = "recheck protect"
)

// errLinkGone: a symlink the policy protects (Mount.NoFollow) is gone.
const errLinkGone = "a symlink on the way to a protected path was there when the policy was resolved and is gone now: run again"

const errSourceGone = "it was there when the policy was resolved and is gone or moved now"

// within reports whether p is dir or below it (both clean and absolute).
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

func depth(p string) int {
	if p == "/" {
		return 0
	}
	return strings.Count(p, "/")
}

func (b *builder) pivot() error {
	if err := unix.Fchdir(b.rootFD()); err != nil {
		return err
	}
	// pivot_root(".", "."): the old root ends up stacked on the new one and
	// is detached at once, so no path inside leads back to the host's tree
	// (pivot_root(2), NOTES).
	if err := unix.PivotRoot(".", "."); err != nil {
		return err
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach old root: %w", err)
	}
	return unix.Chdir("/")
}

func (b *builder) seal() error {
	return unix.MountSetattr(unix.AT_FDCWD, "/", 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
}
