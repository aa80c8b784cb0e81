/* Write-time validation (validate.h): what kube-apiserver refuses is refused
 * with its field paths and words; what it accepts is accepted; Secrets'
 * stringData is folded into data. */
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

/* A pod spec with one container, as short as kube-apiserver takes. */
#define SPEC1 "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}"

/* A pod whose one container has the given resources (JSON). */
static char *pod_res(const char *resources) {
    static char buf[4096];
    snprintf(buf, sizeof buf,
             "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\",\"resources\":%s}]}}",
             resources);
    return buf;
}

TEST(validate_pod_quantities) {
    VALID("Pod", pod_res("{\"requests\":{\"cpu\":\"250m\",\"memory\":\"64Mi\"},"
                         "\"limits\":{\"cpu\":1,\"memory\":\"1Gi\"}}"));
    VALID("Pod", pod_res("{\"requests\":{\"cpu\":0.5,\"ephemeral-storage\":\"1G\",\"hugepages-2Mi\":\"2Mi\"},"
                         "\"limits\":{\"hugepages-2Mi\":\"2Mi\"}}"));
    VALID("Pod", pod_res("{\"requests\":{\"cpu\":\"-0\"}}"));
    INVALID("Pod", pod_res("{\"requests\":{\"cpu\":\"abc\"}}"),
            "spec.containers[0].resources.requests[cpu]: Invalid value: \"abc\": must be a valid quantity");
    INVALID("Pod", pod_res("{\"requests\":{\"cpu\":\"NaN\"}}"), "Invalid value: \"NaN\": must be a valid quantity");
    INVALID("Pod", pod_res("{\"requests\":{\"cpu\":\"\"}}"), "[cpu]: Invalid value: \"\": must be a valid quantity");
    INVALID("Pod", pod_res("{\"requests\":{\"cpu\":\"-5\"}}"),
            "requests[cpu]: Invalid value: \"-5\": must be greater than or equal to 0");
    INVALID("Pod", pod_res("{\"limits\":{\"memory\":\"-1\"}}"),
            "spec.containers[0].resources.limits[memory]: Invalid value: \"-1\": must be greater than or equal to 0");
    INVALID("Pod", pod_res("{\"limits\":{\"memory\":-1}}"),
            "Invalid value: \"-1\": must be greater than or equal to 0");
    INVALID("Pod", pod_res("{\"requests\":{\"memory\":\"1e999999\"}}"),
            "Invalid value: \"1e999999\": must be a valid quantity");
    INVALID("Pod", pod_res("{\"requests\":{\"memory\":true}}"),
            "[memory]: Invalid value: \"boolean\": must be a valid");
    INVALID("Pod", pod_res("{\"requests\":[1]}"), "spec.containers[0].resources.requests: Invalid value: array");
    /* init containers and overhead too */
    INVALID("Pod", "{\"spec\":{\"initContainers\":[{\"name\":\"i\",\"image\":\"i\",\"resources\":{\"requests\":{\"cpu\":\"x\"}}}],"
                   "\"overhead\":{\"memory\":\"-2\"}}}",
            "spec.initContainers[0].resources.requests[cpu]: Invalid value: \"x\": must be a valid quantity, "
            "spec.overhead[memory]: Invalid value: \"-2\": must be greater than or equal to 0]");
}

TEST(validate_pod_containers_named_with_images) {
    VALID("Pod", "{\"metadata\":{\"name\":\"p\"}," SPEC1 "}");
    INVALID("Pod", "{\"spec\":{}}", "spec.containers: Required value");
    INVALID("Pod", "{\"spec\":{\"containers\":[]}}", "spec.containers: Required value");
    INVALID("Pod", "{\"spec\":{\"containers\":[{\"name\":\"c\"}]}}", "spec.containers[0].image: Required value");
    INVALID("Pod", "{\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"\"}]}}",
            "spec.containers[0].image: Required value");
    INVALID("Pod", "{\"spec\":{\"containers\":[{\"image\":\"i\"}]}}", "spec.containers[0].name: Required value");
    INVALID("Pod", "{\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}],"
                   "\"initContainers\":[{\"name\":\"c\",\"image\":\"i\"},{\"name\":\"d\"}]}}",
            "[spec.initContainers[0].name: Duplicate value: \"c\", spec.initContainers[1].image: Required value]");
}

TEST(validate_pod_extended_resources) {
    VALID("Pod", pod_res("{\"requests\":{\"nvidia.com/gpu\":2},\"limits\":{\"nvidia.com/gpu\":\"2\"}}"));
    VALID("Pod", pod_res("{\"limits\":{\"nvidia.com/gpu\":1}}"));
    INVALID("Pod", pod_res("{\"limits\":{\"nvidia.com/gpu\":\"-1\"}}"),
            "limits[nvidia.com/gpu]: Invalid value: \"-1\": must be greater than or equal to 0");
    INVALID("Pod", pod_res("{\"limits\":{\"nvidia.com/gpu\":\"500m\"}}"),
            "limits[nvidia.com/gpu]: Invalid value: \"500m\": must be an integer");
    INVALID("Pod", pod_res("{\"requests\":{\"nvidia.com/gpu\":1},\"limits\":{\"nvidia.com/gpu\":2}}"),
            "spec.containers[0].resources.requests: Invalid value: \"1\": must be equal to nvidia.com/gpu limit of 2");
    INVALID("Pod", pod_res("{\"requests\":{\"nvidia.com/gpu\":1}}"),
            "spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources");
    INVALID("Pod", pod_res("{\"requests\":{\"hugepages-2Mi\":\"2Mi\"},\"limits\":{\"hugepages-2Mi\":\"4Mi\"}}"),
            "must be equal to hugepages-2Mi limit of 4Mi");
    /* native resources may be requested below their limit, not above */
    INVALID("Pod", pod_res("{\"requests\":{\"cpu\":\"2\"},\"limits\":{\"cpu\":\"1500m\"}}"),
            "requests: Invalid value: \"2\": must be less than or equal to cpu limit of 1500m");
    /* names */
    INVALID("Pod", pod_res("{\"requests\":{\"foo\":\"1\"}}"),
            "requests[foo]: Invalid value: \"foo\": must be a standard resource for containers");
    INVALID("Pod", pod_res("{\"requests\":{\"a/b/c\":\"1\"}}"),
            "requests[a/b/c]: Invalid value: \"a/b/c\": a qualified");
    INVALID("Pod", pod_res("{\"limits\":{\"requests.example.com/x\":\"1\"}}"),
            "doesn't follow extended resource name standard");
    VALID("Pod", pod_res("{\"limits\":{\"example.com/dongle\":\"3\",\"kubernetes.io/x\":\"1m\"}}"));
}

TEST(validate_pod_what_the_scheduler_cannot_read) {
    INVALID("Pod", "{\"metadata\":{\"annotations\":{\"peloton.io/priority\":\"high\"}}," SPEC1 "}",
            "metadata.annotations[peloton.io/priority]: \"high\" is not a non-negative integer");
    INVALID("Pod", "{\"metadata\":{\"labels\":{\"peloton.io/gang\":\"g\"}}," SPEC1 "}",
            "metadata.labels[peloton.io/gang-size]: a gang needs a size");
    VALID("Pod", "{\"metadata\":{\"labels\":{\"peloton.io/gang\":\"g\",\"peloton.io/gang-size\":\"2\"}}," SPEC1 "}");
}

TEST(validate_labels_and_annotations_every_kind) {
    const char *kinds[] = {"ConfigMap", "Pod", "Namespace"};
    for (size_t i = 0; i < 3; i++) {
        VALID(kinds[i], "{\"metadata\":{\"labels\":{\"app\":\"web\",\"example.com/tier\":\"\",\"a_b.c-d\":\"X.y_z-1\"},"
                        "\"annotations\":{\"Example.com/Some-Note\":\"any text at all: /{}\"}}," SPEC1 "}");
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

TEST(validate_secret_string_data_and_base64) {
    json_t *s = vcheck("Secret", "{\"metadata\":{\"name\":\"s\"},\"data\":{\"a\":\"eA==\",\"b\":\"eQ==\"},"
                                 "\"stringData\":{\"b\":\"hello\",\"c\":\"\"}}", NULL, __LINE__);
    CHECK(!json_object_get(s, "stringData"));
    json_t *d = json_object_get(s, "data");
    CHECK_STR(json_string_value(json_object_get(d, "a")), "eA==");
    CHECK_STR(json_string_value(json_object_get(d, "b")), "aGVsbG8=");
    CHECK_STR(json_string_value(json_object_get(d, "c")), "");
    json_decref(s);
    s = vcheck("Secret", "{\"stringData\":{\"k\":\"v\"}}", NULL, __LINE__);
    CHECK_STR(json_string_value(json_object_get(json_object_get(s, "data"), "k")), "dg==");
    json_decref(s);
    INVALID("Secret", "{\"data\":{\"key\":\"not base64!\"}}",
            "data[key]: Invalid value: \"<secret>\": illegal base64 data at input byte 3");
    INVALID("Secret", "{\"data\":{\"key\":\"eA\"}}", "data[key]: Invalid value: \"<secret>\": illegal base64");
    INVALID("Secret", "{\"data\":{\"key\":5}}", "data[key]: Invalid value: integer: must be a base64 string");
    INVALID("Secret", "{\"data\":{\"a b\":\"eA==\"}}",
            "data[a b]: Invalid value: \"a b\": a valid config key must consist");
    INVALID("Secret", "{\"stringData\":{\"..x\":\"v\"}}",
            "data[..x]: Invalid value: \"..x\": must not start with '..'");
    INVALID("Secret", "{\"stringData\":{\"k\":1}}", "stringData[k]: Invalid value: integer: must be a string");
    char text[600], key[VALIDATE_MAX_CONFIG_KEY + 2];
    memset(key, 'k', sizeof key - 1);
    key[sizeof key - 1] = 0;
    snprintf(text, sizeof text, "{\"stringData\":{\"%s\":\"v\"}}", key);
    INVALID("Secret", text, "must be no more than 253 characters");
    key[sizeof key - 2] = 0;
    snprintf(text, sizeof text, "{\"stringData\":{\"%s\":\"v\"}}", key);
    VALID("Secret", text);
    VALID("Secret", "{\"data\":{\"k\":\"aGVs\\r\\nbG8=\"}}"); /* line breaks, as Go's decoder skips them */
    /* the same in a ConfigMap is not a Secret's business */
    VALID("ConfigMap", "{\"data\":{\"key\":\"not base64!\"},\"stringData\":5}");
}
