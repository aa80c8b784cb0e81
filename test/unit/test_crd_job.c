/* Job custom objects: decoding into the core's job_spec and the extras,
 * status, the CRD file and the examples (src/k8s/crd_job.h). */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>

#include "crd_job.h"
#include "crd_pool.h"
#include "respool.h"
#include "test.h"
#include "yamljson.h"

int crd_test_check_crd_file(const char *path, const char *plural, const char *scope); /* test_crd_pool.c */

static const char *const k_template =
    "{\"metadata\": {\"labels\": {\"app\": \"x\"}}, \"spec\": {\"containers\": [{\"name\": \"c\", \"image\": \"busybox\"}]}}";

/* A Job with spec built from spec_json; "TEMPLATE" in it is replaced by a valid template. */
static json_t *mkjob(const char *name, const char *spec_json) {
    char buf[2048];
    const char *at = strstr(spec_json, "TEMPLATE");
    if (at) snprintf(buf, sizeof buf, "%.*s%s%s", (int)(at - spec_json), spec_json, k_template, at + 8);
    else snprintf(buf, sizeof buf, "%s", spec_json);
    char err[256];
    json_t *spec = doc_parse(buf, strlen(buf), err, sizeof err);
    if (!spec) { fprintf(stderr, "parse: %s: %s\n", err, buf); return NULL; }
    return json_pack("{s:s, s:s, s:{s:s, s:s}, s:o}", "apiVersion", "peloton.io/v1alpha1", "kind", "Job", "metadata",
                     "name", name, "namespace", "default", "spec", spec);
}

TEST(crdjob_decode_every_field) {
    json_t *cr = mkjob("train",
        "{\"type\": \"STATELESS\", \"resourcePool\": \"team1\", \"instanceCount\": 10,"
        " \"sla\": {\"priority\": 7, \"preemptible\": true, \"revocable\": true,"
        "          \"minimumRunningInstances\": 3, \"maximumRunningInstances\": 8,"
        "          \"maximumUnavailableInstances\": 4},"
        " \"restartPolicy\": {\"maxFailures\": 100},"
        " \"preemptionPolicy\": {\"killOnPreempt\": true},"
        " \"updateStrategy\": {\"batchSize\": 2, \"maxFailureInstances\": 1, \"rollbackOnFailure\": true,"
        "                    \"maxInstanceAttempts\": 4, \"minReadySeconds\": 30, \"paused\": true},"
        " \"template\": TEMPLATE}");
    REQUIRE(cr);
    json_object_set_new(cr, "status", json_pack("{s:s}", "state", "RUNNING"));
    struct job_spec spec;
    char pool[64], err[256] = "";
    int rc = crd_job_decode(cr, &spec, pool, sizeof pool, err, sizeof err);
    CHECK_STR(err, "");
    REQUIRE_I64(rc, 0);
    CHECK_STR(pool, "team1");
    CHECK_I64(spec.type, JOB_STATELESS);
    CHECK_I64(spec.goal, JOB_GOAL_RUN);
    CHECK_I64(spec.instance_count, 10);
    CHECK_I64(spec.min_running, 3);
    CHECK_I64(spec.max_failures, 100);
    CHECK(spec.kill_on_preempt);
    CHECK_I64(spec.config_version, 0);
    CHECK_I64(spec.state, JOB_RUNNING);
    struct crd_job_extra x;
    REQUIRE_I64(crd_job_decode_extra(cr, &x, err, sizeof err), 0);
    CHECK_I64(x.priority, 7);
    CHECK_I64(x.max_unavailable, 4);
    CHECK(x.preemptible);
    CHECK(x.revocable);
    CHECK_I64(x.max_running, 8);
    CHECK_I64(x.update.batch_size, 2);
    CHECK_I64(x.update.max_failure_instances, 1);
    CHECK(x.update.rollback_on_failure);
    CHECK_I64(x.update.max_instance_attempts, 4);
    CHECK_I64(x.update.min_running_ms, 30000);
    CHECK(x.update_paused);
    CHECK_I64(crd_job_work_flags(&x), WF_PREEMPTIBLE | WF_REVOCABLE);
    CHECK_I64(job_gang_size(&spec, 0), 3);
    json_decref(cr);
}

TEST(crdjob_decode_defaults_each_type) {
    static const char *const types[] = {"BATCH", "STATELESS", "STATEFUL", "DAEMON"};
    for (int t = 0; t < 4; t++) {
        char spec_json[256];
        snprintf(spec_json, sizeof spec_json, "{\"type\": \"%s\", \"resourcePool\": \"p\",%s \"template\": TEMPLATE}",
                 types[t], t == 3 ? "" : " \"instanceCount\": 2,");
        json_t *cr = mkjob("j", spec_json);
        REQUIRE(cr);
        struct job_spec spec;
        struct crd_job_extra x;
        char pool[8], err[256] = "";
        CHECK_I64(crd_job_decode(cr, &spec, pool, sizeof pool, err, sizeof err), 0);
        CHECK_STR(err, "");
        CHECK_I64(spec.type, t);
        CHECK_I64(spec.instance_count, t == 3 ? 0 : 2);
        CHECK_I64(spec.max_failures, 0);
        CHECK_I64(spec.min_running, 0);
        CHECK(!spec.kill_on_preempt);
        CHECK_I64(spec.state, JOB_UNKNOWN);
        CHECK_I64(crd_job_decode_extra(cr, &x, err, sizeof err), 0);
        CHECK_I64(x.priority, 0);
        CHECK(!x.preemptible && !x.revocable);
        CHECK_I64(crd_job_work_flags(&x), 0);
        CHECK_I64(x.update.batch_size, 0);
        CHECK_I64(x.update.min_running_ms, CRD_JOB_MIN_READY_SECONDS * 1000); /* an updated instance settles 10 s */
        CHECK(!x.update_paused);
        json_decref(cr);
    }
}

TEST(crdjob_decode_errors_name_the_field) {
    static const struct { const char *spec, *want; } cases[] = {
        {"{\"resourcePool\": \"p\", \"instanceCount\": 1, \"template\": TEMPLATE}",
         "jobs.peloton.io \"j\": spec.type: missing is not BATCH, STATELESS, STATEFUL or DAEMON"},
        {"{\"type\": \"SERVICE\", \"resourcePool\": \"p\", \"instanceCount\": 1, \"template\": TEMPLATE}",
         "spec.type: \"SERVICE\" is not BATCH"},
        {"{\"type\": \"BATCH\", \"instanceCount\": 1, \"template\": TEMPLATE}", "spec.resourcePool: required"},
        {"{\"type\": \"BATCH\", \"resourcePool\": \"\", \"instanceCount\": 1, \"template\": TEMPLATE}", "spec.resourcePool: required"},
        {"{\"type\": \"BATCH\", \"resourcePool\": \"root\", \"instanceCount\": 1, \"template\": TEMPLATE}",
         "spec.resourcePool: the root pool holds no work"},
        {"{\"type\": \"BATCH\", \"resourcePool\": \"p\", \"template\": TEMPLATE}", "spec.instanceCount: required for BATCH jobs"},
        {"{\"type\": \"BATCH\", \"resourcePool\": \"p\", \"instanceCount\": -1, \"template\": TEMPLATE}",
         "spec.instanceCount: -1 is negative"},
        {"{\"type\": \"BATCH\", \"resourcePool\": \"p\", \"instanceCount\": \"3\", \"template\": TEMPLATE}",
         "spec.instanceCount: expected an integer"},
        {"{\"type\": \"BATCH\", \"resourcePool\": \"p\", \"instanceCount\": 16777217, \"template\": TEMPLATE}",
         "spec.instanceCount: 16777217 exceeds 16777216"},
        {"{\"type\": \"BATCH\", \"resourcePool\": \"p\", \"instanceCount\": 1, \"restartPolicy\": {\"maxFailures\": 101}, \"template\": TEMPLATE}",
         "jobs.peloton.io \"j\": spec.restartPolicy.maxFailures: 101 exceeds 100"},
        {"{\"type\": \"BATCH\", \"resourcePool\": \"p\", \"instanceCount\": 2, \"sla\": {\"minimumRunningInstances\": 3}, \"template\": TEMPLATE}",
         "spec.sla.minimumRunningInstances: 3 exceeds instanceCount 2"},
        {"{\"type\": \"BATCH\", \"resourcePool\": \"p\", \"instanceCount\": 9, \"sla\": {\"minimumRunningInstances\": 5, \"maximumRunningInstances\": 4}, \"template\": TEMPLATE}",
         "spec.sla.minimumRunningInstances: 5 exceeds maximumRunningInstances 4"},
        {"{\"type\": \"BATCH\", \"resourcePool\": \"p\", \"instanceCount\": 1, \"sla\": {\"maximumUnavailableInstances\": -2}, \"template\": TEMPLATE}",
         "spec.sla.maximumUnavailableInstances: -2 is negative"},
        {"{\"type\": \"BATCH\", \"resourcePool\": \"p\", \"instanceCount\": 1, \"sla\": {\"revocable\": true}, \"template\": TEMPLATE}",
         "spec.sla.revocable: a revocable job must be preemptible"},
        {"{\"type\": \"BATCH\", \"resourcePool\": \"p\", \"instanceCount\": 1, \"sla\": {\"priority\": 4294967296}, \"template\": TEMPLATE}",
         "spec.sla.priority: 4294967296 exceeds 4294967295"},
        {"{\"type\": \"BATCH\", \"resourcePool\": \"p\", \"instanceCount\": 1, \"sla\": {\"preemptible\": \"yes\"}, \"template\": TEMPLATE}",
         "spec.sla.preemptible: expected true or false"},
        {"{\"type\": \"BATCH\", \"resourcePool\": \"p\", \"instanceCount\": 1, \"sla\": [], \"template\": TEMPLATE}",
         "spec.sla: expected an object"},
        {"{\"type\": \"BATCH\", \"resourcePool\": \"p\", \"instanceCount\": 1, \"sla\": {\"prio\": 1}, \"template\": TEMPLATE}",
         "spec.sla.prio: unknown field"},
        {"{\"type\": \"BATCH\", \"resourcePool\": \"p\", \"instanceCount\": 1, \"updateStrategy\": {\"batchSize\": -2}, \"template\": TEMPLATE}",
         "spec.updateStrategy.batchSize: -2 is negative"},
        {"{\"type\": \"BATCH\", \"resourcePool\": \"p\", \"instanceCount\": 1, \"updateStrategy\": {\"rollbackOnFailure\": 1}, \"template\": TEMPLATE}",
         "spec.updateStrategy.rollbackOnFailure: expected true or false"},
        {"{\"type\": \"BATCH\", \"resourcePool\": \"p\", \"instanceCount\": 1, \"updateStrategy\": {\"minReadySeconds\": 86401}, \"template\": TEMPLATE}",
         "spec.updateStrategy.minReadySeconds: 86401 exceeds 86400"},
        {"{\"type\": \"BATCH\", \"resourcePool\": \"p\", \"instanceCount\": 1, \"updateStrategy\": {\"paused\": \"yes\"}, \"template\": TEMPLATE}",
         "spec.updateStrategy.paused: expected true or false"},
        {"{\"type\": \"BATCH\", \"resourcePool\": \"p\", \"instanceCount\": 1, \"updateStrategy\": {\"maxInstanceAttempts\": 101}, \"template\": TEMPLATE}",
         "spec.updateStrategy.maxInstanceAttempts: 101 exceeds 100"},
        {"{\"type\": \"BATCH\", \"resourcePool\": \"p\", \"instanceCount\": 1, \"preemptionPolicy\": {\"killOnPreempt\": 0}, \"template\": TEMPLATE}",
         "spec.preemptionPolicy.killOnPreempt: expected true or false"},
        {"{\"type\": \"BATCH\", \"resourcePool\": \"p\", \"instanceCount\": 1, \"restartPolicy\": {\"maxFailures\": 1, \"x\": 1}, \"template\": TEMPLATE}",
         "spec.restartPolicy.x: unknown field"},
        {"{\"type\": \"BATCH\", \"resourcePool\": \"p\", \"instanceCount\": 1, \"template\": TEMPLATE, \"replicas\": 3}",
         "spec.replicas: unknown field"},
        {"{\"type\": \"BATCH\", \"resourcePool\": \"p\", \"instanceCount\": 1}", "spec.template: required"},
        {"{\"type\": \"BATCH\", \"resourcePool\": \"p\", \"instanceCount\": 1, \"template\": {\"spec\": {\"containers\": []}}}",
         "spec.template.spec.containers: at least one container is required"},
        {"{\"type\": \"BATCH\", \"resourcePool\": \"p\", \"instanceCount\": 1, \"template\": {\"metadata\": {}}}",
         "spec.template.spec: required"},
        {"{\"type\": \"BATCH\", \"resourcePool\": \"p\", \"instanceCount\": 1, \"template\": {\"spec\": {\"containers\": [{\"image\": \"x\"}]}}}",
         "spec.template.spec.containers[0].name: required"},
        {"{\"type\": \"BATCH\", \"resourcePool\": \"p\", \"instanceCount\": 1, \"template\": {\"metadata\": 1, \"spec\": {}}}",
         "spec.template.metadata: expected an object"},
        {"[]", "spec: required (an object)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *cr = mkjob("j", cases[i].spec);
        REQUIRE(cr);
        struct job_spec spec;
        struct crd_job_extra x;
        char pool[64], err[256] = "", err2[256] = "";
        int rc = crd_job_decode(cr, &spec, pool, sizeof pool, err, sizeof err);
        if (rc != -EINVAL) test_fail(__FILE__, __LINE__, "case %zu: rc %d (%s)", i, rc, err);
        CHECK_HAS(err, cases[i].want);
        CHECK_I64(crd_job_decode_extra(cr, &x, err2, sizeof err2), -EINVAL);
        CHECK_STR(err2, err);
        json_decref(cr);
    }
    /* DAEMON: minimumRunningInstances is not bounded by instanceCount */
    json_t *cr = mkjob("d", "{\"type\": \"DAEMON\", \"resourcePool\": \"p\", \"sla\": {\"minimumRunningInstances\": 4}, \"template\": TEMPLATE}");
    struct job_spec spec;
    char pool[2], err[256] = "";
    CHECK_I64(crd_job_decode(cr, &spec, pool, sizeof pool, err, sizeof err), 0);
    json_decref(cr);
    cr = mkjob("d", "{\"type\": \"DAEMON\", \"resourcePool\": \"long\", \"template\": TEMPLATE}");
    CHECK_I64(crd_job_decode(cr, &spec, pool, sizeof pool, err, sizeof err), -ENAMETOOLONG);
    CHECK_HAS(err, "spec.resourcePool: longer than 1 characters");
    json_decref(cr);
    CHECK_I64(crd_job_decode(NULL, &spec, pool, sizeof pool, err, sizeof err), -EINVAL);
    cr = json_pack("{s:{}}", "metadata");
    CHECK_I64(crd_job_decode(cr, &spec, pool, sizeof pool, err, sizeof err), -EINVAL);
    CHECK_HAS(err, "metadata.name is required");
    json_decref(cr);
}

/* spec.stoppedInstances: ranges [from, to), sorted and merged, searched. */
TEST(crdjob_stopped_instances) {
    json_t *cr = mkjob("s", "{\"type\": \"STATELESS\", \"resourcePool\": \"p\", \"instanceCount\": 20,"
                            " \"stoppedInstances\": [{\"from\": 9, \"to\": 12}, {\"to\": 2},"
                            " {\"from\": 5, \"to\": 7}, {\"from\": 6, \"to\": 9}, {\"from\": 30, \"to\": 31}],"
                            " \"template\": TEMPLATE}");
    REQUIRE(cr);
    struct crd_job_extra x;
    char err[256] = "";
    REQUIRE_I64(crd_job_decode_extra(cr, &x, err, sizeof err), 0);
    CHECK_I64(x.nstopped, 3); /* [0,2) [5,12) [30,31) */
    CHECK_I64(x.stopped[0].from, 0);
    CHECK_I64(x.stopped[0].to, 2);
    CHECK_I64(x.stopped[1].from, 5);
    CHECK_I64(x.stopped[1].to, 12);
    CHECK_I64(x.stopped[2].from, 30);
    static const bool want[32] = {[0] = 1, [1] = 1, [5] = 1, [6] = 1, [7] = 1, [8] = 1, [9] = 1, [10] = 1, [11] = 1,
                                  [30] = 1};
    for (uint32_t i = 0; i < 32; i++)
        if (crd_job_stopped(&x, i) != want[i]) test_fail(__FILE__, __LINE__, "instance %u: stopped %d", i, !want[i]);
    json_decref(cr);
    cr = mkjob("s", "{\"type\": \"BATCH\", \"resourcePool\": \"p\", \"instanceCount\": 2, \"template\": TEMPLATE}");
    REQUIRE_I64(crd_job_decode_extra(cr, &x, err, sizeof err), 0);
    CHECK_I64(x.nstopped, 0);
    CHECK(!crd_job_stopped(&x, 0));
    json_decref(cr);
    static const struct { const char *stopped, *want; } bad[] = {
        {"{}", "spec.stoppedInstances: expected a list"},
        {"[{\"from\": 3, \"to\": 3}]", "spec.stoppedInstances[0]: from 3 is not below to 3"},
        {"[{\"to\": 1}, {\"from\": 2}]", "spec.stoppedInstances[1].to: required"},
        {"[{\"to\": 1}, 4]", "spec.stoppedInstances[1]: expected an object"},
        {"[{\"to\": 1, \"step\": 2}]", "spec.stoppedInstances[0].step: unknown field"},
        {"[{\"from\": -1, \"to\": 1}]", "spec.stoppedInstances[0].from: -1 is negative"},
        {"[{\"to\": 16777217}]", "spec.stoppedInstances[0].to: 16777217 exceeds 16777216"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char spec[512];
        snprintf(spec, sizeof spec, "{\"type\": \"BATCH\", \"resourcePool\": \"p\", \"instanceCount\": 2,"
                                    " \"stoppedInstances\": %s, \"template\": TEMPLATE}", bad[i].stopped);
        cr = mkjob("s", spec);
        REQUIRE(cr);
        CHECK_I64(crd_job_decode_extra(cr, &x, err, sizeof err), -EINVAL);
        CHECK_HAS(err, bad[i].want);
        json_decref(cr);
    }
    /* at most CRD_JOB_MAX_STOPPED ranges */
    cr = mkjob("s", "{\"type\": \"BATCH\", \"resourcePool\": \"p\", \"instanceCount\": 2, \"template\": TEMPLATE}");
    json_t *many = json_array();
    for (int i = 0; i <= CRD_JOB_MAX_STOPPED; i++)
        json_array_append_new(many, json_pack("{s:i, s:i}", "from", 2 * i, "to", 2 * i + 1));
    json_object_set_new(json_object_get(cr, "spec"), "stoppedInstances", many);
    CHECK_I64(crd_job_decode_extra(cr, &x, err, sizeof err), -EINVAL);
    CHECK_HAS(err, "spec.stoppedInstances: 257 ranges, more than 256");
    json_array_remove(many, 0);
    CHECK_I64(crd_job_decode_extra(cr, &x, err, sizeof err), 0);
    CHECK_I64(x.nstopped, 256);
    CHECK(crd_job_stopped(&x, 512) && !crd_job_stopped(&x, 511) && !crd_job_stopped(&x, 0));
    json_decref(cr);
}

TEST(crdjob_status_counts_every_state) {
    struct job_counts c;
    memset(&c, 0, sizeof c);
    c.n[TASK_RUNNING] = 3;
    c.n[TASK_PENDING] = 2;
    c.total = 5;
    json_t *st = crd_job_status(JOB_RUNNING, &c);
    REQUIRE(st);
    CHECK_STR(json_string_value(json_object_get(st, "state")), "RUNNING");
    json_t *ts = json_object_get(st, "taskStats");
    CHECK_I64(json_object_size(ts), TASK_NSTATES);
    CHECK_I64(json_integer_value(json_object_get(ts, "RUNNING")), 3);
    CHECK_I64(json_integer_value(json_object_get(ts, "PENDING")), 2);
    CHECK_I64(json_integer_value(json_object_get(ts, "SUCCEEDED")), 0);
    json_decref(st);
    st = crd_job_status(JOB_INITIALIZED, NULL);
    CHECK_I64(json_integer_value(json_object_get(json_object_get(st, "taskStats"), "RUNNING")), 0);
    json_decref(st);
}

TEST(crdjob_crd_file_is_structural) {
    CHECK_I64(crd_test_check_crd_file("crds/jobs.peloton.io.yaml", "jobs", "Namespaced"), 0);
    char err[256];
    json_t *crd = doc_load_file("crds/jobs.peloton.io.yaml", err, sizeof err);
    REQUIRE(crd);
    json_t *ver = json_array_get(json_object_get(json_object_get(crd, "spec"), "versions"), 0);
    json_t *cols = json_object_get(ver, "additionalPrinterColumns");
    static const char *const want[] = {".spec.type", ".spec.resourcePool", ".spec.instanceCount",
                                       ".status.taskStats.RUNNING", ".status.state", ".status.update.state",
                                       ".status.update.progress", ".status.backoff.instances",
                                       ".metadata.creationTimestamp"};
    REQUIRE_I64(json_array_size(cols), 9);
    for (size_t i = 0; i < 9; i++)
        CHECK_STR(json_string_value(json_object_get(json_array_get(cols, i), "jsonPath")), want[i]);
    json_t *names = json_object_get(json_object_get(crd, "spec"), "names");
    CHECK_STR(json_string_value(json_array_get(json_object_get(names, "shortNames"), 0)), "pj");
    CHECK_STR(json_string_value(json_array_get(json_object_get(names, "shortNames"), 1)), "pjob");
    /* every field the decoder reads, and every state the status writes, is in the schema */
    json_t *props = json_object_get(json_object_get(json_object_get(json_object_get(ver, "schema"), "openAPIV3Schema"), "properties"), "spec");
    static const char *const fields[] = {"type", "resourcePool", "instanceCount", "sla", "template", "restartPolicy",
                                         "updateStrategy", "preemptionPolicy"};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (!json_object_get(json_object_get(props, "properties"), fields[i]))
            test_fail(__FILE__, __LINE__, "spec.%s not in the schema", fields[i]);
    json_t *status = json_object_get(json_object_get(json_object_get(json_object_get(json_object_get(ver, "schema"), "openAPIV3Schema"), "properties"), "status"), "properties");
    json_t *ts = json_object_get(json_object_get(status, "taskStats"), "properties");
    for (int s = 0; s < TASK_NSTATES; s++)
        if (!json_object_get(ts, task_state_name((enum task_state)s)))
            test_fail(__FILE__, __LINE__, "taskStats.%s not in the schema", task_state_name((enum task_state)s));
    /* the update's states and the updateStrategy fields the decoder reads */
    json_t *ustates = json_object_get(json_object_get(json_object_get(json_object_get(status, "update"), "properties"),
                                                      "state"), "enum");
    CHECK_I64(json_array_size(ustates), UPDATE_NSTATES - 1);
    for (int s = 1; s < UPDATE_NSTATES; s++)
        CHECK_STR(json_string_value(json_array_get(ustates, (size_t)s - 1)), update_state_name((enum update_state)s));
    json_t *us = json_object_get(json_object_get(json_object_get(props, "properties"), "updateStrategy"), "properties");
    static const char *const ufields[] = {"batchSize", "maxFailureInstances", "maxInstanceAttempts",
                                          "rollbackOnFailure", "minReadySeconds", "paused"};
    for (size_t i = 0; i < sizeof ufields / sizeof ufields[0]; i++)
        if (!json_object_get(us, ufields[i])) test_fail(__FILE__, __LINE__, "updateStrategy.%s not in the schema", ufields[i]);
    CHECK(json_object_get(status, "backoff") != NULL);
    json_t *states = json_object_get(json_object_get(status, "state"), "enum");
    CHECK_I64(json_array_size(states), JOB_NSTATES);
    for (int s = 0; s < JOB_NSTATES; s++)
        CHECK_STR(json_string_value(json_array_get(states, (size_t)s)), job_state_name((enum job_state)s));
    json_decref(crd);
}

TEST(crdjob_examples_decode_into_example_pools) {
    static const char *const files[] = {"examples/jobs/batch.yaml", "examples/jobs/stateless.yaml",
                                        "examples/jobs/stateful.yaml", "examples/jobs/daemon.yaml"};
    char err[256] = "";
    json_t *pools = doc_load_file("examples/pools.yaml", err, sizeof err);
    REQUIRE(pools);
    json_t *items = json_object_get(pools, "items");
    const json_t *v[16];
    size_t n = json_array_size(items);
    REQUIRE(n <= 16);
    for (size_t i = 0; i < n; i++) v[i] = json_array_get(items, i);
    struct respool_tree *t = NULL;
    REQUIRE_I64(crd_pool_build_tree(v, n, &t, err, sizeof err), 0);
    bool seen[JOB_NTYPES] = {false};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        json_t *cr = doc_load_file(files[i], err, sizeof err);
        if (!cr) { test_fail(__FILE__, __LINE__, "%s: %s", files[i], err); continue; }
        CHECK_STR(json_string_value(json_object_get(cr, "kind")), "Job");
        CHECK_STR(json_string_value(json_object_get(cr, "apiVersion")), "peloton.io/v1alpha1");
        struct job_spec spec;
        struct crd_job_extra x;
        char pool[64];
        int rc = crd_job_decode(cr, &spec, pool, sizeof pool, err, sizeof err);
        if (rc) test_fail(__FILE__, __LINE__, "%s: %s", files[i], err);
        CHECK_I64(crd_job_decode_extra(cr, &x, err, sizeof err), 0);
        if (!rc) {
            seen[spec.type] = true;
            struct respool *p = crd_pool_find(t, pool);
            if (!p || !respool_is_leaf(p)) test_fail(__FILE__, __LINE__, "%s: pool %s is not a leaf of the example tree", files[i], pool);
        }
        json_decref(cr);
    }
    for (int k = 0; k < JOB_NTYPES; k++)
        if (!seen[k]) test_fail(__FILE__, __LINE__, "no example of type %s", job_type_name((enum job_type)k));
    respool_tree_free(t);
    json_decref(pools);
}
