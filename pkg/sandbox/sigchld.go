package sandbox

// int nsbox_sigchld_install(int fd);
import "C"

import "golang.org/x/sys/unix"

// installSigchld has every SIGCHLD of this process write to a new eventfd
// (sigchld.c) and returns it. The worker's main thread polls it and reaps.
func installSigchld() (int, error) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return -1, err
	}
	if rc := C.nsbox_sigchld_install(C.int(fd)); rc != 0 {
		unix.Close(fd)
		return -1, unix.Errno(rc)
	}
	return fd, nil
}
