// cmin: the isolation of `nsbox run -- CMD` in ~250 lines of C, without Go,
// IPC or error reporting. It is the floor nsbox's start path is measured
// against (docs/benchmarks.md), not a sandbox anyone should use.
//
// Same steps as nsbox: clone(NEWUSER|NEWPID|NEWNS|NEWNET|NEWIPC|NEWUTS|
// NEWCGROUP) with an id map of the caller's own ids, hostname, lo up, a
// fresh tmpfs root holding a read-only (nosuid,nodev, recursive) clone of
// every top-level host entry except /proc /dev /tmp /run, fresh /proc,
// minimal /dev (6 device binds, devpts, shm, symlinks), tmpfs /tmp and /run,
// pivot_root, root sealed read-only, capabilities dropped, no_new_privs,
// then CMD forked in a new session as PID 2 and waited for.
//
//	cc -O2 -o cmin cmin.c && ./cmin [-n] [-h] [-1] -- /bin/true
//	  -n  share the host network namespace (nsbox --net host)
//	  -1  clone the host root once, recursively, instead of per entry
//	  -t  print "TR c <step> <CLOCK_MONOTONIC ns>" lines on stderr
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/mount.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int trace, hostnet, onetree;
static char **cmd;
static int syncpipe[2];

static void tr(const char *s) {
	if (!trace) return;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	fprintf(stderr, "TR c %s %lld\n", s, (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
}

#define CHECK(x) do { if ((x) < 0) { fprintf(stderr, "cmin: %s: %s (line %d)\n", #x, strerror(errno), __LINE__); _exit(125); } } while (0)

static int open_tree_(int dfd, const char *p, unsigned f) { return syscall(SYS_open_tree, dfd, p, f); }
static int move_mount_(int fd, int tfd) {
	return syscall(SYS_move_mount, fd, "", tfd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
}
static int setattr_(int fd, const char *p, unsigned flags, uint64_t set) {
	struct mount_attr a = {.attr_set = set};
	return syscall(SYS_mount_setattr, fd, p, flags, &a, sizeof a);
}
static int newfs(const char *type, const char *k1, const char *v1, const char *k2, const char *v2, unsigned attrs) {
	int fs = syscall(SYS_fsopen, type, FSOPEN_CLOEXEC);
	CHECK(fs);
	if (k1) CHECK(syscall(SYS_fsconfig, fs, v1 ? FSCONFIG_SET_STRING : FSCONFIG_SET_FLAG, k1, v1, 0));
	if (k2) CHECK(syscall(SYS_fsconfig, fs, v2 ? FSCONFIG_SET_STRING : FSCONFIG_SET_FLAG, k2, v2, 0));
	CHECK(syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0));
	int m = syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, attrs);
	CHECK(m);
	close(fs);
	return m;
}
// target creates name (one component, in a directory fd we just created on
// a private tmpfs) and returns an O_PATH fd of it.
static int target(int dir, const char *name, int isdir) {
	if (isdir) {
		if (mkdirat(dir, name, 0755) < 0 && errno != EEXIST) CHECK(-1);
	} else {
		int f = openat(dir, name, O_CREAT | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
		CHECK(f);
		close(f);
	}
	int t = openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	CHECK(t);
	return t;
}

#define RO (MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)
static const char *devs[] = {"null", "zero", "full", "random", "urandom", "tty"};

static int child(void *arg) {
	char c;
	CHECK(read(syncpipe[0], &c, 1));
	tr("worker ready");
	sethostname("nsbox", 5);
	if (!hostnet) {
		int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		struct ifreq ifr = {0};
		strcpy(ifr.ifr_name, "lo");
		CHECK(ioctl(s, SIOCGIFFLAGS, &ifr));
		ifr.ifr_flags |= IFF_UP;
		CHECK(ioctl(s, SIOCSIFFLAGS, &ifr));
		close(s);
	}
	tr("lo up");
	CHECK(mount("", "/", NULL, MS_REC | MS_PRIVATE, NULL));
	// clone the host entries before the staging tmpfs hides /tmp
	struct { char name[256]; int fd, dir; char link[4096]; } ents[128];
	int n = 0;
	int hostroot = -1;
	if (onetree) {
		hostroot = open_tree_(AT_FDCWD, "/", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
		CHECK(hostroot);
		CHECK(setattr_(hostroot, "", AT_EMPTY_PATH | AT_RECURSIVE, RO));
	}
	DIR *d = opendir("/");
	struct dirent *e;
	while ((e = readdir(d)) && n < 128) {
		const char *nm = e->d_name;
		if (!strcmp(nm, ".") || !strcmp(nm, "..") || !strcmp(nm, "proc") || !strcmp(nm, "dev") || !strcmp(nm, "tmp") || !strcmp(nm, "run")) continue;
		strcpy(ents[n].name, nm);
		ents[n].fd = -1;
		ents[n].link[0] = 0;
		ents[n].dir = e->d_type == DT_DIR;
		if (e->d_type == DT_LNK) {
			ssize_t l = readlinkat(dirfd(d), nm, ents[n].link, sizeof ents[n].link - 1);
			CHECK(l);
			ents[n].link[l] = 0;
		} else if (!onetree) {
			char p[300];
			snprintf(p, sizeof p, "/%s", nm);
			ents[n].fd = open_tree_(AT_FDCWD, p, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
			CHECK(ents[n].fd);
			CHECK(setattr_(ents[n].fd, "", AT_EMPTY_PATH | AT_RECURSIVE, RO));
		}
		n++;
	}
	closedir(d);
	int devfd[6];
	for (int i = 0; i < 6; i++) {
		char p[64];
		snprintf(p, sizeof p, "/dev/%s", devs[i]);
		devfd[i] = open_tree_(AT_FDCWD, p, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
		CHECK(devfd[i]);
		CHECK(setattr_(devfd[i], "", AT_EMPTY_PATH, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC));
	}
	tr("host cloned");
	int root = newfs("tmpfs", "mode", "0755", "size", "1048576", MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	int stage = open("/tmp", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	CHECK(move_mount_(root, stage));
	close(stage);
	int rootdir = openat(root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK(rootdir);
	for (int i = 0; i < n; i++) {
		if (ents[i].link[0]) {
			CHECK(symlinkat(ents[i].link, rootdir, ents[i].name));
			continue;
		}
		int t = target(rootdir, ents[i].name, ents[i].dir);
		int src = ents[i].fd;
		if (onetree) {
			// a detached subtree of the one clone
			src = open_tree_(hostroot, ents[i].name, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
			CHECK(src);
		}
		CHECK(move_mount_(src, t));
		close(t);
		close(src);
	}
	tr("host attached");
	int proc = newfs("proc", NULL, NULL, NULL, NULL, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
	int t = target(rootdir, "proc", 1);
	CHECK(move_mount_(proc, t));
	close(t);
	close(proc);
	tr("proc");
	int dev = newfs("tmpfs", "mode", "0755", "size", "1048576", MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
	t = target(rootdir, "dev", 1);
	CHECK(move_mount_(dev, t));
	close(t);
	close(dev);
	int devdir = openat(rootdir, "dev", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	CHECK(devdir);
	for (int i = 0; i < 6; i++) {
		t = target(devdir, devs[i], 0);
		CHECK(move_mount_(devfd[i], t));
		close(t);
		close(devfd[i]);
	}
	int pts = newfs("devpts", "newinstance", NULL, "ptmxmode", "0666", MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
	t = target(devdir, "pts", 1);
	CHECK(move_mount_(pts, t));
	close(t);
	close(pts);
	int shm = newfs("tmpfs", "mode", "1777", NULL, NULL, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
	t = target(devdir, "shm", 1);
	CHECK(move_mount_(shm, t));
	close(t);
	close(shm);
	symlinkat("pts/ptmx", devdir, "ptmx");
	symlinkat("/proc/self/fd", devdir, "fd");
	symlinkat("/proc/self/fd/0", devdir, "stdin");
	symlinkat("/proc/self/fd/1", devdir, "stdout");
	symlinkat("/proc/self/fd/2", devdir, "stderr");
	close(devdir);
	tr("dev");
	const char *tmps[] = {"tmp", "run"};
	for (int i = 0; i < 2; i++) {
		int m = newfs("tmpfs", "mode", i ? "0755" : "1777", NULL, NULL, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
		t = target(rootdir, tmps[i], 1);
		CHECK(move_mount_(m, t));
		close(t);
		close(m);
	}
	tr("tmp run");
	CHECK(fchdir(root));
	CHECK(syscall(SYS_pivot_root, ".", "."));
	CHECK(umount2(".", MNT_DETACH));
	CHECK(chdir("/"));
	tr("pivot_root");
	CHECK(setattr_(AT_FDCWD, "/", 0, MOUNT_ATTR_RDONLY));
	close(rootdir);
	close(root);
	if (hostroot >= 0) close(hostroot);
	tr("sealed");
	CHECK(prctl(PR_SET_SECUREBITS, 0xef, 0, 0, 0));
	for (int cap = 0; cap <= 40; cap++) prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct cd[2] = {0};
	CHECK(syscall(SYS_capset, &h, cd));
	CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0));
	tr("caps dropped");
	pid_t p = fork();
	CHECK(p);
	if (p == 0) {
		setsid();
		execv(cmd[0], cmd);
		_exit(127);
	}
	int st;
	CHECK(waitpid(p, &st, 0));
	tr("command exited");
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void writefile(const char *p, const char *s) {
	int fd = open(p, O_WRONLY | O_CLOEXEC);
	CHECK(fd);
	CHECK(write(fd, s, strlen(s)));
	close(fd);
}

int main(int argc, char **argv) {
	int i = 1;
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--")) { i++; break; }
		if (strchr(argv[i], 'n')) hostnet = 1;
		if (strchr(argv[i], 't')) trace = 1;
		if (strchr(argv[i], '1')) onetree = 1;
	}
	if (i >= argc) { fprintf(stderr, "usage: cmin [-n1t] -- CMD ARGS\n"); return 2; }
	cmd = argv + i;
	tr("main");
	CHECK(pipe2(syncpipe, O_CLOEXEC));
	int flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP | SIGCHLD;
	if (!hostnet) flags |= CLONE_NEWNET;
	static char stack[1 << 20];
	pid_t pid = clone(child, stack + sizeof stack, flags, NULL);
	CHECK(pid);
	tr("cloned");
	char p[64], m[64];
	snprintf(p, sizeof p, "/proc/%d/uid_map", pid);
	snprintf(m, sizeof m, "%d %d 1\n", getuid(), getuid());
	writefile(p, m);
	if (getuid() != 0) {
		snprintf(p, sizeof p, "/proc/%d/setgroups", pid);
		writefile(p, "deny");
	}
	snprintf(p, sizeof p, "/proc/%d/gid_map", pid);
	snprintf(m, sizeof m, "%d %d 1\n", getgid(), getgid());
	writefile(p, m);
	tr("id maps");
	CHECK(write(syncpipe[1], "x", 1));
	int st;
	CHECK(waitpid(pid, &st, 0));
	tr("reaped");
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
