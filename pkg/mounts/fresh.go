package mounts

// The fresh file systems of the new root: /proc (or the outer one, bound
// read-only where the kernel refuses a fresh one), a minimal /dev, and the
// sandbox's own /tmp and /run.

import (
	"errors"

	"golang.org/x/sys/unix"
)

// procReadOnly are parts of /proc that act on the whole host, not on the
// sandbox's namespaces: kernel tunables, SysRq, IRQ affinity. When nsbox runs
// as root the sandbox's uid 0 is the host's, and files such as
// /proc/sys/vm/drop_caches are gated by nothing but their owner, so they are
// made read-only whatever the uid.
var procReadOnly = []string{"sys", "sysrq-trigger", "irq", "bus", "fs"}

// procMasked leak host kernel memory or state and are hidden outright.
var procMasked = []string{"kcore", "keys", "timer_list", "sched_debug", "acpi", "scsi", "latency_stats"}

func (b *builder) mountProc() error {
	if b.plan.OuterProc {
		return b.bindOuterProc()
	}
	// A fresh proc for the sandbox's own PID namespace: the host's
	// processes do not exist in it. The kernel refuses this when the
	// host's /proc is partly masked (an outer container); nsbox status
	// names that case.
	if err := b.mountFresh("/proc", "proc", nil, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC); err != nil {
		if b.plan.ProcFallback && errors.Is(err, unix.EPERM) {
			// Refused under an outer container's masked /proc: the
			// caller asked for the outer one then, and learns it from
			// OuterProc.
			b.plan.OuterProc = true
			return b.bindOuterProc()
		}
		return err
	}
	for _, name := range procReadOnly {
		p := "/proc/" + name
		t, err := openInRoot(b.rootFD(), p)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return &Error{Step: "make read-only", Dest: p, Err: err}
		}
		err = b.selfBindReadOnly(t)
		unix.Close(t)
		if err != nil {
			return &Error{Step: "make read-only", Dest: p, Err: err}
		}
	}
	for _, name := range procMasked {
		if err := b.maskProc("/proc/" + name); err != nil {
			return err
		}
	}
	return nil
}

// bindOuterProc is the /proc of a sandbox whose kernel refuses a fresh one
// (an outer container masks parts of its /proc, fs/namespace.c
// mount_too_revealing): the outer /proc, cloned with the outer runtime's
// masks (its submounts, locked to us), read-only, nosuid, nodev, noexec,
// with nsbox's own masks on top. It is the outer PID namespace's view: the
// sandbox sees the container's processes (Plan.OuterProc says what leaks).
func (b *builder) bindOuterProc() error {
	src, err := cloneTree(unix.AT_FDCWD, "/proc", true)
	if err != nil {
		return &Error{Step: "clone outer /proc", Source: "/proc", Dest: "/proc", Err: err}
	}
	defer unix.Close(src)
	if err := setAttr(src, roAttrs|unix.MOUNT_ATTR_NOEXEC, true); err != nil {
		return &Error{Step: "make read-only", Source: "/proc", Dest: "/proc", Err: err}
	}
	t, err := b.target("/proc", true)
	if err != nil {
		return &Error{Step: "bind outer /proc", Source: "/proc", Dest: "/proc", Err: err}
	}
	defer unix.Close(t)
	if err := attach(src, t); err != nil {
		return &Error{Step: "bind outer /proc", Source: "/proc", Dest: "/proc", Err: err}
	}
	for _, name := range procMasked {
		if err := b.maskProc("/proc/" + name); err != nil {
			return err
		}
	}
	return nil
}

// selfBindReadOnly puts a read-only bind of t (recursively) over t itself.
func (b *builder) selfBindReadOnly(t int) error {
	src, err := cloneTree(t, "", true)
	if err != nil {
		return err
	}
	defer unix.Close(src)
	if err := setAttr(src, roAttrs, true); err != nil {
		return err
	}
	return attach(src, t)
}

func (b *builder) mountDev() error {
	if err := b.mountFresh("/dev", "tmpfs", b.writableTmpfsOpts("0755", 1<<20), unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC); err != nil {
		return err
	}
	for _, d := range devices {
		fd, ok := b.devs[d]
		if !ok {
			continue
		}
		t, err := b.target("/dev/"+d, false)
		if err != nil {
			return &Error{Step: "bind device", Source: "/dev/" + d, Dest: "/dev/" + d, Err: err}
		}
		err = attach(fd, t)
		unix.Close(t)
		if err != nil {
			return &Error{Step: "bind device", Source: "/dev/" + d, Dest: "/dev/" + d, Err: err}
		}
	}
	// A private devpts instance: the sandbox's ptys are not the host's,
	// and it cannot open the host's terminals through /dev/pts.
	if err := b.mountFresh("/dev/pts", "devpts", [][2]string{{"newinstance", ""}, {"ptmxmode", "0666"}, {"mode", "0620"}},
		unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC); err != nil {
		return err
	}
	// Bounded by TmpfsMax (see writableTmpfsOpts): /dev/shm has no size
	// of its own, so it is the plainest way around an rlimit memory limit.
	if err := b.mountFresh("/dev/shm", "tmpfs", b.writableTmpfsOpts("1777", 0), unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC); err != nil {
		return err
	}
	dev, err := openInRoot(b.rootFD(), "/dev")
	if err != nil {
		return err
	}
	defer unix.Close(dev)
	devDir, err := reopenDir(dev)
	if err != nil {
		return err
	}
	defer unix.Close(devDir)
	for name, target := range map[string]string{
		"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2",
	} {
		if err := b.asOwner(func() error { return unix.Symlinkat(target, devDir, name) }); err != nil {
			return &Error{Step: "populate /dev", Dest: "/dev/" + name, Err: err}
		}
	}
	return nil
}

// reopenDir turns an O_PATH directory fd into one usable with *at calls that
// create entries.
func reopenDir(fd int) (int, error) {
	return unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
}

func (b *builder) mountTmp() error {
	return b.mountFresh("/tmp", "tmpfs", b.writableTmpfsOpts("1777", b.plan.TmpSize), unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
}

func (b *builder) mountRun() error {
	if err := b.mountFresh("/run", "tmpfs", b.writableTmpfsOpts("0755", 4<<20), unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV); err != nil {
		return err
	}
	if b.plan.SelfDest == "" || b.selfFD < 0 {
		return nil
	}
	// The binary is visible read-only: a process inside that opens it, or
	// its own /proc/self/exe while running it, for writing gets EROFS, so
	// the host's copy cannot be overwritten (CVE-2019-5736 class).
	fd, err := ReadOnlyClone(b.selfFD)
	if err != nil {
		return &Error{Step: "bind nsbox binary", Dest: b.plan.SelfDest, Err: err}
	}
	defer unix.Close(fd)
	t, err := b.target(b.plan.SelfDest, false)
	if err != nil {
		return &Error{Step: "bind nsbox binary", Dest: b.plan.SelfDest, Err: err}
	}
	defer unix.Close(t)
	if err := attach(fd, t); err != nil {
		return &Error{Step: "bind nsbox binary", Dest: b.plan.SelfDest, Err: err}
	}
	return nil
}

// maskProc hides a host-wide file of the fresh /proc. What this kernel does
// not have needs no masking.
func (b *builder) maskProc(dest string) error {
	t, err := openInRoot(b.rootFD(), dest)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return &Error{Step: "hide", Dest: dest, Err: err}
	}
	defer unix.Close(t)
	return b.cover(t, dest)
}
