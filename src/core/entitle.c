#include "entitle.h"

#include <errno.h>
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

int64_t entitle_waterfill(size_t n, const int64_t *w, const int64_t *cap, int64_t amount, int64_t *out,
                          int64_t *scratch) {
    int64_t *idx = scratch, *rem = scratch + n;
    size_t m = 0;
    __int128 W = 0;
    for (size_t i = 0; i < n; i++) {
        out[i] = 0;
        if (w[i] > 0 && cap[i] > 0) {
            idx[m++] = (int64_t)i;
            W += w[i];
        }
    }
    if (amount <= 0 || m == 0) return 0;
    struct wf_ctx ctx = {w, cap, rem};
    qsort_r(idx, m, sizeof *idx, cmp_level, &ctx);

    int64_t R = amount;
    size_t k = 0;
    for (; k < m; k++) {
        int64_t i = idx[k];
        if ((__int128)cap[i] * W > (__int128)R * w[i]) break;
        out[i] = cap[i];
        R -= cap[i];
        W -= w[i];
    }
    if (k == m) return amount - R;

    int64_t given = 0;
    for (size_t j = k; j < m; j++) {
        int64_t i = idx[j];
        __int128 num = (__int128)R * w[i];
        out[i] = (int64_t)(num / W);
        rem[i] = (int64_t)(num % W);
        given += out[i];
    }
    int64_t left = R - given; /* < m - k */
    if (left > 0) {
        qsort_r(idx + k, m - k, sizeof *idx, cmp_rem, &ctx);
        for (size_t j = k; left > 0; j++, left--) out[idx[j]]++;
    }
    return amount;
}

/* ---- hierarchical entitlement ---- */

static int64_t sat_sum(int64_t a, int64_t b) { return res_add(a, b); }

static void leaf_demand(struct respool *p) {
    struct resvec nonslack = resvec_add(usage_nonslack(&p->alloc), usage_nonslack(&p->pending));
    struct resvec rev = resvec_add(p->alloc.c[UC_REVOCABLE], p->pending.c[UC_REVOCABLE]);
    struct resvec slack_lim = respool_slack_limit(p);
    for (int k = 0; k < RES_NKINDS; k++) {
        int64_t d = nonslack.v[k];
        /* revocable cpu runs on slack cpu; its other kinds are real, up to the slack limit */
        if (k != RES_CPU) d = sat_sum(d, res_min(rev.v[k], slack_lim.v[k]));
        p->demand.v[k] = res_min(d, p->cfg.res[k].limit);
    }
    p->slack_demand = rev;
}

static void inner_demand(struct respool *p) {
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

int respool_entitle(struct respool_tree *t, struct resvec capacity, int64_t slack_cpu) {
    size_t n = respool_count(t);
    struct respool **order = malloc(n * sizeof *order);
    if (!order) return -ENOMEM;
    size_t cnt = 0;
    int maxc = 1;
    for (struct respool *p = respool_root(t); p; p = respool_next_preorder(p)) {
        order[cnt++] = p;
        if (p->nchildren > maxc) maxc = p->nchildren;
    }
    struct scratch s;
    void *mem = malloc((size_t)maxc * (sizeof(struct respool *) + 8 * sizeof(int64_t)));
    if (!mem) { free(order); return -ENOMEM; }
    s.kids = mem;
    s.w = (int64_t *)(s.kids + maxc);
    s.cap = s.w + maxc;
    s.a = s.cap + maxc;
    s.x = s.a + maxc;
    s.y = s.x + maxc;
    s.tmp = s.y + maxc; /* 2 * maxc */

    respool_rollup(t);
    for (size_t i = cnt; i-- > 0;) {
        if (order[i]->first_child) inner_demand(order[i]);
        else if (order[i]->parent) leaf_demand(order[i]);
        else { order[i]->demand = resvec_zero(); order[i]->slack_demand = resvec_zero(); }
    }

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
    }
    for (size_t i = 1; i < cnt; i++) {
        struct respool *p = order[i];
        struct resvec lim = respool_slack_limit(p), nonslack = usage_nonslack(&p->alloc);
        for (int k = 0; k < RES_NKINDS; k++) {
            if (k == RES_CPU) continue;
            p->slack_entitlement.v[k] = res_max(0, res_min(lim.v[k], p->entitlement.v[k] - nonslack.v[k]));
        }
    }
    free(mem);
    free(order);
    return 0;
}
