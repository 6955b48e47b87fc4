// The limit shim: puts one command under the session's limits and becomes
// that command, before the Go runtime of this binary ever starts.
//
// The worker (PID 1 of the sandbox, a Go process that must stay outside the
// limited cgroup and free of the command's rlimits) starts each command under
// limits as this binary re-executed with
//
//	argv = { "nsbox-limit-exec", RLIMITS, CGROUP_FDS, PATH, COMMAND_ARGV... }
//
// where RLIMITS is "res:cur:max,..." (decimal; empty for none) and
// CGROUP_FDS is "n,n" (the inherited cgroup join fds: cgroup.procs on v2,
// tasks on v1; empty for none). The
// constructor below runs in every process that links pkg/sandbox, ahead of
// the Go runtime; in all but the shim it returns after one string compare
// (and a getppid() when argv[0] matches), with no other effect. In the shim
// it validates every argument, writes "0" to each cgroup fd (moving itself
// into the limited groups) and closes it, sets the rlimits and execve's PATH
// with COMMAND_ARGV and the environment it was given. It never returns to Go:
// on failure it exits with 125 (bad arguments, cgroup or rlimit refused),
// 127 (PATH not found) or 126 (PATH not executable), after one line
// "nsbox: ..." on stderr, as the worker reports a failed start without
// limits.
//
// glibc calls ELF constructors with (argc, argv, envp); that is how the shim
// reads its arguments without allocating or parsing /proc. Other C libraries
// (musl) pass nothing, so the build is refused there rather than reading
// garbage: nsbox is built with cgo against glibc (Debian, Ubuntu, Fedora).

#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/resource.h>
#include <sys/prctl.h>
#include <unistd.h>

#if !defined(__GLIBC__)
#error "nsbox's limit shim needs glibc, which passes (argc, argv, envp) to ELF constructors"
#endif

_Static_assert(sizeof(unsigned long long) == sizeof(uint64_t), "strtoull must parse 64-bit limits");
_Static_assert(sizeof(rlim64_t) == sizeof(uint64_t), "rlim64_t must hold 64-bit limits");

// Must equal limitExecArg0 in rlimitexec.go.
static const char shim_arg0[] = "nsbox-limit-exec";
// Must equal limitExecLandlockArg0: the Landlock backend's worker is a
// plain child of the supervisor, not PID 1, so the parent test cannot
// apply. Started under this name anywhere, the shim still gives nothing
// a caller could not do to itself (see nsbox_limit_exec).
static const char shim_arg0_landlock[] = "nsbox-limit-exec-landlock";

// The argv layout the worker builds.
enum { ARG_RLIMITS = 1, ARG_FDS = 2, ARG_PATH = 3, ARG_COMMAND = 4 };

enum {
	EXIT_SHIM = 125,	// the shim itself failed
	EXIT_NOEXEC = 126,	// the command exists but cannot be executed
	EXIT_NOTFOUND = 127,	// the command does not exist
};

// A one-line message in a fixed buffer: nothing is allocated, and a long
// argument is cut short rather than overflowing.
struct msg {
	char buf[512];
	size_t len;
	int cut;
};

static void msg_byte(struct msg *m, char c)
{
	// One byte stays free for the final newline.
	if (m->len + 1 >= sizeof(m->buf)) {
		m->cut = 1;
		return;
	}
	m->buf[m->len++] = c;
}

static void msg_hex(struct msg *m, unsigned char c)
{
	static const char digits[] = "0123456789abcdef";
	msg_byte(m, '\\');
	msg_byte(m, 'x');
	msg_byte(m, digits[c >> 4]);
	msg_byte(m, digits[c & 0xf]);
}

// msg_text appends s, with control bytes escaped: a file name cannot put a
// second line, or terminal escapes, in nsbox's message.
static void msg_text(struct msg *m, const char *s)
{
	for (; *s != '\0' && !m->cut; s++) {
		unsigned char c = (unsigned char)*s;
		if (c < 0x20 || c == 0x7f)
			msg_hex(m, c);
		else
			msg_byte(m, (char)c);
	}
}

// msg_quoted appends s[0:n] in double quotes, escaped as Go's %q would for
// ASCII, so the messages read as the Go shim's did.
static void msg_quoted(struct msg *m, const char *s, size_t n)
{
	msg_byte(m, '"');
	for (size_t i = 0; i < n && !m->cut; i++) {
		unsigned char c = (unsigned char)s[i];
		switch (c) {
		case '"':
		case '\\':
			msg_byte(m, '\\');
			msg_byte(m, (char)c);
			break;
		case '\n':
			msg_byte(m, '\\');
			msg_byte(m, 'n');
			break;
		case '\t':
			msg_byte(m, '\\');
			msg_byte(m, 't');
			break;
		default:
			if (c < 0x20 || c == 0x7f)
				msg_hex(m, c);
			else
				msg_byte(m, (char)c);
		}
	}
	msg_byte(m, '"');
}

static void msg_int(struct msg *m, int v)
{
	char digits[16];
	size_t n = 0;
	// Negated as unsigned: INT_MIN has no positive int.
	unsigned int u = v < 0 ? 0u - (unsigned int)v : (unsigned int)v;
	if (v < 0)
		msg_byte(m, '-');
	do {
		digits[n++] = (char)('0' + u % 10);
		u /= 10;
	} while (u != 0 && n < sizeof(digits));
	while (n > 0)
		msg_byte(m, digits[--n]);
}

// msg_errno appends the error's text as Go spells it (glibc's text with a
// lower-case first letter): the same words as a failed start without limits.
// The locale is still "C" here (nothing has called setlocale), and no other
// code of this process runs (the Go runtime has not started), so
// strerror's buffer is not shared.
static void msg_errno(struct msg *m, int err)
{
	const char *s = strerror(err);
	if (s[0] >= 'A' && s[0] <= 'Z' && s[1] >= 'a' && s[1] <= 'z') {
		msg_byte(m, (char)(s[0] - 'A' + 'a'));
		s++;
	}
	msg_text(m, s);
}

// die writes the message as one line on stderr and exits with code. _exit:
// nothing of this process (atexit handlers, stdio, Go) may run.
static void __attribute__((noreturn)) die(struct msg *m, int code)
{
	if (m->cut && m->len >= 3)
		memcpy(m->buf + m->len - 3, "...", 3);
	m->buf[m->len++] = '\n';
	const char *p = m->buf;
	size_t left = m->len;
	while (left > 0) {
		ssize_t n = write(STDERR_FILENO, p, left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break; // stderr is gone: the exit code still tells
		p += n;
		left -= (size_t)n;
	}
	_exit(code);
}

static void msg_start(struct msg *m, const char *s)
{
	m->len = 0;
	m->cut = 0;
	msg_text(m, "nsbox: ");
	msg_text(m, s);
}

// parse_u64 parses s[0:n] as Go's strconv.ParseUint(s, 10, 64): one or more
// decimal digits and nothing else. strtoull alone would also take leading
// space, '+' and '-' (negating the value modulo 2^64: "-1" would become
// RLIM_INFINITY), hence the check of the first byte; the field ends at a
// delimiter or NUL, which no digit run can cross, so strtoull reads only
// inside it and must stop exactly at its end.
static int parse_u64(const char *s, size_t n, uint64_t *out)
{
	if (n == 0 || s[0] < '0' || s[0] > '9')
		return -1;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno != 0 || end != s + n)
		return -1;
	*out = v;
	return 0;
}

// parse_int parses s[0:n] as Go's strconv.Atoi (an optional sign, then one
// or more decimal digits) into an int: a larger value would be silently
// truncated by the kernel's unsigned int resource and fd arguments.
static int parse_int(const char *s, size_t n, int *out)
{
	size_t i = 0;
	if (n > 0 && (s[0] == '+' || s[0] == '-'))
		i = 1;
	if (i >= n || s[i] < '0' || s[i] > '9')
		return -1;
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno != 0 || end != s + n || v < INT_MIN || v > INT_MAX)
		return -1;
	*out = (int)v;
	return 0;
}

// next_item returns the length of the item at *s, up to the next comma or
// the end, and moves *s past it and its comma.
static size_t next_item(const char **s)
{
	const char *p = *s;
	size_t n = strcspn(p, ",");
	*s = p[n] == ',' ? p + n + 1 : p + n;
	return n;
}

struct limit {
	int resource;
	uint64_t cur, max;
};

// parse_rlimit parses one "res:cur:max" item: exactly three fields.
static int parse_rlimit(const char *s, size_t n, struct limit *l)
{
	const char *c1 = memchr(s, ':', n);
	if (c1 == NULL)
		return -1;
	const char *rest = c1 + 1;
	size_t rest_n = n - (size_t)(rest - s);
	const char *c2 = memchr(rest, ':', rest_n);
	if (c2 == NULL)
		return -1;
	const char *last = c2 + 1;
	size_t last_n = n - (size_t)(last - s);
	if (memchr(last, ':', last_n) != NULL)
		return -1;
	if (parse_int(s, (size_t)(c1 - s), &l->resource) != 0 ||
	    parse_u64(rest, (size_t)(c2 - rest), &l->cur) != 0 ||
	    parse_u64(last, last_n, &l->max) != 0)
		return -1;
	return 0;
}

// for_each_rlimit parses every item of the RLIMITS argument; with apply set
// it also sets each limit. Empty items are skipped, as the Go encoder's
// output never has one but an empty list is "".
static void for_each_rlimit(const char *list, int apply)
{
	struct msg m;
	const char *p = list;
	while (*p != '\0') {
		const char *item = p;
		size_t n = next_item(&p);
		if (n == 0)
			continue;
		struct limit l;
		if (parse_rlimit(item, n, &l) != 0) {
			msg_start(&m, "bad rlimit ");
			msg_quoted(&m, item, n);
			die(&m, EXIT_SHIM);
		}
		if (!apply)
			continue;
		// The worker sends cur == max, so the limit is a hard one: raising
		// it back takes CAP_SYS_RESOURCE in the host's user namespace,
		// which nothing in the sandbox has.
		struct rlimit64 rl = { .rlim_cur = l.cur, .rlim_max = l.max };
		if (setrlimit64(l.resource, &rl) != 0) {
			int err = errno;
			msg_start(&m, "set rlimit ");
			msg_int(&m, l.resource);
			msg_text(&m, ": ");
			msg_errno(&m, err);
			die(&m, EXIT_SHIM);
		}
	}
}

// for_each_cgroup_fd parses every item of the CGROUP_FDS argument; with
// apply set it also joins each group and closes its fd.
static void for_each_cgroup_fd(const char *list, int apply)
{
	struct msg m;
	const char *p = list;
	while (*p != '\0') {
		const char *item = p;
		size_t n = next_item(&p);
		if (n == 0)
			continue;
		int fd;
		// 0, 1 and 2 are the command's stdio, never a cgroup file:
		// writing "0" there would corrupt its input or output.
		if (parse_int(item, n, &fd) != 0 || fd < 3) {
			msg_start(&m, "bad cgroup fd ");
			msg_quoted(&m, item, n);
			die(&m, EXIT_SHIM);
		}
		if (!apply)
			continue;
		// "0" written to cgroup.procs moves the writing process, all its
		// threads, into the group; written to a v1 tasks file, only the
		// writing thread, which is all there is: the shim runs before
		// any thread exists, and execve keeps only the calling thread.
		// Every child of the command is then born inside.
		ssize_t w;
		do {
			w = write(fd, "0", 1);
		} while (w < 0 && errno == EINTR);
		int err = w == 1 ? 0 : w < 0 ? errno : EIO;
		// Closed before exec, whether or not the write worked: the
		// command must get no handle with which to move any process,
		// itself included, out of the limited group or into it.
		close(fd);
		if (err != 0) {
			msg_start(&m, "join the sandbox's cgroup: ");
			msg_errno(&m, err);
			die(&m, EXIT_SHIM);
		}
	}
}

static void __attribute__((noreturn)) run_limit_exec(char **argv, char **envp)
{
	// Every argument is checked before the first side effect: bad input
	// joins no group and sets no limit.
	for_each_rlimit(argv[ARG_RLIMITS], 0);
	for_each_cgroup_fd(argv[ARG_FDS], 0);

	// The groups first, then the rlimits: once RLIMIT_NPROC or RLIMIT_CPU
	// bind, nothing but the command should be left to run. Nothing here
	// allocates, so a low RLIMIT_DATA cannot make the shim itself fail.
	for_each_cgroup_fd(argv[ARG_FDS], 1);
	for_each_rlimit(argv[ARG_RLIMITS], 1);

	// The environment exactly as the worker passed it: the same one a
	// command started without limits gets.
	static char *no_env[] = { NULL };
	execve(argv[ARG_PATH], &argv[ARG_COMMAND], envp != NULL ? envp : no_env);

	int err = errno;
	struct msg m;
	msg_start(&m, argv[ARG_COMMAND]);
	if (err == ENOENT) {
		msg_text(&m, ": command not found");
		die(&m, EXIT_NOTFOUND);
	}
	msg_text(&m, ": cannot execute: ");
	msg_errno(&m, err);
	die(&m, EXIT_NOEXEC);
}

// nsbox_limit_exec takes over the process only when it is the shim: argv[0]
// is exactly the shim's name, the arguments are all there, and the parent is
// PID 1 (the worker) — the test isLimitExec states in Go. Any other start of
// a program linking pkg/sandbox returns at once, changing nothing. A command
// in the sandbox can exec this binary under that name as a child of PID 1;
// it then gets only what it could already do to itself (write "0" to its own
// fds, lower its own rlimits, execve).
__attribute__((constructor)) static void nsbox_limit_exec(int argc, char **argv, char **envp)
{
	if (getauxval(AT_SECURE))
		return; // see prespawn.c, nsbox_secure_exec
	if (argc <= ARG_COMMAND || argv == NULL || argv[0] == NULL)
		return;
	if (strcmp(argv[0], shim_arg0_landlock) != 0) {
		if (strcmp(argv[0], shim_arg0) != 0)
			return;
		if (getppid() != 1)
			return;
	}
	// Not dumpable while it is the shim: other processes of the sandbox
	// (same uid) cannot open its /proc/PID/fd (the cgroup join files) or
	// /proc/PID/exe. execve of the command makes it dumpable again.
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	run_limit_exec(argv, envp);
}
