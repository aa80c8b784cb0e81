/* jobmgr: the job manager role. Turns Job objects (jobs.peloton.io/v1alpha1)
 * into Pods and keeps them there (docs/lifecycle.md "The jobmgr role",
 * docs/architecture.md): instances are pods named <job>-<instance> (run 1)
 * and <job>-<instance>-<run> (later runs) with an owner reference to the
 * Job, restarts by restartPolicy, job state and status counts, STATEFUL and
 * DAEMON semantics, rolling updates of spec.template, cascading delete.
 * A client of the Kubernetes API (kclient) on the caller's loop; all writes
 * are async, queued and bounded. Not thread-safe: call everything on the
 * loop's thread. */
#ifndef PELOTON_CTL_JOBMGR_H
#define PELOTON_CTL_JOBMGR_H
#include <stddef.h>
#include <stdint.h>
#include <uv.h>
#include "kclient.h"

struct jobmgr_options {
    const char *scheduler_name; /* schedulerName of the pods it creates; default "peloton" */
    uint32_t resync_ms;         /* full reconcile of every job; default 10000 */
    uint32_t tick_ms;           /* events are coalesced per job for this long; default 10 */
    uint32_t max_inflight;      /* writes in flight at once (the rest queue); default 32 */
    uint32_t update_max_attempts; /* rolling update: failed runs of one instance at the new
                                     template before it counts against maxFailureInstances;
                                     default 2 (the Job's updateStrategy.maxInstanceAttempts
                                     overrides it) */
    uint32_t backoff_ms;        /* services' restart backoff (CrashLoopBackOff): first wait,
                                   doubling; default 10000 */
    uint32_t backoff_max_ms;    /* its cap; default 300000. A run RUNNING for twice the cap
                                   ends the crash loop */
    struct metrics *metrics;    /* the process's registry for its families (docs/metrics.md); NULL: none */
};
/* 0 in any field of the options passed to jobmgr_start means the default. */
void jobmgr_options_default(struct jobmgr_options *o);

struct jobmgr;
/* Starts informers on Jobs, Pods and Nodes (DAEMON) and reconciles on change.
 * kc must outlive the jobmgr. NULL with err on failure. */
struct jobmgr *jobmgr_start(uv_loop_t *loop, struct kclient *kc, const struct jobmgr_options *o, char *err,
                            size_t errlen);
/* Stops the informers and timers and drops all state. The memory is freed
 * once its timer handles have closed (run the loop) and every request in
 * flight has called back (they complete harmlessly, or are cancelled by
 * kclient_free). NULL-safe. */
void jobmgr_stop(struct jobmgr *j);

/* Counters since start, for logs and tests. */
struct jobmgr_stats {
    uint64_t events;       /* informer events handled (jobs, pods, nodes) */
    uint64_t reconciles;   /* job reconciles run (events are coalesced per job per tick) */
    uint64_t writes;       /* API writes completed */
    uint64_t write_errors; /* of which failed (409 on create and 404 on delete count as success) */
    uint64_t resync_passes, resync_skips; /* resyncs that re-applied every cached pod, and that had not to */
    size_t jobs, queued, inflight;
};
void jobmgr_stats(const struct jobmgr *j, struct jobmgr_stats *out);

#endif
