/* The cluster model: Kubernetes objects (Nodes, Namespaces, ResourcePools,
 * Pods) in the core's terms, fed by informers and shared by pelotond's
 * resource manager and placement roles and by the scheduler extender.
 *
 * Feeding: call the *_set functions from informer add/update handlers and the
 * *_del functions from delete handlers. They only record the change; derived
 * state is brought up to date by cluster_refresh, which rebuilds the pool tree
 * when pools changed (crd_pool_build_tree; a set of pools that breaks a tree
 * rule keeps the previous tree and sets cluster_pool_error), rebuilds the host
 * fleet and placement engine when nodes changed, and keeps per-host
 * allocation and per-pool allocation (and, with count_pending, pending demand)
 * in step with the pods incrementally, then recomputes entitlement.
 *
 * A pod's pool: its label peloton.io/resource-pool, else its namespace's
 * annotation peloton.io/resource-pool, else options.default_pool (NULL or "":
 * the pod is unmanaged: no pool, no admission). A pod counts against its
 * pool's allocation (and its node's) from the moment it is bound (spec.nodeName
 * set, or assumed by cluster_assume) until it is terminal (Succeeded, Failed)
 * or deleted, or from cluster_admit. Terminating pods (deletionTimestamp set)
 * still count.
 *
 * Hosts: a Node is schedulable when it is Ready (condition Ready=True) and
 * not spec.unschedulable and not marked down by cluster_node_down; other nodes
 * stay in the fleet flagged HOST_UNSCHEDULABLE (cordoned) or HOST_NOT_READY
 * (not Ready, or down), their pods still counted.
 * Capacity for entitlement is the allocatable sum of schedulable nodes; slack
 * cpu (what revocable work runs on) is that capacity less what non-revocable
 * work holds: its pods on schedulable nodes and its admitted, unbound pods.
 *
 * Ownership: json_t arguments are borrowed; the model takes references. All
 * pointers returned (pods, pools, fleet, engine) are valid until the next
 * *_set / *_del / cluster_refresh call. Not thread-safe. Errors are negative
 * errno codes. */
#ifndef PELOTON_MODEL_CLUSTER_H
#define PELOTON_MODEL_CLUSTER_H
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "host.h"
#include "place.h"
#include "podspec.h"
#include "respool.h"

/* What the model holds of a pod's object besides what it decodes (pod_info,
 * whose strings are always the model's own). */
enum cm_keep {
    CM_KEEP_ALL = 0, /* the latest object of every pod (the extender reads them) */
    CM_KEEP_TASKS,   /* of a pod not bound nor ended, only what pod_task_build reads (metadata.labels,
                      * spec.nodeSelector, spec.affinity, spec.tolerations, shared with the object);
                      * nothing of a bound or ended one (placement) */
    CM_KEEP_NONE,    /* nothing: what the model decodes is all it reads (resmgr) */
};

struct cm_options {
    const char *default_pool; /* pool of pods with none of their own; NULL/"" = unmanaged */
    bool count_pending;       /* unbound, non-terminal managed pods add to their pool's pending demand */
    bool no_engine;           /* a model that never places (resmgr): no placement engine and no per-host job
                               * counts to keep up (cluster_engine is NULL) */
    enum cm_keep keep;        /* how much of each pod's object the model holds (cm_pod.obj) */
    struct place_options place;
};
void cm_options_default(struct cm_options *o);

struct cm_pod {
    char *ns, *name, *uid, *key; /* key: "ns/name" */
    char *rv;                    /* metadata.resourceVersion of the latest object (NULL: none), kept whatever
                                  * cm_options.keep says: a write held to it (preemption's) names the change
                                  * it was decided from */
    json_t *obj;                 /* the latest object (the model's reference), or as much of it as
                                  * cm_options.keep says (NULL: nothing) */
    struct pod_info info;        /* decoded from the latest object; its strings are the model's own */
    char *pool;                  /* resolved pool name, NULL = unmanaged */
    char *node;                  /* bound or assumed node, NULL = unbound */
    bool assumed;                /* node set by cluster_assume, not yet seen in the object */
    bool admitted;               /* cluster_admit: counts as allocation before it is bound */
    bool bad;                    /* obj could not be decoded (info zeroed; never counted) */
    uint64_t version;            /* set from a model-wide counter whenever obj is set: the same version is
                                  * the same pod with the same object (for callers' memos) */
    uint64_t seen_ns;            /* metrics_now_ns when the model first had the pod (a stage's start) */
    /* Private to the model. */
    char *info_mem_;             /* info's strings */
    uint32_t host_;              /* host index the pod is counted on, or HOST_NONE */
    struct respool *pool_;       /* leaf it is counted in, or NULL */
    unsigned counted_;           /* 1 = alloc, 2 = pending */
    struct resvec counted_req_;
    unsigned counted_flags_;
    bool unplaced_;                 /* counted in the model's admitted, not yet placed, non-revocable work */
    struct cm_pod *hnext_, *hprev_; /* pods counted on the same host */
    struct cm_pod *pnext_, *pprev_; /* pods counted in the same leaf pool */
};

struct cluster;
struct cluster *cluster_new(const struct cm_options *o);
void cluster_free(struct cluster *c);

int cluster_node_set(struct cluster *c, json_t *node);
void cluster_node_del(struct cluster *c, const char *name);
/* Marks a node down or up (the host manager's lease check): a down node is
 * unschedulable and left out of capacity. */
void cluster_node_down(struct cluster *c, const char *name, bool down);
int cluster_ns_set(struct cluster *c, json_t *ns);
void cluster_ns_del(struct cluster *c, const char *name);
int cluster_pool_set(struct cluster *c, json_t *pool);
void cluster_pool_del(struct cluster *c, const char *name);
int cluster_pod_set(struct cluster *c, json_t *pod);
void cluster_pod_del(struct cluster *c, const char *ns, const char *name);
/* Counts pod ns/name as bound to node now (a Binding was posted and the watch
 * has not reported it yet). -ENOENT: unknown pod or node. */
int cluster_assume(struct cluster *c, const char *ns, const char *name, const char *node);
/* Takes an assumption back (the Binding failed). */
void cluster_forget(struct cluster *c, const char *ns, const char *name);

/* Marks an unbound pod admitted (pelotond's resource manager): it counts in
 * its pool's allocation instead of its pending demand until it is bound, ends
 * or is un-admitted. */
void cluster_admit(struct cluster *c, struct cm_pod *p, bool admitted);

/* Brings the derived state up to date (see above). 0, or -ENOMEM. */
int cluster_refresh(struct cluster *c);
/* Pending demand changed outside the model (admission queues on the tree's
 * leaves): the next cluster_refresh recomputes entitlement. A user of
 * admit.c on cluster_tree must re-queue its gangs when the tree pointer
 * changes (the old tree's queues are released). */
void cluster_invalidate(struct cluster *c);
/* Why the latest set of ResourcePools was not taken (NULL when it was). */
const char *cluster_pool_error(const struct cluster *c);
/* Bumped whenever the derived state changes (pools, nodes or pod counts). */
uint64_t cluster_generation(const struct cluster *c);
/* Bumped whenever the fleet is rebuilt (a node added, removed, or changed in
 * what placement sees: labels, taints, allocatable, readiness): host indices
 * and node names mean the same while it stays. 0 before the first refresh. */
uint64_t cluster_fleet_generation(const struct cluster *c);
/* Per host index of the current fleet: a stamp that changes (to a value it
 * never had, never 0) whenever what the model counts on the host changes
 * (its allocated vector, its pods' job counts) and when the fleet is
 * rebuilt; a host whose stamp is unchanged scores and fits as before. Trial
 * placements on cluster_engine that are undone exactly (place_gang_undo)
 * are not seen. NULL before the first refresh; valid until the next. */
const uint64_t *cluster_host_generations(const struct cluster *c);

/* Chooses hosts for gang g's members as place_gang on cluster_engine does,
 * and holds them to the hosts' pod limits as well (allocatable "pods"): the
 * core has no pod-count resource, and a host at its limit reads as full to
 * it, but one gang could still put more members on a host than the slots it
 * has left (a Kubelet refuses the rest: OutOfpods). When it would, the
 * members are placed one by one, a host the members so far fill reading as
 * full to the next. hosts[i] is member i's host; nothing stays counted on
 * the engine (the model counts the members once they are assumed,
 * cluster_assume). Returns what place_gang returns (fail as it fills it;
 * member by member, fail->task is the member that found no host); -EINVAL
 * with no engine, -ENOMEM. */
int cluster_place_gang(struct cluster *c, const struct place_gang *g, uint32_t *hosts, struct place_failure *fail);

struct respool_tree *cluster_tree(struct cluster *c);
struct host_fleet *cluster_fleet(struct cluster *c);
struct place_engine *cluster_engine(struct cluster *c); /* NULL with no_engine */
struct resvec cluster_capacity(const struct cluster *c);
size_t cluster_node_count(const struct cluster *c);
size_t cluster_pod_count(const struct cluster *c);

/* Pods by key ("ns", "name") or UID; NULL when unknown. */
struct cm_pod *cluster_pod(const struct cluster *c, const char *ns, const char *name);
struct cm_pod *cluster_pod_by_uid(const struct cluster *c, const char *uid);
/* Every pod; stops when fn returns non-zero. */
void cluster_foreach_pod(const struct cluster *c, int (*fn)(void *ud, struct cm_pod *p), void *ud);
/* The pods counted on host idx (bound or assumed, not terminal), linked by
 * cluster_host_next. */
struct cm_pod *cluster_host_first(const struct cluster *c, uint32_t host);
static inline struct cm_pod *cluster_host_next(const struct cm_pod *p) { return p->hnext_; }
/* The pods counted in leaf pool `leaf` of the current tree (as allocation
 * or as pending demand), linked by cluster_pool_next: what a per-pool pass
 * (preemption) walks instead of every pod. Kept as pods are counted, so a
 * pod moving to another pool, ending or going away leaves the list at once;
 * a new tree starts with new lists. NULL for a pool of another tree. */
struct cm_pod *cluster_pool_first(const struct cluster *c, const struct respool *leaf);
static inline struct cm_pod *cluster_pool_next(const struct cm_pod *p) { return p->pnext_; }
/* The leaf pool pod p is counted in (or would be), or NULL (unmanaged, or its
 * pool is unknown or not a leaf: see cluster_pod_pool_problem). */
struct respool *cluster_pod_pool(struct cluster *c, const struct cm_pod *p);
/* One line on why a managed pod has no usable pool ("resource pool \"x\" not
 * found", "... is not a leaf"), or NULL. */
const char *cluster_pod_pool_problem(struct cluster *c, const struct cm_pod *p, char *buf, size_t len);
/* The pods of gang `gang` in namespace ns (not terminal), up to cap into
 * out; returns how many there are. */
size_t cluster_gang_members(const struct cluster *c, const char *ns, const char *gang, struct cm_pod **out,
                            size_t cap);

/* Admission of demand for pod p's pool, with p's flags (notes/peloton.md):
 * non-preemptible work within the reservation, preemptible within the
 * entitlement, revocable within the slack entitlement, comparing only the
 * kinds demand asks for. The pod's own counted allocation is not counted
 * twice (a pod already counted as pending is fine). 0 = admissible; -ENOSPC
 * with a line in why naming the pool, the rule, the kind and the numbers
 * ("pool team1: cpu entitlement 4 < allocation 3 + 2"); *resolvable (may be
 * NULL) says whether preemption could help (false for the reservation rule
 * and for demand above the pool's limit). Unmanaged pods: 0. */
int cluster_admit_check(struct cluster *c, const struct cm_pod *p, struct resvec demand, char *why, size_t len,
                        bool *resolvable);

#endif
