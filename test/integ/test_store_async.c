/* Integration tests of the store's asynchronous write path (store_async.c)
 * against a real redis-server, beside the synchronous store on the same
 * server: pipelining and order, the namespace guard, read-modify-write with
 * lost races, NOSCRIPT, deletion by finalizers, a lost connection, a write
 * failing in the turn's flush (against a listener of the test's own). */
#include <arpa/inet.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "redis_fixture.h"
#include "store.h"
#include "test.h"

struct got {
    int calls, rc;
    char err[512];
    uint64_t rv;
    enum store_event_type type;
    json_t *obj;  /* kept */
    json_t *json; /* the stored bytes, parsed */
};

static void on_done(void *ud, const struct store_result *r) {
    struct got *g = ud;
    g->calls++;
    g->rc = r->rc;
    snprintf(g->err, sizeof g->err, "%s", r->err);
    g->rv = r->rv;
    g->type = r->type;
    json_decref(g->obj);
    g->obj = r->obj ? json_incref(r->obj) : NULL;
    json_decref(g->json);
    g->json = r->json ? json_loadb(r->json, r->json_len, 0, NULL) : NULL;
}

static void got_free(struct got *g) {
    json_decref(g->obj);
    json_decref(g->json);
    memset(g, 0, sizeof *g);
}

static json_t *pod(const char *name) {
    return json_pack("{s:s,s:s,s:{s:s},s:{s:[{s:s,s:s}]}}", "apiVersion", "v1", "kind", "Pod", "metadata", "name",
                     name, "spec", "containers", "name", "c", "image", "x");
}

static uint64_t rv_of(const json_t *o) {
    const char *s = json_string_value(json_object_get(json_object_get(o, "metadata"), "resourceVersion"));
    return s ? strtoull(s, NULL, 10) : 0;
}

/* Runs the loop until every callback came (bounded). */
static void run_until(uv_loop_t *loop, const int *calls, int want) {
    for (int i = 0; i < 20000 && *calls < want; i++) uv_run(loop, UV_RUN_ONCE);
}

struct env {
    struct redis_fixture f;
    uv_loop_t loop;
    struct store_async *a;
};

static int env_start(struct env *e) {
    memset(e, 0, sizeof *e);
    if (redis_fixture_start(&e->f, NULL)) return -1;
    uv_loop_init(&e->loop);
    if (store_async_open(&e->loop, "127.0.0.1", e->f.proc.port, NULL, &e->a)) {
        redis_fixture_stop(&e->f);
        return -1;
    }
    return 0;
}

static void env_stop(struct env *e) {
    store_async_close(e->a);
    uv_run(&e->loop, UV_RUN_DEFAULT);
    uv_loop_close(&e->loop);
    redis_fixture_stop(&e->f);
}

#define WITH_ENV(e)                                                                                                    \
    struct env e;                                                                                                      \
    if (env_start(&e)) {                                                                                               \
        test_fail(__FILE__, __LINE__, "fixture did not start");                                                        \
        return;                                                                                                        \
    }

struct many {
    int calls, bad;
    uint64_t last_rv;
};

static void on_many(void *ud, const struct store_result *r) {
    struct many *m = ud;
    m->calls++;
    if (r->rc || !r->json || r->rv <= m->last_rv || r->type != STORE_ADDED) m->bad++;
    m->last_rv = r->rv;
}

TEST(store_async_create_pipelined_in_order) {
    WITH_ENV(e);
    struct many m = {0};
    char err[256], name[32];
    for (int i = 0; i < 300; i++) { /* all queued in one turn: one pipeline */
        snprintf(name, sizeof name, "p%d", i);
        json_t *p = pod(name);
        CHECK_I64(store_async_create(e.a, "pods", "default", json_incref(p), false, on_many, &m, err, sizeof err), 0);
        json_decref(p);
    }
    CHECK_I64(store_async_inflight(e.a), 300);
    run_until(&e.loop, &m.calls, 300);
    CHECK_I64(m.calls, 300);
    CHECK_I64(m.bad, 0);
    CHECK_I64(store_async_inflight(e.a), 0);
    /* what the async path wrote is what the sync path reads, byte for byte in meaning */
    json_t *got = NULL;
    REQUIRE_I64(store_get(e.f.store, "pods", "default", "p299", &got), 0);
    CHECK_I64(rv_of(got), m.last_rv);
    json_decref(got);
    struct got g = {0};
    json_t *p = pod("p7");
    CHECK_I64(store_async_create(e.a, "pods", "default", json_incref(p), false, on_done, &g, err, sizeof err), 0);
    json_decref(p);
    run_until(&e.loop, &g.calls, 1);
    CHECK_I64(g.rc, -EEXIST);
    CHECK_HAS(g.err, "already exists");
    got_free(&g);
    env_stop(&e);
}

TEST(store_async_create_result_matches_stored) {
    WITH_ENV(e);
    struct got g = {0};
    char err[256];
    json_t *p = pod("a");
    CHECK_I64(store_async_create(e.a, "pods", "default", p, false, on_done, &g, err, sizeof err), 0); /* taken */
    run_until(&e.loop, &g.calls, 1);
    REQUIRE_I64(g.rc, 0);
    CHECK_I64(g.type, STORE_ADDED);
    REQUIRE(g.obj && g.json);
    CHECK(json_equal(g.obj, g.json));
    CHECK_I64(rv_of(g.obj), g.rv);
    json_t *stored = NULL;
    REQUIRE_I64(store_get(e.f.store, "pods", "default", "a", &stored), 0);
    CHECK(json_equal(stored, g.json));
    json_decref(stored);
    /* the history has the same event */
    struct store_history h = {0};
    REQUIRE_I64(store_history_after(e.f.store, "pods", "", g.rv - 1, 10, &h), 0);
    REQUIRE_I64(h.n, 1);
    CHECK_I64(h.events[0].resource_version, g.rv);
    CHECK(json_equal(h.events[0].object, g.json));
    store_history_free(&h);
    got_free(&g);
    env_stop(&e);
}

TEST(store_async_create_namespace_guard) {
    WITH_ENV(e);
    struct got g = {0};
    char err[256];
    CHECK_I64(store_async_create(e.a, "pods", "team-a", pod("x"), true, on_done, &g, err, sizeof err), 0);
    run_until(&e.loop, &g.calls, 1);
    CHECK_I64(g.rc, STORE_NO_NAMESPACE);
    CHECK_STR(g.err, "namespaces \"team-a\" not found");
    CHECK_I64(store_http_code(g.rc), 404);
    uint64_t rv = 1;
    CHECK_I64(store_current_rv(e.f.store, &rv), 0);
    CHECK_I64(rv, 0); /* a refused create takes no resourceVersion */
    json_t *ns = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Namespace", "metadata", "name", "team-a");
    REQUIRE_I64(store_create(e.f.store, "namespaces", "", ns, NULL), 0);
    json_decref(ns);
    CHECK_I64(store_async_create(e.a, "pods", "team-a", pod("x"), true, on_done, &g, err, sizeof err), 0);
    run_until(&e.loop, &g.calls, 2);
    CHECK_I64(g.rc, 0);
    CHECK_I64(g.rv, 2);
    got_free(&g);
    env_stop(&e);
}

TEST(store_async_bad_input_never_calls_back) {
    WITH_ENV(e);
    struct got g = {0};
    char err[256] = "";
    json_t *p = pod("Bad_Name");
    CHECK(store_async_create(e.a, "pods", "default", json_incref(p), false, on_done, &g, err, sizeof err) < 0);
    CHECK(err[0] != 0);
    json_decref(p);
    p = json_pack("{s:s,s:{s:s,s:s}}", "kind", "Pod", "metadata", "name", "ok", "resourceVersion", "5");
    err[0] = 0;
    CHECK_I64(store_async_create(e.a, "pods", "default", json_incref(p), false, on_done, &g, err, sizeof err), -EINVAL);
    CHECK_HAS(err, "resourceVersion should not be set");
    json_decref(p);
    CHECK(store_async_modify(e.a, "pods", "default", "ok", NULL, NULL, on_done, &g, err, sizeof err) < 0);
    uv_run(&e.loop, UV_RUN_NOWAIT);
    CHECK_I64(g.calls, 0);
    CHECK_I64(store_async_inflight(e.a), 0);
    env_stop(&e);
}

/* ---- modify ---- */

struct fnctx {
    int calls;
    struct store *racer; /* when set, the first call writes the object first (a lost race) */
    const char *phase;
    const char *stale_rv;
    bool fail, drop_finalizers;
};

static int set_phase(void *ud, const json_t *cur, json_t **next, char *err, size_t errlen) {
    struct fnctx *c = ud;
    c->calls++;
    if (c->fail) {
        snprintf(err, errlen, "refused by the caller");
        return -EINVAL;
    }
    if (c->racer && c->calls == 1) {
        json_t *other = json_deep_copy(cur);
        json_object_set_new(other, "status", json_pack("{s:s}", "phase", "Other"));
        if (store_update(c->racer, "pods", "default", other, NULL, NULL)) c->calls += 100;
        json_decref(other);
    }
    *next = json_deep_copy(cur);
    if (!c->stale_rv) json_object_del(json_object_get(*next, "metadata"), "resourceVersion");
    else json_object_set_new(json_object_get(*next, "metadata"), "resourceVersion", json_string(c->stale_rv));
    if (c->phase) json_object_set_new(*next, "status", json_pack("{s:s}", "phase", c->phase));
    if (c->drop_finalizers) json_object_del(json_object_get(*next, "metadata"), "finalizers");
    return 0;
}

static void create_sync(struct env *e, const char *name, json_t **out) {
    json_t *p = pod(name);
    if (store_create(e->f.store, "pods", "default", p, out)) test_fail(__FILE__, __LINE__, "create %s", name);
    json_decref(p);
}

TEST(store_async_modify_writes_and_unchanged) {
    WITH_ENV(e);
    json_t *orig = NULL;
    create_sync(&e, "m", &orig);
    struct fnctx c = {.phase = "Running"};
    struct got g = {0};
    char err[256];
    REQUIRE_I64(store_async_modify(e.a, "pods", "default", "m", set_phase, &c, on_done, &g, err, sizeof err), 0);
    run_until(&e.loop, &g.calls, 1);
    REQUIRE_I64(g.rc, 0);
    CHECK_I64(c.calls, 1);
    CHECK_I64(g.type, STORE_MODIFIED);
    CHECK_I64(g.rv, rv_of(orig) + 1);
    CHECK_STR(json_string_value(json_object_get(json_object_get(g.json, "status"), "phase")), "Running");
    CHECK(json_equal(g.obj, g.json));
    /* uid and creationTimestamp are kept, generation stays (status only) */
    CHECK(json_equal(json_object_get(json_object_get(g.obj, "metadata"), "uid"),
                     json_object_get(json_object_get(orig, "metadata"), "uid")));
    CHECK_I64(json_integer_value(json_object_get(json_object_get(g.obj, "metadata"), "generation")), 1);
    /* the same again changes nothing and writes nothing */
    REQUIRE_I64(store_async_modify(e.a, "pods", "default", "m", set_phase, &c, on_done, &g, err, sizeof err), 0);
    run_until(&e.loop, &g.calls, 2);
    CHECK_I64(g.rc, 0);
    CHECK_I64(g.rv, 0);
    CHECK(g.json == NULL);
    CHECK_I64(rv_of(g.obj), rv_of(orig) + 1);
    json_decref(orig);
    got_free(&g);
    env_stop(&e);
}

TEST(store_async_modify_lost_race_runs_fn_again) {
    WITH_ENV(e);
    json_t *orig = NULL;
    create_sync(&e, "r", &orig);
    struct fnctx c = {.phase = "Running", .racer = e.f.store};
    struct got g = {0};
    char err[256];
    REQUIRE_I64(store_async_modify(e.a, "pods", "default", "r", set_phase, &c, on_done, &g, err, sizeof err), 0);
    run_until(&e.loop, &g.calls, 1);
    CHECK_I64(g.rc, 0);
    CHECK_I64(c.calls, 2); /* the racer's write made the first compare-and-set fail */
    CHECK_I64(g.rv, rv_of(orig) + 2);
    CHECK_STR(json_string_value(json_object_get(json_object_get(g.obj, "status"), "phase")), "Running");
    json_decref(orig);
    got_free(&g);
    env_stop(&e);
}

TEST(store_async_modify_conditional_conflict_and_errors) {
    WITH_ENV(e);
    json_t *orig = NULL;
    create_sync(&e, "c", &orig);
    char err[256];
    struct got g = {0};
    struct fnctx stale = {.phase = "Running", .stale_rv = "999"};
    REQUIRE_I64(store_async_modify(e.a, "pods", "default", "c", set_phase, &stale, on_done, &g, err, sizeof err), 0);
    run_until(&e.loop, &g.calls, 1);
    CHECK_I64(g.rc, STORE_ECONFLICT);
    CHECK_I64(stale.calls, 1); /* a caller's resourceVersion is never retried */
    CHECK_HAS(g.err, "the object has been modified");
    struct fnctx fail = {.fail = true};
    REQUIRE_I64(store_async_modify(e.a, "pods", "default", "c", set_phase, &fail, on_done, &g, err, sizeof err), 0);
    run_until(&e.loop, &g.calls, 2);
    CHECK_I64(g.rc, -EINVAL);
    CHECK_STR(g.err, "refused by the caller");
    struct fnctx ok = {.phase = "x"};
    REQUIRE_I64(store_async_modify(e.a, "pods", "default", "none", set_phase, &ok, on_done, &g, err, sizeof err), 0);
    run_until(&e.loop, &g.calls, 3);
    CHECK_I64(g.rc, -ENOENT);
    CHECK_STR(g.err, "pods \"none\" not found");
    CHECK_I64(ok.calls, 0);
    json_t *now = NULL;
    REQUIRE_I64(store_get(e.f.store, "pods", "default", "c", &now), 0);
    CHECK_I64(rv_of(now), rv_of(orig)); /* nothing was written */
    json_decref(now);
    json_decref(orig);
    got_free(&g);
    env_stop(&e);
}

TEST(store_async_modify_completes_deletion) {
    WITH_ENV(e);
    json_t *p = pod("f");
    json_object_set_new(json_object_get(p, "metadata"), "finalizers", json_pack("[s]", "example.com/keep"));
    REQUIRE_I64(store_create(e.f.store, "pods", "default", p, NULL), 0);
    json_decref(p);
    int deleted = 1;
    REQUIRE_I64(store_delete(e.f.store, "pods", "default", "f", NULL, NULL, &deleted), 0);
    CHECK_I64(deleted, 0); /* marked, kept for its finalizer */
    struct fnctx c = {.drop_finalizers = true};
    struct got g = {0};
    char err[256];
    REQUIRE_I64(store_async_modify(e.a, "pods", "default", "f", set_phase, &c, on_done, &g, err, sizeof err), 0);
    run_until(&e.loop, &g.calls, 1);
    CHECK_I64(g.rc, 0);
    CHECK_I64(g.type, STORE_DELETED);
    json_t *gone = NULL;
    CHECK_I64(store_get(e.f.store, "pods", "default", "f", &gone), -ENOENT);
    got_free(&g);
    env_stop(&e);
}

TEST(store_async_noscript_resends_as_eval) {
    WITH_ENV(e);
    redisContext *rc = redisConnect("127.0.0.1", e.f.proc.port);
    REQUIRE(rc && !rc->err);
    redisReply *r = redisCommand(rc, "SCRIPT FLUSH");
    CHECK(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    redisFree(rc);
    struct got g = {0};
    char err[256];
    json_t *p = pod("after-flush");
    REQUIRE_I64(store_async_create(e.a, "pods", "default", json_incref(p), false, on_done, &g, err, sizeof err), 0);
    json_decref(p);
    run_until(&e.loop, &g.calls, 1);
    CHECK_I64(g.rc, 0);
    CHECK_I64(g.rv, 1);
    got_free(&g);
    env_stop(&e);
}

TEST(store_async_lost_connection_fails_then_reconnects) {
    WITH_ENV(e);
    struct got g = {0};
    char err[256];
    json_t *p = pod("before");
    REQUIRE_I64(store_async_create(e.a, "pods", "default", json_incref(p), false, on_done, &g, err, sizeof err), 0);
    run_until(&e.loop, &g.calls, 1);
    CHECK_I64(g.rc, 0);
    json_decref(p);
    REQUIRE_I64(redis_fixture_crash_restart(&e.f), 0); /* the async connection is now dead */
    int seen = 0;
    for (int i = 0; i < 50 && !seen; i++) { /* the first write notices the loss; a later one reconnects */
        int before = g.calls;
        if (store_async_create(e.a, "pods", "default", pod("during"), false, on_done, &g, err, sizeof err) == 0) {
            run_until(&e.loop, &g.calls, before + 1);
            REQUIRE(g.calls == before + 1); /* every write is answered, a lost connection too */
            if (g.rc == 0) seen = 1;
            else CHECK_I64(g.rc, -EIO);
        } else {
            uv_run(&e.loop, UV_RUN_NOWAIT);
        }
    }
    CHECK(seen);
    json_t *got = NULL;
    CHECK_I64(store_get(e.f.store, "pods", "default", "during", &got), 0);
    json_decref(got);
    got_free(&g);
    env_stop(&e);
}

/* ---- batches ---- */

static json_t *cm(const char *name) {
    return json_pack("{s:s,s:s,s:{s:s},s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap", "metadata", "name", name,
                     "data", "k", "v");
}

TEST(store_async_batch_spans_resources) {
    WITH_ENV(e);
    struct got gp[5] = {0}, gc[5] = {0};
    char err[256], name[16];
    for (int i = 0; i < 5; i++) { /* one turn: pods and configmaps interleaved, two batches */
        snprintf(name, sizeof name, "x%d", i);
        CHECK_I64(store_async_create(e.a, "pods", "default", pod(name), false, on_done, &gp[i], err, sizeof err), 0);
        CHECK_I64(store_async_create(e.a, "configmaps", "default", cm(name), false, on_done, &gc[i], err, sizeof err),
                  0);
    }
    run_until(&e.loop, &gc[4].calls, 1);
    uint64_t seen = 0;
    for (int i = 0; i < 5; i++) {
        CHECK_I64(gp[i].rc, 0);
        CHECK_I64(gc[i].rc, 0);
        snprintf(name, sizeof name, "x%d", i);
        CHECK_STR(json_string_value(json_object_get(gp[i].obj, "kind")), "Pod");
        CHECK_STR(json_string_value(json_object_get(gc[i].obj, "kind")), "ConfigMap");
        CHECK_STR(json_string_value(json_object_get(json_object_get(gc[i].obj, "metadata"), "name")), name);
        CHECK_I64(rv_of(gp[i].obj), gp[i].rv);
        seen |= 1ull << gp[i].rv | 1ull << gc[i].rv;
    }
    CHECK_I64(seen, 0x7feull); /* ten writes, versions 1..10, each once */
    json_t *got = NULL;
    CHECK_I64(store_get(e.f.store, "configmaps", "default", "x3", &got), 0);
    CHECK(json_equal(got, gc[3].json));
    json_decref(got);
    for (int i = 0; i < 5; i++) got_free(&gp[i]), got_free(&gc[i]);
    env_stop(&e);
}

/* More writes and reads in one turn than the early-send thresholds (32):
 * batches and reads leave before the turn ends, interleaved with what is
 * still being queued; every operation is answered once, each write with its
 * own version, and what is stored is what was answered. */
TEST(store_async_early_batches_mixed) {
    WITH_ENV(e);
    enum { N = 120 };
    static struct got gm[N], gp[N], gc[N];
    static struct fnctx fc[N];
    char err[256], name[16];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "m%d", i);
        create_sync(&e, name, NULL);
    }
    struct got warm = {0}; /* the connection made first */
    CHECK_I64(store_async_create(e.a, "pods", "default", pod("warm"), false, on_done, &warm, err, sizeof err), 0);
    run_until(&e.loop, &warm.calls, 1);
    CHECK_I64(warm.rc, 0);
    got_free(&warm);
    for (int i = 0; i < N; i++) { /* one turn: a read-modify-write, a pod and a configmap each time */
        snprintf(name, sizeof name, "m%d", i);
        fc[i] = (struct fnctx){.phase = "Running"};
        CHECK_I64(store_async_modify(e.a, "pods", "default", name, set_phase, &fc[i], on_done, &gm[i], err,
                                     sizeof err),
                  0);
        snprintf(name, sizeof name, "n%d", i);
        CHECK_I64(store_async_create(e.a, "pods", "default", pod(name), false, on_done, &gp[i], err, sizeof err), 0);
        CHECK_I64(store_async_create(e.a, "configmaps", "default", cm(name), false, on_done, &gc[i], err, sizeof err),
                  0);
    }
    CHECK_I64(store_async_inflight(e.a), 3 * N);
    /* the turn has not ended, yet Redis already has the first batches */
    json_t *early = NULL;
    for (int i = 0; i < 100 && !early; i++) {
        if (store_get(e.f.store, "configmaps", "default", "n0", &early)) early = NULL;
        if (!early) usleep(10000);
    }
    CHECK(early != NULL);
    json_decref(early);
    int done = 0;
    for (int spin = 0; spin < 20000 && done < 3 * N; spin++) {
        uv_run(&e.loop, UV_RUN_ONCE);
        done = 0;
        for (int i = 0; i < N; i++) done += gm[i].calls + gp[i].calls + gc[i].calls;
    }
    CHECK_I64(done, 3 * N);
    CHECK_I64(store_async_inflight(e.a), 0);
    static char seen[4 * N + 8];
    int dup = 0, bad = 0;
    uint64_t last_create = 0;
    for (int i = 0; i < N; i++) {
        struct got *g3[3] = {&gm[i], &gp[i], &gc[i]};
        for (int k = 0; k < 3; k++) {
            if (g3[k]->calls != 1 || g3[k]->rc || !g3[k]->rv || g3[k]->rv >= sizeof seen) {
                bad++;
                continue;
            }
            dup += seen[g3[k]->rv]++;
        }
        /* creates are answered with versions in the order they were made */
        if (gp[i].rv <= last_create) bad++;
        last_create = gp[i].rv;
        CHECK_I64(fc[i].calls, 1);
        CHECK_STR(json_string_value(json_object_get(json_object_get(gm[i].obj, "status"), "phase")), "Running");
    }
    CHECK_I64(bad, 0);
    CHECK_I64(dup, 0);
    json_t *got = NULL;
    CHECK_I64(store_get(e.f.store, "pods", "default", "m77", &got), 0);
    CHECK(json_equal(got, gm[77].json));
    json_decref(got);
    CHECK_I64(store_get(e.f.store, "configmaps", "default", "n119", &got), 0);
    CHECK(json_equal(got, gc[119].json));
    json_decref(got);
    for (int i = 0; i < N; i++) got_free(&gm[i]), got_free(&gp[i]), got_free(&gc[i]);
    env_stop(&e);
}

static int delete_first(void *ud, const json_t *cur, json_t **next, char *err, size_t errlen) {
    struct fnctx *c = ud;
    c->calls++;
    if (store_delete(c->racer, "pods", "default", "gone", NULL, NULL, NULL)) c->calls += 100;
    *next = json_deep_copy(cur);
    json_object_del(json_object_get(*next, "metadata"), "resourceVersion");
    json_object_set_new(*next, "status", json_pack("{s:s}", "phase", "Running"));
    return 0;
}

TEST(store_async_batch_cas_of_a_deleted_object) {
    WITH_ENV(e);
    create_sync(&e, "gone", NULL);
    struct fnctx c = {.racer = e.f.store};
    struct got g = {0};
    char err[256];
    REQUIRE_I64(store_async_modify(e.a, "pods", "default", "gone", delete_first, &c, on_done, &g, err, sizeof err), 0);
    run_until(&e.loop, &g.calls, 1);
    CHECK_I64(c.calls, 1); /* gone between the read and the write: NotFound, not a retry */
    CHECK_I64(g.rc, -ENOENT);
    CHECK_HAS(g.err, "not found");
    got_free(&g);
    env_stop(&e);
}

/* ---- a write that fails in the turn's flush ---- */

/* This process's descriptor of the client side of the connection whose
 * server side is fd (its local port is fd's peer port); -1 if none. */
static int client_side(int fd) {
    struct sockaddr_in peer, mine;
    socklen_t l = sizeof peer;
    if (getpeername(fd, (struct sockaddr *)&peer, &l)) return -1;
    for (int c = 3; c < 1024; c++) {
        l = sizeof mine;
        if (c != fd && getsockname(c, (struct sockaddr *)&mine, &l) == 0 && mine.sin_family == AF_INET &&
            mine.sin_port == peer.sin_port)
            return c;
    }
    return -1;
}

/* The connection's writing side is shut while the turn's batch waits for
 * its flush: the flush's write fails (EPIPE), hiredis disconnects (closing
 * the poll handle) and the flush used to register the handle again for the
 * rest it could not write: uv_poll_start on a closing handle, libuv's
 * assertion, an abort (the API server died so after a Redis primary was
 * killed under load, in test/e2e/test_chaos.py). Now each write is answered
 * -EIO and the loop goes on. */
TEST(store_async_write_failing_in_the_flush_fails_the_writes) {
    signal(SIGPIPE, SIG_IGN);
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    REQUIRE(ls >= 0 && bind(ls, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(ls, 4) == 0 &&
            getsockname(ls, (struct sockaddr *)&sa, &sl) == 0);
    uv_loop_t loop;
    uv_loop_init(&loop);
    struct store_async *a = NULL;
    REQUIRE_I64(store_async_open(&loop, "127.0.0.1", ntohs(sa.sin_port), NULL, &a), 0);
    struct got g1 = {0}, g2 = {0};
    char err[256];
    /* the first write connects and is sent; the server reads it and answers nothing */
    REQUIRE_I64(store_async_create(a, "pods", "default", pod("first"), false, on_done, &g1, err, sizeof err), 0);
    int fd = -1;
    for (int i = 0; i < 200 && fd < 0; i++) {
        uv_run(&loop, UV_RUN_NOWAIT);
        struct pollfd pf = {.fd = ls, .events = POLLIN};
        if (poll(&pf, 1, 10) == 1) fd = accept(ls, NULL, NULL);
    }
    REQUIRE(fd >= 0);
    char buf[4096];
    ssize_t n = 0;
    for (int i = 0; i < 200 && n <= 0; i++) {
        uv_run(&loop, UV_RUN_NOWAIT);
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, 10) == 1) n = read(fd, buf, sizeof buf);
    }
    REQUIRE(n > 0);
    CHECK_I64(g1.calls, 0);
    int c = client_side(fd);
    REQUIRE(c >= 0);
    REQUIRE_I64(store_async_create(a, "pods", "default", pod("second"), false, on_done, &g2, err, sizeof err), 0);
    REQUIRE_I64(shutdown(c, SHUT_WR), 0); /* the next write fails; nothing to read comes */
    for (int i = 0; i < 2000 && (g1.calls < 1 || g2.calls < 1); i++) uv_run(&loop, UV_RUN_NOWAIT);
    CHECK_I64(g1.calls, 1);
    CHECK_I64(g2.calls, 1);
    CHECK_I64(g1.rc, -EIO);
    CHECK_I64(g2.rc, -EIO);
    got_free(&g1);
    got_free(&g2);
    store_async_close(a);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    close(fd);
    close(ls);
}
