/* preempt: Peloton's victims on each candidate node (notes/peloton.md,
 * "Preemption"), as MetaVictims. kube-scheduler proposes victims by pod
 * priority alone; the extender replaces them:
 *   1. preemptible pods of other pools that are over their entitlement
 *      (revocable first, lowest priority, newest first), only while their pool
 *      is still over and they free a kind the node is short of;
 *   2. strictly lower-priority preemptible pods of the preemptor's own pool
 *      (same order); when the preemptor's pool is at its entitlement these are
 *      the only victims that make room in the pool, so they come first until
 *      the pool's shortfall is covered.
 * Non-preemptible pods are never victims. A gang (peloton.io/gang with a
 * size above 1) is one unit: all its members are victims or none, so it is
 * a candidate on a node only when every member still counted is there
 * (kube-scheduler deletes the victims of one node, so a gang spread over
 * nodes is never a victim) and preemptible. A node where no such set makes
 * room is dropped; then the victims not needed are given back (latest
 * first). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ext_int.h"

struct cand {
    struct cm_pod *q;        /* the pod, or the gang's first member met */
    struct respool *pool;
    int cls; /* 1: pool over entitlement, 2: own pool, lower priority */
    bool taken;
    struct resvec req;       /* what taking it frees: the pod's request, or the whole gang's */
    struct cm_pod **members; /* a gang's members (n), owned by the plan; NULL for a single pod */
    size_t n;
};

static int cand_cmp(const void *pa, const void *pb) {
    const struct cand *a = pa, *b = pb;
    if (a->cls != b->cls) return a->cls - b->cls;
    bool ra = a->q->info.flags & WF_REVOCABLE, rb = b->q->info.flags & WF_REVOCABLE;
    if (ra != rb) return ra ? -1 : 1;
    if (a->q->info.priority != b->q->info.priority) return a->q->info.priority < b->q->info.priority ? -1 : 1;
    if (a->q->info.created_ms != b->q->info.created_ms) return a->q->info.created_ms > b->q->info.created_ms ? -1 : 1;
    return strcmp(a->q->key, b->q->key);
}

/* How far pool is over its entitlement for work with these flags (0s when not). */
static struct resvec pool_over(const struct respool *pool, unsigned flags) {
    if (flags & WF_REVOCABLE) return resvec_clamp0(resvec_sub(pool->alloc.c[UC_REVOCABLE], pool->slack_entitlement));
    return resvec_clamp0(resvec_sub(usage_nonslack(&pool->alloc), pool->entitlement));
}

static bool helps(struct resvec v, struct resvec need) {
    for (int k = 0; k < RES_NKINDS; k++)
        if (need.v[k] > 0 && v.v[k] > 0) return true;
    return false;
}

struct plan {
    struct resvec req, free, short_pool;
    struct cand *c;
    size_t n;
};

static bool satisfied(const struct plan *pl) {
    struct resvec node = pl->free, pool = resvec_zero();
    for (size_t i = 0; i < pl->n; i++) {
        if (!pl->c[i].taken) continue;
        node = resvec_add(node, pl->c[i].req);
        if (pl->c[i].cls == 2) pool = resvec_add(pool, pl->c[i].req);
    }
    return resvec_le(pl->req, node) && resvec_le(pl->short_pool, pool);
}

/* What the node and the pool still lack with the victims taken so far. */
static void still_short(const struct plan *pl, struct resvec *node, struct resvec *pool) {
    struct resvec fn = pl->free, fp = resvec_zero();
    for (size_t i = 0; i < pl->n; i++) {
        if (!pl->c[i].taken) continue;
        fn = resvec_add(fn, pl->c[i].req);
        if (pl->c[i].cls == 2) fp = resvec_add(fp, pl->c[i].req);
    }
    *node = resvec_clamp0(resvec_sub(pl->req, fn));
    *pool = resvec_clamp0(resvec_sub(pl->short_pool, fp));
}

/* Is candidate i's pool still over in a kind i would free, after the victims
 * of that pool already taken? */
static bool pool_still_over(const struct plan *pl, size_t i) {
    const struct cand *ci = &pl->c[i];
    struct resvec over = pool_over(ci->pool, ci->q->info.flags);
    for (size_t j = 0; j < pl->n; j++)
        if (pl->c[j].taken && pl->c[j].pool == ci->pool) over = resvec_sub(over, pl->c[j].req);
    return helps(ci->req, over);
}

/* Greedy choice in Peloton's order; true when the preemptor then fits. */
static bool choose(struct plan *pl) {
    struct resvec sn, sp;
    still_short(pl, &sn, &sp);
    if (resvec_any_pos(sp)) /* the pool must shrink first: only its own work makes room in it */
        for (size_t i = 0; i < pl->n && resvec_any_pos(sp); i++)
            if (pl->c[i].cls == 2 && helps(pl->c[i].req, sp)) {
                pl->c[i].taken = true;
                still_short(pl, &sn, &sp);
            }
    for (int cls = 1; cls <= 2; cls++)
        for (size_t i = 0; i < pl->n && resvec_any_pos(sn); i++) {
            struct cand *ci = &pl->c[i];
            if (ci->taken || ci->cls != cls || !helps(ci->req, sn)) continue;
            if (cls == 1 && !pool_still_over(pl, i)) continue;
            ci->taken = true;
            still_short(pl, &sn, &sp);
        }
    if (!satisfied(pl)) return false;
    for (size_t i = pl->n; i-- > 0;) { /* give back what is not needed, latest choice first */
        if (!pl->c[i].taken) continue;
        pl->c[i].taken = false;
        if (!satisfied(pl)) pl->c[i].taken = true;
    }
    return true;
}

static bool victim_ok(const struct cm_pod *q) {
    return !q->bad && !q->info.terminal && !q->info.deleting && q->uid && q->uid[0] &&
           (q->info.flags & WF_PREEMPTIBLE);
}

/* Gang q's members as one candidate on node: every member still counted
 * (not terminal, not already going away) bound there and preemptible; then
 * *members (new array, *n) and their summed request. false: the gang is not
 * a candidate on this node (a member elsewhere, pending, or protected), or
 * out of memory (*oom). */
static bool gang_unit(struct ext_core *x, const struct cm_pod *q, const char *node, struct cm_pod ***members,
                      size_t *n, struct resvec *req, uint32_t *max_prio, bool *oom) {
    size_t cap = 16, k;
    struct cm_pod **m = NULL;
    for (;;) {
        struct cm_pod **m2 = realloc(m, cap * sizeof *m);
        if (!m2) {
            free(m);
            *oom = true;
            return false;
        }
        m = m2;
        k = cluster_gang_members(x->cm, q->ns, q->info.gang, m, cap);
        if (k <= cap) break;
        cap = k;
    }
    size_t w = 0;
    *req = resvec_zero();
    *max_prio = q->info.priority;
    for (size_t i = 0; i < k; i++) {
        struct cm_pod *g = m[i];
        if (g->info.terminal || g->info.deleting) continue;
        if (!g->node || strcmp(g->node, node) || !victim_ok(g)) {
            free(m);
            return false;
        }
        *req = resvec_add(*req, g->info.req);
        if (g->info.priority > *max_prio) *max_prio = g->info.priority;
        m[w++] = g;
    }
    *members = m;
    *n = w;
    return true;
}

static bool same_gang(const struct cm_pod *a, const struct cm_pod *b) {
    return a->info.gang && b->info.gang && !strcmp(a->ns, b->ns) && !strcmp(a->info.gang, b->info.gang);
}

static void plan_clear(struct plan *pl) {
    for (size_t i = 0; i < pl->n; i++) free(pl->c[i].members);
    pl->n = 0;
}

static int empty_result(const struct extender_preemption_args *a, json_t **out, char *err, size_t errlen) {
    return extender_preemption_result(a, NULL, 0, out, err, errlen);
}

static int preempt_pod(struct ext_core *x, const struct extender_preemption_args *a, json_t **out, char *err,
                size_t errlen) {
    *out = NULL;
    x->st.preempts++;
    struct cm_pod *p = ext_pod_for(x, a->pod, err, errlen);
    if (!p) return -EINVAL;
    char why[EXTENDER_MAX_REASON];
    if (cluster_pod_pool_problem(x->cm, p, why, sizeof why)) return empty_result(a, out, err, errlen);
    struct plan pl = {.req = p->info.req};
    struct respool *own = cluster_pod_pool(x->cm, p);
    bool resolvable = true;
    if (cluster_admit_check(x->cm, p, p->info.req, why, sizeof why, &resolvable)) {
        /* the pool refuses the pod: only its own lower-priority work can make room */
        if (!resolvable || !own) return empty_result(a, out, err, errlen);
        struct resvec have = (p->info.flags & WF_REVOCABLE) ? own->alloc.c[UC_REVOCABLE] : usage_nonslack(&own->alloc);
        struct resvec ent = (p->info.flags & WF_REVOCABLE) ? own->slack_entitlement : own->entitlement;
        pl.short_pool = resvec_clamp0(resvec_sub(resvec_add(have, p->info.req), ent));
        for (int k = 0; k < RES_NKINDS; k++)
            if (p->info.req.v[k] <= 0) pl.short_pool.v[k] = 0;
        if (!resvec_any_pos(pl.short_pool)) return empty_result(a, out, err, errlen);
    }
    struct place_engine *e = cluster_engine(x->cm);
    const struct host_fleet *f = cluster_fleet(x->cm);
    if (!e || !f) return empty_result(a, out, err, errlen);
    struct pod_task pt;
    int rc = pod_task_build(p->obj, &p->info, &pt, err, errlen);
    if (rc) return rc;
    /* room held for nominated pods of p's priority or higher and for gangs is not free for p */
    size_t nheld = 0;
    struct ext_held *held = ext_holds_any(x) ? ext_holds_collect(x, p, &nheld) : NULL;
    struct extender_victims *v = calloc(a->nnodes ? a->nnodes : 1, sizeof *v);
    const char **uids = NULL;
    size_t ccap = 64;
    pl.c = malloc(ccap * sizeof *pl.c);
    size_t nv = 0, nuids = 0, ucap = 0;
    rc = v && pl.c ? 0 : -ENOMEM;
    /* first pass: choose per node into a flat uid list; second: point into it */
    size_t *first = calloc(a->nnodes ? a->nnodes : 1, sizeof *first), *count = calloc(a->nnodes ? a->nnodes : 1,
                                                                                       sizeof *count);
    if (!first || !count) rc = -ENOMEM;
    /* every candidate node's filters in one call: the pod is compiled once,
     * not once per node (kube-scheduler sends hundreds at 5,000 nodes) */
    size_t nn = a->nnodes ? a->nnodes : 1;
    uint32_t *hidx = rc ? NULL : malloc(2 * nn * sizeof *hidx), nfound = 0; /* per request node, then found ones */
    uint8_t *reason = rc ? NULL : malloc(nn);
    if (!rc && (!hidx || !reason)) rc = -ENOMEM;
    for (size_t i = 0; !rc && i < a->nnodes; i++) {
        hidx[i] = host_fleet_find(f, a->nodes[i].node);
        if (hidx[i] != HOST_NONE) hidx[nn + nfound++] = hidx[i];
    }
    if (!rc && nfound) rc = place_check_hosts(e, &pt.t, ext_pod_job(p), hidx + nn, nfound, reason);
    for (size_t i = 0, at = 0; !rc && i < a->nnodes; i++) {
        const char *node = a->nodes[i].node;
        uint32_t idx = hidx[i];
        if (idx == HOST_NONE) continue; /* not in the model */
        uint8_t r = reason[at++];
        if (r < PR_INSUFFICIENT_CPU) continue; /* a filter no victim changes */
        plan_clear(&pl);
        pl.free = host_free(&f->hosts[idx]);
        if (nheld) pl.free = resvec_sub(pl.free, ext_holds_on(held, nheld, idx));
        for (struct cm_pod *q = cluster_host_first(x->cm, idx); q; q = cluster_host_next(q)) {
            if (q == p || !victim_ok(q)) continue;
            struct cm_pod **members = NULL;
            size_t nmem = 0;
            struct resvec req = q->info.req;
            uint32_t prio = q->info.priority;
            if (q->info.gang && q->info.gang_size > 1) { /* the gang is one unit: all of it or none */
                bool seen = false, oom = false;
                for (size_t j = 0; j < pl.n && !seen; j++) seen = same_gang(pl.c[j].q, q);
                if (seen) continue;
                if (!gang_unit(x, q, node, &members, &nmem, &req, &prio, &oom)) {
                    if (oom) rc = -ENOMEM;
                    if (oom) break;
                    continue;
                }
            }
            struct respool *qp = cluster_pod_pool(x->cm, q);
            int cls = 0;
            if (qp && qp != own && resvec_any_pos(pool_over(qp, q->info.flags))) cls = 1;
            else if (qp == own && prio < p->info.priority) cls = 2;
            if (!cls) {
                free(members);
                continue;
            }
            if (pl.n == ccap) {
                struct cand *c2 = realloc(pl.c, 2 * ccap * sizeof *pl.c);
                if (!c2) {
                    free(members);
                    rc = -ENOMEM;
                    break;
                }
                pl.c = c2;
                ccap *= 2;
            }
            pl.c[pl.n++] = (struct cand){q, qp, cls, false, req, members, nmem};
        }
        if (rc) break;
        qsort(pl.c, pl.n, sizeof *pl.c, cand_cmp);
        if (!choose(&pl)) continue;
        first[nv] = nuids;
        for (size_t j = 0; !rc && j < pl.n; j++) {
            if (!pl.c[j].taken) continue;
            size_t nm = pl.c[j].members ? pl.c[j].n : 1;
            for (size_t k = 0; k < nm; k++) {
                if (nuids == ucap) {
                    size_t nc = ucap ? 2 * ucap : 64;
                    const char **u2 = realloc(uids, nc * sizeof *uids);
                    if (!u2) {
                        rc = -ENOMEM;
                        break;
                    }
                    uids = u2;
                    ucap = nc;
                }
                uids[nuids++] = pl.c[j].members ? pl.c[j].members[k]->uid : pl.c[j].q->uid;
            }
        }
        count[nv] = nuids - first[nv];
        v[nv].node = (char *)node;
        v[nv].num_pdb_violations = a->nodes[i].num_pdb_violations;
        nv++;
    }
    for (size_t i = 0; !rc && i < nv; i++) {
        v[i].npods = count[i];
        v[i].uids = count[i] ? (char **)(uids + first[i]) : NULL;
    }
    if (!rc) rc = extender_preemption_result(a, v, nv, out, err, errlen);
    if (rc == -ENOMEM) snprintf(err, errlen, "out of memory");
    pod_task_free(&pt);
    free(hidx);
    free(reason);
    free(first);
    free(count);
    free(uids);
    free(held);
    if (pl.c) plan_clear(&pl);
    free(pl.c);
    free(v);
    return rc;
}

/* The pod may have come from the request itself: it leaves the model again. */
int ext_preempt(struct ext_core *x, const struct extender_preemption_args *a, json_t **out, char *err,
                size_t errlen) {
    int rc = preempt_pod(x, a, out, err, errlen);
    ext_pod_release(x);
    if (!rc && *out) {
        const char *node;
        json_t *mv;
        size_t nodes = 0;
        json_object_foreach(json_object_get(*out, "NodeNameToMetaVictims"), node, mv) {
            nodes++;
            metrics_add(x->m.preempt_victims, json_array_size(json_object_get(mv, "Pods")));
        }
        metrics_add(x->m.preempt_nodes, nodes);
        if (!nodes) metrics_inc(x->m.preempt_empty);
    }
    return rc;
}
