/* Integration tests of the placement engines' shared claims of host
 * capacity (src/ctl/placement_claim.c) against a real redis-server: two
 * engines deciding from the same stale copy of a node never both get its
 * room; a gang's claims are all or none; a claim never bound expires; a
 * bound one lives its grace; a failed binding gives the room back at once. */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "ctl.h"
#include "host.h"
#include "placement_claim.h"
#include "redis_fixture.h"
#include "test.h"

static struct resvec cpu(int64_t m) {
    struct resvec r = resvec_zero();
    r.v[RES_CPU] = m;
    r.v[RES_MEMORY] = 1 << 20;
    return r;
}

static long long hlen(struct ctl_db *db, const char *key) {
    redisReply *r = ctl_redis(db, "HLEN %s", key);
    long long n = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return n;
}

static int take(struct pl_claims *c, struct host_fleet *copy, uint32_t host, const char *uid, int64_t m,
                char *node) {
    struct resvec req = cpu(m);
    int rc = pl_claims_take(c, copy, &host, &uid, &req, 1, node, 64);
    if (!rc) copy->hosts[host].allocated = resvec_add(copy->hosts[host].allocated, req); /* assumed, as the model does */
    return rc;
}

static struct host_fleet *copy_of_two_nodes(uint32_t *n0, uint32_t *n1) {
    struct host_fleet *f = host_fleet_new();
    struct host_spec s = {.name = "n0", .allocatable = cpu(2000)};
    s.allocatable.v[RES_MEMORY] = 8LL << 30;
    if (!f || host_fleet_add(f, &s, n0)) return f;
    s.name = "n1";
    host_fleet_add(f, &s, n1);
    return f;
}

TEST(placement_claims_two_engines_never_book_the_same_room) {
    struct redis_fixture f;
    REQUIRE_I64(redis_fixture_start(&f, NULL), 0);
    uv_loop_t loop;
    uv_loop_init(&loop);
    char addr[64], err[256];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", f.proc.port);
    struct ctl_db *db = ctl_db_open(&loop, addr, err, sizeof err);
    uint32_t n0 = 0, n1 = 0;
    /* each engine's own copy of two nodes of 2 cpus, both empty */
    struct host_fleet *fa = copy_of_two_nodes(&n0, &n1), *fb = copy_of_two_nodes(&n0, &n1);
    REQUIRE(db && fa && fb && fa->nhosts == 2 && fb->nhosts == 2);
    struct pl_claims a, b;
    REQUIRE_I64(pl_claims_init(&a, db, "engine-a", 600, 200), 0);
    REQUIRE_I64(pl_claims_init(&b, db, "engine-b", 600, 200), 0);
    char node[64] = "";
    CHECK_I64(take(&a, fa, n0, "pod-a1", 1500, node), 0);
    /* b's copy still shows n0 empty: 1000m there is refused, and n0 named */
    CHECK_I64(take(&b, fb, n0, "pod-b1", 1000, node), 1);
    CHECK_STR(node, "n0");
    CHECK_I64(take(&b, fb, n0, "pod-b1", 500, node), 0); /* beside a's claim */
    /* a gang all or none: a member fits on n1, the other not on n0: nothing claimed */
    uint32_t hosts[2] = {n1, n0};
    const char *uids[2] = {"pod-g1", "pod-g2"};
    struct resvec req[2] = {cpu(1000), cpu(100)};
    CHECK_I64(pl_claims_take(&b, fb, hosts, uids, req, 2, node, sizeof node), 1);
    CHECK_STR(node, "n0");
    CHECK_I64(hlen(db, PL_CLAIM_KEY "n1"), 0);
    /* an engine's own claims are in its copy already: counted once, so a is full too */
    CHECK_I64(take(&a, fa, n0, "pod-a2", 400, node), 1);
    /* a's binding of pod-a1 failed: the room goes back at once */
    pl_claims_settle(&a, "n0", "pod-a1", false);
    fa->hosts[n0].allocated = resvec_sub(fa->hosts[n0].allocated, cpu(1500));
    ctl_redis_settle(db);
    CHECK_I64(take(&b, fb, n0, "pod-b3", 1500, node), 0);
    /* pod-b3 bound: its claim lives its grace (200 ms) more */
    pl_claims_settle(&b, "n0", "pod-b3", true);
    ctl_redis_settle(db);
    CHECK_I64(take(&a, fa, n0, "pod-a3", 1000, node), 1);
    nanosleep(&(struct timespec){0, 300 * 1000000L}, NULL);
    /* a's copy has seen pod-b3 bound; its claim's grace is over (not counted twice); pod-b1, never
     * bound, still holds its 500m (600 ms) */
    fa->hosts[n0].allocated = resvec_add(fa->hosts[n0].allocated, cpu(1500));
    CHECK_I64(take(&a, fa, n0, "pod-a3", 400, node), 1);
    nanosleep(&(struct timespec){0, 350 * 1000000L}, NULL);
    /* pod-b1 expired: dropped by the next claim, its room a's */
    CHECK_I64(take(&a, fa, n0, "pod-a3", 400, node), 0);
    redisReply *r = ctl_redis(db, "HEXISTS %s pod-b1", PL_CLAIM_KEY "n0");
    CHECK(r && r->type == REDIS_REPLY_INTEGER && r->integer == 0);
    freeReplyObject(r);
    host_fleet_free(fa);
    host_fleet_free(fb);
    ctl_db_close(db);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    redis_fixture_stop(&f);
}
