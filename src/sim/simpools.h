/* Loading a simulator document's "capacity", "slackCpu" and "pools" into a
 * pool tree (shared by the entitlement and plan subcommands).
 *
 * pools[i]: {"path", "reservation", "limit", "share", "static": [kinds],
 *            "controllerLimit": pct, "slackLimit": pct,
 *            "demand": resvec (leaf pending, preemptible class),
 *            "allocation": resvec (leaf allocation, preemptible class)}
 * "share" is a number (all kinds) or an object of numbers by kind.
 * Parents must be listed before children; "/" is implicit.
 * On success *out is a new tree the caller frees with respool_tree_free. */
#ifndef PELOTON_SIMPOOLS_H
#define PELOTON_SIMPOOLS_H

#include <jansson.h>

#include "respool.h"

struct sim_cluster {
    struct resvec capacity;
    int64_t slack_cpu; /* milli-cpu; default: capacity cpu minus the non-slack allocation */
    bool slack_given;
};

int sim_load_pools(json_t *in, struct respool_tree **out, struct sim_cluster *cl, char *err, size_t errlen);

/* The "pools" output array: every pool but the root, in input (pre-)order,
 * with path, entitlement, demand, allocation, slackEntitlement. */
json_t *sim_pools_out(struct respool_tree *t);

#endif
