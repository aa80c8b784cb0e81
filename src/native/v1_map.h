/* v1alpha shapes of the objects, shared by the v1alpha services (v1_job.c,
 * v1_watch.c): a Job object <-> stateless JobSpec, JobStatus, JobSummary,
 * WorkflowStatus; a Pod -> PodSummary. Every message here is proto3 JSON
 * (pbjson turns it into the message); objects are the API server's JSON.
 * Mapping tables: docs/native-api.md ("v1alpha").
 *
 * Ownership: objects passed in are borrowed; every json_t returned is new
 * (json_decref). Internal to src/native. */
#ifndef PELOTON_NATIVE_V1_MAP_H
#define PELOTON_NATIVE_V1_MAP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* On the pod template: RestartJob writes the generation it restarted from
 * here (a new template, so the job manager rolls every instance). */
#define V1_A_RESTART "peloton.io/restart"

/* The PodSpec of the Job's pod template. */
json_t *v1_pod_spec(const json_t *job);
/* The Job's v1alpha JobSpec, JobStatus, JobSummary; the WorkflowStatus of
 * its latest rolling update (NULL when it had none). */
json_t *v1_job_spec(const json_t *job);
json_t *v1_job_status(const json_t *job);
json_t *v1_job_summary(const json_t *job);
json_t *v1_workflow_status(const json_t *job);
/* The Job's UpdateSpec (from spec.updateStrategy). */
json_t *v1_update_spec(const json_t *job);
/* The Job's version (EntityVersion.value): its metadata.generation. */
void v1_job_version(const json_t *job, char *out, size_t len);

/* The PodSummary of a Job's pod (pod NULL: instance i has no pod yet,
 * INITIALIZED); jid is the Job's JobID. A pod being deleted for good
 * (deleted true) reads POD_STATE_DELETED. */
json_t *v1_pod_summary(const char *jid, uint32_t i, const json_t *pod, bool deleted);
/* The pod's instance (label peloton.io/instance), -1 when absent. */
long long v1_pod_instance(const json_t *pod);

/* The Job object for a stateless JobSpec (proto3 JSON), named after
 * spec.name in namespace ns, annotated with the client's JobID id (may be
 * ""); NULL with err naming the field for what cannot be carried. */
json_t *v1_job_from_spec(const json_t *spec, const char *id, const char *ns, char *err, size_t errlen);

/* The first Job of items (a list answer's array) whose JobID is jid, borrowed; NULL when none. */
const json_t *v1_find_job(const json_t *items, const char *jid);

/* Whether every Label {key, value} of want is in have (an array of Labels). */
bool v1_labels_have(const json_t *have, const json_t *want);

#endif
