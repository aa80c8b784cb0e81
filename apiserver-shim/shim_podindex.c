/* The pods of each node, for `fieldSelector=spec.nodeName=X` (kubectl
 * describe node, kubelets): such a list costs O(pods on X), not O(pods).
 *
 * The index is this process's, built from Redis and kept from the pods'
 * history stream, which holds every write by anyone sharing Redis, in
 * resourceVersion order (docs/store.md):
 *
 * It exists while lists by node come: the first starts the build (and is
 * served without it), and ten minutes without one drop it, so a cluster
 * that never lists by node pays nothing for it (following the history
 * costs the loop a parse of every pod write).
 *
 *   build   pages of PIDX_PAGE pods per loop turn (a uv_idle), from the
 *           first page's version S: member -> (node, the object's version);
 *   follow  the history after S, applied in order; an event applies only
 *           when newer than what the member holds (a page may have read a
 *           state newer than some of the events after S), a DELETED removes
 *           the member. `pos` is the version up to which every event is
 *           applied; a timer (PIDX_TICK_MS) reads at most PIDX_TICK_EVENTS
 *           per tick, so it stays near the counter.
 *   stale   history compacted past pos (more than the history keeps went by
 *           unread): the index is rebuilt, and lists filter meanwhile.
 *
 * A list by node (podindex_list) first brings pos to the counter E (at most
 * PIDX_QUERY_EVENTS, else it declines and the caller lists in slices), takes
 * the node's members, reads their objects in one HMGET, then applies the history after E up
 * to the counter E2 read with it to what it read: the members on X at E2 are
 * those on X at E (the index) or changed in (E, E2], so the result is the
 * node's pods at E2, E2 its resourceVersion. Restart: the index is memory
 * only and is built again from Redis. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"
#include "util/strmap.h"

#define PIDX_PAGE 250
#define PIDX_TICK_MS 50
#define PIDX_TICK_EVENTS 500
#define PIDX_QUERY_EVENTS 2000
#define PIDX_IDLE_MS (10 * 60 * 1000) /* kept this long after the last list by node */

struct pidx_entry {
    char *node; /* a key of nodes: its set's name */
    uint64_t rv;
};

struct pod_index {
    struct shim *s;
    struct strmap members; /* "<ns>/<name>" -> struct pidx_entry * */
    struct strmap nodes;   /* node -> struct strmap * (its members -> NULL) */
    bool ready;
    uint64_t pos;
    char *token; /* the build's continue token */
    uv_idle_t idle;
    uv_timer_t timer;
    int closing;
    uint64_t builds; /* for tests: how many builds finished */
    uint64_t used_ms; /* the last list by node */
};

static void unset(struct pod_index *x, const char *member) {
    struct pidx_entry *e = strmap_del(&x->members, member);
    if (!e) return;
    struct strmap *set = strmap_get(&x->nodes, e->node);
    if (set) {
        strmap_del(set, member);
        if (!strmap_count(set)) {
            strmap_del(&x->nodes, e->node);
            strmap_free(set);
            free(set);
        }
    }
    free(e->node);
    free(e);
}

/* The member's state at rv: on node (NULL or "": on none, or gone). */
static int set_member(struct pod_index *x, const char *member, const char *node, uint64_t rv) {
    struct pidx_entry *e = strmap_get(&x->members, member);
    if (e && e->rv >= rv) return 0;
    if (e && node && !strcmp(e->node, node)) {
        e->rv = rv;
        return 0;
    }
    unset(x, member);
    if (!node || !node[0]) return 0; /* pending pods are not indexed: nobody lists by an empty node */
    struct strmap *set = strmap_get(&x->nodes, node);
    if (!set) {
        if (!(set = calloc(1, sizeof *set)) || strmap_put(&x->nodes, node, set, NULL)) {
            free(set);
            return -ENOMEM;
        }
    }
    if (!(e = calloc(1, sizeof *e)) || !(e->node = strdup(node))) {
        free(e);
        return -ENOMEM;
    }
    e->rv = rv;
    if (strmap_put(&x->members, member, e, NULL) || strmap_put(set, member, NULL, NULL)) return -ENOMEM;
    return 0;
}

static const char *node_of(const json_t *pod) {
    return json_string_value(json_object_get(json_object_get(pod, "spec"), "nodeName"));
}

static uint64_t rv_of(const json_t *o) {
    const char *v = json_string_value(json_object_get(json_object_get(o, "metadata"), "resourceVersion"));
    return v ? strtoull(v, NULL, 10) : 0;
}

static int apply_event(struct pod_index *x, const struct store_event *ev) {
    char member[STORE_MAX_NAMESPACE + STORE_MAX_NAME + 2];
    snprintf(member, sizeof member, "%s/%s", ev->ns, ev->name);
    if (ev->type == STORE_DELETED) {
        struct pidx_entry *e = strmap_get(&x->members, member);
        if (e && e->rv >= ev->resource_version) return 0;
        unset(x, member);
        return 0;
    }
    return set_member(x, member, node_of(ev->object), ev->resource_version);
}

static void clear(struct pod_index *x) {
    size_t pos = 0;
    const char *k;
    void *v;
    while (strmap_next(&x->members, &pos, &k, &v)) {
        free(((struct pidx_entry *)v)->node);
        free(v);
    }
    strmap_free(&x->members);
    pos = 0;
    while (strmap_next(&x->nodes, &pos, &k, &v)) {
        strmap_free(v);
        free(v);
    }
    strmap_free(&x->nodes);
    memset(&x->members, 0, sizeof x->members);
    memset(&x->nodes, 0, sizeof x->nodes);
    x->ready = false;
    x->pos = 0;
    free(x->token);
    x->token = NULL;
}

/* Applies the history after pos, at most max entries; -ESTALE: rebuild. */
static int follow(struct pod_index *x, size_t max, bool *more) {
    *more = false;
    size_t seen = 0;
    while (seen < max) {
        struct store_history h = {0};
        int rc = store_history_after(x->s->st, "pods", "", x->pos, max < 500 ? max : 500, &h);
        if (rc) return rc;
        for (size_t i = 0; i < h.n && !rc; i++) rc = apply_event(x, &h.events[i]);
        seen += h.n ? h.n : 1;
        if (!rc) x->pos = h.more ? (h.next_rv > x->pos ? h.next_rv : x->pos) : (h.current_rv > x->pos ? h.current_rv : x->pos);
        bool m = h.more && h.next_rv > 0;
        store_history_free(&h);
        if (rc) return rc;
        if (!m) return 0;
    }
    *more = true;
    return 0;
}

static void start_build(struct pod_index *x);

static void on_build(uv_idle_t *h) {
    struct pod_index *x = h->data;
    struct store_list l = {0};
    int rc = store_list(x->s->st, "pods", "", PIDX_PAGE, x->token, &l);
    if (rc) {
        store_list_free(&l);
        clear(x); /* Redis away or the token expired: again from the start, on a later turn */
        uv_idle_stop(&x->idle);
        return;
    }
    if (!x->token) x->pos = l.resource_version;
    free(x->token);
    x->token = l.continue_token;
    l.continue_token = NULL;
    size_t i;
    json_t *o;
    json_array_foreach(l.items, i, o) {
        json_t *md = json_object_get(o, "metadata");
        const char *ns = json_string_value(json_object_get(md, "namespace"));
        const char *name = json_string_value(json_object_get(md, "name"));
        char member[STORE_MAX_NAMESPACE + STORE_MAX_NAME + 2];
        if (!name) continue;
        snprintf(member, sizeof member, "%s/%s", ns ? ns : "", name);
        if (set_member(x, member, node_of(o), rv_of(o))) rc = -ENOMEM;
    }
    store_list_free(&l);
    if (rc) {
        clear(x);
        uv_idle_stop(&x->idle);
        return;
    }
    if (!x->token) { /* read: the history after S brings it up to date (the timer) */
        uv_idle_stop(&x->idle);
        bool more;
        rc = follow(x, PIDX_TICK_EVENTS, &more);
        if (rc) clear(x);
        else {
            x->ready = true;
            x->builds++;
        }
    }
}

static void start_build(struct pod_index *x) {
    clear(x);
    uv_idle_start(&x->idle, on_build);
}

static void on_tick(uv_timer_t *t) {
    struct pod_index *x = t->data;
    if (uv_now(t->loop) - x->used_ms > PIDX_IDLE_MS) { /* nobody lists by node: stop paying for it */
        uv_idle_stop(&x->idle);
        uv_timer_stop(&x->timer);
        clear(x);
        return;
    }
    if (uv_is_active((uv_handle_t *)&x->idle)) return; /* building */
    if (!x->ready) {
        start_build(x);
        return;
    }
    bool more;
    int rc = follow(x, PIDX_TICK_EVENTS, &more);
    if (rc == -ESTALE) start_build(x);
}

struct pod_index *podindex_new(struct shim *s, uv_loop_t *loop) {
    if (!loop) return NULL;
    struct pod_index *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    x->s = s;
    uv_idle_init(loop, &x->idle);
    x->idle.data = x;
    uv_timer_init(loop, &x->timer);
    x->timer.data = x;
    uv_unref((uv_handle_t *)&x->timer); /* the index alone does not keep the loop running */
    return x;
}

/* A list by node: the index is built on the first and kept while they come. */
static void use(struct pod_index *x) {
    x->used_ms = uv_now(x->timer.loop);
    if (uv_is_active((uv_handle_t *)&x->timer)) return;
    start_build(x);
    uv_timer_start(&x->timer, on_tick, PIDX_TICK_MS, PIDX_TICK_MS);
}

static void on_closed(uv_handle_t *h) {
    struct pod_index *x = h->data;
    if (--x->closing) return;
    clear(x);
    free(x);
}

void podindex_free(struct pod_index *x) {
    if (!x) return;
    uv_idle_stop(&x->idle);
    uv_timer_stop(&x->timer);
    x->closing = 2;
    uv_close((uv_handle_t *)&x->idle, on_closed);
    uv_close((uv_handle_t *)&x->timer, on_closed);
}

bool podindex_ready(const struct pod_index *x) { return x && x->ready; }
void podindex_start(struct pod_index *x) {
    if (x) use(x);
}
uint64_t podindex_builds(const struct pod_index *x) { return x ? x->builds : 0; }

size_t podindex_count(const struct pod_index *x, const char *node) {
    const struct strmap *set = x ? strmap_get(&x->nodes, node) : NULL;
    return set ? strmap_count(set) : 0;
}

static int cmp_obj(const void *a, const void *b) {
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    const json_t *mx = json_object_get(x, "metadata"), *my = json_object_get(y, "metadata");
    const char *nx = json_string_value(json_object_get(mx, "namespace")), *ny = json_string_value(json_object_get(my, "namespace"));
    int c = strcmp(nx ? nx : "", ny ? ny : "");
    if (c) return c;
    return strcmp(json_string_value(json_object_get(mx, "name")), json_string_value(json_object_get(my, "name")));
}

int podindex_list(struct pod_index *x, const char *node, const char *ns, json_t **items, uint64_t *rv) {
    *items = NULL;
    if (!x) return -EAGAIN;
    use(x);
    if (!x->ready) return -EAGAIN;
    bool more;
    int rc = follow(x, PIDX_QUERY_EVENTS, &more);
    if (rc == -ESTALE) start_build(x);
    if (rc) return rc == -ESTALE ? -EAGAIN : rc;
    if (more) return -EAGAIN; /* too far behind for one turn: the caller lists in slices */
    uint64_t e = x->pos;
    json_t *got = json_object(); /* member -> object */
    struct strmap *set = strmap_get(&x->nodes, node);
    size_t pos = 0, nm = 0, nslen = strlen(ns);
    const char *k;
    void *v;
    size_t cnt = set ? strmap_count(set) : 0;
    if (cnt > STORE_GET_MANY_MAX) {
        json_decref(got);
        return -EAGAIN; /* a node with this many pods is listed in slices */
    }
    const char **members = cnt ? malloc(cnt * sizeof *members) : NULL;
    json_t **objs = cnt ? calloc(cnt, sizeof *objs) : NULL;
    if (cnt && (!members || !objs)) {
        free(members);
        free(objs);
        json_decref(got);
        return -ENOMEM;
    }
    while (set && strmap_next(set, &pos, &k, &v)) {
        const char *slash = strchr(k, '/');
        if (ns[0] && ((size_t)(slash - k) != nslen || strncmp(k, ns, nslen))) continue;
        members[nm++] = k;
    }
    rc = store_get_many(x->s->st, "pods", members, nm, objs); /* one read: the node's pods as of one moment */
    for (size_t i = 0; !rc && i < nm; i++)
        if (objs[i]) json_object_set_new(got, members[i], objs[i]); /* absent: deleted after E, the history says */
    free(members);
    free(objs);
    if (rc) {
        json_decref(got);
        return rc;
    }
    /* every change after E, up to the counter now: the node's pods at that version */
    uint64_t after = e, e2 = e;
    for (int reads = 0;; reads++) {
        struct store_history h = {0};
        rc = store_history_after(x->s->st, "pods", ns, after, 1000, &h);
        if (rc) {
            json_decref(got);
            return rc == -ESTALE ? -EAGAIN : rc;
        }
        for (size_t i = 0; i < h.n; i++) {
            const struct store_event *ev = &h.events[i];
            char member[STORE_MAX_NAMESPACE + STORE_MAX_NAME + 2];
            snprintf(member, sizeof member, "%s/%s", ev->ns, ev->name);
            const char *n = ev->type == STORE_DELETED ? NULL : node_of(ev->object);
            if (n && !strcmp(n, node)) json_object_set(got, member, ev->object);
            else json_object_del(got, member);
        }
        bool m = h.more && h.next_rv > after;
        if (m) after = h.next_rv;
        else e2 = h.current_rv > after ? h.current_rv : after;
        store_history_free(&h);
        if (!m) break;
        if (reads >= 20) {
            json_decref(got);
            return -EAGAIN;
        }
    }
    size_t n = json_object_size(got), i = 0;
    json_t **arr = n ? malloc(n * sizeof *arr) : NULL;
    if (n && !arr) {
        json_decref(got);
        return -ENOMEM;
    }
    json_t *jv;
    json_object_foreach(got, k, jv) arr[i++] = jv;
    if (n > 1) qsort(arr, n, sizeof *arr, cmp_obj);
    json_t *out = json_array();
    for (i = 0; i < n; i++) json_array_append(out, arr[i]);
    free(arr);
    json_decref(got);
    *items = out;
    *rv = e2;
    return 0;
}
