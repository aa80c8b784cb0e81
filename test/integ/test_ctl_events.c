/* The controllers' Events and PodScheduled writes against the real API
 * server (pelotond --roles=apiserver on a private redis-server,
 * apisrv_fixture.h): the recorder aggregates as client-go's does, and a
 * PodScheduled=False that lands after the binding is turned back to True.
 * Every wait is bounded; the server is stopped on every path. */
#include <errno.h>
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
