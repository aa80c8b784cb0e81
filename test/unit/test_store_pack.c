/* Packed objects (src/store/store_pack.c): what the store sends Redis for an
 * object and reads back. Pure: no Redis (test/integ/test_store_pack.c has
 * the stored side). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "store_int.h"
#include "test.h"

/* A pod as a Job's pod is stored once running (the shape the dictionary knows). */
static json_t *running_pod(int i) {
    char name[32], uid[40], node[32];
    snprintf(name, sizeof name, "web-%d", i);
    snprintf(uid, sizeof uid, "6f1c2d3e-4a5b-4c6d-8e7f-%012d", i);
    snprintf(node, sizeof node, "node-%d", i % 97);
    json_error_t je;
    json_t *p = json_loads("{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"x\","
                           "\"namespace\":\"default\","
                           "\"labels\":{\"peloton.io/job\":\"web\",\"peloton.io/instance\":\"1\"},\"annotations\":"
                           "{\"peloton.io/run\":\"1\",\"peloton.io/queued-at\":\"2026-11-27T22:48:45.025Z\"},"
                           "\"uid\":\"u\",\"creationTimestamp\":\"2026-11-27T22:48:44Z\",\"generation\":2},"
                           "\"spec\":{\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"c\",\"image\":\"x\","
                           "\"resources\":{\"requests\":{\"cpu\":\"10m\",\"memory\":\"16Mi\"}}}],\"schedulerName\":"
                           "\"peloton\",\"nodeName\":\"n\"},\"status\":{\"phase\":\"Running\","
                           "\"conditions\":[{\"type\":"
                           "\"Ready\",\"status\":\"True\",\"lastProbeTime\":null,\"lastTransitionTime\":"
                           "\"2026-11-27T22:48:45Z\"},{\"type\":\"PodScheduled\",\"status\":\"True\",\"lastProbeTime\":"
                           "null,\"lastTransitionTime\":\"2026-11-27T22:48:45Z\"}],\"hostIP\":\"172.16.0.9\","
                           "\"podIP\":\"10.0.0.9\",\"startTime\":\"2026-11-27T22:48:45Z\",\"containerStatuses\":[{"
                           "\"name\":\"c\",\"image\":\"x\",\"ready\":true,\"restartCount\":0,\"state\":{\"running\":"
                           "{\"startedAt\":\"2026-11-27T22:48:45Z\"}}}]}}", 0, &je);
    json_t *md = json_object_get(p, "metadata");
    json_object_set_new(md, "name", json_string(name));
    json_object_set_new(md, "uid", json_string(uid));
    json_object_set_new(json_object_get(p, "spec"), "nodeName", json_string(node));
    return p;
}

/* The stored bytes the scripts would make of b with version rv (head + rv + tail). */
static char *stored(const struct store_blob *b, const char *rv, size_t *len) {
    const char *h = b->pk ? b->pk : b->json, *t = b->pk ? b->pk_tail : b->tail;
    size_t hl = b->pk ? b->pk_head_len : b->head_len, tl = b->pk ? b->pk_tail_len : b->tail_len, rl = strlen(rv);
    char *s = malloc(hl + rl + tl);
    memcpy(s, h, hl);
    memcpy(s + hl, rv, rl);
    memcpy(s + hl + rl, t, tl);
    *len = hl + rl + tl;
    return s;
}

/* A pod packs to well under half its JSON and unpacks to exactly the JSON
 * the plain store would have kept, for any version. */
TEST(store_pack_roundtrip) {
    struct store_options o;
    store_options_init(&o);
    struct store_cfg cfg;
    REQUIRE_I64(store_cfg_init(&cfg, &o), 0);
    struct store_rng rng = {0};
    const char *rvs[] = {"1", "12345", "18446744073709551615"};
    for (int i = 0; i < 30; i++) {
        json_t *p = running_pod(i);
        struct store_blob b;
        char err[256];
        REQUIRE_I64(store_blob_encode(&cfg, &rng, p, &b, err, sizeof err), 0);
        REQUIRE(b.pk != NULL);
        CHECK_I64(b.pk[0], 1);
        size_t plain = b.head_len + b.tail_len, len, jlen;
        CHECK(b.pk_head_len + b.pk_tail_len < plain / 2);
        const char *rv = rvs[i % 3];
        char *s = stored(&b, rv, &len), *json = NULL;
        REQUIRE_I64(store_unpack(cfg.pack, s, len, 1 << 20, &json, &jlen), 0);
        REQUIRE(json != NULL);
        char *want = store_blob_final(&b, strtoull(rv, NULL, 10), &plain);
        CHECK_I64(jlen, plain);
        CHECK_STR(json, want);
        free(want);
        free(json);
        free(s);
        store_blob_free(&b);
        json_decref(p);
    }
    store_cfg_free(&cfg);
}

/* What stays plain: small objects, and ones that would pack past the ratio
 * list pages count on (a long run of one byte). Plain bytes read as they are. */
TEST(store_pack_plain) {
    struct store_pack *p = store_pack_new();
    REQUIRE(p != NULL);
    char small[] = "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"a\","
                   "\"resourceVersion\":\"\"}}";
    char *at = strstr(small, "\"\"}}") + 1;
    struct store_blob b = {.json = small, .head_len = (size_t)(at - small), .tail = at,
                           .tail_len = strlen(at)};
    store_pack_blob(p, &b);
    CHECK(b.pk == NULL);
    size_t n = 200000;
    char *big = malloc(n + 1);
    memset(big, 'x', n);
    big[0] = '{';
    big[n] = 0;
    b = (struct store_blob){.json = big, .head_len = n / 2, .tail = big + n / 2, .tail_len = n - n / 2};
    store_pack_blob(p, &b);
    CHECK(b.pk == NULL);
    char *out = (char *)1;
    size_t outlen = 7;
    CHECK_I64(store_unpack(p, big, n, 1 << 20, &out, &outlen), 0);
    CHECK(out == NULL);
    free(big);
    store_pack_free(p);
}

/* Bytes that start as packed but are not a whole packed object are refused
 * (never read past their end), and so is one that unpacks past max. */
TEST(store_pack_bad_input) {
    struct store_pack *p = store_pack_new();
    REQUIRE(p != NULL);
    json_t *pod = running_pod(3);
    struct store_options o;
    store_options_init(&o);
    struct store_cfg cfg;
    REQUIRE_I64(store_cfg_init(&cfg, &o), 0);
    struct store_rng rng = {0};
    struct store_blob b;
    char err[256];
    REQUIRE_I64(store_blob_encode(&cfg, &rng, pod, &b, err, sizeof err), 0);
    REQUIRE(b.pk != NULL);
    size_t len;
    char *s = stored(&b, "42", &len), *out = NULL;
    size_t outlen;
    for (size_t cut = 0; cut < len; cut++) { /* every truncation */
        CHECK_I64(store_unpack(p, s, cut, 1 << 20, &out, &outlen), cut ? -EIO : 0);
        CHECK(out == NULL);
    }
    CHECK_I64(store_unpack(p, s, len, 100, &out, &outlen), -EIO); /* past max */
    const char *junk[] = {"\x01", "\x01\x00", "\x01\x05" "abcde1x", "\x01\xff\xff\xff\xff\xff\x01", "\x02{}"};
    for (size_t i = 0; i < sizeof junk / sizeof *junk; i++) {
        size_t jl = i == 1 ? 2 : strlen(junk[i]);
        int rc = store_unpack(p, junk[i], jl, 1 << 20, &out, &outlen);
        CHECK(i == 4 ? rc == 0 && out == NULL : rc == -EIO);
    }
    s[b.pk_head_len + 2 + 5] ^= 0x5a; /* a byte of the tail's frame */
    int rc = store_unpack(p, s, len, 1 << 20, &out, &outlen);
    CHECK(rc == -EIO || (rc == 0 && out != NULL));
    free(out);
    free(s);
    store_blob_free(&b);
    json_decref(pod);
    store_cfg_free(&cfg);
    store_pack_free(p);
}

/* Text packed in memory (store_pack_text: a whole list's items while it is
 * served): a pod's JSON in under a third of its bytes, unpacked exactly;
 * short or incompressible text is left as it is; a wrong length or damaged
 * bytes are refused, never read or written past. */
TEST(store_pack_text_roundtrip) {
    struct store_pack *p = store_pack_new();
    REQUIRE(p != NULL);
    json_t *pod = running_pod(11);
    char *json = json_dumps(pod, JSON_COMPACT);
    size_t n = strlen(json), zn = 0;
    char *z = NULL;
    REQUIRE_I64(store_pack_text(p, json, n, &z, &zn), 0);
    CHECK(zn * 3 < n);
    char *back = malloc(n + 1);
    CHECK_I64(store_unpack_text(p, z, zn, back, n), 0);
    CHECK(memcmp(back, json, n) == 0);
    CHECK_I64(store_unpack_text(p, z, zn, back, n - 1), -EIO); /* not the length it was */
    CHECK_I64(store_unpack_text(p, z, zn - 1, back, n), -EIO);
    char *bad = malloc(zn);
    memcpy(bad, z, zn);
    bad[zn / 2] ^= 0x5a;
    int rc = store_unpack_text(p, bad, zn, back, n);
    CHECK(rc == 0 || rc == -EIO); /* zstd may not see every flipped byte; never past dst */
    free(bad);
    char *out = (char *)1;
    size_t outlen = 9;
    CHECK_I64(store_pack_text(p, "{\"a\":1}", 7, &out, &outlen), 1);
    CHECK(out == NULL && outlen == 0);
    unsigned char noise[4096];
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < sizeof noise; i++) { /* xorshift: nothing to gain */
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        noise[i] = (unsigned char)x;
    }
    CHECK_I64(store_pack_text(p, (const char *)noise, sizeof noise, &out, &outlen), 1);
    free(back);
    free(z);
    free(json);
    json_decref(pod);
    store_pack_free(p);
}
