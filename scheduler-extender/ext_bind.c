/* bind, the parts without I/O: whether a call is needed (a repeated bind of
 * the same pod to the same node is a success without one), the Binding's
 * body, and the pod's count while the Binding is with the API server:
 * counted against its pool and node from the moment the bind is accepted
 * (ext_bind_begin, as kube-scheduler assumes its pods), kept when the API
 * server takes it (ext_bind_commit), given back when it fails
 * (ext_bind_abort, which also ends the count its filter began). The POST itself is ext_http.c's. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ext_int.h"

enum ext_bind_decision ext_bind_decide(struct ext_core *x, const struct extender_binding_args *b, char *why,
                                       size_t len) {
    x->st.binds++;
    ext_core_refresh(x);
    struct cm_pod *p = cluster_pod(x->cm, b->pod_namespace, b->pod_name);
    /* A cache entry of another pod with the same name (recreated) says
     * nothing about this one: let the API server judge by UID. */
    if (!p || (b->pod_uid[0] && p->uid && p->uid[0] && strcmp(p->uid, b->pod_uid))) return EXT_BIND_POST;
    if (!p->node) return EXT_BIND_POST;
    /* assumed by a bind still in flight: that one may yet fail, so post again
     * (the API server answers 409 once the first one took, then the read back
     * decides) */
    if (!strcmp(p->node, b->node)) return p->assumed && ext_bind_inflight(x, b) ? EXT_BIND_POST : EXT_BIND_OK;
    snprintf(why, len, "pod %s/%s is already bound to node %s", b->pod_namespace, b->pod_name, p->node);
    return EXT_BIND_ERROR;
}

json_t *ext_binding_body(const struct extender_binding_args *b) {
    json_t *meta = json_pack("{s:s, s:s}", "name", b->pod_name, "namespace", b->pod_namespace);
    if (meta && b->pod_uid[0] && json_object_set_new(meta, "uid", json_string(b->pod_uid))) {
        json_decref(meta);
        return NULL;
    }
    if (!meta) return NULL;
    return json_pack("{s:s, s:s, s:o, s:{s:s, s:s, s:s}}", "apiVersion", "v1", "kind", "Binding", "metadata", meta,
                     "target", "apiVersion", "v1", "kind", "Node", "name", b->node);
}

static void inflight_key(const struct extender_binding_args *b, char *key, size_t len) {
    snprintf(key, len, "%s/%s", b->pod_namespace, b->pod_name);
}

int ext_bind_inflight(const struct ext_core *x, const struct extender_binding_args *b) {
    char key[2 * EXTENDER_MAX_NAME + 2];
    inflight_key(b, key, sizeof key);
    return (int)json_integer_value(json_object_get(x->inflight, key));
}

/* One bind of b less in flight; how many are left. */
static int inflight_done(struct ext_core *x, const struct extender_binding_args *b) {
    char key[2 * EXTENDER_MAX_NAME + 2];
    inflight_key(b, key, sizeof key);
    json_int_t n = json_integer_value(json_object_get(x->inflight, key));
    if (n <= 1) {
        json_object_del(x->inflight, key);
        return 0;
    }
    json_object_set_new(x->inflight, key, json_integer(n - 1));
    return (int)n - 1;
}

/* Counts b's pod on b's node (cluster_assume) and consumes a gang member's
 * plan: the member counts on its node now, so its hold there ends. */
static void assume(struct ext_core *x, const struct extender_binding_args *b) {
    struct cm_pod *p = cluster_pod(x->cm, b->pod_namespace, b->pod_name);
    if (!p) return; /* not in the cache yet: the watch will count it */
    const char *gang = p->info.gang;
    char *gang_copy = gang ? strdup(gang) : NULL;
    if (!p->node || strcmp(p->node, b->node)) {
        if (!cluster_assume(x->cm, b->pod_namespace, b->pod_name, b->node)) x->dirty = true;
    }
    /* p may be stale now: use the copies */
    if (gang_copy)
        for (struct ext_gang *g = x->gangs; g; g = g->next) {
            if (strcmp(g->ns, b->pod_namespace) || strcmp(g->id, gang_copy)) continue;
            bool left = false;
            for (uint32_t i = 0; i < g->n; i++) {
                if (g->pods[i] && !strcmp(g->pods[i], b->pod_name)) {
                    free(g->nodes[i]);
                    g->nodes[i] = NULL;
                }
                if (g->nodes[i]) left = true;
            }
            if (!left) ext_gang_drop(x, g);
            break;
        }
    free(gang_copy);
}

void ext_bind_begin(struct ext_core *x, const struct extender_binding_args *b) {
    char key[2 * EXTENDER_MAX_NAME + 2];
    inflight_key(b, key, sizeof key);
    json_object_set_new(x->inflight, key, json_integer(json_integer_value(json_object_get(x->inflight, key)) + 1));
    assume(x, b);
}

void ext_bind_commit(struct ext_core *x, const struct extender_binding_args *b) {
    inflight_done(x, b);
    assume(x, b);
}

void ext_bind_abort(struct ext_core *x, const struct extender_binding_args *b) {
    if (inflight_done(x, b)) return; /* another bind of the pod is still with the API server */
    struct cm_pod *p = cluster_pod(x->cm, b->pod_namespace, b->pod_name);
    /* only an assumption is taken back: a node the pod's object shows stays */
    if (p && p->assumed && p->node && !strcmp(p->node, b->node)) {
        cluster_forget(x->cm, b->pod_namespace, b->pod_name);
        x->dirty = true;
    }
    /* nor does its filter's count stay (ext_filter.c): kube-scheduler filters it again */
    p = cluster_pod(x->cm, b->pod_namespace, b->pod_name);
    if (p && p->admitted && !p->node) {
        cluster_admit(x->cm, p, false);
        x->dirty = true;
    }
    char key[2 * EXTENDER_MAX_NAME + 2];
    inflight_key(b, key, sizeof key);
    json_object_del(x->passed, key);
}
