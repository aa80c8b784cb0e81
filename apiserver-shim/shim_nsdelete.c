/* Deleting a namespace, as kube-apiserver and its namespace controller do it:
 * DELETE marks the namespace (deletionTimestamp, status.phase Terminating,
 * the "kubernetes" finalizer) and answers at once; creates in it are refused
 * from then on (403, checked by the store's create scripts against a marker
 * beside the namespace object); its contents are deleted in bounded batches,
 * one batch per loop turn, so that a namespace holding 80 MB of objects
 * never stalls the server; once it is empty the finalizer goes and with it
 * the namespace. A namespace found Terminating at start (a restart in the
 * middle) is taken up again. Several API servers on one store may reap the
 * same namespace: every step is idempotent. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

#define NS_FINALIZER "kubernetes"

/* A batch runs in an idle handle: once per loop turn, after the turn's I/O,
 * so requests are served between batches (a zero timer re-armed from its own
 * callback would run again in the same turn, before any I/O). The timer waits
 * out a second when nothing could be deleted. */
struct ns_reaper {
    struct shim *s;
    uv_idle_t idle;
    uv_timer_t timer;
    char **names; /* namespaces being emptied, oldest first */
    int n, cap;
    int closing;  /* handles whose close is pending */
};

static bool has_string(const json_t *arr, const char *v) {
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e) if (json_is_string(e) && !strcmp(json_string_value(e), v)) return true;
    return false;
}

/* store_modify: the namespace marked Terminating, with the finalizer that
 * keeps it until its contents are gone. */
static int mark_terminating(void *ud, const json_t *cur, json_t **next, char *err, size_t errlen) {
    json_t *o = json_deep_copy(cur);
    if (!o) return -ENOMEM;
    json_t *md = json_object_get(o, "metadata");
    json_t *fin = json_object_get(md, "finalizers");
    if (!json_is_array(fin)) json_object_set_new(md, "finalizers", fin = json_array());
    if (!has_string(fin, NS_FINALIZER)) json_array_append_new(fin, json_string(NS_FINALIZER));
    json_t *spec = json_object_get(o, "spec");
    if (!json_is_object(spec)) json_object_set_new(o, "spec", spec = json_object());
    json_object_set_new(spec, "finalizers", json_pack("[s]", NS_FINALIZER));
    json_t *status = json_object_get(o, "status");
    if (!json_is_object(status)) json_object_set_new(o, "status", status = json_object());
    json_object_set_new(status, "phase", json_string("Terminating"));
    *next = o;
    return 0;
}

/* store_modify: the finalizer gone, which removes the marked namespace. */
static int drop_finalizer(void *ud, const json_t *cur, json_t **next, char *err, size_t errlen) {
    json_t *o = json_deep_copy(cur);
    if (!o) return -ENOMEM;
    json_t *md = json_object_get(o, "metadata"), *keep = json_array();
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(md, "finalizers"), i, e) {
        if (!json_is_string(e) || strcmp(json_string_value(e), NS_FINALIZER)) json_array_append(keep, e);
    }
    json_object_set_new(md, "finalizers", keep);
    json_object_set_new(json_object_get(o, "spec"), "finalizers", json_array());
    *next = o;
    return 0;
}

static void on_batch(uv_idle_t *h);

static void on_wait_over(uv_timer_t *t) {
    struct ns_reaper *r = t->data;
    uv_idle_start(&r->idle, on_batch);
}

/* The next batch: on the next loop turn (ms 0) or after ms. */
static void arm(struct ns_reaper *r, uint64_t ms) {
    if (ms == 0) {
        uv_idle_start(&r->idle, on_batch);
        return;
    }
    uv_idle_stop(&r->idle);
    uv_timer_start(&r->timer, on_wait_over, ms, 0);
}

static void enqueue(struct ns_reaper *r, const char *ns) {
    for (int i = 0; i < r->n; i++)
        if (!strcmp(r->names[i], ns)) return;
    if (r->n == r->cap) {
        int cap = r->cap ? r->cap * 2 : 8;
        char **a = realloc(r->names, (size_t)cap * sizeof *a);
        if (!a) return; /* taken up again at the next start */
        r->names = a;
        r->cap = cap;
    }
    if (!(r->names[r->n] = strdup(ns))) return;
    r->n++;
    if (!uv_is_active((uv_handle_t *)&r->timer)) arm(r, 0);
}

static void dequeue_first(struct ns_reaper *r) {
    free(r->names[0]);
    memmove(r->names, r->names + 1, (size_t)(r->n - 1) * sizeof *r->names);
    r->n--;
}

/* What one pass over a namespace did and found. */
struct reap {
    int deleted;   /* objects deleted now */
    long held;     /* objects marked already, held by finalizers of their own */
    long more;     /* objects not reached: past the batch or the turn's time */
};

/* Deletes at most max objects of namespace ns, and no more once the
 * monotonic time deadline_ns has passed, but at least one when
 * there is one to delete, so that every turn makes progress. 0 or a store
 * error. */
static int reap_some(struct shim *s, const char *ns, int max, uint64_t deadline_ns, struct reap *out) {
    *out = (struct reap){0};
    for (int i = 0; i < shim_res_count(s); i++) {
        const struct shim_resource *res = shim_res_at(s, i);
        if (!res || !res->namespaced) continue;
        int room = max - out->deleted;
        struct store_list l = {0};
        int rc = store_list(s->st, res->store_key, ns, room > 0 ? (size_t)room : 1, NULL, &l);
        if (rc) return rc;
        size_t j;
        json_t *it;
        json_array_foreach(l.items, j, it) {
            json_t *md = json_object_get(it, "metadata");
            const char *name = json_string_value(json_object_get(md, "name"));
            if (!name || json_object_get(md, "deletionTimestamp")) {
                out->held++;
                continue;
            }
            if (out->deleted >= max || (out->deleted > 0 && uv_hrtime() > deadline_ns)) {
                out->more++;
                continue;
            }
            out->deleted++;
            store_delete(s->st, res->store_key, ns, name, NULL, NULL, NULL); /* NotFound: another reaper was first */
        }
        out->more += (long)l.remaining;
        store_list_free(&l);
    }
    return 0;
}

/* The namespace is empty: let it go (a DELETED event). */
static void finish(struct shim *s, const char *ns) {
    json_t *out = NULL;
    int deleted = 0;
    int rc = store_modify(s->st, "namespaces", "", ns, drop_finalizer, NULL, &out, &deleted);
    if (rc && rc != -ENOENT)
        fprintf(stderr, "level=warn msg=\"namespace deletion: cannot remove the namespace\" namespace=%s err=\"%s\"\n",
                ns, store_errmsg(s->st));
    json_decref(out);
}

/* One batch per loop turn: other requests are served in between. */
static void on_batch(uv_idle_t *h) {
    struct ns_reaper *r = h->data;
    if (r->n == 0) {
        uv_idle_stop(&r->idle);
        return;
    }
    const char *ns = r->names[0];
    struct reap got;
    if (reap_some(r->s, ns, SHIM_NS_DELETE_BATCH, uv_hrtime() + SHIM_NS_DELETE_TURN_MS * 1000000ull, &got)) {
        arm(r, 1000); /* the store is away: try again later */
        return;
    }
    if (got.deleted == 0 && got.held == 0 && got.more == 0) { /* a pass that found nothing: empty */
        finish(r->s, ns);
        dequeue_first(r);
    } else if (got.deleted == 0 && got.more == 0) {
        /* what is left waits on its own finalizers: look again in a second,
         * the other namespaces first */
        char *first = r->names[0];
        memmove(r->names, r->names + 1, (size_t)(r->n - 1) * sizeof *r->names);
        r->names[r->n - 1] = first;
        arm(r, 1000);
        return;
    }
    if (r->n == 0) uv_idle_stop(&r->idle);
}

struct ns_reaper *shim_ns_reaper_new(struct shim *s, uv_loop_t *loop) {
    if (!loop) return NULL;
    struct ns_reaper *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->s = s;
    uv_idle_init(loop, &r->idle);
    uv_timer_init(loop, &r->timer);
    r->idle.data = r->timer.data = r;
    return r;
}

/* Freed by the second close callback, on a later loop turn (the caller runs
 * the loop dry, as for the watch hub). */
static void on_closed(uv_handle_t *h) {
    struct ns_reaper *r = h->data;
    if (--r->closing > 0) return;
    for (int i = 0; i < r->n; i++) free(r->names[i]);
    free(r->names);
    free(r);
}

void shim_ns_reaper_free(struct ns_reaper *r) {
    if (!r) return;
    r->closing = 2;
    uv_close((uv_handle_t *)&r->idle, on_closed);
    uv_close((uv_handle_t *)&r->timer, on_closed);
}

int shim_ns_terminate(struct shim *s, const char *name, json_t **out) {
    *out = NULL;
    int rc = store_modify(s->st, "namespaces", "", name, mark_terminating, NULL, out, NULL);
    if (rc) return rc;
    json_decref(*out);
    *out = NULL;
    /* with the finalizer in place, a delete only sets deletionTimestamp */
    int deleted = 0;
    if ((rc = store_delete(s->st, "namespaces", "", name, NULL, out, &deleted))) return rc;
    if ((rc = store_ns_set_terminating(s->st, name))) return rc;
    /* without a reaper (no loop, or no memory for one at start) the namespace
     * stays Terminating until a start that has one takes it up */
    if (s->reaper) enqueue(s->reaper, name);
    return 0;
}

static int resume_each(void *ud, json_t *ns) {
    struct shim *s = ud;
    json_t *md = json_object_get(ns, "metadata");
    const char *name = json_string_value(json_object_get(md, "name"));
    if (name && json_object_get(md, "deletionTimestamp") && has_string(json_object_get(md, "finalizers"), NS_FINALIZER)) {
        store_ns_set_terminating(s->st, name);
        if (s->reaper) enqueue(s->reaper, name);
    }
    return 0;
}

int shim_ns_resume(struct shim *s) { return shim_each(s, "namespaces", "", NULL, resume_each, s); }
