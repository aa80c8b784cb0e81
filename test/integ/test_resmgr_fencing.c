/* resmgr's writes against the project's real API server (apisrv_fixture.h,
 * with the Peloton CRDs) and its redis-server: a ResourcePool status patch
 * made from a stale copy of the pool is refused (its metadata.resourceVersion
 * is the precondition) and the next status tick writes from the newer copy
 * the informer brings. resmgr runs on a private loop; the test's reads and
 * writes are synchronous requests between turns of it, so the copy resmgr
 * decides from is stale for as long as the test wants. Every wait has a
 * deadline. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apisrv_fixture.h"
#include "ctl.h"
#include "kclient.h"
#include "resmgr_int.h"
#include "test.h"

#define MERGE "application/merge-patch+json"
#define POOLS "/apis/peloton.io/v1alpha1/resourcepools"

static double mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void on_wake(uv_timer_t *t) { (void)t; }

static void run_for(uv_loop_t *loop, uv_timer_t *wake, unsigned ms) {
    double end = mono_ms() + ms;
    while (mono_ms() < end) {
        uv_timer_start(wake, on_wake, (uint64_t)(end - mono_ms()) + 1, 0);
        uv_run(loop, UV_RUN_ONCE);
    }
    uv_timer_stop(wake);
}

static long req(struct kclient *c, const char *method, const char *path, json_t *body, const char *ctype,
                json_t **out) {
    char err[256];
    long st = kclient_request_sync(c, method, path, body, ctype, out, err, sizeof err);
    json_decref(body);
    return st;
}

/* The stored pool's status.<field> as text ("" when none). */
static void status_field(struct kclient *c, const char *name, const char *field, char *out, size_t len) {
    char path[256];
    snprintf(path, sizeof path, POOLS "/%s", name);
    json_t *obj = NULL;
    out[0] = 0;
    if (req(c, "GET", path, NULL, NULL, &obj) == 200) {
        char *s = json_dumps(json_object_get(json_object_get(obj, "status"), field), JSON_COMPACT | JSON_SORT_KEYS |
                                                                                        JSON_ENCODE_ANY);
        snprintf(out, len, "%s", s ? s : "");
        free(s);
    }
    json_decref(obj);
}

static long make_node(struct kclient *c, const char *name) {
    json_t *n = json_pack("{s:s, s:s, s:{s:s}, s:{}}", "apiVersion", "v1", "kind", "Node", "metadata", "name", name,
                          "spec");
    long st = req(c, "POST", "/api/v1/nodes", n, NULL, NULL);
    if (st != 201) return st;
    char path[128];
    snprintf(path, sizeof path, "/api/v1/nodes/%s/status", name);
    json_t *s = json_pack("{s:{s:{s:s, s:s, s:s}, s:{s:s, s:s, s:s}, s:[{s:s, s:s}]}}", "status", "allocatable", "cpu",
                          "8", "memory", "32Gi", "pods", "110", "capacity", "cpu", "8", "memory", "32Gi", "pods", "110",
                          "conditions", "type", "Ready", "status", "True");
    return req(c, "PATCH", path, s, MERGE, NULL);
}

/* A pod of pool pool asking for cpu cores at priority prio, bound to node
 * (NULL: pending). 201 or the status. */
static long make_pod(struct kclient *c, const char *name, const char *pool, const char *cpu, int prio,
                     const char *node) {
    char p[8];
    snprintf(p, sizeof p, "%d", prio);
    json_t *o = json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}, s:{s:s}}, s:{s:s, s:s, s:[{s:s, s:s, s:{s:{s:s}}}]}}",
                          "apiVersion", "v1", "kind", "Pod", "metadata", "name", name, "namespace", "default",
                          "labels", "peloton.io/resource-pool", pool, "annotations", "peloton.io/priority", p, "spec",
                          "schedulerName", "peloton", "restartPolicy", "Never", "containers", "name", "c", "image",
                          "x", "resources", "requests", "cpu", cpu);
    if (node) json_object_set_new(json_object_get(o, "spec"), "nodeName", json_string(node));
    long st = req(c, "POST", "/api/v1/namespaces/default/pods", o, NULL, NULL);
    if (st != 201 || !node) return st;
    char path[160];
    snprintf(path, sizeof path, "/api/v1/namespaces/default/pods/%s/status", name);
    return req(c, "PATCH", path, json_pack("{s:{s:s}}", "status", "phase", "Running"), MERGE, NULL) == 200 ? 201 : -1;
}

/* pod's uid ("" when gone), whether it is marked preempted or being deleted. */
static void view_pod(struct kclient *c, const char *name, char uid[64], bool *marked, bool *deleting) {
    char path[160];
    snprintf(path, sizeof path, "/api/v1/namespaces/default/pods/%s", name);
    json_t *o = NULL;
    uid[0] = 0;
    *marked = *deleting = false;
    if (req(c, "GET", path, NULL, NULL, &o) == 200) {
        json_t *md = json_object_get(o, "metadata");
        const char *u = json_string_value(json_object_get(md, "uid"));
        snprintf(uid, 64, "%s", u ? u : "");
        *marked = json_object_get(json_object_get(md, "annotations"), "peloton.io/preempted") != NULL;
        *deleting = json_object_get(md, "deletionTimestamp") != NULL;
    }
    json_decref(o);
}

static bool waiting_for_admission(struct kclient *c, const char *name) {
    char path[160];
    snprintf(path, sizeof path, "/api/v1/namespaces/default/pods/%s", name);
    json_t *o = NULL, *cond;
    size_t i;
    bool yes = false;
    if (req(c, "GET", path, NULL, NULL, &o) == 200)
        json_array_foreach(json_object_get(json_object_get(o, "status"), "conditions"), i, cond) {
            const char *reason = json_string_value(json_object_get(cond, "reason"));
            yes |= reason && !strcmp(reason, "WaitingForAdmission");
        }
    json_decref(o);
    return yes;
}

static void close_any(uv_handle_t *h, void *arg) {
    (void)arg;
    if (!uv_is_closing(h)) uv_close(h, NULL);
}

/* A resmgr on its own loop against a fresh API server and its Redis. */
struct rm_fix {
    struct apisrv s;
    uv_loop_t loop;
    uv_timer_t wake;
    struct kclient *kc;
    struct ctl_db *db;
    struct resmgr *r;
};

static bool fix_open(struct rm_fix *f) {
    if (apisrv_start(&f->s, "--crds=crds")) return false;
    uv_loop_init(&f->loop);
    uv_timer_init(&f->loop, &f->wake);
    struct kc_config cfg = {0};
    char err[256], addr[64];
    if (kc_config_from_url(f->s.url, NULL, &cfg, err, sizeof err)) return false;
    f->kc = kclient_new(&f->loop, &cfg, err, sizeof err);
    kc_config_free(&cfg);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", f->s.rf.proc.port);
    f->db = ctl_db_open(&f->loop, addr, err, sizeof err);
    return f->kc && f->db;
}

static void fix_close(struct rm_fix *f) {
    resmgr_stop(f->r);
    kclient_free(f->kc);
    ctl_db_close(f->db);
    uv_close((uv_handle_t *)&f->wake, NULL);
    for (int i = 0; i < 100 && uv_loop_close(&f->loop) == UV_EBUSY; i++) {
        if (i == 50) uv_walk(&f->loop, close_any, NULL);
        uv_run(&f->loop, UV_RUN_NOWAIT);
    }
    apisrv_stop(&f->s);
}

TEST(resmgr_pool_status_from_stale_copy_refused_then_written) {
    struct rm_fix f = {0};
    REQUIRE(fix_open(&f));
    struct kclient *kc = f.kc;
    char err[256];
    json_t *pool = json_pack("{s:s, s:s, s:{s:s}, s:{s:[{s:s, s:s, s:s, s:i}]}}", "apiVersion", "peloton.io/v1alpha1",
                             "kind", "ResourcePool", "metadata", "name", "fp", "spec", "resources", "kind", "cpu",
                             "reservation", "1", "limit", "4", "share", 1);
    REQUIRE_I64(req(kc, "POST", POOLS, pool, NULL, NULL), 201);
    struct ctl_env env = {.loop = &f.loop, .kc = kc, .db = f.db, .identity = "resmgr-fence-test"};
    struct resmgr_options o;
    resmgr_options_default(&o);
    o.status_ms = 3600 * 1000; /* ticks are the test's own (rm_on_status below) */
    struct resmgr *r = resmgr_start(&env, &o, err, sizeof err);
    REQUIRE(r);
    /* leader, synced: the first status is written */
    char ent[256] = "";
    for (double end = mono_ms() + 15000; mono_ms() < end;) {
        run_for(&f.loop, &f.wake, 100);
        if (r->leader && r->recovered) rm_on_status(&r->status_t);
        run_for(&f.loop, &f.wake, 100);
        status_field(kc, "fp", "entitlement", ent, sizeof ent);
        if (ent[0] && strcmp(ent, "null")) break;
    }
    CHECK(ent[0] && strcmp(ent, "null"));
    char ent0[256];
    snprintf(ent0, sizeof ent0, "%s", ent);
    /* Meanwhile (resmgr's loop not running, so its copy is stale) someone
     * else writes the status: the stored pool is newer than resmgr's copy. */
    CHECK_I64(req(kc, "PATCH", POOLS "/fp/status", json_pack("{s:{s:{s:s}}}", "status", "entitlement", "cpu", "77"),
                  MERGE, NULL),
              200);
    /* a status tick from the stale copy (what was sent forgotten, so it writes) */
    json_object_del(r->sent, "fp");
    rm_on_status(&r->status_t);
    run_for(&f.loop, &f.wake, 300); /* the answer, and the informer's newer copy */
    status_field(kc, "fp", "entitlement", ent, sizeof ent);
    CHECK(strstr(ent, "\"cpu\":\"77\"") != NULL); /* refused: the newer write stands */
    /* the next tick writes from the newer copy */
    rm_on_status(&r->status_t);
    run_for(&f.loop, &f.wake, 300);
    status_field(kc, "fp", "entitlement", ent, sizeof ent);
    CHECK_STR(ent, ent0);
    /* and no write loop: nothing changed, nothing written (the resourceVersion stays) */
    json_t *a = NULL, *b = NULL;
    req(kc, "GET", POOLS "/fp", NULL, NULL, &a);
    rm_on_status(&r->status_t);
    run_for(&f.loop, &f.wake, 300);
    req(kc, "GET", POOLS "/fp", NULL, NULL, &b);
    CHECK_STR(json_string_value(json_object_get(json_object_get(b, "metadata"), "resourceVersion")),
              json_string_value(json_object_get(json_object_get(a, "metadata"), "resourceVersion")));
    json_decref(a);
    json_decref(b);
    f.r = r;
    fix_close(&f);
}

/* A preemption decided from a stale copy (every victim replaced meanwhile by
 * a pod of the same name, another uid) neither marks nor deletes the new
 * pods (409: the uid is the precondition); the next round decides again
 * from the newer pods. */
TEST(resmgr_stale_preemption_spares_the_pod_that_took_the_name) {
    struct rm_fix f = {0};
    REQUIRE(fix_open(&f));
    struct kclient *kc = f.kc;
    char err[256];
    REQUIRE_I64(make_node(kc, "n1"), 200);
    json_t *pool = json_pack("{s:s, s:s, s:{s:s}, s:{s:[{s:s, s:s, s:s, s:i}]}}", "apiVersion", "peloton.io/v1alpha1",
                             "kind", "ResourcePool", "metadata", "name", "pri", "spec", "resources", "kind", "cpu",
                             "reservation", "0", "limit", "4", "share", 1);
    REQUIRE_I64(req(kc, "POST", POOLS, pool, NULL, NULL), 201);
    char name[16];
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "lo-%d", i);
        CHECK_I64(make_pod(kc, name, "pri", "1", 1, "n1"), 201);
    }
    CHECK_I64(make_pod(kc, "hi-0", "pri", "2", 9, NULL), 201);
    struct ctl_env env = {.loop = &f.loop, .kc = kc, .db = f.db, .identity = "resmgr-fence-test"};
    struct resmgr_options o;
    resmgr_options_default(&o);
    o.preempt_ms = 3600 * 1000; /* preemption rounds are the test's own (rm_on_preempt below) */
    o.over_checks = 1;
    struct resmgr *r = resmgr_start(&env, &o, err, sizeof err);
    REQUIRE(r);
    bool queued = false;
    for (double end = mono_ms() + 15000; mono_ms() < end && !queued;) {
        run_for(&f.loop, &f.wake, 100);
        queued = r->leader && r->recovered && waiting_for_admission(kc, "hi-0");
    }
    CHECK(queued);
    run_for(&f.loop, &f.wake, 200);
    /* resmgr's loop stands still: its copy still has the old pods while each
     * is replaced by a pod of the same name */
    char old[4][64], uid[64];
    bool marked, deleting;
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "lo-%d", i);
        view_pod(kc, name, old[i], &marked, &deleting);
        char path[160];
        snprintf(path, sizeof path, "/api/v1/namespaces/default/pods/%s?gracePeriodSeconds=0", name);
        CHECK_I64(req(kc, "DELETE", path, NULL, NULL, NULL), 200);
        CHECK_I64(make_pod(kc, name, "pri", "1", 1, "n1"), 201);
    }
    rm_on_preempt(&r->preempt_t);
    run_for(&f.loop, &f.wake, 500);
    for (int i = 0; i < 4; i++) { /* the new pods: neither marked nor deleted */
        snprintf(name, sizeof name, "lo-%d", i);
        view_pod(kc, name, uid, &marked, &deleting);
        CHECK(uid[0] && strcmp(uid, old[i]));
        CHECK(!marked);
        CHECK(!deleting);
    }
    /* the next round decides from the newer pods: two of them make room */
    rm_on_preempt(&r->preempt_t);
    run_for(&f.loop, &f.wake, 500);
    int evicted = 0;
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "lo-%d", i);
        view_pod(kc, name, uid, &marked, &deleting);
        evicted += !uid[0] || deleting;
    }
    CHECK_I64(evicted, 2);
    f.r = r;
    fix_close(&f);
}

/* A preemption decided from a stale copy (every victim changed meanwhile:
 * same pod, same uid, a newer resourceVersion) neither marks nor deletes
 * them (409: the resourceVersion the model had is the precondition); the
 * next round decides again from the newer pods, and its mark and delete
 * (held to the resourceVersion the mark left) go through. */
TEST(resmgr_stale_preemption_spares_the_pod_changed_since) {
    struct rm_fix f = {0};
    REQUIRE(fix_open(&f));
    struct kclient *kc = f.kc;
    char err[256];
    REQUIRE_I64(make_node(kc, "n1"), 200);
    json_t *pool = json_pack("{s:s, s:s, s:{s:s}, s:{s:[{s:s, s:s, s:s, s:i}]}}", "apiVersion", "peloton.io/v1alpha1",
                             "kind", "ResourcePool", "metadata", "name", "pri", "spec", "resources", "kind", "cpu",
                             "reservation", "0", "limit", "4", "share", 1);
    REQUIRE_I64(req(kc, "POST", POOLS, pool, NULL, NULL), 201);
    char name[16];
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "lo-%d", i);
        CHECK_I64(make_pod(kc, name, "pri", "1", 1, "n1"), 201);
    }
    CHECK_I64(make_pod(kc, "hi-0", "pri", "2", 9, NULL), 201);
    struct ctl_env env = {.loop = &f.loop, .kc = kc, .db = f.db, .identity = "resmgr-fence-test"};
    struct resmgr_options o;
    resmgr_options_default(&o);
    o.preempt_ms = 3600 * 1000; /* preemption rounds are the test's own (rm_on_preempt below) */
    o.over_checks = 1;
    struct resmgr *r = resmgr_start(&env, &o, err, sizeof err);
    REQUIRE(r);
    bool queued = false;
    for (double end = mono_ms() + 15000; mono_ms() < end && !queued;) {
        run_for(&f.loop, &f.wake, 100);
        queued = r->leader && r->recovered && waiting_for_admission(kc, "hi-0");
    }
    CHECK(queued);
    run_for(&f.loop, &f.wake, 200);
    /* resmgr's loop stands still: its copy still has the pods as they were
     * while each is changed (a label: same pod, same uid) */
    char old[4][64], uid[64];
    bool marked, deleting;
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "lo-%d", i);
        view_pod(kc, name, old[i], &marked, &deleting);
        char path[160];
        snprintf(path, sizeof path, "/api/v1/namespaces/default/pods/%s", name);
        CHECK_I64(req(kc, "PATCH", path, json_pack("{s:{s:{s:s}}}", "metadata", "labels", "changed", "yes"), MERGE,
                      NULL),
                  200);
    }
    rm_on_preempt(&r->preempt_t);
    run_for(&f.loop, &f.wake, 500);
    for (int i = 0; i < 4; i++) { /* the changed pods: neither marked nor deleted */
        snprintf(name, sizeof name, "lo-%d", i);
        view_pod(kc, name, uid, &marked, &deleting);
        CHECK_STR(uid, old[i]);
        CHECK(!marked);
        CHECK(!deleting);
    }
    /* the next round decides from the newer pods: two of them make room */
    rm_on_preempt(&r->preempt_t);
    run_for(&f.loop, &f.wake, 500);
    int evicted = 0;
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "lo-%d", i);
        view_pod(kc, name, uid, &marked, &deleting);
        evicted += !uid[0] || (marked && deleting);
    }
    CHECK_I64(evicted, 2);
    f.r = r;
    fix_close(&f);
}

/* Starts resmgr and runs its loop until it leads and has read back what was admitted. */
static bool fix_lead(struct rm_fix *f, const struct resmgr_options *o) {
    char err[256];
    struct ctl_env env = {.loop = &f->loop, .kc = f->kc, .db = f->db, .identity = "resmgr-recover-test"};
    if (!(f->r = resmgr_start(&env, o, err, sizeof err))) return false;
    for (double end = mono_ms() + 15000; mono_ms() < end && !(f->r->leader && f->r->recovered);)
        run_for(&f->loop, &f->wake, 5);
    return f->r->leader && f->r->recovered;
}


/* Gang i's key: every tenth a gang label, the rest pods alone. */
static void gang_key(int i, char *key, size_t len) {
    if (i % 10) snprintf(key, len, "team-%d/pod:p%d", i % 7, i);
    else snprintf(key, len, "team-%d/g%d", i % 7, i);
}

/* n admitted gangs' records, on the ready queue (every other one on the retry queue when split). */
static void seed_admitted(struct ctl_db *db, int n, bool split) {
    for (int i = 0; i < n; i++) {
        char key[64];
        gang_key(i, key, sizeof key);
        freeReplyObject(ctl_redis(db, "HSET %s%s ns team-%d pods [\"p%d\"] pool fp epoch 1", CTL_KEY_GANG, key,
                                  i % 7, i));
        if (!split || i % 2) freeReplyObject(ctl_redis(db, "RPUSH %s %s", CTL_KEY_READY, key));
        else freeReplyObject(ctl_redis(db, "ZADD %s %d %s", CTL_KEY_RETRY, i, key));
    }
}

/* Redis's count of calls of cmd since the last CONFIG RESETSTAT. */
static long long calls_of(struct ctl_db *db, const char *cmd) {
    redisReply *rep = ctl_redis(db, "INFO commandstats");
    char want[64];
    snprintf(want, sizeof want, "cmdstat_%s:calls=", cmd);
    const char *at = rep && rep->type == REDIS_REPLY_STRING ? strstr(rep->str, want) : NULL;
    long long n = at ? atoll(at + strlen(want)) : 0;
    freeReplyObject(rep);
    return n;
}

/* A new term reads back what the previous one admitted: every gang record
 * named by the ready and retry queues (3,000 here, so the reads go in
 * several pipelined batches), each admitted again; a queue entry without a
 * record, or with a record that is not a gang's, is passed over. Before,
 * two blocking round trips a gang held the controllers' loop for seconds at
 * 160,000 gangs (bench_scale's backlog), past the roles' leases. */
TEST(resmgr_new_term_reads_back_every_admitted_gang) {
    struct rm_fix f = {0};
    REQUIRE(fix_open(&f));
    enum { GANGS = 3000 };
    seed_admitted(f.db, GANGS, true);
    freeReplyObject(ctl_redis(f.db, "RPUSH %s team-0/pod:none", CTL_KEY_READY)); /* no record */
    freeReplyObject(ctl_redis(f.db, "HSET %steam-0/pod:odd ns team-0 pods notjson", CTL_KEY_GANG));
    freeReplyObject(ctl_redis(f.db, "RPUSH %s team-0/pod:odd", CTL_KEY_READY)); /* not a gang's record */
    struct resmgr_options o;
    resmgr_options_default(&o);
    double t0 = mono_ms();
    REQUIRE(fix_lead(&f, &o));
    struct resmgr *r = f.r;
    size_t admitted = 0;
    for (int i = 0; i < GANGS; i++) {
        char key[64];
        gang_key(i, key, sizeof key);
        struct rm_gang *g = strmap_get(&r->gangs, key);
        if (g && g->st == RG_ADMITTED) admitted++;
        if (i == 30) {
            CHECK(g && g->label && !strcmp(g->label, "g30"));
            CHECK(g && g->ns && !strcmp(g->ns, "team-2"));
        }
        if (i == 31) CHECK(g && !g->label);
    }
    CHECK_I64(admitted, GANGS);
    CHECK(strmap_get(&r->gangs, "team-0/pod:none") == NULL);
    CHECK(strmap_get(&r->gangs, "team-0/pod:odd") == NULL);
    printf("  resmgr: %d gang records read back within %.0f ms of the start\n", GANGS, mono_ms() - t0);
    fix_close(&f);
}

/* The look for admitted gangs in no queue (LPOS over the ready queue, from
 * its head) is put off while the ready queue is long: 5,000 gangs waiting
 * there past the timeout cost Redis no LPOS and are not readied again;
 * once the queue is short the look is made again. */
TEST(resmgr_lost_gang_check_spares_a_long_ready_queue) {
    struct rm_fix f = {0};
    REQUIRE(fix_open(&f));
    enum { GANGS = 5000 };
    seed_admitted(f.db, GANGS, false);
    struct resmgr_options o;
    resmgr_options_default(&o);
    o.ready_timeout_ms = 100;
    REQUIRE(fix_lead(&f, &o));
    freeReplyObject(ctl_redis(f.db, "CONFIG RESETSTAT"));
    run_for(&f.loop, &f.wake, 2500); /* every gang due, two checks at least */
    CHECK_I64(calls_of(f.db, "lpos"), 0);
    redisReply *len = ctl_redis(f.db, "LLEN %s", CTL_KEY_READY);
    CHECK(len && len->type == REDIS_REPLY_INTEGER && len->integer == GANGS); /* nothing readied again */
    freeReplyObject(len);
    freeReplyObject(ctl_redis(f.db, "LTRIM %s 0 99", CTL_KEY_READY)); /* short now: the rest are in no queue */
    run_for(&f.loop, &f.wake, 2500);
    CHECK(calls_of(f.db, "lpos") > 0);
    len = ctl_redis(f.db, "LLEN %s", CTL_KEY_READY);
    CHECK(len && len->type == REDIS_REPLY_INTEGER && len->integer > 100); /* the lost ones readied again */
    freeReplyObject(len);
    fix_close(&f);
}
