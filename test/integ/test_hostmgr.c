/* hostmgr against the project's real API server: a private redis-server and
 * pelotond --roles=apiserver on loopback (apisrv_fixture.h), started and
 * reaped by the test. The host manager runs on a private uv loop; the test's
 * own reads and writes are synchronous requests (kclient_request_sync) between
 * turns of the loop. Every wait has a deadline. */
#include <signal.h>
#include <stdlib.h>
#include <time.h>

#include "apisrv_fixture.h"
#include "hostmgr.h"
#include "kclient.h"
#include "test.h"

#define MERGE "application/merge-patch+json"

static double mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int64_t wall_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- the loop and the client ---- */

struct hm_env {
    uv_loop_t loop;
    uv_timer_t wake;
    struct kclient *c;
};

static void on_wake(uv_timer_t *t) { (void)t; }

static int hm_env_init(struct hm_env *e, const char *url) {
    memset(e, 0, sizeof *e);
    uv_loop_init(&e->loop);
    uv_timer_init(&e->loop, &e->wake);
    struct kc_config cfg = {0};
    char err[256];
    if (kc_config_from_url(url, NULL, &cfg, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "config: %s", err);
        return -1;
    }
    e->c = kclient_new(&e->loop, &cfg, err, sizeof err);
    kc_config_free(&cfg);
    if (!e->c) {
        test_fail(__FILE__, __LINE__, "kclient_new: %s", err);
        return -1;
    }
    return 0;
}

static void close_any(uv_handle_t *h, void *arg) {
    if (!uv_is_closing(h)) uv_close(h, NULL);
}

static void hm_env_done(struct hm_env *e) {
    kclient_free(e->c);
    e->c = NULL;
    uv_close((uv_handle_t *)&e->wake, NULL);
    for (int i = 0; i < 100 && uv_loop_close(&e->loop) == UV_EBUSY; i++) {
        if (i == 50) uv_walk(&e->loop, close_any, NULL);
        uv_run(&e->loop, UV_RUN_NOWAIT);
    }
}

/* Runs the loop for ms. */
static void hm_run_for(struct hm_env *e, unsigned ms) {
    double end = mono_ms() + ms;
    while (mono_ms() < end) {
        uv_timer_start(&e->wake, on_wake, (uint64_t)(end - mono_ms()) + 1, 0);
        uv_run(&e->loop, UV_RUN_ONCE);
    }
    uv_timer_stop(&e->wake);
}

/* A synchronous request; the status. *out (optional) gets the body. */
static long req(struct hm_env *e, const char *method, const char *path, json_t *body, const char *ctype,
                json_t **out) {
    char err[256];
    long st = kclient_request_sync(e->c, method, path, body, ctype, out, err, sizeof err);
    json_decref(body);
    return st;
}

/* ---- objects ---- */

static long make_node(struct hm_env *e, const char *name) {
    json_t *n = json_pack("{s:s, s:s, s:{s:s}, s:{}}", "apiVersion", "v1", "kind", "Node", "metadata", "name", name,
                          "spec");
    long st = req(e, "POST", "/api/v1/nodes", n, NULL, NULL);
    if (st != 201) return st;
    char path[128];
    snprintf(path, sizeof path, "/api/v1/nodes/%s/status", name);
    json_t *s = json_pack("{s:{s:{s:s, s:s}, s:[{s:s, s:s, s:s}, {s:s, s:s, s:s}]}}", "status", "allocatable", "cpu",
                          "8", "memory", "32Gi", "conditions", "type", "MemoryPressure", "status", "False", "reason",
                          "KubeletHasSufficientMemory", "type", "Ready", "status", "True", "reason", "KubeletReady");
    return req(e, "PATCH", path, s, MERGE, NULL);
}

static void microtime_now(char out[32]) { hostmgr_format_time(wall_now_ms(), true, out); }

/* Creates (create) or renews node's lease; renew NULL = now. */
static long put_lease(struct hm_env *e, const char *node, int duration, bool create, const char *renew) {
    char ts[32], path[160];
    microtime_now(ts);
    if (renew) snprintf(ts, sizeof ts, "%s", renew);
    if (create) {
        json_t *l = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:i, s:s}}", "apiVersion", "coordination.k8s.io/v1",
                              "kind", "Lease", "metadata", "name", node, "namespace", HOSTMGR_LEASE_NS, "spec",
                              "holderIdentity", node, "leaseDurationSeconds", duration, "renewTime", ts);
        return req(e, "POST", "/apis/coordination.k8s.io/v1/namespaces/" HOSTMGR_LEASE_NS "/leases", l, NULL, NULL);
    }
    snprintf(path, sizeof path, "/apis/coordination.k8s.io/v1/namespaces/" HOSTMGR_LEASE_NS "/leases/%s", node);
    return req(e, "PATCH", path, json_pack("{s:{s:s}}", "spec", "renewTime", ts), MERGE, NULL);
}

static long make_bound_pod(struct hm_env *e, const char *name, const char *node) {
    json_t *p = json_pack("{s:s, s:s, s:{s:s}, s:{s:[{s:s, s:s}]}}", "apiVersion", "v1", "kind", "Pod", "metadata",
                          "name", name, "spec", "containers", "name", "c", "image", "busybox");
    long st = req(e, "POST", "/api/v1/namespaces/default/pods", p, NULL, NULL);
    if (st != 201) return st;
    char path[160];
    snprintf(path, sizeof path, "/api/v1/namespaces/default/pods/%s/binding", name);
    json_t *b = json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:s}}", "apiVersion", "v1", "kind", "Binding", "metadata",
                          "name", name, "target", "kind", "Node", "name", node);
    return req(e, "POST", path, b, NULL, NULL);
}

/* What the test looks at on a node. */
struct node_view {
    long status;
    char ready[16], reason[64];
    bool taint, memory_pressure_kept;
};

static void view_node(struct hm_env *e, const char *name, struct node_view *v) {
    memset(v, 0, sizeof *v);
    char path[128];
    snprintf(path, sizeof path, "/api/v1/nodes/%s", name);
    json_t *n = NULL;
    v->status = req(e, "GET", path, NULL, NULL, &n);
    size_t i;
    json_t *x;
    json_array_foreach(json_object_get(json_object_get(n, "status"), "conditions"), i, x) {
        const char *type = json_string_value(json_object_get(x, "type"));
        const char *st = json_string_value(json_object_get(x, "status"));
        const char *reason = json_string_value(json_object_get(x, "reason"));
        if (type && !strcmp(type, "Ready")) {
            snprintf(v->ready, sizeof v->ready, "%s", st ? st : "");
            snprintf(v->reason, sizeof v->reason, "%s", reason ? reason : "");
        }
        if (type && !strcmp(type, "MemoryPressure") && st && !strcmp(st, "False")) v->memory_pressure_kept = true;
    }
    json_array_foreach(json_object_get(json_object_get(n, "spec"), "taints"), i, x) {
        const char *k = json_string_value(json_object_get(x, "key"));
        const char *eff = json_string_value(json_object_get(x, "effect"));
        if (k && eff && !strcmp(k, HOSTMGR_TAINT_UNREACHABLE) && !strcmp(eff, "NoExecute")) v->taint = true;
    }
    json_decref(n);
}

static bool pod_exists(struct hm_env *e, const char *name) {
    char path[128];
    snprintf(path, sizeof path, "/api/v1/namespaces/default/pods/%s", name);
    return req(e, "GET", path, NULL, NULL, NULL) == 200;
}

/* NodeLost Events in default; the number, and whether each names node. */
static int lost_events(struct hm_env *e, const char *node, bool *all_right) {
    json_t *l = NULL;
    *all_right = true;
    if (req(e, "GET", "/api/v1/namespaces/default/events", NULL, NULL, &l) != 200) {
        json_decref(l);
        return -1;
    }
    int n = 0;
    size_t i;
    json_t *ev;
    json_array_foreach(json_object_get(l, "items"), i, ev) {
        const char *reason = json_string_value(json_object_get(ev, "reason"));
        if (!reason || strcmp(reason, "NodeLost")) continue;
        n++;
        const char *type = json_string_value(json_object_get(ev, "type"));
        const char *msg = json_string_value(json_object_get(ev, "message"));
        const char *comp = json_string_value(json_object_get(json_object_get(ev, "source"), "component"));
        const char *kind = json_string_value(json_object_get(json_object_get(ev, "involvedObject"), "kind"));
        const char *uid = json_string_value(json_object_get(json_object_get(ev, "involvedObject"), "uid"));
        if (!type || strcmp(type, "Warning") || !msg || !strstr(msg, node) || !comp || strcmp(comp, HOSTMGR_COMPONENT) ||
            !kind || strcmp(kind, "Pod") || !uid || !uid[0])
            *all_right = false;
    }
    json_decref(l);
    return n;
}

/* ---- the tests ---- */

/* The API server and a client on a fresh loop; false (failure recorded) when
 * either cannot start. */
static bool hm_begin(struct apisrv *s, struct hm_env *e) {
    int rc = apisrv_start(s, NULL);
    if (rc) {
        test_fail(__FILE__, __LINE__, "API server: %s", strerror(-rc));
        return false;
    }
    if (hm_env_init(e, s->url)) {
        apisrv_stop(s);
        return false;
    }
    return true;
}

TEST(hostmgr_lapsed_lease_loses_pods) {
    struct apisrv s;
    struct hm_env e;
    if (!hm_begin(&s, &e)) return;
    /* n1: leased for 2 s and then left to lapse; n2: leased for an hour; n3: never leased */
    CHECK_I64(make_node(&e, "n1"), 200);
    CHECK_I64(make_node(&e, "n2"), 200);
    CHECK_I64(make_node(&e, "n3"), 200);
    CHECK_I64(put_lease(&e, "n1", 2, true, NULL), 201);
    CHECK_I64(put_lease(&e, "n2", 3600, true, NULL), 201);
    CHECK_I64(make_bound_pod(&e, "p1", "n1"), 201);
    CHECK_I64(make_bound_pod(&e, "p2", "n1"), 201);
    CHECK_I64(make_bound_pod(&e, "q1", "n2"), 201);
    /* a pod that already ended on n1: nothing of it to lose */
    CHECK_I64(make_bound_pod(&e, "d1", "n1"), 201);
    CHECK_I64(req(&e, "PATCH", "/api/v1/namespaces/default/pods/d1/status",
                  json_pack("{s:{s:s}}", "status", "phase", "Succeeded"), MERGE, NULL),
              200);

    struct hostmgr_options o;
    hostmgr_options_default(&o);
    o.check_ms = 100;
    o.no_lease_ms = 1500;
    char err[256] = "";
    struct hostmgr *h = hostmgr_start(&e.loop, e.c, &o, err, sizeof err);
    if (!h) test_fail(__FILE__, __LINE__, "hostmgr_start: %s", err);
    if (!h) goto out;

    /* at first everything is up */
    hm_run_for(&e, 500);
    CHECK(!hostmgr_node_down(h, "n1"));
    CHECK(!hostmgr_node_down(h, "n2"));
    CHECK(!hostmgr_node_down(h, "nope"));
    size_t down = 9;
    CHECK_I64(hostmgr_node_count(h, &down), 3);
    CHECK_I64(down, 0);

    /* n1's lease lapses 2 s after its renewal, n3 is down 1.5 s after it appeared */
    double t0 = mono_ms(), end = t0 + 8000;
    struct node_view v = {0};
    bool events_right = false;
    int events = 0;
    bool done = false;
    while (!done && mono_ms() < end) {
        hm_run_for(&e, 100);
        view_node(&e, "n1", &v);
        events = lost_events(&e, "n1", &events_right);
        done = hostmgr_node_down(h, "n1") && !strcmp(v.ready, "Unknown") && v.taint && !pod_exists(&e, "p1") &&
               !pod_exists(&e, "p2") && events == 2;
    }
    CHECK(done);
    if (done) fprintf(stderr, "  n1 lost in %.0f ms after its lease was renewed\n", mono_ms() - t0 + 500);
    CHECK(hostmgr_node_down(h, "n1"));
    CHECK_STR(v.ready, "Unknown");
    CHECK_STR(v.reason, "NodeStatusUnknown");
    CHECK(v.memory_pressure_kept);
    CHECK(v.taint);
    CHECK(!pod_exists(&e, "p1"));
    CHECK(!pod_exists(&e, "p2"));
    CHECK(pod_exists(&e, "d1")); /* ended before: not lost */
    CHECK_I64(events, 2);
    CHECK(events_right);
    /* n2 and its pod are untouched; n3 (no lease) is down too */
    CHECK(!hostmgr_node_down(h, "n2"));
    CHECK(pod_exists(&e, "q1"));
    view_node(&e, "n2", &v);
    CHECK_STR(v.ready, "True");
    CHECK(!v.taint);
    CHECK(hostmgr_node_down(h, "n3"));
    CHECK_I64(hostmgr_node_count(h, &down), 3);
    CHECK_I64(down, 2);

    /* idempotent: nothing more happens while it stays down */
    hm_run_for(&e, 600);
    CHECK_I64(lost_events(&e, "n1", &events_right), 2);
    view_node(&e, "n1", &v);
    CHECK(v.taint);

    /* a pod bound to the down node later is lost too */
    CHECK_I64(make_bound_pod(&e, "p3", "n1"), 201);
    done = false;
    end = mono_ms() + 5000;
    while (!done && mono_ms() < end) {
        hm_run_for(&e, 100);
        done = !pod_exists(&e, "p3");
    }
    CHECK(done);

    /* the kubelet comes back: its lease is fresh, the taint goes */
    CHECK_I64(put_lease(&e, "n1", 2, false, NULL), 200);
    done = false;
    end = mono_ms() + 5000;
    while (!done && mono_ms() < end) {
        put_lease(&e, "n1", 2, false, NULL); /* keep renewing, as a kubelet does */
        hm_run_for(&e, 100);
        view_node(&e, "n1", &v);
        done = !hostmgr_node_down(h, "n1") && !v.taint && v.status == 200;
    }
    CHECK(done);
    CHECK(!v.taint);
    CHECK(!hostmgr_node_down(h, "n1"));
    CHECK_I64(lost_events(&e, "n1", &events_right), 3);

    hostmgr_stop(h);
    hm_run_for(&e, 50);
out:
    hm_env_done(&e);
    apisrv_stop(&s);
}

TEST(hostmgr_start_rejects_nonsense) {
    char err[128] = "";
    CHECK(hostmgr_start(NULL, NULL, NULL, err, sizeof err) == NULL);
    CHECK_HAS(err, "required");
}

static int count_pods(struct hm_env *e) {
    json_t *l = NULL;
    int n = -1;
    if (req(e, "GET", "/api/v1/namespaces/default/pods", NULL, NULL, &l) == 200)
        n = (int)json_array_size(json_object_get(l, "items"));
    json_decref(l);
    return n;
}

/* Stopped with writes in flight (their callbacks land after the stop), then a
 * second host manager finishes the job; the node's lease lapsed long ago. */
TEST(hostmgr_stop_midway_and_resume) {
    struct apisrv s;
    struct hm_env e;
    if (!hm_begin(&s, &e)) return;
    CHECK_I64(make_node(&e, "old"), 200);
    CHECK_I64(put_lease(&e, "old", 2, true, "2020-01-01T00:00:00.000000Z"), 201); /* one lease period after start */
    enum { NPODS = 40 };
    char name[32];
    for (int i = 0; i < NPODS; i++) {
        snprintf(name, sizeof name, "w-%d", i);
        CHECK_I64(make_bound_pod(&e, name, "old"), 201);
    }
    REQUIRE_I64(count_pods(&e), NPODS);

    struct hostmgr_options o;
    hostmgr_options_default(&o);
    o.check_ms = 50;
    o.max_inflight = 3;
    char err[256] = "";
    struct hostmgr *h = hostmgr_start(&e.loop, e.c, &o, err, sizeof err);
    if (!h) test_fail(__FILE__, __LINE__, "hostmgr_start: %s", err);
    if (!h) goto out;
    double end = mono_ms() + 8000;
    int left = NPODS;
    while (left == NPODS && mono_ms() < end) {
        uv_run(&e.loop, UV_RUN_ONCE);
        left = count_pods(&e);
    }
    CHECK(left < NPODS && left > 0);
    CHECK(hostmgr_node_down(h, "old"));
    CHECK(kclient_inflight(e.c) > 0);
    hostmgr_stop(h); /* with requests in flight */
    hm_run_for(&e, 300);
    int after_stop = count_pods(&e);
    hm_run_for(&e, 300);
    CHECK_I64(count_pods(&e), after_stop); /* nothing more once the answers are in */

    h = hostmgr_start(&e.loop, e.c, &o, err, sizeof err);
    REQUIRE(h);
    end = mono_ms() + 15000;
    while (count_pods(&e) != 0 && mono_ms() < end) hm_run_for(&e, 100);
    CHECK_I64(count_pods(&e), 0);
    struct node_view v;
    view_node(&e, "old", &v);
    CHECK_STR(v.ready, "Unknown");
    CHECK(v.taint);
    bool right;
    int events = lost_events(&e, "old", &right);
    CHECK(events >= NPODS && events <= NPODS + 3); /* once per pod, but for those in flight at the stop */
    CHECK(right);
    hostmgr_stop(h);
    hm_run_for(&e, 50);
out:
    hm_env_done(&e);
    apisrv_stop(&s);
}

/* The lease informer has to re-list (its API server killed and started again
 * on the same port) while every lease is renewed as soon as the server is
 * back: its cache is frozen meanwhile, but no judgement is made from it, so
 * no node goes down and no pod is deleted as lost (issue 25's mass NodeLost).
 * Two nodes: fewer than a mass event, so the freshness rule alone is tested. */
TEST(hostmgr_relist_holds_judgements) {
    struct apisrv s;
    struct hm_env e;
    if (!hm_begin(&s, &e)) return;
    const char *nodes[] = {"r1", "r2"};
    for (int i = 0; i < 2; i++) {
        CHECK_I64(make_node(&e, nodes[i]), 200);
        CHECK_I64(put_lease(&e, nodes[i], 2, true, NULL), 201);
    }
    CHECK_I64(make_bound_pod(&e, "rp1", "r1"), 201);
    CHECK_I64(make_bound_pod(&e, "rp2", "r2"), 201);
    struct hostmgr_options o;
    hostmgr_options_default(&o);
    o.check_ms = 100;
    o.retry_max_ms = 200; /* writes that failed while the server was away are retried at once when it is back */
    char err[256] = "";
    struct hostmgr *h = hostmgr_start(&e.loop, e.c, &o, err, sizeof err);
    if (!h) test_fail(__FILE__, __LINE__, "hostmgr_start: %s", err);
    if (!h) goto out;
    for (int i = 0; i < 8; i++) { /* kubelets renewing */
        put_lease(&e, "r1", 2, false, NULL);
        put_lease(&e, "r2", 2, false, NULL);
        hm_run_for(&e, 100);
    }
    CHECK(!hostmgr_node_down(h, "r1") && !hostmgr_node_down(h, "r2"));
    uint64_t held0 = hostmgr_held(h);
    int port = s.port;
    apisrv_kill(&s, SIGKILL); /* the watch breaks; the leases age past their 2 s in the cache */
    hm_run_for(&e, 3500);
    CHECK(!hostmgr_node_down(h, "r1") && !hostmgr_node_down(h, "r2"));
    CHECK(hostmgr_held(h) > held0);
    REQUIRE(apisrv_spawn(&s, port, NULL) == 0);
    double end = mono_ms() + 6000;
    while (mono_ms() < end) { /* the kubelets are back at once; the informer re-lists after its backoff */
        put_lease(&e, "r1", 2, false, NULL);
        put_lease(&e, "r2", 2, false, NULL);
        hm_run_for(&e, 100);
        CHECK(!hostmgr_node_down(h, "r1") && !hostmgr_node_down(h, "r2"));
    }
    CHECK(pod_exists(&e, "rp1"));
    CHECK(pod_exists(&e, "rp2"));
    bool right;
    CHECK_I64(lost_events(&e, "r1", &right), 0);
    struct node_view v;
    view_node(&e, "r1", &v);
    CHECK_STR(v.ready, "True");
    CHECK(!v.taint);
    /* and judging resumed: r2's kubelet stops, r2 is lost as before */
    end = mono_ms() + 8000;
    while (mono_ms() < end && pod_exists(&e, "rp2")) {
        put_lease(&e, "r1", 2, false, NULL);
        hm_run_for(&e, 100);
    }
    CHECK(hostmgr_node_down(h, "r2"));
    CHECK(!pod_exists(&e, "rp2"));
    CHECK(pod_exists(&e, "rp1"));
    hostmgr_stop(h);
    hm_run_for(&e, 50);
out:
    hm_env_done(&e);
    apisrv_stop(&s);
}

/* A lease that lapsed while nobody watched (the host manager starting, or
 * its informer re-listing) gets one whole lease period, counted from when the
 * informers are current, before its node is judged: a kubelet that renewed
 * meanwhile is seen first. Then it is lost as usual. */
TEST(hostmgr_lapsed_before_watching_waits_one_period) {
    struct apisrv s;
    struct hm_env e;
    if (!hm_begin(&s, &e)) return;
    CHECK_I64(make_node(&e, "s1"), 200);
    CHECK_I64(put_lease(&e, "s1", 2, true, "2020-01-01T00:00:00.000000Z"), 201);
    CHECK_I64(make_bound_pod(&e, "sp1", "s1"), 201);
    struct hostmgr_options o;
    hostmgr_options_default(&o);
    o.check_ms = 100;
    char err[256] = "";
    struct hostmgr *h = hostmgr_start(&e.loop, e.c, &o, err, sizeof err);
    if (!h) test_fail(__FILE__, __LINE__, "hostmgr_start: %s", err);
    if (!h) goto out;
    double t0 = mono_ms();
    hm_run_for(&e, 1200);
    CHECK(!hostmgr_node_down(h, "s1"));
    CHECK(pod_exists(&e, "sp1"));
    CHECK(hostmgr_held(h) > 0);
    double end = mono_ms() + 5000;
    while (mono_ms() < end && pod_exists(&e, "sp1")) hm_run_for(&e, 100);
    CHECK(hostmgr_node_down(h, "s1"));
    CHECK(!pod_exists(&e, "sp1"));
    CHECK(mono_ms() - t0 >= 2000);
    hostmgr_stop(h);
    hm_run_for(&e, 50);
out:
    hm_env_done(&e);
    apisrv_stop(&s);
}

/* Most nodes lapse at once (a mass event): they are marked down, but
 * evictions pause and no pod is deleted; when the leases are renewed the
 * pause ends with nothing lost. */
TEST(hostmgr_mass_event_pauses_evictions) {
    struct apisrv s;
    struct hm_env e;
    if (!hm_begin(&s, &e)) return;
    enum { N = 5 };
    char name[32];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "m%d", i);
        CHECK_I64(make_node(&e, name), 200);
        CHECK_I64(put_lease(&e, name, 2, true, NULL), 201);
        snprintf(name, sizeof name, "mp%d", i);
        char node[32];
        snprintf(node, sizeof node, "m%d", i);
        CHECK_I64(make_bound_pod(&e, name, node), 201);
    }
    struct hostmgr_options o;
    hostmgr_options_default(&o);
    o.check_ms = 100;
    char err[256] = "";
    struct hostmgr *h = hostmgr_start(&e.loop, e.c, &o, err, sizeof err);
    if (!h) test_fail(__FILE__, __LINE__, "hostmgr_start: %s", err);
    if (!h) goto out;
    /* m0 keeps renewing; m1..m4 (80 %) stop */
    double end = mono_ms() + 6000;
    while (mono_ms() < end && !(hostmgr_evictions_paused(h) && hostmgr_node_down(h, "m1"))) {
        put_lease(&e, "m0", 2, false, NULL);
        hm_run_for(&e, 100);
    }
    CHECK(hostmgr_evictions_paused(h));
    for (int i = 0; i < 10; i++) { /* a second more: still nothing deleted */
        put_lease(&e, "m0", 2, false, NULL);
        hm_run_for(&e, 100);
    }
    size_t down = 0;
    hostmgr_node_count(h, &down);
    CHECK_I64(down, 4);
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "mp%d", i);
        CHECK(pod_exists(&e, name));
    }
    bool right;
    CHECK_I64(lost_events(&e, "m1", &right), 0);
    /* the Event, about the leases' Namespace */
    json_t *l = NULL;
    CHECK_I64(req(&e, "GET", "/api/v1/namespaces/default/events", NULL, NULL, &l), 200);
    int paused_events = 0;
    size_t i;
    json_t *ev;
    json_array_foreach(json_object_get(l, "items"), i, ev) {
        const char *reason = json_string_value(json_object_get(ev, "reason"));
        const char *kind = json_string_value(json_object_get(json_object_get(ev, "involvedObject"), "kind"));
        if (reason && !strcmp(reason, "NodeEvictionsPaused") && kind && !strcmp(kind, "Namespace")) paused_events++;
    }
    json_decref(l);
    CHECK_I64(paused_events, 1);
    /* the kubelets come back one by one: with m4 the only one still lapsed
     * (1 of 5), evictions stay paused for one lease period, so m4's pod is
     * not deleted for its kubelet being the last */
    for (int k = 0; k < 12; k++) {
        for (int j = 0; j < N - 1; j++) {
            snprintf(name, sizeof name, "m%d", j);
            put_lease(&e, name, 2, false, NULL);
        }
        hm_run_for(&e, 100);
    }
    CHECK(hostmgr_evictions_paused(h));
    CHECK(hostmgr_node_down(h, "m4"));
    CHECK(pod_exists(&e, "mp4"));
    /* the last one comes back: the pause ends, the nodes are up, nothing was lost */
    end = mono_ms() + 6000;
    while (mono_ms() < end && (hostmgr_evictions_paused(h) || down)) {
        for (int k = 0; k < N; k++) {
            snprintf(name, sizeof name, "m%d", k);
            put_lease(&e, name, 2, false, NULL);
        }
        hm_run_for(&e, 100);
        hostmgr_node_count(h, &down);
    }
    CHECK(!hostmgr_evictions_paused(h));
    CHECK_I64(down, 0);
    for (int k = 0; k < N; k++) {
        snprintf(name, sizeof name, "mp%d", k);
        CHECK(pod_exists(&e, name));
    }
    hostmgr_stop(h);
    hm_run_for(&e, 50);
out:
    hm_env_done(&e);
    apisrv_stop(&s);
}

/* Annotates (value, or removes when NULL) and cordons or not a node. */
static long set_maint(struct hm_env *e, const char *node, const char *value, bool cordon) {
    char path[128];
    snprintf(path, sizeof path, "/api/v1/nodes/%s", node);
    json_t *p = json_pack("{s:{s:{s:o}}, s:{s:o}}", "metadata", "annotations", "peloton.io/maintenance",
                          value ? json_string(value) : json_null(), "spec", "unschedulable",
                          cordon ? json_true() : json_null());
    return req(e, "PATCH", path, p, MERGE, NULL);
}

/* The node's maintenance annotation into out ("" when none), and whether it is cordoned. */
static bool maint_of(struct hm_env *e, const char *node, char out[16]) {
    char path[128];
    snprintf(path, sizeof path, "/api/v1/nodes/%s", node);
    json_t *n = NULL;
    out[0] = 0;
    bool cordoned = false;
    if (req(e, "GET", path, NULL, NULL, &n) == 200) {
        const char *m = json_string_value(json_object_get(
            json_object_get(json_object_get(n, "metadata"), "annotations"), "peloton.io/maintenance"));
        snprintf(out, 16, "%s", m ? m : "");
        cordoned = json_is_true(json_object_get(json_object_get(n, "spec"), "unschedulable"));
    }
    json_decref(n);
    return cordoned;
}

/* Host maintenance: a Node annotated "draining" is cordoned, and becomes
 * "drained" once no pod that has not ended is bound to it; a Mesos agent's
 * Node (no lease) alike; a Node without the annotation, or already drained
 * and uncordoned by hand, is left alone. */
TEST(hostmgr_maintenance_cordons_then_drained) {
    struct apisrv s;
    struct hm_env e;
    if (!hm_begin(&s, &e)) return;
    const char *names[] = {"k1", "k2", "agent", "plain", "done"};
    for (int i = 0; i < 5; i++) {
        CHECK_I64(make_node(&e, names[i]), 200);
        CHECK_I64(put_lease(&e, names[i], 3600, true, NULL), 201);
    }
    CHECK_I64(req(&e, "PATCH", "/api/v1/nodes/agent",
                  json_pack("{s:{s:{s:s}}}", "metadata", "labels", "peloton.io/backend", "mesos"), MERGE, NULL),
              200);
    CHECK_I64(make_bound_pod(&e, "busy", "k1"), 201);
    CHECK_I64(make_bound_pod(&e, "ended", "k2"), 201);
    CHECK_I64(req(&e, "PATCH", "/api/v1/namespaces/default/pods/ended/status",
                  json_pack("{s:{s:s}}", "status", "phase", "Succeeded"), MERGE, NULL),
              200);
    CHECK_I64(make_bound_pod(&e, "other", "plain"), 201);
    CHECK_I64(set_maint(&e, "k1", "draining", false), 200);  /* as kubectl annotate leaves it */
    CHECK_I64(set_maint(&e, "k2", "draining", true), 200);   /* as StartMaintenance leaves it */
    CHECK_I64(set_maint(&e, "agent", "draining", false), 200);
    CHECK_I64(set_maint(&e, "done", "drained", false), 200);

    struct hostmgr_options o;
    hostmgr_options_default(&o);
    o.check_ms = 100;
    char err[256] = "";
    struct hostmgr *h = hostmgr_start(&e.loop, e.c, &o, err, sizeof err);
    if (!h) test_fail(__FILE__, __LINE__, "hostmgr_start: %s", err);
    if (!h) goto out;
    char m[16];
    double end = mono_ms() + 8000;
    while (mono_ms() < end && !(maint_of(&e, "k1", m) && maint_of(&e, "agent", m) && !strcmp(m, "drained")))
        hm_run_for(&e, 100);
    hm_run_for(&e, 300);
    CHECK(maint_of(&e, "k1", m)); /* cordoned, still draining: a pod runs there */
    CHECK_STR(m, "draining");
    CHECK(maint_of(&e, "k2", m)); /* only an ended pod */
    CHECK_STR(m, "drained");
    CHECK(maint_of(&e, "agent", m));
    CHECK_STR(m, "drained");
    CHECK(!maint_of(&e, "plain", m));
    CHECK_STR(m, "");
    CHECK(!maint_of(&e, "done", m)); /* drained and uncordoned by hand: left so */
    CHECK_STR(m, "drained");
    /* the last pod on k1 goes: drained */
    CHECK_I64(req(&e, "DELETE", "/api/v1/namespaces/default/pods/busy?gracePeriodSeconds=0", NULL, NULL, NULL), 200);
    end = mono_ms() + 8000;
    while (mono_ms() < end && !(maint_of(&e, "k1", m) && !strcmp(m, "drained"))) hm_run_for(&e, 100);
    CHECK(maint_of(&e, "k1", m));
    CHECK_STR(m, "drained");
    /* completed (annotation gone, uncordoned): nothing brings it back */
    CHECK_I64(set_maint(&e, "k2", NULL, false), 200);
    hm_run_for(&e, 500);
    CHECK(!maint_of(&e, "k2", m));
    CHECK_STR(m, "");
    hostmgr_stop(h);
    hm_run_for(&e, 50);
out:
    hm_env_done(&e);
    apisrv_stop(&s);
}
