/* Integration tests of the store's attached creates (store_async_modify_attach)
 * against a real redis-server: a create written as text, stored in the same
 * script call as a modify's write and only with it, taking the version after
 * it; refused alone (name taken, namespace missing or being deleted) without
 * a gap in the versions; made again after a lost race; many in one batch
 * beside plain writes of its resource; not acknowledged with its write.
 *
 * And fenced writes (store_modify_fenced, store_async_modify_fenced): a
 * write made only while a Redis key (a lease's epoch key) holds the value it
 * names, checked in the write's own script call. A stale value is refused
 * (STORE_EFENCED, nothing written, not even its attached create, no version
 * used), the current one and no fence at all are written; a new term that
 * begins between the read and the write is seen; in one batch each write
 * has its own outcome. */
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

struct env {
    struct redis_fixture f;
    uv_loop_t loop;
    struct store_async *a;
    /* what the hook saw, in order */
    int nhook;
    char hres[256][16];
    uint64_t hrv[256];
    bool hobj[256];
    char hjson[4][1024]; /* the first ones' bytes */
};

static void hook(void *ud, const char *resource, const char *ns, enum store_event_type type, uint64_t rv,
                 const json_t *obj, const char *json, size_t len) {
    struct env *e = ud;
    (void)ns, (void)type;
    if (e->nhook >= 256) return;
    snprintf(e->hres[e->nhook], sizeof e->hres[0], "%s", resource);
    e->hrv[e->nhook] = rv;
    e->hobj[e->nhook] = obj != NULL;
    if (e->nhook < 4) snprintf(e->hjson[e->nhook], sizeof e->hjson[0], "%.*s", (int)len, json ? json : "");
    e->nhook++;
}

static int env_start(struct env *e, const struct store_options *opt) {
    memset(e, 0, sizeof *e);
    if (redis_fixture_start(&e->f, NULL)) return -1;
    uv_loop_init(&e->loop);
    if (store_async_open(&e->loop, "127.0.0.1", e->f.proc.port, opt, &e->a)) {
        redis_fixture_stop(&e->f);
        return -1;
    }
    store_async_set_write_hook(e->a, hook, e);
    json_t *ns = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Namespace", "metadata", "name", "default");
    int rc = store_create(e->f.store, "namespaces", "", ns, NULL);
    json_decref(ns);
    return rc;
}

static void env_stop(struct env *e) {
    store_async_close(e->a);
    uv_run(&e->loop, UV_RUN_DEFAULT);
    uv_loop_close(&e->loop);
    redis_fixture_stop(&e->f);
}

#define WITH_ENV(e, opt)                                                                                               \
    struct env e;                                                                                                      \
    if (env_start(&e, opt)) {                                                                                          \
        env_stop(&e);                                                                                                  \
        test_fail(__FILE__, __LINE__, "fixture did not start");                                                        \
        return;                                                                                                        \
    }

struct got {
    int calls, rc, arc;
    uint64_t rv, arv;
    char aerr[256], err[256];
};

static void on_done(void *ud, const struct store_result *r) {
    struct got *g = ud;
    g->calls++;
    g->rc = r->rc;
    g->rv = r->rv;
    g->arv = r->attached_rv;
    g->arc = r->attached_rc;
    snprintf(g->aerr, sizeof g->aerr, "%s", r->attached_err ? r->attached_err : "(null)");
    snprintf(g->err, sizeof g->err, "%s", r->err);
}

static void run_until(uv_loop_t *loop, const int *calls, int want) {
    for (int i = 0; i < 20000 && *calls < want; i++) uv_run(loop, UV_RUN_ONCE);
}

/* The modify binds the pod to a node; attach makes a "note" Event for it. */
struct bind {
    int fn_calls, attach_calls;
    const char *ns;    /* the Event's namespace ("default" unless set) */
    char ename[64];    /* the Event's name, fixed by the test */
    const char *stale; /* a resourceVersion precondition that does not hold */
    struct store *racer; /* the first fn call writes the pod first (a lost race) */
    int bump_port;       /* the first fn call moves the epoch on first (a new term begun meanwhile) */
};

static void set_epoch(int port, const char *v);

static int bind_fn(void *ud, const json_t *cur, json_t **next, char *err, size_t errlen) {
    struct bind *b = ud;
    (void)err, (void)errlen;
    if (b->bump_port && b->fn_calls == 0) set_epoch(b->bump_port, "8");
    if (b->racer && b->fn_calls++ == 0) {
        json_t *other = json_deep_copy(cur);
        json_object_set_new(other, "status", json_pack("{s:s}", "phase", "Other"));
        store_update(b->racer, "pods", "default", other, NULL, NULL);
        json_decref(other);
    } else if (!b->racer) {
        b->fn_calls++;
    }
    *next = json_deep_copy(cur);
    json_t *md = json_object_get(*next, "metadata");
    if (b->stale) json_object_set_new(md, "resourceVersion", json_string(b->stale));
    else json_object_del(md, "resourceVersion");
    json_object_set_new(*next, "spec", json_pack("{s:s}", "nodeName", "n1"));
    json_object_set_new(*next, "status", json_pack("{s:s}", "message", b->ename)); /* a change each time */
    return 0;
}

static int note_attach(void *ud, const json_t *next, struct store_text_obj *out) {
    struct bind *b = ud;
    b->attach_calls++;
    const char *pod = json_string_value(json_object_get(json_object_get(next, "metadata"), "name"));
    const char *ns = b->ns ? b->ns : "default";
    char *text = NULL;
    int n = asprintf(&text, "{\"kind\":\"Event\",\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\"},\"message\":"
                     "\"bound %s\",\"count\":1}", b->ename, ns, pod);
    if (n < 0) return -1;
    *out = (struct store_text_obj){.resource = "events", .ns = ns, .name = b->ename, .text = text,
                                   .len = (size_t)n, .split = (size_t)(strstr(text, "},\"message\"") - text)};
    return 0;
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

static long events_stored(struct env *e) {
    struct store_list l = {0};
    if (store_list(e->f.store, "events", "", 0, NULL, &l)) return -1;
    long n = (long)json_array_size(l.items);
    store_list_free(&l);
    return n;
}

TEST(store_attach_stored_with_the_write) {
    WITH_ENV(e, NULL);
    create_pod(&e, "p");
    uint64_t before = counter(&e);
    struct bind b = {.ename = "p.1"};
    struct got g = {0};
    char err[256];
    REQUIRE_I64(store_async_modify_attach(e.a, "pods", "default", "p", bind_fn, note_attach, &b, on_done, &g, err,
                                          sizeof err), 0);
    run_until(&e.loop, &g.calls, 1);
    REQUIRE_I64(g.rc, 0);
    CHECK_I64(g.arc, 0);
    CHECK_I64(g.rv, before + 1);
    CHECK_I64(g.arv, before + 2); /* the version right after the write's */
    CHECK_I64(counter(&e), before + 2);
    /* the hook: the write, then the create (as text, no object) */
    REQUIRE_I64(e.nhook, 2);
    CHECK_STR(e.hres[0], "pods");
    CHECK_I64(e.hrv[0], before + 1);
    CHECK(e.hobj[0]);
    CHECK_STR(e.hres[1], "events");
    CHECK_I64(e.hrv[1], before + 2);
    CHECK(!e.hobj[1]);
    /* what the store sets goes at the end of metadata, in store_create's order */
    CHECK_HAS(e.hjson[1], "{\"kind\":\"Event\",\"metadata\":{\"name\":\"p.1\",\"namespace\":\"default\",\"uid\":\"");
    char tail[128];
    snprintf(tail, sizeof tail, "\"generation\":1,\"resourceVersion\":\"%llu\"},\"message\":\"bound p\",\"count\":1}",
             (unsigned long long)g.arv);
    CHECK_HAS(e.hjson[1], tail);
    CHECK_HAS(e.hjson[1], "\"creationTimestamp\":\"20");
    /* stored as reported: get, list, history */
    json_t *ev = NULL, *hooked = json_loads(e.hjson[1], 0, NULL);
    REQUIRE_I64(store_get(e.f.store, "events", "default", "p.1", &ev), 0);
    CHECK(hooked && json_equal(ev, hooked));
    CHECK_I64(strlen(json_string_value(json_object_get(json_object_get(ev, "metadata"), "uid"))), 36);
    json_decref(ev);
    json_decref(hooked);
    CHECK_I64(events_stored(&e), 1);
    struct store_history h = {0};
    REQUIRE_I64(store_history_after(e.f.store, "events", "", 0, 100, &h), 0);
    REQUIRE_I64(h.n, 1);
    CHECK_I64(h.events[0].type, STORE_ADDED);
    CHECK_I64(h.events[0].resource_version, g.arv);
    CHECK_STR(h.events[0].name, "p.1");
    store_history_free(&h);
    /* and the pod's history holds its write at the version before */
    REQUIRE_I64(store_history_after(e.f.store, "pods", "", before, 100, &h), 0);
    REQUIRE_I64(h.n, 1);
    CHECK_I64(h.events[0].resource_version, g.rv);
    store_history_free(&h);
    env_stop(&e);
}

TEST(store_attach_never_without_its_write) {
    WITH_ENV(e, NULL);
    create_pod(&e, "p");
    uint64_t before = counter(&e);
    char err[256];
    /* a write refused (its precondition does not hold): no create either */
    struct bind b = {.ename = "p.1", .stale = "1"};
    struct got g = {0};
    REQUIRE_I64(store_async_modify_attach(e.a, "pods", "default", "p", bind_fn, note_attach, &b, on_done, &g, err,
                                          sizeof err), 0);
    run_until(&e.loop, &g.calls, 1);
    CHECK_I64(g.rc, STORE_ECONFLICT);
    CHECK_I64(g.arv, 0);
    CHECK_I64(counter(&e), before);
    CHECK_I64(events_stored(&e), 0);
    CHECK_I64(e.nhook, 0);
    /* a race lost: the pod is read again and both are made again; one Event */
    struct bind r = {.ename = "p.2", .racer = e.f.store};
    struct got gr = {0};
    REQUIRE_I64(store_async_modify_attach(e.a, "pods", "default", "p", bind_fn, note_attach, &r, on_done, &gr, err,
                                          sizeof err), 0);
    run_until(&e.loop, &gr.calls, 1);
    CHECK_I64(gr.rc, 0);
    CHECK_I64(r.fn_calls, 2);
    CHECK_I64(r.attach_calls, 2);
    CHECK_I64(gr.rv, before + 2); /* the racer's write took before + 1 */
    CHECK_I64(gr.arv, before + 3);
    CHECK_I64(events_stored(&e), 1);
    /* no attach function: the write alone */
    struct bind plain = {.ename = "p.3"};
    struct got g2 = {0};
    uint64_t now = counter(&e);
    REQUIRE_I64(store_async_modify(e.a, "pods", "default", "p", bind_fn, &plain, on_done, &g2, err, sizeof err), 0);
    run_until(&e.loop, &g2.calls, 1);
    CHECK_I64(g2.rc, 0);
    CHECK_I64(g2.rv, now + 1);
    CHECK_I64(g2.arv, 0);
    CHECK_I64(g2.arc, 0);
    CHECK_I64(plain.attach_calls, 0);
    CHECK_I64(counter(&e), now + 1);
    CHECK_I64(events_stored(&e), 1);
    env_stop(&e);
}

TEST(store_attach_refused_alone_without_a_gap) {
    WITH_ENV(e, NULL);
    char err[256];
    create_pod(&e, "p");
    /* the name is taken */
    json_t *taken = json_pack("{s:s,s:{s:s}}", "kind", "Event", "metadata", "name", "p.1");
    REQUIRE_I64(store_create(e.f.store, "events", "default", taken, NULL), 0);
    json_decref(taken);
    uint64_t before = counter(&e);
    struct bind b = {.ename = "p.1"};
    struct got g = {0};
    REQUIRE_I64(store_async_modify_attach(e.a, "pods", "default", "p", bind_fn, note_attach, &b, on_done, &g, err,
                                          sizeof err), 0);
    run_until(&e.loop, &g.calls, 1);
    CHECK_I64(g.rc, 0); /* the write is stored all the same */
    CHECK_I64(g.rv, before + 1);
    CHECK_I64(g.arc, -EEXIST);
    CHECK_I64(g.arv, 0);
    CHECK_HAS(g.aerr, "already exists");
    CHECK_I64(counter(&e), before + 1); /* no version taken by the refused create */
    REQUIRE_I64(e.nhook, 1);
    CHECK_STR(e.hres[0], "pods");
    /* the namespace does not exist */
    struct bind m = {.ename = "p.2", .ns = "nowhere"};
    struct got gm = {0};
    REQUIRE_I64(store_async_modify_attach(e.a, "pods", "default", "p", bind_fn, note_attach, &m, on_done, &gm, err,
                                          sizeof err), 0);
    run_until(&e.loop, &gm.calls, 1);
    CHECK_I64(gm.rc, 0);
    CHECK_I64(gm.arc, STORE_NO_NAMESPACE);
    CHECK_I64(counter(&e), before + 2);
    /* the namespace is being deleted */
    REQUIRE_I64(store_ns_set_terminating(e.f.store, "default"), 0);
    before = counter(&e);
    struct bind t = {.ename = "p.3"};
    struct got gt = {0};
    REQUIRE_I64(store_async_modify_attach(e.a, "pods", "default", "p", bind_fn, note_attach, &t, on_done, &gt, err,
                                          sizeof err), 0);
    run_until(&e.loop, &gt.calls, 1);
    CHECK_I64(gt.rc, 0);
    CHECK_I64(gt.arc, STORE_NS_TERMINATING);
    CHECK_I64(counter(&e), before + 1);
    CHECK_I64(events_stored(&e), 1); /* the one the test made */
    env_stop(&e);
}

/* Many attached creates in one turn, beside plain creates of their resource
 * and plain writes of the pods: one batch per resource, every write once,
 * versions gapless, each Event right after its pod's write. */
TEST(store_attach_many_in_one_turn) {
    WITH_ENV(e, NULL);
    enum { N = 40 };
    static struct bind b[N];
    static struct got g[N], gc[N];
    char err[256], name[32];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "p%d", i);
        create_pod(&e, name);
    }
    uint64_t before = counter(&e);
    for (int i = 0; i < N; i++) { /* one turn: more than the early-send threshold (32) */
        snprintf(name, sizeof name, "p%d", i);
        b[i] = (struct bind){0};
        snprintf(b[i].ename, sizeof b[i].ename, "p%d.e", i);
        REQUIRE_I64(store_async_modify_attach(e.a, "pods", "default", name, bind_fn, i % 3 ? note_attach : NULL,
                                              &b[i], on_done, &g[i], err, sizeof err), 0);
        json_t *ev = json_pack("{s:s,s:{s:s}}", "kind", "Event", "metadata", "name", name);
        REQUIRE_I64(store_async_create(e.a, "events", "default", ev, true, on_done, &gc[i], err, sizeof err), 0);
    }
    for (int i = 0; i < N; i++) run_until(&e.loop, &g[i].calls, 1), run_until(&e.loop, &gc[i].calls, 1);
    int attached = 0;
    for (int i = 0; i < N; i++) {
        CHECK_I64(g[i].rc, 0);
        CHECK_I64(gc[i].rc, 0);
        if (i % 3) {
            CHECK_I64(g[i].arv, g[i].rv + 1);
            attached++;
        } else {
            CHECK_I64(g[i].arv, 0);
        }
    }
    uint64_t total = (uint64_t)(2 * N + attached);
    CHECK_I64(counter(&e), before + total);
    /* the hook saw each version once, in order */
    CHECK_I64(e.nhook, (long long)total);
    for (int i = 1; i < e.nhook; i++) CHECK_I64(e.hrv[i], e.hrv[i - 1] + 1);
    CHECK_I64(events_stored(&e), N + attached);
    struct store_history h = {0};
    REQUIRE_I64(store_history_after(e.f.store, "events", "", before, 1000, &h), 0);
    CHECK_I64(h.n, N + attached);
    for (size_t i = 1; i < h.n; i++) CHECK(h.events[i].resource_version > h.events[i - 1].resource_version);
    store_history_free(&h);
    env_stop(&e);
}

/* Replicas waited for (none here: WAIT answers 0): the write is not
 * acknowledged, and its attached create is reported to nobody. */
TEST(store_attach_not_acknowledged_with_its_write) {
    struct store_options opt;
    store_options_init(&opt);
    opt.wait_replicas = 1;
    opt.wait_timeout_ms = 20;
    WITH_ENV(e, &opt);
    create_pod(&e, "p");
    struct bind b = {.ename = "p.1"};
    struct got g = {0};
    char err[256];
    REQUIRE_I64(store_async_modify_attach(e.a, "pods", "default", "p", bind_fn, note_attach, &b, on_done, &g, err,
                                          sizeof err), 0);
    run_until(&e.loop, &g.calls, 1);
    CHECK_I64(g.rc, -EIO);
    CHECK_I64(g.arv, 0);
    CHECK_I64(e.nhook, 0);
    /* Redis has both (WAIT does not undo): the Event right after the pod */
    json_t *ev = NULL, *p = NULL;
    REQUIRE_I64(store_get(e.f.store, "events", "default", "p.1", &ev), 0);
    REQUIRE_I64(store_get(e.f.store, "pods", "default", "p", &p), 0);
    const char *erv = json_string_value(json_object_get(json_object_get(ev, "metadata"), "resourceVersion"));
    const char *prv = json_string_value(json_object_get(json_object_get(p, "metadata"), "resourceVersion"));
    CHECK_I64(strtoull(erv, NULL, 10), strtoull(prv, NULL, 10) + 1);
    json_decref(ev);
    json_decref(p);
    env_stop(&e);
}

/* ---- fenced writes ---- */

#define EPOCH_KEY "peloton:placement:epoch"

/* Sets the epoch key (v NULL: deletes it), as a lease's acquisition does. */
static void set_epoch(int port, const char *v) {
    redisContext *c = store_redis_connect("127.0.0.1", port, 2000);
    redisReply *r = !c || c->err ? NULL
                    : v          ? redisCommand(c, "SET %s %s", EPOCH_KEY, v)
                                 : redisCommand(c, "DEL %s", EPOCH_KEY);
    if (!r || r->type == REDIS_REPLY_ERROR) test_fail(__FILE__, __LINE__, "cannot set the epoch");
    if (r) freeReplyObject(r);
    if (c) redisFree(c);
}

/* The pod's spec.nodeName as stored ("" when none). */
static const char *node_of(struct env *e, const char *name, char *buf, size_t cap) {
    json_t *p = NULL;
    buf[0] = '\0';
    if (!store_get(e->f.store, "pods", "default", name, &p)) {
        const char *n = json_string_value(json_object_get(json_object_get(p, "spec"), "nodeName"));
        snprintf(buf, cap, "%s", n ? n : "");
    }
    json_decref(p);
    return buf;
}

TEST(store_fence_sync_stale_refused_current_and_none_written) {
    WITH_ENV(e, NULL);
    int port = e.f.proc.port;
    char node[64];
    create_pod(&e, "p");
    set_epoch(port, "5");
    uint64_t before = counter(&e);
    struct bind b = {.ename = "p.1"};
    struct store_fence stale = {EPOCH_KEY, "4"}, cur = {EPOCH_KEY, "5"};
    json_t *out = NULL;
    CHECK_I64(store_modify_fenced(e.f.store, "pods", "default", "p", bind_fn, &b, &stale, &out, NULL), STORE_EFENCED);
    CHECK_STR(store_errmsg(e.f.store), EPOCH_KEY " holds 5");
    CHECK(out == NULL);
    CHECK_I64(store_http_code(STORE_EFENCED), 409);
    CHECK_STR(store_reason(STORE_EFENCED), "Conflict");
    CHECK_I64(counter(&e), before); /* nothing written, no version used */
    CHECK_STR(node_of(&e, "p", node, sizeof node), "");
    set_epoch(port, NULL); /* no term ever begun: a fenced write is refused all the same */
    CHECK_I64(store_modify_fenced(e.f.store, "pods", "default", "p", bind_fn, &b, &stale, NULL, NULL), STORE_EFENCED);
    CHECK_STR(store_errmsg(e.f.store), EPOCH_KEY " holds nothing");
    set_epoch(port, "5");
    CHECK_I64(store_modify_fenced(e.f.store, "pods", "default", "p", bind_fn, &b, &cur, &out, NULL), 0);
    CHECK_STR(json_string_value(json_object_get(json_object_get(out, "spec"), "nodeName")), "n1");
    json_decref(out);
    CHECK_I64(counter(&e), before + 1);
    snprintf(b.ename, sizeof b.ename, "p.2"); /* no fence: as store_modify */
    CHECK_I64(store_modify_fenced(e.f.store, "pods", "default", "p", bind_fn, &b, NULL, NULL, NULL), 0);
    CHECK_I64(counter(&e), before + 2);
    struct store_fence bad[] = {{EPOCH_KEY, ""}, {"", "5"}, {EPOCH_KEY, "123456789012345678901234"}, {NULL, "5"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK_I64(store_modify_fenced(e.f.store, "pods", "default", "p", bind_fn, &b, &bad[i], NULL, NULL), -EINVAL);
    env_stop(&e);
}

TEST(store_fence_async_refuses_write_and_its_attached_create) {
    WITH_ENV(e, NULL);
    char node[64], err[256];
    create_pod(&e, "p");
    set_epoch(e.f.proc.port, "7");
    uint64_t before = counter(&e);
    struct bind b = {.ename = "p.1"};
    struct got g = {0};
    struct store_fence stale = {EPOCH_KEY, "6"}, cur = {EPOCH_KEY, "7"};
    CHECK_I64(store_async_modify_fenced(e.a, "pods", "default", "p", bind_fn, note_attach, &stale, &b, on_done, &g, err,
                                        sizeof err), 0);
    run_until(&e.loop, &g.calls, 1);
    CHECK_I64(g.calls, 1);
    CHECK_I64(g.rc, STORE_EFENCED);
    CHECK_STR(g.err, EPOCH_KEY " holds 7");
    CHECK_I64(b.fn_calls, 1); /* not a lost race: not read and tried again */
    CHECK_I64(counter(&e), before);
    CHECK_I64(e.nhook, 0);
    CHECK_STR(node_of(&e, "p", node, sizeof node), "");
    CHECK_I64(events_stored(&e), 0);
    g = (struct got){0};
    CHECK_I64(store_async_modify_fenced(e.a, "pods", "default", "p", bind_fn, note_attach, &cur, &b, on_done, &g, err,
                                        sizeof err), 0);
    run_until(&e.loop, &g.calls, 1);
    CHECK_I64(g.rc, 0);
    CHECK_I64(g.arc, 0);
    CHECK_I64(g.arv, before + 2); /* the write, then its Event */
    CHECK_STR(node_of(&e, "p", node, sizeof node), "n1");
    CHECK_I64(events_stored(&e), 1);
    struct store_fence bad = {EPOCH_KEY, ""};
    CHECK_I64(store_async_modify_fenced(e.a, "pods", "default", "p", bind_fn, NULL, &bad, &b, on_done, &g, err,
                                        sizeof err), -EINVAL);
    env_stop(&e);
}

/* The check is the write's: a term that begins after the object was read
 * and the write decided (here: inside fn) still refuses it. */
TEST(store_fence_async_new_term_between_read_and_write) {
    WITH_ENV(e, NULL);
    char node[64], err[256];
    create_pod(&e, "p");
    set_epoch(e.f.proc.port, "7");
    struct bind b = {.ename = "p.1", .bump_port = e.f.proc.port};
    struct got g = {0};
    struct store_fence fence = {EPOCH_KEY, "7"};
    CHECK_I64(store_async_modify_fenced(e.a, "pods", "default", "p", bind_fn, NULL, &fence, &b, on_done, &g, err,
                                        sizeof err), 0);
    run_until(&e.loop, &g.calls, 1);
    CHECK_I64(g.rc, STORE_EFENCED);
    CHECK_STR(g.err, EPOCH_KEY " holds 8");
    CHECK_STR(node_of(&e, "p", node, sizeof node), "");
    env_stop(&e);
}

/* One turn's writes go in one script call: stale, current and unfenced
 * ones, some with an attached create, each get their own outcome. */
TEST(store_fence_async_batch_each_its_own) {
    WITH_ENV(e, NULL);
    enum { N = 6 };
    static const char *const names[N] = {"s0", "c0", "u0", "s1", "c1", "u1"};
    static struct bind b[N];
    static struct got g[N];
    char node[64], err[256];
    for (int i = 0; i < N; i++) create_pod(&e, names[i]);
    set_epoch(e.f.proc.port, "3");
    uint64_t before = counter(&e);
    struct store_fence stale = {EPOCH_KEY, "2"}, cur = {EPOCH_KEY, "3"};
    for (int i = 0; i < N; i++) {
        b[i] = (struct bind){0};
        snprintf(b[i].ename, sizeof b[i].ename, "%s.e", names[i]);
        const struct store_fence *f = names[i][0] == 's' ? &stale : names[i][0] == 'c' ? &cur : NULL;
        CHECK_I64(store_async_modify_fenced(e.a, "pods", "default", names[i], bind_fn, i % 2 ? note_attach : NULL, f,
                                            &b[i], on_done, &g[i], err, sizeof err), 0);
    }
    for (int i = 0; i < N; i++) run_until(&e.loop, &g[i].calls, 1);
    for (int i = 0; i < N; i++) {
        bool refused = names[i][0] == 's';
        CHECK_I64(g[i].rc, refused ? STORE_EFENCED : 0);
        CHECK_STR(node_of(&e, names[i], node, sizeof node), refused ? "" : "n1");
    }
    CHECK_I64(counter(&e), before + 4 + 2); /* four writes, two of them with an Event (c0 and u1) */
    CHECK_I64(events_stored(&e), 2);
    env_stop(&e);
}
