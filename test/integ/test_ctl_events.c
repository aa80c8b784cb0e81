/* The controllers' Events and PodScheduled writes against the real API
 * server (pelotond --roles=apiserver on a private redis-server,
 * apisrv_fixture.h): the recorder aggregates as client-go's does, and a
 * PodScheduled=False that lands after the binding is turned back to True.
 * Every wait is bounded; the server is stopped on every path. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "apisrv_fixture.h"
#include "ctl.h"
#include "kclient.h"
#include "test.h"

#define PODS "/api/v1/namespaces/default/pods"
#define EVENTS "/api/v1/namespaces/default/events"

struct env {
    struct apisrv srv;
    uv_loop_t loop;
    struct kclient *kc;
    bool up;
};

static void env_stop(struct env *e) {
    kclient_free(e->kc);
    e->kc = NULL;
    if (e->up) {
        uv_run(&e->loop, UV_RUN_DEFAULT);
        uv_loop_close(&e->loop);
        e->up = false;
    }
    apisrv_stop(&e->srv);
}

static int env_start(struct env *e) {
    memset(e, 0, sizeof *e);
    int rc = apisrv_start(&e->srv, NULL);
    if (rc) return rc;
    uv_loop_init(&e->loop);
    e->up = true;
    char err[256];
    struct kc_config cfg;
    if ((rc = kc_config_from_url(e->srv.url, NULL, &cfg, err, sizeof err))) return rc;
    e->kc = kclient_new(&e->loop, &cfg, err, sizeof err);
    kc_config_free(&cfg);
    return e->kc ? 0 : -EIO;
}

/* Runs the loop until every request (and what their callbacks start) is done; false after 10 s. */
static bool drain(struct env *e) {
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (kclient_inflight(e->kc)) {
        uv_run(&e->loop, UV_RUN_ONCE);
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec > 10) return false;
    }
    return true;
}

static json_t *get(struct env *e, const char *path) {
    json_t *o = NULL;
    char err[256];
    long st = kclient_request_sync(e->kc, "GET", path, NULL, NULL, &o, err, sizeof err);
    if (st != 200) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static const char *pod_uid(struct env *e, const char *name, char *buf, size_t len) {
    char path[128];
    snprintf(path, sizeof path, PODS "/%s", name);
    json_t *p = get(e, path);
    snprintf(buf, len, "%s", p ? json_string_value(json_object_get(json_object_get(p, "metadata"), "uid")) : "");
    json_decref(p);
    return buf;
}

/* The pod's PodScheduled condition's status ("" when it has none), with reason and message. */
static void scheduled(struct env *e, const char *name, char *status, char *reason, char *msg, size_t len) {
    char path[128];
    snprintf(path, sizeof path, PODS "/%s", name);
    json_t *p = get(e, path), *c;
    size_t i;
    status[0] = reason[0] = msg[0] = 0;
    json_array_foreach(json_object_get(json_object_get(p, "status"), "conditions"), i, c) {
        const char *t = json_string_value(json_object_get(c, "type"));
        if (!t || strcmp(t, "PodScheduled")) continue;
        const char *s = json_string_value(json_object_get(c, "status")), *r = json_string_value(json_object_get(c, "reason")),
                   *m = json_string_value(json_object_get(c, "message"));
        snprintf(status, len, "%s", s ? s : "");
        snprintf(reason, len, "%s", r ? r : "");
        snprintf(msg, len, "%s", m ? m : "");
    }
    json_decref(p);
}

static void create_pod(struct env *e, const char *name) {
    char body[400], err[256];
    snprintf(body, sizeof body,
             "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\"},"
             "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"x\"}]}}",
             name);
    json_t *b = json_loads(body, 0, NULL);
    long st = kclient_request_sync(e->kc, "POST", PODS, b, NULL, NULL, err, sizeof err);
    json_decref(b);
    if (st != 201) test_fail(__FILE__, __LINE__, "create %s: %ld %s", name, st, err);
}

/* Events about pod `name`: how many, and the count of the one with message msg (0: none). */
static size_t events_about(struct env *e, const char *name, const char *msg, long *count) {
    json_t *l = get(e, EVENTS), *ev;
    size_t i, n = 0;
    *count = 0;
    json_array_foreach(json_object_get(l, "items"), i, ev) {
        const char *on = json_string_value(json_object_get(json_object_get(ev, "involvedObject"), "name"));
        if (!on || strcmp(on, name)) continue;
        n++;
        const char *m = json_string_value(json_object_get(ev, "message"));
        if (m && !strcmp(m, msg)) *count = (long)json_integer_value(json_object_get(ev, "count"));
    }
    json_decref(l);
    return n;
}

TEST(integ_recorder_counts_the_same_event_on_the_one_posted) {
    struct env e;
    if (env_start(&e)) {
        env_stop(&e);
        test_fail(__FILE__, __LINE__, "environment did not start");
        return;
    }
    create_pod(&e, "p1");
    char uid[64];
    pod_uid(&e, "p1", uid, sizeof uid);
    struct ctl_recorder *r = ctl_recorder_new(e.kc, "test", 2);
    REQUIRE(r);
    CHECK_I64(ctl_record(r, "v1", "Pod", "default", "p1", uid, "Warning", "FailedScheduling", "a %d", 1), 0);
    REQUIRE(drain(&e));
    CHECK_I64(ctl_record(r, "v1", "Pod", "default", "p1", uid, "Warning", "FailedScheduling", "a %d", 1), 1);
    CHECK_I64(ctl_record(r, "v1", "Pod", "default", "p1", uid, "Warning", "FailedScheduling", "a 1"), 1);
    REQUIRE(drain(&e));
    long count;
    CHECK_I64(events_about(&e, "p1", "a 1", &count), 1);
    CHECK_I64(count, 3);
    CHECK(ctl_recorder_has(r, "default", "p1", uid, "Warning", "FailedScheduling", "a 1"));
    CHECK(!ctl_recorder_has(r, "default", "p1", uid, "Warning", "FailedScheduling", "a 2"));
    CHECK(!ctl_recorder_has(r, "default", "p1", uid, "Normal", "FailedScheduling", "a 1"));
    /* another message is another Event; with a cache of 2, a third pushes out the oldest ("a 1"),
     * which is then posted anew */
    CHECK_I64(ctl_record(r, "v1", "Pod", "default", "p1", uid, "Warning", "FailedScheduling", "b"), 0);
    CHECK_I64(ctl_record(r, "v1", "Pod", "default", "p1", uid, "Warning", "FailedScheduling", "c"), 0);
    CHECK_I64(ctl_record(r, "v1", "Pod", "default", "p1", uid, "Warning", "FailedScheduling", "a 1"), 0);
    REQUIRE(drain(&e));
    CHECK_I64(events_about(&e, "p1", "b", &count), 4);
    uint64_t posted, bumped;
    ctl_recorder_counts(r, &posted, &bumped);
    CHECK_I64((int64_t)posted, 4);
    CHECK_I64((int64_t)bumped, 2);
    /* the Events deleted (a real API server expires them): counting one again posts it again, with its count */
    char err[256];
    long code = kclient_request_sync(e.kc, "DELETE", EVENTS, NULL, NULL, NULL, err, sizeof err);
    CHECK_I64(code, 200);
    CHECK_I64(events_about(&e, "p1", "c", &count), 0);
    CHECK_I64(ctl_record(r, "v1", "Pod", "default", "p1", uid, "Warning", "FailedScheduling", "c"), 1);
    REQUIRE(drain(&e));
    CHECK_I64(events_about(&e, "p1", "c", &count), 1);
    CHECK_I64(count, 2);
    ctl_recorder_free(r);
    env_stop(&e);
}

TEST(integ_pod_scheduled_false_then_true_when_bound_even_if_late) {
    struct env e;
    if (env_start(&e)) {
        env_stop(&e);
        test_fail(__FILE__, __LINE__, "environment did not start");
        return;
    }
    create_pod(&e, "p2");
    char uid[64], st[256], rs[256], msg[256];
    pod_uid(&e, "p2", uid, sizeof uid);
    ctl_pod_unschedulable(e.kc, "default", "p2", uid, CTL_REASON_UNSCHEDULABLE, "0/1 nodes are available: x.");
    REQUIRE(drain(&e));
    scheduled(&e, "p2", st, rs, msg, sizeof st);
    CHECK_STR(st, "False");
    CHECK_STR(rs, "Unschedulable");
    CHECK_STR(msg, "0/1 nodes are available: x.");
    /* the binding turns it True */
    char err[256];
    json_t *b = json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:s}}", "apiVersion", "v1", "kind", "Binding", "metadata",
                          "name", "p2", "target", "kind", "Node", "name", "n1");
    long code = kclient_request_sync(e.kc, "POST", PODS "/p2/binding", b, NULL, NULL, err, sizeof err);
    json_decref(b);
    CHECK_I64(code, 201);
    scheduled(&e, "p2", st, rs, msg, sizeof st);
    CHECK_STR(st, "True");
    /* a False that arrives after the binding (it travelled on another connection) is undone */
    ctl_pod_unschedulable(e.kc, "default", "p2", uid, CTL_REASON_ADMISSION, "waiting for admission: late");
    REQUIRE(drain(&e));
    scheduled(&e, "p2", st, rs, msg, sizeof st);
    CHECK_STR(st, "True");
    CHECK_STR(msg, "");
    /* a wrong uid is refused: nothing written */
    create_pod(&e, "p3");
    ctl_pod_unschedulable(e.kc, "default", "p3", "not-its-uid", CTL_REASON_UNSCHEDULABLE, "m");
    REQUIRE(drain(&e));
    scheduled(&e, "p3", st, rs, msg, sizeof st);
    CHECK_STR(st, "");
    env_stop(&e);
}

/* ---- the Scheduled Event the API server makes with a binding ---- */

/* POST PODS/name/binding to node n1 with query q ("" for none) through kc
 * (the env's when NULL): the code, the answer's body in *out (may be NULL). */
/* REQUIRE that stops the environment first (a server left running would hold the runner's exit). */
#define ENV_REQUIRE(e, c)                                                                                              \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            test_fail(__FILE__, __LINE__, "REQUIRE(%s)", #c);                                                          \
            env_stop(e);                                                                                               \
            return;                                                                                                    \
        }                                                                                                              \
    } while (0)

static long bind_to(struct env *e, const char *name, const char *q, json_t **out, char *err, size_t errlen) {
    char path[600];
    snprintf(path, sizeof path, PODS "/%s/binding%s", name, q);
    json_t *b = json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:s}}", "apiVersion", "v1", "kind", "Binding", "metadata",
                          "name", name, "target", "kind", "Node", "name", "n1");
    long code = kclient_request_sync(e->kc, "POST", path, b, NULL, out, err, errlen);
    json_decref(b);
    return code;
}

/* The Event named ename, waited for (it is stored just after the binding's answer); NULL after 5 s. */
static json_t *event_named(struct env *e, const char *ename) {
    char path[600];
    snprintf(path, sizeof path, EVENTS "/%s", ename);
    for (int i = 0; i < 500; i++) {
        json_t *ev = get(e, path);
        if (ev) return ev;
        struct timespec t = {0, 10000000};
        nanosleep(&t, NULL);
    }
    return NULL;
}

static const char *str_at(const json_t *o, const char *a, const char *b) {
    const json_t *v = b ? json_object_get(json_object_get(o, a), b) : json_object_get(o, a);
    return json_string_value(v) ? json_string_value(v) : "";
}

TEST(integ_binding_asked_for_makes_the_scheduled_event) {
    struct env e;
    if (env_start(&e)) {
        env_stop(&e);
        test_fail(__FILE__, __LINE__, "environment did not start");
        return;
    }
    char uid[64], err[256], ename[300];
    create_pod(&e, "s1");
    pod_uid(&e, "s1", uid, sizeof uid);
    json_t *st = NULL;
    CHECK_I64(bind_to(&e, "s1", "?scheduledEvent=peloton-placement", &st, err, sizeof err), 201);
    /* the answer names the Event: the placement engine posts none itself then */
    CHECK_STR(str_at(st, "status", NULL), "Success");
    CHECK_STR(str_at(st, "details", "kind"), "events");
    snprintf(ename, sizeof ename, "%s", str_at(st, "details", "name"));
    json_decref(st);
    CHECK(!strncmp(ename, "s1.", 3) && strlen(ename) > 3);
    json_t *ev = event_named(&e, ename), *pod = get(&e, PODS "/s1");
    if (!ev || !pod) {
        json_decref(ev);
        json_decref(pod);
    }
    ENV_REQUIRE(&e, ev && pod);
    /* what kube-scheduler posts, with what the store gives every object */
    CHECK_STR(str_at(ev, "reason", NULL), "Scheduled");
    CHECK_STR(str_at(ev, "type", NULL), "Normal");
    CHECK_STR(str_at(ev, "message", NULL), "Successfully assigned default/s1 to n1");
    CHECK_STR(str_at(ev, "source", "component"), "peloton-placement");
    CHECK_STR(str_at(ev, "involvedObject", "kind"), "Pod");
    CHECK_STR(str_at(ev, "involvedObject", "apiVersion"), "v1");
    CHECK_STR(str_at(ev, "involvedObject", "name"), "s1");
    CHECK_STR(str_at(ev, "involvedObject", "namespace"), "default");
    CHECK_STR(str_at(ev, "involvedObject", "uid"), uid);
    CHECK_I64(json_integer_value(json_object_get(ev, "count")), 1);
    CHECK(str_at(ev, "firstTimestamp", NULL)[0]);
    CHECK_STR(str_at(ev, "firstTimestamp", NULL), str_at(ev, "lastTimestamp", NULL));
    CHECK_STR(str_at(ev, "metadata", "namespace"), "default");
    CHECK(str_at(ev, "metadata", "uid")[0]);
    /* stored after the pod's binding, with a resourceVersion of its own */
    CHECK(strtoull(str_at(ev, "metadata", "resourceVersion"), NULL, 10) >
          strtoull(str_at(pod, "metadata", "resourceVersion"), NULL, 10));
    CHECK_STR(str_at(pod, "spec", "nodeName"), "n1");
    json_decref(ev);
    json_decref(pod);
    long count;
    CHECK_I64(events_about(&e, "s1", "Successfully assigned default/s1 to n1", &count), 1);
    /* a binding that fails (the pod is bound) makes none */
    CHECK_I64(bind_to(&e, "s1", "?scheduledEvent=peloton-placement", NULL, err, sizeof err), 409);
    CHECK_I64(events_about(&e, "s1", "Successfully assigned default/s1 to n1", &count), 1);
    /* nor one not asked for (kube-scheduler posts its own): a plain Status */
    create_pod(&e, "s2");
    st = NULL;
    CHECK_I64(bind_to(&e, "s2", "", &st, err, sizeof err), 201);
    CHECK(!json_object_get(st, "details"));
    json_decref(st);
    /* a component that is not a name is refused, and the pod stays unbound */
    create_pod(&e, "s3");
    static const char *const bad[] = {"?scheduledEvent=", "?scheduledEvent=Peloton", "?scheduledEvent=a%22b",
                                      "?scheduledEvent=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK_I64(bind_to(&e, "s3", bad[i], NULL, err, sizeof err), 400);
        CHECK_HAS(err, "scheduledEvent must name a component");
    }
    pod = get(&e, PODS "/s3");
    CHECK_STR(str_at(pod, "spec", "nodeName"), "");
    json_decref(pod);
    struct timespec t = {0, 100000000}; /* what would have been stored has been */
    nanosleep(&t, NULL);
    CHECK_I64(events_about(&e, "s2", "Successfully assigned default/s2 to n1", &count), 0);
    CHECK_I64(events_about(&e, "s3", "Successfully assigned default/s3 to n1", &count), 0);
    env_stop(&e);
}

/* Bindings answered at once, each naming its Event, or not */
struct bound {
    int done, named;
    char ename[24][300];
};

static void on_bound(void *ud, const struct kc_response *res) {
    struct bound *b = ud;
    const char *at = res->status == 201 && res->raw ? strstr(res->raw, "\"name\":\"") : NULL;
    if (at && b->named < 24) {
        at += 8;
        const char *end = strchr(at, '"');
        if (end) snprintf(b->ename[b->named++], sizeof b->ename[0], "%.*s", (int)(end - at), at);
    }
    b->done++;
}

/* The Event is stored in the binding's own write (the same script call):
 * with many bindings in flight at once, each pod's Event takes the version
 * right after its binding's, and is there when the binding is answered. */
TEST(integ_scheduled_event_stored_with_its_binding) {
    struct env e;
    if (env_start(&e)) {
        env_stop(&e);
        test_fail(__FILE__, __LINE__, "environment did not start");
        return;
    }
    enum { N = 24 };
    char name[32], path[600];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "w%d", i);
        create_pod(&e, name);
    }
    static struct bound b;
    memset(&b, 0, sizeof b);
    for (int i = 0; i < N; i++) { /* all in flight together: the server takes them in one or a few turns */
        snprintf(name, sizeof name, "w%d", i);
        snprintf(path, sizeof path, PODS "/%s/binding?scheduledEvent=peloton-placement", name);
        json_t *body = json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:s}}", "apiVersion", "v1", "kind", "Binding",
                                 "metadata", "name", name, "target", "kind", "Node", "name", "n1");
        CHECK_I64(kclient_request(e.kc, "POST", path, body, NULL, on_bound, &b), 0);
        json_decref(body);
    }
    ENV_REQUIRE(&e, drain(&e));
    CHECK_I64(b.done, N);
    ENV_REQUIRE(&e, b.named == N);
    for (int i = 0; i < N; i++) {
        snprintf(path, sizeof path, EVENTS "/%s", b.ename[i]);
        json_t *ev = get(&e, path); /* no wait: it was stored before the answer */
        CHECK(ev != NULL);
        if (!ev) continue;
        char pod_path[300];
        snprintf(pod_path, sizeof pod_path, PODS "/%s", str_at(ev, "involvedObject", "name"));
        json_t *pod = get(&e, pod_path);
        CHECK_STR(str_at(pod, "spec", "nodeName"), "n1");
        CHECK_I64(strtoull(str_at(ev, "metadata", "resourceVersion"), NULL, 10),
                  strtoull(str_at(pod, "metadata", "resourceVersion"), NULL, 10) + 1);
        json_decref(pod);
        json_decref(ev);
    }
    env_stop(&e);
}

TEST(integ_scheduled_event_of_a_pod_with_the_longest_name) {
    /* 252 bytes whose 236th is a dot: the Event's name keeps the pod's name
     * up to the dot (235 bytes), a dot and the time in hex */
    char name[260], err[256], ename[300];
    snprintf(name, sizeof name, "%.63s.%.63s.%.63s.%.43s.%.16s", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
             "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
             "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc",
             "dddddddddddddddddddddddddddddddddddddddddddddddddddd", "eeeeeeeeeeeeeeeeeeee");
    REQUIRE(strlen(name) == 252 && name[235] == '.');
    struct env e;
    if (env_start(&e)) {
        env_stop(&e);
        test_fail(__FILE__, __LINE__, "environment did not start");
        return;
    }
    create_pod(&e, name);
    json_t *st = NULL;
    CHECK_I64(bind_to(&e, name, "?scheduledEvent=x", &st, err, sizeof err), 201);
    snprintf(ename, sizeof ename, "%s", str_at(st, "details", "name"));
    json_decref(st);
    CHECK(strlen(ename) <= 253 && !strncmp(ename, name, 235) && ename[235] == '.' && strlen(ename) > 236);
    json_t *ev = event_named(&e, ename);
    CHECK(ev != NULL);
    CHECK_STR(str_at(ev, "involvedObject", "name"), name);
    json_decref(ev);
    env_stop(&e);
}

/* A kclient for the env's server with the bearer token tok (written to a file in the env's directory). */
static struct kclient *client_as(struct env *e, const char *tok) {
    char path[160], err[256];
    snprintf(path, sizeof path, "%s/%s.tok", e->srv.dir, tok);
    FILE *f = fopen(path, "w");
    if (!f) return NULL;
    fprintf(f, "%s\n", tok);
    fclose(f);
    struct kc_config cfg;
    if (kc_config_from_url(e->srv.url, path, &cfg, err, sizeof err)) return NULL;
    struct kclient *kc = kclient_new(&e->loop, &cfg, err, sizeof err);
    kc_config_free(&cfg);
    return kc;
}

static long post_json(struct kclient *kc, const char *path, const char *text, char *err, size_t errlen) {
    json_t *b = json_loads(text, 0, NULL);
    long code = kclient_request_sync(kc, "POST", path, b, NULL, NULL, err, errlen);
    json_decref(b);
    return code;
}

TEST(integ_scheduled_event_needs_the_right_to_create_events) {
    struct env e;
    if (env_start(&e)) {
        env_stop(&e);
        test_fail(__FILE__, __LINE__, "environment did not start");
        return;
    }
    char path[160], err[256];
    snprintf(path, sizeof path, "%s/tokens.csv", e.srv.dir);
    FILE *f = fopen(path, "w");
    ENV_REQUIRE(&e, f);
    fputs("admin-tok,admin,1,system:masters\nbinder-tok,binder,2,\n", f);
    fclose(f);
    kclient_free(e.kc);
    apisrv_kill(&e.srv, SIGTERM);
    e.kc = NULL;
    ENV_REQUIRE(&e, apisrv_spawn(&e.srv, 0, "--token-file=@/tokens.csv") == 0);
    struct kclient *admin = client_as(&e, "admin-tok"), *binder = client_as(&e, "binder-tok");
    e.kc = admin;
    if (!admin || !binder) kclient_free(binder); /* admin goes with the env */
    ENV_REQUIRE(&e, admin && binder);
    create_pod(&e, "r1");
    create_pod(&e, "r2");
    /* binder may bind pods, not create Events */
    CHECK_I64(post_json(admin, "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
                        "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"Role\",\"metadata\":{\"name\":\"b\"},"
                        "\"rules\":[{\"apiGroups\":[\"\"],\"resources\":[\"pods/binding\"],\"verbs\":[\"create\"]}]}",
                        err, sizeof err), 201);
    CHECK_I64(post_json(admin, "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
                        "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"RoleBinding\",\"metadata\":"
                        "{\"name\":\"b\"},\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"Role\","
                        "\"name\":\"b\"},\"subjects\":[{\"kind\":\"User\",\"name\":\"binder\"}]}",
                        err, sizeof err), 201);
    const char *bind = "{\"apiVersion\":\"v1\",\"kind\":\"Binding\",\"metadata\":{\"name\":\"r1\"},"
                       "\"target\":{\"kind\":\"Node\",\"name\":\"n1\"}}";
    CHECK_I64(post_json(binder, PODS "/r1/binding?scheduledEvent=x", bind, err, sizeof err), 403);
    CHECK_HAS(err, "User \"binder\" cannot create resource \"events\" in API group \"\" in the namespace \"default\"");
    json_t *pod = get(&e, PODS "/r1");
    CHECK_STR(str_at(pod, "spec", "nodeName"), ""); /* nothing done */
    json_decref(pod);
    CHECK_I64(post_json(binder, PODS "/r1/binding", bind, err, sizeof err), 201);
    /* allowed both, the Event is made */
    CHECK_I64(post_json(admin, "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
                        "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"Role\",\"metadata\":{\"name\":\"e\"},"
                        "\"rules\":[{\"apiGroups\":[\"\"],\"resources\":[\"events\"],\"verbs\":[\"create\"]}]}",
                        err, sizeof err), 201);
    CHECK_I64(post_json(admin, "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
                        "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"RoleBinding\",\"metadata\":"
                        "{\"name\":\"e\"},\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"Role\","
                        "\"name\":\"e\"},\"subjects\":[{\"kind\":\"User\",\"name\":\"binder\"}]}",
                        err, sizeof err), 201);
    const char *bind2 = "{\"apiVersion\":\"v1\",\"kind\":\"Binding\",\"metadata\":{\"name\":\"r2\"},"
                        "\"target\":{\"kind\":\"Node\",\"name\":\"n1\"}}";
    CHECK_I64(post_json(binder, PODS "/r2/binding?scheduledEvent=x", bind2, err, sizeof err), 201);
    long count = 0;
    for (int i = 0; i < 500 && !events_about(&e, "r2", "Successfully assigned default/r2 to n1", &count); i++) {
        struct timespec t = {0, 10000000};
        nanosleep(&t, NULL);
    }
    CHECK_I64(count, 1);
    kclient_free(binder);
    env_stop(&e);
}
