/* What the v0 JobManager (svc_job.c) and the v1alpha stateless services
 * (v1_map.c) share in mapping Peloton's job messages onto Job objects: the
 * annotations Peloton's fields are kept in, the object name made of a job
 * name, the check that refuses members the mapping cannot carry, and the
 * container built from the members a v0 TaskConfig and a v1alpha
 * ContainerSpec have alike (name, resource, container, command). Messages
 * are proto3 JSON (pbjson); objects are the API server's JSON. Mapping
 * tables: docs/native-api.md.
 *
 * Ownership: everything passed in is borrowed, except where a function says
 * it adds to an object (then that object is the caller's); every json_t
 * returned is new (json_decref). Internal to src/native. */
#ifndef PELOTON_NATIVE_JOB_MAP_H
#define PELOTON_NATIVE_JOB_MAP_H

#include <jansson.h>
#include <stddef.h>

#include "resource.h"

/* The Job annotations (docs/native-api.md, "v0 JobManager ↔ Job objects"). */
#define JOB_A_ID "peloton.io/job-id"
#define JOB_A_NAME "peloton.io/name"
#define JOB_A_OWNER "peloton.io/owner"
#define JOB_A_TEAM "peloton.io/owning-team"
#define JOB_A_DESC "peloton.io/description"
#define JOB_A_LDAP "peloton.io/ldap-groups" /* JSON array */
#define JOB_A_LABELS "peloton.io/labels"    /* JSON array of {key, value} */
/* On the pod template. */
#define JOB_A_FD_LIMIT "peloton.io/fd-limit"
#define JOB_A_TASK_NAME "peloton.io/task-name"
#define JOB_NAME_MAX 52 /* pods are <job>-<instance>; the job name is a label value too (63) */

/* The resource members (TaskConfig.resource, ContainerSpec.resource) and the
 * container resources they are, in both directions. */
struct job_map_resource {
    const char *field, *res;
    enum res_kind k;
};
extern const struct job_map_resource job_map_resources[];
extern const size_t job_map_n_resources;

/* in made a DNS-1123 label in out (JOB_NAME_MAX + 1 bytes): lowercase,
 * other characters as '-', starting and ending alphanumeric; "" when
 * nothing is left. */
void job_map_k8s_name(const char *in, char *out);

/* 0, or -1 with err "<where><member>: not supported here yet" for the first
 * member of obj that is not in allowed (NULL-ended). */
int job_map_only_known(const json_t *obj, const char *const *allowed, const char *where, char *err, size_t errlen);

/* Annotation k of obj (borrowed), NULL when absent. */
const char *job_map_ann(const json_t *obj, const char *k);
/* The job's name as the client gave it: peloton.io/name, else metadata.name, else "". */
const char *job_map_name(const json_t *job);

/* The Job's annotations for a JobConfig or JobSpec msg (both name owner,
 * owningTeam, description, ldapGroups, labels alike): peloton.io/name when
 * the object name kname is not name, peloton.io/job-id when id is set
 * (NULL or "" for none), and each of the members msg has. */
json_t *job_map_annotations(const json_t *msg, const char *name, const char *kname, const char *id);
/* The other way: adds to msg the owner, owningTeam, description, ldapGroups
 * and labels the Job's annotations hold. */
void job_map_read_annotations(const json_t *job, json_t *msg);

/* The pod template container for cs (a TaskConfig or ContainerSpec; the
 * caller refuses the members it does not know): a DNS-1123 name ("task"
 * when none), the image (NATIVE_DEFAULT_IMAGE when none), requests and
 * limits, command, args and env. fdLimit goes into tann (the template's
 * annotations). NULL with err "<where><member>: ..." for what cannot be
 * carried. */
json_t *job_map_container(const json_t *cs, json_t *tann, const char *where, char *err, size_t errlen);

/* Copies restartPolicy (maxFailures) and preemptionPolicy (killOnPreempt)
 * from src to dst: the Job's spec and a TaskConfig or PodSpec name them
 * alike, so this serves both directions. */
void job_map_policies(json_t *dst, const json_t *src);

/* Adds to tann (the template's annotations) each {key, value} of labels. */
void job_map_labels_to(json_t *tann, const json_t *labels);

#endif
