package mounts

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Idmapped mounts (mount_setattr(2) MOUNT_ATTR_IDMAP, Linux 5.12, per
// filesystem): a bind whose file owners are translated through a user
// namespace's maps. With the sandbox's own user namespace, an on-disk owner
// N is seen inside as N, and a file a sandboxed process with uid N writes
// is stored as N; so a root-started sandbox whose uid 0 is host uid
// 4294836224 still writes files the host sees owned by root, and files
// keep their on-disk owners. The kernel allows it only to a caller with
// CAP_SYS_ADMIN over the filesystem's user namespace, so the supervisor
// (host root) makes these mounts and the worker attaches them
// (Plan.Premade).

// ErrIdmapUnsupported says that a filesystem refused an idmapped mount.
var ErrIdmapUnsupported = errors.New("the filesystem does not support idmapped mounts")

// IdmapError is a bind that could not be idmapped.
type IdmapError struct {
	Source string
	Err    error
}

func (e *IdmapError) Error() string {
	return fmt.Sprintf("idmap bind %s: %v", e.Source, e.Err)
}

func (e *IdmapError) Unwrap() error { return e.Err }

// IdmappedBind returns a detached, recursive clone of the tree at source
// whose owners are mapped through the user namespace usernsFD names, with
// nosuid and nodev (and read-only when readOnly). source is opened without
// following a symlink, as Build opens bind sources.
func IdmappedBind(source string, usernsFD int, readOnly bool) (int, error) {
	src, err := unix.Openat2(unix.AT_FDCWD, source, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS,
	})
	if err != nil {
		return -1, &IdmapError{Source: source, Err: err}
	}
	fd, err := cloneTree(src, "", true)
	unix.Close(src)
	if err != nil {
		return -1, &IdmapError{Source: source, Err: err}
	}
	set := uint64(unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV)
	if readOnly {
		set |= unix.MOUNT_ATTR_RDONLY
	}
	// Recursive: a submount left unmapped would be unwritable inside, and
	// one left writable below a read-only bind would be a hole.
	err = unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &unix.MountAttr{
		Attr_set:  set,
		Userns_fd: uint64(usernsFD),
	})
	if err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EPERM) {
			var st unix.Statfs_t
			kind := ""
			if unix.Statfs(source, &st) == nil {
				kind = fmt.Sprintf(" (filesystem magic %#x)", st.Type)
			}
			err = fmt.Errorf("%w%s: %v", ErrIdmapUnsupported, kind, err)
		}
		return -1, &IdmapError{Source: source, Err: err}
	}
	return fd, nil
}
