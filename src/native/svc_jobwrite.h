/* Writes to one Job, shared by the JobManager (Update, Stop, Start,
 * Restart), the TaskManager (Start, Stop, Restart) and the UpdateService:
 * find the Job by its JobID (a list of Jobs through the API server), let the
 * method decide, then PUT the Job it edited (optimistic concurrency: the
 * read resourceVersion; a lost race is read and planned again up to
 * SVC_JW_TRIES times, the client's version, when it gave one, checked
 * again against the configuration version read: ABORTED if it moved) and/or
 * delete the pods of some instances (a new run of each: the job manager
 * starts it again), and reply. Internal to src/native.
 *
 * A method is a struct svc_jw_ops: plan() sees the Job found (borrowed) and
 * either answers at once (*reply, a response as proto3 JSON), or fails the
 * call itself (returns -1), or asks for writes: *put (a new Job, stolen)
 * and/or instances in w->del (their pods are deleted). done() then builds
 * the reply from the stored Job (NULL when nothing was PUT).
 *
 * Ownership: svc_jw_start takes req (the request as JSON) and frees it with
 * the call; the ops are static. */
#ifndef PELOTON_NATIVE_SVC_JOBWRITE_H
#define PELOTON_NATIVE_SVC_JOBWRITE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "svc_common.h"

#define SVC_JW_TRIES 5
#define SVC_JOBS_PATH "/apis/peloton.io/v1alpha1/jobs"

/* Job annotations the native writes keep (docs/native-api.md). */
#define SVC_A_STOPPED "peloton.io/stopped-instance-count" /* Stop: the count to Start again with */
#define SVC_A_UPDATE_ID "peloton.io/update-id"            /* the latest native update's UpdateID */
#define SVC_A_RESTART "peloton.io/restart"                /* template annotation a rolling restart bumps */
#define SVC_A_UPDATE_ABORT "peloton.io/update-abort"
#define SVC_A_UPDATE_ROLLBACK "peloton.io/update-rollback"

struct svc_jw;

struct svc_jw_ops {
    const ProtobufCMessageDescriptor *resp;
    /* The answer for an unknown JobID: a response (JSON) or NULL for the
     * gRPC status NOT_FOUND. */
    json_t *(*not_found)(const char *id);
    int (*plan)(struct svc_jw *w, const json_t *job, json_t **put, json_t **reply);
    json_t *(*done)(struct svc_jw *w, const json_t *stored);
    uint64_t arg; /* the method's own constant, w->arg's first value */
};

struct svc_jw {
    struct svc_op base;
    const struct svc_jw_ops *ops;
    char id[160];      /* the JobID looked for */
    json_t *req;       /* the request as proto3 JSON */
    json_t *job;       /* the Job found (set before plan) */
    json_t *put;       /* the Job to PUT (kept for retries: plan runs again) */
    json_t *del;       /* instances whose pods to delete: a JSON array of integers, or NULL */
    json_t *deleted;   /* instances whose pods were deleted */
    size_t pending;    /* pod deletions in flight */
    struct ncache *del_cache; /* the read cache to tell of them */
    int tries;
    uint64_t arg;      /* the method's own number */
};

/* Starts method ops for call on JobID id; req is stolen. */
void svc_jw_start(struct kclient *kc, struct native_call *call, const struct svc_jw_ops *ops, const char *id,
                  json_t *req);

/* Helpers for plans, on Job objects (borrowed). */
const char *svc_jstr(const json_t *o, const char *k);
json_int_t svc_job_generation(const json_t *job);
uint32_t svc_job_instances(const json_t *job);
/* An annotation of the Job (set: value NULL removes it). */
const char *svc_job_annotation(const json_t *job, const char *k);
void svc_job_annotate(json_t *job, const char *k, const char *value);

/* UpdateIDs are "<JobID>-<n>", n counting the Job's native updates (the
 * annotation SVC_A_UPDATE_ID holds the latest). svc_next_update_id writes
 * the next one for job; svc_update_job_id the JobID part of uid into out,
 * -1 when uid has no "-<n>" suffix. */
void svc_next_update_id(const json_t *job, char *out, size_t len);
int svc_update_job_id(const char *uid, char *out, size_t len);

/* A client's version precondition v (a uint64 member as proto3 JSON: a
 * string; absent or "0": none): 0 when there is none or it is the Job's
 * generation, else -1 after failing w's call with ABORTED. Marks w so a
 * lost race is not retried. */
int svc_jw_check_version(struct svc_jw *w, const json_t *v);

/* Shared with the UpdateService (defined in svc_job_ctl.c). The Job job
 * with a new JobConfig cfg (proto3 JSON) in *put, or -1 with err naming the
 * field (the type and the name cannot change; a stopped Job stays stopped
 * and keeps the new count for Start). A rolling restart of job: a new
 * value of the template annotation SVC_A_RESTART, batch (0: as it is) as
 * the update strategy's batch size, the next UpdateID; the Job in *put. */
int svc_job_config_plan(const json_t *job, const json_t *cfg, json_t **put, char *err, size_t errlen);
int svc_job_rolling_restart(const json_t *job, uint32_t batch, json_t **put);
/* Stop and Start (docs/native-api.md): the count a stopped Job starts again
 * with (-1: not stopped); the Job stopped (instanceCount 0, the count kept
 * in SVC_A_STOPPED) and started again, new. */
long long svc_job_stopped_count(const json_t *job);
json_t *svc_job_stop(const json_t *job);
json_t *svc_job_start(const json_t *job);
/* Some instances stopped or started while the job runs (docs/crds.md,
 * spec.stoppedInstances; TaskManager's and JobManager's Stop and Start with
 * ranges): 0 with *put the Job with the instances inst (a JSON array of
 * numbers) added to (stop) or taken out of (start) its stoppedInstances, as
 * sorted, merged {from, to} ranges, or *put NULL when that changes nothing;
 * -1 on ENOMEM or past SVC_STOPPED_MAX_RANGES ranges. In svc_task.c. */
#define SVC_STOPPED_MAX_RANGES 256 /* the Job's bound on spec.stoppedInstances */
int svc_job_stop_some(const json_t *job, const json_t *inst, bool stop, json_t **put);

/* The instances named by ranges (a JSON array of InstanceRange, [from, to))
 * of a job with n instances, as a new JSON array; none given: all. NULL with
 * err naming the field when a range is empty or reversed (from >= to), or
 * reaches past n (*past set then, so a method can answer outOfRange). */
json_t *svc_instances_of(const json_t *ranges, uint32_t n, bool *past, char *err, size_t errlen);

#endif
