/* The Mesos driver's pure parts: task ids, GET_AGENTS entries, attributes as
 * labels, a pod's resources and its TaskInfo. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "jparse.h"
#include "mesosdrv.h"
#include "test.h"

static json_t *J(const char *text) {
    json_t *j = json_loads(text, 0, NULL);
    CHECK(j != NULL);
    return j;
}

TEST(mdrv_task_id_is_uid_and_run) {
    char id[300];
    CHECK_I64(mdrv_task_id("0b7f-11", 3, id, sizeof id), 0);
    CHECK_STR(id, "0b7f-11-3");
    CHECK_I64(mdrv_task_id("", 1, id, sizeof id), -1);
    CHECK_I64(mdrv_task_id(NULL, 1, id, sizeof id), -1);
    CHECK_I64(mdrv_task_id("abc", 1, id, 4), -1); /* does not fit */
    char big[300];
    memset(big, 'a', 255);
    big[255] = 0;
    CHECK_I64(mdrv_task_id(big, 1, id, sizeof id), -1); /* over a Mesos id's 256 bytes */
}

TEST(mdrv_agent_decodes_get_agents_entry) {
    json_t *e = J("{\"agent_info\":{\"id\":{\"value\":\"M-S1\"},\"hostname\":\"a1\",\"attributes\":[]},"
                  "\"active\":true,\"total_resources\":[{\"name\":\"cpus\",\"type\":\"SCALAR\",\"scalar\":{\"value\":4}},"
                  "{\"name\":\"mem\",\"type\":\"SCALAR\",\"scalar\":{\"value\":8192}}]}");
    struct mdrv_agent_info ai;
    CHECK_I64(mdrv_agent_decode(e, &ai), 0);
    CHECK_STR(ai.id, "M-S1");
    CHECK_STR(ai.hostname, "a1");
    CHECK(ai.total.cpus == 4 && ai.total.mem == 8192 && ai.active && ai.attributes);
    json_object_set_new(e, "active", json_false());
    CHECK_I64(mdrv_agent_decode(e, &ai), 0);
    CHECK(!ai.active);
    /* resources out of any range, a missing hostname, a malformed resource list */
    json_t *bad = J("{\"agent_info\":{\"id\":{\"value\":\"x\"},\"hostname\":\"h\"},"
                    "\"total_resources\":[{\"name\":\"cpus\",\"type\":\"SCALAR\",\"scalar\":{\"value\":1e300}}]}");
    CHECK_I64(mdrv_agent_decode(bad, &ai), -1);
    json_decref(bad);
    bad = J("{\"agent_info\":{\"id\":{\"value\":\"x\"}},\"total_resources\":[]}");
    CHECK_I64(mdrv_agent_decode(bad, &ai), -1);
    json_decref(bad);
    bad = J("{\"agent_info\":{\"id\":{\"value\":\"x\"},\"hostname\":\"h\"},\"total_resources\":7}");
    CHECK_I64(mdrv_agent_decode(bad, &ai), -1);
    json_decref(bad);
    CHECK_I64(mdrv_agent_decode(NULL, &ai), -1);
    json_decref(e);
}

TEST(mdrv_attributes_become_labels) {
    json_t *a = J("[{\"name\":\"zone\",\"type\":\"TEXT\",\"text\":{\"value\":\"z1\"}},"
                  "{\"name\":\"rack\",\"type\":\"TEXT\",\"text\":{\"value\":\"r-7\"}},"
                  "{\"name\":\"slots\",\"type\":\"SCALAR\",\"scalar\":{\"value\":8}},"
                  "{\"name\":\"bad name\",\"type\":\"TEXT\",\"text\":{\"value\":\"x\"}},"
                  "{\"name\":\"ok\",\"type\":\"TEXT\",\"text\":{\"value\":\"not a label value\"}},"
                  "{\"name\":\"ports\",\"type\":\"RANGES\",\"ranges\":{}}, 7, null]");
    json_t *l = mdrv_attr_labels(a);
    CHECK_STR(json_string_value(json_object_get(l, "zone")), "z1");
    CHECK_STR(json_string_value(json_object_get(l, "topology.kubernetes.io/zone")), "z1");
    CHECK_STR(json_string_value(json_object_get(l, "rack")), "r-7");
    CHECK_STR(json_string_value(json_object_get(l, "slots")), "8");
    CHECK_I64((int64_t)json_object_size(l), 4);
    json_decref(l);
    l = mdrv_attr_labels(NULL);
    CHECK_I64((int64_t)json_object_size(l), 0);
    json_decref(l);
    json_decref(a);
}

static const char *POD = "{\"metadata\":{\"name\":\"p-0\",\"namespace\":\"default\",\"uid\":\"u1\","
                         "\"labels\":{\"t\":\"x\",\"peloton.io/job\":\"j\"}},"
                         "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"busybox:1.36\","
                         "\"command\":[\"sh\",\"-c\"],\"args\":[\"echo hi\"],"
                         "\"env\":[{\"name\":\"A\",\"value\":\"1\"},{\"name\":\"B\"}],"
                         "\"resources\":{\"requests\":{\"cpu\":\"1500m\",\"memory\":\"512Mi\"}}},"
                         "{\"name\":\"side\",\"image\":\"y\",\"resources\":{\"requests\":{\"cpu\":\"500m\"}}}]}}";

TEST(mdrv_pod_resources_in_mesos_units) {
    json_t *pod = J(POD);
    struct mesos_scalars r;
    CHECK_I64(mdrv_pod_scalars(pod, &r), 0);
    CHECK(r.cpus == 2.0 && r.mem == 512 && r.gpus == 0);
    json_t *empty = J("{\"spec\":{\"containers\":[{\"name\":\"c\"}]}}");
    CHECK_I64(mdrv_pod_scalars(empty, &r), 0);
    CHECK(r.cpus == 0.01 && r.mem == 32); /* a task needs some resources */
    json_t *bad = J("{\"spec\":{\"containers\":[{\"resources\":{\"requests\":{\"cpu\":\"lots\"}}}]}}");
    CHECK_I64(mdrv_pod_scalars(bad, &r), -1);
    json_decref(bad);
    /* past any machine (and what a master refuses in a TaskInfo): refused, not launched */
    bad = J("{\"spec\":{\"containers\":[{\"resources\":{\"requests\":{\"cpu\":\"8400000000000000\"}}}]}}");
    CHECK_I64(mdrv_pod_scalars(bad, &r), -1);
    json_decref(bad);
    json_decref(empty);
    json_decref(pod);
}

TEST(mdrv_pod_task_info_carries_the_container) {
    json_t *pod = J(POD);
    struct mesos_scalars r = {.cpus = 2, .mem = 512};
    json_t *ti = mdrv_pod_task_info(pod, "u1-1", "M-S0", &r);
    CHECK(ti != NULL);
    struct mesos_task_decl d;
    char err[200];
    CHECK_I64(mesos_task_info_parse(ti, &d, err, sizeof err), 0); /* as the master checks it */
    CHECK_STR(d.task_id, "u1-1");
    CHECK_STR(d.agent_id, "M-S0");
    CHECK_STR(d.name, "p-0");
    CHECK(d.res.cpus == 2 && d.res.mem == 512);
    const json_t *cmd = json_object_get(ti, "command");
    CHECK_STR(json_string_value(json_object_get(cmd, "value")), "sh");
    CHECK(json_is_false(json_object_get(cmd, "shell")));
    const json_t *argv = json_object_get(cmd, "arguments");
    CHECK_I64((int64_t)json_array_size(argv), 3);
    CHECK_STR(json_string_value(json_array_get(argv, 2)), "echo hi");
    CHECK_STR(mesos_task_env(ti, "A"), "1");
    CHECK_STR(mesos_task_env(ti, "B"), "");
    CHECK_STR(mesos_task_label(ti, "peloton.io/job"), "j");
    const json_t *c = json_object_get(ti, "container");
    CHECK_STR(json_string_value(json_object_get(c, "type")), "MESOS");
    CHECK_STR(json_string_value(json_object_get(
                  json_object_get(json_object_get(json_object_get(c, "mesos"), "image"), "docker"), "name")),
              "busybox:1.36");
    json_decref(ti);
    /* no container at all: a task without command or image is still a TaskInfo */
    json_t *bare = J("{\"metadata\":{\"uid\":\"u2\"},\"spec\":{}}");
    ti = mdrv_pod_task_info(bare, "u2-1", "M-S0", &r);
    CHECK(ti != NULL);
    CHECK_I64(mesos_task_info_parse(ti, &d, err, sizeof err), 0);
    CHECK_STR(d.name, "u2-1");
    CHECK(!json_object_get(ti, "container"));
    json_decref(ti);
    json_decref(bare);
    json_decref(pod);
}

/* An update's pods/status merge patch, written as text: the members the
 * tree had, in its order, escaped; no patch for a state that changes nothing. */
TEST(mdrv_status_patch_text) {
    char *buf = NULL;
    size_t len = 0, cap = 0;
    const int64_t now = 1764240000000; /* 2025-11-27T10:40:00Z */
    struct mesos_task_status run = {.task_id = "t", .state = MESOS_TASK_RUNNING};
    REQUIRE(mdrv_status_patch(&run, "u-1", now, &buf, &len, &cap) == 0);
    CHECK_STR(buf, "{\"metadata\":{\"uid\":\"u-1\"},\"status\":{\"phase\":\"Running\",\"reason\":null,\"message\":null,"
                   "\"startTime\":\"2025-11-27T10:40:00Z\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\","
                   "\"lastTransitionTime\":\"2025-11-27T10:40:00Z\"},{\"type\":\"PodScheduled\",\"status\":\"True\","
                   "\"lastTransitionTime\":\"2025-11-27T10:40:00Z\"}]}}");
    CHECK_I64(len, strlen(buf));
    struct mesos_task_status failed = {.task_id = "t", .state = MESOS_TASK_FAILED, .reason = "REASON_\"X\"",
                                       .message = "exit 1\n"};
    len = 0;
    REQUIRE(mdrv_status_patch(&failed, "u-1", now, &buf, &len, &cap) == 0);
    json_t *p = json_loadb(buf, len, 0, NULL);
    REQUIRE(p);
    const json_t *st = json_object_get(p, "status");
    CHECK_STR(json_string_value(json_object_get(st, "phase")), "Failed");
    CHECK_STR(json_string_value(json_object_get(st, "reason")), "TaskFailed");
    CHECK_STR(json_string_value(json_object_get(st, "message")), "Mesos task TASK_FAILED (REASON_\"X\"): exit 1\n");
    CHECK(!json_object_get(st, "startTime"));
    CHECK_STR(json_string_value(json_object_get(json_array_get(json_object_get(st, "conditions"), 0), "status")), "False");
    json_decref(p);
    struct mesos_task_status starting = {.task_id = "t", .state = MESOS_TASK_STARTING, .message = "bad \xff"};
    len = 0;
    REQUIRE(mdrv_status_patch(&starting, "u-2", now, &buf, &len, &cap) == 0);
    p = json_loadb(buf, len, 0, NULL); /* a message that is not UTF-8 is left out; the rest stands */
    REQUIRE(p);
    st = json_object_get(p, "status");
    CHECK_STR(json_string_value(json_object_get(st, "phase")), "Pending");
    CHECK_STR(json_string_value(json_object_get(st, "reason")), "TaskStarting");
    CHECK(!json_object_get(st, "message"));
    CHECK_STR(json_string_value(json_object_get(json_object_get(p, "metadata"), "uid")), "u-2");
    json_decref(p);
    struct mesos_task_status killing = {.task_id = "t", .state = MESOS_TASK_KILLING};
    len = 0;
    CHECK_I64(mdrv_status_patch(&killing, "u-1", now, &buf, &len, &cap), 1);
    CHECK_I64(len, 0);
    free(buf);
}

/* The TaskInfos and the ACCEPT the driver writes as text are the bytes their
 * trees dump to (escapes, reals as jansson writes them, what is left out). */
TEST(mdrv_task_info_and_accept_text_are_the_trees) {
    json_t *pod = J(POD);
    json_t *odd = J("{\"metadata\":{\"name\":\"q\\\"\\u00e9\",\"uid\":\"u3\",\"labels\":{\"k\":\"v=w\"}},\"spec\":{"
                    "\"containers\":[{\"image\":\"i\\n\",\"args\":[\"a\",7,\"b\\t\"],\"env\":[{\"name\":\"X\"},"
                    "{\"value\":\"nameless\"},{\"name\":\"Y\",\"value\":\"=\"}]}]}}");
    json_t *bare = J("{\"metadata\":{\"uid\":\"u2\"},\"spec\":{}}");
    REQUIRE(pod && odd && bare);
    const json_t *pods[] = {pod, odd, bare};
    const struct mesos_scalars res[] = {{.cpus = 2, .mem = 512}, {.cpus = 0.01, .mem = 32, .gpus = 1.0 / 3},
                                        {.cpus = 0.5, .mem = 256, .disk = 1e12}, {.cpus = 123.456, .mem = 1e-7},
                                        {.cpus = 1e-300, .mem = 0.1}};
    char *infos = NULL;
    size_t ilen = 0, icap = 0;
    json_t *trees = json_array();
    for (size_t i = 0; i < 3; i++)
        for (size_t k = 0; k < sizeof res / sizeof *res; k++) {
            json_t *ti = mdrv_pod_task_info(pods[i], "t-1", "M-S0", &res[k]);
            REQUIRE(ti);
            char *want = jdump(ti, JSON_COMPACT, NULL);
            char *buf = NULL;
            size_t len = 0, cap = 0;
            REQUIRE(mdrv_pod_task_info_text(pods[i], "t-1", "M-S0", &res[k], &buf, &len, &cap) == 0);
            CHECK_STR(buf, want);
            CHECK_I64(len, strlen(want));
            if (k == 0) {
                if (ilen) REQUIRE(jdump_append(&infos, &ilen, &icap, ",", 1) == 0);
                REQUIRE(jdump_append(&infos, &ilen, &icap, buf, len) == 0);
                json_array_append(trees, ti);
            }
            free(buf);
            free(want);
            json_decref(ti);
        }
    const char *oids[] = {"O-1", "O-\"2\""};
    for (int refuse = -1; refuse <= 1; refuse++) {
        json_t *call = mesos_call_accept("F", oids, 2, json_incref(trees), refuse * 2.5);
        REQUIRE(call);
        char *want = jdump(call, JSON_COMPACT, NULL);
        char *buf = NULL;
        size_t len = 0, cap = 0;
        REQUIRE(jdump_append(&buf, &len, &cap, "{\"framework_id\":{\"value\":\"F\"},", 30) == 0);
        REQUIRE(mesos_accept_members(&buf, &len, &cap, oids, 2, infos, ilen, refuse * 2.5) == 0);
        REQUIRE(jdump_append(&buf, &len, &cap, "}", 1) == 0);
        CHECK_STR(buf, want);
        free(buf);
        free(want);
        json_decref(call);
    }
    free(infos);
    json_decref(trees);
    json_decref(bare);
    json_decref(odd);
    json_decref(pod);
}
