/* Resource pools: a tree addressed by path ("/org/team"), with per-kind
 * reservation, limit and share, and per-pool usage rolled up the tree.
 *
 * Ownership: the tree owns every pool, its name and path; pointers returned
 * by lookup stay valid until that pool is deleted or the tree is freed.
 * Configs are copied in. Errors are negative errno codes with a one-line
 * message in err naming the pool, the rule, the kind and the numbers.
 *
 * Rules enforced on create and update (notes/peloton.md):
 *   reservation >= 0, share >= 0, reservation <= limit (per kind);
 *   a child's limit <= its parent's limit; the children's reservations sum to
 *   at most the parent's reservation (not checked under the root, whose size is
 *   the cluster); sibling names unique; the parent is immutable; "root" is a
 *   reserved top-level name; controller and slack limits are percentages in
 *   [0, 100]; only leaf pools hold work (a pool with work gets no children).
 *
 * Deletion: a pool marked `deleting` (a Kubernetes deletionTimestamp) stays in
 * the tree with its usage until its owner removes it: it admits no new work
 * (admit.h), asks for no entitlement beyond what it holds (entitle.h) and gets
 * no new child pools; its children are not marked by it. respool_delete
 * removes only a pool without children or work. */
#ifndef PELOTON_CORE_RESPOOL_H
#define PELOTON_CORE_RESPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "resource.h"

#define RESPOOL_PATH_MAX 512
#define RESPOOL_NAME_MAX 63
#define RESPOOL_DEPTH_MAX 16
#define RESPOOL_SHARE_ONE 1000 /* shares are held in milli-units: share 1.0 = 1000 */
#define RESPOOL_PCT_ONE 1000   /* percentages in milli-percent: 20% = 20000 */

enum respool_policy { RESPOOL_PRIORITY_FIFO = 1 };

struct respool_kind_cfg {
    int64_t reservation; /* base units (resource.h) */
    int64_t limit;       /* RES_UNLIMITED when not set: bounded by the parent */
    int64_t share;       /* weight, milli-units; 0 = nothing beyond reservation */
    bool is_static;      /* STATIC: entitled to the reservation whatever the demand */
};

struct respool_config {
    struct respool_kind_cfg res[RES_NKINDS];
    int64_t controller_limit_pct; /* milli-percent of reservation; default 100% */
    int64_t slack_limit_pct;      /* milli-percent of reservation; default 20% */
    enum respool_policy policy;
};

/* Work classes. NONPREEMPT, PREEMPT and REVOCABLE partition the work;
 * CONTROLLER counts controller tasks again (they are also in one of the
 * first two). Non-slack = NONPREEMPT + PREEMPT. */
enum usage_class { UC_NONPREEMPT = 0, UC_PREEMPT, UC_REVOCABLE, UC_CONTROLLER, UC_NCLASSES };

/* Task flags that pick a work class (also used by admission and preemption). */
enum work_flags { WF_PREEMPTIBLE = 1u, WF_REVOCABLE = 2u, WF_CONTROLLER = 4u };

struct usage {
    struct resvec c[UC_NCLASSES];
};

struct respool {
    char *name; /* last path segment; "" for the root */
    char *path; /* "/org/team"; "/" for the root */
    struct respool *parent, *first_child, *last_child, *next_sibling, *prev_sibling;
    int nchildren;
    int depth; /* root 0 */
    struct respool_config cfg;
    bool deleting; /* marked for deletion: no new work, no new children; goes once empty */

    /* Inputs, per leaf (inner pools: rolled up by respool_rollup). */
    struct usage alloc;   /* admitted work: READY … RUNNING */
    struct usage pending; /* queued, not yet admitted */

    /* Outputs of respool_entitle (entitle.h). */
    struct resvec demand;            /* min(limit, non-slack alloc + pending) */
    struct resvec entitlement;       /* non-slack */
    struct resvec slack_demand;      /* revocable alloc + pending */
    struct resvec slack_entitlement; /* for revocable work */

    void *admit; /* per-leaf admission state, owned by admit.c */
    uint32_t index; /* dense, stable while the pool exists; root is 0 */
    struct respool *name_next_; /* private: the tree's name index */
};

struct respool_tree;

/* A new tree holding only the root "/". NULL on allocation failure. */
struct respool_tree *respool_tree_new(void);
/* Frees the tree and every pool; admission state must be released first. */
void respool_tree_free(struct respool_tree *t);

/* Defaults: reservation 0, limit unlimited, share 1, ELASTIC; controller
 * limit 100%, slack limit 20%, PriorityFIFO. */
void respool_config_default(struct respool_config *cfg);

/* Creates the pool at path; its parent must exist. *out (optional) gets it. */
int respool_create(struct respool_tree *t, const char *path, const struct respool_config *cfg,
                   struct respool **out, char *err, size_t errlen);
/* Replaces a pool's config. parent_path, when not NULL, must name the pool's
 * current parent (the parent is immutable). Nothing changes on error. */
int respool_update(struct respool_tree *t, const char *path, const char *parent_path,
                   const struct respool_config *cfg, char *err, size_t errlen);
/* Deletes a leaf pool without work. */
int respool_delete(struct respool_tree *t, const char *path, char *err, size_t errlen);
/* Whether p holds work: allocation or pending demand in any class, or
 * admission queues (respool_delete refuses such a pool). */
bool respool_holds_work(const struct respool *p);

struct respool *respool_lookup(const struct respool_tree *t, const char *path);
/* The pool whose name (last path segment) is name, the root never; when
 * pools under different parents share the name, the one created first.
 * A hash lookup: O(1) whatever the tree's size. */
struct respool *respool_by_name(const struct respool_tree *t, const char *name);
struct respool *respool_root(const struct respool_tree *t);
size_t respool_count(const struct respool_tree *t); /* including the root */
/* Pool by dense index (0 = root), or NULL. Indices are reused after delete. */
struct respool *respool_by_index(const struct respool_tree *t, uint32_t index);
/* Upper bound (exclusive) of indices in use, for sizing per-pool arrays. */
uint32_t respool_index_limit(const struct respool_tree *t);

static inline bool respool_is_leaf(const struct respool *p) { return p->nchildren == 0 && p->parent; }

/* Pre-order walk (parents before children) from the root. */
struct respool *respool_next_preorder(const struct respool *p);
/* The whole pre-order as an array owned by the tree, valid until the next
 * create or delete; rebuilt lazily. NULL on allocation failure. */
struct respool *const *respool_preorder(struct respool_tree *t, size_t *n);

/* Checks the whole tree against every rule (useful after bulk loads). */
int respool_validate_tree(const struct respool_tree *t, char *err, size_t errlen);

/* Recomputes every inner pool's alloc and pending as the sum of its children's. */
void respool_rollup(struct respool_tree *t);

/* Usage helpers. */
static inline struct resvec usage_nonslack(const struct usage *u) {
    return resvec_add(u->c[UC_NONPREEMPT], u->c[UC_PREEMPT]);
}
void usage_add(struct usage *u, unsigned work_flags, struct resvec r);
void usage_sub(struct usage *u, unsigned work_flags, struct resvec r);
/* The class a task with these flags belongs to (ignoring CONTROLLER). */
enum usage_class usage_class_of(unsigned work_flags);

/* A pool's effective limit for kind k: its own, capped by its ancestors'. */
int64_t respool_effective_limit(const struct respool *p, enum res_kind k);
/* Controller and slack limits in base units (percent of reservation). */
struct resvec respool_controller_limit(const struct respool *p);
struct resvec respool_slack_limit(const struct respool *p);

#endif
