/* Entitlement: exact hierarchical weighted max-min fairness (notes/peloton.md,
 * "Our rule"), per resource kind, top-down from the root.
 *
 * Reads each pool's cfg, alloc and pending (leaves; inner pools are rolled up
 * here first) and writes demand, entitlement, slack_demand and
 * slack_entitlement on every pool. Integer arithmetic throughout: every unit of
 * a parent's entitlement goes to some child while any child can take it
 * (below its limit, share > 0), ties broken by sibling order, so the result is
 * deterministic and nothing is lost to rounding.
 *
 *   demand (leaf)  = min(limit, non-slack alloc + non-slack pending
 *                          + revocable memory/disk/gpu up to the slack limit);
 *                    a leaf marked deleting admits nothing new, so its
 *                    pending work is left out (alloc only)
 *   demand (inner) = min(limit, sum over children of max(demand, reservation if STATIC))
 *   phase 1: a_c = STATIC ? reservation : min(reservation, demand); if the sum
 *            exceeds E, E is water-filled by reservation weights, capped at a_c
 *   phase 2: E - sum(a) water-filled by share over min(demand, limit) - a_c
 *   phase 3: what is left water-filled by share up to each child's limit
 *   slack:   cpu: slack_cpu water-filled by share over revocable cpu demand;
 *            other kinds: min(slack limit, entitlement - non-slack alloc), >= 0
 * Returns 0 or -ENOMEM (the tree keeps its previous outputs then). */
#ifndef PELOTON_CORE_ENTITLE_H
#define PELOTON_CORE_ENTITLE_H

#include <stddef.h>
#include <stdint.h>

#include "resource.h"
#include "respool.h"

int respool_entitle(struct respool_tree *t, struct resvec capacity, int64_t slack_cpu);

/* Weighted water-filling, exposed for tests and reuse: distributes `amount`
 * over n slots with weights w (>= 0) and caps (>= 0) so that each slot gets
 * min(cap, lambda * w) for one lambda, in whole units; slots with w == 0 get 0.
 * Writes out[i] and returns what was given (= min(amount, sum of caps of
 * weighted slots)). scratch must hold 2n int64s. */
int64_t entitle_waterfill(size_t n, const int64_t *w, const int64_t *cap, int64_t amount, int64_t *out,
                          int64_t *scratch);

#endif
