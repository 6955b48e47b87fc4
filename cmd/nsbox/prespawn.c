// A head start for `nsbox run`: its worker is spawned by this ELF
// constructor, before the supervisor's Go runtime starts, so that the two
// Go runtime starts (3 ms each on the benchmark host) run side by side on
// two CPUs instead of one after the other. The worker is the one
// namespaces.Spawn would start (pkg/namespaces/spawn.c does the work); it
// waits for its handshake on fd 3, and nsbox adopts it in runMain
// (sandbox.AdoptWorker) or, when the resolved policy asks for other
// namespaces, discards it and spawns another.
//
// The guess is made from argv alone and errs towards not spawning: only
// `nsbox run [flags] -- CMD...`, never with --help, --dry-run or
// --allow-privileged; `--net host` / `--net=host` is the only flag read.
// A wrong guess costs a wasted worker, never isolation: Start compares the
// worker's namespaces with the resolved policy before it adopts it.
//
// Nothing else happens here: no allocation, no environment change, and on
// any failure the constructor returns and Go does everything as before.
// The worker's parent death signal is tied to this (the main) thread,
// which the Go runtime never terminates while the process lives.

#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "spawn.h"

// Defined by pkg/namespaces. Weak only so that cgo's link check of this
// package alone succeeds; the binary's final link always binds it.
extern int nsbox_spawn(struct nsbox_spawn *a) __attribute__((weak));

// Read once by takePrespawned (prespawn.go).
int nsbox_prespawn_pid = 0; // > 0: a worker waits on nsbox_prespawn_fd
int nsbox_prespawn_fd = -1;
int nsbox_prespawn_hostnet = 0;

// prespawn_wanted says whether argv is a `run` that will start a worker,
// and whether it asks for the host's network.
int nsbox_prespawn_wanted(int argc, char **argv, int *hostnet) {
	*hostnet = 0;
	if (argc < 4 || strcmp(argv[1], "run") != 0)
		return 0;
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--") == 0)
			return i + 1 < argc;
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0 ||
		    strncmp(a, "--dry-run", 9) == 0 || strncmp(a, "--allow-privileged", 18) == 0)
			return 0;
		if (strcmp(a, "--net=host") == 0 || (strcmp(a, "--net") == 0 && i + 1 < argc && strcmp(argv[i + 1], "host") == 0))
			*hostnet = 1;
	}
	return 0; // no "--": a usage error follows
}

__attribute__((constructor)) static void nsbox_prespawn(int argc, char **argv, char **envp) {
	(void)envp;
	int hostnet;
	if (!nsbox_spawn || !nsbox_prespawn_wanted(argc, argv, &hostnet))
		return;
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return;
	char uid_map[40], gid_map[40];
	snprintf(uid_map, sizeof uid_map, "%u %u 1\n", getuid(), getuid());
	snprintf(gid_map, sizeof gid_map, "%u %u 1\n", getgid(), getgid());
	char *const wargv[] = {"nsbox-init", NULL};
	char *const wenvp[] = {"_NSBOX_INIT=1", NULL};
	struct nsbox_spawn a = {
		// /proc/self/exe: the very binary that is running.
		.path = "/proc/self/exe",
		.argv = wargv,
		.envp = wenvp,
		.flags = NSBOX_CLONE_FLAGS | (hostnet ? 0 : CLONE_NEWNET),
		.uid_map = uid_map,
		.gid_map = gid_map,
		.fds = {-1, -1, getenv("NSBOX_DEBUG_WORKER") ? 2 : -1, sv[1]},
		.ambient = getuid() != 0 ? NSBOX_WORKER_CAPS : 0,
	};
	int pid = nsbox_spawn(&a);
	close(sv[1]);
	if (pid < 0) {
		close(sv[0]);
		return;
	}
	nsbox_prespawn_pid = pid;
	nsbox_prespawn_fd = sv[0];
	nsbox_prespawn_hostnet = hostnet;
}
