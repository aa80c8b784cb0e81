/* mesosdrv: the host manager's Mesos driver (docs/mesos.md, issue 19), the
 * pelotond role `mesos`. A framework of a Mesos master (src/mesos/mclient)
 * and a client of the Kubernetes API (kclient) on the caller's loop: it
 * does for Mesos agents what a kubelet does for its node.
 *
 * - The framework id is kept in Redis (MDRV_KEY_FRAMEWORK) so that a
 *   restarted pelotond resubscribes as the same framework.
 * - Agents become Node objects (label peloton.io/backend=mesos, the agent id
 *   in an annotation), learned from GET_AGENTS on the operator API (at every
 *   SUBSCRIBED and FAILURE) and from offers; Ready while active, NotReady and
 *   tainted unreachable when the master reports them unreachable, deleted
 *   when they are gone.
 * - A pod bound to a Mesos Node is launched with ACCEPT/LAUNCH on that
 *   agent's offer; offers nobody waits for are declined after hold_ms with a
 *   refuse filter; REVIVE when a pod waits on an agent without an offer.
 * - An UPDATE becomes the pod's status through the API; it is acknowledged
 *   only once that write was answered. A lost task's pod is deleted (a
 *   TaskLost Event first), so the job manager runs it again, as for a lost
 *   Kubelet node. A pod being deleted is KILLed; it goes when its task ends.
 * - After each SUBSCRIBED: explicit reconciliation of the tasks the pods
 *   name, then implicit; a task the master reports that no pod names is
 *   killed.
 *
 * Ownership: kc and db are borrowed and must outlive the driver. */
#ifndef PELOTON_KUBELET_MESOSDRV_H
#define PELOTON_KUBELET_MESOSDRV_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "ctl.h"
#include "kclient.h"
#include "mesos_json.h"
#include "metrics.h"

#define MDRV_KEY_FRAMEWORK "peloton:mesos:framework-id"
#define MDRV_LABEL_BACKEND "peloton.io/backend"
#define MDRV_ANN_AGENT "peloton.io/mesos-agent-id"
#define MDRV_ANN_DRAIN "peloton.io/mesos-drain" /* "true" on a Mesos Node: drain its agent (migration) */
#define MDRV_COMPONENT "peloton-mesos"
#define MDRV_MAX_KV 256 /* argv words, environment variables, labels of one task */
#define MDRV_SCALAR_MAX 1e12 /* cpus, MB, gpus: past any machine; larger ones are refused */

struct ctl_lease;

struct mdrv_options {
    const char *master;        /* "http://host:port" */
    const char *user, *name;   /* framework user and name; "peloton" */
    double failover_timeout;   /* seconds; default 4 weeks */
    uint32_t hold_ms;          /* an offer nobody waits for is declined after this; default 1000 */
    double refuse_seconds;     /* the DECLINE's refuse filter; default 30 */
    uint32_t reconcile_ms;     /* implicit reconciliation period; default 60000 */
    struct metrics *metrics;   /* its peloton_mesos_* families join it (docs/metrics.md); NULL: none */
    struct ctl_lease *lease;   /* the term its Redis write (the framework id) is fenced by (ctl_lease.h); NULL: none */
};
void mdrv_options_default(struct mdrv_options *o);

struct mdrv_stats {
    uint64_t launched, accepts, declines, revives, kills, updates, acks, status_writes, lost, agents;
    uint64_t stale_updates; /* updates older than the state stored: acknowledged, not stored */
};

struct mdrv;
/* Reads the framework id from Redis and subscribes. NULL with err. */
struct mdrv *mdrv_start(uv_loop_t *loop, struct kclient *kc, struct ctl_db *db, const struct mdrv_options *o,
                        char *err, size_t errlen);
/* Stops: the subscription ends (no TEARDOWN: the framework stays for the
 * next start), requests in flight are detached. mdrv_free once the loop has
 * run dry (and after kclient_free). Both NULL-safe. */
void mdrv_stop(struct mdrv *d);
void mdrv_free(struct mdrv *d);
void mdrv_get_stats(const struct mdrv *d, struct mdrv_stats *out);

/* ---- pure parts, exposed for tests ---- */

/* One entry of GET_AGENTS' agents[], decoded (strings borrowed from it). */
struct mdrv_agent_info {
    const char *id, *hostname;
    struct mesos_scalars total;  /* total_resources (agent_info.resources when absent) */
    const json_t *attributes;    /* agent_info.attributes, or NULL */
    bool active;
};
/* 0, or -1 when it lacks an id, a hostname or readable resources, or a
 * resource is past MDRV_SCALAR_MAX (no machine has that; it would not format). */
int mdrv_agent_decode(const json_t *entry, struct mdrv_agent_info *out);
/* Node labels from an agent's attributes: TEXT and SCALAR ones whose name
 * and value make valid label parts (at most 63 of [A-Za-z0-9._-]), the
 * first 64 attributes; a "zone" attribute is also
 * topology.kubernetes.io/zone. A new object. */
json_t *mdrv_attr_labels(const json_t *attrs);
/* What a pod asks for in Mesos' units (cpus, mem in MB, gpus): the sum of
 * its containers' requests (ksim_pod_requests), at least 0.01 cpus and 32 MB
 * (a task needs some resources). -1 when its resources do not parse or one
 * is past MDRV_SCALAR_MAX. */
int mdrv_pod_scalars(const json_t *pod, struct mesos_scalars *out);
/* The TaskInfo of a pod's first container: its image as a Mesos container
 * with a Docker image, command then args as argv (the first word the
 * program), env values (valueFrom is not resolved), the pod's labels;
 * at most MDRV_MAX_KV of each. NULL when out of memory. */
json_t *mdrv_pod_task_info(const json_t *pod, const char *task_id, const char *agent_id,
                           const struct mesos_scalars *res);
/* The merge patch of pods/status an update makes (docs/mesos.md), written
 * as JSON text appended to the growing buffer (*buf, *len, *cap, as
 * jdump_append): metadata.uid (the precondition), the phase, reason and
 * message, startTime when RUNNING, the Ready and PodScheduled conditions,
 * times from now_ms. 0; 1 when the state changes nothing in a pod (no
 * patch); -1 when out of memory. A message that is not UTF-8 is left out. */
int mdrv_status_patch(const struct mesos_task_status *s, const char *uid, int64_t now_ms, char **buf, size_t *len,
                      size_t *cap);
/* The same TaskInfo as JSON text appended to the growing buffer (*buf,
 * *len, *cap, as jdump_append): the bytes of mdrv_pod_task_info's tree
 * dumped. 0, or -1 (out of memory, a string not UTF-8). */
int mdrv_pod_task_info_text(const json_t *pod, const char *task_id, const char *agent_id,
                            const struct mesos_scalars *res, char **buf, size_t *len, size_t *cap);
/* The task id of a pod's run: "<uid>-<run>". 0, or -1 when it does not fit. Pure. */
int mdrv_task_id(const char *uid, unsigned run, char *out, size_t outlen);

#endif
