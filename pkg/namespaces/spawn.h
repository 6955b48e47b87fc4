/* The C half of Spawn (spawn.go): see spawn.c. */
#ifndef NSBOX_SPAWN_H
#define NSBOX_SPAWN_H

#include <sched.h>
#include <stdint.h>

/* The step of the child that failed, for the error message. */
enum {
	NSBOX_STEP_CLONE = 1,
	NSBOX_STEP_SIGNALS,
	NSBOX_STEP_SETSID,
	NSBOX_STEP_PDEATHSIG,
	NSBOX_STEP_CAPS,
	NSBOX_STEP_FDS,
	NSBOX_STEP_EXEC,
};

/* The capabilities the worker needs inside its user namespace to build the
 * sandbox; it drops them before any command runs. Ambient, because the
 * worker execs before its maps exist (it is no namespace's root then). */
#define NSBOX_WORKER_CAPS ( \
	(1ULL << 21) /* CAP_SYS_ADMIN: mount, pivot_root, sethostname */ | \
	(1ULL << 12) /* CAP_NET_ADMIN: bring up lo */ | \
	(1ULL << 10) /* CAP_NET_BIND_SERVICE: the filtered network's resolver on port 53 */ | \
	(1ULL << 8)  /* CAP_SETPCAP: drop the bounding set, lock securebits */ | \
	(1ULL << 1)  /* CAP_DAC_OVERRIDE: mount points in directories we do not own */ | \
	(1ULL << 18) /* CAP_SYS_CHROOT */ | \
	(1ULL << 7)  /* CAP_SETUID: take its ids once mapped */ | \
	(1ULL << 6)  /* CAP_SETGID: and its groups */ | \
	/* and what commands keep with a full id range (rangeCaps in \
	 * pkg/sandbox/caps.go): */ \
	(1ULL << 0)  /* CAP_CHOWN */ | \
	(1ULL << 2)  /* CAP_DAC_READ_SEARCH */ | \
	(1ULL << 3)  /* CAP_FOWNER */ | \
	(1ULL << 5)  /* CAP_KILL */ )

/* The namespaces of every sandbox (CloneFlags in Go, which adds
 * CLONE_NEWNET unless the policy shares the host's network). */
#define NSBOX_CLONE_FLAGS (CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP)

struct nsbox_spawn {
	/* In: everything is prepared by the parent before clone; the child
	 * only reads it. */
	const char *path;
	char *const *argv;
	char *const *envp;
	int flags;                 /* CLONE_NEW* */
	int fds[6];                /* become 0..5; -1: /dev/null (0..2), nothing (3..5);
	                            * 4 and 5 only for a stage (holder.c) */
	uint64_t ambient;          /* capabilities raised as ambient (bit n: cap n) */
	/* Out: written by the child when a step fails, before it exits. */
	volatile int fail_step;
	volatile int fail_errno;
};

int nsbox_spawn(struct nsbox_spawn *a);

/* NSBOX_WORKER_CAPS as compiled into pkg/namespaces: callers in other Go
 * packages (cmd/nsbox/prespawn.c) read it through this, since Go's build
 * cache does not see a change to this header from another package. */
uint64_t nsbox_worker_caps(void);

#endif
