// The identity holder and the stage: a root-less full id range without
// newuidmap and newgidmap at every start.
//
// A root-less sandbox with a full range needs its maps written by the
// set-uid helpers newuidmap and newgidmap, two execs that cost ~3 ms of a
// ~20 ms start here (each loads five shared libraries). The kernel lets a
// process write any map over ids it holds CAP_SETUID/CAP_SETGID for in
// the *parent* user namespace (user_namespaces(7), "Defining user and
// group ID mappings"). So, as rootless podman keeps a pause process:
//
//   - the holder ("nsbox-idholder") unshares a user namespace H once; the
//     supervisor has newuidmap/newgidmap map it with the very host ids a
//     sandbox's maps use, each to itself (so a map written from H means
//     what the same lines mean from the host). It then only listens on a
//     socket of mode 0700 in a directory of the caller's alone, answers
//     only the caller's uid (SO_PEERCRED) with an fd of H, and exits after
//     an idle time. A client keeps that fd only if H is owned by it and a
//     child of its own namespace (nsbox_holder_connect): never one a
//     sandbox made;
//   - the worker's exec becomes a stage: in its ELF constructor, before
//     any Go runtime starts and so single-threaded (setns(2) refuses a
//     user namespace to a multithreaded process), it joins H, where it
//     holds every capability (setns(2): the owner of a namespace may join
//     it), clones the real worker with the sandbox's namespaces and
//     CLONE_PARENT (so the worker is the supervisor thread's child, as it
//     would be without the stage: same reaping, same parent death signal),
//     and writes the worker's maps itself once the supervisor sends them.
//     The worker then execs this binary again, inside its namespaces
//     (one exec instead of the two helpers': see stage() for why it
//     cannot go on from the fork).
//
// The sandbox is one user namespace deeper, and nothing else changes: its
// ids mean the same host ids, its capabilities are the same list (set
// below), and no process of it can reach H (joining H needs CAP_SYS_ADMIN
// in H, which only H's own members and the host owner have).

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/nsfs.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "holder.h"

#ifndef __GLIBC__
#error "holder.c needs glibc, which passes (argc, argv, envp) to ELF constructors"
#endif

#ifndef SYS_close_range
#define SYS_close_range 436
#endif

// nsbox_holder_dir is the directory of the caller's holder: $XDG_RUNTIME_DIR
// when that is a directory of the caller's alone, else /tmp/nsbox-UID
// (made by StartHolder, mode 0700). Either way a directory no other user
// may write, so no other user can take the socket's name, its temporary
// bind name or the lock (holder.go) before us; one who makes /tmp/nsbox-UID
// first only costs us the holder (nsbox_holder_dir_ok refuses it).
int nsbox_holder_dir(char *buf, size_t n) {
	const char *rt = getenv("XDG_RUNTIME_DIR");
	int r;
	if (rt && rt[0] == '/' && nsbox_holder_dir_ok(rt))
		r = snprintf(buf, n, "%s", rt);
	else
		r = snprintf(buf, n, "/tmp/nsbox-%u", (unsigned)geteuid());
	// Room for "/nsbox-idholder.sock.PID" in a sun_path.
	return r > 0 && (size_t)r < n && (size_t)r + 32 < sizeof(((struct sockaddr_un *)0)->sun_path) ? 0 : -1;
}

// nsbox_holder_dir_ok: dir is a directory (not a symlink to one) of the
// caller's, that no one else may write or search.
int nsbox_holder_dir_ok(const char *dir) {
	struct stat st;
	return lstat(dir, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() && (st.st_mode & 077) == 0;
}

int nsbox_holder_path(char *buf, size_t n) {
	char dir[108];
	if (nsbox_holder_dir(dir, sizeof dir) != 0)
		return -1;
	int r = snprintf(buf, n, "%s/nsbox-idholder.sock", dir);
	return r > 0 && (size_t)r < n ? 0 : -1;
}

// same_ns: fd and /proc/self/ns/user name one namespace.
static int same_userns(int fd) {
	struct stat a, b;
	return fstat(fd, &a) == 0 && stat("/proc/self/ns/user", &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

// close_rights closes every fd an SCM_RIGHTS message of m installed:
// a malformed answer (two fds, or a cut one) leaves none behind.
static void close_rights(struct msghdr *m) {
	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len < CMSG_LEN(0))
			continue;
		size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof fd, sizeof fd);
			close(fd);
		}
	}
}

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77 // Linux 6.5, socket(7)
#endif

// peer_in_our_pidns says whether the peer of s (pid as SO_PEERCRED tells
// it) lives in our own PID namespace. The holder does; a process of a
// sandbox never does (its PID namespace is the sandbox's own): this is
// what keeps a sandbox that can write the holder's directory from
// answering with its own user namespace, a child of ours like the
// holder's, which would make the processes of that sandbox owners of the
// next one's namespace (review 69). Where the kernel gives a pidfd of the
// peer, the answer is checked to be about the peer still: a live process
// keeps its pid.
static int peer_in_our_pidns(int s, pid_t pid) {
	char p[64];
	struct stat a, b;
	int pidfd = -1, ok;
	socklen_t l = sizeof pidfd;
	if (pid <= 0)
		return 0;
	// Only a kernel without the option (ENOPROTOOPT, before 6.5) goes
	// on without a pidfd: 6.5 to ~6.15 answer EINVAL for a peer already
	// reaped, the very case the pidfd is here to catch (review 70).
	if (getsockopt(s, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &l) < 0) {
		if (errno != ENOPROTOOPT)
			return 0;
		pidfd = -1;
	}
	snprintf(p, sizeof p, "/proc/%d/ns/pid", (int)pid);
	ok = stat(p, &a) == 0 && stat("/proc/self/ns/pid", &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
	if (pidfd >= 0) {
		if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0)
			ok = 0;
		close(pidfd);
	}
	return ok;
}

// nsbox_holder_connect asks the holder at path for an fd of its user
// namespace: -1 when there is none, or it is not ours. *holder_pid is the
// holder's pid as the kernel tells it (SO_PEERCRED).
int nsbox_holder_connect(const char *path, int *holder_pid) {
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof sa.sun_path)
		return -1;
	strcpy(sa.sun_path, path);
	// Only in our own directory, and only a socket of ours: nothing of
	// another user's is ever connected to (a squatter's full backlog
	// would hold every start up; found by review).
	char dir[sizeof sa.sun_path];
	struct stat st;
	const char *slash = strrchr(path, '/');
	if (!slash || slash == path || (size_t)(slash - path) >= sizeof dir)
		return -1;
	memcpy(dir, path, slash - path);
	dir[slash - path] = 0;
	if (!nsbox_holder_dir_ok(dir) || lstat(path, &st) < 0 || !S_ISSOCK(st.st_mode) || st.st_uid != geteuid())
		return -1;
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0)
		return -1;
	int fd = -1, r;
	// Non-blocking: a holder whose backlog is full (stopped, or stuck)
	// fails the connect at once. Then a holder that does not answer
	// within this long is passed by, and the start goes on without it.
	// With a timeout set, a signal (the Go runtime's, on this thread)
	// fails a call with EINTR instead of restarting it (signal(7)).
	struct timeval tv = {.tv_sec = 0, .tv_usec = 250 * 1000};
	while ((r = connect(s, (struct sockaddr *)&sa, sizeof sa)) < 0 && errno == EINTR)
		;
	if (r < 0 || fcntl(s, F_SETFL, 0) < 0 || setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0)
		goto out;
	// Only a listener of our own uid.
	struct ucred cr;
	socklen_t len = sizeof cr;
	if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0 || cr.uid != geteuid() || !peer_in_our_pidns(s, cr.pid))
		goto out;
	char b;
	struct iovec iov = {.iov_base = &b, .iov_len = 1};
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
	ssize_t n;
	while ((n = recvmsg(s, &m, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
		;
	if (n < 0)
		goto out;
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	if (n != 1 || (m.msg_flags & MSG_CTRUNC) || !c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
	    c->cmsg_len != CMSG_LEN(sizeof(int))) {
		close_rights(&m);
		goto out;
	}
	memcpy(&fd, CMSG_DATA(c), sizeof fd);
	// A user namespace (NS_GET_NSTYPE) that we own (NS_GET_OWNER_UID) and
	// that is a child of our own (NS_GET_PARENT, ioctl_ns(2)). The last
	// is what keeps a sandbox out: its processes run as our uid, so with
	// /tmp writable one could listen here and hand out a namespace of
	// its making whose maps look right from the host; sandboxes made in
	// it would be below the attacker's (found by review). Any namespace a
	// sandbox makes is at least two levels down, never a child of ours;
	// its own namespace is a child of ours, but then the peer is a
	// process of the sandbox, outside our PID namespace, refused above
	// (peer_in_our_pidns; review 69).
	uid_t owner;
	int parent = -1;
	if (ioctl(fd, NS_GET_NSTYPE) != CLONE_NEWUSER || ioctl(fd, NS_GET_OWNER_UID, &owner) < 0 || owner != geteuid() ||
	    (parent = ioctl(fd, NS_GET_PARENT)) < 0 || !same_userns(parent)) {
		if (parent >= 0)
			close(parent);
		close(fd);
		fd = -1;
		goto out;
	}
	close(parent);
	*holder_pid = cr.pid;
out:
	close(s);
	return fd;
}

// nsbox_stage_env writes the environment entry that makes a worker's exec
// a stage (read back by stage()): the one place its format is made, for
// prespawn.c and spawn.go alike.
int nsbox_stage_env(char *buf, size_t n, unsigned flags, uint64_t ambient) {
	int r = snprintf(buf, n, "%s%x:%llx", NSBOX_STAGE_ENV, flags, (unsigned long long)ambient);
	return r > 0 && (size_t)r < n ? 0 : -1;
}

// ---- the holder ----

static void drop_caps(void) {
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2] = {{0}};
	syscall(SYS_capset, &h, d);
}

// holder_main: fd 3 is the supervisor that started it (holder.go
// StartHolder), which writes the maps between 'u' and 'g'.
static void holder_main(const char *path, int idle_s) {
	char c = 'u';
	// Nothing of the host is held: "/" as the working directory (no
	// mount kept busy), fds 0 to 2 are /dev/null (StartHolder), and no
	// fd its starter inherited without O_CLOEXEC stays open for its life.
	syscall(SYS_close_range, 4, ~0U, 0);
	if (unshare(CLONE_NEWUSER) < 0 || write(3, &c, 1) != 1)
		_exit(1);
	if (read(3, &c, 1) != 1 || c != 'g')
		_exit(1); // the supervisor could not map it
	int ns = open("/proc/self/ns/user", O_RDONLY | O_CLOEXEC);
	int l = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int n = snprintf(sa.sun_path, sizeof sa.sun_path, "%s.%d", path, (int)getpid());
	if (ns < 0 || l < 0 || n <= 0 || (size_t)n >= sizeof sa.sun_path)
		_exit(1);
	// 0700: no other user may even connect (unix(7): connecting needs
	// write permission on the socket file).
	umask(077);
	unlink(sa.sun_path);
	if (bind(l, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(l, 64) < 0)
		_exit(1);
	// Bound under a name of its own, then put in place at once: a client
	// never finds a socket that does not answer yet, and a holder that
	// replaces a stale one (other maps) does so in one step. Both names are
	// in the caller's own directory (nsbox_holder_dir), where no other
	// user can put anything.
	if (rename(sa.sun_path, path) < 0) {
		unlink(sa.sun_path);
		_exit(1);
	}
	struct stat mine;
	if (stat(path, &mine) < 0)
		_exit(1);
	// The holder needs no capability in H: it only hands out an fd.
	drop_caps();
	c = 'k';
	if (write(3, &c, 1) != 1)
		_exit(1);
	close(3);
	signal(SIGPIPE, SIG_IGN);
	for (;;) {
		struct pollfd p = {.fd = l, .events = POLLIN};
		int r = poll(&p, 1, idle_s * 1000);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			// Idle: leave, and take the name along only if it is still
			// ours (a newer holder may have replaced it). The race with
			// a rename in between costs the next start a new holder.
			struct stat now;
			if (stat(path, &now) == 0 && now.st_ino == mine.st_ino && now.st_dev == mine.st_dev)
				unlink(path);
			_exit(0);
		}
		int a = accept4(l, NULL, NULL, SOCK_CLOEXEC);
		if (a < 0)
			continue;
		struct ucred cr;
		socklen_t len = sizeof cr;
		if (getsockopt(a, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 && cr.uid == getuid()) {
			char b = 'n';
			struct iovec iov = {.iov_base = &b, .iov_len = 1};
			union {
				struct cmsghdr h;
				char buf[CMSG_SPACE(sizeof(int))];
			} u;
			memset(&u, 0, sizeof u);
			struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
			struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
			cm->cmsg_level = SOL_SOCKET;
			cm->cmsg_type = SCM_RIGHTS;
			cm->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(cm), &ns, sizeof ns);
			sendmsg(a, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
		}
		close(a);
	}
}

// ---- the stage ----

static void stage_report(int32_t pid, int32_t step, int32_t err) {
	struct nsbox_stage_report r = {.pid = pid, .step = step, .err = err};
	send(NSBOX_STAGE_FD, &r, sizeof r, MSG_NOSIGNAL);
}

static int write_proc(int pid, const char *file, const char *buf, size_t len) {
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/%s", pid, file);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, buf, len);
	int err = errno;
	close(fd);
	errno = err;
	return n == (ssize_t)len ? 0 : -1;
}

// stage_maps writes the worker's maps as the supervisor asks, from H, and
// answers. The request comes from the supervisor that spawned this
// process (its own socketpair): it is the supervisor's choice, checked by
// the kernel against H's own maps.
static void stage_maps(int pid) {
	char buf[8192];
	ssize_t n = recv(NSBOX_STAGE_FD, buf, sizeof buf, 0);
	if (n <= 0)
		_exit(0); // the worker was not kept: nothing to write
	struct nsbox_stage_maps q;
	if ((size_t)n < sizeof q) {
		stage_report(0, 4, EINVAL);
		_exit(1);
	}
	memcpy(&q, buf, sizeof q);
	if (q.ulen <= 0 || q.glen <= 0 || sizeof q + (size_t)q.ulen + (size_t)q.glen != (size_t)n) {
		stage_report(0, 4, EINVAL);
		_exit(1);
	}
	const char *u = buf + sizeof q, *g = u + q.ulen;
	// setgroups "deny" before the gid map, as WriteMaps does for the
	// single-id map (CVE-2014-8989).
	if (q.deny_setgroups && write_proc(pid, "setgroups", "deny", 4) < 0) {
		stage_report(0, 1, errno);
		_exit(1);
	}
	if (write_proc(pid, "uid_map", u, q.ulen) < 0) {
		stage_report(0, 2, errno);
		_exit(1);
	}
	if (write_proc(pid, "gid_map", g, q.glen) < 0) {
		stage_report(0, 3, errno);
		_exit(1);
	}
	stage_report(0, 0, 0);
	_exit(0);
}

// stage runs in the worker's exec (fds 0 to 3 the worker's, 4 H, 5 the
// supervisor's stage socket); it never returns: the worker it makes execs
// this binary again.
static void stage(const char *spec, char **argv, char **envp) {
	unsigned long flags;
	unsigned long long ambient;
	if (sscanf(spec, "%lx:%llx", &flags, &ambient) != 2) {
		stage_report(0, NSBOX_STAGE_CLONE, EINVAL);
		_exit(127);
	}
	if (setns(NSBOX_STAGE_USERNS_FD, CLONE_NEWUSER) < 0) {
		stage_report(0, NSBOX_STAGE_JOIN, errno);
		_exit(127);
	}
	close(NSBOX_STAGE_USERNS_FD);
	// A fork (no CLONE_VM, no new stack) with the sandbox's namespaces;
	// CLONE_PARENT makes the worker the supervisor thread's child, and its
	// exit signal is this process's, SIGCHLD (clone(2)).
	long pid = syscall(SYS_clone, (unsigned long)CLONE_PARENT | flags, 0UL, 0UL, 0UL, 0UL);
	if (pid < 0) {
		stage_report(0, NSBOX_STAGE_CLONE, errno);
		_exit(127);
	}
	if (pid == 0) {
		// The worker. A parent death signal does not cross a fork: set
		// it again (it names the supervisor thread, CLONE_PARENT). A
		// supervisor gone before this line leaves the worker a channel
		// that reads EOF at once: it exits, as spawn.c says.
		close(NSBOX_STAGE_FD);
		if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
			_exit(127);
		// Its own session, as spawn.c gives a worker (no controlling
		// terminal: CVE-2017-5226).
		setsid();
		// As root of its new namespace it holds every capability there;
		// keep only the worker's list, as an exec'd worker has it
		// (spawn.h NSBOX_WORKER_CAPS: permitted, effective, inheritable
		// and ambient).
		struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
		struct __user_cap_data_struct d[2];
		d[0].permitted = d[0].effective = d[0].inheritable = (uint32_t)ambient;
		d[1].permitted = d[1].effective = d[1].inheritable = (uint32_t)(ambient >> 32);
		if (syscall(SYS_capset, &h, d) < 0)
			_exit(127);
		for (int c = 0; c < 64; c++)
			if (((ambient >> c) & 1) && prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, c, 0, 0) < 0)
				_exit(127);
		// And an exec of its own, inside its namespace: the kernel ties a
		// process's memory to the user namespace it was exec'd in
		// (mm->user_ns), and checks ptrace access to a non-dumpable
		// process against that namespace. A worker that kept the stage's
		// memory would be tied to the host's namespace, and the
		// supervisor, which owns the sandbox's namespace but holds no
		// capability on the host, could not take its fds (pidfd_getfd)
		// or read its /proc files. The stage's entry stays behind.
		char *env[64];
		int n = 0;
		for (char **e = envp; *e && n < 63; e++)
			if (strncmp(*e, NSBOX_STAGE_ENV, sizeof NSBOX_STAGE_ENV - 1) != 0)
				env[n++] = *e;
		env[n] = NULL;
		execve("/proc/self/exe", argv, env);
		_exit(127);
	}
	// The stage keeps only its socket: fds 0 to 3 are the worker's.
	for (int fd = 0; fd < NSBOX_STAGE_USERNS_FD; fd++)
		close(fd);
	syscall(SYS_close_range, NSBOX_STAGE_FD + 1, ~0U, 0);
	stage_report((int32_t)pid, 0, 0);
	stage_maps((int)pid);
}

// idle_seconds: at least 1, at most a day (poll(2) takes milliseconds in
// an int).
static int idle_seconds(const char *a) {
	long v = strtol(a, NULL, 10);
	return v < 1 ? 1 : v > 86400 ? 86400 : (int)v;
}

__attribute__((constructor)) static void nsbox_holder_init(int argc, char **argv, char **envp) {
	if (getauxval(AT_SECURE))
		return; // see prespawn.c, nsbox_secure_exec
	if (argc < 1 || !argv[0])
		return;
	if (argc == 3 && strcmp(argv[0], "nsbox-idholder") == 0) {
		for (char **e = envp; *e; e++)
			if (strcmp(*e, "_NSBOX_IDHOLDER=1") == 0)
				holder_main(argv[1], idle_seconds(argv[2]));
		return;
	}
	if (strcmp(argv[0], "nsbox-init") != 0)
		return;
	for (char **e = envp; *e; e++)
		if (strncmp(*e, NSBOX_STAGE_ENV, sizeof NSBOX_STAGE_ENV - 1) == 0) {
			stage(*e + sizeof NSBOX_STAGE_ENV - 1, argv, envp);
			return;
		}
}
