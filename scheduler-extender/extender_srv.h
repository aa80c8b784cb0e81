/* The kube-scheduler extender: filter, prioritize, preempt and bind that
 * enforce Peloton pool entitlements for clusters that keep kube-scheduler
 * (docs/extender.md, wire format in src/k8s/extender.h).
 *
 * Two layers:
 * - struct ext_core: the policy, without I/O. It owns a cluster model
 *   (src/model/cluster.h) fed with Nodes, Namespaces, ResourcePools, Pods and
 *   Jobs, the table of admitted gangs, and the job types. The ext_* handlers
 *   take decoded wire args and return a reply (jansson), so tests and
 *   benchmarks call them in process.
 * - struct extender_srv: the HTTP(S) server (src/http/server.h) with the
 *   routes <prefix>/{filter,prioritize,preempt,bind} and /healthz, the
 *   informers that feed the core (src/kclient/kclient.h), and the Binding
 *   POST. pelotond can run it as a role: extender_srv_start on its loop.
 *
 * Ownership: json_t arguments are borrowed. A reply in *out is new
 * (json_decref). Strings in options are borrowed for the call and copied.
 * Not thread-safe: one loop, one thread. Errors are negative errno codes with
 * one line in err. */
#ifndef PELOTON_EXTENDER_SRV_H
#define PELOTON_EXTENDER_SRV_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "extender.h"

#define EXT_DEFAULT_PREFIX "/peloton"
#define EXT_DEFAULT_PORT 8888
#define EXT_DEFAULT_MAX_BODY (32u << 20) /* a NodeList of ~10,000 nodes when not nodeCacheCapable */
#define EXT_DEFAULT_GANG_TTL_MS 30000    /* how long an admitted gang's plan holds */
#define EXT_DEFAULT_POOL_STATUS_MS 2000  /* ResourcePool status written at most this often */
#define EXT_DEFAULT_BIND_TIMEOUT_MS 5000 /* a Binding not answered by then fails (kube-scheduler's httpTimeout) */

struct metrics;
struct ext_core_options {
    const char *default_pool; /* pool of pods with neither label nor namespace annotation; NULL = unmanaged */
    uint32_t gang_ttl_ms;     /* 0 = EXT_DEFAULT_GANG_TTL_MS */
    struct metrics *metrics;  /* the registry the extender's families join (borrowed, outlives the core;
                               * the extender's loop thread writes them); NULL = the core's own */
};
void ext_core_options_default(struct ext_core_options *o);

struct ext_core;
struct cluster;

struct ext_core *ext_core_new(const struct ext_core_options *o);
void ext_core_free(struct ext_core *x);
/* The model, for feeding (cluster_*_set / _del) in tests; call
 * ext_core_changed after feeding it directly. */
struct cluster *ext_core_cluster(struct ext_core *x);
void ext_core_changed(struct ext_core *x);

/* Informer-shaped feeding: kind is "Node", "Namespace", "ResourcePool",
 * "Pod" or "Job". set takes the whole object; del the deleted object. */
int ext_core_set(struct ext_core *x, const char *kind, json_t *obj);
void ext_core_del(struct ext_core *x, const char *kind, json_t *obj);

/* Brings the model up to date if anything changed (handlers call it). */
int ext_core_refresh(struct ext_core *x);

/* ---- handlers (no I/O) ----
 * filter: *out is an ExtenderFilterResult, always (an Error reply when the
 * pod cannot be judged). now_ms is a monotonic clock for the gang plans'
 * TTL. */
int ext_filter(struct ext_core *x, const struct extender_args *a, uint64_t now_ms, json_t **out);
/* prioritize: *out is a HostPriorityList; on error (-EINVAL: the pod cannot
 * be decoded) *out is NULL and err says why (the caller answers 400). */
int ext_prioritize(struct ext_core *x, const struct extender_args *a, json_t **out, char *err, size_t errlen);
/* The fast path (NodeNames mode, src/k8s/extender.h): the request as
 * extender_scan_args decoded it (borrowed), the reply written as JSON text to
 * out (replacing its content). The bytes are those json_dumps(JSON_COMPACT)
 * writes for ext_filter's (resp. ext_prioritize's) reply to the same request,
 * the errors theirs. */
int ext_filter_scan(struct ext_core *x, const struct extender_scan *a, uint64_t now_ms, struct extender_buf *out);
int ext_prioritize_scan(struct ext_core *x, const struct extender_scan *a, struct extender_buf *out, char *err,
                        size_t errlen);
/* The names that passed the last filter, decoded, as a hint for the scan of
 * the next request (extender_scan_args_hinted): kube-scheduler's prioritize
 * sends exactly those. false when there is none. Valid until the next
 * filter or change of the nodes. */
bool ext_core_names_hint(struct ext_core *x, struct extender_names_hint *out);
/* preempt: *out is an ExtenderPreemptionResult (MetaVictims) or NULL with
 * err on error. */
int ext_preempt(struct ext_core *x, const struct extender_preemption_args *a, json_t **out, char *err,
                size_t errlen);

/* bind, split around the API call. ext_bind_decide: EXT_BIND_OK (already
 * bound to that node: answer success without a call), EXT_BIND_ERROR (why
 * says it: bound elsewhere, or a UID mismatch), EXT_BIND_POST (call
 * ext_bind_begin, post the Binding, then ext_bind_commit on success or
 * ext_bind_abort on failure, timeout included). A pod assumed by a bind
 * still in flight is EXT_BIND_POST again (that bind may yet fail). */
enum ext_bind_decision { EXT_BIND_OK = 0, EXT_BIND_ERROR, EXT_BIND_POST };
enum ext_bind_decision ext_bind_decide(struct ext_core *x, const struct extender_binding_args *b, char *why,
                                       size_t len);
/* The Binding body for b (new value). */
json_t *ext_binding_body(const struct extender_binding_args *b);
/* The bind is accepted: the pod counts against its pool and node from now
 * (cluster_assume, as kube-scheduler assumes the pods it binds), so the
 * next pods' filters see it while the Binding is with the API server; a
 * gang member's plan is consumed. */
void ext_bind_begin(struct ext_core *x, const struct extender_binding_args *b);
/* The API server took the Binding: the count stays (the watch confirms it). */
void ext_bind_commit(struct ext_core *x, const struct extender_binding_args *b);
/* The Binding failed or timed out: the assumption is taken back (unless
 * another bind of the pod is still in flight, or the pod's object shows a
 * node). */
void ext_bind_abort(struct ext_core *x, const struct extender_binding_args *b);
/* Binds of b's pod in flight (begun, not committed nor aborted). */
int ext_bind_inflight(const struct ext_core *x, const struct extender_binding_args *b);

/* The status the extender writes to the ResourcePool object obj (new
 * value, NULL on allocation failure or a nameless object): path,
 * entitlement, slackEntitlement, allocation, demand and summary from the
 * model's tree (crd_pool_status; absent for a pool the tree does not hold),
 * observedGeneration, and one condition TreeValid: "True" while the pools
 * form a valid tree, "False" (reason InvalidTree, the rule broken in its
 * message) while they do not and the last valid tree stays in force. No
 * lastTransitionTime (the writer sets it). */
json_t *ext_pool_status(struct ext_core *x, const json_t *obj);

/* Counters, for /healthz and the benchmark. */
struct ext_stats {
    uint64_t filters, prioritizes, preempts, binds, bind_errors, gangs_admitted;
    uint64_t names_reused;  /* NodeNames requests whose hosts came from the memo, not from lookups */
    uint64_t scores_reused; /* nodes whose prioritize score came from their filter's pass */
    size_t nodes, pods, gangs_held;
};
void ext_core_stats(const struct ext_core *x, struct ext_stats *out);
/* The metrics in Prometheus text format 0.0.4 (docs/extender.md,
 * "Metrics"): every family of the core's registry (with pelotond's, the
 * process's), the gauges set first. *out new (free), *len bytes. -ENOMEM. */
int ext_metrics_render(struct ext_core *x, char **out, size_t *len);

/* ---- the server ---- */
struct kclient;

struct ext_srv_options {
    const char *bind_addr; /* default 127.0.0.1 */
    int port;              /* 0 = any free port (extender_srv_port) */
    const char *prefix;    /* default EXT_DEFAULT_PREFIX; "" serves /filter etc. */
    size_t max_body;       /* default EXT_DEFAULT_MAX_BODY; larger bodies get 413 */
    const char *tls_cert, *tls_key; /* PEM paths: HTTPS */
    int bind_timeout_ms;   /* a Binding the API server has not answered within this is an Error to
                            * kube-scheduler and the pod stops counting; 0 = the API client's own timeout;
                            * default EXT_DEFAULT_BIND_TIMEOUT_MS (kube-scheduler's default httpTimeout) */
    int pool_status_ms;    /* how often ResourcePool status is written (ext_pool_status); 0 = never
                            * (pelotond's resource manager writes it); default EXT_DEFAULT_POOL_STATUS_MS */
    struct ext_core_options core;
};
void ext_srv_options_default(struct ext_srv_options *o);

struct extender_srv;
/* Starts serving on loop. kc (borrowed, must outlive the server) feeds the
 * model through informers and posts Bindings; kc NULL leaves feeding to the
 * caller (extender_srv_core, then extender_srv_set_synced) and answers bind
 * with an Error. */
int extender_srv_start(uv_loop_t *loop, struct kclient *kc, const struct ext_srv_options *o,
                       struct extender_srv **out, char *err, size_t errlen);
int extender_srv_port(const struct extender_srv *s);
struct ext_core *extender_srv_core(struct extender_srv *s);
void extender_srv_set_synced(struct extender_srv *s);
bool extender_srv_ready(const struct extender_srv *s);
/* Stops informers and the listener (loop thread); then run the loop until it
 * has no more work and call extender_srv_free. */
void extender_srv_stop(struct extender_srv *s);
void extender_srv_free(struct extender_srv *s);

#endif
