#include "errmsg.h"
#include "preempt.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quantity.h"

void preempt_config_default(struct preempt_config *cfg) {
    cfg->over_checks = 3;
    cfg->intra_pool = true;
}

int preempt_state_init(struct preempt_state *st, const struct preempt_config *cfg) {
    memset(st, 0, sizeof *st);
    if (!cfg || cfg->over_checks == 0) return -EINVAL;
    st->cfg = *cfg;
    return 0;
}

void preempt_state_free(struct preempt_state *st) {
    free(st->over);
    st->over = NULL;
    st->n = 0;
}

static int state_grow(struct preempt_state *st, uint32_t n) {
    if (n <= st->n) return 0;
    uint32_t *o = realloc(st->over, (size_t)n * sizeof *o);
    if (!o) return -ENOMEM;
    memset(o + st->n, 0, (size_t)(n - st->n) * sizeof *o);
    st->over = o;
    st->n = n;
    return 0;
}

uint32_t preempt_state_get(const struct preempt_state *st, const struct respool *p) {
    return p->index < st->n ? st->over[p->index] : 0;
}

int preempt_state_set(struct preempt_state *st, const struct respool *p, uint32_t checks) {
    if (state_grow(st, p->index + 1)) return -ENOMEM;
    st->over[p->index] = checks;
    return 0;
}


/* Cheaper to preempt first; -1: holds no allocation; -2: already leaving. */
static int state_rank(enum task_state s) {
    switch (s) {
    case TASK_READY: return 0;
    case TASK_PLACING: return 1;
    case TASK_PLACED: return 2;
    case TASK_LAUNCHING: return 3;
    case TASK_STARTING:
    case TASK_LAUNCHED: return 4;
    case TASK_RUNNING: return 5;
    case TASK_PREEMPTING:
    case TASK_KILLING: return -2;
    default: return -1;
    }
}

/* ---- ordering ---- */

struct sort_ctx {
    const struct preempt_task *t;
};

static int cmp_newest(const struct preempt_task *a, const struct preempt_task *b, size_t i, size_t j) {
    if (a->start_ms != b->start_ms) return a->start_ms > b->start_ms ? -1 : 1;
    return i < j ? -1 : i > j;
}

/* (a): revocable first, then state, priority, newest, input order. */
static int cmp_giveback(const void *pa, const void *pb, void *arg) {
    const struct sort_ctx *c = arg;
    size_t i = *(const size_t *)pa, j = *(const size_t *)pb;
    const struct preempt_task *a = &c->t[i], *b = &c->t[j];
    int ra = (a->flags & WF_REVOCABLE) ? 0 : 1, rb = (b->flags & WF_REVOCABLE) ? 0 : 1;
    if (ra != rb) return ra - rb;
    int sa = state_rank(a->state), sb = state_rank(b->state);
    if (sa != sb) return sa - sb;
    if (a->priority != b->priority) return a->priority < b->priority ? -1 : 1;
    return cmp_newest(a, b, i, j);
}

/* (b): priority, newest, state, input order. */
static int cmp_displace(const void *pa, const void *pb, void *arg) {
    const struct sort_ctx *c = arg;
    size_t i = *(const size_t *)pa, j = *(const size_t *)pb;
    const struct preempt_task *a = &c->t[i], *b = &c->t[j];
    if (a->priority != b->priority) return a->priority < b->priority ? -1 : 1;
    if (a->start_ms != b->start_ms) return a->start_ms > b->start_ms ? -1 : 1;
    int sa = state_rank(a->state), sb = state_rank(b->state);
    if (sa != sb) return sa - sb;
    return i < j ? -1 : i > j;
}

static int cmp_gang(const void *pa, const void *pb) {
    const struct gang *a = *(struct gang *const *)pa, *b = *(struct gang *const *)pb;
    if (a->priority != b->priority) return a->priority > b->priority ? -1 : 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* ---- the plan ---- */

struct work {
    const struct preempt_task *tasks;
    size_t n;
    size_t *start;       /* bucket of pool index i: order[start[i] .. start[i+1]) */
    size_t *order;       /* task indices grouped by pool */
    size_t *cand, *pick; /* scratch, as large as the largest bucket */
    uint8_t *taken;
    struct resvec *ns, *rev; /* working allocation by pool index */
    uint32_t *counter;       /* new counters by pool index */
    struct preempt_plan *out;
};

static bool is_revocable(const struct preempt_task *t) { return (t->flags & WF_REVOCABLE) != 0; }
static bool is_preemptible(const struct preempt_task *t) { return (t->flags & (WF_PREEMPTIBLE | WF_REVOCABLE)) != 0; }

/* First kind where the task shrinks a positive entry of over, or -1. */
static int shrinks(const struct resvec *over, const struct resvec *res) {
    for (int k = 0; k < RES_NKINDS; k++)
        if (over->v[k] > 0 && res->v[k] > 0) return k;
    return -1;
}

static void push_victim(struct work *w, size_t ti, struct preempt_victim v) {
    const struct preempt_task *t = &w->tasks[ti];
    v.task = ti;
    v.task_id = t->id;
    v.pool = t->pool;
    v.priority = t->priority;
    w->out->v[w->out->n++] = v; /* capacity n was reserved up front */
    w->taken[ti] = 1;
}

/* (a) for leaf p: gives back while anything is over. Returns victims taken. */
static size_t give_back(struct work *w, struct respool *p, uint32_t checks) {
    uint32_t i = p->index;
    struct resvec over_ns = resvec_sub(w->ns[i], p->entitlement);
    struct resvec over_sl = resvec_sub(w->rev[i], p->slack_entitlement);
    struct resvec init_ns = over_ns, init_sl = over_sl;
    size_t m = 0;
    for (size_t j = w->start[i]; j < w->start[i + 1]; j++) {
        size_t ti = w->order[j];
        if (!w->taken[ti] && is_preemptible(&w->tasks[ti])) w->cand[m++] = ti;
    }
    struct sort_ctx ctx = {w->tasks};
    qsort_r(w->cand, m, sizeof *w->cand, cmp_giveback, &ctx);
    size_t taken = 0;
    for (size_t j = 0; j < m; j++) {
        if (!resvec_any_pos(over_ns) && !resvec_any_pos(over_sl)) break;
        size_t ti = w->cand[j];
        const struct preempt_task *t = &w->tasks[ti];
        bool rev = is_revocable(t);
        struct resvec *over = rev ? &over_sl : &over_ns;
        int k = shrinks(over, &t->res);
        if (k < 0) continue;
        *over = resvec_sub(*over, t->res);
        if (rev) w->rev[i] = resvec_sub(w->rev[i], t->res);
        else w->ns[i] = resvec_sub(w->ns[i], t->res);
        push_victim(w, ti, (struct preempt_victim){
                               .reason = rev ? PREEMPT_OVER_SLACK : PREEMPT_OVER_ENTITLEMENT,
                               .kind = (enum res_kind)k,
                               .amount = (rev ? init_sl : init_ns).v[k],
                               .checks = checks,
                           });
        taken++;
    }
    return taken;
}

/* (b) for gang g waiting at a head of leaf p. */
static void displace(struct work *w, struct respool *p, const struct gang *g) {
    uint32_t i = p->index;
    bool slack = g->why.check == ADMIT_CHECK_SLACK;
    struct resvec *alloc = slack ? &w->rev[i] : &w->ns[i];
    struct resvec limit = slack ? p->slack_entitlement : p->entitlement;
    struct resvec need = resvec_zero();
    for (int k = 0; k < RES_NKINDS; k++)
        if (g->demand.v[k] > 0) need.v[k] = res_sub(res_add(alloc->v[k], g->demand.v[k]), limit.v[k]);
    struct resvec init = need;
    if (resvec_any_pos(need)) {
        size_t m = 0;
        for (size_t j = w->start[i]; j < w->start[i + 1]; j++) {
            size_t ti = w->order[j];
            const struct preempt_task *t = &w->tasks[ti];
            if (w->taken[ti] || t->priority >= g->priority) continue;
            if (slack ? !is_revocable(t) : (!is_preemptible(t) || is_revocable(t))) continue;
            w->cand[m++] = ti;
        }
        struct sort_ctx ctx = {w->tasks};
        qsort_r(w->cand, m, sizeof *w->cand, cmp_displace, &ctx);
        size_t np = 0;
        for (size_t j = 0; j < m && resvec_any_pos(need); j++) {
            const struct preempt_task *t = &w->tasks[w->cand[j]];
            if (shrinks(&need, &t->res) < 0) continue;
            need = resvec_sub(need, t->res);
            w->pick[np++] = w->cand[j];
        }
        if (resvec_any_pos(need)) return; /* cannot be covered: no victims for this gang */
        struct resvec short_by = init;
        for (size_t j = 0; j < np; j++) {
            const struct preempt_task *t = &w->tasks[w->pick[j]];
            int k = shrinks(&short_by, &t->res);
            if (k < 0) k = shrinks(&init, &t->res);
            push_victim(w, w->pick[j], (struct preempt_victim){
                                           .reason = PREEMPT_PRIORITY,
                                           .kind = (enum res_kind)(k < 0 ? 0 : k),
                                           .amount = k < 0 ? 0 : init.v[k],
                                           .gang_id = g->id,
                                           .gang_priority = g->priority,
                                           .slack = slack,
                                       });
            short_by = resvec_sub(short_by, t->res);
            *alloc = resvec_sub(*alloc, t->res);
        }
    }
    *alloc = resvec_add(*alloc, g->demand); /* the gang will take this room */
}

int preempt_plan(struct preempt_state *st, struct respool_tree *t, const struct preempt_task *tasks, size_t n,
                 struct preempt_plan *out, char *err, size_t errlen) {
    out->v = NULL;
    out->n = out->cap = 0;
    uint32_t lim = respool_index_limit(t);
    for (size_t j = 0; j < n; j++) {
        const struct preempt_task *x = &tasks[j];
        if (!x->pool || respool_by_index(t, x->pool->index) != x->pool || !respool_is_leaf(x->pool))
            return core_fail(err, errlen, -EINVAL, "task %s: pool %s is not a leaf pool of this tree",
                        x->id ? x->id : "(unnamed)", x->pool ? x->pool->path : "(none)");
    }
    if (state_grow(st, lim)) return core_fail(err, errlen, -ENOMEM, "out of memory");

    struct work w = {.tasks = tasks, .n = n, .out = out};
    w.start = calloc((size_t)lim + 1, sizeof *w.start);
    w.order = malloc((n ? n : 1) * sizeof *w.order);
    w.taken = calloc(n ? n : 1, 1);
    w.ns = malloc((size_t)lim * 2 * sizeof *w.ns);
    w.counter = malloc((size_t)lim * sizeof *w.counter);
    out->v = malloc((n ? n : 1) * sizeof *out->v);
    int rc = 0;
    if (!w.start || !w.order || !w.taken || !w.ns || !w.counter || !out->v) {
        rc = core_fail(err, errlen, -ENOMEM, "out of memory");
        goto done;
    }
    out->cap = n;
    w.rev = w.ns + lim;

    /* Working allocation: what each leaf holds minus what is already leaving. */
    for (uint32_t i = 0; i < lim; i++) {
        struct respool *p = respool_by_index(t, i);
        w.ns[i] = p ? usage_nonslack(&p->alloc) : resvec_zero();
        w.rev[i] = p ? p->alloc.c[UC_REVOCABLE] : resvec_zero();
    }
    /* Bucket the tasks that hold allocation by pool (a counting sort). */
    for (size_t j = 0; j < n; j++) {
        int r = state_rank(tasks[j].state);
        uint32_t i = tasks[j].pool->index;
        if (r == -2) {
            if (is_revocable(&tasks[j])) w.rev[i] = resvec_sub(w.rev[i], tasks[j].res);
            else w.ns[i] = resvec_sub(w.ns[i], tasks[j].res);
        }
        if (r >= 0) w.start[i + 1]++;
    }
    size_t maxb = 0;
    for (uint32_t i = 0; i < lim; i++) {
        size_t b = w.start[i + 1];
        if (b > maxb) maxb = b;
        w.start[i + 1] += w.start[i];
    }
    {
        size_t *fill = malloc(((size_t)lim + 1) * sizeof *fill);
        w.cand = malloc((maxb ? maxb : 1) * 2 * sizeof *w.cand);
        if (!fill || !w.cand) {
            free(fill);
            rc = core_fail(err, errlen, -ENOMEM, "out of memory");
            goto done;
        }
        w.pick = w.cand + (maxb ? maxb : 1);
        memcpy(fill, w.start, ((size_t)lim + 1) * sizeof *fill);
        for (size_t j = 0; j < n; j++)
            if (state_rank(tasks[j].state) >= 0) w.order[fill[tasks[j].pool->index]++] = j;
        free(fill);
    }

    /* (a) inter-pool. */
    for (uint32_t i = 0; i < lim; i++) {
        struct respool *p = respool_by_index(t, i);
        w.counter[i] = 0;
        if (!p || !respool_is_leaf(p)) continue;
        bool over = resvec_first_over(w.ns[i], p->entitlement) >= 0 ||
                    resvec_first_over(w.rev[i], p->slack_entitlement) >= 0;
        uint32_t c = over ? (st->over[i] == UINT32_MAX ? UINT32_MAX : st->over[i] + 1) : 0;
        if (c >= st->cfg.over_checks && give_back(&w, p, c) > 0) c = 0;
        w.counter[i] = c;
    }

    /* (b) intra-pool. */
    if (st->cfg.intra_pool) {
        for (uint32_t i = 0; i < lim; i++) {
            struct respool *p = respool_by_index(t, i);
            if (!p || !p->admit || !respool_is_leaf(p)) continue;
            struct gang *heads[ADMIT_NQUEUES];
            size_t nh = 0;
            for (int q = 0; q < ADMIT_NQUEUES; q++) {
                struct gang *g = admit_head(p, (enum admit_queue)q);
                if (g && (g->why.check == ADMIT_CHECK_ENTITLEMENT || g->why.check == ADMIT_CHECK_SLACK))
                    heads[nh++] = g;
            }
            qsort(heads, nh, sizeof *heads, cmp_gang);
            for (size_t h = 0; h < nh; h++) displace(&w, p, heads[h]);
        }
    }

    memcpy(st->over, w.counter, (size_t)lim * sizeof *w.counter);
done:
    free(w.start);
    free(w.order);
    free(w.taken);
    free(w.ns);
    free(w.counter);
    free(w.cand);
    if (rc) preempt_plan_free(out);
    return rc;
}

bool preempt_pool_wanted(const struct preempt_state *st, const struct respool *p) {
    if (!respool_is_leaf(p)) return false;
    if (resvec_first_over(usage_nonslack(&p->alloc), p->entitlement) >= 0 ||
        resvec_first_over(p->alloc.c[UC_REVOCABLE], p->slack_entitlement) >= 0)
        return true;
    if (!st->cfg.intra_pool || !p->admit) return false;
    for (int q = 0; q < ADMIT_NQUEUES; q++) {
        const struct gang *g = admit_head(p, (enum admit_queue)q);
        if (g && (g->why.check == ADMIT_CHECK_ENTITLEMENT || g->why.check == ADMIT_CHECK_SLACK)) return true;
    }
    return false;
}

void preempt_plan_free(struct preempt_plan *plan) {
    free(plan->v);
    plan->v = NULL;
    plan->n = plan->cap = 0;
}

const char *preempt_reason_name(enum preempt_reason r) {
    switch (r) {
    case PREEMPT_OVER_ENTITLEMENT: return "over-entitlement";
    case PREEMPT_OVER_SLACK: return "over-slack-entitlement";
    case PREEMPT_PRIORITY: return "priority";
    }
    return "unknown";
}

int preempt_victim_format(const struct preempt_victim *v, char *buf, size_t len) {
    char q[48];
    quantity_format(v->kind, v->amount, q, sizeof q);
    const char *path = v->pool ? v->pool->path : "(none)";
    if (v->reason == PREEMPT_PRIORITY)
        return snprintf(buf, len, "priority %u gang %s preempts priority %u (pool %s short of %s %sentitlement by %s)",
                        v->gang_priority, v->gang_id ? v->gang_id : "(unnamed)", v->priority, path,
                        res_kind_name(v->kind), v->slack ? "slack " : "", q);
    return snprintf(buf, len, "pool %s over %s %sentitlement by %s for %u check%s", path, res_kind_name(v->kind),
                    v->reason == PREEMPT_OVER_SLACK ? "slack " : "", q, v->checks, v->checks == 1 ? "" : "s");
}
