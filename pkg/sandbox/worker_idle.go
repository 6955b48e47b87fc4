package sandbox

// int nsbox_idle_release_start(long delay_ms);
// int nsbox_idle_served(void);
// int nsbox_idle_release_now(void);
import "C"

import (
	"time"

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
// of eight. Once the worker has been idle for idleRelease after it began
// serving, a C thread (idlerelease.c) unmaps the binary's pages that hold no
// private data; they come back as minor faults from the page cache where
// the worker runs again. The price is paid once, by the first command of a
// session that sat idle: about 0.1 ms more on an Exec of /bin/true
// (BenchmarkPoolExec's pool, left idle past idleRelease before each call:
// 1.25x to 1.32x a bare fork+exec), for about a mebibyte of PSS less per
// idle session (BenchmarkPoolIdlePSS: 2.47 to 1.49 MiB).

// idleRelease is how long a worker that received nothing after its
// handshake waits before it releases its file mappings. A session used at
// once (`nsbox run`) has its command by then and keeps them: neither its
// start nor its commands are slowed.
const idleRelease = 100 * time.Millisecond

// startIdleRelease starts idlerelease.c's thread. Call it on the worker's
// main thread (the thread inherits its filters and empty capabilities).
func startIdleRelease() error {
	if rc := C.nsbox_idle_release_start(C.long(idleRelease.Milliseconds())); rc != 0 {
		return unix.Errno(rc)
	}
	return nil
}

// markServed tells idlerelease.c's thread that the worker is in use: it
// releases nothing then.
func markServed() { C.nsbox_idle_served() }

// releaseNow runs idlerelease.c's release on this thread, at once; it
// returns how many mappings it released. For tests.
func releaseNow() int { return int(C.nsbox_idle_release_now()) }
