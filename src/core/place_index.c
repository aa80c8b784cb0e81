/* The placement search index: a treap keyed by (free cpu, host index) whose
 * nodes carry the per-kind maximum free resources and the union of host
 * classes of their subtree. A search walks the tree in key order and skips
 * any subtree that has no host with enough free resources in every kind.
 * Because cpu is the key, hosts with too little cpu are cut off along one
 * root-to-leaf path, and within the rest the memory maximum is exact, so
 * finding the first host that fits cpu and memory costs O(log n); disk and
 * gpu prune by their maxima. For PACK the first host that passes the filters
 * is the best fit (least free cpu that fits). Updating a host after a
 * placement is an erase and an insert, O(log n) expected. */
#include <errno.h>
#include <stdlib.h>

#include "place_int.h"

/* Free cpu (milli), clamped to [0, 2^32), then the host index. */
static uint64_t host_key(const struct host *h, uint32_t idx) {
    int64_t fc = res_sub(h->allocatable.v[RES_CPU], h->allocated.v[RES_CPU]);
    uint64_t k = fc < 0 ? 0 : fc > (int64_t)UINT32_MAX ? UINT32_MAX : (uint64_t)fc;
    return k << 32 | idx;
}

static uint8_t host_class(const struct host *h) {
    if (h->flags & HOST_CLOSED) return 0;
    if (h->flags & HOST_EXCLUSIVE) return PCLS_EXCL;
    if (h->flags & HOST_BLOCK_TAINT) return (h->flags & HOST_GPU) ? PCLS_GPU_T : PCLS_PLAIN_T;
    return (h->flags & HOST_GPU) ? PCLS_GPU : PCLS_PLAIN;
}

static uint32_t prio(uint32_t i) {
    uint32_t x = i * 0x9e3779b9u + 0x7f4a7c15u;
    x ^= x >> 16;
    x *= 0x85ebca6bu;
    x ^= x >> 13;
    x *= 0xc2b2ae35u;
    return x ^ (x >> 16);
}

static void pull(struct place_index *ix, const struct host_fleet *f, uint32_t t) {
    struct pidx_node *x = &ix->n[t];
    struct resvec fr = host_free(&f->hosts[t]);
    uint8_t acls = x->cls;
    for (int c = 0; c < 2; c++) {
        uint32_t ch = c ? x->r : x->l;
        if (ch == PIDX_NIL) continue;
        const struct pidx_node *y = &ix->n[ch];
        for (int k = 0; k < RES_NKINDS; k++)
            if (y->maxfree[k] > fr.v[k]) fr.v[k] = y->maxfree[k];
        acls |= y->acls;
    }
    for (int k = 0; k < RES_NKINDS; k++) x->maxfree[k] = fr.v[k];
    x->acls = acls;
}

/* Splits t into keys < k (*a) and >= k (*b). */
static void split(struct place_index *ix, const struct host_fleet *f, uint32_t t, uint64_t k,
                  uint32_t *a, uint32_t *b) {
    if (t == PIDX_NIL) { *a = *b = PIDX_NIL; return; }
    struct pidx_node *x = &ix->n[t];
    if (x->key < k) {
        split(ix, f, x->r, k, &x->r, b);
        *a = t;
    } else {
        split(ix, f, x->l, k, a, &x->l);
        *b = t;
    }
    pull(ix, f, t);
}

static uint32_t merge(struct place_index *ix, const struct host_fleet *f, uint32_t a, uint32_t b) {
    if (a == PIDX_NIL) return b;
    if (b == PIDX_NIL) return a;
    if (ix->n[a].pri > ix->n[b].pri) {
        ix->n[a].r = merge(ix, f, ix->n[a].r, b);
        pull(ix, f, a);
        return a;
    }
    ix->n[b].l = merge(ix, f, a, ix->n[b].l);
    pull(ix, f, b);
    return b;
}

static uint32_t insert(struct place_index *ix, const struct host_fleet *f, uint32_t t, uint32_t x) {
    if (t == PIDX_NIL) {
        ix->n[x].l = ix->n[x].r = PIDX_NIL;
        pull(ix, f, x);
        return x;
    }
    if (ix->n[x].pri > ix->n[t].pri) {
        split(ix, f, t, ix->n[x].key, &ix->n[x].l, &ix->n[x].r);
        pull(ix, f, x);
        return x;
    }
    if (ix->n[x].key < ix->n[t].key) ix->n[t].l = insert(ix, f, ix->n[t].l, x);
    else ix->n[t].r = insert(ix, f, ix->n[t].r, x);
    pull(ix, f, t);
    return t;
}

static uint32_t erase(struct place_index *ix, const struct host_fleet *f, uint32_t t, uint64_t k) {
    if (t == PIDX_NIL) return PIDX_NIL; /* not reached: every host is in the tree */
    struct pidx_node *x = &ix->n[t];
    if (x->key == k) return merge(ix, f, x->l, x->r);
    if (k < x->key) x->l = erase(ix, f, x->l, k);
    else x->r = erase(ix, f, x->r, k);
    pull(ix, f, t);
    return t;
}

int pidx_build(struct place_index *ix, const struct host_fleet *f) {
    ix->root = PIDX_NIL;
    ix->count = f->nhosts;
    ix->n = calloc(f->nhosts ? f->nhosts : 1, sizeof *ix->n);
    if (!ix->n) return -ENOMEM;
    for (uint32_t i = 0; i < f->nhosts; i++) {
        struct pidx_node *x = &ix->n[i];
        x->key = host_key(&f->hosts[i], i);
        x->pri = prio(i);
        x->cls = host_class(&f->hosts[i]);
        x->l = x->r = PIDX_NIL;
        ix->root = insert(ix, f, ix->root, i);
    }
    return 0;
}

void pidx_free(struct place_index *ix) {
    free(ix->n);
    ix->n = NULL;
    ix->root = PIDX_NIL;
}

void pidx_update(struct place_index *ix, const struct host_fleet *f, uint32_t idx) {
    struct pidx_node *x = &ix->n[idx];
    ix->root = erase(ix, f, ix->root, x->key);
    x->key = host_key(&f->hosts[idx], idx);
    x->l = x->r = PIDX_NIL;
    ix->root = insert(ix, f, ix->root, idx);
}

struct walk {
    const struct place_index *ix;
    const struct host_fleet *f;
    struct resvec req;
    uint8_t need;
    int (*visit)(void *, uint32_t);
    void *ctx;
};

static bool covers(const int64_t *fr, const struct resvec *req) {
    for (int k = 0; k < RES_NKINDS; k++)
        if (fr[k] < req->v[k]) return false;
    return true;
}

static int walk_node(const struct walk *w, uint32_t t, bool fwd) {
    while (t != PIDX_NIL) {
        const struct pidx_node *x = &w->ix->n[t];
        if (!(x->acls & w->need) || !covers(x->maxfree, &w->req)) return 0;
        if (walk_node(w, fwd ? x->l : x->r, fwd)) return 1;
        if (x->cls & w->need) {
            struct resvec fr = host_free(&w->f->hosts[t]);
            if (covers(fr.v, &w->req) && w->visit(w->ctx, t)) return 1;
        }
        t = fwd ? x->r : x->l; /* tail position: iterate */
    }
    return 0;
}

void pidx_walk(const struct place_index *ix, const struct host_fleet *f, struct resvec req,
               uint8_t need, bool forward, int (*visit)(void *ctx, uint32_t idx), void *ctx) {
    struct walk w = {ix, f, req, need, visit, ctx};
    walk_node(&w, ix->root, forward);
}
