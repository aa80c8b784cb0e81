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

static void close_any(uv_handle_t *h, void *arg) {
    (void)arg;
    if (!uv_is_closing(h)) uv_close(h, NULL);
}

TEST(resmgr_pool_status_from_stale_copy_refused_then_written) {
    struct apisrv s;
    int rc = apisrv_start(&s, "--crds=crds");
    if (rc) {
        test_fail(__FILE__, __LINE__, "API server: %s", strerror(-rc));
        return;
    }
    uv_loop_t loop;
    uv_timer_t wake;
    uv_loop_init(&loop);
    uv_timer_init(&loop, &wake);
    struct kc_config cfg = {0};
    char err[256], addr[64];
    REQUIRE_I64(kc_config_from_url(s.url, NULL, &cfg, err, sizeof err), 0);
    struct kclient *kc = kclient_new(&loop, &cfg, err, sizeof err);
    kc_config_free(&cfg);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", s.rf.proc.port);
    struct ctl_db *db = ctl_db_open(&loop, addr, err, sizeof err);
    REQUIRE(kc && db);
    json_t *pool = json_pack("{s:s, s:s, s:{s:s}, s:{s:[{s:s, s:s, s:s, s:i}]}}", "apiVersion", "peloton.io/v1alpha1",
                             "kind", "ResourcePool", "metadata", "name", "fp", "spec", "resources", "kind", "cpu",
                             "reservation", "1", "limit", "4", "share", 1);
    REQUIRE_I64(req(kc, "POST", POOLS, pool, NULL, NULL), 201);
    struct ctl_env env = {.loop = &loop, .kc = kc, .db = db, .identity = "resmgr-fence-test"};
    struct resmgr_options o;
    resmgr_options_default(&o);
    o.status_ms = 3600 * 1000; /* ticks are the test's own (rm_on_status below) */
    struct resmgr *r = resmgr_start(&env, &o, err, sizeof err);
    REQUIRE(r);
    /* leader, synced: the first status is written */
    char ent[256] = "";
    for (double end = mono_ms() + 15000; mono_ms() < end;) {
        run_for(&loop, &wake, 100);
        if (r->leader && r->recovered) rm_on_status(&r->status_t);
        run_for(&loop, &wake, 100);
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
    run_for(&loop, &wake, 300); /* the answer, and the informer's newer copy */
    status_field(kc, "fp", "entitlement", ent, sizeof ent);
    CHECK(strstr(ent, "\"cpu\":\"77\"") != NULL); /* refused: the newer write stands */
    /* the next tick writes from the newer copy */
    rm_on_status(&r->status_t);
    run_for(&loop, &wake, 300);
    status_field(kc, "fp", "entitlement", ent, sizeof ent);
    CHECK_STR(ent, ent0);
    /* and no write loop: nothing changed, nothing written (the resourceVersion stays) */
    json_t *a = NULL, *b = NULL;
    req(kc, "GET", POOLS "/fp", NULL, NULL, &a);
    rm_on_status(&r->status_t);
    run_for(&loop, &wake, 300);
    req(kc, "GET", POOLS "/fp", NULL, NULL, &b);
    CHECK_STR(json_string_value(json_object_get(json_object_get(b, "metadata"), "resourceVersion")),
              json_string_value(json_object_get(json_object_get(a, "metadata"), "resourceVersion")));
    json_decref(a);
    json_decref(b);
    resmgr_stop(r);
    kclient_free(kc);
    ctl_db_close(db);
    uv_close((uv_handle_t *)&wake, NULL);
    for (int i = 0; i < 100 && uv_loop_close(&loop) == UV_EBUSY; i++) {
        if (i == 50) uv_walk(&loop, close_any, NULL);
        uv_run(&loop, UV_RUN_NOWAIT);
    }
    apisrv_stop(&s);
}
