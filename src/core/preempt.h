/* The preemption planner: which admitted tasks to take back, and why
 * (notes/peloton.md, "Preemption"). It only plans; the caller acts on the plan
 * (kills the victims, re-queues them per killOnPreempt) and later releases
 * their allocation with admit_release.
 *
 * (a) Inter-pool. Each call of preempt_plan is one check. A leaf is over when,
 *     in some kind, its non-slack allocation exceeds its entitlement or its
 *     revocable allocation exceeds its slack entitlement (allocation of tasks
 *     already PREEMPTING or KILLING does not count: it is on its way out). A
 *     leaf over for cfg.over_checks consecutive checks gives back: victims in
 *     that pool, revocable work first (it only shrinks the slack overage), then
 *     preemptible work (the non-slack overage), never non-preemptible work;
 *     within that by state (READY, PLACING, PLACED, LAUNCHING, STARTING /
 *     LAUNCHED, RUNNING: cheaper first), lower priority first, most recently
 *     started first, then input order. A candidate is taken only if it shrinks
 *     a kind still over; the pool stops as soon as nothing is over. A leaf's
 *     counter returns to 0 when it is back under, and after it gives back at
 *     least one victim (so victims have cfg.over_checks checks to leave before
 *     more are picked). Tasks in other states (PENDING, terminal) are ignored.
 * (b) Intra-pool (our rule). A gang waiting at the head of a leaf's queue
 *     because it failed the entitlement rule (or the slack entitlement rule,
 *     for revocable gangs) may displace strictly lower-priority preemptible
 *     (resp. revocable) work of the same pool: candidates by lowest priority,
 *     newest first, taken while they shrink a kind the gang is still short of.
 *     Only if the freed resources plus the pool's free entitlement (after (a)'s
 *     victims, and after gangs of the pool planned before it) cover the gang are
 *     those victims kept; otherwise the gang gets none. Gangs are served by
 *     priority, then FIFO. A task is never picked twice.
 *
 * Ownership: the caller owns the tasks, the tree and the gangs; a plan owns
 * its victim array (preempt_plan_free) and borrows task ids, pool pointers and
 * gang ids from the inputs. The caller owns the state (preempt_state_init /
 * preempt_state_free); it holds per-pool counters indexed by respool index.
 * No global state; no I/O. Errors are negative errno codes with a one-line
 * message in err (may be NULL). */
#ifndef PELOTON_CORE_PREEMPT_H
#define PELOTON_CORE_PREEMPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "admit.h"
#include "resource.h"
#include "respool.h"
#include "task.h"

struct preempt_config {
    uint32_t over_checks; /* N consecutive over checks before a pool gives back; >= 1; default 3 */
    bool intra_pool;      /* plan (b); default true */
};

struct preempt_state {
    struct preempt_config cfg;
    uint32_t *over; /* consecutive checks over, by pool index */
    uint32_t n;     /* length of over */
};

/* An admitted task as the planner sees it. */
struct preempt_task {
    const char *id;       /* borrowed */
    struct respool *pool; /* a leaf */
    struct resvec res;
    uint32_t priority;
    unsigned flags;        /* WF_* (revocable implies preemptible) */
    enum task_state state; /* READY … RUNNING; PREEMPTING / KILLING are on their way out */
    int64_t start_ms;      /* when it was admitted or started; newer goes first */
};

enum preempt_reason {
    PREEMPT_OVER_ENTITLEMENT = 1, /* (a), non-slack allocation over entitlement */
    PREEMPT_OVER_SLACK,           /* (a), revocable allocation over slack entitlement */
    PREEMPT_PRIORITY,             /* (b), a higher-priority gang of the same pool */
};

struct preempt_victim {
    size_t task;          /* index into the input array */
    const char *task_id;  /* borrowed from the input */
    struct respool *pool; /* borrowed */
    enum preempt_reason reason;
    enum res_kind kind;   /* (a) the kind over; (b) the kind the gang is short of */
    int64_t amount;       /* (a) the pool's overage in kind, (b) the shortfall, base units */
    uint32_t checks;      /* (a) consecutive checks over */
    uint32_t priority;    /* the victim's */
    const char *gang_id;  /* (b) borrowed from the gang */
    uint32_t gang_priority;
    bool slack;           /* (b) the gang is revocable: short of slack entitlement */
};

struct preempt_plan {
    struct preempt_victim *v;
    size_t n, cap;
};

void preempt_config_default(struct preempt_config *cfg);
/* -EINVAL when cfg->over_checks is 0. st owns nothing until the first plan. */
int preempt_state_init(struct preempt_state *st, const struct preempt_config *cfg);
void preempt_state_free(struct preempt_state *st);
/* The consecutive-over counter of pool p (0 if never seen). */
uint32_t preempt_state_get(const struct preempt_state *st, const struct respool *p);
/* Seeds p's counter (e.g. history carried over from a previous process). */
int preempt_state_set(struct preempt_state *st, const struct respool *p, uint32_t checks);

/* One check: reads every leaf's alloc, entitlement, slack_entitlement and
 * (for (b)) its waiting heads (admit_head; their why must be current, i.e.
 * after admit_round), and tasks[0..n). out must be zeroed or freed; it gets
 * the victims in planning order. -EINVAL when a task's pool is not a leaf of
 * t, -ENOMEM; out is empty on error and the counters are unchanged. */
int preempt_plan(struct preempt_state *st, struct respool_tree *t, const struct preempt_task *tasks, size_t n,
                 struct preempt_plan *out, char *err, size_t errlen);
void preempt_plan_free(struct preempt_plan *plan);

/* Whether a plan needs the tasks of leaf p: its allocation (p->alloc, which
 * counts the tasks on their way out too) is over its entitlement or its
 * slack entitlement in some kind, or (with cfg.intra_pool) a gang waits at
 * one of its heads on the entitlement or slack entitlement rule. preempt_plan
 * picks victims only in such pools, and any other pool is under whatever
 * its tasks are (leaving tasks only lower its working allocation), so a plan
 * given the tasks of the wanted pools alone equals the plan of every task
 * (the same victims, up to the order of ties, and the same counters): a
 * caller that keeps its tasks per pool hands over those of these pools only
 * and an idle check costs O(pools), not O(tasks). */
bool preempt_pool_wanted(const struct preempt_state *st, const struct respool *p);

/* "pool /a/b over cpu entitlement by 2 for 3 checks" or "priority 5 gang g7
 * preempts priority 1 (pool /a/b short of cpu entitlement by 2)". snprintf
 * semantics. */
int preempt_victim_format(const struct preempt_victim *v, char *buf, size_t len);
/* "over-entitlement", "over-slack-entitlement", "priority". */
const char *preempt_reason_name(enum preempt_reason r);

#endif
