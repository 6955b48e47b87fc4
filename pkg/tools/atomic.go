package tools

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Atomic replacement. A tool that rewrites a file never truncates it in
// place: on a full disk (ENOSPC), a quota (EDQUOT) or a killed call, the
// truncate-then-write order leaves the old content gone and the new one
// half-written. Instead the new content goes to a temporary file in the
// same directory, is flushed with fsync(2), given the old file's mode, and
// renamed over the old name with renameat(2), which the kernel makes atomic:
// a reader sees the old file or the new one, never a mix, and when any step
// fails the temporary file is removed and the old file was never touched.
//
// Every step is relative to a directory fd the confinement resolved (below
// the workspace root, not protected, not on a read-only mount); no path
// string is joined and reopened.

// ErrNothingChanged is matched by the error of a write that failed before
// the file was replaced: the old content (or the absence of a file) is
// intact.
var ErrNothingChanged = errors.New("nothing was changed")

// NotWrittenError is a write that failed with the file untouched: it
// matches ErrNothingChanged and its cause (errors.Is(err, unix.ENOSPC)).
type NotWrittenError struct {
	Path string // as the caller gave it
	Err  error  // the cause
	New  bool   // the file did not exist, and still does not
}

func (e *NotWrittenError) Error() string {
	cause := e.Err.Error()
	switch {
	case errors.Is(e.Err, unix.ENOSPC):
		cause = "no space left on the device"
	case errors.Is(e.Err, unix.EDQUOT):
		cause = "disk quota exceeded"
	}
	if e.New {
		return fmt.Sprintf("cannot write %q: %s; nothing was changed: no file was created", e.Path, cause)
	}
	return fmt.Sprintf("cannot write %q: %s; nothing was changed: the old content is intact", e.Path, cause)
}

func (e *NotWrittenError) Unwrap() []error { return []error{ErrNothingChanged, e.Err} }

// writeContent writes all of b to f. A variable so that unit tests can make
// the write fail as a full disk does.
var writeContent = func(f *os.File, b []byte) error {
	_, err := f.Write(b)
	return err
}

// tempPrefix starts the name of a temporary file beside its target: hidden,
// and recognisable as nsbox's should a killed worker leave one behind.
const tempPrefix = ".nsbox-tmp-"

// atomicWrite writes content to name in the directory dirfd. When old is
// non-nil the file there is replaced and keeps old's permission bits and,
// when the kernel allows it, its owner; when old is nil the file is new and
// must not exist when it is renamed into place (RENAME_NOREPLACE).
//
// On error nothing at dir/name has changed; the error wraps the cause
// (unix.ENOSPC, ...).
func atomicWrite(dirfd int, name string, content []byte, old *unix.Stat_t) error {
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	tmp := tempPrefix + hex.EncodeToString(rnd[:])
	// A new file is created 0644 less the umask, as open(2) would; a
	// replacement starts private (0600) and gets the old mode below, so
	// that its content is never readable by more users than the old one.
	mode := uint32(0o644)
	if old != nil {
		mode = 0o600
	}
	// Security: O_EXCL with RESOLVE_NO_SYMLINKS creates exactly dirfd/tmp,
	// never through a link planted under the (random) name.
	fd, err := openat2(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_NOCTTY, mode, resolveFlags|unix.RESOLVE_NO_SYMLINKS)
	if err != nil {
		return fmt.Errorf("temporary file: %w", err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	done := false
	defer func() {
		if !done {
			f.Close()
			unix.Unlinkat(dirfd, tmp, 0)
		}
	}()
	if err := writeContent(f, content); err != nil {
		return unwrapOS(err)
	}
	if old != nil {
		// Same owner when allowed (root, or our own file); a failure
		// (EPERM) leaves the new file ours, which is all we can do.
		if uint32(os.Getuid()) != old.Uid || uint32(os.Getgid()) != old.Gid {
			unix.Fchown(fd, int(old.Uid), int(old.Gid))
		}
		// Security: only the permission bits are kept, not set-user-ID
		// or set-group-ID: the content is new, and a write to a setuid
		// file clears those bits too (write(2), "S_ISUID").
		if err := unix.Fchmod(fd, old.Mode&0o777); err != nil {
			return err
		}
	}
	// The data must be on disk before the name points at it, or a crash
	// right after the rename could leave an empty file (ext4, xfs).
	if err := f.Sync(); err != nil {
		return unwrapOS(err)
	}
	if err := f.Close(); err != nil {
		return unwrapOS(err)
	}
	flags := uint(0)
	if old == nil {
		// Security: a new file never replaces what appeared at its name
		// meanwhile (a file, or a symlink planted to redirect a later
		// write): RENAME_NOREPLACE fails with EEXIST instead.
		flags = unix.RENAME_NOREPLACE
	}
	if err := unix.Renameat2(dirfd, tmp, dirfd, name, flags); err != nil {
		return err
	}
	done = true
	// The rename itself is made durable with the directory; an error here
	// does not undo it, so it is not reported.
	unix.Fsync(dirfd)
	return nil
}

// inPlaceWrite is the fallback for a file that cannot be replaced by a
// rename: a single-file bind mount (EBUSY), or a directory the sandbox may
// not write to while the file itself is writable (EACCES). The space is
// reserved first with fallocate(2), so a full disk fails before a byte of
// the old content is lost; only then is the file overwritten and cut to
// its new length.
//
// An error with changed false left the file as it was.
func inPlaceWrite(fd int, content []byte) (changed bool, err error) {
	if len(content) > 0 {
		err := unix.Fallocate(fd, 0, 0, int64(len(content)))
		switch {
		case err == nil:
		case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS):
			// The file system cannot reserve space (old NFS, some
			// FUSE): the write below may still hit a full disk.
		default:
			return false, err
		}
	}
	for off := 0; off < len(content); {
		n, err := unix.Pwrite(fd, content[off:], int64(off))
		if err != nil {
			return off > 0, err
		}
		off += n
	}
	if err := unix.Ftruncate(fd, int64(len(content))); err != nil {
		return true, err
	}
	return true, unix.Fsync(fd)
}

// replaceable reports whether a failed rename means the file can only be
// written in place.
func replaceable(err error) bool {
	return !(errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) ||
		errors.Is(err, unix.EXDEV) || errors.Is(err, unix.EROFS))
}

// unwrapOS strips *os.PathError (its path is the temporary file's, which
// means nothing to the caller) down to the errno.
func unwrapOS(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
