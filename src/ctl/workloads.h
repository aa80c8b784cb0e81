/* workloads: the translating controller of the job manager role. Each
 * apps/v1 Deployment, ReplicaSet, StatefulSet and DaemonSet and each batch/v1
 * Job is kept translated into one Peloton Job (jobs.peloton.io) of the same
 * name and namespace, owned by it (an ownerReference with controller: true);
 * the job manager runs that Job's pods through pools, admission, gangs,
 * preemption and the rolling-update planner like any other. The workload's
 * status is written back in its own shape from the Peloton Job's status, and
 * a deleted workload's Peloton Job is deleted (its pods with it), unless the
 * deletion orphaned it (then it runs on ownerless, and a workload made again
 * under its name adopts it). The mapping field by field: docs/workloads.md.
 *
 * A client of the Kubernetes API (kclient) on the caller's loop; not
 * thread-safe: call everything on the loop's thread. */
#ifndef PELOTON_CTL_WORKLOADS_H
#define PELOTON_CTL_WORKLOADS_H
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "kclient.h"

struct workloads_options {
    const char *default_pool; /* the pool when neither the workload nor its namespace names one; NULL: none */
    uint32_t resync_ms;       /* every workload is reconciled this often; default 10000 */
};

struct workloads;
/* Starts the informers (the five workload kinds, Peloton Jobs, Namespaces).
 * kc must outlive it. NULL with err on failure. */
struct workloads *workloads_start(uv_loop_t *loop, struct kclient *kc, const struct workloads_options *o, char *err,
                                  size_t errlen);
/* Stops the informers and the timer; the memory goes once the timer's handle
 * closed (run the loop). NULL-safe. */
void workloads_stop(struct workloads *w);

#endif
