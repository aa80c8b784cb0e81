/* Integration tests of the Redis object store against a real redis-server
 * (one private server per test, started and removed by the fixture). */
#include <hiredis/hiredis.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "redis_fixture.h"
#include "store.h"
#include "store_int.h"
#include "test.h"

static void with_fixture(const struct store_options *o, void (*body)(struct redis_fixture *)) {
    struct redis_fixture f;
    if (redis_fixture_start(&f, o)) {
        test_fail(__FILE__, __LINE__, "fixture did not start");
        return;
    }
    body(&f);
    redis_fixture_stop(&f);
}

static json_t *pod(const char *name, const char *image) {
    return json_pack("{s:s,s:s,s:{s:s},s:{s:[{s:s,s:s}]}}", "apiVersion", "v1", "kind", "Pod",
                     "metadata", "name", name, "spec", "containers", "name", "c", "image", image);
}

static uint64_t rv_of(const json_t *o) {
    const char *s = json_string_value(json_object_get(json_object_get(o, "metadata"), "resourceVersion"));
    return s ? strtoull(s, NULL, 10) : 0;
}

static const char *meta_s(const json_t *o, const char *k) {
    return json_string_value(json_object_get(json_object_get(o, "metadata"), k));
}

static json_int_t gen_of(const json_t *o) {
    return json_integer_value(json_object_get(json_object_get(o, "metadata"), "generation"));
}

static void set_meta(json_t *o, const char *k, json_t *v) {
    json_object_set_new(json_object_get(o, "metadata"), k, v);
}

static uint64_t cur_rv(struct store *s) {
    uint64_t rv = 0;
    CHECK_I64(store_current_rv(s, &rv), 0);
    return rv;
}

/* --- create / get / update / delete -------------------------------------------- */

static void body_crud(struct redis_fixture *f) {
    struct store *s = f->store;
    json_t *p = pod("web-1", "nginx:1"), *out = NULL, *got = NULL;
    REQUIRE_I64(store_create(s, "pods", "default", p, &out), 0);
    CHECK_STR(store_errmsg(s), "");
    CHECK_I64(rv_of(out), 1);
    CHECK_STR(meta_s(out, "namespace"), "default");
    CHECK_I64(gen_of(out), 1);
    const char *uid = meta_s(out, "uid");
    REQUIRE(uid && strlen(uid) == 36);
    CHECK(uid[14] == '4');
    CHECK(strchr("89ab", uid[19]) != NULL);
    const char *ts = meta_s(out, "creationTimestamp");
    CHECK(ts && strlen(ts) == 20 && ts[10] == 'T' && ts[19] == 'Z');
    CHECK(json_object_get(json_object_get(p, "metadata"), "uid") == NULL); /* input untouched */

    CHECK_I64(store_get(s, "pods", "default", "web-1", &got), 0);
    CHECK(json_equal(got, out));
    json_decref(got);

    /* update with the current resourceVersion */
    json_t *upd = json_deep_copy(out);
    json_object_set_new(upd, "status", json_pack("{s:s}", "phase", "Running"));
    json_t *u1 = NULL;
    int deleted = -1;
    CHECK_I64(store_update(s, "pods", "default", upd, &u1, &deleted), 0);
    CHECK_I64(deleted, 0);
    CHECK_I64(rv_of(u1), 2);
    CHECK_STR(meta_s(u1, "uid"), uid);
    CHECK_STR(json_string_value(json_object_get(json_object_get(u1, "status"), "phase")), "Running");

    /* delete */
    json_t *d = NULL;
    CHECK_I64(store_delete(s, "pods", "default", "web-1", NULL, &d, &deleted), 0);
    CHECK_I64(deleted, 1);
    CHECK_I64(rv_of(d), 3);
    CHECK_I64(store_get(s, "pods", "default", "web-1", &got), -ENOENT);
    CHECK(got == NULL);
    CHECK_STR(store_errmsg(s), "pods \"web-1\" not found");
    CHECK_STR(store_reason(-ENOENT), "NotFound");
    CHECK_I64(store_http_code(-ENOENT), 404);
    json_decref(d);
    json_decref(u1);
    json_decref(upd);
    json_decref(out);
    json_decref(p);
}
TEST(store_crud) { with_fixture(NULL, body_crud); }

/* The same store through Redis's Unix-domain socket: "unix:///path" parsed to
 * the path, the connection made there, a write seen over TCP; a path nobody
 * listens on is refused. */
static void body_unix_socket(struct redis_fixture *f) {
    char addr[160], host[128];
    snprintf(addr, sizeof addr, "unix://%s", f->proc.unix_path);
    int port = -1;
    REQUIRE(store_parse_addr(addr, host, sizeof host, &port) == 0);
    CHECK_STR(host, f->proc.unix_path);
    CHECK_I64(port, 0);
    struct store *u = NULL;
    REQUIRE(store_open(host, port, NULL, &u) == 0);
    json_t *p = pod("over-unix", "x"), *got = NULL;
    CHECK_I64(store_create(u, "pods", "default", p, NULL), 0);
    CHECK_I64(store_get(f->store, "pods", "default", "over-unix", &got), 0); /* the TCP connection sees it */
    json_decref(got);
    json_decref(p);
    store_close(u);
    CHECK(store_open("/nonexistent/redis.sock", 0, NULL, &u) < 0);
    CHECK(u == NULL);
}
TEST(store_unix_socket) { with_fixture(NULL, body_unix_socket); }

static void body_exists_notfound(struct redis_fixture *f) {
    struct store *s = f->store;
    json_t *p = pod("a", "x"), *out = NULL;
    CHECK_I64(store_create(s, "pods", "default", p, NULL), 0);
    CHECK_I64(store_create(s, "pods", "default", p, &out), -EEXIST);
    CHECK(out == NULL);
    CHECK_STR(store_errmsg(s), "pods \"a\" already exists");
    CHECK_STR(store_reason(-EEXIST), "AlreadyExists");
    CHECK_I64(cur_rv(s), 1); /* the failed create did not bump the counter */
    /* same name elsewhere is fine */
    CHECK_I64(store_create(s, "pods", "other", p, NULL), 0);
    CHECK_I64(store_create(s, "configmaps", "default", p, NULL), 0);

    json_t *q = pod("missing", "x");
    CHECK_I64(store_update(s, "pods", "default", q, NULL, NULL), -ENOENT);
    CHECK_I64(store_delete(s, "pods", "default", "missing", NULL, NULL, NULL), -ENOENT);
    CHECK_I64(store_get(s, "pods", "nowhere", "a", &out), -ENOENT);
    CHECK_I64(cur_rv(s), 3);
    json_decref(q);
    json_decref(p);
}
TEST(store_exists_notfound) { with_fixture(NULL, body_exists_notfound); }

static void body_conflict(struct redis_fixture *f) {
    struct store *s = f->store;
    json_t *p = pod("c", "x"), *v1 = NULL, *v2 = NULL, *out = NULL;
    REQUIRE_I64(store_create(s, "pods", "ns1", p, &v1), 0);
    /* writer A updates from v1 */
    json_t *a = json_deep_copy(v1);
    json_object_set_new(json_object_get(a, "metadata"), "labels", json_pack("{s:s}", "w", "a"));
    REQUIRE_I64(store_update(s, "pods", "ns1", a, &v2, NULL), 0);
    /* writer B also from v1: stale */
    json_t *b = json_deep_copy(v1);
    json_object_set_new(json_object_get(b, "metadata"), "labels", json_pack("{s:s}", "w", "b"));
    CHECK_I64(store_update(s, "pods", "ns1", b, &out, NULL), STORE_ECONFLICT);
    CHECK(out == NULL);
    CHECK_HAS(store_errmsg(s), "the object has been modified");
    CHECK_STR(store_reason(STORE_ECONFLICT), "Conflict");
    CHECK_I64(store_http_code(STORE_ECONFLICT), 409);
    /* uid precondition */
    json_t *c = json_deep_copy(v2);
    set_meta(c, "uid", json_string("00000000-0000-4000-8000-000000000000"));
    CHECK_I64(store_update(s, "pods", "ns1", c, NULL, NULL), STORE_ECONFLICT);
    CHECK_HAS(store_errmsg(s), "Precondition failed: UID in precondition");
    /* empty resourceVersion: unconditional */
    set_meta(b, "resourceVersion", json_string(""));
    CHECK_I64(store_update(s, "pods", "ns1", b, &out, NULL), 0);
    CHECK(rv_of(out) > rv_of(v2));
    CHECK_STR(json_string_value(json_object_get(json_object_get(json_object_get(out, "metadata"),
                                                                "labels"), "w")), "b");
    json_decref(out);
    /* absent resourceVersion: unconditional as well */
    json_object_del(json_object_get(a, "metadata"), "resourceVersion");
    CHECK_I64(store_update(s, "pods", "ns1", a, NULL, NULL), 0);
    /* a bad resourceVersion string is invalid, not a conflict */
    set_meta(a, "resourceVersion", json_string("12abc"));
    CHECK_I64(store_update(s, "pods", "ns1", a, NULL, NULL), -EINVAL);
    json_decref(a);
    json_decref(b);
    json_decref(c);
    json_decref(v1);
    json_decref(v2);
    json_decref(p);
}
TEST(store_conflict) { with_fixture(NULL, body_conflict); }

static void body_generation(struct redis_fixture *f) {
    struct store *s = f->store;
    json_t *p = pod("g", "img:1"), *o = NULL, *n = NULL;
    REQUIRE_I64(store_create(s, "pods", "default", p, &o), 0);
    CHECK_I64(gen_of(o), 1);
    /* metadata-only change: no bump */
    json_object_set_new(json_object_get(o, "metadata"), "labels", json_pack("{s:s}", "a", "b"));
    REQUIRE_I64(store_update(s, "pods", "default", o, &n, NULL), 0);
    CHECK_I64(gen_of(n), 1);
    json_decref(o); o = n; n = NULL;
    /* status-only change: no bump */
    json_object_set_new(o, "status", json_pack("{s:s}", "phase", "Pending"));
    REQUIRE_I64(store_update(s, "pods", "default", o, &n, NULL), 0);
    CHECK_I64(gen_of(n), 1);
    json_decref(o); o = n; n = NULL;
    /* spec change: bump */
    json_t *spec = json_pack("{s:[{s:s,s:s}]}", "containers", "name", "c", "image", "img:2");
    json_object_set_new(o, "spec", spec);
    REQUIRE_I64(store_update(s, "pods", "default", o, &n, NULL), 0);
    CHECK_I64(gen_of(n), 2);
    /* a user-supplied generation is ignored */
    json_decref(o); o = n; n = NULL;
    set_meta(o, "generation", json_integer(40));
    REQUIRE_I64(store_update(s, "pods", "default", o, &n, NULL), 0);
    CHECK_I64(gen_of(n), 2);
    /* a new top-level field outside metadata/status bumps */
    json_decref(o); o = n; n = NULL;
    json_object_set_new(o, "data", json_pack("{s:s}", "k", "v"));
    REQUIRE_I64(store_update(s, "pods", "default", o, &n, NULL), 0);
    CHECK_I64(gen_of(n), 3);
    /* unchanged: nothing written */
    uint64_t before = cur_rv(s);
    json_decref(o); o = n; n = NULL;
    REQUIRE_I64(store_update(s, "pods", "default", o, &n, NULL), 0);
    CHECK_I64(cur_rv(s), before);
    CHECK_I64(rv_of(n), rv_of(o));
    /* uid and creationTimestamp cannot be changed by update */
    json_t *m = json_deep_copy(n);
    set_meta(m, "creationTimestamp", json_string("1999-01-01T00:00:00Z"));
    set_meta(m, "resourceVersion", json_string(""));
    json_t *k = NULL;
    REQUIRE_I64(store_update(s, "pods", "default", m, &k, NULL), 0);
    CHECK_STR(meta_s(k, "creationTimestamp"), meta_s(n, "creationTimestamp"));
    CHECK_I64(rv_of(k), rv_of(n)); /* equal after restoring: a no-op */
    json_decref(k);
    json_decref(m);
    json_decref(o);
    json_decref(n);
    json_decref(p);
}
TEST(store_generation) { with_fixture(NULL, body_generation); }

static void body_rv_monotonic(struct redis_fixture *f) {
    struct store *s = f->store;
    uint64_t last = 0, seed = 7;
    const char *res[] = {"pods", "nodes", "widgets.example.com", "configmaps"};
    char name[32];
    for (int i = 0; i < 60; i++) {
        const char *r = res[test_range(&seed, 0, 3)];
        const char *ns = !strcmp(r, "nodes") ? "" : (i % 2 ? "a" : "b");
        snprintf(name, sizeof name, "o-%d", i);
        json_t *p = pod(name, "x"), *o = NULL;
        REQUIRE_I64(store_create(s, r, ns, p, &o), 0);
        CHECK(rv_of(o) > last);
        last = rv_of(o);
        if (i % 3 == 0) {
            json_t *u = NULL;
            json_object_set_new(o, "status", json_pack("{s:i}", "i", i));
            REQUIRE_I64(store_update(s, r, ns, o, &u, NULL), 0);
            CHECK(rv_of(u) > last);
            last = rv_of(u);
            json_decref(u);
        }
        if (i % 5 == 0) {
            json_t *d = NULL;
            REQUIRE_I64(store_delete(s, r, ns, name, NULL, &d, NULL), 0);
            CHECK(rv_of(d) > last);
            last = rv_of(d);
            json_decref(d);
        }
        json_decref(o);
        json_decref(p);
    }
    CHECK_I64(cur_rv(s), last);
}
TEST(store_rv_monotonic) { with_fixture(NULL, body_rv_monotonic); }

/* --- list ------------------------------------------------------------------------ */

static void create_n(struct store *s, const char *res, const char *ns, int n, const char *fmt) {
    char name[64];
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, fmt, i);
        json_t *p = pod(name, "x");
        CHECK_I64(store_create(s, res, ns, p, NULL), 0);
        json_decref(p);
    }
}

static void body_list(struct redis_fixture *f) {
    struct store *s = f->store;
    struct store_list l;
    CHECK_I64(store_list(s, "pods", "", 0, NULL, &l), 0);
    CHECK_I64(json_array_size(l.items), 0);
    CHECK_I64(l.resource_version, 0);
    store_list_free(&l);
    create_n(s, "pods", "b", 5, "p%d");
    create_n(s, "pods", "a", 3, "p%d");
    create_n(s, "pods", "a-b", 2, "q%d");
    create_n(s, "nodes", "", 4, "n%d");
    REQUIRE_I64(store_list(s, "pods", "", 0, NULL, &l), 0);
    CHECK_I64(json_array_size(l.items), 10);
    CHECK_I64(l.resource_version, cur_rv(s));
    CHECK(l.continue_token == NULL);
    /* key order: namespace/name bytewise; items consistent with the list RV */
    const char *prev = "";
    char key[300], prevkey[300] = "";
    (void)prev;
    for (size_t i = 0; i < json_array_size(l.items); i++) {
        json_t *o = json_array_get(l.items, i);
        snprintf(key, sizeof key, "%s/%s", meta_s(o, "namespace"), meta_s(o, "name"));
        CHECK(strcmp(prevkey, key) < 0);
        CHECK(rv_of(o) <= l.resource_version);
        snprintf(prevkey, sizeof prevkey, "%s", key);
    }
    store_list_free(&l);
    REQUIRE_I64(store_list(s, "pods", "a", 0, NULL, &l), 0);
    CHECK_I64(json_array_size(l.items), 3);
    CHECK_STR(meta_s(json_array_get(l.items, 0), "name"), "p0");
    store_list_free(&l);
    REQUIRE_I64(store_list(s, "nodes", "", 0, NULL, &l), 0);
    CHECK_I64(json_array_size(l.items), 4);
    CHECK(meta_s(json_array_get(l.items, 0), "namespace") == NULL);
    store_list_free(&l);
    /* deleted objects leave the indexes */
    CHECK_I64(store_delete(s, "pods", "a", "p1", NULL, NULL, NULL), 0);
    REQUIRE_I64(store_list(s, "pods", "a", 0, NULL, &l), 0);
    CHECK_I64(json_array_size(l.items), 2);
    store_list_free(&l);
    REQUIRE_I64(store_list(s, "pods", "", 0, NULL, &l), 0);
    CHECK_I64(json_array_size(l.items), 9);
    CHECK_I64(l.resource_version, cur_rv(s));
    /* the raw form holds the same objects, unparsed */
    struct store_list raw;
    REQUIRE_I64(store_list_raw(s, "pods", "", 4, NULL, &raw), 0);
    CHECK(raw.items == NULL);
    CHECK(raw.continue_token != NULL);
    REQUIRE_I64(raw.n_raw, 4);
    for (size_t i = 0; i < raw.n_raw; i++) {
        json_t *o = json_loadb(raw.raw[i], raw.raw_len[i], 0, NULL);
        CHECK(json_equal(o, json_array_get(l.items, i)));
        json_decref(o);
    }
    store_list_free(&raw);
    store_list_free(&l);
}
TEST(store_list_scopes) { with_fixture(NULL, body_list); }

static void body_pagination(struct redis_fixture *f) {
    struct store *s = f->store;
    struct store_list l;
    create_n(s, "pods", "default", 25, "pod-%02d");
    create_n(s, "pods", "zz", 3, "pod-%02d");
    uint64_t rv0 = cur_rv(s);
    char *tok = NULL;
    int seen = 0, pages = 0;
    do {
        REQUIRE_I64(store_list(s, "pods", "default", 10, tok, &l), 0);
        free(tok);
        tok = l.continue_token ? strdup(l.continue_token) : NULL;
        CHECK_I64(l.resource_version, rv0);
        for (size_t i = 0; i < json_array_size(l.items); i++) {
            char want[32];
            snprintf(want, sizeof want, "pod-%02d", seen < 25 ? seen : 99);
            seen++;
            CHECK_STR(meta_s(json_array_get(l.items, i), "name"), want);
        }
        if (pages == 0) CHECK_I64(l.remaining, 15);
        if (pages == 1) {
            CHECK_I64(l.remaining, 5);
            /* a write between pages: later pages show current objects, RV stays */
            json_t *p = pod("pod-99", "x");
            CHECK_I64(store_create(s, "pods", "default", p, NULL), 0);
            json_decref(p);
        }
        pages++;
        store_list_free(&l);
    } while (tok && pages < 10);
    CHECK_I64(pages, 3);
    CHECK_I64(seen, 26);
    free(tok);
    /* across namespaces */
    REQUIRE_I64(store_list(s, "pods", "", 26, NULL, &l), 0);
    REQUIRE(l.continue_token != NULL);
    CHECK_I64(l.remaining, 3);
    tok = strdup(l.continue_token);
    store_list_free(&l);
    /* a token of another list or garbage is refused */
    CHECK_I64(store_list(s, "pods", "zz", 10, tok, &l), -EINVAL);
    CHECK_HAS(store_errmsg(s), "continue key is not valid");
    CHECK_I64(store_list(s, "nodes", "", 10, tok, &l), -EINVAL);
    CHECK_I64(store_list(s, "pods", "", 10, "!!not-base64", &l), -EINVAL);
    CHECK_I64(store_list(s, "pods", "", 10, "e30", &l), -EINVAL); /* "{}" */
    /* a forged token whose start lies outside the namespace is refused */
    char *forged = store_continue_encode("pods", "zz", 5, "default/pod-00");
    REQUIRE(forged != NULL);
    CHECK_I64(store_list(s, "pods", "zz", 10, forged, &l), -EINVAL);
    free(forged);
    REQUIRE_I64(store_list(s, "pods", "", 26, tok, &l), 0);
    CHECK_I64(json_array_size(l.items), 3);
    CHECK(l.continue_token == NULL);
    CHECK_STR(meta_s(json_array_get(l.items, 0), "namespace"), "zz");
    store_list_free(&l);
    free(tok);
}
TEST(store_list_pagination) { with_fixture(NULL, body_pagination); }

/* A page with a limit also ends before its objects pass max_bytes: 10
 * objects of about 100 KB under a 350,000-byte bound come 3 to a page, all of
 * them once and in order; a bound below one object still moves on one at a
 * time; without a limit the bound does not apply. */
static void body_pages_by_bytes(struct redis_fixture *f) {
    struct store *s = f->store;
    struct store_list l;
    char *big = malloc(100001);
    REQUIRE(big != NULL);
    memset(big, 'x', 100000);
    big[100000] = 0;
    for (int i = 0; i < 10; i++) {
        char name[16];
        snprintf(name, sizeof name, "big-%d", i);
        json_t *p = pod(name, big);
        CHECK_I64(store_create(s, "pods", "default", p, NULL), 0);
        json_decref(p);
    }
    free(big);
    size_t bounds[] = {350000, 1000};
    int want_pages[] = {4, 10};
    for (int b = 0; b < 2; b++) {
        char *tok = NULL;
        int seen = 0, pages = 0;
        do {
            REQUIRE_I64(store_list_bounded(s, "pods", "default", 500, bounds[b], tok, &l), 0);
            free(tok);
            tok = l.continue_token ? strdup(l.continue_token) : NULL;
            size_t n = json_array_size(l.items);
            CHECK(n >= 1 && (n == 1 || l.bytes <= bounds[b]));
            if (tok) CHECK_I64(l.remaining, 10 - seen - (int)n);
            for (size_t i = 0; i < n; i++) {
                char want[16];
                snprintf(want, sizeof want, "big-%d", seen++);
                CHECK_STR(meta_s(json_array_get(l.items, i), "name"), want);
            }
            pages++;
            store_list_free(&l);
        } while (tok && pages < 20);
        CHECK_I64(seen, 10);
        CHECK_I64(pages, want_pages[b]);
        free(tok);
    }
    REQUIRE_I64(store_list_bounded(s, "pods", "default", 0, 1000, NULL, &l), 0);
    CHECK_I64(json_array_size(l.items), 10);
    CHECK(l.continue_token == NULL);
    store_list_free(&l);
}
TEST(store_list_pages_by_bytes) { with_fixture(NULL, body_pages_by_bytes); }

static void body_continue_expired(struct redis_fixture *f) {
    struct store *s = f->store;
    struct store_list l;
    create_n(s, "pods", "default", 4, "p%d");
    REQUIRE_I64(store_list(s, "pods", "default", 2, NULL, &l), 0);
    REQUIRE(l.continue_token != NULL);
    char *tok = strdup(l.continue_token);
    store_list_free(&l);
    /* still within history: fine */
    REQUIRE_I64(store_list(s, "pods", "default", 2, tok, &l), 0);
    CHECK_I64(json_array_size(l.items), 2);
    store_list_free(&l);
    /* 10 more writes with history_max 5: the token's RV is compacted */
    create_n(s, "pods", "default", 10, "q%d");
    CHECK_I64(store_list(s, "pods", "default", 2, tok, &l), -ESTALE);
    CHECK_HAS(store_errmsg(s), "continue parameter is too old");
    CHECK_STR(store_reason(-ESTALE), "Expired");
    CHECK_I64(store_http_code(-ESTALE), 410);
    free(tok);
}
TEST(store_list_continue_expired) {
    struct store_options o;
    store_options_init(&o);
    o.history_max = 5;
    o.history_exact = 1;
    with_fixture(&o, body_continue_expired);
}

/* --- finalizers and preconditions ------------------------------------------------ */

static void body_finalizers(struct redis_fixture *f) {
    struct store *s = f->store;
    json_t *p = pod("fin", "x"), *o = NULL, *d = NULL, *d2 = NULL, *u = NULL;
    set_meta(p, "finalizers", json_pack("[s]", "example.com/keep"));
    REQUIRE_I64(store_create(s, "pods", "default", p, &o), 0);
    uint64_t rv1 = rv_of(o);
    struct store_delete_opts dopt = {.grace_period_seconds = 30};
    int deleted = -1;
    REQUIRE_I64(store_delete(s, "pods", "default", "fin", &dopt, &d, &deleted), 0);
    CHECK_I64(deleted, 0);
    CHECK(meta_s(d, "deletionTimestamp") != NULL);
    CHECK_I64(json_integer_value(json_object_get(json_object_get(d, "metadata"),
                                                 "deletionGracePeriodSeconds")), 30);
    CHECK_I64(gen_of(d), 2);
    CHECK(rv_of(d) > rv1);
    /* still there */
    json_t *g = NULL;
    REQUIRE_I64(store_get(s, "pods", "default", "fin", &g), 0);
    CHECK(json_equal(g, d));
    json_decref(g);
    /* deleting again writes nothing */
    uint64_t before = cur_rv(s);
    REQUIRE_I64(store_delete(s, "pods", "default", "fin", NULL, &d2, &deleted), 0);
    CHECK_I64(deleted, 0);
    CHECK_I64(cur_rv(s), before);
    CHECK_I64(rv_of(d2), rv_of(d));
    /* an update cannot clear deletionTimestamp, keeping a finalizer keeps the object */
    json_t *keep = json_deep_copy(d);
    json_object_del(json_object_get(keep, "metadata"), "deletionTimestamp");
    set_meta(keep, "finalizers", json_pack("[s,s]", "example.com/keep", "b"));
    REQUIRE_I64(store_update(s, "pods", "default", keep, &u, &deleted), 0);
    CHECK_I64(deleted, 0);
    CHECK_STR(meta_s(u, "deletionTimestamp"), meta_s(d, "deletionTimestamp"));
    /* emptying finalizers during the grace period keeps it (kube-apiserver
     * deletes on update only when deletionGracePeriodSeconds is 0) ... */
    json_t *clear = json_deep_copy(u);
    set_meta(clear, "finalizers", json_array());
    json_t *cleared = NULL, *fin = NULL;
    REQUIRE_I64(store_update(s, "pods", "default", clear, &cleared, &deleted), 0);
    CHECK_I64(deleted, 0);
    REQUIRE_I64(store_get(s, "pods", "default", "fin", &g), 0);
    json_decref(g);
    /* ... and the final delete with gracePeriodSeconds=0 removes it */
    struct store_delete_opts now = {.grace_period_seconds = 0};
    REQUIRE_I64(store_delete(s, "pods", "default", "fin", &now, &fin, &deleted), 0);
    CHECK_I64(deleted, 1);
    CHECK(rv_of(fin) > rv_of(cleared));
    CHECK_I64(store_get(s, "pods", "default", "fin", &g), -ENOENT);
    /* history: ADDED, MODIFIED (mark), MODIFIED (finalizers), MODIFIED (cleared), DELETED */
    struct store_history h;
    REQUIRE_I64(store_history_after(s, "pods", "default", 0, 100, &h), 0);
    REQUIRE_I64(h.n, 5);
    CHECK_I64(h.events[0].type, STORE_ADDED);
    CHECK_I64(h.events[1].type, STORE_MODIFIED);
    CHECK_I64(h.events[2].type, STORE_MODIFIED);
    CHECK_I64(h.events[3].type, STORE_MODIFIED);
    CHECK_I64(h.events[4].type, STORE_DELETED);
    CHECK_I64(h.events[4].resource_version, rv_of(fin));
    CHECK(json_equal(h.events[4].object, fin));
    CHECK_I64(json_array_size(json_object_get(json_object_get(h.events[4].object, "metadata"),
                                              "finalizers")), 0);
    store_history_free(&h);
    json_decref(cleared);
    json_decref(fin);
    json_decref(clear);
    json_decref(keep);
    json_decref(u);
    json_decref(d2);
    json_decref(d);
    json_decref(o);
    json_decref(p);
}
TEST(store_finalizers) { with_fixture(NULL, body_finalizers); }

/* The kubelet's final DELETE (gracePeriodSeconds=0) comes while a finalizer
 * still holds the pod: the shorter grace period is recorded, and removing
 * the finalizer then removes the pod (kubectl wait --for=delete returns). */
static void body_final_delete_before_finalizer(struct redis_fixture *f) {
    struct store *s = f->store;
    json_t *p = pod("hold", "x"), *o = NULL, *d = NULL, *d0 = NULL, *d1 = NULL, *u = NULL, *g = NULL;
    set_meta(p, "finalizers", json_pack("[s]", "example.com/hold"));
    REQUIRE_I64(store_create(s, "pods", "default", p, &o), 0);
    struct store_delete_opts graceful = {.grace_period_seconds = 30, .graceful = 1}, now = {.grace_period_seconds = 0};
    int deleted = -1;
    REQUIRE_I64(store_delete(s, "pods", "default", "hold", &graceful, &d, &deleted), 0);
    CHECK_I64(deleted, 0);
    REQUIRE_I64(store_delete(s, "pods", "default", "hold", &now, &d0, &deleted), 0);
    CHECK_I64(deleted, 0);
    CHECK_I64(json_integer_value(json_object_get(json_object_get(d0, "metadata"), "deletionGracePeriodSeconds")), 0);
    CHECK(rv_of(d0) > rv_of(d));
    /* a longer period again changes nothing */
    uint64_t before = cur_rv(s);
    REQUIRE_I64(store_delete(s, "pods", "default", "hold", &graceful, &d1, &deleted), 0);
    CHECK_I64(cur_rv(s), before);
    json_t *clear = json_deep_copy(d0);
    set_meta(clear, "finalizers", json_array());
    REQUIRE_I64(store_update(s, "pods", "default", clear, &u, &deleted), 0);
    CHECK_I64(deleted, 1);
    CHECK_I64(store_get(s, "pods", "default", "hold", &g), -ENOENT);
    json_decref(clear);
    json_decref(u);
    json_decref(d1);
    json_decref(d0);
    json_decref(d);
    json_decref(o);
    json_decref(p);
}
TEST(store_final_delete_before_finalizer) { with_fixture(NULL, body_final_delete_before_finalizer); }

/* Without a grace period (most resources), emptying finalizers removes the object. */
static void body_finalizers_no_grace(struct redis_fixture *f) {
    struct store *s = f->store;
    json_t *p = pod("fin0", "x"), *d = NULL, *fin = NULL, *g = NULL;
    set_meta(p, "finalizers", json_pack("[s]", "example.com/keep"));
    REQUIRE_I64(store_create(s, "pods", "default", p, NULL), 0);
    int deleted = -1;
    REQUIRE_I64(store_delete(s, "pods", "default", "fin0", NULL, &d, &deleted), 0);
    CHECK_I64(deleted, 0);
    json_t *clear = json_deep_copy(d);
    set_meta(clear, "finalizers", json_array());
    REQUIRE_I64(store_update(s, "pods", "default", clear, &fin, &deleted), 0);
    CHECK_I64(deleted, 1);
    CHECK_I64(store_get(s, "pods", "default", "fin0", &g), -ENOENT);
    json_decref(clear);
    json_decref(fin);
    json_decref(d);
    json_decref(p);
}
TEST(store_finalizers_no_grace) { with_fixture(NULL, body_finalizers_no_grace); }

/* Graceful deletion (a bound pod): marked without finalizers, kept through
 * updates, removed by the final delete with gracePeriodSeconds=0. */
static void body_graceful(struct redis_fixture *f) {
    struct store *s = f->store;
    json_t *p = pod("gr", "x"), *d = NULL, *u = NULL, *fin = NULL, *g = NULL;
    REQUIRE_I64(store_create(s, "pods", "default", p, NULL), 0);
    struct store_delete_opts gopt = {.grace_period_seconds = 30, .graceful = 1};
    int deleted = -1;
    REQUIRE_I64(store_delete(s, "pods", "default", "gr", &gopt, &d, &deleted), 0);
    CHECK_I64(deleted, 0);
    CHECK(meta_s(d, "deletionTimestamp") != NULL);
    json_t *st = json_deep_copy(d); /* a kubelet's status update while terminating */
    json_object_set_new(st, "status", json_pack("{s:s}", "phase", "Succeeded"));
    REQUIRE_I64(store_update(s, "pods", "default", st, &u, &deleted), 0);
    CHECK_I64(deleted, 0);
    REQUIRE_I64(store_get(s, "pods", "default", "gr", &g), 0);
    json_decref(g);
    struct store_delete_opts now = {.grace_period_seconds = 0, .graceful = 1};
    REQUIRE_I64(store_delete(s, "pods", "default", "gr", &now, &fin, &deleted), 0);
    CHECK_I64(deleted, 1);
    CHECK_I64(store_get(s, "pods", "default", "gr", &g), -ENOENT);
    json_decref(st);
    json_decref(u);
    json_decref(fin);
    json_decref(d);
    json_decref(p);
}
TEST(store_graceful_delete) { with_fixture(NULL, body_graceful); }

static void body_delete_preconditions(struct redis_fixture *f) {
    struct store *s = f->store;
    json_t *p = pod("dp", "x"), *o = NULL;
    REQUIRE_I64(store_create(s, "pods", "default", p, &o), 0);
    struct store_delete_opts bad_uid = {.uid = "nope", .grace_period_seconds = -1};
    CHECK_I64(store_delete(s, "pods", "default", "dp", &bad_uid, NULL, NULL), STORE_ECONFLICT);
    CHECK_HAS(store_errmsg(s), "UID in precondition: nope");
    struct store_delete_opts bad_rv = {.resource_version = "999", .grace_period_seconds = -1};
    CHECK_I64(store_delete(s, "pods", "default", "dp", &bad_rv, NULL, NULL), STORE_ECONFLICT);
    CHECK_I64(cur_rv(s), 1);
    struct store_delete_opts good = {.uid = meta_s(o, "uid"), .resource_version = meta_s(o, "resourceVersion"),
                                     .grace_period_seconds = -1};
    int deleted = 0;
    CHECK_I64(store_delete(s, "pods", "default", "dp", &good, NULL, &deleted), 0);
    CHECK_I64(deleted, 1);
    json_decref(o);
    json_decref(p);
}
TEST(store_delete_preconditions) { with_fixture(NULL, body_delete_preconditions); }

/* --- history --------------------------------------------------------------------- */

static void body_history(struct redis_fixture *f) {
    struct store *s = f->store;
    create_n(s, "pods", "a", 3, "p%d");            /* rv 1..3 */
    create_n(s, "pods", "b", 2, "p%d");            /* rv 4..5 */
    create_n(s, "nodes", "", 2, "n%d");            /* rv 6..7 */
    json_t *o = NULL, *u = NULL;
    REQUIRE_I64(store_get(s, "pods", "a", "p1", &o), 0);
    json_object_set_new(o, "status", json_pack("{s:s}", "phase", "Running"));
    REQUIRE_I64(store_update(s, "pods", "a", o, &u, NULL), 0);  /* rv 8 */
    REQUIRE_I64(store_delete(s, "pods", "b", "p0", NULL, NULL, NULL), 0); /* rv 9 */
    struct store_history h;
    REQUIRE_I64(store_history_after(s, "pods", "", 0, 100, &h), 0);
    REQUIRE_I64(h.n, 7);
    static const uint64_t rvs[] = {1, 2, 3, 4, 5, 8, 9};
    static const enum store_event_type ty[] = {STORE_ADDED, STORE_ADDED, STORE_ADDED, STORE_ADDED,
                                               STORE_ADDED, STORE_MODIFIED, STORE_DELETED};
    for (size_t i = 0; i < h.n; i++) {
        CHECK_I64(h.events[i].resource_version, rvs[i]);
        CHECK_I64(h.events[i].type, ty[i]);
        CHECK_I64(rv_of(h.events[i].object), rvs[i]);
    }
    CHECK_STR(h.events[5].ns, "a");
    CHECK_STR(h.events[5].name, "p1");
    CHECK(json_equal(h.events[5].object, u));
    CHECK_STR(store_event_type_name(h.events[6].type), "DELETED");
    CHECK_I64(h.current_rv, 9);
    CHECK_I64(h.next_rv, 9);
    CHECK_I64(h.more, 0);
    store_history_free(&h);
    /* per namespace, after a resourceVersion */
    REQUIRE_I64(store_history_after(s, "pods", "a", 2, 100, &h), 0);
    REQUIRE_I64(h.n, 2);
    CHECK_I64(h.events[0].resource_version, 3);
    CHECK_I64(h.events[1].resource_version, 8);
    store_history_free(&h);
    /* bounded reads page through */
    uint64_t after = 0;
    size_t total = 0;
    for (int i = 0; i < 20; i++) {
        REQUIRE_I64(store_history_after(s, "pods", "", after, 2, &h), 0);
        total += h.n;
        after = h.next_rv;
        int more = h.more;
        store_history_free(&h);
        if (!more) break;
    }
    CHECK_I64(total, 7);
    /* other resources, empty and future */
    REQUIRE_I64(store_history_after(s, "nodes", "", 0, 100, &h), 0);
    CHECK_I64(h.n, 2);
    store_history_free(&h);
    REQUIRE_I64(store_history_after(s, "secrets", "", 0, 100, &h), 0);
    CHECK_I64(h.n, 0);
    store_history_free(&h);
    REQUIRE_I64(store_history_after(s, "pods", "", 9, 100, &h), 0);
    CHECK_I64(h.n, 0);
    CHECK_I64(h.next_rv, 9);
    store_history_free(&h);
    CHECK_I64(store_history_after(s, "pods", "", 0, 0, &h), -EINVAL);
    json_decref(o);
    json_decref(u);
}
TEST(store_history) { with_fixture(NULL, body_history); }

static void body_history_compacted(struct redis_fixture *f) {
    struct store *s = f->store;
    create_n(s, "pods", "default", 20, "p%d"); /* rv 1..20, history keeps 16..20 */
    struct store_history h;
    CHECK_I64(store_history_after(s, "pods", "default", 0, 100, &h), -ESTALE);
    CHECK_STR(store_errmsg(s), "too old resource version: 0 (15)");
    CHECK_I64(store_history_after(s, "pods", "", 14, 100, &h), -ESTALE);
    REQUIRE_I64(store_history_after(s, "pods", "", 15, 100, &h), 0);
    CHECK_I64(h.n, 5);
    CHECK_I64(h.events[0].resource_version, 16);
    store_history_free(&h);
    /* other resources have their own history */
    create_n(s, "nodes", "", 2, "n%d");
    REQUIRE_I64(store_history_after(s, "nodes", "", 0, 100, &h), 0);
    CHECK_I64(h.n, 2);
    store_history_free(&h);
}
TEST(store_history_compacted) {
    struct store_options o;
    store_options_init(&o);
    o.history_max = 5;
    o.history_exact = 1;
    with_fixture(&o, body_history_compacted);
}

/* --- durability ------------------------------------------------------------------ */

#define DUR_N 200

static void body_durability(struct redis_fixture *f) {
    char name[32];
    uint64_t rvs[DUR_N] = {0};
    for (int i = 0; i < DUR_N; i++) {
        snprintf(name, sizeof name, "d-%03d", i);
        json_t *p = pod(name, "x"), *o = NULL;
        REQUIRE_I64(store_create(f->store, "pods", "default", p, &o), 0);
        rvs[i] = rv_of(o);
        if (i % 4 == 0) { /* some updates too */
            json_t *u = NULL;
            json_object_set_new(o, "status", json_pack("{s:i}", "n", i));
            REQUIRE_I64(store_update(f->store, "pods", "default", o, &u, NULL), 0);
            rvs[i] = rv_of(u);
            json_decref(u);
        }
        json_decref(o);
        json_decref(p);
    }
    uint64_t last = cur_rv(f->store), rv2 = 0;
    struct store *s2 = NULL; /* a second client that lives through the crash */
    REQUIRE_I64(store_open("127.0.0.1", f->proc.port, NULL, &s2), 0);
    if (redis_fixture_crash_restart(f)) {
        store_close(s2);
        REQUIRE(0);
    }
    struct store *s = f->store;
    CHECK_I64(cur_rv(s), last);
    /* its first call fails (broken connection, not retried); the next reconnects */
    CHECK_I64(store_current_rv(s2, &rv2), -EIO);
    CHECK_I64(store_current_rv(s2, &rv2), 0);
    CHECK_I64(rv2, last);
    store_close(s2);
    for (int i = 0; i < DUR_N; i++) {
        json_t *o = NULL;
        snprintf(name, sizeof name, "d-%03d", i);
        REQUIRE_I64(store_get(s, "pods", "default", name, &o), 0);
        CHECK_I64(rv_of(o), rvs[i]);
        if (i % 4 == 0)
            CHECK_I64(json_integer_value(json_object_get(json_object_get(o, "status"), "n")), i);
        json_decref(o);
    }
    struct store_list l;
    REQUIRE_I64(store_list(s, "pods", "default", 0, NULL, &l), 0);
    CHECK_I64(json_array_size(l.items), DUR_N);
    CHECK_I64(l.resource_version, last);
    store_list_free(&l);
    /* history: nothing after the last seen RV, everything before it in order */
    struct store_history h;
    REQUIRE_I64(store_history_after(s, "pods", "", last, 100, &h), 0);
    CHECK_I64(h.n, 0);
    store_history_free(&h);
    REQUIRE_I64(store_history_after(s, "pods", "", 0, 1000, &h), 0);
    CHECK_I64(h.n, last);
    for (size_t i = 0; i < h.n; i++) CHECK_I64(h.events[i].resource_version, i + 1);
    store_history_free(&h);
    /* the counter continues */
    json_t *p = pod("after", "x"), *o = NULL;
    REQUIRE_I64(store_create(s, "pods", "default", p, &o), 0);
    CHECK_I64(rv_of(o), last + 1);
    REQUIRE_I64(store_history_after(s, "pods", "", last, 100, &h), 0);
    CHECK_I64(h.n, 1);
    if (h.n == 1) CHECK_I64(h.events[0].type, STORE_ADDED);
    store_history_free(&h);
    json_decref(o);
    json_decref(p);
}
TEST(store_durability_kill9) { with_fixture(NULL, body_durability); }

/* --- bad input ------------------------------------------------------------------- */

static void body_bad_input(struct redis_fixture *f) {
    struct store *s = f->store;
    json_t *o = NULL;
    /* non-object JSON */
    json_t *arr = json_pack("[i]", 1);
    CHECK_I64(store_create(s, "pods", "default", arr, &o), -EINVAL);
    CHECK_HAS(store_errmsg(s), "must be a JSON object");
    CHECK_I64(store_update(s, "pods", "default", arr, &o, NULL), -EINVAL);
    json_decref(arr);
    json_t *nometa = json_pack("{s:s}", "kind", "Pod");
    CHECK_I64(store_create(s, "pods", "default", nometa, &o), -EINVAL);
    CHECK_HAS(store_errmsg(s), "metadata");
    json_decref(nometa);
    json_t *noname = json_pack("{s:{}}", "metadata");
    CHECK_I64(store_create(s, "pods", "default", noname, &o), -EINVAL);
    CHECK_HAS(store_errmsg(s), "metadata.name: Required value");
    json_decref(noname);
    /* bad names */
    char longname[300];
    memset(longname, 'a', 254);
    longname[254] = '\0';
    const char *bad[] = {"Upper", "under_score", "-lead", "trail-", "a..b", ".a", "", longname,
                         "sl/ash"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *p = pod(bad[i], "x");
        CHECK_I64(store_create(s, "pods", "default", p, &o), -EINVAL);
        CHECK_HAS(store_errmsg(s), "metadata.name");
        json_decref(p);
        CHECK_I64(store_get(s, "pods", "default", bad[i], &o), -EINVAL);
    }
    longname[253] = '\0';
    json_t *okp = pod("a.b-c.d9", "x");
    CHECK_I64(store_create(s, "pods", "default", okp, NULL), 0);
    json_decref(okp);
    okp = pod(longname, "x");
    CHECK_I64(store_create(s, "pods", "default", okp, NULL), 0);
    json_decref(okp);
    /* bad namespaces and resources */
    json_t *p = pod("fine", "x");
    CHECK_I64(store_create(s, "pods", "Default", p, &o), -EINVAL);
    CHECK_HAS(store_errmsg(s), "RFC 1123 label");
    CHECK_I64(store_create(s, "pods", "a.b", p, &o), -EINVAL);
    char longns[70];
    memset(longns, 'n', 64);
    longns[64] = '\0';
    CHECK_I64(store_create(s, "pods", longns, p, &o), -EINVAL);
    CHECK_HAS(store_errmsg(s), "no more than 63");
    CHECK_I64(store_create(s, "Pods", "default", p, &o), -EINVAL);
    CHECK_I64(store_create(s, "po:ds", "default", p, &o), -EINVAL);
    CHECK_I64(store_list(s, "pods", "BAD", 0, NULL, &(struct store_list){0}), -EINVAL);
    /* namespace mismatch, cluster-scoped with namespace, resourceVersion on create */
    set_meta(p, "namespace", json_string("other"));
    CHECK_I64(store_create(s, "pods", "default", p, &o), -EINVAL);
    CHECK_HAS(store_errmsg(s), "does not match");
    CHECK_I64(store_create(s, "nodes", "", p, &o), -EINVAL);
    json_object_del(json_object_get(p, "metadata"), "namespace");
    set_meta(p, "resourceVersion", json_string("5"));
    CHECK_I64(store_create(s, "pods", "default", p, &o), -EINVAL);
    CHECK_HAS(store_errmsg(s), "resourceVersion should not be set");
    json_decref(p);
    /* oversized */
    size_t big = STORE_MAX_OBJECT_BYTES + 10;
    char *blob = malloc(big + 1);
    REQUIRE(blob);
    memset(blob, 'z', big);
    blob[big] = '\0';
    json_t *huge = pod("huge", "x");
    json_object_set_new(huge, "data", json_pack("{s:s}", "blob", blob));
    CHECK_I64(store_create(s, "pods", "default", huge, &o), -E2BIG);
    CHECK_HAS(store_errmsg(s), "too large");
    CHECK_STR(store_reason(-E2BIG), "RequestEntityTooLarge");
    free(blob);
    json_decref(huge);
    CHECK(o == NULL);
    /* none of it touched the store: only the two good creates */
    CHECK_I64(cur_rv(s), 2);
    struct store_list l;
    REQUIRE_I64(store_list(s, "pods", "", 0, NULL, &l), 0);
    CHECK_I64(json_array_size(l.items), 2);
    store_list_free(&l);
    struct store_history h;
    REQUIRE_I64(store_history_after(s, "pods", "", 0, 100, &h), 0);
    CHECK_I64(h.n, 2);
    store_history_free(&h);
}
TEST(store_bad_input) { with_fixture(NULL, body_bad_input); }

/* --- pipelined creates, script cache loss, special content ---------------------- */

static void body_create_many(struct redis_fixture *f) {
    struct store *s = f->store;
    json_t *objs[6];
    int rcs[6];
    json_t *outs[6];
    char name[48];
    for (int i = 0; i < 6; i++) {
        snprintf(name, sizeof name, "m%d", i);
        objs[i] = pod(i == 3 ? "m1" : i == 4 ? "Bad" : name, "x");
    }
    REQUIRE_I64(store_create_many(s, "pods", "default", objs, 6, rcs, outs), 0);
    CHECK_I64(rcs[0], 0);
    CHECK_I64(rcs[1], 0);
    CHECK_I64(rcs[3], -EEXIST);
    CHECK_I64(rcs[4], -EINVAL);
    CHECK_I64(rcs[5], 0);
    CHECK(outs[3] == NULL && outs[4] == NULL);
    CHECK_I64(rv_of(outs[0]), 1);
    CHECK_I64(rv_of(outs[5]), 4);
    for (int i = 0; i < 6; i++) {
        json_decref(objs[i]);
        json_decref(outs[i]);
    }
    CHECK_I64(cur_rv(s), 4);
    /* more than one script call per batch (256 each), then after a script flush */
    enum { NB = 600 };
    json_t **many = calloc(NB, sizeof *many);
    int *mrc = calloc(NB, sizeof *mrc);
    REQUIRE(many && mrc);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < NB; i++) {
            snprintf(name, sizeof name, "b%d-%03d", round, i);
            many[i] = pod(name, "x");
        }
        if (round == 1) {
            redisContext *c = redisConnect("127.0.0.1", f->proc.port);
            redisReply *r = c && !c->err ? redisCommand(c, "SCRIPT FLUSH") : NULL;
            CHECK(r != NULL);
            if (r) freeReplyObject(r);
            if (c) redisFree(c);
        }
        CHECK_I64(store_create_many(s, "pods", "bulk", many, NB, mrc, NULL), 0);
        int bad = 0;
        for (int i = 0; i < NB; i++) {
            bad += mrc[i] != 0;
            json_decref(many[i]);
        }
        CHECK_I64(bad, 0);
    }
    free(many);
    free(mrc);
    CHECK_I64(cur_rv(s), 4 + 2 * NB);
    struct store_list l;
    REQUIRE_I64(store_list(s, "pods", "bulk", 0, NULL, &l), 0);
    CHECK_I64(json_array_size(l.items), 2 * NB);
    store_list_free(&l);
    struct store_history h;
    REQUIRE_I64(store_history_after(s, "pods", "bulk", 4, 2000, &h), 0);
    CHECK_I64(h.n, 2 * NB);
    for (size_t i = 0; i < h.n; i++) CHECK_I64(h.events[i].resource_version, 5 + i);
    store_history_free(&h);
}
TEST(store_create_batch) { with_fixture(NULL, body_create_many); }

static void body_noscript(struct redis_fixture *f) {
    struct store *s = f->store;
    redisContext *c = redisConnect("127.0.0.1", f->proc.port);
    REQUIRE(c && !c->err);
    redisReply *r = redisCommand(c, "SCRIPT FLUSH");
    CHECK(r && r->type == REDIS_REPLY_STATUS);
    if (r) freeReplyObject(r);
    redisFree(c);
    json_t *p = pod("after-flush", "x");
    CHECK_I64(store_create(s, "pods", "default", p, NULL), 0);
    struct store_list l;
    CHECK_I64(store_list(s, "pods", "", 0, NULL, &l), 0);
    CHECK_I64(json_array_size(l.items), 1);
    store_list_free(&l);
    json_decref(p);
}
TEST(store_noscript_fallback) { with_fixture(NULL, body_noscript); }

static void body_special_content(struct redis_fixture *f) {
    struct store *s = f->store;
    /* content cjson would mangle and placeholder look-alikes survive byte for byte */
    json_t *p = json_pack("{s:{s:s,s:{s:s}},s:{s:[],s:{},s:I,s:f,s:s,s:s}}", "metadata", "name", "x",
                          "annotations", "rv", "\"resourceVersion\":\"", "spec", "empty", "obj",
                          "big", (json_int_t)9007199254740993LL, "pi", 3.25, "uni", "h\xc3\xa9llo \\ \"q\"",
                          "tok", "rv~");
    json_t *o = NULL, *g = NULL;
    REQUIRE_I64(store_create(s, "things.example.com", "", p, &o), 0);
    REQUIRE_I64(store_get(s, "things.example.com", "", "x", &g), 0);
    CHECK(json_equal(o, g));
    CHECK(json_is_array(json_object_get(json_object_get(g, "spec"), "empty")));
    CHECK_I64(json_integer_value(json_object_get(json_object_get(g, "spec"), "big")),
              9007199254740993LL);
    json_decref(g);
    json_decref(o);
    json_decref(p);
}
TEST(store_special_content) { with_fixture(NULL, body_special_content); }

/* --- history kept by time ---------------------------------------------------------- */

/* Redis's clock (TIME), in seconds: what the write scripts mark history with. */
static long redis_secs(struct redis_fixture *f) {
    redisContext *c = store_redis_connect("127.0.0.1", f->proc.port, 2000);
    long t = -1;
    redisReply *r = c && !c->err ? redisCommand(c, "TIME") : NULL;
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2) t = atol(r->element[0]->str);
    freeReplyObject(r);
    redisFree(c);
    return t;
}

/* Sleeps (bounded) until Redis's clock reaches second t. */
static void wait_secs(struct redis_fixture *f, long t) {
    for (int i = 0; i < 100 && redis_secs(f) < t; i++) usleep(50000);
}

/* n pods prefix-0.. in one script call (one second of Redis's clock). */
static void create_batch(struct store *s, const char *prefix, int n) {
    json_t *objs[500];
    int rcs[500];
    for (int base = 0; base < n; base += 500) {
        int k = n - base < 500 ? n - base : 500;
        for (int i = 0; i < k; i++) {
            char name[32];
            snprintf(name, sizeof name, "%s-%d", prefix, base + i);
            objs[i] = pod(name, "x");
        }
        CHECK_I64(store_create_many(s, "pods", "default", objs, (size_t)k, rcs, NULL), 0);
        for (int i = 0; i < k; i++) {
            CHECK_I64(rcs[i], 0);
            json_decref(objs[i]);
        }
    }
}

/* History of 2 seconds, exact trims, a count bound far away: the events of a
 * second stay until a write comes 2 seconds after the next second marked;
 * then the floor is exactly below what remains. */
static void body_history_by_time(struct redis_fixture *f) {
    struct store *s = f->store;
    struct store_history h;
    create_batch(s, "a", 10); /* rv 1..10 in second sa */
    long sa = redis_secs(f);
    wait_secs(f, sa + 1);
    create_batch(s, "b", 5); /* rv 11..15 in second sb > sa */
    long sb = redis_secs(f);
    REQUIRE_I64(store_history_after(s, "pods", "", 0, 100, &h), 0);
    CHECK_I64(h.n, 15);
    store_history_free(&h);
    wait_secs(f, sb + 2);
    create_batch(s, "c", 1); /* rv 16, 2 s after sb: rv 1..10 came before sb, more than 2 s ago */
    CHECK_I64(store_history_after(s, "pods", "", 0, 100, &h), -ESTALE);
    CHECK_STR(store_errmsg(s), "too old resource version: 0 (10)");
    CHECK_I64(store_history_after(s, "pods", "", 9, 100, &h), -ESTALE);
    REQUIRE_I64(store_history_after(s, "pods", "", 10, 100, &h), 0);
    CHECK_I64(h.n, 6);
    if (h.n) CHECK_I64(h.events[0].resource_version, 11);
    store_history_free(&h);
}
TEST(store_history_by_time) {
    struct store_options o;
    store_options_init(&o);
    o.history_seconds = 2;
    o.history_exact = 1;
    with_fixture(&o, body_history_by_time);
}

/* With the defaults (300 s), a burst of writes well past the old
 * 10,000-entry history all stays, from the first write on. */
static void body_history_keeps_bursts(struct redis_fixture *f) {
    struct store_history h;
    create_batch(f->store, "burst", 15000);
    REQUIRE_I64(store_history_after(f->store, "pods", "", 0, 15010, &h), 0);
    CHECK_I64(h.n, 15000);
    store_history_free(&h);
}
TEST(store_history_keeps_bursts) { with_fixture(NULL, body_history_keeps_bursts); }
