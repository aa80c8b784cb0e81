/* Placement: gangs of tasks onto a host fleet (docs/placement.md).
 *
 * A place_engine wraps a host_fleet (borrowed; it must outlive the engine)
 * with a search index over free resources. Placing a gang either gives every
 * task a host and adds the tasks' resources to those hosts' allocated vectors
 * (and the job/task-label counts), or changes nothing and reports why the
 * first unplaceable task could not go anywhere: per filter, how many hosts it
 * rejected (each host counted once, against the first filter that rejected it
 * in the order of enum place_reason).
 *
 * Filters: closed hosts (cordoned, not ready, draining; a not-ready host
 * with a taint the task does not tolerate counts under the taint); exclusive hosts (a host labelled
 * peloton/exclusive=V only takes tasks whose node selector, required node
 * affinity (In) or Peloton HOST label constraint (EQUAL >= 1 / GREATER_THAN 0)
 * names peloton/exclusive=V); GPU hosts kept for GPU tasks (unless
 * gpu_hosts_any_task); Kubernetes nodeSelector; required node affinity;
 * taints (NoSchedule, NoExecute) against tolerations; Peloton label
 * constraints; resource fit in every kind. A host hint is taken when the
 * hinted host passes every filter.
 *
 * Strategies: PACK is best fit: the host with the least free cpu that still
 * fits the task (ties to the lower host index); LEAST_LOADED the host with the
 * most free cpu (ties to the higher index); SPREAD_JOB the host with the
 * fewest tasks of the gang's job, then the most free cpu (see
 * spread_max_candidates for bounding its cost).
 *
 * Ownership: every input struct and string is borrowed for the call. A
 * place_round's arrays belong to the round; free with place_round_free.
 * All results are deterministic for a given fleet and input. Not thread-safe. */
#ifndef PELOTON_CORE_PLACE_H
#define PELOTON_CORE_PLACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "host.h"
#include "resource.h"

#define PLACE_MAX_CONSTRAINT_DEPTH 16

enum place_strategy { PLACE_PACK = 0, PLACE_SPREAD_JOB, PLACE_LEAST_LOADED };

/* Filters, in evaluation order. PR_NONE: the host passed. */
enum place_reason {
    PR_UNSCHEDULABLE = 0, /* cordoned */
    PR_NOT_READY,         /* not ready (after the taints: a taint it does not tolerate is named instead) */
    PR_DRAINING,          /* Mesos maintenance */
    PR_EXCLUSIVE,
    PR_GPU_RESERVED,
    PR_NODE_SELECTOR,
    PR_NODE_AFFINITY,
    PR_TAINT,
    PR_LABEL_CONSTRAINT,
    PR_INSUFFICIENT_CPU,
    PR_INSUFFICIENT_MEMORY,
    PR_INSUFFICIENT_DISK,
    PR_INSUFFICIENT_GPU,
    PR_NREASONS,
    PR_NONE = PR_NREASONS
};

/* Kubernetes node selector requirement. Gt/Lt take one integer value and
 * compare the host label parsed as an integer (a non-integer never matches). */
enum sel_op { SEL_IN = 0, SEL_NOT_IN, SEL_EXISTS, SEL_DOES_NOT_EXIST, SEL_GT, SEL_LT };
struct place_expr {
    const char *key;
    enum sel_op op;
    const char *const *values;
    uint32_t nvalues;
};
/* A nodeSelectorTerm: its expressions are ANDed; terms are ORed. A term
 * with no expressions matches nothing (as in Kubernetes). */
struct place_term {
    const struct place_expr *exprs;
    uint32_t nexprs;
};

enum tol_op { TOL_EQUAL = 0, TOL_EXISTS };
#define TOL_ANY_EFFECT (-1)
struct place_toleration {
    const char *key;   /* NULL or "" with TOL_EXISTS tolerates every taint */
    enum tol_op op;
    const char *value; /* TOL_EQUAL only; NULL = "" */
    int effect;        /* enum taint_effect, or TOL_ANY_EFFECT */
};

/* Peloton Constraint. LABEL: count the host's labels equal to key=value
 * (HOST) or the tasks on the host carrying label key=value (TASK), then
 * compare count <, ==, > requirement. AND of nothing is true, OR of nothing
 * false. */
enum pc_type { PC_LABEL = 0, PC_AND, PC_OR };
enum pc_kind { PC_TASK = 0, PC_HOST };
enum pc_cond { PC_LESS_THAN = 0, PC_EQUAL, PC_GREATER_THAN };
struct place_constraint {
    enum pc_type type;
    enum pc_kind kind;
    enum pc_cond cond;
    const char *key, *value;
    uint32_t requirement;
    const struct place_constraint *subs; /* AND / OR */
    uint32_t nsubs;
};

struct place_task {
    struct resvec req;
    const char *host_hint; /* NULL: none */
    const struct host_kv *selector; /* nodeSelector: every key=value must be a host label */
    uint32_t nselector;
    const struct place_term *terms; /* required node affinity; nterms 0 = none */
    uint32_t nterms;
    const struct place_toleration *tols;
    uint32_t ntols;
    const struct place_constraint *constraint; /* NULL: none */
    const struct host_kv *labels; /* the task's own labels (counted for TASK constraints) */
    uint32_t nlabels;
};

struct place_gang {
    const char *id;
    const char *job; /* NULL: the gang's id */
    enum place_strategy strategy;
    const struct place_task *tasks;
    uint32_t ntasks;
};

struct place_options {
    bool gpu_hosts_any_task; /* false: GPU hosts take only GPU tasks */
    uint32_t max_gangs;      /* gangs tried per round; 0 = all */
    /* SPREAD_JOB looks at hosts least loaded first and stops at one without
     * a task of the job. When every fitting host already has some, finding
     * the fewest means looking at all of them; a limit > 0 stops after that
     * many fitting hosts and takes the best seen (0 = exact, the default). */
    uint32_t spread_max_candidates;
};
void place_options_default(struct place_options *o);

/* An untolerated taint and the hosts rejected by it (fleet string ids). */
struct place_taint_count {
    uint32_t key, value, effect, hosts;
};
#define PLACE_FAIL_TAINTS 4 /* taints named in a failure; the rest of rejected[PR_TAINT] is "other taints" */
#define PLACE_FAIL_HOSTS 3  /* hosts named for the members of a gang that fit */

struct place_failure {
    uint32_t task;   /* index in the gang of the first task that found no host */
    uint32_t nhosts; /* fleet size */
    uint32_t rejected[PR_NREASONS]; /* for that task, with the gang's earlier tasks counted on their hosts */
    /* rejected[PR_TAINT] by the first taint each host does not tolerate,
     * the most frequent first (ties: the one seen first) */
    uint32_t ntaints;
    struct place_taint_count taints[PLACE_FAIL_TAINTS];
    /* The whole gang: after the first failure the later tasks are still tried
     * (with the tasks that fit counted on their hosts), so the failure can say
     * how much of the gang fits: fit + unfit + untried = ntasks. Tasks whose
     * search would cost more than a fleet scan or two are left untried. */
    uint32_t fit, unfit, untried;
    uint32_t fit_hosts[PLACE_FAIL_HOSTS]; /* distinct hosts of the tasks that fit, in task order */
    uint32_t nfit_hosts;                  /* entries used */
    bool more_fit_hosts;                  /* some fit on other hosts too */
};

/* Counters for tests and benchmarks. */
struct place_stats {
    uint64_t tasks_placed, gangs_placed, gangs_failed;
    uint64_t candidates; /* hosts whose filters ran during indexed search */
    uint64_t full_scans; /* failure-path scans of the whole fleet */
    uint64_t index_misses; /* a full scan found a host the index missed (a bug) */
};

struct place_engine;

/* Builds the index over f's hosts. NULL on allocation failure. */
struct place_engine *place_engine_new(struct host_fleet *f, const struct place_options *o);
void place_engine_free(struct place_engine *e);

/* Places one gang. hosts (g->ntasks entries) gets each task's host index.
 * Returns 0 (placed and committed), -ENOSPC (not placed, *fail filled,
 * nothing changed), -EINVAL (no tasks, bad operator or value count, a
 * constraint deeper than PLACE_MAX_CONSTRAINT_DEPTH), -ENOMEM. */
int place_gang(struct place_engine *e, const struct place_gang *g, uint32_t *hosts,
               struct place_failure *fail);

struct place_gang_result {
    int rc;         /* as place_gang */
    uint32_t first; /* placed: the gang's hosts are round.hosts[first ..] */
    struct place_failure fail; /* rc == -ENOSPC */
};
struct place_round {
    uint32_t ntried; /* min(ngangs, max_gangs): the rest were not attempted */
    struct place_gang_result *gangs; /* ntried entries */
    uint32_t *hosts;
};

/* Tries gangs in order, up to the engine's max_gangs. A gang's -EINVAL or
 * -ENOSPC is recorded in its result and the round goes on; the call fails
 * only with -ENOMEM (out is then empty). Free out with place_round_free. */
int place_round(struct place_engine *e, const struct place_gang *gangs, uint32_t ngangs,
                struct place_round *out);
void place_round_free(struct place_round *r);

/* Sets a host's allocated vector (a task ended, or the snapshot changed),
 * keeping the index consistent. -EINVAL for a bad index or negative value. */
int place_host_set_allocated(struct place_engine *e, uint32_t idx, struct resvec allocated);

/* Per-host verdicts for one task (the extender's filter): reasons[i] gets the
 * first filter rejecting hosts[i] (PR_NONE: it passes), as place_gang would
 * judge it for a gang of job `job` (NULL: none). -EINVAL (bad task or host
 * index), -ENOMEM. */
int place_check_hosts(struct place_engine *e, const struct place_task *t, const char *job, const uint32_t *hosts,
                      uint32_t n, uint8_t *reasons);
/* Scores 0..10 for one task on each of hosts (the extender's prioritize), by
 * strategy: PACK favours the host the task leaves fullest (cpu and memory
 * utilisation after placing, averaged), LEAST_LOADED the emptiest, SPREAD_JOB
 * the host with the fewest tasks of the job (10 with none, minus one per
 * task, ties by emptiness). A host the task does not fit scores 0. */
int place_score_hosts(struct place_engine *e, const struct place_task *t, const char *job,
                      enum place_strategy strategy, const uint32_t *hosts, uint32_t n, int64_t *scores);
/* Both of the above in one pass, each host's record read once (the
 * extender's filter scores the hosts it checks, for the prioritize that
 * follows): reasons[i] and scores[i] are the values place_check_hosts and
 * place_score_hosts give for hosts[i]. A HOST_NONE entry is skipped
 * (PR_NONE, 0). -EINVAL (bad task, strategy or host index), -ENOMEM. */
int place_judge_hosts(struct place_engine *e, const struct place_task *t, const char *job,
                      enum place_strategy strategy, const uint32_t *hosts, uint32_t n, uint8_t *reasons,
                      int64_t *scores);
/* Undoes a successful place_gang of g onto hosts (the same arrays): the
 * resources and counts go back exactly. */
int place_gang_undo(struct place_engine *e, const struct place_gang *g, const uint32_t *hosts);
/* "insufficient cpu", "taint", ... */
const char *place_reason_name(enum place_reason r);
/* "0/5000 hosts: 4000 insufficient cpu, 1000 taint": reasons by count desc,
 * then name. snprintf semantics. */
int place_failure_format(const struct place_failure *f, char *buf, size_t len);
/* The failure as kube-scheduler words a FailedScheduling Event, for a gang
 * of ntasks tasks on fleet fl (names taints and hosts):
 *   "0/4 nodes are available: 1 node(s) had untolerated taint {k: v}, 1 node(s) were unschedulable,
 *    2 Insufficient cpu."
 * each "<count> <reason>" once, sorted as strings (as kube-scheduler sorts
 * them). A gang of more than one task is prefixed with what fits of it:
 *   "gang of 4: 2 members fit (on n1, n2), 2 do not: 0/4 nodes are available: 4 Insufficient cpu."
 * snprintf semantics. */
int place_failure_format_k8s(const struct host_fleet *fl, const struct place_failure *f, uint32_t ntasks, char *buf,
                             size_t len);

void place_engine_stats(const struct place_engine *e, struct place_stats *out);
/* Bytes held by the engine (index and scratch), excluding the fleet. */
size_t place_engine_bytes(const struct place_engine *e);

#endif
