/* Tests for the scheduler-extender's handlers in process (scheduler-extender/
 * extender_srv.h): a cluster model built from JSON objects, then filter,
 * prioritize, preempt and the bind decision on it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "extender_srv.h"
#include "ext_int.h" /* ext_metrics_latency */
#include "test.h"

static json_t *node_obj(const char *name, const char *cpu, const char *mem) {
    return json_pack("{s:{s:s, s:{s:s}}, s:{}, s:{s:{s:s, s:s, s:s}, s:[{s:s, s:s}]}}", "metadata", "name", name,
                     "labels", "zone", "z1", "spec", "status", "allocatable", "cpu", cpu, "memory", mem, "pods", "110",
                     "conditions", "type", "Ready", "status", "True");
}

static json_t *pool_obj(const char *name, const char *res, const char *limit) {
    return json_pack("{s:s, s:s, s:{s:s}, s:{s:[{s:s, s:s, s:s}]}}", "apiVersion", "peloton.io/v1alpha1", "kind",
                     "ResourcePool", "metadata", "name", name, "spec", "resources", "kind", "cpu", "reservation", res,
                     "limit", limit);
}

/* A pod of pool `pool` (NULL: none) asking for cpu; bound when node is set. */
static json_t *pod_obj(const char *name, const char *pool, const char *cpu, const char *node, int prio, int second) {
    char uid[64], ts[64];
    snprintf(uid, sizeof uid, "uid-%s", name);
    snprintf(ts, sizeof ts, "2026-01-01T00:00:%02dZ", second % 60);
    json_t *labels = json_object();
    if (pool) json_object_set_new(labels, "peloton.io/resource-pool", json_string(pool));
    json_t *p = json_pack("{s:{s:s, s:s, s:s, s:s, s:o, s:{}}, s:{s:s, s:i, s:[{s:s, s:{s:{s:s, s:s}}}]}, s:{s:s}}",
                          "metadata", "name", name, "namespace", "default", "uid", uid, "creationTimestamp", ts,
                          "labels", labels, "annotations", "spec", "schedulerName", "default-scheduler", "priority",
                          prio, "containers", "name", "c", "resources", "requests", "cpu", cpu, "memory", "64Mi",
                          "status", "phase", node ? "Running" : "Pending");
    if (node) json_object_set_new(json_object_get(p, "spec"), "nodeName", json_string(node));
    return p;
}

static void set_new(struct ext_core *x, const char *kind, json_t *obj) {
    if (!obj || ext_core_set(x, kind, obj)) test_fail(__FILE__, __LINE__, "cannot set a %s", kind);
    json_decref(obj);
}

static void annotate(json_t *pod, const char *field, const char *k, const char *v) {
    json_object_set_new(json_object_get(json_object_get(pod, "metadata"), field), k, json_string(v));
}

/* 4 nodes of 2 cpu; pools team-a and team-b, each reserving 2 cpu with a limit of 8. */
static struct ext_core *cluster4(void) {
    struct ext_core *x = ext_core_new(NULL);
    char name[16];
    for (int i = 1; i <= 4; i++) {
        snprintf(name, sizeof name, "n%d", i);
        set_new(x, "Node", node_obj(name, "2", "8Gi"));
    }
    set_new(x, "ResourcePool", pool_obj("team-a", "2", "8"));
    set_new(x, "ResourcePool", pool_obj("team-b", "2", "8"));
    set_new(x, "Namespace", json_pack("{s:{s:s}}", "metadata", "name", "default"));
    return x;
}

static struct extender_args *args_for(json_t *pod, const char *const *nodes, size_t n, bool node_cache) {
    json_t *names = json_array(), *items = json_array();
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(names, json_string(nodes[i]));
        json_array_append_new(items, json_pack("{s:{s:s}}", "metadata", "name", nodes[i]));
    }
    json_t *body;
    if (node_cache) {
        body = json_pack("{s:O, s:n, s:o}", "Pod", pod, "Nodes", "NodeNames", names);
        json_decref(items);
    } else {
        body = json_pack("{s:O, s:{s:o}, s:n}", "Pod", pod, "Nodes", "items", items, "NodeNames");
        json_decref(names);
    }
    struct extender_args *a = NULL;
    char err[256];
    if (extender_decode_args(body, &a, err, sizeof err)) test_fail(__FILE__, __LINE__, "decode: %s", err);
    json_decref(body);
    return a;
}

static const char *const ALL[] = {"n1", "n2", "n3", "n4"};

/* Runs filter; returns the reply (caller frees). */
static json_t *filter(struct ext_core *x, json_t *pod, const char *const *nodes, size_t n, bool node_cache,
                      uint64_t now) {
    struct extender_args *a = args_for(pod, nodes, n, node_cache);
    json_t *out = NULL;
    if (a && ext_filter(x, a, now, &out)) test_fail(__FILE__, __LINE__, "ext_filter failed");
    extender_args_free(a);
    return out;
}

static size_t passing(const json_t *r) {
    const json_t *nn = json_object_get(r, "NodeNames");
    if (json_is_array(nn)) return json_array_size(nn);
    return json_array_size(json_object_get(json_object_get(r, "Nodes"), "items"));
}

static const char *failed(const json_t *r, const char *list, const char *node) {
    return json_string_value(json_object_get(json_object_get(r, list), node));
}

/* team-a holds 8 cpu (2 pods of 1 cpu on each node). */
static void fill_team_a(struct ext_core *x) {
    char name[16], node[16];
    for (int i = 0; i < 8; i++) {
        snprintf(name, sizeof name, "a%d", i);
        snprintf(node, sizeof node, "n%d", i / 2 + 1);
        set_new(x, "Pod", pod_obj(name, "team-a", "1", node, i % 3, i));
    }
}

TEST(ext_srv_filter_passes_fitting_nodes_in_both_modes) {
    struct ext_core *x = cluster4();
    json_t *pod = pod_obj("p1", "team-a", "1", NULL, 0, 1);
    const char *nodes[] = {"n1", "n2", "nx"};
    for (int mode = 0; mode < 2; mode++) {
        json_t *r = filter(x, pod, nodes, 3, mode == 0, 0);
        REQUIRE(r);
        CHECK_I64(passing(r), 2);
        CHECK_HAS(failed(r, "FailedAndUnresolvableNodes", "nx"), "node nx not in the extender's cache");
        CHECK_STR(json_string_value(json_object_get(r, "Error")), "");
        if (mode == 0) CHECK(json_is_null(json_object_get(r, "Nodes")));
        else CHECK(json_is_null(json_object_get(r, "NodeNames")));
        json_decref(r);
    }
    json_decref(pod);
    ext_core_free(x);
}

TEST(ext_srv_filter_resources_per_node) {
    struct ext_core *x = cluster4();
    set_new(x, "Pod", pod_obj("b0", "team-b", "2", "n1", 0, 0));
    json_t *pod = pod_obj("p1", "team-a", "1500m", NULL, 0, 1);
    json_t *r = filter(x, pod, ALL, 4, true, 0);
    REQUIRE(r);
    CHECK_I64(passing(r), 3);
    CHECK_STR(failed(r, "FailedNodes", "n1"), "insufficient cpu");
    json_decref(r);
    json_decref(pod);
    ext_core_free(x);
}

TEST(ext_srv_entitlement_across_two_pools) {
    struct ext_core *x = cluster4();
    fill_team_a(x); /* borrowing: team-b is idle, so team-a may use up to its limit */
    json_t *a9 = pod_obj("a9", "team-a", "1", NULL, 0, 20);
    json_t *r = filter(x, a9, ALL, 4, true, 0);
    REQUIRE(r);
    CHECK_I64(passing(r), 0);
    /* at its limit 8: only its own lower-priority work could make room */
    const char *why = failed(r, "FailedNodes", "n1");
    CHECK_HAS(why, "team-a");
    CHECK_HAS(why, "cpu");
    json_decref(r);
    /* team-b's pods are still admitted (the nodes are full, so per node it is cpu) */
    json_t *b1 = pod_obj("b1", "team-b", "2", NULL, 5, 21);
    r = filter(x, b1, ALL, 4, true, 0);
    REQUIRE(r);
    CHECK_STR(failed(r, "FailedNodes", "n1"), "insufficient cpu");
    json_decref(r);
    json_decref(a9);
    json_decref(b1);
    ext_core_free(x);
}

TEST(ext_srv_preempt_takes_victims_from_the_pool_over_entitlement) {
    struct ext_core *x = cluster4();
    fill_team_a(x);
    /* team-b now wants 4 cpu: team-a's entitlement falls to 4 and it is 4 over */
    set_new(x, "Pod", pod_obj("b2", "team-b", "1", NULL, 0, 22));
    set_new(x, "Pod", pod_obj("b3", "team-b", "1", NULL, 0, 23));
    json_t *b1 = pod_obj("b1", "team-b", "2", NULL, 5, 21);
    json_t *body = json_pack("{s:O, s:n, s:{s:{s:[], s:i}, s:{s:[], s:i}, s:n}}", "Pod", b1, "NodeNameToVictims",
                             "NodeNameToMetaVictims", "n1", "Pods", "NumPDBViolations", 0, "n2", "Pods",
                             "NumPDBViolations", 1, "nx");
    struct extender_preemption_args *pa;
    char err[256];
    REQUIRE_I64(extender_decode_preemption_args(body, &pa, err, sizeof err), 0);
    json_t *out = NULL;
    REQUIRE_I64(ext_preempt(x, pa, &out, err, sizeof err), 0);
    json_t *m = json_object_get(out, "NodeNameToMetaVictims");
    CHECK_I64(json_object_size(m), 2);
    json_t *n1 = json_object_get(json_object_get(m, "n1"), "Pods");
    REQUIRE_I64(json_array_size(n1), 2); /* 2 cpu needed: both team-a pods on n1 */
    CHECK_HAS(json_string_value(json_object_get(json_array_get(n1, 0), "UID")), "uid-a");
    CHECK_I64(json_integer_value(json_object_get(json_object_get(m, "n2"), "NumPDBViolations")), 1);
    json_decref(out);
    extender_preemption_args_free(pa);
    json_decref(body);

    /* team-a's own pod never preempts its over-entitlement siblings */
    json_t *a9 = pod_obj("a9", "team-a", "1", NULL, 9, 30);
    body = json_pack("{s:O, s:n, s:{s:{s:[], s:i}}}", "Pod", a9, "NodeNameToVictims", "NodeNameToMetaVictims", "n1",
                     "Pods", "NumPDBViolations", 0);
    REQUIRE_I64(extender_decode_preemption_args(body, &pa, err, sizeof err), 0);
    REQUIRE_I64(ext_preempt(x, pa, &out, err, sizeof err), 0);
    CHECK_I64(json_object_size(json_object_get(out, "NodeNameToMetaVictims")), 0);
    json_decref(out);
    extender_preemption_args_free(pa);
    json_decref(body);
    json_decref(a9);
    json_decref(b1);
    ext_core_free(x);
}

TEST(ext_srv_preempt_within_the_pool_by_priority_never_non_preemptible) {
    struct ext_core *x = cluster4();
    /* team-b alone: n1 holds a low-priority pod and a non-preemptible one */
    json_t *low = pod_obj("b-low", "team-b", "1", "n1", 1, 1);
    set_new(x, "Pod", low);
    json_t *np = pod_obj("b-np", "team-b", "1", "n1", 0, 2);
    annotate(np, "annotations", "peloton.io/preemptible", "false");
    set_new(x, "Pod", np);
    json_t *hi = pod_obj("b-hi", "team-b", "2", NULL, 10, 3);
    json_t *body = json_pack("{s:O, s:n, s:{s:{s:[], s:i}}}", "Pod", hi, "NodeNameToVictims", "NodeNameToMetaVictims",
                             "n1", "Pods", "NumPDBViolations", 0);
    struct extender_preemption_args *pa;
    char err[256];
    REQUIRE_I64(extender_decode_preemption_args(body, &pa, err, sizeof err), 0);
    json_t *out = NULL;
    REQUIRE_I64(ext_preempt(x, pa, &out, err, sizeof err), 0);
    /* evicting b-low alone leaves 1 cpu: not enough, and b-np is never a victim */
    CHECK_I64(json_object_size(json_object_get(out, "NodeNameToMetaVictims")), 0);
    json_decref(out);
    extender_preemption_args_free(pa);
    json_decref(body);
    json_decref(hi);
    /* a 1-cpu preemptor of higher priority gets b-low */
    hi = pod_obj("b-hi1", "team-b", "1", NULL, 10, 4);
    set_new(x, "Pod", pod_obj("b-fill", "team-b", "1", "n2", 0, 5));
    body = json_pack("{s:O, s:n, s:{s:{s:[], s:i}}}", "Pod", hi, "NodeNameToVictims", "NodeNameToMetaVictims", "n1",
                     "Pods", "NumPDBViolations", 0);
    REQUIRE_I64(extender_decode_preemption_args(body, &pa, err, sizeof err), 0);
    REQUIRE_I64(ext_preempt(x, pa, &out, err, sizeof err), 0);
    json_t *v = json_object_get(json_object_get(json_object_get(out, "NodeNameToMetaVictims"), "n1"), "Pods");
    REQUIRE_I64(json_array_size(v), 1);
    CHECK_STR(json_string_value(json_object_get(json_array_get(v, 0), "UID")), "uid-b-low");
    json_decref(out);
    extender_preemption_args_free(pa);
    json_decref(body);
    json_decref(hi);
    ext_core_free(x);
}

static json_t *preempt_on(struct ext_core *x, json_t *pod, const char *node) {
    json_t *body = json_pack("{s:O, s:n, s:{s:{s:[], s:i}}}", "Pod", pod, "NodeNameToVictims", "NodeNameToMetaVictims",
                             node, "Pods", "NumPDBViolations", 0);
    struct extender_preemption_args *pa;
    char err[256];
    json_t *out = NULL;
    if (extender_decode_preemption_args(body, &pa, err, sizeof err)) test_fail(__FILE__, __LINE__, "%s", err);
    if (ext_preempt(x, pa, &out, err, sizeof err)) test_fail(__FILE__, __LINE__, "%s", err);
    extender_preemption_args_free(pa);
    json_decref(body);
    return out;
}

static size_t victims_on(json_t *out, const char *node, const char *uid_part) {
    json_t *v = json_object_get(json_object_get(json_object_get(out, "NodeNameToMetaVictims"), node), "Pods");
    size_t n = 0;
    for (size_t i = 0; i < json_array_size(v); i++)
        if (!uid_part || strstr(json_string_value(json_object_get(json_array_get(v, i), "UID")), uid_part)) n++;
    return n;
}

/* A gang is one preemption unit: all its members are victims or none. */
TEST(ext_srv_preempt_never_breaks_a_gang) {
    struct ext_core *x = cluster4();
    char name[16];
    /* gang s spread over n1 and n2; gang t whole on n3; each beside a single low pod */
    for (int i = 0; i < 2; i++) {
        snprintf(name, sizeof name, "s%d", i);
        json_t *m = pod_obj(name, "team-b", "1", i ? "n2" : "n1", 1, i);
        annotate(m, "labels", "peloton.io/gang", "s");
        annotate(m, "labels", "peloton.io/gang-size", "2");
        set_new(x, "Pod", m);
        snprintf(name, sizeof name, "t%d", i);
        m = pod_obj(name, "team-b", "1", "n3", 1, 10 + i);
        annotate(m, "labels", "peloton.io/gang", "t");
        annotate(m, "labels", "peloton.io/gang-size", "2");
        set_new(x, "Pod", m);
    }
    set_new(x, "Pod", pod_obj("lone1", "team-b", "1", "n1", 1, 20));
    /* 2 cpu on n1: s0 and lone1 would make room, but s0 alone breaks gang s */
    json_t *hi = pod_obj("hi", "team-b", "2", NULL, 10, 30);
    json_t *out = preempt_on(x, hi, "n1");
    CHECK_I64(json_object_size(json_object_get(out, "NodeNameToMetaVictims")), 0);
    json_decref(out);
    json_decref(hi);
    /* 1 cpu on n3: one member of t would do, but t goes whole */
    hi = pod_obj("hi1", "team-b", "1", NULL, 10, 31);
    out = preempt_on(x, hi, "n3");
    CHECK_I64(victims_on(out, "n3", "uid-t"), 2);
    CHECK_I64(victims_on(out, "n3", NULL), 2);
    json_decref(out);
    /* 1 cpu on n1: the single pod, never the gang's member */
    out = preempt_on(x, hi, "n1");
    CHECK_I64(victims_on(out, "n1", "uid-lone1"), 1);
    CHECK_I64(victims_on(out, "n1", NULL), 1);
    json_decref(out);
    json_decref(hi);
    ext_core_free(x);
}

/* kube-scheduler nominates a preemptor to the node it freed
 * (status.nominatedNodeName): that room is not offered to pods of lower
 * priority, and a preempt for one of them sees the node as full (victims,
 * not an empty answer). */
TEST(ext_srv_nominated_pods_hold_their_room) {
    struct ext_core *x = cluster4();
    set_new(x, "Pod", pod_obj("v", "team-b", "1", "n1", 0, 1));
    json_t *nom = pod_obj("nom", "team-b", "1", NULL, 10, 2);
    json_object_set_new(json_object_get(nom, "status"), "nominatedNodeName", json_string("n1"));
    set_new(x, "Pod", json_incref(nom)); /* from the watch */
    json_t *low = pod_obj("low", "team-b", "1", NULL, 5, 3);
    set_new(x, "Pod", json_incref(low));
    json_t *r = filter(x, low, ALL, 4, true, 0);
    CHECK_I64(passing(r), 3);
    CHECK_HAS(failed(r, "FailedNodes", "n1"), "insufficient cpu: held for nominated pod default/nom");
    json_decref(r);
    /* the nominated pod itself, and pods of higher priority, see the room (equal priority
     * does not, as in kube-scheduler) */
    r = filter(x, nom, ALL, 4, true, 0);
    CHECK_I64(passing(r), 4);
    json_decref(r);
    json_t *top = pod_obj("top", "team-b", "1", NULL, 11, 4);
    r = filter(x, top, ALL, 4, true, 0);
    CHECK_I64(passing(r), 4);
    json_decref(r);
    /* preempt for low on n1: v must go (without the nomination: no victim needed, an empty answer) */
    json_t *out = preempt_on(x, low, "n1");
    CHECK_I64(victims_on(out, "n1", "uid-v"), 1);
    json_decref(out);
    /* a nomination seen first in a request's Pod (the watch lags) holds too */
    json_t *nom2 = pod_obj("nom2", "team-b", "2", NULL, 10, 5);
    set_new(x, "Pod", json_incref(nom2));
    json_object_set_new(json_object_get(nom2, "status"), "nominatedNodeName", json_string("n2"));
    r = filter(x, nom2, ALL, 4, true, 0);
    json_decref(r);
    r = filter(x, low, ALL, 4, true, 0);
    CHECK_HAS(failed(r, "FailedNodes", "n2"), "held for nominated pod default/nom2");
    json_decref(r);
    /* a request's object older than the watch's does not bring back a cleared nomination */
    json_t *nom3 = pod_obj("nom3", "team-b", "2", NULL, 10, 6);
    json_object_set_new(json_object_get(nom3, "metadata"), "resourceVersion", json_string("20"));
    set_new(x, "Pod", json_incref(nom3)); /* the watch: not nominated (any more), rv 20 */
    json_t *stale = json_deep_copy(nom3);
    json_object_set_new(json_object_get(stale, "metadata"), "resourceVersion", json_string("19"));
    json_object_set_new(json_object_get(stale, "status"), "nominatedNodeName", json_string("n4"));
    r = filter(x, stale, ALL, 4, true, 0);
    json_decref(r);
    r = filter(x, low, ALL, 4, true, 0);
    CHECK(failed(r, "FailedNodes", "n4") == NULL);
    json_decref(r);
    json_decref(stale);
    json_decref(nom3);
    /* bound: the pod counts on its node, the hold ends */
    json_object_set_new(json_object_get(nom, "spec"), "nodeName", json_string("n1"));
    set_new(x, "Pod", json_incref(nom));
    json_t *n2b = json_deep_copy(nom2);
    json_object_del(json_object_get(n2b, "status"), "nominatedNodeName"); /* kube-scheduler cleared it */
    set_new(x, "Pod", n2b);
    r = filter(x, low, ALL, 4, true, 0);
    CHECK_I64(passing(r), 3); /* n1 is full now: v and nom */
    CHECK_STR(failed(r, "FailedNodes", "n1"), "insufficient cpu");
    CHECK(failed(r, "FailedNodes", "n2") == NULL);
    json_decref(r);
    json_decref(nom);
    json_decref(nom2);
    json_decref(low);
    json_decref(top);
    ext_core_free(x);
}

/* /metrics: decisions by pool and reason (label values escaped), latency
 * histograms, preempt and model figures, in Prometheus text. */
TEST(ext_srv_metrics_text) {
    struct ext_core *x = cluster4();
    json_t *pod = pod_obj("m1", "team-a", "1", NULL, 0, 1);
    json_t *r = filter(x, pod, ALL, 4, true, 0);
    json_decref(r);
    json_t *odd = pod_obj("m2", "we\"ird\\po\nol", "1", NULL, 0, 2); /* no such pool */
    r = filter(x, odd, ALL, 4, false, 0);
    json_decref(r);
    json_t *np = pod_obj("m3", "team-a", "3", NULL, 0, 3);
    annotate(np, "annotations", "peloton.io/preemptible", "false");
    r = filter(x, np, ALL, 4, true, 0);
    json_decref(r);
    ext_metrics_latency(x, EXTENDER_FILTER, 70000);   /* 70 us: le 0.0001 */
    ext_metrics_latency(x, EXTENDER_FILTER, 9000000000ull); /* 9 s: +Inf only */
    json_t *out = preempt_on(x, pod, "n1");           /* nothing to preempt: an empty answer */
    json_decref(out);
    char *text;
    size_t len;
    REQUIRE_I64(ext_metrics_render(x, &text, &len), 0);
    CHECK_I64(strlen(text), len);
    CHECK_HAS(text, "# HELP peloton_extender_request_duration_seconds ");
    CHECK_HAS(text, "\n# TYPE peloton_extender_request_duration_seconds histogram\n");
    CHECK_HAS(text, "peloton_extender_request_duration_seconds_bucket{verb=\"filter\",le=\"5e-05\"} 0\n");
    CHECK_HAS(text, "peloton_extender_request_duration_seconds_bucket{verb=\"filter\",le=\"0.0001\"} 1\n");
    CHECK_HAS(text, "peloton_extender_request_duration_seconds_bucket{verb=\"filter\",le=\"5\"} 1\n");
    CHECK_HAS(text, "peloton_extender_request_duration_seconds_bucket{verb=\"filter\",le=\"+Inf\"} 2\n");
    CHECK_HAS(text, "peloton_extender_request_duration_seconds_sum{verb=\"filter\"} 9.00007\n");
    CHECK_HAS(text, "peloton_extender_request_duration_seconds_count{verb=\"filter\"} 2\n");
    CHECK_HAS(text, "peloton_extender_filter_decisions_total{pool=\"team-a\",reason=\"admitted\"} 1\n");
    CHECK_HAS(text, "peloton_extender_filter_decisions_total{pool=\"team-a\",reason=\"reservation\"} 1\n");
    CHECK_HAS(text, "peloton_extender_filter_decisions_total{pool=\"we\\\"ird\\\\po\\nol\","
                    "reason=\"pool_unknown\"} 1\n");
    CHECK_HAS(text, "# TYPE peloton_extender_preempt_empty_total counter\npeloton_extender_preempt_empty_total 1\n");
    CHECK_HAS(text, "peloton_extender_model_nodes 4\n");
    CHECK(strstr(text, "cache_synced") == NULL); /* no informers */
    /* the three bind results from the start, and the model's gauges set before the text is written */
    CHECK_HAS(text, "peloton_extender_binds_total{result=\"bound\"} 0\n");
    CHECK_HAS(text, "peloton_extender_binds_total{result=\"already\"} 0\n");
    CHECK_HAS(text, "peloton_extender_binds_total{result=\"failed\"} 0\n");
    CHECK_HAS(text, "\npeloton_extender_pool_tree_valid 1\n");
    CHECK_HAS(text, "\npeloton_extender_filter_decisions_dropped_total 0\n");
    free(text);
    json_decref(pod);
    json_decref(odd);
    json_decref(np);
    ext_core_free(x);
}

/* Pool status in extender mode: the model's entitlement, allocation and
 * demand, and a TreeValid condition; a set of pools that breaks a tree rule
 * is a condition on every pool, and the last valid tree stays in force. */
TEST(ext_srv_pool_status_and_an_invalid_tree) {
    struct ext_core *x = cluster4();
    set_new(x, "Pod", pod_obj("a0", "team-a", "1", "n1", 0, 1));
    set_new(x, "Pod", pod_obj("a1", "team-a", "1", NULL, 0, 2));
    json_t *ta = pool_obj("team-a", "2", "8");
    json_object_set_new(json_object_get(ta, "metadata"), "generation", json_integer(3));
    json_t *st = ext_pool_status(x, ta);
    REQUIRE(st);
    CHECK_STR(json_string_value(json_object_get(st, "path")), "/team-a");
    CHECK_STR(json_string_value(json_object_get(json_object_get(st, "allocation"), "cpu")), "1");
    CHECK_STR(json_string_value(json_object_get(json_object_get(st, "demand"), "cpu")), "2");
    CHECK_I64(json_integer_value(json_object_get(st, "observedGeneration")), 3);
    json_t *c = json_array_get(json_object_get(st, "conditions"), 0);
    CHECK_STR(json_string_value(json_object_get(c, "type")), "TreeValid");
    CHECK_STR(json_string_value(json_object_get(c, "status")), "True");
    char *before = json_dumps(json_object_get(st, "entitlement"), JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(st);
    /* a pool whose parent does not exist: the tree is invalid, the last valid one stays */
    json_t *orphan = pool_obj("orphan", "1", "2");
    json_object_set_new(json_object_get(orphan, "spec"), "parent", json_string("nosuch"));
    set_new(x, "ResourcePool", json_incref(orphan));
    st = ext_pool_status(x, ta);
    REQUIRE(st);
    c = json_array_get(json_object_get(st, "conditions"), 0);
    CHECK_STR(json_string_value(json_object_get(c, "status")), "False");
    CHECK_STR(json_string_value(json_object_get(c, "reason")), "InvalidTree");
    CHECK_HAS(json_string_value(json_object_get(c, "message")), "nosuch");
    CHECK_HAS(json_string_value(json_object_get(c, "message")), "the last valid tree stays in force");
    char *after = json_dumps(json_object_get(st, "entitlement"), JSON_COMPACT | JSON_SORT_KEYS);
    CHECK_STR(after, before); /* team-a's numbers still come from the last valid tree */
    free(before);
    free(after);
    json_decref(st);
    st = ext_pool_status(x, orphan);
    REQUIRE(st);
    CHECK(json_object_get(st, "entitlement") == NULL);
    CHECK_HAS(json_string_value(json_object_get(json_array_get(json_object_get(st, "conditions"), 0), "message")),
              "this pool is not in it");
    json_decref(st);
    /* team-a's pods are still admitted under the last valid tree */
    json_t *a2 = pod_obj("a2", "team-a", "1", NULL, 0, 3);
    json_t *r = filter(x, a2, ALL, 4, true, 0);
    CHECK_I64(passing(r), 4);
    json_decref(r);
    /* fixed: valid again */
    ext_core_del(x, "ResourcePool", orphan);
    st = ext_pool_status(x, ta);
    CHECK_STR(json_string_value(json_object_get(json_array_get(json_object_get(st, "conditions"), 0), "status")),
              "True");
    json_decref(st);
    json_decref(a2);
    json_decref(orphan);
    json_decref(ta);
    ext_core_free(x);
}

TEST(ext_srv_non_preemptible_work_stays_within_the_reservation) {
    struct ext_core *x = cluster4();
    json_t *np = pod_obj("np", "team-a", "3", NULL, 0, 1);
    annotate(np, "annotations", "peloton.io/preemptible", "false");
    json_t *r = filter(x, np, ALL, 4, true, 0);
    REQUIRE(r);
    const char *why = failed(r, "FailedAndUnresolvableNodes", "n2");
    CHECK_HAS(why, "team-a");
    CHECK_HAS(why, "reservation");
    json_decref(r);
    json_decref(np);
    ext_core_free(x);
}

TEST(ext_srv_gang_held_until_whole_then_planned) {
    struct ext_core *x = cluster4();
    json_t *m[4];
    char name[16];
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "g%d", i);
        m[i] = pod_obj(name, "team-b", "2", NULL, 0, i);
        annotate(m[i], "labels", "peloton.io/gang", "g");
        annotate(m[i], "labels", "peloton.io/gang-size", "4");
    }
    for (int i = 0; i < 3; i++) set_new(x, "Pod", json_incref(m[i]));
    json_t *r = filter(x, m[0], ALL, 4, true, 1000);
    REQUIRE(r);
    CHECK_I64(passing(r), 0);
    CHECK_HAS(failed(r, "FailedAndUnresolvableNodes", "n1"), "3 of 4");
    json_decref(r);
    set_new(x, "Pod", json_incref(m[3]));
    /* each member passes exactly one node, and the four nodes differ (2 cpu each) */
    const char *seen[4] = {0};
    for (int i = 0; i < 4; i++) {
        r = filter(x, m[i], ALL, 4, true, 1000);
        REQUIRE(r);
        json_t *nn = json_object_get(r, "NodeNames");
        REQUIRE_I64(json_array_size(nn), 1);
        const char *n = json_string_value(json_array_get(nn, 0));
        for (int j = 0; j < i; j++) CHECK(strcmp(seen[j], n) != 0);
        seen[i] = n == NULL ? "" : (!strcmp(n, "n1") ? "n1" : !strcmp(n, "n2") ? "n2" : !strcmp(n, "n3") ? "n3" : "n4");
        CHECK_HAS(failed(r, "FailedNodes", strcmp(seen[i], "n1") ? "n1" : "n2"), "planned on node");
        json_decref(r);
    }
    /* the planned nodes are held: another pod cannot take them from under the gang */
    json_t *other = pod_obj("other", "team-a", "1", NULL, 0, 9);
    r = filter(x, other, ALL, 4, true, 1000);
    REQUIRE(r);
    CHECK_I64(passing(r), 0);
    CHECK_HAS(failed(r, "FailedNodes", "n3"), "held for gang g");
    json_decref(r);
    struct ext_stats st;
    ext_core_stats(x, &st);
    CHECK_I64(st.gangs_admitted, 1);
    CHECK_I64(st.gangs_held, 1);
    /* binding each member where planned consumes the plan */
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "g%d", i);
        struct extender_binding_args b = {name, "default", "", (char *)seen[i]};
        char why[128];
        CHECK_I64(ext_bind_decide(x, &b, why, sizeof why), EXT_BIND_POST);
        ext_bind_commit(x, &b);
        CHECK_I64(ext_bind_decide(x, &b, why, sizeof why), EXT_BIND_OK);
    }
    ext_core_stats(x, &st);
    CHECK_I64(st.gangs_held, 0);
    json_decref(other);
    /* a gang that cannot fit together is refused as a whole */
    for (int i = 0; i < 4; i++) json_decref(m[i]);
    for (int i = 0; i < 2; i++) {
        snprintf(name, sizeof name, "h%d", i);
        m[i] = pod_obj(name, "team-a", "1", NULL, 0, i);
        annotate(m[i], "labels", "peloton.io/gang", "h");
        annotate(m[i], "labels", "peloton.io/gang-size", "2");
        set_new(x, "Pod", json_incref(m[i]));
    }
    r = filter(x, m[0], ALL, 4, true, 2000);
    REQUIRE(r);
    CHECK_I64(passing(r), 0);
    CHECK_HAS(failed(r, "FailedNodes", "n1"), "do not fit together");
    json_decref(r);
    for (int i = 0; i < 2; i++) json_decref(m[i]);
    ext_core_free(x);
}

/* kube-scheduler filters the next pod while the last one's Binding is still
 * with the API server: an accepted bind counts at once, a failed one gives
 * the room back, a second bind of a pod in flight is posted again. */
TEST(ext_srv_binds_in_flight_count_against_the_reservation) {
    struct ext_core *x = cluster4();
    json_t *np[3];
    char name[16], why[256];
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "np%d", i);
        np[i] = pod_obj(name, "team-a", "1", NULL, 0, i);
        annotate(np[i], "annotations", "peloton.io/preemptible", "false");
        json_t *c0 = json_array_get(json_object_get(json_object_get(np[i], "spec"), "containers"), 0);
        json_object_del(json_object_get(json_object_get(c0, "resources"), "requests"), "memory"); /* cpu pools */
        set_new(x, "Pod", json_incref(np[i]));
    }
    struct extender_binding_args b0 = {"np0", "default", "uid-np0", "n1"}, b1 = {"np1", "default", "uid-np1", "n2"};
    json_t *r = filter(x, np[0], ALL, 4, true, 0);
    CHECK_I64(passing(r), 4);
    json_decref(r);
    CHECK_I64(ext_bind_decide(x, &b0, why, sizeof why), EXT_BIND_POST);
    ext_bind_begin(x, &b0);
    r = filter(x, np[1], ALL, 4, true, 0);
    CHECK_I64(passing(r), 4);
    json_decref(r);
    CHECK_I64(ext_bind_decide(x, &b1, why, sizeof why), EXT_BIND_POST);
    ext_bind_begin(x, &b1);
    /* both binds in flight: the reservation (2) is full */
    r = filter(x, np[2], ALL, 4, true, 0);
    CHECK_I64(passing(r), 0);
    CHECK_HAS(failed(r, "FailedAndUnresolvableNodes", "n3"), "reservation");
    json_decref(r);
    /* kube-scheduler retries np0's bind while the first is in flight: posted again */
    CHECK_I64(ext_bind_inflight(x, &b0), 1);
    CHECK_I64(ext_bind_decide(x, &b0, why, sizeof why), EXT_BIND_POST);
    ext_bind_begin(x, &b0);
    ext_bind_abort(x, &b0); /* one of the two fails: the other may still take */
    r = filter(x, np[2], ALL, 4, true, 0);
    CHECK_I64(passing(r), 0);
    json_decref(r);
    ext_bind_commit(x, &b0);
    CHECK_I64(ext_bind_decide(x, &b0, why, sizeof why), EXT_BIND_OK);
    /* np1's Binding fails: np2 fits again */
    ext_bind_abort(x, &b1);
    CHECK_I64(ext_bind_inflight(x, &b1), 0);
    r = filter(x, np[2], ALL, 4, true, 0);
    CHECK_I64(passing(r), 4);
    json_decref(r);
    for (int i = 0; i < 3; i++) json_decref(np[i]);
    ext_core_free(x);
}

/* kube-scheduler binds in a goroutine after assuming a pod and filters the
 * next pods before that bind reaches the extender (seen on kube-scheduler
 * 1.20: 8 non-preemptible pods of 0.5 core bound against a reservation of
 * 3): a pod that passes filter counts against its pool at once, for
 * PASS_TTL_MS (5 s) unless it is bound or filtered again. */
TEST(ext_srv_filtered_pods_count_before_their_binds_arrive) {
    struct ext_core *x = cluster4();
    json_t *np[3];
    char name[16];
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "np%d", i);
        np[i] = pod_obj(name, "team-a", "1", NULL, 0, i);
        annotate(np[i], "annotations", "peloton.io/preemptible", "false");
        json_t *c0 = json_array_get(json_object_get(json_object_get(np[i], "spec"), "containers"), 0);
        json_object_del(json_object_get(json_object_get(c0, "resources"), "requests"), "memory"); /* cpu pools */
        set_new(x, "Pod", json_incref(np[i]));
    }
    /* np0 and np1 pass, no bind in between: the reservation (2) is full */
    for (int i = 0; i < 2; i++) {
        json_t *r = filter(x, np[i], ALL, 4, true, 1000);
        CHECK_I64(passing(r), 4);
        json_decref(r);
    }
    json_t *r = filter(x, np[2], ALL, 4, true, 1100);
    CHECK_I64(passing(r), 0);
    CHECK_HAS(failed(r, "FailedAndUnresolvableNodes", "n3"), "reservation");
    json_decref(r);
    /* filtered again, np1 is not counted against itself */
    r = filter(x, np[1], ALL, 4, true, 1200);
    CHECK_I64(passing(r), 4);
    json_decref(r);
    /* np0 is bound; np1 never came back (dropped after the filter): its count
     * ends 5 s after its last filter, and np2 fits */
    struct extender_binding_args b0 = {"np0", "default", "uid-np0", "n1"};
    ext_bind_begin(x, &b0);
    ext_bind_commit(x, &b0);
    r = filter(x, np[2], ALL, 4, true, 6100);
    CHECK_I64(passing(r), 0);
    json_decref(r);
    r = filter(x, np[2], ALL, 4, true, 6300);
    CHECK_I64(passing(r), 4);
    json_decref(r);
    for (int i = 0; i < 3; i++) json_decref(np[i]);
    ext_core_free(x);
    /* a pod filtered before the watch showed it (it came with the request)
     * counts once the watch does */
    x = cluster4();
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "nq%d", i);
        np[i] = pod_obj(name, "team-a", "1", NULL, 0, i);
        annotate(np[i], "annotations", "peloton.io/preemptible", "false");
        json_t *c0 = json_array_get(json_object_get(json_object_get(np[i], "spec"), "containers"), 0);
        json_object_del(json_object_get(json_object_get(c0, "resources"), "requests"), "memory");
    }
    r = filter(x, np[0], ALL, 4, true, 1000); /* not in the model yet */
    CHECK_I64(passing(r), 4);
    json_decref(r);
    for (int i = 0; i < 3; i++) set_new(x, "Pod", json_incref(np[i]));
    r = filter(x, np[1], ALL, 4, true, 1010);
    CHECK_I64(passing(r), 4);
    json_decref(r);
    r = filter(x, np[2], ALL, 4, true, 1020);
    CHECK_I64(passing(r), 0);
    json_decref(r);
    for (int i = 0; i < 3; i++) json_decref(np[i]);
    ext_core_free(x);
}

/* An admitted gang's plan holds room on its nodes only for members that
 * still exist, and only until the plan expires (30 s), whoever is filtered
 * next (seen on a real cluster: a deleted gang's plan kept 3 cores from the
 * next pods until one of its own members came by again). */
TEST(ext_srv_gang_plan_holds_nothing_once_deleted_or_expired) {
    struct ext_core *x = cluster4();
    json_t *m[4];
    char name[16];
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 4; i++) {
            snprintf(name, sizeof name, "g%d", i);
            m[i] = pod_obj(name, "team-b", "2", NULL, 0, i);
            annotate(m[i], "labels", "peloton.io/gang", "g");
            annotate(m[i], "labels", "peloton.io/gang-size", "4");
            set_new(x, "Pod", json_incref(m[i]));
        }
        uint64_t t0 = 1000 + (uint64_t)round * 100000;
        json_t *r = filter(x, m[0], ALL, 4, true, t0);
        REQUIRE_I64(passing(r), 1); /* admitted: every node planned for a member */
        json_decref(r);
        json_t *other = pod_obj("other", "team-a", "1", NULL, 0, 9);
        r = filter(x, other, ALL, 4, true, t0);
        CHECK_I64(passing(r), 0);
        CHECK_HAS(failed(r, "FailedNodes", "n3"), "held for gang g");
        json_decref(r);
        if (round == 0) /* the members deleted: nothing held */
            for (int i = 0; i < 4; i++) ext_core_del(x, "Pod", m[i]);
        r = filter(x, other, ALL, 4, true, round == 0 ? t0 : t0 + 30001); /* round 1: the plan expired */
        CHECK_I64(passing(r), 4);
        json_decref(r);
        json_decref(other);
        for (int i = 0; i < 4; i++) {
            if (round == 1) ext_core_del(x, "Pod", m[i]);
            json_decref(m[i]);
        }
    }
    ext_core_free(x);
}

TEST(ext_srv_bind_decisions) {
    struct ext_core *x = cluster4();
    set_new(x, "Pod", pod_obj("p", "team-a", "1", "n1", 0, 1));
    char why[256] = "";
    struct extender_binding_args same = {"p", "default", "uid-p", "n1"}, other = {"p", "default", "", "n2"},
                                 fresh = {"q", "default", "", "n1"}, recreated = {"p", "default", "uid-new", "n2"};
    CHECK_I64(ext_bind_decide(x, &same, why, sizeof why), EXT_BIND_OK);
    CHECK_I64(ext_bind_decide(x, &other, why, sizeof why), EXT_BIND_ERROR);
    CHECK_HAS(why, "already bound to node n1");
    CHECK_I64(ext_bind_decide(x, &fresh, why, sizeof why), EXT_BIND_POST);
    CHECK_I64(ext_bind_decide(x, &recreated, why, sizeof why), EXT_BIND_POST);
    json_t *b = ext_binding_body(&same);
    char *s = json_dumps(b, JSON_COMPACT);
    CHECK_STR(s, "{\"apiVersion\":\"v1\",\"kind\":\"Binding\",\"metadata\":{\"name\":\"p\",\"namespace\":\"default\","
                 "\"uid\":\"uid-p\"},\"target\":{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"name\":\"n1\"}}");
    free(s);
    json_decref(b);
    ext_core_free(x);
}

TEST(ext_srv_prioritize_by_strategy) {
    struct ext_core *x = cluster4();
    set_new(x, "Pod", pod_obj("b0", "team-b", "1", "n2", 0, 0));
    json_t *pod = pod_obj("p", "team-a", "500m", NULL, 0, 1);
    struct extender_args *a = args_for(pod, ALL, 4, true);
    json_t *out = NULL;
    char err[256];
    REQUIRE_I64(ext_prioritize(x, a, &out, err, sizeof err), 0);
    REQUIRE_I64(json_array_size(out), 4);
    /* PACK (the default): the fuller n2 scores highest */
    int64_t s1 = json_integer_value(json_object_get(json_array_get(out, 0), "Score"));
    int64_t s2 = json_integer_value(json_object_get(json_array_get(out, 1), "Score"));
    CHECK(s2 > s1);
    CHECK_STR(json_string_value(json_object_get(json_array_get(out, 1), "Host")), "n2");
    json_decref(out);
    extender_args_free(a);
    /* LEAST_LOADED by annotation: the other way round */
    annotate(pod, "annotations", "peloton.io/placement-strategy", "LEAST_LOADED");
    set_new(x, "Pod", json_incref(pod));
    a = args_for(pod, ALL, 4, false);
    REQUIRE_I64(ext_prioritize(x, a, &out, err, sizeof err), 0);
    s1 = json_integer_value(json_object_get(json_array_get(out, 0), "Score"));
    s2 = json_integer_value(json_object_get(json_array_get(out, 1), "Score"));
    CHECK(s1 > s2);
    for (size_t i = 0; i < json_array_size(out); i++) {
        int64_t s = json_integer_value(json_object_get(json_array_get(out, i), "Score"));
        CHECK(s >= 0 && s <= 10);
    }
    json_decref(out);
    extender_args_free(a);
    json_decref(pod);
    ext_core_free(x);
}

TEST(ext_srv_unknown_pool_and_bad_pod) {
    struct ext_core *x = cluster4();
    json_t *pod = pod_obj("p", "nope", "1", NULL, 0, 1);
    json_t *r = filter(x, pod, ALL, 2, true, 0);
    REQUIRE(r);
    CHECK_HAS(failed(r, "FailedAndUnresolvableNodes", "n1"), "nope");
    json_decref(r);
    json_decref(pod);
    /* a Pod without a name: an Error reply, not a crash */
    pod = json_pack("{s:{}}", "metadata");
    r = filter(x, pod, ALL, 2, true, 0);
    REQUIRE(r);
    CHECK_HAS(json_string_value(json_object_get(r, "Error")), "name");
    json_decref(r);
    /* a Pod with a malformed request: an Error (or every node failed), never a crash */
    json_decref(pod);
    pod = pod_obj("bad", "team-a", "lots", NULL, 0, 1);
    r = filter(x, pod, ALL, 2, true, 0);
    REQUIRE(r);
    CHECK_I64(passing(r), 0);
    json_decref(r);
    json_decref(pod);
    ext_core_free(x);
}

TEST(ext_srv_demand_above_limit_is_unresolvable) {
    struct ext_core *x = cluster4();
    json_t *pod = pod_obj("big", "team-a", "9", NULL, 0, 1);
    json_t *r = filter(x, pod, ALL, 4, true, 0);
    REQUIRE(r);
    CHECK_HAS(failed(r, "FailedAndUnresolvableNodes", "n4"), "team-a");
    CHECK(json_object_size(json_object_get(r, "FailedNodes")) == 0);
    json_decref(r);
    json_decref(pod);
    ext_core_free(x);
}

TEST(ext_srv_pool_from_namespace_default_or_none) {
    struct ext_core_options o;
    ext_core_options_default(&o);
    o.default_pool = "team-b";
    struct ext_core *x = ext_core_new(&o);
    set_new(x, "Node", node_obj("n1", "2", "8Gi"));
    set_new(x, "ResourcePool", pool_obj("team-a", "1", "1"));
    set_new(x, "ResourcePool", pool_obj("team-b", "1", "1"));
    set_new(x, "Namespace", json_pack("{s:{s:s, s:{s:s}}}", "metadata", "name", "default", "annotations",
                                      "peloton.io/resource-pool", "team-a"));
    set_new(x, "Namespace", json_pack("{s:{s:s}}", "metadata", "name", "other"));
    /* no label: the namespace's pool (team-a, limit 1 cpu) refuses 2 cpu */
    json_t *pod = pod_obj("p", NULL, "2", NULL, 0, 1);
    json_t *r = filter(x, pod, (const char *const[]){"n1"}, 1, true, 0);
    CHECK_HAS(failed(r, "FailedAndUnresolvableNodes", "n1"), "team-a");
    json_decref(r);
    /* another namespace without the annotation: the default pool */
    json_object_set_new(json_object_get(pod, "metadata"), "namespace", json_string("other"));
    r = filter(x, pod, (const char *const[]){"n1"}, 1, true, 0);
    CHECK_HAS(failed(r, "FailedAndUnresolvableNodes", "n1"), "team-b");
    json_decref(r);
    json_decref(pod);
    ext_core_free(x);
    /* no default pool: such pods are unmanaged and only the node filters apply */
    x = ext_core_new(NULL);
    set_new(x, "Node", node_obj("n1", "2", "8Gi"));
    set_new(x, "ResourcePool", pool_obj("team-a", "1", "1"));
    pod = pod_obj("p", NULL, "2", NULL, 0, 1);
    r = filter(x, pod, (const char *const[]){"n1"}, 1, true, 0);
    CHECK_I64(passing(r), 1);
    json_decref(r);
    json_decref(pod);
    ext_core_free(x);
}

TEST(ext_srv_strategy_from_the_job_type) {
    struct ext_core *x = cluster4();
    json_t *run = pod_obj("web-0", "team-a", "1", "n1", 0, 1);
    annotate(run, "labels", "peloton.io/job", "web");
    set_new(x, "Pod", run);
    json_t *pod = pod_obj("web-1", "team-a", "500m", NULL, 0, 2);
    annotate(pod, "labels", "peloton.io/job", "web");
    char err[256];
    json_t *out;
    int64_t s[2][2];
    for (int round = 0; round < 2; round++) {
        if (round == 1) /* a STATELESS job spreads its pods */
            set_new(x, "Job", json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s}}", "apiVersion", "peloton.io/v1alpha1",
                                        "kind", "Job", "metadata", "name", "web", "namespace", "default", "spec",
                                        "type", "STATELESS"));
        struct extender_args *a = args_for(pod, ALL, 2, true);
        REQUIRE_I64(ext_prioritize(x, a, &out, err, sizeof err), 0);
        for (int i = 0; i < 2; i++) s[round][i] = json_integer_value(json_object_get(json_array_get(out, i), "Score"));
        json_decref(out);
        extender_args_free(a);
    }
    CHECK(s[0][0] > s[0][1]); /* PACK without a known job: n1, where web-0 runs */
    CHECK(s[1][0] < s[1][1]); /* SPREAD_JOB: away from web-0 */
    json_decref(pod);
    ext_core_free(x);
}

TEST(ext_srv_deleted_objects_leave_the_model) {
    struct ext_core *x = cluster4();
    json_t *n4 = node_obj("n4", "2", "8Gi");
    ext_core_del(x, "Node", n4);
    json_decref(n4);
    json_t *pod = pod_obj("p", "team-a", "1", NULL, 0, 1);
    json_t *r = filter(x, pod, ALL, 4, true, 0);
    CHECK_I64(passing(r), 3);
    CHECK_HAS(failed(r, "FailedAndUnresolvableNodes", "n4"), "not in the extender's cache");
    json_decref(r);
    struct ext_stats st;
    ext_core_stats(x, &st);
    CHECK_I64(st.pods, 0); /* the request's pod was only borrowed */
    json_decref(pod);
    ext_core_free(x);
}

/* Odd pods (bad quantities, huge gang sizes, wrong types, unknown pools,
 * strategies) through every handler: replies, never a crash or a leak. */
TEST(ext_srv_handlers_survive_odd_pods) {
    struct ext_core *x = cluster4();
    fill_team_a(x);
    static const char *const cpus[] = {"1", "0", "-1", "1e400", "abc", "100000", "500m", ""};
    static const char *const pools[] = {"team-a", "team-b", "nope", "", NULL};
    static const char *const sizes[] = {"4", "0", "-3", "99999999999", "x", "1"};
    static const char *const strat[] = {"PACK", "spread_job", "bogus", ""};
    uint64_t seed = 42;
    for (int i = 0; i < 300; i++) {
        char name[32];
        snprintf(name, sizeof name, "odd-%d", i % 37);
        json_t *pod = pod_obj(name, pools[test_range(&seed, 0, 4)], cpus[test_range(&seed, 0, 7)], NULL,
                              (int)test_range(&seed, -5, 5), i);
        if (test_range(&seed, 0, 2) == 0) {
            annotate(pod, "labels", "peloton.io/gang", "odd");
            annotate(pod, "labels", "peloton.io/gang-size", sizes[test_range(&seed, 0, 5)]);
        }
        if (test_range(&seed, 0, 3) == 0) annotate(pod, "annotations", "peloton.io/placement-strategy",
                                                   strat[test_range(&seed, 0, 3)]);
        if (test_range(&seed, 0, 5) == 0)
            json_object_set_new(json_object_get(pod, "spec"), "containers", json_integer(3));
        if (test_range(&seed, 0, 4) == 0) set_new(x, "Pod", json_incref(pod));
        json_t *r = filter(x, pod, ALL, 4, i & 1, (uint64_t)i * 1000);
        CHECK(r != NULL);
        json_decref(r);
        struct extender_args *a = args_for(pod, ALL, 4, true);
        json_t *out = NULL;
        char err[256];
        if (a && !ext_prioritize(x, a, &out, err, sizeof err)) CHECK(json_array_size(out) == 4);
        json_decref(out);
        extender_args_free(a);
        json_t *body = json_pack("{s:O, s:n, s:{s:{s:[], s:i}, s:{s:[], s:i}}}", "Pod", pod, "NodeNameToVictims",
                                 "NodeNameToMetaVictims", "n1", "Pods", "NumPDBViolations", 0, "n3", "Pods",
                                 "NumPDBViolations", 0);
        struct extender_preemption_args *pa = NULL;
        if (!extender_decode_preemption_args(body, &pa, err, sizeof err)) {
            out = NULL;
            ext_preempt(x, pa, &out, err, sizeof err);
            json_decref(out);
        }
        extender_preemption_args_free(pa);
        json_decref(body);
        json_decref(pod);
    }
    ext_core_free(x);
}

/* ---- the fast path (ext_filter_scan, ext_prioritize_scan) ---- */

/* Sends pod and nodes through both paths on x: the jansson one (decode,
 * ext_filter / ext_prioritize, json_dumps) and the fast one (scan, *_scan,
 * text). The replies must be byte for byte the same (and the errors). */
static void check_paths_agree(struct ext_core *x, json_t *pod, const char *const *nodes, size_t n, int line) {
    json_t *names = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(names, json_string(nodes[i]));
    json_t *body = json_pack("{s:O, s:n, s:o}", "Pod", pod, "Nodes", "NodeNames", names);
    char *text = json_dumps(body, JSON_COMPACT);
    struct extender_scan s = {0};
    if (!text || extender_scan_args(text, strlen(text), &s) != 0) {
        test_fail(__FILE__, line, "the scan does not take the body");
        goto out;
    }
    struct extender_args *a = NULL;
    char err[256] = "", err2[256] = "";
    if (extender_decode_args(body, &a, err, sizeof err)) {
        test_fail(__FILE__, line, "decode: %s", err);
        goto out;
    }
    for (int verb = 0; verb < 2; verb++) {
        json_t *out = NULL;
        struct extender_buf b = {0};
        int rc = verb ? ext_prioritize(x, a, &out, err, sizeof err) : ext_filter(x, a, 0, &out);
        int rc2 = verb ? ext_prioritize_scan(x, &s, &b, err2, sizeof err2) : ext_filter_scan(x, &s, 0, &b);
        char *want = out ? json_dumps(out, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
        if (rc != rc2 || (rc && strcmp(err, err2) != 0))
            test_fail(__FILE__, line, "%s: rc %d \"%s\" vs fast rc %d \"%s\"", verb ? "prioritize" : "filter", rc, err,
                      rc2, err2);
        else if (!rc && (!want || !b.data || strcmp(want, b.data) != 0 || b.len != strlen(want)))
            test_fail(__FILE__, line, "%s:\n    jansson %s\n    fast    %s", verb ? "prioritize" : "filter",
                      want ? want : "(null)", b.data ? b.data : "(null)");
        free(want);
        json_decref(out);
        extender_buf_free(&b);
    }
    extender_args_free(a);
out:
    extender_scan_free(&s);
    free(text);
    json_decref(body);
}

TEST(ext_srv_fast_path_replies_match_jansson) {
    struct ext_core *x = cluster4();
    fill_team_a(x);
    static const char *const mixed[] = {"n1", "n2", "nx", "n3", "n\"odd\\", "caf\xc3\xa9", "n4", "\xf0\x9f\x98\x80"};
    /* fits some nodes; unknown nodes (escapes, unicode) are unresolvable with their own reason */
    json_t *pod = pod_obj("p1", "team-b", "1", NULL, 0, 1);
    check_paths_agree(x, pod, mixed, 8, __LINE__);
    check_paths_agree(x, pod, mixed, 0, __LINE__);
    json_decref(pod);
    /* over the pool's entitlement: every node fails with the pod's reason */
    pod = pod_obj("p2", "team-a", "2", NULL, 0, 2);
    check_paths_agree(x, pod, mixed, 8, __LINE__);
    json_decref(pod);
    /* too big for any node, unknown pool, a pod without a name, a malformed request */
    pod = pod_obj("p3", "team-b", "3", NULL, 0, 3);
    check_paths_agree(x, pod, mixed, 8, __LINE__);
    json_decref(pod);
    pod = pod_obj("p4", "nope", "1", NULL, 0, 4);
    check_paths_agree(x, pod, mixed, 8, __LINE__);
    json_decref(pod);
    pod = json_pack("{s:{}}", "metadata");
    check_paths_agree(x, pod, mixed, 8, __LINE__);
    json_decref(pod);
    pod = pod_obj("p5", "team-b", "lots", NULL, 0, 5);
    check_paths_agree(x, pod, mixed, 8, __LINE__);
    json_decref(pod);
    /* the strategy by annotation */
    pod = pod_obj("p6", "team-b", "500m", NULL, 0, 6);
    annotate(pod, "annotations", "peloton.io/placement-strategy", "LEAST_LOADED");
    check_paths_agree(x, pod, mixed, 8, __LINE__);
    json_decref(pod);
    /* nodes change under the name map: a new node is found, a deleted one is not */
    set_new(x, "Node", node_obj("nx", "4", "8Gi"));
    pod = pod_obj("p7", "team-b", "1", NULL, 0, 7);
    check_paths_agree(x, pod, mixed, 8, __LINE__);
    json_t *gone = node_obj("n2", "2", "8Gi");
    ext_core_del(x, "Node", gone);
    json_decref(gone);
    check_paths_agree(x, pod, mixed, 8, __LINE__);
    /* names longer than a name-map slot holds inline, known and unknown */
    static const char *const longer[] = {"ip-10-0-0-1.ec2.internal.example", "n1", "ip-10-0-0-2.ec2.internal.example",
                                         "exactly-18-bytes-x", "exactly-19-bytes-xy"};
    set_new(x, "Node", node_obj(longer[0], "4", "8Gi"));
    set_new(x, "Node", node_obj(longer[3], "4", "8Gi"));
    set_new(x, "Node", node_obj(longer[4], "4", "8Gi"));
    check_paths_agree(x, pod, longer, 5, __LINE__);
    json_t *r = filter(x, pod, longer, 5, true, 0);
    REQUIRE(r);
    CHECK_HAS(failed(r, "FailedAndUnresolvableNodes", longer[2]), "not in the extender's cache");
    CHECK(failed(r, "FailedAndUnresolvableNodes", longer[0]) == NULL);
    CHECK(failed(r, "FailedAndUnresolvableNodes", longer[4]) == NULL);
    json_decref(r);
    json_decref(pod);
    ext_core_free(x);
}

TEST(ext_srv_fast_path_gang) {
    /* two identical cores: the gang plan is state, so each path gets its own */
    struct ext_core *x[2];
    for (int k = 0; k < 2; k++) {
        x[k] = cluster4();
        for (int i = 0; i < 2; i++) {
            char name[16];
            snprintf(name, sizeof name, "g%d", i);
            json_t *p = pod_obj(name, "team-a", "1", NULL, 0, i);
            annotate(p, "labels", "peloton.io/gang", "g");
            annotate(p, "labels", "peloton.io/gang-size", "2");
            set_new(x[k], "Pod", p);
        }
    }
    json_t *pod = pod_obj("g0", "team-a", "1", NULL, 0, 0);
    annotate(pod, "labels", "peloton.io/gang", "g");
    annotate(pod, "labels", "peloton.io/gang-size", "2");
    json_t *names = json_array();
    for (int i = 0; i < 4; i++) json_array_append_new(names, json_string(ALL[i]));
    json_t *body = json_pack("{s:O, s:n, s:o}", "Pod", pod, "Nodes", "NodeNames", names);
    char *text = json_dumps(body, JSON_COMPACT);
    struct extender_scan s = {0};
    struct extender_args *a = NULL;
    char err[256];
    REQUIRE(text && extender_scan_args(text, strlen(text), &s) == 0);
    REQUIRE(extender_decode_args(body, &a, err, sizeof err) == 0);
    for (int round = 0; round < 2; round++) {
        json_t *out = NULL;
        struct extender_buf b = {0};
        CHECK_I64(ext_filter(x[0], a, 1000, &out), 0);
        CHECK_I64(ext_filter_scan(x[1], &s, 1000, &b), 0);
        char *want = json_dumps(out, JSON_COMPACT);
        CHECK_STR(b.data, want);
        CHECK_HAS(b.data, "planned on node"); /* the gang was admitted and planned */
        free(want);
        json_decref(out);
        extender_buf_free(&b);
    }
    extender_args_free(a);
    extender_scan_free(&s);
    free(text);
    json_decref(body);
    json_decref(pod);
    ext_core_free(x[0]);
    ext_core_free(x[1]);
}

/* ---- the memo: what a filter leaves for the prioritize that follows ---- */

/* The fast path's reply to a NodeNames body of pod and names (the names as
 * kube-scheduler writes them: compact JSON), or NULL; *rc gets the handler's
 * return. */
static char *fast_reply(struct ext_core *x, json_t *pod, json_t *names, bool prioritize, int *rc) {
    json_t *body = json_pack("{s:O, s:n, s:O}", "Pod", pod, "Nodes", "NodeNames", names);
    char *text = json_dumps(body, JSON_COMPACT), err[256] = "";
    json_decref(body);
    struct extender_scan s = {0};
    struct extender_buf b = {0};
    struct extender_names_hint hint; /* as the HTTP handler reads a body */
    bool hinted = ext_core_names_hint(x, &hint);
    *rc = -EAGAIN;
    if (text && extender_scan_args_hinted(text, strlen(text), hinted ? &hint : NULL, &s) == 0)
        *rc = prioritize ? ext_prioritize_scan(x, &s, &b, err, sizeof err) : ext_filter_scan(x, &s, 0, &b);
    extender_scan_free(&s);
    free(text);
    if (*rc) extender_buf_free(&b);
    return b.data;
}

/* The jansson path's prioritize of the same request: it never uses the
 * memo, so it is what prioritize answers without one. */
static char *plain_prioritize(struct ext_core *x, json_t *pod, json_t *names) {
    json_t *body = json_pack("{s:O, s:n, s:O}", "Pod", pod, "Nodes", "NodeNames", names), *out = NULL;
    struct extender_args *a = NULL;
    char err[256], *text = NULL;
    if (!extender_decode_args(body, &a, err, sizeof err) && !ext_prioritize(x, a, &out, err, sizeof err))
        text = json_dumps(out, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(out);
    extender_args_free(a);
    json_decref(body);
    return text;
}

static json_t *names_of(const char *const *nodes, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(a, json_string(nodes[i]));
    return a;
}

/* prioritize of pod and names on the fast path, which must answer what the
 * memo-free path answers; returns how many node scores came from a filter
 * (the memo's hits). *reply (may be NULL) gets the reply text. */
static uint64_t prioritize_checked(struct ext_core *x, json_t *pod, json_t *names, char **reply, int line) {
    struct ext_stats before, after;
    int rc;
    ext_core_stats(x, &before);
    char *got = fast_reply(x, pod, names, true, &rc);
    ext_core_stats(x, &after);
    char *want = plain_prioritize(x, pod, names);
    if (!got || !want || strcmp(got, want))
        test_fail(__FILE__, line, "prioritize:\n    without memo %s\n    fast         %s", want ? want : "(null)",
                  got ? got : "(null)");
    free(want);
    if (reply) *reply = got;
    else free(got);
    return after.scores_reused - before.scores_reused;
}

static void filter_only(struct ext_core *x, json_t *pod, json_t *names) {
    int rc;
    free(fast_reply(x, pod, names, false, &rc));
}

/* kube-scheduler's cycle on the fast path: filter, then (after between, if
 * given) prioritize with the names that passed; returns prioritize_checked's
 * count. */
static uint64_t cycle_checked(struct ext_core *x, json_t *pod, json_t *names, void (*between)(struct ext_core *),
                              int line) {
    int rc;
    char *f = fast_reply(x, pod, names, false, &rc);
    json_t *r = f ? json_loads(f, 0, NULL) : NULL;
    json_t *pass = json_incref(json_object_get(r, "NodeNames"));
    if (!json_is_array(pass)) test_fail(__FILE__, line, "filter: %s", f ? f : "(no reply)");
    free(f);
    json_decref(r);
    if (between) between(x);
    uint64_t reused = prioritize_checked(x, pod, pass, NULL, line);
    json_decref(pass);
    return reused;
}

/* The score of host in a prioritize reply text. */
static int64_t score_of(const char *reply, const char *host) {
    json_t *r = json_loads(reply ? reply : "", 0, NULL), *e;
    size_t i;
    int64_t s = -1;
    json_array_foreach(r, i, e) if (!strcmp(json_string_value(json_object_get(e, "Host")), host)) s =
        json_integer_value(json_object_get(e, "Score"));
    json_decref(r);
    return s;
}

/* The memo tests' cluster: cluster4 with pod "p" of team-a asking for cpu
 * (known to the model) and the names of its four nodes. */
struct memo_case {
    struct ext_core *x;
    json_t *pod, *names;
};

static struct memo_case memo_case(const char *cpu) {
    struct memo_case c = {cluster4(), pod_obj("p", "team-a", cpu, NULL, 0, 1), names_of(ALL, 4)};
    set_new(c.x, "Pod", json_incref(c.pod));
    return c;
}

static void memo_case_free(struct memo_case *c) {
    json_decref(c->names);
    json_decref(c->pod);
    ext_core_free(c->x);
}

static void bind_b0_on_n1(struct ext_core *x) { set_new(x, "Pod", pod_obj("b0", "team-b", "1", "n1", 0, 0)); }

TEST(ext_srv_memo_prioritize_takes_the_filters_scores) {
    struct memo_case c = memo_case("1");
    struct ext_core *x = c.x;
    json_t *pod = c.pod, *names = c.names;
    set_new(x, "Pod", pod_obj("b1", "team-b", "1500m", "n2", 0, 0)); /* n2 fails a 1-cpu pod */
    struct ext_stats st0, st1;
    ext_core_stats(x, &st0);
    /* the three passing nodes' scores come from the filter, and their hosts too */
    CHECK_I64(cycle_checked(x, pod, names, NULL, __LINE__), 3);
    ext_core_stats(x, &st1);
    CHECK_I64(st1.names_reused - st0.names_reused, 1);
    /* the whole list again (a prioritize that names a node the filter failed): it scored n2 as well */
    CHECK_I64(prioritize_checked(x, pod, names, NULL, __LINE__), 4);
    memo_case_free(&c);
}

TEST(ext_srv_memo_a_bind_between_filter_and_prioritize) {
    struct memo_case c = memo_case("500m");
    struct ext_core *x = c.x;
    json_t *pod = c.pod, *names = c.names;
    char *old, *now;
    prioritize_checked(x, pod, names, &old, __LINE__);
    /* another pod lands on n1: n1 is scored again, the others still come from the filter */
    CHECK_I64(cycle_checked(x, pod, names, bind_b0_on_n1, __LINE__), 3);
    prioritize_checked(x, pod, names, &now, __LINE__);
    CHECK(score_of(now, "n1") > score_of(old, "n1")); /* PACK: the fuller n1 */
    CHECK_I64(score_of(now, "n2"), score_of(old, "n2"));
    free(old);
    free(now);
    /* the extender's own bind (cluster_assume) does the same */
    set_new(x, "Pod", pod_obj("b2", "team-b", "1", NULL, 0, 2));
    struct extender_binding_args b = {.pod_name = "b2", .pod_namespace = "default", .pod_uid = "uid-b2",
                                      .node = "n3"};
    char why[256];
    CHECK_I64(ext_bind_decide(x, &b, why, sizeof why), EXT_BIND_POST);
    filter_only(x, pod, names);
    ext_bind_commit(x, &b);
    CHECK_I64(prioritize_checked(x, pod, names, NULL, __LINE__), 3);
    memo_case_free(&c);
}

static json_t *g_other_pod; /* for the next hook */
static void filter_other_pod(struct ext_core *x) {
    json_t *names = names_of(ALL, 4);
    filter_only(x, g_other_pod, names);
    json_decref(names);
}

TEST(ext_srv_memo_never_shared_between_pods) {
    struct ext_core *x = cluster4();
    set_new(x, "Pod", pod_obj("b0", "team-b", "1", "n1", 0, 0));
    json_t *a = pod_obj("a", "team-a", "500m", NULL, 0, 1), *b = pod_obj("b", "team-a", "1500m", NULL, 0, 2);
    annotate(b, "annotations", "peloton.io/placement-strategy", "LEAST_LOADED");
    set_new(x, "Pod", json_incref(a));
    set_new(x, "Pod", json_incref(b));
    json_t *names = names_of(ALL, 4);
    /* filter for a, prioritize for b: b is scored on its own */
    filter_only(x, a, names);
    CHECK_I64(prioritize_checked(x, b, names, NULL, __LINE__), 0);
    /* a's filter, then b's filter, then a's prioritize: b's filter replaced the memo */
    g_other_pod = b;
    CHECK_I64(cycle_checked(x, a, names, filter_other_pod, __LINE__), 0);
    /* the same name and uid, a new object (another request): not the old pod's scores */
    json_t *a2 = pod_obj("a", "team-a", "1500m", NULL, 0, 1);
    filter_only(x, a, names);
    CHECK_I64(prioritize_checked(x, a2, names, NULL, __LINE__), 0);
    json_decref(a2);
    json_decref(names);
    json_decref(a);
    json_decref(b);
    ext_core_free(x);
}

static void relabel_n1_and_regrow_n2(struct ext_core *x) {
    json_t *n1 = node_obj("n1", "2", "8Gi");
    json_object_set_new(json_object_get(json_object_get(n1, "metadata"), "labels"), "zone", json_string("z9"));
    set_new(x, "Node", n1);
    set_new(x, "Node", node_obj("n2", "8", "8Gi")); /* allocatable: n2 is emptier now */
}

static void update_pod_p(struct ext_core *x) {
    /* the informer delivers a new object of the pod: more cpu */
    set_new(x, "Pod", pod_obj("p", "team-a", "1500m", NULL, 0, 1));
}

static void make_web_stateless(struct ext_core *x) {
    set_new(x, "Job", json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s}}", "apiVersion", "peloton.io/v1alpha1", "kind",
                                "Job", "metadata", "name", "web", "namespace", "default", "spec", "type",
                                "STATELESS"));
}

TEST(ext_srv_memo_invalidated_by_nodes_pod_and_strategy) {
    struct memo_case c = memo_case("500m");
    struct ext_core *x = c.x;
    json_t *pod = c.pod, *names = c.names;
    set_new(x, "Pod", pod_obj("b0", "team-b", "1", "n1", 0, 0));
    char *old, *now;
    prioritize_checked(x, pod, names, &old, __LINE__);
    /* a node's labels and another's allocatable change between the calls: the fleet is new, nothing is reused */
    CHECK_I64(cycle_checked(x, pod, names, relabel_n1_and_regrow_n2, __LINE__), 0);
    prioritize_checked(x, pod, names, &now, __LINE__);
    CHECK(score_of(now, "n2") < score_of(old, "n2"));
    free(old);
    free(now);
    /* a node event that changes nothing placement sees keeps the fleet and the scores */
    filter_only(x, pod, names);
    set_new(x, "Node", node_obj("n3", "2", "8Gi"));
    CHECK_I64(prioritize_checked(x, pod, names, NULL, __LINE__), 4);
    /* the pod's object changes under the same request text */
    CHECK_I64(cycle_checked(x, pod, names, update_pod_p, __LINE__), 0);
    /* its Job's type turns PACK into SPREAD_JOB between the calls */
    json_t *web = pod_obj("web-1", "team-a", "500m", NULL, 0, 3);
    annotate(web, "labels", "peloton.io/job", "web");
    set_new(x, "Pod", json_incref(web));
    json_t *run = pod_obj("web-0", "team-a", "500m", "n4", 0, 4);
    annotate(run, "labels", "peloton.io/job", "web");
    set_new(x, "Pod", run);
    CHECK_I64(cycle_checked(x, web, names, make_web_stateless, __LINE__), 0);
    /* and from then on the cycle reuses the filter's SPREAD_JOB scores */
    CHECK_I64(cycle_checked(x, web, names, NULL, __LINE__), 4);
    json_decref(web);
    memo_case_free(&c);
}

TEST(ext_srv_memo_names_the_filter_did_not_see) {
    struct memo_case c = memo_case("500m");
    struct ext_core *x = c.x;
    json_t *pod = c.pod;
    static const char *const two[] = {"n1", "n2"}, *const other[] = {"n4", "nx", "n3", "n1", "n5", "n6"};
    json_t *names = names_of(two, 2), *more = names_of(other, 6);
    filter_only(x, pod, names);
    struct ext_stats s0, s1;
    ext_core_stats(x, &s0);
    CHECK_I64(prioritize_checked(x, pod, more, NULL, __LINE__), 1); /* n1; n3 and n4 are scored, nx, n5, n6 0 */
    ext_core_stats(x, &s1);
    CHECK_I64(s1.names_reused - s0.names_reused, 0);
    /* nodes come and go between the calls: the fleet is new, names map to its hosts */
    filter_only(x, pod, more);
    set_new(x, "Node", node_obj("nx", "4", "8Gi"));
    set_new(x, "Node", node_obj("n5", "4", "8Gi"));
    set_new(x, "Node", node_obj("n6", "4", "8Gi"));
    json_t *n3 = node_obj("n3", "2", "8Gi");
    ext_core_del(x, "Node", n3);
    json_decref(n3);
    char *got;
    CHECK_I64(prioritize_checked(x, pod, more, &got, __LINE__), 0);
    CHECK(score_of(got, "nx") > 0);
    free(got);
    /* a pod the model does not know (taken from the request each time) is never reused */
    json_t *stranger = pod_obj("stranger", "team-a", "500m", NULL, 0, 9);
    CHECK_I64(cycle_checked(x, stranger, more, NULL, __LINE__), 0);
    json_decref(stranger);
    json_decref(names);
    json_decref(more);
    memo_case_free(&c);
}
