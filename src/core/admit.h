/* Admission: per-leaf PriorityFIFO queues of gangs, admitted all or nothing
 * against the pool's entitlement (notes/peloton.md, "Admission").
 *
 * Each leaf pool has four queues ordered by priority (higher first), then by
 * FIFO sequence (assigned at enqueue): pending, non-preemptible, controller and
 * revocable. Enqueue adds the gang's demand to pool->pending; admission moves
 * it to pool->alloc. A gang is admitted only if every check that applies holds:
 *   controller (non-revocable controller work):
 *       controller alloc + gang <= respool_controller_limit
 *   non-preemptible:  non-preemptible alloc + gang <= reservation
 *   revocable:        revocable alloc + gang <= slack_entitlement
 *   not revocable:    non-slack alloc + gang <= entitlement
 * (so non-preemptible work passes both the reservation and the entitlement
 * rule; rules are tried in the order listed). Rules compare per kind, and only
 * the kinds the gang asks for: a cpu-only gang is not held back because the
 * pool is over its memory entitlement. The first three are
 * "type-specific": a pending-queue head that fails one moves to its type's
 * queue so it does not block the pool. A pool marked deleting admits nothing:
 * its queues' heads wait with ADMIT_CHECK_DELETING. A head that fails the entitlement rule
 * blocks the pending queue (head of line) until the next round. Each round
 * first retries the heads of the controller, non-preemptible and revocable
 * queues (each queue stops at its first failure), then the pending queue.
 *
 * Ownership: the caller owns every struct gang (and its id string). From
 * admit_enqueue until the gang is returned by admit_round or taken back with
 * admit_remove, the queues hold a pointer to it: it must not be freed or moved.
 * Per-leaf queue state lives behind pool->admit and is freed by
 * admit_pool_release (an idle leaf, e.g. before respool_delete) or
 * admit_tree_release (all of it, before respool_tree_free; gangs still queued
 * are forgotten, not touched). No global state; no I/O. Errors are negative
 * errno codes with a one-line message in err (err may be NULL). */
#ifndef PELOTON_CORE_ADMIT_H
#define PELOTON_CORE_ADMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "resource.h"
#include "respool.h"

enum admit_queue { ADMIT_Q_PENDING = 0, ADMIT_Q_NONPREEMPT, ADMIT_Q_CONTROLLER, ADMIT_Q_REVOCABLE, ADMIT_NQUEUES };

/* The rule a waiting gang failed when it was last tried. */
enum admit_check {
    ADMIT_CHECK_NONE = 0,    /* not tried yet (queued behind another gang) */
    ADMIT_CHECK_ENTITLEMENT, /* non-slack allocation + gang > entitlement */
    ADMIT_CHECK_SLACK,       /* revocable allocation + gang > slack entitlement */
    ADMIT_CHECK_CONTROLLER,  /* controller allocation + gang > controller limit */
    ADMIT_CHECK_RESERVATION, /* non-preemptible allocation + gang > reservation */
    ADMIT_CHECK_DELETING,    /* the pool is marked for deletion: it admits nothing new */
};

/* Why a gang is still waiting: alloc + gang > limit in `kind` (base units). */
struct admit_why {
    enum admit_check check;
    enum res_kind kind;
    int64_t alloc, gang, limit;
};

struct gang {
    const char *id;       /* borrowed, for messages; may be NULL */
    uint32_t priority;    /* higher is admitted first */
    unsigned flags;       /* WF_*; enqueue adds WF_PREEMPTIBLE to revocable gangs */
    uint32_t ntasks;      /* >= 1 */
    struct resvec demand; /* sum over the gang's tasks */
    void *data;           /* the caller's */

    /* Set by admission. */
    struct respool *pool; /* the leaf it was enqueued on (kept after admission) */
    uint64_t seq;         /* FIFO order within the pool */
    struct admit_why why; /* while waiting: the last failed rule */

    /* Private to admit.c: queue + 1 (0 = not queued) and heap position. */
    uint8_t qid_;
    uint32_t qpos_;
};

/* A gang with these fields and nothing queued (the rest zero). */
void admit_gang_init(struct gang *g, const char *id, uint32_t priority, unsigned flags, uint32_t ntasks,
                     struct resvec demand);

/* Queues g on leaf pool p (-EINVAL: not a leaf, no tasks, bad flags or a
 * negative or unlimited demand; -EALREADY: g is queued; -ENOMEM). */
int admit_enqueue(struct respool *p, struct gang *g, char *err, size_t errlen);

/* Takes a queued gang back (killed while pending): its demand leaves
 * pool->pending. -ENOENT when g is not queued. */
int admit_remove(struct gang *g);

/* Runs one admission round on leaf p: admitted gangs are appended to out (at
 * most cap of them; what does not fit in out stays queued) in admission order,
 * their demand moved from pending to alloc. Returns how many were admitted.
 * The caller pushes them to the ready queue. Gangs left at a queue's head get
 * g->why. */
size_t admit_pool_round(struct respool *p, struct gang **out, size_t cap);
/* admit_pool_round over every leaf with queued work, in pre-order. */
size_t admit_round(struct respool_tree *t, struct gang **out, size_t cap);

/* Gives back a finished or killed task's resources: subtracts r from leaf p's
 * allocation in the class of flags. -EINVAL (and nothing changes) when p is
 * not a leaf or r exceeds what that class holds. */
int admit_release(struct respool *p, unsigned flags, struct resvec r);

/* The head of one of p's queues, or NULL. */
struct gang *admit_head(const struct respool *p, enum admit_queue q);
/* Gangs in one queue of p, or in all of them (q < 0). */
size_t admit_queued(const struct respool *p, int q);
/* The queue g waits in, or -1 when it is not queued. */
int admit_gang_queue(const struct gang *g);

/* Frees p's queue state; -EBUSY (nothing freed) while gangs are queued. */
int admit_pool_release(struct respool *p);
/* Frees every pool's queue state (queued gangs are forgotten). */
void admit_tree_release(struct respool_tree *t);

/* "entitlement", "slack entitlement", "controller limit", "reservation",
 * "deletion", "none". */
const char *admit_check_name(enum admit_check c);
/* An amount of kind k for a person: "4 cores", "1 core", "0.5 cores", "2
 * GPUs", "3Gi". snprintf semantics. */
int admit_amount_format(enum res_kind k, int64_t v, char *buf, size_t len);
/* g's place in its queue, from 1 (the head), or 0 when it is not queued.
 * The head is O(1); any other gang sorts a copy of its queue once per change
 * of the queue (O(n log n)), then finds itself by binary search. */
uint32_t admit_gang_rank(const struct gang *g);
/* One line for a waiting gang with the numbers of the rule that holds it,
 * its place in its queue and what would let it in, e.g. "pool /a/b at its cpu
 * entitlement: 3 of 4 cores allocated, gang needs 2; position 1 of 3 in the
 * pool's queue; admitted once its work frees 1 core or its entitlement grows
 * by 1 core". snprintf semantics. */
int admit_why_format(const struct gang *g, char *buf, size_t len);

#endif
