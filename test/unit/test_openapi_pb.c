/* openapi_pb: a Swagger document's parts land at the field numbers of
 * gnostic's OpenAPIv2.proto. A small reader below follows a path of field
 * numbers through embedded messages, the way a protobuf decoder would. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "openapi_pb.h"
#include "test.h"

/* One field of a message: its number, wire type and payload (for a
 * length-delimited field, the bytes; for a varint, its value in v). */
struct pbf {
    uint32_t num;
    int wt;
    const unsigned char *p;
    size_t n;
    uint64_t v;
};

static bool rd_varint(const unsigned char **p, const unsigned char *end, uint64_t *v) {
    *v = 0;
    for (int s = 0; s < 64 && *p < end; s += 7) {
        unsigned char c = *(*p)++;
        *v |= (uint64_t)(c & 0x7f) << s;
        if (!(c & 0x80)) return true;
    }
    return false;
}

/* The next field at *p; false at the end or on malformed input. */
static bool rd_field(const unsigned char **p, const unsigned char *end, struct pbf *f) {
    uint64_t key;
    if (*p >= end || !rd_varint(p, end, &key)) return false;
    f->num = (uint32_t)(key >> 3);
    f->wt = (int)(key & 7);
    f->p = *p;
    switch (f->wt) {
    case 0:
        return rd_varint(p, end, &f->v);
    case 1:
        if (end - *p < 8) return false;
        f->n = 8;
        *p += 8;
        return true;
    case 2:
        if (!rd_varint(p, end, &f->v) || f->v > (uint64_t)(end - *p)) return false;
        f->p = *p;
        f->n = (size_t)f->v;
        *p += f->n;
        return true;
    default:
        return false;
    }
}

/* Follows path (field numbers, the first occurrence of each) from the message
 * b; *out gets the last field. nth picks the nth occurrence of the last step. */
static bool find_nth(const unsigned char *b, size_t n, const uint32_t *path, int depth, int nth, struct pbf *out) {
    const unsigned char *p = b, *end = b + n;
    struct pbf f;
    int seen = 0;
    while (rd_field(&p, end, &f)) {
        if (f.num != path[0]) continue;
        if (depth == 1) {
            if (seen++ < nth) continue;
            *out = f;
            return true;
        }
        return f.wt == 2 && find_nth(f.p, f.n, path + 1, depth - 1, nth, out);
    }
    return false;
}
#define FIND(b, n, out, ...)                                                                                \
    find_nth(b, n, (const uint32_t[]){__VA_ARGS__}, (int)(sizeof((const uint32_t[]){__VA_ARGS__}) / 4), 0, out)

static bool str_is(const struct pbf *f, const char *s) {
    return f->wt == 2 && f->n == strlen(s) && memcmp(f->p, s, f->n) == 0;
}

static unsigned char *encode(const char *json, size_t *len, int *rc) {
    json_t *doc = json_loads(json, 0, NULL);
    unsigned char *out = NULL;
    *rc = doc ? openapi_pb_encode(doc, 0, &out, len) : -999;
    json_decref(doc);
    return out;
}

TEST(openapi_pb_document_head) {
    size_t len;
    int rc;
    unsigned char *b = encode("{\"swagger\": \"2.0\"}", &len, &rc);
    REQUIRE_I64(rc, 0);
    static const unsigned char want[] = {0x0a, 0x03, '2', '.', '0'};
    CHECK(len == sizeof want && memcmp(b, want, len) == 0);
    free(b);
    b = encode("{\"swagger\": \"2.0\", \"info\": {\"title\": \"T\", \"version\": \"v9\"}}", &len, &rc);
    REQUIRE_I64(rc, 0);
    struct pbf f;
    CHECK(FIND(b, len, &f, 2, 1) && str_is(&f, "T"));  /* Info.title */
    CHECK(FIND(b, len, &f, 2, 2) && str_is(&f, "v9")); /* Info.version */
    free(b);
    json_t *arr = json_array();
    unsigned char *out = (unsigned char *)"x";
    CHECK_I64(openapi_pb_encode(arr, 0, &out, &len), -EINVAL);
    CHECK(out == NULL);
    json_decref(arr);
}

TEST(openapi_pb_definitions) {
    size_t len;
    int rc;
    unsigned char *b = encode(
        "{\"definitions\": {\"A\": {\"type\": \"object\", \"description\": \"d\", \"required\": [\"x\"],"
        " \"properties\": {\"x\": {\"type\": \"string\", \"enum\": [\"p\", \"q\"]},"
        "  \"m\": {\"type\": \"object\", \"additionalProperties\": {\"$ref\": \"#/definitions/B\"}},"
        "  \"f\": {\"type\": \"object\", \"additionalProperties\": false},"
        "  \"l\": {\"type\": \"array\", \"items\": {\"type\": \"integer\", \"format\": \"int32\", \"maximum\": 1.5,"
        "         \"maxLength\": 7}}},"
        " \"x-kubernetes-group-version-kind\": [{\"group\": \"\", \"kind\": \"A\", \"version\": \"v1\"}]}}}",
        &len, &rc);
    REQUIRE_I64(rc, 0);
    struct pbf f;
    /* Document.definitions(9) > NamedSchema(1) > name(1) / value(2) Schema */
    CHECK(FIND(b, len, &f, 9, 1, 1) && str_is(&f, "A"));
    CHECK(FIND(b, len, &f, 9, 1, 2, 4) && str_is(&f, "d"));          /* description */
    CHECK(FIND(b, len, &f, 9, 1, 2, 19) && str_is(&f, "x"));         /* required */
    CHECK(FIND(b, len, &f, 9, 1, 2, 22, 1) && str_is(&f, "object")); /* type > TypeItem.value */
    /* properties(25) > Properties.additional_properties(1) > NamedSchema */
    CHECK(FIND(b, len, &f, 9, 1, 2, 25, 1, 1) && str_is(&f, "x"));
    CHECK(FIND(b, len, &f, 9, 1, 2, 25, 1, 2, 22, 1) && str_is(&f, "string"));
    CHECK(FIND(b, len, &f, 9, 1, 2, 25, 1, 2, 20, 2) && str_is(&f, "\"p\"")); /* enum > Any.yaml */
    struct pbf q;
    CHECK(find_nth(b, len, (const uint32_t[]){9, 1, 2, 25, 1, 2, 20}, 7, 1, &q) && FIND(q.p, q.n, &f, 2) &&
          str_is(&f, "\"q\""));
    /* the vendor extension: NamedAny(31){name 1, value 2 > Any.yaml 2} */
    CHECK(FIND(b, len, &f, 9, 1, 2, 31, 1) && str_is(&f, "x-kubernetes-group-version-kind"));
    CHECK(FIND(b, len, &f, 9, 1, 2, 31, 2, 2) && str_is(&f, "[{\"group\": \"\", \"kind\": \"A\", \"version\": \"v1\"}]"));
    /* the second, third and fourth properties: m (a map of B), f (closed), l (a list) */
    const uint32_t prop[] = {9, 1, 2, 25, 1};
    struct pbf m, fl, l;
    REQUIRE(find_nth(b, len, prop, 5, 1, &m) && find_nth(b, len, prop, 5, 2, &fl) && find_nth(b, len, prop, 5, 3, &l));
    CHECK(FIND(m.p, m.n, &f, 1) && str_is(&f, "m"));
    CHECK(FIND(m.p, m.n, &f, 2, 21, 1, 1) && str_is(&f, "#/definitions/B")); /* additionalProperties > schema > _ref */
    CHECK(FIND(fl.p, fl.n, &f, 2, 21, 2) && f.wt == 0 && f.v == 0);           /* additionalProperties > boolean */
    CHECK(FIND(l.p, l.n, &f, 2, 23, 1, 22, 1) && str_is(&f, "integer"));     /* items > ItemsItem.schema */
    CHECK(FIND(l.p, l.n, &f, 2, 23, 1, 2) && str_is(&f, "int32"));           /* format */
    CHECK(FIND(l.p, l.n, &f, 2, 23, 1, 7) && f.wt == 1);                      /* maximum: a double */
    double d;
    memcpy(&d, f.p, 8); /* little-endian on the wire and on this machine */
    CHECK(d == 1.5);
    CHECK(FIND(l.p, l.n, &f, 2, 23, 1, 11) && f.wt == 0 && f.v == 7); /* max_length */
    free(b);
}

TEST(openapi_pb_paths_and_parameters) {
    size_t len;
    int rc;
    unsigned char *b = encode(
        "{\"paths\": {\"/api/v1/namespaces/{namespace}/configmaps/{name}\": {"
        "  \"parameters\": [{\"name\": \"name\", \"in\": \"path\", \"required\": true, \"type\": \"string\"}],"
        "  \"patch\": {\"operationId\": \"patchCM\", \"consumes\": [\"application/merge-patch+json\"],"
        "    \"parameters\": [{\"name\": \"dryRun\", \"in\": \"query\", \"type\": \"string\", \"uniqueItems\": true},"
        "                     {\"name\": \"body\", \"in\": \"body\", \"required\": true, \"schema\": {\"type\": \"object\"}},"
        "                     {\"$ref\": \"#/parameters/x\"}],"
        "    \"responses\": {\"200\": {\"description\": \"OK\", \"schema\": {\"$ref\": \"#/definitions/C\"}}},"
        "    \"x-kubernetes-group-version-kind\": {\"group\": \"\", \"kind\": \"ConfigMap\", \"version\": \"v1\"}},"
        "  \"get\": {\"operationId\": \"readCM\"}}}}",
        &len, &rc);
    REQUIRE_I64(rc, 0);
    struct pbf f;
    /* Document.paths(8) > Paths.path(2) > NamedPathItem{name 1, value 2 PathItem} */
    CHECK(FIND(b, len, &f, 8, 2, 1) && str_is(&f, "/api/v1/namespaces/{namespace}/configmaps/{name}"));
    CHECK(FIND(b, len, &f, 8, 2, 2, 2, 5) && str_is(&f, "readCM"));  /* get(2) > operation_id(5) */
    CHECK(FIND(b, len, &f, 8, 2, 2, 8, 5) && str_is(&f, "patchCM")); /* patch(8) */
    CHECK(FIND(b, len, &f, 8, 2, 2, 8, 7) && str_is(&f, "application/merge-patch+json")); /* consumes */
    /* the path item's parameter: ParametersItem(9) > Parameter(1) > NonBodyParameter(2) > path(4) */
    CHECK(FIND(b, len, &f, 8, 2, 2, 9, 1, 2, 4, 4) && str_is(&f, "name"));
    CHECK(FIND(b, len, &f, 8, 2, 2, 9, 1, 2, 4, 5) && str_is(&f, "string")); /* path: type at 5 */
    CHECK(FIND(b, len, &f, 8, 2, 2, 9, 1, 2, 4, 1) && f.v == 1);             /* required */
    /* the operation's parameters(8): query(3) name(4), type at 6, unique_items 20 */
    CHECK(FIND(b, len, &f, 8, 2, 2, 8, 8, 1, 2, 3, 4) && str_is(&f, "dryRun"));
    CHECK(FIND(b, len, &f, 8, 2, 2, 8, 8, 1, 2, 3, 6) && str_is(&f, "string"));
    CHECK(FIND(b, len, &f, 8, 2, 2, 8, 8, 1, 2, 3, 20) && f.v == 1);
    const uint32_t param[] = {8, 2, 2, 8, 8};
    struct pbf body, ref;
    REQUIRE(find_nth(b, len, param, 5, 1, &body) && find_nth(b, len, param, 5, 2, &ref));
    CHECK(FIND(body.p, body.n, &f, 1, 1, 2) && str_is(&f, "body"));            /* BodyParameter.name */
    CHECK(FIND(body.p, body.n, &f, 1, 1, 5, 22, 1) && str_is(&f, "object"));   /* .schema */
    CHECK(FIND(ref.p, ref.n, &f, 2, 1) && str_is(&f, "#/parameters/x"));        /* JsonReference */
    /* responses(9) > response_code(1){name 1, value 2 > response 1 > description 1, schema 2 > schema 1} */
    CHECK(FIND(b, len, &f, 8, 2, 2, 8, 9, 1, 1) && str_is(&f, "200"));
    CHECK(FIND(b, len, &f, 8, 2, 2, 8, 9, 1, 2, 1, 1) && str_is(&f, "OK"));
    CHECK(FIND(b, len, &f, 8, 2, 2, 8, 9, 1, 2, 1, 2, 1, 1) && str_is(&f, "#/definitions/C"));
    /* the operation's vendor extension(13) */
    CHECK(FIND(b, len, &f, 8, 2, 2, 8, 13, 1) && str_is(&f, "x-kubernetes-group-version-kind"));
    CHECK(FIND(b, len, &f, 8, 2, 2, 8, 13, 2, 2) &&
          str_is(&f, "{\"group\": \"\", \"kind\": \"ConfigMap\", \"version\": \"v1\"}"));
    free(b);
}

TEST(openapi_pb_limits) {
    /* a schema nested past OPENAPI_PB_MAX_DEPTH is refused, not recursed into */
    json_t *s = json_pack("{s:s}", "type", "string");
    for (int i = 0; i < OPENAPI_PB_MAX_DEPTH + 5; i++) s = json_pack("{s:s, s:{s:o}}", "type", "object", "properties", "a", s);
    json_t *doc = json_pack("{s:{s:o}}", "definitions", "deep", s);
    unsigned char *out = NULL;
    size_t len;
    CHECK_I64(openapi_pb_encode(doc, 0, &out, &len), -E2BIG);
    CHECK(out == NULL);
    json_decref(doc);
    /* and a document bigger than the byte limit */
    doc = json_pack("{s:s, s:{s:{s:s}}}", "swagger", "2.0", "definitions", "a", "description",
                    "a description longer than the limit");
    CHECK_I64(openapi_pb_encode(doc, 16, &out, &len), -E2BIG);
    CHECK_I64(openapi_pb_encode(doc, 0, &out, &len), 0);
    free(out);
    json_decref(doc);
}
