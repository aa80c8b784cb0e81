/* Shared claims of host capacity for placement engines run active-active
 * (pelotond --placement-active-active; docs/lifecycle.md, "Fencing and
 * claims"). Each engine decides from its own copy of the nodes; before it
 * binds a gang it claims the capacity in Redis, atomically for the gang:
 *
 *   peloton:claims:<node>  HASH pod uid -> "<owner> <cpu m> <memory bytes> <gpu m> <expiry ms>"
 *
 * The claim script drops expired claims, then checks on each node that
 * free (allocatable - allocated in the caller's copy, which counts its own
 * bindings in flight) - the live claims of other engines >= the gang's
 * requests there; only then does it write the gang's claims (expiring
 * after ttl_ms). A binding that lands consumes its claim: it stays only
 * grace_ms more, the time the other engines' copies take to see the pod
 * bound (meanwhile they may count it twice: capacity left unused, never
 * booked twice); a binding that fails drops it. A claim never bound
 * expires. Loop thread; db's replies as ctl_redis's. */
#ifndef PELOTON_PLACEMENT_CLAIM_H
#define PELOTON_PLACEMENT_CLAIM_H

#include <stddef.h>
#include <stdint.h>

#include "resource.h"

struct ctl_db;
struct host_fleet;

#define PL_CLAIM_KEY "peloton:claims:"

struct pl_claims {
    struct ctl_db *db;
    int claim, consume; /* the scripts' indexes (ctl_db_script) */
    char owner[64];     /* this engine */
    uint32_t ttl_ms, grace_ms;
};

/* 0, or -1 when the scripts cannot be registered. */
int pl_claims_init(struct pl_claims *c, struct ctl_db *db, const char *owner, uint32_t ttl_ms, uint32_t grace_ms);
/* Claims n tasks (uids[i] on host hosts[i] of f, requesting req[i]) all
 * or none. 0: claimed; 1: another engine's claims leave too little on a
 * node (its name in node, cap bytes); -1: Redis failed (nothing claimed). */
int pl_claims_take(struct pl_claims *c, const struct host_fleet *f, const uint32_t *hosts, const char *const *uids,
                   const struct resvec *req, uint32_t n, char *node, size_t cap);
/* The pod's binding landed (bound) or failed: its claim lives grace_ms
 * more, or goes now. Deferred. */
void pl_claims_settle(struct pl_claims *c, const char *node, const char *uid, bool bound);

#endif
