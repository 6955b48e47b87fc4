package mounts

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// The build's owner thread: what the root build creates belongs to the
// sandbox (Plan.Owner), also while the worker still runs as host ids.

// asOwner runs fn with the file system ids of Plan.Owner, on a thread
// kept for the build (ownerThread): setfsuid(2) is per thread, and the ids
// it replaces, host ids the sandbox's namespace does not map, could not be
// named to set them back. Called on that thread (fn nests), it runs fn
// there. Each call is a hand-off between threads, so Build gives it whole
// steps.
func (b *builder) asOwner(fn func() error) error {
	if b.plan.Owner == nil || b.onOwner {
		return fn()
	}
	if b.owner == nil {
		b.owner = make(chan ownerCall)
		started := make(chan error, 1)
		go ownerThread(*b.plan.Owner, b.owner, started)
		if err := <-started; err != nil {
			b.owner = nil
			return err
		}
	}
	done := make(chan error, 1)
	b.owner <- ownerCall{func() error {
		// Written and read on the owner thread only, while the
		// caller waits on done.
		b.onOwner = true
		defer func() { b.onOwner = false }()
		return fn()
	}, done}
	return <-done
}

type ownerCall struct {
	fn   func() error
	done chan error
}

// ownerThread runs calls with o's file system ids until calls is closed.
// Its thread is never unlocked: it exits with the goroutine, and no other
// goroutine ever runs with these ids.
func ownerThread(o Owner, calls chan ownerCall, started chan<- error) {
	runtime.LockOSThread()
	unix.Setfsgid(int(o.GID))
	unix.Setfsuid(int(o.UID))
	// setfsuid(2) reports no error: read the ids back.
	if g, _ := unix.SetfsgidRetGid(-1); g != int(o.GID) {
		started <- fmt.Errorf("setfsgid %d: refused", o.GID)
		return
	}
	if u, _ := unix.SetfsuidRetUid(-1); u != int(o.UID) {
		started <- fmt.Errorf("setfsuid %d: refused", o.UID)
		return
	}
	started <- nil
	for c := range calls {
		c.done <- c.fn()
	}
}
