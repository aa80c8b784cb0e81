/* Patches under their limits (patch.h): the document a patch builds stays
 * within a stored object's size, value count and depth at every step, and
 * the work a patch does is bounded, for JSON patch, merge patch and strategic
 * merge patch. Every accepted result is checked against the account the
 * patch kept of it (patch_apply_tracked). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "patch.h"
#include "patch_int.h"
#include "test.h"

static json_t *pj(const char *text) {
    json_error_t e;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &e);
    if (!v) test_fail(__FILE__, __LINE__, "bad test JSON (%s): %s", e.text, text);
    return v;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Applies the patch (both borrowed) under lim (NULL: defaults); on success
 * checks the account matches the result and the result is within the
 * limits. Returns the code; *out (may be NULL) gets the result. */
static int apply(enum patch_type type, const json_t *t, const json_t *p, const struct patch_limits *lim,
                 json_t **out, char *err, size_t errlen, int line) {
    static const struct patch_limits dflt = PATCH_LIMITS_DEFAULT;
    const struct patch_limits *l = lim ? lim : &dflt;
    json_t *r = NULL;
    struct patch_size tracked;
    int rc = patch_apply_tracked(type, t, p, l, &r, err, errlen, &tracked);
    if (rc == 0) {
        struct patch_size real = pb_value(r);
        if (real.bytes != tracked.bytes || real.nodes != tracked.nodes)
            test_fail(__FILE__, line, "account %zu bytes %zu values, result %zu bytes %zu values", tracked.bytes,
                      tracked.nodes, real.bytes, real.nodes);
        if (real.bytes > l->max_bytes || real.nodes > l->max_nodes || real.depth > l->max_depth)
            test_fail(__FILE__, line, "result past the limits: %zu bytes %zu values depth %d", real.bytes,
                      real.nodes, real.depth);
    } else if (r) {
        test_fail(__FILE__, line, "out not NULL on error");
    }
    if (out) *out = r;
    else json_decref(r);
    return rc;
}
#define APPLY(type, t, p, lim, out, err) apply(type, t, p, lim, out, err, sizeof err, __LINE__)

/* n JSON patch copies of /data into itself: the document doubles each time. */
static json_t *copy_doubling(int n) {
    json_t *ops = json_array();
    char path[32];
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "/data/k%d", i);
        json_array_append_new(ops, json_pack("{s:s, s:s, s:s}", "op", "copy", "from", "/data", "path", path));
    }
    return ops;
}

/* {"data": {"k00000": "v", ...}} with n keys. */
static json_t *data_of(int n) {
    json_t *data = json_object();
    char k[16];
    for (int i = 0; i < n; i++) {
        snprintf(k, sizeof k, "k%05d", i);
        json_object_set_new(data, k, json_string("v"));
    }
    return json_pack("{s:o}", "data", data);
}

TEST(patch_estimate_counts) {
    json_t *v = pj("{\"a\":[1,\"xy\",null,-10,2.5,true,false,{}]}");
    size_t bytes, nodes;
    int depth;
    patch_estimate(v, &bytes, &nodes, &depth);
    /* {} 2 + "a": 5 + [] 2 + elements (1 + 1) (1 + 4) (1 + 4) (1 + 3) (1 + 16) (1 + 4) (1 + 5) (1 + 2) */
    CHECK_I64(bytes, 2 + 5 + 2 + 2 + 5 + 5 + 4 + 17 + 5 + 6 + 3);
    CHECK_I64(nodes, 10);
    CHECK_I64(depth, 3);
    patch_estimate(NULL, &bytes, &nodes, &depth);
    CHECK_I64(bytes, 0);
    json_decref(v);
}

/* The 1 KB patch that held 1.6 GB: refused at the copy that passes the
 * stored object's size, before it is made; 16 copies (983 KB) still fit. */
TEST(patch_json_copy_doubling_refused_at_the_limit) {
    json_t *t = pj("{\"metadata\":{\"name\":\"c\"},\"data\":{\"a\":\"x\"}}");
    json_t *ops = copy_doubling(22), *out;
    char err[512] = "";
    double t0 = now_s();
    CHECK_I64(APPLY(PATCH_JSON, t, ops, NULL, &out, err), -E2BIG);
    CHECK(now_s() - t0 < 5.0); /* ASan; about 0.03 s in a release build */
    CHECK_HAS(err, "json patch operation 16 (copy): the patched object would be larger than 1572864 bytes");
    json_decref(ops);
    ops = copy_doubling(16);
    REQUIRE(APPLY(PATCH_JSON, t, ops, NULL, &out, err) == 0);
    size_t bytes;
    patch_estimate(out, &bytes, NULL, NULL);
    CHECK(bytes > 700 * 1024 && bytes <= OBJ_MAX_BYTES);
    json_decref(out);
    json_decref(ops);
    /* under smaller limits the refusal comes as many copies earlier */
    struct patch_limits lim = PATCH_LIMITS_DEFAULT;
    lim.max_bytes = 4096;
    ops = copy_doubling(22);
    CHECK_I64(APPLY(PATCH_JSON, t, ops, &lim, &out, err), -E2BIG);
    CHECK_HAS(err, "operation 7 (copy)");
    lim = (struct patch_limits)PATCH_LIMITS_DEFAULT;
    lim.max_nodes = 1000;
    CHECK_I64(APPLY(PATCH_JSON, t, ops, &lim, &out, err), -E2BIG);
    CHECK_HAS(err, "would hold more than 1000 values");
    json_decref(ops);
    json_decref(t);
}

/* Copies of a large value over one key: the document stays small, the work
 * does not (a 442 KB patch of them took 46 s on the server before). */
TEST(patch_json_repeated_copies_cost_work) {
    json_t *t = data_of(20000), *ops = json_array(), *out;
    for (int i = 0; i < 1000; i++)
        json_array_append_new(ops, json_pack("{s:s, s:s, s:s}", "op", "copy", "from", "/data", "path", "/b"));
    char err[512] = "";
    double t0 = now_s();
    CHECK_I64(APPLY(PATCH_JSON, t, ops, NULL, &out, err), -E2BIG);
    CHECK(now_s() - t0 < 10.0);
    CHECK_HAS(err, "json patch operation 19 (copy): the patch needs more than 12582912 steps of work");
    /* a few copies are fine */
    while (json_array_size(ops) > 5) json_array_remove(ops, 0);
    CHECK_I64(APPLY(PATCH_JSON, t, ops, NULL, &out, err), 0);
    json_decref(out);
    json_decref(ops);
    json_decref(t);
}

/* Inserts and removes at the front of a long array shift it each time. */
TEST(patch_json_array_shifts_cost_work) {
    json_t *arr = json_array();
    for (int i = 0; i < 100000; i++) json_array_append_new(arr, json_integer(0));
    json_t *t = json_pack("{s:o}", "x", arr), *ops = json_array(), *out;
    for (int i = 0; i < 10000; i++)
        json_array_append_new(ops, i % 2 ? json_pack("{s:s, s:s}", "op", "remove", "path", "/x/0")
                                         : json_pack("{s:s, s:s, s:i}", "op", "add", "path", "/x/0", "value", 1));
    char err[512] = "";
    CHECK_I64(APPLY(PATCH_JSON, t, ops, NULL, &out, err), -E2BIG);
    CHECK_HAS(err, "steps of work");
    /* appends and removals at the end move nothing */
    json_array_clear(ops);
    for (int i = 0; i < 10000; i++)
        json_array_append_new(ops, i % 2 ? json_pack("{s:s, s:s}", "op", "remove", "path", "/x/100000")
                                         : json_pack("{s:s, s:s, s:i}", "op", "add", "path", "/x/-", "value", 1));
    CHECK_I64(APPLY(PATCH_JSON, t, ops, NULL, &out, err), 0);
    json_decref(out);
    json_decref(ops);
    json_decref(t);
}

/* A move is O(1) in the document's size: moving a large value back and forth
 * 10,000 times is cheap and within the budget. */
TEST(patch_json_moves_stay_cheap) {
    json_t *t = data_of(20000), *ops = json_array(), *out;
    for (int i = 0; i < 10000; i++)
        json_array_append_new(ops, json_pack("{s:s, s:s, s:s}", "op", "move", "from", i % 2 ? "/x" : "/data", "path",
                                             i % 2 ? "/data" : "/x"));
    char err[512] = "";
    CHECK_I64(APPLY(PATCH_JSON, t, ops, NULL, &out, err), 0);
    CHECK(patch_value_equal(out, t));
    json_decref(out);
    json_decref(ops);
    json_decref(t);
}

/* Nesting: moves that stack one chain under another, and merge values that
 * land deep, are refused past the depth limit (the recursive free of a
 * deeper tree could overflow the stack). */
TEST(patch_depth_limit) {
    struct patch_limits lim = PATCH_LIMITS_DEFAULT;
    lim.max_depth = 8;
    json_t *t = pj("{\"a\":{\"a\":{\"a\":{\"a\":{}}}},\"b\":{\"b\":{\"b\":{\"b\":{}}}}}"), *out;
    json_t *p = pj("[{\"op\":\"move\",\"from\":\"/b\",\"path\":\"/a/a/a/a/b\"}]");
    char err[512] = "";
    CHECK_I64(APPLY(PATCH_JSON, t, p, &lim, &out, err), -E2BIG);
    CHECK_HAS(err, "nested deeper than 8 levels");
    json_decref(p);
    p = pj("[{\"op\":\"move\",\"from\":\"/b\",\"path\":\"/a/a/b\"}]");
    CHECK_I64(APPLY(PATCH_JSON, t, p, &lim, &out, err), 0);
    json_decref(out);
    json_decref(p);
    p = pj("{\"a\":{\"a\":{\"a\":{\"a\":{\"x\":[[[[[1]]]]]}}}}}");
    CHECK_I64(APPLY(PATCH_MERGE, t, p, &lim, &out, err), -E2BIG);
    CHECK_HAS(err, "merge patch: the patched object would be nested deeper than 8 levels");
    CHECK_I64(APPLY(PATCH_STRATEGIC, t, p, &lim, &out, err), -E2BIG);
    CHECK_HAS(err, "strategic merge patch: the patched object would be nested deeper");
    json_decref(p);
    json_decref(t);
    /* the defaults: an array as deep as the reader takes, one level down */
    json_t *deep = json_integer(1);
    for (int i = 0; i < OBJ_MAX_DEPTH; i++) deep = json_pack("[o]", deep);
    t = json_object();
    p = json_pack("{s:O}", "x", deep);
    CHECK_I64(APPLY(PATCH_MERGE, t, p, NULL, &out, err), -E2BIG);
    CHECK_I64(APPLY(PATCH_MERGE, t, deep, NULL, &out, err), 0);
    json_decref(out);
    json_decref(p);
    json_decref(deep);
    json_decref(t);
}

static json_t *big_string(size_t n, char c) {
    char *s = malloc(n + 1);
    memset(s, c, n);
    s[n] = 0;
    json_t *v = json_string(s);
    free(s);
    return v;
}

/* Merge and strategic merge patches: replacing a large value by another is
 * counted exactly (no false refusal); growing past the limit is refused. */
TEST(patch_merge_and_strategic_size_limits) {
    json_t *t = json_pack("{s:{s:s}, s:{s:o}}", "metadata", "name", "cm", "data", "a", big_string(1000000, 'a'));
    json_t *p = json_pack("{s:{s:o}}", "data", "a", big_string(1000000, 'b')), *out;
    char err[512] = "";
    for (int type = PATCH_MERGE; type <= PATCH_STRATEGIC; type++) {
        if (type == PATCH_JSON) continue;
        CHECK_I64(APPLY((enum patch_type)type, t, p, NULL, &out, err), 0);
        json_decref(out);
    }
    json_decref(p);
    p = json_pack("{s:{s:o}}", "data", "b", big_string(600000, 'b'));
    CHECK_I64(APPLY(PATCH_MERGE, t, p, NULL, &out, err), -E2BIG);
    CHECK_HAS(err, "merge patch: the patched object would be larger than 1572864 bytes");
    CHECK_I64(APPLY(PATCH_STRATEGIC, t, p, NULL, &out, err), -E2BIG);
    CHECK_HAS(err, "strategic merge patch: the patched object would be larger than 1572864 bytes");
    json_decref(p);
    /* deleting one and adding the other in one patch: within the limit */
    p = json_pack("{s:{s:n, s:o}}", "data", "a", "b", big_string(600000, 'b'));
    CHECK_I64(APPLY(PATCH_MERGE, t, p, NULL, &out, err), 0);
    json_decref(out);
    CHECK_I64(APPLY(PATCH_STRATEGIC, t, p, NULL, &out, err), 0);
    json_decref(out);
    json_decref(p);
    json_decref(t);
}

/* Strategic list merges are linear (merge keys found in an index): a merge
 * of two 5,000-element lists, refused for its work while merge keys were
 * found by scanning, is accepted and the account is right; and every
 * directive keeps the account right. test_patch_linear.c has the rest. */
TEST(patch_strategic_list_work_and_account) {
    json_t *live = json_array(), *mine = json_array(), *out;
    char name[32];
    for (int i = 0; i < 5000; i++) {
        snprintf(name, sizeof name, "c%d", i);
        json_array_append_new(live, json_pack("{s:s, s:s}", "name", name, "image", "x"));
        snprintf(name, sizeof name, "p%d", i);
        json_array_append_new(mine, json_pack("{s:s, s:s}", "name", name, "image", "y"));
    }
    json_t *t = json_pack("{s:{s:o}}", "spec", "containers", live);
    json_t *p = json_pack("{s:{s:o}}", "spec", "containers", mine);
    char err[512] = "";
    CHECK_I64(APPLY(PATCH_STRATEGIC, t, p, NULL, &out, err), 0);
    CHECK_I64(json_array_size(json_object_get(json_object_get(out, "spec"), "containers")), 10000);
    json_decref(out);
    json_decref(p);
    json_decref(t);
    const char *target =
        "{\"metadata\":{\"finalizers\":[\"a\",\"b\",\"a\"],\"labels\":{\"x\":\"1\",\"y\":\"2\"}},"
        "\"spec\":{\"containers\":[{\"name\":\"a\",\"image\":\"1\",\"env\":[{\"name\":\"E\",\"value\":\"v\"}]},"
        "{\"name\":\"b\",\"image\":\"2\"}],\"tolerations\":[{\"key\":\"k\"}],\"keep\":{\"u\":1,\"v\":2}}}";
    const char *patches[] = {
        "{\"spec\":{\"containers\":[{\"name\":\"a\",\"$patch\":\"delete\"},{\"name\":\"c\",\"image\":\"3\"}]}}",
        "{\"spec\":{\"containers\":[{\"$patch\":\"replace\"},{\"name\":\"z\",\"image\":\"9\"}]}}",
        "{\"spec\":{\"$setElementOrder/containers\":[{\"name\":\"b\"},{\"name\":\"a\"}]}}",
        "{\"metadata\":{\"finalizers\":[\"c\"],\"$deleteFromPrimitiveList/finalizers\":[\"a\"],\"labels\":null}}",
        "{\"spec\":{\"$retainKeys\":[\"containers\"],\"containers\":[{\"name\":\"a\",\"env\":[{\"name\":\"F\"}]}]}}",
        "{\"spec\":{\"keep\":{\"$patch\":\"replace\",\"w\":[1,{\"q\":null}]},\"new\":{\"n\":{\"m\":null,\"o\":1}}}}",
        "{\"spec\":{\"keep\":{\"$patch\":\"delete\"},\"tolerations\":[]}}",
        "{\"$patch\":\"delete\"}",
        "{\"spec\":\"scalar\",\"status\":{\"conditions\":[{\"type\":\"R\",\"status\":\"True\"}]}}",
    };
    t = pj(target);
    for (size_t i = 0; i < sizeof patches / sizeof patches[0]; i++) {
        p = pj(patches[i]);
        if (APPLY(PATCH_STRATEGIC, t, p, NULL, &out, err) != 0) test_fail(__FILE__, __LINE__, "%zu: %s", i, err);
        json_decref(out);
        if (APPLY(PATCH_MERGE, t, p, NULL, &out, err) != 0) test_fail(__FILE__, __LINE__, "%zu: %s", i, err);
        json_decref(out);
        json_decref(p);
    }
    json_decref(t);
}

/* Every JSON patch operation keeps the account right. */
TEST(patch_json_account_every_op) {
    const char *d = "{\"a\":{\"b\":[1,2,3],\"c\":\"x\"},\"s\":\"str\",\"n\":null}";
    const char *patches[] = {
        "[{\"op\":\"add\",\"path\":\"/a/b/1\",\"value\":{\"k\":[true]}}]",
        "[{\"op\":\"add\",\"path\":\"/a/c\",\"value\":12345}]",
        "[{\"op\":\"remove\",\"path\":\"/a/b\"},{\"op\":\"remove\",\"path\":\"/s\"}]",
        "[{\"op\":\"replace\",\"path\":\"/a\",\"value\":[]},{\"op\":\"replace\",\"path\":\"\",\"value\":{\"z\":1}}]",
        "[{\"op\":\"move\",\"from\":\"/a/b\",\"path\":\"/long-key-name\"},"
        "{\"op\":\"move\",\"from\":\"/a\",\"path\":\"/s\"}]",
        "[{\"op\":\"move\",\"from\":\"/a/b/0\",\"path\":\"/a/b/-\"},"
        "{\"op\":\"move\",\"from\":\"/a/b\",\"path\":\"/a\"}]",
        "[{\"op\":\"move\",\"from\":\"/a\",\"path\":\"\"}]",
        "[{\"op\":\"copy\",\"from\":\"/a\",\"path\":\"/s\"},{\"op\":\"copy\",\"from\":\"\",\"path\":\"/a/b/0\"}]",
        "[{\"op\":\"copy\",\"from\":\"/a\",\"path\":\"\"},{\"op\":\"test\",\"path\":\"/c\",\"value\":\"x\"}]",
    };
    json_t *t = pj(d), *out;
    char err[512] = "";
    for (size_t i = 0; i < sizeof patches / sizeof patches[0]; i++) {
        json_t *p = pj(patches[i]);
        if (APPLY(PATCH_JSON, t, p, NULL, &out, err) != 0) test_fail(__FILE__, __LINE__, "%zu: %s", i, err);
        json_decref(out);
        json_decref(p);
    }
    json_decref(t);
}
