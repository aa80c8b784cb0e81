/* Lease renewals without a read or the generic patch (issue #25).
 *
 * Every write of a Lease through this process (the store's write hook, via
 * the watch hub) leaves its stored bytes and version here, keyed by
 * namespace/name. A merge PATCH that renews a Lease found here is then the
 * stored text with its spec fields and generation replaced
 * (lease_text_renew: the bytes the generic path would store, or it
 * declines), written by one compare-and-set of that text against the
 * version it was made from (store_async_put_text), in the turn's batch: no
 * read of the object from Redis, no decode, merge, validation or encode.
 *
 * The copy is only a hint. A Lease written by someone else (another API
 * server sharing Redis) makes it stale, and the compare-and-set then fails:
 * a patch that names no resourceVersion goes the generic way (read, patch,
 * write), one that names the copy's version was stale and gets its 409, as
 * from the generic path; a patch naming any other version goes the generic
 * way from the start. A Lease gone answers 404 from the script. The copies
 * are bounded (LEASE_CACHE_MAX); past it a new Lease is not kept and is
 * renewed the generic way.
 *
 * Renewals come one a loop turn at a thousand a second, and each would be a
 * script call of its own (the store batches a turn's writes): Redis's cost
 * is mostly per call (the command, the script's start, its clock and trim,
 * the AOF write, the reply), and so is the store connection's. A renewal's
 * write therefore waits up to LEASE_BATCH_MS for others, and they go to the
 * store together, as one batch: a few ms more on a renewal whose Lease lasts
 * 40 s. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "jparse.h"
#include "lease_text.h"
#include "patch.h"
#include "shim.h"
#include "strmap.h"

#define LEASE_RESOURCE "leases.coordination.k8s.io"
/* Leases kept: ~0.5 KB each (text, key, slot), so 64 MB at most; one a node
 * to 100,000 nodes (the fleet issue #25 sizes for is 50,000). */
#define LEASE_CACHE_MAX 100000
#define LEASE_BATCH_MS 4    /* how long a renewal's write waits for others */
#define LEASE_BATCH_MAX 256 /* renewals held at most (the store's batch) */

/* A renewal's write waiting for its batch. */
struct lease_wait {
    struct lease_wait *next;
    const char *res; /* static: the resource's store key */
    char rv[24];
    char *text;
    size_t len, rv_at;
    store_done_fn done;
    void *ud;
    char *ns, *name; /* in keys */
    char keys[];
};

struct shim_leases {
    struct strmap m;           /* "ns/name" -> struct lease_copy */
    uv_timer_t *timer;         /* the batch's wait (freed by its close callback); NULL without a loop */
    struct lease_wait *head, **tail;
    size_t waiting;
};

struct lease_copy {
    size_t len;
    char text[]; /* the stored bytes, NUL-terminated */
};

static void key_of(char *key, size_t len, const char *ns, const char *name) {
    snprintf(key, len, "%s/%s", ns, name);
}

static void on_batch_due(uv_timer_t *t);

static struct shim_leases *leases_new(struct shim *s) {
    struct shim_leases *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    l->tail = &l->head;
    if (s->loop && (l->timer = malloc(sizeof *l->timer))) {
        uv_timer_init(s->loop, l->timer);
        l->timer->data = s;
    }
    return l;
}

/* The waiting renewals to the store, in one turn: one batch. */
void shim_lease_flush(struct shim *s) {
    struct shim_leases *l = s->leases;
    if (!l) return;
    if (l->timer) uv_timer_stop(l->timer);
    struct lease_wait *w = l->head;
    l->head = NULL;
    l->tail = &l->head;
    l->waiting = 0;
    while (w) {
        struct lease_wait *next = w->next;
        char err[256];
        int rc = s->astore ? store_async_put_text(s->astore, w->res, w->ns, w->name, w->rv, w->text, w->len, w->rv_at,
                                                  w->done, w->ud, err, sizeof err)
                           : (free(w->text), snprintf(err, sizeof err, "redis: the store is closing"), -EIO);
        if (rc) w->done(w->ud, &(struct store_result){.rc = rc, .err = err, .attached_err = ""});
        free(w);
        w = next;
    }
}

static void on_batch_due(uv_timer_t *t) { shim_lease_flush(t->data); }

void shim_lease_seen(struct shim *s, const char *resource, const char *ns, const char *name,
                     enum store_event_type type, const char *json, size_t len) {
    if (strcmp(resource, LEASE_RESOURCE) || !name) return;
    if (!s->leases && !(s->leases = leases_new(s))) return;
    struct strmap *m = &s->leases->m;
    char key[STORE_MAX_NAMESPACE + STORE_MAX_NAME + 2];
    key_of(key, sizeof key, ns, name);
    if (type == STORE_DELETED || !json) { /* gone, or bytes not kept: no copy */
        free(strmap_del(m, key));
        return;
    }
    struct lease_copy *c = strmap_get(m, key);
    if (c && c->len >= len) { /* in place: a renewal's text keeps its length but for the counters' digits */
        memcpy(c->text, json, len);
        c->text[len] = 0;
        c->len = len;
        return;
    }
    if (!c && strmap_count(m) >= LEASE_CACHE_MAX) return;
    struct lease_copy *n = malloc(sizeof *n + len + 1);
    void *old = NULL;
    if (n) {
        memcpy(n->text, json, len);
        n->text[len] = 0;
        n->len = len;
    }
    if (!n || strmap_put(m, key, n, &old)) { /* no copy rather than a stale one */
        free(n);
        free(strmap_del(m, key));
        return;
    }
    free(old);
}

static void timer_closed(uv_handle_t *h) { free(h); }

void shim_lease_free(struct shim *s) {
    if (!s->leases) return;
    shim_lease_flush(s); /* none after shim_detach_async; else answered now (the store is closing) */
    if (s->leases->timer) uv_close((uv_handle_t *)s->leases->timer, timer_closed);
    size_t pos = 0;
    const char *k;
    void *v;
    while (strmap_next(&s->leases->m, &pos, &k, &v)) free(v);
    strmap_free(&s->leases->m);
    free(s->leases);
    s->leases = NULL;
}

int shim_lease_renew(struct shim *s, const struct shim_resource *r, const char *ns, const char *name,
                     const json_t *patch, shim_patch_fn apply, bool *conditional, store_done_fn done, void *ud,
                     char *err, size_t errlen) {
    if (!s->astore || !s->leases || strcmp(r->store_key, LEASE_RESOURCE) ||
        (apply != patch_merge && apply != patch_strategic))
        return -EAGAIN;
    char key[STORE_MAX_NAMESPACE + STORE_MAX_NAME + 2];
    key_of(key, sizeof key, ns, name);
    const struct lease_copy *c = strmap_get(&s->leases->m, key);
    if (!c) return -EAGAIN;
    struct lease_renewal lr;
    int rc = lease_text_renew(c->text, c->len, ns, name, patch, &lr);
    if (rc) return rc == -EAGAIN ? rc : (snprintf(err, errlen, "out of memory"), rc);
    *conditional = lr.patch_rv != NULL;
    struct shim_leases *l = s->leases;
    size_t ln = strlen(ns) + 1, lm = strlen(name) + 1;
    struct lease_wait *w = l->timer ? malloc(sizeof *w + ln + lm) : NULL;
    if (!w) /* no loop (or no memory to wait): at once */
        return store_async_put_text(s->astore, r->store_key, ns, name, lr.rv, lr.text, lr.len, lr.rv_at, done, ud,
                                    err, errlen);
    *w = (struct lease_wait){.res = r->store_key, .text = lr.text, .len = lr.len, .rv_at = lr.rv_at, .done = done,
                             .ud = ud};
    memcpy(w->rv, lr.rv, sizeof w->rv);
    w->ns = memcpy(w->keys, ns, ln);
    w->name = memcpy(w->keys + ln, name, lm);
    *l->tail = w;
    l->tail = &w->next;
    if (++l->waiting >= LEASE_BATCH_MAX) shim_lease_flush(s);
    else if (l->waiting == 1) uv_timer_start(l->timer, on_batch_due, LEASE_BATCH_MS, 0);
    return 0;
}

/* The fields ObjectMeta takes from the stored object on a write (store_object.c's shaping). */
static const char *const kept_meta[] = {"uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                                        "resourceVersion", "generation", "namespace"};
static const char *const renewed[] = {"holderIdentity", "leaseDurationSeconds", "acquireTime", "renewTime",
                                      "leaseTransitions"};

json_t *shim_lease_put_patch(const char *text, size_t len, const json_t *body) {
    json_t *cur = jparse_loadb(text, len, 0, NULL), *n = json_deep_copy(body), *patch = NULL;
    json_t *md = json_object_get(n, "metadata"), *cmd = json_object_get(cur, "metadata");
    json_t *spec = json_object_get(n, "spec"), *cspec = json_object_get(cur, "spec"), *pspec = json_object();
    const char *uid = json_string_value(json_object_get(md, "uid")), *cuid = json_string_value(json_object_get(cmd, "uid"));
    const char *rv = json_string_value(json_object_get(md, "resourceVersion"));
    if (!json_is_object(md) || !json_is_object(cmd) || !json_is_object(spec) || !json_is_object(cspec) || !pspec ||
        (uid && uid[0] && (!cuid || strcmp(uid, cuid)))) /* a uid precondition: the generic path checks it */
        goto out;
    shim_meta_omit_empty(n);
    char rvbuf[64] = "";
    if (rv) snprintf(rvbuf, sizeof rvbuf, "%s", rv);
    for (size_t i = 0; i < sizeof kept_meta / sizeof *kept_meta; i++) { /* as the store will set them */
        json_t *v = json_object_get(cmd, kept_meta[i]);
        if (v) json_object_set(md, kept_meta[i], v);
        else json_object_del(md, kept_meta[i]);
    }
    for (size_t i = 0; i < sizeof renewed / sizeof *renewed; i++) { /* the renewal, moved into the patch */
        json_t *v = json_object_get(spec, renewed[i]), *cv = json_object_get(cspec, renewed[i]);
        if (!v) continue;
        json_object_set(pspec, renewed[i], v);
        if (cv) json_object_set(spec, renewed[i], cv);
        else json_object_del(spec, renewed[i]);
    }
    /* the rest as stored: the PUT is that renewal, written as a patch; else the generic path */
    if (!json_equal(n, cur) || !json_object_size(pspec)) goto out;
    patch = rvbuf[0] ? json_pack("{s:{s:s}, s:O}", "metadata", "resourceVersion", rvbuf, "spec", pspec)
                     : json_pack("{s:O}", "spec", pspec);
out:
    json_decref(pspec);
    json_decref(n);
    json_decref(cur);
    return patch;
}

int shim_lease_replace(struct shim *s, const struct shim_resource *r, const char *ns, const char *name,
                       const json_t *body, bool *conditional, store_done_fn done, void *ud, char *err, size_t errlen) {
    if (!s->astore || !s->leases || strcmp(r->store_key, LEASE_RESOURCE)) return -EAGAIN;
    char key[STORE_MAX_NAMESPACE + STORE_MAX_NAME + 2];
    key_of(key, sizeof key, ns, name);
    const struct lease_copy *c = strmap_get(&s->leases->m, key);
    json_t *patch = c ? shim_lease_put_patch(c->text, c->len, body) : NULL;
    if (!patch) return -EAGAIN;
    int rc = shim_lease_renew(s, r, ns, name, patch, patch_merge, conditional, done, ud, err, errlen);
    json_decref(patch);
    return rc;
}
