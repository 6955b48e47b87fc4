// The Landlock backend's worker confines itself here, in an ELF constructor,
// before the Go runtime starts its first extra thread.
//
// landlock_restrict_self(2) confines the calling thread only (until ABI 8's
// TSYNC flag, Linux 6.18 has ABI 7), and a Go program has several threads
// before main runs; the worker's tools (read_file, write_file, ...) run Go
// code on any of them. Restricted here, in the process's only thread, every
// thread the runtime creates afterwards inherits the domain, and so does
// every command.
//
// The supervisor built the ruleset (pkg/landlock.Build, each path opened by
// fd) and passes it as an inherited fd named by _NSBOX_LANDLOCK_FD; the
// worker's argv[0] is "nsbox-landlock-init". In any other process this
// constructor returns after one string compare. The outcome is left in
// nsbox_landlock_state for the worker's "confine with landlock" setup step,
// which fails the start unless it is 0.

#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_landlock_restrict_self
#define SYS_landlock_restrict_self 446 /* the same number on every architecture */
#endif

// Must equal landlockArg0 in landlock.go.
static const char landlock_arg0[] = "nsbox-landlock-init";

// -1: not a Landlock worker; 0: restricted; > 0: the errno that stopped it.
int nsbox_landlock_state = -1;

__attribute__((constructor)) static void nsbox_landlock_init(int argc, char **argv, char **envp)
{
	(void)envp;
	if (argc < 1 || argv == NULL || argv[0] == NULL || strcmp(argv[0], landlock_arg0) != 0)
		return;
	const char *v = getenv("_NSBOX_LANDLOCK_FD");
	if (v == NULL) {
		nsbox_landlock_state = EBADF;
		return;
	}
	char *end = NULL;
	long fd = strtol(v, &end, 10);
	if (end == v || *end != '\0' || fd < 3 || fd > 1024) {
		nsbox_landlock_state = EBADF;
		return;
	}
	// no_new_privs is what lets an unprivileged process restrict itself,
	// and it keeps a setuid program inside from shedding the domain's
	// meaning (landlock_restrict_self(2)).
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		nsbox_landlock_state = errno;
		close((int)fd);
		return;
	}
	if (syscall(SYS_landlock_restrict_self, (int)fd, 0) < 0) {
		nsbox_landlock_state = errno;
		close((int)fd);
		return;
	}
	close((int)fd);
	nsbox_landlock_state = 0;
}
