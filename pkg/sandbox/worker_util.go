package sandbox

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Small helpers of the worker: paths and fds.

// dirError is a working directory that checkDir's check refused.
type dirError struct{ err error }

func (e *dirError) Error() string { return e.err.Error() }
func (e *dirError) Unwrap() error { return e.err }

// checkDir makes sure the working directory resolves inside the sandbox
// root without a magic link: a /proc/self/fd/N path that names a directory
// outside the root is refused (CVE-2024-21626 class).
func checkDir(dir string) error {
	if !strings.HasPrefix(dir, "/") {
		return fmt.Errorf("not an absolute path")
	}
	// The worker's helper thread (dircheck.c), when it runs: the same
	// openat2, without a goroutine hand-off.
	if handled, err := checkDirHelper(dir); handled {
		return err
	}
	// On another goroutine, so another thread: the main thread, which
	// commands are forked from, has openat2 denied (the command filter).
	// A locked thread only ever runs its own goroutine.
	done := make(chan error, 1)
	go func() { done <- checkDirOpenat2(dir) }()
	return <-done
}

func checkDirOpenat2(dir string) error {
	if !strings.HasPrefix(dir, "/") {
		return fmt.Errorf("not an absolute path")
	}
	fd, err := unix.Openat2(unix.AT_FDCWD, dir, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return err
	}
	unix.Close(fd)
	return nil
}

func lookPath(name, pathEnv string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	var lastErr error = errNotFound
	for _, dir := range strings.Split(pathEnv, ":") {
		if dir == "" {
			dir = "."
		}
		p := dir + "/" + name
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil || st.Mode&unix.S_IFMT == unix.S_IFDIR {
			continue
		}
		if err := unix.Access(p, unix.X_OK); err != nil {
			lastErr = err
			continue
		}
		return p, nil
	}
	return "", lastErr
}

func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

func closeInts(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

func intsToUintptrs(in []int) []uintptr {
	out := make([]uintptr, len(in))
	for i, v := range in {
		out[i] = uintptr(v)
	}
	return out
}

// closeLeakedFDs closes every fd above keep that is not close-on-exec.
func closeLeakedFDs(keep int) {
	d, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	var fds []int
	buf := make([]byte, 4096)
	for {
		n, err := unix.ReadDirent(d, buf)
		if err != nil || n <= 0 {
			break
		}
		_, _, names := unix.ParseDirent(buf[:n], -1, nil)
		for _, name := range names {
			if fd, err := strconv.Atoi(name); err == nil && fd > keep && fd != d {
				fds = append(fds, fd)
			}
		}
	}
	unix.Close(d)
	for _, fd := range fds {
		if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && fl&unix.FD_CLOEXEC == 0 {
			unix.Close(fd)
		}
	}
}

// joinSessionKeyring gives this thread, the one every command is forked
// from, a new anonymous session keyring (keyctl(2)
// KEYCTL_JOIN_SESSION_KEYRING with no name), as runc gives a container.
// Keyrings belong to no namespace: without this every sandbox inherits
// the caller's session keyring (a login's, with its keys) and possesses
// it, so where the seccomp profile allows keyctl (--seccomp unconfined, a
// profile of the user's) a command read and linked the caller's keys,
// and one pooled call left a key the next call found (review 68). The
// default profile refuses keyctl as well. Where the kernel or an outer
// filter refuses the call (ENOSYS, EPERM, EACCES), commands cannot call
// keyctl either, and there is nothing to protect.
func joinSessionKeyring() error {
	_, _, e := unix.RawSyscall(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0)
	switch e {
	case 0, unix.ENOSYS, unix.EPERM, unix.EACCES:
		return nil
	}
	return e
}
