/* Placement filters: compiling a task's selectors, affinity, tolerations and
 * Peloton constraints to interned ids, and checking one host against them in
 * the order of enum place_reason. Strings a host cannot have (never interned)
 * compile to id 0, which matches no label. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "place_int.h"

static uint32_t find_str(const struct host_fleet *f, const char *s) {
    if (!s) s = "";
    return host_str_find(f, s, strlen(s));
}

static bool parse_int(const char *s, int64_t *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end) return false;
    *out = v;
    return true;
}

static int add_excl(struct place_engine *e, struct ctask *c, uint32_t v, uint32_t *cap) {
    if (!v) return 0;
    for (uint32_t i = 0; i < c->nexcl; i++)
        if (c->excl[i] == v) return 0;
    if (c->nexcl == *cap) {
        uint32_t ncap = *cap ? *cap * 2 : 4;
        uint32_t *n = place_arena_alloc(&e->arena, ncap * sizeof *n);
        if (!n) return -ENOMEM;
        if (c->nexcl) memcpy(n, c->excl, c->nexcl * sizeof *n);
        c->excl = n;
        *cap = ncap;
    }
    c->excl[c->nexcl++] = v;
    return 0;
}

static int compile_cons(struct place_engine *e, const struct place_constraint *pc, struct cnode *out,
                        int depth, struct ctask *c, uint32_t *excap) {
    if (depth > PLACE_MAX_CONSTRAINT_DEPTH) return -EINVAL;
    if ((unsigned)pc->type > PC_OR) return -EINVAL;
    out->type = (uint8_t)pc->type;
    if (pc->type == PC_LABEL) {
        if ((unsigned)pc->kind > PC_HOST || (unsigned)pc->cond > PC_GREATER_THAN || !pc->key)
            return -EINVAL;
        out->kind = (uint8_t)pc->kind;
        out->cond = (uint8_t)pc->cond;
        out->req = pc->requirement;
        if (pc->kind == PC_HOST) {
            out->key = find_str(e->f, pc->key);
            out->value = find_str(e->f, pc->value);
            bool targets = (pc->cond == PC_EQUAL && pc->requirement >= 1) ||
                           (pc->cond == PC_GREATER_THAN && pc->requirement == 0);
            if (targets && out->key && out->key == e->kexcl) {
                int rc = add_excl(e, c, out->value, excap);
                if (rc) return rc;
            }
        } else {
            /* Interned (not just looked up): a task of this gang may carry it. */
            out->key = host_pair_intern(e->f, pc->key, pc->value ? pc->value : "");
            if (!out->key) return -ENOMEM;
        }
        return 0;
    }
    if (pc->nsubs && !pc->subs) return -EINVAL;
    out->nsubs = pc->nsubs;
    if (pc->nsubs) {
        out->subs = place_arena_alloc(&e->arena, pc->nsubs * sizeof *out->subs);
        if (!out->subs) return -ENOMEM;
    }
    for (uint32_t i = 0; i < pc->nsubs; i++) {
        int rc = compile_cons(e, &pc->subs[i], &out->subs[i], depth + 1, c, excap);
        if (rc) return rc;
    }
    return 0;
}

static int compile_expr(struct place_engine *e, const struct place_expr *x, struct cexpr *o,
                        struct ctask *c, uint32_t *excap) {
    if (!x->key || (unsigned)x->op > SEL_LT || (x->nvalues && !x->values)) return -EINVAL;
    o->key = find_str(e->f, x->key);
    o->op = (uint8_t)x->op;
    switch (x->op) {
    case SEL_IN:
    case SEL_NOT_IN:
        if (x->nvalues == 0) return -EINVAL;
        o->vals = place_arena_alloc(&e->arena, x->nvalues * sizeof *o->vals);
        if (!o->vals) return -ENOMEM;
        o->nvals = x->nvalues;
        for (uint32_t i = 0; i < x->nvalues; i++) {
            o->vals[i] = find_str(e->f, x->values[i]);
            if (x->op == SEL_IN && o->key && o->key == e->kexcl) {
                int rc = add_excl(e, c, o->vals[i], excap);
                if (rc) return rc;
            }
        }
        return 0;
    case SEL_EXISTS:
    case SEL_DOES_NOT_EXIST:
        return x->nvalues == 0 ? 0 : -EINVAL;
    case SEL_GT:
    case SEL_LT:
        if (x->nvalues != 1 || !parse_int(x->values[0], &o->num)) return -EINVAL;
        o->num_ok = true;
        return 0;
    }
    return -EINVAL;
}

int place_task_compile(struct place_engine *e, const struct place_task *t, struct ctask *c) {
    struct host_fleet *f = e->f;
    uint32_t excap = 0;
    memset(c, 0, sizeof *c);
    for (int k = 0; k < RES_NKINDS; k++)
        if (t->req.v[k] < 0) return -EINVAL;
    c->req = t->req;
    c->gpu = t->req.v[RES_GPU] > 0;
    c->hint = t->host_hint && t->host_hint[0] ? host_fleet_find(f, t->host_hint) : HOST_NONE;

    if ((t->nselector && !t->selector) || (t->nterms && !t->terms) || (t->ntols && !t->tols) ||
        (t->nlabels && !t->labels))
        return -EINVAL;
    if (t->nselector) {
        c->sel = place_arena_alloc(&e->arena, t->nselector * sizeof *c->sel);
        if (!c->sel) return -ENOMEM;
        c->nsel = t->nselector;
        for (uint32_t i = 0; i < t->nselector; i++) {
            if (!t->selector[i].key) return -EINVAL;
            c->sel[i].key = find_str(f, t->selector[i].key);
            c->sel[i].value = find_str(f, t->selector[i].value);
            if (!strcmp(t->selector[i].key, HOST_LABEL_HOSTNAME) && !c->pinned) {
                c->pinned = true;
                c->only = t->selector[i].value ? host_fleet_find(f, t->selector[i].value) : HOST_NONE;
            }
            if (c->sel[i].key && c->sel[i].key == e->kexcl) {
                int rc = add_excl(e, c, c->sel[i].value, &excap);
                if (rc) return rc;
            }
        }
    }
    if (t->nterms) {
        c->terms = place_arena_alloc(&e->arena, t->nterms * sizeof *c->terms);
        if (!c->terms) return -ENOMEM;
        c->nterms = t->nterms;
        for (uint32_t i = 0; i < t->nterms; i++) {
            const struct place_term *pt = &t->terms[i];
            if (pt->nexprs && !pt->exprs) return -EINVAL;
            c->terms[i].n = pt->nexprs;
            if (!pt->nexprs) continue;
            c->terms[i].e = place_arena_alloc(&e->arena, pt->nexprs * sizeof *c->terms[i].e);
            if (!c->terms[i].e) return -ENOMEM;
            for (uint32_t j = 0; j < pt->nexprs; j++) {
                int rc = compile_expr(e, &pt->exprs[j], &c->terms[i].e[j], c, &excap);
                if (rc) return rc;
            }
        }
    }
    if (t->ntols) {
        c->tols = place_arena_alloc(&e->arena, t->ntols * sizeof *c->tols);
        if (!c->tols) return -ENOMEM;
        c->ntols = t->ntols;
        for (uint32_t i = 0; i < t->ntols; i++) {
            const struct place_toleration *pt = &t->tols[i];
            struct ctol *o = &c->tols[i];
            if ((unsigned)pt->op > TOL_EXISTS ||
                (pt->effect != TOL_ANY_EFFECT && (pt->effect < 0 || pt->effect > TAINT_NO_EXECUTE)))
                return -EINVAL;
            o->op = (uint8_t)pt->op;
            o->effect = pt->effect;
            o->any_key = (!pt->key || !pt->key[0]);
            if (o->any_key && pt->op != TOL_EXISTS) return -EINVAL; /* as Kubernetes validates */
            o->key = o->any_key ? 0 : find_str(f, pt->key);
            o->value = find_str(f, pt->value);
        }
    }
    if (t->constraint) {
        c->cons = place_arena_alloc(&e->arena, sizeof *c->cons);
        if (!c->cons) return -ENOMEM;
        int rc = compile_cons(e, t->constraint, c->cons, 1, c, &excap);
        if (rc) return rc;
    }
    if (t->nlabels) {
        c->pairs = place_arena_alloc(&e->arena, t->nlabels * sizeof *c->pairs);
        if (!c->pairs) return -ENOMEM;
        c->npairs = t->nlabels;
        for (uint32_t i = 0; i < t->nlabels; i++) {
            if (!t->labels[i].key) return -EINVAL;
            c->pairs[i] = host_pair_intern(f, t->labels[i].key, t->labels[i].value);
            if (!c->pairs[i]) return -ENOMEM;
        }
    }
    /* A host with a blocking taint needs some toleration: without one the
     * task skips such hosts in the index. */
    c->need = PCLS_PLAIN;
    if (c->gpu || e->opt.gpu_hosts_any_task) c->need |= PCLS_GPU;
    if (c->ntols) c->need |= (uint8_t)(c->need << 2);
    if (c->nexcl) c->need |= PCLS_EXCL;
    return 0;
}

static bool expr_match(const struct host_fleet *f, uint32_t idx, const struct cexpr *x) {
    uint32_t v = x->key ? host_label_value(f, idx, x->key) : 0;
    switch (x->op) {
    case SEL_IN:
        if (!v) return false;
        for (uint32_t i = 0; i < x->nvals; i++)
            if (x->vals[i] == v) return true;
        return false;
    case SEL_NOT_IN: /* Kubernetes: a host without the key matches NotIn */
        for (uint32_t i = 0; i < x->nvals; i++)
            if (x->vals[i] == v && v) return false;
        return true;
    case SEL_EXISTS:
        return v != 0;
    case SEL_DOES_NOT_EXIST:
        return v == 0;
    case SEL_GT:
    case SEL_LT: {
        int64_t hv;
        if (!v || !x->num_ok || !parse_int(host_str(f, v), &hv)) return false;
        return x->op == SEL_GT ? hv > x->num : hv < x->num;
    }
    }
    return false;
}

static bool affinity_match(const struct host_fleet *f, uint32_t idx, const struct ctask *c) {
    for (uint32_t i = 0; i < c->nterms; i++) {
        const struct cterm *t = &c->terms[i];
        if (t->n == 0) continue;
        bool all = true;
        for (uint32_t j = 0; j < t->n && all; j++) all = expr_match(f, idx, &t->e[j]);
        if (all) return true;
    }
    return false;
}

static bool tolerates(const struct ctol *t, const struct host_taint *x) {
    if (t->effect != TOL_ANY_EFFECT && (uint32_t)t->effect != x->effect) return false;
    if (t->any_key) return true;
    if (t->key != x->key) return false;
    return t->op == TOL_EXISTS || t->value == x->value;
}

/* The first NoSchedule/NoExecute taint of host idx that task c does not
 * tolerate (an index into f->taints), or UINT32_MAX. */
uint32_t place_untolerated(const struct host_fleet *f, uint32_t idx, const struct ctask *c) {
    const struct host *h = &f->hosts[idx];
    if (h->ntaints == 0) return UINT32_MAX; /* f->taints may be NULL */
    const struct host_taint *T = f->taints + h->taint0;
    for (uint32_t i = 0; i < h->ntaints; i++) {
        if (T[i].effect == TAINT_PREFER_NO_SCHEDULE) continue;
        bool ok = false;
        for (uint32_t j = 0; j < c->ntols && !ok; j++) ok = tolerates(&c->tols[j], &T[i]);
        if (!ok) return h->taint0 + i;
    }
    return UINT32_MAX;
}

static bool taints_ok(const struct host_fleet *f, uint32_t idx, const struct ctask *c) {
    return place_untolerated(f, idx, c) == UINT32_MAX;
}

static bool cons_eval(const struct host_fleet *f, uint32_t idx, const struct cnode *n) {
    switch (n->type) {
    case PC_AND:
        for (uint32_t i = 0; i < n->nsubs; i++)
            if (!cons_eval(f, idx, &n->subs[i])) return false;
        return true;
    case PC_OR:
        for (uint32_t i = 0; i < n->nsubs; i++)
            if (cons_eval(f, idx, &n->subs[i])) return true;
        return false;
    default: {
        uint32_t cnt;
        if (n->kind == PC_HOST)
            cnt = n->key ? host_label_count(f, idx, n->key, n->value) : 0;
        else
            cnt = host_count_get(&f->tlabels, host_count_key(idx, n->key));
        return n->cond == PC_LESS_THAN ? cnt < n->req : n->cond == PC_EQUAL ? cnt == n->req : cnt > n->req;
    }
    }
}

/* Why a closed host (HOST_CLOSED) takes nothing, as kube-scheduler would
 * say it: cordoned first (its NodeUnschedulable filter runs first); a host
 * that is not ready and has a taint the task does not tolerate is named by
 * the taint (Kubernetes marks such nodes with not-ready / unreachable
 * taints, and our host manager adds unreachable:NoExecute). */
static enum place_reason closed_reason(const struct host_fleet *f, uint32_t idx, const struct ctask *c) {
    const struct host *h = &f->hosts[idx];
    if (h->flags & HOST_UNSCHEDULABLE) return PR_UNSCHEDULABLE;
    if (h->flags & HOST_NOT_READY)
        return (h->flags & HOST_BLOCK_TAINT) && !taints_ok(f, idx, c) ? PR_TAINT : PR_NOT_READY;
    return PR_DRAINING;
}

enum place_reason place_check(const struct place_engine *e, const struct ctask *c, uint32_t idx) {
    const struct host_fleet *f = e->f;
    const struct host *h = &f->hosts[idx];
    if (h->flags & HOST_CLOSED) return closed_reason(f, idx, c);
    if (h->flags & HOST_EXCLUSIVE) {
        bool ok = false;
        for (uint32_t i = 0; i < c->nexcl && !ok; i++) ok = c->excl[i] == h->exclusive;
        if (!ok) return PR_EXCLUSIVE;
    }
    if ((h->flags & HOST_GPU) && !c->gpu && !e->opt.gpu_hosts_any_task) return PR_GPU_RESERVED;
    for (uint32_t i = 0; i < c->nsel; i++) {
        uint32_t v = c->sel[i].key ? host_label_value(f, idx, c->sel[i].key) : 0;
        if (!v || v != c->sel[i].value) return PR_NODE_SELECTOR;
    }
    if (c->nterms && !affinity_match(f, idx, c)) return PR_NODE_AFFINITY;
    if ((h->flags & HOST_BLOCK_TAINT) && !taints_ok(f, idx, c)) return PR_TAINT;
    if (c->cons && !cons_eval(f, idx, c->cons)) return PR_LABEL_CONSTRAINT;
    int k = place_fit_over(h, &c->req);
    return k < 0 ? PR_NONE : (enum place_reason)(PR_INSUFFICIENT_CPU + k);
}
