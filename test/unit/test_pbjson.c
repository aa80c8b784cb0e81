/* pbjson.h and pbmsg.h: proto3 JSON of every field shape (test proto
 * peloton_c.test.AllTypes), round trips JSON -> message -> wire -> message
 * -> JSON, what is refused and why, and the depth bounds on both sides. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pbjson.h"
#include "pbmsg.h"
#include "mesos/v1/mesos.pb-c.h"
#include "peloton/api/v0/respool/respool.pb-c.h"
#include "google/protobuf/timestamp.pb-c.h"
#include "peloton_c/test/alltypes.pb-c.h"
#include "test.h"

#define AT_DESC (&peloton_c__test__all_types__descriptor)

/* JSON text -> message -> wire -> message -> JSON text. */
static char *round_trip(const char *json, char *err, size_t errlen) {
    ProtobufCMessage *m = pbjson_parse(AT_DESC, json, strlen(json), err, errlen);
    if (!m) return NULL;
    size_t n;
    uint8_t *wire = pbmsg_pack(m, &n);
    protobuf_c_message_free_unpacked(m, NULL);
    ProtobufCMessage *back = pbmsg_unpack(AT_DESC, wire, n, err, errlen);
    free(wire);
    if (!back) return NULL;
    char *out = pbjson_dump(back, NULL, err, errlen);
    protobuf_c_message_free_unpacked(back, NULL);
    return out;
}

TEST(pbjson_scalars_written_as_proto3_json) {
    PelotonC__Test__AllTypes m = PELOTON_C__TEST__ALL_TYPES__INIT;
    m.i32 = -5;
    m.i64 = -9007199254740993LL; /* beyond a double's exact integers: why 64-bit is a string */
    m.u64 = 18446744073709551615ULL;
    m.u32 = 4294967295u;
    m.dbl = 0.5;
    m.flag = 1;
    m.text = "héllo";
    uint8_t bytes[] = {0xfb, 0xff};
    m.blob.data = bytes;
    m.blob.len = 2;
    m.color = PELOTON_C__TEST__COLOR__GREEN;
    m.snake_case_value = 2;
    char err[256];
    char *s = pbjson_dump(&m.base, NULL, err, sizeof err);
    REQUIRE(s);
    CHECK_STR(s, "{\"i32\":-5,\"i64\":\"-9007199254740993\",\"u32\":4294967295,\"u64\":\"18446744073709551615\","
                 "\"dbl\":0.5,\"flag\":true,\"text\":\"h\xc3\xa9llo\",\"blob\":\"+/8=\",\"color\":\"GREEN\","
                 "\"snakeCaseValue\":2.0}");
    free(s);
    /* years before 1000 keep four digits (a fuzzer's find: "969-12-31" did not read back) */
    Google__Protobuf__Timestamp ts = GOOGLE__PROTOBUF__TIMESTAMP__INIT;
    ts.seconds = -31588441200LL;
    s = pbjson_dump(&ts.base, NULL, err, sizeof err);
    CHECK_STR(s, "\"0969-01-01T01:00:00Z\"");
    free(s);
    /* defaults are left out: an empty message is {} */
    PelotonC__Test__AllTypes e = PELOTON_C__TEST__ALL_TYPES__INIT;
    s = pbjson_dump(&e.base, NULL, err, sizeof err);
    CHECK_STR(s, "{}");
    free(s);
}

TEST(pbjson_round_trip_every_shape) {
    static const char *in =
        "{\"i32\":-7,\"i64\":\"123456789012345\",\"u32\":7,\"u64\":\"18446744073709551615\",\"s32\":-3,"
        "\"s64\":\"-4\",\"f32\":5,\"f64\":\"6\",\"sf32\":-8,\"sf64\":\"-9\",\"flt\":1.5,\"dbl\":\"Infinity\","
        "\"flag\":true,\"text\":\"t\",\"blob\":\"AAEC\",\"color\":\"RED\","
        "\"node\":{\"name\":\"a\",\"children\":[{\"name\":\"b\"},{}]},"
        "\"manyI64\":[\"1\",\"-2\"],\"manyText\":[\"x\",\"\"],\"colors\":[\"GREEN\",\"RED\"],"
        "\"nodes\":[{\"name\":\"n\"}],\"counts\":{\"k\":\"3\"},\"byId\":{\"7\":{\"name\":\"seven\"}},"
        "\"byFlag\":{\"true\":\"yes\"},\"choiceNode\":{\"name\":\"c\"},"
        "\"when\":\"2019-01-02T03:04:05.123Z\",\"blobs\":[\"AA==\",\"\"],\"snakeCaseValue\":-0.25}";
    char err[256] = "";
    char *out = round_trip(in, err, sizeof err);
    REQUIRE(out);
    CHECK_STR(out, "{\"i32\":-7,\"i64\":\"123456789012345\",\"u32\":7,\"u64\":\"18446744073709551615\",\"s32\":-3,"
                   "\"s64\":\"-4\",\"f32\":5,\"f64\":\"6\",\"sf32\":-8,\"sf64\":\"-9\",\"flt\":1.5,"
                   "\"dbl\":\"Infinity\",\"flag\":true,\"text\":\"t\",\"blob\":\"AAEC\",\"color\":\"RED\","
                   "\"node\":{\"name\":\"a\",\"children\":[{\"name\":\"b\"},{}]},"
                   "\"manyI64\":[\"1\",\"-2\"],\"manyText\":[\"x\",\"\"],\"colors\":[\"GREEN\",\"RED\"],"
                   "\"nodes\":[{\"name\":\"n\"}],\"counts\":{\"k\":\"3\"},\"byId\":{\"7\":{\"name\":\"seven\"}},"
                   "\"byFlag\":{\"true\":\"yes\"},\"choiceNode\":{\"name\":\"c\"},"
                   "\"when\":\"2019-01-02T03:04:05.123Z\",\"blobs\":[\"AA==\",\"\"],\"snakeCaseValue\":-0.25}");
    free(out);
}

TEST(pbjson_accepts_what_proto3_parsers_accept) {
    char err[256] = "";
    /* field names as well as JSON names, numbers as strings, enums by number,
     * URL base64 without padding, an integral real, a zone offset, nulls */
    const char *in = "{\"many_i64\":[2,\"3\"],\"i32\":\"-4\",\"u32\":1e3,\"color\":2,\"blob\":\"-_8\","
                     "\"when\":\"2019-01-02T05:04:05+02:00\",\"text\":null,\"node\":null,\"choice_num\":0}";
    char *out = round_trip(in, err, sizeof err);
    REQUIRE(out);
    /* a oneof member set to its default is still written */
    CHECK_STR(out, "{\"i32\":-4,\"u32\":1000,\"blob\":\"+/8=\",\"color\":\"GREEN\",\"manyI64\":[\"2\",\"3\"],"
                   "\"choiceNum\":0,\"when\":\"2019-01-02T03:04:05Z\"}");
    free(out);
    /* the v0 respool message whose field is capitalised: "Force" */
    ProtobufCMessage *m = pbjson_parse(&peloton__api__v0__respool__update_request__descriptor,
                                       "{\"Force\":true,\"id\":{\"value\":\"p\"}}", 33, err, sizeof err);
    REQUIRE(m);
    Peloton__Api__V0__Respool__UpdateRequest *u = (void *)m;
    CHECK(u->force);
    CHECK_STR(u->id->value, "p");
    protobuf_c_message_free_unpacked(m, NULL);
}

TEST(pbjson_refuses_with_the_field_path) {
    static const struct {
        const char *in, *msg;
    } cases[] = {
        {"{\"nope\":1}", "nope: unknown field of peloton_c.test.AllTypes"},
        {"{\"i32\":2147483648}", "i32: integer out of range"},
        {"{\"u32\":-1}", "u32: integer out of range"},
        {"{\"u64\":\"-1\"}", "u64: expected an integer"},
        {"{\"i64\":\"12x\"}", "i64: expected an integer"},
        {"{\"i32\":1.5}", "i32: expected an integer"},
        {"{\"flag\":1}", "flag: expected true or false"},
        {"{\"color\":\"BLUE\"}", "color: unknown peloton_c.test.Color value \"BLUE\""},
        {"{\"blob\":\"a$\"}", "blob: invalid base64 at offset 1"},
        {"{\"blob\":\"a\"}", "blob: invalid base64 length"},
        {"{\"text\":\"a\",\"text\":\"b\"}", "duplicate object key"},
        {"{\"manyText\":[\"a\"],\"many_text\":[]}", "field given twice"},
        {"{\"choiceText\":\"a\",\"choiceNum\":1}", "choiceNum: another member of the same oneof"},
        {"{\"nodes\":[{\"name\":\"a\"},{\"name\":3}]}", "nodes[1].name: expected a string"},
        {"{\"node\":{\"children\":[{\"children\":[{\"x\":1}]}]}}", "node.children[0].children[0].x: unknown field"},
        {"{\"byId\":{\"x\":{}}}", "byId.x: expected an integer"},
        {"{\"byFlag\":{\"yes\":\"\"}}", "map key \"yes\" is not true or false"},
        {"{\"when\":\"2019-02-30T00:00:00Z\"}", "when: expected an RFC 3339 timestamp"},
        {"{\"flt\":1e39}", "flt: number out of range for a float"},
        {"{\"dbl\":\"nan\"}", "dbl: expected a number"},
        {"{\"manyText\":[null]}", "manyText[0]: null is not allowed"},
        {"[1]", "expected an object"},
        {"{\"text\":\"a\\u0000b\"}", "is not allowed"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[256] = "";
        ProtobufCMessage *m = pbjson_parse(AT_DESC, cases[i].in, strlen(cases[i].in), err, sizeof err);
        CHECK(!m);
        CHECK_HAS(err, cases[i].msg);
        if (m) protobuf_c_message_free_unpacked(m, NULL);
    }
}

/* n levels of Node.children as JSON, and as wire bytes. */
static char *deep_json(int n) {
    char *s = malloc((size_t)n * 16 + 16), *p = s;
    for (int i = 0; i < n; i++) p += sprintf(p, "{\"children\":[");
    p += sprintf(p, "{}");
    for (int i = 0; i < n; i++) p += sprintf(p, "]}");
    return s;
}

TEST(pbjson_and_pbmsg_bound_depth) {
    char err[256] = "";
    char *s = deep_json(PBJSON_MAX_DEPTH);
    ProtobufCMessage *m = pbjson_parse(&peloton_c__test__node__descriptor, s, strlen(s), err, sizeof err);
    CHECK(m);
    free(s);
    /* the wire form of that message passes the wire check, one more level does not */
    size_t n;
    uint8_t *w = pbmsg_pack(m, &n);
    CHECK_I64(pbmsg_check(&peloton_c__test__node__descriptor, w, n, PBMSG_MAX_DEPTH, err, sizeof err), 0);
    CHECK_I64(pbmsg_check(&peloton_c__test__node__descriptor, w, n, PBJSON_MAX_DEPTH - 1, err, sizeof err), -E2BIG);
    free(w);
    protobuf_c_message_free_unpacked(m, NULL);
    s = deep_json(PBJSON_MAX_DEPTH + 1);
    m = pbjson_parse(&peloton_c__test__node__descriptor, s, strlen(s), err, sizeof err);
    CHECK(!m);
    CHECK_HAS(err, "nested deeper than 64");
    free(s);
    /* a million nested length prefixes would overflow protobuf-c's recursion: refused first */
    size_t depth = 200000, len = 0;
    uint8_t *deep = malloc(depth * 6);
    for (size_t i = 0; i < depth; i++) { /* field 2 (children), a 5-byte varint length: the rest */
        size_t rest = (depth - i - 1) * 6;
        deep[len++] = 0x12;
        for (int k = 0; k < 5; k++) deep[len++] = (uint8_t)(((rest >> (7 * k)) & 0x7f) | (k < 4 ? 0x80 : 0));
    }
    CHECK(!pbmsg_unpack(&peloton_c__test__node__descriptor, deep, len, err, sizeof err));
    CHECK_HAS(err, "nested deeper than 64");
    free(deep);
    /* malformed: truncated varint, length past the end, a group */
    static const uint8_t bad1[] = {0x08, 0x80}, bad2[] = {0x0a, 0x05, 'a'}, bad3[] = {0x0b};
    CHECK(!pbmsg_unpack(&peloton_c__test__node__descriptor, bad1, sizeof bad1, err, sizeof err));
    CHECK(!pbmsg_unpack(&peloton_c__test__node__descriptor, bad2, sizeof bad2, err, sizeof err));
    CHECK(!pbmsg_unpack(&peloton_c__test__node__descriptor, bad3, sizeof bad3, err, sizeof err));
    CHECK_HAS(err, "malformed protobuf in peloton_c.test.Node");
    /* a string field holding a varint: well-formed wire, refused by protobuf-c */
    static const uint8_t bad4[] = {0x08, 0x01};
    CHECK(!pbmsg_unpack(&peloton_c__test__node__descriptor, bad4, sizeof bad4, err, sizeof err));
}

TEST(pbjson_bounds_repeated_items) {
    /* PBJSON_MAX_ITEMS + 1 elements: refused without building them all */
    size_t n = PBJSON_MAX_ITEMS + 1;
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(a, json_true());
    json_t *o = json_pack("{s:o}", "colors", a);
    char err[256] = "";
    ProtobufCMessage *m = pbjson_to_msg(AT_DESC, o, err, sizeof err);
    CHECK(!m);
    CHECK_HAS(err, "more than 1048576 repeated elements");
    json_decref(o);
}

/* proto2 (the Mesos messages): optional fields have presence, so a field
 * set to its default is still written, and one not given is left out even
 * when its default is not zero (CommandInfo.shell defaults to true). */
TEST(pbjson_proto2_presence) {
    char err[256] = "";
    const char *in = "{\"shell\":false,\"value\":\"ls\",\"arguments\":[\"-l\"],"
                     "\"environment\":{\"variables\":[{\"name\":\"A\",\"value\":\"1\"}]}}";
    ProtobufCMessage *m = pbjson_parse(&mesos__v1__command_info__descriptor, in, strlen(in), err, sizeof err);
    REQUIRE(m);
    Mesos__V1__CommandInfo *ci = (void *)m;
    CHECK(ci->has_shell && !ci->shell);
    size_t n;
    uint8_t *w = pbmsg_pack(m, &n);
    protobuf_c_message_free_unpacked(m, NULL);
    m = pbmsg_unpack(&mesos__v1__command_info__descriptor, w, n, err, sizeof err);
    free(w);
    REQUIRE(m);
    char *s = pbjson_dump(m, NULL, err, sizeof err);
    CHECK_STR(s, "{\"environment\":{\"variables\":[{\"name\":\"A\",\"value\":\"1\"}]},\"value\":\"ls\",\"shell\":false,"
                 "\"arguments\":[\"-l\"]}"); /* by field number */
    free(s);
    protobuf_c_message_free_unpacked(m, NULL);
    /* not given: the default (true) applies and nothing is written */
    m = pbjson_parse(&mesos__v1__command_info__descriptor, "{\"value\":\"ls\"}", 14, err, sizeof err);
    REQUIRE(m);
    CHECK(((Mesos__V1__CommandInfo *)m)->shell && !((Mesos__V1__CommandInfo *)m)->has_shell);
    s = pbjson_dump(m, NULL, err, sizeof err);
    CHECK_STR(s, "{\"value\":\"ls\"}");
    free(s);
    protobuf_c_message_free_unpacked(m, NULL);
    /* a proto2 required string given the wrong type: refused, and the half-built
     * message freed cleanly (a fuzzer's find: the field was reset to the static
     * "" that only proto3 fields have as their default, and freed) */
    const char *bad = "{\"type\":\"DOCKER\",\"docker\":{\"image\":[1]}}";
    CHECK(!pbjson_parse(&mesos__v1__container_info__descriptor, bad, strlen(bad), err, sizeof err));
    CHECK_HAS(err, "docker.image: expected a string");
    /* a required field missing on the wire: protobuf-c refuses the message */
    static const uint8_t no_value[] = {0x30, 0x01}; /* shell = true, value (required) absent: TaskID */
    CHECK(!pbmsg_unpack(&mesos__v1__task_id__descriptor, no_value, sizeof no_value, err, sizeof err));
}
