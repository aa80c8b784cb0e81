/* A Pod object in the core's terms: its resource requests, scheduling class
 * and Peloton labels (pod_info), and its placement constraints as a
 * struct place_task (pod_task). Pure functions; no I/O.
 *
 * Requests: per kind, the larger of the sum over containers and the largest
 * init container (as Kubernetes computes a pod's effective request), plus
 * spec.overhead. cpu in milli-cpu, memory and ephemeral-storage (disk) in
 * bytes, nvidia.com/gpu in milli-gpu (1 gpu = 1000). Limits stand in for
 * missing requests, as in Kubernetes.
 *
 * Ownership: the pod is borrowed; strings in the outputs point into it and
 * live as long as it is unchanged. A pod_task owns its arrays (pod_task_free).
 * Errors: -EINVAL with one line in err naming the field, -ENOMEM. */
#ifndef PELOTON_K8S_PODSPEC_H
#define PELOTON_K8S_PODSPEC_H
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "jparse.h"
#include "place.h"
#include "resource.h"

enum pod_phase { POD_PENDING = 0, POD_RUNNING, POD_SUCCEEDED, POD_FAILED, POD_UNKNOWN };

struct pod_info {
    struct resvec req;
    uint32_t priority;          /* annotation peloton.io/priority, else spec.priority (< 0 reads 0) */
    unsigned flags;             /* WF_* (respool.h): preemptible unless annotated "false"; revocable */
    enum place_strategy strategy;
    const char *pool;           /* label peloton.io/resource-pool, or NULL */
    const char *gang;           /* label peloton.io/gang, or NULL */
    uint32_t gang_size;         /* label peloton.io/gang-size; 1 without a gang */
    const char *job;            /* label peloton.io/job, else a controller owner's name, or NULL */
    const char *node;           /* spec.nodeName, or NULL */
    const char *scheduler;      /* spec.schedulerName ("default-scheduler" when absent) */
    enum pod_phase phase;
    bool terminal;              /* Succeeded or Failed */
    bool deleting;              /* metadata.deletionTimestamp set */
    int64_t created_ms;         /* metadata.creationTimestamp, 0 when absent */
};
int pod_info_decode(const json_t *pod, struct pod_info *out, char *err, size_t errlen);

struct pod_task {
    struct place_task t; /* nodeSelector, required node affinity, tolerations, labels */
    void *mem_;
};
int pod_task_build(const json_t *pod, const struct pod_info *info, struct pod_task *out, char *err, size_t errlen);
void pod_task_free(struct pod_task *pt);

/* Trims a pod in place to what pod_info_decode, pod_task_build and the
 * controllers read (an informer transform): status keeps its phase and
 * reason, containers and init containers their name, resources, image,
 * command, args and env (the Mesos driver's TaskInfo); managedFields go. A
 * bound, running pod's tree shrinks by about half. */
void pod_slim(json_t *pod);
/* The same trimming while the pod is decoded (a jparse_keep_fn over the
 * path from the pod; ud unused): with it, jparse_filtered builds what
 * pod_slim leaves of the pod, less whatever shape pod_slim leaves alone is
 * also left alone here (status not an object, containers not objects). */
bool pod_slim_keep(void *ud, const struct jparse_seg *path, int depth, const char *key, size_t len);

/* "PACK", "SPREAD_JOB", "LEAST_LOADED" (case-insensitive) to a strategy; -EINVAL otherwise. */
int pod_strategy_parse(const char *s, enum place_strategy *out);

#endif
