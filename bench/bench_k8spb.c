/* Kubernetes' protobuf bodies (apiserver-shim/shim_proto.c): decoding a
 * typical pod body (three containers with resources, env, ports, volumes,
 * labels and annotations) to JSON, and encoding it back, per object and in
 * MB/s of protobuf. Prints figures; does not pass or fail on speed. */
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "shim_proto.h"

static const char *POD =
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"web-0\",\"namespace\":\"default\","
    "\"labels\":{\"app\":\"web\",\"tier\":\"front\",\"peloton.io/job\":\"web\"},\"annotations\":{\"a\":\"1\",\"b\":"
    "\"2\"},\"creationTimestamp\":\"2024-01-02T03:04:05Z\"},\"spec\":{\"containers\":["
    "{\"name\":\"a\",\"image\":\"busybox:1.36\",\"command\":[\"sh\",\"-c\",\"sleep 1000\"],\"ports\":[{\"name\":"
    "\"http\",\"containerPort\":8080,\"protocol\":\"TCP\"}],\"env\":[{\"name\":\"X\",\"value\":\"1\"},{\"name\":"
    "\"Y\",\"value\":\"2\"}],\"resources\":{\"requests\":{\"cpu\":\"500m\",\"memory\":\"1Gi\"},\"limits\":"
    "{\"cpu\":\"1\",\"memory\":\"2Gi\"}},\"volumeMounts\":[{\"name\":\"cfg\",\"mountPath\":\"/etc/cfg\"}]},"
    "{\"name\":\"b\",\"image\":\"envoy:1.30\",\"resources\":{\"requests\":{\"cpu\":\"100m\"}}},"
    "{\"name\":\"c\",\"image\":\"log:2\",\"resources\":{\"requests\":{\"memory\":\"64Mi\"}}}],"
    "\"volumes\":[{\"name\":\"cfg\",\"configMap\":{\"name\":\"settings\"}},{\"name\":\"tmp\",\"emptyDir\":{}}],"
    "\"restartPolicy\":\"Always\",\"terminationGracePeriodSeconds\":30,\"nodeSelector\":{\"disk\":\"ssd\"},"
    "\"tolerations\":[{\"key\":\"k\",\"operator\":\"Exists\",\"effect\":\"NoSchedule\"}]}}";

int main(void) {
    json_error_t je;
    json_t *pod = json_loads(POD, 0, &je);
    unsigned char *pb = NULL;
    size_t n = 0;
    char err[256];
    if (!pod || shim_pb_encode(pod, &pb, &n, err, sizeof err)) return 1;
    const int iters = 20000;
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < iters; i++) {
        json_t *j = shim_pb_decode(pb, n, err, sizeof err);
        if (!j) return 1;
        json_decref(j);
    }
    uint64_t t1 = bench_now_ns();
    for (int i = 0; i < iters; i++) {
        unsigned char *out = NULL;
        size_t m = 0;
        if (shim_pb_encode(pod, &out, &m, err, sizeof err)) return 1;
        free(out);
    }
    uint64_t t2 = bench_now_ns();
    double dec = (double)(t1 - t0) / iters, enc = (double)(t2 - t1) / iters;
    bench_report("k8spb pod body bytes", (double)n, "B", NULL);
    bench_report("k8spb decode pod (protobuf -> JSON)", dec / 1000.0, "us/op", NULL);
    bench_report("k8spb decode throughput", (double)n / dec * 1000.0, "MB/s", NULL);
    bench_report("k8spb encode pod (JSON -> protobuf)", enc / 1000.0, "us/op", NULL);
    free(pb);
    json_decref(pod);
    return 0;
}
