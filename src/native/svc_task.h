/* v0 peloton.api.task.TaskManager over the Pods of a Job: Get, List, Query
 * and GetPodEvents (the pods' Events) read; Restart deletes the pods of
 * some instances (a new run of each), Stop and Start the whole job as
 * JobManager's do (svc_jobwrite.h); BrowseSandbox, Refresh, GetCache and
 * DeletePodEvents are UNIMPLEMENTED, saying why. The job is found by its JobID (svc_job.h), its pods by
 * the label peloton.io/job, an instance by peloton.io/instance, its run by
 * the annotation peloton.io/run (docs/lifecycle.md); the task state follows
 * docs/lifecycle.md's pod -> task state table. An instance without a pod
 * yet reads as INITIALIZED. Registered as "peloton.api.task.TaskManager"
 * and "peloton.api.v0.task.TaskManager".
 *
 * Ownership: the service borrows kc for its life. */
#ifndef PELOTON_NATIVE_SVC_TASK_H
#define PELOTON_NATIVE_SVC_TASK_H

#include "kclient.h"
#include "native.h"

struct svc_task;
struct svc_task *svc_task_new(struct kclient *kc);
void svc_task_free(struct svc_task *s);
int svc_task_register(struct svc_task *s, struct native_registry *r);

#endif
