#include "errmsg.h"
#include "admit.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quantity.h"

/* A binary min-heap on (priority desc, seq asc). The key is copied into the
 * entry so that sifting compares without touching the gangs; each gang keeps
 * its position (qpos_) so that removal is O(log n). */
struct heap_ent {
    uint32_t prio;
    uint64_t seq;
    struct gang *g;
};

struct heap {
    struct heap_ent *a;
    uint32_t n, cap;
    /* The entries in queue order, made when a gang asks its rank and the
     * heap changed since (admit_gang_rank); freed with the heap. */
    struct heap_ent *sorted;
    bool stale;
};

struct admit_leaf {
    struct heap q[ADMIT_NQUEUES];
    uint64_t next_seq;
};

static inline bool ent_before(const struct heap_ent *x, const struct heap_ent *y) {
    if (x->prio != y->prio) return x->prio > y->prio;
    return x->seq < y->seq;
}

static void sift_up(struct heap *h, uint32_t i) {
    struct heap_ent e = h->a[i];
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (!ent_before(&e, &h->a[parent])) break;
        h->a[i] = h->a[parent];
        h->a[i].g->qpos_ = i;
        i = parent;
    }
    h->a[i] = e;
    e.g->qpos_ = i;
}

static void sift_down(struct heap *h, uint32_t i) {
    struct heap_ent e = h->a[i];
    uint32_t n = h->n;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && ent_before(&h->a[c + 1], &h->a[c])) c++;
        if (!ent_before(&h->a[c], &e)) break;
        h->a[i] = h->a[c];
        h->a[i].g->qpos_ = i;
        i = c;
    }
    h->a[i] = e;
    e.g->qpos_ = i;
}

static int heap_push(struct heap *h, struct gang *g) {
    if (h->n == h->cap) {
        if (h->cap >= UINT32_MAX / 2) return -ENOMEM;
        uint32_t cap = h->cap ? h->cap * 2 : 16;
        struct heap_ent *a = realloc(h->a, (size_t)cap * sizeof *a);
        if (!a) return -ENOMEM;
        h->a = a;
        h->cap = cap;
    }
    h->a[h->n] = (struct heap_ent){g->priority, g->seq, g};
    sift_up(h, h->n++);
    h->stale = true;
    return 0;
}

static void heap_delete(struct heap *h, uint32_t i) {
    h->stale = true;
    h->n--;
    if (i == h->n) return;
    h->a[i] = h->a[h->n];
    h->a[i].g->qpos_ = i;
    if (i > 0 && ent_before(&h->a[i], &h->a[(i - 1) / 2])) sift_up(h, i);
    else sift_down(h, i);
}

/* ---- gangs and queues ---- */

void admit_gang_init(struct gang *g, const char *id, uint32_t priority, unsigned flags, uint32_t ntasks,
                     struct resvec demand) {
    memset(g, 0, sizeof *g);
    g->id = id;
    g->priority = priority;
    g->flags = flags;
    g->ntasks = ntasks;
    g->demand = demand;
}


static const char *gid(const struct gang *g) { return g->id ? g->id : "(unnamed)"; }

static struct admit_leaf *leaf_state(struct respool *p) {
    if (!p->admit) p->admit = calloc(1, sizeof(struct admit_leaf));
    return p->admit;
}

int admit_enqueue(struct respool *p, struct gang *g, char *err, size_t errlen) {
    const unsigned known = WF_PREEMPTIBLE | WF_REVOCABLE | WF_CONTROLLER;
    if (g->qid_) return core_fail(err, errlen, -EALREADY, "gang %s: already queued in pool %s", gid(g), g->pool->path);
    if (!respool_is_leaf(p))
        return core_fail(err, errlen, -EINVAL, "gang %s: pool %s is not a leaf; only leaf pools accept work", gid(g),
                    p->path);
    if (g->ntasks == 0) return core_fail(err, errlen, -EINVAL, "gang %s: has no tasks", gid(g));
    if (g->flags & ~known) return core_fail(err, errlen, -EINVAL, "gang %s: unknown work flags 0x%x", gid(g), g->flags);
    for (int k = 0; k < RES_NKINDS; k++)
        if (g->demand.v[k] < 0 || g->demand.v[k] == RES_UNLIMITED)
            return core_fail(err, errlen, -EINVAL, "gang %s: %s demand is negative or unlimited", gid(g),
                        res_kind_name((enum res_kind)k));
    struct admit_leaf *a = leaf_state(p);
    if (!a) return core_fail(err, errlen, -ENOMEM, "gang %s: out of memory", gid(g));
    if (g->flags & WF_REVOCABLE) g->flags |= WF_PREEMPTIBLE;
    g->pool = p;
    g->seq = a->next_seq++;
    g->why = (struct admit_why){0};
    if (heap_push(&a->q[ADMIT_Q_PENDING], g)) return core_fail(err, errlen, -ENOMEM, "gang %s: out of memory", gid(g));
    g->qid_ = ADMIT_Q_PENDING + 1;
    usage_add(&p->pending, g->flags, g->demand);
    return 0;
}

/* Unlinks g from its queue without touching usage. */
static void unqueue(struct gang *g) {
    struct admit_leaf *a = g->pool->admit;
    heap_delete(&a->q[g->qid_ - 1], g->qpos_);
    g->qid_ = 0;
}

int admit_remove(struct gang *g) {
    if (!g->qid_) return -ENOENT;
    unqueue(g);
    usage_sub(&g->pool->pending, g->flags, g->demand);
    return 0;
}

/* ---- the checks ---- */

/* alloc + gang <= limit in every kind; else fills why with the first kind over. */
static bool fits(struct resvec alloc, struct resvec gang, struct resvec limit, enum admit_check c,
                 struct admit_why *why) {
    for (int k = 0; k < RES_NKINDS; k++) {
        if (gang.v[k] == 0) continue; /* a kind the gang does not ask for never blocks it */
        if (res_add(alloc.v[k], gang.v[k]) > limit.v[k]) {
            *why = (struct admit_why){c, (enum res_kind)k, alloc.v[k], gang.v[k], limit.v[k]};
            return false;
        }
    }
    return true;
}

static struct resvec reservation_of(const struct respool *p) {
    struct resvec r;
    for (int k = 0; k < RES_NKINDS; k++) r.v[k] = p->cfg.res[k].reservation;
    return r;
}

/* ADMIT_CHECK_NONE when g may be admitted now. */
static enum admit_check check_gang(const struct respool *p, const struct gang *g, struct admit_why *why) {
    unsigned f = g->flags;
    if ((f & WF_CONTROLLER) && !(f & WF_REVOCABLE) &&
        !fits(p->alloc.c[UC_CONTROLLER], g->demand, respool_controller_limit(p), ADMIT_CHECK_CONTROLLER, why))
        return ADMIT_CHECK_CONTROLLER;
    if (!(f & WF_PREEMPTIBLE) &&
        !fits(p->alloc.c[UC_NONPREEMPT], g->demand, reservation_of(p), ADMIT_CHECK_RESERVATION, why))
        return ADMIT_CHECK_RESERVATION;
    if (f & WF_REVOCABLE) {
        if (!fits(p->alloc.c[UC_REVOCABLE], g->demand, p->slack_entitlement, ADMIT_CHECK_SLACK, why))
            return ADMIT_CHECK_SLACK;
    } else if (!fits(usage_nonslack(&p->alloc), g->demand, p->entitlement, ADMIT_CHECK_ENTITLEMENT, why)) {
        return ADMIT_CHECK_ENTITLEMENT;
    }
    return ADMIT_CHECK_NONE;
}

static void admit_one(struct respool *p, struct gang *g) {
    unqueue(g);
    usage_sub(&p->pending, g->flags, g->demand);
    usage_add(&p->alloc, g->flags, g->demand);
    g->why = (struct admit_why){0};
}

/* Admits heads of queue q while they pass; the first failure stays at the head. */
static size_t drain_type_queue(struct respool *p, struct admit_leaf *a, enum admit_queue q, struct gang **out,
                               size_t cap) {
    size_t n = 0;
    while (n < cap && a->q[q].n) {
        struct gang *g = a->q[q].a[0].g;
        struct admit_why why;
        if (check_gang(p, g, &why) != ADMIT_CHECK_NONE) {
            g->why = why;
            break;
        }
        admit_one(p, g);
        out[n++] = g;
    }
    return n;
}

size_t admit_pool_round(struct respool *p, struct gang **out, size_t cap) {
    struct admit_leaf *a = p->admit;
    if (!a) return 0;
    if (p->deleting) { /* the pool is going: everything waits, and says why */
        for (int q = 0; q < ADMIT_NQUEUES; q++)
            if (a->q[q].n) a->q[q].a[0].g->why = (struct admit_why){.check = ADMIT_CHECK_DELETING};
        return 0;
    }
    size_t n = 0;
    n += drain_type_queue(p, a, ADMIT_Q_CONTROLLER, out + n, cap - n);
    n += drain_type_queue(p, a, ADMIT_Q_NONPREEMPT, out + n, cap - n);
    n += drain_type_queue(p, a, ADMIT_Q_REVOCABLE, out + n, cap - n);
    struct heap *h = &a->q[ADMIT_Q_PENDING];
    while (n < cap && h->n) {
        struct gang *g = h->a[0].g;
        struct admit_why why;
        enum admit_check c = check_gang(p, g, &why);
        if (c == ADMIT_CHECK_NONE) {
            admit_one(p, g);
            out[n++] = g;
            continue;
        }
        g->why = why;
        if (c == ADMIT_CHECK_ENTITLEMENT) break; /* head of line: the pool waits for it */
        enum admit_queue to = c == ADMIT_CHECK_CONTROLLER ? ADMIT_Q_CONTROLLER
                              : c == ADMIT_CHECK_RESERVATION ? ADMIT_Q_NONPREEMPT
                                                             : ADMIT_Q_REVOCABLE;
        heap_delete(h, 0);
        if (heap_push(&a->q[to], g)) {
            /* out of memory: put it back where it was (the slot just freed) */
            heap_push(h, g);
            break;
        }
        g->qid_ = (uint8_t)(to + 1);
    }
    return n;
}

size_t admit_round(struct respool_tree *t, struct gang **out, size_t cap) {
    size_t n = 0, cnt;
    struct respool *const *order = respool_preorder(t, &cnt);
    if (order) {
        for (size_t i = 0; i < cnt && n < cap; i++)
            if (order[i]->admit) n += admit_pool_round(order[i], out + n, cap - n);
        return n;
    }
    /* no memory for the cached order: walk the tree */
    for (struct respool *p = respool_root(t); p && n < cap; p = respool_next_preorder(p))
        if (p->admit) n += admit_pool_round(p, out + n, cap - n);
    return n;
}

int admit_release(struct respool *p, unsigned flags, struct resvec r) {
    if (!respool_is_leaf(p)) return -EINVAL;
    enum usage_class c = usage_class_of(flags);
    bool ctl = (flags & WF_CONTROLLER) && c != UC_REVOCABLE;
    for (int k = 0; k < RES_NKINDS; k++) {
        if (r.v[k] < 0 || r.v[k] > p->alloc.c[c].v[k]) return -EINVAL;
        if (ctl && r.v[k] > p->alloc.c[UC_CONTROLLER].v[k]) return -EINVAL;
    }
    usage_sub(&p->alloc, flags, r);
    return 0;
}

/* ---- queries and teardown ---- */

struct gang *admit_head(const struct respool *p, enum admit_queue q) {
    const struct admit_leaf *a = p->admit;
    if (!a || (unsigned)q >= ADMIT_NQUEUES || !a->q[q].n) return NULL;
    return a->q[q].a[0].g;
}

size_t admit_queued(const struct respool *p, int q) {
    const struct admit_leaf *a = p->admit;
    if (!a || q >= ADMIT_NQUEUES) return 0;
    if (q >= 0) return a->q[q].n;
    size_t n = 0;
    for (int i = 0; i < ADMIT_NQUEUES; i++) n += a->q[i].n;
    return n;
}

int admit_gang_queue(const struct gang *g) { return g->qid_ ? g->qid_ - 1 : -1; }

static void leaf_free(struct respool *p) {
    struct admit_leaf *a = p->admit;
    if (!a) return;
    for (int i = 0; i < ADMIT_NQUEUES; i++) {
        free(a->q[i].a);
        free(a->q[i].sorted);
    }
    free(a);
    p->admit = NULL;
}

int admit_pool_release(struct respool *p) {
    if (admit_queued(p, -1)) return -EBUSY;
    leaf_free(p);
    return 0;
}

void admit_tree_release(struct respool_tree *t) {
    uint32_t lim = respool_index_limit(t);
    for (uint32_t i = 0; i < lim; i++) {
        struct respool *p = respool_by_index(t, i);
        if (p) leaf_free(p);
    }
}

const char *admit_check_name(enum admit_check c) {
    switch (c) {
    case ADMIT_CHECK_ENTITLEMENT: return "entitlement";
    case ADMIT_CHECK_SLACK: return "slack entitlement";
    case ADMIT_CHECK_CONTROLLER: return "controller limit";
    case ADMIT_CHECK_RESERVATION: return "reservation";
    case ADMIT_CHECK_DELETING: return "deletion";
    case ADMIT_CHECK_NONE: break;
    }
    return "none";
}

static int cmp_ent(const void *x, const void *y) {
    const struct heap_ent *a = x, *b = y;
    return ent_before(a, b) ? -1 : ent_before(b, a) ? 1 : 0;
}

uint32_t admit_gang_rank(const struct gang *g) {
    if (!g->qid_ || !g->pool || !g->pool->admit) return 0;
    if (g->qpos_ == 0) return 1; /* the head */
    struct heap *h = &((struct admit_leaf *)g->pool->admit)->q[g->qid_ - 1];
    if (h->stale || !h->sorted) {
        struct heap_ent *s = realloc(h->sorted, (size_t)h->cap * sizeof *s);
        if (!s) return 0;
        memcpy(s, h->a, (size_t)h->n * sizeof *s);
        qsort(s, h->n, sizeof *s, cmp_ent);
        h->sorted = s;
        h->stale = false;
    }
    struct heap_ent key = {g->priority, g->seq, NULL};
    uint32_t lo = 0, hi = h->n;
    while (lo < hi) { /* the first entry not before g's: g's own (seq is unique in a leaf) */
        uint32_t mid = lo + (hi - lo) / 2;
        if (ent_before(&h->sorted[mid], &key)) lo = mid + 1;
        else hi = mid;
    }
    return lo < h->n && h->sorted[lo].g == g ? lo + 1 : 0;
}

static const char *queue_name(int q) {
    switch (q) {
    case ADMIT_Q_PENDING: return "";
    case ADMIT_Q_NONPREEMPT: return "non-preemptible ";
    case ADMIT_Q_CONTROLLER: return "controller ";
    case ADMIT_Q_REVOCABLE: return "revocable ";
    }
    return "";
}

int admit_amount_format(enum res_kind k, int64_t v, char *buf, size_t len) {
    char q[40];
    quantity_format_display(k, v, q, sizeof q);
    const char *unit = k == RES_CPU   ? (v == 1000 ? " core" : " cores")
                       : k == RES_GPU ? (v == 1000 ? " GPU" : " GPUs")
                                      : "";
    return snprintf(buf, len, "%s%s", q, unit);
}

int admit_why_format(const struct gang *g, char *buf, size_t len) {
    const char *path = g->pool ? g->pool->path : "(none)";
    const struct admit_why *w = &g->why;
    char pos[96] = "";
    uint32_t rank = admit_gang_rank(g);
    if (rank)
        snprintf(pos, sizeof pos, "position %u of %zu in the pool's %squeue", rank,
                 admit_queued(g->pool, admit_gang_queue(g)), queue_name(admit_gang_queue(g)));
    if (w->check == ADMIT_CHECK_NONE) {
        if (!g->qid_) return snprintf(buf, len, "pool %s: not queued", path);
        return snprintf(buf, len, "pool %s: queued behind higher-priority or earlier gangs, %s; admitted after the %u "
                        "ahead of it", path, pos, rank ? rank - 1 : 0);
    }
    if (w->check == ADMIT_CHECK_DELETING)
        return snprintf(buf, len, "pool %s: is being deleted; it admits no new work (create the pod in another pool)",
                        path);
    char lim[64], al[48], gq[48], need[64];
    admit_amount_format(w->kind, w->limit, lim, sizeof lim);
    quantity_format_display(w->kind, w->alloc, al, sizeof al);
    quantity_format_display(w->kind, w->gang, gq, sizeof gq);
    const char *to = w->check == ADMIT_CHECK_ENTITLEMENT ? ""
                     : w->check == ADMIT_CHECK_SLACK     ? " to revocable work"
                     : w->check == ADMIT_CHECK_CONTROLLER ? " to controllers"
                                                          : " to non-preemptible work";
    const char *work = w->check == ADMIT_CHECK_ENTITLEMENT ? "work"
                       : w->check == ADMIT_CHECK_SLACK     ? "revocable work"
                       : w->check == ADMIT_CHECK_CONTROLLER ? "controllers' work"
                                                            : "non-preemptible work";
    int n = snprintf(buf, len, "pool %s at its %s %s: %s of %s allocated%s, gang needs %s%s%s", path,
                     res_kind_name(w->kind), admit_check_name(w->check), al, lim, to, gq, pos[0] ? "; " : "", pos);
    if (n < 0 || (size_t)n >= len) return n;
    int64_t short_by = w->alloc + w->gang - w->limit;
    if (short_by <= 0) return n; /* the numbers moved since it was tried: it is tried again next round */
    admit_amount_format(w->kind, short_by, need, sizeof need);
    if (w->gang > w->limit) /* no work ending is enough */
        return n + snprintf(buf + n, len - (size_t)n, "; admitted once its %s grows by %s (the gang is larger than "
                            "the whole %s)", admit_check_name(w->check), need, admit_check_name(w->check));
    return n + snprintf(buf + n, len - (size_t)n, "; admitted once its %s frees %s or its %s grows by %s", work,
                        need, admit_check_name(w->check), need);
}
