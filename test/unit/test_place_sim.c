/* peloton-sim place: the document format in and out, and refusals. */
#include <stdlib.h>

#include "sim.h"
#include "test.h"
#include "yamljson.h"

static json_t *run(const char *doc, char *err) {
    json_t *in = doc_parse(doc, strlen(doc), err, 256);
    if (!in) return NULL;
    json_t *out = sim_place(in, err, 256);
    json_decref(in);
    return out;
}

static const char *task_host(json_t *out, size_t p, size_t t) {
    json_t *pl = json_array_get(json_object_get(out, "placements"), p);
    json_t *task = json_array_get(json_object_get(pl, "tasks"), t);
    return json_string_value(json_object_get(task, "host"));
}

TEST(place_sim_full_document) {
    char err[256] = "";
    json_t *out = run(
        "hosts:\n"
        "- {name: k1, backend: kubelet, allocatable: {cpu: 4, memory: 8Gi}, labels: {zone: a}}\n"
        "- {name: m1, backend: mesos, allocatable: {cpu: '8', memory: 16Gi}, attributes: {zone: b},\n"
        "   allocated: {cpu: 2}}\n"
        "- name: t1\n"
        "  allocatable: {cpu: 16, memory: 64Gi}\n"
        "  taints: [{key: dedicated, value: ml, effect: NoSchedule}]\n"
        "- {name: g1, allocatable: {cpu: 16, memory: 64Gi, gpu: 2}}\n"
        "- {name: u1, allocatable: {cpu: 16, memory: 64Gi}, unschedulable: true}\n"
        "gangs:\n"
        "- id: web\n"
        "  strategy: SPREAD_JOB\n"
        "  count: 2\n"
        "  task: {resources: {cpu: 500m, memory: 1Gi}, nodeSelector: {zone: a}}\n"
        "- id: ml\n"
        "  tasks:\n"
        "  - resources: {cpu: 1, gpu: 1}\n"
        "  - resources: {cpu: 12}\n"
        "    tolerations: [{key: dedicated, operator: Exists}]\n"
        "    affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution:\n"
        "      {nodeSelectorTerms: [{matchExpressions: [{key: hostname, operator: In, values: [t1]}]}]}}}\n"
        "- id: big\n"
        "  task: {resources: {cpu: 10}}\n"
        "- id: hinted\n"
        "  strategy: LEAST_LOADED\n"
        "  task: {resources: {cpu: 1}, hostHint: m1,\n"
        "         constraint: {type: LABEL, labelConstraint: {kind: HOST, condition: EQUAL,\n"
        "                      label: {key: zone, value: b}, requirement: 1}}}\n",
        err);
    REQUIRE(out);
    json_t *pl = json_object_get(out, "placements"), *fl = json_object_get(out, "failures");
    CHECK_I64(json_array_size(pl), 3);
    CHECK_STR(json_string_value(json_object_get(json_array_get(pl, 0), "gang")), "web");
    CHECK_STR(task_host(out, 0, 0), "k1");
    CHECK_STR(task_host(out, 0, 1), "k1");
    CHECK_STR(json_string_value(json_object_get(json_array_get(pl, 1), "gang")), "ml");
    CHECK_STR(task_host(out, 1, 0), "g1");
    CHECK_STR(task_host(out, 1, 1), "t1");
    CHECK_STR(task_host(out, 2, 0), "m1");
    REQUIRE(json_array_size(fl) == 1);
    json_t *f0 = json_array_get(fl, 0);
    CHECK_STR(json_string_value(json_object_get(f0, "gang")), "big");
    CHECK_STR(json_string_value(json_object_get(f0, "reason")),
              "0/5 hosts: 2 insufficient cpu, 1 gpu host reserved, 1 taint, 1 unschedulable");
    CHECK_I64(json_integer_value(json_object_get(json_object_get(f0, "rejected"), "insufficient cpu")), 2);
    CHECK_I64(json_integer_value(json_object_get(f0, "task")), 0);
    json_t *hosts = json_object_get(out, "hosts");
    CHECK_I64(json_array_size(hosts), 5);
    json_t *k1 = json_object_get(json_array_get(hosts, 0), "allocated");
    CHECK_I64(json_integer_value(json_object_get(k1, "cpu")), 1000);
    CHECK_I64(json_integer_value(json_object_get(k1, "memory")), 2LL << 30);
    json_t *m1 = json_object_get(json_array_get(hosts, 1), "allocated");
    CHECK_I64(json_integer_value(json_object_get(m1, "cpu")), 3000);
    CHECK(json_object_get(out, "deferred") == NULL);
    json_decref(out);
}

TEST(place_sim_options_and_deferred) {
    char err[256] = "";
    const char *doc = "{\"hosts\":[{\"name\":\"g\",\"allocatable\":{\"cpu\":4,\"gpu\":1}}],"
                      "\"gangs\":[{\"id\":\"a\",\"task\":{\"resources\":{\"cpu\":1}}},"
                      "{\"id\":\"b\",\"task\":{\"resources\":{\"cpu\":1}}}],"
                      "\"options\":{\"gpuHostsForAnyTask\":true,\"maxGangs\":1}}";
    json_t *out = run(doc, err);
    REQUIRE(out);
    CHECK_I64(json_array_size(json_object_get(out, "placements")), 1);
    json_t *d = json_object_get(out, "deferred");
    CHECK_I64(json_array_size(d), 1);
    CHECK_STR(json_string_value(json_array_get(d, 0)), "b");
    json_decref(out);
}

TEST(place_sim_tasks_on_hosts_feed_spread_and_constraints) {
    char err[256] = "";
    json_t *out = run("{\"hosts\":["
                      "{\"name\":\"a\",\"allocatable\":{\"cpu\":8},\"tasks\":[{\"job\":\"web\",\"labels\":{\"app\":\"web\"}}]},"
                      "{\"name\":\"b\",\"allocatable\":{\"cpu\":8},\"allocated\":{\"cpu\":4}}],"
                      "\"gangs\":[{\"id\":\"w\",\"job\":\"web\",\"strategy\":\"SPREAD_JOB\",\"task\":{}},"
                      "{\"id\":\"x\",\"task\":{\"constraint\":{\"type\":\"AND\",\"andConstraint\":{\"constraints\":["
                      "{\"type\":\"LABEL\",\"labelConstraint\":{\"kind\":\"TASK\",\"condition\":\"GREATER_THAN\","
                      "\"label\":{\"key\":\"app\",\"value\":\"web\"},\"requirement\":0}}]}}}}]}",
                      err);
    REQUIRE(out);
    CHECK_STR(task_host(out, 0, 0), "b"); /* a already runs web */
    CHECK_STR(task_host(out, 1, 0), "a"); /* next to an app=web task */
    json_decref(out);
}

static void refused(const char *doc, const char *needle) {
    char err[256] = "";
    json_t *out = run(doc, err);
    if (out) {
        test_fail(__FILE__, __LINE__, "accepted: %s", doc);
        json_decref(out);
        return;
    }
    if (!strstr(err, needle)) test_fail(__FILE__, __LINE__, "\"%s\" does not contain \"%s\"", err, needle);
}

TEST(place_sim_refuses_bad_input) {
    refused("[]", "input");
    refused("{\"hosts\":[],\"gangs\":[],\"extra\":1}", "unknown field \"extra\"");
    refused("{\"gangs\":[]}", "hosts: required");
    refused("{\"hosts\":[{\"name\":\"a\",\"cpu\":1}],\"gangs\":[]}", "hosts[0]: unknown field \"cpu\"");
    refused("{\"hosts\":[{\"name\":\"a\"},{\"name\":\"a\"}],\"gangs\":[]}", "hosts[1].name: duplicate");
    refused("{\"hosts\":[{\"name\":\"a\",\"backend\":\"yarn\"}],\"gangs\":[]}", "hosts[0].backend");
    refused("{\"hosts\":[{\"name\":\"a\",\"allocatable\":{\"cpu\":\"lots\"}}],\"gangs\":[]}",
            "hosts[0].allocatable.cpu");
    refused("{\"hosts\":[{\"name\":\"a\",\"taints\":[{\"key\":\"k\",\"effect\":\"Never\"}]}],\"gangs\":[]}",
            "hosts[0].taints[0].effect");
    refused("{\"hosts\":[{\"name\":\"a\",\"labels\":{\"z\":\"1\"},\"attributes\":{\"z\":\"2\"}}],\"gangs\":[]}",
            "hosts[0].attributes.z");
    refused("{\"hosts\":[],\"gangs\":[{\"id\":\"g\"}]}", "gangs[0]: give either");
    refused("{\"hosts\":[],\"gangs\":[{\"id\":\"g\",\"strategy\":\"RANDOM\",\"task\":{}}]}", "gangs[0].strategy");
    refused("{\"hosts\":[],\"gangs\":[{\"id\":\"g\",\"tasks\":[{\"resource\":{}}]}]}",
            "gangs[0].tasks[0]: unknown field \"resource\"");
    refused("{\"hosts\":[],\"gangs\":[{\"id\":\"g\",\"tasks\":[]}]}", "gangs[0].tasks: expected a non-empty");
    refused("{\"hosts\":[],\"gangs\":[{\"id\":\"g\",\"count\":0,\"task\":{}}]}", "gangs[0].count");
    refused("{\"hosts\":[],\"gangs\":[{\"task\":{\"affinity\":{\"nodeAffinity\":{"
            "\"requiredDuringSchedulingIgnoredDuringExecution\":{\"nodeSelectorTerms\":[{\"matchExpressions\":"
            "[{\"key\":\"k\",\"operator\":\"Near\"}]}]}}}}}]}",
            "nodeSelectorTerms[0].matchExpressions[0].operator");
    refused("{\"hosts\":[],\"gangs\":[{\"task\":{\"affinity\":{\"nodeAffinity\":{"
            "\"requiredDuringSchedulingIgnoredDuringExecution\":{\"nodeSelectorTerms\":[{\"matchExpressions\":"
            "[{\"key\":\"k\",\"operator\":\"Gt\",\"values\":[\"ten\"]}]}]}}}}}]}",
            "exactly one integer");
    refused("{\"hosts\":[],\"gangs\":[{\"task\":{\"tolerations\":[{\"operator\":\"Equal\"}]}}]}",
            "gangs[0].task.tolerations[0].operator");
    refused("{\"hosts\":[],\"gangs\":[{\"task\":{\"constraint\":{\"type\":\"LABEL\"}}}]}",
            "gangs[0].task.constraint.labelConstraint: required");
    refused("{\"hosts\":[],\"gangs\":[{\"task\":{\"constraint\":{\"type\":\"LABEL\",\"labelConstraint\":"
            "{\"kind\":\"RACK\",\"condition\":\"EQUAL\",\"label\":{\"key\":\"k\"}}}}}]}",
            "labelConstraint.kind");
    refused("{\"hosts\":[],\"gangs\":[],\"options\":{\"maxGangs\":-1}}", "options.maxGangs");
    refused("{\"hosts\":[],\"gangs\":[],\"options\":{\"spread\":true}}", "options: unknown field");
}

TEST(place_sim_deep_constraint_refused) {
    char doc[8192], err[256] = "";
    size_t n = 0;
    n += (size_t)snprintf(doc + n, sizeof doc - n, "{\"hosts\":[],\"gangs\":[{\"task\":{\"constraint\":");
    for (int i = 0; i < 20; i++)
        n += (size_t)snprintf(doc + n, sizeof doc - n, "{\"type\":\"OR\",\"orConstraint\":{\"constraints\":[");
    n += (size_t)snprintf(doc + n, sizeof doc - n, "{\"type\":\"AND\",\"andConstraint\":{}}");
    for (int i = 0; i < 20; i++) n += (size_t)snprintf(doc + n, sizeof doc - n, "]}}");
    snprintf(doc + n, sizeof doc - n, "}}]}");
    json_t *out = run(doc, err);
    CHECK(out == NULL);
    CHECK_HAS(err, "nested deeper than");
    json_decref(out);
}

/* Replaces the n-th value (pre-order, root excluded) of v by r; returns the
 * number of values seen. */
static int replace_nth(json_t *v, int *n, json_t *r) {
    int seen = 0;
    if (json_is_object(v)) {
        const char *key;
        json_t *val;
        void *tmp;
        json_object_foreach_safe(v, tmp, key, val) {
            seen++;
            if ((*n)-- == 0) {
                json_object_set(v, key, r);
                return seen;
            }
            seen += replace_nth(val, n, r);
            if (*n < 0) return seen;
        }
    } else if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++) {
            seen++;
            if ((*n)-- == 0) {
                json_array_set(v, i, r);
                return seen;
            }
            seen += replace_nth(json_array_get(v, i), n, r);
            if (*n < 0) return seen;
        }
    }
    return seen;
}

TEST(place_sim_survives_every_value_replaced) {
    const char *doc =
        "{\"hosts\":[{\"name\":\"a\",\"backend\":\"mesos\",\"allocatable\":{\"cpu\":4,\"memory\":\"8Gi\",\"gpu\":1},"
        "\"allocated\":{\"cpu\":\"1\"},\"labels\":{\"zone\":\"a\",\"n\":\"5\"},\"attributes\":{\"rack\":\"r\"},"
        "\"taints\":[{\"key\":\"k\",\"value\":\"v\",\"effect\":\"NoSchedule\"}],\"unschedulable\":false,"
        "\"tasks\":[{\"job\":\"j\",\"labels\":{\"app\":\"x\"}}]},{\"name\":\"b\",\"allocatable\":{\"cpu\":2}}],"
        "\"gangs\":[{\"id\":\"g\",\"job\":\"j\",\"strategy\":\"SPREAD_JOB\",\"tasks\":[{\"resources\":{\"cpu\":1},"
        "\"nodeSelector\":{\"zone\":\"a\"},\"labels\":{\"app\":\"x\"},\"hostHint\":\"a\","
        "\"tolerations\":[{\"key\":\"k\",\"operator\":\"Equal\",\"value\":\"v\",\"effect\":\"NoSchedule\"}],"
        "\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{\"nodeSelectorTerms\":"
        "[{\"matchExpressions\":[{\"key\":\"n\",\"operator\":\"Gt\",\"values\":[\"3\"]}]}]}}},"
        "\"constraint\":{\"type\":\"OR\",\"orConstraint\":{\"constraints\":[{\"type\":\"LABEL\",\"labelConstraint\":"
        "{\"kind\":\"TASK\",\"condition\":\"LESS_THAN\",\"label\":{\"key\":\"app\",\"value\":\"x\"},\"requirement\":2}}]}}}]},"
        "{\"count\":2,\"task\":{\"resources\":{\"gpu\":\"500m\"}}}],"
        "\"options\":{\"gpuHostsForAnyTask\":true,\"maxGangs\":5,\"spreadMaxCandidates\":3}}";
    json_t *base = json_loads(doc, 0, NULL);
    REQUIRE(base);
    char err[256];
    json_t *out = sim_place(base, err, sizeof err);
    REQUIRE(out);
    CHECK_I64(json_array_size(json_object_get(out, "placements")), 1); /* the gpu gang lacks the toleration */
    json_decref(out);
    json_t *repl[] = {json_null(), json_integer(-1), json_real(1e30), json_string("x"), json_array(),
                      json_object(), json_true()};
    int total = 0, accepted = 0;
    for (int i = 0;; i++) {
        int done = 1;
        for (size_t r = 0; r < sizeof repl / sizeof repl[0]; r++) {
            json_t *copy = json_deep_copy(base);
            int n = i;
            replace_nth(copy, &n, repl[r]);
            if (n >= 0) { json_decref(copy); break; } /* past the last value */
            done = 0;
            total++;
            err[0] = '\0';
            out = sim_place(copy, err, sizeof err);
            if (out) accepted++;
            else CHECK(err[0] != '\0');
            json_decref(out);
            json_decref(copy);
        }
        if (done) break;
    }
    CHECK(total > 300);
    CHECK(accepted > 0 && accepted < total);
    for (size_t r = 0; r < sizeof repl / sizeof repl[0]; r++) json_decref(repl[r]);
    json_decref(base);
}
