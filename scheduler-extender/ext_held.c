/* Room held on nodes for pods that are not bound yet (ext_int.h): admitted
 * gangs' planned members, and the pods kube-scheduler nominated to a node
 * after preempting for them. kube-scheduler counts a nominated pod of equal
 * or higher priority on its node when it filters another pod there, and
 * nominates the preemptor to the node whose victims it deleted; an extender
 * that did not would offer that freed room to the next pod, and would find
 * no victims needed on such a node in a preempt (then answer nothing). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ext_int.h"

static int key_of(const char *ns, const char *name, char *key, size_t len) {
    int n = snprintf(key, len, "%s/%s", ns, name);
    return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static const char *nominated_node(const json_t *obj) {
    const char *n = json_string_value(json_object_get(json_object_get(obj, "status"), "nominatedNodeName"));
    return n && n[0] ? n : NULL;
}

void ext_nominated_forget(struct ext_core *x, const char *ns, const char *name) {
    char key[2 * EXTENDER_MAX_NAME + 2];
    if (!json_object_size(x->nominated) || key_of(ns, name, key, sizeof key)) return;
    json_object_del(x->nominated, key);
}

void ext_nominated_note(struct ext_core *x, const char *ns, const char *name, const json_t *obj) {
    const char *node = nominated_node(obj);
    const char *bound = json_string_value(json_object_get(json_object_get(obj, "spec"), "nodeName"));
    const char *phase = json_string_value(json_object_get(json_object_get(obj, "status"), "phase"));
    bool ended = phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"));
    if (!node || (bound && bound[0]) || ended) {
        ext_nominated_forget(x, ns, name);
        return;
    }
    char key[2 * EXTENDER_MAX_NAME + 2];
    if (key_of(ns, name, key, sizeof key)) return;
    const char *old = json_string_value(json_object_get(x->nominated, key));
    if (!old || strcmp(old, node)) json_object_set_new(x->nominated, key, json_string(node));
}

/* metadata.resourceVersion as a number, or -1 (the API server's are opaque
 * strings; kube-apiserver's and pelotond's are decimal revisions). */
static long long rv_of(const json_t *obj) {
    const char *rv = json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
    if (!rv || !rv[0] || strlen(rv) > 18) return -1;
    long long v = 0;
    for (const char *c = rv; *c; c++) {
        if (*c < '0' || *c > '9') return -1;
        v = v * 10 + (*c - '0');
    }
    return v;
}

void ext_nominated_from_request(struct ext_core *x, const struct cm_pod *p, const json_t *obj) {
    if (!nominated_node(obj) || p->node) return;
    /* an object older than the watch's may carry a nomination since cleared */
    long long req = rv_of(obj), seen = p->obj && p->obj != obj ? rv_of(p->obj) : -1;
    if (req >= 0 && seen >= 0 && req < seen) return;
    ext_nominated_note(x, p->ns, p->name, obj);
}

static int held_cmp(const void *a, const void *b) {
    const struct ext_held *x = a, *y = b;
    return x->host < y->host ? -1 : x->host > y->host;
}

struct ext_held *ext_holds_collect(struct ext_core *x, const struct cm_pod *p, size_t *n) {
    const struct host_fleet *f = cluster_fleet(x->cm);
    size_t cap = json_object_size(x->nominated), k = 0;
    for (const struct ext_gang *g = x->gangs; g; g = g->next) cap += g->n;
    *n = 0;
    if (!cap || !f) return NULL;
    struct ext_held *h = malloc(cap * sizeof *h);
    if (!h) return NULL;
    for (const struct ext_gang *g = x->gangs; g; g = g->next) {
        if (p->info.gang && !strcmp(g->ns, p->ns) && !strcmp(g->id, p->info.gang)) continue;
        for (uint32_t i = 0; i < g->n; i++) {
            /* a member deleted (or ended) since the plan holds nothing */
            const struct cm_pod *q = g->nodes[i] && g->pods[i] ? cluster_pod(x->cm, g->ns, g->pods[i]) : NULL;
            if (!q || q->info.terminal) continue;
            uint32_t idx = host_fleet_find(f, g->nodes[i]);
            if (idx != HOST_NONE) h[k++] = (struct ext_held){idx, g->req[i], false, g->id};
        }
    }
    const char *key;
    json_t *v;
    json_object_foreach(x->nominated, key, v) {
        const char *slash = strchr(key, '/');
        if (!slash) continue;
        size_t nsl = (size_t)(slash - key);
        if (strlen(p->ns) == nsl && !memcmp(key, p->ns, nsl) && !strcmp(slash + 1, p->name)) continue; /* itself */
        char ns[EXTENDER_MAX_NAME + 1];
        if (nsl > EXTENDER_MAX_NAME) continue;
        memcpy(ns, key, nsl);
        ns[nsl] = '\0';
        const struct cm_pod *q = cluster_pod(x->cm, ns, slash + 1);
        /* bound or assumed since (its bind counts it on the node), ended, or lower priority: no hold */
        if (!q || q->node || q->bad || q->info.terminal || q->info.priority < p->info.priority) continue;
        uint32_t idx = host_fleet_find(f, json_string_value(v));
        if (idx != HOST_NONE) h[k++] = (struct ext_held){idx, q->info.req, true, key};
    }
    qsort(h, k, sizeof *h, held_cmp);
    *n = k;
    if (!k) {
        free(h);
        return NULL;
    }
    return h;
}

static size_t first_on(const struct ext_held *h, size_t nh, uint32_t host) {
    size_t lo = 0, hi = nh;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (h[mid].host < host) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

struct resvec ext_holds_on(const struct ext_held *h, size_t nh, uint32_t host) {
    struct resvec sum = resvec_zero();
    for (size_t i = first_on(h, nh, host); i < nh && h[i].host == host; i++) sum = resvec_add(sum, h[i].req);
    return sum;
}

enum place_reason ext_holds_fit(struct ext_core *x, const struct ext_held *h, size_t nh, uint32_t host,
                                struct resvec req, const struct ext_held **holder) {
    size_t lo = first_on(h, nh, host);
    if (lo == nh || h[lo].host != host) return PR_NONE;
    struct resvec free_ = host_free(&cluster_fleet(x->cm)->hosts[host]);
    for (size_t i = lo; i < nh && h[i].host == host; i++) {
        free_ = resvec_sub(free_, h[i].req);
        *holder = &h[i];
    }
    int k = resvec_first_over(req, free_);
    if (k < 0) *holder = NULL;
    return k < 0 ? PR_NONE : (enum place_reason)(PR_INSUFFICIENT_CPU + k);
}
