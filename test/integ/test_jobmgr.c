/* The job manager against the real API server: a private redis-server,
 * pelotond (the apiserver role, apisrv_fixture.h) on loopback, jobmgr_start on a
 * libuv loop in this process, and the test itself as scheduler and kubelet
 * (binding pods, writing their status, confirming graceful deletes).
 * Every wait is bounded; the server and redis are stopped on every path. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "apisrv_fixture.h"
#include "jobmgr.h"
#include "jobmgr_int.h"
#include "kclient.h"
#include "labels.h"
#include "test.h"

#define WAIT_MS 20000
#define NS "default"
#define JOBS "/apis/peloton.io/v1alpha1/namespaces/" NS "/jobs"
#define PODS "/api/v1/namespaces/" NS "/pods"
#define POOLS "/apis/peloton.io/v1alpha1/resourcepools"

struct env {
    struct apisrv srv;
    uv_loop_t loop;
    uv_timer_t wake;
    struct kclient *kc;
    struct jobmgr *jm;
    bool up;
    int rr;                      /* round robin of the simulated scheduler ... */
    const char *live[4];         /* ... over these nodes */
    int nlive;
};

static void on_wake(uv_timer_t *t) { (void)t; }

static void env_stop(struct env *e) {
    jobmgr_stop(e->jm);
    e->jm = NULL;
    kclient_free(e->kc);
    e->kc = NULL;
    if (e->up) {
        uv_close((uv_handle_t *)&e->wake, NULL);
        uv_run(&e->loop, UV_RUN_DEFAULT);
        uv_loop_close(&e->loop);
        e->up = false;
    }
    apisrv_stop(&e->srv);
}

static long api(struct env *e, const char *method, const char *path, const char *body, const char *ct,
                json_t **out);

static int env_start(struct env *e) {
    memset(e, 0, sizeof *e);
    int rc = apisrv_start(&e->srv, "--crds=crds"); /* the Job CRD */
    if (rc) return rc;
    e->live[0] = "n1";
    e->live[1] = "n2";
    e->nlive = 2;
    uv_loop_init(&e->loop);
    uv_timer_init(&e->loop, &e->wake);
    e->up = true;
    char err[256];
    struct kc_config cfg;
    if ((rc = kc_config_from_url(e->srv.url, NULL, &cfg, err, sizeof err))) {
        fprintf(stderr, "kc_config_from_url: %s\n", err);
        return rc;
    }
    e->kc = kclient_new(&e->loop, &cfg, err, sizeof err);
    kc_config_free(&cfg);
    if (!e->kc) {
        fprintf(stderr, "kclient_new: %s\n", err);
        return -EIO;
    }
    /* two nodes, ready */
    for (int i = 1; i <= 2; i++) {
        char b[300];
        snprintf(b, sizeof b,
                 "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n%d\",\"labels\":"
                 "{\"kubernetes.io/hostname\":\"n%d\"}},\"status\":{\"conditions\":[{\"type\":\"Ready\","
                 "\"status\":\"True\"}]}}",
                 i, i);
        if (api(e, "POST", "/api/v1/nodes", b, NULL, NULL) != 201) return -EIO;
    }
    /* the jobs' pool (a Job whose pool does not exist gets no pods) */
    if (api(e, "POST", POOLS,
            "{\"apiVersion\":\"peloton.io/v1alpha1\",\"kind\":\"ResourcePool\",\"metadata\":{\"name\":"
            "\"pool-a\"},\"spec\":{}}",
            NULL, NULL) != 201)
        return -EIO;
    struct jobmgr_options o;
    jobmgr_options_default(&o);
    o.resync_ms = 1000;
    e->jm = jobmgr_start(&e->loop, e->kc, &o, err, sizeof err);
    if (!e->jm) {
        fprintf(stderr, "jobmgr_start: %s\n", err);
        return -EIO;
    }
    return 0;
}

/* ---- API helpers (blocking, on kclient's private handle) ---- */

static long api(struct env *e, const char *method, const char *path, const char *body, const char *ct,
                json_t **out) {
    json_t *b = NULL;
    if (body) {
        json_error_t je;
        if (!(b = json_loads(body, 0, &je))) {
            fprintf(stderr, "bad test JSON: %s: %s\n", je.text, body);
            return -EINVAL;
        }
    }
    char err[256] = "";
    json_t *o = NULL;
    long st = kclient_request_sync(e->kc, method, path, b, ct, &o, err, sizeof err);
    json_decref(b);
    if (out) *out = o;
    else json_decref(o);
    return st;
}

/* Runs the loop for about ms. */
static void pump(struct env *e, unsigned ms) {
    uv_update_time(&e->loop);
    uint64_t end = uv_now(&e->loop) + ms;
    while (uv_now(&e->loop) < end) {
        uv_timer_start(&e->wake, on_wake, 10, 0);
        uv_run(&e->loop, UV_RUN_ONCE);
    }
}

static json_t *get_job(struct env *e, const char *name) {
    char p[256];
    snprintf(p, sizeof p, JOBS "/%s", name);
    json_t *o = NULL;
    if (api(e, "GET", p, NULL, NULL, &o) != 200) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static const char *job_state(const json_t *job) {
    return json_string_value(json_object_get(json_object_get(job, "status"), "state"));
}

static long job_stat(const json_t *job, const char *state) {
    const json_t *stats = json_object_get(json_object_get(job, "status"), "taskStats");
    return (long)json_integer_value(json_object_get(stats, state));
}

static const char *update_reason(const json_t *job) {
    const json_t *c = json_array_get(json_object_get(json_object_get(job, "status"), "conditions"), 0);
    return json_string_value(json_object_get(c, "reason"));
}

/* The job's pods (a new array). */
static json_t *list_pods(struct env *e, const char *job) {
    char p[256];
    snprintf(p, sizeof p, PODS "?labelSelector=peloton.io%%2Fjob%%3D%s", job);
    json_t *o = NULL;
    if (api(e, "GET", p, NULL, NULL, &o) != 200) {
        json_decref(o);
        return json_array();
    }
    json_t *items = json_incref(json_object_get(o, "items"));
    json_decref(o);
    return items ? items : json_array();
}

static const char *pmeta(const json_t *pod, const char *k) {
    return json_string_value(json_object_get(json_object_get(pod, "metadata"), k));
}
static const char *plabel(const json_t *pod, const char *k) {
    return json_string_value(json_object_get(json_object_get(json_object_get(pod, "metadata"), "labels"), k));
}
static const char *pann(const json_t *pod, const char *k) {
    return json_string_value(json_object_get(json_object_get(json_object_get(pod, "metadata"), "annotations"), k));
}
static const char *pphase(const json_t *pod) {
    return json_string_value(json_object_get(json_object_get(pod, "status"), "phase"));
}
static const char *pnode(const json_t *pod) {
    return json_string_value(json_object_get(json_object_get(pod, "spec"), "nodeName"));
}
static const char *pimage(const json_t *pod) {
    return json_string_value(
        json_object_get(json_array_get(json_object_get(json_object_get(pod, "spec"), "containers"), 0), "image"));
}

/* ---- the simulated scheduler and kubelet ---- */

/* The phase a pod should move to next (NULL: leave it). */
typedef const char *(*phase_fn)(const json_t *pod);

static const char *run_forever(const json_t *pod) {
    const char *ph = pphase(pod);
    return ph && !strcmp(ph, "Pending") ? "Running" : NULL;
}

static const char *run_to_success(const json_t *pod) {
    const char *ph = pphase(pod);
    if (ph && !strcmp(ph, "Pending")) return "Running";
    if (ph && !strcmp(ph, "Running")) return "Succeeded";
    return NULL;
}

static const char *always_fail(const json_t *pod) {
    const char *ph = pphase(pod);
    return ph && !strcmp(ph, "Pending") ? "Failed" : NULL;
}

static const char *bad_image_fails(const json_t *pod) {
    const char *ph = pphase(pod);
    if (!ph || strcmp(ph, "Pending")) return NULL;
    return pimage(pod) && !strcmp(pimage(pod), "bad") ? "Failed" : "Running";
}

/* One pass over the job's pods: confirm deletes, bind unbound pods (to the
 * DAEMON node when pinned), move phases by fn. */
static void kubelet_step(struct env *e, const char *job, phase_fn fn) {
    json_t *pods = list_pods(e, job);
    size_t i;
    json_t *pod;
    json_array_foreach(pods, i, pod) {
        const char *name = pmeta(pod, "name");
        char p[300];
        if (pmeta(pod, "deletionTimestamp")) {
            snprintf(p, sizeof p, PODS "/%s?gracePeriodSeconds=0", name);
            api(e, "DELETE", p, NULL, NULL, NULL);
            continue;
        }
        if (!pnode(pod)) {
            const char *pin = pann(pod, JM_A_DAEMON_NODE);
            char node[64];
            snprintf(node, sizeof node, "%s", pin ? pin : e->live[e->rr++ % e->nlive]);
            char b[300];
            snprintf(b, sizeof b,
                     "{\"apiVersion\":\"v1\",\"kind\":\"Binding\",\"metadata\":{\"name\":\"%s\"},"
                     "\"target\":{\"kind\":\"Node\",\"name\":\"%s\"}}",
                     name, node);
            snprintf(p, sizeof p, PODS "/%s/binding", name);
            api(e, "POST", p, b, NULL, NULL);
            continue;
        }
        const char *next = fn(pod);
        if (next) {
            char b[128];
            snprintf(b, sizeof b, "{\"status\":{\"phase\":\"%s\"}}", next);
            snprintf(p, sizeof p, PODS "/%s/status", name);
            api(e, "PATCH", p, b, "application/merge-patch+json", NULL);
        }
    }
    json_decref(pods);
}

typedef bool (*pred_fn)(struct env *e, void *ud);

/* Drives the loop and the kubelet until pred holds or WAIT_MS pass. */
static bool wait_until(struct env *e, const char *job, phase_fn fn, pred_fn pred, void *ud) {
    uv_update_time(&e->loop);
    uint64_t end = uv_now(&e->loop) + WAIT_MS;
    while (uv_now(&e->loop) < end) {
        pump(e, 30);
        if (job && fn) kubelet_step(e, job, fn);
        if (pred(e, ud)) return true;
    }
    if (job && getenv("JOBMGR_DEBUG")) { /* what the world looked like */
        json_t *j = get_job(e, job), *pods = list_pods(e, job);
        char *a = json_dumps(j, JSON_COMPACT), *b = json_dumps(pods, JSON_COMPACT);
        fprintf(stderr, "job: %s\npods: %s\n", a ? a : "null", b ? b : "null");
        free(a);
        free(b);
        json_decref(j);
        json_decref(pods);
    }
    return false;
}

struct want_state {
    const char *job, *state;
};
static bool job_in_state(struct env *e, void *ud) {
    struct want_state *w = ud;
    json_t *j = get_job(e, w->job);
    bool ok = j && job_state(j) && !strcmp(job_state(j), w->state);
    json_decref(j);
    return ok;
}

struct want_pods {
    const char *job;
    size_t n;        /* pods not being deleted */
    const char *phase; /* all in this phase, or NULL */
};
static bool pods_are(struct env *e, void *ud) {
    struct want_pods *w = ud;
    json_t *pods = list_pods(e, w->job);
    size_t i, n = 0;
    json_t *pod;
    bool ok = true;
    json_array_foreach(pods, i, pod) {
        if (pmeta(pod, "deletionTimestamp")) {
            ok = false;
            continue;
        }
        n++;
        if (w->phase && (!pphase(pod) || strcmp(pphase(pod), w->phase))) ok = false;
    }
    json_decref(pods);
    return ok && n == w->n;
}

static json_t *find_pod(json_t *pods, const char *name) {
    size_t i;
    json_t *pod;
    json_array_foreach(pods, i, pod) if (!strcmp(pmeta(pod, "name"), name)) return pod;
    return NULL;
}

static long create_job(struct env *e, const char *name, const char *type, int count, const char *extra,
                       const char *image) {
    char b[2048];
    char ic[32] = "";
    if (count >= 0) snprintf(ic, sizeof ic, "\"instanceCount\":%d,", count);
    snprintf(b, sizeof b,
             "{\"apiVersion\":\"peloton.io/v1alpha1\",\"kind\":\"Job\",\"metadata\":{\"name\":\"%s\"},"
             "\"spec\":{\"type\":\"%s\",\"resourcePool\":\"pool-a\",%s%s"
             "\"template\":{\"metadata\":{\"labels\":{\"app\":\"%s\"}},"
             "\"spec\":{\"containers\":[{\"name\":\"main\",\"image\":\"%s\"}]}}}}",
             name, type, ic, extra ? extra : "", name, image);
    return api(e, "POST", JOBS, b, NULL, NULL);
}

/* Changes the image of the job's template (a new template version). */
static long set_image(struct env *e, const char *job, const char *image) {
    char p[256], b[256];
    snprintf(p, sizeof p, JOBS "/%s", job);
    snprintf(b, sizeof b,
             "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"main\",\"image\":\"%s\"}]}}}}", image);
    return api(e, "PATCH", p, b, "application/merge-patch+json", NULL);
}

/* Stops the job manager and starts a new one on the same client. */
static int restart_jobmgr(struct env *e) {
    jobmgr_stop(e->jm);
    e->jm = NULL;
    pump(e, 50);
    struct jobmgr_options o;
    jobmgr_options_default(&o);
    o.resync_ms = 1000;
    char err[256];
    e->jm = jobmgr_start(&e->loop, e->kc, &o, err, sizeof err);
    return e->jm ? 0 : -EIO;
}

#define START(e)                                    \
    struct env e;                                   \
    if (env_start(&e)) {                            \
        env_stop(&e);                               \
        REQUIRE(!"environment did not start");      \
    }

/* ---- the tests ---- */

TEST(jobmgr_integ_batch_pods_and_success) {
    START(e);
    REQUIRE(create_job(&e, "b1", "BATCH", 3, "\"sla\":{\"minimumRunningInstances\":2,\"priority\":5},", "img") ==
            201);
    struct want_pods wp = {"b1", 3, "Pending"};
    bool ok = wait_until(&e, NULL, NULL, pods_are, &wp);
    CHECK(ok);
    json_t *job = get_job(&e, "b1");
    json_t *pods = list_pods(&e, "b1");
    for (int i = 0; ok && i < 3; i++) {
        char name[32], inst[16];
        snprintf(name, sizeof name, "b1-%d", i);
        snprintf(inst, sizeof inst, "%d", i);
        json_t *pod = find_pod(pods, name);
        CHECK(pod != NULL);
        if (!pod) continue;
        const json_t *ow = json_array_get(json_object_get(json_object_get(pod, "metadata"), "ownerReferences"), 0);
        CHECK_STR(json_string_value(json_object_get(ow, "kind")), "Job");
        CHECK_STR(json_string_value(json_object_get(ow, "name")), "b1");
        CHECK_STR(json_string_value(json_object_get(ow, "uid")), pmeta(job, "uid"));
        CHECK(json_is_true(json_object_get(ow, "controller")));
        CHECK_STR(plabel(pod, PL_JOB), "b1");
        CHECK_STR(plabel(pod, PL_INSTANCE), inst);
        CHECK_STR(plabel(pod, PL_POOL), "pool-a");
        CHECK_STR(plabel(pod, "app"), "b1");
        CHECK_STR(pann(pod, PA_PRIORITY), "5");
        if (i < 2) {
            CHECK_STR(plabel(pod, PL_GANG), "b1-gang-0");
            CHECK_STR(plabel(pod, PL_GANG_SIZE), "2");
        } else {
            CHECK(!plabel(pod, PL_GANG));
        }
        CHECK_STR(json_string_value(json_object_get(json_object_get(pod, "spec"), "schedulerName")), "peloton");
        CHECK_STR(json_string_value(json_object_get(json_object_get(pod, "spec"), "restartPolicy")), "Never");
    }
    json_decref(pods);
    json_decref(job);
    struct want_state ws = {"b1", "SUCCEEDED"};
    CHECK(wait_until(&e, "b1", run_to_success, job_in_state, &ws));
    job = get_job(&e, "b1");
    CHECK_I64(job_stat(job, "SUCCEEDED"), 3);
    CHECK_I64(job_stat(job, "RUNNING"), 0);
    json_decref(job);
    env_stop(&e);
}

TEST(jobmgr_integ_batch_failures_until_max) {
    START(e);
    REQUIRE(create_job(&e, "b2", "BATCH", 1, "\"restartPolicy\":{\"maxFailures\":2},", "img") == 201);
    struct want_state ws = {"b2", "FAILED"};
    CHECK(wait_until(&e, "b2", always_fail, job_in_state, &ws));
    pump(&e, 1500); /* a resync later: no fourth run */
    json_t *pods = list_pods(&e, "b2");
    CHECK_I64(json_array_size(pods), 1); /* older runs' pods are removed */
    json_t *pod = json_array_get(pods, 0);
    CHECK_STR(pmeta(pod, "name"), "b2-0-3");
    CHECK_STR(pann(pod, JM_A_RUN), "3");
    CHECK_STR(pann(pod, JM_A_FAILURES), "2");
    CHECK_STR(pphase(pod), "Failed");
    json_decref(pods);
    json_t *job = get_job(&e, "b2");
    CHECK_I64(job_stat(job, "FAILED"), 1);
    json_decref(job);
    env_stop(&e);
}

TEST(jobmgr_integ_stateless_pod_comes_back) {
    START(e);
    REQUIRE(create_job(&e, "s1", "STATELESS", 2, NULL, "img") == 201);
    struct want_pods wp = {"s1", 2, "Running"};
    CHECK(wait_until(&e, "s1", run_forever, pods_are, &wp));
    struct want_state ws = {"s1", "RUNNING"};
    CHECK(wait_until(&e, "s1", run_forever, job_in_state, &ws));
    CHECK(api(&e, "DELETE", PODS "/s1-1", NULL, NULL, NULL) == 200);
    kubelet_step(&e, "s1", run_forever); /* confirms the graceful delete */
    CHECK(wait_until(&e, "s1", run_forever, pods_are, &wp));
    json_t *pods = list_pods(&e, "s1");
    CHECK(find_pod(pods, "s1-0") != NULL);
    json_t *p1 = find_pod(pods, "s1-1-2");
    CHECK(p1 != NULL);
    if (p1) {
        CHECK_STR(plabel(p1, PL_INSTANCE), "1");
        CHECK_STR(pann(p1, JM_A_LOST), "1"); /* lost, not failed */
        CHECK_STR(pann(p1, JM_A_FAILURES), "0");
    }
    json_decref(pods);
    /* a node goes away: its pods are LOST and run again elsewhere (the
     * simulated scheduler binds round robin, so bind the new runs to n1) */
    CHECK(api(&e, "DELETE", "/api/v1/nodes/n2", NULL, NULL, NULL) == 200);
    e.nlive = 1;
    struct want_pods on_n1 = {"s1", 2, "Running"};
    bool ok = false;
    uv_update_time(&e.loop);
    for (uint64_t end = uv_now(&e.loop) + WAIT_MS; !ok && uv_now(&e.loop) < end;) {
        ok = wait_until(&e, "s1", run_forever, pods_are, &on_n1);
        pods = list_pods(&e, "s1");
        size_t i;
        json_t *pod;
        json_array_foreach(pods, i, pod) if (!pnode(pod) || strcmp(pnode(pod), "n1") != 0) ok = false;
        json_decref(pods);
    }
    CHECK(ok);
    env_stop(&e);
}

/* The job manager looks a record's node up once and again only when a Node
 * comes or goes: a node deleted after its pods were seen Running still
 * makes them LOST, and their next run is created without waiting for the
 * kubelet (none confirms anything here after the delete). */
TEST(jobmgr_integ_node_deleted_after_seen_is_lost) {
    START(e);
    REQUIRE(create_job(&e, "g1", "BATCH", 2, NULL, "img") == 201);
    struct want_pods wp = {"g1", 2, "Running"};
    CHECK(wait_until(&e, "g1", run_forever, pods_are, &wp));
    pump(&e, 300); /* reconciles that found both nodes */
    json_t *pods = list_pods(&e, "g1");
    char inst[16] = "";
    size_t i;
    json_t *pod;
    json_array_foreach(pods, i, pod) if (pnode(pod) && !strcmp(pnode(pod), "n2"))
        snprintf(inst, sizeof inst, "%s", plabel(pod, PL_INSTANCE));
    json_decref(pods);
    REQUIRE(inst[0]);
    CHECK(api(&e, "DELETE", "/api/v1/nodes/n2", NULL, NULL, NULL) == 200);
    bool again = false;
    uv_update_time(&e.loop);
    for (uint64_t end = uv_now(&e.loop) + WAIT_MS; !again && uv_now(&e.loop) < end;) {
        pump(&e, 50);
        pods = list_pods(&e, "g1");
        json_array_foreach(pods, i, pod) {
            const char *run = pann(pod, JM_A_RUN), *in = plabel(pod, PL_INSTANCE);
            if (run && in && !strcmp(in, inst) && !strcmp(run, "2")) again = true;
        }
        json_decref(pods);
    }
    CHECK(again);
    env_stop(&e);
}

static bool daemon_nodes_of(struct env *e, const char *job, const char *want) {
    json_t *pods = list_pods(e, job);
    char have[128] = "";
    size_t i;
    json_t *pod;
    bool ok = true;
    /* in node order (the nodes are few) */
    for (int n = 1; n <= 4; n++) {
        char node[16];
        snprintf(node, sizeof node, "n%d", n);
        json_array_foreach(pods, i, pod) {
            const char *pin = pann(pod, JM_A_DAEMON_NODE);
            if (pmeta(pod, "deletionTimestamp") || strcmp(pin ? pin : "", node)) continue;
            if (!pphase(pod) || strcmp(pphase(pod), "Running") || !pnode(pod) || strcmp(pnode(pod), node)) ok = false;
            if (have[0]) strcat(have, ",");
            strcat(have, node);
        }
    }
    json_array_foreach(pods, i, pod) if (pmeta(pod, "deletionTimestamp")) ok = false;
    json_decref(pods);
    return ok && !strcmp(have, want);
}

static bool daemon_nodes(struct env *e, void *ud) { return daemon_nodes_of(e, "d1", ud); /* "n2,n3" */ }
static bool daemon_nodes_d2(struct env *e, void *ud) { return daemon_nodes_of(e, "d2", ud); }

TEST(jobmgr_integ_daemon_follows_nodes) {
    START(e);
    REQUIRE(create_job(&e, "d1", "DAEMON", -1, NULL, "img") == 201);
    CHECK(wait_until(&e, "d1", run_forever, daemon_nodes, "n1,n2"));
    json_t *pods = list_pods(&e, "d1");
    json_t *pod = json_array_get(pods, 0);
    const json_t *terms = json_object_get(
        json_object_get(json_object_get(json_object_get(json_object_get(pod, "spec"), "affinity"), "nodeAffinity"),
                        "requiredDuringSchedulingIgnoredDuringExecution"),
        "nodeSelectorTerms");
    CHECK_I64(json_array_size(terms), 1);
    json_decref(pods);
    CHECK(api(&e, "POST", "/api/v1/nodes",
              "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n3\"},"
              "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}",
              NULL, NULL) == 201);
    CHECK(wait_until(&e, "d1", run_forever, daemon_nodes, "n1,n2,n3"));
    CHECK(api(&e, "DELETE", "/api/v1/nodes/n1", NULL, NULL, NULL) == 200);
    CHECK(wait_until(&e, "d1", run_forever, daemon_nodes, "n2,n3"));
    CHECK(api(&e, "PATCH", "/api/v1/nodes/n2", "{\"spec\":{\"unschedulable\":true}}", "application/merge-patch+json",
              NULL) == 200);
    CHECK(wait_until(&e, "d1", run_forever, daemon_nodes, "n3"));
    struct want_state ws = {"d1", "RUNNING"};
    CHECK(wait_until(&e, "d1", run_forever, job_in_state, &ws));
    /* a NotReady node's kubelet will not confirm: its pod goes without grace (no kubelet here) */
    CHECK(api(&e, "PATCH", "/api/v1/nodes/n3/status",
              "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\"}]}}",
              "application/merge-patch+json", NULL) == 200);
    CHECK(wait_until(&e, NULL, NULL, daemon_nodes, ""));
    env_stop(&e);
}

/* A DAEMON's nodes are those placement would put its pod on, and follow
 * their changes: no instance on a GPU host for a pod without GPUs (it would
 * stay Pending there), none where the required node affinity does not
 * match, until a label makes it match; a taint takes the node away again. */
TEST(jobmgr_integ_daemon_nodes_by_placement_filters) {
    START(e);
    CHECK(api(&e, "POST", "/api/v1/nodes",
              "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n3\"},"
              "\"status\":{\"allocatable\":{\"cpu\":\"8\",\"nvidia.com/gpu\":\"1\"},"
              "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}",
              NULL, NULL) == 201);
    REQUIRE(create_job(&e, "d1", "DAEMON", -1, NULL, "img") == 201);
    CHECK(wait_until(&e, "d1", run_forever, daemon_nodes, "n1,n2"));
    pump(&e, 300);
    CHECK(daemon_nodes(&e, "n1,n2")); /* still none on the GPU host */
    REQUIRE(api(&e, "POST", JOBS,
                "{\"apiVersion\":\"peloton.io/v1alpha1\",\"kind\":\"Job\",\"metadata\":{\"name\":\"d2\"},"
                "\"spec\":{\"type\":\"DAEMON\",\"resourcePool\":\"pool-a\",\"template\":{\"spec\":{"
                "\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":"
                "{\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":\"role\",\"operator\":\"In\","
                "\"values\":[\"edge\"]}]}]}}},\"containers\":[{\"name\":\"main\",\"image\":\"img\"}]}}}}",
                NULL, NULL) == 201);
    pump(&e, 300);
    CHECK(daemon_nodes_d2(&e, ""));
    CHECK(api(&e, "PATCH", "/api/v1/nodes/n2", "{\"metadata\":{\"labels\":{\"role\":\"edge\"}}}",
              "application/merge-patch+json", NULL) == 200);
    CHECK(wait_until(&e, "d2", run_forever, daemon_nodes_d2, "n2"));
    CHECK(api(&e, "PATCH", "/api/v1/nodes/n2",
              "{\"spec\":{\"taints\":[{\"key\":\"maint\",\"effect\":\"NoSchedule\"}]}}",
              "application/merge-patch+json", NULL) == 200);
    CHECK(wait_until(&e, "d2", run_forever, daemon_nodes_d2, ""));
    CHECK(wait_until(&e, "d1", run_forever, daemon_nodes, "n1"));
    CHECK(api(&e, "PATCH", "/api/v1/nodes/n2", "{\"spec\":{\"taints\":null}}", "application/merge-patch+json",
              NULL) == 200);
    CHECK(wait_until(&e, "d2", run_forever, daemon_nodes_d2, "n2"));
    CHECK(wait_until(&e, "d1", run_forever, daemon_nodes, "n1,n2"));
    env_stop(&e);
}

/* The Job's condition of the given type (borrowed from job), or NULL. */
static const json_t *job_condition(const json_t *job, const char *type) {
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(job, "status"), "conditions"), i, c) {
        const char *t = json_string_value(json_object_get(c, "type"));
        if (t && !strcmp(t, type)) return c;
    }
    return NULL;
}

static const char *str_or(const char *s) { return s ? s : ""; }

struct want_cond {
    const char *job, *type, *status, *reason;
};
static bool job_condition_is(struct env *e, void *ud) {
    struct want_cond *w = ud;
    json_t *j = get_job(e, w->job);
    const json_t *c = job_condition(j, w->type);
    bool ok = c && !strcmp(str_or(json_string_value(json_object_get(c, "status"))), w->status) &&
              !strcmp(str_or(json_string_value(json_object_get(c, "reason"))), w->reason);
    json_decref(j);
    return ok;
}

/* Reasons of the Events about the Job, comma-joined in time order. */
static void job_events(struct env *e, const char *job, char *out, size_t len) {
    char p[256];
    snprintf(p, sizeof p, "/api/v1/namespaces/" NS "/events?fieldSelector=involvedObject.name%%3D%s", job);
    json_t *o = NULL;
    out[0] = 0;
    if (api(e, "GET", p, NULL, NULL, &o) == 200) {
        size_t i;
        json_t *ev;
        json_array_foreach(json_object_get(o, "items"), i, ev) {
            const char *kind = json_string_value(json_object_get(json_object_get(ev, "involvedObject"), "kind"));
            if (!kind || strcmp(kind, "Job")) continue;
            if (out[0]) strncat(out, ",", len - strlen(out) - 1);
            strncat(out, str_or(json_string_value(json_object_get(ev, "reason"))), len - strlen(out) - 1);
        }
    }
    json_decref(o);
}

/* A Job naming a pool that does not exist yet gets no pods, and says so
 * (condition PoolReady False, a Warning Event); once the pool exists the
 * pods come, the condition turns True and a Normal Event says it proceeds.
 * A pool with children takes no work either. */
TEST(jobmgr_integ_job_waits_for_its_pool) {
    START(e);
    REQUIRE(api(&e, "POST", JOBS,
                "{\"apiVersion\":\"peloton.io/v1alpha1\",\"kind\":\"Job\",\"metadata\":{\"name\":\"late\"},"
                "\"spec\":{\"type\":\"BATCH\",\"resourcePool\":\"pool-late\",\"instanceCount\":2,"
                "\"template\":{\"spec\":{\"containers\":[{\"name\":\"main\",\"image\":\"img\"}]}}}}",
                NULL, NULL) == 201);
    struct want_cond nf = {"late", "PoolReady", "False", "PoolNotFound"};
    CHECK(wait_until(&e, NULL, NULL, job_condition_is, &nf));
    json_t *job = get_job(&e, "late");
    const json_t *c = job_condition(job, "PoolReady");
    CHECK_STR(json_string_value(json_object_get(c, "message")),
              "resource pool \"pool-late\" not found: the job's pods are created once it exists");
    CHECK(json_string_value(json_object_get(c, "lastTransitionTime")) != NULL);
    CHECK_STR(job_state(job), "INITIALIZED");
    json_decref(job);
    pump(&e, 300);
    json_t *pods = list_pods(&e, "late");
    CHECK_I64(json_array_size(pods), 0);
    json_decref(pods);
    char ev[256];
    job_events(&e, "late", ev, sizeof ev);
    CHECK_STR(ev, "PoolNotFound");
    /* the pool comes, with a child: still no work in it */
    CHECK(api(&e, "POST", POOLS,
              "{\"apiVersion\":\"peloton.io/v1alpha1\",\"kind\":\"ResourcePool\",\"metadata\":{\"name\":"
              "\"pool-late\"},\"spec\":{}}",
              NULL, NULL) == 201);
    CHECK(api(&e, "POST", POOLS,
              "{\"apiVersion\":\"peloton.io/v1alpha1\",\"kind\":\"ResourcePool\",\"metadata\":{\"name\":"
              "\"pool-kid\"},\"spec\":{\"parent\":\"pool-late\"}}",
              NULL, NULL) == 201);
    struct want_cond nl = {"late", "PoolReady", "False", "PoolNotLeaf"};
    CHECK(wait_until(&e, NULL, NULL, job_condition_is, &nl));
    pods = list_pods(&e, "late");
    CHECK_I64(json_array_size(pods), 0);
    json_decref(pods);
    /* the child goes: the job proceeds. DELETE marks a pool (its finalizer
     * peloton.io/pool-protection); the resource manager, not running here,
     * would remove the finalizer of an empty pool: the test does it */
    CHECK(api(&e, "DELETE", POOLS "/pool-kid", NULL, NULL, NULL) == 200);
    CHECK(api(&e, "PATCH", POOLS "/pool-kid", "{\"metadata\":{\"finalizers\":null}}", "application/merge-patch+json",
              NULL) == 200);
    struct want_cond ok = {"late", "PoolReady", "True", "PoolFound"};
    CHECK(wait_until(&e, NULL, NULL, job_condition_is, &ok));
    struct want_state ws = {"late", "SUCCEEDED"};
    CHECK(wait_until(&e, "late", run_to_success, job_in_state, &ws));
    job_events(&e, "late", ev, sizeof ev);
    CHECK_STR(ev, "PoolNotFound,PoolNotLeaf,PoolFound");
    /* a job whose pool is there from the start: condition True, no Event */
    REQUIRE(create_job(&e, "fine", "BATCH", 1, NULL, "img") == 201);
    struct want_cond fine = {"fine", "PoolReady", "True", "PoolFound"};
    CHECK(wait_until(&e, NULL, NULL, job_condition_is, &fine));
    job_events(&e, "fine", ev, sizeof ev);
    CHECK_STR(ev, "");
    env_stop(&e);
}

/* Tracks the most instances unavailable at once during an update. */
struct roll {
    const char *job, *image, *reason;
    size_t count;
    size_t max_unavailable;
};

static bool rolled(struct env *e, void *ud) {
    struct roll *r = ud;
    json_t *pods = list_pods(e, r->job);
    size_t i, running = 0, at = 0;
    json_t *pod;
    json_array_foreach(pods, i, pod) {
        if (pmeta(pod, "deletionTimestamp") || !pphase(pod) || strcmp(pphase(pod), "Running")) continue;
        running++;
        if (pimage(pod) && !strcmp(pimage(pod), r->image)) at++;
    }
    json_decref(pods);
    if (r->count > running && r->count - running > r->max_unavailable) r->max_unavailable = r->count - running;
    json_t *job = get_job(e, r->job);
    bool ok = job && update_reason(job) && !strcmp(update_reason(job), r->reason) && at == r->count &&
              running == r->count;
    json_decref(job);
    return ok;
}

TEST(jobmgr_integ_rolling_update_in_batches) {
    START(e);
    REQUIRE(create_job(&e, "u1", "STATELESS", 4, "\"updateStrategy\":{\"batchSize\":2,\"minReadySeconds\":0},", "v1") == 201);
    struct want_pods wp = {"u1", 4, "Running"};
    CHECK(wait_until(&e, "u1", run_forever, pods_are, &wp));
    CHECK(set_image(&e, "u1", "v2") == 200);
    struct roll r = {"u1", "v2", "SUCCEEDED", 4, 0};
    CHECK(wait_until(&e, "u1", run_forever, rolled, &r));
    CHECK(r.max_unavailable <= 2);
    CHECK(r.max_unavailable >= 1);
    json_t *job = get_job(&e, "u1");
    const json_t *ann = json_object_get(json_object_get(job, "metadata"), "annotations");
    json_t *tpl = json_object_get(json_object_get(job, "spec"), "template");
    char v[16];
    snprintf(v, sizeof v, "%u", jm_template_version(tpl));
    CHECK_STR(json_string_value(json_object_get(ann, JM_A_CONFIG_VERSION)), v);
    CHECK_STR(json_string_value(json_object_get(ann, JM_A_UPDATE_STATE)), "SUCCEEDED");
    CHECK(json_integer_value(json_object_get(json_object_get(job, "metadata"), "generation")) >= 2);
    CHECK_I64(json_integer_value(json_object_get(json_object_get(job, "status"), "observedGeneration")),
              json_integer_value(json_object_get(json_object_get(job, "metadata"), "generation")));
    json_decref(job);
    env_stop(&e);
}

TEST(jobmgr_integ_failed_update_rolls_back) {
    START(e);
    REQUIRE(create_job(&e, "u2", "STATELESS", 3,
                       "\"updateStrategy\":{\"batchSize\":1,\"maxFailureInstances\":1,\"rollbackOnFailure\":true,"
                       "\"minReadySeconds\":1},", /* a bad pod fails before Running: the settle time is the rollback's */
                       "good") == 201);
    struct want_pods wp = {"u2", 3, "Running"};
    CHECK(wait_until(&e, "u2", bad_image_fails, pods_are, &wp));
    json_t *job = get_job(&e, "u2");
    char v1[16];
    snprintf(v1, sizeof v1, "%u", jm_template_version(json_object_get(json_object_get(job, "spec"), "template")));
    json_decref(job);
    CHECK(set_image(&e, "u2", "bad") == 200);
    struct roll r = {"u2", "good", "ROLLED_BACK", 3, 0};
    CHECK(wait_until(&e, "u2", bad_image_fails, rolled, &r));
    job = get_job(&e, "u2");
    const json_t *ann = json_object_get(json_object_get(job, "metadata"), "annotations");
    CHECK_STR(json_string_value(json_object_get(ann, JM_A_CONFIG_VERSION)), v1);
    CHECK_STR(json_string_value(json_object_get(ann, JM_A_UPDATE_STATE)), "ROLLED_BACK");
    CHECK_STR(job_state(job), "RUNNING");
    json_decref(job);
    pump(&e, 1500); /* a resync later: the bad template is not tried again */
    kubelet_step(&e, "u2", bad_image_fails);
    json_t *pods = list_pods(&e, "u2");
    size_t i;
    json_t *pod;
    json_array_foreach(pods, i, pod) CHECK_STR(pimage(pod), "good");
    json_decref(pods);
    env_stop(&e);
}

TEST(jobmgr_integ_delete_job_deletes_pods) {
    START(e);
    REQUIRE(create_job(&e, "x1", "STATELESS", 2, NULL, "img") == 201);
    struct want_pods wp = {"x1", 2, "Running"};
    CHECK(wait_until(&e, "x1", run_forever, pods_are, &wp));
    CHECK(api(&e, "DELETE", JOBS "/x1", NULL, NULL, NULL) == 200);
    struct want_pods none = {"x1", 0, NULL};
    CHECK(wait_until(&e, "x1", run_forever, pods_are, &none));
    json_t *pods = list_pods(&e, "x1");
    CHECK_I64(json_array_size(pods), 0);
    json_decref(pods);
    env_stop(&e);
}

static bool has_pod(struct env *e, void *ud) {
    const char *name = ud;
    char job[64];
    snprintf(job, sizeof job, "%s", name);
    char *dash = strchr(job, '-');
    if (dash) *dash = 0;
    json_t *pods = list_pods(e, job);
    bool ok = find_pod(pods, name) != NULL;
    json_decref(pods);
    return ok;
}

/* Gang members lost with their node run again as a gang of their own:
 * labelled with how many were lost (not the whole gang: the others still
 * run), under a gang name of their own. */
TEST(jobmgr_integ_lost_gang_members_form_their_own_gang) {
    START(e);
    REQUIRE(create_job(&e, "g4", "BATCH", 4, "\"sla\":{\"minimumRunningInstances\":4},", "img") == 201);
    struct want_pods wp = {"g4", 4, "Running"};
    CHECK(wait_until(&e, "g4", run_forever, pods_are, &wp));
    json_t *pods = list_pods(&e, "g4");
    int lost[4], nlost = 0;
    size_t i;
    json_t *pod;
    json_array_foreach(pods, i, pod) {
        CHECK_STR(plabel(pod, PL_GANG), "g4-gang-0");
        CHECK_STR(plabel(pod, PL_GANG_SIZE), "4");
        if (pnode(pod) && !strcmp(pnode(pod), "n2")) lost[nlost++] = atoi(plabel(pod, PL_INSTANCE));
    }
    json_decref(pods);
    REQUIRE(nlost == 2); /* the simulated scheduler binds round robin over n1, n2 */
    CHECK(api(&e, "DELETE", "/api/v1/nodes/n2", NULL, NULL, NULL) == 200);
    e.nlive = 1;
    char want[32];
    snprintf(want, sizeof want, "g4-%d-2", lost[1]);
    CHECK(wait_until(&e, NULL, NULL, has_pod, want));
    pods = list_pods(&e, "g4");
    char gang[32];
    snprintf(gang, sizeof gang, "g4-gang-%d-2", lost[0] < lost[1] ? lost[0] : lost[1]);
    for (int k = 0; k < 2; k++) {
        char name[32];
        snprintf(name, sizeof name, "g4-%d-2", lost[k]);
        json_t *p = find_pod(pods, name);
        CHECK(p != NULL);
        CHECK_STR(plabel(p, PL_GANG), gang);
        CHECK_STR(plabel(p, PL_GANG_SIZE), "2");
    }
    json_decref(pods);
    CHECK(wait_until(&e, "g4", run_forever, pods_are, &wp));
    env_stop(&e);
}

/* A new job manager finds the runs and failure counts in the pods. */
TEST(jobmgr_integ_restart_recovers_counts) {
    START(e);
    REQUIRE(create_job(&e, "r1", "BATCH", 1, "\"restartPolicy\":{\"maxFailures\":3},", "img") == 201);
    CHECK(wait_until(&e, "r1", always_fail, has_pod, "r1-0-2"));
    jobmgr_stop(e.jm);
    e.jm = NULL;
    kubelet_step(&e, "r1", always_fail);
    kubelet_step(&e, "r1", always_fail); /* run 2 bound and failed while no job manager runs */
    REQUIRE(restart_jobmgr(&e) == 0);
    struct want_state ws = {"r1", "FAILED"};
    CHECK(wait_until(&e, "r1", always_fail, job_in_state, &ws));
    pump(&e, 1500);
    json_t *pods = list_pods(&e, "r1");
    CHECK_I64(json_array_size(pods), 1);
    json_t *pod = json_array_get(pods, 0);
    CHECK_STR(pmeta(pod, "name"), "r1-0-4");
    CHECK_STR(pann(pod, JM_A_FAILURES), "3");
    json_decref(pods);
    env_stop(&e);
}

struct want_stat {
    const char *job, *state;
    long n;
};
static bool job_stat_is(struct env *e, void *ud) {
    struct want_stat *w = ud;
    json_t *j = get_job(e, w->job);
    bool ok = j && job_stat(j, w->state) == w->n;
    json_decref(j);
    return ok;
}

static bool stateful_hinted(struct env *e, void *ud) {
    const char *node = ud;
    json_t *pods = list_pods(e, "st");
    json_t *p = find_pod(pods, "st-0-2");
    bool ok = p && pann(p, JM_A_HOST_HINT) && !strcmp(pann(p, JM_A_HOST_HINT), node) && pphase(p) &&
              !strcmp(pphase(p), "Running");
    json_decref(pods);
    return ok;
}

TEST(jobmgr_integ_scale_and_stateful_hint) {
    START(e);
    REQUIRE(create_job(&e, "st", "STATEFUL", 2, NULL, "img") == 201);
    struct want_pods wp = {"st", 2, "Running"};
    CHECK(wait_until(&e, "st", run_forever, pods_are, &wp));
    CHECK(api(&e, "PATCH", JOBS "/st", "{\"spec\":{\"instanceCount\":3}}", "application/merge-patch+json", NULL) ==
          200);
    struct want_pods w3 = {"st", 3, "Running"};
    CHECK(wait_until(&e, "st", run_forever, pods_are, &w3));
    CHECK(api(&e, "PATCH", JOBS "/st", "{\"spec\":{\"instanceCount\":1}}", "application/merge-patch+json", NULL) ==
          200);
    struct want_pods w1 = {"st", 1, "Running"};
    CHECK(wait_until(&e, "st", run_forever, pods_are, &w1));
    json_t *pods = list_pods(&e, "st");
    json_t *p0 = find_pod(pods, "st-0");
    CHECK(p0 != NULL);
    char node[64] = "";
    if (p0 && pnode(p0)) snprintf(node, sizeof node, "%s", pnode(p0));
    json_decref(pods);
    /* the pod fails: the next run prefers the same node */
    CHECK(api(&e, "PATCH", PODS "/st-0/status", "{\"status\":{\"phase\":\"Failed\"}}", "application/merge-patch+json",
              NULL) == 200);
    CHECK(wait_until(&e, "st", run_forever, stateful_hinted, node));
    pods = list_pods(&e, "st");
    json_t *p = find_pod(pods, "st-0-2");
    const json_t *pref = json_array_get(
        json_object_get(json_object_get(json_object_get(json_object_get(p, "spec"), "affinity"), "nodeAffinity"),
                        "preferredDuringSchedulingIgnoredDuringExecution"),
        0);
    CHECK_I64(json_integer_value(json_object_get(pref, "weight")), 100);
    json_decref(pods);
    struct want_stat ws = {"st", "RUNNING", 1};
    CHECK(wait_until(&e, "st", run_forever, job_stat_is, &ws));
    env_stop(&e);
}

/* A burst of pod updates of one job costs a reconcile per tick, not per event. */
TEST(jobmgr_integ_events_coalesced) {
    START(e);
    REQUIRE(create_job(&e, "c1", "STATELESS", 20, NULL, "img") == 201);
    struct want_pods wp = {"c1", 20, "Running"};
    CHECK(wait_until(&e, "c1", run_forever, pods_are, &wp));
    pump(&e, 300);
    struct jobmgr_stats a, b;
    jobmgr_stats(e.jm, &a);
    for (int k = 0; k < 5; k++) { /* 100 updates while the loop does not run */
        for (int i = 0; i < 20; i++) {
            char p[128], body[96];
            snprintf(p, sizeof p, PODS "/c1-%d", i);
            snprintf(body, sizeof body, "{\"metadata\":{\"labels\":{\"touch\":\"%d\"}}}", k);
            api(&e, "PATCH", p, body, "application/merge-patch+json", NULL);
        }
    }
    pump(&e, 400);
    jobmgr_stats(e.jm, &b);
    fprintf(stderr, "  jobmgr: %llu events coalesced into %llu reconciles\n",
            (unsigned long long)(b.events - a.events), (unsigned long long)(b.reconciles - a.reconciles));
    CHECK(b.events - a.events >= 100);
    CHECK(b.reconciles - a.reconciles <= 20); /* one per tick, not one per event */
    CHECK_I64(b.write_errors, 0);
    CHECK_I64(b.jobs, 1);
    env_stop(&e);
}

/* Runs the loop until the job manager has made n resyncs after those counted
 * in *from (passes and skips alike), at most ms; *out is its counters then. */
static void pump_resyncs(struct env *e, const struct jobmgr_stats *from, unsigned n, unsigned ms,
                         struct jobmgr_stats *out) {
    uv_update_time(&e->loop);
    uint64_t end = uv_now(&e->loop) + ms;
    do {
        pump(e, 20);
        jobmgr_stats(e->jm, out);
    } while (out->resync_passes + out->resync_skips < from->resync_passes + from->resync_skips + n &&
             uv_now(&e->loop) < end);
}

/* Runs the loop until a resync after those in *from skipped the pod pass (at
 * most ms): the records hold every cached pod again. */
static void pump_until_a_skip(struct env *e, const struct jobmgr_stats *from, unsigned ms, struct jobmgr_stats *out) {
    uv_update_time(&e->loop);
    uint64_t end = uv_now(&e->loop) + ms;
    do {
        pump(e, 20);
        jobmgr_stats(e->jm, out);
    } while (out->resync_skips == from->resync_skips && uv_now(&e->loop) < end);
}

/* An idle job manager's resync does not decode every pod again: once its
 * records hold every cached pod as adopted, a resync (every second here)
 * skips the pod pass; a cached pod no record holds (a pod with the job
 * label that is not a Job's) sends it back to re-applying them all, and its
 * delete lets it skip again. The test waits for resyncs by their counters
 * (each wait bounded), not for fixed times: two resyncs in a row that skip,
 * a pass after the stray pod, and a skip after its delete, then one more. */
TEST(jobmgr_integ_idle_resync_skips_the_pod_pass) {
    START(e);
    REQUIRE(create_job(&e, "i1", "STATELESS", 10, NULL, "img") == 201);
    struct want_pods wp = {"i1", 10, "Running"};
    CHECK(wait_until(&e, "i1", run_forever, pods_are, &wp));
    struct jobmgr_stats s, a, b, c, d;
    jobmgr_stats(e.jm, &s);
    pump_until_a_skip(&e, &s, 5000, &a); /* the last writes and a pass that adopts what they made */
    pump_resyncs(&e, &a, 2, 4000, &b);
    CHECK(b.resync_skips - a.resync_skips >= 2);
    CHECK_I64(b.resync_passes - a.resync_passes, 0);
    REQUIRE(api(&e, "POST", PODS,
                "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"stray\",\"labels\":"
                "{\"peloton.io/job\":\"i1\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"x\"}]}}",
                NULL, NULL) == 201);
    uv_update_time(&e.loop);
    uint64_t end = uv_now(&e.loop) + 3000;
    do { /* the next resyncs pass over every pod again */
        pump(&e, 20);
        jobmgr_stats(e.jm, &c);
    } while (c.resync_passes == b.resync_passes && uv_now(&e.loop) < end);
    CHECK(c.resync_passes - b.resync_passes >= 1);
    REQUIRE(api(&e, "DELETE", PODS "/stray?gracePeriodSeconds=0", NULL, NULL, NULL) == 200);
    jobmgr_stats(e.jm, &s);
    pump_until_a_skip(&e, &s, 4000, &c);
    pump_resyncs(&e, &c, 1, 3000, &d);
    CHECK(d.resync_skips - c.resync_skips >= 1);
    CHECK_I64(d.resync_passes - c.resync_passes, 0);
    CHECK_I64(d.write_errors, 0);
    env_stop(&e);
}

static bool some_at(struct env *e, void *ud) {
    const char *image = ud;
    json_t *pods = list_pods(e, "u3");
    size_t i;
    json_t *pod;
    bool ok = false;
    json_array_foreach(pods, i, pod) if (pimage(pod) && !strcmp(pimage(pod), image) && pphase(pod) &&
                                         !strcmp(pphase(pod), "Running")) ok = true;
    json_decref(pods);
    return ok;
}

/* A job manager restarted in the middle of a rolling update finishes it. */
TEST(jobmgr_integ_update_survives_restart) {
    START(e);
    REQUIRE(create_job(&e, "u3", "STATELESS", 4, "\"updateStrategy\":{\"batchSize\":1,\"minReadySeconds\":0},", "v1") == 201);
    struct want_pods wp = {"u3", 4, "Running"};
    CHECK(wait_until(&e, "u3", run_forever, pods_are, &wp));
    CHECK(set_image(&e, "u3", "v2") == 200);
    CHECK(wait_until(&e, "u3", run_forever, some_at, "v2"));
    REQUIRE(restart_jobmgr(&e) == 0);
    struct roll r = {"u3", "v2", "SUCCEEDED", 4, 0};
    CHECK(wait_until(&e, "u3", run_forever, rolled, &r));
    CHECK(r.max_unavailable <= 1);
    env_stop(&e);
}

/* ---- sla.maximumRunningInstances and spec.stoppedInstances ---- */

/* Pods of the job not ended: not Succeeded nor Failed (being deleted counts:
 * its run has not ended yet). */
static size_t live_pods(struct env *e, const char *job) {
    json_t *pods = list_pods(e, job);
    size_t i, n = 0;
    json_t *pod;
    json_array_foreach(pods, i, pod) {
        const char *ph = pphase(pod);
        n += !ph || (strcmp(ph, "Succeeded") && strcmp(ph, "Failed"));
    }
    json_decref(pods);
    return n;
}

struct max_live {
    const char *job;
    size_t max;
};
static bool done_tracking(struct env *e, void *ud) {
    struct max_live *m = ud;
    size_t n = live_pods(e, m->job);
    if (n > m->max) m->max = n;
    struct want_state ws = {m->job, "SUCCEEDED"};
    return job_in_state(e, &ws);
}

/* A BATCH job of 5 with maximumRunningInstances 2: never more than 2 pods
 * not ended at once, the next started as one ends, all 5 succeed. */
TEST(jobmgr_integ_batch_max_running) {
    START(e);
    REQUIRE(create_job(&e, "mr", "BATCH", 5, "\"sla\":{\"maximumRunningInstances\":2},", "img") == 201);
    struct max_live m = {"mr", 0};
    CHECK(wait_until(&e, "mr", run_to_success, done_tracking, &m));
    CHECK_I64((long)m.max, 2);
    json_t *job = get_job(&e, "mr");
    CHECK_I64(job_stat(job, "SUCCEEDED"), 5);
    json_decref(job);
    json_t *pods = list_pods(&e, "mr");
    CHECK_I64(json_array_size(pods), 5);
    json_decref(pods);
    env_stop(&e);
}

struct want_instances {
    const char *job;
    const char *want; /* the instances with a Running pod not being deleted, e.g. "0,1,4" */
};
static bool instances_running(struct env *e, void *ud) {
    struct want_instances *w = ud;
    json_t *pods = list_pods(e, w->job);
    char have[10][16];
    size_t i, n = 0;
    json_t *pod;
    bool ok = true;
    json_array_foreach(pods, i, pod) {
        if (pmeta(pod, "deletionTimestamp") || !pphase(pod) || strcmp(pphase(pod), "Running")) {
            ok = false; /* something is still moving */
            continue;
        }
        if (n < 10) snprintf(have[n++], sizeof have[0], "%s", plabel(pod, PL_INSTANCE) ? plabel(pod, PL_INSTANCE) : "");
    }
    json_decref(pods);
    qsort(have, n, sizeof have[0], (int (*)(const void *, const void *))strcmp);
    char got[200] = "";
    for (i = 0; i < n; i++) snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s", i ? "," : "", have[i]);
    return ok && !strcmp(got, w->want);
}

/* spec.stoppedInstances: the named instances' pods are killed and not
 * replaced while named; taken out of the list, they run again. */
TEST(jobmgr_integ_stopped_instances) {
    START(e);
    REQUIRE(create_job(&e, "st", "STATELESS", 5, NULL, "img") == 201);
    struct want_instances all = {"st", "0,1,2,3,4"};
    CHECK(wait_until(&e, "st", run_forever, instances_running, &all));
    CHECK(api(&e, "PATCH", JOBS "/st", "{\"spec\":{\"stoppedInstances\":[{\"from\":2,\"to\":4}]}}",
              "application/merge-patch+json", NULL) == 200);
    struct want_instances some = {"st", "0,1,4"};
    CHECK(wait_until(&e, "st", run_forever, instances_running, &some));
    for (int k = 0; k < 20; k++) { /* two resyncs later: still gone */
        pump(&e, 100);
        kubelet_step(&e, "st", run_forever);
    }
    CHECK(instances_running(&e, &some));
    json_t *job = get_job(&e, "st");
    CHECK_I64(job_stat(job, "KILLED"), 2);
    CHECK_I64(job_stat(job, "RUNNING"), 3);
    json_decref(job);
    /* a bad range is refused by the API server with the field named */
    json_t *out = NULL;
    CHECK(api(&e, "PATCH", JOBS "/st", "{\"spec\":{\"stoppedInstances\":[{\"from\":3,\"to\":3}]}}",
              "application/merge-patch+json", &out) == 422);
    char *msg = json_dumps(out, JSON_COMPACT);
    CHECK(msg && strstr(msg, "spec.stoppedInstances[0]"));
    free(msg);
    json_decref(out);
    CHECK(api(&e, "PATCH", JOBS "/st", "{\"spec\":{\"stoppedInstances\":null}}", "application/merge-patch+json",
              NULL) == 200);
    CHECK(wait_until(&e, "st", run_forever, instances_running, &all));
    env_stop(&e);
}

/* Generated pod names (JM_A_POD_NAMES): <job>-<pod-template-hash>-<5>; a
 * name another pod already holds is given up for the next salt. */
TEST(jobmgr_integ_generated_names_and_a_taken_name) {
    START(e);
    const char *body =
        "{\"apiVersion\":\"peloton.io/v1alpha1\",\"kind\":\"Job\",\"metadata\":{\"name\":\"gn\","
        "\"annotations\":{\"" JM_A_POD_NAMES "\":\"" JM_POD_NAMES_GENERATED "\"}},"
        "\"spec\":{\"type\":\"BATCH\",\"resourcePool\":\"pool-a\",\"instanceCount\":2,"
        "\"sla\":{\"maximumRunningInstances\":1},"
        "\"template\":{\"metadata\":{\"labels\":{\"app\":\"gn\",\"" JM_HASH_LABEL "\":\"h7\"}},"
        "\"spec\":{\"containers\":[{\"name\":\"main\",\"image\":\"img\"}]}}}}";
    json_t *job = NULL;
    REQUIRE(api(&e, "POST", JOBS, body, NULL, &job) == 201);
    char uid[128], n0[128], n1[128], n1b[128];
    snprintf(uid, sizeof uid, "%s", pmeta(job, "uid"));
    json_decref(job);
    REQUIRE_I64(jm_pod_name_generated(n0, sizeof n0, "gn-h7", uid, 0, 1, 0), 0);
    REQUIRE_I64(jm_pod_name_generated(n1, sizeof n1, "gn-h7", uid, 1, 1, 0), 0);
    REQUIRE_I64(jm_pod_name_generated(n1b, sizeof n1b, "gn-h7", uid, 1, 1, 1), 0);
    /* instance 1 waits (one at a time): a stranger's pod takes its name meanwhile */
    char stranger[400];
    snprintf(stranger, sizeof stranger,
             "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\"},"
             "\"spec\":{\"containers\":[{\"name\":\"x\",\"image\":\"x\"}]}}", n1);
    CHECK(api(&e, "POST", PODS, stranger, NULL, NULL) == 201);
    struct want_pods one = {"gn", 1, "Pending"};
    CHECK(wait_until(&e, NULL, NULL, pods_are, &one));
    json_t *pods = list_pods(&e, "gn");
    CHECK_STR(pmeta(json_array_get(pods, 0), "name"), n0);
    json_decref(pods);
    struct want_state ws = {"gn", "SUCCEEDED"};
    CHECK(wait_until(&e, "gn", run_to_success, job_in_state, &ws));
    pods = list_pods(&e, "gn");
    CHECK(find_pod(pods, n0) != NULL);
    json_t *p1 = find_pod(pods, n1b);
    CHECK(p1 != NULL);
    if (p1) CHECK_STR(plabel(p1, PL_INSTANCE), "1");
    CHECK_I64(json_array_size(pods), 2);
    json_decref(pods);
    char p[300];
    snprintf(p, sizeof p, PODS "/%s", n1);
    json_t *s = NULL;
    CHECK(api(&e, "GET", p, NULL, NULL, &s) == 200); /* the stranger's pod is left alone */
    CHECK(!plabel(s, PL_JOB));
    json_decref(s);
    env_stop(&e);
}

/* A rolling update goes past stopped instances (they start again at the
 * new template), and they stay stopped through it. */
TEST(jobmgr_integ_update_passes_stopped_instances) {
    START(e);
    REQUIRE(create_job(&e, "us", "STATELESS", 4,
                       "\"updateStrategy\":{\"batchSize\":1,\"minReadySeconds\":0},"
                       "\"stoppedInstances\":[{\"from\":1,\"to\":3}],", "v1") == 201);
    struct want_instances some = {"us", "0,3"};
    CHECK(wait_until(&e, "us", run_forever, instances_running, &some));
    CHECK(set_image(&e, "us", "v2") == 200);
    struct roll r = {"us", "v2", "SUCCEEDED", 2, 0};
    CHECK(wait_until(&e, "us", run_forever, rolled, &r));
    CHECK(instances_running(&e, &some));
    CHECK(api(&e, "PATCH", JOBS "/us", "{\"spec\":{\"stoppedInstances\":[]}}", "application/merge-patch+json",
              NULL) == 200);
    struct want_instances all = {"us", "0,1,2,3"};
    CHECK(wait_until(&e, "us", run_forever, instances_running, &all));
    json_t *pods = list_pods(&e, "us");
    size_t i;
    json_t *pod;
    json_array_foreach(pods, i, pod) CHECK_STR(pimage(pod), "v2");
    json_decref(pods);
    env_stop(&e);
}
