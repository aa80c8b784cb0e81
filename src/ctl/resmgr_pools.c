/* resmgr's pool controller (resmgr_int.h): writes each pool's entitlement,
 * allocation and demand into its status when they change, and takes our
 * finalizer off a pool marked for deletion once it is empty. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crd_pool.h"
#include "resmgr_int.h"

/* ---- pool deletion ---- */

/* Counts, per pool name in ud, the pods that hold work in it: not ended, and
 * bound to a node or admitted on their way to one (a cluster_foreach_pod
 * callback). Pods left waiting in a pool being deleted hold nothing. */
static int count_holders(void *ud, struct cm_pod *p) {
    json_t *counts = ud;
    if (p->bad || !p->pool || p->info.terminal || (!p->node && !p->admitted)) return 0;
    json_t *n = json_object_get(counts, p->pool);
    if (n) json_integer_set(n, json_integer_value(n) + 1);
    return 0;
}

/* Takes our finalizer off every pool marked for deletion that has no child
 * pools and in which no pod holds work; the store then removes it. The
 * resourceVersion the decision was made on is a precondition: a pool that
 * changed meanwhile is looked at again at the next tick. */
static void release_empty_pools(struct resmgr *r) {
    if (!json_object_size(r->terminating)) return;
    struct respool_tree *t = cluster_tree(r->cm);
    json_t *counts = json_object();
    const char *name;
    json_t *obj;
    json_object_foreach(r->terminating, name, obj) json_object_set_new(counts, name, json_integer(0));
    cluster_foreach_pod(r->cm, count_holders, counts);
    json_object_foreach(r->terminating, name, obj) {
        struct respool *p = crd_pool_find(t, name);
        /* not in the tree: the tree lags behind the objects (or they break a
         * rule): its children and usage are not known, so it waits */
        if (!p) continue;
        json_int_t pods = json_integer_value(json_object_get(counts, name));
        bool holds = pods > 0;
        for (int u = 0; u < UC_NCLASSES; u++) holds |= !resvec_is_zero(p->alloc.c[u]);
        if (p->first_child || holds) {
            if (!json_object_get(r->told_waiting, name)) { /* once: `kubectl describe rp` shows it */
                ctl_object_event(r->env.kc, RM_COMPONENT, "peloton.io/v1alpha1", "ResourcePool", "", name, NULL,
                                 "Normal", "Terminating",
                                 "marked for deletion; it goes once it has no child pools (now %d) and no pod "
                                 "holds work in it (now %lld)",
                                 p->nchildren, (long long)pods);
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
    json_decref(counts);
}

/* ---- pool status ---- */

void rm_on_status(uv_timer_t *tm) {
    struct resmgr *r = tm->data;
    if (!r->leader || !r->recovered || cluster_refresh(r->cm)) return;
    release_empty_pools(r);
    rm_metrics_pools(&r->m, cluster_tree(r->cm), cluster_fleet(r->cm));
    size_t n;
    struct respool *const *all = respool_preorder(cluster_tree(r->cm), &n);
    for (size_t i = 0; all && i < n; i++) {
        struct respool *p = all[i];
        if (!p->parent) continue;
        json_t *st = crd_pool_status(p);
        if (!st) continue;
        json_t *prev = json_object_get(r->sent, p->name);
        if (prev && json_equal(prev, st)) {
            json_decref(st);
            continue;
        }
        char path[512];
        snprintf(path, sizeof path, "/apis/peloton.io/v1alpha1/resourcepools/%s/status", p->name);
        json_t *body = json_pack("{s:O}", "status", st);
        kclient_request(r->env.kc, "PATCH", path, body, "application/merge-patch+json", NULL, NULL);
        json_decref(body);
        json_object_set_new(r->sent, p->name, st);
    }
}
