package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nsbox/nsbox/pkg/rmtree"
)

// The memory and notepad stores of `nsbox mcp --http`'s sessions live in
// DATA/http-sessions/run-XXXX/SESSION: one run directory per server, with
// a lock file the server holds (flock) while it serves. A session's stores
// are removed when the session closes; a server killed with SIGKILL cannot
// do that, and what its sessions saved (text a model or a command chose to
// remember) stayed on disk for good. Each server now removes the run
// directories no live server holds before it serves.
const (
	httpStoresDir   = "http-sessions"
	httpRunPrefix   = "run-"
	httpStartPrefix = "start-"
	httpRunLock     = ".lock"
	httpRunStartup  = time.Minute
)

// openHTTPStores makes this server's run directory below dataDir, locked
// for as long as the returned release is not called, after removing the
// run directories of servers that are gone. dataDir is nsbox's own data
// directory, hidden in every sandbox.
//
// The directory is made as start-XXXX, its lock file created and locked,
// and only then renamed run-XXXX: a run directory is locked from the
// moment it has its name, so another server starting at the same time
// never takes a live one for a dead one (found by review: with mkdir,
// create and flock as three steps under the final name, a server starting
// in between removed the first one's stores).
func openHTTPStores(dataDir string) (run string, release func(), err error) {
	parent := filepath.Join(dataDir, httpStoresDir)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return "", nil, err
	}
	removeDeadHTTPRuns(parent)
	start, err := os.MkdirTemp(parent, httpStartPrefix)
	if err != nil {
		return "", nil, err
	}
	fd, err := unix.Open(filepath.Join(start, httpRunLock), unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err == nil {
		if err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
			unix.Close(fd)
		}
	}
	if err == nil {
		run = filepath.Join(parent, httpRunPrefix+strings.TrimPrefix(filepath.Base(start), httpStartPrefix))
		if err = os.Rename(start, run); err != nil {
			unix.Close(fd)
		}
	}
	if err != nil {
		rmtree.All(start)
		return "", nil, &os.PathError{Op: "lock", Path: start, Err: err}
	}
	return run, func() {
		rmtree.All(run)
		unix.Close(fd) // the lock goes with the last reference
	}, nil
}

// removeDeadHTTPRuns removes each run directory below parent whose lock no
// process holds: its server is gone. A start-XXXX directory is a server
// between its mkdir and its rename, removed only once it is unlocked and
// older than httpRunStartup (killed right there). What cannot be removed
// now is tried again by the next server.
func removeDeadHTTPRuns(parent string) {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range ents {
		starting := strings.HasPrefix(e.Name(), httpStartPrefix)
		if !e.IsDir() || !starting && !strings.HasPrefix(e.Name(), httpRunPrefix) {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		if starting {
			if info, ierr := e.Info(); ierr != nil || time.Since(info.ModTime()) < httpRunStartup {
				continue
			}
		}
		if !lockHeld(filepath.Join(dir, httpRunLock), starting) {
			rmtree.All(dir)
		}
	}
}

// lockHeld says whether a live server holds the lock file at path. A
// missing one counts as free only where absent says so (a start-XXXX
// directory killed before its lock file existed); anything but a regular
// file (a FIFO would block the open: O_NONBLOCK, then the type is checked;
// a symlink is not followed) counts as held: nsbox did not make it, and
// the directory is left alone (found by review).
func lockHeld(path string, absentIsFree bool) bool {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return !(errors.Is(err, unix.ENOENT) && absentIsFree)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return true
	}
	// A live server holds its lock: the try fails (EWOULDBLOCK).
	return unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil
}
