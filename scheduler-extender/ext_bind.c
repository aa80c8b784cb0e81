/* bind, the parts without I/O: whether a call is needed (a repeated bind of
 * the same pod to the same node is a success without one), the Binding's
 * body, and recording the allocation once the API server took it. The POST
 * itself is ext_http.c's. */
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
    if (!strcmp(p->node, b->node)) return EXT_BIND_OK; /* bound (or assumed) there already: idempotent */
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

void ext_bind_commit(struct ext_core *x, const struct extender_binding_args *b) {
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
