/* Rolling update planner for STATELESS and STATEFUL jobs.
 *
 * An update record (struct update) holds the update's state and per-instance
 * bookkeeping. update_plan is a pure step function: given the record, a
 * snapshot of the instances (version, state, run) and an optional command, it
 * advances the record and returns the instances to (re)start at the version
 * being rolled to. Calling it again as the world evolves drives the update to
 * SUCCEEDED, FAILED, ABORTED or ROLLED_BACK. Algorithm and a worked example in
 * docs/lifecycle.md.
 *
 * An instance counts as updated once it has been RUNNING at the target
 * version for min_running_ms (whoever started that run); a run at the target
 * that ends before is a failed attempt (maxInstanceAttempts, then given up
 * and charged to maxFailureInstances).
 *
 * Guarantee: the planner never takes down a RUNNING instance while
 * `batch` instances are already unavailable, where unavailable = not RUNNING,
 * or started by this update and not yet confirmed RUNNING at the target
 * version; instances the update gave up on (maxInstanceAttempts exhausted) are
 * charged to the failure budget, not to the batch.
 *
 * Ownership: update_create allocates the record; update_free frees it and its
 * arrays. Snapshots and action arrays belong to the caller; host pointers in
 * actions are borrowed from the snapshot. Errors are negative errno codes with
 * a one-line message in err (may be NULL); on error the record is unchanged. */
#ifndef PELOTON_CORE_UPDATE_H
#define PELOTON_CORE_UPDATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "job.h"
#include "task.h"

enum update_state {
    UPDATE_INVALID = 0,
    UPDATE_INITIALIZED,
    UPDATE_ROLLING_FORWARD,
    UPDATE_PAUSED,
    UPDATE_SUCCEEDED,
    UPDATE_ABORTED,
    UPDATE_FAILED,
    UPDATE_ROLLING_BACKWARD,
    UPDATE_ROLLED_BACK,
    UPDATE_NSTATES
};

enum update_cmd { UPDATE_CMD_NONE = 0, UPDATE_CMD_PAUSE, UPDATE_CMD_RESUME, UPDATE_CMD_ABORT, UPDATE_CMD_ROLLBACK };

/* What the operator wants of an update: paused or not (declarative), and the
 * one-shot requests abort and rollback. The Job's spec.updateStrategy.paused
 * and its abort annotation come in here (jobmgr), and so will the native
 * UpdateService's Pause/Resume/Abort/Rollback: update_cmd_for turns an intent
 * into the command for the next update_plan call. */
struct update_intent {
    bool paused;
    bool abort;
    bool rollback;
};

/* v0 UpdateConfig (the fields the planner uses) plus min_running_ms. */
struct update_spec {
    uint32_t batch_size;            /* instances in flight at once; 0: use batch_percentage */
    uint32_t batch_percentage;      /* 0..100 of instanceCount, rounded up; both 0: all at once */
    uint32_t max_failure_instances; /* failed instances that fail the update; 0: no early stop */
    uint32_t max_instance_attempts; /* counted attempts per instance before giving up; 0: unlimited */
    bool rollback_on_failure;       /* a failed update rolls back to from_version */
    bool start_paused;              /* INITIALIZED -> PAUSED instead of ROLLING_FORWARD */
    int64_t min_running_ms;         /* RUNNING this long at the target before an instance counts as
                                       updated (the Job's minReadySeconds); a run ending sooner is a
                                       failed attempt */
};

/* One instance as the planner sees it (build it from struct task with
 * update_instance_of). A missing instance (no record) is simply absent. */
struct update_instance {
    uint32_t instance;
    uint32_t version;       /* template version of the current run */
    uint32_t run;           /* run id of the current run */
    enum task_state state;
    int64_t state_since_ms;
    const char *host;       /* current or last host; STATEFUL hint */
};

/* Start instance `instance` at `version`: kill its current run if it has one
 * (takes_down: it was RUNNING), then run it again at that version. The caller
 * sets the task's desired_version, kills if needed and restarts it (held stays
 * true while update_holds says so, so job_reconcile leaves it alone). */
struct update_action {
    uint32_t instance;
    uint32_t version;
    uint32_t attempt;       /* counted attempts at this version, including this one */
    bool takes_down;        /* the instance was RUNNING */
    const char *host_hint;  /* STATEFUL: the instance's host (same host preferred); else NULL */
};

struct update {
    enum job_type type;
    uint32_t count;          /* instanceCount (fixed for the update) */
    uint32_t from_version, to_version;
    uint32_t target;         /* version being rolled to: to_version, or from_version when rolling back */
    uint32_t batch;          /* effective batch size, 1..count */
    struct update_spec spec;
    enum update_state state;
    enum update_state resume_state; /* where RESUME goes from PAUSED */
    /* Status (recomputed by each update_plan call). */
    uint32_t ndone;          /* RUNNING at target */
    uint32_t ninflight;
    uint32_t nfailed;        /* given up in the current direction */
    uint32_t nfailed_forward;/* given up while rolling forward (kept across a rollback) */
    int64_t next_check_ms;   /* when an instance RUNNING at the target settles; INT64_MAX: none */
    /* Per instance, private to update.c. */
    uint32_t *attempts;
    uint32_t *start_run;     /* run id seen when the planner last started the instance */
    uint8_t *flags;
    const struct update_instance **view; /* scratch, one call */
};

const char *update_state_name(enum update_state s); /* "ROLLING_FORWARD", ... */
bool update_state_terminal(enum update_state s);

/* Checks the spec and creates a record in INITIALIZED. -EINVAL: job type not
 * STATELESS/STATEFUL, count 0 or > JOB_MAX_INSTANCES, from == to,
 * batch_percentage > 100, negative min_running_ms. -ENOMEM. */
int update_create(struct update **out, enum job_type type, uint32_t count, uint32_t from_version,
                  uint32_t to_version, const struct update_spec *spec, char *err, size_t errlen);
void update_free(struct update *u);

/* The planner's maximum number of actions in one call (= batch). */
static inline size_t update_max_actions(const struct update *u) { return u->batch; }

/* Whether the update currently owns instance i's restarts. */
bool update_holds(const struct update *u, uint32_t instance);
/* Whether the update gave up on instance i (maxInstanceAttempts exhausted) in
 * the current direction. */
bool update_gave_up(const struct update *u, uint32_t instance);

void update_instance_of(const struct task *t, struct update_instance *out);

/* The command that moves u toward want (UPDATE_CMD_NONE: nothing to do, or
 * nothing it can do): ABORT when asked and not terminal; else ROLLBACK when
 * asked and rolling forward (or paused while rolling forward); else PAUSE or
 * RESUME when the pause differs. A rollback asked while rolling backward or
 * in a terminal state is NONE. */
enum update_cmd update_cmd_for(const struct update *u, const struct update_intent *want);

/* One step. inst: snapshot of the instances (any order; ids >= count are
 * ignored; duplicates are -EINVAL). cmd: PAUSE (from INITIALIZED,
 * ROLLING_FORWARD or ROLLING_BACKWARD), RESUME (from PAUSED), ABORT (from any
 * non-terminal state), ROLLBACK (from INITIALIZED, ROLLING_FORWARD, or PAUSED
 * while rolling forward: -> ROLLING_BACKWARD at once); a command not allowed
 * in the current state is -EINVAL.
 * Writes at most cap actions (cap >= update_max_actions(u) for the bound to
 * be reached) and their number to *nacts. */
int update_plan(struct update *u, const struct update_instance *inst, size_t n, enum update_cmd cmd,
                int64_t now_ms, struct update_action *acts, size_t cap, size_t *nacts, char *err,
                size_t errlen);

#endif
