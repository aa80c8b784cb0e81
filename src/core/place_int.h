/* Internals of the placement engine, shared by place.c (gangs and rounds),
 * place_filter.c (compiling tasks, running filters) and place_index.c (the
 * search index). Not a public API: include place.h instead.
 *
 * Ownership: compiled tasks live in the engine's arena, reset per gang. */
#ifndef PELOTON_CORE_PLACE_INT_H
#define PELOTON_CORE_PLACE_INT_H

#include "host.h"
#include "place.h"

#define PIDX_NIL UINT32_MAX

/* Host classes for pruning the index: a subtree without a class the task can
 * use is skipped. Unschedulable hosts have no class and are never visited. */
enum pidx_class {
    PCLS_PLAIN = 1u,   /* schedulable, not exclusive, no GPU, no blocking taint */
    PCLS_GPU = 2u,     /* schedulable, not exclusive, GPU, no blocking taint */
    PCLS_PLAIN_T = 4u, /* as PLAIN with a NoSchedule/NoExecute taint */
    PCLS_GPU_T = 8u,   /* as GPU with a NoSchedule/NoExecute taint */
    PCLS_EXCL = 16u,   /* schedulable, exclusive */
};

/* A treap over hosts ordered by key = free cpu (milli, clamped to 32 bits)
 * << 32 | index, so the in-order walk goes from the fullest host (least free
 * cpu) to the emptiest. Every node keeps the maximum free vector and the
 * union of classes of its subtree. */
struct pidx_node {
    uint64_t key;
    int64_t maxfree[RES_NKINDS];
    uint32_t l, r, pri;
    uint8_t cls, acls;
};
struct place_index {
    struct pidx_node *n; /* one node per host, node i is host i */
    uint32_t root, count;
};

int pidx_build(struct place_index *ix, const struct host_fleet *f);
void pidx_free(struct place_index *ix);
/* Re-seats host idx after its allocated vector changed. */
void pidx_update(struct place_index *ix, const struct host_fleet *f, uint32_t idx);
/* Visits, in key order (forward: least free cpu first) or reverse, every host
 * whose class is in need and whose free vector covers req, until visit
 * returns nonzero. Subtrees that cannot hold such a host are skipped. */
void pidx_walk(const struct place_index *ix, const struct host_fleet *f, struct resvec req,
               uint8_t need, bool forward, int (*visit)(void *ctx, uint32_t idx), void *ctx);

/* Bump allocator, reset per gang. */
struct place_arena {
    struct place_arena_block *head;
    size_t used; /* in head */
};
void *place_arena_alloc(struct place_arena *a, size_t n); /* zeroed, NULL on ENOMEM */
void place_arena_reset(struct place_arena *a);
void place_arena_free(struct place_arena *a);
size_t place_arena_bytes(const struct place_arena *a);

/* A compiled task: strings replaced by interned ids. */
struct cexpr {
    uint32_t key;
    uint8_t op;
    bool num_ok;
    int64_t num; /* Gt / Lt */
    uint32_t *vals;
    uint32_t nvals;
};
struct cterm {
    struct cexpr *e;
    uint32_t n;
};
struct ctol {
    uint32_t key, value;
    uint8_t op;
    bool any_key;
    int effect;
};
struct cnode {
    uint8_t type, kind, cond;
    uint32_t key, value; /* HOST: label key and value ids; TASK: pair id in key */
    uint32_t req;
    struct cnode *subs;
    uint32_t nsubs;
};
struct ctask {
    struct resvec req;
    uint32_t hint; /* host index or HOST_NONE */
    bool pinned;   /* nodeSelector names a hostname: only host `only` can match */
    uint32_t only; /* host index, or HOST_NONE when no host has that name */
    uint8_t need;  /* pidx_class mask */
    bool gpu;      /* requests gpu */
    struct host_label *sel;
    uint32_t nsel;
    struct cterm *terms;
    uint32_t nterms;
    struct ctol *tols;
    uint32_t ntols;
    struct cnode *cons; /* NULL: none */
    uint32_t *excl;     /* exclusive values the task targets */
    uint32_t nexcl;
    uint32_t *pairs;    /* the task's label pairs */
    uint32_t npairs;
};

struct place_engine {
    struct host_fleet *f;
    struct place_options opt;
    struct place_index ix;
    struct place_stats st;
    struct place_arena arena;
    uint32_t kexcl; /* string id of peloton/exclusive */
};

/* The first kind in which req exceeds host h's free resources (as
 * host_free computes them), or -1 when it fits. Kind by kind, without the
 * vector temporaries of host_free and resvec_le: in the per-host loops those
 * went through the stack in pieces the loads could not forward from. */
static inline int place_fit_over(const struct host *h, const struct resvec *req) {
    for (int k = 0; k < RES_NKINDS; k++)
        if (req->v[k] > res_sub(h->allocatable.v[k], h->allocated.v[k])) return k;
    return -1;
}

/* Compiles t into the engine's arena. -EINVAL, -ENOMEM. */
int place_task_compile(struct place_engine *e, const struct place_task *t, struct ctask *out);
/* The first NoSchedule/NoExecute taint of host idx that c does not tolerate
 * (an index into f->taints), or UINT32_MAX. */
uint32_t place_untolerated(const struct host_fleet *f, uint32_t idx, const struct ctask *c);
/* The first filter rejecting host idx for task c (job: the gang's job id), or PR_NONE. */
enum place_reason place_check(const struct place_engine *e, const struct ctask *c, uint32_t idx);

#endif
