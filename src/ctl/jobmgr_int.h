/* jobmgr internals: the pure pieces (pod object for an instance, pod phase ->
 * task state, template versions, DAEMON node eligibility, the Job status
 * object) that jobmgr.c drives and test/unit/test_jobmgr.c checks. No I/O.
 *
 * Ownership: json_t inputs are borrowed; jm_pod_build and jm_status_build
 * return new references (json_decref). Strings in struct jm_pod_view point
 * into the pod and live as long as it is unchanged. */
#ifndef PELOTON_CTL_JOBMGR_INT_H
#define PELOTON_CTL_JOBMGR_INT_H
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crd_job.h"
#include "job.h"
#include "task.h"
#include "update.h"

#define JM_API_VERSION "peloton.io/v1alpha1"
#define JM_JOBS_PATH "/apis/peloton.io/v1alpha1"

/* Pod annotations written by the job manager (besides labels.h's). */
#define JM_A_CONFIG_VERSION "peloton.io/config-version" /* template version (pods and the Job) */
#define JM_A_RUN "peloton.io/run"                       /* run id of the instance, 1 first */
#define JM_A_FAILURES "peloton.io/failures"             /* failed runs counted before this run */
#define JM_A_LOST "peloton.io/lost"                     /* lost runs before this run */
#define JM_A_CRASH_LOOP "peloton.io/crash-loop"         /* restarts in the crash loop before this run */
#define JM_A_DAEMON_NODE "peloton.io/daemon-node"       /* DAEMON: the node the instance belongs to */
#define JM_A_HOST_HINT "peloton.io/host-hint"           /* STATEFUL: the previous node, preferred */
/* Job annotations written by the job manager (its durable bookkeeping). */
#define JM_A_APPLIED_TEMPLATE "peloton.io/applied-template" /* JSON of the template at config-version */
#define JM_A_UPDATE_TO "peloton.io/update-to"               /* version of the latest rolling update */
#define JM_A_UPDATE_STATE "peloton.io/update-state"         /* its state (update_state_name) */
/* Job annotations set by the operator: abort, or roll back, the update in
 * progress ("true", or the update's toVersion in decimal); the job manager
 * removes them once handled. */
#define JM_A_UPDATE_ABORT "peloton.io/update-abort"
#define JM_A_UPDATE_ROLLBACK "peloton.io/update-rollback"

#define JM_HOSTNAME_LABEL "kubernetes.io/hostname"
#define JM_MAX_INSTANCE (1u << 20) /* pods labelled beyond this are ignored */

/* A decimal uint32 (digits only, no sign, at most 10 of them), or -1. */
int64_t jm_parse_u32(const char *s);

/* Version of a template: FNV-1a 32 of its canonical JSON (sorted keys,
 * compact); never 0. NULL gives 1. */
uint32_t jm_template_version(const json_t *tpl);

/* "<job>-<instance>" for run 1, "<job>-<instance>-<run>" after. */
int jm_pod_name(char *out, size_t len, const char *job, uint32_t instance, uint32_t run);

/* Job annotation (written by the workloads controller): the Job's pods are
 * named as kube-controller-manager names a ReplicaSet's, DaemonSet's or
 * batch Job's, "<base>-<5 characters>", instead of "<job>-<instance>". */
#define JM_A_POD_NAMES "peloton.io/pod-names"
#define JM_POD_NAMES_GENERATED "generated"
#define JM_HASH_LABEL "pod-template-hash" /* a Deployment's template carries it: part of the base */

/* "<base>-<5 characters>" from kube's alphabet (no vowels, no 0 1 3), the
 * characters a hash of (uid, instance, run, salt): the same run always gets
 * the same name (a create sent again finds its pod: 409), another salt gives
 * another name (a name some other pod holds). */
int jm_pod_name_generated(char *out, size_t len, const char *base, const char *uid, uint32_t instance,
                          uint32_t run, uint32_t salt);

struct jm_pod_params {
    const char *job, *ns, *uid;   /* the Job's name, namespace, uid */
    const char *pool;             /* spec.resourcePool */
    enum job_type type;
    uint32_t instance, run, version, failures, lost;
    uint32_t crash_loop;          /* task.crash_loop of this run */
    uint32_t gang, gang_run;      /* the gang's lowest member and its run (job_action.gang_first*) */
    uint32_t gang_size;           /* gang labels only when gang_size > 1 */
    const char *host;             /* DAEMON: the node (required); STATEFUL: previous node (preferred) */
    const char *scheduler;        /* spec.schedulerName */
    const struct crd_job_extra *x;/* SLA: priority, preemptible, revocable */
    bool generated;               /* JM_A_POD_NAMES: "<job>[-<pod-template-hash>]-<5 characters>" */
    uint32_t salt;                /* for the generated name */
};

/* The gang label of a job's gang: "<job>-gang-<first>" when its lowest
 * member is at run 1 (the gang as first created), else
 * "<job>-gang-<first>-<run>" (members started together later). */
int jm_gang_name(char *out, size_t len, const char *job, uint32_t first, uint32_t run);

/* The Pod for one run of an instance from the template (a PodTemplateSpec):
 * labels and annotations of template.metadata plus Peloton's, the owner
 * reference, template.spec with schedulerName and restartPolicy Never, and the
 * node affinity for DAEMON (required) or STATEFUL (preferred). NULL with err
 * when the template is not an object with a spec object, or on ENOMEM. */
json_t *jm_pod_build(const json_t *tpl, const struct jm_pod_params *p, char *err, size_t errlen);

/* What the job manager reads back from one of its pods. */
struct jm_pod_view {
    const char *name, *job, *node, *pin;
    const char *owner_uid; /* uid of the controller ownerReference to a peloton.io Job, or NULL */
    uint32_t instance, run, version, failures, lost, crash_loop;
    bool deleting;       /* metadata.deletionTimestamp */
    bool bound;          /* spec.nodeName set */
    bool preempted;      /* annotation peloton.io/preempted: a preemption victim */
    enum task_state state;
};
/* -EINVAL when the pod has no name, no peloton.io/job label or no valid
 * peloton.io/instance label (< JM_MAX_INSTANCE). */
int jm_pod_parse(const json_t *pod, struct jm_pod_view *v);

/* Pod phase -> task state: Succeeded SUCCEEDED, Failed FAILED; otherwise
 * node_gone (bound to a node that no longer exists) or phase Unknown LOST,
 * deletionTimestamp KILLING, Running RUNNING, Pending bound LAUNCHED,
 * Pending unbound PENDING. */
enum task_state jm_pod_state(const json_t *pod, bool node_gone);

/* DAEMON eligibility: the nodes as placement reads them (nodehost.h) with
 * a placement engine over them (jobmgr_daemon.c). A node gets a DAEMON
 * instance when the pod the job manager would create for it (without its
 * pin) passes every filter of placement there: schedulable and Ready,
 * exclusive hosts, GPU hosts kept for GPU pods, nodeSelector, required node
 * affinity, taints, and an allocatable that holds the pod's requests.
 * jm_fleet_new takes the Node objects (borrowed for the call; nodes without a
 * name or with a duplicate one are left out) and the placement options
 * (NULL: defaults, as pelotond's placement); NULL on ENOMEM.
 * jm_fleet_eligible fills out (room for jm_fleet_size names) with the names
 * of the eligible nodes, in input order, borrowed from the fleet; -EINVAL
 * with err when the pod cannot be read as placement would, -ENOMEM. */
struct jm_fleet;
struct place_options;
/* Whether two versions of a Node read the same to placement and the job
 * manager (spec, labels, allocatable, readiness): heartbeats do not. */
bool jm_node_same(const json_t *a, const json_t *b);
struct jm_fleet *jm_fleet_new(const json_t *const *nodes, size_t n, const struct place_options *o);
void jm_fleet_free(struct jm_fleet *fl);
size_t jm_fleet_size(const struct jm_fleet *fl);
int jm_fleet_eligible(struct jm_fleet *fl, const json_t *pod, const char **out, size_t *nout, char *err,
                      size_t errlen);

/* The Job's pool, as the job manager finds it. While it is not OK, no pod
 * is created (new instances and new runs wait; pods that run go on), the
 * Job says why in condition PoolReady and an Event. */
enum jm_pool_check { JM_POOL_OK = 0, JM_POOL_NOT_FOUND, JM_POOL_NOT_LEAF };
/* Condition PoolReady's reason: "PoolFound", "PoolNotFound", "PoolNotLeaf". */
const char *jm_pool_reason(enum jm_pool_check c);
/* One line for the condition and the Event, e.g.
 * `resource pool "training" not found: the job's pods are created once it exists`. */
void jm_pool_message(enum jm_pool_check c, const char *pool, char *out, size_t len);
/* Adds (or replaces) condition PoolReady in the status object st: status
 * "True" when OK, else "False"; reason and message as above;
 * lastTransitionTime `now` (RFC 3339) unless current (the Job's stored
 * status, may be NULL) already has PoolReady with that status, whose time
 * is kept. Other conditions stay, PoolReady goes last. -ENOMEM. */
int jm_status_set_pool(json_t *st, const json_t *current, enum jm_pool_check c, const char *pool, const char *now);

#define JM_STATUS_BATCH_MAX 100  /* instances listed in status.update.currentBatch */
#define JM_STATUS_BACKOFF_MAX 20 /* instances listed in status.backoff.items */

/* Update progress for status.update and the Update condition. */
struct jm_update_status {
    enum update_state state; /* UPDATE_INVALID: no update ever ran */
    uint32_t from, to, done, failed, count;
    uint32_t batch;          /* effective batch size */
    uint32_t ncurrent;       /* instances in flight; the first JM_STATUS_BATCH_MAX in current[] */
    uint32_t current[JM_STATUS_BATCH_MAX];
};

/* Instances waiting out a restart backoff. */
struct jm_backoff_status {
    uint32_t n; /* all of them; the first JM_STATUS_BACKOFF_MAX (lowest id) in items[] */
    struct {
        uint32_t instance, restarts, delay_s;
        int64_t restart_at;  /* Unix seconds */
    } items[JM_STATUS_BACKOFF_MAX];
};

/* {state, taskStats, backoff: {instances, items: [{instance, restarts,
 * delaySeconds, restartAt}]}, and with an update: update: {state,
 * fromVersion, toVersion, batchSize, instancesTotal, instancesDone,
 * instancesFailed, currentBatch, progress, message}, conditions: [{type:
 * Update, ...}]}. bo NULL: no backoff member. */
json_t *jm_status_build(enum job_state state, const struct job_counts *counts, const struct jm_update_status *u,
                        const struct jm_backoff_status *bo);
/* Whether the Job's current status already says what desired says. */
/* Appends to st's conditions the condition Running: False while pods wait
 * to be scheduled, with the most common reason of their PodScheduled=False
 * conditions (WaitingForAdmission, WaitingForGang, Unschedulable,
 * WaitingForPool, ...) and one of their messages; True (AllRunning) once every
 * instance runs; False (NotAllRunning) otherwise. waiting: the job's pods that
 * are present, unbound and not ended (borrowed). lastTransitionTime is kept
 * from current (the stored status) while the status is unchanged, else now.
 * 0 or -ENOMEM. */
/* The reason of the pod's PodScheduled=False condition, or NULL (borrowed from pod). */
const char *jm_pod_unscheduled_reason(const json_t *pod);
int jm_status_set_running(json_t *st, const json_t *current, const json_t *const *waiting, size_t nwaiting,
                          const struct job_counts *counts, const char *now);
bool jm_status_same(const json_t *current, const json_t *desired);

#endif
