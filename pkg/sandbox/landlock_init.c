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
#include <linux/capability.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
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
	if (getauxval(AT_SECURE))
		return; // see prespawn.c, nsbox_secure_exec
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
	// Invariant: no thread of the worker holds a capability that
	// bypasses file permissions. Capabilities are per thread, and the
	// "drop capabilities" step (dropCapsLandlock) runs on one thread only;
	// the tools (read_file, write_file ...) run on the others, and with no
	// user namespace a root worker's are the host's: read_file read a 0600
	// file of another uid that `cat` inside could not (second review).
	// Dropped here, in the process's only thread, every thread the Go
	// runtime makes inherits what is left: CAP_SETPCAP and
	// CAP_SYS_RESOURCE, which that step needs (to lock securebits and drop
	// the bounding set; to raise an rlimit the policy asks for) and then
	// drops on the thread that forks commands (capabilities(7)).
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct data[2];
	memset(data, 0, sizeof data);
	if (syscall(SYS_capget, &hdr, data) < 0) {
		nsbox_landlock_state = errno;
		return;
	}
	if (data[0].permitted | data[1].permitted | data[0].effective | data[1].effective | data[0].inheritable | data[1].inheritable) {
		const unsigned keep = (1u << CAP_SETPCAP) | (1u << CAP_SYS_RESOURCE); /* both < 32 */
		prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
		data[0].permitted &= keep;
		data[0].effective &= keep;
		data[0].inheritable = 0;
		data[1].permitted = data[1].effective = data[1].inheritable = 0;
		if (syscall(SYS_capset, &hdr, data) < 0) {
			nsbox_landlock_state = errno;
			return;
		}
	}
	nsbox_landlock_state = 0;
}
