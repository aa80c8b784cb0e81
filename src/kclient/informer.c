/* Informers: list (pages of KC_INFORMER_PAGE) into a fresh map, swap it in
 * reporting the difference against the cache, then watch from the list's
 * resourceVersion. A 410 (reply or ERROR event), any other ERROR event or a
 * broken stream re-lists after a backoff (100 ms doubling to 5 s, reset by a
 * watch event or a watch that lived a second or more; kc_informer_current is
 * false from then until the new list is applied; a 410 on a continue token
 * makes the next list one unpaged request); a stream the server
 * ended cleanly (watches ask for timeoutSeconds 300-600) is re-watched from
 * the last resourceVersion after the same backoff.
 *
 * Informers of one client on the same path and query share one feed: one
 * list, one watch, one cache (a jansson object keyed "ns/name"), each event
 * decoded once and handed to every subscriber in the order they were made. A
 * subscriber started after the feed synced gets the cache as adds, then its
 * own on_synced. Handlers may free any informer (the free of a feed busy in
 * a handler waits until the handler returns: busy counter).
 *
 * Options (kc_informer_new_opts): a keys-only feed's cache maps "ns/name"
 * to the resourceVersion alone, so a subscriber that keeps its own state
 * pays for one string per object instead of a whole tree (a pod's tree is
 * 10-15 KB). Its updates come without the old object and the deletions a
 * re-list finds come as a stub naming the object. Such a feed is shared
 * only until its first list is applied: its cache has no objects to give a
 * later subscriber, which gets a feed of its own (its own list; a role
 * started again in a new leader term is one). A transform trims every
 * object (listed or watched) before it is cached or handed out; feeds are
 * shared only by informers with the same options.
 *
 * A compact feed (kc_informer_opts.compact) keeps each object as its
 * resourceVersion and its compact JSON text in one string value ("rv\0text":
 * a pod's 2 KB of text instead of its 13-15 KB tree). Handlers get each
 * event's decoded object as usual; kc_informer_get and a late subscriber's
 * adds decode the text again (kc_informer_get's objects are held in the
 * feed's `decoded` array until the loop's next check phase: valid until the
 * current callback returns); kc_informer_foreach decodes one at a time. Its
 * updates come without the old object, and a deletion a re-list finds
 * comes as the object decoded from the cache. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kclient_int.h"

#define KC_INFORMER_PAGE 500
#define KC_BACKOFF_MIN_MS 100
#define KC_BACKOFF_MAX_MS 5000
#define KC_WATCH_TIMEOUT_S 300 /* watches last 300-600 s (timeoutSeconds), then resume */

struct kc_feed;

/* What a user holds: a subscription to a feed. */
struct kc_informer {
    struct kc_feed *f;
    struct kc_informer_handlers h;
    void *ud;
    bool started, synced;
    bool dead; /* freed while its feed was busy: unlinked when the feed is idle */
    struct kc_informer *next;
};

struct kc_feed {
    struct kclient *c;
    char *path, *query;
    json_t *cache;          /* "ns/name" -> object */
    json_t *fresh;          /* the list being gathered */
    char *rv;
    struct kc_req *req;     /* the list page in flight */
    struct kc_watch *watch;
    uv_timer_t *timer;      /* backoff; freed by its close callback */
    unsigned backoff_ms;
    unsigned lists;         /* complete lists */
    uint64_t watch_started; /* uv_now at the last watch start */
    uint64_t seen_ms;       /* uv_now when the server last spoke for the cache: a list completed, an event or a
                             * bookmark arrived */
    bool started, synced, relist_next;
    bool relist_now;        /* kc_informer_relist: drop the watch and any list under way first */
    bool relisting;         /* a re-list is due or under way: the cache may be behind (kc_informer_current) */
    bool paging;            /* the list request in flight carries a continue token */
    bool unpaged;           /* the next list asks for everything at once (a continue token expired) */
    bool keys_only;         /* cache values are resourceVersions (json strings), not objects */
    bool compact;           /* cache values are "rv\0text" strings (the object's compact JSON) */
    json_t *decoded;        /* compact: objects kc_informer_get decoded, dropped at the next check phase */
    char *tbuf;             /* compact: scratch for an object's text */
    size_t tcap;
    uv_check_t *check;      /* compact: drops `decoded` (freed by its close callback) */
    kc_transform_fn transform;
    jparse_keep_fn keep;    /* members not decoded (kc_informer_opts) */
    int busy;
    bool free_pending;      /* no subscriber is left: freed when not busy */
    struct kc_informer *subs;
    struct kc_feed *prev, *next;
};

static void list_page(struct kc_feed *f, const char *cont);
static void start_watch(struct kc_feed *f);

static void timer_closed(uv_handle_t *h) { free(h); }

/* The loop's check phase after a kc_informer_get of a compact feed: the
 * objects it decoded are dropped (the callback that asked has returned). */
static void drop_decoded(uv_check_t *h) {
    struct kc_feed *f = h->data;
    json_array_clear(f->decoded);
    uv_check_stop(h);
}

static void set_rv(struct kc_feed *f, const char *rv) {
    if (!rv || !*rv || !strcmp(rv, f->rv)) return;
    char *n = strdup(rv);
    if (!n) return;
    free(f->rv);
    f->rv = n;
}

static const char *obj_rv(json_t *obj) {
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
}

/* A compact value: "rv\0text", or NULL. The text is the one the server
 * sent (text, tl bytes) when given, else obj's compact JSON (jdump); it is
 * put after the version in the feed's scratch buffer and copied once into
 * the string. */
static json_t *compact_value(struct kc_feed *f, json_t *obj, const char *text, size_t tl) {
    const char *rv = obj_rv(obj);
    size_t rl = rv ? strlen(rv) : 0;
    char *dumped = NULL;
    if (!text && !(text = dumped = jdump(obj, JSON_COMPACT, &tl))) return NULL;
    json_t *v = NULL;
    if (f->tcap < rl + 1 + tl) {
        char *b = realloc(f->tbuf, rl + 1 + tl + 4096);
        if (!b) goto out;
        f->tbuf = b;
        f->tcap = rl + 1 + tl + 4096;
    }
    if (rl) memcpy(f->tbuf, rv, rl);
    f->tbuf[rl] = 0;
    memcpy(f->tbuf + rl + 1, text, tl);
    v = json_stringn_nocheck(f->tbuf, rl + 1 + tl);
out:
    free(dumped);
    return v;
}

/* What the cache keeps for obj (a new reference; NULL when out of memory). */
static json_t *cache_value(struct kc_feed *f, json_t *obj, const char *text, size_t tl) {
    if (f->compact) return compact_value(f, obj, text, tl);
    if (!f->keys_only) return json_incref(obj);
    const char *rv = obj_rv(obj);
    return json_string(rv ? rv : "");
}

/* The resourceVersion of a cache value. */
static const char *cached_rv(const struct kc_feed *f, json_t *v) {
    return f->keys_only || f->compact ? json_string_value(v) : obj_rv(v);
}

/* The object a cache value holds: a new reference (decoded for a compact
 * feed), or NULL for a keys-only feed or text that does not decode. */
static json_t *cached_object(const struct kc_feed *f, json_t *v) {
    if (f->keys_only) return NULL;
    if (!f->compact) return json_incref(v);
    const char *s = json_string_value(v);
    size_t len = json_string_length(v), rl = s ? strlen(s) : 0;
    if (!s || rl >= len) return NULL;
    return jparse_loadb(s + rl + 1, len - rl - 1, JSON_DECODE_ANY, NULL);
}

/* The object a deletion found by a re-list reports: the cached one, or for
 * a keys-only feed a stub with the key's namespace and name and the last
 * resourceVersion seen (a new reference). */
static json_t *deleted_object(const struct kc_feed *f, const char *key, json_t *v) {
    if (!f->keys_only) return cached_object(f, v);
    const char *slash = strchr(key, '/');
    if (!slash) return NULL;
    json_t *md = json_pack("{s:s%, s:s, s:s}", "namespace", key, (size_t)(slash - key), "name", slash + 1,
                           "resourceVersion", json_string_value(v) ? json_string_value(v) : "");
    if (md && slash == key) json_object_del(md, "namespace"); /* cluster-scoped */
    return md ? json_pack("{s:o}", "metadata", md) : NULL;
}

/* "ns/name" into key; false when the object has no name. */
static bool obj_key(json_t *obj, char *key, size_t len) {
    json_t *md = json_object_get(obj, "metadata");
    const char *name = json_string_value(json_object_get(md, "name"));
    const char *ns = json_string_value(json_object_get(md, "namespace"));
    if (!name) return false;
    int n = snprintf(key, len, "%s/%s", ns ? ns : "", name);
    return n > 0 && (size_t)n < len;
}

static void really_free(struct kc_feed *f) {
    struct kclient *c = f->c;
    if (f->prev) f->prev->next = f->next;
    else if (c->feeds == f) c->feeds = f->next;
    if (f->next) f->next->prev = f->prev;
    kc_watch_stop(f->watch);
    kc__request_abandon(f->req);
    uv_timer_stop(f->timer);
    uv_close((uv_handle_t *)f->timer, timer_closed);
    if (f->check) {
        uv_check_stop(f->check);
        uv_close((uv_handle_t *)f->check, timer_closed);
    }
    json_decref(f->decoded);
    free(f->tbuf);
    while (f->subs) {
        struct kc_informer *s = f->subs;
        f->subs = s->next;
        free(s);
    }
    json_decref(f->cache);
    json_decref(f->fresh);
    free(f->rv);
    free(f->path);
    free(f->query);
    free(f);
}

/* Unlinks subscribers freed during a handler; frees the feed when none is left. */
static void reap(struct kc_feed *f) {
    for (struct kc_informer **p = &f->subs; *p;) {
        struct kc_informer *s = *p;
        if (s->dead) {
            *p = s->next;
            free(s);
        } else {
            p = &s->next;
        }
    }
    if (!f->subs) f->free_pending = true;
}

/* Leaves a handler section; true when the feed is gone. */
static bool unbusy(struct kc_feed *f) {
    if (--f->busy > 0) return f->free_pending;
    reap(f);
    if (!f->free_pending) return false;
    really_free(f);
    return true;
}

/* Stop delivering: the feed, or the whole client, is going. */
static bool stopping(const struct kc_feed *f) { return f->free_pending || f->c->free_pending; }

#define EACH_LIVE(f, s)                                                                                                \
    for (struct kc_informer *s = (f)->subs; s && !stopping(f); s = s->next)                                            \
        if (s->started && !s->dead)

static void emit_add(struct kc_feed *f, json_t *obj) {
    EACH_LIVE(f, s) if (s->h.on_add) s->h.on_add(s->ud, obj);
}

static void emit_update(struct kc_feed *f, json_t *old, json_t *obj) {
    EACH_LIVE(f, s) if (s->h.on_update) s->h.on_update(s->ud, old, obj);
}

static void emit_delete(struct kc_feed *f, json_t *obj) {
    EACH_LIVE(f, s) if (s->h.on_delete) s->h.on_delete(s->ud, obj);
}

static void emit_synced(struct kc_feed *f) {
    EACH_LIVE(f, s) {
        if (s->synced) continue;
        s->synced = true;
        if (s->h.on_synced) s->h.on_synced(s->ud);
    }
}

static void on_timer(uv_timer_t *t) {
    struct kc_feed *f = t->data;
    struct kclient *c = f->c;
    kc__enter(c);
    if (f->relist_now && !kc__watch_answered(f->watch)) {
        /* stopping a watch while its connection is being made left libuv
         * polling the socket curl closed (an abort): wait for its answer */
        uv_timer_start(f->timer, on_timer, 20, 0);
        kc__leave(c);
        return;
    }
    if (f->relist_now) { /* kc_informer_relist */
        f->relist_now = false;
        kc_watch_stop(f->watch); /* its end callback is not called */
        f->watch = NULL;
        kc__request_abandon(f->req); /* a list under way may have been read before the caller's point */
        f->req = NULL;
    }
    if (f->relist_next) list_page(f, NULL);
    else start_watch(f);
    kc__leave(c);
}

static void schedule(struct kc_feed *f, bool relist) {
    if (f->free_pending) return;
    f->relist_next = relist;
    if (relist) f->relisting = true; /* until a whole list is applied (apply_list) */
    uv_timer_start(f->timer, on_timer, f->backoff_ms, 0);
    f->backoff_ms = f->backoff_ms * 2 > KC_BACKOFF_MAX_MS ? KC_BACKOFF_MAX_MS : f->backoff_ms * 2;
}

/* obj as the cache's entry for key: an add, or an update when its
 * resourceVersion moved (one that is missing counts as moved). */
static void cache_put(struct kc_feed *f, const char *key, json_t *obj, const char *text, size_t tl) {
    json_t *old = json_object_get(f->cache, key);
    if (!old) {
        json_object_set_new(f->cache, key, cache_value(f, obj, text, tl));
        emit_add(f, obj);
        return;
    }
    const char *a = cached_rv(f, old), *b = obj_rv(obj);
    if (a && b && !strcmp(a, b)) return;
    json_incref(old);
    json_object_set_new(f->cache, key, cache_value(f, obj, text, tl));
    emit_update(f, f->keys_only || f->compact ? NULL : old, obj);
    json_decref(old);
}

/* A listed object of a compact feed (v: its compact value, as on_list
 * kept it) as the cache's entry for key: decoded only to be handed out,
 * when new or changed. */
static void cache_put_compact(struct kc_feed *f, const char *key, json_t *v) {
    json_t *old = json_object_get(f->cache, key);
    const char *a = old ? cached_rv(f, old) : NULL, *b = cached_rv(f, v);
    if (a && b && *b && !strcmp(a, b)) return;
    json_t *obj = cached_object(f, v);
    if (!obj) return;
    bool had = old != NULL;
    json_object_set(f->cache, key, v);
    if (had) emit_update(f, NULL, obj);
    else emit_add(f, obj);
    json_decref(obj);
}

/* ---- the diff after a complete list ---- */

static void apply_list(struct kc_feed *f) {
    json_t *fresh = f->fresh;
    f->fresh = NULL;
    const char *key;
    json_t *obj, *tmp;
    f->busy++;
    json_object_foreach(fresh, key, obj) {
        if (f->compact) cache_put_compact(f, key, obj);
        else cache_put(f, key, obj, NULL, 0);
        if (stopping(f)) goto out;
    }
    json_object_foreach_safe(f->cache, tmp, key, obj) {
        if (json_object_get(fresh, key)) continue;
        json_t *gone = deleted_object(f, key, obj);
        json_object_del(f->cache, key);
        if (gone) emit_delete(f, gone);
        json_decref(gone);
        if (stopping(f)) goto out;
    }
    f->synced = true;
    f->relisting = false;
    f->seen_ms = uv_now(f->c->loop);
    emit_synced(f);
out:
    json_decref(fresh);
    if (unbusy(f)) return;
    start_watch(f);
}

/* A filtered feed's filter over a list page: items[i]'s members go to keep. */
static bool list_keep(void *ud, const struct jparse_seg *path, int depth, const char *key, size_t len) {
    struct kc_feed *f = ud;
    if (depth < 2 || !JPARSE_SEG_IS(&path[0], "items") || path[1].key) return true;
    return f->keep(NULL, path + 2, depth - 2, key, len);
}

static void on_list(void *ud, const struct kc_response *r) {
    struct kc_feed *f = ud;
    f->req = NULL;
    json_t *page = f->keep && r->status == 200 ? jparse_filtered(r->raw, r->rawlen, 0, list_keep, f) : NULL;
    json_t *body = page ? page : kc_response_body(r);
    json_t *items = json_object_get(body, "items");
    if (r->status != 200 || !json_is_array(items)) {
        fprintf(stderr, "level=warn msg=\"informer list failed\" path=%s status=%ld error=\"%s\"\n", f->path,
                r->status, r->error ? r->error : "not a list");
        json_decref(page);
        json_decref(f->fresh);
        f->fresh = NULL;
        /* 410 on a continue token: the collection changes faster than the
         * server's history lets a paged list finish, and a paged re-list
         * would fail the same way forever. Ask for the whole list in one
         * reply instead (as client-go's pager does); back to pages after a
         * failure of that, or once it succeeded. */
        bool expired = r->status == 410 && f->paging && !f->unpaged;
        f->unpaged = expired;
        if (expired) {
            fprintf(stderr, "level=info msg=\"informer list continue expired, listing without pages\" path=%s\n",
                    f->path);
            list_page(f, NULL);
            return;
        }
        schedule(f, true);
        return;
    }
    size_t i;
    json_t *obj;
    char key[1024];
    json_array_foreach(items, i, obj) {
        if (!obj_key(obj, key, sizeof key)) continue;
        if (f->transform) f->transform(obj);
        /* a compact feed gathers the list as text: a re-list of every pod
         * never holds them all as trees at once */
        if (f->compact) json_object_set_new(f->fresh, key, cache_value(f, obj, NULL, 0));
        else json_object_set(f->fresh, key, obj);
    }
    json_t *md = json_object_get(body, "metadata");
    const char *cont = json_string_value(json_object_get(md, "continue"));
    if (cont && *cont) {
        list_page(f, cont);
        json_decref(page);
        return;
    }
    set_rv(f, json_string_value(json_object_get(md, "resourceVersion")));
    json_decref(page);
    f->unpaged = false;
    f->lists++; /* the backoff stays: a server whose watches fail at once must not be listed 10 times a second */
    apply_list(f);
}

static void list_page(struct kc_feed *f, const char *cont) {
    if (!cont) {
        json_decref(f->fresh);
        f->fresh = json_object();
        if (!f->fresh) {
            schedule(f, true);
            return;
        }
    }
    size_t clen = cont ? strlen(cont) : 0;
    size_t cap = strlen(f->path) + (f->query ? strlen(f->query) : 0) + 3 * clen + 64;
    char *p = malloc(cap);
    if (!p) {
        schedule(f, true);
        return;
    }
    char sep = strchr(f->path, '?') ? '&' : '?';
    int n = f->unpaged ? snprintf(p, cap, "%s%climit=0", f->path, sep)
                       : snprintf(p, cap, "%s%climit=%d", f->path, sep, KC_INFORMER_PAGE);
    f->paging = clen > 0;
    if (clen) {
        n += snprintf(p + n, cap - (size_t)n, "&continue=");
        n += kc_escape(cont, p + n, cap - (size_t)n);
    }
    if (f->query && *f->query) snprintf(p + n, cap - (size_t)n, "&%s", f->query);
    int rc;
    f->req = kc__request(f->c, "GET", p, NULL, NULL, on_list, f, &rc);
    free(p);
    if (!f->req && rc != -ECANCELED) schedule(f, true);
}

/* ---- the watch ---- */

static void on_event(void *ud, const char *type, json_t *obj) {
    struct kc_feed *f = ud;
    char key[1024];
    if (!strcmp(type, "ERROR")) {
        json_int_t code = json_integer_value(json_object_get(obj, "code"));
        fprintf(stderr, "level=info msg=\"informer watch error, re-listing\" path=%s code=%lld\n", f->path,
                (long long)code);
        kc_watch_stop(f->watch);
        f->watch = NULL;
        schedule(f, true);
        return;
    }
    set_rv(f, obj_rv(obj));
    f->backoff_ms = KC_BACKOFF_MIN_MS;
    f->seen_ms = uv_now(f->c->loop);
    if (!strcmp(type, "BOOKMARK") || !obj_key(obj, key, sizeof key)) return;
    if (f->transform) f->transform(obj);
    f->busy++;
    if (!strcmp(type, "DELETED")) {
        json_t *old = json_object_get(f->cache, key);
        if (old) {
            json_incref(old);
            json_object_del(f->cache, key);
            emit_delete(f, obj);
            json_decref(old);
        }
    } else if (!strcmp(type, "ADDED") || !strcmp(type, "MODIFIED")) {
        /* a compact feed keeps the text the server sent, when nothing was trimmed from the object */
        size_t tl = 0;
        const char *text = f->compact && !f->transform ? kc__watch_object_text(f->watch, type, &tl) : NULL;
        cache_put(f, key, obj, text, tl);
    }
    unbusy(f);
}

static void on_watch_end(void *ud, long status, const char *error) {
    struct kc_feed *f = ud;
    f->watch = NULL;
    if (uv_now(f->c->loop) - f->watch_started >= 1000) f->backoff_ms = KC_BACKOFF_MIN_MS; /* it was healthy */
    if (status == 200 && !error) { /* the server closed the stream: resume from rv */
        schedule(f, false);
        return;
    }
    fprintf(stderr, "level=info msg=\"informer watch ended, re-listing\" path=%s status=%ld error=\"%s\"\n", f->path,
            status, error ? error : "");
    schedule(f, true);
}

static void start_watch(struct kc_feed *f) {
    if (f->free_pending) return;
    /* like client-go: the server ends the watch after 5-10 minutes, so a
     * silently dead connection cannot hold the informer forever */
    unsigned secs = KC_WATCH_TIMEOUT_S + (unsigned)(uv_hrtime() % KC_WATCH_TIMEOUT_S);
    size_t cap = (f->query ? strlen(f->query) : 0) + 32;
    char *q = malloc(cap);
    if (q) {
        snprintf(q, cap, "%s%stimeoutSeconds=%u", f->query ? f->query : "", f->query && *f->query ? "&" : "", secs);
        f->watch = f->keep ? kclient_watch_filtered(f->c, f->path, q, f->rv, f->keep, NULL, on_event, on_watch_end, f)
                           : kclient_watch(f->c, f->path, q, f->rv, on_event, on_watch_end, f);
        f->watch_started = uv_now(f->c->loop);
        free(q);
    }
    if (!f->watch && !f->c->freeing && !f->c->free_pending) schedule(f, true);
}

/* ---- the public part ---- */

static bool same(const char *a, const char *b) { return (!a || !*a) ? (!b || !*b) : (b && !strcmp(a, b)); }

/* A compact feed's array of decoded objects and the check handle that empties it. */
static int feed_compact_init(struct kc_feed *f) {
    if (!(f->decoded = json_array()) || !(f->check = malloc(sizeof *f->check))) return -ENOMEM;
    uv_check_init(f->c->loop, f->check);
    f->check->data = f;
    uv_unref((uv_handle_t *)f->check);
    return 0;
}

static struct kc_feed *feed_new(struct kclient *c, const char *path, const char *query) {
    struct kc_feed *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    f->c = c;
    f->path = strdup(path);
    f->query = query ? strdup(query) : NULL;
    f->rv = strdup("");
    f->cache = json_object();
    f->timer = malloc(sizeof *f->timer);
    f->backoff_ms = KC_BACKOFF_MIN_MS;
    if (!f->path || (query && !f->query) || !f->rv || !f->cache || !f->timer) {
        free(f->path);
        free(f->query);
        free(f->rv);
        json_decref(f->cache);
        free(f->timer);
        free(f);
        return NULL;
    }
    uv_timer_init(c->loop, f->timer);
    f->timer->data = f;
    f->next = c->feeds;
    if (c->feeds) c->feeds->prev = f;
    c->feeds = f;
    return f;
}

struct kc_informer *kc_informer_new_opts(struct kclient *c, const char *path, const char *query,
                                         const struct kc_informer_opts *o, const struct kc_informer_handlers *h,
                                         void *ud) {
    if (!c || !path || path[0] != '/') return NULL;
    struct kc_informer_opts none = {0};
    if (!o) o = &none;
    struct kc_feed *f = c->feeds;
    while (f && (f->free_pending || (f->keys_only && f->synced) || f->keys_only != o->keys_only ||
                 f->compact != (o->compact && !o->keys_only) ||
                 f->transform != o->transform || f->keep != o->keep || strcmp(f->path, path) ||
                 !same(f->query, query)))
        f = f->next;
    bool made = !f;
    if (made && !(f = feed_new(c, path, query))) return NULL;
    f->keys_only = o->keys_only;
    f->compact = o->compact && !o->keys_only;
    f->transform = o->transform;
    f->keep = o->keep;
    if (made && f->compact && feed_compact_init(f)) {
        really_free(f);
        return NULL;
    }
    struct kc_informer *s = calloc(1, sizeof *s);
    if (!s) {
        if (made) really_free(f);
        return NULL;
    }
    s->f = f;
    s->ud = ud;
    if (h) s->h = *h;
    struct kc_informer **tail = &f->subs; /* handlers run in the order informers were made */
    while (*tail) tail = &(*tail)->next;
    *tail = s;
    return s;
}

struct kc_informer *kc_informer_new(struct kclient *c, const char *path, const char *query,
                                    const struct kc_informer_handlers *h, void *ud) {
    return kc_informer_new_opts(c, path, query, NULL, h, ud);
}

/* A subscriber made before its keys-only feed synced and started after: the
 * cache holds keys, not objects to hand it, so it moves to a feed of its own
 * (same path, query and options) that lists for it. Its place in the old
 * feed's list is taken by a dead stand-in, which the feed unlinks when no
 * handler of it runs (a handler may be walking that list now). */
static int move_to_own_feed(struct kc_informer *inf) {
    struct kc_feed *old = inf->f, *nf = feed_new(old->c, old->path, old->query);
    struct kc_informer *stand = nf ? calloc(1, sizeof *stand) : NULL;
    if (!stand) {
        if (nf) really_free(nf);
        return -ENOMEM;
    }
    nf->keys_only = old->keys_only;
    nf->transform = old->transform;
    nf->keep = old->keep;
    *stand = *inf;
    stand->dead = true;
    for (struct kc_informer **p = &old->subs; *p; p = &(*p)->next)
        if (*p == inf) {
            *p = stand;
            break;
        }
    inf->next = NULL;
    inf->f = nf;
    nf->subs = inf;
    if (!old->busy) reap(old); /* frees the stand-in, and the old feed if it had no one else */
    if (old->free_pending && !old->busy) really_free(old);
    return 0;
}

int kc_informer_start(struct kc_informer *inf) {
    if (!inf || inf->dead) return -EINVAL;
    if (inf->started) return -EALREADY;
    struct kc_feed *f = inf->f;
    if (f->c->freeing || f->c->free_pending) return -ECANCELED;
    if (f->keys_only && f->synced && move_to_own_feed(inf)) return -ENOMEM;
    f = inf->f;
    inf->started = true;
    if (!f->started) {
        f->started = true;
        list_page(f, NULL);
        return 0;
    }
    if (!f->synced) return 0; /* the first list will tell it everything */
    /* a late subscriber: what the feed holds, then its own synced */
    f->busy++;
    const char *key;
    json_t *obj;
    json_object_foreach(f->cache, key, obj) {
        if (inf->dead || stopping(f)) break;
        json_t *o = cached_object(f, obj);
        if (o && inf->h.on_add) inf->h.on_add(inf->ud, o);
        json_decref(o);
    }
    if (!inf->dead && !stopping(f)) {
        inf->synced = true;
        if (inf->h.on_synced) inf->h.on_synced(inf->ud);
    }
    unbusy(f);
    return 0;
}

bool kc_informer_synced(const struct kc_informer *inf) { return inf && inf->synced; }

bool kc_informer_current(const struct kc_informer *inf) {
    return inf && inf->synced && inf->f->synced && !inf->f->relisting;
}

bool kc_informer_fresh(const struct kc_informer *inf, uint64_t max_age_ms) {
    if (!kc_informer_current(inf) || !inf->f->watch) return false;
    return !max_age_ms || uv_now(inf->f->c->loop) - inf->f->seen_ms <= max_age_ms;
}

uint64_t kc_informer_age_ms(const struct kc_informer *inf) {
    return inf && inf->f->synced ? uv_now(inf->f->c->loop) - inf->f->seen_ms : UINT64_MAX;
}

/* The cache value of ns/name, or NULL. */
static json_t *cache_lookup(const struct kc_feed *f, const char *ns, const char *name) {
    char key[1024];
    if (!name) return NULL;
    size_t nl = ns ? strlen(ns) : 0, ml = strlen(name);
    if (nl + ml + 2 > sizeof key) return NULL;
    if (nl) memcpy(key, ns, nl); /* "ns/name" without a formatter: callers look up per node and per pod */
    key[nl] = '/';
    memcpy(key + nl + 1, name, ml + 1);
    return json_object_getn(f->cache, key, nl + 1 + ml);
}

json_t *kc_informer_get(const struct kc_informer *inf, const char *ns, const char *name) {
    if (!inf || inf->f->keys_only) return NULL;
    struct kc_feed *f = inf->f;
    json_t *v = cache_lookup(f, ns, name);
    if (!v || !f->compact) return v;
    json_t *obj = cached_object(f, v);
    if (!obj || json_array_append_new(f->decoded, obj)) return NULL;
    uv_check_start(f->check, drop_decoded);
    return obj;
}

const char *kc_informer_version(const struct kc_informer *inf, const char *ns, const char *name) {
    json_t *v = inf ? cache_lookup(inf->f, ns, name) : NULL;
    return v ? cached_rv(inf->f, v) : NULL;
}

size_t kc_informer_count(const struct kc_informer *inf) { return inf ? json_object_size(inf->f->cache) : 0; }

void kc_informer_foreach(const struct kc_informer *inf, int (*fn)(void *ud, json_t *obj), void *ud) {
    const char *key;
    json_t *obj;
    if (!inf || inf->f->keys_only) return;
    json_object_foreach(inf->f->cache, key, obj) {
        json_t *o = cached_object(inf->f, obj);
        int stop = o ? fn(ud, o) : 0;
        json_decref(o);
        if (stop) return;
    }
}

const char *kc_informer_rv(const struct kc_informer *inf) { return inf ? inf->f->rv : ""; }

int kc_informer_relist(struct kc_informer *inf) {
    if (!inf || inf->dead || !inf->started) return -EINVAL;
    struct kc_feed *f = inf->f;
    if (f->free_pending || f->busy) return -EBUSY;
    f->relist_now = true; /* the watch is stopped from the timer, as a watch error stops it */
    f->relist_next = true;
    f->relisting = true;
    uv_timer_start(f->timer, on_timer, 0, 0);
    return 0;
}
unsigned kc_informer_lists(const struct kc_informer *inf) { return inf ? inf->f->lists : 0; }

void kc_informer_free(struct kc_informer *inf) {
    if (!inf || inf->dead) return;
    struct kc_feed *f = inf->f;
    inf->dead = true;
    if (f->busy) { /* inside a handler of this feed: unlinked on the way out */
        bool last = true;
        for (struct kc_informer *s = f->subs; s; s = s->next)
            if (!s->dead) last = false;
        if (last) { /* stop the feed now; free it when the handler returns */
            f->free_pending = true;
            kc_watch_stop(f->watch);
            f->watch = NULL;
            kc__request_abandon(f->req);
            f->req = NULL;
            uv_timer_stop(f->timer);
        }
        return;
    }
    reap(f);
    if (f->free_pending) really_free(f);
}

void kc__informer_destroy_all(struct kclient *c) {
    while (c->feeds) really_free(c->feeds);
}
