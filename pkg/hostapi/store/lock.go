package store

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
	"time"
)

// fileLock serialises the processes using one store, through a lock file
// next to it (NAME.lock) held with flock(2) around each operation.
//
// bbolt locks the database file too, but it waits by polling every 50 ms:
// a process that writes in a loop re-takes the lock within microseconds of
// releasing it and starves the others (measured: another writer got in
// once per 50 writes). A blocking flock waits in the kernel, which wakes
// the waiter as soon as the lock is released, so processes interleave.
// bbolt's own lock stays as the backstop against other programs.
type fileLock struct {
	f *os.File
}

// lockFile takes the lock at path (exclusive for writers, shared for
// readers), waiting at most timeout. It returns nil, nil when the lock file
// cannot be created for lack of permission (a reader of a store in a
// directory it cannot write): bbolt's lock then protects the operation.
func lockFile(path string, exclusive bool, timeout time.Duration) (*fileLock, error) {
	// O_NOFOLLOW: the lock file's name cannot be turned into a symlink that
	// makes the host create or open another file.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
			return nil, nil
		}
		if errors.Is(err, syscall.ELOOP) {
			return nil, &CorruptError{Path: path, Reason: "it is a symbolic link, which nsbox does not follow"}
		}
		return nil, err
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	fd := int(f.Fd())
	if err := syscall.Flock(fd, how|syscall.LOCK_NB); err == nil {
		return &fileLock{f: f}, nil
	} else if !errors.Is(err, syscall.EWOULDBLOCK) {
		f.Close()
		return nil, err
	}
	done := make(chan error, 1)
	go func() {
		for {
			err := syscall.Flock(fd, how)
			if !errors.Is(err, syscall.EINTR) {
				done <- err
				return
			}
		}
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			f.Close()
			return nil, err
		}
		return &fileLock{f: f}, nil
	case <-t.C:
		// A blocked flock cannot be cancelled: let it finish in the
		// background and release the lock at once by closing the file.
		go func() {
			<-done
			f.Close()
		}()
		return nil, errLockTimeout
	}
}

var errLockTimeout = errors.New("lock timeout")

func (l *fileLock) unlock() {
	if l != nil {
		l.f.Close() // closing the last fd releases the flock
	}
}

// lockStore takes the store's lock (lockFile at path) through a turnstile
// (path+".turn"): a writer holds the turnstile exclusively while it waits
// for the lock, and a reader passes through it, exclusively too, only for
// as long as it takes its shared lock. flock(2) grants a shared lock
// whenever no exclusive one is held, a writer waiting or not: readers of
// other processes overlapping without pause (two loops of nsbox call
// memory list from a sandbox) kept every writer out until its timeout,
// the user's own nsbox memory delete among them (review 50). With the
// turnstile no reader starts while a writer waits, and the writer gets
// the lock once the readers already in are done.
func lockStore(path string, exclusive bool, timeout time.Duration) (*fileLock, error) {
	deadline := time.Now().Add(timeout)
	turn, err := lockFile(path+".turn", true, timeout)
	if err != nil {
		return nil, err
	}
	defer turn.unlock() // nil (a directory it cannot write): no turnstile
	return lockFile(path, exclusive, max(time.Until(deadline), time.Millisecond))
}
