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
	httpStoresDir  = "http-sessions"
	httpRunPrefix  = "run-"
	httpRunLock    = ".lock"
	httpRunStartup = time.Minute
)

// openHTTPStores makes this server's run directory below dataDir, locked
// for as long as the returned release is not called, after removing the
// run directories of servers that are gone. dataDir is nsbox's own data
// directory, hidden in every sandbox.
func openHTTPStores(dataDir string) (run string, release func(), err error) {
	parent := filepath.Join(dataDir, httpStoresDir)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return "", nil, err
	}
	removeDeadHTTPRuns(parent)
	run, err = os.MkdirTemp(parent, httpRunPrefix)
	if err != nil {
		return "", nil, err
	}
	fd, err := unix.Open(filepath.Join(run, httpRunLock), unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err == nil {
		if err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
			unix.Close(fd)
		}
	}
	if err != nil {
		rmtree.All(run)
		return "", nil, &os.PathError{Op: "lock", Path: run, Err: err}
	}
	return run, func() {
		rmtree.All(run)
		unix.Close(fd) // the lock goes with the last reference
	}, nil
}

// removeDeadHTTPRuns removes each run directory below parent whose lock no
// process holds: its server is gone. A directory without a lock file is a
// server between its mkdir and its lock, unless it is older than
// httpRunStartup (killed right there). What cannot be removed now is tried
// again by the next server.
func removeDeadHTTPRuns(parent string) {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), httpRunPrefix) {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		// O_NOFOLLOW: the lock file is opened, never what a link names.
		fd, err := unix.Open(filepath.Join(dir, httpRunLock), unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			if info, ierr := e.Info(); ierr == nil && time.Since(info.ModTime()) > httpRunStartup {
				rmtree.All(dir)
			}
			continue
		}
		if err != nil {
			continue
		}
		// A live server holds its lock: the try fails (EWOULDBLOCK).
		if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) == nil {
			rmtree.All(dir)
		}
		unix.Close(fd)
	}
}
