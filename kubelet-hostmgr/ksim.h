/* kubelet-sim: a fleet of simulated Kubelets, a pure client of a Kubernetes
 * API (kclient), for the embedded default's cluster, e2e tests and benchmarks.
 *
 * It registers N Nodes (status with capacity, Ready, nodeInfo, addresses),
 * keeps one Lease per node renewed in kube-node-lease, watches bound pods with
 * one informer (fieldSelector spec.nodeName!=) and drives each pod on one of
 * its nodes through a timeline set by annotations: admission against the
 * node's free resources (Failed OutOfcpu / OutOfmemory ...), Running after
 * start-seconds, exit after run-seconds with exit-code, restart by
 * restartPolicy, and the final DELETE of a pod being deleted. The Node
 * annotation kubelet-sim.peloton.io/down=true stops a node's kubelet (no lease,
 * no status, no pod reports) until it is removed.
 *
 * Everything runs on one libuv loop: one min-heap of deadlines drained by one
 * uv timer; status writes are async requests with bounded concurrency (the
 * rest queue, a pod's pending writes coalesce into one) and bounded retries.
 * Lease renewals skip that queue: sent when due, on a client of their own.
 * Events go on a second, bounded queue sent only when no status write waits;
 * a repeat of an Event still queued is counted on it, one past the bound is
 * dropped (counted in events_dropped).
 *
 * Ownership: ksim_new copies what it needs from the config; the kclient is
 * borrowed and must outlive the ksim's last request (free the kclient after
 * ksim_shutdown's callback, then ksim_close, then ksim_free once the loop
 * ran the close). Errors are negative errno codes with a line in err. */
#ifndef PELOTON_KSIM_H
#define PELOTON_KSIM_H
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "kclient.h"

#define KSIM_ANN_START "kubelet-sim.peloton.io/start-seconds"
#define KSIM_ANN_RUN "kubelet-sim.peloton.io/run-seconds"
#define KSIM_ANN_EXIT "kubelet-sim.peloton.io/exit-code"
#define KSIM_ANN_DOWN "kubelet-sim.peloton.io/down"
#define KSIM_LEASE_NS "kube-node-lease"
#define KSIM_MAX_NODES 100000
#define KSIM_MAX_SECONDS 31536000.0 /* annotations and flags: at most a year */

/* Every number that matters, with its flag (docs/kubelet-sim.md). */
struct ksim_config {
    char *kubeconfig, *context, *server, *token_file;
    int nodes;                 /* --nodes=3 */
    char *name_prefix;         /* --name-prefix=sim-node- ; names are prefix + index, not padded */
    int64_t cpu_milli;         /* --cpu=8 */
    int64_t memory_bytes;      /* --memory=32Gi */
    int64_t storage_bytes;     /* --ephemeral-storage=100Gi */
    int64_t pods;              /* --pods=110 */
    int64_t gpu;               /* --gpu=0, per node */
    int gpu_nodes;             /* --gpu-nodes=0: the first K nodes get gpu_per_node instead */
    int64_t gpu_per_node;      /* --gpu-per-node=8 */
    json_t *labels;            /* --labels=k=v,k2=v2 (object of strings) */
    int zones;                 /* --zones=0: topology.kubernetes.io/zone=zone-<i % zones> */
    int lease_seconds;         /* --lease-seconds=40 */
    double renew_seconds;      /* --renew-seconds=10 */
    double status_seconds;     /* --status-seconds=60: Ready heartbeat in the Node status */
    double backoff_seconds;    /* --restart-backoff=10: first restart delay, doubled per restart */
    double backoff_max_seconds; /* --restart-backoff-max=300 */
    char **down;               /* --down=a,b: nodes that start down (NULL-terminated) */
    int ndown;
    char *kubelet_version;     /* --kubelet-version=v1.32.0-sim */
    int max_inflight;          /* --max-inflight=256 requests at once; more queue */
    int retries;               /* --retries=5 per write on 409 / 5xx / transport errors */
    bool events;               /* --events=true: post the kubelet's Events (Pulled, Created, ...) */
    bool quiet, verbose, delete_nodes_on_exit, help;
};

/* Defaults, then argv[1..argc) ("--flag=value" and "--bool"). 0, or -EINVAL
 * with a line naming the flag. Free with ksim_config_free (also on error). */
int ksim_config_parse(struct ksim_config *cfg, int argc, char **argv, char *err, size_t errlen);
void ksim_config_free(struct ksim_config *cfg);
extern const char ksim_usage[];

/* ---- pure parts, exposed for tests ---- */

/* Decimal seconds ("0", "1.5", ".25") to milliseconds (rounded up); 0 or -EINVAL. */
int ksim_parse_seconds(const char *s, int64_t *ms);

enum ksim_restart { KSIM_RESTART_ALWAYS, KSIM_RESTART_ON_FAILURE, KSIM_RESTART_NEVER };
struct ksim_pod_opts {
    int64_t start_ms; /* start-seconds, default 0 */
    int64_t run_ms;   /* run-seconds; -1 = runs until deleted */
    int exit_code;    /* exit-code, default 0 */
    enum ksim_restart restart;
};
/* Reads the annotations and spec.restartPolicy of a pod. A malformed value
 * keeps its default; returns how many were malformed (err names the first). */
int ksim_pod_opts(const json_t *pod, struct ksim_pod_opts *o, char *err, size_t errlen);

enum ksim_exit_action { KSIM_EXIT_RESTART, KSIM_EXIT_SUCCEEDED, KSIM_EXIT_FAILED };
/* What the kubelet does when a pod's containers exit with code. */
enum ksim_exit_action ksim_exit_action(enum ksim_restart rp, int exit_code);
/* The delay before restart number n (1-based): base doubled per restart, capped. */
int64_t ksim_backoff_ms(int64_t base_ms, int64_t max_ms, int n);

/* A pod's footprint as the kubelet's admission sees it. cpu and gpu in milli. */
struct ksim_res {
    int64_t cpu, memory, gpu, pods;
};
/* Sum of containers' requests (a limit stands for a missing request), at
 * least each init container's, plus spec.overhead; pods = 1. 0 or -EINVAL. */
int ksim_pod_requests(const json_t *pod, struct ksim_res *out, char *err, size_t errlen);
/* What kubelet-sim reads of the pods and nodes it follows, as filters for
 * their decoding (jparse_keep_fn, ud unused). Pods: metadata without
 * managedFields; spec with containers and init containers cut to name,
 * image and resources; status cut to phase, podIP and each container
 * status's restartCount. Nodes: apiVersion, kind and metadata (without
 * managedFields). */
bool ksim_pod_keep(void *ud, const struct jparse_seg *path, int depth, const char *key, size_t len);
bool ksim_node_keep(void *ud, const struct jparse_seg *path, int depth, const char *key, size_t len);
/* s as a quoted JSON string, escaped as jansson escapes it (malloc'd; NULL
 * when out of memory): how kubelet-sim writes names and images into the
 * status patches it builds as text. */
char *ksim_json_quote(const char *s);
/* Admission: NULL when req fits in cap - used, else the reason ("OutOfpods",
 * "OutOfcpu", "OutOfmemory", "OutOfnvidia.com/gpu") with the kubelet's message. */
const char *ksim_admit(const struct ksim_res *cap, const struct ksim_res *used, const struct ksim_res *req, char *msg,
                       size_t msglen);
/* "2006-01-02T15:04:05.000000Z" for a Unix time in microseconds. */
void ksim_microtime(int64_t unix_us, char out[32]);
/* "2006-01-02T15:04:05Z". */
void ksim_rfc3339(int64_t unix_s, char out[32]);
/* The index of a node name (prefix + decimal index < n), or -1. */
int ksim_node_index(const char *prefix, int n, const char *name);

/* ---- the simulator ---- */
struct ksim;
struct ksim_stats {
    uint64_t pods_seen, running, succeeded, failed, rejected, restarts, deleted;
    uint64_t writes_ok, write_errors, retries, lease_renewals;
    uint64_t events_posted, events_counted, events_dropped; /* new Events, repeats counted on one, lost */
    size_t pods, queued, inflight, lease_inflight; /* status and node writes; renewals apart */
    int nodes_registered, nodes_down;
};

struct ksim *ksim_new(uv_loop_t *loop, struct kclient *kc, const struct ksim_config *cfg, char *err, size_t errlen);
/* Lease renewals go on kc (borrowed, the same rules as ksim_new's), on
 * their own connections; without it on the main client. Either way they
 * are sent when due, never queued behind status writes. */
void ksim_set_lease_client(struct ksim *s, struct kclient *kc);
/* Registers the nodes and their leases (async); when every node was tried,
 * calls registered(ud, count) once and starts the informers, leases and pods. */
int ksim_start(struct ksim *s, void (*registered)(void *ud, int count), void *ud);
/* Stops informers and timers; deletes the nodes and leases first when
 * configured (bounded by 5 s); then calls done(ud) once. */
void ksim_shutdown(struct ksim *s, void (*done)(void *ud), void *ud);
/* Closes the timers: run the loop once more, then ksim_free. */
void ksim_close(struct ksim *s);
void ksim_free(struct ksim *s);
void ksim_get_stats(const struct ksim *s, struct ksim_stats *out);

#endif
