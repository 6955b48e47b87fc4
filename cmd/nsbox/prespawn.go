package main

/*
#cgo CFLAGS: -I${SRCDIR}/../../pkg/namespaces
#include <stdlib.h>

extern int nsbox_prespawn_pid, nsbox_prespawn_fd, nsbox_prespawn_hostnet, nsbox_prespawn_stage_pid, nsbox_prespawn_stage_fd;
int nsbox_fd_open_at_start(int fd);
int nsbox_prespawn_wanted(int argc, char **argv, int *hostnet);
int nsbox_prespawn_wait(void);
*/
import "C"

import (
	"os"
	"unsafe"

	"github.com/nsbox/nsbox/pkg/sandbox"
)

// fdOpenAtStart reports whether fd was open when nsbox started, before it
// opened any descriptor of its own (prespawn.c records fds 0-1023 when an
// argument holds "json-status"; a higher number is refused).
func fdOpenAtStart(fd int) bool {
	return C.nsbox_fd_open_at_start(C.int(fd)) != 0
}

// takePrespawned returns the worker prespawn.c started before the Go
// runtime, once; nil when it started none. It waits for the helper thread
// to finish the spawn (usually long done).
func takePrespawned() *sandbox.Prestarted {
	pid := int(C.nsbox_prespawn_wait())
	if pid <= 0 {
		return nil
	}
	C.nsbox_prespawn_pid = 0
	ch := os.NewFile(uintptr(C.nsbox_prespawn_fd), "nsbox-ipc")
	h := sandbox.PrestartHint{HostNetwork: C.nsbox_prespawn_hostnet != 0}
	if stage := int(C.nsbox_prespawn_stage_pid); stage > 0 {
		return sandbox.AdoptStagedWorker(pid, ch, h, stage, os.NewFile(uintptr(C.nsbox_prespawn_stage_fd), "stage"))
	}
	return sandbox.AdoptWorker(pid, ch, h)
}

// prespawnWanted is prespawn.c's reading of an argv, for tests.
func prespawnWanted(args []string) (wanted, hostNet bool) {
	argv := make([]*C.char, len(args)+1)
	for i, a := range args {
		argv[i] = C.CString(a)
		defer C.free(unsafe.Pointer(argv[i]))
	}
	var host C.int
	w := C.nsbox_prespawn_wanted(C.int(len(args)), &argv[0], &host)
	return w != 0, host != 0
}
