/* resmgr's preemption pass (resmgr_int.h): once a period the leader hands
 * the pods on nodes of the pools the planner wants (preempt_pool_wanted:
 * over their entitlement, or with a gang waiting on it) to the planner
 * (preempt.c), marks and evicts the victims it names, and tells both sides
 * why: the victim, the gang that needs the room (intra-pool) or the pools
 * that gain (inter-pool). The model keeps its pods per leaf pool
 * (cluster_pool_first), so a pass where no pool is over costs a walk of the
 * pools, not of the pods. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "labels.h"
#include "quantity.h"
#include "resmgr_int.h"

struct collect {
    struct resmgr *r;
    struct preempt_task *t;
    struct cm_pod **p;
    size_t n, cap;
};

/* A pod the planner sees: on a node, not ended, decoded. */
static bool is_task(const struct cm_pod *p) { return p->node && !p->info.terminal && !p->bad; }

static bool leaving(const struct resmgr *r, const struct cm_pod *p) {
    return p->info.deleting || strmap_get(&r->evicting, p->key);
}

static void collect_one(struct collect *c, struct cm_pod *p, struct respool *leaf) {
    if (c->n == c->cap || !is_task(p)) return;
    struct preempt_task *t = &c->t[c->n];
    t->id = p->key;
    t->pool = leaf;
    t->res = p->info.req;
    t->priority = p->info.priority;
    t->flags = p->info.flags;
    t->state = leaving(c->r, p)               ? TASK_PREEMPTING
               : p->info.phase == POD_RUNNING ? TASK_RUNNING
                                              : TASK_LAUNCHED;
    t->start_ms = p->info.created_ms;
    c->p[c->n++] = p;
}

struct evict_ctx {
    struct resmgr *r;
    char path[600], key[600], uid[128], rv[64];
};

/* A victim the decision was not made about: the pod of that name was
 * replaced (another uid) or changed (another resourceVersion) since. Told
 * once at info; it leaves the victims being evicted, so the next round
 * decides again from the newer pod. */
static void refused(struct evict_ctx *e, const char *what) {
    fprintf(stderr, "level=info msg=\"resmgr: preemption %s refused, the pod changed; decided again\" pod=%s uid=%s "
            "resource_version=%s\n",
            what, e->key, e->uid, e->rv);
    strmap_del(&e->r->evicting, e->key);
}

static void on_deleted(void *ud, const struct kc_response *res) {
    struct evict_ctx *e = ud;
    if (res->status == 409) refused(e, "delete");
    free(e);
}

static void on_marked(void *ud, const struct kc_response *res) {
    struct evict_ctx *e = ud;
    /* 0: cancelled (shutting down); 404: already gone */
    if (res->status == 0 || res->status == 404) {
        free(e);
        return;
    }
    if (res->status == 409) {
        refused(e, "mark");
        free(e);
        return;
    }
    /* graceful: the pod's own period; the uid the decision was made about and
     * the resourceVersion the mark left as preconditions (a change since,
     * by anyone, is a 409: decided again) */
    json_t *marked = json_object_get(kc_response_body(res), "metadata");
    const char *rv = json_string_value(json_object_get(marked, "resourceVersion"));
    snprintf(e->rv, sizeof e->rv, "%s", rv ? rv : "");
    json_t *body = json_pack("{s:s, s:s, s:{s:s?, s:s?}}", "kind", "DeleteOptions", "apiVersion", "v1",
                             "preconditions", "uid", e->uid[0] ? e->uid : NULL, "resourceVersion",
                             e->rv[0] ? e->rv : NULL);
    if (!body || kclient_request(e->r->env.kc, "DELETE", e->path, body, "application/json", on_deleted, e)) free(e);
    json_decref(body);
}

/* Marks the victim (its job manager applies killOnPreempt by it), then
 * deletes it gracefully once the mark is stored. Both writes carry the
 * victim's uid and resourceVersion (the mark the one the model had when it
 * decided, the delete the one the mark left): a pod that took its name
 * since, or that changed since (it ended, was relabelled into another
 * pool, ...), is not touched. */
static void evict(struct resmgr *r, const struct cm_pod *p, const char *why) {
    struct evict_ctx *e = calloc(1, sizeof *e);
    if (!e) return;
    e->r = r;
    snprintf(e->path, sizeof e->path, "/api/v1/namespaces/%s/pods/%s", p->ns, p->name);
    snprintf(e->key, sizeof e->key, "%s", p->key);
    snprintf(e->uid, sizeof e->uid, "%s", p->uid ? p->uid : "");
    snprintf(e->rv, sizeof e->rv, "%s", p->rv ? p->rv : "");
    char at[32];
    ctl_format_ms(ctl_now_ms(), at);
    json_t *patch = json_pack("{s:{s:s?, s:s?, s:{s:s, s:s}}}", "metadata", "uid", e->uid[0] ? e->uid : NULL,
                              "resourceVersion", e->rv[0] ? e->rv : NULL, "annotations", PA_PREEMPTED, why,
                              PA_PREEMPTED_AT, at);
    if (!patch || kclient_request(r->env.kc, "PATCH", e->path, patch, "application/merge-patch+json", on_marked, e))
        free(e);
    json_decref(patch);
}

/* What runs on nodes per pool index, not counting what is on its way out;
 * NULL without memory. The caller frees it. A walk of every pool's pods:
 * only a pass that names victims pays for it. */
static struct resvec *running_by_pool(struct resmgr *r, struct respool *const *all, size_t npools) {
    uint32_t top = 0;
    for (size_t k = 0; k < npools; k++)
        if (all[k]->index > top) top = all[k]->index;
    struct resvec *running = calloc((size_t)top + 1, sizeof *running);
    if (!running) return NULL;
    for (size_t k = 0; k < npools; k++)
        for (struct cm_pod *p = cluster_pool_first(r->cm, all[k]); p; p = cluster_pool_next(p))
            if (is_task(p) && !leaving(r, p)) running[all[k]->index] = resvec_add(running[all[k]->index], p->info.req);
    return running;
}

/* Whether leaf pool p gains from an inter-pool victim v: its work on nodes
 * is below what it is entitled to and asks for, in v's kind. Admission
 * already counts its waiting work as allocation, so what it lacks shows as
 * the gap between its entitlement and what runs on nodes. */
static bool gains(const struct respool *p, const struct preempt_victim *v, const struct resvec *running) {
    if (p->first_child || p == v->pool || !p->parent) return false;
    int64_t want = p->entitlement.v[v->kind];
    if (p->demand.v[v->kind] < want) want = p->demand.v[v->kind];
    return running[p->index].v[v->kind] < want;
}

/* "; for the work of pool(s) /org/b, /org/c": who an inter-pool victim makes
 * room for, appended to its message (nothing when no pool lacks room now). */
static void append_gainers(char *why, size_t len, struct respool *const *all, size_t npools,
                           const struct preempt_victim *v, const struct resvec *running) {
    size_t at = strlen(why), count = 0;
    for (size_t k = 0; k < npools && at < len; k++) {
        if (!gains(all[k], v, running)) continue;
        int w = snprintf(why + at, len - at, "%s%s", count ? ", " : "; for the work of pool(s) ", all[k]->path);
        if (w < 0) break;
        at += (size_t)w;
        count++;
    }
}

/* The other side of an inter-pool preemption: every leaf pool that gains
 * (above) gets a Preempting Event naming the pool that gives back, the
 * numbers and the victims (the intra-pool path tells the waiting gang
 * itself). One Event per (gaining pool, victim pool, kind) in a round. */
static void tell_gainers(struct resmgr *r, const struct preempt_plan *plan, struct cm_pod **pods,
                         struct respool *const *all, size_t npools, const struct resvec *running) {
    for (size_t i = 0; i < plan->n; i++) {
        const struct preempt_victim *v = &plan->v[i];
        if (v->gang_id) continue; /* intra-pool: told above */
        size_t victims = 0, at = 0;
        bool first = true;
        char names[512] = "";
        for (size_t j = 0; j < plan->n; j++) {
            const struct preempt_victim *w = &plan->v[j];
            if (w->gang_id || w->pool != v->pool || w->kind != v->kind) continue;
            if (j < i) first = false;
            if (victims < 8 && at < sizeof names) {
                int k = snprintf(names + at, sizeof names - at, "%s%s/%s", victims ? ", " : "", pods[w->task]->ns,
                                 pods[w->task]->name);
                if (k > 0) at += (size_t)k;
            } else if (victims == 8 && at < sizeof names) {
                at += (size_t)snprintf(names + at, sizeof names - at, ", ...");
            }
            victims++;
        }
        if (!first) continue;
        char over[64];
        quantity_format(v->kind, v->amount, over, sizeof over);
        for (size_t k = 0; k < npools; k++) {
            const struct respool *p = all[k];
            if (!gains(p, v, running)) continue;
            char ent[64], run[64];
            quantity_format(v->kind, p->entitlement.v[v->kind], ent, sizeof ent);
            quantity_format(v->kind, running[p->index].v[v->kind], run, sizeof run);
            ctl_object_event(r->env.kc, RM_COMPONENT, "peloton.io/v1alpha1", "ResourcePool", "", p->name, NULL,
                             "Normal", "Preempting",
                             "preempting %zu pod(s) of pool %s, over its %s%s entitlement by %s for %u checks, "
                             "for this pool's work (%s entitlement %s, running %s): %s",
                             victims, v->pool->path, res_kind_name(v->kind),
                             v->reason == PREEMPT_OVER_SLACK ? " slack" : "", over, v->checks,
                             res_kind_name(v->kind), ent, run, names);
        }
    }
}

void rm_on_preempt(uv_timer_t *tm) {
    struct resmgr *r = tm->data;
    if (!r->leader || !r->recovered || cluster_refresh(r->cm)) return;
    size_t npools = 0, cap = 0;
    struct respool *const *all = respool_preorder(cluster_tree(r->cm), &npools);
    if (!all) return;
    for (size_t k = 0; k < npools; k++) /* the wanted pools' pods: an upper bound of their tasks */
        if (preempt_pool_wanted(&r->ps, all[k]))
            for (struct cm_pod *p = cluster_pool_first(r->cm, all[k]); p; p = cluster_pool_next(p)) cap++;
    struct collect c = {r, calloc(cap ? cap : 1, sizeof *c.t), calloc(cap ? cap : 1, sizeof *c.p), 0, cap};
    struct preempt_plan plan = {0};
    char err[256];
    struct resvec *running = NULL;
    if (!c.t || !c.p) goto out;
    for (size_t k = 0; cap && k < npools; k++)
        if (preempt_pool_wanted(&r->ps, all[k]))
            for (struct cm_pod *p = cluster_pool_first(r->cm, all[k]); p; p = cluster_pool_next(p))
                collect_one(&c, p, all[k]);
    if (preempt_plan(&r->ps, cluster_tree(r->cm), c.t, c.n, &plan, err, sizeof err)) {
        fprintf(stderr, "level=error msg=\"resmgr: preemption: %s\"\n", err);
        goto out;
    }
    if (plan.n) running = running_by_pool(r, all, npools);
    for (size_t i = 0; i < plan.n; i++) {
        const struct preempt_victim *v = &plan.v[i];
        struct cm_pod *p = c.p[v->task];
        char why[600];
        preempt_victim_format(v, why, sizeof why);
        if (!v->gang_id && running) append_gainers(why, sizeof why, all, npools, v, running);
        evict(r, p, why);
        const char *mv[2] = {v->pool ? v->pool->name : "", preempt_reason_name(v->reason)};
        metrics_inc(metrics_series(r->m.preemptions, mv));
        strmap_put(&r->evicting, p->key, (void *)1, NULL);
        ctl_pod_event(r->env.kc, RM_COMPONENT, p->ns, p->name, p->uid, "Warning", "Preempted", "%s", why);
        if (v->gang_id) { /* the other side: the gang that needs the room */
            struct rm_gang *g = strmap_get(&r->gangs, v->gang_id);
            static struct cm_pod *buf[RM_GANG_MAX];
            char nsbuf[256];
            const char *ns, *label;
            if (g && rm_gang_members(r, g->key, buf, RM_GANG_MAX, &ns, &label, nsbuf, sizeof nsbuf))
                ctl_pod_event(r->env.kc, RM_COMPONENT, buf[0]->ns, buf[0]->name, buf[0]->uid, "Normal", "Preempting",
                              "preempting %s/%s: %s", p->ns, p->name, why);
        }
        fprintf(stderr, "level=info msg=\"resmgr: preempt\" pod=%s reason=\"%s\"\n", p->key, why);
    }
    if (running) tell_gainers(r, &plan, c.p, all, npools, running);
out:
    free(running);
    preempt_plan_free(&plan);
    free(c.t);
    free(c.p);
}
