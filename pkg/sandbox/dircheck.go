package sandbox

// #include <stdlib.h>
// int nsbox_dircheck_start(void);
// int nsbox_dircheck(const char *path);
import "C"

import (
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// startDirCheck starts dircheck.c's helper thread, which answers checkDir
// without a Go scheduler round trip. It must run on a thread other than the
// worker's main one: the helper inherits its creator's seccomp filters, and
// the main thread's command filter denies openat2. A failure leaves checkDir
// on its goroutine path.
func startDirCheck() error {
	done := make(chan C.int, 1)
	// A fresh goroutine: never on the main thread, which is locked to
	// the worker's own goroutine and runs no other.
	go func() { done <- C.nsbox_dircheck_start() }()
	if rc := <-done; rc != 0 {
		return unix.Errno(rc)
	}
	return nil
}

// checkDirHelper asks dircheck.c's helper thread. handled is false when
// the helper is not running.
func checkDirHelper(dir string) (handled bool, err error) {
	if strings.IndexByte(dir, 0) >= 0 {
		// What unix.Openat2 answers for a path it cannot pass to the
		// kernel.
		return true, unix.EINVAL
	}
	b := make([]byte, len(dir)+1)
	copy(b, dir)
	rc := C.nsbox_dircheck((*C.char)(unsafe.Pointer(&b[0])))
	switch {
	case rc < 0:
		return false, nil
	case rc > 0:
		return true, unix.Errno(rc)
	}
	return true, nil
}
