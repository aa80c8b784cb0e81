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
    return 0;
}

static void heap_delete(struct heap *h, uint32_t i) {
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
    for (int i = 0; i < ADMIT_NQUEUES; i++) free(a->q[i].a);
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

int admit_why_format(const struct gang *g, char *buf, size_t len) {
    const char *path = g->pool ? g->pool->path : "(none)";
    const struct admit_why *w = &g->why;
    if (w->check == ADMIT_CHECK_NONE) {
        if (!g->qid_) return snprintf(buf, len, "pool %s: not queued", path);
        return snprintf(buf, len, "pool %s: queued behind higher-priority or earlier gangs", path);
    }
    if (w->check == ADMIT_CHECK_DELETING)
        return snprintf(buf, len, "pool %s: is being deleted; it admits no new work", path);
    char lim[48], al[48], gq[48];
    quantity_format(w->kind, w->limit, lim, sizeof lim);
    quantity_format(w->kind, w->alloc, al, sizeof al);
    quantity_format(w->kind, w->gang, gq, sizeof gq);
    const char *what = w->check == ADMIT_CHECK_ENTITLEMENT ? "allocation"
                       : w->check == ADMIT_CHECK_SLACK     ? "revocable allocation"
                       : w->check == ADMIT_CHECK_CONTROLLER ? "controller allocation"
                                                            : "non-preemptible allocation";
    return snprintf(buf, len, "pool %s: %s %s %s < %s %s + gang %s", path, res_kind_name(w->kind),
                    admit_check_name(w->check), lim, what, al, gq);
}
