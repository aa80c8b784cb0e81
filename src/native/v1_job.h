/* v1alpha peloton.api.v1alpha.job.stateless.svc.JobService over Job objects
 * (jobs.peloton.io): CreateJob, GetJob (status and the rolling update as
 * the workflow), ReplaceJob (a new spec: the job manager's rolling update),
 * Pause/Resume/AbortJobWorkflow (spec.updateStrategy.paused, the
 * peloton.io/update-abort annotation), DeleteJob, QueryJobs,
 * GetJobIDFromJobName, and the streams ListPods and ListJobs. EntityVersion
 * is the Job's metadata.generation; a write given another version is
 * ABORTED. The other methods answer UNIMPLEMENTED. Errors are gRPC statuses
 * (v1alpha's messages have no error members). docs/native-api.md, "v1alpha".
 *
 * Ownership: the service borrows kc for its life. */
#ifndef PELOTON_NATIVE_V1_JOB_H
#define PELOTON_NATIVE_V1_JOB_H

#include "kclient.h"
#include "native.h"

struct v1_job;
struct v1_job *v1_job_new(struct kclient *kc);
void v1_job_free(struct v1_job *s);
int v1_job_register(struct v1_job *s, struct native_registry *r);

#endif
