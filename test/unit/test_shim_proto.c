/* shim_proto.h: Kubernetes' protobuf bodies to the JSON the JSON encoding
 * gives (Time, MicroTime, Quantity, IntOrString, byte maps, embedded
 * structs, zero scalars), the envelope, the refusals with the field's path,
 * and JSON -> protobuf -> JSON for replies. Messages are built with pbwrite
 * as Go's encoder lays them out. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pbwrite.h"
#include "shim_proto.h"
#include "test.h"

/* The message w holds, decoded as apiVersion/kind, as compact sorted JSON
 * text (free), or the error text prefixed "ERR ". */
static char *decode(struct pbw *w, const char *av, const char *kind) {
    size_t n = 0;
    unsigned char *b = pbw_take(w, &n);
    pbw_free(w);
    char err[300] = "";
    json_t *j = shim_pb_message_json(shim_pb_descriptor(av, kind), b, n, err, sizeof err);
    free(b);
    if (!j) {
        char *e = malloc(strlen(err) + 5);
        strcpy(e, "ERR ");
        strcat(e, err);
        return e;
    }
    char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(j);
    return s;
}

TEST(shim_proto_time_and_microtime) {
    struct pbw w;
    pbw_init(&w, 0);
    pbw_begin(&w, 1); /* metadata */
    pbw_string(&w, 1, "e1");
    pbw_begin(&w, 8); /* creationTimestamp: zero, as Go writes an unset Time */
    pbw_end(&w);
    pbw_end(&w);
    pbw_begin(&w, 6); /* firstTimestamp */
    pbw_int64(&w, 1, 1700000000);
    pbw_int64(&w, 2, 5); /* Time's JSON has no fraction */
    pbw_end(&w);
    pbw_begin(&w, 10); /* eventTime: MicroTime */
    pbw_int64(&w, 1, 1700000000);
    pbw_int64(&w, 2, 123456789);
    pbw_end(&w);
    pbw_begin(&w, 7); /* lastTimestamp: seconds 0 written is the epoch, not Go's zero time */
    pbw_int64(&w, 1, 0);
    pbw_end(&w);
    pbw_int64(&w, 8, 0); /* count: 0, left out as JSON's omitempty does */
    char *s = decode(&w, "v1", "Event");
    CHECK_STR(s, "{\"eventTime\":\"2023-11-14T22:13:20.123456Z\",\"firstTimestamp\":\"2023-11-14T22:13:20Z\","
                 "\"lastTimestamp\":\"1970-01-01T00:00:00Z\",\"metadata\":{\"creationTimestamp\":null,\"name\":\"e1\"}}");
    free(s);
    pbw_init(&w, 0);
    pbw_begin(&w, 6);
    pbw_int64(&w, 1, 253402300800LL); /* year 10000 */
    pbw_end(&w);
    s = decode(&w, "v1", "Event");
    CHECK_HAS(s, "ERR firstTimestamp: time out of range");
    free(s);
}

TEST(shim_proto_quantity_and_inlined_structs) {
    struct pbw w;
    pbw_init(&w, 0);
    pbw_begin(&w, 2); /* spec */
    pbw_begin(&w, 2); /* containers */
    pbw_string(&w, 1, "c");
    pbw_begin(&w, 8); /* resources */
    pbw_begin(&w, 2); /* requests entry */
    pbw_string(&w, 1, "cpu");
    pbw_begin(&w, 2);
    pbw_string(&w, 1, "100m");
    pbw_end(&w);
    pbw_end(&w);
    pbw_end(&w);
    pbw_end(&w);
    pbw_begin(&w, 1); /* volumes: name, then VolumeSource inlined */
    pbw_string(&w, 1, "cfg");
    pbw_begin(&w, 2);
    pbw_begin(&w, 19); /* configMap, its LocalObjectReference inlined */
    pbw_begin(&w, 1);
    pbw_string(&w, 1, "settings");
    pbw_end(&w);
    pbw_int64(&w, 3, 0); /* defaultMode: a pointer in Go, so 0 is kept */
    pbw_end(&w);
    pbw_end(&w);
    pbw_end(&w);
    pbw_bool(&w, 21, false); /* automountServiceAccountToken: false is kept */
    pbw_string(&w, 10, "");  /* nodeName "": left out */
    pbw_end(&w);
    char *s = decode(&w, "v1", "Pod");
    CHECK_STR(s, "{\"spec\":{\"automountServiceAccountToken\":false,\"containers\":[{\"name\":\"c\",\"resources\":"
                 "{\"requests\":{\"cpu\":\"100m\"}}}],\"volumes\":[{\"configMap\":{\"defaultMode\":0,\"name\":"
                 "\"settings\"},\"name\":\"cfg\"}]}}");
    free(s);
}

TEST(shim_proto_int_or_string) {
    struct pbw w;
    pbw_init(&w, 0);
    pbw_begin(&w, 2); /* spec */
    pbw_begin(&w, 1); /* ports[0]: targetPort 8080 */
    pbw_int64(&w, 3, 80);
    pbw_begin(&w, 4);
    pbw_int64(&w, 1, 0);
    pbw_int64(&w, 2, 8080);
    pbw_string(&w, 3, "");
    pbw_end(&w);
    pbw_end(&w);
    pbw_begin(&w, 1); /* ports[1]: targetPort "http" */
    pbw_int64(&w, 3, 443);
    pbw_begin(&w, 4);
    pbw_int64(&w, 1, 1);
    pbw_int64(&w, 2, 0);
    pbw_string(&w, 3, "http");
    pbw_end(&w);
    pbw_end(&w);
    pbw_end(&w);
    char *s = decode(&w, "v1", "Service");
    CHECK_STR(s, "{\"spec\":{\"ports\":[{\"port\":80,\"targetPort\":8080},{\"port\":443,\"targetPort\":\"http\"}]}}");
    free(s);
}

TEST(shim_proto_byte_maps) {
    struct pbw w;
    pbw_init(&w, 0);
    pbw_begin(&w, 2); /* data: bytes, as base64 */
    pbw_string(&w, 1, "bin");
    pbw_bytes(&w, 2, "\x00\xff", 2);
    pbw_end(&w);
    pbw_begin(&w, 2); /* an entry with no value: "" */
    pbw_string(&w, 1, "empty");
    pbw_end(&w);
    pbw_begin(&w, 4); /* stringData: text */
    pbw_string(&w, 1, "k");
    pbw_string(&w, 2, "v");
    pbw_end(&w);
    pbw_string(&w, 3, "Opaque");
    char *s = decode(&w, "v1", "Secret");
    CHECK_STR(s, "{\"data\":{\"bin\":\"AP8=\",\"empty\":\"\"},\"stringData\":{\"k\":\"v\"},\"type\":\"Opaque\"}");
    free(s);
}

TEST(shim_proto_refusals_name_the_field) {
    struct pbw w;
    pbw_init(&w, 0);
    pbw_begin(&w, 1);
    pbw_varint(&w, 1, 7); /* metadata.name as a varint */
    pbw_end(&w);
    char *s = decode(&w, "v1", "Namespace");
    CHECK_STR(s, "ERR metadata.name: wire type 0, expected 2");
    free(s);
    char err[200];
    static const unsigned char trunc[] = {0x0a, 0x03, 0x0a, 0x03, 'a'};
    CHECK(!shim_pb_message_json(shim_pb_descriptor("v1", "Namespace"), trunc, sizeof trunc, err, sizeof err));
    CHECK_HAS(err, "metadata.name: length 3 past the end");
    static const unsigned char unknown[] = {0xf8, 0x06, 0x01, 0x0a, 0x00}; /* field 111 varint, then metadata {} */
    json_t *j = shim_pb_message_json(shim_pb_descriptor("v1", "Namespace"), unknown, sizeof unknown, err, sizeof err);
    CHECK(json_is_object(json_object_get(j, "metadata")));
    json_decref(j);
    CHECK(!shim_pb_decode("{}", 2, err, sizeof err));
    CHECK_HAS(err, "envelope");
}

TEST(shim_proto_encode_round_trip) {
    const char *text = "{\"apiVersion\":\"policy/v1\",\"kind\":\"PodDisruptionBudget\",\"metadata\":{\"labels\":"
                       "{\"a\":\"b\"},\"name\":\"p\",\"namespace\":\"ns\"},\"spec\":{\"maxUnavailable\":\"25%\","
                       "\"minAvailable\":2,\"selector\":{\"matchLabels\":{\"app\":\"web\"}}},\"status\":"
                       "{\"currentHealthy\":3,\"disruptedPods\":{\"x\":\"2024-01-02T03:04:05Z\"}}}";
    json_error_t je;
    json_t *obj = json_loads(text, 0, &je);
    unsigned char *pb = NULL;
    size_t n = 0;
    char err[200];
    REQUIRE_I64(shim_pb_encode(obj, &pb, &n, err, sizeof err), 0);
    json_t *back = shim_pb_decode(pb, n, err, sizeof err);
    free(pb);
    CHECK(back && json_equal(obj, back));
    json_decref(back);
    /* a pod with what kubectl and controllers commonly set: probes (their
     * handler inlined), affinity, security contexts (false and 0 kept where
     * Go has pointers), envFrom, a PVC and a downward API volume */
    const char *pod = "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"},\"spec\":{"
                      "\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":"
                      "{\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"In\","
                      "\"values\":[\"a\",\"b\"]}]}]}},\"podAntiAffinity\":{\"preferredDuringScheduling"
                      "IgnoredDuringExecution\":[{\"weight\":10,\"podAffinityTerm\":{\"labelSelector\":"
                      "{\"matchLabels\":{\"app\":\"w\"}},\"topologyKey\":\"kubernetes.io/hostname\"}}]}},"
                      "\"containers\":[{\"name\":\"c\",\"image\":\"i\",\"envFrom\":[{\"configMapRef\":"
                      "{\"name\":\"cm\"}}],\"livenessProbe\":{\"httpGet\":{\"path\":\"/h\",\"port\":\"http\"},"
                      "\"periodSeconds\":5},\"readinessProbe\":{\"tcpSocket\":{\"port\":8080}},"
                      "\"securityContext\":{\"runAsNonRoot\":false,\"runAsUser\":0,\"capabilities\":"
                      "{\"drop\":[\"ALL\"]}}}],\"securityContext\":{\"fsGroup\":2000,\"supplementalGroups\":"
                      "[1,2]},\"volumes\":[{\"name\":\"d\",\"persistentVolumeClaim\":{\"claimName\":\"pvc\"}},"
                      "{\"name\":\"e\",\"downwardAPI\":{\"items\":[{\"path\":\"l\",\"fieldRef\":"
                      "{\"fieldPath\":\"metadata.labels\"}}]}}]}}";
    json_t *p = json_loads(pod, 0, &je);
    REQUIRE(p);
    REQUIRE_I64(shim_pb_encode(p, &pb, &n, err, sizeof err), 0);
    back = shim_pb_decode(pb, n, err, sizeof err);
    free(pb);
    if (!back || !json_equal(p, back)) {
        char *t = back ? json_dumps(back, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        CHECK_STR(t ? t : err, pod);
        free(t);
    }
    json_decref(back);
    json_decref(p);
    json_object_set_new(obj, "kind", json_string("PodList"));
    CHECK_I64(shim_pb_encode(obj, &pb, &n, err, sizeof err), -ENOENT);
    json_decref(obj);
}

/* JSON -> protobuf -> JSON of one object (text), which must come back equal. */
static void round_trip(const char *text) {
    json_error_t je;
    json_t *obj = json_loads(text, 0, &je);
    REQUIRE(obj);
    unsigned char *pb = NULL;
    size_t n = 0;
    char err[200] = "";
    CHECK_I64(shim_pb_encode(obj, &pb, &n, err, sizeof err), 0);
    json_t *back = pb ? shim_pb_decode(pb, n, err, sizeof err) : NULL;
    free(pb);
    char *t = back ? json_dumps(back, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    char *want = json_dumps(obj, JSON_COMPACT | JSON_SORT_KEYS);
    CHECK_STR(t ? t : err, want);
    free(t);
    free(want);
    json_decref(back);
    json_decref(obj);
}

TEST(shim_proto_workload_and_rbac_round_trip) {
    /* kubectl create deployment's object, with the fields defaults fill in */
    round_trip("{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"labels\":{\"app\":\"web\"},"
               "\"name\":\"web\",\"namespace\":\"ns\"},\"spec\":{\"progressDeadlineSeconds\":600,\"replicas\":2,"
               "\"revisionHistoryLimit\":10,\"selector\":{\"matchLabels\":{\"app\":\"web\"}},\"strategy\":"
               "{\"rollingUpdate\":{\"maxSurge\":\"25%\",\"maxUnavailable\":1},\"type\":\"RollingUpdate\"},"
               "\"template\":{\"metadata\":{\"labels\":{\"app\":\"web\"}},\"spec\":{\"containers\":[{\"image\":"
               "\"nginx\",\"name\":\"nginx\",\"resources\":{}}]}}},\"status\":{\"conditions\":[{\"lastUpdateTime\":"
               "\"2024-01-02T03:04:05Z\",\"status\":\"True\",\"type\":\"Available\"}],\"readyReplicas\":2}}");
    round_trip("{\"apiVersion\":\"batch/v1\",\"kind\":\"CronJob\",\"metadata\":{\"name\":\"c\"},\"spec\":"
               "{\"jobTemplate\":{\"metadata\":{\"name\":\"c\"},\"spec\":{\"backoffLimit\":0,\"suspend\":false,"
               "\"template\":{\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"busybox\"}],\"restartPolicy\":"
               "\"OnFailure\"}}}},\"schedule\":\"*/5 * * * *\",\"suspend\":false}}");
    round_trip("{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"RoleBinding\",\"metadata\":{\"name\":"
               "\"rb\",\"namespace\":\"ns\"},\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":"
               "\"Role\",\"name\":\"r\"},\"subjects\":[{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":"
               "\"User\",\"name\":\"u\"},{\"kind\":\"ServiceAccount\",\"name\":\"sa\",\"namespace\":\"ns\"}]}");
    round_trip("{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"ClusterRole\",\"metadata\":{\"name\":"
               "\"cr\"},\"rules\":[{\"apiGroups\":[\"\"],\"resources\":[\"nodes\"],\"verbs\":[\"list\",\"get\"]},"
               "{\"nonResourceURLs\":[\"/healthz\"],\"verbs\":[\"get\"]}]}");
    /* an IntOrString of 0 is a value (Go's pointer), not a zero left out */
    round_trip("{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\",\"metadata\":{\"name\":\"a\"},\"spec\":"
               "{\"updateStrategy\":{\"rollingUpdate\":{\"maxSurge\":0,\"maxUnavailable\":1},\"type\":"
               "\"RollingUpdate\"}},\"status\":{\"numberReady\":3}}");
    round_trip("{\"apiVersion\":\"apps/v1\",\"kind\":\"StatefulSet\",\"metadata\":{\"name\":\"s\"},\"spec\":"
               "{\"minReadySeconds\":5,\"ordinals\":{\"start\":1},\"persistentVolumeClaimRetentionPolicy\":"
               "{\"whenDeleted\":\"Delete\"},\"serviceName\":\"s\",\"volumeClaimTemplates\":[{\"metadata\":"
               "{\"name\":\"d\"},\"spec\":{\"accessModes\":[\"ReadWriteOnce\"],\"resources\":{\"requests\":"
               "{\"storage\":\"1Gi\"}}}}]},\"status\":{\"availableReplicas\":3}}");
    round_trip("{\"apiVersion\":\"autoscaling/v1\",\"kind\":\"Scale\",\"metadata\":{\"name\":\"web\"},\"spec\":"
               "{\"replicas\":0},\"status\":{\"replicas\":3,\"selector\":\"app=web\"}}");
}

TEST(shim_proto_pointer_zero_per_message) {
    /* a Deployment's spec.replicas is a pointer (0 is "scaled to zero"), its
     * status.replicas is not (Go writes 0, JSON leaves it out) */
    struct pbw w;
    pbw_init(&w, 0);
    pbw_begin(&w, 1); /* metadata */
    pbw_string(&w, 1, "d");
    pbw_end(&w);
    pbw_begin(&w, 2); /* spec */
    pbw_int64(&w, 1, 0);
    pbw_bool(&w, 7, false); /* paused: not a pointer */
    pbw_end(&w);
    pbw_begin(&w, 3); /* status */
    pbw_int64(&w, 2, 0);
    pbw_int64(&w, 7, 0);
    pbw_end(&w);
    char *s = decode(&w, "apps/v1", "Deployment");
    CHECK_STR(s, "{\"metadata\":{\"name\":\"d\"},\"spec\":{\"replicas\":0},\"status\":{}}");
    free(s);
    /* a Job's suspend (a pointer) is kept, its status counts are not */
    pbw_init(&w, 0);
    pbw_begin(&w, 2);
    pbw_bool(&w, 10, false);
    pbw_int64(&w, 7, 0); /* backoffLimit */
    pbw_end(&w);
    pbw_begin(&w, 3);
    pbw_int64(&w, 4, 0); /* active */
    pbw_end(&w);
    s = decode(&w, "batch/v1", "Job");
    CHECK_STR(s, "{\"spec\":{\"backoffLimit\":0,\"suspend\":false},\"status\":{}}");
    free(s);
    CHECK(shim_pb_descriptor("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") != NULL);
    CHECK(shim_pb_descriptor("authorization.k8s.io/v1", "SelfSubjectAccessReview") != NULL);
    CHECK(shim_pb_descriptor("batch/v1beta1", "CronJob") != NULL); /* served as a view of v1 */
    CHECK(shim_pb_descriptor("apps/v1beta1", "Deployment") == NULL);
}
