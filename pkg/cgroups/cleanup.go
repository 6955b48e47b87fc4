package cgroups

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// CleanupStale removes the groups that an nsbox supervisor left behind when
// it was killed (SIGKILL, OOM, power cut of the process): nsbox-<pid>-*
// groups under the caller's current cgroup in each hierarchy, whose pid is
// not a live process. Processes still inside are killed first. Call it at
// the start of every run; it is cheap (one directory listing per hierarchy).
//
// A dead supervisor's pid that was reused by a live process keeps its groups
// until that process ends too: they are only ever removed, never reused.
func CleanupStale() (removed int, err error) {
	h := getMounts()
	pc, err := readProcCgroups("self")
	if err != nil {
		return 0, nil // no /proc: nothing we could have created either
	}
	type parent struct {
		dir  string
		ctrl string // v1 controller, "" for v2
		cg   string // the parent's path as /proc/<pid>/cgroup shows it
	}
	var parents []parent
	seen := map[string]bool{}
	addParent := func(dir, ctrl, cg string) {
		if !seen[dir] {
			seen[dir] = true
			parents = append(parents, parent{dir, ctrl, cg})
		}
	}
	if dir, ok := hostDir(h.v2, pc.v2); ok {
		addParent(dir, "", pc.v2)
		if filepath.Base(dir) == supName(os.Getpid()) {
			addParent(filepath.Dir(dir), "", filepath.Dir(pc.v2))
		}
	}
	for _, c := range v1Controllers {
		if dir, ok := hostDir(h.v1[c], pc.v1[c]); ok {
			addParent(dir, c, pc.v1[c])
		}
	}
	self := os.Getpid()
	var errs []error
	for _, p := range parents {
		if !hasChildren(p.dir) {
			continue // no child group at all: skip the listing
		}
		entries, rerr := os.ReadDir(p.dir)
		if rerr != nil {
			continue
		}
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			pid, sup, ok := parseGroupName(e.Name())
			if !ok || pid == self || alive(pid) {
				continue // only a dead supervisor's groups are touched
			}
			dir := filepath.Join(p.dir, e.Name())
			// Invariant: a group whose supervisor still holds its lock is
			// never touched. The pid in the name means something only in
			// the supervisor's PID namespace: a run started in another
			// one (a container, unshare -p) sees it dead, and would kill a
			// live sandbox (reproduced) or wait 5 s on its invisible
			// processes.
			lock, held := tryLockGroup(dir)
			if held {
				continue
			}
			if sup {
				// A dead supervisor's own leaf: other processes of the program
				// that embedded it may live on there. Never kill them; remove
				// the leaf only once it is empty.
				if unix.Rmdir(dir) == nil {
					removed++
				}
				releaseGroups([]int{lock})
				continue
			}
			cg := strings.TrimSuffix(p.cg, "/") + "/" + e.Name()
			err := reap(dir, p.ctrl, cg)
			releaseGroups([]int{lock})
			if err != nil {
				errs = append(errs, err)
				continue
			}
			removed++
		}
	}
	return removed, errors.Join(errs...)
}

// holdGroup takes a shared flock on the group directory dir and returns the
// fd that holds it (close-on-exec, so no child keeps it) for as long as the
// group is ours. A dead supervisor's locks are gone with its fds.
func holdGroup(dir string) (int, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// tryLockGroup reports whether a live supervisor holds dir's lock; when it
// does not, the returned fd holds the lock exclusively (-1 if dir could not
// be opened: a group that vanished, or an old one without a lock).
func tryLockGroup(dir string) (fd int, held bool) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, false
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		unix.Close(fd)
		return -1, errors.Is(err, unix.EWOULDBLOCK)
	}
	return fd, false
}

// releaseGroups closes lock fds (-1 entries are skipped).
func releaseGroups(fds []int) {
	for _, fd := range fds {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

// reap kills what is left in a stale group and removes it.
func reap(dir, ctrl, cg string) error {
	var kerr error
	if ctrl == "" && writeFile(filepath.Join(dir, "cgroup.kill"), "1") == nil {
		kerr = waitEmpty([]string{dir})
	} else {
		var freeze func(bool) error
		if ctrl == ctrlFreezer {
			freeze = (&v1Backend{dirs: map[string]string{ctrlFreezer: dir}}).freezer()
		}
		kerr = killLoop([]string{dir}, inGroup(ctrl, cg), freeze)
	}
	if kerr != nil {
		return &CleanupError{Path: dir, Err: kerr}
	}
	return removeTree(dir)
}

// alive reports whether pid exists (EPERM: it exists but is not ours).
func alive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}
