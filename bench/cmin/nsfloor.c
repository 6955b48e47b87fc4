// nsfloor: the kernel's floor under any sandbox with nsbox's namespaces.
// One clone(2) into new user, pid, mount, network, ipc, uts and cgroup
// namespaces, the child's own id maps, then the exec of CMD, waited for.
// No mount, no /proc, no seccomp, no supervisor: what is left when
// everything a sandbox adds to the namespaces themselves costs nothing.
// docs/benchmarks.md compares it with bubblewrap to show how much of the
// "half of bwrap" target the kernel alone takes on a given host.
//
//	cc -O2 -o nsfloor nsfloor.c && ./nsfloor [-n] -- /bin/true
//	  -n  share the host network namespace (the net namespace's own cost)
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char **cmd;
static char uid_map[64], gid_map[64];
static char stack[64 * 1024];

static int write_file(const char *path, const char *s) {
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, s, strlen(s));
	close(fd);
	return n == (ssize_t)strlen(s) ? 0 : -1;
}

// The child maps its own ids, as nsbox's spawn does: a process may write
// a one-line map of its own euid once it holds CAP_SETUID in the new user
// namespace (user_namespaces(7)).
static int child(void *arg) {
	(void)arg;
	if (write_file("/proc/self/setgroups", "deny") < 0 ||
	    write_file("/proc/self/uid_map", uid_map) < 0 ||
	    write_file("/proc/self/gid_map", gid_map) < 0)
		_exit(125);
	execv(cmd[0], cmd);
	_exit(127);
}

int main(int argc, char **argv) {
	int flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET |
		    CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP | SIGCHLD;
	int i = 1;
	for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (strcmp(argv[i], "-n") == 0)
			flags &= ~CLONE_NEWNET;
		else {
			fprintf(stderr, "usage: nsfloor [-n] -- CMD [ARGS...]\n");
			return 2;
		}
	}
	if (i + 1 >= argc) {
		fprintf(stderr, "usage: nsfloor [-n] -- CMD [ARGS...]\n");
		return 2;
	}
	cmd = argv + i + 1;
	snprintf(uid_map, sizeof uid_map, "%u %u 1\n", geteuid(), geteuid());
	snprintf(gid_map, sizeof gid_map, "%u %u 1\n", getegid(), getegid());
	int pid = clone(child, stack + sizeof stack, flags, NULL);
	if (pid < 0) {
		perror("nsfloor: clone");
		return 125;
	}
	int st;
	if (waitpid(pid, &st, 0) < 0)
		return 125;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
