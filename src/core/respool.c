#include "respool.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"
#include "quantity.h"

#define SHARE_MAX ((int64_t)1000000 * RESPOOL_SHARE_ONE) /* share weights up to 10^6 */
#define PCT_MAX ((int64_t)100 * RESPOOL_PCT_ONE)

/* Path index: open addressing over pool pointers, keyed by path. */
struct respool_tree {
    struct respool *root;
    struct respool **slots; /* hash table */
    size_t nslots, nused;
    struct respool **by_index;
    uint32_t index_cap, index_limit;
    uint32_t *free_idx;
    uint32_t nfree;
    struct respool **preorder; /* cached walk, rebuilt after create/delete */
    size_t npreorder;
    bool preorder_dirty;
    struct respool **names; /* name index: chained buckets (respool.name_next_), creation order */
    size_t nnames;          /* buckets, a power of two */
};

static uint64_t path_hash(const char *s) {
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static int map_grow(struct respool_tree *t) {
    size_t n = t->nslots ? t->nslots * 2 : 64;
    struct respool **s = calloc(n, sizeof *s);
    if (!s) return -ENOMEM;
    for (size_t i = 0; i < t->nslots; i++) {
        struct respool *p = t->slots[i];
        if (!p) continue;
        size_t j = path_hash(p->path) & (n - 1);
        while (s[j]) j = (j + 1) & (n - 1);
        s[j] = p;
    }
    free(t->slots);
    t->slots = s;
    t->nslots = n;
    return 0;
}

static size_t map_find_slot(const struct respool_tree *t, const char *path) {
    size_t j = path_hash(path) & (t->nslots - 1);
    while (t->slots[j] && strcmp(t->slots[j]->path, path) != 0) j = (j + 1) & (t->nslots - 1);
    return j;
}

static int map_put(struct respool_tree *t, struct respool *p) {
    if ((t->nused + 1) * 4 > t->nslots * 3) {
        int rc = map_grow(t);
        if (rc) return rc;
    }
    t->slots[map_find_slot(t, p->path)] = p;
    t->nused++;
    return 0;
}

/* Backward-shift deletion keeps probe chains intact without tombstones. */
static void map_del(struct respool_tree *t, const char *path) {
    size_t mask = t->nslots - 1, i = map_find_slot(t, path);
    if (!t->slots[i]) return;
    t->slots[i] = NULL;
    t->nused--;
    for (size_t j = (i + 1) & mask; t->slots[j]; j = (j + 1) & mask) {
        size_t home = path_hash(t->slots[j]->path) & mask;
        /* move j back to i when its home is not in (i, j] cyclically */
        if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
            t->slots[i] = t->slots[j];
            t->slots[j] = NULL;
            i = j;
        }
    }
}

/* ---- the name index (respool_by_name) ---- */

static struct respool **name_bucket(const struct respool_tree *t, const char *name) {
    return &t->names[path_hash(name) & (t->nnames - 1)];
}

/* Doubles the buckets once pools outnumber them (never below 64); keeps each
 * chain's order, which is creation order. */
static int names_grow(struct respool_tree *t) {
    if (t->nnames && t->nused < t->nnames) return 0;
    size_t n = t->nnames ? t->nnames * 2 : 64;
    struct respool **b = calloc(n, sizeof *b);
    if (!b) return -ENOMEM;
    struct respool **tail = calloc(n, sizeof *tail), **old = t->names;
    if (!tail) {
        free(b);
        return -ENOMEM;
    }
    size_t nold = t->nnames;
    t->names = b;
    t->nnames = n;
    for (size_t i = 0; i < nold; i++)
        for (struct respool *p = old[i], *next; p; p = next) {
            next = p->name_next_;
            size_t j = (size_t)(name_bucket(t, p->name) - b);
            p->name_next_ = NULL;
            if (tail[j]) tail[j]->name_next_ = p;
            else b[j] = p;
            tail[j] = p;
        }
    free(tail);
    free(old);
    return 0;
}

static void names_put(struct respool_tree *t, struct respool *p) {
    struct respool **at = name_bucket(t, p->name);
    while (*at) at = &(*at)->name_next_;
    p->name_next_ = NULL;
    *at = p;
}

static void names_del(struct respool_tree *t, struct respool *p) {
    for (struct respool **at = name_bucket(t, p->name); *at; at = &(*at)->name_next_)
        if (*at == p) {
            *at = p->name_next_;
            return;
        }
}

struct respool *respool_by_name(const struct respool_tree *t, const char *name) {
    if (!name || !*name || !t->nnames) return NULL;
    for (struct respool *p = *name_bucket(t, name); p; p = p->name_next_)
        if (strcmp(p->name, name) == 0) return p;
    return NULL;
}

static int index_take(struct respool_tree *t, uint32_t *out) {
    if (t->nfree) { *out = t->free_idx[--t->nfree]; return 0; }
    if (t->index_limit == t->index_cap) {
        uint32_t n = t->index_cap ? t->index_cap * 2 : 64;
        struct respool **b = realloc(t->by_index, n * sizeof *b);
        if (!b) return -ENOMEM;
        t->by_index = b;
        uint32_t *f = realloc(t->free_idx, n * sizeof *f);
        if (!f) return -ENOMEM;
        t->free_idx = f;
        t->index_cap = n;
    }
    *out = t->index_limit++;
    return 0;
}

void respool_config_default(struct respool_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    for (int k = 0; k < RES_NKINDS; k++) {
        cfg->res[k].limit = RES_UNLIMITED;
        cfg->res[k].share = RESPOOL_SHARE_ONE;
    }
    cfg->controller_limit_pct = PCT_MAX;
    cfg->slack_limit_pct = 20 * RESPOOL_PCT_ONE;
    cfg->policy = RESPOOL_PRIORITY_FIFO;
}

static struct respool *pool_alloc(const char *path, const char *name) {
    struct respool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->path = strdup(path);
    p->name = strdup(name);
    if (!p->path || !p->name) { free(p->path); free(p->name); free(p); return NULL; }
    return p;
}

static void pool_free(struct respool *p) {
    free(p->path);
    free(p->name);
    free(p);
}

struct respool_tree *respool_tree_new(void) {
    struct respool_tree *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    struct respool *root = pool_alloc("/", "");
    uint32_t idx;
    if (!root || map_grow(t) || names_grow(t) || index_take(t, &idx)) {
        if (root) pool_free(root);
        free(t->slots);
        free(t->names);
        free(t->by_index);
        free(t->free_idx);
        free(t);
        return NULL;
    }
    respool_config_default(&root->cfg);
    root->index = idx;
    t->by_index[idx] = root;
    t->root = root;
    map_put(t, root); /* cannot fail: the table was just sized */
    return t;
}

void respool_tree_free(struct respool_tree *t) {
    if (!t) return;
    for (uint32_t i = 0; i < t->index_limit; i++)
        if (t->by_index[i]) pool_free(t->by_index[i]);
    free(t->slots);
    free(t->by_index);
    free(t->free_idx);
    free(t->preorder);
    free(t->names);
    free(t);
}

struct respool *const *respool_preorder(struct respool_tree *t, size_t *n) {
    if (t->preorder_dirty || !t->preorder) {
        struct respool **a = realloc(t->preorder, t->nused * sizeof *a);
        if (!a) return NULL;
        t->preorder = a;
        size_t cnt = 0;
        for (struct respool *p = t->root; p; p = respool_next_preorder(p)) a[cnt++] = p;
        t->npreorder = cnt;
        t->preorder_dirty = false;
    }
    *n = t->npreorder;
    return t->preorder;
}

struct respool *respool_lookup(const struct respool_tree *t, const char *path) {
    if (!path) return NULL;
    return t->slots[map_find_slot(t, path)];
}
struct respool *respool_root(const struct respool_tree *t) { return t->root; }
size_t respool_count(const struct respool_tree *t) { return t->nused; }
uint32_t respool_index_limit(const struct respool_tree *t) { return t->index_limit; }
struct respool *respool_by_index(const struct respool_tree *t, uint32_t i) {
    return i < t->index_limit ? t->by_index[i] : NULL;
}

struct respool *respool_next_preorder(const struct respool *p) {
    if (p->first_child) return p->first_child;
    while (p) {
        if (p->next_sibling) return p->next_sibling;
        p = p->parent;
    }
    return NULL;
}

/* ---- validation ---- */

static void fmtq(enum res_kind k, int64_t v, char *buf, size_t len) { quantity_format(k, v, buf, len); }


/* Splits path into parent path and last segment after checking its syntax. */
static int path_check(const char *path, char *parent, char *name, int *depth, char *err, size_t errlen) {
    size_t len = path ? strlen(path) : 0;
    if (len == 0 || path[0] != '/')
        return core_fail(err, errlen, -EINVAL, "pool path \"%.100s\": must start with /", path ? path : "");
    if (len >= RESPOOL_PATH_MAX)
        return core_fail(err, errlen, -EINVAL, "pool path \"%.100s...\": longer than %d characters", path, RESPOOL_PATH_MAX - 1);
    if (len == 1) return core_fail(err, errlen, -EINVAL, "pool path \"/\": the root exists and cannot be changed");
    int d = 0;
    const char *seg = path + 1;
    for (;;) {
        const char *end = strchr(seg, '/');
        size_t sl = end ? (size_t)(end - seg) : strlen(seg);
        if (sl == 0) return core_fail(err, errlen, -EINVAL, "pool path \"%s\": empty segment", path);
        if (sl > RESPOOL_NAME_MAX)
            return core_fail(err, errlen, -EINVAL, "pool path \"%s\": segment longer than %d characters", path, RESPOOL_NAME_MAX);
        for (size_t i = 0; i < sl; i++) {
            char c = seg[i];
            if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                  c == '_' || c == '.'))
                return core_fail(err, errlen, -EINVAL, "pool path \"%s\": character '%c' not allowed (letters, digits, - _ .)",
                            path, c);
        }
        if ((sl == 1 && seg[0] == '.') || (sl == 2 && seg[0] == '.' && seg[1] == '.'))
            return core_fail(err, errlen, -EINVAL, "pool path \"%s\": segment \".\" or \"..\" not allowed", path);
        d++;
        if (!end) {
            memcpy(name, seg, sl + 1);
            size_t pl = (size_t)(seg - path) - 1;
            if (pl == 0) strcpy(parent, "/");
            else { memcpy(parent, path, pl); parent[pl] = 0; }
            break;
        }
        seg = end + 1;
    }
    if (d > RESPOOL_DEPTH_MAX) return core_fail(err, errlen, -EINVAL, "pool path \"%s\": deeper than %d levels", path, RESPOOL_DEPTH_MAX);
    if (d == 1 && strcmp(name, "root") == 0)
        return core_fail(err, errlen, -EINVAL, "pool path \"/root\": the name \"root\" is reserved for the root pool");
    *depth = d;
    return 0;
}

/* The pool's own settings. */
static int check_own(const char *path, const struct respool_config *c, char *err, size_t errlen) {
    char a[48], b[48];
    for (int k = 0; k < RES_NKINDS; k++) {
        const struct respool_kind_cfg *r = &c->res[k];
        const char *kn = res_kind_name((enum res_kind)k);
        if (r->reservation < 0)
            return core_fail(err, errlen, -EINVAL, "pool %s: %s reservation %lld is negative", path, kn, (long long)r->reservation);
        if (r->limit < 0)
            return core_fail(err, errlen, -EINVAL, "pool %s: %s limit %lld is negative", path, kn, (long long)r->limit);
        if (r->share < 0)
            return core_fail(err, errlen, -EINVAL, "pool %s: %s share %.3f is negative", path, kn, r->share / 1000.0);
        if (r->share > SHARE_MAX)
            return core_fail(err, errlen, -EINVAL, "pool %s: %s share %.3f exceeds the maximum %lld", path, kn, r->share / 1000.0,
                        (long long)(SHARE_MAX / RESPOOL_SHARE_ONE));
        if (r->reservation > r->limit) {
            fmtq((enum res_kind)k, r->reservation, a, sizeof a);
            fmtq((enum res_kind)k, r->limit, b, sizeof b);
            return core_fail(err, errlen, -EINVAL, "pool %s: %s reservation %s exceeds its limit %s", path, kn, a, b);
        }
    }
    if (c->controller_limit_pct < 0 || c->controller_limit_pct > PCT_MAX)
        return core_fail(err, errlen, -EINVAL, "pool %s: controller limit %.3f%% is outside [0, 100]", path,
                    c->controller_limit_pct / 1000.0);
    if (c->slack_limit_pct < 0 || c->slack_limit_pct > PCT_MAX)
        return core_fail(err, errlen, -EINVAL, "pool %s: slack limit %.3f%% is outside [0, 100]", path, c->slack_limit_pct / 1000.0);
    if (c->policy != RESPOOL_PRIORITY_FIFO)
        return core_fail(err, errlen, -EINVAL, "pool %s: unknown scheduling policy %d (PriorityFIFO)", path, (int)c->policy);
    return 0;
}

/* Reservation sum of parent's children with `self` (may be NULL: a new
 * child) counted at `self_res` instead of its current reservation. */
static int64_t children_reservation(const struct respool *parent, const struct respool *self, int64_t self_res,
                                    bool self_is_new, enum res_kind k) {
    int64_t sum = self_is_new ? self_res : 0;
    for (const struct respool *c = parent->first_child; c; c = c->next_sibling)
        sum = res_add(sum, c == self ? self_res : c->cfg.res[k].reservation);
    return sum;
}

/* Rules between a pool (existing `self`, or a new one when self is NULL) with
 * config c, its parent, and its children. */
static int check_relations(const char *path, const struct respool *parent, const struct respool *self,
                           const struct respool_config *c, char *err, size_t errlen) {
    char a[48], b[48];
    for (int k = 0; k < RES_NKINDS; k++) {
        enum res_kind kind = (enum res_kind)k;
        const char *kn = res_kind_name(kind);
        if (parent->parent) { /* not under the root */
            int64_t plim = respool_effective_limit(parent, kind);
            if (c->res[k].limit != RES_UNLIMITED && c->res[k].limit > plim) {
                fmtq(kind, c->res[k].limit, a, sizeof a);
                fmtq(kind, plim, b, sizeof b);
                return core_fail(err, errlen, -EINVAL, "pool %s: %s limit %s exceeds parent %s limit %s", path, kn, a,
                            parent->path, b);
            }
            int64_t sum = children_reservation(parent, self, c->res[k].reservation, self == NULL, kind);
            if (sum > parent->cfg.res[k].reservation) {
                fmtq(kind, sum, a, sizeof a);
                fmtq(kind, parent->cfg.res[k].reservation, b, sizeof b);
                return core_fail(err, errlen, -EINVAL,
                            "pool %s: children of %s would reserve %s %s, more than its reservation %s", path,
                            parent->path, a, kn, b);
            }
        }
        if (!self) continue;
        int64_t sum = 0;
        for (const struct respool *ch = self->first_child; ch; ch = ch->next_sibling) {
            sum = res_add(sum, ch->cfg.res[k].reservation);
            if (c->res[k].limit != RES_UNLIMITED && ch->cfg.res[k].limit != RES_UNLIMITED &&
                ch->cfg.res[k].limit > c->res[k].limit) {
                fmtq(kind, c->res[k].limit, a, sizeof a);
                fmtq(kind, ch->cfg.res[k].limit, b, sizeof b);
                return core_fail(err, errlen, -EINVAL, "pool %s: %s limit %s is below child %s limit %s", path, kn, a, ch->path, b);
            }
        }
        if (self->first_child && sum > c->res[k].reservation) {
            fmtq(kind, c->res[k].reservation, a, sizeof a);
            fmtq(kind, sum, b, sizeof b);
            return core_fail(err, errlen, -EINVAL, "pool %s: %s reservation %s is below its children's total reservation %s", path,
                        kn, a, b);
        }
    }
    return 0;
}

bool respool_holds_work(const struct respool *p) {
    for (int u = 0; u < UC_NCLASSES; u++)
        if (!resvec_is_zero(p->alloc.c[u]) || !resvec_is_zero(p->pending.c[u])) return true;
    return p->admit != NULL;
}

int respool_create(struct respool_tree *t, const char *path, const struct respool_config *cfg,
                   struct respool **out, char *err, size_t errlen) {
    char parent_path[RESPOOL_PATH_MAX], name[RESPOOL_NAME_MAX + 1];
    int depth = 0, rc;
    if ((rc = path_check(path, parent_path, name, &depth, err, errlen))) return rc;
    if (respool_lookup(t, path)) {
        core_fail(err, errlen, -EINVAL, "pool %s: already exists (sibling names are unique)", path);
        return -EEXIST;
    }
    struct respool *parent = respool_lookup(t, parent_path);
    if (!parent) {
        core_fail(err, errlen, -EINVAL, "pool %s: parent %s does not exist", path, parent_path);
        return -ENOENT;
    }
    if (parent->parent && respool_holds_work(parent))
        return core_fail(err, errlen, -EINVAL, "pool %s: parent %s holds work; only leaf pools hold work", path, parent_path);
    if (parent->deleting)
        return core_fail(err, errlen, -EPERM, "pool %s: parent %s is being deleted; it takes no new child pools", path,
                         parent_path);
    if ((rc = check_own(path, cfg, err, errlen))) return rc;
    if ((rc = check_relations(path, parent, NULL, cfg, err, errlen))) return rc;

    struct respool *p = pool_alloc(path, name);
    uint32_t idx;
    if (!p || index_take(t, &idx)) {
        if (p) pool_free(p);
        core_fail(err, errlen, -EINVAL, "pool %s: out of memory", path);
        return -ENOMEM;
    }
    p->cfg = *cfg;
    p->depth = depth;
    p->index = idx;
    if (names_grow(t) || map_put(t, p)) {
        t->free_idx[t->nfree++] = idx;
        pool_free(p);
        core_fail(err, errlen, -EINVAL, "pool %s: out of memory", path);
        return -ENOMEM;
    }
    t->by_index[idx] = p;
    names_put(t, p);
    p->parent = parent;
    p->prev_sibling = parent->last_child;
    if (parent->last_child) parent->last_child->next_sibling = p;
    else parent->first_child = p;
    parent->last_child = p;
    parent->nchildren++;
    t->preorder_dirty = true;
    if (out) *out = p;
    return 0;
}

int respool_update(struct respool_tree *t, const char *path, const char *parent_path,
                   const struct respool_config *cfg, char *err, size_t errlen) {
    struct respool *p = respool_lookup(t, path);
    if (!p || !p->parent) {
        core_fail(err, errlen, -EINVAL, "pool %s: %s", path ? path : "", p ? "the root cannot be updated" : "not found");
        return p ? -EINVAL : -ENOENT;
    }
    if (parent_path && strcmp(parent_path, p->parent->path) != 0)
        return core_fail(err, errlen, -EINVAL, "pool %s: parent is immutable (is %s, asked %s)", path, p->parent->path, parent_path);
    int rc;
    if ((rc = check_own(path, cfg, err, errlen))) return rc;
    if ((rc = check_relations(path, p->parent, p, cfg, err, errlen))) return rc;
    p->cfg = *cfg;
    return 0;
}

int respool_delete(struct respool_tree *t, const char *path, char *err, size_t errlen) {
    struct respool *p = respool_lookup(t, path);
    if (!p) {
        core_fail(err, errlen, -EINVAL, "pool %s: not found", path ? path : "");
        return -ENOENT;
    }
    if (!p->parent) return core_fail(err, errlen, -EINVAL, "pool /: the root cannot be deleted");
    if (p->first_child) {
        core_fail(err, errlen, -EINVAL, "pool %s: has %d child pools; delete them first", path, p->nchildren);
        return -ENOTEMPTY;
    }
    if (respool_holds_work(p)) {
        core_fail(err, errlen, -EINVAL, "pool %s: holds work; stop its jobs first", path);
        return -EBUSY;
    }
    struct respool *parent = p->parent;
    if (p->prev_sibling) p->prev_sibling->next_sibling = p->next_sibling;
    else parent->first_child = p->next_sibling;
    if (p->next_sibling) p->next_sibling->prev_sibling = p->prev_sibling;
    else parent->last_child = p->prev_sibling;
    parent->nchildren--;
    t->preorder_dirty = true;
    map_del(t, p->path);
    names_del(t, p);
    t->by_index[p->index] = NULL;
    t->free_idx[t->nfree++] = p->index;
    pool_free(p);
    return 0;
}

int respool_validate_tree(const struct respool_tree *t, char *err, size_t errlen) {
    for (struct respool *p = t->root->first_child; p; p = respool_next_preorder(p)) {
        int rc;
        if ((rc = check_own(p->path, &p->cfg, err, errlen))) return rc;
        if ((rc = check_relations(p->path, p->parent, p, &p->cfg, err, errlen))) return rc;
    }
    return 0;
}

/* ---- usage ---- */

enum usage_class usage_class_of(unsigned f) {
    if (f & WF_REVOCABLE) return UC_REVOCABLE;
    return (f & WF_PREEMPTIBLE) ? UC_PREEMPT : UC_NONPREEMPT;
}

void usage_add(struct usage *u, unsigned f, struct resvec r) {
    enum usage_class c = usage_class_of(f);
    u->c[c] = resvec_add(u->c[c], r);
    if ((f & WF_CONTROLLER) && c != UC_REVOCABLE) u->c[UC_CONTROLLER] = resvec_add(u->c[UC_CONTROLLER], r);
}

void usage_sub(struct usage *u, unsigned f, struct resvec r) {
    enum usage_class c = usage_class_of(f);
    u->c[c] = resvec_sub(u->c[c], r);
    if ((f & WF_CONTROLLER) && c != UC_REVOCABLE) u->c[UC_CONTROLLER] = resvec_sub(u->c[UC_CONTROLLER], r);
}

static void rollup_rec(struct respool *p) {
    if (!p->first_child) return;
    memset(&p->alloc, 0, sizeof p->alloc);
    memset(&p->pending, 0, sizeof p->pending);
    for (struct respool *c = p->first_child; c; c = c->next_sibling) {
        rollup_rec(c);
        for (int u = 0; u < UC_NCLASSES; u++) {
            p->alloc.c[u] = resvec_add(p->alloc.c[u], c->alloc.c[u]);
            p->pending.c[u] = resvec_add(p->pending.c[u], c->pending.c[u]);
        }
    }
}

void respool_rollup(struct respool_tree *t) { rollup_rec(t->root); }

int64_t respool_effective_limit(const struct respool *p, enum res_kind k) {
    int64_t lim = RES_UNLIMITED;
    for (; p && p->parent; p = p->parent) lim = res_min(lim, p->cfg.res[k].limit);
    return lim;
}

static struct resvec pct_of_reservation(const struct respool *p, int64_t pct) {
    struct resvec r;
    for (int k = 0; k < RES_NKINDS; k++) {
        int64_t res = p->cfg.res[k].reservation, prod;
        r.v[k] = __builtin_mul_overflow(res, pct, &prod) ? (int64_t)((__int128)res * pct / PCT_MAX) : prod / PCT_MAX;
    }
    return r;
}
struct resvec respool_controller_limit(const struct respool *p) {
    return pct_of_reservation(p, p->cfg.controller_limit_pct);
}
struct resvec respool_slack_limit(const struct respool *p) { return pct_of_reservation(p, p->cfg.slack_limit_pct); }
