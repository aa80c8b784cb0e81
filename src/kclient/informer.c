/* Informers: list (pages of KC_INFORMER_PAGE) into a fresh map, swap it in
 * reporting the difference against the cache, then watch from the list's
 * resourceVersion. A 410 (reply or ERROR event), any other ERROR event or a
 * broken stream re-lists after a backoff (100 ms doubling to 5 s, reset by a
 * watch event or a watch that lived a second or more); a stream the server
 * ended cleanly (watches ask for timeoutSeconds 300-600) is re-watched from
 * the last resourceVersion after the same backoff.
 *
 * The cache is a jansson object keyed "ns/name". Handlers may free the
 * informer (the free waits until the handler returns: busy counter). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kclient_int.h"

#define KC_INFORMER_PAGE 500
#define KC_BACKOFF_MIN_MS 100
#define KC_BACKOFF_MAX_MS 5000
#define KC_WATCH_TIMEOUT_S 300 /* watches last 300-600 s (timeoutSeconds), then resume */

struct kc_informer {
    struct kclient *c;
    char *path, *query;
    struct kc_informer_handlers h;
    void *ud;
    json_t *cache;          /* "ns/name" -> object */
    json_t *fresh;          /* the list being gathered */
    char *rv;
    struct kc_req *req;     /* the list page in flight */
    struct kc_watch *watch;
    uv_timer_t *timer;      /* backoff; freed by its close callback */
    unsigned backoff_ms;
    unsigned lists;         /* complete lists */
    uint64_t watch_started; /* uv_now at the last watch start */
    bool started, synced, relist_next;
    int busy;
    bool free_pending;
    struct kc_informer *prev, *next;
};

static void list_page(struct kc_informer *inf, const char *cont);
static void start_watch(struct kc_informer *inf);

static void timer_closed(uv_handle_t *h) { free(h); }

static void set_rv(struct kc_informer *inf, const char *rv) {
    if (!rv || !*rv || !strcmp(rv, inf->rv)) return;
    char *n = strdup(rv);
    if (!n) return;
    free(inf->rv);
    inf->rv = n;
}

static const char *obj_rv(json_t *obj) {
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
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

static void really_free(struct kc_informer *inf) {
    struct kclient *c = inf->c;
    if (inf->prev) inf->prev->next = inf->next;
    else if (c->informers == inf) c->informers = inf->next;
    if (inf->next) inf->next->prev = inf->prev;
    kc_watch_stop(inf->watch);
    kc__request_abandon(inf->req);
    uv_timer_stop(inf->timer);
    uv_close((uv_handle_t *)inf->timer, timer_closed);
    json_decref(inf->cache);
    json_decref(inf->fresh);
    free(inf->rv);
    free(inf->path);
    free(inf->query);
    free(inf);
}

/* Leaves a handler section; true when the informer is gone. */
static bool unbusy(struct kc_informer *inf) {
    if (--inf->busy > 0 || !inf->free_pending) return inf->free_pending;
    really_free(inf);
    return true;
}

static void on_timer(uv_timer_t *t) {
    struct kc_informer *inf = t->data;
    struct kclient *c = inf->c;
    kc__enter(c);
    if (inf->relist_next) list_page(inf, NULL);
    else start_watch(inf);
    kc__leave(c);
}

static void schedule(struct kc_informer *inf, bool relist) {
    if (inf->free_pending) return;
    inf->relist_next = relist;
    uv_timer_start(inf->timer, on_timer, inf->backoff_ms, 0);
    inf->backoff_ms = inf->backoff_ms * 2 > KC_BACKOFF_MAX_MS ? KC_BACKOFF_MAX_MS : inf->backoff_ms * 2;
}

/* ---- the diff after a complete list ---- */

static void apply_list(struct kc_informer *inf) {
    json_t *fresh = inf->fresh;
    inf->fresh = NULL;
    const char *key;
    json_t *obj, *tmp;
    inf->busy++;
    json_object_foreach(fresh, key, obj) {
        json_t *old = json_object_get(inf->cache, key);
        if (!old) {
            json_object_set(inf->cache, key, obj);
            if (inf->h.on_add) inf->h.on_add(inf->ud, obj);
        } else {
            const char *a = obj_rv(old), *b = obj_rv(obj);
            if (a && b && !strcmp(a, b)) continue;
            json_incref(old);
            json_object_set(inf->cache, key, obj);
            if (inf->h.on_update) inf->h.on_update(inf->ud, old, obj);
            json_decref(old);
        }
        if (inf->free_pending || inf->c->free_pending) goto out;
    }
    json_object_foreach_safe(inf->cache, tmp, key, obj) {
        if (json_object_get(fresh, key)) continue;
        json_incref(obj);
        json_object_del(inf->cache, key);
        if (inf->h.on_delete) inf->h.on_delete(inf->ud, obj);
        json_decref(obj);
        if (inf->free_pending || inf->c->free_pending) goto out;
    }
    if (!inf->synced && !inf->c->free_pending) {
        inf->synced = true;
        if (inf->h.on_synced) inf->h.on_synced(inf->ud);
    }
out:
    json_decref(fresh);
    if (unbusy(inf)) return;
    start_watch(inf);
}

static void on_list(void *ud, const struct kc_response *r) {
    struct kc_informer *inf = ud;
    inf->req = NULL;
    json_t *items = json_object_get(r->body, "items");
    if (r->status != 200 || !json_is_array(items)) {
        fprintf(stderr, "level=warn msg=\"informer list failed\" path=%s status=%ld error=\"%s\"\n", inf->path,
                r->status, r->error ? r->error : "not a list");
        json_decref(inf->fresh);
        inf->fresh = NULL;
        schedule(inf, true);
        return;
    }
    size_t i;
    json_t *obj;
    char key[1024];
    json_array_foreach(items, i, obj) {
        if (obj_key(obj, key, sizeof key)) json_object_set(inf->fresh, key, obj);
    }
    json_t *md = json_object_get(r->body, "metadata");
    const char *cont = json_string_value(json_object_get(md, "continue"));
    if (cont && *cont) {
        list_page(inf, cont);
        return;
    }
    set_rv(inf, json_string_value(json_object_get(md, "resourceVersion")));
    inf->lists++; /* the backoff stays: a server whose watches fail at once must not be listed 10 times a second */
    apply_list(inf);
}

static void list_page(struct kc_informer *inf, const char *cont) {
    if (!cont) {
        json_decref(inf->fresh);
        inf->fresh = json_object();
        if (!inf->fresh) {
            schedule(inf, true);
            return;
        }
    }
    size_t clen = cont ? strlen(cont) : 0;
    size_t cap = strlen(inf->path) + (inf->query ? strlen(inf->query) : 0) + 3 * clen + 64;
    char *p = malloc(cap);
    if (!p) {
        schedule(inf, true);
        return;
    }
    int n = snprintf(p, cap, "%s%climit=%d", inf->path, strchr(inf->path, '?') ? '&' : '?', KC_INFORMER_PAGE);
    if (clen) {
        n += snprintf(p + n, cap - (size_t)n, "&continue=");
        n += kc_escape(cont, p + n, cap - (size_t)n);
    }
    if (inf->query && *inf->query) snprintf(p + n, cap - (size_t)n, "&%s", inf->query);
    int rc;
    inf->req = kc__request(inf->c, "GET", p, NULL, NULL, on_list, inf, &rc);
    free(p);
    if (!inf->req && rc != -ECANCELED) schedule(inf, true);
}

/* ---- the watch ---- */

static void on_event(void *ud, const char *type, json_t *obj) {
    struct kc_informer *inf = ud;
    char key[1024];
    if (!strcmp(type, "ERROR")) {
        json_int_t code = json_integer_value(json_object_get(obj, "code"));
        fprintf(stderr, "level=info msg=\"informer watch error, re-listing\" path=%s code=%lld\n", inf->path,
                (long long)code);
        kc_watch_stop(inf->watch);
        inf->watch = NULL;
        schedule(inf, true);
        return;
    }
    set_rv(inf, obj_rv(obj));
    inf->backoff_ms = KC_BACKOFF_MIN_MS;
    if (!strcmp(type, "BOOKMARK") || !obj_key(obj, key, sizeof key)) return;
    json_t *old = json_object_get(inf->cache, key);
    inf->busy++;
    if (!strcmp(type, "DELETED")) {
        if (old) {
            json_incref(old);
            json_object_del(inf->cache, key);
            if (inf->h.on_delete) inf->h.on_delete(inf->ud, obj);
            json_decref(old);
        }
    } else if (!strcmp(type, "ADDED") || !strcmp(type, "MODIFIED")) {
        if (!old) {
            json_object_set(inf->cache, key, obj);
            if (inf->h.on_add) inf->h.on_add(inf->ud, obj);
        } else {
            const char *a = obj_rv(old), *b = obj_rv(obj);
            if (!a || !b || strcmp(a, b)) {
                json_incref(old);
                json_object_set(inf->cache, key, obj);
                if (inf->h.on_update) inf->h.on_update(inf->ud, old, obj);
                json_decref(old);
            }
        }
    }
    unbusy(inf);
}

static void on_watch_end(void *ud, long status, const char *error) {
    struct kc_informer *inf = ud;
    inf->watch = NULL;
    if (uv_now(inf->c->loop) - inf->watch_started >= 1000) inf->backoff_ms = KC_BACKOFF_MIN_MS; /* it was healthy */
    if (status == 200 && !error) { /* the server closed the stream: resume from rv */
        schedule(inf, false);
        return;
    }
    fprintf(stderr, "level=info msg=\"informer watch ended, re-listing\" path=%s status=%ld error=\"%s\"\n",
            inf->path, status, error ? error : "");
    schedule(inf, true);
}

static void start_watch(struct kc_informer *inf) {
    if (inf->free_pending) return;
    /* like client-go: the server ends the watch after 5-10 minutes, so a
     * silently dead connection cannot hold the informer forever */
    unsigned secs = KC_WATCH_TIMEOUT_S + (unsigned)(uv_hrtime() % KC_WATCH_TIMEOUT_S);
    size_t cap = (inf->query ? strlen(inf->query) : 0) + 32;
    char *q = malloc(cap);
    if (q) {
        snprintf(q, cap, "%s%stimeoutSeconds=%u", inf->query ? inf->query : "", inf->query && *inf->query ? "&" : "",
                 secs);
        inf->watch = kclient_watch(inf->c, inf->path, q, inf->rv, on_event, on_watch_end, inf);
        inf->watch_started = uv_now(inf->c->loop);
        free(q);
    }
    if (!inf->watch && !inf->c->freeing && !inf->c->free_pending) schedule(inf, true);
}

/* ---- the public part ---- */

struct kc_informer *kc_informer_new(struct kclient *c, const char *path, const char *query,
                                    const struct kc_informer_handlers *h, void *ud) {
    if (!c || !path || path[0] != '/') return NULL;
    struct kc_informer *inf = calloc(1, sizeof *inf);
    if (!inf) return NULL;
    inf->c = c;
    inf->ud = ud;
    if (h) inf->h = *h;
    inf->path = strdup(path);
    inf->query = query ? strdup(query) : NULL;
    inf->rv = strdup("");
    inf->cache = json_object();
    inf->timer = malloc(sizeof *inf->timer);
    inf->backoff_ms = KC_BACKOFF_MIN_MS;
    if (!inf->path || (query && !inf->query) || !inf->rv || !inf->cache || !inf->timer) {
        free(inf->path);
        free(inf->query);
        free(inf->rv);
        json_decref(inf->cache);
        free(inf->timer);
        free(inf);
        return NULL;
    }
    uv_timer_init(c->loop, inf->timer);
    inf->timer->data = inf;
    inf->next = c->informers;
    if (c->informers) c->informers->prev = inf;
    c->informers = inf;
    return inf;
}

int kc_informer_start(struct kc_informer *inf) {
    if (!inf || inf->free_pending) return -EINVAL;
    if (inf->started) return -EALREADY;
    if (inf->c->freeing || inf->c->free_pending) return -ECANCELED;
    inf->started = true;
    list_page(inf, NULL);
    return 0;
}

bool kc_informer_synced(const struct kc_informer *inf) { return inf && inf->synced; }

json_t *kc_informer_get(const struct kc_informer *inf, const char *ns, const char *name) {
    char key[1024];
    if (!inf || !name) return NULL;
    int n = snprintf(key, sizeof key, "%s/%s", ns ? ns : "", name);
    if (n < 0 || (size_t)n >= sizeof key) return NULL;
    return json_object_get(inf->cache, key);
}

size_t kc_informer_count(const struct kc_informer *inf) { return inf ? json_object_size(inf->cache) : 0; }

void kc_informer_foreach(const struct kc_informer *inf, int (*fn)(void *ud, json_t *obj), void *ud) {
    const char *key;
    json_t *obj;
    if (!inf) return;
    json_object_foreach(inf->cache, key, obj) {
        if (fn(ud, obj)) return;
    }
}

const char *kc_informer_rv(const struct kc_informer *inf) { return inf ? inf->rv : ""; }
unsigned kc_informer_lists(const struct kc_informer *inf) { return inf ? inf->lists : 0; }

void kc_informer_free(struct kc_informer *inf) {
    if (!inf || inf->free_pending) return;
    if (inf->busy) { /* inside one of its handlers: stop now, free on the way out */
        inf->free_pending = true;
        kc_watch_stop(inf->watch);
        inf->watch = NULL;
        kc__request_abandon(inf->req);
        inf->req = NULL;
        uv_timer_stop(inf->timer);
        return;
    }
    really_free(inf);
}

void kc__informer_destroy_all(struct kclient *c) {
    while (c->informers) really_free(c->informers);
}
