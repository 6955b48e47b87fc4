// connfloor: the filtered network's connect (issue 18) built in C, to show
// what the design costs on a given host without nsbox's Go supervisor.
//
// A client process makes socket+connect+close to a listener on the host's
// 127.0.0.1, in rounds; each round runs every mode once, one after the
// other, so that load hits all alike. Modes:
//
//	plain     no filter: the baseline.
//	trap      connect traps to a seccomp user-notification supervisor,
//	          which answers "continue": the notification round trip alone.
//	filtered  the client is in a network namespace of its own (nothing
//	          listens there); the supervisor reads the address, takes a
//	          copy of the client's socket (pidfd_getfd), makes and
//	          connects a socket in the host's namespace, installs it in
//	          place of the client's (SECCOMP_IOCTL_NOTIF_ADDFD with
//	          SECCOMP_ADDFD_FLAG_SETFD) and answers 0: nsbox's design with
//	          no policy, no option copies and no bookkeeping.
//	send      the same, with the install and the answer in one call
//	          (SECCOMP_ADDFD_FLAG_SEND). Not usable for connect, which
//	          then returns the file's number instead of 0: what one round
//	          trip fewer would save.
//
// Every mode but plain asks for synchronous wake-ups (Linux 6.6,
// SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP), as nsbox does. Runs as root or
// root-less (the client's namespaces are a new user and network one).
//
//	cc -O2 -pthread -o connfloor connfloor.c && ./connfloor [-r ROUNDS] [-n CONNECTS]
//
// It prints, per mode, the median over the rounds of each round's median
// connect, and the median of what each round added over plain.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_ADDFD_FLAG_SEND
#define SECCOMP_ADDFD_FLAG_SEND (1UL << 1)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP 1
#endif

enum mode { PLAIN, TRAP, FILTERED, SEND, NMODES };
static const char *names[NMODES] = {"plain", "trap", "filtered", "send"};

static struct sockaddr_in target;

static double now_us(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
	qsort(v, n, sizeof *v, cmp_double);
	return v[n / 2];
}

// A mode that cannot run here (no user namespaces, no seccomp
// notifications, a kernel without ADDFD's flags) is reported and skipped;
// the others still run, and the program never fails make bench for it.
struct result {
	double med; // median connect in µs, or < 0 when the mode failed
	char why[200];
};

static char serve_why[200]; // the supervisor's reason, when it failed

static void child_fail(int out, const char *what) {
	struct result r = {.med = -1};
	snprintf(r.why, sizeof r.why, "%s: %s", what, strerror(errno));
	if (write(out, &r, sizeof r) != sizeof r) {
		// Nothing more to say: the parent reports a short read.
	}
	_exit(0);
}

// accept_loop takes and closes every connection to the listener.
static void *accept_loop(void *arg) {
	int l = *(int *)arg;
	for (;;) {
		int c = accept4(l, NULL, NULL, SOCK_CLOEXEC);
		if (c >= 0)
			close(c);
	}
	return NULL;
}

static int send_fd(int sock, int fd) {
	char byte = 0, ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {&byte, 1};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
	struct cmsghdr *h = CMSG_FIRSTHDR(&m);
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(h), &fd, sizeof fd);
	return sendmsg(sock, &m, 0) == 1 ? 0 : -1;
}

// recv_fd returns the fd the client sent, or -1 when it sent none (it
// failed before: its result says why).
static int recv_fd(int sock) {
	char byte, ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {&byte, 1};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
	if (recvmsg(sock, &m, MSG_CMSG_CLOEXEC) != 1 || !CMSG_FIRSTHDR(&m))
		return -1;
	int fd;
	memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof fd);
	return fd;
}

// client makes n connects and writes their median (µs) to out.
static void client(enum mode m, int n, int ctl, int out) {
	if (m == FILTERED || m == SEND) {
		// A network namespace of its own: only the supervisor's
		// socket reaches the listener.
		if (unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0)
			child_fail(out, "unshare(CLONE_NEWUSER|CLONE_NEWNET)");
	}
	if (m != PLAIN) {
		struct sock_filter f[] = {
		    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_connect, 0, 1),
		    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
		    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		};
		struct sock_fprog prog = {sizeof f / sizeof f[0], f};
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
			child_fail(out, "no_new_privs");
		int l = syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
		if (l < 0)
			child_fail(out, "seccomp(SECCOMP_FILTER_FLAG_NEW_LISTENER)");
		if (send_fd(ctl, l) != 0)
			child_fail(out, "sendmsg");
		close(l);
	}
	close(ctl);
	struct result r = {0};
	double *t = malloc(n * sizeof *t);
	if (!t)
		child_fail(out, "malloc");
	for (int i = 0; i < n; i++) {
		double t0 = now_us();
		int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		// send mode returns the installed file's number: any
		// non-negative answer is a connected socket there.
		if (s < 0 || connect(s, (struct sockaddr *)&target, sizeof target) < 0)
			child_fail(out, "connect");
		close(s);
		t[i] = now_us() - t0;
	}
	r.med = median(t, n);
	if (write(out, &r, sizeof r) != sizeof r)
		_exit(1);
	_exit(0);
}

// refuse answers notification n with an error after the supervisor
// failed at what; the client's connect then fails and the mode is
// skipped with this reason.
static void refuse(int l, __u64 id, const char *what) {
	if (!serve_why[0])
		snprintf(serve_why, sizeof serve_why, "%s: %s", what, strerror(errno));
	struct seccomp_notif_resp r = {.id = id, .error = -EPERM};
	ioctl(l, SECCOMP_IOCTL_NOTIF_SEND, &r);
}

// serve answers the client's connects until it exits.
static void serve(enum mode m, int l, pid_t pid) {
	__u64 flag = SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP;
	ioctl(l, SECCOMP_IOCTL_NOTIF_SET_FLAGS, flag); // optional (6.6)
	int pidfd = syscall(SYS_pidfd_open, pid, 0);
	for (;;) {
		struct pollfd p = {l, POLLIN, 0};
		if (poll(&p, 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p.revents & (POLLHUP | POLLERR | POLLNVAL))
			break;
		struct seccomp_notif n;
		memset(&n, 0, sizeof n);
		if (ioctl(l, SECCOMP_IOCTL_NOTIF_RECV, &n) != 0)
			continue; // ENOENT: the client died meanwhile
		struct seccomp_notif_resp r = {.id = n.id};
		if (m == TRAP) {
			r.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
			ioctl(l, SECCOMP_IOCTL_NOTIF_SEND, &r);
			continue;
		}
#ifdef SECCOMP_IOCTL_NOTIF_ADDFD
		// What nsbox's supervisor does at the least: read the address
		// (then check the call is still live: the pid could be
		// reused), take the socket, dial on the host, install.
		struct sockaddr_in a;
		struct iovec local = {&a, sizeof a}, remote = {(void *)(uintptr_t)n.data.args[1], sizeof a};
		if (process_vm_readv(n.pid, &local, 1, &remote, 1, 0) != sizeof a ||
		    ioctl(l, SECCOMP_IOCTL_NOTIF_ID_VALID, &n.id) != 0) {
			refuse(l, n.id, "read the address");
			continue;
		}
		int theirs = pidfd < 0 ? -1 : syscall(SYS_pidfd_getfd, pidfd, (int)n.data.args[0], 0);
		if (theirs < 0) {
			refuse(l, n.id, "pidfd_getfd");
			continue;
		}
		int host = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (host < 0 || connect(host, (struct sockaddr *)&a, sizeof a) != 0) {
			refuse(l, n.id, "the supervisor's dial");
			if (host >= 0)
				close(host);
			close(theirs);
			continue;
		}
		struct seccomp_notif_addfd add = {
		    .id = n.id,
		    .flags = SECCOMP_ADDFD_FLAG_SETFD,
		    .srcfd = host,
		    .newfd = n.data.args[0],
		    .newfd_flags = O_CLOEXEC,
		};
		if (m == SEND)
			add.flags |= SECCOMP_ADDFD_FLAG_SEND;
		if (ioctl(l, SECCOMP_IOCTL_NOTIF_ADDFD, &add) < 0)
			refuse(l, n.id, m == SEND ? "SECCOMP_IOCTL_NOTIF_ADDFD with SEND (Linux 5.14)" : "SECCOMP_IOCTL_NOTIF_ADDFD (Linux 5.9)");
		else if (m != SEND)
			ioctl(l, SECCOMP_IOCTL_NOTIF_SEND, &r);
		close(host);
		close(theirs);
#else
		errno = ENOSYS;
		refuse(l, n.id, "built without SECCOMP_IOCTL_NOTIF_ADDFD (kernel headers older than 5.9)");
#endif
	}
	if (pidfd >= 0)
		close(pidfd);
}

// run_mode runs one round of mode m: its median connect, or < 0 with why
// filled when the mode cannot run here.
static double run_mode(enum mode m, int n, char *why, size_t whylen) {
	int ctl[2], out[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) != 0 || pipe2(out, O_CLOEXEC) != 0) {
		snprintf(why, whylen, "socketpair: %s", strerror(errno));
		return -1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(why, whylen, "fork: %s", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		close(ctl[0]);
		close(out[0]);
		client(m, n, ctl[1], out[1]);
	}
	close(ctl[1]);
	close(out[1]);
	serve_why[0] = 0;
	if (m != PLAIN) {
		int l = recv_fd(ctl[0]);
		if (l >= 0) {
			serve(m, l, pid);
			close(l);
		}
	}
	struct result r = {.med = -1};
	if (read(out[0], &r, sizeof r) != sizeof r)
		snprintf(r.why, sizeof r.why, "the client ended without a result");
	int status;
	waitpid(pid, &status, 0);
	close(ctl[0]);
	close(out[0]);
	if (r.med < 0)
		snprintf(why, whylen, "%s", serve_why[0] ? serve_why : r.why);
	return r.med;
}

int main(int argc, char **argv) {
	int rounds = 15, n = 500;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-r"))
			rounds = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-n"))
			n = atoi(argv[i + 1]);
	}
	if (rounds < 1 || n < 1) {
		fprintf(stderr, "usage: connfloor [-r ROUNDS] [-n CONNECTS]\n");
		return 2;
	}
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	target.sin_family = AF_INET;
	target.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t len = sizeof target;
	pthread_t th;
	if (l < 0 || bind(l, (struct sockaddr *)&target, sizeof target) != 0 || listen(l, 4096) != 0 ||
	    getsockname(l, (struct sockaddr *)&target, &len) != 0 || pthread_create(&th, NULL, accept_loop, &l) != 0) {
		printf("SKIP connect floor: no listener on 127.0.0.1: %s\n", strerror(errno));
		return 0;
	}

	double *med[NMODES], *added[NMODES];
	char why[NMODES][200];
	int ok[NMODES];
	for (int m = 0; m < NMODES; m++) {
		med[m] = calloc(rounds, sizeof(double));
		added[m] = calloc(rounds, sizeof(double));
		ok[m] = 1;
		why[m][0] = 0;
	}
	for (int r = 0; r < rounds; r++) {
		for (int m = 0; m < NMODES; m++)
			if (ok[m] && (med[m][r] = run_mode(m, n, why[m], sizeof why[m])) < 0)
				ok[m] = 0; // skipped from now on, with its reason
		for (int m = 0; m < NMODES; m++)
			added[m][r] = med[m][r] - med[PLAIN][r];
	}
	printf("connect (socket+connect+close) to the host's 127.0.0.1, %d rounds of %d, medians of the rounds' medians\n", rounds, n);
	printf("| mode | µs | µs added over plain |\n|---|---:|---:|\n");
	for (int m = 0; m < NMODES; m++) {
		if (!ok[m])
			continue;
		if (ok[PLAIN])
			printf("| %s | %.1f | %+.1f |\n", names[m], median(med[m], rounds), median(added[m], rounds));
		else
			printf("| %s | %.1f | — |\n", names[m], median(med[m], rounds));
	}
	for (int m = 0; m < NMODES; m++)
		if (!ok[m])
			printf("- %s skipped: %s\n", names[m], why[m]);
	return 0;
}
