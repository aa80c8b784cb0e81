/* Unit tests for src/k8s/schema: CRD structural schemas, validation
 * messages and paths, defaulting, pruning. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>

#include "schema.h"
#include "test.h"

static struct schema *compile(const char *js) {
    json_error_t je;
    json_t *j = json_loads(js, 0, &je);
    if (!j) {
        fprintf(stderr, "  bad test JSON: %s: %s\n", je.text, js);
        return NULL;
    }
    struct schema *s = NULL;
    char err[512];
    int rc = schema_compile(j, &s, err, sizeof err);
    if (rc) fprintf(stderr, "  compile failed (%d): %s\n", rc, err);
    json_decref(j);
    return s;
}

/* Compiles js expecting failure; returns the code and leaves the message in err. */
static int compile_fail(const char *js, char *err, size_t errlen) {
    json_t *j = json_loads(js, 0, NULL);
    if (!j) return 1;
    struct schema *s = NULL;
    err[0] = 0;
    int rc = schema_compile(j, &s, err, errlen);
    schema_free(s);
    json_decref(j);
    return rc;
}

static int validate(const struct schema *s, const char *obj, struct schema_result *res) {
    json_t *o = json_loads(obj, JSON_DECODE_ANY, NULL);
    if (!o) return 1;
    *res = (struct schema_result){0};
    int rc = schema_validate(s, o, res);
    json_decref(o);
    return rc;
}

/* The i-th error has this reason, field and message. */
#define CHECK_ERR(res, i, r, f, m)                                  \
    do {                                                            \
        if ((res).n <= (size_t)(i)) {                               \
            test_fail(__FILE__, __LINE__, "no error %d (have %zu)", (int)(i), (res).n); \
            break;                                                  \
        }                                                           \
        CHECK_STR((res).errors[i].reason, r);                       \
        CHECK_STR((res).errors[i].field, f);                        \
        CHECK_STR((res).errors[i].message, m);                      \
    } while (0)

/* Validates obj expecting exactly one error. */
#define CHECK_ONE(s, obj, r, f, m)                                  \
    do {                                                            \
        struct schema_result r1_;                                   \
        CHECK_I64(validate(s, obj, &r1_), -EINVAL);                 \
        CHECK_I64(r1_.n, 1);                                        \
        CHECK_ERR(r1_, 0, r, f, m);                                 \
        schema_result_free(&r1_);                                   \
    } while (0)

#define CHECK_OK(s, obj)                                            \
    do {                                                            \
        struct schema_result r0_;                                   \
        int rc0_ = validate(s, obj, &r0_);                          \
        if (rc0_ != 0 || r0_.n != 0)                                \
            test_fail(__FILE__, __LINE__, "%s: rc %d, %zu errors, first: %s: %s", obj, rc0_, r0_.n, \
                      r0_.n ? r0_.errors[0].field : "", r0_.n ? r0_.errors[0].message : ""); \
        schema_result_free(&r0_);                                   \
    } while (0)

/* Wraps the properties of spec in a CR root schema. */
#define SPEC(props) \
    "{\"type\":\"object\",\"properties\":{\"spec\":{\"type\":\"object\",\"properties\":{" props "}}}}"

TEST(schema_type_messages) {
    struct schema *s = compile(SPEC("\"replicas\":{\"type\":\"integer\"},\"ratio\":{\"type\":\"number\"},"
                                    "\"on\":{\"type\":\"boolean\"},\"name\":{\"type\":\"string\"},"
                                    "\"m\":{\"type\":\"object\"},\"l\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}"));
    REQUIRE(s);
    CHECK_ONE(s, "{\"spec\":{\"replicas\":\"string\"}}", "FieldValueTypeInvalid", "spec.replicas",
              "Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\"");
    CHECK_ONE(s, "{\"spec\":{\"replicas\":2.5}}", "FieldValueTypeInvalid", "spec.replicas",
              "Invalid value: \"number\": spec.replicas in body must be of type integer: \"number\"");
    CHECK_OK(s, "{\"spec\":{\"replicas\":2.0,\"ratio\":3,\"on\":false,\"name\":\"x\",\"m\":{},\"l\":[]}}");
    CHECK_ONE(s, "{\"spec\":{\"on\":\"true\"}}", "FieldValueTypeInvalid", "spec.on",
              "Invalid value: \"string\": spec.on in body must be of type boolean: \"string\"");
    CHECK_ONE(s, "{\"spec\":{\"m\":[]}}", "FieldValueTypeInvalid", "spec.m",
              "Invalid value: \"array\": spec.m in body must be of type object: \"array\"");
    CHECK_ONE(s, "{\"spec\":{\"l\":{}}}", "FieldValueTypeInvalid", "spec.l",
              "Invalid value: \"object\": spec.l in body must be of type array: \"object\"");
    CHECK_ONE(s, "{\"spec\":{\"name\":null}}", "FieldValueTypeInvalid", "spec.name",
              "Invalid value: \"null\": spec.name in body must be of type string: \"null\"");
    CHECK_ONE(s, "{\"spec\":{\"l\":[\"a\",7]}}", "FieldValueTypeInvalid", "spec.l[1]",
              "Invalid value: \"integer\": spec.l[1] in body must be of type string: \"integer\"");
    CHECK_ONE(s, "{\"spec\":5}", "FieldValueTypeInvalid", "spec",
              "Invalid value: \"integer\": spec in body must be of type object: \"integer\"");
    schema_free(s);
}

TEST(schema_nullable) {
    struct schema *s = compile(SPEC("\"a\":{\"type\":\"string\",\"nullable\":true,\"enum\":[\"x\"]},"
                                    "\"b\":{\"type\":\"object\",\"nullable\":true}"));
    REQUIRE(s);
    CHECK_OK(s, "{\"spec\":{\"a\":null,\"b\":null}}");
    CHECK_OK(s, "{\"spec\":{\"a\":\"x\",\"b\":{}}}");
    CHECK_ONE(s, "{\"spec\":{\"b\":1}}", "FieldValueTypeInvalid", "spec.b",
              "Invalid value: \"integer\": spec.b in body must be of type object: \"integer\"");
    schema_free(s);
}

TEST(schema_required_nested_arrays) {
    struct schema *s = compile(
        "{\"type\":\"object\",\"required\":[\"spec\"],\"properties\":{\"spec\":{\"type\":\"object\","
        "\"required\":[\"resources\"],\"properties\":{\"resources\":{\"type\":\"array\",\"items\":{"
        "\"type\":\"object\",\"required\":[\"kind\",\"name\"],\"properties\":{\"kind\":{\"type\":\"string\"},"
        "\"name\":{\"type\":\"string\"},\"ports\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
        "\"properties\":{\"port\":{\"type\":\"integer\",\"maximum\":65535}}}}}}}}}}}");
    REQUIRE(s);
    CHECK_ONE(s, "{}", "FieldValueRequired", "spec", "Required value");
    CHECK_ONE(s, "{\"spec\":{}}", "FieldValueRequired", "spec.resources", "Required value");
    CHECK_OK(s, "{\"spec\":{\"resources\":[{\"kind\":\"a\",\"name\":\"b\"}]}}");
    struct schema_result res;
    CHECK_I64(validate(s,
                       "{\"spec\":{\"resources\":[{\"kind\":\"a\",\"name\":\"b\"},{\"name\":\"c\"},{},"
                       "{\"kind\":\"k\",\"name\":\"n\",\"ports\":[{\"port\":80},{\"port\":70000}]}]}}",
                       &res),
              -EINVAL);
    CHECK_I64(res.n, 4);
    CHECK_ERR(res, 0, "FieldValueRequired", "spec.resources[1].kind", "Required value");
    CHECK_ERR(res, 1, "FieldValueRequired", "spec.resources[2].kind", "Required value");
    CHECK_ERR(res, 2, "FieldValueRequired", "spec.resources[2].name", "Required value");
    CHECK_ERR(res, 3, "FieldValueInvalid", "spec.resources[3].ports[1].port",
              "Invalid value: 70000: spec.resources[3].ports[1].port in body should be less than or equal to 65535");
    CHECK(!res.truncated);
    schema_result_free(&res);
    schema_free(s);
}

TEST(schema_enum) {
    struct schema *s = compile(SPEC("\"mode\":{\"type\":\"string\",\"enum\":[\"BAR\",\"BAZ\"]},"
                                    "\"n\":{\"type\":\"integer\",\"enum\":[1,2]},"
                                    "\"o\":{\"type\":\"object\",\"x-kubernetes-preserve-unknown-fields\":true,"
                                    "\"enum\":[{\"a\":1}]}"));
    REQUIRE(s);
    CHECK_OK(s, "{\"spec\":{\"mode\":\"BAZ\",\"n\":2.0,\"o\":{\"a\":1.0}}}");
    CHECK_ONE(s, "{\"spec\":{\"mode\":\"FOO\"}}", "FieldValueNotSupported", "spec.mode",
              "Unsupported value: \"FOO\": supported values: \"BAR\", \"BAZ\"");
    CHECK_ONE(s, "{\"spec\":{\"n\":3}}", "FieldValueNotSupported", "spec.n",
              "Unsupported value: 3: supported values: \"1\", \"2\"");
    CHECK_ONE(s, "{\"spec\":{\"o\":{\"a\":2}}}", "FieldValueNotSupported", "spec.o",
              "Unsupported value: {\"a\":2}: supported values: \"{\\\"a\\\":1}\"");
    schema_free(s);
}

TEST(schema_min_max) {
    struct schema *s = compile(SPEC("\"replicas\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":10},"
                                    "\"r\":{\"type\":\"number\",\"minimum\":0.5,\"exclusiveMinimum\":true,"
                                    "\"maximum\":1.5,\"exclusiveMaximum\":true},"
                                    "\"step\":{\"type\":\"integer\",\"multipleOf\":5},"
                                    "\"f\":{\"type\":\"number\",\"multipleOf\":0.1}"));
    REQUIRE(s);
    CHECK_OK(s, "{\"spec\":{\"replicas\":10,\"r\":1.0,\"step\":15,\"f\":0.3}}");
    CHECK_OK(s, "{\"spec\":{\"replicas\":1}}");
    CHECK_ONE(s, "{\"spec\":{\"replicas\":11}}", "FieldValueInvalid", "spec.replicas",
              "Invalid value: 11: spec.replicas in body should be less than or equal to 10");
    CHECK_ONE(s, "{\"spec\":{\"replicas\":0}}", "FieldValueInvalid", "spec.replicas",
              "Invalid value: 0: spec.replicas in body should be greater than or equal to 1");
    CHECK_ONE(s, "{\"spec\":{\"r\":1.5}}", "FieldValueInvalid", "spec.r",
              "Invalid value: 1.5: spec.r in body should be less than 1.5");
    CHECK_ONE(s, "{\"spec\":{\"r\":0.5}}", "FieldValueInvalid", "spec.r",
              "Invalid value: 0.5: spec.r in body should be greater than 0.5");
    CHECK_ONE(s, "{\"spec\":{\"step\":7}}", "FieldValueInvalid", "spec.step",
              "Invalid value: 7: spec.step in body should be a multiple of 5");
    CHECK_ONE(s, "{\"spec\":{\"f\":0.35}}", "FieldValueInvalid", "spec.f",
              "Invalid value: 0.35: spec.f in body should be a multiple of 0.1");
    schema_free(s);
}

TEST(schema_string_length) {
    struct schema *s = compile(SPEC("\"name\":{\"type\":\"string\",\"minLength\":3,\"maxLength\":5}"));
    REQUIRE(s);
    CHECK_OK(s, "{\"spec\":{\"name\":\"abc\"}}");
    CHECK_OK(s, "{\"spec\":{\"name\":\"\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\"}}"); /* 5 runes, 10 bytes */
    CHECK_ONE(s, "{\"spec\":{\"name\":\"abcdef\"}}", "FieldValueTooLong", "spec.name",
              "Too long: may not be longer than 5");
    CHECK_ONE(s, "{\"spec\":{\"name\":\"ab\"}}", "FieldValueInvalid", "spec.name",
              "Invalid value: \"ab\": spec.name in body should be at least 3 chars long");
    schema_free(s);
}

TEST(schema_items_and_properties_count) {
    struct schema *s = compile(SPEC("\"l\":{\"type\":\"array\",\"minItems\":2,\"maxItems\":3,"
                                    "\"items\":{\"type\":\"integer\"}},"
                                    "\"one\":{\"type\":\"array\",\"maxItems\":1,\"items\":{\"type\":\"integer\"}},"
                                    "\"m\":{\"type\":\"object\",\"minProperties\":1,\"maxProperties\":2,"
                                    "\"additionalProperties\":{\"type\":\"string\"}}"));
    REQUIRE(s);
    CHECK_OK(s, "{\"spec\":{\"l\":[1,2,3],\"one\":[1],\"m\":{\"a\":\"b\"}}}");
    CHECK_ONE(s, "{\"spec\":{\"l\":[1,2,3,4]}}", "FieldValueTooMany", "spec.l", "Too many: 4: must have at most 3 items");
    CHECK_ONE(s, "{\"spec\":{\"one\":[1,2]}}", "FieldValueTooMany", "spec.one", "Too many: 2: must have at most 1 item");
    CHECK_ONE(s, "{\"spec\":{\"l\":[1]}}", "FieldValueInvalid", "spec.l",
              "Invalid value: 1: spec.l in body should have at least 2 items");
    CHECK_ONE(s, "{\"spec\":{\"m\":{\"a\":\"1\",\"b\":\"2\",\"c\":\"3\"}}}", "FieldValueTooMany", "spec.m",
              "Too many: 3: must have at most 2 items");
    CHECK_ONE(s, "{\"spec\":{\"m\":{}}}", "FieldValueInvalid", "spec.m",
              "Invalid value: 0: spec.m in body should have at least 1 properties");
    schema_free(s);
}

TEST(schema_pattern) {
    struct schema *s = compile(SPEC("\"name\":{\"type\":\"string\",\"pattern\":\"^[a-z]+$\"},"
                                    "\"cron\":{\"type\":\"string\",\"pattern\":\"^(\\\\d+|\\\\*)(/\\\\d+)?(\\\\s+(\\\\d+|\\\\*)(/\\\\d+)?){4}$\"},"
                                    "\"id\":{\"type\":\"string\",\"pattern\":\"^(?:[\\\\w.\\\\-]+?)@\\\\S+$\"},"
                                    "\"br\":{\"type\":\"string\",\"pattern\":\"^[\\\\]a\\\\-]+$\"}"));
    REQUIRE(s);
    CHECK_OK(s, "{\"spec\":{\"name\":\"abc\",\"cron\":\"* * * * */5\",\"id\":\"a.b-c_d@host\",\"br\":\"a-]\"}}");
    CHECK_ONE(s, "{\"spec\":{\"name\":\"ABC\"}}", "FieldValueInvalid", "spec.name",
              "Invalid value: \"ABC\": spec.name in body should match '^[a-z]+$'");
    CHECK_ONE(s, "{\"spec\":{\"cron\":\"* * * *\"}}", "FieldValueInvalid", "spec.cron",
              "Invalid value: \"* * * *\": spec.cron in body should match "
              "'^(\\d+|\\*)(/\\d+)?(\\s+(\\d+|\\*)(/\\d+)?){4}$'");
    CHECK_ONE(s, "{\"spec\":{\"id\":\"a b@h\"}}", "FieldValueInvalid", "spec.id",
              "Invalid value: \"a b@h\": spec.id in body should match '^(?:[\\w.\\-]+?)@\\S+$'");
    CHECK_ONE(s, "{\"spec\":{\"br\":\"ab\"}}", "FieldValueInvalid", "spec.br",
              "Invalid value: \"ab\": spec.br in body should match '^[\\]a\\-]+$'");
    schema_free(s);

    char err[512];
    CHECK_I64(compile_fail(SPEC("\"x\":{\"type\":\"string\",\"pattern\":\"^(?=a)\"}"), err, sizeof err), -EINVAL);
    CHECK_HAS(err, "lookaround");
    CHECK_I64(compile_fail(SPEC("\"x\":{\"type\":\"string\",\"pattern\":\"(a)\\\\1\"}"), err, sizeof err), -EINVAL);
    CHECK_HAS(err, "back-references");
    CHECK_HAS(err, "openAPIV3Schema.properties.spec.properties.x");
    CHECK_I64(compile_fail(SPEC("\"x\":{\"type\":\"string\",\"pattern\":\"((a{100}){100}){100}\"}"), err, sizeof err),
              -E2BIG);
    CHECK_I64(compile_fail(SPEC("\"x\":{\"type\":\"string\",\"pattern\":\"[a\"}"), err, sizeof err), -EINVAL);
    CHECK_I64(compile_fail(SPEC("\"x\":{\"type\":\"string\",\"pattern\":7}"), err, sizeof err), -EINVAL);
}

/* A pattern's search spends from SCHEMA_MAX_STEPS: a 10,001-character value
 * is answered at once, by a pattern error or, past the budget, the
 * InternalError; POSIX regexec took 15 s and 2.9 GB on such values. */
TEST(schema_pattern_cost) {
    struct schema *s = compile(SPEC("\"nested\":{\"type\":\"string\",\"pattern\":\"^(a+)+$\"},"
                                    "\"groups\":{\"type\":\"string\",\"pattern\":\"^([a-z0-9]{1,10}){1,100}$\"},"
                                    "\"wide\":{\"type\":\"array\",\"items\":{\"type\":\"string\","
                                    "\"pattern\":\"([a-z0-9]{1,1000})+!$\"}}"));
    REQUIRE(s);
    enum { LEN = 10001 };
    char *v = malloc(LEN + 1);
    REQUIRE(v);
    memset(v, 'a', LEN);
    v[LEN] = 0;
    static const char *const fields[] = {"nested", "groups"};
    for (int i = 0; i < 2; i++) {
        json_t *o = json_pack("{s{ss}}", "spec", fields[i], v);
        v[LEN - 1] = '!';
        json_t *bad = json_pack("{s{ss}}", "spec", fields[i], v);
        v[LEN - 1] = 'a';
        struct schema_result res = {0};
        CHECK_I64(schema_validate(s, bad, &res), -EINVAL);
        REQUIRE(res.n == 1);
        CHECK_STR(res.errors[0].reason, "FieldValueInvalid");
        CHECK_HAS(res.errors[0].message, "in body should match");
        schema_result_free(&res);
        CHECK_I64(schema_validate(s, o, &res), i == 0 ? 0 : -EINVAL); /* groups: at most 1,000 characters */
        schema_result_free(&res);
        json_decref(o);
        json_decref(bad);
    }
    /* ~2,000 states alive per character, 28.5M states (3.6M steps) a value:
     * the third value passes the budget */
    json_t *o = json_pack("{s{s[sss]}}", "spec", "wide", v, v, v);
    struct schema_result res = {0};
    CHECK_I64(schema_validate(s, o, &res), -EINVAL);
    CHECK_I64(res.n, 3);
    CHECK_ERR(res, 0, "FieldValueInvalid", "spec.wide[0]", "Invalid value: \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
              "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
              "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...\": "
              "spec.wide[0] in body should match '([a-z0-9]{1,1000})+!$'");
    CHECK_ERR(res, 2, "InternalError", "", "Internal error: validation needs more than 10000000 steps");
    schema_result_free(&res);
    json_decref(o);
    free(v);
    schema_free(s);
}

/* Patterns are bounded one by one (regex.h) and together. */
TEST(schema_pattern_limits) {
    char err[512];
    CHECK_I64(compile_fail(SPEC("\"x\":{\"type\":\"string\",\"pattern\":\"^([a-z0-9]{1,100}){1,100}$\"}"), err,
                           sizeof err),
              -E2BIG);
    CHECK_HAS(err, "pattern '^([a-z0-9]{1,100}){1,100}$' is not supported: nested repetitions multiply to over 1000");
    CHECK_I64(compile_fail(SPEC("\"x\":{\"type\":\"string\",\"pattern\":\"x{1000}y{1000}x{1000}y{1000}x{1000}"
                                "y{1000}x{1000}y{1000}x{1000}y{1000}\"}"),
                           err, sizeof err),
              -E2BIG);
    CHECK_HAS(err, "it compiles to more than 10000 instructions");
    /* twelve patterns of 9,001 instructions: past SCHEMA_MAX_PATTERN_INSTS together */
    json_t *props = json_object();
    for (int i = 0; i < 12; i++) {
        char name[16];
        snprintf(name, sizeof name, "p%d", i);
        json_object_set_new(props, name, json_pack("{ssss}", "type", "string", "pattern",
                                                    "^x{1000}x{1000}x{1000}x{1000}x{1000}x{1000}x{1000}x{1000}x{1000}$"));
    }
    json_t *j = json_pack("{sss{s{ssso}}}", "type", "object", "properties", "spec", "type", "object",
                          "properties", json_incref(props));
    struct schema *s = NULL;
    CHECK_I64(schema_compile(j, &s, err, sizeof err), -E2BIG);
    CHECK_HAS(err, "patterns compile to more than 100000 instructions in all");
    CHECK(s == NULL);
    schema_free(s);
    json_object_del(props, "p11"); /* eleven fit */
    CHECK_I64(schema_compile(j, &s, err, sizeof err), 0);
    schema_free(s);
    json_decref(j);
    json_decref(props);
    /* a long pattern's reason survives the message's bound */
    char pat[1100];
    memset(pat, 'a', 1000);
    strcpy(pat + 1000, "(?=b)");
    j = json_pack("{sss{s{ssss}}}", "type", "object", "properties", "x", "type", "string", "pattern", pat);
    CHECK_I64(schema_compile(j, &s, err, sizeof err), -EINVAL);
    CHECK_HAS(err, "aaa...' is not supported: lookaround `(?=` is not supported");
    json_decref(j);
}

TEST(schema_format) {
    struct schema *s = compile(SPEC("\"i\":{\"type\":\"integer\",\"format\":\"int32\"},"
                                    "\"j\":{\"type\":\"integer\",\"format\":\"int64\"},"
                                    "\"t\":{\"type\":\"string\",\"format\":\"date-time\"},"
                                    "\"d\":{\"type\":\"string\",\"format\":\"date\"},"
                                    "\"b\":{\"type\":\"string\",\"format\":\"byte\"},"
                                    "\"u\":{\"type\":\"string\",\"format\":\"uuid\"},"
                                    "\"q\":{\"type\":\"string\",\"format\":\"quantity-ish\"}"));
    REQUIRE(s);
    CHECK_OK(s, "{\"spec\":{\"i\":2147483647,\"j\":9007199254740993,\"t\":\"2026-01-01T00:00:00.000000Z\","
                "\"d\":\"2026-02-28\",\"b\":\"aGk=\",\"u\":\"0f8fad5b-d9cb-469f-a165-70867728950e\",\"q\":\"?\"}}");
    CHECK_OK(s, "{\"spec\":{\"t\":\"2026-01-01t10:20:30+02:00\"}}");
    CHECK_OK(s, "{\"spec\":{\"t\":\"2026-01-01 10:20\"}}");
    CHECK_ONE(s, "{\"spec\":{\"i\":2147483648}}", "FieldValueTypeInvalid", "spec.i",
              "Invalid value: 2147483648: spec.i in body must be of type int32: 2147483648");
    CHECK_ONE(s, "{\"spec\":{\"t\":\"yesterday\"}}", "FieldValueTypeInvalid", "spec.t",
              "Invalid value: \"yesterday\": spec.t in body must be of type date-time: \"yesterday\"");
    CHECK_ONE(s, "{\"spec\":{\"t\":\"2026-13-01T00:00:00Z\"}}", "FieldValueTypeInvalid", "spec.t",
              "Invalid value: \"2026-13-01T00:00:00Z\": spec.t in body must be of type date-time: "
              "\"2026-13-01T00:00:00Z\"");
    CHECK_ONE(s, "{\"spec\":{\"d\":\"2026-1-1\"}}", "FieldValueTypeInvalid", "spec.d",
              "Invalid value: \"2026-1-1\": spec.d in body must be of type date: \"2026-1-1\"");
    CHECK_ONE(s, "{\"spec\":{\"b\":\"a=Gk\"}}", "FieldValueTypeInvalid", "spec.b",
              "Invalid value: \"a=Gk\": spec.b in body must be of type byte: \"a=Gk\"");
    CHECK_ONE(s, "{\"spec\":{\"u\":\"0f8fad5b\"}}", "FieldValueTypeInvalid", "spec.u",
              "Invalid value: \"0f8fad5b\": spec.u in body must be of type uuid: \"0f8fad5b\"");
    schema_free(s);
}

TEST(schema_int_or_string) {
    struct schema *s = compile(SPEC("\"port\":{\"x-kubernetes-int-or-string\":true,"
                                    "\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"string\"}],"
                                    "\"pattern\":\"^[a-z]+$\",\"maximum\":100}"));
    REQUIRE(s);
    CHECK_OK(s, "{\"spec\":{\"port\":80}}");
    CHECK_OK(s, "{\"spec\":{\"port\":\"http\"}}");
    CHECK_ONE(s, "{\"spec\":{\"port\":true}}", "FieldValueTypeInvalid", "spec.port",
              "Invalid value: \"boolean\": spec.port in body must be of type integer,string: \"boolean\"");
    CHECK_ONE(s, "{\"spec\":{\"port\":1.5}}", "FieldValueTypeInvalid", "spec.port",
              "Invalid value: \"number\": spec.port in body must be of type integer,string: \"number\"");
    CHECK_ONE(s, "{\"spec\":{\"port\":\"HTTP\"}}", "FieldValueInvalid", "spec.port",
              "Invalid value: \"HTTP\": spec.port in body should match '^[a-z]+$'");
    CHECK_ONE(s, "{\"spec\":{\"port\":101}}", "FieldValueInvalid", "spec.port",
              "Invalid value: 101: spec.port in body should be less than or equal to 100");
    schema_free(s);
    char err[256];
    CHECK_I64(compile_fail(SPEC("\"p\":{\"type\":\"string\",\"x-kubernetes-int-or-string\":true}"), err, sizeof err),
              -EINVAL);
    CHECK_HAS(err, "int-or-string");
}

TEST(schema_preserve_unknown) {
    struct schema *s = compile(SPEC("\"raw\":{\"x-kubernetes-preserve-unknown-fields\":true},"
                                    "\"cfg\":{\"type\":\"object\",\"x-kubernetes-preserve-unknown-fields\":true,"
                                    "\"properties\":{\"n\":{\"type\":\"integer\",\"default\":3},"
                                    "\"sub\":{\"type\":\"object\",\"properties\":{\"k\":{\"type\":\"string\"}}}}}"));
    REQUIRE(s);
    CHECK_OK(s, "{\"spec\":{\"raw\":[1,{\"a\":null}],\"cfg\":{\"x\":{\"y\":1},\"n\":2}}}");
    CHECK_OK(s, "{\"spec\":{\"raw\":null}}");
    CHECK_ONE(s, "{\"spec\":{\"cfg\":{\"n\":\"x\"}}}", "FieldValueTypeInvalid", "spec.cfg.n",
              "Invalid value: \"string\": spec.cfg.n in body must be of type integer: \"string\"");
    json_t *o = json_loads("{\"spec\":{\"raw\":{\"deep\":{\"z\":1}},\"cfg\":{\"x\":1,\"sub\":{\"k\":\"v\",\"drop\":1}},"
                           "\"gone\":1}}",
                           0, NULL);
    REQUIRE(o);
    CHECK_I64(schema_prune(s, o), 0);
    CHECK_I64(schema_apply_defaults(s, o), 0);
    json_t *want = json_loads("{\"spec\":{\"raw\":{\"deep\":{\"z\":1}},\"cfg\":{\"x\":1,\"n\":3,\"sub\":{\"k\":\"v\"}}}}",
                              0, NULL);
    CHECK(json_equal(o, want));
    json_decref(want);
    json_decref(o);
    schema_free(s);
}

TEST(schema_additional_properties) {
    struct schema *s = compile(SPEC("\"labels\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\","
                                    "\"maxLength\":3}},"
                                    "\"any\":{\"type\":\"object\",\"additionalProperties\":true},"
                                    "\"none\":{\"type\":\"object\",\"additionalProperties\":false}"));
    REQUIRE(s);
    CHECK_OK(s, "{\"spec\":{\"labels\":{\"a\":\"b\"},\"any\":{\"x\":[1]},\"none\":{}}}");
    CHECK_ONE(s, "{\"spec\":{\"labels\":{\"a\":\"b\",\"c\":4}}}", "FieldValueTypeInvalid", "spec.labels.c",
              "Invalid value: \"integer\": spec.labels.c in body must be of type string: \"integer\"");
    CHECK_ONE(s, "{\"spec\":{\"labels\":{\"key\":\"long\"}}}", "FieldValueTooLong", "spec.labels.key",
              "Too long: may not be longer than 3");
    CHECK_ONE(s, "{\"spec\":{\"none\":{\"x\":1}}}", "FieldValueInvalid", "spec.none",
              "Invalid value: \"\": spec.none.x in body is a forbidden property");
    json_t *o = json_loads("{\"spec\":{\"labels\":{\"a\":\"b\"},\"any\":{\"x\":{\"y\":1}},\"none\":{\"x\":1}}}", 0, NULL);
    REQUIRE(o);
    schema_prune(s, o);
    json_t *want = json_loads("{\"spec\":{\"labels\":{\"a\":\"b\"},\"any\":{\"x\":{\"y\":1}},\"none\":{}}}", 0, NULL);
    CHECK(json_equal(o, want));
    json_decref(want);
    json_decref(o);
    schema_free(s);
}

TEST(schema_embedded_resource) {
    struct schema *s = compile(SPEC("\"template\":{\"type\":\"object\",\"x-kubernetes-embedded-resource\":true,"
                                    "\"x-kubernetes-preserve-unknown-fields\":true},"
                                    "\"strict\":{\"type\":\"object\",\"x-kubernetes-embedded-resource\":true,"
                                    "\"properties\":{\"spec\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}}}}}"));
    REQUIRE(s);
    CHECK_OK(s, "{\"spec\":{\"template\":{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"},"
                "\"spec\":{\"containers\":[]}}}}");
    struct schema_result res;
    CHECK_I64(validate(s, "{\"spec\":{\"template\":{\"kind\":\"\",\"metadata\":3}}}", &res), -EINVAL);
    CHECK_I64(res.n, 3);
    CHECK_ERR(res, 0, "FieldValueRequired", "spec.template.apiVersion", "Required value: must not be empty");
    CHECK_ERR(res, 1, "FieldValueRequired", "spec.template.kind", "Required value: must not be empty");
    CHECK_ERR(res, 2, "FieldValueTypeInvalid", "spec.template.metadata",
              "Invalid value: \"integer\": spec.template.metadata in body must be of type object: \"integer\"");
    schema_result_free(&res);
    json_t *o = json_loads("{\"spec\":{\"strict\":{\"apiVersion\":\"v1\",\"kind\":\"K\",\"metadata\":{\"name\":\"n\"},"
                           "\"spec\":{\"a\":\"x\",\"b\":1},\"status\":{}}}}",
                           0, NULL);
    REQUIRE(o);
    schema_prune(s, o);
    json_t *want = json_loads("{\"spec\":{\"strict\":{\"apiVersion\":\"v1\",\"kind\":\"K\",\"metadata\":{\"name\":\"n\"},"
                              "\"spec\":{\"a\":\"x\"}}}}",
                              0, NULL);
    CHECK(json_equal(o, want));
    json_decref(want);
    json_decref(o);
    schema_free(s);
    char err[256];
    CHECK_I64(compile_fail(SPEC("\"e\":{\"type\":\"string\",\"x-kubernetes-embedded-resource\":true}"), err, sizeof err),
              -EINVAL);
}

TEST(schema_root_metadata_not_validated) {
    struct schema *s = compile("{\"type\":\"object\",\"properties\":{\"metadata\":{\"type\":\"object\",\"properties\":"
                               "{\"name\":{\"type\":\"string\",\"maxLength\":2}}},\"apiVersion\":{\"type\":\"string\","
                               "\"enum\":[\"no\"]},\"spec\":{\"type\":\"object\"}}}");
    REQUIRE(s);
    CHECK_OK(s, "{\"apiVersion\":\"example.com/v1\",\"kind\":\"Widget\",\"metadata\":{\"name\":\"long-name\"},"
                "\"spec\":{}}");
    CHECK_ONE(s, "{\"kind\":7}", "FieldValueTypeInvalid", "kind",
              "Invalid value: \"integer\": kind in body must be of type string: \"integer\"");
    CHECK_ONE(s, "{\"metadata\":\"x\"}", "FieldValueTypeInvalid", "metadata",
              "Invalid value: \"string\": metadata in body must be of type object: \"string\"");
    json_t *o = json_loads("{\"apiVersion\":\"a/v1\",\"kind\":\"W\",\"metadata\":{\"name\":\"n\",\"x\":1},\"spec\":{},"
                           "\"status\":{\"a\":1},\"extra\":2}",
                           0, NULL);
    REQUIRE(o);
    schema_prune(s, o);
    json_t *want = json_loads("{\"apiVersion\":\"a/v1\",\"kind\":\"W\",\"metadata\":{\"name\":\"n\",\"x\":1},\"spec\":{}}",
                              0, NULL);
    CHECK(json_equal(o, want));
    json_decref(want);
    json_decref(o);
    schema_free(s);
}

TEST(schema_defaults) {
    struct schema *s = compile(SPEC(
        "\"replicas\":{\"type\":\"integer\",\"default\":1},"
        "\"mode\":{\"type\":\"string\",\"default\":\"auto\"},"
        "\"keep\":{\"type\":\"string\",\"nullable\":true,\"default\":\"k\"},"
        "\"dropme\":{\"type\":\"string\"},"
        "\"policy\":{\"type\":\"object\",\"default\":{},\"properties\":{\"retries\":{\"type\":\"integer\",\"default\":3},"
        "\"backoff\":{\"type\":\"string\"}}},"
        "\"items\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"default\":{\"w\":1},\"properties\":{"
        "\"w\":{\"type\":\"integer\"},\"tier\":{\"type\":\"string\",\"default\":\"gold\"}}}},"
        "\"env\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\",\"default\":\"on\"}}"));
    REQUIRE(s);
    json_t *o = json_loads("{\"spec\":{\"mode\":null,\"keep\":null,\"dropme\":null,\"items\":[null,{\"w\":2}],"
                           "\"env\":{\"A\":null,\"B\":\"x\"}}}",
                           0, NULL);
    REQUIRE(o);
    CHECK_I64(schema_apply_defaults(s, o), 0);
    json_t *want = json_loads("{\"spec\":{\"replicas\":1,\"mode\":\"auto\",\"keep\":null,"
                              "\"policy\":{\"retries\":3},\"items\":[{\"w\":1,\"tier\":\"gold\"},{\"w\":2,\"tier\":\"gold\"}],"
                              "\"env\":{\"A\":\"on\",\"B\":\"x\"}}}",
                              0, NULL);
    if (!json_equal(o, want)) {
        char *got = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
        test_fail(__FILE__, __LINE__, "defaults gave %s", got);
        free(got);
    }
    struct schema_result res = {0};
    CHECK_I64(schema_validate(s, o, &res), 0);
    schema_result_free(&res);
    /* existing values are left alone; the root's spec has no default so stays absent */
    json_t *e = json_object();
    CHECK_I64(schema_apply_defaults(s, e), 0);
    CHECK_I64(json_object_size(e), 0);
    json_decref(e);
    json_decref(want);
    json_decref(o);
    schema_free(s);
}

TEST(schema_prune_nested) {
    struct schema *s = compile(SPEC("\"rs\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{"
                                    "\"kind\":{\"type\":\"string\"},\"m\":{\"type\":\"array\",\"items\":{\"type\":\"array\","
                                    "\"items\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"}}}}}}}}"));
    REQUIRE(s);
    json_t *o = json_loads("{\"spec\":{\"rs\":[{\"kind\":\"a\",\"junk\":1,\"m\":[[{\"v\":1,\"w\":2}],[]]},\"scalar\"],"
                           "\"other\":true},\"status\":1}",
                           0, NULL);
    REQUIRE(o);
    CHECK_I64(schema_prune(s, o), 0);
    json_t *want = json_loads("{\"spec\":{\"rs\":[{\"kind\":\"a\",\"m\":[[{\"v\":1}],[]]},\"scalar\"]}}", 0, NULL);
    CHECK(json_equal(o, want));
    struct schema_result res;
    CHECK_I64(validate(s, "{\"spec\":{\"rs\":[{\"kind\":\"a\",\"m\":[[{\"v\":1}],[{\"v\":\"x\"}]]},\"scalar\"]}}", &res),
              -EINVAL);
    CHECK_I64(res.n, 2);
    CHECK_ERR(res, 0, "FieldValueTypeInvalid", "spec.rs[0].m[1][0].v",
              "Invalid value: \"string\": spec.rs[0].m[1][0].v in body must be of type integer: \"string\"");
    CHECK_ERR(res, 1, "FieldValueTypeInvalid", "spec.rs[1]",
              "Invalid value: \"string\": spec.rs[1] in body must be of type object: \"string\"");
    schema_result_free(&res);
    json_decref(want);
    json_decref(o);
    schema_free(s);
}

TEST(schema_junctors) {
    struct schema *s = compile(SPEC(
        "\"a\":{\"type\":\"string\",\"anyOf\":[{\"maxLength\":1},{\"pattern\":\"^x\"}]},"
        "\"o\":{\"type\":\"integer\",\"oneOf\":[{\"minimum\":5},{\"maximum\":7}]},"
        "\"n\":{\"type\":\"string\",\"not\":{\"enum\":[\"bad\"]}},"
        "\"all\":{\"type\":\"object\",\"properties\":{\"p\":{\"type\":\"integer\"}},"
        "\"allOf\":[{\"required\":[\"p\"]},{\"properties\":{\"p\":{\"minimum\":2}}}]}"));
    REQUIRE(s);
    CHECK_OK(s, "{\"spec\":{\"a\":\"xyz\",\"o\":9,\"n\":\"good\",\"all\":{\"p\":3}}}");
    CHECK_OK(s, "{\"spec\":{\"a\":\"q\",\"o\":1}}");
    CHECK_ONE(s, "{\"spec\":{\"a\":\"yy\"}}", "FieldValueInvalid", "spec.a",
              "Invalid value: \"\": spec.a in body must validate at least one schema (anyOf)");
    CHECK_ONE(s, "{\"spec\":{\"o\":6}}", "FieldValueInvalid", "spec.o",
              "Invalid value: \"\": spec.o in body must validate one and only one schema (oneOf)");
    CHECK_ONE(s, "{\"spec\":{\"n\":\"bad\"}}", "FieldValueInvalid", "spec.n",
              "Invalid value: \"\": spec.n in body must not validate the schema (not)");
    CHECK_ONE(s, "{\"spec\":{\"all\":{}}}", "FieldValueRequired", "spec.all.p", "Required value");
    CHECK_ONE(s, "{\"spec\":{\"all\":{\"p\":1}}}", "FieldValueInvalid", "spec.all.p",
              "Invalid value: 1: spec.all.p in body should be greater than or equal to 2");
    schema_free(s);
    char err[256];
    CHECK_I64(compile_fail(SPEC("\"x\":{\"type\":\"string\",\"anyOf\":[{\"default\":\"a\"}]}"), err, sizeof err),
              -EINVAL);
    CHECK_HAS(err, "default is not allowed");
}

TEST(schema_invalid_schemas) {
    char err[512];
    CHECK_I64(compile_fail(SPEC("\"x\":{\"type\":\"strnig\"}"), err, sizeof err), -EINVAL);
    CHECK_STR(err, "schema openAPIV3Schema.properties.spec.properties.x: type: Unsupported value: \"strnig\": "
                   "supported values: \"array\", \"boolean\", \"integer\", \"number\", \"object\", \"string\"");
    CHECK_I64(compile_fail(SPEC("\"x\":{\"type\":\"string\",\"properties\":{}}"), err, sizeof err), -EINVAL);
    CHECK_HAS(err, "need type object");
    CHECK_I64(compile_fail(SPEC("\"x\":{}"), err, sizeof err), -EINVAL);
    CHECK_HAS(err, "type: Required value");
    CHECK_I64(compile_fail(SPEC("\"x\":{\"type\":\"array\"}"), err, sizeof err), -EINVAL);
    CHECK_HAS(err, "items: Required value");
    CHECK_I64(compile_fail(SPEC("\"x\":{\"type\":\"string\",\"items\":{\"type\":\"string\"}}"), err, sizeof err), -EINVAL);
    CHECK_I64(compile_fail(SPEC("\"x\":{\"type\":\"array\",\"items\":[{\"type\":\"string\"}]}"), err, sizeof err), -EINVAL);
    CHECK_I64(compile_fail(SPEC("\"x\":{\"$ref\":\"#/definitions/a\"}"), err, sizeof err), -EINVAL);
    CHECK_HAS(err, "$ref is not supported");
    CHECK_I64(compile_fail(SPEC("\"x\":{\"type\":\"array\",\"uniqueItems\":true,\"items\":{\"type\":\"string\"}}"), err,
                           sizeof err),
              -EINVAL);
    CHECK_I64(compile_fail(SPEC("\"x\":{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}"), err,
                           sizeof err),
              -EINVAL);
    CHECK_HAS(err, "mutually exclusive");
    CHECK_I64(compile_fail(SPEC("\"x\":{\"type\":\"string\",\"maxLength\":-1}"), err, sizeof err), -EINVAL);
    CHECK_I64(compile_fail(SPEC("\"x\":{\"type\":\"string\",\"maxLength\":\"3\"}"), err, sizeof err), -EINVAL);
    CHECK_I64(compile_fail(SPEC("\"x\":{\"type\":\"string\",\"enum\":[]}"), err, sizeof err), -EINVAL);
    CHECK_I64(compile_fail(SPEC("\"x\":{\"type\":\"string\",\"nullable\":\"yes\"}"), err, sizeof err), -EINVAL);
    CHECK_I64(compile_fail(SPEC("\"x\":{\"type\":\"integer\",\"multipleOf\":0}"), err, sizeof err), -EINVAL);
    CHECK_I64(compile_fail(SPEC("\"x\":{\"type\":\"integer\",\"maximum\":3,\"default\":4}"), err, sizeof err), -EINVAL);
    CHECK_STR(err, "schema openAPIV3Schema.properties.spec.properties.x: default is invalid: default: Invalid value: 4: "
                   "default in body should be less than or equal to 3");
    CHECK_I64(compile_fail(SPEC("\"x\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},"
                                "\"default\":{\"a\":\"x\",\"b\":1}}"),
                           err, sizeof err),
              -EINVAL);
    CHECK_HAS(err, "unknown fields");
    CHECK_I64(compile_fail("{\"type\":\"string\"}", err, sizeof err), -EINVAL);
    CHECK_HAS(err, "root");
    CHECK_I64(compile_fail("[]", err, sizeof err), -EINVAL);
    CHECK_I64(compile_fail("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}},\"required\":[1]}", err,
                           sizeof err),
              -EINVAL);
}

/* Builds {"type":"object","properties":{"a":{...depth levels...}}}. */
static json_t *deep_schema(int depth) {
    json_t *leaf = json_pack("{ss}", "type", "string");
    for (int i = 0; i < depth; i++) leaf = json_pack("{sss{so}}", "type", "object", "properties", "a", leaf);
    return leaf;
}

TEST(schema_limits) {
    char err[512];
    struct schema *s = NULL;
    json_t *j = deep_schema(63); /* 64 nodes deep */
    CHECK_I64(schema_compile(j, &s, err, sizeof err), 0);
    schema_free(s);
    json_decref(j);
    j = deep_schema(64);
    CHECK_I64(schema_compile(j, &s, err, sizeof err), -E2BIG);
    CHECK_HAS(err, "nested deeper than 64 levels");
    CHECK(s == NULL);
    json_decref(j);

    json_t *props = json_object();
    for (int i = 0; i < SCHEMA_MAX_NODES; i++) {
        char k[16];
        snprintf(k, sizeof k, "p%d", i);
        json_object_set_new(props, k, json_pack("{ss}", "type", "integer"));
    }
    j = json_pack("{ssso}", "type", "object", "properties", props);
    CHECK_I64(schema_compile(j, &s, err, sizeof err), -E2BIG);
    CHECK_HAS(err, "more than 10000 schema nodes");
    json_decref(j);
}

TEST(schema_error_cap_and_format) {
    json_t *props = json_object();
    json_t *obj = json_object();
    for (int i = 0; i < 150; i++) {
        char k[16];
        snprintf(k, sizeof k, "p%03d", i);
        json_object_set_new(props, k, json_pack("{ss}", "type", "integer"));
        json_object_set_new(obj, k, json_string("x"));
    }
    json_t *j = json_pack("{ssso}", "type", "object", "properties", props);
    struct schema *s = NULL;
    char err[256];
    REQUIRE(schema_compile(j, &s, err, sizeof err) == 0);
    struct schema_result res = {0};
    CHECK_I64(schema_validate(s, obj, &res), -EINVAL);
    CHECK_I64(res.n, SCHEMA_MAX_ERRORS);
    CHECK(res.truncated);
    schema_result_free(&res);
    CHECK_I64(res.n, 0);
    json_decref(obj);
    json_decref(j);
    schema_free(s);

    s = compile(SPEC("\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\",\"enum\":[\"x\"]}"));
    REQUIRE(s);
    CHECK_I64(validate(s, "{\"spec\":{\"a\":\"q\",\"b\":\"y\"}}", &res), -EINVAL);
    char buf[512];
    int n = schema_result_format(&res, buf, sizeof buf);
    const char *want = "[spec.a: Invalid value: \"string\": spec.a in body must be of type integer: \"string\", "
                       "spec.b: Unsupported value: \"y\": supported values: \"x\"]";
    CHECK_STR(buf, want);
    CHECK_I64(n, strlen(want));
    char small[8];
    CHECK_I64(schema_result_format(&res, small, sizeof small), strlen(want));
    CHECK_STR(small, "[spec.a");
    json_t *causes = schema_result_causes(&res);
    REQUIRE(causes);
    CHECK_I64(json_array_size(causes), 2);
    CHECK_STR(json_string_value(json_object_get(json_array_get(causes, 1), "reason")), "FieldValueNotSupported");
    CHECK_STR(json_string_value(json_object_get(json_array_get(causes, 1), "field")), "spec.b");
    CHECK_STR(json_string_value(json_object_get(json_array_get(causes, 0), "message")),
              "Invalid value: \"string\": spec.a in body must be of type integer: \"string\"");
    json_decref(causes);
    schema_result_free(&res);
    CHECK_I64(validate(s, "{\"spec\":{\"a\":\"q\"}}", &res), -EINVAL);
    schema_result_format(&res, buf, sizeof buf);
    CHECK_STR(buf, "spec.a: Invalid value: \"string\": spec.a in body must be of type integer: \"string\"");
    schema_result_free(&res);
    schema_free(s);
}

TEST(schema_value_quoting) {
    struct schema *s = compile(SPEC("\"e\":{\"type\":\"string\",\"enum\":[\"a\"]}"));
    REQUIRE(s);
    CHECK_ONE(s, "{\"spec\":{\"e\":\"q\\\"\\n\\u0001\"}}", "FieldValueNotSupported", "spec.e",
              "Unsupported value: \"q\\\"\\n\\x01\": supported values: \"a\"");
    char big[600], obj[700];
    memset(big, 'z', 599);
    big[599] = 0;
    snprintf(obj, sizeof obj, "{\"spec\":{\"e\":\"%s\"}}", big);
    struct schema_result res;
    CHECK_I64(validate(s, obj, &res), -EINVAL);
    REQUIRE(res.n == 1);
    CHECK_HAS(res.errors[0].message, "zzz...\": supported values");
    CHECK(strlen(res.errors[0].message) < 300 + 40);
    schema_result_free(&res);
    schema_free(s);

    /* long map keys are cut in paths; long enum lists are cut */
    s = compile(SPEC("\"m\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}"));
    REQUIRE(s);
    snprintf(obj, sizeof obj, "{\"spec\":{\"m\":{\"%s\":\"v\"}}}", big);
    CHECK_I64(validate(s, obj, &res), -EINVAL);
    REQUIRE(res.n == 1);
    CHECK_I64(strlen(res.errors[0].field), strlen("spec.m.") + SCHEMA_MAX_VALUE_SHOWN + 3);
    CHECK_HAS(res.errors[0].field, "zzz...");
    schema_result_free(&res);
    schema_free(s);
    json_t *en = json_array();
    for (int i = 0; i < 2000; i++) json_array_append_new(en, json_integer(i));
    json_t *j = json_pack("{sss{s{ssso}}}", "type", "object", "properties", "e", "type", "integer", "enum", en);
    char err[256];
    REQUIRE(schema_compile(j, &s, err, sizeof err) == 0);
    json_decref(j);
    CHECK_OK(s, "{\"e\":1999}");
    CHECK_I64(validate(s, "{\"e\":2000}", &res), -EINVAL);
    REQUIRE(res.n == 1);
    CHECK_HAS(res.errors[0].message, "Unsupported value: 2000: supported values: \"0\", \"1\", \"2\", ");
    CHECK_HAS(res.errors[0].message + strlen(res.errors[0].message) - 5, ", ...");
    CHECK(strlen(res.errors[0].message) < 16 * SCHEMA_MAX_VALUE_SHOWN + 200);
    schema_result_free(&res);
    schema_free(s);
}

/* ---- property test ---- */

static const char *const prop_keys[] = {"spec", "status", "replicas", "mode", "items", "kind", "port",
                                        "labels", "raw", "x", "metadata", "apiVersion", "n"};

static json_t *rand_value(uint64_t *rs, int depth) {
    switch (test_range(rs, 0, depth > 3 ? 5 : 7)) {
    case 0: return json_null();
    case 1: return json_boolean(test_range(rs, 0, 1));
    case 2: return json_integer(test_range(rs, -5, 20));
    case 3: return json_real((double)test_range(rs, -50, 50) / 4.0);
    case 4: {
        static const char *const strs[] = {"", "a", "FAST", "SLOW", "abc", "2026-01-01T00:00:00Z", "80", "x y"};
        return json_string(strs[test_range(rs, 0, 7)]);
    }
    case 5: return json_string("zz");
    case 6: {
        json_t *a = json_array();
        for (int64_t i = test_range(rs, 0, 4); i > 0; i--) json_array_append_new(a, rand_value(rs, depth + 1));
        return a;
    }
    default: {
        json_t *o = json_object();
        for (int64_t i = test_range(rs, 0, 5); i > 0; i--)
            json_object_set_new(o, prop_keys[test_range(rs, 0, 12)], rand_value(rs, depth + 1));
        return o;
    }
    }
}

static bool same_errors(const struct schema_result *a, const struct schema_result *b) {
    if (a->n != b->n || a->truncated != b->truncated) return false;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->errors[i].field, b->errors[i].field) || strcmp(a->errors[i].message, b->errors[i].message) ||
            strcmp(a->errors[i].reason, b->errors[i].reason))
            return false;
    return true;
}

TEST(schema_property_random_objects) {
    struct schema *s = compile(
        "{\"type\":\"object\",\"required\":[\"spec\"],\"properties\":{\"spec\":{\"type\":\"object\",\"default\":{},"
        "\"required\":[\"mode\"],\"properties\":{"
        "\"replicas\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":10,\"default\":1},"
        "\"mode\":{\"type\":\"string\",\"enum\":[\"FAST\",\"SLOW\"],\"default\":\"FAST\"},"
        "\"port\":{\"x-kubernetes-int-or-string\":true},"
        "\"labels\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\",\"maxLength\":3}},"
        "\"raw\":{\"x-kubernetes-preserve-unknown-fields\":true,\"nullable\":true},"
        "\"items\":{\"type\":\"array\",\"maxItems\":3,\"items\":{\"type\":\"object\",\"required\":[\"kind\"],"
        "\"properties\":{\"kind\":{\"type\":\"string\",\"pattern\":\"^[a-z]+$\"},"
        "\"n\":{\"type\":\"number\",\"nullable\":true,\"default\":2.5},"
        "\"x\":{\"type\":\"array\",\"items\":{\"type\":\"array\",\"items\":{\"type\":\"boolean\"}}}}}}}},"
        "\"status\":{\"type\":\"object\",\"x-kubernetes-preserve-unknown-fields\":true}}}");
    REQUIRE(s);
    uint64_t rs = 42;
    int valid = 0;
    for (int iter = 0; iter < 3000; iter++) {
        json_t *o = json_object();
        for (int64_t i = test_range(&rs, 0, 5); i > 0; i--)
            json_object_set_new(o, prop_keys[test_range(&rs, 0, 12)], rand_value(&rs, 0));
        struct schema_result raw = {0}, r1 = {0}, r2 = {0};
        schema_validate(s, o, &raw); /* anything goes, but no crash */
        CHECK(raw.n <= SCHEMA_MAX_ERRORS);
        CHECK_I64(schema_prune(s, o), 0);
        CHECK_I64(schema_apply_defaults(s, o), 0);
        int rc1 = schema_validate(s, o, &r1);
        CHECK(rc1 == 0 || rc1 == -EINVAL);
        CHECK_I64(rc1 == 0, r1.n == 0);
        if (rc1 == 0) valid++;
        json_t *snap = json_deep_copy(o);
        CHECK_I64(schema_prune(s, o), 0);
        CHECK_I64(schema_apply_defaults(s, o), 0);
        CHECK(json_equal(o, snap)); /* prune and defaults are idempotent */
        int rc2 = schema_validate(s, o, &r2);
        CHECK_I64(rc1, rc2);
        CHECK(same_errors(&r1, &r2));
        /* defaults leave spec present, so `spec` is never reported missing */
        for (size_t i = 0; i < r1.n; i++) CHECK(strcmp(r1.errors[i].field, "spec") != 0 || json_is_object(
                                                    json_object_get(o, "spec")) == 0);
        json_decref(snap);
        schema_result_free(&raw);
        schema_result_free(&r1);
        schema_result_free(&r2);
        json_decref(o);
    }
    CHECK(valid > 50); /* the generator reaches valid objects too */
    schema_free(s);
}

TEST(schema_step_budget) {
    /* 600 allOf subschemas each check every item of a 20,000-item array:
     * 12M checks, past SCHEMA_MAX_STEPS. */
    json_t *all = json_array();
    for (int i = 0; i < 600; i++)
        json_array_append_new(all, json_pack("{s{ss}}", "items", "type", "integer"));
    json_t *j = json_pack("{sss{s{sss{ss}so}}}", "type", "object", "properties", "l", "type", "array", "items", "type",
                          "integer", "allOf", all);
    REQUIRE(j);
    struct schema *s = NULL;
    char err[256];
    REQUIRE(schema_compile(j, &s, err, sizeof err) == 0);
    json_t *arr = json_array();
    for (int i = 0; i < 20000; i++) json_array_append_new(arr, json_integer(i));
    json_t *o = json_pack("{so}", "l", arr);
    struct schema_result res = {0};
    CHECK_I64(schema_validate(s, o, &res), -EINVAL);
    REQUIRE(res.n == 1);
    CHECK_ERR(res, 0, "InternalError", "", "Internal error: validation needs more than 10000000 steps");
    schema_result_free(&res);
    json_array_clear(arr); /* 1,000 items x 601 nodes: well under the budget */
    for (int i = 0; i < 1000; i++) json_array_append_new(arr, json_integer(i));
    CHECK_I64(schema_validate(s, o, &res), 0);
    schema_result_free(&res);
    json_decref(o);
    json_decref(j);
    schema_free(s);
}
