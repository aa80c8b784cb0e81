/* Pods by term, for `fieldSelector=spec.nodeName=X` (kubectl describe
 * node, kubelets) and `labelSelector=key=value`: such a list costs O(pods
 * with the term), not O(pods). Two indexes of this code: PODINDEX_NODE (the
 * term is spec.nodeName) and PODINDEX_LABEL (one term per label, key=value).
 *
 * Each exists while its lists come: the first starts the build (and is
 * served without it), and ten minutes without one drop it, so a cluster
 * that never lists so pays nothing for it (following the history costs
 * the loop a parse of every pod write). Below, "node" stands for a term.
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
 * the node's members, reads their objects in one HMGET, then applies the
 * history after E up to the counter E2 read with it to what it read: the members on X at E2 are
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

#define PIDX_SEP '\x01'   /* between a member's terms */
#define PIDX_ANY "\001any" /* the term of pods whose labels cannot be terms: candidates of every label list */

struct pidx_entry {
    char *terms; /* its terms (node, or key=value), sorted, PIDX_SEP between */
    uint64_t rv;
};

struct pod_index {
    struct shim *s;
    struct strmap members; /* "<ns>/<name>" -> struct pidx_entry * */
    struct strmap nodes;   /* term -> struct strmap * (its members -> NULL) */
    enum podindex_kind kind;
    bool ready;
    uint64_t pos;
    char *token; /* the build's continue token */
    uv_idle_t idle;
    uv_timer_t timer;
    int closing;
    uint64_t builds; /* for tests: how many builds finished */
    uint64_t used_ms; /* the last list by this index */
};

static void term_del(struct pod_index *x, const char *term, const char *member) {
    struct strmap *set = strmap_get(&x->nodes, term);
    if (!set) return;
    strmap_del(set, member);
    if (!strmap_count(set)) {
        strmap_del(&x->nodes, term);
        strmap_free(set);
        free(set);
    }
}

static int term_add(struct pod_index *x, const char *term, const char *member) {
    struct strmap *set = strmap_get(&x->nodes, term);
    if (!set) {
        if (!(set = calloc(1, sizeof *set)) || strmap_put(&x->nodes, term, set, NULL)) {
            free(set);
            return -ENOMEM;
        }
    }
    return strmap_put(set, member, NULL, NULL);
}

/* Calls fn on each term of terms (cut at PIDX_SEP, in place and restored). */
static int each_term(struct pod_index *x, char *terms, const char *member,
                     int (*fn)(struct pod_index *, const char *, const char *)) {
    int rc = 0;
    for (char *t = terms; t && !rc;) {
        char *sep = strchr(t, PIDX_SEP);
        if (sep) *sep = 0;
        if (*t) rc = fn(x, t, member);
        if (sep) *sep = PIDX_SEP;
        t = sep ? sep + 1 : NULL;
    }
    return rc;
}

static int term_del_fn(struct pod_index *x, const char *t, const char *m) {
    term_del(x, t, m);
    return 0;
}

static void unset(struct pod_index *x, const char *member) {
    struct pidx_entry *e = strmap_del(&x->members, member);
    if (!e) return;
    each_term(x, e->terms, member, term_del_fn);
    free(e->terms);
    free(e);
}

/* The member's state at rv: its terms (NULL or "": none, or gone; taken). */
static int set_member(struct pod_index *x, const char *member, char *terms, uint64_t rv) {
    struct pidx_entry *e = strmap_get(&x->members, member);
    if (e && e->rv >= rv) {
        free(terms);
        return 0;
    }
    if (e && terms && !strcmp(e->terms, terms)) {
        e->rv = rv;
        free(terms);
        return 0;
    }
    unset(x, member);
    if (!terms || !terms[0]) { /* pending pods are not indexed: nobody lists by an empty node */
        free(terms);
        return 0;
    }
    if (!(e = calloc(1, sizeof *e))) {
        free(terms);
        return -ENOMEM;
    }
    e->terms = terms;
    e->rv = rv;
    if (strmap_put(&x->members, member, e, NULL)) {
        free(terms);
        free(e);
        return -ENOMEM;
    }
    return each_term(x, e->terms, member, term_add);
}

static const char *node_of(const json_t *pod) {
    return json_string_value(json_object_get(json_object_get(pod, "spec"), "nodeName"));
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A pod's terms, malloc'd (NULL: none): its node, or its labels as key=value;
 * a pod with a label that cannot be a term (a separator in it) is in PIDX_ANY. */
static char *terms_of(const struct pod_index *x, const json_t *pod) {
    if (x->kind == PODINDEX_NODE) {
        const char *n = node_of(pod);
        return n && n[0] && !strchr(n, PIDX_SEP) ? strdup(n) : NULL;
    }
    const json_t *labels = json_object_get(json_object_get(pod, "metadata"), "labels");
    size_t n = json_object_size(labels), i = 0, len = 0;
    if (!n) return NULL;
    char **kv = calloc(n, sizeof *kv);
    if (!kv) return NULL;
    const char *k;
    json_t *v;
    bool any = false;
    json_object_foreach((json_t *)labels, k, v) {
        const char *sv = json_string_value(v);
        if (!sv || strchr(k, PIDX_SEP) || strchr(k, '=') || strchr(sv, PIDX_SEP)) {
            any = true;
            continue;
        }
        if (asprintf(&kv[i], "%s=%s", k, sv) < 0) kv[i] = NULL;
        else len += strlen(kv[i++]) + 1;
    }
    if (any) len += sizeof PIDX_ANY;
    qsort(kv, i, sizeof *kv, cmp_str);
    char *out = malloc(len + 1), *p = out;
    for (size_t j = 0; j < i; j++) {
        if (p) p += sprintf(p, "%s%s", p == out ? "" : "\x01", kv[j]);
        free(kv[j]);
    }
    if (p && any) p += sprintf(p, "%s", p == out ? PIDX_ANY + 1 : PIDX_ANY);
    free(kv);
    if (p) *p = 0;
    return out;
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
    return set_member(x, member, terms_of(x, ev->object), ev->resource_version);
}

static void clear(struct pod_index *x) {
    size_t pos = 0;
    const char *k;
    void *v;
    while (strmap_next(&x->members, &pos, &k, &v)) {
        free(((struct pidx_entry *)v)->terms);
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
        if (set_member(x, member, terms_of(x, o), rv_of(o))) rc = -ENOMEM;
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

struct pod_index *podindex_new(struct shim *s, uv_loop_t *loop, enum podindex_kind kind) {
    if (!loop) return NULL;
    struct pod_index *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    x->s = s;
    x->kind = kind;
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

/* Whether obj (a pod) has the term. */
static bool has_term(const struct pod_index *x, const json_t *obj, const char *term) {
    if (x->kind == PODINDEX_NODE) {
        const char *n = node_of(obj);
        return n && !strcmp(n, term);
    }
    const char *eq = strchr(term, '=');
    const json_t *labels = json_object_get(json_object_get(obj, "metadata"), "labels");
    char key[320];
    if (!eq || (size_t)(eq - term) >= sizeof key) return false;
    snprintf(key, sizeof key, "%.*s", (int)(eq - term), term);
    const char *v = json_string_value(json_object_get(labels, key));
    return v && !strcmp(v, eq + 1);
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
    struct strmap *any = x->kind == PODINDEX_LABEL ? strmap_get(&x->nodes, PIDX_ANY + 1) : NULL;
    size_t pos = 0, nm = 0, nslen = strlen(ns);
    const char *k;
    void *v;
    size_t cnt = (set ? strmap_count(set) : 0) + (any ? strmap_count(any) : 0);
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
    for (int pass = 0; pass < 2; pass++) {
        struct strmap *m = pass ? any : set;
        pos = 0;
        while (m && strmap_next(m, &pos, &k, &v)) {
            const char *slash = strchr(k, '/');
            if (ns[0] && ((size_t)(slash - k) != nslen || strncmp(k, ns, nslen))) continue;
            if (pass && set && strmap_get(set, k)) continue;
            members[nm++] = k;
        }
    }
    rc = store_get_many(x->s->st, "pods", members, nm, objs); /* one read: the node's pods as of one moment */
    for (size_t i = 0; !rc && i < nm; i++)
        if (objs[i] && has_term(x, objs[i], node)) json_object_set_new(got, members[i], objs[i]);
        else json_decref(objs[i]); /* absent: deleted after E (the history says), or an ANY pod without the term */
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
            if (ev->type != STORE_DELETED && has_term(x, ev->object, node)) json_object_set(got, member, ev->object);
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
