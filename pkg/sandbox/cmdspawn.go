package sandbox

// #include <stdlib.h>
// int nsbox_cmd_spawn_init(int drop);
// int nsbox_cmd_spawn(const char *buf, size_t len, int argc, int envc, int *fds, int nfds, int check_dir, int *pid, int *pidfd, int *bad_dir);
import "C"

import (
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// initSpawnC readies cmdspawn.c's command start (it records which signals have
// a handler, which its child resets). It is called once, on the main thread,
// after the serve loop registered its signals. With dropHandlers (a worker
// that is PID 1 of its PID namespace, where the kernel ignores a
// default-action signal sent to it) it first sets the signals the Go runtime
// does not need back to SIG_DFL, so that a command's start resets a dozen
// handlers, not sixty (cmdspawn.c, nsbox_cmd_spawn_init).
func initSpawnC(dropHandlers bool) error {
	drop := C.int(0)
	if dropHandlers {
		drop = 1
	}
	if rc := C.nsbox_cmd_spawn_init(drop); rc != 0 {
		return unix.Errno(rc)
	}
	return nil
}

// spawnC starts a command through cmdspawn.c with a pidfd and a new session, as
// syscall.ForkExec with Setsid and PidFD would. ok is false when that path
// is not available (cmdspawn.c not initialized, or busy, or checkDir without
// dircheck.c's helper): the caller then starts it another way. With
// checkDir, dir (absolute) gets checkDir's openat2 check from the helper
// while the child gets ready, and a refusal is a *dirError. It must run on
// the worker's main thread (see spawn).
func spawnC(path string, argv, env []string, dir string, files []uintptr, checkDir bool) (pid, pidfd int, ok bool, err error) {
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
	var cpid, cpidfd, badDir C.int
	check := C.int(0)
	if checkDir {
		check = 1
	}
	rc := C.nsbox_cmd_spawn((*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), C.int(len(argv)), C.int(len(env)),
		&fds[0], C.int(len(files)), check, &cpid, &cpidfd, &badDir)
	switch {
	case rc < 0:
		return 0, -1, false, nil
	case rc > 0 && badDir != 0:
		return 0, -1, true, &dirError{syscall.Errno(rc)}
	case rc > 0:
		return 0, -1, true, syscall.Errno(rc)
	}
	return int(cpid), int(cpidfd), true, nil
}
