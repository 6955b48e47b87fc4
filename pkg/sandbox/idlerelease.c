// An idle worker gives back the page-table mappings of the binary's pages
// its start touched: see worker_idle.go for why, and for the Go side.
//
// In C, on a thread of its own that is not a Go thread: the kernel maps a
// file's pages back a whole large folio at a time (up to a megabyte here),
// so any code that runs after the release maps much of it again. Go code
// would (a timer's goroutine, the scheduler parking it); this thread runs a
// few lines of C after its madvise calls and exits, while every Go thread
// of an idle worker sleeps.
//
// The thread is created by the worker's main thread: it has that thread's
// seccomp filters and capability sets (empty with the single-id map; with
// a full range, the commands' list, in the sandbox's namespace only). It
// blocks every signal, so the
// Go runtime never runs a handler on a thread it does not know. It opens
// /proc/self/smaps, reads it, closes it, and calls madvise; nothing else.

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static _Atomic int ir_served;
static long ir_delay_ms;

// A mapping that may be released: private, file-backed, not writable, and
// without a private page (smaps' Anonymous: 0 kB).
struct ir_region {
	uintptr_t start, end;
};
#define IR_MAX 256
// The release's working memory, pages of its own: they are given back too
// once it is done (madvise MADV_DONTNEED on private anonymous memory leaves
// zero pages that take no memory until touched).
// Aligned as a type, so that its size is whole pages too: the madvise that
// gives it back covers it and nothing else.
static struct __attribute__((aligned(4096))) {
	char buf[4096];
	char line[513];
	struct ir_region regions[IR_MAX];
} ir_mem;

static int ir_hex(const char **p, uintptr_t *out)
{
	uintptr_t v = 0;
	int n = 0;
	for (;; (*p)++, n++) {
		char c = **p;
		if (c >= '0' && c <= '9')
			v = v * 16 + (uintptr_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v = v * 16 + (uintptr_t)(c - 'a' + 10);
		else
			break;
	}
	*out = v;
	return n > 0 && n <= 16;
}

static const char *ir_field(const char *p, const char *end, const char **fend)
{
	while (p < end && *p == ' ')
		p++;
	const char *q = p;
	while (q < end && *q != ' ')
		q++;
	*fend = q;
	return p;
}

// ir_header parses "start-end perms offset dev inode [path]": 1 for a
// mapping's first line, with *candidate set when it may be released.
static int ir_header(const char *line, const char *end, uintptr_t *start, uintptr_t *stop, int *candidate)
{
	const char *p = line;
	if (!ir_hex(&p, start) || *p != '-')
		return 0;
	p++;
	if (!ir_hex(&p, stop) || *p != ' ')
		return 0;
	const char *fe;
	const char *perms = ir_field(p, end, &fe);
	if (fe - perms != 4)
		return 0;
	const char *off = ir_field(fe, end, &fe);
	const char *dev = ir_field(fe, end, &fe);
	const char *ino = ir_field(fe, end, &fe);
	if (fe == off || fe == dev || fe == ino)
		return 0;
	int inode_zero = (fe - ino == 1 && ino[0] == '0');
	*candidate = !inode_zero && perms[1] == '-' && perms[3] == 'p';
	return 1;
}

// ir_release drops the mappings described above (madvise(2)
// MADV_DONTNEED: each page is the file's, unmodified, and is read again from
// the page cache at its next touch; a writable mapping, or one with a
// private page such as a relocated read-only segment, would lose data and
// is left alone). It returns the number of mappings released.
static int ir_release(void)
{
	int fd = open("/proc/self/smaps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	char *buf = ir_mem.buf, *line = ir_mem.line;
	struct ir_region *ir_regions = ir_mem.regions;
	size_t len = 0;   // bytes of the current line kept in line
	int n = 0;        // candidates recorded
	int cur = -1;     // index of the current mapping in ir_regions, or -1
	int cur_anon = 0; // the current mapping holds a private page
	for (;;) {
		ssize_t got = read(fd, buf, sizeof(ir_mem.buf));
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		for (ssize_t i = 0; i < got; i++) {
			if (buf[i] != '\n') {
				if (len < sizeof(ir_mem.line) - 1) // a longer line keeps its start
					line[len++] = buf[i];
				continue;
			}
			line[len] = '\0'; // ir_hex stops at it
			uintptr_t s, e;
			int cand;
			if (ir_header(line, line + len, &s, &e, &cand)) {
				if (cur >= 0 && cur_anon)
					n--; // the previous one had a private page
				cur = -1;
				cur_anon = 0;
				if (cand && e > s && n < IR_MAX) {
					ir_regions[n].start = s;
					ir_regions[n].end = e;
					cur = n++;
				}
			} else if (cur >= 0 && len > 10 && memcmp(line, "Anonymous:", 10) == 0) {
				const char *p = line + 10;
				while (p < line + len && *p == ' ')
					p++;
				if (!(line + len - p == 4 && memcmp(p, "0 kB", 4) == 0))
					cur_anon = 1;
			}
			len = 0;
		}
	}
	if (cur >= 0 && cur_anon)
		n--;
	close(fd);
	for (int i = 0; i < n; i++) {
		// MADV_RANDOM first: a fault in these mappings then maps the
		// pages around it (64 kB), not the whole large folio the page
		// cache holds them in (up to a megabyte here): the worker's
		// first command after the release maps back what it runs, and
		// costs ~0.1 ms more, not ~0.5 ms (measured on Pool.Exec). It
		// only changes how these mappings are faulted and read ahead.
		madvise((void *)ir_regions[i].start, ir_regions[i].end - ir_regions[i].start, MADV_RANDOM);
		madvise((void *)ir_regions[i].start, ir_regions[i].end - ir_regions[i].start, MADV_DONTNEED);
	}
	_Static_assert(sizeof(ir_mem) % 4096 == 0, "ir_mem is whole pages");
	madvise(&ir_mem, sizeof(ir_mem), MADV_DONTNEED);
	return n;
}

static void *ir_loop(void *arg)
{
	(void)arg;
	struct timespec ts = {.tv_sec = ir_delay_ms / 1000, .tv_nsec = (ir_delay_ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
	if (!atomic_load(&ir_served))
		ir_release();
	return NULL;
}

// nsbox_idle_release_start starts the thread that, delay_ms from now,
// releases the mappings unless nsbox_idle_served was called. 0, or an errno.
int nsbox_idle_release_start(long delay_ms)
{
	ir_delay_ms = delay_ms;
	sigset_t all, old;
	sigfillset(&all);
	// The new thread inherits the blocked mask: no signal can reach it.
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_t attr;
	pthread_t t;
	int err = pthread_attr_init(&attr);
	if (err == 0) {
		pthread_attr_setstacksize(&attr, 64 * 1024);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		err = pthread_create(&t, &attr, ir_loop, NULL);
		pthread_attr_destroy(&attr);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return err;
}

// nsbox_idle_served records that the worker served a request: the release
// does not happen. One store; no system call.
int nsbox_idle_served(void)
{
	atomic_store_explicit(&ir_served, 1, memory_order_relaxed);
	return 0;
}

// nsbox_idle_release_now releases at once, on the calling thread (tests).
// It returns the number of mappings released.
int nsbox_idle_release_now(void)
{
	return ir_release();
}
