/* resmgr's pool controller (resmgr_int.h): writes each pool's entitlement,
 * allocation and demand into its status when they change, and takes our
 * finalizer off a pool marked for deletion once it is empty. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crd_pool.h"
#include "resmgr_int.h"

/* ---- pool deletion ---- */

/* Whether pod p holds work in its pool: not ended, and bound to a node or
 * admitted on its way to one. Pods left waiting in a pool being deleted
 * hold nothing. */
static bool holds_work(const struct cm_pod *p) { return !p->bad && !p->info.terminal && (p->node || p->admitted); }

struct holders {
    const char *pool;
    long long n;
};

static int count_holders(void *ud, struct cm_pod *p) {
    struct holders *h = ud;
    if (p->pool && !strcmp(p->pool, h->pool) && holds_work(p)) h->n++;
    return 0;
}

/* The pods that hold work in pool p (called name): of a leaf, those on its
 * list in the model (every pod counted in it); of an inner pool, which
 * counts none, a walk of every pod (only for the one message below). */
static long long holders_of(struct resmgr *r, const struct respool *p, const char *name) {
    struct holders h = {name, 0};
    if (respool_is_leaf(p)) {
        for (struct cm_pod *q = cluster_pool_first(r->cm, p); q; q = cluster_pool_next(q)) h.n += holds_work(q);
        return h.n;
    }
    cluster_foreach_pod(r->cm, count_holders, &h);
    return h.n;
}

/* Takes our finalizer off every pool marked for deletion that has no child
 * pools and in which no pod holds work; the store then removes it. The
 * resourceVersion the decision was made on is a precondition: a pool that
 * changed meanwhile is looked at again at the next tick. */
static void release_empty_pools(struct resmgr *r) {
    if (!json_object_size(r->terminating)) return;
    struct respool_tree *t = cluster_tree(r->cm);
    const char *name;
    json_t *obj;
    json_object_foreach(r->terminating, name, obj) {
        struct respool *p = crd_pool_find(t, name);
        /* not in the tree: the tree lags behind the objects (or they break a
         * rule): its children and usage are not known, so it waits */
        if (!p) continue;
        bool holds = p->first_child || (respool_is_leaf(p) && holders_of(r, p, name) > 0);
        for (int u = 0; u < UC_NCLASSES; u++) holds |= !resvec_is_zero(p->alloc.c[u]);
        if (holds) {
            if (!json_object_get(r->told_waiting, name)) { /* once: `kubectl describe rp` shows it */
                long long pods = holders_of(r, p, name);
                ctl_object_event(r->env.kc, RM_COMPONENT, "peloton.io/v1alpha1", "ResourcePool", "", name, NULL,
                                 "Normal", "Terminating",
                                 "marked for deletion; it goes once it has no child pools (now %d) and no pod "
                                 "holds work in it (now %lld)",
                                 p->nchildren, pods);
                json_object_set_new(r->told_waiting, name, json_true());
            }
            continue;
        }
        json_object_del(r->told_waiting, name);
        json_t *md = json_object_get(obj, "metadata"), *keep = json_array();
        size_t i;
        json_t *f;
        json_array_foreach(json_object_get(md, "finalizers"), i, f) {
            if (!json_is_string(f) || strcmp(json_string_value(f), CRD_POOL_FINALIZER)) json_array_append(keep, f);
        }
        json_t *patch = json_pack("{s:{s:O, s:o}}", "metadata", "resourceVersion",
                                  json_object_get(md, "resourceVersion"), "finalizers", keep);
        char path[512];
        snprintf(path, sizeof path, "/apis/peloton.io/v1alpha1/resourcepools/%s", name);
        if (patch) kclient_request(r->env.kc, "PATCH", path, patch, "application/merge-patch+json", NULL, NULL);
        json_decref(patch);
        fprintf(stderr, "level=info msg=\"resmgr: pool empty, deletion goes on\" pool=%s\n", name);
    }
}

/* ---- running gangs ---- */

static void held_add(struct resmgr *r, const char *tag, int d) {
    json_t *n = json_object_get(r->held_n, tag);
    json_int_t v = (n ? json_integer_value(n) : 0) + d;
    const char *tab = strchr(tag, '\t');
    char pool[256];
    snprintf(pool, sizeof pool, "%.*s", tab ? (int)(tab - tag) : 0, tag);
    int gangs_d = (v > 0) - (n != NULL); /* +1: the gang's first holder, -1: its last one went */
    if (v > 0) json_object_set_new(r->held_n, tag, json_integer(v));
    else json_object_del(r->held_n, tag);
    if (!gangs_d) return;
    json_t *g = json_object_get(r->running, pool);
    json_int_t gv = (g ? json_integer_value(g) : 0) + gangs_d;
    if (gv > 0) json_object_set_new(r->running, pool, json_integer(gv));
    else json_object_del(r->running, pool);
}

void rm_track_pod(struct resmgr *r, const char *key, const struct cm_pod *p) {
    char tag[1024] = "";
    if (p && !p->bad && p->pool && !p->info.terminal && (p->node || p->admitted)) {
        char gk[600];
        rm_gang_key(p->ns, p->name, p->info.gang && p->info.gang[0] ? p->info.gang : NULL, gk, sizeof gk);
        snprintf(tag, sizeof tag, "%s\t%s", p->pool, gk);
    }
    const char *was = json_string_value(json_object_get(r->holders, key));
    if (was && strcmp(was, tag) == 0) return;
    if (was) {
        held_add(r, was, -1);
        json_object_del(r->holders, key);
    }
    if (tag[0]) {
        held_add(r, tag, +1);
        json_object_set_new(r->holders, key, json_string(tag));
    }
}

static int retrack_each(void *ud, struct cm_pod *p) {
    rm_track_pod(ud, p->key, p);
    return 0;
}

/* After a namespace changed (and the model resolved pods' pools again):
 * every pod counted again (rare, so a walk). */
static void retrack_all(struct resmgr *r) {
    if (!r->retrack) return;
    r->retrack = false;
    json_object_clear(r->holders);
    json_object_clear(r->held_n);
    json_object_clear(r->running);
    cluster_foreach_pod(r->cm, retrack_each, r);
}

/* Pending and running gangs and the held queue head of every pool's subtree,
 * into agg (index: the pool's in pre-order). One pass: a pool's subtree
 * follows it in pre-order, so a pool's sums are complete when the walk
 * leaves its subtree (stack: its open ancestors). 0 or -ENOMEM. */
static int subtree_gangs(struct resmgr *r, struct respool *const *all, size_t n, struct crd_pool_gangs *agg) {
    size_t *open = malloc((n ? n : 1) * sizeof *open), depth = 0;
    if (!open) return -ENOMEM;
    for (size_t i = 0; i <= n; i++) {
        const struct respool *parent = i < n ? all[i]->parent : NULL;
        while (depth && (i == n || all[open[depth - 1]] != parent)) { /* open[depth-1]'s subtree is done */
            size_t done = open[--depth];
            if (!depth) continue;
            struct crd_pool_gangs *up = &agg[open[depth - 1]];
            up->pending += agg[done].pending;
            up->running += agg[done].running;
            if (!up->held) up->held = agg[done].held; /* pre-order: the first held leaf */
        }
        if (i == n) break;
        const struct respool *p = all[i];
        agg[i] = (struct crd_pool_gangs){0, 0, NULL};
        if (respool_is_leaf(p)) {
            agg[i].pending = admit_queued(p, -1);
            agg[i].running = (size_t)json_integer_value(json_object_get(r->running, p->name));
            agg[i].held = crd_pool_held_head(p);
        }
        open[depth++] = i;
    }
    free(open);
    return 0;
}

/* ---- pool status ---- */

/* A status write refused with 409 (the pool changed since the copy it was
 * made from): nothing to do here. The informer brings the newer copy, whose
 * status is not the one sent, so forget_sent_unless_stored (resmgr.c) drops
 * what was sent and the next tick writes from that copy. */
static void on_status_written(void *ud, const struct kc_response *res) {
    char *name = ud;
    if (res->status == 409)
        fprintf(stderr, "level=info msg=\"resmgr: pool status write refused, the pool changed; written again from "
                        "the newer copy\" pool=%s\n", name);
    free(name);
}

void rm_on_status(uv_timer_t *tm) {
    struct resmgr *r = tm->data;
    if (!r->leader || !r->recovered || cluster_refresh(r->cm)) return;
    release_empty_pools(r);
    retrack_all(r);
    rm_metrics_pools(&r->m, cluster_tree(r->cm), cluster_fleet(r->cm));
    char now[40];
    time_t t = time(NULL);
    struct tm utc;
    if (!gmtime_r(&t, &utc) || !strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", &utc)) return;
    size_t n;
    struct respool *const *all = respool_preorder(cluster_tree(r->cm), &n);
    struct crd_pool_gangs *agg = all && n ? calloc(n, sizeof *agg) : NULL;
    if (!agg || subtree_gangs(r, all, n, agg)) {
        free(agg);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        struct respool *p = all[i];
        if (!p->parent) continue;
        json_t *st = crd_pool_status(p);
        json_t *prev = json_object_get(r->sent, p->name);
        if (st && crd_pool_status_gangs(st, p, agg[i], json_object_get(prev, "conditions"), now)) {
            json_decref(st);
            st = NULL;
        }
        if (!st) continue;
        if (prev && json_equal(prev, st)) {
            json_decref(st);
            continue;
        }
        char path[512];
        snprintf(path, sizeof path, "/apis/peloton.io/v1alpha1/resourcepools/%s/status", p->name);
        /* the copy the status was made from: a write made from a stale one is refused */
        const char *rv = json_string_value(
            json_object_get(json_object_get(kc_informer_get(r->pools, NULL, p->name), "metadata"), "resourceVersion"));
        json_t *body = json_pack("{s:{s:s?}, s:O}", "metadata", "resourceVersion", rv, "status", st);
        char *name = strdup(p->name);
        if (!body || !name ||
            kclient_request(r->env.kc, "PATCH", path, body, "application/merge-patch+json", on_status_written, name))
            free(name);
        json_decref(body);
        json_object_set_new(r->sent, p->name, st);
    }
    free(agg);
}
