/* The cluster model and pod decoding: Kubernetes objects in, core state out. */
#include <errno.h>
#include <stdlib.h>

#include "cluster.h"
#include "crd_pool.h"
#include "preempt.h"
#include "podspec.h"
#include "strmap.h"
#include "test.h"

static json_t *J(const char *s) {
    json_error_t e;
    json_t *v = json_loads(s, 0, &e);
    if (!v) fprintf(stderr, "bad test json: %s: %s\n", e.text, s);
    return v;
}

static json_t *node(const char *name, const char *cpu, const char *mem, bool ready) {
    return json_pack("{s:s, s:{s:s, s:{s:s}}, s:{s:{s:s, s:s, s:s}, s:[{s:s, s:s}]}}", "kind", "Node", "metadata",
                     "name", name, "labels", "zone", "a", "status", "allocatable", "cpu", cpu, "memory", mem, "pods",
                     "110", "conditions", "type", "Ready", "status", ready ? "True" : "False");
}

static json_t *pool(const char *name, const char *parent, const char *res_cpu, const char *lim_cpu) {
    return json_pack("{s:s, s:{s:s}, s:{s:s, s:[{s:s, s:s, s:s, s:i}]}}", "kind", "ResourcePool", "metadata", "name",
                     name, "spec", "parent", parent, "resources", "kind", "cpu", "reservation", res_cpu, "limit",
                     lim_cpu, "share", 1);
}

static json_t *pod(const char *ns, const char *name, const char *pool_name, const char *cpu, const char *node_name) {
    json_t *p = json_pack("{s:s, s:{s:s, s:s, s:s, s:{}}, s:{s:[{s:s, s:{s:{s:s}}}]}}", "kind", "Pod", "metadata",
                          "name", name, "namespace", ns, "uid", name, "labels", "spec", "containers", "name", "c",
                          "resources", "requests", "cpu", cpu);
    if (pool_name)
        json_object_set_new(json_object_get(json_object_get(p, "metadata"), "labels"), "peloton.io/resource-pool",
                            json_string(pool_name));
    if (node_name) json_object_set_new(json_object_get(p, "spec"), "nodeName", json_string(node_name));
    return p;
}

static void feed(struct cluster *c, json_t *v, int (*fn)(struct cluster *, json_t *)) {
    CHECK_I64(fn(c, v), 0);
    json_decref(v);
}

TEST(podspec_requests_init_containers_and_overhead) {
    json_t *p = J("{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\",\"annotations\":{\"peloton.io/priority\":\"7\","
                  "\"peloton.io/preemptible\":\"false\"},\"labels\":{\"peloton.io/gang\":\"g\",\"peloton.io/gang-size\":"
                  "\"4\"}},\"spec\":{\"containers\":[{\"resources\":{\"requests\":{\"cpu\":\"500m\",\"memory\":\"1Gi\"}}},"
                  "{\"resources\":{\"limits\":{\"cpu\":\"1\",\"nvidia.com/gpu\":\"1\"}}}],\"initContainers\":[{\"resources"
                  "\":{\"requests\":{\"cpu\":\"2\"}}}],\"overhead\":{\"cpu\":\"100m\"},\"nodeSelector\":{\"zone\":\"a\"},"
                  "\"tolerations\":[{\"operator\":\"Exists\"}],\"priority\":3}}");
    REQUIRE(p);
    struct pod_info in;
    char err[256] = "";
    REQUIRE_I64(pod_info_decode(p, &in, err, sizeof err), 0);
    CHECK_I64(in.req.v[RES_CPU], 2100); /* max(0.5 + 1, 2) + 0.1 */
    CHECK_I64(in.req.v[RES_MEMORY], 1 << 30);
    CHECK_I64(in.req.v[RES_GPU], 1000);
    CHECK_I64(in.priority, 7); /* the annotation wins over spec.priority */
    CHECK(!(in.flags & WF_PREEMPTIBLE));
    CHECK_STR(in.gang, "g");
    CHECK_I64(in.gang_size, 4);
    CHECK_STR(in.scheduler, "default-scheduler");
    struct pod_task t;
    REQUIRE_I64(pod_task_build(p, &in, &t, err, sizeof err), 0);
    CHECK_I64(t.t.nselector, 1);
    CHECK_I64(t.t.ntols, 1);
    CHECK_I64(t.t.nlabels, 2);
    pod_task_free(&t);
    json_decref(p);
}

/* pod_slim keeps what decoding reads: the same info and task before and after, from a smaller tree. */
TEST(podspec_slim_keeps_what_decoding_reads) {
    json_t *p = J("{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\",\"uid\":\"u1\",\"creationTimestamp\":"
                  "\"2026-11-25T10:00:00Z\",\"deletionTimestamp\":\"2026-11-25T10:05:00Z\",\"managedFields\":[{\"manager\":"
                  "\"kubectl\"}],\"annotations\":{\"peloton.io/priority\":\"5\",\"peloton.io/placement-strategy\":\"PACK\"},"
                  "\"labels\":{\"peloton.io/job\":\"j\",\"app\":\"a\"},\"ownerReferences\":[{\"kind\":\"Job\",\"name\":\"j\","
                  "\"controller\":true}]},\"spec\":{\"schedulerName\":\"peloton\",\"nodeName\":\"n1\",\"priority\":2,"
                  "\"containers\":[{\"name\":\"c\",\"image\":\"busybox\",\"command\":[\"sleep\",\"1\"],\"env\":[{\"name\":"
                  "\"A\",\"value\":\"b\"}],\"ports\":[{\"containerPort\":80}],\"resources\":{\"requests\":{\"cpu\":\"250m\",\"memory\":\"64Mi\"},\"limits\":{"
                  "\"nvidia.com/gpu\":\"1\"}}}],\"initContainers\":[{\"name\":\"i\",\"image\":\"x\",\"resources\":{"
                  "\"requests\":{\"cpu\":\"1\"}}}],\"nodeSelector\":{\"zone\":\"a\"},\"tolerations\":[{\"key\":\"k\","
                  "\"operator\":\"Exists\"}],\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuring"
                  "Execution\":{\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"In\","
                  "\"values\":[\"a\"]}]}]}}}},\"status\":{\"phase\":\"Running\",\"reason\":\"TaskStarting\",\"podIP\":\"10.0.0.1\",\"conditions\":[{"
                  "\"type\":\"Ready\",\"status\":\"True\"}],\"containerStatuses\":[{\"name\":\"c\",\"ready\":true,\"state\":"
                  "{\"running\":{}}}]}}");
    REQUIRE(p);
    struct pod_info a, b;
    struct pod_task ta, tb;
    char err[256] = "";
    REQUIRE_I64(pod_info_decode(p, &a, err, sizeof err), 0);
    REQUIRE_I64(pod_task_build(p, &a, &ta, err, sizeof err), 0);
    char *before = json_dumps(p, JSON_COMPACT);
    pod_slim(p);
    char *after = json_dumps(p, JSON_COMPACT);
    /* decoding with pod_slim_keep builds the same slim pod */
    json_t *direct = jparse_filtered(before, strlen(before), 0, pod_slim_keep, NULL);
    char *direct_s = json_dumps(direct, JSON_COMPACT);
    CHECK_STR(direct_s, after);
    free(direct_s);
    json_decref(direct);
    REQUIRE_I64(pod_info_decode(p, &b, err, sizeof err), 0);
    REQUIRE_I64(pod_task_build(p, &b, &tb, err, sizeof err), 0);
    for (int k = 0; k < RES_NKINDS; k++) CHECK_I64(a.req.v[k], b.req.v[k]);
    CHECK_I64(a.req.v[RES_CPU], 1000); /* the init container's 1 CPU: resources survive */
    CHECK_I64(b.priority, 5);
    CHECK_I64(a.flags, b.flags);
    CHECK_I64(a.strategy, b.strategy);
    CHECK_STR(b.job, "j");
    CHECK_STR(b.node, "n1");
    CHECK_STR(b.scheduler, "peloton");
    CHECK_I64(a.phase, b.phase);
    CHECK(b.deleting && !b.terminal);
    CHECK_I64(a.created_ms, b.created_ms);
    CHECK(b.created_ms > 0);
    CHECK_I64(ta.t.nselector, tb.t.nselector);
    CHECK_I64(tb.t.nterms, 1);
    CHECK_I64(tb.t.ntols, 1);
    CHECK_I64(ta.t.nlabels, tb.t.nlabels);
    /* what went: status but the phase and reason, containers' ports, probes and the like, managedFields;
     * image, command, args and env stay (the Mesos driver's TaskInfo, from the same feed) */
    CHECK_STR(json_string_value(json_object_get(json_object_get(p, "status"), "phase")), "Running");
    CHECK_STR(json_string_value(json_object_get(json_object_get(p, "status"), "reason")), "TaskStarting");
    CHECK_I64(json_object_size(json_object_get(p, "status")), 2);
    json_t *c0 = json_array_get(json_object_get(json_object_get(p, "spec"), "containers"), 0);
    CHECK_I64(json_object_size(c0), 5);
    CHECK_STR(json_string_value(json_object_get(c0, "name")), "c");
    CHECK_STR(json_string_value(json_object_get(c0, "image")), "busybox");
    CHECK_STR(json_string_value(json_array_get(json_object_get(c0, "command"), 1)), "1");
    CHECK_STR(json_string_value(json_object_get(json_array_get(json_object_get(c0, "env"), 0), "value")), "b");
    CHECK(!json_object_get(c0, "ports"));
    CHECK(!json_object_get(json_object_get(p, "metadata"), "managedFields"));
    CHECK(strlen(after) < strlen(before));
    pod_slim(p); /* twice is once */
    char *again = json_dumps(p, JSON_COMPACT);
    CHECK_STR(again, after);
    const char *odd_s = "{\"metadata\":[],\"spec\":{\"containers\":[1,\"x\",null]},\"status\":\"up\"}";
    json_t *odd = J(odd_s);
    pod_slim(odd); /* shapes that are wrong stay as they are: decoding reports them */
    json_t *odd_direct = jparse_filtered(odd_s, strlen(odd_s), 0, pod_slim_keep, NULL);
    CHECK(json_equal(odd, odd_direct));
    json_decref(odd_direct);
    CHECK_I64(json_array_size(json_object_get(json_object_get(odd, "spec"), "containers")), 3);
    json_decref(odd);
    free(before);
    free(after);
    free(again);
    pod_task_free(&ta);
    pod_task_free(&tb);
    json_decref(p);
}

TEST(podspec_errors_name_the_field) {
    const char *bad[][2] = {
        {"{\"metadata\":{},\"spec\":{\"containers\":[{\"resources\":{\"requests\":{\"cpu\":\"lots\"}}}]}}",
         "spec.containers[0].resources.requests.cpu"},
        {"{\"metadata\":{},\"spec\":{\"initContainers\":[{},{\"resources\":{\"limits\":{\"memory\":\"x\"}}}]}}",
         "spec.initContainers[1].resources.limits.memory: "},
        {"{\"metadata\":{},\"spec\":{\"containers\":[{},{},{\"resources\":{\"requests\":[]}}]}}",
         "spec.containers[2].resources.requests: expected an object"},
        {"{\"metadata\":{},\"spec\":{\"overhead\":{\"cpu\":\"z\"}}}", "spec.overhead.cpu: "},
        {"{\"metadata\":{\"labels\":{\"peloton.io/gang\":\"g\"}},\"spec\":{}}", "gang-size"},
        {"{\"metadata\":{\"annotations\":{\"peloton.io/priority\":\"-1\"}},\"spec\":{}}", "peloton.io/priority"},
        {"{\"metadata\":{\"annotations\":{\"peloton.io/placement-strategy\":\"RANDOM\"}},\"spec\":{}}", "RANDOM"},
        {"[]", "pod"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *p = J(bad[i][0]);
        struct pod_info in;
        char err[256] = "";
        CHECK_I64(pod_info_decode(p, &in, err, sizeof err), -EINVAL);
        CHECK_HAS(err, bad[i][1]);
        json_decref(p);
    }
}

/* A model without the placement engine (resmgr's) counts and entitles
 * exactly as one with it, slack included (a host at its pod limit is full). */
TEST(cluster_without_engine_entitles_the_same) {
    struct cm_options o, on;
    cm_options_default(&o);
    cm_options_default(&on);
    on.no_engine = true;
    struct cluster *m[2] = {cluster_new(&o), cluster_new(&on)};
    REQUIRE(m[0] && m[1]);
    CHECK(cluster_engine(m[0]) != NULL);
    CHECK(cluster_engine(m[1]) == NULL);
    for (int i = 0; i < 2; i++) {
        struct cluster *c = m[i];
        feed(c, node("n1", "8", "16Gi", true), cluster_node_set);
        feed(c, node("n2", "8", "16Gi", true), cluster_node_set);
        json_t *small = node("n3", "8", "16Gi", true); /* room for one pod */
        json_object_set_new(json_object_get(json_object_get(small, "status"), "allocatable"), "pods", json_string("1"));
        feed(c, small, cluster_node_set);
        feed(c, pool("org", "", "12", "24"), cluster_pool_set);
        feed(c, pool("a", "org", "4", "24"), cluster_pool_set);
        feed(c, pool("b", "org", "4", "24"), cluster_pool_set);
        feed(c, pod("d", "p1", "a", "2", "n1"), cluster_pod_set);
        feed(c, pod("d", "p2", "b", "1", "n3"), cluster_pod_set); /* n3 is full by pod count */
        feed(c, pod("d", "p3", "a", "3", NULL), cluster_pod_set);
        feed(c, pod("d", "p4", NULL, "1", "n2"), cluster_pod_set);
        json_t *rev = pod("d", "p5", "b", "20", NULL); /* revocable: runs on slack cpu */
        json_object_set_new(json_object_get(rev, "metadata"), "annotations",
                            json_pack("{s:s}", "peloton.io/revocable", "true"));
        feed(c, rev, cluster_pod_set);
        REQUIRE_I64(cluster_refresh(c), 0);
        feed(c, pod("d", "p3", "a", "3", "n2"), cluster_pod_set); /* bound later */
        cluster_pod_del(c, "d", "p4");
        REQUIRE_I64(cluster_refresh(c), 0);
    }
    const char *names[] = {"p1", "p2", "p3", "p5"};
    for (int k = 0; k < 4; k++) {
        struct respool *x = cluster_pod_pool(m[0], cluster_pod(m[0], "d", names[k]));
        struct respool *y = cluster_pod_pool(m[1], cluster_pod(m[1], "d", names[k]));
        REQUIRE(x && y);
        for (int r = 0; r < RES_NKINDS; r++) {
            CHECK_I64(x->entitlement.v[r], y->entitlement.v[r]);
            CHECK_I64(x->slack_entitlement.v[r], y->slack_entitlement.v[r]);
            CHECK_I64(usage_nonslack(&x->alloc).v[r], usage_nonslack(&y->alloc).v[r]);
        }
    }
    struct respool *a = cluster_pod_pool(m[1], cluster_pod(m[1], "d", "p1"));
    CHECK_I64(usage_nonslack(&a->alloc).v[RES_CPU], 5000);
    /* slack: 24 cpu less what is used (2 + 3 on n1 and n2, all 8 of the full n3) */
    struct respool *b = cluster_pod_pool(m[1], cluster_pod(m[1], "d", "p5"));
    CHECK_I64(b->slack_entitlement.v[RES_CPU], 11000);
    uint32_t h2 = host_fleet_find(cluster_fleet(m[1]), "n2");
    int on2 = 0;
    for (struct cm_pod *p = cluster_host_first(m[1], h2); p; p = cluster_host_next(p)) on2++;
    CHECK_I64(on2, 1); /* p3; p4 deleted */
    cluster_free(m[0]);
    cluster_free(m[1]);
}

TEST(cluster_counts_pods_on_pools_and_hosts) {
    struct cm_options o;
    cm_options_default(&o);
    struct cluster *c = cluster_new(&o);
    REQUIRE(c);
    feed(c, node("n1", "4", "8Gi", true), cluster_node_set);
    feed(c, node("n2", "4", "8Gi", true), cluster_node_set);
    feed(c, node("n3", "4", "8Gi", false), cluster_node_set);
    feed(c, pool("org", "", "8", "8"), cluster_pool_set);
    feed(c, pool("a", "org", "2", "8"), cluster_pool_set);
    feed(c, pool("b", "org", "2", "8"), cluster_pool_set);
    feed(c, pod("d", "p1", "a", "1", "n1"), cluster_pod_set);
    feed(c, pod("d", "p2", "a", "3", NULL), cluster_pod_set);
    feed(c, pod("d", "p3", NULL, "1", "n2"), cluster_pod_set); /* unmanaged: counts on the host only */
    REQUIRE_I64(cluster_refresh(c), 0);
    CHECK(!cluster_pool_error(c));
    CHECK_I64(cluster_capacity(c).v[RES_CPU], 8000); /* n3 is not Ready */
    struct host_fleet *f = cluster_fleet(c);
    uint32_t h1 = host_fleet_find(f, "n1"), h2 = host_fleet_find(f, "n2"), h3 = host_fleet_find(f, "n3");
    CHECK_I64(f->hosts[h1].allocated.v[RES_CPU], 1000);
    CHECK_I64(f->hosts[h2].allocated.v[RES_CPU], 1000);
    CHECK(f->hosts[h3].flags & HOST_NOT_READY);
    CHECK(!(f->hosts[h3].flags & (HOST_DRAINING | HOST_UNSCHEDULABLE))); /* not ready is neither */
    struct respool *a = cluster_pod_pool(c, cluster_pod(c, "d", "p1"));
    REQUIRE(a);
    CHECK_I64(usage_nonslack(&a->alloc).v[RES_CPU], 1000);
    CHECK_I64(usage_nonslack(&a->pending).v[RES_CPU], 3000);
    /* a's demand is 4 cpu and b has none: a gets its demand, then the 4 left
     * are shared by share between a and b (both below their limits) */
    CHECK_I64(a->entitlement.v[RES_CPU], 6000);

    /* p2 bound: pending moves to allocation */
    feed(c, pod("d", "p2", "a", "3", "n2"), cluster_pod_set);
    REQUIRE_I64(cluster_refresh(c), 0);
    CHECK_I64(usage_nonslack(&a->pending).v[RES_CPU], 0);
    CHECK_I64(usage_nonslack(&a->alloc).v[RES_CPU], 4000);
    CHECK_I64(f->hosts[h2].allocated.v[RES_CPU], 4000);
    int on2 = 0;
    for (struct cm_pod *p = cluster_host_first(c, h2); p; p = cluster_host_next(p)) on2++;
    CHECK_I64(on2, 2);

    /* terminal pods stop counting; deleted pods too */
    json_t *done = pod("d", "p1", "a", "1", "n1");
    json_object_set_new(done, "status", json_pack("{s:s}", "phase", "Succeeded"));
    feed(c, done, cluster_pod_set);
    cluster_pod_del(c, "d", "p3");
    REQUIRE_I64(cluster_refresh(c), 0);
    CHECK_I64(f->hosts[h1].allocated.v[RES_CPU], 0);
    CHECK_I64(usage_nonslack(&a->alloc).v[RES_CPU], 3000);
    CHECK(!cluster_pod(c, "d", "p3"));
    cluster_free(c);
}

/* CM_KEEP_TASKS: a pending pod keeps only what its task is built from,
 * shared with its object; a bound or terminal pod's tree is let go (the pod
 * feed keeps none either), while what was decoded of it stays the model's
 * own and keeps counting. CM_KEEP_NONE keeps nothing of any pod. */
TEST(cluster_drops_the_objects_of_placed_pods) {
    struct cm_options o;
    cm_options_default(&o);
    o.keep = CM_KEEP_TASKS;
    struct cluster *c = cluster_new(&o);
    REQUIRE(c);
    feed(c, node("n1", "4", "8Gi", true), cluster_node_set);
    feed(c, pool("org", "", "8", "8"), cluster_pool_set);
    feed(c, pool("a", "org", "2", "8"), cluster_pool_set);
    json_t *pending = pod("d", "p1", "a", "1", NULL);
    json_t *labels = json_object_get(json_object_get(pending, "metadata"), "labels");
    json_object_set_new(labels, "peloton.io/gang", json_string("g1"));
    json_object_set_new(labels, "peloton.io/gang-size", json_string("1"));
    json_t *spec = json_object_get(pending, "spec");
    json_object_set_new(spec, "nodeSelector", json_pack("{s:s}", "zone", "z1"));
    json_object_set_new(spec, "tolerations", json_pack("[{s:s, s:s}]", "key", "k", "operator", "Exists"));
    struct pod_info fi;
    struct pod_task whole;
    char err[256];
    REQUIRE_I64(pod_info_decode(pending, &fi, err, sizeof err), 0);
    REQUIRE_I64(pod_task_build(pending, &fi, &whole, err, sizeof err), 0);
    CHECK_I64(cluster_pod_set(c, pending), 0);
    struct cm_pod *p = cluster_pod(c, "d", "p1");
    REQUIRE(p);
    CHECK(!p->bad);
    REQUIRE(p->obj && p->obj != pending); /* pending: what the task reads, shared */
    CHECK(json_object_get(json_object_get(p->obj, "metadata"), "labels") == labels);
    CHECK(json_object_get(json_object_get(p->obj, "spec"), "tolerations") == json_object_get(spec, "tolerations"));
    CHECK(json_object_get(json_object_get(p->obj, "spec"), "containers") == NULL);
    CHECK(json_object_get(json_object_get(p->obj, "metadata"), "name") == NULL);
    json_t *bound = json_deep_copy(pending);
    json_object_set_new(json_object_get(bound, "spec"), "nodeName", json_string("n1"));
    json_decref(pending); /* the event is gone; the task is built from what the model kept */
    struct pod_task kept;
    REQUIRE_I64(pod_task_build(p->obj, &p->info, &kept, err, sizeof err), 0);
    CHECK_I64(kept.t.nlabels, whole.t.nlabels);
    CHECK_I64(kept.t.nselector, 1);
    CHECK_I64(kept.t.nselector, whole.t.nselector);
    CHECK_I64(kept.t.ntols, 1);
    CHECK_I64(kept.t.ntols, whole.t.ntols);
    CHECK_I64(kept.t.nterms, whole.t.nterms);
    CHECK_STR(kept.t.selector[0].value, "z1");
    CHECK_I64(kept.t.req.v[RES_CPU], whole.t.req.v[RES_CPU]);
    pod_task_free(&kept);
    pod_task_free(&whole);
    CHECK_I64(cluster_pod_set(c, bound), 0);
    CHECK(p->obj == NULL);
    CHECK_I64(bound->refcount, 1); /* the model holds no reference */
    json_decref(bound);            /* the tree is gone: what the model decoded must not point into it */
    CHECK_STR(p->info.node, "n1");
    CHECK_STR(p->info.pool, "a");
    CHECK_STR(p->info.gang, "g1");
    CHECK_STR(p->info.scheduler, "default-scheduler");
    CHECK_STR(p->node, "n1");
    REQUIRE_I64(cluster_refresh(c), 0);
    struct host_fleet *f = cluster_fleet(c);
    uint32_t h1 = host_fleet_find(f, "n1");
    CHECK_I64(f->hosts[h1].allocated.v[RES_CPU], 1000);
    struct respool *a = cluster_pod_pool(c, p);
    REQUIRE(a);
    CHECK_I64(usage_nonslack(&a->alloc).v[RES_CPU], 1000);
    /* a later status write, a terminal one: counted no more */
    json_t *done = pod("d", "p1", "a", "1", "n1");
    json_object_set_new(done, "status", json_pack("{s:s}", "phase", "Failed"));
    feed(c, done, cluster_pod_set);
    CHECK(p->obj == NULL);
    CHECK(p->info.terminal);
    REQUIRE_I64(cluster_refresh(c), 0);
    CHECK_I64(f->hosts[h1].allocated.v[RES_CPU], 0);
    CHECK_I64(usage_nonslack(&a->alloc).v[RES_CPU], 0);
    /* by default the model keeps every pod's object */
    struct cm_options keep;
    cm_options_default(&keep);
    struct cluster *k = cluster_new(&keep);
    REQUIRE(k);
    json_t *b2 = pod("d", "p2", "a", "1", "n1");
    CHECK_I64(cluster_pod_set(k, b2), 0);
    CHECK(cluster_pod(k, "d", "p2")->obj == b2);
    json_decref(b2);
    cluster_free(k);
    /* CM_KEEP_NONE: not even a pending pod's */
    keep.keep = CM_KEEP_NONE;
    struct cluster *none = cluster_new(&keep);
    REQUIRE(none);
    json_t *p3 = pod("d", "p3", "a", "1", NULL);
    CHECK_I64(cluster_pod_set(none, p3), 0);
    CHECK(cluster_pod(none, "d", "p3")->obj == NULL);
    CHECK_I64(p3->refcount, 1);
    CHECK_I64(cluster_pod(none, "d", "p3")->info.req.v[RES_CPU], 1000);
    json_decref(p3);
    cluster_free(none);
    cluster_free(c);
}

TEST(cluster_admission_reasons) {
    struct cm_options o;
    cm_options_default(&o);
    struct cluster *c = cluster_new(&o);
    REQUIRE(c);
    feed(c, node("n1", "8", "8Gi", true), cluster_node_set);
    feed(c, pool("a", "", "2", "4"), cluster_pool_set);
    feed(c, pool("b", "", "4", "8"), cluster_pool_set);
    feed(c, pod("d", "run", "a", "3", "n1"), cluster_pod_set);
    feed(c, pod("d", "b1", "b", "4", NULL), cluster_pod_set);
    json_t *np = pod("d", "np", "a", "1", NULL);
    json_object_set_new(json_object_get(np, "metadata"), "annotations",
                        json_pack("{s:s}", "peloton.io/preemptible", "false"));
    feed(c, np, cluster_pod_set);
    feed(c, pod("d", "big", "a", "5", NULL), cluster_pod_set);
    feed(c, pod("d", "lost", "nosuch", "1", NULL), cluster_pod_set);
    REQUIRE_I64(cluster_refresh(c), 0);
    char why[256];
    bool res;
    struct cm_pod *p = cluster_pod(c, "d", "big");
    /* a is at its limit (4): 3 + 5 > 4, and 5 > limit: preemption cannot help */
    CHECK_I64(cluster_admit_check(c, p, p->info.req, why, sizeof why, &res), -ENOSPC);
    CHECK_STR(why, "pool /a at its cpu entitlement: 3 of 4 cores allocated, needs 5; admitted once its entitlement "
                   "grows by 4 cores (the pod is larger than the whole entitlement)");
    CHECK(!res);
    p = cluster_pod(c, "d", "np");
    CHECK_I64(cluster_admit_check(c, p, p->info.req, why, sizeof why, &res), 0); /* 0 + 1 <= reservation 2 */
    cluster_admit(c, p, true);
    REQUIRE_I64(cluster_refresh(c), 0);
    struct resvec two = {{2000, 0, 0, 0}}, three = {{3000, 0, 0, 0}};
    /* its own 1 is not counted twice: 0 + 2 <= reservation 2, but 3 + 2 > entitlement 4 */
    CHECK_I64(cluster_admit_check(c, p, two, why, sizeof why, &res), -ENOSPC);
    CHECK_STR(why, "pool /a at its cpu entitlement: 3 of 4 cores allocated, needs 2; admitted once its work frees 1 "
                   "core or its entitlement grows by 1 core");
    CHECK(res);
    CHECK_I64(cluster_admit_check(c, p, three, why, sizeof why, &res), -ENOSPC);
    CHECK_STR(why, "pool /a at its cpu reservation: 0 of 2 cores allocated to non-preemptible work, needs 3; admitted "
                   "once its reservation grows by 1 core (the pod is larger than the whole reservation)");
    CHECK(!res); /* preemption never makes room for non-preemptible work beyond the reservation */
    p = cluster_pod(c, "d", "lost");
    CHECK_I64(cluster_admit_check(c, p, p->info.req, why, sizeof why, &res), -ENOSPC);
    CHECK_HAS(why, "resource pool \"nosuch\" not found");
    CHECK(!res);
    p = cluster_pod(c, "d", "b1");
    CHECK_I64(cluster_admit_check(c, p, p->info.req, why, sizeof why, &res), 0);
    cluster_free(c);
}

TEST(cluster_namespace_pool_default_pool_and_bad_tree) {
    struct cm_options o;
    cm_options_default(&o);
    o.default_pool = "dflt";
    struct cluster *c = cluster_new(&o);
    REQUIRE(c);
    feed(c, pool("dflt", "", "0", "8"), cluster_pool_set);
    feed(c, pool("t", "", "0", "8"), cluster_pool_set);
    feed(c, pod("ns1", "p", NULL, "1", NULL), cluster_pod_set);
    feed(c, pod("ns2", "q", NULL, "1", NULL), cluster_pod_set);
    feed(c, J("{\"metadata\":{\"name\":\"ns1\",\"annotations\":{\"peloton.io/resource-pool\":\"t\"}}}"),
         cluster_ns_set);
    REQUIRE_I64(cluster_refresh(c), 0);
    CHECK_STR(cluster_pod(c, "ns1", "p")->pool, "t");
    CHECK_STR(cluster_pod(c, "ns2", "q")->pool, "dflt");
    /* a child whose limit exceeds its parent's: refused, the old tree stays */
    feed(c, pool("kid", "t", "0", "9"), cluster_pool_set);
    REQUIRE_I64(cluster_refresh(c), 0);
    CHECK(cluster_pool_error(c) != NULL);
    CHECK(cluster_pod_pool(c, cluster_pod(c, "ns1", "p")) != NULL);
    cluster_pool_del(c, "kid");
    REQUIRE_I64(cluster_refresh(c), 0);
    CHECK(cluster_pool_error(c) == NULL);
    cluster_free(c);
}

TEST(place_check_and_score_hosts) {
    struct cm_options o;
    cm_options_default(&o);
    struct cluster *c = cluster_new(&o);
    REQUIRE(c);
    feed(c, node("n1", "4", "8Gi", true), cluster_node_set);
    feed(c, node("n2", "4", "8Gi", true), cluster_node_set);
    feed(c, pod("d", "x", NULL, "3", "n1"), cluster_pod_set);
    feed(c, pod("d", "y", NULL, "2", NULL), cluster_pod_set);
    REQUIRE_I64(cluster_refresh(c), 0);
    struct host_fleet *f = cluster_fleet(c);
    uint32_t hosts[2] = {host_fleet_find(f, "n1"), host_fleet_find(f, "n2")};
    struct cm_pod *p = cluster_pod(c, "d", "y");
    struct pod_task t;
    char err[128];
    REQUIRE_I64(pod_task_build(p->obj, &p->info, &t, err, sizeof err), 0);
    uint8_t why[2];
    REQUIRE_I64(place_check_hosts(cluster_engine(c), &t.t, "j", hosts, 2, why), 0);
    CHECK_I64(why[0], PR_INSUFFICIENT_CPU);
    CHECK_I64(why[1], PR_NONE);
    int64_t sc[2];
    REQUIRE_I64(place_score_hosts(cluster_engine(c), &t.t, "j", PLACE_PACK, hosts, 2, sc), 0);
    CHECK_I64(sc[0], 0); /* does not fit */
    CHECK(sc[1] > 0 && sc[1] <= 10);
    /* a trial gang placement and its undo leave the hosts as they were */
    struct place_gang g = {.id = "g", .strategy = PLACE_PACK, .tasks = &t.t, .ntasks = 1};
    uint32_t at;
    struct place_failure fl;
    REQUIRE_I64(place_gang(cluster_engine(c), &g, &at, &fl), 0);
    CHECK_I64(f->hosts[hosts[1]].allocated.v[RES_CPU], 2000);
    REQUIRE_I64(place_gang_undo(cluster_engine(c), &g, &at), 0);
    CHECK_I64(f->hosts[hosts[1]].allocated.v[RES_CPU], 0);
    pod_task_free(&t);
    cluster_free(c);
}

TEST(strmap_put_get_delete_grow) {
    struct strmap m = {0};
    char k[32];
    for (int i = 0; i < 5000; i++) {
        snprintf(k, sizeof k, "k%d", i);
        REQUIRE_I64(strmap_put(&m, k, (void *)(intptr_t)(i + 1), NULL), 0);
    }
    for (int i = 0; i < 5000; i += 2) {
        snprintf(k, sizeof k, "k%d", i);
        CHECK_I64((intptr_t)strmap_del(&m, k), i + 1);
    }
    CHECK_I64(strmap_count(&m), 2500);
    for (int i = 0; i < 5000; i++) {
        snprintf(k, sizeof k, "k%d", i);
        CHECK_I64((intptr_t)strmap_get(&m, k), i % 2 ? i + 1 : 0);
    }
    size_t pos = 0, n = 0;
    while (strmap_next(&m, &pos, NULL, NULL)) n++;
    CHECK_I64(n, 2500);
    strmap_free(&m);
}

TEST(cluster_host_at_its_pod_limit_takes_no_more) {
    struct cm_options o;
    cm_options_default(&o);
    struct cluster *c = cluster_new(&o);
    REQUIRE(c);
    json_t *n = node("n1", "64", "64Gi", true);
    json_object_set_new(json_object_get(json_object_get(n, "status"), "allocatable"), "pods", json_string("2"));
    feed(c, n, cluster_node_set);
    feed(c, pod("d", "a", NULL, "100m", "n1"), cluster_pod_set);
    feed(c, pod("d", "new", NULL, "100m", NULL), cluster_pod_set);
    REQUIRE_I64(cluster_refresh(c), 0);
    uint32_t h = host_fleet_find(cluster_fleet(c), "n1");
    struct cm_pod *p = cluster_pod(c, "d", "new");
    struct pod_task t;
    char err[128];
    uint8_t why;
    REQUIRE_I64(pod_task_build(p->obj, &p->info, &t, err, sizeof err), 0);
    REQUIRE_I64(place_check_hosts(cluster_engine(c), &t.t, NULL, &h, 1, &why), 0);
    CHECK_I64(why, PR_NONE); /* one of two pod slots used */
    feed(c, pod("d", "b", NULL, "100m", "n1"), cluster_pod_set);
    REQUIRE_I64(place_check_hosts(cluster_engine(c), &t.t, NULL, &h, 1, &why), 0);
    CHECK_I64(why, PR_INSUFFICIENT_CPU); /* both used: the host reads as full */
    cluster_pod_del(c, "d", "a");
    REQUIRE_I64(place_check_hosts(cluster_engine(c), &t.t, NULL, &h, 1, &why), 0);
    CHECK_I64(why, PR_NONE);
    pod_task_free(&t);
    cluster_free(c);
}

/* One gang cannot put more members on a host than the pod slots it has
 * left (the core has no pod-count resource; the model holds it to them):
 * with one host and two slots left a gang of three does not fit; with a
 * second host of three slots it is split between them; nothing stays
 * counted on the engine either way. */
TEST(cluster_gang_held_to_the_hosts_pod_slots) {
    struct cm_options o;
    cm_options_default(&o);
    struct cluster *c = cluster_new(&o);
    REQUIRE(c);
    json_t *n = node("n1", "64", "64Gi", true);
    json_object_set_new(json_object_get(json_object_get(n, "status"), "allocatable"), "pods", json_string("3"));
    feed(c, n, cluster_node_set);
    feed(c, pod("d", "a", NULL, "100m", "n1"), cluster_pod_set);
    char name[16];
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "g-%d", i);
        feed(c, pod("d", name, NULL, "100m", NULL), cluster_pod_set);
    }
    REQUIRE_I64(cluster_refresh(c), 0);
    struct pod_task t[3];
    struct place_task pt[3];
    char err[128];
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "g-%d", i);
        struct cm_pod *p = cluster_pod(c, "d", name);
        REQUIRE_I64(pod_task_build(p->obj, &p->info, &t[i], err, sizeof err), 0);
        pt[i] = t[i].t;
    }
    struct place_gang g = {.id = "d/g", .strategy = PLACE_PACK, .tasks = pt, .ntasks = 3};
    uint32_t hosts[3];
    struct place_failure fail;
    CHECK_I64(cluster_place_gang(c, &g, hosts, &fail), -ENOSPC); /* 1 + 3 pods on a 3-pod host */
    uint32_t h1 = host_fleet_find(cluster_fleet(c), "n1");
    uint8_t why;
    REQUIRE_I64(place_check_hosts(cluster_engine(c), &t[0].t, NULL, &h1, 1, &why), 0);
    CHECK_I64(why, PR_NONE); /* held full for the try only */
    n = node("n2", "64", "64Gi", true);
    json_object_set_new(json_object_get(json_object_get(n, "status"), "allocatable"), "pods", json_string("3"));
    feed(c, n, cluster_node_set);
    REQUIRE_I64(cluster_refresh(c), 0);
    h1 = host_fleet_find(cluster_fleet(c), "n1");
    uint32_t h2 = host_fleet_find(cluster_fleet(c), "n2");
    for (int round = 0; round < 2; round++) { /* twice: the first left nothing counted */
        REQUIRE_I64(cluster_place_gang(c, &g, hosts, &fail), 0);
        int on[2] = {0, 0};
        for (int i = 0; i < 3; i++) on[hosts[i] == h2] += hosts[i] == h1 || hosts[i] == h2;
        CHECK(on[0] <= 2);
        CHECK(on[1] <= 3);
        CHECK_I64(on[0] + on[1], 3);
    }
    REQUIRE_I64(place_check_hosts(cluster_engine(c), &t[0].t, NULL, &h1, 1, &why), 0);
    CHECK_I64(why, PR_NONE);
    for (int i = 0; i < 3; i++) pod_task_free(&t[i]);
    cluster_free(c);
}

/* The generations callers key their memos on (cluster.h). */
TEST(cluster_generations_for_memos) {
    struct cm_options o;
    cm_options_default(&o);
    struct cluster *c = cluster_new(&o);
    REQUIRE(c);
    CHECK_I64(cluster_fleet_generation(c), 0);
    feed(c, node("n1", "4", "8Gi", true), cluster_node_set);
    feed(c, node("n2", "4", "8Gi", true), cluster_node_set);
    REQUIRE_I64(cluster_refresh(c), 0);
    uint64_t fg = cluster_fleet_generation(c);
    CHECK(fg > 0);
    uint32_t h1 = host_fleet_find(cluster_fleet(c), "n1"), h2 = host_fleet_find(cluster_fleet(c), "n2");
    const uint64_t *g = cluster_host_generations(c);
    REQUIRE(g);
    uint64_t g1 = g[h1], g2 = g[h2];
    CHECK(g1 && g2);
    /* a pod bound to n1: n1's stamp changes, n2's does not */
    feed(c, pod("d", "a", NULL, "1", "n1"), cluster_pod_set);
    REQUIRE_I64(cluster_refresh(c), 0);
    g = cluster_host_generations(c);
    CHECK(g[h1] != g1);
    CHECK_I64(g[h2], g2);
    g1 = g[h1];
    /* a pending pod counts on no host; an assumption on n2 does */
    feed(c, pod("d", "b", NULL, "1", NULL), cluster_pod_set);
    REQUIRE_I64(cluster_refresh(c), 0);
    g = cluster_host_generations(c);
    CHECK_I64(g[h1], g1);
    CHECK_I64(g[h2], g2);
    REQUIRE_I64(cluster_assume(c, "d", "b", "n2"), 0);
    CHECK(g[h2] != g2);
    g2 = g[h2];
    cluster_forget(c, "d", "b");
    CHECK(g[h2] != g2);
    g2 = g[h2];
    /* the same node object again changes nothing placement sees: the same fleet and stamps */
    feed(c, node("n1", "4", "8Gi", true), cluster_node_set);
    REQUIRE_I64(cluster_refresh(c), 0);
    CHECK_I64(cluster_fleet_generation(c), fg);
    g = cluster_host_generations(c);
    CHECK_I64(g[h1], g1);
    /* a label does: a new fleet, every stamp new */
    json_t *n = node("n1", "4", "8Gi", true);
    json_object_set_new(json_object_get(json_object_get(n, "metadata"), "labels"), "zone", json_string("b"));
    feed(c, n, cluster_node_set);
    REQUIRE_I64(cluster_refresh(c), 0);
    CHECK(cluster_fleet_generation(c) > fg);
    g = cluster_host_generations(c);
    h1 = host_fleet_find(cluster_fleet(c), "n1");
    h2 = host_fleet_find(cluster_fleet(c), "n2");
    CHECK(g[h1] != g1 && g[h2] != g2 && g[h1] && g[h2]);
    /* a pod's version: new with every object, never shared between pods */
    struct cm_pod *a = cluster_pod(c, "d", "a"), *b = cluster_pod(c, "d", "b");
    REQUIRE(a && b);
    uint64_t va = a->version;
    CHECK(va && b->version && va != b->version);
    feed(c, pod("d", "a", NULL, "2", "n1"), cluster_pod_set);
    CHECK(cluster_pod(c, "d", "a")->version > va);
    CHECK(cluster_pod(c, "d", "a")->version > b->version);
    cluster_free(c);
}

/* A new version of a counted pod that counts the same (a status write) leaves
 * the counts and the host's stamp alone; one that counts differently (its
 * job, requests, deletion or end) is counted again, exactly once. */
TEST(cluster_status_write_keeps_counts) {
    struct cm_options o;
    cm_options_default(&o);
    struct cluster *c = cluster_new(&o);
    REQUIRE(c);
    feed(c, node("n1", "4", "8Gi", true), cluster_node_set);
    feed(c, pool("org", "", "8", "8"), cluster_pool_set);
    feed(c, pool("a", "org", "2", "8"), cluster_pool_set);
    feed(c, pod("d", "p1", "a", "1", "n1"), cluster_pod_set);
    REQUIRE_I64(cluster_refresh(c), 0);
    struct host_fleet *f = cluster_fleet(c);
    uint32_t h1 = host_fleet_find(f, "n1");
    struct respool *a = cluster_pod_pool(c, cluster_pod(c, "d", "p1"));
    REQUIRE(a);
    uint64_t stamp = cluster_host_generations(c)[h1];
    /* Running: the same counts, the same stamp, the new object and info */
    json_t *run = pod("d", "p1", "a", "1", "n1");
    json_object_set_new(run, "status", json_pack("{s:s}", "phase", "Running"));
    feed(c, run, cluster_pod_set);
    REQUIRE_I64(cluster_refresh(c), 0);
    struct cm_pod *p = cluster_pod(c, "d", "p1");
    CHECK_I64(p->info.phase, POD_RUNNING);
    CHECK_I64(cluster_host_generations(c)[h1], stamp);
    CHECK_I64(f->hosts[h1].allocated.v[RES_CPU], 1000);
    CHECK_I64(usage_nonslack(&a->alloc).v[RES_CPU], 1000);
    int on1 = 0;
    for (struct cm_pod *q = cluster_host_first(c, h1); q; q = cluster_host_next(q)) on1++;
    CHECK_I64(on1, 1);
    /* a job label: counted again (placement's per-job counts move), once */
    json_t *job = pod("d", "p1", "a", "1", "n1");
    json_object_set_new(json_object_get(json_object_get(job, "metadata"), "labels"), "peloton.io/job", json_string("j"));
    feed(c, job, cluster_pod_set);
    REQUIRE_I64(cluster_refresh(c), 0);
    CHECK(cluster_host_generations(c)[h1] != stamp);
    CHECK_I64(f->hosts[h1].allocated.v[RES_CPU], 1000);
    CHECK_I64(usage_nonslack(&a->alloc).v[RES_CPU], 1000);
    stamp = cluster_host_generations(c)[h1];
    /* more cpu: counted again with the new request */
    feed(c, pod("d", "p1", "a", "2", "n1"), cluster_pod_set);
    REQUIRE_I64(cluster_refresh(c), 0);
    CHECK(cluster_host_generations(c)[h1] != stamp);
    CHECK_I64(f->hosts[h1].allocated.v[RES_CPU], 2000);
    CHECK_I64(usage_nonslack(&a->alloc).v[RES_CPU], 2000);
    /* Failed: no longer counted */
    json_t *failed = pod("d", "p1", "a", "2", "n1");
    json_object_set_new(failed, "status", json_pack("{s:s}", "phase", "Failed"));
    feed(c, failed, cluster_pod_set);
    REQUIRE_I64(cluster_refresh(c), 0);
    CHECK_I64(f->hosts[h1].allocated.v[RES_CPU], 0);
    CHECK_I64(usage_nonslack(&a->alloc).v[RES_CPU], 0);
    CHECK(!cluster_host_first(c, h1));
    cluster_free(c);
}

/* Slack is what non-revocable work leaves: revocable pods do not shrink the
 * slack they run on (issue #16: ten 4-cpu revocable pods on an idle 4 x 8
 * cluster lost six to "over cpu slack entitlement"), and non-revocable work
 * admitted for placement takes slack back, which is what preempts revocable
 * work. */
static json_t *rev_pod(const char *name, const char *node_name) {
    json_t *p = pod("d", name, "rev", "4", node_name);
    json_object_set_new(json_object_get(p, "metadata"), "annotations", json_pack("{s:s}", "peloton.io/revocable", "true"));
    return p;
}

static int collect_tasks(void *ud, struct cm_pod *p) {
    struct { struct cluster *c; struct preempt_task t[16]; size_t n; } *w = ud;
    struct respool *leaf = cluster_pod_pool(w->c, p);
    if (!p->node || !leaf || w->n == 16) return 0;
    w->t[w->n++] = (struct preempt_task){p->key, leaf, p->info.req, p->info.priority, p->info.flags, TASK_RUNNING, 0};
    return 0;
}

TEST(cluster_slack_is_what_non_revocable_work_leaves) {
    struct cm_options o;
    cm_options_default(&o);
    o.count_pending = true;
    struct cluster *c = cluster_new(&o);
    REQUIRE(c);
    const char *nodes[] = {"n1", "n2", "n3", "n4"};
    for (int i = 0; i < 4; i++) feed(c, node(nodes[i], "8", "32Gi", true), cluster_node_set);
    feed(c, pool("rev", "", "0", "32"), cluster_pool_set);
    feed(c, pool("batch", "", "0", "32"), cluster_pool_set);
    char name[16];
    for (int i = 0; i < 10; i++) { /* eight placed, two left over */
        snprintf(name, sizeof name, "r%d", i);
        feed(c, rev_pod(name, i < 8 ? nodes[i / 2] : NULL), cluster_pod_set);
    }
    REQUIRE_I64(cluster_refresh(c), 0);
    struct respool *rev = cluster_pod_pool(c, cluster_pod(c, "d", "r0"));
    REQUIRE(rev);
    CHECK_I64(rev->alloc.c[UC_REVOCABLE].v[RES_CPU], 32000);
    CHECK_I64(rev->slack_entitlement.v[RES_CPU], 32000); /* before: 0, the revocable pods' own cpu taken away */

    struct preempt_config pc;
    preempt_config_default(&pc);
    struct preempt_state st;
    REQUIRE_I64(preempt_state_init(&st, &pc), 0);
    struct { struct cluster *c; struct preempt_task t[16]; size_t n; } w = {.c = c};
    cluster_foreach_pod(c, collect_tasks, &w);
    REQUIRE_I64(w.n, 8);
    struct preempt_plan plan = {0};
    for (int check = 0; check < 5; check++) { /* an idle cluster: nothing to give back, however long */
        REQUIRE_I64(preempt_plan(&st, cluster_tree(c), w.t, w.n, &plan, NULL, 0), 0);
        CHECK_I64(plan.n, 0);
        preempt_plan_free(&plan);
    }

    /* non-revocable work admitted: its cpu leaves the slack, and the revocable pool gives back */
    feed(c, pod("d", "b0", "batch", "6", NULL), cluster_pod_set);
    cluster_admit(c, cluster_pod(c, "d", "b0"), true);
    REQUIRE_I64(cluster_refresh(c), 0);
    CHECK_I64(rev->slack_entitlement.v[RES_CPU], 26000);
    size_t victims = 0;
    for (int check = 0; check < 3; check++) {
        REQUIRE_I64(preempt_plan(&st, cluster_tree(c), w.t, w.n, &plan, NULL, 0), 0);
        victims += plan.n;
        for (size_t i = 0; i < plan.n; i++) CHECK_I64(plan.v[i].reason, PREEMPT_OVER_SLACK);
        preempt_plan_free(&plan);
    }
    CHECK_I64(victims, 2); /* 32 - 26 = 6 cpu: two 4-cpu pods */

    /* once placed it counts on its host, not twice */
    feed(c, pod("d", "b0", "batch", "6", "n1"), cluster_pod_set);
    REQUIRE_I64(cluster_refresh(c), 0);
    CHECK_I64(rev->slack_entitlement.v[RES_CPU], 26000);
    cluster_pod_del(c, "d", "b0");
    REQUIRE_I64(cluster_refresh(c), 0);
    CHECK_I64(rev->slack_entitlement.v[RES_CPU], 32000);
    preempt_state_free(&st);
    cluster_free(c);
}

/* Marking a pool for deletion changes no spec, yet the tree must learn it
 * (before, a write with an unchanged spec was taken for a status write). */
TEST(cluster_pool_marked_for_deletion_reaches_the_tree) {
    struct cluster *c = cluster_new(NULL);
    REQUIRE(c);
    feed(c, node("n1", "8", "16Gi", true), cluster_node_set);
    feed(c, pool("a", "", "0", "8"), cluster_pool_set);
    feed(c, pod("d", "w", "a", "2", NULL), cluster_pod_set); /* pending */
    REQUIRE_I64(cluster_refresh(c), 0);
    struct respool *a = cluster_pod_pool(c, cluster_pod(c, "d", "w"));
    REQUIRE(a);
    CHECK(!a->deleting);
    CHECK_I64(a->demand.v[RES_CPU], 2000);
    json_t *marked = pool("a", "", "0", "8");
    json_object_set_new(json_object_get(marked, "metadata"), "deletionTimestamp", json_string("2026-11-27T07:00:00Z"));
    feed(c, marked, cluster_pool_set);
    REQUIRE_I64(cluster_refresh(c), 0);
    a = cluster_pod_pool(c, cluster_pod(c, "d", "w"));
    REQUIRE(a);
    CHECK(a->deleting);
    CHECK_I64(a->demand.v[RES_CPU], 0); /* what waits in it asks for nothing */
    cluster_free(c);
}

struct list_ref {
    struct cluster *c;
    struct respool *leaf;
    size_t n;
};

/* Counts the pods that should be on ref->leaf's list, told from the
 * outside: their pool is that leaf, they have not ended, and they are bound,
 * admitted, or pending and not terminating. */
static int count_expected(void *ud, struct cm_pod *p) {
    struct list_ref *r = ud;
    if (cluster_pod_pool(r->c, p) == r->leaf && !p->info.terminal && (p->node || p->admitted || !p->info.deleting))
        r->n++;
    return 0;
}

/* Whether leaf's list (cluster_pool_first) holds exactly the pods that count
 * in it, doubly linked, and their requests add up to the leaf's allocation
 * and pending demand. */
static void check_pool_list(struct cluster *c, struct respool *leaf) {
    size_t in_list = 0;
    int64_t cpu = 0;
    const struct cm_pod *prev = NULL;
    for (struct cm_pod *p = cluster_pool_first(c, leaf); p; p = cluster_pool_next(p)) {
        CHECK(p->pprev_ == prev);
        CHECK(cluster_pod_pool(c, p) == leaf);
        CHECK(!p->info.terminal);
        cpu += p->info.req.v[RES_CPU];
        prev = p;
        in_list++;
        REQUIRE(in_list <= cluster_pod_count(c)); /* no cycle */
    }
    struct list_ref r = {c, leaf, 0};
    cluster_foreach_pod(c, count_expected, &r);
    CHECK_I64(in_list, r.n);
    struct usage a = leaf->alloc, q = leaf->pending;
    CHECK_I64(cpu, usage_nonslack(&a).v[RES_CPU] + a.c[UC_REVOCABLE].v[RES_CPU] + usage_nonslack(&q).v[RES_CPU] +
                       q.c[UC_REVOCABLE].v[RES_CPU]);
}

/* The per-pool pod lists (what the preemption pass walks) through a random
 * run: pods created, bound, moved between pools by label and by their
 * namespace's pool, admitted, ended, terminating and deleted; a pool deleted
 * and made again (a new tree, new lists); a pool that is not a leaf. After
 * each step every leaf's list is what counts in it. */
TEST(cluster_pool_lists_follow_pods) {
    struct cm_options o;
    cm_options_default(&o);
    o.default_pool = "a";
    struct cluster *c = cluster_new(&o);
    REQUIRE(c);
    feed(c, node("n1", "64", "64Gi", true), cluster_node_set);
    feed(c, node("n2", "64", "64Gi", true), cluster_node_set);
    feed(c, pool("org", "", "0", "64"), cluster_pool_set);
    feed(c, pool("a", "org", "0", "64"), cluster_pool_set);
    feed(c, pool("b", "org", "0", "64"), cluster_pool_set);
    feed(c, pool("c", "", "0", "64"), cluster_pool_set);
    REQUIRE_I64(cluster_refresh(c), 0);
    static const char *const pools[] = {"a", "b", "c", "org", "ghost", NULL};
    static const char *const nodes[] = {"n1", "n2", NULL};
    uint64_t seed = 7;
    char name[16];
    bool c_gone = false;
    for (int step = 0; step < 3000; step++) {
        snprintf(name, sizeof name, "p%d", (int)test_range(&seed, 0, 59));
        const char *ns = test_range(&seed, 0, 1) ? "d" : "e";
        int op = (int)test_range(&seed, 0, 99);
        if (op < 60) {
            json_t *v = pod(ns, name, pools[test_range(&seed, 0, 5)], test_range(&seed, 0, 1) ? "1" : "2",
                            nodes[test_range(&seed, 0, 2)]);
            int64_t ph = test_range(&seed, 0, 9);
            if (ph == 0) json_object_set_new(v, "status", json_pack("{s:s}", "phase", "Succeeded"));
            else if (ph == 1)
                json_object_set_new(json_object_get(v, "metadata"), "deletionTimestamp",
                                    json_string("2026-11-27T07:00:00Z"));
            feed(c, v, cluster_pod_set);
        } else if (op < 75) {
            cluster_pod_del(c, ns, name);
        } else if (op < 85) {
            struct cm_pod *p = cluster_pod(c, ns, name);
            if (p) cluster_admit(c, p, !p->admitted);
        } else if (op < 92) {
            json_t *v = J("{\"metadata\":{\"name\":\"e\",\"annotations\":{}}}");
            const char *to = pools[test_range(&seed, 0, 2)];
            json_object_set_new(json_object_get(json_object_get(v, "metadata"), "annotations"), "peloton.io/resource-pool",
                                json_string(to));
            feed(c, v, cluster_ns_set);
        } else if (op < 96) {
            if (c_gone) feed(c, pool("c", "", "0", "64"), cluster_pool_set);
            else cluster_pool_del(c, "c");
            c_gone = !c_gone;
        } else {
            REQUIRE_I64(cluster_refresh(c), 0);
        }
        if (step % 7 == 0 || op >= 92) {
            REQUIRE_I64(cluster_refresh(c), 0);
            CHECK(!cluster_pool_error(c));
            size_t n;
            struct respool *const *all = respool_preorder(cluster_tree(c), &n);
            REQUIRE(all);
            for (size_t i = 0; i < n; i++) {
                if (respool_is_leaf(all[i])) check_pool_list(c, all[i]);
                else CHECK(cluster_pool_first(c, all[i]) == NULL);
            }
            CHECK((crd_pool_find(cluster_tree(c), "c") == NULL) == c_gone);
        }
    }
    /* a pool of another tree has no list here */
    struct respool_tree *other = respool_tree_new();
    REQUIRE(other);
    CHECK(cluster_pool_first(c, respool_root(other)) == NULL);
    respool_tree_free(other);
    cluster_free(c);
}
