/* Task lifecycle: the v0 TaskState numbering, one table of legal edges (the
 * resource manager's plus the job manager's), and the PLACING / LAUNCHING
 * timeouts. docs/lifecycle.md lists every edge and what causes it.
 *
 * Ownership: a struct task is a plain value the caller owns. Its host and
 * last_host pointers are borrowed (the host inventory keeps the strings alive);
 * nothing here allocates or frees. Errors are negative errno codes with a
 * one-line message in err (may be NULL) naming both states. Time is always an
 * input (now_ms, milliseconds on any monotonic clock). */
#ifndef PELOTON_CORE_TASK_H
#define PELOTON_CORE_TASK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* v0 peloton.api.v0.task.TaskState, same numbers. */
enum task_state {
    TASK_UNKNOWN = 0,
    TASK_INITIALIZED = 1,
    TASK_PENDING = 2,
    TASK_READY = 3,
    TASK_PLACING = 4,
    TASK_PLACED = 5,
    TASK_LAUNCHING = 6,
    TASK_STARTING = 7,
    TASK_RUNNING = 8,
    TASK_SUCCEEDED = 9,
    TASK_FAILED = 10,
    TASK_LOST = 11,
    TASK_PREEMPTING = 12,
    TASK_KILLING = 13,
    TASK_KILLED = 14,
    TASK_LAUNCHED = 15,
    TASK_DELETED = 16,
    TASK_RESERVED = 17,
    TASK_NSTATES
};

/* Which component drives an edge. */
enum task_actor { TASK_BY_RESMGR = 0, TASK_BY_JOBMGR, TASK_BY_HOST };

struct task_edge {
    enum task_state from, to;
    enum task_actor by;
    const char *cause; /* one line, for docs and logs */
};

/* Timeouts (notes/peloton.md): a task PLACING longer than placing_timeout_ms
 * goes back to READY; LAUNCHING longer than launching_timeout_ms goes back to
 * READY. 0 disables a timeout.
 * Restart backoff (a Kubelet's CrashLoopBackOff, for services): the first
 * restart of a crash loop is immediate, the next ones wait backoff_initial_ms
 * doubling up to backoff_max_ms; a run that was RUNNING for backoff_reset_ms
 * ends the loop. backoff_initial_ms 0 disables the backoff. */
struct task_config {
    int64_t placing_timeout_ms;   /* default 10 min */
    int64_t launching_timeout_ms; /* default 20 min */
    int64_t backoff_initial_ms;   /* default 10 s */
    int64_t backoff_max_ms;       /* default 5 min */
    int64_t backoff_reset_ms;     /* default 10 min (twice the cap, as the Kubelet) */
};

/* One instance's current run. Restarting an instance starts a new run
 * (run + 1) of the same instance id. */
struct task {
    uint32_t instance;
    uint32_t run;            /* 1 for the first run */
    enum task_state state;
    int64_t state_since_ms;  /* when the task entered state */
    uint32_t failures;       /* runs that ended FAILED and were counted by the restart policy */
    uint32_t lost;           /* runs that ended LOST (not counted as failures) */
    uint32_t config_version; /* template version of the current run */
    uint32_t desired_version;/* version the next run uses (the update planner sets it) */
    bool preempted;          /* the current run passed through PREEMPTING */
    bool stop;               /* goal KILLED for this instance (task stop API) */
    bool held;               /* an update owns this instance's restarts (job_reconcile skips it) */
    uint32_t crash_loop;     /* restarts made so far in the current crash loop (see task_restart_at) */
    int64_t running_since_ms;/* when the current run entered RUNNING; 0: it never did */
    const char *host;        /* host of the current run once PLACED; borrowed */
    const char *last_host;   /* host of the most recent placed run, kept across restarts; borrowed */
    const char *pinned_host; /* DAEMON: the host this instance belongs to (from CREATE); borrowed */
};

/* "RUNNING", "PLACING", ... ; "INVALID" outside the enum. */
const char *task_state_name(enum task_state s);
/* The state for an exact upper-case name, or -EINVAL. */
int task_state_parse(const char *name);

/* SUCCEEDED, FAILED, LOST, KILLED (and DELETED): the run is over. */
bool task_state_terminal(enum task_state s);
/* Between PLACED and a terminal state: the task holds resources on a host. */
bool task_state_on_host(enum task_state s);

void task_config_default(struct task_config *cfg);

/* The edge table, in a fixed order; *n gets its length. */
const struct task_edge *task_edges(size_t *n);
/* The edge from -> to, or NULL when it is not legal. */
const struct task_edge *task_edge_find(enum task_state from, enum task_state to);
static inline bool task_transition_legal(enum task_state from, enum task_state to) {
    return task_edge_find(from, to) != NULL;
}

/* A fresh first run of instance i at version v: INITIALIZED at now_ms. */
void task_init(struct task *t, uint32_t instance, uint32_t version, int64_t now_ms);

/* Moves t to `to` along a legal edge, stamping state_since_ms (and
 * running_since_ms on entering RUNNING). Entering PREEMPTING sets t->preempted; entering PLACED with a non-NULL host records
 * it (host, last_host); entering READY or PENDING clears host. Entering
 * INITIALIZED (from a terminal state) is a restart, as task_restart without
 * counting a failure. An illegal edge returns -EINVAL ("illegal task
 * transition RUNNING -> PENDING"), a self edge -EALREADY; t is unchanged. */
int task_transition(struct task *t, enum task_state to, const char *host, int64_t now_ms, char *err,
                    size_t errlen);

/* When the current state times out (state_since_ms + timeout), or INT64_MAX
 * when it cannot. */
int64_t task_deadline(const struct task *t, const struct task_config *cfg);

/* Applies a PLACING or LAUNCHING timeout: returns 1 and moves t to READY (its
 * host cleared) when now_ms >= deadline, else 0. */
int task_check_timeout(struct task *t, const struct task_config *cfg, int64_t now_ms);

/* CrashLoopBackOff: the earliest time the next run of terminal task t may
 * start, and in *next_loop the crash_loop of that run. A run that ended
 * FAILED or SUCCEEDED at the version the next run uses continues the loop:
 * restart k of it (k = t->crash_loop) waits 0 for k = 0, else
 * backoff_initial_ms * 2^(k-1) capped at backoff_max_ms, from
 * t->state_since_ms (when the run ended); next_loop = k + 1. Unless the run
 * had been RUNNING for backoff_reset_ms: then the loop starts over (no wait,
 * next_loop 1). A new version (desired_version != config_version) starts
 * over with next_loop 0; LOST and KILLED runs wait nothing and keep the loop.
 * cfg NULL: defaults. */
int64_t task_restart_at(const struct task *t, const struct task_config *cfg, uint32_t *next_loop);

/* Starts the next run of a terminal task: run + 1, INITIALIZED at now_ms,
 * config_version = desired_version, host kept as last_host, preempted
 * and running_since_ms cleared (crash_loop is the caller's: task_restart_at).
 * count_failure adds one to failures (a FAILED run the restart policy
 * counts). -EINVAL when t is not terminal or is DELETED. */
int task_restart(struct task *t, bool count_failure, int64_t now_ms, char *err, size_t errlen);

#endif
