// The worker's working-directory check, answered by a helper thread that is
// not a Go thread.
//
// Every command's working directory is opened with openat2(2)
// RESOLVE_NO_MAGICLINKS before the command is forked (checkDir in
// worker_util.go). The worker's main thread, which forks every command,
// cannot make that call: its command filter gives openat2 ENOSYS. Asking a
// goroutine on another thread costs a Go scheduler round trip (the main
// thread is locked to its goroutine: it parks, hands its P over, and is woken
// back) that measured about a tenth of an Exec of /bin/true. This thread is
// asked and answers through one futex word instead, and the main thread
// stays in its cgo call meanwhile.
//
// The thread is created by a Go thread other than the main one, so it
// carries that thread's seccomp filters (the worker's filter and the socket
// gate's, never the command filter) and credentials: it is no more and no
// less than the thread a goroutine would have run the check on. It blocks
// every signal, so the kernel delivers none to it and the Go runtime never
// runs a handler on a thread it does not know. It makes one openat2 of an
// O_PATH descriptor and closes it; nothing else.

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <linux/openat2.h>
#include <linux/stat.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_openat2
#define SYS_openat2 437 /* the same number on every architecture */
#endif

// The state word: IDLE (no question), ASKED (path holds one), ANSWERED
// (answer holds the errno, 0 for a directory that resolved).
enum { IDLE, ASKED, ANSWERED };

static _Atomic int dc_state;
static const char *dc_path;
static int dc_answer;
// What the approved directory is (statx of the fd the check opened), for
// nsbox_dircheck_same: its device, inode and mount.
static struct dc_id {
	unsigned int dev_major, dev_minor;
	unsigned long long ino, mnt;
	int has_mnt;
} dc_id;
// One question at a time: the main thread asks, but nothing else may
// overwrite dc_path under it.
static pthread_mutex_t dc_mu = PTHREAD_MUTEX_INITIALIZER;
static int dc_started;
// The last directory approved, kept open (O_PATH, close-on-exec) with the
// path it was approved for: dc_id describes it while dc_kept_fd >= 0. A
// command's start in the same path asks nothing of the helper
// (nsbox_dircheck_ask_kept): its vfork child checks, after its chdir, that
// it is in this very directory (nsbox_dircheck_same), which is what a
// fresh check's comparison guarantees too (a directory that a resolution
// without magic links reached, still the same inode on the same mount);
// the open descriptor pins the inode and the mount, so no other directory
// can take their numbers meanwhile. Written by the helper thread while a
// question is asked, read by the asking thread under dc_mu.
static int dc_kept_fd = -1;
static char *dc_kept_path;
// dc_hit: the question being asked was answered from the kept directory.
static int dc_hit;

static void dc_wait(int seen)
{
	// Returns at a wake-up, a signal, or at once when the word changed
	// already: the caller re-reads it.
	syscall(SYS_futex, &dc_state, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
}

static void dc_wake(void)
{
	// Two: whichever of the two parties waits (never both at once).
	syscall(SYS_futex, &dc_state, FUTEX_WAKE_PRIVATE, 2, NULL, NULL, 0);
}

static int dc_open(const char *path)
{
	struct open_how how = {
		.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		// A /proc/self/fd/N (or /proc/PID/cwd) path can name a
		// directory outside the sandbox's root; refused, as Go's
		// checkDirOpenat2 refuses it (CVE-2024-21626 class).
		.resolve = RESOLVE_NO_MAGICLINKS,
	};
	long fd;
	do {
		fd = syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));
	} while (fd < 0 && errno == EINTR);
	if (fd < 0)
		return errno;
	struct statx sx;
	long rc = syscall(SYS_statx, (int)fd, "", AT_EMPTY_PATH, STATX_INO | STATX_MNT_ID, &sx);
	int err = rc < 0 ? errno : 0;
	if (err) {
		close((int)fd);
		return err;
	}
	dc_id.dev_major = sx.stx_dev_major;
	dc_id.dev_minor = sx.stx_dev_minor;
	dc_id.ino = sx.stx_ino;
	dc_id.has_mnt = (sx.stx_mask & STATX_MNT_ID) != 0;
	dc_id.mnt = sx.stx_mnt_id;
	// Kept for the next start in the same path (see dc_kept_fd); without
	// memory for the path, not kept.
	char *copy = strdup(path);
	if (copy == NULL) {
		close((int)fd);
		return 0;
	}
	dc_kept_fd = (int)fd;
	dc_kept_path = copy;
	return 0;
}

// dc_forget closes the kept directory. Called by the helper thread while a
// question is asked, or by the asking thread under dc_mu.
static void dc_forget(void)
{
	if (dc_kept_fd >= 0)
		close(dc_kept_fd);
	dc_kept_fd = -1;
	free(dc_kept_path);
	dc_kept_path = NULL;
}

// nsbox_dircheck_same reports (0) whether the calling process's working
// directory is the one the last check approved: same device, inode and
// mount (a bind of the same directory elsewhere has another mount); else
// EXDEV. A command's vfork child calls it after its chdir, with raw
// syscalls only. Invariant: the command starts only in the directory the
// check opened, not in whatever the path named at chdir time: a symlink
// swapped between a real directory and /proc/self/fd/N would otherwise win
// the race between the check and the chdir (CVE-2024-21626 class; found by
// review).
int nsbox_dircheck_same(void)
{
	struct statx sx;
	if (syscall(SYS_statx, AT_FDCWD, "", AT_EMPTY_PATH, STATX_INO | STATX_MNT_ID, &sx) < 0)
		return errno ? errno : EXDEV;
	if (sx.stx_dev_major != dc_id.dev_major || sx.stx_dev_minor != dc_id.dev_minor || sx.stx_ino != dc_id.ino)
		return EXDEV;
	if (dc_id.has_mnt && (!(sx.stx_mask & STATX_MNT_ID) || sx.stx_mnt_id != dc_id.mnt))
		return EXDEV;
	return 0;
}

// nsbox_dircheck_same_kept is nsbox_dircheck_same for a start answered
// from the kept directory (cmdspawn.c): the directory must also still be
// linked, not one that only a descriptor or another process's /proc/PID/cwd
// reaches any more (review).
int nsbox_dircheck_same_kept(void)
{
	int rc = nsbox_dircheck_same();
	if (rc != 0)
		return rc;
	struct statx sx;
	if (syscall(SYS_statx, AT_FDCWD, "", AT_EMPTY_PATH, STATX_NLINK, &sx) < 0)
		return errno ? errno : EXDEV;
	if (!(sx.stx_mask & STATX_NLINK) || sx.stx_nlink == 0)
		return ENOENT;
	return 0;
}

// nsbox_dircheck_kept_fd is the kept directory's descriptor (-1: none),
// for the asker of a question answered from it, which holds dc_mu.
int nsbox_dircheck_kept_fd(void)
{
	return dc_kept_fd;
}

static void *dc_loop(void *arg)
{
	(void)arg;
	for (;;) {
		int s = atomic_load(&dc_state);
		if (s != ASKED) {
			dc_wait(s);
			continue;
		}
		// A fresh check replaces the kept directory, whatever it
		// answers: dc_id is about to describe another one.
		dc_forget();
		dc_answer = dc_open(dc_path);
		atomic_store(&dc_state, ANSWERED);
		dc_wake();
	}
	return NULL;
}

// nsbox_dircheck_start starts the helper thread once; 0 or an errno. Called
// from a goroutine that is not on the worker's main thread (see above).
int nsbox_dircheck_start(void)
{
	pthread_mutex_lock(&dc_mu);
	int err = 0;
	if (!dc_started) {
		sigset_t all, old;
		sigfillset(&all);
		// The new thread inherits the blocked mask: no signal can
		// reach it between its start and its first instruction.
		pthread_sigmask(SIG_SETMASK, &all, &old);
		pthread_attr_t attr;
		pthread_t t;
		err = pthread_attr_init(&attr);
		if (err == 0) {
			pthread_attr_setstacksize(&attr, 64 * 1024);
			pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
			err = pthread_create(&t, &attr, dc_loop, NULL);
			pthread_attr_destroy(&attr);
		}
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		dc_started = err == 0;
	}
	pthread_mutex_unlock(&dc_mu);
	return err;
}

// nsbox_dircheck asks the helper thread about path (NUL-terminated, valid
// for the call) and returns its answer: 0 for a directory that resolved
// without a magic link, else the errno; -1 when the helper is not running
// (the caller checks another way).
int nsbox_dircheck_ask(const char *path);
int nsbox_dircheck_collect(void);

int nsbox_dircheck(const char *path)
{
	if (nsbox_dircheck_ask(path) != 0)
		return -1;
	return nsbox_dircheck_collect();
}

// nsbox_dircheck_ask asks about path without waiting for the answer: 0, or
// -1 when the helper is not running. The caller keeps path valid and calls
// nsbox_dircheck_collect, on the same thread, before anything else asks.
int nsbox_dircheck_ask(const char *path)
{
	pthread_mutex_lock(&dc_mu);
	if (!dc_started) {
		pthread_mutex_unlock(&dc_mu);
		return -1;
	}
	dc_hit = 0;
	dc_path = path;
	atomic_store(&dc_state, ASKED);
	dc_wake();
	return 0;
}

// nsbox_dircheck_ask_kept is nsbox_dircheck_ask for a command's start
// (cmdspawn.c), whose child compares its working directory with the
// approved one after its chdir: a path that is the kept directory's is
// answered at once, without waking the helper (see dc_kept_fd). *hit says
// which; after a start that failed on a hit, the caller calls
// nsbox_dircheck_forget and starts again with a fresh check, so that a
// refusal names what a fresh check finds.
int nsbox_dircheck_ask_kept(const char *path, int *hit)
{
	*hit = 0;
	pthread_mutex_lock(&dc_mu);
	if (!dc_started) {
		pthread_mutex_unlock(&dc_mu);
		return -1;
	}
	if (dc_kept_fd >= 0 && strcmp(path, dc_kept_path) == 0) {
		dc_hit = 1;
		dc_answer = 0;
		dc_path = path;
		atomic_store(&dc_state, ANSWERED);
		*hit = 1;
		return 0;
	}
	pthread_mutex_unlock(&dc_mu);
	return nsbox_dircheck_ask(path);
}

// nsbox_dircheck_forget drops the kept directory; the next question is
// checked afresh.
void nsbox_dircheck_forget(void)
{
	pthread_mutex_lock(&dc_mu);
	dc_forget();
	pthread_mutex_unlock(&dc_mu);
}

// nsbox_dircheck_answer waits for the answer to the question asked and
// returns it. It only reads the state word and waits on it with a raw
// futex: a command's vfork child (cmdspawn.c) calls it, sharing this memory.
int nsbox_dircheck_answer(void)
{
	int s;
	while ((s = atomic_load(&dc_state)) != ANSWERED)
		dc_wait(s);
	return dc_answer;
}

// nsbox_dircheck_collect waits for the answer to nsbox_dircheck_ask's
// question, returns it and lets the next question be asked.
int nsbox_dircheck_collect(void)
{
	int answer = nsbox_dircheck_answer();
	atomic_store(&dc_state, IDLE);
	dc_path = NULL;
	pthread_mutex_unlock(&dc_mu);
	return answer;
}
