/* Watch: newline-delimited JSON events over a chunked stream.
 *
 * Events come from memory. Both store connections report every write they
 * make (store_set_write_hook); the hub puts those changes in resourceVersion
 * order and hands each one to the watchers that want it, building its JSON
 * line once (from the stored bytes) for all of them. Versions are global and
 * gapless (every write takes the next one), so the hub knows when it has
 * them all up to W:
 *
 *   - a change numbered W + 1 is delivered at once, and W advances;
 *   - a later one waits in a heap for the ones before it. Those are either
 *     this process's writes still in flight (their replies come within a
 *     moment) or writes by someone else sharing Redis (another API server).
 *     A gap that outlives the in-flight writes, or GAP_WAIT_MS, is filled
 *     by reading the watched resources' history from Redis (reconcile), and
 *     so is a counter found above W while nothing is in flight.
 *
 * A watcher is live when it has seen everything of its resource up to
 * max(W, every pending change): then memory serves it. Otherwise (it asked
 * for an older resourceVersion, or it was live before a reconcile dropped
 * it) it catches up by reading its resource's history from Redis, shared by
 * the watchers at the same place, until it reaches that point.
 *
 * Lines are queued on the watchers' streams; the HTTP layer sends a turn's
 * lines to a watcher in one write. A watcher that falls behind by more than
 * max_buffer unsent bytes is closed and re-lists, as a Kubernetes client does.
 *
 * A watcher that asked for a Table (kubectl get -w) gets each event's object
 * as a meta.k8s.io/v1 Table of one row, built for it alone: the columns go
 * with its first event only (kube-apiserver's rule: kubectl keeps the last
 * columns it printed), the row's object as its includeObject says. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"
#include "shim_auth.h"
#include "jparse.h"

#define HISTORY_BATCH 5000
#define TICK_READS_MAX 64       /* history reads per resource per tick, so one tick stays bounded */
#define GAP_WAIT_MS 50          /* how long a gap may wait for in-flight writes */
#define PENDING_MAX 200000      /* changes held behind a gap before the hub gives up on memory */

struct watcher {
    struct watch_hub *hub;
    const struct shim_resource *r;
    char ns[STORE_MAX_NAMESPACE + 1];
    struct labelsel *ls;
    struct fieldsel *fs;
    struct http_stream *st;
    void *lim;            /* its user's count of watches (shim_sec_watch_begin), or NULL */
    uint64_t rv;          /* everything up to here was considered */
    uint64_t deadline_ms; /* 0: no timeout */
    uint64_t next_bookmark_ms;
    bool bookmarks, ending, live;
    bool table, headers_sent; /* Table events; the columns went out already */
    enum shim_include inc;    /* what a Table row's object is */
    struct metrics_series *open, *sent; /* peloton_apiserver_watches and _watch_events_sent_total; may be NULL */
    struct slice_job *initial;          /* its initial events still going out (shim_slices.c): neither live
                                         * nor catching up; nothing is sent to it here until they are out */
    struct watcher *prev, *next;
};

/* A change known from a write through this process. */
struct change {
    uint64_t rv;
    const struct shim_resource *r; /* NULL: a resource nobody here serves */
    enum store_event_type type;
    json_t *obj;                   /* for selectors; NULL when no watcher wanted it */
    char *line;                    /* the event's JSON line; NULL as obj */
    size_t len;
    char ns[STORE_MAX_NAMESPACE + 1];
};

struct watch_hub {
    struct shim *owner; /* its store connection is used for reads */
    struct store *st;
    struct store_async *astore; /* may be NULL */
    uv_loop_t *loop;
    uv_timer_t timer;
    bool timer_on;
    unsigned poll_ms, bookmark_ms;
    size_t max_buffer;
    struct watcher *head;
    uint64_t w;                 /* every change up to here is delivered (or was nobody's) */
    struct change *heap;        /* changes above w + 1, a min-heap by rv */
    size_t nheap, capheap;
    uint64_t top;               /* the highest rv noted */
    uint64_t gap_since_ms;      /* when the heap's head first waited; 0: no gap */
};

static void on_tick(uv_timer_t *t);

/* ---- the heap of changes waiting behind a gap ---- */

static void change_free(struct change *c) {
    json_decref(c->obj);
    free(c->line);
}

static int heap_push(struct watch_hub *h, struct change *c) {
    if (h->nheap == h->capheap) {
        size_t nc = h->capheap ? h->capheap * 2 : 64;
        struct change *n = realloc(h->heap, nc * sizeof *n);
        if (!n) return -ENOMEM;
        h->heap = n;
        h->capheap = nc;
    }
    size_t i = h->nheap++;
    while (i > 0 && h->heap[(i - 1) / 2].rv > c->rv) {
        h->heap[i] = h->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->heap[i] = *c;
    return 0;
}

static struct change heap_pop(struct watch_hub *h) {
    struct change top = h->heap[0], last = h->heap[--h->nheap];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->nheap && h->heap[l].rv < last.rv) m = l;
        if (r < h->nheap && h->heap[r].rv < (m == i ? last.rv : h->heap[m].rv)) m = r;
        if (m == i) break;
        h->heap[i] = h->heap[m];
        i = m;
    }
    if (h->nheap) h->heap[i] = last;
    return top;
}

static void heap_clear(struct watch_hub *h) {
    while (h->nheap) {
        struct change c = heap_pop(h);
        change_free(&c);
    }
}

/* ---- watchers ---- */

static void write_hook(void *ud, const char *resource, const char *ns, enum store_event_type type, uint64_t rv,
                       const json_t *obj, const char *json, size_t len);

struct watch_hub *watch_hub_new(struct shim *owner, const struct shim_config *cfg) {
    if (!cfg || !cfg->loop) return NULL;
    struct watch_hub *h = calloc(1, sizeof *h);
    if (!h) return NULL;
    h->owner = owner;
    h->st = owner->st;
    h->astore = cfg->astore;
    h->loop = cfg->loop;
    h->poll_ms = cfg->poll_ms ? cfg->poll_ms : 20;
    h->bookmark_ms = cfg->bookmark_ms ? cfg->bookmark_ms : 10000;
    h->max_buffer = cfg->max_buffer ? cfg->max_buffer : (64u << 20);
    if (store_current_rv(h->st, &h->w)) h->w = 0; /* an unreachable Redis: the first reconcile settles it */
    h->top = h->w;
    uv_timer_init(h->loop, &h->timer);
    h->timer.data = h;
    store_set_write_hook(h->st, write_hook, h);
    if (h->astore) store_async_set_write_hook(h->astore, write_hook, h);
    return h;
}

static void watcher_unlink_free(struct watcher *w) {
    struct watch_hub *h = w->hub;
    if (w->prev) w->prev->next = w->next;
    else h->head = w->next;
    if (w->next) w->next->prev = w->prev;
    metrics_gauge_add(w->open, -1);
    shim_slices_cancel(w->initial);
    shim_sec_watch_end(h->owner, w->lim);
    labelsel_free(w->ls);
    fieldsel_free(w->fs);
    free(w);
    if (!h->head && h->timer_on) {
        uv_timer_stop(&h->timer);
        h->timer_on = false;
    }
}

/* The HTTP layer says the stream is over: forget the watcher. */
static void on_stream_closed(void *ud) { watcher_unlink_free(ud); }

static void on_timer_closed(uv_handle_t *t) {
    struct watch_hub *h = t->data;
    free(h->heap);
    free(h);
}

/* The timer handle must outlive uv_close: the hub is freed by the close
 * callback, on the loop's next turn (the caller runs the loop dry). */
void watch_hub_free(struct watch_hub *h) {
    if (!h) return;
    store_set_write_hook(h->st, NULL, NULL);
    watch_detach_async(h);
    while (h->head) watcher_unlink_free(h->head); /* streams are gone with the server */
    heap_clear(h);
    uv_close((uv_handle_t *)&h->timer, on_timer_closed);
}

void watch_detach_async(struct watch_hub *h) {
    if (!h || !h->astore) return;
    store_async_set_write_hook(h->astore, NULL, NULL);
    h->astore = NULL;
}

void watch_kick(struct watch_hub *h) {
    if (!h || !h->head) return;
    uv_timer_start(&h->timer, on_tick, 0, h->poll_ms);
    h->timer_on = true;
}

static void send_line(struct watcher *w, const char *line, size_t len) {
    if (w->ending) return;
    if (http_stream_write(w->st, line, len) != 0) w->ending = true; /* closing: on_close will free it */
    else metrics_inc(w->sent);
}

/* An event with obj (borrowed) as its object; for a Table watcher, obj's
 * row (an ERROR's Status goes as it is). */
static void send_event(struct watcher *w, const char *type, json_t *obj) {
    json_t *ev;
    if (w->table && strcmp(type, "ERROR") != 0) {
        ev = json_pack("{s:s, s:o}", "type", type, "object", shim_table_of(w->r, obj, w->inc, !w->headers_sent));
        w->headers_sent = true;
    } else {
        ev = json_pack("{s:s, s:O}", "type", type, "object", obj);
    }
    char *s = json_dumps(ev, JSON_COMPACT);
    json_decref(ev);
    if (!s) return;
    size_t n = strlen(s);
    s[n] = '\n'; /* json_dumps leaves room for the NUL: reuse it for the newline */
    send_line(w, s, n + 1);
    free(s);
}

static void send_expired(struct watcher *w, const char *msg) {
    json_t *st = json_pack("{s:s, s:s, s:{}, s:s, s:s, s:s, s:i}", "kind", "Status", "apiVersion", "v1", "metadata",
                           "status", "Failure", "message", msg, "reason", "Expired", "code", 410);
    send_event(w, "ERROR", st);
    json_decref(st);
    w->ending = true;
    http_stream_end(w->st);
}

static void send_bookmark(struct watcher *w) {
    char rv[32], av[300];
    snprintf(rv, sizeof rv, "%" PRIu64, w->rv);
    if (w->r->group[0]) snprintf(av, sizeof av, "%s/%s", w->r->group, w->r->version);
    else snprintf(av, sizeof av, "%s", w->r->version);
    json_t *o = json_pack("{s:s, s:s, s:{s:s}}", "kind", w->r->kind, "apiVersion", av, "metadata", "resourceVersion",
                          rv);
    if (w->table) { /* a Table without rows that carries the version */
        json_decref(o);
        o = json_pack("{s:s, s:s, s:{s:s}, s:n, s:[]}", "kind", "Table", "apiVersion", "meta.k8s.io/v1", "metadata",
                      "resourceVersion", rv, "columnDefinitions", "rows");
        json_t *ev = json_pack("{s:s, s:o}", "type", "BOOKMARK", "object", o);
        char *line = ev ? json_dumps(ev, JSON_COMPACT) : NULL;
        json_decref(ev);
        if (line) {
            size_t n = strlen(line);
            line[n] = '\n';
            send_line(w, line, n + 1);
            free(line);
        }
        return;
    }
    send_event(w, "BOOKMARK", o);
    json_decref(o);
}

static bool wants(const struct watcher *w, const char *ns, const json_t *obj) {
    if (w->ns[0] && strcmp(w->ns, ns) != 0) return false;
    if (w->ls && !labelsel_match(w->ls, json_object_get(json_object_get(obj, "metadata"), "labels"))) return false;
    return !w->fs || fieldsel_match(w->fs, obj);
}

static const char *type_name(enum store_event_type t) {
    return t == STORE_ADDED ? "ADDED" : t == STORE_MODIFIED ? "MODIFIED" : "DELETED";
}

/* The event's line: the stored bytes framed, when they carry the resource's
 * kind and apiVersion (what the shim stores does); else encoded afresh. */
static char *event_line(const struct shim_resource *r, enum store_event_type type, const json_t *obj,
                        const char *json, size_t len, size_t *outlen) {
    char av[300];
    if (r->group[0]) snprintf(av, sizeof av, "%s/%s", r->group, r->version);
    else snprintf(av, sizeof av, "%s", r->version);
    const char *k = json_string_value(json_object_get(obj, "kind"));
    const char *v = json_string_value(json_object_get(obj, "apiVersion"));
    if (json && k && v && !strcmp(k, r->kind) && !strcmp(v, av)) {
        const char *tn = type_name(type);
        size_t tl = strlen(tn), n = 9 + tl + 11 + len + 2; /* {"type":"X","object":...}\n */
        char *line = malloc(n + 1);
        if (!line) return NULL;
        char *p = line;
        memcpy(p, "{\"type\":\"", 9), p += 9;
        memcpy(p, tn, tl), p += tl;
        memcpy(p, "\",\"object\":", 11), p += 11;
        memcpy(p, json, len), p += len;
        memcpy(p, "}\n", 2), p += 2;
        *p = 0;
        *outlen = n;
        return line;
    }
    json_t *copy = json_deep_copy(obj);
    json_t *ev = json_pack("{s:s, s:o}", "type", type_name(type), "object", shim_with_type(r, copy));
    char *line = json_dumps(ev, JSON_COMPACT);
    json_decref(ev);
    if (!line) return NULL;
    size_t n = strlen(line);
    line[n] = '\n';
    *outlen = n + 1;
    return line;
}

/* A change to one watcher: the shared line, or for a Table watcher its own. */
static void send_change(struct watcher *w, enum store_event_type type, const json_t *obj, const char *line,
                        size_t len) {
    if (w->table) send_event(w, type_name(type), (json_t *)obj);
    else send_line(w, line, len);
}

static bool has_live(const struct watch_hub *h, const struct shim_resource *r) {
    for (const struct watcher *w = h->head; w; w = w->next)
        if (w->r == r && w->live && !w->ending) return true;
    return false;
}

/* Hands one change to the live watchers that want it. */
static void deliver(struct watch_hub *h, const struct change *c) {
    if (!c->r || !c->line) return;
    for (struct watcher *w = h->head; w; w = w->next) {
        if (w->r != c->r || !w->live || w->ending || c->rv <= w->rv || !wants(w, c->ns, c->obj)) continue;
        send_change(w, c->type, c->obj, c->line, c->len);
    }
}

/* Everything up to w is delivered: live watchers have considered it. */
static void settle_live(struct watch_hub *h) {
    for (struct watcher *w = h->head; w; w = w->next)
        if (w->live && w->rv < h->w) w->rv = h->w;
}

/* Delivers what has become contiguous. */
static void drain(struct watch_hub *h) {
    bool moved = false;
    while (h->nheap && h->heap[0].rv <= h->w + 1) {
        struct change c = heap_pop(h);
        if (c.rv == h->w + 1) {
            deliver(h, &c);
            h->w = c.rv;
            moved = true;
        }
        change_free(&c);
    }
    if (moved) settle_live(h);
    h->gap_since_ms = h->nheap ? (h->gap_since_ms ? h->gap_since_ms : uv_now(h->loop)) : 0;
}

static const struct shim_resource *resource_by_key(const struct shim *s, const char *key) {
    for (int i = 0; i < shim_res_count(s); i++) {
        const struct shim_resource *r = shim_res_at(s, i);
        if (r && !strcmp(r->store_key, key)) return r;
    }
    return NULL;
}

/* A write through this process's stores. */
static void write_hook(void *ud, const char *resource, const char *ns, enum store_event_type type, uint64_t rv,
                       const json_t *obj, const char *json, size_t len) {
    struct watch_hub *h = ud;
    /* a Lease's bytes for its renewals (a write of text, NULL obj, is kept by its own reply) */
    if (obj) shim_lease_seen(h->owner, resource, ns, json_string_value(json_object_get(json_object_get(obj, "metadata"),
                                                                                      "name")), type, json, len);
    if (rv <= h->w) return; /* a reconcile read it already */
    if (rv > h->top) h->top = rv;
    struct change c = {.rv = rv, .type = type};
    c.r = resource_by_key(h->owner, resource);
    if (c.r && has_live(h, c.r)) { /* the line is built once, for every watcher */
        snprintf(c.ns, sizeof c.ns, "%s", ns);
        /* an object stored as text (an attached create) is parsed only now, for its watchers */
        json_error_t je;
        c.obj = obj ? json_incref((json_t *)obj) : json ? jparse_loadb(json, len, 0, &je) : NULL;
        if (c.obj) c.line = event_line(c.r, type, c.obj, json, len, &c.len);
    }
    if (h->nheap >= PENDING_MAX || heap_push(h, &c)) {
        change_free(&c); /* the hub cannot hold more: live watchers fall back to Redis */
        for (struct watcher *w = h->head; w; w = w->next) w->live = false;
        heap_clear(h);
        h->w = h->top;
        h->gap_since_ms = 0;
        watch_kick(h);
        return;
    }
    drain(h);
    if (h->nheap) watch_kick(h); /* a gap: the tick decides when to read Redis */
}

/* ---- reading Redis: watchers catching up, and gaps ---- */

/* The watcher has read its resource's history up to rv: live once that
 * reaches everything noted here. */
static void caught_up(struct watch_hub *h, struct watcher *w, uint64_t rv) {
    if (rv > w->rv) w->rv = rv;
    uint64_t mark = h->w > h->top ? h->w : h->top;
    if (w->rv >= mark) w->live = true;
}

/* Reads a resource's history once for all its watchers that are behind. */
static void pump_resource(struct watch_hub *h, const struct shim_resource *r) {
    uint64_t from = UINT64_MAX;
    for (struct watcher *w = h->head; w; w = w->next)
        if (w->r == r && !w->ending && !w->live && !w->initial && w->rv < from) from = w->rv;
    if (from == UINT64_MAX) return;
    for (int reads = 0; reads < TICK_READS_MAX; reads++) {
        struct store_history hist = {0};
        int rc = store_history_after(h->st, r->store_key, "", from, HISTORY_BATCH, &hist);
        if (rc == -ESTALE) {
            /* someone is behind the retained history: settle each watcher on its own */
            for (struct watcher *w = h->head; w; w = w->next) {
                if (w->r != r || w->ending || w->live || w->initial) continue;
                struct store_history one = {0};
                if (store_history_after(h->st, r->store_key, "", w->rv, 1, &one) == -ESTALE)
                    send_expired(w, store_errmsg(h->st));
                store_history_free(&one);
            }
            return;
        }
        if (rc) return; /* Redis trouble: try again next tick */
        for (size_t i = 0; i < hist.n; i++) {
            struct store_event *e = &hist.events[i];
            char *line = NULL;
            size_t len = 0;
            for (struct watcher *w = h->head; w; w = w->next) {
                if (w->r != r || w->ending || w->live || w->initial || e->resource_version <= w->rv ||
                    !wants(w, e->ns, e->object))
                    continue;
                if (w->table) {
                    send_change(w, e->type, e->object, NULL, 0);
                    continue;
                }
                if (!line && !(line = event_line(r, e->type, e->object, NULL, 0, &len))) break;
                send_line(w, line, len);
            }
            free(line);
        }
        uint64_t next = hist.more ? hist.next_rv : hist.current_rv; /* all of it, when nothing more follows */
        int more = hist.more;
        store_history_free(&hist);
        for (struct watcher *w = h->head; w; w = w->next)
            if (w->r == r && !w->live && !w->ending && !w->initial && w->rv < next) caught_up(h, w, next);
        if (!more || next <= from) break;
        from = next;
    }
}

/* A change read back from Redis, for the merge of a reconcile. */
struct read_change {
    uint64_t rv;
    const struct shim_resource *r;
    const struct store_event *e;
};

static int cmp_read(const void *a, const void *b) {
    uint64_t x = ((const struct read_change *)a)->rv, y = ((const struct read_change *)b)->rv;
    return x < y ? -1 : x > y;
}

/* Delivers a change read from Redis to the live watchers. */
static void deliver_read(struct watch_hub *h, const struct read_change *rc) {
    const struct store_event *e = rc->e;
    struct change c = {.rv = rc->rv, .r = rc->r, .type = e->type, .obj = e->object};
    snprintf(c.ns, sizeof c.ns, "%s", e->ns ? e->ns : "");
    c.line = event_line(rc->r, e->type, e->object, NULL, 0, &c.len);
    deliver(h, &c);
    free(c.line);
}

/* Fills the gap above w from Redis: every change of the resources that live
 * watchers follow, up to the lowest counter those reads saw, merged in order
 * with what this process noted (a change both read and noted goes out once). */
static void reconcile(struct watch_hub *h) {
    uint64_t cap = UINT64_MAX;
    struct store_history *hs = NULL;
    const struct shim_resource **hr = NULL;
    size_t nh = 0, caph = 0, total = 0;
    bool failed = false;
    for (int i = 0; i < shim_res_count(h->owner) && !failed; i++) {
        const struct shim_resource *r = shim_res_at(h->owner, i);
        if (!r || !has_live(h, r)) continue;
        uint64_t from = h->w;
        for (int reads = 0;; reads++) {
            if (nh == caph) {
                size_t nc = caph ? caph * 2 : 16;
                struct store_history *n1 = realloc(hs, nc * sizeof *n1);
                if (n1) hs = n1;
                const struct shim_resource **n2 = n1 ? realloc(hr, nc * sizeof *n2) : NULL;
                if (n2) hr = n2;
                if (!n1 || !n2) {
                    failed = true;
                    break;
                }
                caph = nc;
            }
            struct store_history *hist = &hs[nh];
            int rc = store_history_after(h->st, r->store_key, "", from, HISTORY_BATCH, hist);
            if (rc == -ESTALE) { /* the gap is older than the history kept: these watchers re-list */
                for (struct watcher *w = h->head; w; w = w->next)
                    if (w->r == r && w->live && !w->ending) send_expired(w, store_errmsg(h->st));
                break;
            }
            if (rc) {
                failed = true;
                break;
            }
            hr[nh++] = r;
            total += hist->n;
            if (!hist->more) {
                if (hist->current_rv < cap) cap = hist->current_rv;
                break;
            }
            if (reads + 1 >= TICK_READS_MAX || hist->next_rv <= from) {
                if (hist->next_rv < cap) cap = hist->next_rv; /* the rest on the next tick */
                break;
            }
            from = hist->next_rv;
        }
    }
    if (!failed && cap == UINT64_MAX && store_current_rv(h->st, &cap)) failed = true; /* nobody live */
    struct read_change *rd = !failed && total ? malloc(total * sizeof *rd) : NULL;
    if (total && !rd) failed = true;
    if (!failed) {
        size_t nrd = 0;
        for (size_t i = 0; i < nh; i++)
            for (size_t j = 0; j < hs[i].n; j++) {
                const struct store_event *e = &hs[i].events[j];
                if (e->resource_version > h->w && e->resource_version <= cap)
                    rd[nrd++] = (struct read_change){.rv = e->resource_version, .r = hr[i], .e = e};
            }
        if (nrd > 1) qsort(rd, nrd, sizeof *rd, cmp_read); /* rd is NULL when nothing was read */
        size_t i = 0;
        for (;;) {
            uint64_t a = i < nrd ? rd[i].rv : UINT64_MAX;
            uint64_t b = h->nheap && h->heap[0].rv <= cap ? h->heap[0].rv : UINT64_MAX;
            if (a == UINT64_MAX && b == UINT64_MAX) break;
            if (b <= a) {
                struct change c = heap_pop(h);
                if (c.rv > h->w) deliver(h, &c);
                if (a == c.rv) i++; /* read and noted: once */
                change_free(&c);
            } else {
                deliver_read(h, &rd[i++]);
            }
        }
        if (cap > h->w) h->w = cap;
        if (h->w > h->top) h->top = h->w;
        settle_live(h);
        drain(h);
    }
    free(rd);
    for (size_t i = 0; i < nh; i++) store_history_free(&hs[i]);
    free(hs);
    free(hr);
}

static void on_tick(uv_timer_t *t) {
    struct watch_hub *h = t->data;
    uint64_t now = uv_now(h->loop);
    bool inflight = h->astore && store_async_inflight(h->astore) > 0;
    if (h->nheap && (!inflight || now - h->gap_since_ms >= GAP_WAIT_MS)) reconcile(h);
    else if (!h->nheap && !inflight) { /* someone else may have written meanwhile */
        uint64_t c = 0;
        if (!store_current_rv(h->st, &c) && c > h->w) reconcile(h);
    }
    for (int i = 0; i < shim_res_count(h->owner); i++)
        if (shim_res_at(h->owner, i)) pump_resource(h, shim_res_at(h->owner, i));
    for (struct watcher *w = h->head; w; w = w->next) {
        if (w->ending || w->initial) continue;
        if (w->deadline_ms && now >= w->deadline_ms) {
            w->ending = true;
            http_stream_end(w->st);
            continue;
        }
        if (w->bookmarks && now >= w->next_bookmark_ms) {
            send_bookmark(w);
            w->next_bookmark_ms = now + h->bookmark_ms;
        }
    }
}

static int initial_each(void *ud, json_t *it) {
    struct watcher *w = ud;
    const char *ns = json_string_value(json_object_get(json_object_get(it, "metadata"), "namespace"));
    if (wants(w, ns ? ns : "", it)) send_event(w, "ADDED", shim_with_type(w->r, it));
    return 0;
}

/* Initial ADDED events for a watch without a resourceVersion: the current list. */
static int send_initial(struct watch_hub *h, struct watcher *w) {
    return shim_each(h->owner, w->r->store_key, w->ns, &w->rv, initial_each, w);
}

static void initial_emit(void *ud, const char *line, size_t len, json_t *obj) {
    struct watcher *w = ud;
    if (obj) send_event(w, "ADDED", obj);
    else send_line(w, line, len);
}

/* The sliced initial events are out: the watch goes on from the list's version. */
static void initial_done(void *ud, uint64_t rv, int err) {
    struct watcher *w = ud;
    struct watch_hub *h = w->hub;
    w->initial = NULL;
    if (err == -ECANCELED) { /* its stream overflowed or failed: on_close frees it */
        w->ending = true;
        return;
    }
    if (err == -ENOSPC)
        send_expired(w, "the server is busy serving whole lists (at its --list-memory-mb): list with a limit, then "
                        "watch from the list's resourceVersion");
    else if (err) send_expired(w, "the initial list of the watch could not be read consistently; watch again");
    else w->rv = rv;
    caught_up(h, w, w->rv);
    watch_kick(h);
}

void watch_start(struct watch_hub *h, const struct shim_resource *r, const char *ns, struct labelsel *ls,
                 struct fieldsel *fs, bool table, enum shim_include inc, const struct http_request *req,
                 struct http_response *resp) {
    if (!h) {
        labelsel_free(ls);
        fieldsel_free(fs);
        shim_status(resp, 405, "MethodNotAllowed", NULL, "watch is not enabled on this server");
        return;
    }
    if (http_req_arg_bool(req, "sendInitialEvents")) {
        labelsel_free(ls);
        fieldsel_free(fs);
        shim_status(resp, 422, "Invalid", NULL, "sendInitialEvents is not supported by this server; "
                    "list, then watch from the list's resourceVersion");
        return;
    }
    const char *rvs = http_req_arg(req, "resourceVersion");
    const char *to = http_req_arg(req, "timeoutSeconds");
    char *end = NULL;
    uint64_t start_rv = 0;
    bool from_now = !rvs || !rvs[0] || !strcmp(rvs, "0");
    if (!from_now) {
        start_rv = strtoull(rvs, &end, 10);
        if (!end || *end) {
            labelsel_free(ls);
            fieldsel_free(fs);
            shim_status(resp, 400, "BadRequest", NULL, "invalid resourceVersion \"%s\"", rvs);
            return;
        }
    }
    if (from_now && h->owner->loop && !shim_slices_admit(h->owner, resp)) {
        labelsel_free(ls);
        fieldsel_free(fs);
        return; /* 429: the whole lists being served hold their memory */
    }
    void *hold = NULL; /* the user's count of watches (shim_limits.h) */
    if (!shim_sec_watch_begin(h->owner, resp, &hold)) {
        labelsel_free(ls);
        fieldsel_free(fs);
        return; /* 429 */
    }
    struct watcher *w = calloc(1, sizeof *w);
    if (!w) {
        shim_sec_watch_end(h->owner, hold);
        labelsel_free(ls);
        fieldsel_free(fs);
        shim_status(resp, 500, "InternalError", NULL, "out of memory");
        return;
    }
    w->lim = hold;
    w->hub = h;
    w->r = r;
    snprintf(w->ns, sizeof w->ns, "%s", r->namespaced ? ns : "");
    w->ls = ls;
    w->fs = fs;
    w->table = table;
    w->inc = inc;
    w->rv = start_rv;
    uint64_t now = uv_now(h->loop);
    long long tsec = to ? atoll(to) : 0;
    if (tsec > 0) w->deadline_ms = now + (uint64_t)tsec * 1000;
    w->bookmarks = http_req_arg_bool(req, "allowWatchBookmarks");
    w->next_bookmark_ms = now + h->bookmark_ms;
    w->st = http_stream_start(req, 200, "application/json", h->max_buffer, on_stream_closed, w);
    if (!w->st) {
        shim_sec_watch_end(h->owner, hold);
        labelsel_free(ls);
        fieldsel_free(fs);
        free(w);
        shim_status(resp, 500, "InternalError", NULL, "cannot open the watch stream");
        return;
    }
    w->next = h->head;
    if (h->head) h->head->prev = w;
    h->head = w;
    if (h->owner->metrics) {
        w->open = metrics_series1(h->owner->metrics->watches, r->plural);
        w->sent = metrics_series1(h->owner->metrics->watch_events, r->plural);
        metrics_gauge_add(w->open, 1);
    }
    if (from_now && (w->initial = shim_slices_watch(h->owner, r, w->ns, w->ls, w->fs, w->table, w->st, initial_emit,
                                                    initial_done, w))) {
        /* served over many turns; initial_done makes it a watcher here */
    } else if (from_now) {
        if (send_initial(h, w)) send_expired(w, store_errmsg(h->st));
        caught_up(h, w, w->rv); /* the list is as new as Redis: live unless changes wait in the heap */
    } else {
        struct store_history one = {0};
        if (store_history_after(h->st, r->store_key, "", start_rv, 1, &one) == -ESTALE)
            send_expired(w, store_errmsg(h->st));
        store_history_free(&one);
        caught_up(h, w, w->rv);
    }
    watch_kick(h);
}
