/* Job custom objects (jobs.peloton.io/v1alpha1) in the core's terms.
 *
 * crd_job_decode fills the core's struct job_spec (type, instanceCount,
 * restartPolicy.maxFailures, sla.minimumRunningInstances,
 * preemptionPolicy.killOnPreempt, and the recorded status.state) and the
 * pool's name. What job_spec has no field for comes out of
 * crd_job_decode_extra: the SLA's priority, preemptible, revocable and
 * maximumRunningInstances (for admission: admit_gang_init's priority and WF_*
 * flags), updateStrategy as the update planner's struct update_spec, and
 * spec.stoppedInstances (the per-instance stop goal).
 * spec.template is checked for shape only (an object with spec.containers).
 * Goal is always JOB_GOAL_RUN and config_version 0: the caller sets them.
 *
 * Ownership: cr is borrowed and never modified; outputs are plain values the
 * caller owns. crd_job_status returns a new json_t (json_decref). Errors are 0
 * or negative errno codes with one line in err (may be NULL) naming the
 * object and the field, e.g.
 *   jobs.peloton.io "train": spec.restartPolicy.maxFailures: 101 exceeds 100 */
#ifndef PELOTON_K8S_CRD_JOB_H
#define PELOTON_K8S_CRD_JOB_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "job.h"
#include "update.h"

#define CRD_JOB_RESOURCE "jobs.peloton.io"

#define CRD_JOB_MAX_STOPPED 256 /* ranges in spec.stoppedInstances */

/* Instances [from, to) (Peloton's InstanceRange). */
struct crd_job_range {
    uint32_t from, to;
};

/* What struct job_spec has no field for. */
struct crd_job_extra {
    uint32_t priority;         /* sla.priority; higher first */
    bool preemptible;          /* sla.preemptible */
    bool revocable;            /* sla.revocable (requires preemptible) */
    uint32_t max_running;      /* sla.maximumRunningInstances; 0 = no maximum */
    uint32_t max_unavailable;  /* sla.maximumUnavailableInstances: a service's instances that host
                                  maintenance may take down at once; 0 = the update strategy's batchSize,
                                  else 1 (docs/migration.md) */
    struct update_spec update; /* updateStrategy: batchSize, maxFailureInstances, maxInstanceAttempts,
                                  rollbackOnFailure, minReadySeconds (min_running_ms; default
                                  CRD_JOB_MIN_READY_SECONDS) */
    bool update_paused;        /* updateStrategy.paused: the rolling update makes no new starts */
    uint32_t nstopped;         /* spec.stoppedInstances: instances whose goal is to stay stopped, */
    struct crd_job_range stopped[CRD_JOB_MAX_STOPPED]; /* sorted by from, overlaps merged */
};

#define CRD_JOB_MIN_READY_SECONDS 10     /* default settle time of an updated instance */
#define CRD_JOB_MAX_MIN_READY_SECONDS 86400

/* Decodes and validates (job_spec_validate included). pool_name gets
 * spec.resourcePool (-ENAMETOOLONG when it does not fit in len). */
int crd_job_decode(const json_t *cr, struct job_spec *spec, char *pool_name, size_t len, char *err,
                   size_t errlen);

/* The same validation; fills *x with the fields job_spec lacks. */
int crd_job_decode_extra(const json_t *cr, struct crd_job_extra *x, char *err, size_t errlen);

/* Whether spec.stoppedInstances names the instance (binary search). */
bool crd_job_stopped(const struct crd_job_extra *x, uint32_t instance);

/* WF_PREEMPTIBLE / WF_REVOCABLE (respool.h) for the job's gangs. */
unsigned crd_job_work_flags(const struct crd_job_extra *x);

/* A new status object: state (job_state_name) and taskStats with every task
 * state's count (0s included, so printer columns always show a number). */
json_t *crd_job_status(enum job_state state, const struct job_counts *counts);

#endif
