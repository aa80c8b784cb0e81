/* pelotond's controller roles (docs/architecture.md): what they share and
 * how they start. Each role is a client of the Kubernetes API (kclient) and
 * of Redis (the task queues), on one libuv loop; several roles may share a
 * loop, a client and a Redis connection, or run in separate processes.
 *
 * Redis keys (prefix peloton:):
 *   <role>:leader   a singleton role's lease (resmgr, jobmgr, hostmgr, mesos; ctl_lease.h),
 *                   value = holder id
 *   <role>:epoch    its fencing token: incremented by each new term; a term's
 *                   writes go through the fence script, which runs them only
 *                   while this still holds the term's epoch (ctl_lease_defer)
 *   pending:<pool>  ZSET of gang keys waiting for admission, by priority then FIFO
 *   ready           LIST of admitted gang keys, popped by placement engines
 *   retry           ZSET of gang keys placement could not place, by due time (ms)
 *   gang:<key>      HASH: ns, pods (JSON array of names), pool, epoch, attempts
 *   claims:<node>   HASH pod uid -> capacity claimed by a placement engine run
 *                   active-active, until bound or expired (placement_claim.h)
 * A gang key is "<namespace>/<gang label>" or, for a pod alone, "<namespace>/pod:<name>". */
#ifndef PELOTON_CTL_H
#define PELOTON_CTL_H
#include <stdarg.h>
#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "kclient.h"

struct ctl_lease;
#define CTL_KEY_PENDING "peloton:pending:"
#define CTL_KEY_READY "peloton:ready"
#define CTL_KEY_RETRY "peloton:retry"
#define CTL_KEY_GANG "peloton:gang:"

/* The roles' Redis connection: synchronous hiredis on the roles' loop. A
 * write nobody waits on is deferred (ctl_redis_defer): queued, then sent with
 * the turn's other deferred writes and their replies read once, after the
 * turn's I/O (a uv_check handle): one round trip per turn instead of one per
 * command. A call that wants its reply first settles what is deferred, so
 * commands reach Redis in the order they were made. */
/* A fenced write refused (a reply starting CTL_FENCE_REFUSED, "STALEEPOCH
 * <epoch key> <epoch sent> <epoch held> <commands>") is handed to the hook registered
 * for its epoch key (the role's lease), not logged as an error. */
#define CTL_FENCE_REFUSED "STALEEPOCH"
#define CTL_FENCE_HOOKS 8
#define CTL_SCRIPTS 8
struct ctl_fence_hook {
    char key[64];                                /* peloton:<role>:epoch; "" = free slot */
    void (*fn)(void *ud, const char *refusal);   /* the reply's text */
    void *ud;
};

/* Fenced writes of one term waiting to leave as one script call: each
 * command's argument count, then its arguments, as RESP bulk strings. */
struct ctl_fence_batch {
    char *buf;
    size_t len, cap;
    unsigned cmds, args; /* commands, and bulk strings in buf */
    char key[64];        /* the epoch key */
    long long epoch;
};

struct ctl_db {
    redisContext *c;
    struct ctl_fence_batch batch;
    char fence_sha[41]; /* the fence script's SHA1, loaded at each (re)connection; "" = not loaded */
    bool reload;        /* a NOSCRIPT reply: load the scripts again */
    const char *scripts[CTL_SCRIPTS]; /* the scripts run by EVALSHA (ctl_db_script); [0] the fence */
    char shas[CTL_SCRIPTS][41];
    int nscripts;
    struct ctl_fence_hook hooks[CTL_FENCE_HOOKS];
    char host[256];     /* where it connects again (store_redis_connect) */
    int port;
    bool replica;       /* a write was refused READONLY: reconnect (a failover) */
    unsigned reading;   /* ctl_redis_append'ed commands whose replies are unread */
    uint64_t tried_ms;  /* the last reconnect attempt */
    unsigned deferred;  /* commands queued whose replies are unread */
    uv_check_t *flush;  /* freed by its close callback */
    struct metrics_series *m_replies, *m_errors; /* replies read, and failed ones (metrics.h); NULL: not counted */
    unsigned gen;       /* connections made since open: a new one means writes deferred on the old may be lost */
    char last_err[160]; /* the error last logged, its time, and the same ones not logged since */
    uint64_t last_err_ms;
    unsigned repeated;
};

struct ctl_env {
    uv_loop_t *loop;
    struct kclient *kc;
    struct ctl_db *db;
    const char *identity; /* this process, for leases and Events */
    struct ctl_lease *lease; /* the term a singleton role's Redis writes belong to (ctl_lease_defer); NULL:
                              * unfenced (resmgr keeps its own; placement run active-active has none) */
    struct metrics *metrics; /* the process's registry: each role registers its families from its
                              * thread (docs/metrics.md); NULL: none */
};

/* Connects to "host:port" or "unix:///path" (store_parse_addr); NULL with err. */
struct ctl_db *ctl_db_open(uv_loop_t *loop, const char *addr, char *err, size_t errlen);
/* Settles what is deferred, closes; run the loop once more (a handle closes). */
void ctl_db_close(struct ctl_db *db);
/* Runs a command; returns the reply (freeReplyObject) or NULL with a log line. */
redisReply *ctl_redis(struct ctl_db *db, const char *fmt, ...);
/* Queues a write whose reply only matters when it is an error (logged). */
void ctl_redis_defer(struct ctl_db *db, const char *fmt, ...);
void ctl_redis_vdefer(struct ctl_db *db, const char *fmt, va_list ap);
redisReply *ctl_vredis(struct ctl_db *db, const char *fmt, va_list ap);
/* The same with the arguments apart (argc of them, argv[i] of argl[i] bytes). */
redisReply *ctl_redis_argv(struct ctl_db *db, int argc, const char **argv, const size_t *argl);
/* The fence script (a Lua script run by EVALSHA, ctl_lease_defer):
 * KEYS[1] the role's epoch key, ARGV[1] the term's epoch, ARGV[2..]
 * commands (each its argument count, then its arguments), run only when
 * KEYS[1] holds ARGV[1]; else an error reply "CTL_FENCE_REFUSED <key>
 * <epoch> <held> <commands>". The commands' own keys are not declared (a
 * single Redis, not a cluster). */
extern const char ctl_fence_script[];
/* A write fenced by (epoch_key, epoch): deferred, and sent with the
 * turn's other fenced writes of that term as one fence-script call (before
 * any other command, so the order holds). -1 when it cannot be formatted. */
int ctl_redis_vfenced(struct ctl_db *db, const char *epoch_key, long long epoch, const char *fmt, va_list ap);
/* The same at once: the command's reply, NULL when refused or failed (logged or handed to the hook). */
redisReply *ctl_redis_vfenced_now(struct ctl_db *db, const char *epoch_key, long long epoch, const char *fmt,
                                  va_list ap);
/* Registers a Lua script (static text) to run by EVALSHA: loaded now and at
 * each new connection. Its index (for ctl_db_sha), -1 when CTL_SCRIPTS are
 * registered. */
int ctl_db_script(struct ctl_db *db, const char *text);
/* Its SHA1 as loaded, "" when loading failed. */
const char *ctl_db_sha(const struct ctl_db *db, int script);
/* Registers fn for refusals of writes fenced by epoch_key; -1 when the
 * CTL_FENCE_HOOKS slots are taken. ctl_db_unhook frees the slot. */
int ctl_db_hook(struct ctl_db *db, const char *epoch_key, void (*fn)(void *ud, const char *refusal), void *ud);
void ctl_db_unhook(struct ctl_db *db, const char *epoch_key, void *ud);
/* A command in Redis' wire format (RESP) from a hiredis format, the bytes
 * redisFormatCommand writes: the format's space-separated words are the
 * arguments, a conversion appends to its word (a %s value may hold spaces).
 * Knows %s %d %i %u %ld %lu %lld %llu %.0f and %%; its length, or -1
 * for anything else, a NULL string or more than 64 arguments or 4 KiB (the
 * callers then let hiredis format it). */
int ctl_resp_vformat(char *out, size_t cap, const char *fmt, va_list ap);
/* A pipeline of reads: append n commands, then take n replies in order (each
 * freeReplyObject'd; NULL after a transport error, logged). */
void ctl_redis_append(struct ctl_db *db, const char *fmt, ...);
redisReply *ctl_redis_reply(struct ctl_db *db);
/* Sends what is deferred and reads its replies. */
void ctl_redis_settle(struct ctl_db *db);

/* The pod informers of resmgr, placement, hostmgr and the Mesos driver (one
 * shared feed): pods trimmed by pod_slim, the members it drops not even built
 * (pod_slim_keep), and no objects cached (keys only): each role keeps what
 * it needs of a pod (the models their decoded info, and a pending pod's
 * tree for placement; hostmgr its node, uid and whether it ended; the Mesos
 * driver the trees of bound pods). */
extern const struct kc_informer_opts ctl_pods_slim;

/* Posts a v1 Event about a pod (reason, type "Normal"/"Warning", message). Fire and forget. */
void ctl_pod_event(struct kclient *kc, const char *component, const char *ns, const char *pod, const char *uid,
                   const char *type, const char *reason, const char *fmt, ...) __attribute__((format(printf, 8, 9)));
/* The same about any object (api_version, kind, name, uid); ns "" for a
 * cluster-scoped one, whose Events go to namespace "default" as
 * kube-apiserver's controllers put them. */
void ctl_object_event(struct kclient *kc, const char *component, const char *api_version, const char *kind,
                      const char *ns, const char *name, const char *uid, const char *type, const char *reason,
                      const char *fmt, ...) __attribute__((format(printf, 10, 11)));

/* ---- Events and the PodScheduled condition (ctl_events.c) ---- */

/* No Events from this process's roles from now on (pelotond --events=false,
 * for benchmarks: docs/metrics.md); call before the roles start. */
void ctl_events_disable(void);
/* Whether this process's roles post Events (not disabled). */
bool ctl_events_on(void);
/* Posts a new Event (count 1) built by ctl_event_json. Fire and forget. */
void ctl_event_post(struct kclient *kc, const char *component, const char *api_version, const char *kind,
                    const char *ns, const char *name, const char *uid, const char *type, const char *reason,
                    const char *msg);
/* A v1 Event about an object (ns "" for a cluster-scoped one: the Event
 * goes to "default"), named ename, with its timestamps and count. New
 * reference, NULL on allocation failure. */
json_t *ctl_event_json(const char *component, const char *api_version, const char *kind, const char *ns,
                       const char *name, const char *uid, const char *type, const char *reason, const char *msg,
                       const char *ename, const char *first, const char *last, uint32_t count);

/* An Event recorder that aggregates as client-go's does: an Event the same
 * as one it posted (object, uid, type, reason and message), while that one
 * is among the last `cap` it remembers, bumps the posted Event's count and
 * lastTimestamp (a merge PATCH) instead of posting another; when that one
 * is gone (404) it is posted again with its count. One per role; free it
 * before the client. Fire and forget. */
#define CTL_RECORDER_CACHE 4096 /* client-go's cache size too */
struct ctl_recorder;
struct ctl_recorder *ctl_recorder_new(struct kclient *kc, const char *component, size_t cap /* 0: default */);
void ctl_recorder_free(struct ctl_recorder *r);
/* 0: a new Event was posted; 1: an earlier one was counted again; -1: out of memory. */
int ctl_record(struct ctl_recorder *r, const char *api_version, const char *kind, const char *ns, const char *name,
               const char *uid, const char *type, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 9, 10)));
/* Whether the recorder remembers posting this Event (nothing is sent). */
bool ctl_recorder_has(const struct ctl_recorder *r, const char *ns, const char *name, const char *uid, const char *type,
                      const char *reason, const char *msg);
/* Events posted new and counted again, since the recorder was made. */
void ctl_recorder_counts(const struct ctl_recorder *r, uint64_t *posted, uint64_t *bumped);

/* The strategic-merge patch of a pod's status that sets its PodScheduled
 * condition (True, or False with reason and message) as kube-scheduler
 * does, with the pod's uid as precondition (when given). A NULL reason or
 * message is written as null, which removes what an earlier write left.
 * New reference. */
json_t *ctl_pod_scheduled_patch(const char *uid, bool scheduled, const char *reason, const char *msg);
/* Writes PodScheduled=False (reason, message) on a pod. A write that lands
 * after the pod was bound (the reply shows its node) is followed by one
 * setting it True again, as the binding did. Fire and forget. */
void ctl_pod_unschedulable(struct kclient *kc, const char *ns, const char *pod, const char *uid, const char *reason,
                           const char *msg);
#define CTL_REASON_UNSCHEDULABLE "Unschedulable" /* kube-scheduler's: no node can take it */
#define CTL_REASON_ADMISSION "WaitingForAdmission" /* its resource pool has not admitted it yet */
#define CTL_REASON_GANG "WaitingForGang" /* its gang's other members do not all exist yet */
#define CTL_REASON_POOL "WaitingForPool" /* its resource pool is missing or not a leaf, or its queue refuses it */

/* ---- resmgr ---- */
struct resmgr_options {
    const char *default_pool;       /* pool for pods without one; NULL = unmanaged */
    bool serve_default_scheduler;   /* also schedule pods asking for default-scheduler */
    uint32_t round_ms;              /* admission round period while work waits; default 20 */
    uint32_t lease_ms;              /* leader lease; default 10000 */
    uint32_t preempt_ms;            /* preemption check period; default 1000 */
    uint32_t status_ms;             /* pool status write period; default 1000 */
    uint32_t over_checks;           /* consecutive over-entitlement checks before preempting; default 3 */
    uint32_t gang_wait_ms;          /* a gang short of members this long gets an Event; default 1000 */
    uint32_t ready_timeout_ms;      /* an admitted gang unbound this long and in no queue is readied again
                                     * (the placement engine that took it died); default 30000 */
    /* Called after a round queued gangs on the ready queue (NULL: nobody):
     * pelotond tells its own placement role, which then need not wait for
     * its next poll when it was idle. */
    void (*on_ready)(void *ud);
    void *on_ready_ud;
};
void resmgr_options_default(struct resmgr_options *o);
struct resmgr;
struct resmgr *resmgr_start(const struct ctl_env *env, const struct resmgr_options *o, char *err, size_t errlen);
void resmgr_stop(struct resmgr *r);
bool resmgr_is_leader(const struct resmgr *r);

/* ---- placement ---- */
struct placement_options {
    uint32_t batch;     /* gangs popped per round; default 512 */
    uint32_t tick_ms;   /* idle poll period; default 10 */
    uint32_t retry_max_ms; /* an unplaceable gang is tried again after 100 ms, doubling up to this; default 5000 */
    uint32_t max_inflight; /* bindings in flight; default 512 */
    bool claims;        /* claim capacity in Redis before binding (engines run active-active; placement_claim.h) */
    uint32_t claim_ttl_ms;   /* an unbound claim's life; default 30000 */
    uint32_t claim_grace_ms; /* a bound claim's; default 3000 */
    uint32_t catchup_ms; /* a leased engine's informers behind the store as of its term's start after this
                          * long are listed again; default 1000 (placement.c, "catch-up") */
};
void placement_options_default(struct placement_options *o);
struct placement;
struct placement *placement_start(const struct ctl_env *env, const struct placement_options *o, char *err,
                                  size_t errlen);
/* Gangs were queued ready (by this process's resource manager): when the
 * role has found nothing for three ticks, it looks at once instead of at
 * its next tick; while it is busy the ticks go on as they are. */
void placement_kick(struct placement *p);
void placement_stop(struct placement *p);

#endif
