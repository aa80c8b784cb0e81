/* Packed objects against a real redis-server (docs/store.md, "Packed
 * objects"): what Redis holds of a pod is packed, every read gives back the
 * JSON the store would have kept plain, objects written plain (before, or by
 * hand) still read, and a list page bounded by bytes stays bounded. */
#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "redis_fixture.h"
#include "store.h"
#include "store_int.h"
#include "test.h"

static void with_fixture(void (*body)(struct redis_fixture *)) {
    struct redis_fixture f;
    if (redis_fixture_start(&f, NULL)) {
        test_fail(__FILE__, __LINE__, "fixture did not start");
        return;
    }
    body(&f);
    redis_fixture_stop(&f);
}

/* A pod as the Job controller makes it, about 1 KB of JSON. */
static json_t *job_pod(int i) {
    char name[32];
    snprintf(name, sizeof name, "job-%d", i);
    json_t *p = json_pack("{s:s,s:s,s:{s:s,s:{s:s,s:s},s:{s:s,s:s,s:s}},s:{s:s,s:[{s:s,s:s,s:{s:{s:s,s:s}}}],"
                          "s:s,s:i,s:s},s:{s:s}}",
                          "apiVersion", "v1", "kind", "Pod", "metadata", "name", name, "labels", "peloton.io/job",
                          "job",
                          "peloton.io/instance", name + 4, "annotations", "peloton.io/priority", "0",
                          "peloton.io/queued-at", "2026-11-27T22:48:45.025Z", "peloton.io/admitted-at",
                          "2026-11-27T22:48:45.025Z", "spec", "restartPolicy", "Never", "containers", "name", "c",
                          "image", "x", "resources", "requests", "cpu", "10m", "memory", "16Mi", "schedulerName",
                          "peloton", "terminationGracePeriodSeconds", 30, "dnsPolicy", "ClusterFirst", "status",
                          "phase", "Pending");
    return p;
}

static redisReply *cmd(struct redis_fixture *f, const char *fmt, ...) {
    redisContext *c = redisConnect("127.0.0.1", f->proc.port);
    if (!c || c->err) {
        if (c) redisFree(c);
        return NULL;
    }
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    redisFree(c);
    return r;
}

/* Every copy Redis holds of a pod (the hash's and each history entry) is
 * packed, at less than half its JSON; get, get_many, list, list_raw and
 * history give back exactly what was written (the write's own answer). */
static void body_packed(struct redis_fixture *f) {
    struct store *s = f->store;
    json_t *p = job_pod(1), *out = NULL, *got = NULL, *upd = NULL;
    REQUIRE_I64(store_create(s, "pods", "default", p, &out), 0);
    json_object_set_new(json_object_get(out, "spec"), "nodeName", json_string("node-7"));
    REQUIRE_I64(store_update(s, "pods", "default", out, &upd, NULL), 0);
    char *want = json_dumps(upd, JSON_COMPACT | JSON_SORT_KEYS);
    size_t jlen = strlen(want);
    redisReply *r = cmd(f, "HGET pc:obj:pods o:default/job-1");
    REQUIRE(r && r->type == REDIS_REPLY_STRING);
    CHECK_I64(r->str[0], 1);
    CHECK(r->len < jlen / 2);
    freeReplyObject(r);
    r = cmd(f, "XRANGE pc:ev:pods - +");
    REQUIRE(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    for (size_t i = 0; i < 2; i++) {
        redisReply *fields = r->element[i]->element[1];
        CHECK(fields->element[7]->str[0] == 1 && fields->element[7]->len < jlen / 2);
    }
    freeReplyObject(r);

    REQUIRE_I64(store_get(s, "pods", "default", "job-1", &got), 0);
    char *g = json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS);
    CHECK_STR(g, want);
    free(g);
    json_decref(got);
    const char *members[] = {"default/job-1", "default/none"};
    json_t *many[2] = {NULL, NULL};
    REQUIRE_I64(store_get_many(s, "pods", members, 2, many), 0);
    CHECK(many[1] == NULL);
    g = many[0] ? json_dumps(many[0], JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    CHECK_STR(g, want);
    free(g);
    json_decref(many[0]);
    struct store_list l;
    REQUIRE_I64(store_list(s, "pods", "default", 0, NULL, &l), 0);
    REQUIRE_I64(json_array_size(l.items), 1);
    g = json_dumps(json_array_get(l.items, 0), JSON_COMPACT | JSON_SORT_KEYS);
    CHECK_STR(g, want);
    CHECK(l.bytes > jlen / 2); /* JSON bytes, not stored ones */
    free(g);
    store_list_free(&l);
    REQUIRE_I64(store_list_raw(s, "pods", "default", 0, NULL, &l), 0);
    REQUIRE_I64(l.n_raw, 1);
    CHECK_I64(strlen(l.raw[0]), l.raw_len[0]);
    json_t *rawobj = json_loads(l.raw[0], 0, NULL);
    g = rawobj ? json_dumps(rawobj, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    CHECK_STR(g, want);
    free(g);
    json_decref(rawobj);
    store_list_free(&l);
    struct store_history h;
    REQUIRE_I64(store_history_after(s, "pods", "", 0, 10, &h), 0);
    REQUIRE_I64(h.n, 2);
    CHECK_I64(h.events[0].type, STORE_ADDED);
    CHECK_I64(h.events[1].type, STORE_MODIFIED);
    g = json_dumps(h.events[1].object, JSON_COMPACT | JSON_SORT_KEYS);
    CHECK_STR(g, want);
    free(g);
    CHECK_STR(json_string_value(json_object_get(json_object_get(h.events[0].object, "status"), "phase")),
              "Pending");
    store_history_free(&h);
    free(want);
    json_decref(p);
    json_decref(out);
    json_decref(upd);
}
TEST(store_pack_stored) { with_fixture(body_packed); }

/* An object stored plain (by a build before packing, or by hand) reads and
 * updates as before; bytes that start as packed but are not are an error
 * of that read, not a crash. */
static void body_plain_and_bad(struct redis_fixture *f) {
    struct store *s = f->store;
    redisReply *r = cmd(f, "HSET pc:obj:pods o:default/old %s v:default/old 7",
                        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"old\",\"namespace\":"
                        "\"default\",\"resourceVersion\":\"7\"},\"spec\":{}}");
    CHECK(r != NULL);
    if (r) freeReplyObject(r);
    r = cmd(f, "ZADD pc:idx:pods 0 default/old");
    if (r) freeReplyObject(r);
    r = cmd(f, "SET pc:rv 7");
    if (r) freeReplyObject(r);
    json_t *got = NULL, *upd = NULL;
    REQUIRE_I64(store_get(s, "pods", "default", "old", &got), 0);
    CHECK_STR(json_string_value(json_object_get(json_object_get(got, "metadata"), "resourceVersion")), "7");
    json_object_set_new(got, "spec", json_pack("{s:s}", "nodeName", "n"));
    CHECK_I64(store_update(s, "pods", "default", got, &upd, NULL), 0);
    json_decref(got);
    json_decref(upd);
    r = cmd(f, "HSET pc:obj:pods o:default/bad %b v:default/bad 9", "\x01\x03zzz12zz", (size_t)9);
    if (r) freeReplyObject(r);
    r = cmd(f, "ZADD pc:idx:pods 0 default/bad");
    if (r) freeReplyObject(r);
    CHECK_I64(store_get(s, "pods", "default", "bad", &got), -EIO);
    CHECK_HAS(store_errmsg(s), "does not unpack");
    struct store_list l;
    CHECK_I64(store_list(s, "pods", "default", 0, NULL, &l), -EIO);
}
TEST(store_pack_plain_and_bad) { with_fixture(body_plain_and_bad); }

/* A page bounded by bytes counts a packed object as STORE_PACK_MAX_RATIO
 * times its stored bytes, so its JSON stays under the bound although Redis
 * only sees packed bytes: 40 pods of ~1 KB (packed ~0.3 KB) under 30,000
 * bytes come in pages whose JSON is at most 30,000 bytes, all once. */
static void body_pages(struct redis_fixture *f) {
    struct store *s = f->store;
    for (int i = 0; i < 40; i++) {
        json_t *p = job_pod(100 + i);
        CHECK_I64(store_create(s, "pods", "default", p, NULL), 0);
        json_decref(p);
    }
    char *tok = NULL;
    int seen = 0, pages = 0;
    do {
        struct store_list l;
        REQUIRE_I64(store_list_bounded(s, "pods", "default", 500, 30000, tok, &l), 0);
        free(tok);
        tok = l.continue_token ? strdup(l.continue_token) : NULL;
        size_t n = json_array_size(l.items);
        CHECK(n >= 1 && l.bytes <= 30000);
        seen += (int)n;
        pages++;
        store_list_free(&l);
    } while (tok && pages < 50);
    free(tok);
    CHECK_I64(seen, 40);
    CHECK(pages > 1);
}
TEST(store_pack_pages_by_bytes) { with_fixture(body_pages); }
