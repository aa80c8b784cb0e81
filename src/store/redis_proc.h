/* A child redis-server for tests and benchmarks: loopback only, a fresh
 * mkdtemp data directory (its Unix-domain socket there too), AOF on (appendfsync "always" by default), no RDB
 * snapshots. Every wait is bounded (start: PING within 5 s; stop: SIGTERM,
 * then SIGKILL after 5 s). The child gets PR_SET_PDEATHSIG=SIGKILL, so it
 * dies with the process that started it even on a crash.
 *
 * The caller owns the struct (no allocation inside); redis_proc_destroy stops
 * the child if it runs and removes the data directory. Not for production. */
#ifndef PELOTON_STORE_REDIS_PROC_H
#define PELOTON_STORE_REDIS_PROC_H

#include <sys/types.h>

struct redis_proc {
    pid_t pid;            /* 0 when not running */
    int port;             /* chosen at first start, kept across restarts */
    char dir[256];        /* data directory ("" before start / after destroy) */
    char appendfsync[16]; /* "always" (default), "everysec" or "no" */
    char unix_path[108];  /* it listens on this Unix-domain socket too (dir/redis.sock, mode 0700) */
};

/* Creates the data directory, picks a free loopback port and starts the
 * server; appendfsync NULL = "always". 0 or -errno (p is then destroyed). */
int redis_proc_start(struct redis_proc *p, const char *appendfsync);
/* Starts it again on the same directory and port (after stop or kill9). */
int redis_proc_restart(struct redis_proc *p);
/* SIGTERM, wait up to 5 s, then SIGKILL. 0 when it was not running. */
int redis_proc_stop(struct redis_proc *p);
/* SIGKILL now (a crash: no AOF rewrite, no shutdown save). */
int redis_proc_kill9(struct redis_proc *p);
/* Stops it if running and removes the data directory. Idempotent. */
void redis_proc_destroy(struct redis_proc *p);

#endif
