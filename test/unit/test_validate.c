/* Write-time validation (validate.h): what kube-apiserver refuses is refused
 * with its field paths and words; what it accepts is accepted. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>

#include "test.h"
#include "validate.h"

static json_t *vj(const char *text, int line) {
    json_error_t e;
    json_t *v = json_loads(text, 0, &e);
    if (!v) test_fail(__FILE__, line, "bad test JSON (%s): %s", e.text, text);
    return v;
}

/* Validates obj (text) of kind in the core group; want NULL: valid, else the
 * formatted errors contain want. Returns the object after validation. */
static json_t *vcheck(const char *kind, const char *text, const char *want, int line) {
    json_t *o = vj(text, line);
    if (!o) return NULL;
    struct schema_result res = {0};
    int rc = validate_object("", kind, o, &res);
    char msg[2048];
    schema_result_format(&res, msg, sizeof msg);
    if (!want && rc != 0) test_fail(__FILE__, line, "refused: %s", msg);
    if (want && rc != -EINVAL) test_fail(__FILE__, line, "accepted, want \"%s\"", want);
    if (want && rc == -EINVAL && !strstr(msg, want)) test_fail(__FILE__, line, "\"%s\" lacks \"%s\"", msg, want);
    schema_result_free(&res);
    return o;
}
#define VALID(kind, text) json_decref(vcheck(kind, text, NULL, __LINE__))
#define INVALID(kind, text, want) json_decref(vcheck(kind, text, want, __LINE__))

TEST(validate_labels_and_annotations_every_kind) {
    const char *kinds[] = {"ConfigMap", "Pod", "Namespace"};
    for (size_t i = 0; i < 3; i++) {
        VALID(kinds[i], "{\"metadata\":{\"labels\":{\"app\":\"web\",\"example.com/tier\":\"\",\"a_b.c-d\":\"X.y_z-1\"},"
                        "\"annotations\":{\"Example.com/Some-Note\":\"any text at all: /{}\"}},\"spec\":{}}");
        INVALID(kinds[i], "{\"metadata\":{\"labels\":{\"a/b/c\":\"x\"}}}",
                "metadata.labels: Invalid value: \"a/b/c\": a qualified name must consist of alphanumeric characters");
    }
    char key[400], text[1024];
    memset(key, 'k', 300);
    key[300] = 0;
    snprintf(text, sizeof text, "{\"metadata\":{\"labels\":{\"%s\":\"v\"}}}", key);
    INVALID("ConfigMap", text, "metadata.labels: Invalid value: \"kkkk");
    INVALID("ConfigMap", text, "name part must be no more than 63 characters");
    snprintf(text, sizeof text, "{\"metadata\":{\"labels\":{\"k\":\"%.*s\"}}}", 64, key);
    INVALID("ConfigMap", text, "must be no more than 63 characters");
    INVALID("ConfigMap", "{\"metadata\":{\"labels\":{\"k\":\"a b\"}}}",
            "metadata.labels: Invalid value: \"a b\": a valid label must be an empty string or consist of");
    INVALID("ConfigMap", "{\"metadata\":{\"labels\":{\"k\":5}}}", "metadata.labels: Invalid value: integer");
    INVALID("ConfigMap", "{\"metadata\":{\"labels\":{\"Upper.Case/x\":\"v\"}}}", "prefix part a lowercase RFC 1123");
    INVALID("ConfigMap", "{\"metadata\":{\"labels\":[]}}", "metadata.labels: Invalid value: array");
    INVALID("Secret", "{\"metadata\":{\"annotations\":{\"-bad\":\"v\"}}}",
            "metadata.annotations: Invalid value: \"-bad\"");
    /* the annotations' total size */
    char *big = malloc(VALIDATE_MAX_ANNOTATIONS + 200);
    int n = snprintf(big, 64, "{\"metadata\":{\"annotations\":{\"a\":\"");
    memset(big + n, 'x', VALIDATE_MAX_ANNOTATIONS);
    snprintf(big + n + VALIDATE_MAX_ANNOTATIONS, 16, "\"}}}");
    INVALID("ConfigMap", big, "metadata.annotations: Too long: must have at most 262144 bytes");
    big[n + VALIDATE_MAX_ANNOTATIONS - 1] = '"';
    snprintf(big + n + VALIDATE_MAX_ANNOTATIONS, 16, "}}}");
    VALID("ConfigMap", big);
    free(big);
    /* custom resources' kinds get the metadata checks only */
    json_t *o = vj("{\"metadata\":{\"labels\":{\"a/b/c\":\"x\"}},\"spec\":{\"containers\":[{\"resources\":"
                   "{\"requests\":{\"cpu\":\"abc\"}}}]}}", __LINE__);
    struct schema_result res = {0};
    CHECK_I64(validate_object("example.com", "Pod", o, &res), -EINVAL);
    CHECK_I64(res.n, 1);
    schema_result_free(&res);
    json_decref(o);
}
