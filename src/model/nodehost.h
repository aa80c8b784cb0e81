/* A Node object as the core's host (struct host_spec): the one reading of
 * a Node that placement (cluster.c) and the job manager's DAEMON
 * eligibility (jobmgr_daemon.c) share, so both judge a node alike.
 *
 * allocatable from status.allocatable (else status.capacity): cpu, memory,
 * ephemeral-storage (disk), nvidia.com/gpu; metadata.labels; spec.taints;
 * spec.unschedulable; not_ready when the node is not Ready (condition Ready
 * not "True", or no such condition). Malformed quantities read 0; labels or
 * taints that do not parse are left out (the node keeps its other fields).
 *
 * Ownership: the node is borrowed; strings in *s point into it, arrays come
 * from m (kp_free_all). Returns 0, -EINVAL (no metadata.name) or -ENOMEM. */
#ifndef PELOTON_MODEL_NODEHOST_H
#define PELOTON_MODEL_NODEHOST_H
#include <jansson.h>
#include <stdbool.h>

#include "host.h"
#include "k8sparse.h"

/* Condition Ready is "True". */
bool node_ready(const json_t *node);
int node_host_spec(const json_t *node, struct kp_mem *m, struct host_spec *s);

#endif
