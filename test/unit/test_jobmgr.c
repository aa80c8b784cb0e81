/* jobmgr's pure pieces: the pod built for an instance, pod phase -> task
 * state, template versions, DAEMON node eligibility, the status object. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "jobmgr_int.h"
#include "labels.h"
#include "podspec.h"
#include "test.h"

static json_t *load(const char *s) {
    json_error_t e;
    json_t *j = json_loads(s, 0, &e);
    if (!j) fprintf(stderr, "bad JSON in test: %s\n", e.text);
    return j;
}

static const char *TPL =
    "{\"metadata\": {\"labels\": {\"app\": \"web\", \"n\": 3}, \"annotations\": {\"team\": \"ml\"}},"
    " \"spec\": {\"restartPolicy\": \"Always\", \"nodeName\": \"sneaky\","
    "          \"containers\": [{\"name\": \"c\", \"image\": \"busybox\"}]}}";

static const char *lab(const json_t *pod, const char *k) {
    return json_string_value(json_object_get(json_object_get(json_object_get(pod, "metadata"), "labels"), k));
}
static const char *ann(const json_t *pod, const char *k) {
    return json_string_value(json_object_get(json_object_get(json_object_get(pod, "metadata"), "annotations"), k));
}
static const char *spec_s(const json_t *pod, const char *k) {
    return json_string_value(json_object_get(json_object_get(pod, "spec"), k));
}

static struct jm_pod_params params(enum job_type type, uint32_t instance, uint32_t run) {
    static struct crd_job_extra x = {.priority = 7, .preemptible = true, .revocable = false};
    return (struct jm_pod_params){.job = "train", .ns = "ml", .uid = "u-1", .pool = "p1", .type = type,
                                  .instance = instance, .run = run, .version = 42, .failures = 1, .lost = 2,
                                  .gang = instance, .gang_size = 1, .scheduler = NULL, .x = &x};
}

TEST(jobmgr_pod_name_runs) {
    char b[64];
    CHECK_I64(jm_pod_name(b, sizeof b, "train", 2, 1), 0);
    CHECK_STR(b, "train-2");
    CHECK_I64(jm_pod_name(b, sizeof b, "train", 2, 0), 0);
    CHECK_STR(b, "train-2");
    CHECK_I64(jm_pod_name(b, sizeof b, "train", 2, 3), 0);
    CHECK_STR(b, "train-2-3");
    CHECK_I64(jm_pod_name(b, 6, "train", 2, 3), -ENAMETOOLONG);
}

/* Generated names: <base>-<5 of kube's characters>, the same for the same
 * run, another for another run, instance, uid or salt. */
TEST(jobmgr_pod_name_generated) {
    char a[64], b[64];
    CHECK_I64(jm_pod_name_generated(a, sizeof a, "web-6b9f7c", "u-1", 2, 1, 0), 0);
    CHECK_I64(strlen(a), strlen("web-6b9f7c-") + 5);
    CHECK(!strncmp(a, "web-6b9f7c-", 11));
    for (const char *p = a + 11; *p; p++) CHECK(strchr("bcdfghjklmnpqrstvwxz2456789", *p) != NULL);
    CHECK_I64(jm_pod_name_generated(b, sizeof b, "web-6b9f7c", "u-1", 2, 1, 0), 0);
    CHECK_STR(a, b);
    static const struct { const char *uid; uint32_t instance, run, salt; } other[] = {
        {"u-2", 2, 1, 0}, {"u-1", 3, 1, 0}, {"u-1", 2, 2, 0}, {"u-1", 2, 1, 1}};
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        CHECK_I64(jm_pod_name_generated(b, sizeof b, "web-6b9f7c", other[i].uid, other[i].instance, other[i].run,
                                        other[i].salt), 0);
        if (!strcmp(a, b)) test_fail(__FILE__, __LINE__, "case %zu: the same name %s", i, b);
    }
    CHECK_I64(jm_pod_name_generated(b, 10, "web-6b9f7c", "u-1", 2, 1, 0), -ENAMETOOLONG);
    /* the pod: named from the job and its template's pod-template-hash */
    json_t *tpl = load("{\"metadata\": {\"labels\": {\"app\": \"web\", \"pod-template-hash\": \"6b9f7c\"}},"
                       " \"spec\": {\"containers\": [{\"name\": \"c\", \"image\": \"nginx\"}]}}");
    struct jm_pod_params p = params(JOB_STATELESS, 2, 1);
    p.job = "web";
    p.uid = "u-1";
    p.generated = true;
    char err[256] = "";
    json_t *pod = jm_pod_build(tpl, &p, err, sizeof err);
    REQUIRE(pod);
    CHECK_STR(json_string_value(json_object_get(json_object_get(pod, "metadata"), "name")), a);
    CHECK_STR(lab(pod, PL_INSTANCE), "2");
    CHECK_STR(lab(pod, "pod-template-hash"), "6b9f7c");
    json_decref(pod);
    json_object_del(json_object_get(json_object_get(tpl, "metadata"), "labels"), "pod-template-hash");
    pod = jm_pod_build(tpl, &p, err, sizeof err); /* no hash: <job>-<5> (a DaemonSet's, a batch Job's) */
    REQUIRE(pod);
    const char *name = json_string_value(json_object_get(json_object_get(pod, "metadata"), "name"));
    CHECK(!strncmp(name, "web-", 4) && strlen(name) == 9);
    json_decref(pod);
    json_decref(tpl);
}

TEST(jobmgr_pod_build_batch) {
    json_t *tpl = load(TPL);
    char *before = json_dumps(tpl, JSON_SORT_KEYS);
    struct jm_pod_params p = params(JOB_BATCH, 2, 1);
    char err[256] = "";
    json_t *pod = jm_pod_build(tpl, &p, err, sizeof err);
    REQUIRE(pod);
    const json_t *md = json_object_get(pod, "metadata");
    CHECK_STR(json_string_value(json_object_get(pod, "kind")), "Pod");
    CHECK_STR(json_string_value(json_object_get(md, "name")), "train-2");
    CHECK_STR(json_string_value(json_object_get(md, "namespace")), "ml");
    CHECK_STR(lab(pod, "app"), "web");
    CHECK(!lab(pod, "n")); /* not a string: dropped */
    CHECK_STR(lab(pod, PL_JOB), "train");
    CHECK_STR(lab(pod, PL_INSTANCE), "2");
    CHECK_STR(lab(pod, PL_POOL), "p1");
    CHECK(!lab(pod, PL_GANG));
    CHECK(!lab(pod, PL_GANG_SIZE));
    CHECK_STR(ann(pod, "team"), "ml");
    CHECK_STR(ann(pod, PA_PRIORITY), "7");
    CHECK_STR(ann(pod, PA_PREEMPTIBLE), "true");
    CHECK_STR(ann(pod, PA_REVOCABLE), "false");
    CHECK_STR(ann(pod, JM_A_CONFIG_VERSION), "42");
    CHECK_STR(ann(pod, JM_A_RUN), "1");
    CHECK_STR(ann(pod, JM_A_FAILURES), "1");
    CHECK_STR(ann(pod, JM_A_LOST), "2");
    CHECK(!ann(pod, JM_A_DAEMON_NODE));
    const json_t *ow = json_array_get(json_object_get(md, "ownerReferences"), 0);
    CHECK_I64(json_array_size(json_object_get(md, "ownerReferences")), 1);
    CHECK_STR(json_string_value(json_object_get(ow, "apiVersion")), "peloton.io/v1alpha1");
    CHECK_STR(json_string_value(json_object_get(ow, "kind")), "Job");
    CHECK_STR(json_string_value(json_object_get(ow, "name")), "train");
    CHECK_STR(json_string_value(json_object_get(ow, "uid")), "u-1");
    CHECK(json_is_true(json_object_get(ow, "controller")));
    CHECK(json_is_true(json_object_get(ow, "blockOwnerDeletion")));
    CHECK_STR(spec_s(pod, "schedulerName"), "peloton");
    CHECK_STR(spec_s(pod, "restartPolicy"), "Never");
    CHECK(!spec_s(pod, "nodeName"));
    CHECK(!json_object_get(json_object_get(pod, "spec"), "affinity"));
    CHECK_STR(json_string_value(json_object_get(json_array_get(json_object_get(json_object_get(pod, "spec"),
                                                                               "containers"), 0), "image")),
              "busybox");
    char *after = json_dumps(tpl, JSON_SORT_KEYS);
    CHECK_STR(after, before); /* the template is not touched */
    free(before);
    free(after);
    json_decref(pod);
    json_decref(tpl);
}

TEST(jobmgr_pod_build_gang_and_scheduler) {
    json_t *tpl = load(TPL);
    struct jm_pod_params p = params(JOB_BATCH, 1, 4);
    p.gang = 0;
    p.gang_size = 3;
    p.scheduler = "other";
    struct crd_job_extra x = {.priority = 0, .preemptible = true, .revocable = true};
    p.x = &x;
    char err[256];
    json_t *pod = jm_pod_build(tpl, &p, err, sizeof err);
    REQUIRE(pod);
    CHECK_STR(json_string_value(json_object_get(json_object_get(pod, "metadata"), "name")), "train-1-4");
    CHECK_STR(lab(pod, PL_GANG), "train-gang-0");
    CHECK_STR(lab(pod, PL_GANG_SIZE), "3");
    CHECK_STR(ann(pod, PA_REVOCABLE), "true");
    CHECK_STR(ann(pod, PA_PREEMPTIBLE), "true");
    CHECK_STR(ann(pod, JM_A_RUN), "4");
    CHECK_STR(spec_s(pod, "schedulerName"), "other");
    json_decref(pod);
    json_decref(tpl);
}

/* A gang started after the first (replacements) has its own label. */
TEST(jobmgr_gang_names_per_start) {
    char b[64];
    CHECK_I64(jm_gang_name(b, sizeof b, "train", 0, 1), 0);
    CHECK_STR(b, "train-gang-0");
    CHECK_I64(jm_gang_name(b, sizeof b, "train", 2, 3), 0);
    CHECK_STR(b, "train-gang-2-3");
    CHECK_I64(jm_gang_name(b, 8, "train", 2, 3), -ENAMETOOLONG);
    json_t *tpl = load(TPL);
    struct jm_pod_params p = params(JOB_BATCH, 3, 2);
    p.gang = 2;
    p.gang_run = 2;
    p.gang_size = 2;
    char err[256];
    json_t *pod = jm_pod_build(tpl, &p, err, sizeof err);
    REQUIRE(pod);
    CHECK_STR(lab(pod, PL_GANG), "train-gang-2-2");
    CHECK_STR(lab(pod, PL_GANG_SIZE), "2");
    json_decref(pod);
    json_decref(tpl);
}

/* Services spread by default; batch packs; the template's annotation wins. */
TEST(jobmgr_pod_build_services_spread_by_default) {
    json_t *tpl = load(TPL);
    char err[256];
    static const enum job_type types[] = {JOB_STATELESS, JOB_STATEFUL, JOB_BATCH};
    static const char *const want[] = {"SPREAD_JOB", "SPREAD_JOB", NULL};
    for (int i = 0; i < 3; i++) {
        struct jm_pod_params p = params(types[i], 0, 1);
        json_t *pod = jm_pod_build(tpl, &p, err, sizeof err);
        REQUIRE(pod);
        if (want[i]) CHECK_STR(ann(pod, PA_STRATEGY), want[i]);
        else CHECK(!ann(pod, PA_STRATEGY));
        json_decref(pod);
    }
    json_object_set_new(json_object_get(json_object_get(tpl, "metadata"), "annotations"), PA_STRATEGY,
                        json_string("PACK"));
    struct jm_pod_params p = params(JOB_STATELESS, 0, 1);
    json_t *pod = jm_pod_build(tpl, &p, err, sizeof err);
    REQUIRE(pod);
    CHECK_STR(ann(pod, PA_STRATEGY), "PACK");
    json_decref(pod);
    json_decref(tpl);
}

static const json_t *expr0(const json_t *term) {
    return json_array_get(json_object_get(term, "matchExpressions"), 0);
}

TEST(jobmgr_pod_build_daemon_pinned) {
    json_t *tpl = load(TPL);
    struct jm_pod_params p = params(JOB_DAEMON, 0, 1);
    p.host = "node-a";
    char err[256];
    json_t *pod = jm_pod_build(tpl, &p, err, sizeof err);
    REQUIRE(pod);
    CHECK_STR(ann(pod, JM_A_DAEMON_NODE), "node-a");
    const json_t *terms = json_object_get(
        json_object_get(json_object_get(json_object_get(json_object_get(pod, "spec"), "affinity"), "nodeAffinity"),
                        "requiredDuringSchedulingIgnoredDuringExecution"),
        "nodeSelectorTerms");
    REQUIRE(json_array_size(terms) == 1);
    const json_t *e = expr0(json_array_get(terms, 0));
    CHECK_STR(json_string_value(json_object_get(e, "key")), JM_HOSTNAME_LABEL);
    CHECK_STR(json_string_value(json_object_get(e, "operator")), "In");
    CHECK_STR(json_string_value(json_array_get(json_object_get(e, "values"), 0)), "node-a");
    json_decref(pod);
    json_decref(tpl);

    /* the template's own terms each get the node requirement (terms are ORed) */
    tpl = load("{\"spec\": {\"containers\": [{\"name\": \"c\"}], \"affinity\": {\"nodeAffinity\": "
               "{\"requiredDuringSchedulingIgnoredDuringExecution\": {\"nodeSelectorTerms\": ["
               "{\"matchExpressions\": [{\"key\": \"zone\", \"operator\": \"In\", \"values\": [\"a\"]}]},"
               "{\"matchExpressions\": [{\"key\": \"zone\", \"operator\": \"In\", \"values\": [\"b\"]}]}]}}}}}");
    pod = jm_pod_build(tpl, &p, err, sizeof err);
    REQUIRE(pod);
    terms = json_object_get(
        json_object_get(json_object_get(json_object_get(json_object_get(pod, "spec"), "affinity"), "nodeAffinity"),
                        "requiredDuringSchedulingIgnoredDuringExecution"),
        "nodeSelectorTerms");
    REQUIRE(json_array_size(terms) == 2);
    for (size_t i = 0; i < 2; i++) {
        const json_t *ex = json_object_get(json_array_get(terms, i), "matchExpressions");
        CHECK_I64(json_array_size(ex), 2);
        CHECK_STR(json_string_value(json_object_get(json_array_get(ex, 1), "key")), JM_HOSTNAME_LABEL);
    }
    json_decref(pod);
    json_decref(tpl);
}

TEST(jobmgr_pod_build_stateful_hint) {
    json_t *tpl = load(TPL);
    struct jm_pod_params p = params(JOB_STATEFUL, 3, 2);
    p.host = "node-b";
    char err[256];
    json_t *pod = jm_pod_build(tpl, &p, err, sizeof err);
    REQUIRE(pod);
    CHECK_STR(ann(pod, JM_A_HOST_HINT), "node-b");
    const json_t *na = json_object_get(json_object_get(json_object_get(pod, "spec"), "affinity"), "nodeAffinity");
    CHECK(!json_object_get(na, "requiredDuringSchedulingIgnoredDuringExecution"));
    const json_t *pref = json_array_get(json_object_get(na, "preferredDuringSchedulingIgnoredDuringExecution"), 0);
    CHECK_I64(json_integer_value(json_object_get(pref, "weight")), 100);
    const json_t *e = expr0(json_object_get(pref, "preference"));
    CHECK_STR(json_string_value(json_array_get(json_object_get(e, "values"), 0)), "node-b");
    json_decref(pod);
    json_decref(tpl);
}

TEST(jobmgr_pod_build_rejects_bad_template) {
    json_t *tpl = load("{\"spec\": 3}");
    struct jm_pod_params p = params(JOB_BATCH, 0, 1);
    char err[256] = "";
    CHECK(jm_pod_build(tpl, &p, err, sizeof err) == NULL);
    CHECK_HAS(err, "spec.template.spec");
    json_decref(tpl);
}

TEST(jobmgr_pod_parse_roundtrip) {
    json_t *tpl = load(TPL);
    struct jm_pod_params p = params(JOB_DAEMON, 5, 3);
    p.host = "n9";
    char err[256];
    json_t *pod = jm_pod_build(tpl, &p, err, sizeof err);
    REQUIRE(pod);
    struct jm_pod_view v;
    REQUIRE(jm_pod_parse(pod, &v) == 0);
    CHECK_STR(v.name, "train-5-3");
    CHECK_STR(v.job, "train");
    CHECK_STR(v.owner_uid, "u-1");
    CHECK_STR(v.pin, "n9");
    CHECK_I64(v.instance, 5);
    CHECK_I64(v.run, 3);
    CHECK_I64(v.version, 42);
    CHECK_I64(v.failures, 1);
    CHECK_I64(v.lost, 2);
    CHECK(!v.bound);
    CHECK(!v.deleting);
    CHECK_I64(v.state, TASK_PENDING);
    /* a bad instance label is not a job pod */
    json_object_set_new(json_object_get(json_object_get(pod, "metadata"), "labels"), PL_INSTANCE, json_string("-1"));
    CHECK_I64(jm_pod_parse(pod, &v), -EINVAL);
    json_object_set_new(json_object_get(json_object_get(pod, "metadata"), "labels"), PL_INSTANCE,
                        json_string("99999999"));
    CHECK_I64(jm_pod_parse(pod, &v), -EINVAL);
    json_decref(pod);
    json_decref(tpl);
}

static enum task_state state_of(const char *phase, const char *node, bool deleting, bool node_gone) {
    json_t *pod = json_pack("{s:{}, s:{}, s:{}}", "metadata", "spec", "status");
    if (phase) json_object_set_new(json_object_get(pod, "status"), "phase", json_string(phase));
    if (node) json_object_set_new(json_object_get(pod, "spec"), "nodeName", json_string(node));
    if (deleting)
        json_object_set_new(json_object_get(pod, "metadata"), "deletionTimestamp", json_string("2026-01-01T00:00:00Z"));
    enum task_state s = jm_pod_state(pod, node_gone);
    json_decref(pod);
    return s;
}

TEST(jobmgr_pod_phase_to_task_state) {
    CHECK_I64(state_of("Pending", NULL, false, false), TASK_PENDING);
    CHECK_I64(state_of(NULL, NULL, false, false), TASK_PENDING);
    CHECK_I64(state_of("Pending", "n1", false, false), TASK_LAUNCHED);
    CHECK_I64(state_of("Running", "n1", false, false), TASK_RUNNING);
    CHECK_I64(state_of("Succeeded", "n1", false, false), TASK_SUCCEEDED);
    CHECK_I64(state_of("Failed", "n1", false, false), TASK_FAILED);
    CHECK_I64(state_of("Unknown", "n1", false, false), TASK_LOST);
    CHECK_I64(state_of("Running", "n1", false, true), TASK_LOST);   /* node gone */
    CHECK_I64(state_of("Pending", NULL, false, true), TASK_PENDING); /* unbound: no node to lose */
    CHECK_I64(state_of("Running", "n1", true, false), TASK_KILLING);
    CHECK_I64(state_of("Succeeded", "n1", true, true), TASK_SUCCEEDED); /* terminal wins */
    CHECK_I64(state_of("Failed", "n1", true, false), TASK_FAILED);
}

TEST(jobmgr_template_version) {
    json_t *a = load("{\"spec\": {\"containers\": [{\"name\": \"c\", \"image\": \"v1\"}]}, \"metadata\": {}}");
    json_t *b = load("{\"metadata\": {}, \"spec\": {\"containers\": [{\"image\": \"v1\", \"name\": \"c\"}]}}");
    json_t *c = load("{\"metadata\": {}, \"spec\": {\"containers\": [{\"image\": \"v2\", \"name\": \"c\"}]}}");
    CHECK(jm_template_version(a) != 0);
    CHECK_I64(jm_template_version(a), jm_template_version(b)); /* key order does not matter */
    CHECK(jm_template_version(a) != jm_template_version(c));
    CHECK_I64(jm_template_version(NULL), 1);
    json_decref(a);
    json_decref(b);
    json_decref(c);
}

/* The names jm_fleet_eligible finds for pod over nodes, comma-joined. */
static void eligible_names(const json_t *const *nodes, size_t n, const char *pod_json, char *out, size_t len) {
    json_t *pod = load(pod_json);
    struct jm_fleet *fl = jm_fleet_new(nodes, n, NULL);
    const char *names[16];
    size_t k = 0;
    char err[256] = "";
    out[0] = 0;
    if (!fl || jm_fleet_size(fl) > 16 || jm_fleet_eligible(fl, pod, names, &k, err, sizeof err))
        snprintf(out, len, "error: %s", err);
    for (size_t i = 0; i < k; i++) {
        if (i) strncat(out, ",", len - strlen(out) - 1);
        strncat(out, names[i], len - strlen(out) - 1);
    }
    jm_fleet_free(fl);
    json_decref(pod);
}

#define READY "\"status\": {\"conditions\": [{\"type\": \"Ready\", \"status\": \"True\"}], " \
              "\"allocatable\": {\"cpu\": \"4\", \"memory\": \"8Gi\"}}"

/* A DAEMON's nodes are those placement would accept its pod on: the same
 * filters (before, a hand-written subset that let GPU hosts, exclusive hosts
 * and node affinity through, and pods then stayed Pending there forever). */
TEST(jobmgr_daemon_node_eligibility) {
    const char *src[] = {
        "{\"metadata\": {\"name\": \"n1\", \"labels\": {\"disk\": \"ssd\", \"zone\": \"a\"}}, " READY "}",
        "{\"metadata\": {\"name\": \"n2\"}, \"status\": {\"conditions\": [{\"type\": \"Ready\", \"status\": "
        "\"Unknown\"}], \"allocatable\": {\"cpu\": \"4\"}}}",
        "{\"metadata\": {\"name\": \"n3\"}, \"spec\": {\"unschedulable\": true}, " READY "}",
        "{\"metadata\": {\"name\": \"n4\"}, \"spec\": {\"taints\": [{\"key\": \"gpu\", \"value\": \"yes\", "
        "\"effect\": \"NoSchedule\"}]}, " READY "}",
        "{\"metadata\": {\"name\": \"n5\"}, \"spec\": {\"taints\": [{\"key\": \"x\", \"effect\": "
        "\"PreferNoSchedule\"}]}, " READY "}",
        "{\"metadata\": {\"name\": \"n6\", \"labels\": {\"zone\": \"b\"}}, \"status\": {\"conditions\": [{\"type\": "
        "\"Ready\", \"status\": \"True\"}], \"allocatable\": {\"cpu\": \"4\", \"nvidia.com/gpu\": \"1\"}}}",
        "{\"metadata\": {\"name\": \"n7\", \"labels\": {\"peloton/exclusive\": \"db\"}}, " READY "}",
        "{\"metadata\": {\"name\": \"n8\"}, \"status\": {\"conditions\": [{\"type\": \"Ready\", \"status\": "
        "\"True\"}], \"allocatable\": {\"cpu\": \"1\"}}}",
    };
    json_t *nodes[8];
    for (int i = 0; i < 8; i++) nodes[i] = load(src[i]);
    const json_t *const *nv = (const json_t *const *)nodes;
    char got[256];
    /* a plain pod: not NotReady n2, cordoned n3, tainted n4, the GPU host n6
     * (kept for GPU pods), the exclusive host n7 */
    eligible_names(nv, 8, "{\"metadata\": {}, \"spec\": {\"containers\": [{\"name\": \"c\", \"resources\": "
                          "{\"requests\": {\"cpu\": \"500m\"}}}]}}", got, sizeof got);
    CHECK_STR(got, "n1,n5,n8");
    /* more cpu than n8 can ever give; tolerating the taint */
    eligible_names(nv, 8, "{\"metadata\": {}, \"spec\": {\"tolerations\": [{\"key\": \"gpu\", \"operator\": "
                          "\"Exists\"}], \"containers\": [{\"name\": \"c\", \"resources\": {\"requests\": "
                          "{\"cpu\": \"2\"}}}]}}", got, sizeof got);
    CHECK_STR(got, "n1,n4,n5");
    /* a GPU pod: only the GPU host has the gpu */
    eligible_names(nv, 8, "{\"metadata\": {}, \"spec\": {\"containers\": [{\"name\": \"c\", \"resources\": "
                          "{\"limits\": {\"nvidia.com/gpu\": \"1\"}}}]}}", got, sizeof got);
    CHECK_STR(got, "n6");
    /* nodeSelector, required node affinity, the exclusive host asked for by name */
    eligible_names(nv, 8, "{\"metadata\": {}, \"spec\": {\"nodeSelector\": {\"disk\": \"ssd\"}, "
                          "\"containers\": [{\"name\": \"c\"}]}}", got, sizeof got);
    CHECK_STR(got, "n1");
    eligible_names(nv, 8, "{\"metadata\": {}, \"spec\": {\"affinity\": {\"nodeAffinity\": "
                          "{\"requiredDuringSchedulingIgnoredDuringExecution\": {\"nodeSelectorTerms\": "
                          "[{\"matchExpressions\": [{\"key\": \"zone\", \"operator\": \"In\", \"values\": [\"a\", "
                          "\"b\"]}]}]}}}, \"containers\": [{\"name\": \"c\"}]}}", got, sizeof got);
    CHECK_STR(got, "n1"); /* n6 is in zone b but a GPU host */
    eligible_names(nv, 8, "{\"metadata\": {}, \"spec\": {\"nodeSelector\": {\"peloton/exclusive\": \"db\"}, "
                          "\"containers\": [{\"name\": \"c\"}]}}", got, sizeof got);
    CHECK_STR(got, "n7");
    /* a pod placement cannot read is an error, not an empty set */
    eligible_names(nv, 8, "{\"metadata\": {}, \"spec\": {\"containers\": [{\"name\": \"c\", \"resources\": "
                          "{\"requests\": {\"cpu\": \"lots\"}}}]}}", got, sizeof got);
    CHECK(!strncmp(got, "error: ", 7));
    /* no nodes */
    eligible_names(nv, 0, "{\"metadata\": {}, \"spec\": {\"containers\": [{\"name\": \"c\"}]}}", got, sizeof got);
    CHECK_STR(got, "");
    for (int i = 0; i < 8; i++) json_decref(nodes[i]);
}

/* What makes the job manager look at its DAEMONs again after a node update. */
TEST(jobmgr_node_same_ignores_heartbeats) {
    json_t *a = load("{\"metadata\": {\"name\": \"n1\"}, \"status\": {\"conditions\": [{\"type\": \"Ready\", "
                     "\"status\": \"True\", \"lastHeartbeatTime\": \"t1\"}]}}");
    json_t *b = load("{\"metadata\": {\"name\": \"n1\"}, \"status\": {\"conditions\": [{\"type\": \"Ready\", "
                     "\"status\": \"True\", \"lastHeartbeatTime\": \"t2\"}]}}");
    CHECK(jm_node_same(a, b));
    json_object_set_new(json_object_get(b, "metadata"), "labels", json_pack("{s:s}", "zone", "a"));
    CHECK(!jm_node_same(a, b));
    json_object_del(json_object_get(b, "metadata"), "labels");
    json_object_set_new(json_object_get(b, "status"), "allocatable", json_pack("{s:s}", "nvidia.com/gpu", "1"));
    CHECK(!jm_node_same(a, b));
    json_object_del(json_object_get(b, "status"), "allocatable");
    json_object_set_new(b, "spec", json_pack("{s:b}", "unschedulable", 1));
    CHECK(!jm_node_same(a, b));
    json_decref(a);
    json_decref(b);
}

TEST(jobmgr_status_object) {
    struct job_counts c = {0};
    c.n[TASK_RUNNING] = 2;
    c.n[TASK_SUCCEEDED] = 1;
    c.total = 3;
    json_t *st = jm_status_build(JOB_RUNNING, &c, NULL, NULL);
    REQUIRE(st);
    CHECK_STR(json_string_value(json_object_get(st, "state")), "RUNNING");
    CHECK_I64(json_integer_value(json_object_get(json_object_get(st, "taskStats"), "RUNNING")), 2);
    CHECK_I64(json_integer_value(json_object_get(json_object_get(st, "taskStats"), "FAILED")), 0);
    CHECK(!json_object_get(st, "conditions"));
    struct jm_update_status u = {.state = UPDATE_ROLLING_FORWARD, .from = 1, .to = 2, .done = 1, .count = 3,
                                 .batch = 1, .ncurrent = 1, .current = {2}};
    json_t *su = jm_status_build(JOB_RUNNING, &c, &u, NULL);
    REQUIRE(su);
    const json_t *cond = json_array_get(json_object_get(su, "conditions"), 0);
    CHECK_STR(json_string_value(json_object_get(cond, "type")), "Update");
    CHECK_STR(json_string_value(json_object_get(cond, "status")), "Unknown");
    CHECK_STR(json_string_value(json_object_get(cond, "reason")), "ROLLING_FORWARD");
    CHECK_HAS(json_string_value(json_object_get(cond, "message")), "1/3 done");
    const json_t *up = json_object_get(su, "update");
    CHECK_STR(json_string_value(json_object_get(up, "state")), "ROLLING_FORWARD");
    CHECK_STR(json_string_value(json_object_get(up, "progress")), "1/3");
    CHECK_I64(json_integer_value(json_object_get(up, "toVersion")), 2);
    CHECK_I64(json_integer_value(json_object_get(up, "instancesDone")), 1);
    CHECK_I64(json_integer_value(json_object_get(up, "batchSize")), 1);
    CHECK_I64(json_array_size(json_object_get(up, "currentBatch")), 1);
    CHECK_I64(json_integer_value(json_array_get(json_object_get(up, "currentBatch"), 0)), 2);
    CHECK(!json_object_get(su, "backoff"));
    u.state = UPDATE_ROLLED_BACK;
    u.failed = 1;
    u.ncurrent = 0;
    struct jm_backoff_status bo = {.n = 21};
    for (uint32_t k = 0; k < JM_STATUS_BACKOFF_MAX; k++)
        bo.items[k].instance = k, bo.items[k].restarts = 3, bo.items[k].delay_s = 40, bo.items[k].restart_at = 86400;
    json_t *sr = jm_status_build(JOB_RUNNING, &c, &u, &bo);
    CHECK_STR(json_string_value(json_object_get(json_object_get(sr, "update"), "progress")), "1/3, 1 failed");
    CHECK_I64(json_array_size(json_object_get(json_object_get(sr, "update"), "currentBatch")), 0);
    const json_t *b = json_object_get(sr, "backoff");
    CHECK_I64(json_integer_value(json_object_get(b, "instances")), 21);
    CHECK_I64(json_array_size(json_object_get(b, "items")), JM_STATUS_BACKOFF_MAX); /* bounded */
    const json_t *b0 = json_array_get(json_object_get(b, "items"), 0);
    CHECK_STR(json_string_value(json_object_get(b0, "restartAt")), "1970-01-02T00:00:00Z");
    CHECK_I64(json_integer_value(json_object_get(b0, "delaySeconds")), 40);
    CHECK_STR(json_string_value(json_object_get(json_array_get(json_object_get(sr, "conditions"), 0), "status")),
              "False");
    /* the current status has more fields (observedGeneration): still the same */
    json_t *cur = json_deep_copy(st);
    json_object_set_new(cur, "observedGeneration", json_integer(4));
    CHECK(jm_status_same(cur, st));
    CHECK(!jm_status_same(cur, su));
    CHECK(!jm_status_same(NULL, st));
    json_decref(cur);
    json_decref(st);
    json_decref(su);
    json_decref(sr);
}

/* The pods jobmgr makes are what the rest of Peloton reads (podspec.h). */
TEST(jobmgr_pods_decode_for_placement) {
    json_t *tpl = load("{\"spec\": {\"containers\": [{\"name\": \"c\", \"resources\": {\"requests\": "
                       "{\"cpu\": \"500m\", \"memory\": \"64Mi\"}}}]}}");
    enum job_type types[] = {JOB_BATCH, JOB_DAEMON, JOB_STATEFUL};
    for (size_t k = 0; k < 3; k++) {
        struct jm_pod_params p = params(types[k], 1, 2);
        p.gang = 0;
        p.gang_size = 2;
        p.host = types[k] == JOB_BATCH ? NULL : "node-a";
        char err[256] = "";
        json_t *pod = jm_pod_build(tpl, &p, err, sizeof err);
        REQUIRE(pod);
        struct pod_info info;
        int rc = pod_info_decode(pod, &info, err, sizeof err);
        CHECK_I64(rc, 0);
        if (rc) fprintf(stderr, "  pod_info_decode: %s\n", err);
        if (!rc) {
            CHECK_STR(info.pool, "p1");
            CHECK_STR(info.gang, "train-gang-0");
            CHECK_I64(info.gang_size, 2);
            CHECK_STR(info.job, "train");
            CHECK_I64(info.priority, 7);
            CHECK_STR(info.scheduler, "peloton");
            CHECK_I64(info.req.v[RES_CPU], 500);
            struct pod_task pt;
            rc = pod_task_build(pod, &info, &pt, err, sizeof err);
            CHECK_I64(rc, 0);
            if (rc) fprintf(stderr, "  pod_task_build: %s\n", err);
            if (!rc) {
                CHECK_I64(pt.t.nterms, types[k] == JOB_DAEMON ? 1 : 0);
                pod_task_free(&pt);
            }
        }
        json_decref(pod);
    }
    json_decref(tpl);
}

TEST(jobmgr_pod_parse_owner_must_be_peloton_job) {
    json_t *pod = load("{\"metadata\": {\"name\": \"x-0\", \"labels\": {\"peloton.io/job\": \"x\","
                       " \"peloton.io/instance\": \"0\"}, \"ownerReferences\": [{\"apiVersion\": \"batch/v1\","
                       " \"kind\": \"Job\", \"name\": \"x\", \"uid\": \"u\", \"controller\": true}]}}");
    struct jm_pod_view v;
    REQUIRE(jm_pod_parse(pod, &v) == 0);
    CHECK(v.owner_uid == NULL);
    CHECK_I64(v.run, 1); /* no annotation: the first run */
    json_decref(pod);
}

TEST(jobmgr_parse_u32_strict) {
    CHECK_I64(jm_parse_u32("0"), 0);
    CHECK_I64(jm_parse_u32("4294967295"), 4294967295LL);
    CHECK_I64(jm_parse_u32("4294967296"), -1);
    CHECK_I64(jm_parse_u32("99999999999"), -1);
    CHECK_I64(jm_parse_u32("-1"), -1);
    CHECK_I64(jm_parse_u32("+1"), -1);
    CHECK_I64(jm_parse_u32("1x"), -1);
    CHECK_I64(jm_parse_u32(""), -1);
    CHECK_I64(jm_parse_u32(NULL), -1);
}

/* Condition PoolReady: replaced, not duplicated; its time kept while its
 * status stays; the Update condition left alone. */
TEST(jobmgr_status_pool_condition) {
    json_t *st = load("{\"state\": \"PENDING\", \"conditions\": [{\"type\": \"Update\", \"status\": \"Unknown\"}]}");
    REQUIRE(jm_status_set_pool(st, NULL, JM_POOL_NOT_FOUND, "p1", "2026-01-01T00:00:00Z") == 0);
    json_t *conds = json_object_get(st, "conditions");
    CHECK_I64(json_array_size(conds), 2);
    const json_t *c = json_array_get(conds, 1);
    CHECK_STR(json_string_value(json_object_get(c, "type")), "PoolReady");
    CHECK_STR(json_string_value(json_object_get(c, "status")), "False");
    CHECK_STR(json_string_value(json_object_get(c, "reason")), "PoolNotFound");
    CHECK_STR(json_string_value(json_object_get(c, "message")),
              "resource pool \"p1\" not found: the job's pods are created once it exists");
    json_t *stored = json_deep_copy(st);
    /* the same status later: the time it turned stays */
    REQUIRE(jm_status_set_pool(st, stored, JM_POOL_NOT_FOUND, "p1", "2026-01-01T00:05:00Z") == 0);
    CHECK_I64(json_array_size(conds), 2);
    CHECK_STR(json_string_value(json_object_get(json_array_get(conds, 1), "lastTransitionTime")),
              "2026-01-01T00:00:00Z");
    CHECK(jm_status_same(stored, st));
    /* another reason with the same status keeps the time too; a new status takes now */
    REQUIRE(jm_status_set_pool(st, stored, JM_POOL_NOT_LEAF, "p1", "2026-01-01T00:06:00Z") == 0);
    CHECK_STR(json_string_value(json_object_get(json_array_get(conds, 1), "reason")), "PoolNotLeaf");
    CHECK_STR(json_string_value(json_object_get(json_array_get(conds, 1), "lastTransitionTime")),
              "2026-01-01T00:00:00Z");
    REQUIRE(jm_status_set_pool(st, stored, JM_POOL_OK, "p1", "2026-01-01T00:07:00Z") == 0);
    c = json_array_get(conds, 1);
    CHECK_STR(json_string_value(json_object_get(c, "status")), "True");
    CHECK_STR(json_string_value(json_object_get(c, "reason")), "PoolFound");
    CHECK_STR(json_string_value(json_object_get(c, "lastTransitionTime")), "2026-01-01T00:07:00Z");
    CHECK_STR(json_string_value(json_object_get(json_array_get(conds, 0), "type")), "Update");
    json_decref(stored);
    json_decref(st);
    /* no conditions yet */
    st = load("{\"state\": \"RUNNING\"}");
    REQUIRE(jm_status_set_pool(st, NULL, JM_POOL_OK, "p1", "t") == 0);
    CHECK_I64(json_array_size(json_object_get(st, "conditions")), 1);
    json_decref(st);
}

static json_t *waiting_pod(const char *reason, const char *message) {
    if (!reason) return json_pack("{s:{s:s}}", "status", "phase", "Pending");
    return json_pack("{s:{s:s, s:[{s:s, s:s, s:s, s:s}]}}", "status", "phase", "Pending", "conditions", "type",
                     "PodScheduled", "status", "False", "reason", reason, "message", message);
}

/* Running says why the job does not run yet: the most common reason among
 * its waiting pods' PodScheduled=False, one message of it; True once every
 * instance runs. lastTransitionTime stays while the status holds. */
TEST(jobmgr_status_running_condition) {
    json_t *w[4] = {waiting_pod("WaitingForGang", "gang g waits for 2 more members"),
                    waiting_pod("WaitingForAdmission", "pool /a: cpu entitlement 2 < allocation 2 + gang 1"),
                    waiting_pod("WaitingForAdmission", "queued behind another gang"), waiting_pod(NULL, NULL)};
    struct job_counts counts = {0};
    counts.n[TASK_PENDING] = 4;
    counts.n[TASK_RUNNING] = 1;
    counts.total = 5;
    json_t *st = load("{\"state\": \"PENDING\"}");
    REQUIRE(jm_status_set_running(st, NULL, (const json_t *const *)w, 4, &counts, "2026-01-01T00:00:00Z") == 0);
    const json_t *c = json_array_get(json_object_get(st, "conditions"), 0);
    CHECK_STR(json_string_value(json_object_get(c, "type")), "Running");
    CHECK_STR(json_string_value(json_object_get(c, "status")), "False");
    CHECK_STR(json_string_value(json_object_get(c, "reason")), "WaitingForAdmission");
    CHECK_STR(json_string_value(json_object_get(c, "message")),
              "2 of 4 waiting pods: WaitingForAdmission; e.g. pool /a: cpu entitlement 2 < allocation 2 + gang 1");
    json_t *stored = json_deep_copy(st);
    json_decref(st);
    /* pods not yet looked at */
    st = load("{\"state\": \"PENDING\"}");
    REQUIRE(jm_status_set_running(st, stored, (const json_t *const *)&w[3], 1, &counts, "2026-01-01T00:01:00Z") == 0);
    c = json_array_get(json_object_get(st, "conditions"), 0);
    CHECK_STR(json_string_value(json_object_get(c, "reason")), "WaitingForScheduler");
    CHECK_STR(json_string_value(json_object_get(c, "lastTransitionTime")), "2026-01-01T00:00:00Z");
    json_decref(st);
    /* every instance runs */
    counts.n[TASK_PENDING] = 0;
    counts.n[TASK_RUNNING] = 5;
    st = load("{\"state\": \"RUNNING\"}");
    REQUIRE(jm_status_set_running(st, stored, NULL, 0, &counts, "2026-01-01T00:02:00Z") == 0);
    c = json_array_get(json_object_get(st, "conditions"), 0);
    CHECK_STR(json_string_value(json_object_get(c, "status")), "True");
    CHECK_STR(json_string_value(json_object_get(c, "reason")), "AllRunning");
    CHECK_STR(json_string_value(json_object_get(c, "message")), "5 of 5 instances run");
    CHECK_STR(json_string_value(json_object_get(c, "lastTransitionTime")), "2026-01-01T00:02:00Z");
    json_decref(st);
    /* some ended, none waits */
    counts.n[TASK_RUNNING] = 2;
    counts.n[TASK_SUCCEEDED] = 3;
    st = load("{\"state\": \"RUNNING\"}");
    REQUIRE(jm_status_set_running(st, stored, NULL, 0, &counts, "2026-01-01T00:03:00Z") == 0);
    c = json_array_get(json_object_get(st, "conditions"), 0);
    CHECK_STR(json_string_value(json_object_get(c, "reason")), "NotAllRunning");
    CHECK_STR(json_string_value(json_object_get(c, "lastTransitionTime")), "2026-01-01T00:00:00Z");
    json_decref(st);
    json_decref(stored);
    for (int i = 0; i < 4; i++) json_decref(w[i]);
}
