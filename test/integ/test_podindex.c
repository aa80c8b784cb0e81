/* The API server's index of pods by node (apiserver-shim/shim_podindex.c)
 * against a real redis-server: built from the store, kept from the history
 * (a pod bound, moved, deleted, created after the build), the same after a
 * restart, and rebuilt when the history it needed was compacted. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "redis_fixture.h"
#include "shim.h"
#include "store.h"
#include "test.h"

static json_t *pod(const char *name, const char *node) {
    json_t *p = json_pack("{s:s,s:s,s:{s:s},s:{s:[{s:s,s:s}]}}", "apiVersion", "v1", "kind", "Pod", "metadata",
                          "name", name, "spec", "containers", "name", "c", "image", "x");
    if (node) json_object_set_new(json_object_get(p, "spec"), "nodeName", json_string(node));
    return p;
}

static int create(struct store *st, const char *ns, const char *name, const char *node) {
    json_t *p = pod(name, node), *out = NULL;
    int rc = store_create(st, "pods", ns, p, &out);
    json_decref(p);
    json_decref(out);
    return rc;
}

/* Sets (or clears, node NULL) a pod's spec.nodeName. */
static int move(struct store *st, const char *ns, const char *name, const char *node) {
    json_t *cur = NULL, *out = NULL;
    int rc = store_get(st, "pods", ns, name, &cur), deleted = 0;
    if (rc) return rc;
    json_t *spec = json_object_get(cur, "spec");
    if (node) json_object_set_new(spec, "nodeName", json_string(node));
    else json_object_del(spec, "nodeName");
    json_object_del(json_object_get(cur, "metadata"), "resourceVersion");
    rc = store_update(st, "pods", ns, cur, &out, &deleted);
    json_decref(cur);
    json_decref(out);
    return rc;
}

static int del(struct store *st, const char *ns, const char *name) {
    json_t *out = NULL;
    int deleted = 0, rc = store_delete(st, "pods", ns, name, NULL, &out, &deleted);
    json_decref(out);
    return rc;
}

static void until_ready(uv_loop_t *loop, struct shim *s, uint64_t builds) {
    for (int i = 0; i < 20000 && podindex_builds(s->pidx) < builds; i++) uv_run(loop, UV_RUN_NOWAIT);
}

/* The term's pods as "ns/name,ns/name,..." (in order), or "EAGAIN"/"ERR". */
static char *names_in(struct pod_index *x, const char *node, const char *ns, uint64_t *rv) {
    json_t *items = NULL;
    uint64_t v = 0;
    int rc = podindex_list(x, node, ns, &items, &v);
    if (rc) return strdup(rc == -EAGAIN ? "EAGAIN" : "ERR");
    size_t cap = 4096, n = 0, i;
    char *out = calloc(1, cap);
    json_t *it;
    json_array_foreach(items, i, it) {
        json_t *md = json_object_get(it, "metadata");
        n += (size_t)snprintf(out + n, cap - n, "%s%s/%s", i ? "," : "",
                              json_string_value(json_object_get(md, "namespace")),
                              json_string_value(json_object_get(md, "name")));
    }
    json_decref(items);
    if (rv) *rv = v;
    return out;
}

static char *names(struct shim *s, const char *node, const char *ns, uint64_t *rv) {
    return names_in(s->pidx, node, ns, rv);
}

#define CHECK_TERM(x, term, want)                                                                                      \
    do {                                                                                                               \
        char *got_ = names_in(x, term, "", NULL);                                                                      \
        CHECK_STR(got_, want);                                                                                         \
        free(got_);                                                                                                    \
    } while (0)

#define CHECK_NODE(s, node, ns, want)                                                                                  \
    do {                                                                                                               \
        char *got_ = names(s, node, ns, NULL);                                                                         \
        CHECK_STR(got_, want);                                                                                         \
        free(got_);                                                                                                    \
    } while (0)

static void on_hold(uv_timer_t *t) { (void)t; }

static struct shim *open_shim(struct store *st, uv_loop_t *loop) {
    struct shim_config cfg = {.loop = loop};
    struct shim *s = shim_new(st, &cfg);
    podindex_start(s->pidx);
    return s;
}

static void close_shim(struct shim *s, uv_loop_t *loop) {
    shim_free(s);
    for (int i = 0; i < 100; i++) uv_run(loop, UV_RUN_NOWAIT);
}

TEST(podindex_follows_binds_moves_deletes_and_restarts) {
    struct redis_fixture f;
    struct store_options opt;
    store_options_init(&opt);
    opt.history_max = 1000;
    REQUIRE(redis_fixture_start(&f, &opt) == 0);
    uv_loop_t loop;
    uv_loop_init(&loop);
    char name[32];
    for (int i = 0; i < 30; i++) { /* 10 a node, in two namespaces, and one pending */
        snprintf(name, sizeof name, "p%02d", i);
        CHECK_I64(create(f.store, i % 2 ? "a" : "b", name, i % 3 == 0 ? "n0" : i % 3 == 1 ? "n1" : "n2"), 0);
    }
    CHECK_I64(create(f.store, "a", "pending", NULL), 0);
    struct shim *s = open_shim(f.store, &loop);
    REQUIRE(s && s->pidx);
    until_ready(&loop, s, 1);
    REQUIRE(podindex_ready(s->pidx));
    CHECK_I64((long long)podindex_count(s->pidx, "n0"), 10);
    CHECK_NODE(s, "n0", "", "a/p03,a/p09,a/p15,a/p21,a/p27,b/p00,b/p06,b/p12,b/p18,b/p24");
    CHECK_NODE(s, "n0", "a", "a/p03,a/p09,a/p15,a/p21,a/p27");
    CHECK_NODE(s, "nx", "", "");

    /* changes after the build, the loop not run: the list reads them itself */
    CHECK_I64(move(f.store, "a", "pending", "n0"), 0);  /* bound */
    CHECK_I64(move(f.store, "a", "p03", "n1"), 0);      /* moved away */
    CHECK_I64(del(f.store, "b", "p00"), 0);             /* deleted */
    CHECK_I64(create(f.store, "b", "new", "n0"), 0);    /* created */
    CHECK_I64(move(f.store, "a", "p09", NULL), 0);      /* unbound */
    uint64_t rv = 0, cur = 0;
    char *got = names(s, "n0", "", &rv);
    CHECK_STR(got, "a/p15,a/p21,a/p27,a/pending,b/new,b/p06,b/p12,b/p18,b/p24");
    free(got);
    REQUIRE(store_current_rv(f.store, &cur) == 0);
    CHECK_I64((long long)rv, (long long)cur);
    CHECK_NODE(s, "n1", "a", "a/p01,a/p03,a/p07,a/p13,a/p19,a/p25");
    /* the timer follows too (it does not hold the loop: a timer of the test's does, as the server's handles do) */
    CHECK_I64(del(f.store, "a", "p15"), 0);
    uv_timer_t hold;
    uv_timer_init(&loop, &hold);
    uv_timer_start(&hold, on_hold, 500, 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&hold, NULL);
    CHECK_I64((long long)podindex_count(s->pidx, "n0"), 8);

    /* a restart: built again from Redis, the same */
    close_shim(s, &loop);
    s = open_shim(f.store, &loop);
    until_ready(&loop, s, 1);
    CHECK_NODE(s, "n0", "", "a/p21,a/p27,a/pending,b/new,b/p06,b/p12,b/p18,b/p24");

    /* more writes than the history keeps, unread: rebuilt, then right */
    for (int i = 0; i < 1300; i++) CHECK_I64(move(f.store, "b", "p06", i % 2 ? "n2" : "n0"), 0);
    got = names(s, "n0", "", NULL);
    CHECK_STR(got, "EAGAIN");
    free(got);
    until_ready(&loop, s, 2);
    CHECK_NODE(s, "n0", "", "a/p21,a/p27,a/pending,b/new,b/p12,b/p18,b/p24");
    close_shim(s, &loop);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    redis_fixture_stop(&f);
}

static int create_labeled(struct store *st, const char *name, const char *app, const char *odd) {
    json_t *p = pod(name, "n0"), *out = NULL;
    json_t *labels = json_object();
    if (app) json_object_set_new(labels, "app", json_string(app));
    if (!odd) json_object_set_new(labels, "tier", json_string("web"));
    else json_object_set_new(labels, odd, json_string("v"));
    json_object_set_new(json_object_get(p, "metadata"), "labels", labels);
    int rc = store_create(st, "pods", "a", p, &out);
    json_decref(p);
    json_decref(out);
    return rc;
}

static int relabel(struct store *st, const char *name, const char *app) {
    json_t *cur = NULL, *out = NULL;
    int rc = store_get(st, "pods", "a", name, &cur), deleted = 0;
    if (rc) return rc;
    json_object_set_new(json_object_get(json_object_get(cur, "metadata"), "labels"), "app", json_string(app));
    json_object_del(json_object_get(cur, "metadata"), "resourceVersion");
    rc = store_update(st, "pods", "a", cur, &out, &deleted);
    json_decref(cur);
    json_decref(out);
    return rc;
}

TEST(podindex_by_label_follows_relabels_deletes_and_odd_labels) {
    struct redis_fixture f;
    REQUIRE(redis_fixture_start(&f, NULL) == 0);
    uv_loop_t loop;
    uv_loop_init(&loop);
    char name[32];
    for (int i = 0; i < 9; i++) {
        snprintf(name, sizeof name, "q%d", i);
        CHECK_I64(create_labeled(f.store, name, i % 2 ? "x" : "y", NULL), 0);
    }
    CHECK_I64(create_labeled(f.store, "q9", "x", "odd\001key"), 0); /* a label that cannot be a term */
    CHECK_I64(create_labeled(f.store, "r0", NULL, NULL), 0);
    struct shim *s = open_shim(f.store, &loop);
    podindex_start(s->lidx);
    for (int i = 0; i < 20000 && podindex_builds(s->lidx) < 1; i++) uv_run(&loop, UV_RUN_NOWAIT);
    REQUIRE(podindex_ready(s->lidx));
    CHECK_TERM(s->lidx, "app=x", "a/q1,a/q3,a/q5,a/q7,a/q9");
    CHECK_TERM(s->lidx, "app=y", "a/q0,a/q2,a/q4,a/q6,a/q8");
    CHECK_TERM(s->lidx, "tier=web", "a/q0,a/q1,a/q2,a/q3,a/q4,a/q5,a/q6,a/q7,a/q8,a/r0");
    CHECK_TERM(s->lidx, "app=z", "");
    CHECK_I64(relabel(f.store, "q1", "y"), 0);
    CHECK_I64(del(f.store, "a", "q3"), 0);
    CHECK_I64(create_labeled(f.store, "q10", "x", NULL), 0);
    CHECK_I64(relabel(f.store, "q9", "y"), 0);
    CHECK_TERM(s->lidx, "app=x", "a/q10,a/q5,a/q7");
    CHECK_TERM(s->lidx, "app=y", "a/q0,a/q1,a/q2,a/q4,a/q6,a/q8,a/q9");
    close_shim(s, &loop);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    redis_fixture_stop(&f);
}
