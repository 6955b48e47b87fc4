// A head start for `nsbox run`: this ELF constructor, which runs before the
// supervisor's Go runtime starts, has a helper thread spawn the worker, so
// that the clone, the worker's exec and the two Go runtime starts (3 ms
// each on the benchmark host) run side by side on two CPUs instead of one
// after the other. The worker is the one
// namespaces.Spawn would start (pkg/namespaces/spawn.c does the work); it
// waits for its handshake on fd 3, and nsbox adopts it in runMain
// (sandbox.AdoptWorker) or, when the resolved policy asks for other
// namespaces, discards it and spawns another.
//
// The guess is made from argv alone and errs towards not spawning: only
// `nsbox run [flags] -- CMD...`, never with --help, --dry-run,
// --allow-privileged or a one-dash flag, nor with fd 0, 1 or 2 closed;
// `--net host` / `--net=host` is the only flag read.
// A wrong guess costs a wasted worker, never isolation: Start compares the
// worker's namespaces with the resolved policy before it adopts it.
//
// Nothing else happens here: no heap allocation (two mappings: the helper
// thread's stack and the clone child's), no environment change, and on any
// failure the constructor returns and Go does everything as before.
// The worker's parent death signal is tied to the helper thread that
// spawns it, which lives as long as the process.

#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "holder.h"
#include "spawn.h"

#ifndef __GLIBC__
#error "prespawn.c needs glibc, which passes (argc, argv, envp) to ELF constructors"
#endif

// Defined by pkg/namespaces. Weak only so that cgo's link check of this
// package alone succeeds; the binary's final link always binds it.
extern int nsbox_spawn(struct nsbox_spawn *a) __attribute__((weak));
extern uint64_t nsbox_worker_caps(void) __attribute__((weak));
extern int nsbox_holder_path(char *buf, size_t n) __attribute__((weak));
extern int nsbox_holder_connect(const char *path, int *holder_pid) __attribute__((weak));
extern int nsbox_stage_env(char *buf, size_t n, unsigned flags, uint64_t ambient) __attribute__((weak));

// Read once by takePrespawned (prespawn.go), after nsbox_prespawn_wait.
int nsbox_prespawn_pid = 0; // > 0: a worker waits on nsbox_prespawn_fd
int nsbox_prespawn_fd = -1;
int nsbox_prespawn_hostnet = 0;
int nsbox_prespawn_stage_pid = 0; // > 0: the worker's stage, its socket on
int nsbox_prespawn_stage_fd = -1; // this fd (its report already read)

// prespawn_wanted says whether argv is a `run` that will start a worker,
// and whether it asks for the host's network.
int nsbox_prespawn_wanted(int argc, char **argv, int *hostnet) {
	*hostnet = 0;
	if (argc < 4 || strcmp(argv[1], "run") != 0)
		return 0;
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--") == 0)
			return i + 1 < argc;
		// `run` has no one-letter flags but -h: anything else with one
		// dash is a usage error to come.
		if ((a[0] == '-' && a[1] != '-') || strcmp(a, "--help") == 0 ||
		    strncmp(a, "--dry-run", 9) == 0 || strncmp(a, "--allow-privileged", 18) == 0)
			return 0;
		// Backends without namespaces start no namespace worker.
		if (strcmp(a, "--backend=landlock") == 0 || strcmp(a, "--backend=none") == 0 ||
		    (strcmp(a, "--backend") == 0 && i + 1 < argc &&
		     (strcmp(argv[i + 1], "landlock") == 0 || strcmp(argv[i + 1], "none") == 0)))
			return 0;
		if (strcmp(a, "--net=host") == 0 || (strcmp(a, "--net") == 0 && i + 1 < argc && strcmp(argv[i + 1], "host") == 0))
			*hostnet = 1;
	}
	return 0; // no "--": a usage error follows
}

// The spawn runs on a helper thread, so that the main thread goes on into
// the Go runtime's start while the kernel creates the namespaces and the
// worker execs (~1 ms). Everything the helper reads is prepared here,
// before any other thread exists.
static struct {
	char *argv[2], *envp[3];
	char stage_env[64];
	struct nsbox_spawn a;
	int sup_fd;
	int stage_fd; // >= 0: the worker is made by a stage (holder.c)
	int hostnet;
} ps;

static pthread_mutex_t ps_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ps_cv = PTHREAD_COND_INITIALIZER;
static int ps_pending; // the helper has not published its result yet

static void *prespawn_thread(void *arg) {
	(void)arg;
	int pid = nsbox_spawn(&ps.a), stage = 0;
	close(ps.a.fds[3]);
	if (ps.stage_fd >= 0) {
		close(ps.a.fds[4]);
		close(ps.a.fds[5]);
		// The stage reports the worker's pid (or its failure) as soon as
		// it has cloned it; on failure Go starts the worker itself.
		struct nsbox_stage_report r = {0};
		stage = pid;
		if (pid > 0 && (recv(ps.stage_fd, &r, sizeof r, 0) != sizeof r || r.step != 0 || r.pid <= 0)) {
			close(ps.stage_fd);
			waitpid(pid, NULL, __WALL);
			pid = 0;
		} else if (pid > 0) {
			pid = r.pid;
		} else {
			close(ps.stage_fd);
		}
	}
	pthread_mutex_lock(&ps_mu);
	if (pid > 0) {
		nsbox_prespawn_pid = pid;
		nsbox_prespawn_fd = ps.sup_fd;
		nsbox_prespawn_hostnet = ps.hostnet;
		if (ps.stage_fd >= 0) {
			nsbox_prespawn_stage_pid = stage;
			nsbox_prespawn_stage_fd = ps.stage_fd;
		}
	} else {
		close(ps.sup_fd);
	}
	ps_pending = 0;
	pthread_cond_broadcast(&ps_cv);
	pthread_mutex_unlock(&ps_mu);
	if (pid <= 0)
		return NULL; // no worker, no death signal to keep
	// The worker's parent death signal is tied to this thread
	// (prctl(2) PR_SET_PDEATHSIG: "the thread that created this
	// process"): it must end only with the process. Every signal is
	// blocked here, so pause() never returns.
	for (;;)
		pause();
	return NULL;
}

// nsbox_prespawn_wait returns once the helper has published the worker's
// pid (0 when there is none); prespawn.go calls it.
int nsbox_prespawn_wait(void) {
	pthread_mutex_lock(&ps_mu);
	while (ps_pending)
		pthread_cond_wait(&ps_cv, &ps_mu);
	int pid = nsbox_prespawn_pid;
	pthread_mutex_unlock(&ps_mu);
	return pid;
}

// nsbox_fds_at_start has bit N set when descriptor N (< NSBOX_FDS_KNOWN)
// was open when the process started, read before this constructor (or the
// Go runtime) opens any of its own: `--json-status fd:N` must name the
// caller's descriptor, never a socket nsbox made for itself, where status
// lines would corrupt the worker's channel. Read only when an argument
// holds "json-status", so other starts pay nothing.
#define NSBOX_FDS_KNOWN 1024
unsigned long long nsbox_fds_at_start[NSBOX_FDS_KNOWN / 64];
int nsbox_fds_recorded;

static void record_fds(int argc, char **argv) {
	int any = 0;
	for (int i = 1; i < argc && !any; i++)
		any = strstr(argv[i], "json-status") != NULL;
	if (!any)
		return;
	for (int fd = 0; fd < NSBOX_FDS_KNOWN; fd++)
		if (fcntl(fd, F_GETFD) >= 0)
			nsbox_fds_at_start[fd / 64] |= 1ULL << (fd % 64);
	nsbox_fds_recorded = 1;
}

int nsbox_fd_open_at_start(int fd) {
	if (fd < 0 || fd >= NSBOX_FDS_KNOWN || !nsbox_fds_recorded)
		return 0;
	return (nsbox_fds_at_start[fd / 64] >> (fd % 64)) & 1;
}

// stage_setup turns the spawn into a stage's (holder.c) when the caller
// is not root and its identity holder answers: the worker is then made in
// the holder's user namespace and its maps written without newuidmap.
// Whether that namespace suits the identity the policy gets is checked in
// Go before any map is written (namespaces.Stage.WriteMaps); a worker
// made in one that does not is discarded like any wrong guess.
static void stage_setup(void) {
	char path[108];
	int holder_pid, sv[2];
	const char *off = getenv("NSBOX_IDHOLDER");
	if (geteuid() == 0 || (off && strcmp(off, "off") == 0) || !nsbox_holder_path || !nsbox_holder_connect || !nsbox_stage_env ||
	    nsbox_holder_path(path, sizeof path) != 0)
		return;
	int ns = nsbox_holder_connect(path, &holder_pid);
	if (ns < 0)
		return;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		close(ns);
		return;
	}
	if (nsbox_stage_env(ps.stage_env, sizeof ps.stage_env, (unsigned)ps.a.flags, ps.a.ambient) != 0) {
		close(ns);
		close(sv[0]);
		close(sv[1]);
		return;
	}
	ps.envp[1] = ps.stage_env;
	ps.a.flags = 0;
	ps.a.ambient = 0;
	ps.a.fds[4] = ns;
	ps.a.fds[5] = sv[1];
	ps.stage_fd = sv[0];
}

// nsbox_secure_exec: this exec gained privilege (set-user-ID or file
// capabilities: AT_SECURE, getauxval(3)). nsbox is never installed so and
// needs no privilege, but its constructors act on argv[0] and the
// environment (a stage's clone flags, the limit shim's setrlimit, the
// holder), which a caller would then steer with more power than their
// own: each does nothing then (review 69).
static int nsbox_secure_exec(void) { return getauxval(AT_SECURE) != 0; }

__attribute__((constructor)) static void nsbox_prespawn(int argc, char **argv, char **envp) {
	(void)envp;
	if (nsbox_secure_exec())
		return;
	record_fds(argc, argv);
	if (!nsbox_spawn || !nsbox_worker_caps || !nsbox_prespawn_wanted(argc, argv, &ps.hostnet))
		return;
	// The Go runtime has not yet put /dev/null on a closed fd 0, 1 or 2: a
	// socket created now could take that slot and become the supervisor's
	// stdin or stdout. Leave such a start to Go.
	for (int fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0)
			return;
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return;
	const char *debug = getenv("NSBOX_DEBUG_WORKER");
	ps.argv[0] = "nsbox-init";
	ps.envp[0] = "_NSBOX_INIT=1";
	ps.sup_fd = sv[0];
	ps.a = (struct nsbox_spawn){
		// /proc/self/exe: the very binary that is running.
		.path = "/proc/self/exe",
		.argv = ps.argv,
		.envp = ps.envp,
		.flags = NSBOX_CLONE_FLAGS | (ps.hostnet ? 0 : CLONE_NEWNET),
		.fds = {-1, -1, debug && *debug ? 2 : -1, sv[1], -1, -1},
		// The worker execs unmapped, root caller or not: its id maps
		// are written once the policy is resolved and the identity
		// chosen (sandbox.Start's "write id maps"), so the guess made
		// here never depends on /etc/subuid. spawn.h's list (with
		// CAP_NET_BIND_SERVICE for the filtered network's resolver).
		.ambient = nsbox_worker_caps(),
	};
	// The helper starts with every signal blocked (it inherits this
	// thread's mask) and keeps them so: no signal is ever delivered to a
	// thread the Go runtime does not know.
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ps.stage_fd = -1;
	stage_setup();
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_t t;
	ps_pending = 1;
	if (pthread_create(&t, &attr, prespawn_thread, NULL) != 0) {
		ps_pending = 0;
		close(sv[0]);
		close(sv[1]);
		if (ps.stage_fd >= 0) {
			close(ps.stage_fd);
			close(ps.a.fds[4]);
			close(ps.a.fds[5]);
		}
	}
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}
