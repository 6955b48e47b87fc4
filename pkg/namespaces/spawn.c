// The worker's clone and exec, in C: clone(CLONE_VM|CLONE_VFORK) with the
// namespace flags, then a handful of raw steps in the child and execve.
//
// Why not os/exec: with CLONE_NEWUSER, Go's forkExec cannot use vfork (the
// parent must write the child's id maps while the child waits), so it
// copies the supervisor's page tables and the child waits on a pipe: 2.2 to
// 2.6 ms per sandbox here against 1.0 to 1.1 ms for this. The child does
// not wait for its maps: it execs unmapped, and the parent writes them
// (WriteMaps, idmap.go) while the worker's runtime starts; the worker takes
// its ids only when its handshake arrives, after the maps.
//
// The child shares the parent's memory and runs while the parent thread is
// suspended (CLONE_VFORK) but the Go runtime's other threads are not. So it
// touches only this struct, strings the parent built before the clone, and
// its own stack; it calls no allocator and nothing that takes a lock; and
// every signal stays blocked until its disposition is the default, so that
// no Go signal handler ever runs on this stack.

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spawn.h"

#ifndef SYS_close_range
#define SYS_close_range 436 /* the same number on every architecture; glibc < 2.34 lacks it */
#endif

// The kernel's struct sigaction as on x86_64 and arm64 (riscv64 has no
// restorer field: harmless, as every field but the handler is zero), for
// rt_sigaction(2) on every signal, including the two glibc reserves.
struct kernel_sigaction {
	void *handler;
	unsigned long flags;
	void *restorer;
	uint64_t mask;
};

static void fail(struct nsbox_spawn *a, int step) {
	a->fail_errno = errno;
	a->fail_step = step;
	_exit(127);
}

static int write_file(const char *path, const char *buf) {
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t len = strlen(buf);
	ssize_t n = write(fd, buf, len);
	int err = errno;
	close(fd);
	errno = err;
	return n == (ssize_t)len ? 0 : -1;
}

static int child(void *arg) {
	struct nsbox_spawn *a = arg;

	// The handlers are copies of the Go runtime's; they must not run here.
	// Default dispositions also give the worker a clean start.
	struct kernel_sigaction dfl = {.handler = SIG_DFL};
	for (int s = 1; s < 65; s++) {
		if (s == SIGKILL || s == SIGSTOP)
			continue;
		if (syscall(SYS_rt_sigaction, s, &dfl, NULL, sizeof dfl.mask) < 0)
			fail(a, NSBOX_STEP_SIGNALS);
	}

	// No id map here: the parent writes the maps once the worker runs
	// (WriteMaps), from the parent user namespace, where a full range can
	// be written (root, or newuidmap). Until then this process is unmapped
	// and owns nothing inside; it keeps its capabilities across execve as
	// ambient ones below.

	// A new session: no controlling terminal, so no TIOCSTI injection into
	// the caller's terminal (CVE-2017-5226 in bubblewrap).
	if (setsid() < 0)
		fail(a, NSBOX_STEP_SETSID);
	// The worker dies with the supervisor thread that cloned it (a locked
	// thread kept for the worker's life). A supervisor killed before this
	// line leaves a worker whose channel reads EOF at once: it exits.
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		fail(a, NSBOX_STEP_PDEATHSIG);

	// An unmapped id is not root of the new namespace, so it loses its
	// capabilities at execve; ambient ones carry the few the worker needs
	// across it, inside the new user namespace only (capabilities(7)).
	// They must be inheritable first.
	if (a->ambient) {
		struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
		struct __user_cap_data_struct d[2];
		if (syscall(SYS_capget, &h, d) < 0)
			fail(a, NSBOX_STEP_CAPS);
		d[0].inheritable = (uint32_t)a->ambient;
		d[1].inheritable = (uint32_t)(a->ambient >> 32);
		if (syscall(SYS_capset, &h, d) < 0)
			fail(a, NSBOX_STEP_CAPS);
		for (int c = 0; c < 64; c++)
			if (((a->ambient >> c) & 1) && prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, c, 0, 0) < 0)
				fail(a, NSBOX_STEP_CAPS);
	}

	// Only fds 0 to 3 cross the exec (and a stage's 4 and 5). The sources
	// are first moved above 5 so that placing one cannot overwrite another.
	int src[6], last = -1;
	for (int i = 0; i < 6; i++) {
		src[i] = -1;
		if (a->fds[i] >= 0) {
			if ((src[i] = fcntl(a->fds[i], F_DUPFD_CLOEXEC, 6)) < 0)
				fail(a, NSBOX_STEP_FDS);
			last = i;
		}
	}
	int null = -1;
	for (int i = 0; i < 3; i++)
		if (src[i] < 0) {
			if (null < 0) {
				// Above 5 too: opened onto a free slot below it, dup2 to
				// the same number would keep O_CLOEXEC and lose the fd.
				int n = open("/dev/null", O_RDWR | O_CLOEXEC);
				if (n < 0 || (null = fcntl(n, F_DUPFD_CLOEXEC, 6)) < 0)
					fail(a, NSBOX_STEP_FDS);
				close(n);
			}
			src[i] = null;
		}
	for (int i = 0; i < 6; i++)
		if (src[i] >= 0 && dup2(src[i], i) < 0) // dup2 clears O_CLOEXEC
			fail(a, NSBOX_STEP_FDS);
	// An empty slot between 3 and the last given one keeps what the
	// process had there (close_range below starts past the last): closed
	// here, or a caller's fd 3 crossed the exec when only 4 or 5 were
	// given (review 69). The sources all sit above 5.
	for (int i = 3; i < last; i++)
		if (src[i] < 0)
			close(i);
	// And fds the supervisor inherited without O_CLOEXEC from whoever
	// started it (a caller's secret on fd 7) end here, before the
	// sandbox's first instruction; fd 3 too when it is not the channel.
	// close_range(2) is Linux 5.9; nsbox needs 5.12 (mount_setattr)
	// anyway, so any failure is one.
	if (syscall(SYS_close_range, last < 3 ? 3 : last + 1, ~0U, 0) < 0)
		fail(a, NSBOX_STEP_FDS);

	// Every disposition is the default now: unblocking cannot run a handler.
	uint64_t none = 0;
	if (syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, sizeof none) < 0)
		fail(a, NSBOX_STEP_SIGNALS);
	execve(a->path, a->argv, a->envp);
	fail(a, NSBOX_STEP_EXEC);
	return 127;
}

uint64_t nsbox_worker_caps(void) { return NSBOX_WORKER_CAPS; }

int nsbox_spawn(struct nsbox_spawn *a) {
	const size_t stack_size = 64 * 1024;
	a->fail_step = 0;
	// Blocked in this thread and so in the child from its first
	// instruction, until its dispositions are reset. The raw syscall, not
	// pthread_sigmask, which never blocks glibc's own signals 32 and 33.
	uint64_t all = ~0ULL, old;
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, &old, sizeof all);
	char *stack = mmap(NULL, stack_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stack == MAP_FAILED) {
		a->fail_errno = errno;
		a->fail_step = NSBOX_STEP_CLONE;
		syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, sizeof old);
		return -1;
	}
	// CLONE_VFORK: this thread sleeps until the child has exec'd or exited,
	// so the stack is free to unmap once clone returns.
	int pid = clone(child, stack + stack_size, CLONE_VM | CLONE_VFORK | a->flags | SIGCHLD, a);
	int err = errno;
	munmap(stack, stack_size);
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, sizeof old);
	if (pid < 0) {
		a->fail_errno = err;
		a->fail_step = NSBOX_STEP_CLONE;
		return -1;
	}
	if (a->fail_step) {
		waitpid(pid, NULL, __WALL);
		return -1;
	}
	return pid;
}
