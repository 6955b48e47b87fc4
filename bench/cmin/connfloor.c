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

static void die(const char *what) {
	perror(what);
	exit(1);
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

static void send_fd(int sock, int fd) {
	char byte = 0, ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {&byte, 1};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
	struct cmsghdr *h = CMSG_FIRSTHDR(&m);
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(h), &fd, sizeof fd);
	if (sendmsg(sock, &m, 0) != 1)
		die("sendmsg");
}

static int recv_fd(int sock) {
	char byte, ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {&byte, 1};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
	if (recvmsg(sock, &m, MSG_CMSG_CLOEXEC) != 1 || !CMSG_FIRSTHDR(&m))
		die("recvmsg");
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
			die("unshare");
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
			die("no_new_privs");
		int l = syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
		if (l < 0)
			die("seccomp");
		send_fd(ctl, l);
		close(l);
	}
	double *t = malloc(n * sizeof *t);
	for (int i = 0; i < n; i++) {
		double t0 = now_us();
		int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		// send mode returns the installed file's number: any
		// non-negative answer is a connected socket there.
		if (s < 0 || connect(s, (struct sockaddr *)&target, sizeof target) < 0)
			die("client connect");
		close(s);
		t[i] = now_us() - t0;
	}
	double med = median(t, n);
	if (write(out, &med, sizeof med) != sizeof med)
		die("write");
	exit(0);
}

// serve answers the client's connects until it exits.
static void serve(enum mode m, int l, pid_t pid) {
	__u64 flag = SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP;
	ioctl(l, SECCOMP_IOCTL_NOTIF_SET_FLAGS, flag);
	int pidfd = syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0)
		die("pidfd_open");
	for (;;) {
		struct pollfd p = {l, POLLIN, 0};
		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			die("poll");
		if (p.revents & POLLHUP)
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
		// What nsbox's supervisor does at the least: read the address
		// (then check the call is still live: the pid could be
		// reused), take the socket, dial on the host, install.
		struct sockaddr_in a;
		struct iovec local = {&a, sizeof a}, remote = {(void *)(uintptr_t)n.data.args[1], sizeof a};
		if (process_vm_readv(n.pid, &local, 1, &remote, 1, 0) != sizeof a ||
		    ioctl(l, SECCOMP_IOCTL_NOTIF_ID_VALID, &n.id) != 0)
			die("read address");
		int theirs = syscall(SYS_pidfd_getfd, pidfd, (int)n.data.args[0], 0);
		int host = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (theirs < 0 || host < 0 || connect(host, (struct sockaddr *)&a, sizeof a) != 0)
			die("supervisor dial");
		struct seccomp_notif_addfd add = {
		    .id = n.id,
		    .flags = SECCOMP_ADDFD_FLAG_SETFD,
		    .srcfd = host,
		    .newfd = n.data.args[0],
		    .newfd_flags = O_CLOEXEC,
		};
		if (m == SEND) {
			add.flags |= SECCOMP_ADDFD_FLAG_SEND;
			if (ioctl(l, SECCOMP_IOCTL_NOTIF_ADDFD, &add) < 0)
				die("addfd send");
		} else {
			if (ioctl(l, SECCOMP_IOCTL_NOTIF_ADDFD, &add) < 0)
				die("addfd");
			ioctl(l, SECCOMP_IOCTL_NOTIF_SEND, &r);
		}
		close(host);
		close(theirs);
	}
	close(pidfd);
}

// run_mode runs one round of mode m and returns its median connect.
static double run_mode(enum mode m, int n) {
	int ctl[2], out[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) != 0 || pipe2(out, O_CLOEXEC) != 0)
		die("socketpair");
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		close(ctl[0]);
		close(out[0]);
		client(m, n, ctl[1], out[1]);
	}
	close(ctl[1]);
	close(out[1]);
	if (m != PLAIN) {
		int l = recv_fd(ctl[0]);
		serve(m, l, pid);
		close(l);
	}
	double med = 0;
	if (read(out[0], &med, sizeof med) != sizeof med)
		med = -1;
	int status;
	waitpid(pid, &status, 0);
	close(ctl[0]);
	close(out[0]);
	if (med < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "connfloor: mode %s failed\n", names[m]);
		exit(1);
	}
	return med;
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
	if (l < 0 || bind(l, (struct sockaddr *)&target, sizeof target) != 0 || listen(l, 4096) != 0 ||
	    getsockname(l, (struct sockaddr *)&target, &len) != 0)
		die("listener");
	pthread_t th;
	if (pthread_create(&th, NULL, accept_loop, &l) != 0)
		die("pthread_create");

	double *med[NMODES], *added[NMODES];
	for (int m = 0; m < NMODES; m++) {
		med[m] = calloc(rounds, sizeof(double));
		added[m] = calloc(rounds, sizeof(double));
	}
	for (int r = 0; r < rounds; r++) {
		for (int m = 0; m < NMODES; m++)
			med[m][r] = run_mode(m, n);
		for (int m = 0; m < NMODES; m++)
			added[m][r] = med[m][r] - med[PLAIN][r];
	}
	printf("connect (socket+connect+close) to the host's 127.0.0.1, %d rounds of %d, medians of the rounds' medians\n", rounds, n);
	printf("| mode | µs | µs added over plain |\n|---|---:|---:|\n");
	for (int m = 0; m < NMODES; m++)
		printf("| %s | %.1f | %+.1f |\n", names[m], median(med[m], rounds), median(added[m], rounds));
	return 0;
}
