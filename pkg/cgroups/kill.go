package cgroups

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// killTimeout bounds how long Kill/Destroy wait for a group to empty.
const killTimeout = 5 * time.Second

// member tells whether a process (its /proc/<pid>/cgroup) is in our group.
type member func(pc procCgroups) bool

// inGroup returns a member check for cgroup path cg (as /proc/<pid>/cgroup
// shows it) in v1 controller ctrl, or in v2 when ctrl is "".
func inGroup(ctrl, cg string) member {
	return func(pc procCgroups) bool {
		p := pc.v2
		if ctrl != "" {
			p = pc.v1[ctrl]
		}
		return p == cg || strings.HasPrefix(p, cg+"/")
	}
}

// groupTree returns dir and the groups below it, parents first. cgroupfs
// (kernfs) keeps a directory's link count at 2 + its subdirectories, so the
// common case, a group without children, costs one stat instead of a
// directory listing.
func groupTree(dir string) []string {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return nil
	}
	if st.Nlink <= 2 {
		return []string{dir}
	}
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	return dirs
}

// hasChildren reports whether a cgroup directory has child groups (see
// groupTree); true when unsure.
func hasChildren(dir string) bool {
	var st unix.Stat_t
	return unix.Stat(dir, &st) != nil || st.Nlink > 2
}

// readPids lists the pids in the cgroup.procs files of dirs and of the
// groups below them.
func readPids(dirs []string) []int {
	var out []int
	seen := map[int]bool{}
	for _, d := range dirs {
		for _, g := range groupTree(d) {
			for _, f := range readFields(filepath.Join(g, "cgroup.procs")) {
				if n, err := strconv.Atoi(f); err == nil && !seen[n] {
					seen[n] = true
					out = append(out, n)
				}
			}
		}
	}
	return out
}

// sigkill kills pid only if it is still in our group. A pidfd pins the
// process: once opened, the pid cannot be recycled under us, so a pid read
// from cgroup.procs that exited and was reused by an unrelated process is
// never signalled.
func sigkill(pid int, in member) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil
		}
		if errors.Is(err, unix.ENOSYS) {
			return sigkillNoPidfd(pid, in)
		}
		return err
	}
	defer unix.Close(fd)
	pc, err := readProcCgroups(strconv.Itoa(pid))
	if err != nil || !in(pc) {
		return nil // gone, or no longer ours: leave it alone
	}
	err = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	return err
}

// sigkillNoPidfd is for kernels before 5.3 (no pidfd): a small pid-reuse
// window remains between the check and the kill.
func sigkillNoPidfd(pid int, in member) error {
	pc, err := readProcCgroups(strconv.Itoa(pid))
	if err != nil || !in(pc) {
		return nil
	}
	if err := unix.Kill(pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
		return err
	}
	return nil
}

// killLoop SIGKILLs every member of dirs until none is left or killTimeout
// passes. freeze, if not nil, is called with true before a round and false
// after it: frozen processes cannot fork or exit, so a round sees a stable
// set. Processes are not reaped here (their parents do that).
func killLoop(dirs []string, in member, freeze func(bool) error) error {
	deadline := time.Now().Add(killTimeout)
	delay := 100 * time.Microsecond
	var lastErr error
	for {
		pids := readPids(dirs)
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d process(es) still running after %v (last error: %v)", len(pids), killTimeout, lastErr)
		}
		if freeze != nil {
			if err := freeze(true); err == nil {
				pids = readPids(dirs) // the set is stable now
			}
		}
		for _, pid := range pids {
			if err := sigkill(pid, in); err != nil {
				lastErr = err
			}
		}
		if freeze != nil {
			_ = freeze(false) // SIGKILL is delivered on thaw
		}
		time.Sleep(delay)
		if delay < 10*time.Millisecond {
			delay *= 2
		}
	}
}

// waitEmpty polls until no process is left in dirs (killTimeout at most).
func waitEmpty(dirs []string) error {
	deadline := time.Now().Add(killTimeout)
	delay := 50 * time.Microsecond
	for {
		pids := readPids(dirs)
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d process(es) still running after %v", len(pids), killTimeout)
		}
		time.Sleep(delay)
		if delay < 10*time.Millisecond {
			delay *= 2
		}
	}
}

// removeTree removes dir and the groups below it, deepest first (cgroupfs
// files vanish with their directory). EBUSY (tasks still exiting) is
// retried until killTimeout.
func removeTree(dir string) error {
	dirs := groupTree(dir)
	deadline := time.Now().Add(killTimeout)
	for i := len(dirs) - 1; i >= 0; i-- {
		delay := 50 * time.Microsecond
		for {
			err := unix.Rmdir(dirs[i])
			if err == nil || errors.Is(err, unix.ENOENT) {
				break
			}
			if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
				return &CleanupError{Path: dirs[i], Err: err}
			}
			time.Sleep(delay)
			if delay < 10*time.Millisecond {
				delay *= 2
			}
		}
	}
	return nil
}

// writeFile writes a cgroupfs control file (no O_CREAT, no truncation
// games: cgroupfs files exist or the feature is missing).
func writeFile(path, data string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
