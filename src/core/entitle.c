#include "entitle.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* ---- water-filling ----
 * Slots sorted by cap/w ascending saturate in that order while the fair level
 * lambda = R / W (remaining amount over remaining weight) reaches their cap.
 * The unsaturated rest get floor(R * w / W); the few units left over go one
 * each to the largest remainders (ties to the lower index). Each of those
 * slots has cap > R * w / W, so cap >= floor + 1: no slot passes its cap. */

struct wf_ctx {
    const int64_t *w, *cap, *rem;
};

static int cmp_level(const void *pa, const void *pb, void *arg) {
    const struct wf_ctx *c = arg;
    int64_t i = *(const int64_t *)pa, j = *(const int64_t *)pb;
    __int128 l = (__int128)c->cap[i] * c->w[j], r = (__int128)c->cap[j] * c->w[i];
    if (l != r) return l < r ? -1 : 1;
    return i < j ? -1 : i > j;
}

static int cmp_rem(const void *pa, const void *pb, void *arg) {
    const struct wf_ctx *c = arg;
    int64_t i = *(const int64_t *)pa, j = *(const int64_t *)pb;
    /* rem is indexed by position-free slot id */
    if (c->rem[i] != c->rem[j]) return c->rem[i] > c->rem[j] ? -1 : 1;
    return i < j ? -1 : i > j;
}

/* Moves the `top` largest remainders (ties: lower index) to the front of
 * idx[0..m): a deterministic quickselect, O(m) on average. */
static void select_top(int64_t *idx, size_t m, size_t top, struct wf_ctx *c) {
    size_t lo = 0, hi = m;
    while (hi - lo > 1 && top > lo && top < hi) {
        int64_t pivot = idx[lo + (hi - lo) / 2];
        /* three-way partition by cmp_rem against the pivot */
        size_t lt = lo, i = lo, gt = hi;
        while (i < gt) {
            int r = cmp_rem(&idx[i], &pivot, c);
            if (r < 0) { int64_t x = idx[lt]; idx[lt++] = idx[i]; idx[i++] = x; }
            else if (r > 0) { int64_t x = idx[--gt]; idx[gt] = idx[i]; idx[i] = x; }
            else i++;
        }
        if (top <= lt) hi = lt;
        else if (top >= gt) lo = gt;
        else return; /* the pivot (unique by index) sits across the boundary */
    }
}

int64_t entitle_waterfill(size_t n, const int64_t *w, const int64_t *cap, int64_t amount, int64_t *out,
                          int64_t *scratch) {
    int64_t *idx = scratch, *rem = scratch + n;
    size_t m = 0;
    __int128 W = 0;
    int64_t caps = 0;
    for (size_t i = 0; i < n; i++) {
        out[i] = 0;
        if (w[i] > 0 && cap[i] > 0) {
            idx[m++] = (int64_t)i;
            W += w[i];
            caps = res_add(caps, cap[i]);
        }
    }
    if (amount <= 0 || m == 0) return 0;
    if (caps <= amount) { /* common case: every cap fits */
        for (size_t j = 0; j < m; j++) out[idx[j]] = cap[idx[j]];
        return caps;
    }
    struct wf_ctx ctx = {w, cap, rem};

    /* Saturate every slot whose cap is at or below the current fair level;
     * repeat while that changes the level. Unsaturated slots are kept in
     * idx[0..m). A few passes settle almost every input; past that, sorting
     * by level bounds the work at O(m log m). */
    int64_t R = amount;
    for (int pass = 0;; pass++) {
        size_t keep = 0;
        bool changed = false;
        if (pass < 4) {
            __int128 R0 = R, W0 = W;
            for (size_t j = 0; j < m; j++) {
                int64_t i = idx[j];
                if ((__int128)cap[i] * W0 <= R0 * w[i]) {
                    out[i] = cap[i];
                    R -= cap[i];
                    W -= w[i];
                    changed = true;
                } else {
                    idx[keep++] = i;
                }
            }
        } else {
            qsort_r(idx, m, sizeof *idx, cmp_level, &ctx);
            size_t k = 0;
            for (; k < m; k++) {
                int64_t i = idx[k];
                if ((__int128)cap[i] * W > (__int128)R * w[i]) break;
                out[i] = cap[i];
                R -= cap[i];
                W -= w[i];
            }
            memmove(idx, idx + k, (m - k) * sizeof *idx);
            keep = m - k;
        }
        m = keep;
        if (!changed || m == 0 || pass >= 4) break;
    }
    if (m == 0) return amount - R;

    int64_t given = 0;
    for (size_t j = 0; j < m; j++) {
        int64_t i = idx[j], num64;
        if (W <= INT64_MAX && !__builtin_mul_overflow(R, w[i], &num64)) {
            out[i] = num64 / (int64_t)W; /* 64-bit division when nothing overflows */
            rem[i] = num64 % (int64_t)W;
        } else {
            __int128 num = (__int128)R * w[i];
            out[i] = (int64_t)(num / W);
            rem[i] = (int64_t)(num % W);
        }
        given += out[i];
    }
    size_t left = (size_t)(R - given); /* < m */
    if (left > 0) {
        select_top(idx, m, left, &ctx);
        for (size_t j = 0; j < left; j++) out[idx[j]]++;
    }
    return amount;
}

/* ---- hierarchical entitlement ---- */

static int64_t sat_sum(int64_t a, int64_t b) { return res_add(a, b); }

static void leaf_demand(struct respool *p) {
    /* a pool being deleted admits nothing new: what waits in it asks for nothing */
    struct resvec nonslack = usage_nonslack(&p->alloc), rev = p->alloc.c[UC_REVOCABLE];
    if (!p->deleting) {
        nonslack = resvec_add(nonslack, usage_nonslack(&p->pending));
        rev = resvec_add(rev, p->pending.c[UC_REVOCABLE]);
    }
    struct resvec slack_lim = resvec_any_pos(rev) ? respool_slack_limit(p) : resvec_zero();
    for (int k = 0; k < RES_NKINDS; k++) {
        int64_t d = nonslack.v[k];
        /* revocable cpu runs on slack cpu; its other kinds are real, up to the slack limit */
        if (k != RES_CPU) d = sat_sum(d, res_min(rev.v[k], slack_lim.v[k]));
        p->demand.v[k] = res_min(d, p->cfg.res[k].limit);
    }
    p->slack_demand = rev;
}

/* Children come first in the bottom-up pass, so their usage is final here. */
static void inner_rollup_and_demand(struct respool *p) {
    memset(&p->alloc, 0, sizeof p->alloc);
    memset(&p->pending, 0, sizeof p->pending);
    for (struct respool *c = p->first_child; c; c = c->next_sibling)
        for (int u = 0; u < UC_NCLASSES; u++) {
            p->alloc.c[u] = resvec_add(p->alloc.c[u], c->alloc.c[u]);
            p->pending.c[u] = resvec_add(p->pending.c[u], c->pending.c[u]);
        }
    for (int k = 0; k < RES_NKINDS; k++) {
        int64_t d = 0, sd = 0;
        for (struct respool *c = p->first_child; c; c = c->next_sibling) {
            int64_t dc = c->demand.v[k];
            if (c->cfg.res[k].is_static) dc = res_max(dc, c->cfg.res[k].reservation);
            d = sat_sum(d, dc);
            sd = sat_sum(sd, c->slack_demand.v[k]);
        }
        p->demand.v[k] = p->parent ? res_min(d, p->cfg.res[k].limit) : d;
        p->slack_demand.v[k] = sd;
    }
}

struct scratch {
    struct respool **kids;
    int64_t *w, *cap, *a, *x, *y, *tmp;
};

/* Splits parent p's entitlement in kind k among its m children. */
static void split_kind(struct respool *p, int m, enum res_kind k, struct scratch *s) {
    int64_t E = p->entitlement.v[k];
    size_t n = (size_t)m;
    __int128 sum_a = 0;
    for (int i = 0; i < m; i++) {
        const struct respool_kind_cfg *c = &s->kids[i]->cfg.res[k];
        s->a[i] = c->is_static ? c->reservation : res_min(c->reservation, s->kids[i]->demand.v[k]);
        sum_a += s->a[i];
    }
    /* Phase 1: reservations; scaled down by reservation weight if capacity shrank. */
    if (sum_a > E) {
        for (int i = 0; i < m; i++) {
            s->w[i] = s->kids[i]->cfg.res[k].reservation;
            s->cap[i] = s->a[i];
        }
        entitle_waterfill(n, s->w, s->cap, E, s->x, s->tmp);
        memcpy(s->a, s->x, n * sizeof *s->a);
        sum_a = E;
    }
    int64_t R = E - (int64_t)sum_a;

    /* Phase 2: unmet demand, by share. */
    for (int i = 0; i < m; i++) {
        s->w[i] = s->kids[i]->cfg.res[k].share;
        s->cap[i] = res_max(0, s->kids[i]->demand.v[k] - s->a[i]);
    }
    R -= entitle_waterfill(n, s->w, s->cap, R, s->x, s->tmp);

    /* Phase 3: idle capacity, by share, up to each child's limit. */
    for (int i = 0; i < m; i++) {
        int64_t lim = s->kids[i]->cfg.res[k].limit;
        s->cap[i] = lim == RES_UNLIMITED ? R : res_max(0, lim - s->a[i] - s->x[i]);
    }
    entitle_waterfill(n, s->w, s->cap, R, s->y, s->tmp);

    for (int i = 0; i < m; i++) s->kids[i]->entitlement.v[k] = s->a[i] + s->x[i] + s->y[i];
}

/* Slack cpu goes to revocable cpu demand, by share. */
static void split_slack_cpu(struct respool *p, int m, struct scratch *s) {
    for (int i = 0; i < m; i++) {
        s->w[i] = s->kids[i]->cfg.res[RES_CPU].share;
        s->cap[i] = s->kids[i]->slack_demand.v[RES_CPU];
    }
    entitle_waterfill((size_t)m, s->w, s->cap, p->slack_entitlement.v[RES_CPU], s->x, s->tmp);
    for (int i = 0; i < m; i++) s->kids[i]->slack_entitlement.v[RES_CPU] = s->x[i];
}

/* Slack entitlement of memory, disk and gpu: real resources, so what the pool's
 * entitlement leaves after non-slack work, capped by the slack limit. */
static void set_slack_other_kinds(struct respool *p) {
    struct resvec nonslack = usage_nonslack(&p->alloc), lim = respool_slack_limit(p);
    for (int k = 0; k < RES_NKINDS; k++)
        if (k != RES_CPU)
            p->slack_entitlement.v[k] = res_max(0, res_min(lim.v[k], p->entitlement.v[k] - nonslack.v[k]));
}

int respool_entitle(struct respool_tree *t, struct resvec capacity, int64_t slack_cpu) {
    size_t cnt;
    struct respool *const *order = respool_preorder(t, &cnt);
    if (!order) return -ENOMEM;
    int maxc = 1;
    for (size_t i = 0; i < cnt; i++)
        if (order[i]->nchildren > maxc) maxc = order[i]->nchildren;
    struct scratch s;
    void *mem = malloc((size_t)maxc * (sizeof(struct respool *) + 8 * sizeof(int64_t)));
    if (!mem) return -ENOMEM;
    s.kids = mem;
    s.w = (int64_t *)(s.kids + maxc);
    s.cap = s.w + maxc;
    s.a = s.cap + maxc;
    s.x = s.a + maxc;
    s.y = s.x + maxc;
    s.tmp = s.y + maxc; /* 2 * maxc */

    /* Bottom-up: usage rolled up and demand, children before parents. */
    for (size_t i = cnt; i-- > 0;) {
        if (order[i]->first_child) inner_rollup_and_demand(order[i]);
        else if (order[i]->parent) leaf_demand(order[i]);
        else { order[i]->demand = resvec_zero(); order[i]->slack_demand = resvec_zero(); }
    }

    /* Top-down: each parent splits its entitlement among its children. */
    struct respool *root = order[0];
    root->entitlement = resvec_clamp0(capacity);
    root->slack_entitlement = resvec_zero();
    root->slack_entitlement.v[RES_CPU] = res_max(0, slack_cpu);
    for (size_t i = 0; i < cnt; i++) {
        struct respool *p = order[i];
        if (!p->first_child) continue;
        int m = 0;
        for (struct respool *c = p->first_child; c; c = c->next_sibling) s.kids[m++] = c;
        for (int k = 0; k < RES_NKINDS; k++) split_kind(p, m, (enum res_kind)k, &s);
        split_slack_cpu(p, m, &s);
        for (int j = 0; j < m; j++) set_slack_other_kinds(s.kids[j]);
    }
    free(mem);
    return 0;
}
