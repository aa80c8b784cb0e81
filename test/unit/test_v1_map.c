/* v1_map.h: the v1alpha shapes of Jobs and Pods, both ways, checked by
 * turning them into the messages (pbjson) as the services do. The calls
 * themselves are covered end to end by test/e2e/test_native_v1.py. */
#include <string.h>

#include "pbjson.h"
#include "peloton/api/v1alpha/job/stateless/stateless.pb-c.h"
#include "peloton/api/v1alpha/pod/pod.pb-c.h"
#include "test.h"
#include "v1_map.h"

static const char *JOB =
    "{\"metadata\":{\"name\":\"web\",\"namespace\":\"default\",\"uid\":\"u-1\",\"generation\":4,"
    "\"creationTimestamp\":\"2026-01-01T00:00:00Z\",\"annotations\":{\"peloton.io/owner\":\"alice\","
    "\"peloton.io/labels\":\"[{\\\"key\\\":\\\"tier\\\",\\\"value\\\":\\\"web\\\"}]\"}},"
    "\"spec\":{\"type\":\"STATELESS\",\"resourcePool\":\"svc\",\"instanceCount\":3,"
    "\"updateStrategy\":{\"batchSize\":1,\"maxInstanceAttempts\":2,\"paused\":true},"
    "\"template\":{\"metadata\":{\"annotations\":{\"app\":\"web\",\"peloton.io/restart\":\"3\"}},"
    "\"spec\":{\"containers\":[{\"name\":\"main\",\"image\":\"nginx:1\",\"command\":[\"/bin/sh\",\"-c\",\"run\"],"
    "\"resources\":{\"requests\":{\"cpu\":\"500m\",\"memory\":\"64Mi\"}}}]}}},"
    "\"status\":{\"state\":\"RUNNING\",\"taskStats\":{\"RUNNING\":2,\"PENDING\":1,\"BOGUS\":7},"
    "\"update\":{\"state\":\"ROLLING_FORWARD\",\"fromVersion\":1,\"toVersion\":2,\"instancesTotal\":3,"
    "\"instancesDone\":1,\"instancesFailed\":0,\"currentBatch\":[1]}}}";

/* j (stolen) as message d, written back as JSON text for comparison; NULL when it does not fit d. */
static char *as_message(const ProtobufCMessageDescriptor *d, json_t *j) {
    char err[256];
    ProtobufCMessage *m = pbjson_to_msg(d, j, err, sizeof err);
    json_decref(j);
    if (!m) {
        fprintf(stderr, "%s: %s\n", d->name, err);
        return NULL;
    }
    char *txt = pbjson_dump(m, NULL, err, sizeof err);
    protobuf_c_message_free_unpacked(m, NULL);
    return txt;
}

TEST(native_v1_job_status_and_workflow) {
    json_t *job = json_loads(JOB, 0, NULL);
    REQUIRE(job);
    char *st = as_message(&peloton__api__v1alpha__job__stateless__job_status__descriptor, v1_job_status(job));
    REQUIRE(st);
    CHECK_HAS(st, "\"state\":\"JOB_STATE_RUNNING\"");
    CHECK_HAS(st, "\"desiredState\":\"JOB_STATE_RUNNING\"");
    CHECK_HAS(st, "\"version\":{\"value\":\"4\"}");
    CHECK_HAS(st, "\"POD_STATE_RUNNING\":2");
    CHECK(!strstr(st, "BOGUS")); /* a state v1alpha does not have is left out */
    CHECK_HAS(st, "\"state\":\"WORKFLOW_STATE_ROLLING_FORWARD\"");
    CHECK_HAS(st, "\"numInstancesCompleted\":1");
    CHECK_HAS(st, "\"numInstancesRemaining\":2");
    CHECK_HAS(st, "\"instancesCurrent\":[1]");
    CHECK_HAS(st, "\"prevVersion\":{\"value\":\"1\"}");
    free(st);
    char *us = as_message(&peloton__api__v1alpha__job__stateless__update_spec__descriptor, v1_update_spec(job));
    REQUIRE(us);
    CHECK_STR(us, "{\"batchSize\":1,\"maxInstanceRetries\":2,\"startPaused\":true}");
    free(us);
    char *sp = as_message(&peloton__api__v1alpha__job__stateless__job_spec__descriptor, v1_job_spec(job));
    REQUIRE(sp);
    CHECK_HAS(sp, "\"name\":\"web\"");
    CHECK_HAS(sp, "\"owner\":\"alice\"");
    CHECK_HAS(sp, "\"labels\":[{\"key\":\"tier\",\"value\":\"web\"}]");
    CHECK_HAS(sp, "\"cpuLimit\":0.5");
    CHECK_HAS(sp, "\"memLimitMb\":64");
    CHECK_HAS(sp, "\"value\":\"run\"");
    CHECK_HAS(sp, "{\"key\":\"app\",\"value\":\"web\"}");
    CHECK(!strstr(sp, "peloton.io/restart")); /* RestartJob's mark is not the client's label */
    free(sp);
    char v[32];
    v1_job_version(job, v, sizeof v);
    CHECK_STR(v, "4");
    json_decref(job);
}

TEST(native_v1_pod_summary) {
    json_t *pod = json_loads("{\"metadata\":{\"labels\":{\"peloton.io/instance\":\"2\"},\"annotations\":"
                             "{\"peloton.io/run\":\"3\",\"peloton.io/config-version\":\"2\"}},"
                             "\"spec\":{\"nodeName\":\"n1\",\"containers\":[{\"name\":\"main\",\"image\":\"nginx:1\"}]},"
                             "\"status\":{\"phase\":\"Running\",\"startTime\":\"2026-01-01T00:00:01Z\"}}",
                             0, NULL);
    REQUIRE(pod);
    CHECK_I64(v1_pod_instance(pod), 2);
    char *s = as_message(&peloton__api__v1alpha__pod__pod_summary__descriptor, v1_pod_summary("J", 2, pod, false));
    REQUIRE(s);
    CHECK_HAS(s, "\"podName\":{\"value\":\"J-2\"}");
    CHECK_HAS(s, "\"images\":{\"main\":\"nginx:1\"}");
    CHECK_HAS(s, "\"state\":\"POD_STATE_RUNNING\"");
    CHECK_HAS(s, "\"podId\":{\"value\":\"J-2-3\"}");
    CHECK_HAS(s, "\"host\":\"n1\"");
    CHECK_HAS(s, "\"jobVersion\":{\"value\":\"2\"}");
    free(s);
    s = as_message(&peloton__api__v1alpha__pod__pod_summary__descriptor, v1_pod_summary("J", 2, pod, true));
    CHECK_HAS(s, "\"state\":\"POD_STATE_DELETED\"");
    free(s);
    s = as_message(&peloton__api__v1alpha__pod__pod_summary__descriptor, v1_pod_summary("J", 5, NULL, false));
    CHECK_HAS(s, "\"state\":\"POD_STATE_INITIALIZED\"");
    free(s);
    json_decref(pod);
}

/* The Job for a JobSpec given as JSON text, or NULL with err. */
static json_t *from_spec(const char *txt, char *err, size_t len) {
    json_t *spec = json_loads(txt, 0, NULL);
    json_t *job = spec ? v1_job_from_spec(spec, "", "default", err, len) : NULL;
    json_decref(spec);
    return job;
}

TEST(native_v1_job_from_spec) {
    char err[512] = "";
    json_t *job = from_spec("{\"name\":\"Web_Front\",\"instanceCount\":2,\"respoolId\":{\"value\":\"svc\"},"
                            "\"sla\":{\"priority\":3},\"defaultSpec\":{\"labels\":[{\"key\":\"a\",\"value\":\"b\"}],"
                            "\"containers\":[{\"name\":\"main\",\"resource\":{\"cpuLimit\":0.25,\"gpuLimit\":1},"
                            "\"command\":{\"shell\":false,\"value\":\"srv\",\"arguments\":[\"-p\"]}}]}}",
                            err, sizeof err);
    REQUIRE(job);
    char *t = json_dumps(job, JSON_COMPACT | JSON_SORT_KEYS);
    CHECK_HAS(t, "\"name\":\"web-front\"");
    CHECK_HAS(t, "\"peloton.io/name\":\"Web_Front\"");
    CHECK_HAS(t, "\"type\":\"STATELESS\"");
    CHECK_HAS(t, "\"cpu\":\"250m\"");
    CHECK_HAS(t, "\"nvidia.com/gpu\":\"1\"");
    CHECK_HAS(t, "\"command\":[\"srv\"]");
    CHECK_HAS(t, "\"args\":[\"-p\"]");
    CHECK_HAS(t, "\"annotations\":{\"a\":\"b\"}");
    free(t);
    json_decref(job);
    static const struct {
        const char *spec, *want;
    } bad[] = {
        {"{\"name\":\"x\",\"respoolId\":{\"value\":\"p\"},\"defaultSpec\":{\"containers\":[{}]},\"instanceSpec\":{\"1\":{}}}",
         "spec.instanceSpec: not supported"},
        {"{\"name\":\"x\",\"respoolId\":{\"value\":\"p\"},\"defaultSpec\":{\"containers\":[]}}",
         "exactly one container"},
        {"{\"name\":\"x\",\"defaultSpec\":{\"containers\":[{}]}}", "spec.respoolId: required"},
        {"{\"name\":\"__\",\"respoolId\":{\"value\":\"p\"},\"defaultSpec\":{\"containers\":[{}]}}", "gives no object name"},
        {"{\"name\":\"x\",\"respoolId\":{\"value\":\"p\"},\"defaultSpec\":{\"containers\":[{\"ports\":[{}]}]}}",
         "spec.defaultSpec.containers[0].ports: not supported"},
        {"{\"name\":\"x\",\"respoolId\":{\"value\":\"p\"},\"defaultSpec\":{\"containers\":[{\"resource\":{\"gpuLimit\":0.5}}]}}",
         "gpuLimit: 0.5 is not a non-negative amount of whole GPUs"},
        {"{\"name\":\"x\",\"respoolId\":{\"value\":\"p\"},\"sla\":{\"maximumUnavailableInstances\":1},"
         "\"defaultSpec\":{\"containers\":[{}]}}",
         "maximumUnavailableInstances: not supported"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        json_t *j = from_spec(bad[i].spec, err, sizeof err);
        CHECK(!j);
        json_decref(j);
        CHECK_HAS(err, bad[i].want);
    }
}
