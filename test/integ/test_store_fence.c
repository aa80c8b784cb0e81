/* Integration tests of fenced writes (store_modify_fenced,
 * store_async_modify_fenced) against a real redis-server: a write made only
 * while a Redis key (a lease's epoch key) holds the value it names, checked
 * in the write's own script call. A stale value is refused (STORE_EFENCED,
 * nothing written, not even an attached create, no version used), the
 * current one and no fence at all are written; a new term that begins
 * between the read and the write is seen; in one batch each write has its
 * own outcome. */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "redis_fixture.h"
#include "store.h"
#include "test.h"

#define EPOCH_KEY "peloton:placement:epoch"

struct env {
    struct redis_fixture f;
    redisContext *rc; /* a plain connection: the lease's side */
    uv_loop_t loop;
    struct store_async *a;
};

static void set_epoch(struct env *e, const char *v) {
    redisReply *r = v ? redisCommand(e->rc, "SET %s %s", EPOCH_KEY, v) : redisCommand(e->rc, "DEL %s", EPOCH_KEY);
    if (!r || r->type == REDIS_REPLY_ERROR) test_fail(__FILE__, __LINE__, "cannot set the epoch");
    if (r) freeReplyObject(r);
}

static int env_start(struct env *e) {
    memset(e, 0, sizeof *e);
    if (redis_fixture_start(&e->f, NULL)) return -1;
    e->rc = store_redis_connect("127.0.0.1", e->f.proc.port, 2000);
    uv_loop_init(&e->loop);
    if (!e->rc || e->rc->err || store_async_open(&e->loop, "127.0.0.1", e->f.proc.port, NULL, &e->a)) return -1;
    json_t *ns = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Namespace", "metadata", "name", "default");
    int rc = store_create(e->f.store, "namespaces", "", ns, NULL);
    json_decref(ns);
    return rc;
}

static void env_stop(struct env *e) {
    store_async_close(e->a);
    uv_run(&e->loop, UV_RUN_DEFAULT);
    uv_loop_close(&e->loop);
    if (e->rc) redisFree(e->rc);
    redis_fixture_stop(&e->f);
}

#define WITH_ENV(e)                                                                                                    \
    struct env e;                                                                                                      \
    if (env_start(&e)) {                                                                                               \
        env_stop(&e);                                                                                                  \
        test_fail(__FILE__, __LINE__, "fixture did not start");                                                        \
        return;                                                                                                        \
    }

static void create_pod(struct env *e, const char *name) {
    json_t *p = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Pod", "metadata", "name", name);
    if (store_create(e->f.store, "pods", "default", p, NULL)) test_fail(__FILE__, __LINE__, "create %s", name);
    json_decref(p);
}

static uint64_t counter(struct env *e) {
    uint64_t rv = 0;
    store_current_rv(e->f.store, &rv);
    return rv;
}

/* The pod's spec.nodeName as stored ("" when none). */
static const char *node_of(struct env *e, const char *name, char *buf, size_t cap) {
    json_t *p = NULL;
    buf[0] = '\0';
    if (!store_get(e->f.store, "pods", "default", name, &p))
        snprintf(buf, cap, "%s", json_string_value(json_object_get(json_object_get(p, "spec"), "nodeName")) ?: "");
    json_decref(p);
    return buf;
}

/* The modify binds the pod to node; with bump set, the first call moves
 * the epoch on first (a new term begun between the read and the write). */
struct bind {
    const char *node;
    struct env *bump;
    int calls;
};

static int bind_fn(void *ud, const json_t *cur, json_t **next, char *err, size_t errlen) {
    struct bind *b = ud;
    (void)err, (void)errlen;
    if (b->bump && b->calls == 0) set_epoch(b->bump, "8");
    b->calls++;
    *next = json_deep_copy(cur);
    json_object_del(json_object_get(*next, "metadata"), "resourceVersion");
    json_object_set_new(*next, "spec", json_pack("{s:s}", "nodeName", b->node));
    return 0;
}

static int event_attach(void *ud, const json_t *next, struct store_text_obj *out) {
    (void)ud;
    const char *pod = json_string_value(json_object_get(json_object_get(next, "metadata"), "name"));
    char *text = NULL;
    int n = asprintf(&text, "{\"kind\":\"Event\",\"metadata\":{\"name\":\"%s.ev\",\"namespace\":\"default\"},"
                     "\"message\":\"bound\"}", pod);
    if (n < 0) return -1;
    char *name = strstr(text, "\"name\":\"") + 8;
    static char ename[64];
    snprintf(ename, sizeof ename, "%.*s", (int)(strchr(name, '"') - name), name);
    *out = (struct store_text_obj){.resource = "events", .ns = "default", .name = ename, .text = text,
                                   .len = (size_t)n, .split = (size_t)(strstr(text, "},\"message\"") - text)};
    return 0;
}

struct got {
    int calls, rc, arc;
    uint64_t arv;
    char err[512];
};

static void on_done(void *ud, const struct store_result *r) {
    struct got *g = ud;
    g->calls++;
    g->rc = r->rc;
    g->arc = r->attached_rc;
    g->arv = r->attached_rv;
    snprintf(g->err, sizeof g->err, "%s", r->err);
}

static void run_until(uv_loop_t *loop, const int *calls, int want) {
    for (int i = 0; i < 20000 && *calls < want; i++) uv_run(loop, UV_RUN_ONCE);
}

TEST(store_fence_sync_stale_refused_current_and_none_written) {
    WITH_ENV(e);
    char node[64];
    create_pod(&e, "p");
    set_epoch(&e, "5");
    uint64_t before = counter(&e);
    struct bind b = {.node = "n1"};
    struct store_fence stale = {EPOCH_KEY, "4"}, cur = {EPOCH_KEY, "5"};
    json_t *out = NULL;
    CHECK_I64(store_modify_fenced(e.f.store, "pods", "default", "p", bind_fn, &b, &stale, &out, NULL), STORE_EFENCED);
    CHECK_STR(store_errmsg(e.f.store), EPOCH_KEY " holds 5");
    CHECK(out == NULL);
    CHECK_I64(store_http_code(STORE_EFENCED), 409);
    CHECK_STR(store_reason(STORE_EFENCED), "Conflict");
    CHECK_I64(counter(&e), before); /* nothing written, no version used */
    CHECK_STR(node_of(&e, "p", node, sizeof node), "");
    set_epoch(&e, NULL); /* no term ever begun: a fenced write is refused all the same */
    CHECK_I64(store_modify_fenced(e.f.store, "pods", "default", "p", bind_fn, &b, &stale, NULL, NULL), STORE_EFENCED);
    CHECK_STR(store_errmsg(e.f.store), EPOCH_KEY " holds nothing");
    set_epoch(&e, "5");
    CHECK_I64(store_modify_fenced(e.f.store, "pods", "default", "p", bind_fn, &b, &cur, &out, NULL), 0);
    CHECK_STR(json_string_value(json_object_get(json_object_get(out, "spec"), "nodeName")), "n1");
    json_decref(out);
    CHECK_I64(counter(&e), before + 1);
    b.node = "n2"; /* no fence: as store_modify */
    CHECK_I64(store_modify_fenced(e.f.store, "pods", "default", "p", bind_fn, &b, NULL, NULL, NULL), 0);
    CHECK_STR(node_of(&e, "p", node, sizeof node), "n2");
    struct store_fence bad[] = {{EPOCH_KEY, ""}, {"", "5"}, {EPOCH_KEY, "123456789012345678901234"}, {NULL, "5"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK_I64(store_modify_fenced(e.f.store, "pods", "default", "p", bind_fn, &b, &bad[i], NULL, NULL), -EINVAL);
    env_stop(&e);
}

TEST(store_fence_async_refuses_write_and_its_attached_create) {
    WITH_ENV(e);
    char node[64];
    create_pod(&e, "p");
    set_epoch(&e, "7");
    uint64_t before = counter(&e);
    struct bind b = {.node = "n1"};
    struct got g = {0};
    char err[256];
    struct store_fence stale = {EPOCH_KEY, "6"};
    CHECK_I64(store_async_modify_fenced(e.a, "pods", "default", "p", bind_fn, event_attach, &stale, &b, on_done, &g,
                                          err, sizeof err), 0);
    run_until(&e.loop, &g.calls, 1);
    CHECK_I64(g.calls, 1);
    CHECK_I64(g.rc, STORE_EFENCED);
    CHECK_STR(g.err, EPOCH_KEY " holds 7");
    CHECK_I64(b.calls, 1); /* not a lost race: not read and tried again */
    CHECK_I64(counter(&e), before);
    CHECK_STR(node_of(&e, "p", node, sizeof node), "");
    json_t *ev = NULL;
    CHECK_I64(store_get(e.f.store, "events", "default", "p.ev", &ev), -ENOENT);
    struct store_fence cur = {EPOCH_KEY, "7"};
    g = (struct got){0};
    CHECK_I64(store_async_modify_fenced(e.a, "pods", "default", "p", bind_fn, event_attach, &cur, &b, on_done, &g,
                                          err, sizeof err), 0);
    run_until(&e.loop, &g.calls, 1);
    CHECK_I64(g.rc, 0);
    CHECK_I64(g.arc, 0);
    CHECK_I64(g.arv, before + 2); /* the write, then its Event */
    CHECK_STR(node_of(&e, "p", node, sizeof node), "n1");
    CHECK_I64(store_get(e.f.store, "events", "default", "p.ev", &ev), 0);
    json_decref(ev);
    struct store_fence bad = {EPOCH_KEY, ""};
    CHECK_I64(store_async_modify_fenced(e.a, "pods", "default", "p", bind_fn, NULL, &bad, &b, on_done, &g, err,
                                          sizeof err), -EINVAL);
    env_stop(&e);
}

/* The check is the write's: a term that begins after the object was read
 * and the write decided (here: inside fn) still refuses it. */
TEST(store_fence_async_new_term_between_read_and_write) {
    WITH_ENV(e);
    char node[64];
    create_pod(&e, "p");
    set_epoch(&e, "7");
    struct bind b = {.node = "n1", .bump = &e};
    struct got g = {0};
    char err[256];
    struct store_fence fence = {EPOCH_KEY, "7"};
    CHECK_I64(store_async_modify_fenced(e.a, "pods", "default", "p", bind_fn, NULL, &fence, &b, on_done, &g, err,
                                          sizeof err), 0);
    run_until(&e.loop, &g.calls, 1);
    CHECK_I64(g.rc, STORE_EFENCED);
    CHECK_STR(g.err, EPOCH_KEY " holds 8");
    CHECK_STR(node_of(&e, "p", node, sizeof node), "");
    env_stop(&e);
}

/* One turn's writes go in one script call: a stale one, a current one and
 * an unfenced one each get their own outcome. */
TEST(store_fence_async_batch_each_its_own) {
    WITH_ENV(e);
    char node[64];
    const char *names[] = {"s0", "c0", "u0", "s1", "c1", "u1"};
    for (size_t i = 0; i < 6; i++) create_pod(&e, names[i]);
    set_epoch(&e, "3");
    uint64_t before = counter(&e);
    struct store_fence stale = {EPOCH_KEY, "2"}, cur = {EPOCH_KEY, "3"};
    struct bind b = {.node = "n1"};
    struct got g[6] = {{0}};
    char err[256];
    int done = 0;
    for (size_t i = 0; i < 6; i++) {
        const struct store_fence *f = names[i][0] == 's' ? &stale : names[i][0] == 'c' ? &cur : NULL;
        CHECK_I64(store_async_modify_fenced(e.a, "pods", "default", names[i], bind_fn, i % 2 ? event_attach : NULL,
                                              f, &b, on_done, &g[i], err, sizeof err), 0);
    }
    for (int k = 0; k < 20000 && done < 6; k++) {
        uv_run(&e.loop, UV_RUN_ONCE);
        done = 0;
        for (size_t i = 0; i < 6; i++) done += g[i].calls;
    }
    for (size_t i = 0; i < 6; i++) {
        bool refused = names[i][0] == 's';
        CHECK_I64(g[i].rc, refused ? STORE_EFENCED : 0);
        CHECK_STR(node_of(&e, names[i], node, sizeof node), refused ? "" : "n1");
    }
    CHECK_I64(counter(&e), before + 4 + 2); /* four writes, two of them with an Event (c0 and u1) */
    env_stop(&e);
}
