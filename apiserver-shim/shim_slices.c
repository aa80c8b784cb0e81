/* Whole lists in slices: a list without a limit (as a List or, for kubectl
 * get, a Table; from a client that accepts protobuf too, the same JSON, as
 * lists have no protobuf encoding here), and the initial ADDED events of a
 * watch without a resourceVersion, are read, encoded and sent over many
 * loop turns, so that no request holds the loop (and /healthz, the writes
 * and lease renewals behind it) for the length of a resource.
 *
 * Redis has no snapshot reads, so one consistent list is made in three
 * phases, each a bounded step per loop turn (a uv_idle handle, so the loop
 * polls its sockets between steps):
 *
 *   READ  store pages of SLICE_PAGE objects from the first page's version S
 *         on (continue tokens); each object is parsed once, filtered by the
 *         selectors and kept as its encoded JSON, packed (store_pack_text:
 *         a pod in about a fifth of its bytes), in key order. A page shows
 *         its objects as they were when it was read, at some time in [S, E].
 *   HIST  the resource's history after S, up to the counter E read with its
 *         last part: each member changed in (S, E] takes its last state
 *         there (or goes, if that was a delete or no longer matches). A
 *         member not changed there was the same from S to E, so the result
 *         is exactly the resource at E, and E is the list's resourceVersion.
 *         History compacted past S (more writes than the history keeps
 *         during the read) starts the list again, at most SLICE_RESTARTS
 *         times.
 *   EMIT  the items in key order (members created after S merged in), a
 *         bounded number of bytes per turn, and only while the stream's
 *         unsent bytes stay under SLICE_BUFFERED: a slow reader is waited
 *         for, not buffered without bound.
 *
 * What the jobs hold together is bounded (shim_config.list_memory): a whole
 * list longer than a page, or a watch without a resourceVersion, that
 * arrives while the others hold half of it or more is refused with 429
 * TooManyRequests and Retry-After, as kube-apiserver refuses what it cannot
 * serve now; a job that would pass the bound while it reads ends (a list
 * cut short, a watch's 410 Expired, which sends client-go to a paged list),
 * so that no request, nor several, can take the process's memory.
 *
 * A list answers 200 with a chunked body at once (its first page is read
 * inside the handler, so a bad namespace or an unreachable Redis still gets
 * its Status); a failure after that ends the response as failed (the
 * connection closed without the last chunk, an HTTP/2 stream reset), which
 * a client reads as an error. A watch's events go through the hub's
 * callback, and the watch goes on from E (shim_watch.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"
#include "shim_proto.h"
#include "util/jparse.h"
#include "util/strmap.h"

#define SLICE_PAGE 200                /* objects per store page (one page per loop turn) */
#define SLICE_HISTORY 500             /* history entries per loop turn */
#define SLICE_EMIT_BYTES (256u << 10) /* bytes encoded into the stream per loop turn */
#define SLICE_BUFFERED (4u << 20)     /* at most this much unsent before the next slice */
#define SLICE_EMIT_ITEMS 2000          /* and at most this many items (a Table watch's rows) */
#define SLICE_TURN_NS 5000000ull      /* all slices together: this much of a loop turn (5 ms) */
#define SLICE_WAIT_MS 2
#define SLICE_RESTARTS 3
#define SLICE_LIST_BUFFER (64u << 20) /* the list stream's own bound (a reader that stops reading) */

struct slice_item {
    char *member;  /* "<ns>/<name>", the store's key order */
    char *data;    /* the encoded object, or its Table row (a list as a Table); NULL: gone */
    uint32_t len;  /* the JSON's bytes */
    uint32_t zlen; /* data's bytes when packed; 0: data is the JSON */
};

enum slice_phase { SLICE_READ, SLICE_HIST, SLICE_EMIT };

struct slice_job {
    struct shim *s;
    const struct shim_resource *r;
    char ns[STORE_MAX_NAMESPACE + 1];
    const struct labelsel *ls;
    const struct fieldsel *fs;
    struct labelsel *own_ls; /* a list owns its selectors; a watch's are its watcher's */
    struct fieldsel *own_fs;
    struct http_stream *st;
    bool watch, table, closed, ended;
    bool rows;               /* a list as a Table: each item is its row */
    enum shim_include inc;   /* the rows' objects */
    shim_slice_emit_fn emit;
    shim_slice_done_fn done;
    void *ud;
    enum slice_phase phase;
    char *token;
    uint64_t from, rv; /* S, then the history's position; rv: E */
    size_t held;       /* bytes of items (and their index) held, in the shim's slice_held */
    int restarts;
    struct slice_item *it; /* read, in key order */
    size_t n, cap;
    struct strmap extra;   /* members created after S: member -> struct slice_item * */
    struct slice_item **ex; /* the same, sorted, for EMIT */
    size_t nex, ei, ej;
    bool first;
    char *buf;             /* a slice's bytes before they go to the stream */
    size_t blen, bcap;
    uv_idle_t idle;
    uv_timer_t wait;       /* a reader behind: the next slice after SLICE_WAIT_MS */
    int handles;           /* open of idle and wait */
    struct slice_job *prev, *next; /* the shim's jobs */
};

/* What the jobs hold, counted against the shim's list_memory. */
static void hold(struct slice_job *j, size_t add, size_t sub) {
    j->held = j->held + add - sub;
    j->s->slice_held = j->s->slice_held + add - sub;
    if (j->s->metrics) metrics_set(j->s->metrics->slice_held, (double)j->s->slice_held);
}

static void count_refusal(struct shim *s, const char *when) {
    if (s->metrics) metrics_inc(metrics_series1(s->metrics->slice_refused, when));
}

static bool over_budget(const struct shim *s) { return s->list_memory && s->slice_held > s->list_memory; }

static size_t item_bytes(const struct slice_item *it) { return it->data ? (it->zlen ? it->zlen : it->len) : 0; }

static void item_release(struct slice_job *j, struct slice_item *it) {
    hold(j, 0, item_bytes(it));
    free(it->data);
    it->data = NULL;
    it->len = it->zlen = 0;
}

static void item_free(struct slice_job *j, struct slice_item *it) {
    item_release(j, it);
    if (it->member) hold(j, 0, strlen(it->member) + 1);
    free(it->member);
    it->member = NULL;
}

static void items_clear(struct slice_job *j) {
    for (size_t i = 0; i < j->n; i++) item_free(j, &j->it[i]);
    j->n = 0;
    size_t pos = 0;
    const char *k;
    void *v;
    while (strmap_next(&j->extra, &pos, &k, &v)) {
        item_free(j, v);
        free(v);
        hold(j, 0, sizeof(struct slice_item));
    }
    strmap_free(&j->extra);
    memset(&j->extra, 0, sizeof j->extra);
    free(j->ex);
    j->ex = NULL;
    j->nex = 0;
}

static void on_idle_closed(uv_handle_t *h) {
    struct slice_job *j = h->data;
    if (--j->handles) return;
    free(j->it); /* its items went in job_free */
    free(j->token);
    free(j->buf);
    labelsel_free(j->own_ls);
    fieldsel_free(j->own_fs);
    free(j);
}

/* A list's job outlives its stream's end: the HTTP layer calls its
 * on_close later (at the end of the turn), and the job goes then. */
static void job_free(struct slice_job *j) {
    uv_idle_stop(&j->idle);
    uv_timer_stop(&j->wait);
    if (!j->watch && j->st) {
        j->ended = true;
        return;
    }
    struct shim *s = j->s;
    items_clear(j); /* here, while the shim is there to count them off */
    hold(j, 0, j->cap * sizeof *j->it);
    j->cap = 0;
    if (j->prev) j->prev->next = j->next;
    else s->slices = j->next;
    if (j->next) j->next->prev = j->prev;
    uv_close((uv_handle_t *)&j->idle, on_idle_closed);
    uv_close((uv_handle_t *)&j->wait, on_idle_closed);
}

static bool matches(const struct slice_job *j, const json_t *obj) {
    if (j->ls && !labelsel_match(j->ls, json_object_get(json_object_get(obj, "metadata"), "labels"))) return false;
    return !j->fs || fieldsel_match(j->fs, obj);
}

/* The item's bytes for obj (consumed): its JSON with kind and apiVersion
 * (a watch's ADDED line is made around it when it is sent), or its Table
 * row (a row's age is counted when it is read, not when the list ends);
 * packed when that makes it smaller. -ENOSPC: the jobs would hold more than
 * list_memory. */
static int encode(struct slice_job *j, json_t *obj, struct slice_item *it) {
    if (!strcmp(j->r->plural, "poddisruptionbudgets") && !j->r->custom) shim_pdb_status(j->s, obj);
    obj = shim_with_type(j->r, obj);
    if (j->rows) {
        json_t *row = shim_table_row(j->r, obj, j->inc);
        json_decref(obj);
        if (!(obj = row)) return -ENOMEM;
    }
    size_t len = 0;
    char *s = jdump(obj, JSON_COMPACT, &len);
    json_decref(obj);
    if (!s) return -ENOMEM;
    if (len > UINT32_MAX) {
        free(s);
        return -E2BIG;
    }
    char *z = NULL;
    size_t zlen = 0;
    int rc = j->s->slice_pack ? store_pack_text(j->s->slice_pack, s, len, &z, &zlen) : 1;
    if (rc < 0) {
        free(s);
        return rc;
    }
    if (rc == 0) {
        free(s);
        s = z;
    }
    it->data = s;
    it->len = (uint32_t)len;
    it->zlen = (uint32_t)zlen;
    hold(j, item_bytes(it), 0);
    return over_budget(j->s) ? -ENOSPC : 0;
}

static char *member_of(const char *ns, const char *name) {
    size_t a = strlen(ns), b = strlen(name);
    char *m = malloc(a + b + 2);
    if (!m) return NULL;
    memcpy(m, ns, a);
    m[a] = '/';
    memcpy(m + a + 1, name, b + 1);
    return m;
}

static int add_read(struct slice_job *j, json_t *obj) {
    json_t *md = json_object_get(obj, "metadata");
    const char *ns = json_string_value(json_object_get(md, "namespace"));
    const char *name = json_string_value(json_object_get(md, "name"));
    if (!name || !matches(j, obj)) return 0;
    if (j->n == j->cap) {
        size_t nc = j->cap ? j->cap * 2 : 1024;
        struct slice_item *n = realloc(j->it, nc * sizeof *n);
        if (!n) return -ENOMEM;
        hold(j, (nc - j->cap) * sizeof *n, 0);
        j->it = n;
        j->cap = nc;
    }
    struct slice_item *it = &j->it[j->n];
    memset(it, 0, sizeof *it);
    if (!(it->member = member_of(ns ? ns : "", name))) return -ENOMEM;
    hold(j, strlen(it->member) + 1, 0);
    j->n++; /* counted (and freed) with the job from here, whatever encode says */
    json_incref(obj);
    return encode(j, obj, it);
}

static int cmp_member(const void *key, const void *elem) {
    return strcmp(key, ((const struct slice_item *)elem)->member);
}

/* One change after S: the member's state at this version. */
static int apply_event(struct slice_job *j, const struct store_event *e) {
    char *m = member_of(e->ns, e->name);
    if (!m) return -ENOMEM;
    struct slice_item *it = j->n ? bsearch(m, j->it, j->n, sizeof *j->it, cmp_member) : NULL;
    if (!it) it = strmap_get(&j->extra, m);
    bool keep = e->type != STORE_DELETED && e->object && matches(j, e->object);
    if (it) item_release(j, it); /* the state read is replaced */
    if (keep) {
        if (!it) {
            if (!(it = calloc(1, sizeof *it)) || strmap_put(&j->extra, m, it, NULL)) {
                free(it);
                free(m);
                return -ENOMEM;
            }
            hold(j, sizeof *it, 0);
            it->member = strdup(m);
            if (!it->member) {
                free(m);
                return -ENOMEM;
            }
            hold(j, strlen(m) + 1, 0);
        }
        int rc = encode(j, json_deep_copy(e->object), it);
        if (rc) {
            free(m);
            return rc;
        }
    }
    free(m);
    return 0;
}

static int cmp_extra(const void *a, const void *b) {
    return strcmp((*(struct slice_item *const *)a)->member, (*(struct slice_item *const *)b)->member);
}

static int sort_extra(struct slice_job *j) {
    size_t cnt = strmap_count(&j->extra), pos = 0;
    if (!cnt) return 0;
    if (!(j->ex = malloc(cnt * sizeof *j->ex))) return -ENOMEM;
    const char *k;
    void *v;
    while (strmap_next(&j->extra, &pos, &k, &v)) j->ex[j->nex++] = v;
    qsort(j->ex, j->nex, sizeof *j->ex, cmp_extra);
    return 0;
}

static int buf_add(struct slice_job *j, const char *s, size_t n) {
    return jdump_append(&j->buf, &j->blen, &j->bcap, s, n);
}

static void flush(struct slice_job *j) {
    if (!j->blen || j->closed) return;
    if (http_stream_write(j->st, j->buf, j->blen)) j->closed = true; /* its on_close follows */
    j->blen = 0;
}

static void finish(struct slice_job *j, int err) {
    if (j->watch) { /* done is NULL once the watcher is gone */
        if (j->done) j->done(j->ud, j->rv, j->closed ? -ECANCELED : err);
    } else if (!j->closed) {
        if (!err) {
            buf_add(j, "]}", 2);
            flush(j);
        }
        if (!j->closed && err) http_stream_abort(j->st); /* cut short: a broken body, not a short list */
        else if (!j->closed) http_stream_end(j->st);
    }
    if (j->watch) j->ud = NULL;
    job_free(j);
}

/* A Table's head, up to its rows' '[': the Table without rows, as
 * shim_table writes it, without the "]}" that ends it. */
static int table_head(struct slice_job *j, const char *rv) {
    json_t *none = json_array();
    json_t *t = none ? shim_table(j->r, none, rv, NULL, j->inc, true) : NULL;
    json_decref(none);
    size_t len = 0;
    char *s = t ? jdump(t, JSON_COMPACT, &len) : NULL;
    json_decref(t);
    int rc = s && len > 2 && !memcmp(s + len - 2, "]}", 2) ? buf_add(j, s, len - 2) : -ENOMEM;
    free(s);
    return rc;
}

/* The list's head, once E is known. */
static int list_head(struct slice_job *j) {
    char av[300], head[1024];
    const char *apiv = j->r->version;
    if (j->r->group[0]) {
        snprintf(av, sizeof av, "%s/%s", j->r->group, j->r->version);
        apiv = av;
    }
    if (j->rows) {
        snprintf(head, sizeof head, "%llu", (unsigned long long)j->rv);
        return table_head(j, head);
    }
    int n = snprintf(head, sizeof head, "{\"kind\":\"%sList\",\"apiVersion\":\"%s\",\"metadata\":"
                     "{\"resourceVersion\":\"%llu\"},\"items\":[", j->r->kind, apiv, (unsigned long long)j->rv);
    if (n < 0 || (size_t)n >= sizeof head) return -EINVAL;
    return buf_add(j, head, (size_t)n);
}

/* The item's JSON appended to the slice's bytes (unpacked there). */
static int add_json(struct slice_job *j, const struct slice_item *it) {
    if (!it->zlen) return buf_add(j, it->data, it->len);
    if (j->bcap - j->blen < (size_t)it->len + 1) {
        size_t nc = j->bcap ? j->bcap : 4096;
        while (nc - j->blen < (size_t)it->len + 1) nc *= 2;
        char *n = realloc(j->buf, nc);
        if (!n) return -ENOMEM;
        j->buf = n;
        j->bcap = nc;
    }
    if (store_unpack_text(j->s->slice_pack, it->data, it->zlen, j->buf + j->blen, it->len)) return -EIO;
    j->blen += it->len;
    j->buf[j->blen] = '\0';
    return 0;
}

static int emit_item(struct slice_job *j, struct slice_item *it) {
    if (!it->data) return 0;
    int rc = 0;
    if (j->table) { /* a Table watch: the watcher makes the row of the object */
        size_t at = j->blen;
        if (!(rc = add_json(j, it))) {
            json_t *obj = jparse_loadb(j->buf + at, it->len, 0, NULL);
            j->blen = at;
            if (!obj) rc = -EIO;
            else j->emit(j->ud, NULL, 0, obj);
            json_decref(obj);
        }
    } else if (j->watch) {
        static const char head[] = "{\"type\":\"ADDED\",\"object\":";
        rc = buf_add(j, head, sizeof head - 1);
        if (!rc) rc = add_json(j, it);
        if (!rc) rc = buf_add(j, "}\n", 2);
    } else {
        if (!j->first) rc = buf_add(j, ",", 1);
        j->first = false;
        if (!rc) rc = add_json(j, it);
    }
    item_release(j, it); /* sent: the memory goes as the list does */
    return rc;
}

/* One slice of items, in key order (the read ones merged with the created ones). */
static int emit_step(struct slice_job *j, bool *more) {
    size_t start = j->blen, count = 0;
    *more = true;
    while (j->blen - start < SLICE_EMIT_BYTES && count++ < SLICE_EMIT_ITEMS) {
        struct slice_item *next;
        if (j->ei < j->n && (j->ej >= j->nex || strcmp(j->it[j->ei].member, j->ex[j->ej]->member) < 0))
            next = &j->it[j->ei++];
        else if (j->ej < j->nex) next = j->ex[j->ej++];
        else {
            *more = false;
            break;
        }
        int rc = emit_item(j, next);
        if (rc) return rc;
        if (j->closed) return 0;
    }
    flush(j);
    return 0;
}

static void on_step(struct slice_job *j);
static void on_idle(uv_idle_t *h);

static void on_wait(uv_timer_t *t) {
    struct slice_job *j = t->data;
    uv_idle_start(&j->idle, on_idle);
}

static void restart(struct slice_job *j) {
    items_clear(j);
    free(j->token);
    j->token = NULL;
    j->phase = SLICE_READ;
    j->from = 0;
}

/* One page of the list; false at the end of the read. rc < 0 on failure. */
static int read_step(struct slice_job *j) {
    struct store_list l = {0};
    int rc = store_list(j->s->st, j->r->store_key, j->ns, SLICE_PAGE, j->token, &l);
    if (rc) return rc;
    if (!j->token) j->from = l.resource_version;
    free(j->token);
    j->token = l.continue_token;
    l.continue_token = NULL;
    size_t i;
    json_t *o;
    json_array_foreach(l.items, i, o) if ((rc = add_read(j, o))) break;
    store_list_free(&l);
    if (!rc && !j->token) {
        j->phase = SLICE_HIST;
        j->rv = j->from;
    }
    return rc;
}

static int hist_step(struct slice_job *j) {
    struct store_history h = {0};
    int rc = store_history_after(j->s->st, j->r->store_key, j->ns, j->rv, SLICE_HISTORY, &h);
    if (rc) return rc;
    for (size_t i = 0; i < h.n && !rc; i++) rc = apply_event(j, &h.events[i]);
    if (!rc) {
        if (h.more && h.next_rv > j->rv) j->rv = h.next_rv;
        else { /* everything up to the counter is applied: the list is the resource at E */
            j->rv = h.current_rv > j->rv ? h.current_rv : j->rv;
            j->phase = SLICE_EMIT;
            j->first = true;
            rc = sort_extra(j);
            if (!rc && !j->watch) rc = list_head(j);
        }
    }
    store_history_free(&h);
    return rc;
}

/* The loop turn's budget: idle callbacks run before uv_prepare's, which
 * starts the next turn's budget; a job finding it spent waits a turn. */
static void on_prepare(uv_prepare_t *p) {
    struct shim *s = p->data;
    s->slice_spent_ns = 0;
    if (!s->slices) uv_prepare_stop(p);
}

static void on_idle(uv_idle_t *h) {
    struct slice_job *j = h->data;
    if (j->closed) {
        finish(j, -ECANCELED);
        return;
    }
    struct shim *s = j->s;
    if (s->slice_spent_ns >= SLICE_TURN_NS) return;
    uint64_t t0 = uv_hrtime();
    on_step(j);
    s->slice_spent_ns += uv_hrtime() - t0; /* j may be gone: s is not */
}

static void on_step(struct slice_job *j) {
    int rc = 0;
    bool more = true;
    switch (j->phase) {
    case SLICE_READ:
        rc = read_step(j);
        break;
    case SLICE_HIST:
        rc = hist_step(j);
        break;
    case SLICE_EMIT:
        if (http_stream_buffered(j->st) >= SLICE_BUFFERED) { /* the reader first: look again in a moment */
            uv_idle_stop(&j->idle);                           /* (an idle handle would spin the loop) */
            uv_timer_start(&j->wait, on_wait, SLICE_WAIT_MS, 0);
            return;
        }
        rc = emit_step(j, &more);
        if (!rc && !more) {
            finish(j, 0);
            return;
        }
        break;
    }
    if (rc == -ESTALE && j->restarts < SLICE_RESTARTS) {
        j->restarts++;
        restart(j);
        return;
    }
    if (rc == -ENOSPC) {
        count_refusal(j->s, "reading");
        fprintf(stderr, "apiserver: a whole list of %s ended: its items passed --list-memory-mb (%zu MiB held by all)\n",
                j->r->plural, j->s->slice_held >> 20);
    }
    if (rc) finish(j, rc);
}

static struct slice_job *job_new(struct shim *s, const struct shim_resource *r, const char *ns) {
    if (!s->loop) return NULL;
    if (!s->slice_prep) {
        if (!(s->slice_prep = calloc(1, sizeof *s->slice_prep))) return NULL;
        uv_prepare_init(s->loop, s->slice_prep);
        s->slice_prep->data = s;
    }
    uv_prepare_start(s->slice_prep, on_prepare);
    struct slice_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->s = s;
    j->r = r;
    snprintf(j->ns, sizeof j->ns, "%s", r->namespaced ? ns : "");
    uv_idle_init(s->loop, &j->idle);
    j->idle.data = j;
    uv_timer_init(s->loop, &j->wait);
    j->wait.data = j;
    j->handles = 2;
    j->next = s->slices;
    if (s->slices) s->slices->prev = j;
    s->slices = j;
    return j;
}

static void on_list_closed(void *ud) {
    struct slice_job *j = ud;
    j->closed = true;
    j->st = NULL;
    if (j->ended) job_free(j);
}

/* A new job is let in while the others hold under half of list_memory: a
 * whole list needs room, and one let in past that would likely end half
 * read, its work lost. own: what the job asking holds already. */
static void busy(struct shim *s, size_t others, struct http_response *resp) {
    count_refusal(s, "start");
    shim_status(resp, 429, "TooManyRequests", json_pack("{s:i}", "retryAfterSeconds", 1),
                "the server is busy serving whole lists (%zu MiB held; --list-memory-mb=%zu): retry later, or list "
                "with a limit (pages)", others >> 20, s->list_memory >> 20);
    resp->retry_after = 1;
}

static bool admit(struct shim *s, size_t own, struct http_response *resp) {
    size_t others = s->slice_held - own;
    if (others < s->list_memory / 2) return true;
    busy(s, others, resp);
    return false;
}

bool shim_slices_admit(struct shim *s, struct http_response *resp) { return admit(s, 0, resp); }

/* Lists and Tables have no protobuf encoding here: a client that accepts
 * protobuf and JSON gets JSON, whole or in slices alike. */
bool shim_slices_wanted(const struct shim *s, const struct http_request *req) {
    if (!s->loop) return false;
    const char *lim = http_req_arg(req, "limit");
    return !lim || atoll(lim) <= 0;
}

void shim_slices_list(struct shim *s, const struct shim_resource *r, const char *ns, struct labelsel *ls,
                      struct fieldsel *fs, bool table, enum shim_include inc, const struct http_request *req,
                      struct http_response *resp) {
    struct slice_job *j = job_new(s, r, ns);
    if (!j) {
        labelsel_free(ls);
        fieldsel_free(fs);
        shim_status(resp, 500, "InternalError", NULL, "out of memory");
        return;
    }
    j->ls = j->own_ls = ls;
    j->fs = j->own_fs = fs;
    j->rows = table;
    j->inc = inc;
    int rc = read_step(j); /* the first page here: its error is still a Status */
    if (rc) {
        if (rc == -ESTALE)
            shim_status(resp, 410, "Expired", NULL, "The list could not be read consistently; list again.");
        else if (rc == -ENOSPC) busy(s, s->slice_held - j->held, resp); /* its first page passed the bound */
        else shim_store_error(s, resp, rc, r, "");
        j->closed = true;
        job_free(j);
        return;
    }
    if (j->phase == SLICE_READ && !admit(s, j->held, resp)) { /* more than a page: a whole list's memory */
        j->closed = true;
        job_free(j);
        return;
    }
    bool refused = !shim_pb_json_ok(req);
    if (j->phase == SLICE_HIST || refused) { /* one page held it all, read by one script: answered whole, as before */
        j->rv = j->from;                      /* (refused: only protobuf accepted, and shim_pb_reply refuses a list) */
        if (refused) items_clear(j);
        j->first = true;
        rc = list_head(j);
        for (size_t i = 0; i < j->n && !rc; i++) rc = emit_item(j, &j->it[i]);
        if (!rc) rc = buf_add(j, "]}", 2);
        if (rc) shim_status(resp, 500, "InternalError", NULL, "out of memory");
        else {
            resp->status = 200;
            resp->content_type = "application/json";
            resp->body = j->buf;
            resp->body_len = j->blen;
            j->buf = NULL;
        }
        j->closed = true;
        job_free(j);
        return;
    }
    j->st = http_stream_start(req, 200, "application/json", SLICE_LIST_BUFFER, on_list_closed, j);
    if (!j->st) {
        shim_status(resp, 500, "InternalError", NULL, "cannot open the list stream");
        j->closed = true;
        job_free(j);
        return;
    }
    uv_idle_start(&j->idle, on_idle);
}

struct slice_job *shim_slices_watch(struct shim *s, const struct shim_resource *r, const char *ns,
                                    const struct labelsel *ls, const struct fieldsel *fs, bool table,
                                    struct http_stream *st, shim_slice_emit_fn emit, shim_slice_done_fn done,
                                    void *ud) {
    struct slice_job *j = job_new(s, r, ns);
    if (!j) return NULL;
    j->ls = ls;
    j->fs = fs;
    j->watch = true;
    j->table = table;
    j->st = st;
    j->emit = emit;
    j->done = done;
    j->ud = ud;
    uv_idle_start(&j->idle, on_idle);
    return j;
}

/* The watcher is gone: the job ends on its next turn, without callbacks. */
void shim_slices_cancel(struct slice_job *j) {
    if (!j) return;
    j->closed = true;
    j->st = NULL;
    j->done = NULL;
}

static void on_prep_closed(uv_handle_t *h) { free(h); }

/* At shutdown, after the HTTP server stopped (every stream closed). */
void shim_slices_free_all(struct shim *s) {
    while (s->slices) {
        struct slice_job *j = s->slices;
        j->closed = true;
        j->done = NULL;
        j->st = NULL;
        job_free(j);
    }
    if (s->slice_prep) {
        uv_prepare_stop(s->slice_prep);
        uv_close((uv_handle_t *)s->slice_prep, on_prep_closed);
        s->slice_prep = NULL;
    }
}

size_t shim_slices_active(const struct shim *s) {
    size_t n = 0;
    for (const struct slice_job *j = s->slices; j; j = j->next) n++;
    return n;
}
