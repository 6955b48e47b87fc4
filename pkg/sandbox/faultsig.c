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
// handlers. Only two kinds go on to the runtime's handler, called with the
// same arguments on the same signal stack, as the kernel would have called
// it: a real fault (si_code > 0, which only the kernel sets: rt_sigqueueinfo
// (2) refuses si_code >= 0 from another process), and a signal the worker
// sent itself with kill or tgkill (abort(3), the runtime's own crash path:
// SI_USER or SI_TKILL, whose si_pid the kernel fills in and
// rt_sigqueueinfo refuses to forge from another process). Everything else
// is dropped, SI_QUEUE above all: its sender writes si_pid itself, so a
// command could claim to be PID 1 (found by review).

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
	if (info != NULL && info->si_code <= 0 &&
	    !((info->si_code == SI_USER || info->si_code == SI_TKILL) && info->si_pid == (pid_t)syscall(SYS_getpid)))
		return; // sent by another process, or with a sender it wrote itself
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
