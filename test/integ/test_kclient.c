/* kclient against the project's real API server: a private redis-server and
 * pelotond on loopback (apisrv_fixture.h), started and reaped by each test. The
 * client runs on a private uv loop; every wait has a deadline. A second group
 * of tests uses a scripted HTTP server (src/http) on the same loop to send
 * watch streams cut at awkward places and over-long bodies. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "apisrv_fixture.h"
#include "kclient.h"
#include "server.h"
#include "test.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---- the loop ---- */

struct env {
    uv_loop_t loop;
    uv_timer_t deadline;
    bool expired;
    struct kclient *c;
};

static void on_deadline(uv_timer_t *t) {
    struct env *e = t->data;
    e->expired = true;
}

/* curl: requests through libcurl too (kc_config.curl_requests) */
static int env_init_with(struct env *e, const char *url, bool curl) {
    memset(e, 0, sizeof *e);
    uv_loop_init(&e->loop);
    uv_timer_init(&e->loop, &e->deadline);
    e->deadline.data = e;
    struct kc_config cfg = {0};
    char err[256];
    if (kc_config_from_url(url, NULL, &cfg, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "config: %s", err);
        return -1;
    }
    cfg.curl_requests = curl;
    e->c = kclient_new(&e->loop, &cfg, err, sizeof err);
    kc_config_free(&cfg);
    if (!e->c) {
        test_fail(__FILE__, __LINE__, "kclient_new: %s", err);
        return -1;
    }
    return 0;
}

static int env_init(struct env *e, const char *url) { return env_init_with(e, url, false); }

static void close_any(uv_handle_t *h, void *arg) {
    if (!uv_is_closing(h)) uv_close(h, NULL);
}

static void env_done(struct env *e) {
    kclient_free(e->c);
    e->c = NULL;
    uv_close((uv_handle_t *)&e->deadline, NULL);
    for (int i = 0; i < 100 && uv_loop_close(&e->loop) == UV_EBUSY; i++) {
        if (i == 50) { /* the client left a handle open */
            test_fail(__FILE__, __LINE__, "handles still open after kclient_free");
            uv_walk(&e->loop, close_any, NULL);
        }
        uv_run(&e->loop, UV_RUN_NOWAIT);
    }
}

static int count_fds(void) {
    int n = 0;
    for (int fd = 0; fd < 4096; fd++) n += fcntl(fd, F_GETFD) != -1;
    return n;
}

typedef bool (*pred_fn)(void *arg);

/* Runs the loop until pred holds or ms pass; true when it held. */
static bool run_until(struct env *e, pred_fn pred, void *arg, unsigned ms) {
    e->expired = false;
    uv_timer_start(&e->deadline, on_deadline, ms, 0);
    while (!pred(arg) && !e->expired) uv_run(&e->loop, UV_RUN_ONCE);
    uv_timer_stop(&e->deadline);
    return pred(arg);
}

static bool int_reached(void *arg) { return ((int *)arg)[0] >= ((int *)arg)[1]; }

/* Runs the loop for ms regardless. */
static void run_for(struct env *e, unsigned ms) {
    int never[2] = {0, 1};
    run_until(e, int_reached, never, ms);
}

/* ---- request helpers ---- */

struct box {
    int done;
    long status;
    json_t *body;
    char reason[64], error[256];
};

static void box_cb(void *ud, const struct kc_response *r) {
    struct box *b = ud;
    b->done++;
    b->status = r->status;
    json_decref(b->body);
    b->body = json_incref(kc_response_body(r));
    snprintf(b->reason, sizeof b->reason, "%s", r->reason ? r->reason : "");
    snprintf(b->error, sizeof b->error, "%s", r->error ? r->error : "");
}

static bool box_done(void *arg) { return ((struct box *)arg)->done > 0; }

/* One async request, waited for (5 s); the status (-1 on timeout). */
static long call(struct env *e, struct box *b, const char *method, const char *path, json_t *body,
                 const char *ctype) {
    b->done = 0;
    if (kclient_request(e->c, method, path, body, ctype, box_cb, b)) return -2;
    if (!run_until(e, box_done, b, 5000)) return -1;
    return b->status;
}

static json_t *pod(const char *name, const char *label) {
    return json_pack("{s:s, s:s, s:{s:s, s:{s:s}}, s:{s:[{s:s, s:s}]}}", "apiVersion", "v1", "kind", "Pod",
                     "metadata", "name", name, "labels", "app", label, "spec", "containers", "name", "c", "image",
                     "busybox");
}

/* Creates n pods name-0..n-1 with up to 64 requests in flight. */
struct bulk {
    int done, target, failed;
};
static void bulk_cb(void *ud, const struct kc_response *r) {
    struct bulk *b = ud;
    b->done++;
    if (r->status != 201) b->failed++;
}
static bool bulk_done(void *arg) {
    struct bulk *b = arg;
    return b->done >= b->target;
}

static int create_pods(struct env *e, const char *prefix, int n) {
    struct bulk b = {0, 0, 0};
    char name[64];
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "%s-%d", prefix, i);
        json_t *p = pod(name, "bulk");
        int rc = kclient_request(e->c, "POST", "/api/v1/namespaces/default/pods", p, NULL, bulk_cb, &b);
        json_decref(p);
        if (rc) return rc;
        b.target++;
        double end = now_ms() + 20000;
        while (b.target - b.done >= 64 && now_ms() < end) uv_run(&e->loop, UV_RUN_ONCE);
    }
    if (!run_until(e, bulk_done, &b, 60000)) return -ETIMEDOUT;
    return b.failed ? -EIO : 0;
}

/* A test's pelotond (apiserver role, with args) and client; returns from the
 * test when either cannot start. */
#define WITH_APISRV(s, e, args)                                                                                        \
    struct apisrv s;                                                                                                   \
    REQUIRE(apisrv_start(&s, args) == 0);                                                                              \
    struct env e;                                                                                                      \
    if (env_init(&e, s.url)) {                                                                                         \
        apisrv_stop(&s);                                                                                               \
        return;                                                                                                        \
    }

/* ---- CRUD, errors, sync ---- */

TEST(kclient_crud_pods) {
    WITH_APISRV(s, e, NULL);
    struct box b = {0};
    json_t *p = pod("web-1", "web");
    CHECK_I64(call(&e, &b, "POST", "/api/v1/namespaces/default/pods", p, NULL), 201);
    json_decref(p);
    CHECK_STR(json_string_value(json_object_get(json_object_get(b.body, "metadata"), "name")), "web-1");
    CHECK(b.error[0] == 0);

    CHECK_I64(call(&e, &b, "GET", "/api/v1/namespaces/default/pods/web-1", NULL, NULL), 200);
    CHECK_STR(json_string_value(json_object_get(b.body, "kind")), "Pod");

    CHECK_I64(call(&e, &b, "GET", "/api/v1/namespaces/default/pods?limit=500", NULL, NULL), 200);
    CHECK_I64(json_array_size(json_object_get(b.body, "items")), 1);

    json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "labels", "tier", "front");
    CHECK_I64(call(&e, &b, "PATCH", "/api/v1/namespaces/default/pods/web-1", patch, "application/merge-patch+json"),
              200);
    json_decref(patch);
    json_t *labels = json_object_get(json_object_get(b.body, "metadata"), "labels");
    CHECK_STR(json_string_value(json_object_get(labels, "tier")), "front");
    CHECK_STR(json_string_value(json_object_get(labels, "app")), "web");

    /* a conflicting create */
    p = pod("web-1", "web");
    CHECK_I64(call(&e, &b, "POST", "/api/v1/namespaces/default/pods", p, NULL), 409);
    json_decref(p);
    CHECK_STR(b.reason, "AlreadyExists");

    CHECK_I64(call(&e, &b, "DELETE", "/api/v1/namespaces/default/pods/web-1", NULL, NULL), 200);
    CHECK_I64(call(&e, &b, "GET", "/api/v1/namespaces/default/pods/web-1", NULL, NULL), 404);
    CHECK_STR(b.reason, "NotFound");
    CHECK_HAS(b.error, "not found");
    CHECK(b.body != NULL);

    /* a path that is not a path fails at once, without a callback */
    CHECK(kclient_request(e.c, "GET", "api/v1/pods", NULL, NULL, box_cb, &b) < 0);
    CHECK_I64(kclient_inflight(e.c), 0);
    json_decref(b.body);
    env_done(&e);
    apisrv_stop(&s);
}

TEST(kclient_sync_requests) {
    WITH_APISRV(s, e, NULL);
    char err[256];
    json_t *out = NULL;
    json_t *p = pod("sync-1", "s");
    CHECK_I64(kclient_request_sync(e.c, "POST", "/api/v1/namespaces/default/pods", p, NULL, &out, err, sizeof err),
              201);
    json_decref(p);
    CHECK_STR(json_string_value(json_object_get(json_object_get(out, "metadata"), "namespace")), "default");
    json_decref(out);
    for (int i = 0; i < 20; i++) /* keep-alive on the private handle */
        CHECK_I64(kclient_request_sync(e.c, "GET", "/api/v1/namespaces/default/pods/sync-1", NULL, NULL, NULL, err,
                                       sizeof err),
                  200);
    CHECK_I64(kclient_request_sync(e.c, "GET", "/api/v1/namespaces/default/pods/nope", NULL, NULL, &out, err,
                                   sizeof err),
              404);
    CHECK_HAS(err, "NotFound");
    CHECK_STR(json_string_value(json_object_get(out, "reason")), "NotFound");
    json_decref(out);
    CHECK_I64(kclient_request_sync(e.c, "GET", "/healthz", NULL, NULL, &out, err, sizeof err), 200);
    CHECK(out == NULL); /* "ok" is not JSON */
    env_done(&e);
    /* a server that is gone: a transport error, negative */
    apisrv_kill(&s, SIGKILL);
    CHECK(env_init(&e, s.url) == 0);
    CHECK(kclient_request_sync(e.c, "GET", "/healthz", NULL, NULL, NULL, err, sizeof err) < 0);
    struct box b = {0};
    CHECK_I64(call(&e, &b, "GET", "/healthz", NULL, NULL), 0);
    CHECK(b.error[0] != 0);
    env_done(&e);
    apisrv_stop(&s);
}

/* ---- watch ---- */

struct wrec {
    struct kc_watch *w;
    char types[16][16];
    int n;
    int bookmarks;
    int ends;
    long end_status;
    bool stop_on_delete;
    int want[2];
};

static void wrec_event(void *ud, const char *type, json_t *obj) {
    struct wrec *r = ud;
    if (!strcmp(type, "BOOKMARK")) {
        r->bookmarks++;
        return;
    }
    if (r->n < 16) snprintf(r->types[r->n], sizeof r->types[0], "%s", type);
    r->n++;
    r->want[0] = r->n;
    if (r->stop_on_delete && !strcmp(type, "DELETED")) {
        kc_watch_stop(r->w); /* from inside the handler */
        r->w = NULL;
    }
}

static void wrec_end(void *ud, long status, const char *error) {
    struct wrec *r = ud;
    r->ends++;
    r->end_status = status;
    r->w = NULL;
}

TEST(kclient_watch_sees_changes) {
    WITH_APISRV(s, e, NULL);
    struct box b = {0};
    CHECK_I64(call(&e, &b, "GET", "/api/v1/namespaces/default/pods", NULL, NULL), 200);
    const char *rv = json_string_value(json_object_get(json_object_get(b.body, "metadata"), "resourceVersion"));
    char rvbuf[32];
    snprintf(rvbuf, sizeof rvbuf, "%s", rv ? rv : "");
    struct wrec r = {.stop_on_delete = true, .want = {0, 3}};
    r.w = kclient_watch(e.c, "/api/v1/namespaces/default/pods", "labelSelector=app%3Dw", rvbuf, wrec_event, wrec_end,
                        &r);
    REQUIRE(r.w);
    json_t *p = pod("w-1", "w");
    CHECK_I64(call(&e, &b, "POST", "/api/v1/namespaces/default/pods", p, NULL), 201);
    json_decref(p);
    p = pod("other", "x"); /* filtered out by the selector */
    CHECK_I64(call(&e, &b, "POST", "/api/v1/namespaces/default/pods", p, NULL), 201);
    json_decref(p);
    json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "annotations", "a", "b");
    CHECK_I64(call(&e, &b, "PATCH", "/api/v1/namespaces/default/pods/w-1", patch, "application/merge-patch+json"), 200);
    json_decref(patch);
    CHECK_I64(call(&e, &b, "DELETE", "/api/v1/namespaces/default/pods/w-1", NULL, NULL), 200);
    CHECK(run_until(&e, int_reached, r.want, 5000));
    CHECK_I64(r.n, 3);
    CHECK_STR(r.types[0], "ADDED");
    CHECK_STR(r.types[1], "MODIFIED");
    CHECK_STR(r.types[2], "DELETED");
    CHECK(r.w == NULL);
    CHECK_I64(r.ends, 0); /* stopped, so no end callback */
    run_for(&e, 50);
    CHECK_I64(r.n, 3);
    json_decref(b.body);
    env_done(&e);
    apisrv_stop(&s);
}

TEST(kclient_watch_too_old_and_server_gone) {
    WITH_APISRV(s, e, "--history-max=20");
    REQUIRE(create_pods(&e, "old", 40) == 0);
    /* from a resourceVersion older than the history: an ERROR event 410, then the end */
    struct wrec r = {.want = {0, 1}};
    r.w = kclient_watch(e.c, "/api/v1/namespaces/default/pods", NULL, "2", wrec_event, wrec_end, &r);
    REQUIRE(r.w);
    double t0 = now_ms();
    while (!r.ends && now_ms() - t0 < 5000) uv_run(&e.loop, UV_RUN_ONCE);
    CHECK_I64(r.ends, 1);
    CHECK(r.n >= 1);
    CHECK_STR(r.types[0], "ERROR");
    /* a live watch, then the server dies: the end callback, once */
    struct wrec r2 = {.want = {0, 1}};
    r2.w = kclient_watch(e.c, "/api/v1/namespaces/default/pods", NULL, NULL, wrec_event, wrec_end, &r2);
    REQUIRE(r2.w);
    run_for(&e, 300);
    apisrv_kill(&s, SIGKILL);
    t0 = now_ms();
    while (!r2.ends && now_ms() - t0 < 5000) uv_run(&e.loop, UV_RUN_ONCE);
    CHECK_I64(r2.ends, 1);
    env_done(&e);
    apisrv_stop(&s);
}

/* ---- informers ---- */

struct irec {
    struct kc_informer *inf;
    struct env *e;
    int adds, updates, deletes, synced;
    int mutate_on_sync;    /* sync requests made from on_synced */
    bool check_borrowed;
};

static void irec_add(void *ud, json_t *obj) {
    struct irec *r = ud;
    r->adds++;
    if (r->check_borrowed) { /* the cache holds what the handler sees */
        json_t *md = json_object_get(obj, "metadata");
        json_t *c = kc_informer_get(r->inf, json_string_value(json_object_get(md, "namespace")),
                                    json_string_value(json_object_get(md, "name")));
        if (c != obj) r->adds += 1000000;
    }
}
static void irec_update(void *ud, json_t *old, json_t *obj) {
    struct irec *r = ud;
    r->updates++;
    if (!json_object_get(old, "metadata")) r->updates += 1000000; /* old must stay valid */
}
static void irec_delete(void *ud, json_t *obj) { ((struct irec *)ud)->deletes++; }

static void irec_synced(void *ud) {
    struct irec *r = ud;
    r->synced++;
    char err[256], path[128];
    /* move the history past the list's resourceVersion before the watch starts: it will get 410 */
    for (int i = 0; i < r->mutate_on_sync; i++) {
        json_t *p = pod("", "late");
        char name[32];
        snprintf(name, sizeof name, "late-%d", i);
        json_object_set_new(json_object_get(p, "metadata"), "name", json_string(name));
        if (kclient_request_sync(r->e->c, "POST", "/api/v1/namespaces/default/pods", p, NULL, NULL, err, sizeof err) !=
            201)
            r->synced += 1000;
        json_decref(p);
    }
    if (r->mutate_on_sync) {
        for (int i = 0; i < 3; i++) { /* and delete and change some listed ones */
            snprintf(path, sizeof path, "/api/v1/namespaces/default/pods/pre-%d", i);
            kclient_request_sync(r->e->c, "DELETE", path, NULL, NULL, NULL, err, sizeof err);
            snprintf(path, sizeof path, "/api/v1/namespaces/default/pods/pre-%d", 10 + i);
            json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "labels", "x", "y");
            kclient_request_sync(r->e->c, "PATCH", path, patch, "application/merge-patch+json", NULL, err, sizeof err);
            json_decref(patch);
        }
    }
}

struct match {
    struct env *e;
    struct kc_informer *inf;
    bool equal;
};

/* True when the cache holds exactly the server's pods, at the same versions. */
static bool cache_matches(struct env *e, struct kc_informer *inf) {
    json_t *out = NULL;
    char err[256];
    if (kclient_request_sync(e->c, "GET", "/api/v1/namespaces/default/pods", NULL, NULL, &out, err, sizeof err) != 200)
        return false;
    json_t *items = json_object_get(out, "items"), *it;
    size_t i;
    bool ok = json_array_size(items) == kc_informer_count(inf);
    json_array_foreach(items, i, it) {
        json_t *md = json_object_get(it, "metadata");
        json_t *c = kc_informer_get(inf, "default", json_string_value(json_object_get(md, "name")));
        const char *crv = json_string_value(json_object_get(json_object_get(c, "metadata"), "resourceVersion"));
        const char *srv = json_string_value(json_object_get(md, "resourceVersion"));
        if (!c || !crv || !srv || strcmp(crv, srv)) ok = false;
    }
    json_decref(out);
    return ok;
}

static bool match_pred(void *arg) {
    struct match *m = arg;
    return cache_matches(m->e, m->inf);
}

static bool synced_pred(void *arg) { return kc_informer_synced(arg); }

/* Starts each of n informers, then waits (bounded) until each has synced:
 * true when all of them started and synced. */
static bool start_all_synced(struct env *e, struct kc_informer *const *inf, size_t n) {
    bool ok = true;
    for (size_t i = 0; i < n; i++) ok = kc_informer_start(inf[i]) == 0 && ok;
    for (size_t i = 0; i < n; i++) ok = run_until(e, synced_pred, inf[i], 10000) && ok;
    return ok;
}

struct counts {
    struct irec *r;
    int adds, updates, deletes;
};
static bool counts_pred(void *arg) {
    struct counts *c = arg;
    return c->r->adds >= c->adds && c->r->updates >= c->updates && c->r->deletes >= c->deletes;
}

static int count_cb(void *ud, json_t *obj) {
    (*(int *)ud)++;
    return 0;
}

TEST(kclient_informer_pages_and_follows) {
    WITH_APISRV(s, e, NULL);
    double t0 = now_ms();
    CHECK(create_pods(&e, "pre", 1200) == 0);
    double dt = now_ms() - t0;
    fprintf(stderr, "  kclient: 1200 creates in %.0f ms (%.0f/s, asan pelotond)\n", dt, 1200 / (dt / 1e3));
    struct irec r = {.e = &e, .check_borrowed = true};
    struct kc_informer_handlers h = {irec_add, irec_update, irec_delete, irec_synced};
    r.inf = kc_informer_new(e.c, "/api/v1/namespaces/default/pods", NULL, &h, &r);
    REQUIRE(r.inf);
    CHECK_STR(kc_informer_rv(r.inf), "");
    CHECK(!kc_informer_synced(r.inf));
    CHECK_I64(kc_informer_start(r.inf), 0);
    CHECK(kc_informer_start(r.inf) < 0);
    CHECK(run_until(&e, synced_pred, r.inf, 20000));
    CHECK_I64(r.synced, 1);
    CHECK_I64(r.adds, 1200);
    CHECK_I64(kc_informer_count(r.inf), 1200);
    CHECK_I64(kc_informer_lists(r.inf), 1);
    CHECK(kc_informer_rv(r.inf)[0] != 0);
    int n = 0;
    kc_informer_foreach(r.inf, count_cb, &n);
    CHECK_I64(n, 1200);
    CHECK(kc_informer_get(r.inf, "default", "pre-1199") != NULL);
    CHECK(kc_informer_get(r.inf, "default", "pre-1200") == NULL);
    CHECK(cache_matches(&e, r.inf));

    /* follow: 5 creates, 3 updates, 4 deletes */
    struct box b = {0};
    for (int i = 0; i < 5; i++) {
        char name[32];
        snprintf(name, sizeof name, "new-%d", i);
        json_t *p = pod(name, "n");
        CHECK_I64(call(&e, &b, "POST", "/api/v1/namespaces/default/pods", p, NULL), 201);
        json_decref(p);
    }
    for (int i = 0; i < 3; i++) {
        char path[96];
        snprintf(path, sizeof path, "/api/v1/namespaces/default/pods/pre-%d", 100 + i);
        json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "labels", "v", "2");
        CHECK_I64(call(&e, &b, "PATCH", path, patch, "application/merge-patch+json"), 200);
        json_decref(patch);
    }
    for (int i = 0; i < 4; i++) {
        char path[96];
        snprintf(path, sizeof path, "/api/v1/namespaces/default/pods/pre-%d", 200 + i);
        CHECK_I64(call(&e, &b, "DELETE", path, NULL, NULL), 200);
    }
    struct counts want = {&r, 1205, 3, 4};
    CHECK(run_until(&e, counts_pred, &want, 10000));
    run_for(&e, 100);
    CHECK_I64(r.adds, 1205);
    CHECK_I64(r.updates, 3);
    CHECK_I64(r.deletes, 4);
    CHECK_I64(kc_informer_count(r.inf), 1201);
    json_t *md = json_object_get(kc_informer_get(r.inf, "default", "pre-100"), "metadata");
    CHECK_STR(json_string_value(json_object_get(json_object_get(md, "labels"), "v")), "2");
    CHECK(cache_matches(&e, r.inf));
    CHECK_I64(kc_informer_lists(r.inf), 1);
    json_decref(b.body);
    kc_informer_free(r.inf);
    env_done(&e);
    apisrv_stop(&s);
}

/* ---- informers sharing a feed ---- */

struct sub {
    const char *tag;
    char *log;            /* shared: handler calls in order, one letter each */
    int adds, updates, deletes, synced;
    struct kc_informer *self;
    bool free_on_update;  /* frees itself inside its on_update */
};

static void sub_log(struct sub *x) {
    size_t n = strlen(x->log);
    if (n < 4000) x->log[n] = x->tag[0], x->log[n + 1] = 0;
}
static void sub_add(void *ud, json_t *obj) { ((struct sub *)ud)->adds++, sub_log(ud); }
static void sub_update(void *ud, json_t *old, json_t *obj) {
    struct sub *x = ud;
    x->updates++;
    sub_log(x);
    if (x->free_on_update) {
        kc_informer_free(x->self);
        x->self = NULL;
        x->free_on_update = false;
    }
}
static void sub_delete(void *ud, json_t *obj) { ((struct sub *)ud)->deletes++, sub_log(ud); }
static void sub_synced(void *ud) { ((struct sub *)ud)->synced++; }
static bool both_synced(void *arg) {
    struct sub **x = arg;
    return x[0]->synced && x[1]->synced && x[2]->synced;
}
static bool sub_counts(void *arg) {
    struct sub *x = arg;
    return x->adds >= 21 && x->deletes >= 1;
}

TEST(kclient_informers_share_a_feed) {
    WITH_APISRV(s, e, NULL);
    CHECK(create_pods(&e, "sh", 20) == 0);
    char log[4096] = "";
    struct sub a = {.tag = "a", .log = log}, b = {.tag = "b", .log = log}, c = {.tag = "c", .log = log},
               d = {.tag = "d", .log = log};
    struct kc_informer_handlers h = {sub_add, sub_update, sub_delete, sub_synced};
    const char *path = "/api/v1/namespaces/default/pods";
    a.self = kc_informer_new(e.c, path, NULL, &h, &a);
    b.self = kc_informer_new(e.c, path, NULL, &h, &b);
    c.self = kc_informer_new(e.c, path, "labelSelector=app%3Dbulk", &h, &c); /* another query: its own feed */
    REQUIRE(a.self && b.self && c.self);
    CHECK_I64(kc_informer_start(b.self), 0); /* the feed starts with its first started subscriber */
    CHECK_I64(kc_informer_start(a.self), 0);
    CHECK_I64(kc_informer_start(c.self), 0);
    struct sub *three[] = {&a, &b, &c};
    REQUIRE(run_until(&e, both_synced, three, 20000));
    CHECK_I64(a.adds, 20);
    CHECK_I64(b.adds, 20);
    CHECK_I64(c.adds, 20);
    CHECK_I64(a.synced + b.synced + c.synced, 3);
    /* one cache: both see the very same objects; the other query keeps its own */
    json_t *pa = kc_informer_get(a.self, "default", "sh-3"), *pb = kc_informer_get(b.self, "default", "sh-3");
    CHECK(pa && pa == pb);
    CHECK(kc_informer_get(c.self, "default", "sh-3") != pa);
    /* handlers of a shared feed run in the order the informers were made: a, then b, for each object */
    char ab[4096];
    size_t nab = 0;
    for (const char *p = log; *p; p++)
        if (*p != 'c') ab[nab++] = *p;
    ab[nab] = 0;
    CHECK_I64(nab, 40);
    for (size_t i = 0; i + 1 < nab; i += 2) CHECK(ab[i] == 'a' && ab[i + 1] == 'b');
    /* a late subscriber gets the cache, then its own synced, at start */
    d.self = kc_informer_new(e.c, path, NULL, &h, &d);
    REQUIRE(d.self);
    CHECK_I64(kc_informer_start(d.self), 0);
    CHECK_I64(d.adds, 20);
    CHECK_I64(d.synced, 1);
    CHECK(kc_informer_synced(d.self));
    /* b frees itself inside its first update; a and d go on */
    b.free_on_update = true;
    struct box bx = {0};
    json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "labels", "v", "2");
    CHECK_I64(call(&e, &bx, "PATCH", "/api/v1/namespaces/default/pods/sh-1", patch, "application/merge-patch+json"),
              200);
    json_decref(patch);
    CHECK(create_pods(&e, "late", 1) == 0);
    CHECK_I64(call(&e, &bx, "DELETE", "/api/v1/namespaces/default/pods/sh-2", NULL, NULL), 200);
    CHECK(run_until(&e, sub_counts, &d, 10000));
    run_for(&e, 100);
    CHECK_I64(a.adds, 21);
    CHECK_I64(a.updates, 1);
    CHECK_I64(a.deletes, 1);
    CHECK_I64(d.adds, 21);
    CHECK_I64(d.updates, 1);
    CHECK_I64(d.deletes, 1);
    CHECK_I64(b.updates, 1); /* the one it freed itself in */
    CHECK_I64(b.adds, 20);
    CHECK_I64(b.deletes, 0);
    CHECK(b.self == NULL);
    CHECK_I64(kc_informer_count(a.self), 20);
    json_decref(bx.body);
    kc_informer_free(a.self);
    kc_informer_free(d.self); /* the last subscriber: the feed goes with it */
    kc_informer_free(c.self);
    run_for(&e, 50);
    env_done(&e);
    apisrv_stop(&s);
}

TEST(kclient_informer_relists_after_410) {
    WITH_APISRV(s, e, "--history-max=50");
    REQUIRE(create_pods(&e, "pre", 30) == 0);
    struct irec r = {.e = &e, .mutate_on_sync = 80};
    struct kc_informer_handlers h = {irec_add, irec_update, irec_delete, irec_synced};
    r.inf = kc_informer_new(e.c, "/api/v1/namespaces/default/pods", NULL, &h, &r);
    REQUIRE(r.inf);
    CHECK_I64(kc_informer_start(r.inf), 0);
    CHECK(run_until(&e, synced_pred, r.inf, 10000));
    /* the watch from the list's version gets 410, the informer re-lists and reports the difference */
    struct counts want = {&r, 30 + 80, 3, 3};
    CHECK(run_until(&e, counts_pred, &want, 10000));
    CHECK_I64(r.synced, 1);
    CHECK(kc_informer_lists(r.inf) >= 2);
    CHECK_I64(r.adds, 110);
    CHECK_I64(r.deletes, 3);
    CHECK_I64(r.updates, 3);
    struct match m = {&e, r.inf, false};
    CHECK(run_until(&e, match_pred, &m, 5000));
    CHECK_I64(kc_informer_count(r.inf), 107);

    /* a broken stream: pelotond dies and comes back on the same port; changes made meanwhile show up */
    unsigned lists = kc_informer_lists(r.inf);
    int port = s.port;
    apisrv_kill(&s, SIGKILL);
    run_for(&e, 300);
    CHECK(apisrv_spawn(&s, port, "--history-max=50") == 0);
    char err[256];
    CHECK_I64(kclient_request_sync(e.c, "DELETE", "/api/v1/namespaces/default/pods/pre-20", NULL, NULL, NULL, err,
                                   sizeof err),
              200);
    json_t *p = pod("after-restart", "r");
    CHECK_I64(kclient_request_sync(e.c, "POST", "/api/v1/namespaces/default/pods", p, NULL, NULL, err, sizeof err),
              201);
    json_decref(p);
    CHECK(run_until(&e, match_pred, &m, 15000));
    CHECK(kc_informer_lists(r.inf) > lists);
    CHECK(kc_informer_get(r.inf, "default", "after-restart") != NULL);
    CHECK(kc_informer_get(r.inf, "default", "pre-20") == NULL);
    kc_informer_free(r.inf);
    env_done(&e);
    apisrv_stop(&s);
}

static bool current_pred(void *arg) { return kc_informer_fresh(arg, 0); }

static bool lists_moved(void *arg) {
    struct irec *r = arg;
    return kc_informer_lists(r->inf) >= 2 && kc_informer_fresh(r->inf, 0);
}

/* kc_informer_relist (placement's catch-up at a term's start): the feed is
 * listed again at once, not current until that list is applied; an
 * unchanged cache reports nothing, and the watch goes on after it. */
TEST(kclient_informer_relist_on_demand) {
    WITH_APISRV(s, e, NULL);
    REQUIRE(create_pods(&e, "rl", 3) == 0);
    struct irec r = {.e = &e};
    struct kc_informer_handlers h = {irec_add, irec_update, irec_delete, irec_synced};
    r.inf = kc_informer_new(e.c, "/api/v1/namespaces/default/pods", NULL, &h, &r);
    REQUIRE(r.inf);
    CHECK_I64(kc_informer_relist(r.inf), -EINVAL); /* not started */
    CHECK_I64(kc_informer_start(r.inf), 0);
    CHECK(run_until(&e, current_pred, r.inf, 10000));
    CHECK_I64(kc_informer_lists(r.inf), 1);
    CHECK_I64(kc_informer_relist(r.inf), 0); /* its watch just started: stopped once the server answered it */
    CHECK(!kc_informer_current(r.inf));
    CHECK(run_until(&e, lists_moved, &r, 10000));
    CHECK_I64(kc_informer_lists(r.inf), 2);
    CHECK_I64(r.adds, 3);
    CHECK_I64(r.updates, 0);
    CHECK_I64(r.synced, 1);
    json_t *p = pod("rl-after", "r");
    char err[256];
    CHECK_I64(kclient_request_sync(e.c, "POST", "/api/v1/namespaces/default/pods", p, NULL, NULL, err, sizeof err),
              201);
    json_decref(p);
    struct counts want = {&r, 4, 0, 0};
    CHECK(run_until(&e, counts_pred, &want, 10000));
    CHECK_I64(kc_informer_count(r.inf), 4);
    kc_informer_free(r.inf);
    env_done(&e);
    apisrv_stop(&s);
}

/* An informer whose watch broke is not current (though still synced: its
 * cache exists) until the re-list that follows is applied in full, however
 * long the server stays away; then it is current and fresh again, and its
 * list generation has moved. */
TEST(kclient_informer_not_current_while_relisting) {
    WITH_APISRV(s, e, NULL);
    REQUIRE(create_pods(&e, "cur", 3) == 0);
    struct irec r = {.e = &e};
    struct kc_informer_handlers h = {irec_add, irec_update, irec_delete, irec_synced};
    r.inf = kc_informer_new(e.c, "/api/v1/namespaces/default/pods", NULL, &h, &r);
    REQUIRE(r.inf);
    CHECK(!kc_informer_current(r.inf));
    CHECK(kc_informer_age_ms(r.inf) == UINT64_MAX);
    CHECK_I64(kc_informer_start(r.inf), 0);
    CHECK(run_until(&e, current_pred, r.inf, 10000));
    CHECK(kc_informer_current(r.inf));
    CHECK(kc_informer_age_ms(r.inf) < 5000);
    unsigned lists = kc_informer_lists(r.inf);
    int port = s.port;
    apisrv_kill(&s, SIGKILL);
    run_for(&e, 1500); /* several failed list attempts */
    CHECK(kc_informer_synced(r.inf));
    CHECK(!kc_informer_current(r.inf));
    CHECK(!kc_informer_fresh(r.inf, 0));
    CHECK(kc_informer_age_ms(r.inf) >= 1000);
    CHECK(!kc_informer_fresh(r.inf, 60000));
    CHECK_I64(kc_informer_lists(r.inf), lists);
    CHECK(apisrv_spawn(&s, port, NULL) == 0);
    CHECK(run_until(&e, current_pred, r.inf, 15000));
    CHECK(kc_informer_lists(r.inf) > lists);
    CHECK(kc_informer_fresh(r.inf, 60000));
    CHECK_I64(kc_informer_count(r.inf), 3);
    CHECK_I64(r.synced, 1); /* on_synced stays once */
    kc_informer_free(r.inf);
    env_done(&e);
    apisrv_stop(&s);
}

/* A transform that writes 60 pods (more than the server's history of 50)
 * while the first page of each of churn_rounds lists is read: the list's
 * continue token is then too old (410) every time it pages. */
static struct env *churn_env;
static int churn_rounds, churn_calls, churn_made;
static void churn_transform(json_t *obj) {
    (void)obj;
    if (churn_calls++ % 500 || churn_rounds <= 0) return;
    churn_rounds--;
    char err[256];
    for (int i = 0; i < 60; i++) {
        char name[32];
        snprintf(name, sizeof name, "churn-%d", churn_made++);
        json_t *p = pod(name, "churn");
        kclient_request_sync(churn_env->c, "POST", "/api/v1/namespaces/default/pods", p, NULL, NULL, err, sizeof err);
        json_decref(p);
    }
}

/* A paged list that cannot finish against churn (410 on its continue token,
 * again and again) does not loop: the informer asks for the whole list in one
 * reply and syncs. */
TEST(kclient_informer_lists_whole_when_continue_expires) {
    WITH_APISRV(s, e, "--history-max=50");
    REQUIRE(create_pods(&e, "base", 1100) == 0);
    churn_env = &e;
    churn_rounds = 20; /* paged, the old way, that is 20 failed lists and more than a minute of backoff */
    churn_calls = churn_made = 0;
    struct irec r = {.e = &e};
    struct kc_informer_handlers h = {irec_add, irec_update, irec_delete, irec_synced};
    struct kc_informer_opts o = {.transform = churn_transform};
    r.inf = kc_informer_new_opts(e.c, "/api/v1/namespaces/default/pods", NULL, &o, &h, &r);
    REQUIRE(r.inf);
    CHECK_I64(kc_informer_start(r.inf), 0);
    double t0 = now_ms();
    CHECK(run_until(&e, synced_pred, r.inf, 8000));
    fprintf(stderr, "  kclient: synced in %.0f ms against churn, %d pods written meanwhile\n", now_ms() - t0,
            churn_made);
    churn_rounds = 0;
    CHECK(kc_informer_count(r.inf) >= 1100 + 60);
    CHECK(kc_informer_get(r.inf, "default", "base-1099") != NULL);
    kc_informer_free(r.inf);
    env_done(&e);
    apisrv_stop(&s);
}

/* Sets label x=value on default/name by a merge patch; the HTTP status. */
static long label_pod(struct env *e, const char *name, const char *value) {
    char err[256], path[128];
    snprintf(path, sizeof path, "/api/v1/namespaces/default/pods/%s", name);
    json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "labels", "x", value);
    long st = kclient_request_sync(e->c, "PATCH", path, patch, "application/merge-patch+json", NULL, err, sizeof err);
    json_decref(patch);
    return st;
}

struct krec {
    struct irec r;
    int old_given;       /* updates that came with an old object */
    int stub_deletes;    /* deletions of pre-0..2 named by a stub in namespace default */
};

static void krec_update(void *ud, json_t *old, json_t *obj) {
    struct krec *k = ud;
    k->r.updates++;
    if (old) k->old_given++;
}
static void krec_delete(void *ud, json_t *obj) {
    struct krec *k = ud;
    k->r.deletes++;
    json_t *md = json_object_get(obj, "metadata");
    const char *ns = json_string_value(json_object_get(md, "namespace")),
               *name = json_string_value(json_object_get(md, "name"));
    if (ns && name && !strcmp(ns, "default") && !strncmp(name, "pre-", 4) &&
        json_string_value(json_object_get(md, "resourceVersion")))
        k->stub_deletes++;
}
static void krec_synced(void *ud) { irec_synced(&((struct krec *)ud)->r); }
static void krec_add(void *ud, json_t *obj) { irec_add(&((struct krec *)ud)->r, obj); }

TEST(kclient_informer_keys_only) {
    WITH_APISRV(s, e, "--history-max=50");
    REQUIRE(create_pods(&e, "pre", 30) == 0);
    const char *path = "/api/v1/namespaces/default/pods";
    /* a full informer on the same path first: the keys-only one must not join its feed */
    struct irec full = {.e = &e};
    struct kc_informer_handlers hf = {irec_add, irec_update, irec_delete, NULL};
    full.inf = kc_informer_new(e.c, path, NULL, &hf, &full);
    struct krec k = {.r = {.e = &e, .mutate_on_sync = 80}};
    struct kc_informer_handlers hk = {krec_add, krec_update, krec_delete, krec_synced};
    struct kc_informer_opts ko = {.keys_only = true};
    k.r.inf = kc_informer_new_opts(e.c, path, NULL, &ko, &hk, &k);
    REQUIRE(full.inf && k.r.inf);
    CHECK_I64(kc_informer_start(full.inf), 0);
    CHECK(run_until(&e, synced_pred, full.inf, 10000));
    CHECK_I64(kc_informer_start(k.r.inf), 0);
    CHECK(run_until(&e, synced_pred, k.r.inf, 10000));
    /* its watch from the list's version gets 410; the re-list's difference names the deleted pods by stubs */
    struct counts want = {&k.r, 30 + 80, 3, 3};
    CHECK(run_until(&e, counts_pred, &want, 10000));
    CHECK(kc_informer_lists(k.r.inf) >= 2);
    CHECK_I64(k.r.adds, 110);
    CHECK_I64(k.r.updates, 3);
    CHECK_I64(k.r.deletes, 3);
    CHECK_I64(k.old_given, 0);
    CHECK_I64(k.stub_deletes, 3);
    CHECK_I64(kc_informer_count(k.r.inf), 107);
    CHECK(kc_informer_get(k.r.inf, "default", "pre-5") == NULL); /* no objects kept */
    int n = 0;
    kc_informer_foreach(k.r.inf, count_cb, &n);
    CHECK_I64(n, 0);
    /* the full informer saw the same changes and keeps the objects */
    struct match m = {&e, full.inf, false};
    CHECK(run_until(&e, match_pred, &m, 5000));
    CHECK(kc_informer_get(full.inf, "default", "pre-5") != NULL);
    /* watch events after the re-list: a change and a delete */
    char err[256];
    CHECK_I64(label_pod(&e, "pre-6", "z"), 200);
    CHECK_I64(kclient_request_sync(e.c, "DELETE", "/api/v1/namespaces/default/pods/pre-7", NULL, NULL, NULL, err,
                                   sizeof err),
              200);
    struct counts more = {&k.r, 110, 4, 4};
    CHECK(run_until(&e, counts_pred, &more, 5000));
    CHECK_I64(k.old_given, 0);
    CHECK_I64(kc_informer_count(k.r.inf), 106);
    kc_informer_free(k.r.inf);
    kc_informer_free(full.inf);
    env_done(&e);
    apisrv_stop(&s);
}

/* Keys-only informers with the same options share one feed: the object a
 * watch event brings is the one tree, handed to each in turn (a mark the
 * first handler leaves, the second sees); one with another keep has a feed
 * of its own. */
struct shrec {
    int updates, marked;
    bool mark;
};
static void shrec_update(void *ud, json_t *old, json_t *obj) {
    struct shrec *r = ud;
    r->updates++;
    if (json_object_get(obj, "x-seen")) r->marked++;
    if (r->mark) json_object_set_new(obj, "x-seen", json_true());
}
static bool shrec_pred(void *arg) {
    struct shrec *r = arg;
    return r[0].updates >= 1 && r[1].updates >= 1 && r[2].updates >= 1;
}
static bool keep_all_but_annotations(void *ud, const struct jparse_seg *path, int depth, const char *key, size_t len) {
    (void)ud;
    return !(depth == 1 && JPARSE_SEG_IS(&path[0], "metadata") && len == 11 && !memcmp(key, "annotations", 11));
}

TEST(kclient_informer_keys_only_shared) {
    WITH_APISRV(s, e, NULL);
    REQUIRE(create_pods(&e, "k", 3) == 0);
    const char *path = "/api/v1/namespaces/default/pods";
    struct shrec r[3] = {{.mark = true}, {0}, {0}};
    struct kc_informer_handlers h = {NULL, shrec_update, NULL, NULL};
    struct kc_informer_opts ko = {.keys_only = true}, other = {.keys_only = true, .keep = keep_all_but_annotations};
    struct kc_informer *a = kc_informer_new_opts(e.c, path, NULL, &ko, &h, &r[0]);
    struct kc_informer *b = kc_informer_new_opts(e.c, path, NULL, &ko, &h, &r[1]);
    struct kc_informer *o = kc_informer_new_opts(e.c, path, NULL, &other, &h, &r[2]);
    REQUIRE(a && b && o);
    CHECK(start_all_synced(&e, (struct kc_informer *[]){a, b, o}, 3));
    CHECK_I64(label_pod(&e, "k-1", "y"), 200);
    CHECK(run_until(&e, shrec_pred, r, 5000));
    CHECK_I64(r[0].marked, 0);
    CHECK_I64(r[1].marked, r[1].updates); /* a's tree: one feed */
    CHECK_I64(r[2].marked, 0);            /* a feed of its own */
    CHECK(kc_informer_get(b, "default", "k-1") == NULL);
    kc_informer_free(a);
    kc_informer_free(b);
    kc_informer_free(o);
    env_done(&e);
    apisrv_stop(&s);
}

/* A keys-only feed's cache holds keys, not objects: an informer that joins
 * it after its list (a role started again in a new leader term) gets whole
 * objects as adds, from a list of its own, and the later events; the first
 * informer goes on as before. Before the fix the late one got nothing it
 * could use (placement found the pods "not in the cache" and dropped the
 * gangs after a Redis failover). */
struct lrec {
    int adds, whole, updates;
};
static void lrec_add(void *ud, json_t *obj) {
    struct lrec *r = ud;
    r->adds++;
    if (json_object_get(obj, "spec")) r->whole++;
}
static void lrec_update(void *ud, json_t *old, json_t *obj) {
    struct lrec *r = ud;
    r->updates++;
    if (json_object_get(obj, "spec")) r->whole++;
}
static bool lrec_pred(void *arg) {
    struct lrec *r = arg;
    return r[0].updates >= 1 && r[1].adds >= 3 && r[1].updates >= 1 && r[2].adds >= 3 && r[2].updates >= 1;
}

TEST(kclient_informer_keys_only_late_subscriber_gets_objects) {
    WITH_APISRV(s, e, NULL);
    REQUIRE(create_pods(&e, "late", 3) == 0);
    const char *path = "/api/v1/namespaces/default/pods";
    struct lrec r[3] = {{0}, {0}, {0}};
    struct kc_informer_handlers h = {lrec_add, lrec_update, NULL, NULL};
    struct kc_informer_opts ko = {.keys_only = true};
    struct kc_informer *a = kc_informer_new_opts(e.c, path, NULL, &ko, &h, &r[0]);
    struct kc_informer *made_early = kc_informer_new_opts(e.c, path, NULL, &ko, &h, &r[2]); /* started late */
    REQUIRE(a && made_early);
    CHECK(start_all_synced(&e, (struct kc_informer *[]){a}, 1));
    CHECK_I64(r[0].adds, 3);
    struct kc_informer *b = kc_informer_new_opts(e.c, path, NULL, &ko, &h, &r[1]); /* made and started late */
    REQUIRE(b);
    CHECK(start_all_synced(&e, (struct kc_informer *[]){b, made_early}, 2));
    CHECK_I64(label_pod(&e, "late-1", "y"), 200);
    CHECK(run_until(&e, lrec_pred, r, 5000));
    CHECK_I64(r[0].adds, 3); /* the first informer saw no second add of what it had */
    CHECK_I64(r[1].adds, 3);
    CHECK_I64(r[1].whole, r[1].adds + r[1].updates);
    CHECK_I64(r[2].adds, 3);
    CHECK_I64(r[2].whole, r[2].adds + r[2].updates);
    CHECK(kc_informer_current(a) && kc_informer_current(b) && kc_informer_current(made_early));
    kc_informer_free(made_early);
    kc_informer_free(b);
    kc_informer_free(a);
    env_done(&e);
    apisrv_stop(&s);
}

/* A compact feed keeps each object's text, not its tree: its handlers get
 * whole objects (updates without the old one, a re-list's deletions as the
 * object last cached, decoded), kc_informer_get and kc_informer_foreach
 * decode the same objects a plain informer holds, kc_informer_version reads
 * the version without decoding, and a late subscriber gets whole objects. */
struct crec {
    struct krec k;
    int whole, deletes_whole;
};
static void crec_add(void *ud, json_t *obj) {
    struct crec *c = ud;
    if (json_object_get(obj, "spec")) c->whole++;
    krec_add(&c->k, obj);
}
static void crec_update(void *ud, json_t *old, json_t *obj) {
    struct crec *c = ud;
    if (json_object_get(obj, "spec")) c->whole++;
    krec_update(&c->k, old, obj);
}
static void crec_delete(void *ud, json_t *obj) {
    struct crec *c = ud;
    if (json_object_get(obj, "spec")) c->deletes_whole++;
    krec_delete(&c->k, obj);
}
static void crec_synced(void *ud) { krec_synced(&((struct crec *)ud)->k); }

/* Every object of a compact informer equals the plain informer's. */
struct cmp {
    struct kc_informer *plain;
    int seen, same;
};
static int cmp_cb(void *ud, json_t *obj) {
    struct cmp *c = ud;
    json_t *md = json_object_get(obj, "metadata");
    json_t *p = kc_informer_get(c->plain, json_string_value(json_object_get(md, "namespace")),
                                json_string_value(json_object_get(md, "name")));
    c->seen++;
    if (p && json_equal(p, obj)) c->same++;
    return 0;
}

TEST(kclient_informer_compact) {
    WITH_APISRV(s, e, "--history-max=50");
    REQUIRE(create_pods(&e, "pre", 30) == 0);
    const char *path = "/api/v1/namespaces/default/pods";
    struct irec full = {.e = &e};
    struct kc_informer_handlers hf = {irec_add, irec_update, irec_delete, NULL};
    full.inf = kc_informer_new(e.c, path, NULL, &hf, &full);
    struct crec c = {.k = {.r = {.e = &e, .mutate_on_sync = 80}}};
    struct kc_informer_handlers hc = {crec_add, crec_update, crec_delete, crec_synced};
    struct kc_informer_opts co = {.compact = true};
    c.k.r.inf = kc_informer_new_opts(e.c, path, NULL, &co, &hc, &c);
    REQUIRE(full.inf && c.k.r.inf);
    CHECK_I64(kc_informer_start(full.inf), 0);
    CHECK(run_until(&e, synced_pred, full.inf, 10000));
    CHECK_I64(kc_informer_start(c.k.r.inf), 0);
    CHECK(run_until(&e, synced_pred, c.k.r.inf, 10000));
    /* its watch from the list's version gets 410; the re-list's difference reports the deleted pods */
    struct counts want = {&c.k.r, 30 + 80, 3, 3};
    CHECK(run_until(&e, counts_pred, &want, 10000));
    CHECK(kc_informer_lists(c.k.r.inf) >= 2);
    CHECK_I64(c.k.r.adds, 110);
    CHECK_I64(c.k.r.updates, 3);
    CHECK_I64(c.k.r.deletes, 3);
    CHECK_I64(c.k.old_given, 0);
    CHECK_I64(c.deletes_whole, 3); /* the cached object, decoded */
    CHECK_I64(c.whole, 113);
    CHECK_I64(kc_informer_count(c.k.r.inf), 107);
    struct match m = {&e, full.inf, false};
    CHECK(run_until(&e, match_pred, &m, 5000));
    struct match mc = {&e, c.k.r.inf, false};
    CHECK(cache_matches(&e, c.k.r.inf) || run_until(&e, match_pred, &mc, 5000));
    /* the objects decoded from the text are the plain informer's objects */
    json_t *a = kc_informer_get(c.k.r.inf, "default", "pre-5"), *b = kc_informer_get(c.k.r.inf, "default", "pre-5");
    json_t *p = kc_informer_get(full.inf, "default", "pre-5");
    REQUIRE(a && b && p);
    CHECK(a != b && a != p);
    CHECK(json_equal(a, p) && json_equal(b, p));
    const char *v = kc_informer_version(c.k.r.inf, "default", "pre-5");
    CHECK(v && !strcmp(v, json_string_value(json_object_get(json_object_get(p, "metadata"), "resourceVersion"))));
    CHECK(kc_informer_version(c.k.r.inf, "default", "pre-0") == NULL); /* deleted */
    CHECK(kc_informer_get(c.k.r.inf, "default", "pre-0") == NULL);
    struct cmp cm = {full.inf, 0, 0};
    kc_informer_foreach(c.k.r.inf, cmp_cb, &cm);
    CHECK_I64(cm.seen, 107);
    CHECK_I64(cm.same, 107);
    /* watch events after the re-list: a change and a delete */
    char err[256];
    CHECK_I64(label_pod(&e, "pre-6", "z"), 200);
    CHECK_I64(kclient_request_sync(e.c, "DELETE", "/api/v1/namespaces/default/pods/pre-7", NULL, NULL, NULL, err,
                                   sizeof err),
              200);
    struct counts more = {&c.k.r, 110, 4, 4};
    CHECK(run_until(&e, counts_pred, &more, 5000));
    CHECK_I64(c.k.old_given, 0);
    CHECK_I64(kc_informer_count(c.k.r.inf), 106);
    json_t *l = kc_informer_get(c.k.r.inf, "default", "pre-6");
    CHECK(l && !strcmp(json_string_value(json_object_get(
                           json_object_get(json_object_get(l, "metadata"), "labels"), "x")) ?: "",
                       "z"));
    /* a late subscriber of the same compact feed gets whole objects from its cache */
    struct crec late = {.k = {.r = {.e = &e}}};
    struct kc_informer *li = kc_informer_new_opts(e.c, path, NULL, &co, &hc, &late);
    REQUIRE(li);
    CHECK(start_all_synced(&e, (struct kc_informer *[]){li}, 1));
    CHECK_I64(late.k.r.adds, 106);
    CHECK_I64(late.whole, 106);
    CHECK_I64(kc_informer_lists(li), kc_informer_lists(c.k.r.inf)); /* one feed: no list of its own */
    kc_informer_free(li);
    kc_informer_free(c.k.r.inf);
    kc_informer_free(full.inf);
    env_done(&e);
    apisrv_stop(&s);
}

static void drop_labels(json_t *obj) { json_object_del(json_object_get(obj, "metadata"), "labels"); }

struct trec {
    int adds, labelled, updates;
};
static void trec_add(void *ud, json_t *obj) {
    struct trec *t = ud;
    t->adds++;
    if (json_object_get(json_object_get(obj, "metadata"), "labels")) t->labelled++;
}
static void trec_update(void *ud, json_t *old, json_t *obj) {
    struct trec *t = ud;
    t->updates++;
    if (json_object_get(json_object_get(obj, "metadata"), "labels")) t->labelled++;
}
static bool trec_pred(void *arg) {
    struct trec *t = arg;
    return t[0].adds >= 5 && t[1].adds >= 5 && t[2].adds >= 5 && t[0].updates >= 1 && t[1].updates >= 1 &&
           t[2].updates >= 1;
}

/* A plain informer on path (recording into t[0]) and two with options o
 * (t[1], t[2]): what the option tests compare. */
static void informer_trio(struct env *e, const char *path, const struct kc_informer_handlers *h,
                          const struct kc_informer_opts *o, struct trec t[3], struct kc_informer **plain,
                          struct kc_informer **a, struct kc_informer **b) {
    *plain = kc_informer_new(e->c, path, NULL, h, &t[0]);
    *a = kc_informer_new_opts(e->c, path, NULL, o, h, &t[1]);
    *b = kc_informer_new_opts(e->c, path, NULL, o, h, &t[2]);
}

/* A transform trims every object before the cache and the handlers; only
 * informers with the same transform share a feed. */
TEST(kclient_informer_transform) {
    WITH_APISRV(s, e, NULL);
    REQUIRE(create_pods(&e, "t", 5) == 0);
    const char *path = "/api/v1/namespaces/default/pods";
    struct trec t[3] = {{0}};
    struct kc_informer_handlers h = {trec_add, trec_update, NULL, NULL};
    struct kc_informer_opts o = {.transform = drop_labels};
    struct kc_informer *plain, *a, *b;
    informer_trio(&e, path, &h, &o, t, &plain, &a, &b);
    REQUIRE(plain && a && b);
    CHECK_I64(kc_informer_start(plain), 0);
    CHECK_I64(kc_informer_start(a), 0);
    CHECK(run_until(&e, synced_pred, a, 10000));
    CHECK_I64(kc_informer_start(b), 0); /* late on a's feed: a's trimmed cache as adds */
    CHECK(run_until(&e, synced_pred, b, 10000));
    CHECK(run_until(&e, synced_pred, plain, 10000));
    CHECK_I64(label_pod(&e, "t-1", "y"), 200);
    CHECK(run_until(&e, trec_pred, t, 5000));
    CHECK_I64(t[0].labelled, t[0].adds + t[0].updates); /* the plain informer's own feed keeps labels */
    CHECK_I64(t[1].labelled, 0);
    CHECK_I64(t[2].labelled, 0);
    json_t *got = kc_informer_get(a, "default", "t-1");
    CHECK(got && !json_object_get(json_object_get(got, "metadata"), "labels"));
    got = kc_informer_get(plain, "default", "t-1");
    CHECK(got && json_object_get(json_object_get(got, "metadata"), "labels"));
    CHECK(kc_informer_get(a, "default", "t-1") == kc_informer_get(b, "default", "t-1")); /* one feed */
    kc_informer_free(a);
    kc_informer_free(b);
    kc_informer_free(plain);
    env_done(&e);
    apisrv_stop(&s);
}

/* keep: labels and status are never decoded, from the list or the watch */
static bool keep_no_labels_status(void *ud, const struct jparse_seg *path, int depth, const char *key, size_t len) {
    (void)ud;
    if (depth == 0) return !(len == 6 && !memcmp(key, "status", 6));
    if (depth == 1 && JPARSE_SEG_IS(&path[0], "metadata"))
        return !(len == 6 && !memcmp(key, "labels", 6));
    return true;
}
static void trec_add_status(void *ud, json_t *obj) {
    trec_add(ud, obj);
    if (json_object_get(obj, "status")) ((struct trec *)ud)->labelled += 1000;
}
static void trec_update_status(void *ud, json_t *old, json_t *obj) {
    trec_update(ud, old, obj);
    if (json_object_get(obj, "status")) ((struct trec *)ud)->labelled += 1000;
}

/* A keep filter leaves members out as objects are decoded, listed or
 * watched; informers share a feed only when their keep matches. */
TEST(kclient_informer_keep) {
    WITH_APISRV(s, e, NULL);
    REQUIRE(create_pods(&e, "k", 5) == 0);
    const char *path = "/api/v1/namespaces/default/pods";
    struct trec t[3] = {{0}};
    struct kc_informer_handlers h = {trec_add_status, trec_update_status, NULL, NULL};
    struct kc_informer_opts o = {.keep = keep_no_labels_status};
    struct kc_informer *plain, *a, *b;
    informer_trio(&e, path, &h, &o, t, &plain, &a, &b);
    REQUIRE(plain && a && b);
    CHECK(start_all_synced(&e, (struct kc_informer *[]){plain, a, b}, 3));
    CHECK_I64(label_pod(&e, "k-1", "y"), 200);
    CHECK(run_until(&e, trec_pred, t, 5000));
    CHECK_I64(t[0].labelled, 1001 * (t[0].adds + t[0].updates)); /* the plain feed: labels and status */
    CHECK_I64(t[1].labelled, 0);
    CHECK_I64(t[2].labelled, 0);
    json_t *got = kc_informer_get(a, "default", "k-1");
    REQUIRE(got);
    json_t *md = json_object_get(got, "metadata");
    CHECK(!json_object_get(md, "labels") && !json_object_get(got, "status"));
    CHECK_STR(json_string_value(json_object_get(md, "name")), "k-1");
    CHECK(json_string_value(json_object_get(md, "resourceVersion")) != NULL);
    CHECK(json_object_get(got, "spec") != NULL);
    CHECK(kc_informer_get(a, "default", "k-1") == kc_informer_get(b, "default", "k-1")); /* one feed */
    CHECK(kc_informer_get(plain, "default", "k-1") != kc_informer_get(a, "default", "k-1"));
    kc_informer_free(a);
    kc_informer_free(b);
    kc_informer_free(plain);
    env_done(&e);
    apisrv_stop(&s);
}

/* The API server's Unix-domain socket (pelotond --unix-socket): requests
 * through kclient's own HTTP/1.1 client and through libcurl, a sync call, a
 * watch and 100 concurrent creates all travel over it; once the server is
 * gone a request fails with a transport error naming the socket. */
TEST(kclient_over_unix_socket) {
    struct apisrv s;
    REQUIRE(apisrv_start(&s, "--unix-socket=@/api.sock") == 0);
    char url[160];
    snprintf(url, sizeof url, "unix://%s/api.sock", s.dir);
    for (int curl = 0; curl < 2; curl++) {
        struct env e;
        if (env_init_with(&e, url, curl)) break;
        CHECK_STR(kclient_config(e.c)->unix_socket, url + 7);
        struct box b = {0};
        char name[32];
        snprintf(name, sizeof name, "u-%d", curl);
        struct wrec r = {.want = {0, 2}};
        r.w = kclient_watch(e.c, "/api/v1/namespaces/default/pods", curl ? "labelSelector=app%3Du1" :
                            "labelSelector=app%3Du0", NULL, wrec_event, wrec_end, &r);
        REQUIRE(r.w);
        json_t *p = pod(name, curl ? "u1" : "u0");
        CHECK_I64(call(&e, &b, "POST", "/api/v1/namespaces/default/pods", p, NULL), 201);
        json_decref(p);
        CHECK_I64(call(&e, &b, "GET", "/api/v1/namespaces/default/pods/nope", NULL, NULL), 404);
        CHECK_STR(b.reason, "NotFound");
        CHECK_I64(label_pod(&e, name, "v"), 200);
        CHECK(run_until(&e, int_reached, r.want, 5000));
        CHECK_STR(r.types[0], "ADDED");
        CHECK_STR(r.types[1], "MODIFIED");
        char err[256];
        json_t *out = NULL;
        char path[96];
        snprintf(path, sizeof path, "/api/v1/namespaces/default/pods/%s", name);
        CHECK_I64(kclient_request_sync(e.c, "GET", path, NULL, NULL, &out, err, sizeof err), 200);
        CHECK_STR(json_string_value(json_object_get(json_object_get(out, "metadata"), "name")), name);
        json_decref(out);
        char prefix[16];
        snprintf(prefix, sizeof prefix, "bulk%d", curl);
        CHECK_I64(create_pods(&e, prefix, 100), 0);
        kc_watch_stop(r.w);
        json_decref(b.body);
        env_done(&e);
    }
    apisrv_kill(&s, SIGKILL);
    struct env e;
    if (env_init(&e, url) == 0) {
        struct box b = {0};
        CHECK_I64(call(&e, &b, "GET", "/healthz", NULL, NULL), 0);
        CHECK_HAS(b.error, "api.sock");
        env_done(&e);
    }
    apisrv_stop(&s);
}

/* ---- concurrency and teardown ---- */

TEST(kclient_200_concurrent_requests) {
    struct apisrv s;
    REQUIRE(apisrv_start(&s, NULL) == 0);
    struct env e;
    uv_loop_t warm; /* libuv opens its process-wide signal pipe with the first loop */
    uv_loop_init(&warm);
    uv_loop_close(&warm);
    int fds_before = count_fds();
    if (env_init(&e, s.url)) {
        apisrv_stop(&s);
        return;
    }
    struct box b = {0};
    json_t *p = pod("c-1", "c");
    CHECK_I64(call(&e, &b, "POST", "/api/v1/namespaces/default/pods", p, NULL), 201);
    json_decref(p);
    json_decref(b.body);
    struct bulk k = {0, 200, 0};
    struct box boxes[200];
    memset(boxes, 0, sizeof boxes);
    double t0 = now_ms();
    for (int round = 0; round < 5; round++) {
        memset(&k, 0, sizeof k);
        k.target = 200;
        for (int i = 0; i < 200; i++) {
            boxes[i].done = 0;
            CHECK(kclient_request(e.c, "GET", "/api/v1/namespaces/default/pods/c-1", NULL, NULL, box_cb, &boxes[i]) == 0);
        }
        CHECK_I64(kclient_inflight(e.c), 200);
        int want[2] = {0, 200};
        double end = now_ms() + 20000;
        while (now_ms() < end) {
            want[0] = 0;
            for (int i = 0; i < 200; i++) want[0] += boxes[i].done;
            if (want[0] >= 200) break;
            uv_run(&e.loop, UV_RUN_ONCE);
        }
        CHECK_I64(want[0], 200);
    }
    double dt = now_ms() - t0;
    fprintf(stderr, "  kclient: 1000 GETs, 200 in flight: %.0f ms (%.0f req/s, asan client and server)\n", dt,
            1000 / (dt / 1e3));
    int ok = 0;
    for (int i = 0; i < 200; i++) {
        ok += boxes[i].done == 1 && boxes[i].status == 200;
        json_decref(boxes[i].body);
    }
    CHECK_I64(ok, 200);
    CHECK_I64(kclient_inflight(e.c), 0);
    CHECK(count_fds() > fds_before); /* keep-alive connections stay open ... */
    env_done(&e);
    CHECK_I64(count_fds(), fds_before); /* ... until the client goes */
    apisrv_stop(&s);
}

struct cancel_rec {
    int calls[300];
    int cancelled;
    int other;
};
struct cancel_ud {
    struct cancel_rec *rec;
    int i;
    struct kclient *c;
};
static void cancel_cb(void *ud, const struct kc_response *r) {
    struct cancel_ud *u = ud;
    u->rec->calls[u->i]++;
    if (r->status == 0 && r->error && !strcmp(r->error, "cancelled")) {
        u->rec->cancelled++;
        /* a new request from a cancel callback is refused, not queued */
        if (kclient_request(u->c, "GET", "/healthz", NULL, NULL, NULL, NULL) == 0) u->rec->other += 1000;
    } else {
        u->rec->other++;
    }
}

static void ignore_event(void *ud, const char *type, json_t *obj) {}
static void count_end(void *ud, long status, const char *error) { (*(int *)ud)++; }

TEST(kclient_free_cancels_in_flight) {
    WITH_APISRV(s, e, NULL);
    static struct cancel_rec rec;
    static struct cancel_ud uds[300];
    memset(&rec, 0, sizeof rec);
    for (int i = 0; i < 300; i++) {
        uds[i] = (struct cancel_ud){&rec, i, e.c};
        CHECK(kclient_request(e.c, "GET", "/api/v1/namespaces/default/pods", NULL, NULL, cancel_cb, &uds[i]) == 0);
    }
    int ends = 0;
    CHECK(kclient_watch(e.c, "/api/v1/pods", NULL, NULL, ignore_event, count_end, &ends) != NULL);
    struct irec r = {.e = &e};
    struct kc_informer_handlers h = {irec_add, irec_update, irec_delete, irec_synced};
    r.inf = kc_informer_new(e.c, "/api/v1/pods", NULL, &h, &r);
    REQUIRE(r.inf);
    CHECK_I64(kc_informer_start(r.inf), 0);
    double t0 = now_ms(); /* until some complete; most are still in flight */
    while (rec.other < 1 && now_ms() - t0 < 5000) uv_run(&e.loop, UV_RUN_ONCE);
    CHECK(rec.other >= 1);
    kclient_free(e.c); /* informer and watch go with it */
    e.c = NULL;
    int once = 0;
    for (int i = 0; i < 300; i++) once += rec.calls[i] == 1;
    CHECK_I64(once, 300);
    CHECK_I64(rec.cancelled + rec.other, 300);
    CHECK(rec.cancelled > 0);
    CHECK_I64(ends, 0);
    fprintf(stderr, "  kclient: free with 300 in flight: %d completed, %d cancelled\n", rec.other, rec.cancelled);
    env_done(&e);
    apisrv_stop(&s);
}

/* kclient_free from inside a callback: deferred until the callback returns. */
static void free_in_cb(void *ud, const struct kc_response *r) {
    struct env *e = ud;
    kclient_free(e->c);
    e->c = NULL;
}

TEST(kclient_free_from_callback) {
    WITH_APISRV(s, e, NULL);
    static struct cancel_rec rec;
    static struct cancel_ud uds[20];
    memset(&rec, 0, sizeof rec);
    CHECK(kclient_request(e.c, "GET", "/healthz", NULL, NULL, free_in_cb, &e) == 0);
    for (int i = 0; i < 20; i++) {
        uds[i] = (struct cancel_ud){&rec, i, e.c};
        CHECK(kclient_request(e.c, "GET", "/api/v1/pods", NULL, NULL, cancel_cb, &uds[i]) == 0);
    }
    double t0 = now_ms();
    while (e.c && now_ms() - t0 < 5000) uv_run(&e.loop, UV_RUN_ONCE);
    CHECK(e.c == NULL);
    int once = 0;
    for (int i = 0; i < 20; i++) once += rec.calls[i] == 1;
    CHECK_I64(once, 20);
    env_done(&e);
    apisrv_stop(&s);
}

/* ---- a scripted server on the client's loop ---- */

struct fake {
    struct http_server *http;
    int port;
    char url[64];
    struct http_stream *st;
    uv_timer_t tick;
    const char *script;  /* the stream's bytes, sent in pieces */
    size_t off, len;
    int piece;
};

static const char SPLIT_SCRIPT[] =
    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"1\"}}}\n"
    "\r\n"
    "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"2\"},\"s\":\"x\\ny\"}}\r\n"
    "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"3\"}}}\n"
    "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"4\"}}}\n"
    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"last-without-newline\"}}}";

static void fake_stream_closed(void *ud) { ((struct fake *)ud)->st = NULL; }

static void fake_tick(uv_timer_t *t) {
    struct fake *f = t->data;
    if (!f->st) {
        uv_timer_stop(t);
        return;
    }
    static const size_t sizes[] = {1, 2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67};
    size_t n = sizes[f->piece++ % (sizeof sizes / sizeof sizes[0])];
    if (n > f->len - f->off) n = f->len - f->off;
    http_stream_write(f->st, f->script + f->off, n);
    f->off += n;
    if (f->off == f->len) {
        http_stream_end(f->st);
        uv_timer_stop(t);
    }
}

static void fake_handler(void *ud, const struct http_request *req, struct http_response *resp) {
    struct fake *f = ud;
    if (!strcmp(req->path, "/split")) { /* events cut at every odd place, one piece per 1 ms */
        f->st = http_stream_start(req, 200, "application/json", 0, fake_stream_closed, f);
        f->script = SPLIT_SCRIPT;
        f->len = sizeof SPLIT_SCRIPT - 1;
        f->off = 0;
        f->piece = 0;
        uv_timer_start(&f->tick, fake_tick, 1, 1);
        return;
    }
    if (!strcmp(req->path, "/many")) { /* ten events in one chunk */
        f->st = http_stream_start(req, 200, "application/json", 0, fake_stream_closed, f);
        char buf[2048];
        size_t n = 0;
        for (int i = 0; i < 10; i++)
            n += (size_t)snprintf(buf + n, sizeof buf - n,
                                  "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"m%d\"}}}\n", i);
        http_stream_write(f->st, buf, n);
        return; /* left open */
    }
    if (!strcmp(req->path, "/bigline")) { /* one line past KC_LINE_MAX */
        f->st = http_stream_start(req, 200, "application/json", 64u << 20, fake_stream_closed, f);
        const char *ok = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"fine\"}}}\n";
        http_stream_write(f->st, ok, strlen(ok));
        size_t chunk = 1u << 20;
        char *x = malloc(chunk);
        memset(x, 'x', chunk);
        for (size_t sent = 0; sent <= KC_LINE_MAX; sent += chunk) http_stream_write(f->st, x, chunk);
        free(x);
        return;
    }
    if (!strcmp(req->path, "/badline")) {
        f->st = http_stream_start(req, 200, "application/json", 0, fake_stream_closed, f);
        http_stream_write(f->st, "{\"type\":\"ADDED\"}\n", 17);
        return;
    }
    if (!strcmp(req->path, "/gone")) {
        resp->status = 410;
        resp->body = strdup("{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"too old resource version\","
                            "\"reason\":\"Expired\",\"code\":410}");
        resp->body_len = strlen(resp->body);
        return;
    }
    if (!strcmp(req->path, "/huge")) { /* past KC_BODY_MAX */
        resp->body_len = KC_BODY_MAX + 1;
        resp->body = malloc(resp->body_len);
        memset(resp->body, ' ', resp->body_len);
        resp->content_type = "text/plain";
        return;
    }
    if (!strcmp(req->path, "/text")) {
        resp->body = strdup("hello");
        resp->body_len = 5;
        resp->content_type = "text/plain";
        return;
    }
    if (!strcmp(req->path, "/teapot")) { /* an error that is not a Status */
        resp->status = 503;
        resp->body = strdup("busy");
        resp->body_len = 4;
        resp->content_type = "text/plain";
        return;
    }
    resp->status = 404;
}

static int fake_start(struct env *e, struct fake *f) {
    memset(f, 0, sizeof *f);
    struct http_server_config cfg = {.bind_addr = "127.0.0.1", .port = 0, .handler = fake_handler, .ud = f};
    char err[256];
    memset(e, 0, sizeof *e);
    uv_loop_init(&e->loop);
    uv_timer_init(&e->loop, &e->deadline);
    e->deadline.data = e;
    if (http_server_start(&e->loop, &cfg, &f->http, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "fake server: %s", err);
        return -1;
    }
    f->port = http_server_port(f->http);
    snprintf(f->url, sizeof f->url, "http://127.0.0.1:%d", f->port);
    uv_timer_init(&e->loop, &f->tick);
    f->tick.data = f;
    struct kc_config kc = {0};
    if (kc_config_from_url(f->url, NULL, &kc, err, sizeof err)) return -1;
    e->c = kclient_new(&e->loop, &kc, err, sizeof err);
    kc_config_free(&kc);
    return e->c ? 0 : -1;
}

static void fake_stop(struct env *e, struct fake *f) {
    kclient_free(e->c);
    e->c = NULL;
    uv_close((uv_handle_t *)&f->tick, NULL);
    http_server_stop(f->http);
    for (int i = 0; i < 50; i++) uv_run(&e->loop, UV_RUN_NOWAIT);
    http_server_free(f->http);
    env_done(e);
}

struct names {
    char seen[16][48];
    char types[16][16];
    int n, ends, stop_after;
    long status;
    char error[128];
    struct kc_watch *w;
};

static void names_event(void *ud, const char *type, json_t *obj) {
    struct names *r = ud;
    if (r->n < 16) {
        const char *name = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
        snprintf(r->seen[r->n], sizeof r->seen[0], "%s", name ? name : "");
        snprintf(r->types[r->n], sizeof r->types[0], "%s", type);
    }
    r->n++;
    if (r->stop_after && r->n == r->stop_after) {
        kc_watch_stop(r->w);
        kc_watch_stop(r->w); /* twice: harmless while the free is deferred */
        r->w = NULL;
    }
}

static void names_end(void *ud, long status, const char *error) {
    struct names *r = ud;
    r->ends++;
    r->status = status;
    snprintf(r->error, sizeof r->error, "%s", error ? error : "");
    r->w = NULL;
}

static bool names_ended(void *arg) { return ((struct names *)arg)->ends > 0; }

TEST(kclient_watch_split_lines) {
    struct env e;
    struct fake f;
    if (fake_start(&e, &f)) {
        fake_stop(&e, &f);
        return;
    }
    struct names r = {0};
    r.w = kclient_watch(e.c, "/split", NULL, "7", names_event, names_end, &r);
    REQUIRE(r.w);
    CHECK(run_until(&e, names_ended, &r, 10000));
    CHECK_I64(r.n, 5);
    CHECK_STR(r.types[0], "ADDED");
    CHECK_STR(r.types[1], "MODIFIED");
    CHECK_STR(r.types[2], "BOOKMARK");
    CHECK_STR(r.types[3], "DELETED");
    CHECK_STR(r.seen[3], "a");
    CHECK_STR(r.seen[4], "last-without-newline");
    CHECK_I64(r.status, 200);
    CHECK_STR(r.error, "");
    fake_stop(&e, &f);
}

struct raw_lines {
    char lines[8][160];
    int n, ends;
};

static void raw_line(void *ud, const char *line, size_t len) {
    struct raw_lines *r = ud;
    if (r->n < 8) snprintf(r->lines[r->n], sizeof r->lines[0], "%.*s", (int)len, line);
    r->n++;
}
static void raw_end(void *ud, long status, const char *error) { ((struct raw_lines *)ud)->ends++; }
static bool raw_ended(void *arg) { return ((struct raw_lines *)arg)->ends > 0; }

TEST(kclient_watch_raw_lines) {
    struct env e;
    struct fake f;
    if (fake_start(&e, &f)) {
        fake_stop(&e, &f);
        return;
    }
    struct raw_lines r = {0};
    struct kc_watch *w = kclient_watch_raw(e.c, "/split", NULL, "7", raw_line, raw_end, &r);
    REQUIRE(w);
    CHECK(run_until(&e, raw_ended, &r, 10000));
    CHECK_I64(r.n, 5); /* the blank line is no event */
    CHECK_STR(r.lines[0], "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"1\"}}}");
    CHECK_STR(r.lines[1],
              "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"2\"},\"s\":\"x\\ny\"}}");
    CHECK_STR(r.lines[4], "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"last-without-newline\"}}}");
    fake_stop(&e, &f);
}

TEST(kclient_watch_stop_inside_handler) {
    struct env e;
    struct fake f;
    if (fake_start(&e, &f)) {
        fake_stop(&e, &f);
        return;
    }
    struct names r = {.stop_after = 2};
    r.w = kclient_watch(e.c, "/many", NULL, NULL, names_event, names_end, &r);
    REQUIRE(r.w);
    double t0 = now_ms();
    while (r.n < 2 && now_ms() - t0 < 5000) uv_run(&e.loop, UV_RUN_ONCE);
    run_for(&e, 50);
    CHECK_I64(r.n, 2); /* the other eight in the same chunk are not delivered */
    CHECK_I64(r.ends, 0);
    /* a watch left open is stopped by kclient_free, without its end callback */
    struct names r2 = {0};
    r2.w = kclient_watch(e.c, "/many", NULL, NULL, names_event, names_end, &r2);
    t0 = now_ms();
    while (r2.n < 10 && now_ms() - t0 < 5000) uv_run(&e.loop, UV_RUN_ONCE);
    CHECK_I64(r2.n, 10);
    fake_stop(&e, &f);
    CHECK_I64(r2.ends, 0);
}

TEST(kclient_watch_errors) {
    struct env e;
    struct fake f;
    if (fake_start(&e, &f)) {
        fake_stop(&e, &f);
        return;
    }
    struct names r = {0};
    r.w = kclient_watch(e.c, "/gone", NULL, "1", names_event, names_end, &r);
    CHECK(run_until(&e, names_ended, &r, 5000));
    CHECK_I64(r.status, 410);
    CHECK_HAS(r.error, "too old");
    CHECK_I64(r.n, 0);

    struct names r2 = {0};
    r2.w = kclient_watch(e.c, "/bigline", NULL, NULL, names_event, names_end, &r2);
    CHECK(run_until(&e, names_ended, &r2, 20000));
    CHECK_I64(r2.n, 1); /* the line before the long one */
    CHECK_I64(r2.status, 200);
    CHECK_HAS(r2.error, "KC_LINE_MAX");

    struct names r3 = {0};
    r3.w = kclient_watch(e.c, "/badline", NULL, NULL, names_event, names_end, &r3);
    CHECK(run_until(&e, names_ended, &r3, 5000));
    CHECK_I64(r3.n, 0);
    CHECK_HAS(r3.error, "malformed");
    fake_stop(&e, &f);
}

TEST(kclient_bodies_non_json_and_too_big) {
    struct env e;
    struct fake f;
    if (fake_start(&e, &f)) {
        fake_stop(&e, &f);
        return;
    }
    struct box b = {0};
    CHECK_I64(call(&e, &b, "GET", "/text", NULL, NULL), 200);
    CHECK(b.body == NULL);
    CHECK_STR(b.error, "");
    CHECK_I64(call(&e, &b, "GET", "/teapot", NULL, NULL), 503);
    CHECK_STR(b.reason, "ServiceUnavailable");
    b.done = 0;
    CHECK(kclient_request(e.c, "GET", "/huge", NULL, NULL, box_cb, &b) == 0);
    CHECK(run_until(&e, box_done, &b, 30000));
    CHECK_I64(b.status, 0);
    CHECK_HAS(b.error, "KC_BODY_MAX");
    fake_stop(&e, &f);
}

/* ---- TLS (HTTP/2 by ALPN), bearer token, CA from a file or memory ---- */

static struct kclient *tls_client(struct env *e, const char *url, const char *ca_file, const char *ca_data,
                                  const char *token, bool insecure) {
    struct kc_config cfg = {.server = (char *)url, .ca_file = (char *)ca_file, .ca_data = (char *)ca_data,
                            .token = (char *)token, .insecure = insecure};
    char err[256];
    struct kclient *c = kclient_new(&e->loop, &cfg, err, sizeof err);
    if (!c) test_fail(__FILE__, __LINE__, "kclient_new: %s", err);
    return c;
}

TEST(kclient_tls_token_and_h2) {
    struct apisrv s;
    REQUIRE(apisrv_start(&s, "--tls-port=0 --tls-dir=@/tls --token-file=@/token") == 0);
    struct env e;
    char url[64], ca[128], err[256];
    snprintf(url, sizeof url, "https://127.0.0.1:%d", s.tls_port);
    snprintf(ca, sizeof ca, "%s/tls/apiserver.crt", s.dir);
    if (env_init(&e, url)) {
        apisrv_stop(&s);
        return;
    }
    struct box b = {0};
    /* no CA: verification fails, a transport error */
    CHECK_I64(call(&e, &b, "GET", "/api/v1/namespaces/default/pods", NULL, NULL), 0);
    CHECK(b.error[0] != 0);
    kclient_free(e.c);

    /* the CA file, no token: 401 */
    e.c = tls_client(&e, url, ca, NULL, NULL, false);
    REQUIRE(e.c);
    CHECK_I64(call(&e, &b, "GET", "/api/v1/namespaces/default/pods", NULL, NULL), 401);
    CHECK_STR(b.reason, "Unauthorized");
    kclient_free(e.c);

    /* insecure + token */
    e.c = tls_client(&e, url, NULL, NULL, "test-token", true);
    REQUIRE(e.c);
    CHECK_I64(call(&e, &b, "GET", "/api/v1/namespaces/default/pods", NULL, NULL), 200);
    kclient_free(e.c);

    /* the CA in memory + token: requests, a watch and 200 concurrent GETs share HTTP/2 */
    FILE *f = fopen(ca, "r");
    REQUIRE(f);
    static char pem[16384];
    size_t n = fread(pem, 1, sizeof pem - 1, f);
    fclose(f);
    pem[n] = 0;
    e.c = tls_client(&e, url, NULL, pem, "test-token", false);
    REQUIRE(e.c);
    struct wrec r = {.want = {0, 1}};
    r.w = kclient_watch(e.c, "/api/v1/namespaces/default/pods", NULL, NULL, wrec_event, wrec_end, &r);
    REQUIRE(r.w);
    run_for(&e, 200);
    json_t *p = pod("tls-1", "t");
    CHECK_I64(call(&e, &b, "POST", "/api/v1/namespaces/default/pods", p, NULL), 201);
    json_decref(p);
    CHECK(run_until(&e, int_reached, r.want, 5000));
    CHECK_STR(r.types[0], "ADDED");
    static struct box boxes[200];
    memset(boxes, 0, sizeof boxes);
    double t0 = now_ms();
    for (int i = 0; i < 200; i++)
        CHECK(kclient_request(e.c, "GET", "/api/v1/namespaces/default/pods/tls-1", NULL, NULL, box_cb, &boxes[i]) == 0);
    int done = 0;
    while (done < 200 && now_ms() - t0 < 20000) {
        uv_run(&e.loop, UV_RUN_ONCE);
        done = 0;
        for (int i = 0; i < 200; i++) done += boxes[i].done;
    }
    fprintf(stderr, "  kclient: 200 GETs over TLS: %.0f ms\n", now_ms() - t0);
    int ok = 0;
    for (int i = 0; i < 200; i++) {
        ok += boxes[i].status == 200;
        if (boxes[i].status != 200 && ok + 5 > i)
            fprintf(stderr, "  request %d: status %ld error %s\n", i, boxes[i].status, boxes[i].error);
        json_decref(boxes[i].body);
    }
    CHECK_I64(ok, 200);
    CHECK_I64(kclient_request_sync(e.c, "GET", "/api/v1/namespaces/default/pods/tls-1", NULL, NULL, NULL, err,
                                   sizeof err),
              200);
    json_decref(b.body);
    env_done(&e);

    /* a kubeconfig with a relative CA path and a tokenFile */
    char kpath[128];
    snprintf(kpath, sizeof kpath, "%s/kubeconfig", s.dir);
    f = fopen(kpath, "w");
    REQUIRE(f);
    fprintf(f,
            "clusters: [{name: t, cluster: {server: '%s', certificate-authority: tls/apiserver.crt}}]\n"
            "users: [{name: u, user: {tokenFile: token}}]\n"
            "contexts: [{name: c, context: {cluster: t, user: u, namespace: default}}]\n"
            "current-context: c\n",
            url);
    fclose(f);
    struct kc_config cfg;
    REQUIRE(kc_config_load(kpath, NULL, &cfg, err, sizeof err) == 0);
    uv_loop_init(&e.loop);
    uv_timer_init(&e.loop, &e.deadline);
    e.deadline.data = &e;
    e.c = kclient_new(&e.loop, &cfg, err, sizeof err);
    kc_config_free(&cfg);
    REQUIRE(e.c);
    CHECK_I64(kclient_request_sync(e.c, "GET", "/api/v1/namespaces/default/pods/tls-1", NULL, NULL, NULL, err,
                                   sizeof err),
              200);
    env_done(&e);
    apisrv_stop(&s);
}

/* ---- handlers that act: requests, frees, bookmarks ---- */

struct actor {
    struct env *e;
    struct kc_informer *inf;
    int adds, got, free_at, freed_client_at;
    bool freed;
};

static void actor_got(void *ud, const struct kc_response *r) {
    struct actor *a = ud;
    if (r->status == 200) a->got++;
}

static void actor_add(void *ud, json_t *obj) {
    struct actor *a = ud;
    a->adds++;
    if (a->freed) a->adds += 1000; /* no calls after a free */
    char path[160];
    const char *name = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
    snprintf(path, sizeof path, "/api/v1/namespaces/default/pods/%s", name ? name : "x");
    kclient_request(a->e->c, "GET", path, NULL, NULL, actor_got, a); /* a request from a handler */
    if (a->adds == a->free_at) {
        kc_informer_free(a->inf);
        kc_informer_free(a->inf); /* twice: harmless while deferred */
        a->freed = true;
    }
    if (a->adds == a->freed_client_at) {
        kclient_free(a->e->c);
        a->e->c = NULL;
        a->freed = true;
    }
}

static bool actor_got_all(void *arg) {
    struct actor *a = arg;
    return a->got >= a->adds && a->adds > 0;
}

TEST(kclient_informer_handlers_act) {
    WITH_APISRV(s, e, NULL);
    REQUIRE(create_pods(&e, "act", 10) == 0);
    /* handlers start requests */
    struct actor a = {.e = &e};
    struct kc_informer_handlers h = {.on_add = actor_add};
    a.inf = kc_informer_new(e.c, "/api/v1/namespaces/default/pods", NULL, &h, &a);
    REQUIRE(a.inf);
    CHECK_I64(kc_informer_start(a.inf), 0);
    CHECK(run_until(&e, actor_got_all, &a, 10000));
    CHECK_I64(a.adds, 10);
    CHECK_I64(a.got, 10);
    kc_informer_free(a.inf);

    /* a handler frees its informer on the third add */
    struct actor b = {.e = &e, .free_at = 3};
    b.inf = kc_informer_new(e.c, "/api/v1/namespaces/default/pods", NULL, &h, &b);
    REQUIRE(b.inf);
    CHECK_I64(kc_informer_start(b.inf), 0);
    double t0 = now_ms();
    while (!b.freed && now_ms() - t0 < 5000) uv_run(&e.loop, UV_RUN_ONCE);
    run_for(&e, 200);
    CHECK_I64(b.adds, 3);

    /* a handler frees the whole client on the fifth add */
    struct actor c = {.e = &e, .freed_client_at = 5};
    c.inf = kc_informer_new(e.c, "/api/v1/namespaces/default/pods", NULL, &h, &c);
    REQUIRE(c.inf);
    CHECK_I64(kc_informer_start(c.inf), 0);
    t0 = now_ms();
    while (e.c && now_ms() - t0 < 5000) uv_run(&e.loop, UV_RUN_ONCE);
    CHECK(e.c == NULL);
    CHECK_I64(c.adds, 5);
    env_done(&e);
    apisrv_stop(&s);
}

struct rvwait {
    struct kc_informer *inf;
    char want[32];
};
static bool rv_reached(void *arg) {
    struct rvwait *w = arg;
    return !strcmp(kc_informer_rv(w->inf), w->want);
}

TEST(kclient_informer_bookmarks_move_rv) {
    WITH_APISRV(s, e, "--watch-bookmark-ms=100");
    struct irec r = {.e = &e};
    struct kc_informer_handlers h = {irec_add, irec_update, irec_delete, irec_synced};
    r.inf = kc_informer_new(e.c, "/api/v1/namespaces/default/pods", "labelSelector=app%3Dnone", &h, &r);
    REQUIRE(r.inf);
    CHECK_I64(kc_informer_start(r.inf), 0);
    CHECK(run_until(&e, synced_pred, r.inf, 10000));
    /* writes outside the selector move the global resourceVersion; only bookmarks tell this informer */
    struct box b = {0};
    json_t *p = pod("elsewhere", "e");
    CHECK_I64(call(&e, &b, "POST", "/api/v1/namespaces/default/pods", p, NULL), 201);
    json_decref(p);
    struct rvwait w = {.inf = r.inf};
    snprintf(w.want, sizeof w.want, "%s",
             json_string_value(json_object_get(json_object_get(b.body, "metadata"), "resourceVersion")));
    CHECK(run_until(&e, rv_reached, &w, 5000));
    CHECK_STR(kc_informer_rv(r.inf), w.want);
    CHECK_I64(r.adds, 0);
    CHECK_I64(kc_informer_count(r.inf), 0);
    json_decref(b.body);
    kc_informer_free(r.inf);
    env_done(&e);
    apisrv_stop(&s);
}

TEST(kclient_watch_server_timeout_and_rewatch) {
    WITH_APISRV(s, e, NULL);
    /* the server ends a watch after timeoutSeconds: a clean end */
    struct wrec r = {.want = {0, 1}};
    r.w = kclient_watch(e.c, "/api/v1/namespaces/default/pods", "timeoutSeconds=1", NULL, wrec_event, wrec_end, &r);
    REQUIRE(r.w);
    double t0 = now_ms();
    while (!r.ends && now_ms() - t0 < 5000) uv_run(&e.loop, UV_RUN_ONCE);
    CHECK_I64(r.ends, 1);
    CHECK_I64(r.end_status, 200);
    /* an informer whose watches end every second re-watches without listing again */
    struct irec ir = {.e = &e};
    struct kc_informer_handlers h = {irec_add, irec_update, irec_delete, irec_synced};
    ir.inf = kc_informer_new(e.c, "/api/v1/namespaces/default/pods", "timeoutSeconds=1", &h, &ir);
    REQUIRE(ir.inf);
    CHECK_I64(kc_informer_start(ir.inf), 0);
    CHECK(run_until(&e, synced_pred, ir.inf, 10000));
    run_for(&e, 2500);
    struct box b = {0};
    json_t *p = pod("late", "l");
    CHECK_I64(call(&e, &b, "POST", "/api/v1/namespaces/default/pods", p, NULL), 201);
    json_decref(p);
    json_decref(b.body);
    struct counts want = {&ir, 1, 0, 0};
    CHECK(run_until(&e, counts_pred, &want, 5000));
    CHECK_I64(kc_informer_lists(ir.inf), 1);
    kc_informer_free(ir.inf);
    env_done(&e);
    apisrv_stop(&s);
}

/* ---- convergence under bursts that outrun a short history ---- */

struct shadow {
    json_t *m; /* name -> resourceVersion, as the handlers told it */
    int bad;   /* an add for a known key, an update or delete for an unknown one */
    int adds, updates, deletes;
};

static const char *md_str(json_t *obj, const char *k) {
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), k));
}

static void sh_add(void *ud, json_t *obj) {
    struct shadow *s = ud;
    s->adds++;
    if (json_object_get(s->m, md_str(obj, "name"))) s->bad++;
    json_object_set_new(s->m, md_str(obj, "name"), json_string(md_str(obj, "resourceVersion")));
}
static void sh_update(void *ud, json_t *old, json_t *obj) {
    struct shadow *s = ud;
    s->updates++;
    if (!json_object_get(s->m, md_str(obj, "name"))) s->bad++;
    if (!strcmp(md_str(old, "resourceVersion"), md_str(obj, "resourceVersion"))) s->bad++;
    json_object_set_new(s->m, md_str(obj, "name"), json_string(md_str(obj, "resourceVersion")));
}
static void sh_delete(void *ud, json_t *obj) {
    struct shadow *s = ud;
    s->deletes++;
    if (json_object_del(s->m, md_str(obj, "name"))) s->bad++;
}

struct conv {
    struct env *e;
    struct kc_informer *inf;
    struct shadow *sh;
};

/* The cache and the handlers' shadow both equal the server's list. */
static bool converged(void *arg) {
    struct conv *c = arg;
    if (!cache_matches(c->e, c->inf)) return false;
    if (json_object_size(c->sh->m) != kc_informer_count(c->inf)) return false;
    const char *k;
    json_t *v;
    json_object_foreach(c->sh->m, k, v) {
        json_t *o = kc_informer_get(c->inf, "default", k);
        if (!o || strcmp(md_str(o, "resourceVersion"), json_string_value(v))) return false;
    }
    return true;
}

TEST(kclient_informer_converges_under_bursts) {
    WITH_APISRV(s, e, "--history-max=20 --watch-poll-ms=50");
    struct shadow sh = {.m = json_object()};
    struct kc_informer_handlers h = {sh_add, sh_update, sh_delete, NULL};
    struct kc_informer *inf = kc_informer_new(e.c, "/api/v1/namespaces/default/pods", NULL, &h, &sh);
    REQUIRE(inf);
    CHECK_I64(kc_informer_start(inf), 0);
    CHECK(run_until(&e, synced_pred, inf, 10000));
    uint64_t seed = 42;
    char err[256], path[128], name[32];
    json_t *del = json_pack("{s:s}", "propagationPolicy", "Background");
    for (int burst = 0; burst < 6; burst++) {
        /* the loop is blocked while the burst runs; every other burst runs against a restarted server
         * (the stream broke: the informer re-lists and reports the difference) */
        int ops = burst % 2 ? 5 : 60;
        if (burst % 2 == 0 && burst > 0) {
            int port = s.port;
            apisrv_kill(&s, SIGKILL);
            if (apisrv_spawn(&s, port, "--history-max=20 --watch-poll-ms=50")) {
                test_fail(__FILE__, __LINE__, "pelotond did not come back on port %d", port);
                break;
            }
        }
        for (int i = 0; i < ops; i++) {
            snprintf(name, sizeof name, "p%d", (int)test_range(&seed, 0, 39));
            snprintf(path, sizeof path, "/api/v1/namespaces/default/pods/%s", name);
            int op = (int)test_range(&seed, 0, 2);
            if (op == 0) {
                json_t *p = pod(name, "b");
                kclient_request_sync(e.c, "POST", "/api/v1/namespaces/default/pods", p, NULL, NULL, err, sizeof err);
                json_decref(p);
            } else if (op == 1) {
                json_t *patch = json_pack("{s:{s:{s:I}}}", "metadata", "annotations", "n", (json_int_t)i);
                json_object_set_new(json_object_get(json_object_get(patch, "metadata"), "annotations"), "n",
                                    json_sprintf("%d-%d", burst, i));
                kclient_request_sync(e.c, "PATCH", path, patch, "application/merge-patch+json", NULL, err, sizeof err);
                json_decref(patch);
            } else {
                kclient_request_sync(e.c, "DELETE", path, del, NULL, NULL, err, sizeof err);
            }
        }
        struct conv c = {&e, inf, &sh};
        CHECK(run_until(&e, converged, &c, 15000));
    }
    json_decref(del);
    CHECK_I64(sh.bad, 0);
    CHECK(kc_informer_lists(inf) >= 2); /* the bursts forced re-lists */
    fprintf(stderr, "  kclient: bursts: %u lists, %d adds, %d updates, %d deletes, %zu cached\n",
            kc_informer_lists(inf), sh.adds, sh.updates, sh.deletes, kc_informer_count(inf));
    kc_informer_free(inf);
    json_decref(sh.m);
    env_done(&e);
    apisrv_stop(&s);
}

/* Watches have their own connections: twenty of them do not starve requests
 * (KC_MAX_CONNS is 16). */
TEST(kclient_watches_do_not_starve_requests) {
    WITH_APISRV(s, e, NULL);
    static struct wrec recs[20];
    memset(recs, 0, sizeof recs);
    for (int i = 0; i < 20; i++) {
        recs[i].want[1] = 1;
        recs[i].w = kclient_watch(e.c, "/api/v1/namespaces/default/pods", NULL, NULL, wrec_event, wrec_end, &recs[i]);
        CHECK(recs[i].w != NULL);
    }
    run_for(&e, 300);
    struct box b = {0};
    json_t *p = pod("starve", "s");
    CHECK_I64(call(&e, &b, "POST", "/api/v1/namespaces/default/pods", p, NULL), 201);
    json_decref(p);
    CHECK_I64(call(&e, &b, "GET", "/api/v1/namespaces/default/pods/starve", NULL, NULL), 200);
    double t0 = now_ms();
    int seen = 0;
    for (;;) { /* counted before the loop runs: the events may have come during the calls above, and a
                * UV_RUN_ONCE with nothing due would wait for the next timer (10 s) */
        seen = 0;
        for (int i = 0; i < 20; i++) seen += recs[i].n >= 1;
        if (seen == 20 || now_ms() - t0 >= 5000) break;
        uv_run(&e.loop, UV_RUN_NOWAIT);
        uv_sleep(1);
    }
    CHECK_I64(seen, 20); /* every watch saw the create */
    for (int i = 0; i < 10; i++) kc_watch_stop(recs[i].w); /* half stopped here, half by kclient_free */
    json_decref(b.body);
    /* bad configurations fail at once with a message */
    char err[256] = "";
    struct kc_config bad = {.server = "ftp://127.0.0.1:1"};
    CHECK(kclient_new(&e.loop, &bad, err, sizeof err) == NULL);
    CHECK_HAS(err, "ftp://");
    bad.server = NULL;
    CHECK(kclient_new(&e.loop, &bad, err, sizeof err) == NULL);
    env_done(&e);
    apisrv_stop(&s);
}

/* ---- kclient's own HTTP/1.1 client (kh1.c) against a raw server ----
 * A server written on libuv sockets, on the client's loop, answers each
 * path with bytes the src/http server never sends: chunks with extensions
 * and trailers, an interim 100, a body cut into 1-byte sends, a body that
 * runs to the end of the connection, Connection: close, a kept-alive
 * connection closed under the next request, garbage, an oversized head,
 * and no answer at all. */

struct rawsrv {
    uv_tcp_t lis;
    int port, accepts, requests;
};

struct rawconn {
    uv_tcp_t tcp;
    struct rawsrv *s;
    char in[8192];
    size_t inlen;
    bool close_next; /* the next request is met by a close, no answer */
    uv_timer_t drip;
    const char *drip_p;
    size_t drip_off;
};

static void rawconn_freed(uv_handle_t *h) { free(h->data); }
static void rawconn_closed(uv_handle_t *h) {
    struct rawconn *rc = h->data;
    uv_close((uv_handle_t *)&rc->drip, rawconn_freed);
}
static void rawconn_close(struct rawconn *rc) {
    if (!uv_is_closing((uv_handle_t *)&rc->tcp)) uv_close((uv_handle_t *)&rc->tcp, rawconn_closed);
}
static void raw_put(struct rawconn *rc, const char *p, size_t n) {
    uv_buf_t b = uv_buf_init((char *)p, (unsigned)n);
    int w = uv_try_write((uv_stream_t *)&rc->tcp, &b, 1);
    if (w != (int)n) test_fail(__FILE__, __LINE__, "raw server: short write %d of %zu", w, n);
}
static void raw_puts(struct rawconn *rc, const char *p) { raw_put(rc, p, strlen(p)); }

static const char DRIP[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n{\"drip\":1}";
static void raw_drip(uv_timer_t *t) {
    struct rawconn *rc = t->data;
    raw_put(rc, rc->drip_p + rc->drip_off++, 1);
    if (!rc->drip_p[rc->drip_off]) uv_timer_stop(t);
}

static void raw_answer(struct rawconn *rc, const char *method, const char *path) {
    rc->s->requests++;
    if (rc->close_next) { /* as a server whose idle timeout struck just as the request came */
        rawconn_close(rc);
        return;
    }
    bool head = !strcmp(method, "HEAD");
    if (!strcmp(path, "/chunked")) {
        raw_puts(rc, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "7;ext=1\r\n{\"a\":1,\r\n"
                     "C\r\n\"b\":[1,2,3]}\r\n"
                     "0\r\nX-Trailer: t\r\n\r\n");
    } else if (!strcmp(path, "/drip")) { /* one byte a millisecond */
        rc->drip_p = DRIP;
        rc->drip_off = 0;
        uv_timer_start(&rc->drip, raw_drip, 1, 1);
    } else if (!strcmp(path, "/continue")) {
        raw_puts(rc, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}");
    } else if (!strcmp(path, "/nocontent")) {
        raw_puts(rc, "HTTP/1.1 204 No Content\r\n\r\n");
    } else if (!strcmp(path, "/close")) {
        raw_puts(rc, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 14\r\n\r\n{\"close\":true}");
        rawconn_close(rc);
    } else if (!strcmp(path, "/eof")) {
        raw_puts(rc, "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{\"eof\":true}");
        rawconn_close(rc);
    } else if (!strcmp(path, "/arm")) {
        raw_puts(rc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}");
        rc->close_next = true;
    } else if (!strcmp(path, "/garbage")) {
        raw_puts(rc, "SPDY/9 what\r\n\r\n");
    } else if (!strcmp(path, "/bighead")) {
        static char big[80000];
        size_t n = (size_t)snprintf(big, sizeof big, "HTTP/1.1 200 OK\r\nX-Big: ");
        memset(big + n, 'x', 70000);
        n += 70000;
        n += (size_t)snprintf(big + n, sizeof big - n, "\r\nContent-Length: 2\r\n\r\n{}");
        raw_put(rc, big, n);
    } else if (!strcmp(path, "/hang")) {
        /* no answer */
    } else {
        raw_puts(rc, head ? "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n"
                          : "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"ok\":true}");
    }
}

static void raw_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b) {
    struct rawconn *rc = h->data;
    b->base = rc->in + rc->inlen;
    b->len = sizeof rc->in - rc->inlen - 1;
}

static void raw_read_cb(uv_stream_t *st, ssize_t n, const uv_buf_t *b) {
    struct rawconn *rc = st->data;
    if (n < 0) {
        rawconn_close(rc);
        return;
    }
    rc->inlen += (size_t)n;
    rc->in[rc->inlen] = 0;
    char *end;
    while (!uv_is_closing((uv_handle_t *)&rc->tcp) && (end = strstr(rc->in, "\r\n\r\n"))) {
        size_t used = (size_t)(end + 4 - rc->in);
        const char *cl = strcasestr(rc->in, "content-length:");
        if (cl && cl < end) used += strtoul(cl + 15, NULL, 10);
        if (used > rc->inlen) return;
        char method[16] = "", path[256] = "";
        sscanf(rc->in, "%15s %255s", method, path);
        memmove(rc->in, rc->in + used, rc->inlen - used + 1);
        rc->inlen -= used;
        raw_answer(rc, method, path);
    }
}

static void raw_accept(uv_stream_t *l, int status) {
    struct rawsrv *s = l->data;
    struct rawconn *rc = calloc(1, sizeof *rc);
    rc->s = s;
    uv_tcp_init(l->loop, &rc->tcp);
    uv_timer_init(l->loop, &rc->drip);
    rc->tcp.data = rc->drip.data = rc;
    if (uv_accept(l, (uv_stream_t *)&rc->tcp)) {
        rawconn_close(rc);
        return;
    }
    s->accepts++;
    uv_read_start((uv_stream_t *)&rc->tcp, raw_alloc, raw_read_cb);
}

static int rawsrv_start(uv_loop_t *loop, struct rawsrv *s) {
    memset(s, 0, sizeof *s);
    struct sockaddr_in a;
    uv_ip4_addr("127.0.0.1", 0, &a);
    uv_tcp_init(loop, &s->lis);
    s->lis.data = s;
    if (uv_tcp_bind(&s->lis, (struct sockaddr *)&a, 0) || uv_listen((uv_stream_t *)&s->lis, 64, raw_accept)) return -1;
    struct sockaddr_in got;
    int len = sizeof got;
    uv_tcp_getsockname(&s->lis, (struct sockaddr *)&got, &len);
    s->port = ntohs(got.sin_port);
    return 0;
}

static void close_if_raw(uv_handle_t *h, void *arg) {
    if (h->type == UV_TCP && !uv_is_closing(h) && h->data != arg) rawconn_close(h->data);
}

TEST(kclient_own_http1_client_reads_every_framing) {
    unsetenv("PELOTON_KCLIENT_CURL"); /* this is kh1's test */
    struct env e;
    memset(&e, 0, sizeof e);
    uv_loop_init(&e.loop);
    uv_timer_init(&e.loop, &e.deadline);
    e.deadline.data = &e;
    struct rawsrv s;
    REQUIRE(rawsrv_start(&e.loop, &s) == 0);
    char url[64], err[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", s.port);
    struct kc_config cfg = {.server = url, .timeout_ms = 400};
    e.c = kclient_new(&e.loop, &cfg, err, sizeof err);
    REQUIRE(e.c);
    struct box b = {0};
    CHECK_I64(call(&e, &b, "GET", "/ok", NULL, NULL), 200);
    CHECK(json_is_true(json_object_get(b.body, "ok")));
    /* chunks with an extension and a trailer, on the same kept-alive connection */
    CHECK_I64(call(&e, &b, "GET", "/chunked", NULL, NULL), 200);
    CHECK_I64(json_array_size(json_object_get(b.body, "b")), 3);
    CHECK_I64(json_integer_value(json_object_get(b.body, "a")), 1);
    /* a head and body in 1-byte pieces */
    CHECK_I64(call(&e, &b, "GET", "/drip", NULL, NULL), 200);
    CHECK_I64(json_integer_value(json_object_get(b.body, "drip")), 1);
    /* an interim 100, then the answer */
    json_t *obj = json_pack("{s:s}", "x", "y");
    CHECK_I64(call(&e, &b, "POST", "/continue", obj, NULL), 201);
    json_decref(obj);
    CHECK_I64(call(&e, &b, "DELETE", "/nocontent", NULL, NULL), 204);
    CHECK(b.body == NULL);
    CHECK_I64(call(&e, &b, "HEAD", "/ok", NULL, NULL), 200); /* a length, and no body after a HEAD */
    CHECK(b.body == NULL);
    CHECK_I64(call(&e, &b, "GET", "/ok", NULL, NULL), 200); /* and the connection is still in step */
    CHECK_I64(s.accepts, 1);
    /* Connection: close: the next request opens another connection */
    CHECK_I64(call(&e, &b, "GET", "/close", NULL, NULL), 200);
    CHECK(json_is_true(json_object_get(b.body, "close")));
    CHECK_I64(call(&e, &b, "GET", "/ok", NULL, NULL), 200);
    CHECK_I64(s.accepts, 2);
    /* an HTTP/1.0 body that runs to the end of the connection */
    CHECK_I64(call(&e, &b, "GET", "/eof", NULL, NULL), 200);
    CHECK(json_is_true(json_object_get(b.body, "eof")));
    /* a kept-alive connection the server closes under the next request: sent once more, on a new one */
    CHECK_I64(call(&e, &b, "GET", "/arm", NULL, NULL), 200);
    int before = s.accepts, reqs = s.requests;
    CHECK_I64(call(&e, &b, "PATCH", "/ok", NULL, NULL), 200);
    CHECK_I64(s.accepts, before + 1);
    CHECK_I64(s.requests, reqs + 2);
    /* what cannot be read is a transport error, and the connection goes */
    CHECK_I64(call(&e, &b, "GET", "/garbage", NULL, NULL), 0);
    CHECK_HAS(b.error, "malformed");
    CHECK_I64(call(&e, &b, "GET", "/bighead", NULL, NULL), 0);
    CHECK_HAS(b.error, "malformed");
    /* nothing that would split the head is sent */
    CHECK(kclient_request(e.c, "GET", "/ok\r\nX-Injected: 1", NULL, NULL, box_cb, &b) != 0);
    CHECK(kclient_request(e.c, "GET", "/ok HTTP/1.0", NULL, NULL, box_cb, &b) != 0);
    CHECK(kclient_request(e.c, "PATCH", "/ok", NULL, "application/json\r\nX: 1", box_cb, &b) != 0);
    /* no answer: the request's timeout (400 ms here) */
    uint64_t t0 = uv_now(&e.loop);
    CHECK_I64(call(&e, &b, "GET", "/hang", NULL, NULL), 0);
    CHECK_HAS(b.error, "timed out");
    CHECK(uv_now(&e.loop) - t0 >= 350);
    /* a burst: every request answered, on at most KC_MAX_CONNS connections */
    struct box many[150];
    memset(many, 0, sizeof many);
    before = s.accepts;
    for (int i = 0; i < 150; i++) CHECK(kclient_request(e.c, "GET", "/ok", NULL, NULL, box_cb, &many[i]) == 0);
    for (int spins = 0; spins < 5000; spins++) {
        int done = 0;
        for (int i = 0; i < 150; i++) done += many[i].done;
        if (done == 150) break;
        uv_run(&e.loop, UV_RUN_ONCE);
    }
    int ok = 0;
    for (int i = 0; i < 150; i++) {
        ok += many[i].status == 200;
        json_decref(many[i].body);
    }
    CHECK_I64(ok, 150);
    CHECK(s.accepts - before <= KC_MAX_CONNS);
    json_decref(b.body);
    kclient_free(e.c);
    e.c = NULL;
    uv_walk(&e.loop, close_if_raw, &s);
    uv_close((uv_handle_t *)&s.lis, NULL);
    env_done(&e);
}

/* An informer freed while its watch's connection is still being made (a
 * role that lost its lease right after it started: the controllers restart
 * their roles under load) and another started at once on the same client,
 * many times: the sockets curl let go of must leave the loop's poll set
 * with them (libuv aborts on an epoll_ctl on a socket closed behind it). */
TEST(kclient_informer_freed_while_its_watch_connects) {
    WITH_APISRV(s, e, NULL);
    REQUIRE(create_pods(&e, "fw", 2) == 0);
    struct kc_informer_handlers h = {irec_add, irec_update, irec_delete, irec_synced};
    for (int i = 0; i < 40; i++) {
        struct irec r = {.e = &e};
        r.inf = kc_informer_new(e.c, "/api/v1/namespaces/default/pods", NULL, &h, &r);
        REQUIRE(r.inf);
        CHECK_I64(kc_informer_start(r.inf), 0);
        REQUIRE(run_until(&e, current_pred, r.inf, 10000)); /* listed; its watch just asked for */
        kc_informer_free(r.inf);
    }
    struct irec r = {.e = &e};
    r.inf = kc_informer_new(e.c, "/api/v1/namespaces/default/pods", NULL, &h, &r);
    REQUIRE(r.inf);
    CHECK_I64(kc_informer_start(r.inf), 0);
    CHECK(run_until(&e, current_pred, r.inf, 10000));
    CHECK_I64(kc_informer_count(r.inf), 2);
    kc_informer_free(r.inf);
    env_done(&e);
    apisrv_stop(&s);
}
