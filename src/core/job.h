/* Jobs: types, restart policy, gangs, job state derived from instance states,
 * and the reconciler: a pure function from (job spec, instance records,
 * eligible hosts, now) to the actions that move the job toward its goal.
 * Rules in docs/lifecycle.md.
 *
 * Ownership: the caller owns every input. A job_plan owns its action array
 * (free it with job_plan_free); the host pointers inside actions are borrowed
 * from the inputs (task records or the eligible host list) and live as long as
 * they do. Errors are negative errno codes with a one-line message in err
 * (may be NULL). No global state; the same inputs give the same plan. */
#ifndef PELOTON_CORE_JOB_H
#define PELOTON_CORE_JOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "task.h"

#define JOB_MAX_FAILURES_LIMIT 100    /* restartPolicy.maxFailures <= 100 */
#define JOB_MAX_INSTANCES (1u << 24)  /* sanity bound on instanceCount and instance ids */

enum job_type { JOB_BATCH = 0, JOB_STATELESS, JOB_STATEFUL, JOB_DAEMON, JOB_NTYPES };

/* v0 JobState order. */
enum job_state {
    JOB_UNKNOWN = 0,
    JOB_INITIALIZED,
    JOB_PENDING,
    JOB_RUNNING,
    JOB_SUCCEEDED,
    JOB_FAILED,
    JOB_KILLED,
    JOB_KILLING,
    JOB_UNINITIALIZED,
    JOB_DELETED,
    JOB_NSTATES
};

/* What the job should be doing. */
enum job_goal { JOB_GOAL_RUN = 0, JOB_GOAL_KILL, JOB_GOAL_DELETE };

struct job_spec {
    enum job_type type;
    enum job_goal goal;
    uint32_t instance_count;  /* BATCH, STATELESS, STATEFUL; DAEMON ignores it */
    uint32_t max_failures;    /* restartPolicy.maxFailures, <= 100; BATCH only (see docs) */
    bool kill_on_preempt;     /* preemptionPolicy.killOnPreempt */
    uint32_t min_running;     /* sla.minimumRunningInstances: m > 1 makes 0..m-1 one gang */
    uint32_t config_version;  /* template version for new instances */
    enum job_state state;     /* the recorded state; a MARK action is emitted when it changes */
};

/* Instance counts per task state. */
struct job_counts {
    uint32_t n[TASK_NSTATES];
    uint32_t total;
};

enum job_action_kind {
    JOB_ACT_CREATE = 0, /* new instance: run 1, INITIALIZED at version */
    JOB_ACT_RESTART,    /* terminal instance: next run (task_restart), INITIALIZED */
    JOB_ACT_KILL,       /* non-terminal: INITIALIZED..LAUNCHING -> KILLED; LAUNCHED, STARTING,
                           RUNNING, PREEMPTING -> KILLING */
    JOB_ACT_DELETE,     /* terminal instance no longer wanted: -> DELETED, drop the record */
    JOB_ACT_TIMEOUT,    /* PLACING/LAUNCHING past its timeout: -> READY (task_check_timeout) */
    JOB_ACT_MARK,       /* the job's state changes to `state` */
};

struct job_action {
    enum job_action_kind kind;
    uint32_t instance;
    uint32_t run;           /* CREATE: 1; RESTART: the new run id */
    uint32_t version;       /* CREATE/RESTART: template version of the new run */
    bool count_failure;     /* RESTART: the ended run counts against maxFailures */
    uint32_t crash_loop;    /* RESTART: the new run's task.crash_loop (task_restart_at) */
    uint32_t gang;          /* CREATE/RESTART: gang id = lowest instance of the gang */
    uint32_t gang_size;     /* members of that gang created/restarted in this plan */
    uint32_t gang_first;    /* the lowest of those members, and its new run: the pair names the set */
    uint32_t gang_first_run;/* (no other set of the job gets the same pair; see docs/lifecycle.md) */
    const char *host;       /* CREATE/RESTART: STATEFUL hint (previous host) or DAEMON pin */
    bool host_pinned;       /* DAEMON: the host is a requirement, not a preference */
    enum task_state to;     /* TIMEOUT: READY */
    enum job_state state;   /* MARK */
};

struct job_plan {
    struct job_action *v;   /* owned; job_plan_free */
    size_t n, cap;
    enum job_state state;   /* the job state after the plan's actions */
    struct job_counts counts;  /* actual instance counts per state (for status) */
    int64_t next_deadline_ms;  /* earliest future timeout or backoff end among instances; INT64_MAX if none */
    uint32_t nbackoff;         /* services waiting out a restart backoff (task_restart_at) */
};

struct job_input {
    const struct job_spec *spec;
    const struct task *tasks;    /* one record per existing instance, any order */
    size_t ntasks;
    const char *const *hosts;    /* DAEMON: eligible host names (duplicates ignored) */
    size_t nhosts;
    const struct task_config *task_cfg; /* timeouts and restart backoff; NULL: defaults */
    int64_t now_ms;
};

const char *job_type_name(enum job_type t);   /* "BATCH", "STATELESS", "STATEFUL", "DAEMON" */
const char *job_state_name(enum job_state s); /* "RUNNING", ... ; "INVALID" outside the enum */

/* Checks a spec: type, maxFailures <= 100, instance_count <= JOB_MAX_INSTANCES,
 * minimumRunningInstances <= instance_count (not for DAEMON). */
int job_spec_validate(const struct job_spec *spec, char *err, size_t errlen);

/* Gang of an instance: with m = min_running > 1, instances 0..m-1 form gang 0
 * (size m); every other instance is its own gang (id = instance, size 1). */
uint32_t job_gang_of(const struct job_spec *spec, uint32_t instance);
uint32_t job_gang_size(const struct job_spec *spec, uint32_t gang);

void job_count_states(const struct task *tasks, size_t n, struct job_counts *out);

/* Job state from instance counts (ignoring DELETED instances):
 *   goal DELETE and no instances -> DELETED
 *   goal KILL/DELETE: any instance not terminal -> KILLING, else KILLED
 *   no instances -> INITIALIZED
 *   all terminal: all SUCCEEDED -> SUCCEEDED; any FAILED or LOST -> FAILED; else KILLED
 *   any RUNNING, PREEMPTING or KILLING -> RUNNING
 *   every instance INITIALIZED -> INITIALIZED, else PENDING */
enum job_state job_state_derive(const struct job_spec *spec, const struct job_counts *c);

/* The reconciler. Fills *plan (initialised here; free with job_plan_free even
 * on error). Actions come in instance order: per existing instance (ascending
 * id) at most one of KILL / DELETE / RESTART / TIMEOUT, then CREATEs
 * (ascending id), then MARK when the derived state differs from spec->state.
 * -EINVAL on a bad spec or duplicate instance ids, -ENOMEM. */
int job_reconcile(const struct job_input *in, struct job_plan *plan, char *err, size_t errlen);
void job_plan_free(struct job_plan *plan);

#endif
