/* Private to the scheduler-extender: the core's state and the helpers its
 * handler files share. */
#ifndef PELOTON_EXT_INT_H
#define PELOTON_EXT_INT_H

#include "cluster.h"
#include "extender_srv.h"
#include "metrics.h"

/* An admitted gang: the node planned for each unbound member when the whole
 * gang was admitted (a trial place_gang, undone), held until expires_ms or
 * until every planned member is bound. */
struct ext_gang {
    struct ext_gang *next;
    char *ns, *id;
    uint64_t expires_ms;
    uint32_t n;
    char **pods;  /* member names */
    char **nodes; /* planned node per member; NULL once bound */
    struct resvec *req; /* each member's request: held on its planned node for other pods */
};

/* Per-request arrays of filter and prioritize, kept in the core and reused
 * (they grow to the largest request): a warm extender allocates nothing per
 * request that grows with the number of nodes. Valid until the next request. */
struct ext_scratch {
    size_t cap;                       /* entries of each array */
    uint32_t *hosts;                  /* host index of each request node, or HOST_NONE */
    uint32_t *known;                  /* prioritize: the hosts to score */
    uint32_t *at;                     /* filter: the passing nodes' positions; prioritize: those of known */
    uint8_t *reasons;                 /* place_judge_hosts' verdicts, by request position */
    int64_t *scores;                  /* place_*_hosts' scores */
    int64_t *full;                    /* the score of each request node */
    struct extender_name_verdict *v;  /* the verdict of each request node */
    struct extender_name *names;      /* the jansson path's names as byte ranges */
    uint32_t *own;                    /* offset + 1 of a node's own reason in arena; 0 = none */
    struct extender_buf arena;        /* reasons made for one node ("node x not in the extender's cache") */
    char why[EXTENDER_MAX_REASON];    /* the pod-level reason */
    char err[EXTENDER_MAX_REASON];    /* why the pod cannot be judged / pod_task_build's message */
};
void ext_scratch_free(struct ext_scratch *sc);

/* ---- ext_memo.c: node names to hosts, and what a request leaves for the next ----
 *
 * The name map: node name -> host index of the model's fleet, built once per
 * fleet (the fleet's own lookup takes two hash tables and a strncmp; this one
 * slot of 32 bytes, the name inside it unless it is long).
 *
 * The memo: kube-scheduler filters pod after pod against the same names and
 * calls prioritize right after a pod's filter with the names that passed.
 * So the extender keeps, for the fast path (NodeNames bodies):
 * - names -> hosts for two NodeNames texts: the last filter request's and
 *   the array of the names that passed it (the filter reply's NodeNames,
 *   which is what Go writes for those names). A request whose NodeNames text
 *   is byte for byte one of them takes its hosts without a lookup. Valid for
 *   one fleet (cluster_fleet_generation).
 * - the filter's scores (it scores every host it checks, in the same pass),
 *   by host, each with the host's cluster_host_generations stamp, under a
 *   key: the request's Pod text byte for byte, the model pod's version (the
 *   same pod and object), the strategy, the fleet. prioritize takes a host's
 *   score when the key and the host's stamp are unchanged, and scores the
 *   rest; so a bind or a pod event on a host, a new object for the pod, a
 *   Job that changes its strategy, or any node change, is scored afresh. */
#define EXT_NODESLOT_INLINE 18 /* names up to this long live in the slot itself */
struct ext_nodeslot {
    uint32_t hash;  /* high half of extender_name_hash */
    uint32_t host;  /* host index */
    uint32_t off;   /* a longer name: its offset in names */
    uint16_t len;   /* 0 = empty slot */
    char name[EXT_NODESLOT_INLINE]; /* a short name: one cache line holds slot and name */
};
struct ext_nodemap {
    bool valid;
    uint64_t fleet_gen;             /* cluster_fleet_generation it was built for */
    struct ext_nodeslot *slots;
    size_t nslots, slots_cap;       /* nslots a power of two */
    char *names;
    size_t names_cap;
};
struct ext_memo_names {
    bool valid;
    struct extender_buf text;       /* a NodeNames array's text, "[" to "]" */
    uint32_t *hosts;                /* the host of each of its names */
    size_t n, cap;
    bool hint;                      /* names and hashes hold the decoded text (a compact one) */
    struct extender_name *names;    /* into text */
    uint64_t *hashes;
};
struct ext_memo {
    struct ext_nodemap map;
    uint64_t fleet_gen;             /* of both names entries */
    struct ext_memo_names req, pass; /* pass is also the scan's hint */
    /* the scores and their key */
    bool scored;
    uint64_t score_fleet_gen, pod_version;
    enum place_strategy strategy;
    struct extender_buf pod;        /* the request's Pod text */
    uint32_t nhosts;                /* entries of stamp and score */
    uint64_t *stamp;                /* by host: its generation when scored; 0 = not scored */
    uint8_t *score;
};
void ext_memo_free(struct ext_memo *m);

/* Host index of each name (HOST_NONE: not in the fleet), as host_fleet_find.
 * hashes: the names' extender_name_hash, or NULL. */
void ext_lookup_hosts(struct ext_core *x, const struct extender_name *names, const uint64_t *hashes, size_t n,
                      uint32_t *hosts);
/* ext_lookup_hosts for a scan's names, through the memo. remember: the names
 * become the memo's request entry (filter does; prioritize does not, so that
 * the next filter's names are still there). */
void ext_memo_hosts(struct ext_core *x, const struct extender_scan *s, bool remember, uint32_t *hosts);
/* The array text of the names that passed the filter of scan s (text, len
 * bytes: the reply's) and their positions in s (at[0..n)), whose hosts are
 * hosts[at[k]], for the prioritize that follows; when s is compact, the
 * names decoded too, for the scan of that prioritize (ext_core_names_hint). */
void ext_memo_pass(struct ext_core *x, const char *text, size_t len, const struct extender_scan *s,
                   const uint32_t *hosts, const uint32_t *at, size_t n);
/* Keeps scores[i] of hosts[i] (HOST_NONE entries skipped) for pod p (the
 * model's pod of scan s's Pod) under strategy. A new key drops the old
 * scores. */
void ext_memo_scores_put(struct ext_core *x, const struct extender_scan *s, const struct cm_pod *p,
                         enum place_strategy strategy, const uint32_t *hosts, const int64_t *scores, size_t n);
/* Whether the memo's scores are for this key (see ext_memo_scores_put);
 * s NULL: no. */
bool ext_memo_scores_keyed(struct ext_core *x, const struct extender_scan *s, const struct cm_pod *p,
                           enum place_strategy strategy);
/* scores[i] for hosts[i] where the memo holds it (keyed: the key matched),
 * 0 for HOST_NONE; the others' hosts go to miss[] and their positions to
 * at[]. Returns how many missed. */
size_t ext_memo_scores_get(struct ext_core *x, bool keyed, const uint32_t *hosts, size_t n, int64_t *scores,
                           uint32_t *miss, uint32_t *at);

/* ---- ext_metrics.c: what /metrics exports (docs/extender.md, "Metrics") ----
 * Families of the shared registry (src/util/metrics.h), registered and
 * written on the loop thread. A request costs two clock reads, a histogram
 * observation and, for filter, one series lookup of its {pool, reason}. The
 * values that are the model's state (binds in flight, gangs held, ...) are
 * gauges set by ext_metrics_gauges on the loop thread, never read by the
 * scrape from another thread. */
enum ext_decision {
    EXT_DEC_ADMITTED = 0,   /* the pod's pool (and gang) admit it: the node filters decide */
    EXT_DEC_ENTITLEMENT,    /* above the pool's entitlement */
    EXT_DEC_RESERVATION,    /* non-preemptible beyond the reservation */
    EXT_DEC_LIMIT,          /* demand above the pool's limit */
    EXT_DEC_SLACK,          /* revocable beyond the slack entitlement */
    EXT_DEC_GANG_INCOMPLETE,/* a gang held until all its members exist */
    EXT_DEC_GANG_UNFIT,     /* a gang whose members do not fit together */
    EXT_DEC_POOL_UNKNOWN,   /* its pool is unknown or not a leaf */
    EXT_DEC_INVALID,        /* the pod cannot be judged */
    EXT_NDEC
};
enum { EXT_WATCH_KINDS = 5 }; /* Node, Namespace, ResourcePool, Pod, Job */
struct ext_metrics {
    struct metrics *reg;                /* ext_core_options.metrics, or the core's own */
    bool own;
    struct metrics_series *lat[4];      /* by enum extender_verb */
    struct metrics_family *decisions;   /* {pool, reason} */
    struct metrics_series *dec_dropped; /* decisions whose series could not be made */
    struct metrics_series *preempt_victims, *preempt_nodes, *preempt_empty;
    struct metrics_series *binds_bound, *binds_already, *binds_failed;
    struct metrics_series *gangs_admitted;
    struct metrics_series *inflight, *gangs_held, *nominated, *model_nodes, *model_pods, *tree_valid;
    struct metrics_series *synced[EXT_WATCH_KINDS], *watch_events[EXT_WATCH_KINDS], *watch_age[EXT_WATCH_KINDS];
};
/* Registers the core's families on reg (NULL: a registry of the core's own). */
int ext_metrics_init(struct ext_core *x, struct metrics *reg);
void ext_metrics_free(struct ext_metrics *m);
/* Latency of one request of verb, ns. */
void ext_metrics_latency(struct ext_core *x, int verb, uint64_t ns);
/* One filter's decision for pod p's pool (NULL: unmanaged). */
void ext_metrics_decision(struct ext_core *x, const char *pool, enum ext_decision d);
/* The decision a refusal's reason line names (cluster_admit_check's or
 * gang_admit's), given whether preemption could help. */
enum ext_decision ext_decision_of(const char *why, bool resolvable);
/* The informers' families (cache_synced, watch_events_total,
 * watch_event_age_seconds) for kinds[0..n), n at most EXT_WATCH_KINDS. */
void ext_metrics_feeds(struct ext_core *x, const char *const *kinds, size_t n);
/* The informer of kind (its index) has listed. */
void ext_metrics_synced(struct ext_core *x, int kind);
/* A watch event of kind (0..EXT_WATCH_KINDS) for obj, after the informer's
 * first sync: its age, from the newest time the object carries. */
void ext_metrics_watch_event(struct ext_core *x, int kind, const json_t *obj);
/* Sets the gauges of the model's state (loop thread): before the extender's
 * own scrape and on a timer when another thread scrapes the registry. */
void ext_metrics_gauges(struct ext_core *x);
/* A pod's watch event: counts it against its pool if a filter passed it
 * while it was known only from the request (ext_filter.c). */
void ext_passed_seen(struct ext_core *x, const char *ns, const char *name);

struct ext_core {
    struct ext_core_options o;
    char *default_pool;
    struct cluster *cm;
    bool dirty;
    json_t *jobs;           /* "ns/name" -> integer enum job_type */
    json_t *inflight;       /* "ns/name" -> binds of the pod with the API server (ext_bind_begin) */
    json_t *passed;         /* "ns/name" -> expiry (ms): unbound pods a filter admitted (ext_filter.c) */
    json_t *nominated;      /* "ns/name" -> node: unbound pods kube-scheduler nominated (status.nominatedNodeName) */
    struct ext_gang *gangs; /* admitted gangs */
    struct ext_stats st;
    char *adopted_ns, *adopted_name; /* the request's pod, taken into the model for this request */
    struct ext_scratch sc;
    struct ext_memo memo;
    struct ext_metrics m;
};

/* The model's pod for a Pod object of a request: the cached one, or the
 * request's own object taken into the model when the informer has not
 * delivered it yet (kube-scheduler may be a watch event ahead). NULL with err
 * when the object has no name or cannot be decoded. */
struct cm_pod *ext_pod_for(struct ext_core *x, json_t *pod, char *err, size_t errlen);
/* Ends a request: a pod ext_pod_for took from the request leaves the model
 * again (the informer is the only source that also reports deletions), so
 * every pointer into the model is invalid after it. */
void ext_pod_release(struct ext_core *x);

/* The strategy for p: annotation peloton.io/placement-strategy, else by the
 * type of its Job (label peloton.io/job), else PACK. */
enum place_strategy ext_pod_strategy(struct ext_core *x, const struct cm_pod *p);

/* The job name used for SPREAD_JOB counts: peloton.io/job, else the gang. */
const char *ext_pod_job(const struct cm_pod *p);

/* Gang plans. */
struct ext_gang *ext_gang_find(struct ext_core *x, const char *ns, const char *id, uint64_t now_ms);
struct ext_gang *ext_gang_add(struct ext_core *x, const char *ns, const char *id, uint32_t n, uint64_t now_ms);
void ext_gang_drop(struct ext_core *x, struct ext_gang *g);
void ext_gangs_expire(struct ext_core *x, uint64_t now_ms);
/* The planned node of member `pod`, or NULL. */
const char *ext_gang_node(const struct ext_gang *g, const char *pod);

/* ---- ext_held.c: room held on nodes for pods that are not bound yet ----
 * Two kinds: an admitted gang's members on their planned nodes, and the
 * pods kube-scheduler nominated to a node after preempting for them
 * (status.nominatedNodeName, from the watch or a request's Pod). A pod's
 * filter and preempt see a node as short by the holds of every other gang
 * and of every other nominated pod of its priority or higher, as
 * kube-scheduler's own filters count nominated pods. */
struct ext_held {
    uint32_t host;
    struct resvec req;
    bool nominated;  /* a nominated pod ("ns/name" in who), else a gang (its id) */
    const char *who; /* valid until the model or the holds change */
};
/* Records (or drops) the nomination of the model's pod ns/name from its
 * object obj: kept while the pod is unbound, not ended, and nominated. */
void ext_nominated_note(struct ext_core *x, const char *ns, const char *name, const json_t *obj);
/* A request's Pod: its nomination is recorded when it has one (the watch
 * may lag), unless the object is older than the one the watch delivered
 * (resourceVersion); a missing one is not taken as a withdrawal. */
void ext_nominated_from_request(struct ext_core *x, const struct cm_pod *p, const json_t *obj);
void ext_nominated_forget(struct ext_core *x, const char *ns, const char *name);
/* Whether anything is held (cheap: the filter's hot path asks). */
static inline bool ext_holds_any(const struct ext_core *x) { return x->gangs || json_object_size(x->nominated); }
/* The holds that count against pod p (not its own gang's, not its own
 * nomination, only nominated pods of p's priority or higher), sorted by
 * host; NULL when none (or out of memory). */
struct ext_held *ext_holds_collect(struct ext_core *x, const struct cm_pod *p, size_t *n);
/* PR_NONE when req still fits on host after the holds there, else the kind
 * it lacks; *holder (when it does not fit) one of the holds there. */
enum place_reason ext_holds_fit(struct ext_core *x, const struct ext_held *h, size_t nh, uint32_t host,
                                struct resvec req, const struct ext_held **holder);
/* The sum of the holds on host. */
struct resvec ext_holds_on(const struct ext_held *h, size_t nh, uint32_t host);

/* metadata.namespace ("default" when absent) and metadata.name (NULL when absent). */
const char *ext_obj_ns(const json_t *obj);
const char *ext_obj_name(const json_t *obj);
/* An annotation or a label of obj, or NULL. */
const char *ext_obj_meta(const json_t *obj, const char *field, const char *key);

#endif
