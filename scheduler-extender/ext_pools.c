/* ResourcePool status in extender mode: on a real cluster no resource
 * manager runs, so the extender, whose model computes every pool's
 * entitlement, allocation and demand anyway, writes them to the pools'
 * status (the printer columns of `kubectl get rp`). A real kube-apiserver
 * accepts any set of pools; when they break a tree rule the model keeps the
 * last valid tree (cluster_pool_error), and every pool says so in a
 * condition. No I/O here: ext_http.c patches what ext_pool_status returns. */
#include <stdio.h>
#include <string.h>

#include "crd_pool.h"
#include "ext_int.h"

json_t *ext_pool_status(struct ext_core *x, const json_t *obj) {
    const char *name = ext_obj_name(obj);
    if (!name) return NULL;
    ext_core_refresh(x);
    const char *perr = cluster_pool_error(x->cm);
    struct respool_tree *t = cluster_tree(x->cm);
    struct respool *p = t ? crd_pool_find(t, name) : NULL;
    json_t *st = p && p->parent ? crd_pool_status(p) : json_object();
    if (!st) return NULL;
    json_t *gen = json_object_get(json_object_get(obj, "metadata"), "generation");
    char msg[1024];
    const char *status, *reason;
    if (!perr) {
        status = "True";
        reason = p ? "InForce" : "Pending";
        snprintf(msg, sizeof msg, p ? "the pools form a valid tree; this pool's entitlement is in force"
                                    : "the pools form a valid tree; the extender has not taken this pool in yet");
    } else {
        status = "False";
        reason = "InvalidTree";
        snprintf(msg, sizeof msg, "%s; %s", perr,
                 p ? "the last valid tree stays in force, with this pool as it was in it"
                   : "the last valid tree stays in force, and this pool is not in it: its pods are not admitted");
    }
    json_t *cond = json_pack("{s:s, s:s, s:s, s:s}", "type", "TreeValid", "status", status, "reason", reason,
                             "message", msg);
    if (cond && json_is_integer(gen)) json_object_set(cond, "observedGeneration", gen);
    if (!cond || json_object_set_new(st, "conditions", json_pack("[o]", cond)) ||
        (json_is_integer(gen) && json_object_set(st, "observedGeneration", gen))) {
        json_decref(st);
        return NULL;
    }
    return st;
}
