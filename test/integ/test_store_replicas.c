/* Integration tests of acknowledged writes with replicas (issue #22): a
 * primary and two replicas, real redis-servers on loopback. A store asked to
 * wait for one replica (wait_replicas 1) acknowledges a write only once
 * every replica online at the primary has it: with one of the two stopped
 * (SIGSTOP: still connected, not acknowledging) a write is not acknowledged,
 * on the synchronous store and on the asynchronous one. The Sentinels may
 * promote either replica, and the one that missed an acknowledged write
 * would lose it (test/e2e/test_redis_replwait.py shows that end to end).
 * A replica that is gone (kill -9) is no longer waited for: writes are
 * acknowledged again once the store has counted the replicas anew. */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "redis_proc.h"
#include "store.h"
#include "test.h"

struct rig {
    struct redis_proc p, r[2];
};

static void rig_stop(struct rig *g) {
    for (int i = 0; i < 2; i++) {
        if (g->r[i].pid > 0) kill(g->r[i].pid, SIGCONT);
        redis_proc_destroy(&g->r[i]);
    }
    redis_proc_destroy(&g->p);
}

static redisReply *cmd(int port, const char *fmt, const char *arg) {
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, (struct timeval){1, 0});
    if (!c || c->err) {
        if (c) redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, (struct timeval){1, 0});
    redisReply *r = redisCommand(c, fmt, arg);
    redisFree(c);
    return r;
}

/* The replicas the primary lists online (-1: no answer). */
static int online(struct rig *g) {
    redisReply *r = cmd(g->p.port, "INFO %s", "replication");
    int n = r && r->type == REDIS_REPLY_STRING ? 0 : -1;
    for (const char *p = n ? "" : r->str; (p = strstr(p, "state=online")); p++) n++;
    if (r) freeReplyObject(r);
    return n;
}

static void sleep_ms(int ms) { nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000L}, NULL); }

/* Waits (at most 10 s) until the primary lists n replicas online. */
static int wait_online(struct rig *g, int n) {
    for (int i = 0; i < 200; i++) {
        if (online(g) == n) return 0;
        sleep_ms(50);
    }
    return -1;
}

/* Waits (at most 5 s) until n replicas acknowledge a write: one that has
 * just synced acknowledges nothing for a moment. */
static int settle(struct rig *g, int n) {
    redisContext *c = redisConnectWithTimeout("127.0.0.1", g->p.port, (struct timeval){1, 0});
    if (!c || c->err) {
        if (c) redisFree(c);
        return -1;
    }
    redisSetTimeout(c, (struct timeval){6, 0});
    redisReply *r = redisCommand(c, "SET probe 1");
    if (r) freeReplyObject(r);
    r = redisCommand(c, "WAIT %d 5000", n);
    int rc = r && r->type == REDIS_REPLY_INTEGER && r->integer >= n ? 0 : -1;
    if (r) freeReplyObject(r);
    redisFree(c);
    return rc;
}

static int rig_start(struct rig *g) {
    memset(g, 0, sizeof *g);
    if (redis_proc_start(&g->p, NULL)) return -1;
    char port[16];
    snprintf(port, sizeof port, "%d", g->p.port);
    for (int i = 0; i < 2; i++) {
        if (redis_proc_start(&g->r[i], NULL)) return -1;
        redisReply *r = cmd(g->r[i].port, "REPLICAOF 127.0.0.1 %s", port);
        bool ok = r && r->type == REDIS_REPLY_STATUS;
        if (r) freeReplyObject(r);
        if (!ok) return -1;
    }
    return wait_online(g, 2) || settle(g, 2);
}

static json_t *cm(const char *name) {
    return json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap", "metadata", "name", name);
}

static int create(struct store *s, const char *name) {
    json_t *o = cm(name);
    int rc = store_create(s, "configmaps", "", o, NULL);
    json_decref(o);
    return rc;
}

TEST(store_wait_every_online_replica_sync) {
    struct rig g;
    struct store *s = NULL;
    struct store_options opt;
    store_options_init(&opt);
    opt.wait_replicas = 1;
    opt.wait_timeout_ms = 300;
    if (rig_start(&g) || store_open("127.0.0.1", g.p.port, &opt, &s)) {
        test_fail(__FILE__, __LINE__, "a primary with two replicas");
        rig_stop(&g);
        return;
    }
    CHECK_I64(create(s, "both"), 0);
    kill(g.r[1].pid, SIGSTOP); /* connected, acknowledging nothing */
    CHECK_I64(create(s, "one-of-two"), -EIO);
    CHECK_HAS(store_errmsg(s), "reached 1 of 2 replica(s)");
    kill(g.r[1].pid, SIGCONT);
    CHECK_I64(settle(&g, 2), 0);
    CHECK_I64(create(s, "both-again"), 0);
    /* a replica gone: not waited for once the replicas are counted again */
    redis_proc_kill9(&g.r[1]);
    CHECK_I64(wait_online(&g, 1), 0);
    int rc = -1;
    for (int i = 0; i < 10 && rc; i++) {
        char name[32];
        snprintf(name, sizeof name, "one-left-%d", i);
        if ((rc = create(s, name))) sleep_ms(200);
    }
    CHECK_I64(rc, 0);
    store_close(s);
    rig_stop(&g);
}

struct got {
    int calls, rc;
    char err[512];
};

static void on_done(void *ud, const struct store_result *r) {
    struct got *g = ud;
    g->calls++;
    g->rc = r->rc;
    snprintf(g->err, sizeof g->err, "%s", r->err);
}

static int create_async(uv_loop_t *loop, struct store_async *a, const char *name, char *err, size_t errlen) {
    struct got got = {0};
    char e[256];
    if (store_async_create(a, "configmaps", "", cm(name), false, on_done, &got, e, sizeof e)) return -EINVAL;
    for (int i = 0; i < 20000 && !got.calls; i++) uv_run(loop, UV_RUN_ONCE);
    snprintf(err, errlen, "%s", got.err);
    return got.calls ? got.rc : -ETIMEDOUT;
}

TEST(store_wait_every_online_replica_async) {
    struct rig g;
    struct store_async *a = NULL;
    struct store_options opt;
    uv_loop_t loop;
    char err[512];
    store_options_init(&opt);
    opt.wait_replicas = 1;
    opt.wait_timeout_ms = 300;
    uv_loop_init(&loop);
    if (rig_start(&g) || store_async_open(&loop, "127.0.0.1", g.p.port, &opt, &a)) {
        test_fail(__FILE__, __LINE__, "a primary with two replicas");
        rig_stop(&g);
        uv_loop_close(&loop);
        return;
    }
    CHECK_I64(create_async(&loop, a, "both", err, sizeof err), 0);
    kill(g.r[1].pid, SIGSTOP);
    CHECK_I64(create_async(&loop, a, "one-of-two", err, sizeof err), -EIO);
    CHECK_HAS(err, "reached 1 of 2 replica(s)");
    kill(g.r[1].pid, SIGCONT);
    CHECK_I64(settle(&g, 2), 0);
    CHECK_I64(create_async(&loop, a, "both-again", err, sizeof err), 0);
    redis_proc_kill9(&g.r[1]);
    CHECK_I64(wait_online(&g, 1), 0);
    int rc = -1;
    for (int i = 0; i < 10 && rc; i++) {
        char name[32];
        snprintf(name, sizeof name, "one-left-%d", i);
        if ((rc = create_async(&loop, a, name, err, sizeof err))) sleep_ms(200);
    }
    CHECK_I64(rc, 0);
    store_async_close(a);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    rig_stop(&g);
}
