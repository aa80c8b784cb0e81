/* jparse_filtered: members a filter drops are read and checked, not built;
 * the filter sees the path to each member. (The differential fuzz target
 * fuzz/fuzz_jparse.c holds it to jansson over arbitrary input.) */
#include <stdlib.h>

#include "jparse.h"
#include "test.h"

static bool seg_is(const struct jparse_seg *s, const char *k) { return k ? jparse_seg_is(s, k, strlen(k)) : !s->key; }

static bool key_is(const char *key, size_t len, const char *k) { return len == strlen(k) && !memcmp(key, k, len); }

/* status keeps phase alone; spec.containers[] keep name; "drop" goes anywhere */
static bool pod_keep(void *ud, const struct jparse_seg *path, int depth, const char *key, size_t len) {
    int *calls = ud;
    (*calls)++;
    if (key_is(key, len, "drop")) return false;
    if (depth == 1 && seg_is(&path[0], "status")) return key_is(key, len, "phase");
    if (depth == 3 && seg_is(&path[0], "spec") && seg_is(&path[1], "containers") && seg_is(&path[2], NULL))
        return key_is(key, len, "name");
    return true;
}

static char *filtered_dump(const char *in, int *calls) {
    json_t *v = jparse_filtered(in, strlen(in), 0, pod_keep, calls);
    if (!v) return NULL;
    char *s = json_dumps(v, JSON_COMPACT);
    json_decref(v);
    return s;
}

TEST(jparse_filtered_drops_members_by_path) {
    int calls = 0;
    char *s = filtered_dump("{\"metadata\":{\"name\":\"p\",\"drop\":{\"x\":[1,2,{\"y\":\"z\"}]}},"
                            "\"spec\":{\"containers\":[{\"name\":\"a\",\"image\":\"i\",\"resources\":{}},7,"
                            "{\"image\":\"j\",\"name\":\"b\"}],\"nodeName\":\"n\"},"
                            "\"status\":{\"conditions\":[{\"type\":\"Ready\"}],\"phase\":\"Running\",\"podIP\":\"1.2.3.4\"}}",
                            &calls);
    REQUIRE(s);
    CHECK_STR(s, "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":\"a\"},7,{\"name\":\"b\"}],"
                 "\"nodeName\":\"n\"},\"status\":{\"phase\":\"Running\"}}");
    /* members inside a dropped value are not asked about: x and y never reach the filter */
    CHECK_I64(calls, 15);
    free(s);
}

TEST(jparse_filtered_refuses_what_a_dropped_member_breaks) {
    int calls = 0;
    const char *bad[] = {
        "{\"drop\":{\"x\":[1,}]}}",         /* a trailing comma */
        "{\"drop\":\"a\\u0000b\"}",         /* \u0000, as jansson refuses it */
        "{\"drop\":\"\xc0\xaf\"}",          /* an overlong UTF-8 form */
        "{\"drop\":01}",                    /* a leading zero */
        "{\"drop\":99999999999999999999}",  /* an integer jansson cannot hold */
        "{\"drop\":tru}",                   /* a broken word */
        "{\"drop\":{\"k\" 1}}",             /* no colon */
        "{\"drop\":[1 2]}",                 /* no comma */
        "{\"drop\":{\"k\":1}",              /* unclosed */
        "{\"drop\":{1:2}}",                 /* a key that is not a string */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *v = jparse_filtered(bad[i], strlen(bad[i]), 0, pod_keep, &calls);
        CHECK(!v);
        CHECK(!json_loads(bad[i], 0, NULL)); /* the same refusal as jansson's */
        json_decref(v);
    }
}

TEST(jparse_filtered_depth_limit_holds_inside_dropped_members) {
    int calls = 0;
    size_t deep = JSON_PARSER_MAX_DEPTH + 10, n = 0;
    char *in = malloc(deep * 2 + 16);
    REQUIRE(in);
    n += (size_t)sprintf(in, "{\"drop\":");
    for (size_t i = 0; i < deep; i++) in[n++] = '[';
    for (size_t i = 0; i < deep; i++) in[n++] = ']';
    in[n++] = '}';
    CHECK(!jparse_filtered(in, n, 0, pod_keep, &calls));
    CHECK(!jparse_try(in, n, 0));
    free(in);
}

TEST(jparse_filtered_flags_and_scalars) {
    int calls = 0;
    CHECK(!jparse_filtered("{}", 2, JSON_REJECT_DUPLICATES, pod_keep, &calls)); /* not offered */
    json_t *v = jparse_filtered(" 12 ", 4, JSON_DECODE_ANY, pod_keep, &calls);
    CHECK(json_integer_value(v) == 12);
    json_decref(v);
    CHECK(!jparse_filtered("12", 2, 0, pod_keep, &calls));
    /* duplicate keys: the last kept value wins, as in jansson */
    char *s = filtered_dump("{\"a\":1,\"drop\":2,\"a\":3,\"drop\":4}", &calls);
    CHECK_STR(s, "{\"a\":3}");
    free(s);
}

/* Bodies written as text: appended pieces stay NUL-terminated, strings are
 * quoted as json_dumps quotes them, and bad UTF-8 is refused without a trace. */
TEST(jdump_append_builds_text_bodies) {
    char *buf = NULL;
    size_t len = 0, cap = 0;
    CHECK_I64(jdump_append(&buf, &len, &cap, "{\"name\":", 8), 0);
    CHECK_I64(jdump_append_string(&buf, &len, &cap, "a\"b\\c\n\x01", 7), 0);
    CHECK_I64(jdump_append(&buf, &len, &cap, "}", 1), 0);
    REQUIRE(buf);
    json_t *v = json_pack("{s:s}", "name", "a\"b\\c\n\x01");
    char *want = json_dumps(v, JSON_COMPACT);
    CHECK_STR(buf, want);
    CHECK_I64(len, strlen(want));
    CHECK_I64(jdump_append_string(&buf, &len, &cap, "\xc0\xaf", 2), -1);
    CHECK_I64(len, strlen(want));
    CHECK_STR(buf, want);
    CHECK_I64(jdump_append(&buf, &len, &cap, "", 0), 0);
    CHECK_I64(len, strlen(want));
    free(want);
    json_decref(v);
    free(buf);
}
