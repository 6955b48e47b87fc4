/* The identity holder and the stage (holder.c, holder.go). */
#ifndef NSBOX_HOLDER_H
#define NSBOX_HOLDER_H

#include <stddef.h>
#include <stdint.h>

/* The worker's argv[0] and the environment entry that makes its exec a
 * stage (value: "FLAGS:AMBIENT" in hex), the fds it gets beside 0 to 3. */
#define NSBOX_STAGE_ENV "_NSBOX_STAGE="
#define NSBOX_STAGE_USERNS_FD 4 /* the holder's user namespace */
#define NSBOX_STAGE_FD 5        /* its socket to the supervisor */

/* What a stage reports first: the worker's pid (in the supervisor's PID
 * namespace), or the step that failed and its errno. */
enum {
	NSBOX_STAGE_JOIN = 1, /* setns into the holder's user namespace */
	NSBOX_STAGE_CLONE,    /* the worker's clone */
	NSBOX_STAGE_REPORT,
};
struct nsbox_stage_report {
	int32_t pid, step, err;
};

/* What the supervisor sends the stage once the identity is chosen: then
 * the uid_map text (ulen bytes) and the gid_map text (glen). The answer is
 * a struct nsbox_stage_report with pid 0 on success, or step (1 setgroups,
 * 2 uid_map, 3 gid_map, 4 a malformed request) and errno. */
struct nsbox_stage_maps {
	int32_t deny_setgroups, ulen, glen;
};

int nsbox_stage_env(char *buf, size_t n, unsigned flags, uint64_t ambient);
int nsbox_holder_dir(char *buf, size_t n);
int nsbox_holder_dir_ok(const char *dir);
int nsbox_holder_path(char *buf, size_t n);
int nsbox_holder_connect(const char *path, int *holder_pid);

#endif
