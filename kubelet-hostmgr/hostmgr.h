/* hostmgr: the host manager role, kubelet driver (docs/architecture.md,
 * "Host manager (kubelet driver)"). A client of the Kubernetes API (kclient)
 * on the caller's loop, as the node lifecycle controller is in Kubernetes.
 *
 * It keeps the host inventory from informers on Nodes, on Leases in
 * kube-node-lease and on bound pods (fieldSelector spec.nodeName!=). Every
 * check_ms it decides which nodes are down: a node whose lease's renewTime +
 * leaseDurationSeconds (+ grace_ms) has passed, or that has had no lease for
 * no_lease_ms since it appeared. On the way down it sets the Node's Ready
 * condition to Unknown (reason NodeStatusUnknown), adds the taint
 * node.kubernetes.io/unreachable:NoExecute, and for every non-terminal pod
 * bound to the node posts a NodeLost Event and deletes the pod
 * (gracePeriodSeconds=0, uid precondition): its task is LOST and the job
 * manager creates it again (at-least-once). When the lease is fresh again the
 * taint is removed (the kubelet sets Ready=True itself).
 *
 * Host maintenance (docs/migration.md), for every Node, Mesos agents' too: a
 * Node annotated peloton.io/maintenance=draining is cordoned, and once no
 * pod that has not ended is bound to it the annotation becomes "drained"
 * (the job manager moves the pods meanwhile, within each Job's budget).
 *
 * Safety (docs/lifecycle.md, "When a node is lost"): verdicts are made only
 * while the lease, Node and pod informers are current (kc_informer_current:
 * no re-list due or under way) and the lease watch is open; a lapsed lease is
 * judged only once they have been current for that lease's duration since
 * they last (re)listed; a node is declared down only after a direct GET of
 * its Lease confirms the lapse (a read slower than slow_read_ms says the
 * server stalled: every lease then gets one more period); and
 * while at least mass_fraction of the nodes (and mass_min_nodes) have lapsed
 * leases, no pod is deleted as lost (a Warning Event NodeEvictionsPaused,
 * the gauge peloton_hostmgr_evictions_paused), as kube-controller-manager
 * stops evicting in a disrupted zone.
 *
 * All writes are asynchronous, at most max_inflight at once, idempotent and
 * retried with a backoff on the next checks. One log line per node transition.
 *
 * Ownership: kc is borrowed and must outlive the hostmgr (hostmgr_stop before
 * kclient_free). hostmgr_stop frees at once; requests still in flight complete
 * harmlessly (their callbacks see the hostmgr is gone); its timers are closed
 * and freed the next time the loop runs. */
#ifndef PELOTON_KUBELET_HOSTMGR_H
#define PELOTON_KUBELET_HOSTMGR_H
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "kclient.h"
#include "metrics.h"

#define HOSTMGR_LEASE_NS "kube-node-lease"
#define HOSTMGR_TAINT_UNREACHABLE "node.kubernetes.io/unreachable"
#define HOSTMGR_COMPONENT "peloton-hostmgr"
#define HOSTMGR_DEFAULT_LEASE_SECONDS 40 /* a lease without leaseDurationSeconds */

struct hostmgr_options {
    uint32_t check_ms;        /* lease check period; default 1000 */
    uint32_t grace_ms;        /* extra time after a lease's renewTime + leaseDurationSeconds before the node is down; default 0 */
    uint32_t no_lease_ms;     /* a node with no lease this long after it appeared is down; default 80000 (2 x 40 s) */
    uint32_t max_inflight;    /* writes in flight at once; default 32 */
    uint32_t retry_max_ms;    /* longest backoff between retries of a failed write; default 30000 */
    double mass_fraction;     /* evictions pause while at least this fraction of the nodes have lapsed leases
                               * (and at least mass_min_nodes do); default 0.55 (kube-controller-manager's
                               * --unhealthy-zone-threshold); above 1: never */
    uint32_t mass_min_nodes;  /* the fewest lapsed nodes that make a mass event; default 3 */
    uint32_t slow_read_ms;    /* a Lease read answered slower than this means the server was stalled: not
                               * trusted, and every lease gets one more period; default 2000 */
    struct metrics *metrics;  /* the process's registry for hostmgr's families (docs/metrics.md); NULL: none */
};
/* The defaults above; hostmgr_start also reads a 0 in any field but grace_ms as its default. */
void hostmgr_options_default(struct hostmgr_options *o);

struct hostmgr;
/* Starts the informers and the check timer. o NULL = defaults. NULL with err
 * on failure. */
struct hostmgr *hostmgr_start(uv_loop_t *loop, struct kclient *kc, const struct hostmgr_options *o, char *err,
                              size_t errlen);
void hostmgr_stop(struct hostmgr *h); /* NULL-safe */
/* For tests and the other roles in the same process: is node `name` down (lease lapsed)? */
bool hostmgr_node_down(const struct hostmgr *h, const char *name);
/* Nodes known (Node objects seen) and of those, down. */
size_t hostmgr_node_count(const struct hostmgr *h, size_t *down);
/* Are evictions paused (a mass event: too many nodes lapsed at once)? */
bool hostmgr_evictions_paused(const struct hostmgr *h);
/* Judgements held so far (a node's verdict or its pods' loss not acted on:
 * informers not current, a lease found renewed or unreadable on a direct
 * read, evictions paused). */
uint64_t hostmgr_held(const struct hostmgr *h);

/* ---- pure parts, exposed for tests ---- */

/* A Kubernetes MicroTime or RFC 3339 time ("2006-01-02T15:04:05.000000Z",
 * "2006-01-02T15:04:05Z", "2006-01-02T15:04:05.5+07:00") to milliseconds
 * since the epoch (fraction truncated). 0, or -EINVAL. */
int hostmgr_parse_microtime(const char *s, int64_t *ms);
/* Milliseconds since the epoch as a MicroTime ("...000000Z") or, when micro
 * is false, as an RFC 3339 time to the second. out has room for 32 bytes. */
void hostmgr_format_time(int64_t ms, bool micro, char out[32]);

/* Has a lease renewed at renew_ms with duration_s seconds lapsed at now_ms,
 * allowing grace_ms more? (down when now > renew + duration + grace) */
bool hostmgr_lease_lapsed(int64_t renew_ms, int64_t duration_s, int64_t now_ms, int64_t grace_ms);
/* The whole verdict for one node: lease (a Lease object, or NULL when there
 * is none), the time the node appeared, now, the options. A lease without a
 * readable renewTime counts as no lease; one without leaseDurationSeconds
 * lasts HOSTMGR_DEFAULT_LEASE_SECONDS. */
bool hostmgr_node_is_down(const json_t *lease, int64_t appeared_ms, int64_t now_ms, const struct hostmgr_options *o);

#endif
