package sandbox

// #include <stdlib.h>
// int nsbox_cmd_spawn_init(void);
// int nsbox_cmd_spawn(const char *buf, size_t len, int argc, int envc, int *fds, int nfds, int *pid, int *pidfd);
import "C"

import (
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// initSpawnC readies cmdspawn.c's command start (it records which signals have
// a handler, which its child resets). It is called once, on the main thread,
// after the serve loop registered its signals.
func initSpawnC() error {
	if rc := C.nsbox_cmd_spawn_init(); rc != 0 {
		return unix.Errno(rc)
	}
	return nil
}

// spawnC starts a command through cmdspawn.c with a pidfd and a new session, as
// syscall.ForkExec with Setsid and PidFD would. ok is false when that path
// is not available (cmdspawn.c not initialized, or busy): the caller then uses
// syscall.ForkExec. It must run on the worker's main thread (see spawn).
func spawnC(path string, argv, env []string, dir string, files []uintptr) (pid, pidfd int, ok bool, err error) {
	n := len(path) + len(dir) + 2
	for _, s := range argv {
		n += len(s) + 1
	}
	for _, s := range env {
		n += len(s) + 1
	}
	buf := make([]byte, 0, n)
	for _, s := range [][]string{{path, dir}, argv, env} {
		for _, x := range s {
			if strings.IndexByte(x, 0) >= 0 {
				// What syscall.ForkExec answers for a string it cannot
				// pass to the kernel.
				return 0, -1, true, syscall.EINVAL
			}
			buf = append(buf, x...)
			buf = append(buf, 0)
		}
	}
	fds := make([]C.int, len(files)+1) // +1: never a zero-length array
	for i, f := range files {
		fds[i] = C.int(int(f))
	}
	var cpid, cpidfd C.int
	rc := C.nsbox_cmd_spawn((*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), C.int(len(argv)), C.int(len(env)),
		&fds[0], C.int(len(files)), &cpid, &cpidfd)
	switch {
	case rc < 0:
		return 0, -1, false, nil
	case rc > 0:
		return 0, -1, true, syscall.Errno(rc)
	}
	return int(cpid), int(cpidfd), true, nil
}
