package sandbox

// int nsbox_idle_release_start(long delay_ms);
// int nsbox_idle_served(void);
// int nsbox_idle_release_now(void);
import "C"

import (
	"context"
	"time"

	"github.com/nsbox/nsbox/pkg/ipc"
	"golang.org/x/sys/unix"
)

// An idle worker's memory.
//
// A worker that has served nothing yet (a pooled session, or any session
// between its start and its first command) keeps mapped nearly every page
// of the binary: the Go runtime's start and the package inits walk most of
// the text and the read-only data (moduledata, pclntab, itabs), and the
// kernel maps a file's pages in large folios. Those pages are the page
// cache's, shared with the supervisor and every other worker, but each
// mapping costs the worker page tables and counts in its proportional set
// size (PSS): about 12 MB mapped per worker, over a megabyte of PSS in a pool
// of eight. When a Pool's session has waited unused for idleRelease, the
// Pool tells its worker (typeIdle), and a C thread of the worker
// (idlerelease.c) unmaps the binary's pages that hold no private data; they come back as minor faults from the page cache where
// the worker runs again. The price is paid once, by the first command of a
// session that sat idle: about 0.1 ms more on an Exec of /bin/true
// (BenchmarkPoolExec's pool, left idle past idleRelease before each call:
// 1.25x to 1.32x a bare fork+exec), for about a mebibyte of PSS less per
// idle session (BenchmarkPoolIdlePSS: 2.47 to 1.49 MiB).

// idleRelease is how long a pooled session waits unused before the Pool
// tells its worker so (typeIdle). Only a Pool sends it, only to a session
// still in it: a session used at once (`nsbox run`, Start then Exec) starts
// no thread and releases nothing, so neither its start nor its commands
// are slowed.
const idleRelease = 100 * time.Millisecond

// idleSettle is how long the release thread waits before it releases: the
// main thread that started it goes back to waiting meanwhile, and runs no
// code after the release that would map pages back.
const idleSettle = 20 * time.Millisecond

// idle handles typeIdle, on the main thread (HandleDirect): unless a
// command came already, it starts idlerelease.c's thread, which inherits
// this thread's filters and empty capability sets, and releases after
// idleSettle unless an execute came meanwhile (markServed).
func (w *worker) idle(ctx context.Context, req *ipc.Request) (any, error) {
	closeInts(req.FDs)
	if !w.served && !w.releasing {
		w.releasing = true
		if w.setup.Landlock {
			// Not from this thread under the Landlock backend: it is
			// in the commands' Landlock domain, and a thread made here
			// would be too, where the signal scope lets a command's
			// kill(2) of its thread id (a SIGKILL ends the whole
			// worker) through. Another Go thread is in the worker's
			// own domain.
			go startIdleRelease()
		} else {
			startIdleRelease() // best effort
		}
	}
	return nil, nil
}

// startIdleRelease starts idlerelease.c's thread.
func startIdleRelease() error {
	if rc := C.nsbox_idle_release_start(C.long(idleSettle.Milliseconds())); rc != 0 {
		return unix.Errno(rc)
	}
	return nil
}

// markServed tells idlerelease.c's thread that the worker is in use: it
// releases nothing then.
func markServed() { C.nsbox_idle_served() }

// notifyIdle tells the session's worker that it sits unused in a pool
// (Pool, idleRelease).
func (s *Session) notifyIdle() {
	if s.peer != nil {
		s.peer.Notify(typeIdle, nil)
	}
}

// releaseNow runs idlerelease.c's release on this thread, at once; it
// returns how many mappings it released. For tests.
func releaseNow() int { return int(C.nsbox_idle_release_now()) }
