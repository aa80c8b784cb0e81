/* kubelet-sim's pure parts: flags, annotations, admission, exit handling. */
#include <errno.h>

#include "ksim.h"
#include "test.h"

static int parse(struct ksim_config *c, const char *const *args, char *err, size_t errlen) {
    char *argv[32] = {"kubelet-sim"};
    int argc = 1;
    for (; args[argc - 1]; argc++) argv[argc] = (char *)args[argc - 1];
    return ksim_config_parse(c, argc, argv, err, errlen);
}

TEST(ksim_flags_defaults) {
    struct ksim_config c;
    char err[256] = "";
    const char *args[] = {"--server=http://127.0.0.1:1", NULL};
    REQUIRE(parse(&c, args, err, sizeof err) == 0);
    CHECK_I64(c.nodes, 3);
    CHECK_STR(c.name_prefix, "sim-node-");
    CHECK_I64(c.cpu_milli, 8000);
    CHECK_I64(c.memory_bytes, 32LL << 30);
    CHECK_I64(c.pods, 110);
    CHECK_I64(c.gpu, 0);
    CHECK_I64(c.lease_seconds, 40);
    CHECK(c.renew_seconds == 10);
    CHECK_I64(c.max_inflight, 256);
    CHECK(!c.quiet && !c.verbose && !c.delete_nodes_on_exit);
    CHECK(c.events);
    CHECK_I64(json_object_size(c.labels), 0);
    ksim_config_free(&c);
}

TEST(ksim_flags_all) {
    struct ksim_config c;
    char err[256] = "";
    const char *args[] = {"--kubeconfig=/tmp/kc", "--context=x", "--nodes=5000", "--name-prefix=n-", "--cpu=500m",
                          "--memory=1.5Gi", "--pods=20", "--gpu=1", "--gpu-nodes=2", "--gpu-per-node=4",
                          "--labels=a=b,team.example.com/x=y,empty=", "--zones=3", "--lease-seconds=20",
                          "--renew-seconds=2.5", "--down=n-1,n-3", "--quiet", "--verbose=false",
                          "--delete-nodes-on-exit", "--restart-backoff=0", "--max-inflight=64", "--events=false", NULL};
    REQUIRE(parse(&c, args, err, sizeof err) == 0);
    CHECK_STR(c.kubeconfig, "/tmp/kc");
    CHECK_STR(c.context, "x");
    CHECK_I64(c.nodes, 5000);
    CHECK_STR(c.name_prefix, "n-");
    CHECK_I64(c.cpu_milli, 500);
    CHECK_I64(c.memory_bytes, 3LL << 29);
    CHECK_I64(c.pods, 20);
    CHECK_I64(c.gpu, 1000);
    CHECK_I64(c.gpu_nodes, 2);
    CHECK_I64(c.gpu_per_node, 4000);
    CHECK_STR(json_string_value(json_object_get(c.labels, "a")), "b");
    CHECK_STR(json_string_value(json_object_get(c.labels, "team.example.com/x")), "y");
    CHECK_STR(json_string_value(json_object_get(c.labels, "empty")), "");
    CHECK_I64(c.zones, 3);
    CHECK(c.renew_seconds == 2.5);
    REQUIRE_I64(c.ndown, 2);
    CHECK_STR(c.down[0], "n-1");
    CHECK_STR(c.down[1], "n-3");
    CHECK(c.down[2] == NULL);
    CHECK(c.quiet && !c.verbose && c.delete_nodes_on_exit);
    CHECK(c.backoff_seconds == 0);
    CHECK_I64(c.max_inflight, 64);
    CHECK(!c.events);
    ksim_config_free(&c);
}

TEST(ksim_flags_refused) {
    static const char *const bad[][3] = {
        {"--nodes=3", NULL},                                    /* no server */
        {"--server=http://x", "--nodes=-1", NULL},
        {"--server=http://x", "--nodes=abc", NULL},
        {"--server=http://x", "--cpu=lots", NULL},
        {"--server=http://x", "--memory=-1Gi", NULL},
        {"--server=http://x", "--labels=novalue", NULL},
        {"--server=http://x", "--labels=a b=c", NULL},
        {"--server=http://x", "--renew-seconds=0", NULL},
        {"--server=http://x", "--renew-seconds=40", NULL},     /* not shorter than the lease */
        {"--server=http://x", "--name-prefix=Bad_", NULL},
        {"--server=http://x", "--bogus=1", NULL},
        {"--server=http://x", "--nodes", NULL},
        {"--server=http://x", "--kubeconfig=k", NULL},
        {"--server=http://x", "stray", NULL},
        {"--server=http://x", "--quiet=maybe", NULL},
        {"--server=http://x", "--events=no", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct ksim_config c;
        char err[256] = "";
        int rc = parse(&c, bad[i], err, sizeof err);
        if (rc != -EINVAL) test_fail(__FILE__, __LINE__, "accepted case %zu (%s)", i, bad[i][1] ? bad[i][1] : bad[i][0]);
        CHECK(err[0] != 0);
        ksim_config_free(&c);
    }
    struct ksim_config c;
    char err[256] = "";
    const char *args[] = {"--server=http://x", "--cpu=lots", NULL};
    parse(&c, args, err, sizeof err);
    CHECK_HAS(err, "--cpu=lots");
    ksim_config_free(&c);
}

TEST(ksim_seconds) {
    int64_t ms = -1;
    CHECK(ksim_parse_seconds("0", &ms) == 0 && ms == 0);
    CHECK(ksim_parse_seconds("1.5", &ms) == 0 && ms == 1500);
    CHECK(ksim_parse_seconds(".25", &ms) == 0 && ms == 250);
    CHECK(ksim_parse_seconds("10", &ms) == 0 && ms == 10000);
    CHECK(ksim_parse_seconds("2.", &ms) == 0 && ms == 2000);
    CHECK(ksim_parse_seconds("0.0001", &ms) == 0 && ms == 1); /* rounds up */
    CHECK(ksim_parse_seconds("0.0010", &ms) == 0 && ms == 1);
    const char *bad[] = {"", ".", "-1", "1e3", "abc", "1.2.3", " 1", "1s", "99999999999", NULL};
    for (int i = 0; bad[i]; i++)
        if (ksim_parse_seconds(bad[i], &ms) != -EINVAL) test_fail(__FILE__, __LINE__, "accepted \"%s\"", bad[i]);
    CHECK(ksim_parse_seconds(NULL, &ms) == -EINVAL);
}

static json_t *pod_with(const char *anns, const char *restart) {
    json_error_t je;
    json_t *a = json_loads(anns, 0, &je);
    json_t *p = json_pack("{s:{s:s, s:o}, s:{}}", "metadata", "name", "p", "annotations", a ? a : json_object(), "spec");
    if (restart) json_object_set_new(json_object_get(p, "spec"), "restartPolicy", json_string(restart));
    return p;
}

TEST(ksim_pod_annotations) {
    struct ksim_pod_opts o;
    char err[256] = "";
    json_t *p = pod_with("{}", NULL);
    CHECK_I64(ksim_pod_opts(p, &o, err, sizeof err), 0);
    CHECK_I64(o.start_ms, 0);
    CHECK_I64(o.run_ms, -1);
    CHECK_I64(o.exit_code, 0);
    CHECK(o.restart == KSIM_RESTART_ALWAYS);
    json_decref(p);
    p = pod_with("{\"kubelet-sim.peloton.io/start-seconds\":\"1.5\",\"kubelet-sim.peloton.io/run-seconds\":\"30\","
                 "\"kubelet-sim.peloton.io/exit-code\":\"3\"}", "Never");
    CHECK_I64(ksim_pod_opts(p, &o, err, sizeof err), 0);
    CHECK_I64(o.start_ms, 1500);
    CHECK_I64(o.run_ms, 30000);
    CHECK_I64(o.exit_code, 3);
    CHECK(o.restart == KSIM_RESTART_NEVER);
    json_decref(p);
    p = pod_with("{\"kubelet-sim.peloton.io/run-seconds\":\"soon\",\"kubelet-sim.peloton.io/exit-code\":\"300\"}",
                 "OnFailure");
    CHECK_I64(ksim_pod_opts(p, &o, err, sizeof err), 2);
    CHECK_HAS(err, "run-seconds");
    CHECK_I64(o.run_ms, -1); /* malformed keeps the default */
    CHECK_I64(o.exit_code, 0);
    CHECK(o.restart == KSIM_RESTART_ON_FAILURE);
    json_decref(p);
}

TEST(ksim_exit_decisions) {
    CHECK(ksim_exit_action(KSIM_RESTART_NEVER, 0) == KSIM_EXIT_SUCCEEDED);
    CHECK(ksim_exit_action(KSIM_RESTART_NEVER, 3) == KSIM_EXIT_FAILED);
    CHECK(ksim_exit_action(KSIM_RESTART_ON_FAILURE, 0) == KSIM_EXIT_SUCCEEDED);
    CHECK(ksim_exit_action(KSIM_RESTART_ON_FAILURE, 1) == KSIM_EXIT_RESTART);
    CHECK(ksim_exit_action(KSIM_RESTART_ALWAYS, 0) == KSIM_EXIT_RESTART);
    CHECK(ksim_exit_action(KSIM_RESTART_ALWAYS, 2) == KSIM_EXIT_RESTART);
    CHECK_I64(ksim_backoff_ms(10000, 300000, 1), 10000);
    CHECK_I64(ksim_backoff_ms(10000, 300000, 2), 20000);
    CHECK_I64(ksim_backoff_ms(10000, 300000, 6), 300000);
    CHECK_I64(ksim_backoff_ms(10000, 300000, 1000), 300000);
    CHECK_I64(ksim_backoff_ms(0, 300000, 5), 0);
}

TEST(ksim_requests_and_admission) {
    json_error_t je;
    json_t *p = json_loads("{\"spec\":{\"containers\":["
                           "{\"name\":\"a\",\"resources\":{\"requests\":{\"cpu\":\"500m\",\"memory\":\"1Gi\"}}},"
                           "{\"name\":\"b\",\"resources\":{\"limits\":{\"cpu\":1,\"nvidia.com/gpu\":\"1\"}}}],"
                           "\"initContainers\":[{\"name\":\"i\",\"resources\":{\"requests\":{\"memory\":\"3Gi\"}}}],"
                           "\"overhead\":{\"cpu\":\"100m\"}}}", 0, &je);
    REQUIRE(p != NULL);
    struct ksim_res r;
    char err[256] = "", msg[300] = "";
    REQUIRE(ksim_pod_requests(p, &r, err, sizeof err) == 0);
    CHECK_I64(r.cpu, 1600);          /* 500m + limit 1 standing for the request + overhead */
    CHECK_I64(r.memory, 3LL << 30);  /* the init container's is larger */
    CHECK_I64(r.gpu, 1000);
    CHECK_I64(r.pods, 1);
    json_decref(p);

    struct ksim_res cap = {.cpu = 2000, .memory = 4LL << 30, .gpu = 0, .pods = 110};
    struct ksim_res used = {0};
    struct ksim_res small = {.cpu = 1500, .memory = 1, .pods = 1};
    CHECK(ksim_admit(&cap, &used, &small, msg, sizeof msg) == NULL);
    used = small;
    CHECK_STR(ksim_admit(&cap, &used, &small, msg, sizeof msg), "OutOfcpu");
    CHECK_STR(msg, "Pod was rejected: Node didn't have enough resource: cpu, requested: 1500, used: 1500, "
                   "capacity: 2000");
    used = (struct ksim_res){0};
    struct ksim_res mem = {.memory = 5LL << 30, .pods = 1};
    CHECK_STR(ksim_admit(&cap, &used, &mem, msg, sizeof msg), "OutOfmemory");
    struct ksim_res gpu = {.gpu = 1000, .pods = 1};
    CHECK_STR(ksim_admit(&cap, &used, &gpu, msg, sizeof msg), "OutOfnvidia.com/gpu");
    CHECK_HAS(msg, "requested: 1, used: 0, capacity: 0");
    used.pods = 110;
    CHECK_STR(ksim_admit(&cap, &used, &small, msg, sizeof msg), "OutOfpods");

    p = json_loads("{\"spec\":{\"containers\":[{\"resources\":{\"requests\":{\"cpu\":\"much\"}}}]}}", 0, &je);
    CHECK(ksim_pod_requests(p, &r, err, sizeof err) == -EINVAL);
    json_decref(p);
}

TEST(ksim_times_and_names) {
    char out[32];
    ksim_microtime(1767225600123456LL, out); /* 2026-01-01 */
    CHECK_STR(out, "2026-01-01T00:00:00.123456Z");
    ksim_microtime(1767225600000001LL, out);
    CHECK_STR(out, "2026-01-01T00:00:00.000001Z");
    ksim_rfc3339(1767225600, out);
    CHECK_STR(out, "2026-01-01T00:00:00Z");
    CHECK_I64(ksim_node_index("sim-node-", 10, "sim-node-0"), 0);
    CHECK_I64(ksim_node_index("sim-node-", 10, "sim-node-9"), 9);
    CHECK_I64(ksim_node_index("sim-node-", 10, "sim-node-10"), -1);
    CHECK_I64(ksim_node_index("sim-node-", 100, "sim-node-07"), -1); /* not padded */
    CHECK_I64(ksim_node_index("sim-node-", 10, "sim-node-"), -1);
    CHECK_I64(ksim_node_index("sim-node-", 10, "other-1"), -1);
    CHECK_I64(ksim_node_index("sim-node-", 10, "sim-node-1x"), -1);
    CHECK_I64(ksim_node_index("sim-node-", 10, NULL), -1);
}

/* The decoding filters keep what kubelet-sim reads: the same options,
 * requests, IP and restarts from the filtered pod, and a node's metadata. */
TEST(ksim_decoding_filters_keep_what_is_read) {
    const char *pod =
        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"namespace\":\"d\",\"uid\":\"u\","
        "\"resourceVersion\":\"7\",\"deletionTimestamp\":\"2026-11-25T10:00:00Z\",\"managedFields\":[{\"m\":1}],"
        "\"annotations\":{\"kubelet-sim.peloton.io/run-seconds\":\"30\",\"kubelet-sim.peloton.io/exit-code\":\"3\"}},"
        "\"spec\":{\"nodeName\":\"node-1\",\"restartPolicy\":\"Never\",\"overhead\":{\"cpu\":\"100m\"},"
        "\"containers\":[{\"name\":\"a\",\"image\":\"busybox\",\"command\":[\"sh\"],\"terminationMessagePath\":\"/x\","
        "\"resources\":{\"requests\":{\"cpu\":\"500m\",\"memory\":\"1Gi\"}}}],"
        "\"initContainers\":[{\"name\":\"i\",\"image\":\"init\",\"env\":[],\"resources\":{\"requests\":{\"memory\":\"3Gi\"}}}]},"
        "\"status\":{\"phase\":\"Running\",\"podIP\":\"10.1.2.3\",\"hostIP\":\"10.0.0.1\",\"conditions\":[{\"type\":\"Ready\"}],"
        "\"containerStatuses\":[{\"name\":\"a\",\"restartCount\":4,\"state\":{\"running\":{}}}]}}";
    json_t *full = json_loads(pod, 0, NULL), *slim = jparse_filtered(pod, strlen(pod), 0, ksim_pod_keep, NULL);
    REQUIRE(full && slim);
    struct ksim_pod_opts a, b;
    struct ksim_res ra, rb;
    char err[256] = "";
    CHECK_I64(ksim_pod_opts(full, &a, err, sizeof err), 0);
    CHECK_I64(ksim_pod_opts(slim, &b, err, sizeof err), 0);
    CHECK_I64(a.run_ms, b.run_ms);
    CHECK_I64(b.exit_code, 3);
    CHECK(a.restart == b.restart && b.restart == KSIM_RESTART_NEVER);
    REQUIRE(ksim_pod_requests(full, &ra, err, sizeof err) == 0);
    REQUIRE(ksim_pod_requests(slim, &rb, err, sizeof err) == 0);
    CHECK_I64(rb.cpu, 600);
    CHECK_I64(ra.memory, rb.memory);
    json_t *md = json_object_get(slim, "metadata"), *st = json_object_get(slim, "status");
    CHECK_STR(json_string_value(json_object_get(md, "resourceVersion")), "7");
    CHECK_STR(json_string_value(json_object_get(md, "uid")), "u");
    CHECK(json_is_string(json_object_get(md, "deletionTimestamp")));
    CHECK(!json_object_get(md, "managedFields"));
    CHECK_STR(json_string_value(json_object_get(json_object_get(slim, "spec"), "nodeName")), "node-1");
    CHECK_STR(json_string_value(json_object_get(st, "podIP")), "10.1.2.3");
    CHECK_I64(json_object_size(st), 3); /* phase, podIP, containerStatuses */
    json_t *cs = json_array_get(json_object_get(st, "containerStatuses"), 0);
    CHECK_I64(json_integer_value(json_object_get(cs, "restartCount")), 4);
    CHECK_I64(json_object_size(cs), 1);
    json_t *c0 = json_array_get(json_object_get(json_object_get(slim, "spec"), "containers"), 0);
    CHECK_STR(json_string_value(json_object_get(c0, "image")), "busybox");
    CHECK_I64(json_object_size(c0), 3); /* name, image, resources */
    json_decref(full);
    json_decref(slim);

    const char *node = "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"node-1\",\"resourceVersion\":\"9\","
                       "\"annotations\":{\"kubelet-sim.peloton.io/down\":\"true\"}},\"spec\":{\"taints\":[]},"
                       "\"status\":{\"capacity\":{\"cpu\":\"64\"},\"conditions\":[{\"type\":\"Ready\"}]}}";
    json_t *n = jparse_filtered(node, strlen(node), 0, ksim_node_keep, NULL);
    REQUIRE(n);
    CHECK_I64(json_object_size(n), 3);
    CHECK_STR(json_string_value(json_object_get(json_object_get(n, "metadata"), "resourceVersion")), "9");
    CHECK(json_object_get(json_object_get(json_object_get(n, "metadata"), "annotations"), "kubelet-sim.peloton.io/down"));
    json_decref(n);
}

/* Names and images go into the text status patches quoted as jansson
 * quotes them. */
TEST(ksim_json_quote_matches_jansson) {
    const char *cases[] = {"", "busybox:1.36", "a\"b\\c/d", "tab\there\nnew\rret\bback\fform", "\x01\x1f ctl",
                           "caf\xc3\xa9 \xe2\x82\xac", "registry.example.com:5000/team/app@sha256:0f"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *mine = ksim_json_quote(cases[i]);
        json_t *v = json_string(cases[i]);
        char *theirs = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        REQUIRE(mine && theirs);
        CHECK_STR(mine, theirs);
        free(mine);
        free(theirs);
        json_decref(v);
    }
}
