/* v0 peloton.api.job.JobManager served over Job objects (jobs.peloton.io,
 * namespaced): Create, Get, Query and Delete here, the writes and cache
 * methods in svc_job_ctl.c, each translated into requests
 * to the Kubernetes API (kclient); the job manager role then runs the Job
 * like one applied with kubectl. Mapping (docs/native-api.md): a JobID is
 * the Job's metadata.uid, or the id the client gave at Create (kept in the
 * annotation peloton.io/job-id); config.name is the object's name (made a
 * valid one, the given name kept in peloton.io/name); TaskConfig resources in
 * cores and MB are the pod template's requests and limits. Fields the object
 * model cannot carry yet are refused with InvalidJobConfig naming them,
 * never dropped. Natively created Jobs go to namespace
 * NATIVE_JOB_NAMESPACE; Get and Query see Jobs of every namespace.
 *
 * Registered as "peloton.api.job.JobManager" (Peloton's wire name) and
 * "peloton.api.v0.job.JobManager".
 *
 * Ownership: the service borrows kc for its life. */
#ifndef PELOTON_NATIVE_SVC_JOB_H
#define PELOTON_NATIVE_SVC_JOB_H

#include <jansson.h>

#include "kclient.h"
#include "native.h"

#define NATIVE_JOB_NAMESPACE "default"
#define NATIVE_DEFAULT_IMAGE "busybox:1.36" /* a task with a command and no container image */

struct svc_job;
struct svc_job *svc_job_new(struct kclient *kc);
void svc_job_free(struct svc_job *s);
int svc_job_register(struct svc_job *s, struct native_registry *r);

/* For the TaskManager (svc_task.c), on Job objects (borrowed): the JobID;
 * the TaskConfig (proto3 JSON, new) of spec's pod template; the v0 JobType
 * name of spec.type. */
const char *svc_job_id(const json_t *job);
json_t *svc_job_task_config(const json_t *spec);
const char *svc_job_type(const json_t *spec);

/* For the writes (svc_job_ctl.c, svc_update.c): the Job object for a
 * JobConfig (proto3 JSON) and JobID id ("" for none; kept in an
 * annotation), or NULL with err naming the field; the Job cur with what a
 * JobConfig sets (spec's pool, count, SLA, template and policies, the
 * native annotations) taken from fresh (a Job from svc_job_from_config),
 * everything else kept (new); the JobInfo (proto3 JSON, new) of a Job. */
json_t *svc_job_from_config(const json_t *cfg, const char *id, char *err, size_t errlen);
json_t *svc_job_merge(const json_t *cur, const json_t *fresh);
json_t *svc_job_info(const json_t *job);

/* The JobManager's writes and cache methods (svc_job_ctl.c): Update, Stop,
 * Start, Restart, Refresh, GetCache, GetActiveJobs; their ud is the kclient. */
const struct native_method *svc_job_ctl_methods(size_t *n);

#endif
