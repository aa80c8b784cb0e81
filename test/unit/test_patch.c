/* Patches: RFC 7386 appendix A, RFC 6902 appendix A (every example, errors
 * included), and strategic merge patch as kubectl and kubelets send it. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>

#include "patch.h"
#include "test.h"

typedef int (*patch_fn)(const json_t *, const json_t *, json_t **, char *, size_t);

static json_t *pj(const char *text) {
    json_error_t e;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &e);
    if (!v) test_fail(__FILE__, __LINE__, "bad test JSON (%s): %s", e.text, text);
    return v;
}

/* Applies fn; when want is non-NULL expects success with a result equal to
 * want (key order ignored), else failure with rc_want and msg in the error.
 * Also checks the inputs were left untouched. */
static void pcheck(patch_fn fn, const char *target, const char *patch, const char *want, int rc_want,
                   const char *msg, int line) {
    json_t *t = target ? pj(target) : NULL, *p = pj(patch), *t0 = target ? pj(target) : NULL, *p0 = pj(patch);
    json_t *out = (json_t *)1;
    char err[512] = "";
    int rc = fn(t, p, &out, err, sizeof err);
    if (want) {
        json_t *w = pj(want);
        if (rc != 0) {
            test_fail(__FILE__, line, "rc %d (%s), want success", rc, err);
        } else if (!patch_value_equal(out, w) || json_typeof(out) != json_typeof(w)) {
            char *got = json_dumps(out, JSON_ENCODE_ANY | JSON_COMPACT);
            test_fail(__FILE__, line, "got %s, want %s", got, want);
            free(got);
        }
        json_decref(w);
        if (rc == 0) json_decref(out);
    } else {
        if (rc != rc_want) test_fail(__FILE__, line, "rc %d, want %d (%s)", rc, rc_want, err);
        if (rc == 0) json_decref(out);
        else if (out) test_fail(__FILE__, line, "out not NULL on error");
        if (msg && !strstr(err, msg)) test_fail(__FILE__, line, "error \"%s\" lacks \"%s\"", err, msg);
    }
    if ((t && !json_equal(t, t0)) || !json_equal(p, p0)) test_fail(__FILE__, line, "inputs modified");
    json_decref(t);
    json_decref(p);
    json_decref(t0);
    json_decref(p0);
}
#define OK(fn, t, p, w) pcheck(fn, t, p, w, 0, NULL, __LINE__)
#define BAD(fn, t, p, rc, msg) pcheck(fn, t, p, NULL, rc, msg, __LINE__)

/* Result as compact JSON text, for checks that care about list order. */
static char *ptext(patch_fn fn, const char *target, const char *patch) {
    json_t *t = pj(target), *p = pj(patch), *out = NULL;
    char err[512] = "";
    char *s = NULL;
    if (fn(t, p, &out, err, sizeof err) == 0) s = json_dumps(out, JSON_COMPACT | JSON_ENCODE_ANY);
    else s = strdup(err);
    json_decref(out);
    json_decref(t);
    json_decref(p);
    return s;
}
#define ORDER(fn, t, p, w)                  \
    do {                                    \
        char *s_ = ptext(fn, t, p);         \
        CHECK_STR(s_, w);                   \
        free(s_);                           \
    } while (0)

TEST(patch_value_equal_numbers) {
    json_t *a = pj("{\"x\":[1,2.0,{\"y\":null}]}"), *b = pj("{\"x\":[1.0,2,{\"y\":null}]}"), *c = pj("{\"x\":[1,2]}");
    CHECK(patch_value_equal(a, b));
    CHECK(!patch_value_equal(a, c));
    json_t *s1 = pj("\"10\""), *n1 = pj("10");
    CHECK(!patch_value_equal(s1, n1));
    json_decref(a);
    json_decref(b);
    json_decref(c);
    json_decref(s1);
    json_decref(n1);
}

/* ---- RFC 7386 appendix A ---- */

TEST(patch_merge_rfc7386_appendix) {
    OK(patch_merge, "{\"a\":\"b\"}", "{\"a\":\"c\"}", "{\"a\":\"c\"}");
    OK(patch_merge, "{\"a\":\"b\"}", "{\"b\":\"c\"}", "{\"a\":\"b\",\"b\":\"c\"}");
    OK(patch_merge, "{\"a\":\"b\"}", "{\"a\":null}", "{}");
    OK(patch_merge, "{\"a\":\"b\",\"b\":\"c\"}", "{\"a\":null}", "{\"b\":\"c\"}");
    OK(patch_merge, "{\"a\":[\"b\"]}", "{\"a\":\"c\"}", "{\"a\":\"c\"}");
    OK(patch_merge, "{\"a\":\"c\"}", "{\"a\":[\"b\"]}", "{\"a\":[\"b\"]}");
    OK(patch_merge, "{\"a\":{\"b\":\"c\"}}", "{\"a\":{\"b\":\"d\",\"c\":null}}", "{\"a\":{\"b\":\"d\"}}");
    OK(patch_merge, "{\"a\":[{\"b\":\"c\"}]}", "{\"a\":[1]}", "{\"a\":[1]}");
    OK(patch_merge, "[\"a\",\"b\"]", "[\"c\",\"d\"]", "[\"c\",\"d\"]");
    OK(patch_merge, "{\"a\":\"b\"}", "[\"c\"]", "[\"c\"]");
    OK(patch_merge, "{\"a\":\"foo\"}", "null", "null");
    OK(patch_merge, "{\"a\":\"foo\"}", "\"bar\"", "\"bar\"");
    OK(patch_merge, "{\"e\":null}", "{\"a\":1}", "{\"e\":null,\"a\":1}");
    OK(patch_merge, "[1,2]", "{\"a\":\"b\",\"c\":null}", "{\"a\":\"b\"}");
    OK(patch_merge, "{}", "{\"a\":{\"bb\":{\"ccc\":null}}}", "{\"a\":{\"bb\":{}}}");
}

TEST(patch_merge_k8s_shapes_and_limits) {
    OK(patch_merge, "{\"metadata\":{\"labels\":{\"a\":\"1\",\"b\":\"2\"}},\"spec\":{\"x\":1}}",
       "{\"metadata\":{\"labels\":{\"a\":null,\"c\":\"3\"}}}",
       "{\"metadata\":{\"labels\":{\"b\":\"2\",\"c\":\"3\"}},\"spec\":{\"x\":1}}");
    OK(patch_merge, NULL, "{\"a\":{\"b\":null,\"c\":1}}", "{\"a\":{\"c\":1}}");
    /* arrays are values: nulls inside them stay */
    OK(patch_merge, "{}", "{\"a\":[null,{\"b\":null}]}", "{\"a\":[null,{\"b\":null}]}");
    char deep[2 * PATCH_MAX_DEPTH * 6 + 16] = "", *o = deep;
    for (int i = 0; i < PATCH_MAX_DEPTH + 1; i++) o += sprintf(o, "{\"a\":");
    o += sprintf(o, "1");
    for (int i = 0; i < PATCH_MAX_DEPTH + 1; i++) *o++ = '}';
    *o = 0;
    BAD(patch_merge, "{}", deep, -E2BIG, "deeper than 64");
    /* idempotent: applying the result's patch twice changes nothing more */
    json_t *t = pj("{\"a\":{\"b\":1,\"c\":[1]},\"d\":2}"), *p = pj("{\"a\":{\"b\":null,\"e\":{\"f\":null}},\"d\":[3]}");
    json_t *r1, *r2;
    char err[128];
    REQUIRE(patch_merge(t, p, &r1, err, sizeof err) == 0);
    REQUIRE(patch_merge(r1, p, &r2, err, sizeof err) == 0);
    CHECK(patch_value_equal(r1, r2));
    json_decref(t);
    json_decref(p);
    json_decref(r1);
    json_decref(r2);
}

/* ---- RFC 6902 appendix A ---- */

TEST(patch_json_rfc6902_appendix_a) {
    /* A.1 */ OK(patch_json, "{\"foo\":\"bar\"}", "[{\"op\":\"add\",\"path\":\"/baz\",\"value\":\"qux\"}]",
                 "{\"baz\":\"qux\",\"foo\":\"bar\"}");
    /* A.2 */ OK(patch_json, "{\"foo\":[\"bar\",\"baz\"]}", "[{\"op\":\"add\",\"path\":\"/foo/1\",\"value\":\"qux\"}]",
                 "{\"foo\":[\"bar\",\"qux\",\"baz\"]}");
    /* A.3 */ OK(patch_json, "{\"baz\":\"qux\",\"foo\":\"bar\"}", "[{\"op\":\"remove\",\"path\":\"/baz\"}]",
                 "{\"foo\":\"bar\"}");
    /* A.4 */ OK(patch_json, "{\"foo\":[\"bar\",\"qux\",\"baz\"]}", "[{\"op\":\"remove\",\"path\":\"/foo/1\"}]",
                 "{\"foo\":[\"bar\",\"baz\"]}");
    /* A.5 */ OK(patch_json, "{\"baz\":\"qux\",\"foo\":\"bar\"}",
                 "[{\"op\":\"replace\",\"path\":\"/baz\",\"value\":\"boo\"}]", "{\"baz\":\"boo\",\"foo\":\"bar\"}");
    /* A.6 */ OK(patch_json, "{\"foo\":{\"bar\":\"baz\",\"waldo\":\"fred\"},\"qux\":{\"corge\":\"grault\"}}",
                 "[{\"op\":\"move\",\"from\":\"/foo/waldo\",\"path\":\"/qux/thud\"}]",
                 "{\"foo\":{\"bar\":\"baz\"},\"qux\":{\"corge\":\"grault\",\"thud\":\"fred\"}}");
    /* A.7 */ OK(patch_json, "{\"foo\":[\"all\",\"grass\",\"cows\",\"eat\"]}",
                 "[{\"op\":\"move\",\"from\":\"/foo/1\",\"path\":\"/foo/3\"}]",
                 "{\"foo\":[\"all\",\"cows\",\"eat\",\"grass\"]}");
    /* A.8 */ OK(patch_json, "{\"baz\":\"qux\",\"foo\":[\"a\",2,\"c\"]}",
                 "[{\"op\":\"test\",\"path\":\"/baz\",\"value\":\"qux\"},{\"op\":\"test\",\"path\":\"/foo/1\",\"value\":2}]",
                 "{\"baz\":\"qux\",\"foo\":[\"a\",2,\"c\"]}");
    /* A.9 */ BAD(patch_json, "{\"baz\":\"qux\"}", "[{\"op\":\"test\",\"path\":\"/baz\",\"value\":\"bar\"}]",
                  -ECANCELED, "json patch operation 0 (test): test failed: value differs at path: \"/baz\"");
    /* A.10 */ OK(patch_json, "{\"foo\":\"bar\"}",
                  "[{\"op\":\"add\",\"path\":\"/child\",\"value\":{\"grandchild\":{}}}]",
                  "{\"foo\":\"bar\",\"child\":{\"grandchild\":{}}}");
    /* A.11 */ OK(patch_json, "{\"foo\":\"bar\"}",
                  "[{\"op\":\"add\",\"path\":\"/baz\",\"value\":\"qux\",\"xyz\":123}]", "{\"foo\":\"bar\",\"baz\":\"qux\"}");
    /* A.12 */ BAD(patch_json, "{\"foo\":\"bar\"}", "[{\"op\":\"add\",\"path\":\"/baz/bat\",\"value\":\"qux\"}]",
                   -ENOENT, "doc is missing path: \"/baz/bat\"");
    /* A.14 */ OK(patch_json, "{\"/\":9,\"~1\":10}", "[{\"op\":\"test\",\"path\":\"/~01\",\"value\":10}]",
                  "{\"/\":9,\"~1\":10}");
    /* A.15 */ BAD(patch_json, "{\"/\":9,\"~1\":10}", "[{\"op\":\"test\",\"path\":\"/~01\",\"value\":\"10\"}]",
                   -ECANCELED, "test failed");
    /* A.16 */ OK(patch_json, "{\"foo\":[\"bar\"]}", "[{\"op\":\"add\",\"path\":\"/foo/-\",\"value\":[\"abc\",\"def\"]}]",
                  "{\"foo\":[\"bar\",[\"abc\",\"def\"]]}");
}

TEST(patch_json_rfc6902_a13_duplicate_members) {
    /* A.13: an operation with two "op" members is invalid. The parser must
     * refuse it (the shim parses with JSON_REJECT_DUPLICATES); a parser that
     * keeps the last member yields a remove of a missing path, also refused. */
    const char *a13 = "[{\"op\":\"add\",\"path\":\"/baz\",\"value\":\"qux\",\"op\":\"remove\"}]";
    json_error_t e;
    json_t *strict = json_loads(a13, JSON_REJECT_DUPLICATES, &e);
    CHECK(strict == NULL);
    json_decref(strict);
    BAD(patch_json, "{\"foo\":\"bar\"}", a13, -ENOENT, "(remove): doc is missing path");
}

TEST(patch_json_pointer_rfc6901) {
    const char *doc = "{\"foo\":[\"bar\",\"baz\"],\"\":0,\"a/b\":1,\"c%d\":2,\"e^f\":3,\"g|h\":4,\"i\\\\j\":5,"
                      "\"k\\\"l\":6,\" \":7,\"m~n\":8}";
    const char *tests[][2] = {{"", NULL}, {"/foo", "[\"bar\",\"baz\"]"}, {"/foo/0", "\"bar\""}, {"/", "0"},
                              {"/a~1b", "1"}, {"/c%d", "2"}, {"/e^f", "3"}, {"/g|h", "4"}, {"/i\\\\j", "5"},
                              {"/k\\\"l", "6"}, {"/ ", "7"}, {"/m~0n", "8"}};
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        char patch[256];
        snprintf(patch, sizeof patch, "[{\"op\":\"test\",\"path\":\"%s\",\"value\":%s}]", tests[i][0],
                 tests[i][1] ? tests[i][1] : doc);
        OK(patch_json, doc, patch, doc);
    }
    BAD(patch_json, doc, "[{\"op\":\"test\",\"path\":\"/m~2n\",\"value\":8}]", -EINVAL, "invalid JSON pointer");
    BAD(patch_json, doc, "[{\"op\":\"test\",\"path\":\"/m~\",\"value\":8}]", -EINVAL, "invalid JSON pointer");
    BAD(patch_json, doc, "[{\"op\":\"test\",\"path\":\"foo\",\"value\":8}]", -EINVAL, "invalid JSON pointer");
}

TEST(patch_json_errors) {
    const char *d = "{\"a\":{\"b\":[1,2,3]},\"s\":\"x\"}";
    BAD(patch_json, d, "{}", -EINVAL, "must be an array");
    BAD(patch_json, d, "[1]", -EINVAL, "operation is not an object");
    BAD(patch_json, d, "[{\"path\":\"/a\"}]", -EINVAL, "missing or non-string \"op\"");
    BAD(patch_json, d, "[{\"op\":\"frob\",\"path\":\"/a\"}]", -EINVAL, "(frob): unknown operation");
    BAD(patch_json, d, "[{\"op\":\"add\"}]", -EINVAL, "missing or non-string \"path\"");
    BAD(patch_json, d, "[{\"op\":\"add\",\"path\":\"/x\"}]", -EINVAL, "missing \"value\"");
    BAD(patch_json, d, "[{\"op\":\"replace\",\"path\":\"/x\"}]", -EINVAL, "missing \"value\"");
    BAD(patch_json, d, "[{\"op\":\"test\",\"path\":\"/x\"}]", -EINVAL, "missing \"value\"");
    BAD(patch_json, d, "[{\"op\":\"move\",\"path\":\"/x\"}]", -EINVAL, "\"from\"");
    BAD(patch_json, d, "[{\"op\":\"copy\",\"path\":\"/x\",\"from\":3}]", -EINVAL, "\"from\"");
    BAD(patch_json, d, "[{\"op\":\"remove\",\"path\":\"/x\"}]", -ENOENT, "doc is missing path: \"/x\"");
    BAD(patch_json, d, "[{\"op\":\"replace\",\"path\":\"/x\",\"value\":1}]", -ENOENT, "(replace): doc is missing path");
    BAD(patch_json, d, "[{\"op\":\"test\",\"path\":\"/x\",\"value\":1}]", -ENOENT, "doc is missing path");
    BAD(patch_json, d, "[{\"op\":\"add\",\"path\":\"/a/b/4\",\"value\":1}]", -ERANGE, "array index out of range");
    BAD(patch_json, d, "[{\"op\":\"add\",\"path\":\"/a/b/01\",\"value\":1}]", -EINVAL, "invalid array index");
    BAD(patch_json, d, "[{\"op\":\"add\",\"path\":\"/a/b/x\",\"value\":1}]", -EINVAL, "invalid array index");
    BAD(patch_json, d, "[{\"op\":\"remove\",\"path\":\"/a/b/3\"}]", -ERANGE, "out of range");
    BAD(patch_json, d, "[{\"op\":\"remove\",\"path\":\"/a/b/-\"}]", -ERANGE, "out of range");
    BAD(patch_json, d, "[{\"op\":\"replace\",\"path\":\"/a/b/3\",\"value\":0}]", -ENOENT, "missing path");
    BAD(patch_json, d, "[{\"op\":\"add\",\"path\":\"/s/t\",\"value\":1}]", -ENOENT, "missing path");
    BAD(patch_json, d, "[{\"op\":\"remove\",\"path\":\"\"}]", -EINVAL, "cannot remove the whole document");
    BAD(patch_json, d, "[{\"op\":\"move\",\"from\":\"/a\",\"path\":\"/a/c\"}]", -EINVAL, "into one of its children");
    BAD(patch_json, d, "[{\"op\":\"move\",\"from\":\"/nope\",\"path\":\"/c\"}]", -ENOENT, "missing \"from\" path: \"/nope\"");
    BAD(patch_json, d, "[{\"op\":\"copy\",\"from\":\"/nope\",\"path\":\"/c\"}]", -ENOENT, "missing \"from\" path");
    /* the first failure aborts everything; the target stays as it was (pcheck) */
    BAD(patch_json, d, "[{\"op\":\"add\",\"path\":\"/n\",\"value\":1},{\"op\":\"remove\",\"path\":\"/zz\"}]", -ENOENT,
        "operation 1 (remove)");
}

TEST(patch_json_more_ops) {
    const char *d = "{\"a\":{\"b\":[1,2,3]},\"s\":\"x\"}";
    OK(patch_json, d, "[]", d);
    OK(patch_json, d, "[{\"op\":\"add\",\"path\":\"\",\"value\":[1]}]", "[1]");          /* whole document */
    OK(patch_json, d, "[{\"op\":\"replace\",\"path\":\"\",\"value\":7}]", "7");
    OK(patch_json, d, "[{\"op\":\"add\",\"path\":\"/a/b/3\",\"value\":4}]", "{\"a\":{\"b\":[1,2,3,4]},\"s\":\"x\"}");
    OK(patch_json, d, "[{\"op\":\"add\",\"path\":\"/a/b/0\",\"value\":0}]", "{\"a\":{\"b\":[0,1,2,3]},\"s\":\"x\"}");
    OK(patch_json, d, "[{\"op\":\"add\",\"path\":\"/s\",\"value\":null}]", "{\"a\":{\"b\":[1,2,3]},\"s\":null}");
    OK(patch_json, d, "[{\"op\":\"replace\",\"path\":\"/a/b/2\",\"value\":9}]", "{\"a\":{\"b\":[1,2,9]},\"s\":\"x\"}");
    OK(patch_json, d, "[{\"op\":\"copy\",\"from\":\"/a\",\"path\":\"/a/c\"}]",
       "{\"a\":{\"b\":[1,2,3],\"c\":{\"b\":[1,2,3]}},\"s\":\"x\"}");
    OK(patch_json, d, "[{\"op\":\"move\",\"from\":\"/a\",\"path\":\"/a\"}]", d);
    OK(patch_json, d, "[{\"op\":\"move\",\"from\":\"/a/b/0\",\"path\":\"/a/b/-\"}]", "{\"a\":{\"b\":[2,3,1]},\"s\":\"x\"}");
    OK(patch_json, d, "[{\"op\":\"test\",\"path\":\"/a/b\",\"value\":[1.0,2,3]}]", d);
    OK(patch_json, "{\"metadata\":{\"labels\":{\"app\":\"web\"}}}",
       "[{\"op\":\"add\",\"path\":\"/metadata/labels/example.com~1tier\",\"value\":\"front\"}]",
       "{\"metadata\":{\"labels\":{\"app\":\"web\",\"example.com/tier\":\"front\"}}}");
    /* the copy is independent of its source */
    OK(patch_json, d, "[{\"op\":\"copy\",\"from\":\"/a\",\"path\":\"/c\"},{\"op\":\"add\",\"path\":\"/c/b/-\",\"value\":4}]",
       "{\"a\":{\"b\":[1,2,3]},\"c\":{\"b\":[1,2,3,4]},\"s\":\"x\"}");
}

TEST(patch_json_op_limit) {
    json_t *ops = json_array();
    for (int i = 0; i <= PATCH_MAX_OPS; i++)
        json_array_append_new(ops, json_pack("{s:s,s:s,s:i}", "op", "test", "path", "/a", "value", 1));
    json_t *t = pj("{\"a\":1}"), *out = NULL;
    char err[128] = "";
    CHECK_I64(patch_json(t, ops, &out, err, sizeof err), -E2BIG);
    CHECK_HAS(err, "more than 10000 operations");
    json_array_remove(ops, 0);
    CHECK_I64(patch_json(t, ops, &out, err, sizeof err), 0);
    json_decref(out);
    json_decref(ops);
    json_decref(t);
}

/* ---- strategic merge patch ---- */

static const char *POD =
    "{\"metadata\":{\"name\":\"p\",\"labels\":{\"app\":\"web\"},\"finalizers\":[\"a\",\"b\"]},"
    "\"spec\":{\"containers\":["
    "{\"name\":\"app\",\"image\":\"app:1\",\"env\":[{\"name\":\"A\",\"value\":\"1\"},{\"name\":\"B\",\"value\":\"2\"}],"
    "\"ports\":[{\"containerPort\":80,\"protocol\":\"TCP\"}],\"args\":[\"x\",\"y\"]},"
    "{\"name\":\"sidecar\",\"image\":\"side:1\"}],"
    "\"tolerations\":[{\"key\":\"k1\",\"operator\":\"Exists\"},{\"key\":\"k2\",\"operator\":\"Exists\"}],"
    "\"volumes\":[{\"name\":\"v1\",\"emptyDir\":{}}]},"
    "\"status\":{\"phase\":\"Pending\",\"conditions\":[{\"type\":\"PodScheduled\",\"status\":\"True\"},"
    "{\"type\":\"Ready\",\"status\":\"False\"}]}}";

static json_t *smp(const char *target, const char *patch) {
    json_t *t = pj(target), *p = pj(patch), *out = NULL;
    char err[256] = "";
    int rc = patch_strategic(t, p, &out, err, sizeof err);
    if (rc) test_fail(__FILE__, __LINE__, "patch_strategic: %d %s", rc, err);
    json_decref(t);
    json_decref(p);
    return out;
}

static const char *sget(json_t *root, const char *ptr) {
    /* tiny path reader: "spec.containers.0.image" */
    char buf[256];
    snprintf(buf, sizeof buf, "%s", ptr);
    json_t *v = root;
    for (char *save = NULL, *t = strtok_r(buf, ".", &save); v && t; t = strtok_r(NULL, ".", &save))
        v = json_is_array(v) ? json_array_get(v, strtoul(t, NULL, 10)) : json_object_get(v, t);
    return json_string_value(v);
}

TEST(patch_strategic_containers_merge_by_name) {
    json_t *r = smp(POD, "{\"spec\":{\"containers\":[{\"name\":\"sidecar\",\"image\":\"side:2\"}]}}");
    REQUIRE(r);
    json_t *cs = json_object_get(json_object_get(r, "spec"), "containers");
    CHECK_I64(json_array_size(cs), 2);
    CHECK_STR(sget(r, "spec.containers.0.name"), "app");
    CHECK_STR(sget(r, "spec.containers.0.image"), "app:1");   /* untouched */
    CHECK_STR(sget(r, "spec.containers.1.image"), "side:2");  /* merged */
    CHECK_STR(sget(r, "spec.containers.0.env.1.value"), "2");
    json_decref(r);
    /* a new name is added; without $setElementOrder, Kubernetes' interleave
     * puts an item unknown to the live list before the server-only ones */
    r = smp(POD, "{\"spec\":{\"containers\":[{\"name\":\"new\",\"image\":\"n:1\"}]}}");
    REQUIRE(r);
    cs = json_object_get(json_object_get(r, "spec"), "containers");
    CHECK_I64(json_array_size(cs), 3);
    CHECK_STR(sget(r, "spec.containers.0.name"), "new");
    CHECK_STR(sget(r, "spec.containers.1.name"), "app");
    CHECK_STR(sget(r, "spec.containers.2.name"), "sidecar");
    json_decref(r);
    /* nested: env of one container by name, ports by containerPort */
    r = smp(POD, "{\"spec\":{\"containers\":[{\"name\":\"app\",\"env\":[{\"name\":\"B\",\"value\":\"20\"}],"
                 "\"ports\":[{\"containerPort\":80,\"name\":\"http\"},{\"containerPort\":443}]}]}}");
    REQUIRE(r);
    CHECK_STR(sget(r, "spec.containers.0.env.0.value"), "1");
    CHECK_STR(sget(r, "spec.containers.0.env.1.value"), "20");
    json_t *ports = json_object_get(json_array_get(json_object_get(json_object_get(r, "spec"), "containers"), 0), "ports");
    CHECK_I64(json_array_size(ports), 2);
    CHECK_STR(sget(r, "spec.containers.0.ports.0.name"), "http");
    CHECK_STR(sget(r, "spec.containers.0.ports.0.protocol"), "TCP");
    json_decref(r);
}

TEST(patch_strategic_patch_delete_env_entry) {
    json_t *r = smp(POD, "{\"spec\":{\"containers\":[{\"name\":\"app\",\"env\":[{\"name\":\"A\",\"$patch\":\"delete\"}]}]}}");
    REQUIRE(r);
    json_t *env = json_object_get(json_array_get(json_object_get(json_object_get(r, "spec"), "containers"), 0), "env");
    CHECK_I64(json_array_size(env), 1);
    CHECK_STR(sget(r, "spec.containers.0.env.0.name"), "B");
    json_decref(r);
    /* deleting a container, and a missing merge key in a delete is an error */
    ORDER(patch_strategic, "{\"c\":1,\"containers\":[{\"name\":\"a\"},{\"name\":\"b\"}]}",
          "{\"containers\":[{\"name\":\"a\",\"$patch\":\"delete\"}]}", "{\"c\":1,\"containers\":[{\"name\":\"b\"}]}");
    BAD(patch_strategic, POD, "{\"spec\":{\"containers\":[{\"$patch\":\"delete\"}]}}", -EINVAL,
        "list \"containers\": map does not contain declared merge key: name");
    BAD(patch_strategic, POD, "{\"spec\":{\"containers\":[{\"image\":\"x\"}]}}", -EINVAL,
        "map does not contain declared merge key: name");
    BAD(patch_strategic, POD, "{\"spec\":{\"containers\":[{\"name\":\"a\",\"$patch\":\"frob\"}]}}", -EINVAL,
        "unknown patch type: frob");
    BAD(patch_strategic, POD, "{\"spec\":{\"containers\":[{\"$patch\":\"merge\"}]}}", -EINVAL,
        "merging lists cannot yet be specified");
    /* a delete directive in a new list leaves nothing behind */
    ORDER(patch_strategic, "{}", "{\"env\":[{\"name\":\"A\",\"$patch\":\"delete\"},{\"name\":\"B\",\"x\":null}]}",
          "{\"env\":[{\"name\":\"B\"}]}");
}

TEST(patch_strategic_set_element_order) {
    /* the design document's env example; Kubernetes' interleave (mergeSortedSlice)
     * places server-only ENV4 after the named items it followed in the live list */
    ORDER(patch_strategic,
          "{\"env\":[{\"name\":\"ENV2\",\"value\":\"bar\"},{\"name\":\"ENV5\",\"value\":\"server-added-2\"},"
          "{\"name\":\"ENV1\",\"value\":\"foo\"},{\"name\":\"ENV3\",\"value\":\"baz\"},"
          "{\"name\":\"ENV4\",\"value\":\"server-added-1\"}]}",
          "{\"$setElementOrder/env\":[{\"name\":\"ENV1\"},{\"name\":\"ENV2\"},{\"name\":\"ENV6\"}],"
          "\"env\":[{\"name\":\"ENV3\",\"$patch\":\"delete\"},{\"name\":\"ENV6\",\"value\":\"new-env\"}]}",
          "{\"env\":[{\"name\":\"ENV5\",\"value\":\"server-added-2\"},{\"name\":\"ENV1\",\"value\":\"foo\"},"
          "{\"name\":\"ENV2\",\"value\":\"bar\"},{\"name\":\"ENV6\",\"value\":\"new-env\"},"
          "{\"name\":\"ENV4\",\"value\":\"server-added-1\"}]}");
    /* order only, no patch list */
    ORDER(patch_strategic, "{\"containers\":[{\"name\":\"b\"},{\"name\":\"a\"}]}",
          "{\"$setElementOrder/containers\":[{\"name\":\"a\"},{\"name\":\"b\"}]}",
          "{\"containers\":[{\"name\":\"a\"},{\"name\":\"b\"}]}");
    /* server-only items interleave by live position; order entries not found are ignored */
    ORDER(patch_strategic, "{\"env\":[{\"name\":\"C\"},{\"name\":\"B\"},{\"name\":\"D\"},{\"name\":\"A\"},{\"name\":\"E\"}]}",
          "{\"$setElementOrder/env\":[{\"name\":\"Z\"},{\"name\":\"A\"},{\"name\":\"B\"}],"
          "\"env\":[{\"name\":\"A\",\"v\":1},{\"name\":\"B\",\"v\":2}]}",
          "{\"env\":[{\"name\":\"C\"},{\"name\":\"D\"},{\"name\":\"A\",\"v\":1},{\"name\":\"B\",\"v\":2},{\"name\":\"E\"}]}");
    /* without the directive the patch list's order holds */
    ORDER(patch_strategic, "{\"env\":[{\"name\":\"B\"},{\"name\":\"C\"},{\"name\":\"A\"}]}",
          "{\"env\":[{\"name\":\"A\",\"v\":1},{\"name\":\"B\",\"v\":1},{\"name\":\"D\"}]}",
          "{\"env\":[{\"name\":\"C\"},{\"name\":\"A\",\"v\":1},{\"name\":\"B\",\"v\":1},{\"name\":\"D\"}]}");
    BAD(patch_strategic, "{}", "{\"$setElementOrder/env\":[{\"x\":1}],\"env\":[{\"name\":\"a\"}]}", -EINVAL,
        "$setElementOrder/env: map does not contain declared merge key: name");
    BAD(patch_strategic, "{}", "{\"$setElementOrder/env\":[{\"name\":\"b\"},{\"name\":\"a\"}],\"env\":[{\"name\":\"a\"},{\"name\":\"b\"}]}",
        -EINVAL, "the order in patch list \"env\" doesn't match $setElementOrder/env list");
    BAD(patch_strategic, "{}", "{\"$setElementOrder/env\":[{\"name\":\"a\"}],\"env\":[{\"name\":\"a\"},{\"name\":\"c\"}]}",
        -EINVAL, "doesn't match");
    /* deletions may be missing from the order list */
    ORDER(patch_strategic, "{\"env\":[{\"name\":\"a\"},{\"name\":\"b\"}]}",
          "{\"$setElementOrder/env\":[{\"name\":\"b\"}],\"env\":[{\"name\":\"a\",\"$patch\":\"delete\"}]}",
          "{\"env\":[{\"name\":\"b\"}]}");
    BAD(patch_strategic, "{}", "{\"$setElementOrder/env\":{},\"env\":[{\"name\":\"a\"}]}", -EINVAL, "must be a list");
}

TEST(patch_strategic_delete_from_primitive_list) {
    /* the design document's finalizers example, as Kubernetes' code orders it */
    ORDER(patch_strategic, "{\"metadata\":{\"finalizers\":[\"b\",\"e\",\"a\",\"c\",\"d\"]}}",
          "{\"metadata\":{\"$setElementOrder/finalizers\":[\"a\",\"b\",\"f\"],"
          "\"$deleteFromPrimitiveList/finalizers\":[\"c\"],\"finalizers\":[\"f\"]}}",
          "{\"metadata\":{\"finalizers\":[\"e\",\"a\",\"b\",\"f\",\"d\"]}}");
    ORDER(patch_strategic, "{\"metadata\":{\"finalizers\":[\"a\",\"b\",\"c\"]}}",
          "{\"metadata\":{\"$deleteFromPrimitiveList/finalizers\":[\"b\",\"zz\"]}}",
          "{\"metadata\":{\"finalizers\":[\"a\",\"c\"]}}");
    /* a merge list of scalars is a union */
    ORDER(patch_strategic, "{\"metadata\":{\"finalizers\":[\"a\",\"b\"]}}", "{\"metadata\":{\"finalizers\":[\"b\",\"c\"]}}",
          "{\"metadata\":{\"finalizers\":[\"a\",\"b\",\"c\"]}}");
    BAD(patch_strategic, "{}", "{\"metadata\":{\"$deleteFromPrimitiveList/finalizers\":\"a\"}}", -EINVAL, "must be a list");
}

TEST(patch_strategic_retain_keys) {
    /* a volume switching source: $retainKeys drops the old one */
    ORDER(patch_strategic, "{\"spec\":{\"volumes\":[{\"name\":\"v\",\"emptyDir\":{},\"x\":1}]}}",
          "{\"spec\":{\"volumes\":[{\"name\":\"v\",\"$retainKeys\":[\"hostPath\",\"name\"],\"hostPath\":{\"path\":\"/d\"}}]}}",
          "{\"spec\":{\"volumes\":[{\"name\":\"v\",\"hostPath\":{\"path\":\"/d\"}}]}}");
    ORDER(patch_strategic, "{\"strategy\":{\"type\":\"RollingUpdate\",\"rollingUpdate\":{\"maxSurge\":1}}}",
          "{\"strategy\":{\"$retainKeys\":[\"type\"],\"type\":\"Recreate\"}}", "{\"strategy\":{\"type\":\"Recreate\"}}");
    BAD(patch_strategic, "{}", "{\"a\":{\"$retainKeys\":[1]}}", -EINVAL, "invalid patch format of retainKeys");
    BAD(patch_strategic, "{}", "{\"a\":{\"$retainKeys\":[\"x\"],\"y\":1}}", -EINVAL,
        "invalid patch format of retainKeys: field \"y\" is not retained");
}

TEST(patch_strategic_conditions_addresses_by_type) {
    json_t *r = smp(POD, "{\"status\":{\"$setElementOrder/conditions\":[{\"type\":\"PodScheduled\"},{\"type\":\"Ready\"},"
                         "{\"type\":\"Initialized\"}],\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"},"
                         "{\"type\":\"Initialized\",\"status\":\"True\"}],\"phase\":\"Running\"}}");
    REQUIRE(r);
    CHECK_I64(json_array_size(json_object_get(json_object_get(r, "status"), "conditions")), 3);
    CHECK_STR(sget(r, "status.conditions.0.type"), "PodScheduled");
    CHECK_STR(sget(r, "status.conditions.1.type"), "Ready");
    CHECK_STR(sget(r, "status.conditions.1.status"), "True");
    CHECK_STR(sget(r, "status.conditions.2.type"), "Initialized");
    CHECK_STR(sget(r, "status.phase"), "Running");
    json_decref(r);
    ORDER(patch_strategic,
          "{\"status\":{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.0.0.1\"},{\"type\":\"Hostname\",\"address\":\"n1\"}]}}",
          "{\"status\":{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.0.0.2\"}]}}",
          "{\"status\":{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.0.0.2\"},{\"type\":\"Hostname\",\"address\":\"n1\"}]}}");
}

TEST(patch_strategic_lists_without_merge_key_replace) {
    json_t *r = smp(POD, "{\"spec\":{\"tolerations\":[{\"key\":\"k3\",\"operator\":\"Exists\"}],"
                         "\"containers\":[{\"name\":\"app\",\"args\":[\"z\"]}]}}");
    REQUIRE(r);
    json_t *tol = json_object_get(json_object_get(r, "spec"), "tolerations");
    CHECK_I64(json_array_size(tol), 1); /* tolerations: no patch strategy, replaced */
    CHECK_STR(sget(r, "spec.tolerations.0.key"), "k3");
    json_t *args = json_object_get(json_array_get(json_object_get(json_object_get(r, "spec"), "containers"), 0), "args");
    CHECK_I64(json_array_size(args), 1);
    json_decref(r);
    ORDER(patch_strategic, "{\"spec\":{\"taints\":[{\"key\":\"a\",\"effect\":\"NoSchedule\"}]}}",
          "{\"spec\":{\"taints\":[{\"key\":\"b\",\"effect\":\"NoSchedule\"}]}}",
          "{\"spec\":{\"taints\":[{\"key\":\"b\",\"effect\":\"NoSchedule\"}]}}");
    ORDER(patch_strategic, "{\"other\":[1,2]}", "{\"other\":[3]}", "{\"other\":[3]}");
    const char *key;
    CHECK_I64(patch_list_strategy("spec", "tolerations", &key), PATCH_LIST_REPLACE);
    CHECK(key == NULL);
    CHECK_I64(patch_list_strategy("containers", "ports", &key), PATCH_LIST_MERGE_KEY);
    CHECK_STR(key, "containerPort");
    CHECK_I64(patch_list_strategy("spec", "ports", &key), PATCH_LIST_MERGE_KEY);
    CHECK_STR(key, "port");
    CHECK_I64(patch_list_strategy("subsets", "addresses", &key), PATCH_LIST_REPLACE);
    CHECK_I64(patch_list_strategy("containers", "volumeMounts", &key), PATCH_LIST_MERGE_KEY);
    CHECK_STR(key, "mountPath");
    CHECK_I64(patch_list_strategy("metadata", "finalizers", &key), PATCH_LIST_MERGE_SCALAR);
}

TEST(patch_strategic_map_directives_and_nulls) {
    /* null deletes; maps merge; scalars replace */
    ORDER(patch_strategic, "{\"metadata\":{\"labels\":{\"a\":\"1\",\"b\":\"2\"}}}",
          "{\"metadata\":{\"labels\":{\"a\":null,\"c\":\"3\"}}}", "{\"metadata\":{\"labels\":{\"b\":\"2\",\"c\":\"3\"}}}");
    /* $patch: replace on a map */
    ORDER(patch_strategic, "{\"spec\":{\"a\":1,\"b\":{\"c\":2}}}", "{\"spec\":{\"$patch\":\"replace\",\"d\":4}}",
          "{\"spec\":{\"d\":4}}");
    /* $patch: delete on a map removes it; at the top it empties the object */
    ORDER(patch_strategic, "{\"spec\":{\"a\":1},\"x\":2}", "{\"spec\":{\"$patch\":\"delete\"}}", "{\"x\":2}");
    ORDER(patch_strategic, "{\"spec\":{\"a\":1},\"x\":2}", "{\"$patch\":\"delete\"}", "{}");
    /* $patch: replace on a list */
    ORDER(patch_strategic, "{\"containers\":[{\"name\":\"a\"},{\"name\":\"b\"}]}",
          "{\"containers\":[{\"name\":\"c\"},{\"$patch\":\"replace\"}]}", "{\"containers\":[{\"name\":\"c\"}]}");
    /* directives and nulls never leak into newly added values */
    ORDER(patch_strategic, "{}", "{\"spec\":{\"a\":null,\"b\":{\"$patch\":\"delete\"},\"c\":{\"d\":null,\"e\":1}}}",
          "{\"spec\":{\"c\":{\"e\":1}}}");
    BAD(patch_strategic, "{}", "{\"spec\":{\"$patch\":\"frob\"}}", -EINVAL, "unknown patch type: frob");
    BAD(patch_strategic, "{}", "[]", -EINVAL, "must be a JSON object");
    BAD(patch_strategic, "{\"env\":[\"x\"]}", "{\"env\":[{\"name\":\"a\"}]}", -EINVAL, "list element types are not identical");
    BAD(patch_strategic, "{}", "{\"metadata\":{\"finalizers\":[{\"a\":1}]}}", -EINVAL, "without merge key");
    char deep[PATCH_MAX_DEPTH * 8 + 16] = "", *o = deep;
    for (int i = 0; i < PATCH_MAX_DEPTH + 1; i++) o += sprintf(o, "{\"a\":");
    o += sprintf(o, "1");
    for (int i = 0; i < PATCH_MAX_DEPTH + 1; i++) *o++ = '}';
    *o = 0;
    BAD(patch_strategic, "{}", deep, -E2BIG, "deeper than 64");
}

TEST(patch_strategic_kubelet_status_and_service_ports) {
    ORDER(patch_strategic,
          "{\"spec\":{\"ports\":[{\"port\":80,\"targetPort\":8080},{\"port\":443,\"targetPort\":8443}]}}",
          "{\"spec\":{\"ports\":[{\"port\":80,\"targetPort\":9090}]}}",
          "{\"spec\":{\"ports\":[{\"port\":80,\"targetPort\":9090},{\"port\":443,\"targetPort\":8443}]}}");
    /* merge keys compare numerically, as Kubernetes' float64 values do */
    OK(patch_strategic, "{\"containers\":[{\"name\":\"a\",\"ports\":[{\"containerPort\":80}]}]}",
          "{\"containers\":[{\"name\":\"a\",\"ports\":[{\"containerPort\":80.0,\"name\":\"h\"}]}]}",
          "{\"containers\":[{\"name\":\"a\",\"ports\":[{\"containerPort\":80,\"name\":\"h\"}]}]}");
}

/* Random JSON over a few keys that name no strategic list. */
static json_t *rand_json(uint64_t *seed, int depth, bool nulls) {
    static const char *const keys[] = {"k1", "k2", "k3", "$x"};
    switch (test_range(seed, 0, depth > 0 ? 5 : 2)) {
    case 0: return json_integer(test_range(seed, 0, 3));
    case 1: return json_string(test_range(seed, 0, 1) ? "a" : "b");
    case 2: return nulls ? json_null() : json_true();
    case 3: {
        json_t *a = json_array();
        for (int i = (int)test_range(seed, 0, 3); i > 0; i--) json_array_append_new(a, rand_json(seed, depth - 1, nulls));
        return a;
    }
    default: {
        json_t *o = json_object();
        for (int i = (int)test_range(seed, 0, 3); i > 0; i--)
            json_object_set_new(o, keys[test_range(seed, 0, 3)], rand_json(seed, depth - 1, nulls));
        return o;
    }
    }
}

/* Property: on objects without strategic lists or directives, strategic
 * merge patch is exactly JSON merge patch, and merge patch is idempotent. */
TEST(patch_property_strategic_equals_merge_on_plain_maps) {
    uint64_t seed = 7;
    for (int iter = 0; iter < 2000; iter++) {
        json_t *t = json_object(), *p = json_object();
        for (int i = (int)test_range(&seed, 0, 4); i > 0; i--) {
            json_object_set_new(t, (const char *[]){"k1", "k2", "k3"}[test_range(&seed, 0, 2)], rand_json(&seed, 3, false));
            json_object_set_new(p, (const char *[]){"k1", "k2", "k3"}[test_range(&seed, 0, 2)], rand_json(&seed, 3, true));
        }
        json_t *m = NULL, *s = NULL, *m2 = NULL;
        char err[256] = "";
        REQUIRE(patch_merge(t, p, &m, err, sizeof err) == 0);
        int rc = patch_strategic(t, p, &s, err, sizeof err);
        REQUIRE(patch_merge(m, p, &m2, err, sizeof err) == 0);
        if (rc != 0 || !json_equal(m, s) || !json_equal(m, m2)) {
            char *ts = json_dumps(t, JSON_COMPACT), *ps = json_dumps(p, JSON_COMPACT), *ms = json_dumps(m, JSON_COMPACT),
                 *ss = s ? json_dumps(s, JSON_COMPACT) : strdup(err);
            test_fail(__FILE__, __LINE__, "target %s patch %s: merge %s strategic %s", ts, ps, ms, ss);
            free(ts);
            free(ps);
            free(ms);
            free(ss);
        }
        json_decref(t);
        json_decref(p);
        json_decref(m);
        json_decref(s);
        json_decref(m2);
    }
}

/* patch_merge_sharing: patch_merge's result, holding the patch's replacing
 * values instead of copies; neither the target nor the patch changes. */
TEST(patch_merge_sharing_same_result_shared_values) {
    json_t *target = json_loads("{\"status\":{\"phase\":\"Pending\",\"conditions\":[{\"type\":\"PodScheduled\"}],"
                                "\"gone\":1,\"deep\":{\"a\":1,\"b\":2}}}", 0, NULL);
    json_t *patch = json_loads("{\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\"},"
                               "{\"type\":\"PodScheduled\"}],\"gone\":null,\"deep\":{\"b\":null,\"c\":[1]},"
                               "\"new\":{\"x\":{\"y\":null,\"z\":\"w\"}}}}", 0, NULL);
    REQUIRE(target && patch);
    char *t0 = json_dumps(target, JSON_COMPACT | JSON_SORT_KEYS), *p0 = json_dumps(patch, JSON_COMPACT | JSON_SORT_KEYS);
    json_t *a = NULL, *b = NULL;
    char err[256];
    REQUIRE(patch_merge(target, patch, &a, err, sizeof err) == 0);
    REQUIRE(patch_merge_sharing(target, patch, &b, err, sizeof err) == 0);
    CHECK(json_equal(a, b));
    json_t *pc = json_object_get(json_object_get(patch, "status"), "conditions");
    CHECK(json_object_get(json_object_get(b, "status"), "conditions") == pc);  /* shared */
    CHECK(json_object_get(json_object_get(a, "status"), "conditions") != pc);  /* copied */
    json_t *x = json_object_get(json_object_get(json_object_get(b, "status"), "new"), "x");
    CHECK(x && !json_object_get(x, "y") && json_is_string(json_object_get(x, "z"))); /* nulls in new objects drop */
    char *t1 = json_dumps(target, JSON_COMPACT | JSON_SORT_KEYS), *p1 = json_dumps(patch, JSON_COMPACT | JSON_SORT_KEYS);
    CHECK_STR(t1, t0);
    CHECK_STR(p1, p0);
    free(t0), free(p0), free(t1), free(p1);
    json_decref(a);
    json_decref(b);
    json_decref(target);
    json_decref(patch);
}
