package script

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/nsbox/nsbox/pkg/rmtree"
	"golang.org/x/sys/unix"
)

// workDirPrefix names a script's work directory in the temp directory:
// nsbox-script-<pid of the nsbox that made it>-<random>.
const workDirPrefix = "nsbox-script-"

// workDir is a script's fresh work directory, held by a shared flock for as
// long as its nsbox runs: an nsbox killed with SIGKILL cannot remove it,
// and a later one does (removeStaleWorkDirs).
type workDir struct {
	path string
	lock *os.File
}

// newWorkDir removes the work directories of killed nsbox processes, then
// makes this run's: 0700 by mkdtemp (unpredictable name, O_EXCL).
func newWorkDir() (*workDir, error) {
	removeStaleWorkDirs()
	dir, err := os.MkdirTemp("", workDirPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, fmt.Errorf("script: work directory: %w", err)
	}
	lock, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err == nil {
		err = unix.Flock(int(lock.Fd()), unix.LOCK_SH|unix.LOCK_NB)
	}
	if err != nil {
		if lock != nil {
			lock.Close()
		}
		os.RemoveAll(dir)
		return nil, fmt.Errorf("script: work directory: %w", err)
	}
	return &workDir{path: dir, lock: lock}, nil
}

// remove deletes the directory (also what the script made unreadable),
// then lets go of its lock.
func (w *workDir) remove() {
	rmtree.All(w.path)
	w.lock.Close()
}

// removeStaleWorkDirs deletes the work directories whose nsbox is gone. The
// temp directory is shared with every user, so only a directory that is
// ours (owner, not a symlink) is touched, and only when nobody holds its
// lock: the pid in the name means something only in its maker's PID
// namespace, and a live script of another namespace still holds the lock.
// rmtree.All never follows a symlink the script left inside.
func removeStaleWorkDirs() {
	tmp := os.TempDir()
	ents, err := os.ReadDir(tmp)
	if err != nil {
		return
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), workDirPrefix)
		if !ok || !e.IsDir() { // IsDir from the entry type: a symlink is not one
			continue
		}
		pidStr, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if !ok || err != nil || pid <= 0 || pidAlive(pid) {
			continue
		}
		dir := filepath.Join(tmp, e.Name())
		f, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Fstat(int(f.Fd()), &st) != nil || int(st.Uid) != os.Geteuid() ||
			unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
			f.Close()
			continue
		}
		rmtree.All(dir)
		f.Close()
	}
}

func pidAlive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}
