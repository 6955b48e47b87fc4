package mounts

// The plan's own mounts, in plan order: binds and tmpfs mounts (as the
// sandbox's owner), protected paths and hides.

import (
	"errors"
	"path"

	"golang.org/x/sys/unix"
)

func (b *builder) userMounts() error {
	ms := b.plan.Mounts
	for i := 0; i < len(ms); {
		j := i + 1
		for j < len(ms) && asOwnerKind(ms[j].Kind) == asOwnerKind(ms[i].Kind) && (asOwnerKind(ms[i].Kind) || ms[j].Kind == ms[i].Kind) {
			j++
		}
		var err error
		switch {
		case asOwnerKind(ms[i].Kind):
			// Binds and tmpfs mounts are made as the sandbox's owner:
			// a run of them in one call on the owner thread.
			err = b.asOwner(func() error { return b.userMountRange(i, j) })
		case ms[i].Kind == Protect:
			// A run of protected paths: their missing placeholders
			// are made together, then each is mounted read-only.
			if err = b.makePlaceholders(ms[i:j]); err == nil {
				err = b.userMountRange(i, j)
			}
		default:
			err = b.userMountRange(i, j)
		}
		if err != nil {
			return err
		}
		i = j
	}
	return nil
}

// asOwnerKind: mounts of this kind are made on the owner thread.
func asOwnerKind(k Kind) bool { return k == Bind || k == Tmpfs }

// userMountRange makes the plan's mounts i to j-1, in order.
func (b *builder) userMountRange(i, j int) error {
	for k := i; k < j; k++ {
		if err := b.userMount(k, b.plan.Mounts[k]); err != nil {
			return err
		}
	}
	return nil
}

// userMount makes the plan's mount i, m.
func (b *builder) userMount(i int, m Mount) error {
	var err error
	switch m.Kind {
	case Bind:
		fd, ok := b.sources[i]
		if !ok {
			return nil // optional and missing
		}
		err = b.bindAt(fd, m)
	case Tmpfs:
		attrs := unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV
		if m.ReadOnly {
			attrs |= unix.MOUNT_ATTR_RDONLY
		}
		var mfd int
		mfd, err = b.mountFreshFD(m.Dest, "tmpfs", b.writableTmpfsOpts("0755", m.Size), attrs)
		if err == nil {
			err = b.show(m.Dest, mfd)
			unix.Close(mfd)
		}
	// Hides and protected paths are resolved as the worker's own
	// ids: for a root caller, host root, which can walk into /root to
	// hide what is there; what protect creates goes through asOwner.
	case Hide:
		err = b.hide(m)
	case Protect:
		err = b.protect(m)
	}
	if err != nil {
		var me *Error
		if errors.As(err, &me) {
			return err
		}
		return &Error{Step: "mount", Source: m.Source, Dest: m.Dest, Err: err}
	}
	return nil
}

func (b *builder) bindAt(fd int, m Mount) error {
	dir, err := isDirFD(fd)
	if err != nil {
		return err
	}
	if err := b.checkSelfBind(fd, m); err != nil {
		return err
	}
	t, err := b.target(m.Dest, dir)
	if err != nil {
		return err
	}
	defer unix.Close(t)
	if err := attach(fd, t); err != nil {
		return err
	}
	// fd now names the root of the attached bind.
	return b.show(m.Dest, fd)
}

// checkSelfBind fails closed when a bind of a path onto itself (a pin of
// the directories above a hidden file, a workspace) would not land on the
// directory it was cloned from. The clone may be older than the build (a
// root caller's idmapped binds are made by the supervisor): a process
// sharing the tree could have renamed the directory since, and the bind,
// attached at a fresh mount point with the hide below it, would leave the
// real directory, and the secret in it, in view at its new name. Where the
// destination lies on the source's own filesystem, it must be the very
// same inode; missing there, it was moved. Elsewhere (the sandbox's own
// /tmp, a tmpfs) the destination is a new mount point and nothing is
// checked.
func (b *builder) checkSelfBind(fd int, m Mount) error {
	if m.Source != m.Dest {
		return nil
	}
	var src unix.Stat_t
	if err := unix.Fstat(fd, &src); err != nil {
		return err
	}
	moved := func() error {
		return &Error{Step: StepSourceChanged, Source: m.Source, Dest: m.Dest, Err: &reasonError{errSourceGone, unix.ENOENT}}
	}
	t, err := openInRoot(b.rootFD(), m.Dest)
	if err == nil {
		var st unix.Stat_t
		err = unix.Fstat(t, &st)
		unix.Close(t)
		if err != nil {
			return err
		}
		if st.Dev == src.Dev && st.Ino != src.Ino {
			return moved()
		}
		return nil
	}
	if !errors.Is(err, unix.ENOENT) {
		return nil // target() reports it
	}
	p, err := openInRoot(b.rootFD(), path.Dir(m.Dest))
	if err != nil {
		return nil
	}
	var st unix.Stat_t
	err = unix.Fstat(p, &st)
	unix.Close(p)
	if err == nil && st.Dev == src.Dev {
		return moved()
	}
	return nil
}
