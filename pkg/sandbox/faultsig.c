// The worker, PID 1 of the sandbox, keeps the Go runtime's handlers of the
// fault signals (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS):
// a real fault in the worker must become a panic or a crash report. The
// kernel delivers a signal to the init of a PID namespace only when it has
// a handler (pid_namespaces(7)), so these are the signals a command could
// still send it, and the runtime takes one sent with sigqueue(3) (SI_QUEUE)
// for a fault: `kill` or sigqueue of SIGSEGV to PID 1 ended the session as
// if nsbox had failed (found by review).
//
// nsbox_filter_fault_signals puts a filter in front of each of those
// handlers: a signal sent by another process (si_code <= 0: SI_USER,
// SI_QUEUE, SI_TKILL...; only the kernel sets a positive code, and
// rt_sigqueueinfo(2) refuses one from another process) is dropped; a real
// fault, and a signal the worker sends itself (abort(3), the runtime's own
// crash path), goes to the runtime's handler, called with the same
// arguments on the same signal stack, as the kernel would have called it.

#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

// The kernel's struct sigaction (x86-64, arm64), as cmdspawn.c's.
struct fs_ksigaction {
	void *handler;
	unsigned long flags;
	void (*restorer)(void);
	uint64_t mask;
};

typedef void (*fs_handler)(int, siginfo_t *, void *);

static fs_handler runtime_handler[65];

static void fault_filter(int sig, siginfo_t *info, void *uc)
{
	if (info != NULL && info->si_code <= 0 && info->si_pid != (pid_t)syscall(SYS_getpid))
		return; // sent by another process: not a fault of this one
	runtime_handler[sig](sig, info, uc);
}

// 0, or the errno of the first rt_sigaction that failed.
int nsbox_filter_fault_signals(void)
{
	static const int sigs[] = {SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE, SIGSEGV, SIGSYS};
	for (unsigned i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		int sig = sigs[i];
		struct fs_ksigaction old, filtered;
		if (syscall(SYS_rt_sigaction, sig, NULL, &old, sizeof(uint64_t)) < 0)
			return errno;
		if (old.handler == (void *)SIG_DFL || old.handler == (void *)SIG_IGN || !(old.flags & SA_SIGINFO))
			continue; // no runtime handler to keep: nothing delivered
		runtime_handler[sig] = (fs_handler)old.handler;
		filtered = old;
		filtered.handler = (void *)fault_filter;
		if (syscall(SYS_rt_sigaction, sig, &filtered, NULL, sizeof(uint64_t)) < 0)
			return errno;
	}
	return 0;
}
