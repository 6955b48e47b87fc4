// The worker's command start in C: what syscall.ForkExec does for a command,
// without the Go runtime's parts that cost an Exec most of its overhead.
//
// Called through cgo on the worker's main thread (forkTid, see spawn in
// worker.go): the thread that dropped the capabilities and carries the
// Landlock scopes and the command filter, all of which are per thread and
// which clone(2) copies from the calling thread. A cgo call stays on its
// goroutine's thread, and the main thread runs no other goroutine.
//
// Why not syscall.ForkExec: it makes the vfork clone as a raw syscall, so
// the Go scheduler sees the main goroutine running for the whole time the
// child takes to execve; the scheduler's monitor then preempts it (SIGURG),
// and a preempted goroutine locked to its thread costs two thread hand-offs.
// A cgo call is a syscall to the scheduler: nothing is preempted. It also
// opens, polls and closes an error pipe per command; here the child, which
// shares the parent's memory until execve (CLONE_VM|CLONE_VFORK), leaves its
// errno in the argument block instead.
//
// What the child does, in syscall.ForkExec's order and with its semantics:
// the caught signals back to their default action and the signal mask back
// to the parent's; setsid; chdir; the command's files onto 0..n-1 (the same
// two passes as syscall/exec_linux.go, so the shim's fd number chosen by
// shimFDFor stays clear of them); 0..2 closed when fewer were given; execve.

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif

// The kernel's signal set and sigaction, for raw rt_sigprocmask and
// rt_sigaction: glibc's wrappers refuse its two internal signals (32, 33),
// which the child must reset like any other.
#define KSIG_MAX 64
typedef uint64_t ksigset;

struct ksigaction {
	void (*handler)(int);
	unsigned long flags;
	void (*restorer)(void);
	ksigset mask;
};

// Signals that had a handler when nsbox_cmd_spawn_init ran: the set the child
// sets back to SIG_DFL before it unblocks signals. Until then a signal
// delivered to the child would run the Go runtime's handler in a process
// that shares the worker's memory; with the default action it can only stop
// or end the child. Ignored signals stay ignored (the command inherits
// SIG_IGN), as with syscall.ForkExec, which resets exactly the signals the
// Go runtime handles. The worker installs and ignores nothing after its
// serve loop began (signal.Notify there only routes the runtime's handler,
// installed at start).
static ksigset handled;
static int initialized;

// The child's stack. One command starts at a time (spawning is refused
// while busy), and the parent is stopped until the child execs or exits
// (CLONE_VFORK), so one static stack serves every start.
static _Alignas(64) char child_stack[64 * 1024];
static atomic_flag busy = ATOMIC_FLAG_INIT;

// dircheck.c
int nsbox_dircheck_ask(const char *path);
int nsbox_dircheck_ask_kept(const char *path, int *hit);
void nsbox_dircheck_forget(void);
int nsbox_dircheck_answer(void);
int nsbox_dircheck_collect(void);
int nsbox_dircheck_same(void);
int nsbox_dircheck_same_kept(void);
int nsbox_dircheck_kept_fd(void);

struct spawn_args {
	const char *path;
	char **argv;
	char **envp;
	const char *dir;
	int *fds;
	int nfds;
	ksigset oldmask;
	// The working directory's openat2 check was asked of dircheck.c's
	// helper thread: the child waits for its answer before execve.
	int check_dir;
	// kept_fd >= 0: the check was answered from the kept directory
	// (dircheck.c, nsbox_dircheck_ask_kept), whose descriptor this is in
	// the worker: the child closes its own copy before its chdir.
	int kept_fd;
	// Written by the child before it exits when a step failed: the
	// errno of that step, and whether it was the directory check.
	volatile int err;
	volatile int bad_dir;
};

// child_fail leaves the failed step's errno (syscall(2) set it) for the
// parent and exits.
static int child_fail(struct spawn_args *a)
{
	a->err = errno ? errno : EINVAL;
	syscall(SYS_exit_group, 127);
	return 127;
}

static int child(void *arg)
{
	struct spawn_args *a = arg;
	long rc;

	// Every signal is blocked here (the parent blocked them before the
	// clone): first the handlers, then the mask.
	struct ksigaction dfl = {.handler = SIG_DFL};
	for (int sig = 1; sig <= KSIG_MAX; sig++)
		if (handled & (1ULL << (sig - 1)))
			syscall(SYS_rt_sigaction, sig, &dfl, NULL, sizeof(ksigset));
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &a->oldmask, NULL, sizeof(ksigset));

	// A new session: no controlling terminal, so no TIOCSTI injection
	// into a terminal outside (CVE-2017-5226), and one process group to
	// kill on timeout.
	if ((rc = syscall(SYS_setsid)) < 0)
		return child_fail(a);
	// On the kept directory's approval nothing resolved the path now
	// without magic links: a command that replaced it with a symlink to
	// /proc/self/fd/N, N the worker's descriptor of that very directory,
	// would have this chdir enter it (deleted, or reachable by no path)
	// and pass the comparison below (found by review). This child's copy
	// of the descriptor goes first (no CLONE_FILES: the worker keeps its
	// own); nsbox_dircheck_same_kept refuses a deleted directory, which a
	// link to another process's /proc/PID/cwd could still reach.
	if (a->kept_fd >= 0)
		syscall(SYS_close, a->kept_fd);
	if (a->dir[0] != '\0' && (rc = syscall(SYS_chdir, a->dir)) < 0) {
		// The check's refusal, if any, is the error to report: it
		// names what is wrong with the directory, as before.
		int answer = a->check_dir ? nsbox_dircheck_answer() : 0;
		if (answer != 0) {
			a->bad_dir = 1;
			errno = answer;
		}
		return child_fail(a);
	}

	// Pass 1: a file that sits below its slot is moved above every slot
	// and every file first, so that pass 2 cannot overwrite it.
	int n = a->nfds;
	int next = n;
	for (int i = 0; i < n; i++)
		if (a->fds[i] >= next)
			next = a->fds[i] + 1;
	for (int i = 0; i < n; i++) {
		if (a->fds[i] >= 0 && a->fds[i] < i) {
			if ((rc = syscall(SYS_dup3, a->fds[i], next, O_CLOEXEC)) < 0)
				return child_fail(a);
			a->fds[i] = next++;
		}
	}
	// Pass 2: each file onto its slot, without close-on-exec. Every
	// other fd of the worker is close-on-exec: the command inherits
	// these and nothing else.
	for (int i = 0; i < n; i++) {
		if (a->fds[i] < 0) {
			syscall(SYS_close, i);
			continue;
		}
		if (a->fds[i] == i) {
			// dup3 onto itself is refused: clear the flag instead.
			if ((rc = syscall(SYS_fcntl, i, F_SETFD, 0)) < 0)
				return child_fail(a);
			continue;
		}
		if ((rc = syscall(SYS_dup3, a->fds[i], i, 0)) < 0)
			return child_fail(a);
	}
	for (int i = n; i < 3; i++)
		syscall(SYS_close, i);

	// Nothing of the command runs before the working directory passed
	// the helper's openat2(RESOLVE_NO_MAGICLINKS): a /proc/self/fd/N
	// path can name a directory outside the sandbox's root (CVE-2024-21626
	// class). The helper ran meanwhile, on another CPU.
	if (a->check_dir) {
		int answer = nsbox_dircheck_answer();
		// And the directory the chdir above entered is the one the
		// check opened (dircheck.c, nsbox_dircheck_same).
		if (answer == 0)
			answer = a->kept_fd >= 0 ? nsbox_dircheck_same_kept() : nsbox_dircheck_same();
		if (answer != 0) {
			a->bad_dir = 1;
			errno = answer;
			return child_fail(a);
		}
	}
	rc = syscall(SYS_execve, a->path, a->argv, a->envp);
	return child_fail(a);
}

// The signals whose handler the worker keeps when it is PID 1 (see
// nsbox_cmd_spawn_init): the ones the Go runtime itself needs, the glibc
// two, and sigchld.c's.
static int kept_handler(int sig)
{
	switch (sig) {
	case SIGILL:
	case SIGTRAP:
	case SIGABRT:
	case SIGBUS:
	case SIGFPE:
	case SIGSEGV: // faults become panics, which the worker recovers
	case SIGSYS:
	case SIGPIPE: // the runtime's rule: fatal on fds 1 and 2 only
	case SIGURG:  // the scheduler's preemption
	case SIGCHLD: // sigchld.c: the reaper's wake-up
	case 32:
	case 33: // glibc: thread cancellation, set*id on every thread
		return 1;
	}
	return 0;
}

// nsbox_cmd_spawn_init records which signals have a handler. 0, or an errno.
//
// With drop, it first sets every signal but the kept ones back to SIG_DFL,
// in the worker, once: each handler left is one more rt_sigaction in every
// command's start, and the Go runtime installs one for nearly all 64 (for
// os/signal, which the serving worker does not use: signal.Notify would see
// nothing of these from then on). One call per signal either way (set and
// read the old action at once), as many as without drop. Only for PID 1 of
// a PID namespace (the caller checks), where the kernel drops a signal
// whose action is SIG_DFL unless it is SIGKILL or SIGSTOP from an ancestor
// namespace (kernel/signal.c, sig_task_ignored; pid_namespaces(7)): a
// command's `kill -TERM 1`, which the runtime's handler answered by exiting,
// and ended the session, is ignored now, as is any such signal from the
// host.
int nsbox_cmd_spawn_init(int drop)
{
	struct ksigaction dfl = {.handler = SIG_DFL};
	ksigset h = 0;
	for (int sig = 1; sig <= KSIG_MAX; sig++) {
		if (sig == SIGKILL || sig == SIGSTOP)
			continue;
		struct ksigaction old;
		if (drop && !kept_handler(sig)) {
			if (syscall(SYS_rt_sigaction, sig, &dfl, &old, sizeof(ksigset)) < 0)
				return errno;
			// Ignored stays ignored, as for a command.
			if (old.handler == SIG_IGN && syscall(SYS_rt_sigaction, sig, &old, NULL, sizeof(ksigset)) < 0)
				return errno;
			continue;
		}
		if (syscall(SYS_rt_sigaction, sig, NULL, &old, sizeof(ksigset)) < 0)
			return errno;
		if (old.handler != SIG_DFL && old.handler != SIG_IGN)
			h |= 1ULL << (sig - 1);
	}
	handled = h;
	initialized = 1;
	return 0;
}

// nsbox_cmd_spawn starts a command. buf holds NUL-terminated strings, one after
// the other: path, dir ("" for none), argc arguments, envc environment
// entries; len is its length. fds are the command's files 0..nfds-1 (the
// array is modified). On success it returns 0 with the child's pid and
// pidfd (close-on-exec) in *pid and *pidfd. It returns an errno when the
// clone or a step of the child failed (the child was reaped then), and -1
// when this path is not available (not initialized, or busy): the caller
// starts the command another way. With check_dir, dir (which must not be
// empty) is checked by dircheck.c's helper while the child gets ready, and
// the command runs only if it passed; *bad_dir is set when that check
// refused it (the errno is the check's).
int nsbox_cmd_spawn(const char *buf, size_t len, int argc, int envc, int *fds, int nfds, int check_dir, int *pid, int *pidfd, int *bad_dir)
{
	if (!initialized || atomic_flag_test_and_set(&busy))
		return -1;
	*bad_dir = 0;
	int ret = 0;
	int *fds0 = NULL; // see below, before again
	char **ptrs = malloc(sizeof(char *) * ((size_t)argc + (size_t)envc + 2));
	if (ptrs == NULL) {
		ret = ENOMEM;
		goto out;
	}
	// Split buf; the Go side wrote exactly 2 + argc + envc strings.
	const char *strs[2];
	const char *p = buf, *end = buf + len;
	int want = 2 + argc + envc, got = 0;
	while (p < end && got < want) {
		const char *z = memchr(p, '\0', (size_t)(end - p));
		if (z == NULL)
			break;
		if (got < 2)
			strs[got] = p;
		else if (got < 2 + argc)
			ptrs[got - 2] = (char *)p;
		else
			ptrs[got - 1] = (char *)p; // after argv's NULL
		got++;
		p = z + 1;
	}
	if (got != want) {
		ret = EINVAL;
		goto out;
	}
	ptrs[argc] = NULL;
	ptrs[argc + 1 + envc] = NULL;

	struct spawn_args a = {
		.path = strs[0],
		.dir = strs[1],
		.argv = ptrs,
		.envp = ptrs + argc + 1,
		.fds = fds,
		.nfds = nfds,
		.kept_fd = -1, // not 0: the child would close fd 0
		.err = 0,
		.bad_dir = 0,
	};
	// hit: the directory was the one approved last (dircheck.c,
	// nsbox_dircheck_ask_kept), so the helper was not asked; the child
	// still compares its working directory with it after its chdir.
	int hit = 0, fresh = 0;
	// The child moves the files in fds (pass 1 writes the array, which it
	// shares): a second start begins from this copy.
	if (check_dir && nfds > 0) {
		fds0 = malloc(sizeof(int) * (size_t)nfds);
		if (fds0 == NULL) {
			ret = ENOMEM;
			goto out;
		}
		memcpy(fds0, fds, sizeof(int) * (size_t)nfds);
	}
again:
	if (check_dir) {
		if (fresh) {
			nsbox_dircheck_forget();
			hit = 0;
			if (nsbox_dircheck_ask(a.dir) != 0) {
				ret = -1;
				goto out;
			}
		} else if (nsbox_dircheck_ask_kept(a.dir, &hit) != 0) {
			ret = -1; // no helper: the caller checks and starts
			goto out;
		}
		a.check_dir = 1;
		// Stable until nsbox_dircheck_collect: the asker holds dc_mu.
		a.kept_fd = hit ? nsbox_dircheck_kept_fd() : -1;
	}
	// Block every signal (the kernel's set, glibc's two included) until
	// the child reset its handlers; see handled.
	ksigset all = ~(ksigset)0;
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, &a.oldmask, sizeof(ksigset));
	int fd = -1;
	// CLONE_VM|CLONE_VFORK: the child borrows this memory and this
	// thread waits until it execs or exits. No CLONE_FILES: its fd moves
	// are its own. SIGCHLD, as any command: execve would set it anyway
	// (fs/exec.c, de_thread), and the worker's reaper waits for it.
	int child_pid = clone(child, child_stack + sizeof(child_stack), CLONE_VM | CLONE_VFORK | CLONE_PIDFD | SIGCHLD, &a, &fd);
	int clone_err = errno;
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &a.oldmask, NULL, sizeof(ksigset));
	if (a.check_dir)
		nsbox_dircheck_collect(); // the child may have failed before it waited
	if (child_pid < 0) {
		ret = clone_err;
		goto out;
	}
	if (a.err != 0) {
		// The child failed before execve and exited: reap it (unless
		// the worker's reaper did already) and report its errno.
		int st;
		while (waitpid(child_pid, &st, 0) < 0 && errno == EINTR)
			;
		close(fd);
		if (hit) {
			// Started on the kept directory's approval: once more,
			// with a fresh check, whose refusal (or success) is the
			// answer, exactly as without the kept directory.
			fresh = 1;
			a.err = 0;
			a.bad_dir = 0;
			if (fds0 != NULL)
				memcpy(fds, fds0, sizeof(int) * (size_t)nfds);
			goto again;
		}
		ret = a.err;
		*bad_dir = a.bad_dir;
		goto out;
	}
	*pid = child_pid;
	*pidfd = fd;
out:
	free(fds0);
	free(ptrs);
	atomic_flag_clear(&busy);
	return ret;
}
