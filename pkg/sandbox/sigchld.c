// The worker's SIGCHLD handler: one write to an eventfd that the main
// thread polls, instead of the Go runtime's os/signal path.
//
// PID 1 must reap every child, orphans of the sandbox included (a zombie
// keeps its pid; enough of them exhaust the pids limit). Through os/signal,
// each child's end woke two more threads (the runtime's signal goroutine,
// then the reaper goroutine) on top of the main thread, which already learns
// of a command's end from its pidfd: on two CPUs that was a tenth of an Exec
// of /bin/true. Here the handler only makes the eventfd readable; the main
// thread, polling it with the channel and the pidfds, reaps every exited
// child. The eventfd is a counter: a signal that arrives while the main
// thread is busy keeps it readable until the next poll, so no exit is missed
// (signals coalesce; the reaping loop collects every zombie it finds).
//
// The Go runtime does not need SIGCHLD; the worker stops routing it through
// os/signal when this handler is in place. A command's start resets the
// handler (cmdspawn.c, or syscall.ForkExec, which resets every signal the
// runtime had a handler for at start: SIGCHLD is one), and execve does too.

#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

static volatile int chld_fd = -1;

static void on_sigchld(int sig, siginfo_t *info, void *ctx)
{
	(void)sig;
	(void)info;
	(void)ctx;
	// write(2) is async-signal-safe. It can fail only with EAGAIN, when
	// the counter is full: then the eventfd is readable already.
	int saved = errno;
	uint64_t one = 1;
	ssize_t n = write(chld_fd, &one, sizeof(one));
	(void)n;
	errno = saved;
}

// nsbox_sigchld_install makes SIGCHLD write to fd (a non-blocking eventfd
// the caller keeps open for the life of the process). 0, or an errno.
int nsbox_sigchld_install(int fd)
{
	chld_fd = fd;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigchld;
	// SA_ONSTACK: the Go runtime's threads run handlers on their signal
	// stacks, as cgo requires of any handler. SA_NOCLDSTOP: a stopped or
	// continued child changes nothing to reap.
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART | SA_NOCLDSTOP;
	sigfillset(&sa.sa_mask);
	if (sigaction(SIGCHLD, &sa, NULL) != 0)
		return errno;
	return 0;
}
