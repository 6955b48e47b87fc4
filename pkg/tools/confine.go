package tools

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Path confinement. Every path a tool gets comes from a model or from
// sandboxed code and is hostile. A Root holds the workspace open by fd and
// resolves every path with openat2(2) relative to that fd:
//
//   - RESOLVE_BENEATH: ".." above the root, an absolute path, or a symlink
//     (absolute or relative) that leads out of the root is an error (EXDEV),
//     not silently clamped, and it is checked by the kernel during the walk
//     itself, so a symlink planted before or during the call cannot win a
//     race against a userspace check.
//   - RESOLVE_NO_MAGICLINKS: /proc/<pid>/fd/N style links, which jump to
//     arbitrary open files, are refused even inside the root.
//
// Directories are walked by fd: each child is opened by openat2 from the
// root fd with RESOLVE_NO_SYMLINKS, never by joining strings and calling
// open(2). Path strings are only labels for output.

var (
	// ErrOutsideWorkspace is matched by a *PathError for a path that
	// leaves the workspace (lexically, through "..", or through a symlink).
	ErrOutsideWorkspace = errors.New("outside the workspace")
	// ErrProtectedPath is matched by a *PathError for a write to a path
	// the tools or the policy protect.
	ErrProtectedPath = errors.New("protected")
	// ErrNotExist is matched by a *PathError for a missing path.
	ErrNotExist = fs.ErrNotExist

	// ErrHidden is matched by a *PathError for a file the policy hides
	// (a .env, a credentials file): it reads as nothing, by design.
	ErrHidden = errors.New("hidden by policy")

	// errNotRegular: a FIFO, device or socket where a file was expected.
	errNotRegular = errors.New("not a regular file")
)

// notRegular is the error for a non-regular file at p: ErrHidden for the
// /dev/null the mount layer binds over a hidden file (pkg/mounts, Hide),
// so that a model is told the file is hidden on purpose rather than that
// it is some odd device.
func notRegular(p string, st *unix.Stat_t) error {
	if hiddenNode(st) {
		return &PathError{Path: p, Err: ErrHidden}
	}
	return &PathError{Path: p, Err: errNotRegular}
}

// hiddenNode reports whether st is /dev/null's device (1:3), which is what
// a hidden file is inside the sandbox.
func hiddenNode(st *unix.Stat_t) bool {
	return st.Mode&unix.S_IFMT == unix.S_IFCHR && unix.Major(uint64(st.Rdev)) == 1 && unix.Minor(uint64(st.Rdev)) == 3
}

// PathError is a refused or failed operation on a workspace path. Its
// message is for users and models: it names the path as they gave it.
type PathError struct {
	Path string // as the caller gave it
	Err  error  // ErrOutsideWorkspace, ErrProtectedPath, fs.ErrNotExist or an errno
	// Detail adds context ("through a symlink").
	Detail string
}

func (e *PathError) Error() string {
	var msg string
	switch {
	case errors.Is(e.Err, ErrOutsideWorkspace):
		msg = fmt.Sprintf("path %q is outside the workspace", e.Path)
	case errors.Is(e.Err, ErrProtectedPath):
		msg = fmt.Sprintf("path %q is protected: it is read-only in this sandbox", e.Path)
	case errors.Is(e.Err, fs.ErrNotExist):
		msg = fmt.Sprintf("path %q does not exist", e.Path)
	case errors.Is(e.Err, ErrHidden):
		msg = fmt.Sprintf("path %q is hidden by policy: the sandbox keeps it unreadable (secrets such as .env files and credentials)", e.Path)
	case errors.Is(e.Err, errNotRegular):
		msg = fmt.Sprintf("path %q is not a regular file", e.Path)
	case errors.Is(e.Err, unix.ENOTDIR):
		msg = fmt.Sprintf("path %q: a component is not a directory", e.Path)
	case errors.Is(e.Err, unix.EISDIR):
		msg = fmt.Sprintf("path %q is a directory", e.Path)
	case errors.Is(e.Err, unix.EACCES), errors.Is(e.Err, unix.EPERM):
		msg = fmt.Sprintf("path %q: permission denied", e.Path)
	case errors.Is(e.Err, unix.ELOOP):
		msg = fmt.Sprintf("path %q: too many levels of symbolic links, or a link that is not allowed here", e.Path)
	default:
		msg = fmt.Sprintf("path %q: %v", e.Path, e.Err)
	}
	if e.Detail != "" {
		msg += " (" + e.Detail + ")"
	}
	return msg
}

func (e *PathError) Unwrap() error { return e.Err }

// Root is a directory that paths are confined to, held open by an O_PATH fd.
type Root struct {
	fd int
	// dir is the root as configured; real is what the kernel says it is
	// (symlinks in its own path resolved). Absolute user paths are
	// accepted under either.
	dir, real string
	// patterns are the policy's protect patterns below the root, relative
	// to it (SetProtected).
	patterns []string
}

// SetProtected makes the root refuse to create or change what the
// patterns (relative to the root, "**" for any number of directories)
// match, and anything below a match, as it refuses .git.
func (r *Root) SetProtected(patterns []string) { r.patterns = patterns }

// protects reports whether rel (resolved, relative to the root) is a
// protected place: .git and a bare repository's code (isProtected), or a
// match of the policy's patterns, or anything below one. Invariant: a
// nested project's agent file that does not exist yet (a pattern cannot
// bind it read-only) is refused here by name before a byte is written,
// with the error the read-only mount gives one that exists.
func (r *Root) protects(rel string) bool {
	if isProtected(rel) {
		return true
	}
	if len(r.patterns) == 0 || rel == "." || rel == "" {
		return false
	}
	parts := strings.Split(rel, "/")
	for _, p := range r.patterns {
		pat := strings.Split(p, "/")
		for k := 1; k <= len(parts); k++ {
			if matchParts(pat, parts[:k]) {
				return true
			}
		}
	}
	return false
}

// OpenRoot opens dir as a confinement root. dir itself comes from the
// policy (trusted); it must be an absolute path to a directory.
func OpenRoot(dir string) (*Root, error) {
	if !path.IsAbs(dir) {
		return nil, fmt.Errorf("workspace %q is not an absolute path", dir)
	}
	dir = path.Clean(dir)
	fd, err := openat2(unix.AT_FDCWD, dir, unix.O_PATH|unix.O_DIRECTORY, 0,
		// Even the trusted root is not taken through a magic link.
		unix.RESOLVE_NO_MAGICLINKS)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	r := &Root{fd: fd, dir: dir, real: dir}
	if real, err := fdPath(fd); err == nil {
		r.real = real
	}
	return r, nil
}

// Close releases the root's fd.
func (r *Root) Close() error {
	if r == nil || r.fd < 0 {
		return nil
	}
	err := unix.Close(r.fd)
	r.fd = -1
	return err
}

// Dir is the root's path as configured.
func (r *Root) Dir() string { return r.dir }

// Rel turns a user path into a clean path relative to the root. An absolute
// path is accepted only when it names the root or something under it; a
// path that climbs out with ".." is refused here, before the kernel sees
// it, so that the message is clear. The kernel check (RESOLVE_BENEATH) still
// applies to whatever Rel returns.
func (r *Root) Rel(p string) (string, error) {
	if strings.ContainsRune(p, 0) {
		return "", &PathError{Path: p, Err: unix.EINVAL, Detail: "contains a NUL byte"}
	}
	if p == "" {
		return ".", nil
	}
	rel := p
	if path.IsAbs(p) {
		c := path.Clean(p)
		switch {
		case c == r.dir || c == r.real:
			return ".", nil
		case strings.HasPrefix(c, r.dir+"/") && r.dir != "/":
			rel = c[len(r.dir)+1:]
		case strings.HasPrefix(c, r.real+"/") && r.real != "/":
			rel = c[len(r.real)+1:]
		case r.dir == "/":
			rel = strings.TrimPrefix(c, "/")
		default:
			// An absolute path elsewhere is an error, not re-rooted:
			// "/etc/passwd" must not silently mean "<ws>/etc/passwd".
			return "", &PathError{Path: p, Err: ErrOutsideWorkspace}
		}
	}
	rel = path.Clean(rel)
	if rel == ".." || strings.HasPrefix(rel, "../") {
		return "", &PathError{Path: p, Err: ErrOutsideWorkspace}
	}
	return rel, nil
}

// resolveFlags confine every lookup below the root (see the package
// comment at the top of this file).
const resolveFlags = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS

// open opens the user path p (relative or absolute, see Rel) below the root.
// Symlinks are followed only while they stay below the root.
func (r *Root) open(p string, flags int, mode uint32) (int, string, error) {
	rel, err := r.Rel(p)
	if err != nil {
		return -1, "", err
	}
	fd, err := openat2(r.fd, rel, flags, mode, resolveFlags)
	if err != nil {
		return -1, rel, pathErr(p, err)
	}
	return fd, rel, nil
}

// openNoFollow opens rel (already clean and relative, as built by a walk)
// with no symlink at all on the way: a directory swapped for a symlink
// during a walk makes this fail (ELOOP) instead of leading elsewhere.
func (r *Root) openNoFollow(rel string, flags int) (int, error) {
	return openat2(r.fd, rel, flags|unix.O_NOFOLLOW, 0, resolveFlags|unix.RESOLVE_NO_SYMLINKS)
}

// OpenFile opens a regular file below the root for reading. Non-regular
// files (FIFOs, devices, sockets) are refused without being opened for
// reading: the file is first opened O_PATH, checked, then reopened.
func (r *Root) OpenFile(p string) (*os.File, error) {
	fd, _, err := r.open(p, unix.O_PATH, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, pathErr(p, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFDIR:
		return nil, &PathError{Path: p, Err: unix.EISDIR}
	default:
		return nil, notRegular(p, &st)
	}
	// Reopen the very inode we checked (not the path again, which could
	// have been swapped meanwhile).
	rfd, err := reopen(fd, unix.O_RDONLY|unix.O_NOCTTY)
	if err != nil {
		return nil, pathErr(p, err)
	}
	return os.NewFile(uintptr(rfd), p), nil
}

// OpenDir opens a directory below the root for reading its entries and
// returns it with its clean relative path.
func (r *Root) OpenDir(p string) (*os.File, string, error) {
	fd, rel, err := r.open(p, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, "", err
	}
	return os.NewFile(uintptr(fd), p), rel, nil
}

// MkdirAll creates the directory p and its parents, one component at a
// time: each mkdirat(2) is relative to a parent directory fd opened below
// the root, and mkdir never follows a symlink in its last component, so no
// directory is created outside, nor in a protected place.
func (r *Root) MkdirAll(p string) error {
	rel, err := r.Rel(p)
	if err != nil {
		return err
	}
	if rel == "." {
		return nil
	}
	parts := strings.Split(rel, "/")
	for i := range parts {
		parent := "."
		if i > 0 {
			parent = strings.Join(parts[:i], "/")
		}
		pfd, err := openat2(r.fd, parent, unix.O_PATH|unix.O_DIRECTORY, 0, resolveFlags)
		if err != nil {
			return pathErr(p, err)
		}
		// Where the new directory would really be (the parent may have
		// been reached through a symlink inside the workspace): never in
		// a protected place.
		if real, err := r.RelOf(pfd); err != nil || r.protects(joinRel(real, parts[i])) {
			unix.Close(pfd)
			if err != nil {
				return &PathError{Path: p, Err: ErrOutsideWorkspace}
			}
			return &PathError{Path: p, Err: ErrProtectedPath}
		}
		err = unix.Mkdirat(pfd, parts[i], 0o755)
		unix.Close(pfd)
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return pathErr(p, err)
		}
	}
	return nil
}

// RelOf returns where the open file fd really is, relative to the root, as
// the kernel sees it now (/proc/self/fd). It is how a write checks that a
// path which went through symlinks did not land on a protected file.
func (r *Root) RelOf(fd int) (string, error) {
	real, err := fdPath(fd)
	if err != nil {
		return "", err
	}
	switch {
	case real == r.real:
		return ".", nil
	case r.real == "/":
		return strings.TrimPrefix(real, "/"), nil
	case strings.HasPrefix(real, r.real+"/"):
		return real[len(r.real)+1:], nil
	}
	return "", ErrOutsideWorkspace
}

// openat2 retries the transient EAGAIN that RESOLVE_BENEATH returns when a
// rename races with a ".." lookup, and EINTR.
func openat2(dirfd int, p string, flags int, mode uint32, resolve uint64) (int, error) {
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(mode), Resolve: resolve}
	var err error
	for i := 0; i < 32; i++ {
		var fd int
		fd, err = unix.Openat2(dirfd, p, &how)
		if err == nil {
			return fd, nil
		}
		if err != unix.EAGAIN && err != unix.EINTR {
			break
		}
	}
	if err == unix.ENOSYS {
		return -1, fmt.Errorf("openat2 is not available (Linux 5.6 or newer is required): %w", err)
	}
	return -1, err
}

// reopen opens the inode behind fd again with new flags, through its
// /proc/self/fd entry (the one magic link we follow on purpose: it names
// our own fd).
func reopen(fd int, flags int) (int, error) {
	return unix.Open("/proc/self/fd/"+strconv.Itoa(fd), flags|unix.O_CLOEXEC, 0)
}

func fdPath(fd int) (string, error) {
	return os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
}

// pathErr maps an errno from a confined lookup to a *PathError.
func pathErr(p string, err error) error {
	switch {
	case errors.Is(err, unix.EXDEV):
		// RESOLVE_BENEATH: the lookup would have left the root.
		return &PathError{Path: p, Err: ErrOutsideWorkspace, Detail: "it resolves through a symlink or \"..\" to a place outside"}
	case errors.Is(err, unix.ENOENT):
		return &PathError{Path: p, Err: fs.ErrNotExist}
	case errors.Is(err, unix.EROFS):
		return &PathError{Path: p, Err: ErrProtectedPath}
	}
	return &PathError{Path: p, Err: err}
}

// readOnlyMount reports whether fd is on a read-only mount: how the mount
// layer enforces the policy's protected paths (and the read-only host root).
func readOnlyMount(fd int) bool {
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err != nil {
		return false
	}
	return st.Flags&unix.ST_RDONLY != 0
}

// isProtected reports whether a write to rel (relative to the workspace)
// is refused whatever the policy says. A write into a git directory is code
// execution on the host the next time git runs there: a hook, a config with
// core.fsmonitor / core.hooksPath, or a "commondir", "config.worktree",
// "worktrees/<x>/..." or gitfile that sends git to a config the agent wrote.
// So, in the whole workspace (nested repositories too):
//
//   - everything at or below a directory named ".git" is refused, which also
//     covers submodules (".git/modules/<name>/") and linked worktrees;
//   - a file named ".git" is refused: a gitfile ("gitdir: ../evil") can
//     redirect git to a directory the agent made;
//   - in a bare repository ("x.git"), its hooks and worktrees, and any
//     config, config.worktree or commondir below it (its submodules' too),
//     are refused.
//
// Names are compared case-insensitively: on a case-insensitive (casefold)
// file system ".GIT/config" is ".git/config". The policy's own protected
// paths (and the built-in profiles' read-only .git) are read-only mounts,
// refused through readOnlyMount.
func isProtected(rel string) bool {
	parts := strings.Split(rel, "/")
	for i, p := range parts {
		// Security: .git itself, anything under it, and a gitfile.
		if strings.EqualFold(p, ".git") {
			return true
		}
		if len(p) <= len(".git") || !strings.EqualFold(p[len(p)-len(".git"):], ".git") {
			continue
		}
		// Security: a bare repository's code-executing files.
		for j := i + 1; j < len(parts); j++ {
			q := parts[j]
			if strings.EqualFold(q, "hooks") || strings.EqualFold(q, "worktrees") {
				return true
			}
			if j == len(parts)-1 && (strings.EqualFold(q, "config") || strings.EqualFold(q, "config.worktree") || strings.EqualFold(q, "commondir")) {
				return true
			}
		}
	}
	return false
}
