/* Private to the scheduler-extender: the core's state and the helpers its
 * handler files share. */
#ifndef PELOTON_EXT_INT_H
#define PELOTON_EXT_INT_H

#include "cluster.h"
#include "extender_srv.h"

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
    uint32_t *known;                  /* the known ones, compacted */
    uint8_t *reasons;                 /* place_check_hosts' verdicts on known */
    int64_t *scores;                  /* place_score_hosts' scores on known */
    int64_t *full;                    /* the score of each request node */
    struct extender_name_verdict *v;  /* the verdict of each request node */
    struct extender_name *names;      /* the jansson path's names as byte ranges */
    uint32_t *own;                    /* offset + 1 of a node's own reason in arena; 0 = none */
    struct extender_buf arena;        /* reasons made for one node ("node x not in the extender's cache") */
    char why[EXTENDER_MAX_REASON];    /* the pod-level reason */
    char err[EXTENDER_MAX_REASON];    /* why the pod cannot be judged / pod_task_build's message */
};
void ext_scratch_free(struct ext_scratch *sc);

/* Node name -> host index of the model's fleet, built once per change of the
 * nodes (the fleet's own lookup takes two hash tables and a strncmp; this one
 * slot of 32 bytes, the name inside it unless it is long). */
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
    uint64_t nodes_gen;             /* the core's nodes_gen it was built for */
    const struct host_fleet *fleet; /* and the fleet */
    uint32_t nhosts;
    struct ext_nodeslot *slots;
    size_t nslots, slots_cap;       /* nslots a power of two */
    char *names;
    size_t names_cap;
};
void ext_nodemap_free(struct ext_nodemap *m);

struct ext_core {
    struct ext_core_options o;
    char *default_pool;
    struct cluster *cm;
    bool dirty;
    json_t *jobs;           /* "ns/name" -> integer enum job_type */
    struct ext_gang *gangs; /* admitted gangs */
    struct ext_stats st;
    char *adopted_ns, *adopted_name; /* the request's pod, taken into the model for this request */
    struct ext_scratch sc;
    uint64_t nodes_gen;        /* bumped on every change of the nodes (and ext_core_changed) */
    struct ext_nodemap nodemap;
    /* The last fast-path lookup (names -> hosts), kept for the next call with
     * the same names: kube-scheduler's prioritize follows its filter. */
    struct {
        bool valid;
        const void *fleet; /* the model's fleet the hosts index */
        uint64_t nodes_gen, digest;
        size_t n, cap;
        uint32_t *hosts;
    } memo;
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

/* metadata.namespace ("default" when absent) and metadata.name (NULL when absent). */
const char *ext_obj_ns(const json_t *obj);
const char *ext_obj_name(const json_t *obj);
/* An annotation or a label of obj, or NULL. */
const char *ext_obj_meta(const json_t *obj, const char *field, const char *key);

#endif
