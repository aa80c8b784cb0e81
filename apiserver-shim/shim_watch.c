/* Watch: newline-delimited JSON events over a chunked stream.
 *
 * Fan-out: all watchers of one resource share one read of its change history
 * per tick (store_history_after from the lowest resourceVersion any of them
 * has seen); each event's JSON line is built once and sent to every watcher
 * whose namespace and selectors it matches. A tick runs every poll_ms while
 * anyone watches, and at once after a write through this process (watch_kick).
 * A watcher that falls behind by more than max_buffer unsent bytes is closed
 * (the HTTP layer's bound) and re-lists, as a Kubernetes client does. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

#define HISTORY_BATCH 5000
#define TICK_READS_MAX 64 /* history reads per resource per tick, so one tick stays bounded */

struct watcher {
    struct watch_hub *hub;
    const struct shim_resource *r;
    char ns[STORE_MAX_NAMESPACE + 1];
    struct labelsel *ls;
    struct fieldsel *fs;
    struct http_stream *st;
    uint64_t rv;          /* everything up to here was considered */
    uint64_t deadline_ms; /* 0: no timeout */
    uint64_t next_bookmark_ms;
    bool bookmarks, ending;
    struct watcher *prev, *next;
};

struct watch_hub {
    struct shim *owner; /* its store connection is used for reads */
    struct store *st;
    uv_loop_t *loop;
    uv_timer_t timer;
    bool timer_on;
    unsigned poll_ms, bookmark_ms;
    size_t max_buffer;
    struct watcher *head;
};

static void on_tick(uv_timer_t *t);

struct watch_hub *watch_hub_new(struct shim *owner, const struct shim_config *cfg) {
    if (!cfg || !cfg->loop) return NULL;
    struct watch_hub *h = calloc(1, sizeof *h);
    if (!h) return NULL;
    h->owner = owner;
    h->st = owner->st;
    h->loop = cfg->loop;
    h->poll_ms = cfg->poll_ms ? cfg->poll_ms : 20;
    h->bookmark_ms = cfg->bookmark_ms ? cfg->bookmark_ms : 10000;
    h->max_buffer = cfg->max_buffer ? cfg->max_buffer : (64u << 20);
    uv_timer_init(h->loop, &h->timer);
    h->timer.data = h;
    return h;
}

static void watcher_unlink_free(struct watcher *w) {
    struct watch_hub *h = w->hub;
    if (w->prev) w->prev->next = w->next;
    else h->head = w->next;
    if (w->next) w->next->prev = w->prev;
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

static void on_timer_closed(uv_handle_t *t) { free(t->data); }

/* The timer handle must outlive uv_close: the hub is freed by the close
 * callback, on the loop's next turn (the caller runs the loop dry). */
void watch_hub_free(struct watch_hub *h) {
    if (!h) return;
    while (h->head) watcher_unlink_free(h->head); /* streams are gone with the server */
    uv_close((uv_handle_t *)&h->timer, on_timer_closed);
}

void watch_kick(struct watch_hub *h) {
    if (!h || !h->head) return;
    uv_timer_start(&h->timer, on_tick, 0, h->poll_ms);
    h->timer_on = true;
}

static void send_line(struct watcher *w, const char *line, size_t len) {
    if (w->ending) return;
    if (http_stream_write(w->st, line, len) != 0) w->ending = true; /* closing: on_close will free it */
}

static void send_event(struct watcher *w, const char *type, json_t *obj) {
    json_t *ev = json_pack("{s:s, s:O}", "type", type, "object", obj);
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

/* Reads a resource's history once for all its watchers. */
static void pump_resource(struct watch_hub *h, const struct shim_resource *r) {
    uint64_t from = UINT64_MAX;
    for (struct watcher *w = h->head; w; w = w->next)
        if (w->r == r && !w->ending && w->rv < from) from = w->rv;
    if (from == UINT64_MAX) return;
    for (int reads = 0; reads < TICK_READS_MAX; reads++) {
        struct store_history hist = {0};
        int rc = store_history_after(h->st, r->store_key, "", from, HISTORY_BATCH, &hist);
        if (rc == -ESTALE) {
            /* someone is behind the retained history: settle each watcher on its own */
            for (struct watcher *w = h->head; w; w = w->next) {
                if (w->r != r || w->ending) continue;
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
                if (w->r != r || w->ending || e->resource_version <= w->rv || !wants(w, e->ns, e->object)) continue;
                if (!line) { /* built once, shared by every watcher it goes to */
                    json_t *ev = json_pack("{s:s, s:O}", "type", type_name(e->type), "object",
                                           shim_with_type(r, e->object));
                    line = json_dumps(ev, JSON_COMPACT);
                    json_decref(ev);
                    if (!line) break;
                    len = strlen(line);
                    line[len++] = '\n';
                }
                send_line(w, line, len);
            }
            free(line);
        }
        uint64_t next = hist.next_rv;
        int more = hist.more;
        store_history_free(&hist);
        for (struct watcher *w = h->head; w; w = w->next)
            if (w->r == r && w->rv < next) w->rv = next;
        if (!more || next <= from) break;
        from = next;
    }
}

static void on_tick(uv_timer_t *t) {
    struct watch_hub *h = t->data;
    uint64_t now = uv_now(h->loop);
    for (int i = 0; i < shim_res_count(h->owner); i++)
        if (shim_res_at(h->owner, i)) pump_resource(h, shim_res_at(h->owner, i));
    for (struct watcher *w = h->head; w; w = w->next) {
        if (w->ending) continue;
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

void watch_start(struct watch_hub *h, const struct shim_resource *r, const char *ns, struct labelsel *ls,
                 struct fieldsel *fs, const struct http_request *req, struct http_response *resp) {
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
    struct watcher *w = calloc(1, sizeof *w);
    if (!w) {
        labelsel_free(ls);
        fieldsel_free(fs);
        shim_status(resp, 500, "InternalError", NULL, "out of memory");
        return;
    }
    w->hub = h;
    w->r = r;
    snprintf(w->ns, sizeof w->ns, "%s", r->namespaced ? ns : "");
    w->ls = ls;
    w->fs = fs;
    w->rv = start_rv;
    uint64_t now = uv_now(h->loop);
    long long tsec = to ? atoll(to) : 0;
    if (tsec > 0) w->deadline_ms = now + (uint64_t)tsec * 1000;
    w->bookmarks = http_req_arg_bool(req, "allowWatchBookmarks");
    w->next_bookmark_ms = now + h->bookmark_ms;
    w->st = http_stream_start(req, 200, "application/json", h->max_buffer, on_stream_closed, w);
    if (!w->st) {
        labelsel_free(ls);
        fieldsel_free(fs);
        free(w);
        shim_status(resp, 500, "InternalError", NULL, "cannot open the watch stream");
        return;
    }
    w->next = h->head;
    if (h->head) h->head->prev = w;
    h->head = w;
    if (from_now) {
        if (send_initial(h, w)) send_expired(w, store_errmsg(h->st));
    } else {
        struct store_history one = {0};
        if (store_history_after(h->st, r->store_key, "", start_rv, 1, &one) == -ESTALE)
            send_expired(w, store_errmsg(h->st));
        store_history_free(&one);
    }
    watch_kick(h);
}
