/* jobmgr: the job manager role. Turns Job objects (jobs.peloton.io/v1alpha1)
 * into Pods and keeps them there (docs/lifecycle.md, docs/architecture.md):
 * instances are pods named <job>-<instance> with an owner reference to the
 * Job, restarts by restartPolicy, job state and status counts, STATEFUL and
 * DAEMON semantics, rolling updates of spec.template, cascading delete.
 * A client of the Kubernetes API (kclient) on the caller's loop. */
#ifndef PELOTON_CTL_JOBMGR_H
#define PELOTON_CTL_JOBMGR_H
#include <stddef.h>
#include <stdint.h>
#include <uv.h>
#include "kclient.h"

struct jobmgr_options {
    const char *scheduler_name; /* schedulerName of the pods it creates; default "peloton" */
    uint32_t resync_ms;         /* full reconcile of every job; default 10000 */
};
void jobmgr_options_default(struct jobmgr_options *o);

struct jobmgr;
/* Starts informers on Jobs, Pods and Nodes (DAEMON) and reconciles on change.
 * kc must outlive the jobmgr. NULL with err on failure. */
struct jobmgr *jobmgr_start(uv_loop_t *loop, struct kclient *kc, const struct jobmgr_options *o, char *err,
                            size_t errlen);
/* Stops and frees (requests in flight are cancelled by kclient_free later or
 * complete harmlessly). NULL-safe. */
void jobmgr_stop(struct jobmgr *j);

#endif
