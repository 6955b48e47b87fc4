package mounts

import (
	"errors"
	"path"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Hidden and protected paths: what the plan covers (an empty tmpfs or
// /dev/null over a secret) and what it keeps read-only inside a writable
// tree, creating a placeholder when the path is missing.

// reasonError is a message for users that keeps the errno for errors.Is.
type reasonError struct {
	msg string
	err error
}

func (e *reasonError) Error() string { return e.msg }
func (e *reasonError) Unwrap() error { return e.err }

// hide applies a Hide of the plan: an empty read-only directory over a
// directory, /dev/null over a file, so that a secret (an ssh key, a cloud
// credential, a .env) reads as empty.
//
// It fails closed. The path is resolved below the root of the mount that
// shows it (the plan's bind, tmpfs or host directory with the deepest
// destination above it, as attached: whatever symlinks its destination
// went through are not walked again), without following any symlink
// there, and a missing path is an error, not a skip. The policy only
// hides paths it saw, with symlinks resolved; in a workspace shared with
// another sandbox, that sandbox can rename a parent directory away, or
// swap a directory for a symlink to a decoy, between the policy and this
// step. Skipping, or following the symlink, would run this sandbox with
// the secret visible at its new place.
func (b *builder) hide(m Mount) error {
	dest := path.Clean(m.Dest)
	base, rest := b.rootFD(), dest
	best := -1
	for i, s := range b.shown {
		if within(dest, s.dest) && (best < 0 || depth(s.dest) >= depth(b.shown[best].dest)) {
			best = i
		}
	}
	if best >= 0 {
		base, rest = b.shown[best].fd, strings.TrimPrefix(strings.TrimPrefix(dest, b.shown[best].dest), "/")
	}
	var (
		t   int
		err error
	)
	if rest == "" {
		t, err = unix.FcntlInt(uintptr(base), unix.F_DUPFD_CLOEXEC, 0)
	} else {
		// Invariant: the hide lands on the very file the policy named,
		// below the mount that shows it, or nowhere: no symlink (swapped
		// in to point at a decoy) is followed, and ".." cannot leave
		// that mount.
		t, err = openNoSymlinks(base, rest)
	}
	switch {
	case err == nil:
	case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR):
		if m.Optional {
			return nil
		}
		// Invariant: a hide that cannot be applied stops the build (fail
		// closed); the secret may be sitting at a new name right now.
		return &Error{Step: StepHideChanged, Dest: m.Dest, Err: &reasonError{errHideGone, err}}
	case errors.Is(err, unix.ELOOP):
		return &Error{Step: StepHideChanged, Dest: m.Dest, Err: &reasonError{errHideSymlink, err}}
	default:
		return &Error{Step: "hide", Dest: m.Dest, Err: err}
	}
	defer unix.Close(t)
	// An empty file hidden here may be another session's placeholder
	// too (a .envrc placeholder matches the .env* hide, and a hidden
	// path is not protected as well): git inside is not to list it
	// (gitExclude), as for an empty protected path.
	var st unix.Stat_t
	if unix.Fstat(t, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Size == 0 {
		b.emptyProtected = append(b.emptyProtected, m.Dest)
	}
	return b.cover(t, m.Dest)
}

// openNoSymlinks opens p below dir (as if dir were "/") without following
// any symlink, the last component included: RESOLVE_NO_SYMLINKS fails
// with ELOOP at the first one.
func openNoSymlinks(dir int, p string) (int, error) {
	how := &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_SYMLINKS,
	}
	return openat2Retry(dir, p, how)
}

// openat2Retry is openat2(2), made again on EAGAIN: with RESOLVE_IN_ROOT
// or RESOLVE_BENEATH, a rename or mount anywhere on the host during a ".."
// lookup makes the kernel ask for a retry rather than risk a wrong
// answer (openat2(2), ERRORS); and on EINTR.
func openat2Retry(dir int, p string, how *unix.OpenHow) (int, error) {
	for tries := 0; ; tries++ {
		fd, err := unix.Openat2(dir, p, how)
		if (errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR)) && tries < 64 {
			// A host renaming without pause can meet every quick
			// retry: past a few, back off (1 µs doubling to 1 ms).
			if tries >= 8 {
				time.Sleep(time.Microsecond << min(tries-8, 10))
			}
			continue
		}
		return fd, err
	}
}

// cover mounts the hiding filesystem over t, an O_PATH fd of dest.
func (b *builder) cover(t int, dest string) error {
	dir, err := isDirFD(t)
	if err != nil {
		return &Error{Step: "hide", Dest: dest, Err: err}
	}
	var src int
	if dir {
		src, err = newFS("tmpfs", tmpfsOpts("0555", 4096), unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	} else {
		src, err = cloneTree(b.devs["null"], "", false)
		if err == nil {
			err = setAttr(src, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC, false)
		}
	}
	if err != nil {
		return &Error{Step: "hide", Dest: dest, Err: err}
	}
	defer unix.Close(src)
	// Attached to the fd resolved above: nothing renamed or swapped in
	// since can move the hide elsewhere.
	if err := attach(src, t); err != nil {
		return &Error{Step: "hide", Dest: dest, Err: err}
	}
	return nil
}

// protect makes Dest read-only inside a writable tree. A missing Dest was
// made by makePlaceholders, run before the group of protected paths it
// belongs to, which keeps an fd of what it made: the mount lands on that
// inode, never on whatever a concurrent sandbox sharing the workspace put
// at the name since (a symlink). A sandbox that renames the placeholder
// away in between frees the name, but only one whose own policy already
// lets it write there can.
// A path makePlaceholders found missing and could not create (no parent,
// a read-only or foreign parent, below a protected directory of the
// group) is skipped: the sandbox cannot create it either.
func (b *builder) protect(m Mount) error {
	if m.NoFollow {
		return b.protectLink(m)
	}
	t, ok := b.placeholders[m.Dest]
	var err error
	if ok {
		delete(b.placeholders, m.Dest)
	} else {
		t, err = openInRoot(b.rootFD(), m.Dest)
		if errors.Is(err, unix.ENOENT) && !b.notCreatable[m.Dest] {
			// There when the group was looked at, gone now: make its
			// placeholder, as for any missing path.
			err = b.asOwner(func() (err error) {
				var made bool
				if t, made, err = b.placeholder(m.Dest, m.Dir); err == nil && made {
					b.plan.Made = append(b.plan.Made, m.Dest)
				}
				return err
			})
			if err == nil && t < 0 {
				err = unix.ENOENT
			}
			if errors.Is(err, unix.EROFS) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.ENOENT) {
				return nil // the sandbox cannot create it either
			}
		} else if errors.Is(err, unix.ENOENT) {
			return nil
		}
	}
	if err != nil {
		return &Error{Step: "protect", Dest: m.Dest, Err: err}
	}
	defer unix.Close(t)
	if err := b.selfBindReadOnly(t); err != nil {
		return &Error{Step: "protect", Dest: m.Dest, Err: err}
	}
	return nil
}

// protectLink mounts a read-only bind of Dest's last component over
// itself without following it (Mount.NoFollow): a symlink in a writable
// tree on the way to a protected path (.claude -> shared/claude). Unpinned,
// the sandbox would remove it and make a .claude directory of its own,
// with hooks, that the host's agent then reads. Gone since the policy saw
// it, the build stops (fail closed): a directory may stand there now.
func (b *builder) protectLink(m Mount) error {
	// Invariant: the link's parent is reached below the mount that shows
	// it without following any symlink (as a hide's path): the policy
	// resolved it, so a symlink there now was swapped in since, and would
	// move the pin onto a decoy while the real link stays removable.
	dest := path.Clean(m.Dest)
	base, rest := b.rootFD(), path.Dir(dest)
	best := -1
	for i, sm := range b.shown {
		if within(dest, sm.dest) && dest != sm.dest && (best < 0 || depth(sm.dest) >= depth(b.shown[best].dest)) {
			best = i
		}
	}
	if best >= 0 {
		base, rest = b.shown[best].fd, strings.TrimPrefix(strings.TrimPrefix(path.Dir(dest), b.shown[best].dest), "/")
	}
	if rest == "" {
		rest = "."
	}
	pfd, err := openNoSymlinks(base, rest)
	if err == nil {
		var t int
		t, err = unix.Openat(pfd, path.Base(m.Dest), unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(pfd)
		if err == nil {
			defer unix.Close(t)
			err = b.selfBindReadOnly(t)
		}
	}
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
		return &Error{Step: StepProtectChanged, Dest: m.Dest, Err: &reasonError{errLinkGone, err}}
	}
	if err != nil {
		return &Error{Step: "protect", Dest: m.Dest, Err: err}
	}
	return nil
}

// makePlaceholders creates, empty, the missing paths of group (a run of
// consecutive Protect entries of the plan), so that protect can mount
// over them: a mount point cannot be replaced, so the sandbox cannot
// create them either. A run protects some twenty paths that are usually
// missing (the agent files of profiles/base.toml): they are made in one
// call on the owner thread (asOwner), not one each, and each path is
// looked up as protect looks it up, by the worker's ids. It records an fd
// of each placeholder (b.placeholders) and the paths it could not make
// (b.notCreatable) for protect.
//
// An entry below an earlier directory of the group is not made: that
// directory is mounted read-only first, which covers it (as a sequential
// build would find: its placeholder could not be created there).
func (b *builder) makePlaceholders(group []Mount) error {
	if b.placeholders == nil {
		b.placeholders, b.notCreatable = map[string]int{}, map[string]bool{}
	}
	var missing []Mount
	for k, m := range group {
		if m.NoFollow {
			continue // a symlink that is there (protectLink)
		}
		t, err := openInRoot(b.rootFD(), m.Dest)
		if err == nil {
			// An empty file here may be another session's placeholder
			// (one sharing the workspace): git inside is not to list it
			// either (gitExclude).
			var st unix.Stat_t
			if unix.Fstat(t, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Size == 0 {
				b.emptyProtected = append(b.emptyProtected, m.Dest)
			}
			unix.Close(t)
			continue
		}
		if !errors.Is(err, unix.ENOENT) {
			return &Error{Step: "protect", Dest: m.Dest, Err: err}
		}
		covered := false
		for _, e := range group[:k] {
			if d, p := path.Clean(e.Dest), path.Clean(m.Dest); e.Dir && d != p && within(p, d) {
				covered = true
			}
		}
		if covered {
			b.notCreatable[m.Dest] = true
		} else {
			missing = append(missing, m)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return b.asOwner(func() error {
		for _, m := range missing {
			t, made, err := b.placeholder(m.Dest, m.Dir)
			if errors.Is(err, unix.EROFS) || errors.Is(err, unix.EACCES) || (err == nil && t < 0) {
				b.notCreatable[m.Dest] = true
				continue // the sandbox cannot create it either
			}
			if err != nil {
				return &Error{Step: "protect", Dest: m.Dest, Err: err}
			}
			if old, ok := b.placeholders[m.Dest]; ok {
				unix.Close(old) // the same path twice in the plan
			}
			b.placeholders[m.Dest] = t
			if made {
				b.plan.Made = append(b.plan.Made, m.Dest)
			}
		}
		return nil
	})
}

// placeholder creates the missing dest (an empty directory, or an empty
// file) below its parent and returns an O_PATH fd of it, with made set
// when this call created it; t is -1 (and err nil) when the parent is
// missing too. It runs on the owner thread: the file system checks the
// creation against the owner's ids, which the writable bind maps.
//
// The parent is resolved inside the root like every path here; the last
// component is created relative to that fd with mkdirat or
// O_CREAT|O_EXCL|O_NOFOLLOW, neither of which follows a symlink in it,
// and opened with O_NOFOLLOW: a name a concurrent sandbox swapped for a
// symlink is bound over as the symlink's own inode, or fails, and never
// redirects the mount.
//
// Invariant: every placeholder file is an inode of its own. Hard links of
// one empty inode would be cheaper (a directory entry instead of an
// inode), but a write through any one name (by the host, or by another
// sandbox whose policy lifts that name) would then land in all of them:
// .envrc, .pnpmfile.cjs and .gitconfig written with .mcp.json's text,
// and kept, not being empty, after the run (found by review).
func (b *builder) placeholder(dest string, dir bool) (t int, made bool, err error) {
	pfd, err := openInRoot(b.rootFD(), path.Dir(dest))
	if err != nil {
		return -1, false, nil // no parent: nothing here to protect
	}
	defer unix.Close(pfd)
	base := path.Base(dest)
	if dir {
		err = unix.Mkdirat(pfd, base, 0o755)
	} else {
		err = createFile(pfd, base)
	}
	made = err == nil
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, false, createError(dest, err)
	}
	t, err = unix.Openat(pfd, base, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, false, err
	}
	return t, made, nil
}

// createFile creates the empty file name below dir, never through a
// symlink (O_EXCL|O_NOFOLLOW).
func createFile(dir int, name string) error {
	f, err := unix.Openat(dir, name, unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	if err == nil {
		unix.Close(f)
	}
	return err
}
