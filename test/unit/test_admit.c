#include <errno.h>
#include <stdlib.h>

#include "admit.h"
#include "entitle.h"
#include "respool.h"
#include "test.h"

#define CORES(n) ((int64_t)(n) * 1000)
#define GIB(n) ((int64_t)(n) << 30)

static struct resvec cpu(int64_t cores) { return (struct resvec){{CORES(cores), 0, 0, 0}}; }

/* A pool at path with a cpu reservation (cores); entitlement set by hand. */
static struct respool *mkpool(struct respool_tree *t, const char *path, int64_t res_cores) {
    struct respool_config c;
    respool_config_default(&c);
    c.res[RES_CPU].reservation = CORES(res_cores);
    char err[256];
    struct respool *p = NULL;
    if (respool_create(t, path, &c, &p, err, sizeof err)) test_fail(__FILE__, __LINE__, "%s", err);
    return p;
}

static void teardown(struct respool_tree *t) {
    admit_tree_release(t);
    respool_tree_free(t);
}

TEST(admit_priority_then_fifo) {
    struct respool_tree *t = respool_tree_new();
    struct respool *p = mkpool(t, "/a", 0);
    REQUIRE(p);
    p->entitlement = cpu(100);
    static const uint32_t prio[] = {1, 5, 5, 3, 5, 0};
    struct gang g[6];
    char ids[6][16];
    for (int i = 0; i < 6; i++) {
        snprintf(ids[i], sizeof ids[i], "g%d", i);
        admit_gang_init(&g[i], ids[i], prio[i], WF_PREEMPTIBLE, 1, cpu(1));
        REQUIRE(admit_enqueue(p, &g[i], NULL, 0) == 0);
        CHECK_I64(g[i].seq, i);
    }
    CHECK_I64(admit_queued(p, ADMIT_Q_PENDING), 6);
    CHECK_STR(admit_head(p, ADMIT_Q_PENDING)->id, "g1");
    struct gang *out[6];
    REQUIRE_I64(admit_pool_round(p, out, 6), 6);
    static const char *want[] = {"g1", "g2", "g4", "g3", "g0", "g5"};
    for (int i = 0; i < 6; i++) CHECK_STR(out[i]->id, want[i]);
    CHECK_I64(admit_queued(p, -1), 0);
    CHECK(admit_head(p, ADMIT_Q_PENDING) == NULL);
    teardown(t);
}

/* A gang's place in its queue is its rank in admission order, kept true
 * as gangs come and go; the message of a gang behind others says it. */
TEST(admit_gang_rank_follows_the_queue) {
    struct respool_tree *t = respool_tree_new();
    struct respool *p = mkpool(t, "/a", 0);
    REQUIRE(p);
    static const uint32_t prio[] = {1, 5, 5, 3, 5, 0};
    static const uint32_t rank[] = {5, 1, 2, 4, 3, 6}; /* g1, g2, g4, g3, g0, g5 */
    struct gang g[6];
    char ids[6][16];
    for (int i = 0; i < 6; i++) {
        snprintf(ids[i], sizeof ids[i], "g%d", i);
        admit_gang_init(&g[i], ids[i], prio[i], WF_PREEMPTIBLE, 1, cpu(1));
        REQUIRE(admit_enqueue(p, &g[i], NULL, 0) == 0);
    }
    for (int i = 0; i < 6; i++) CHECK_I64(admit_gang_rank(&g[i]), rank[i]);
    char buf[300];
    admit_why_format(&g[3], buf, sizeof buf);
    CHECK_STR(buf, "pool /a: queued behind higher-priority or earlier gangs, position 4 of 6 in the pool's queue; "
                   "admitted after the 3 ahead of it");
    admit_remove(&g[2]); /* one ahead of g3 leaves */
    CHECK_I64(admit_gang_rank(&g[3]), 3);
    CHECK_I64(admit_gang_rank(&g[5]), 5);
    CHECK_I64(admit_gang_rank(&g[2]), 0);
    struct gang late;
    admit_gang_init(&late, "late", 9, WF_PREEMPTIBLE, 1, cpu(1)); /* ahead of all */
    REQUIRE(admit_enqueue(p, &late, NULL, 0) == 0);
    CHECK_I64(admit_gang_rank(&late), 1);
    CHECK_I64(admit_gang_rank(&g[1]), 2);
    CHECK_I64(admit_gang_rank(&g[3]), 4);
    teardown(t);
}

TEST(admit_moves_pending_to_alloc) {
    struct respool_tree *t = respool_tree_new();
    struct respool *p = mkpool(t, "/a", 10);
    REQUIRE(p);
    p->cfg.res[RES_MEMORY].reservation = GIB(10); /* the controller limit is a share of it */
    p->entitlement = (struct resvec){{CORES(10), GIB(10), 0, 0}};
    struct gang g;
    admit_gang_init(&g, "g", 1, WF_PREEMPTIBLE | WF_CONTROLLER, 2, (struct resvec){{CORES(2), GIB(1), 0, 0}});
    REQUIRE(admit_enqueue(p, &g, NULL, 0) == 0);
    CHECK_I64(p->pending.c[UC_PREEMPT].v[RES_CPU], CORES(2));
    CHECK_I64(p->pending.c[UC_CONTROLLER].v[RES_MEMORY], GIB(1));
    CHECK_I64(admit_gang_queue(&g), ADMIT_Q_PENDING);
    struct gang *out[1];
    REQUIRE_I64(admit_pool_round(p, out, 1), 1);
    CHECK(out[0] == &g);
    CHECK(g.pool == p);
    CHECK_I64(admit_gang_queue(&g), -1);
    CHECK(resvec_is_zero(p->pending.c[UC_PREEMPT]));
    CHECK(resvec_is_zero(p->pending.c[UC_CONTROLLER]));
    CHECK_I64(p->alloc.c[UC_PREEMPT].v[RES_CPU], CORES(2));
    CHECK_I64(p->alloc.c[UC_CONTROLLER].v[RES_MEMORY], GIB(1));
    /* release gives it back; more than held is refused and changes nothing */
    CHECK(admit_release(p, g.flags, cpu(3)) == -EINVAL);
    CHECK(admit_release(p, g.flags, cpu(1)) == 0);
    CHECK_I64(p->alloc.c[UC_PREEMPT].v[RES_CPU], CORES(1));
    CHECK_I64(p->alloc.c[UC_CONTROLLER].v[RES_CPU], CORES(1));
    CHECK(admit_release(p, WF_PREEMPTIBLE | WF_CONTROLLER, (struct resvec){{CORES(1), GIB(1), 0, 0}}) == 0);
    CHECK(resvec_is_zero(p->alloc.c[UC_PREEMPT]));
    CHECK(resvec_is_zero(p->alloc.c[UC_CONTROLLER]));
    CHECK(admit_release(respool_root(t), 0, cpu(0)) == -EINVAL);
    teardown(t);
}

TEST(admit_gang_all_or_nothing) {
    struct respool_tree *t = respool_tree_new();
    struct respool *p = mkpool(t, "/a", 0);
    REQUIRE(p);
    p->entitlement = cpu(5);
    p->alloc.c[UC_PREEMPT] = cpu(3);
    struct gang g;
    admit_gang_init(&g, "big", 1, WF_PREEMPTIBLE, 3, cpu(3)); /* 3 tasks of 1: only 2 would fit */
    REQUIRE(admit_enqueue(p, &g, NULL, 0) == 0);
    struct gang *out[1];
    CHECK_I64(admit_pool_round(p, out, 1), 0);
    CHECK_I64(p->alloc.c[UC_PREEMPT].v[RES_CPU], CORES(3));
    CHECK_I64(p->pending.c[UC_PREEMPT].v[RES_CPU], CORES(3));
    CHECK_I64(g.why.check, ADMIT_CHECK_ENTITLEMENT);
    CHECK_I64(g.why.kind, RES_CPU);
    CHECK_I64(g.why.alloc, CORES(3));
    CHECK_I64(g.why.gang, CORES(3));
    CHECK_I64(g.why.limit, CORES(5));
    char buf[400];
    admit_why_format(&g, buf, sizeof buf);
    CHECK_STR(buf, "pool /a at its cpu entitlement: 3 of 5 cores allocated, gang needs 3; position 1 of 1 in the pool's "
                   "queue; admitted once its work frees 1 core or its entitlement grows by 1 core");
    /* once one core is released it fits exactly */
    p->alloc.c[UC_PREEMPT] = cpu(2);
    CHECK_I64(admit_pool_round(p, out, 1), 1);
    CHECK_I64(g.why.check, ADMIT_CHECK_NONE);
    CHECK_I64(p->alloc.c[UC_PREEMPT].v[RES_CPU], CORES(5));
    teardown(t);
}

TEST(admit_head_of_line_blocks_pool) {
    struct respool_tree *t = respool_tree_new();
    struct respool *p = mkpool(t, "/a", 0);
    REQUIRE(p);
    p->entitlement = cpu(4);
    struct gang big, small;
    admit_gang_init(&big, "big", 9, WF_PREEMPTIBLE, 1, cpu(6));
    admit_gang_init(&small, "small", 1, WF_PREEMPTIBLE, 1, cpu(1));
    REQUIRE(admit_enqueue(p, &small, NULL, 0) == 0);
    REQUIRE(admit_enqueue(p, &big, NULL, 0) == 0);
    struct gang *out[2];
    CHECK_I64(admit_pool_round(p, out, 2), 0); /* small fits but waits behind big */
    CHECK(admit_head(p, ADMIT_Q_PENDING) == &big);
    CHECK_I64(admit_gang_queue(&big), ADMIT_Q_PENDING);
    CHECK_I64(small.why.check, ADMIT_CHECK_NONE);
    char buf[400];
    admit_why_format(&small, buf, sizeof buf);
    CHECK_HAS(buf, "queued behind");
    /* taking big away unblocks the pool */
    CHECK(admit_remove(&big) == 0);
    CHECK_I64(admit_pool_round(p, out, 2), 1);
    CHECK(out[0] == &small);
    teardown(t);
}

TEST(admit_nonpreemptible_moves_aside) {
    struct respool_tree *t = respool_tree_new();
    struct respool *p = mkpool(t, "/a", 4);
    REQUIRE(p);
    p->entitlement = cpu(10);
    struct gang np1, np2, np3, pre;
    admit_gang_init(&np1, "np1", 5, 0, 1, cpu(3));
    admit_gang_init(&np2, "np2", 5, 0, 1, cpu(3)); /* 3 + 3 > reservation 4 */
    admit_gang_init(&np3, "np3", 4, 0, 1, cpu(1));
    admit_gang_init(&pre, "pre", 1, WF_PREEMPTIBLE, 1, cpu(5));
    REQUIRE(admit_enqueue(p, &np1, NULL, 0) == 0);
    REQUIRE(admit_enqueue(p, &np2, NULL, 0) == 0);
    REQUIRE(admit_enqueue(p, &np3, NULL, 0) == 0);
    REQUIRE(admit_enqueue(p, &pre, NULL, 0) == 0);
    struct gang *out[4];
    REQUIRE_I64(admit_pool_round(p, out, 4), 3);
    CHECK(out[0] == &np1);
    CHECK(out[1] == &np3); /* np2 moved aside; np3 fits the reservation */
    CHECK(out[2] == &pre); /* preemptible work is not blocked by np2 */
    CHECK_I64(admit_gang_queue(&np2), ADMIT_Q_NONPREEMPT);
    CHECK_I64(np2.why.check, ADMIT_CHECK_RESERVATION);
    CHECK_I64(np2.why.limit, CORES(4));
    CHECK_I64(p->alloc.c[UC_NONPREEMPT].v[RES_CPU], CORES(4));
    char buf[400];
    admit_why_format(&np2, buf, sizeof buf);
    CHECK_STR(buf, "pool /a at its cpu reservation: 3 of 4 cores allocated to non-preemptible work, gang needs 3; position "
                   "1 of 1 in the pool's non-preemptible queue; admitted once its non-preemptible work frees 2 cores or "
                   "its reservation grows by 2 cores");
    /* the type queue's head is retried each round: releasing np1 lets np2 in */
    CHECK(admit_release(p, 0, cpu(3)) == 0);
    REQUIRE_I64(admit_pool_round(p, out, 4), 1);
    CHECK(out[0] == &np2);
    teardown(t);
}

TEST(admit_nonpreemptible_never_exceeds_reservation) {
    uint64_t seed = 42;
    for (int iter = 0; iter < 50; iter++) {
        struct respool_tree *t = respool_tree_new();
        int64_t res = test_range(&seed, 0, 20);
        struct respool *p = mkpool(t, "/a", res);
        REQUIRE(p);
        p->entitlement = cpu(test_range(&seed, res, 60));
        struct gang g[40];
        for (int i = 0; i < 40; i++) {
            unsigned f = (unsigned)test_range(&seed, 0, 1) ? WF_PREEMPTIBLE : 0;
            admit_gang_init(&g[i], NULL, (uint32_t)test_range(&seed, 0, 3), f, 1, cpu(test_range(&seed, 1, 5)));
            REQUIRE(admit_enqueue(p, &g[i], NULL, 0) == 0);
        }
        struct gang *out[40];
        size_t total = 0;
        for (int round = 0; round < 5; round++) {
            total += admit_pool_round(p, out, 40);
            CHECK(p->alloc.c[UC_NONPREEMPT].v[RES_CPU] <= CORES(res));
            CHECK(usage_nonslack(&p->alloc).v[RES_CPU] <= p->entitlement.v[RES_CPU]);
            /* free some non-preemptible room now and then */
            if (p->alloc.c[UC_NONPREEMPT].v[RES_CPU] >= CORES(1)) admit_release(p, 0, cpu(1));
        }
        CHECK_I64(total + admit_queued(p, -1), 40);
        teardown(t);
    }
}

TEST(admit_controller_limit) {
    struct respool_tree *t = respool_tree_new();
    struct respool_config c;
    respool_config_default(&c);
    c.res[RES_CPU].reservation = CORES(10);
    c.controller_limit_pct = 50 * RESPOOL_PCT_ONE; /* 5 cores */
    struct respool *p;
    char err[400];
    REQUIRE(respool_create(t, "/a", &c, &p, err, sizeof err) == 0);
    p->entitlement = cpu(20);
    CHECK_I64(respool_controller_limit(p).v[RES_CPU], CORES(5));
    struct gang c1, c2, w;
    admit_gang_init(&c1, "c1", 3, WF_PREEMPTIBLE | WF_CONTROLLER, 1, cpu(4));
    admit_gang_init(&c2, "c2", 3, WF_PREEMPTIBLE | WF_CONTROLLER, 1, cpu(2));
    admit_gang_init(&w, "w", 1, WF_PREEMPTIBLE, 1, cpu(8));
    REQUIRE(admit_enqueue(p, &c1, NULL, 0) == 0);
    REQUIRE(admit_enqueue(p, &c2, NULL, 0) == 0);
    REQUIRE(admit_enqueue(p, &w, NULL, 0) == 0);
    struct gang *out[3];
    REQUIRE_I64(admit_pool_round(p, out, 3), 2);
    CHECK(out[0] == &c1);
    CHECK(out[1] == &w);
    CHECK_I64(admit_gang_queue(&c2), ADMIT_Q_CONTROLLER);
    CHECK_I64(c2.why.check, ADMIT_CHECK_CONTROLLER);
    CHECK_I64(p->alloc.c[UC_CONTROLLER].v[RES_CPU], CORES(4));
    admit_why_format(&c2, err, sizeof err);
    CHECK_STR(err, "pool /a at its cpu controller limit: 4 of 5 cores allocated to controllers, gang needs 2; position 1 "
                   "of 1 in the pool's controller queue; admitted once its controllers' work frees 1 core or its "
                   "controller limit grows by 1 core");
    /* still refused next round; admitted once c1 finishes */
    CHECK_I64(admit_pool_round(p, out, 3), 0);
    CHECK(admit_release(p, WF_PREEMPTIBLE | WF_CONTROLLER, cpu(4)) == 0);
    REQUIRE_I64(admit_pool_round(p, out, 3), 1);
    CHECK(out[0] == &c2);
    teardown(t);
}

TEST(admit_revocable_uses_slack_entitlement) {
    struct respool_tree *t = respool_tree_new();
    struct respool *p = mkpool(t, "/a", 10);
    REQUIRE(p);
    p->entitlement = cpu(4);
    p->slack_entitlement = cpu(3);
    p->alloc.c[UC_PREEMPT] = cpu(4); /* non-slack entitlement used up */
    struct gang r1, r2, r3, pre;
    admit_gang_init(&r1, "r1", 5, WF_REVOCABLE, 1, cpu(2));
    admit_gang_init(&r2, "r2", 5, WF_REVOCABLE, 1, cpu(2)); /* 2 + 2 > slack 3 */
    admit_gang_init(&r3, "r3", 1, WF_REVOCABLE, 1, cpu(1));
    admit_gang_init(&pre, "pre", 0, WF_PREEMPTIBLE, 1, cpu(1));
    REQUIRE(admit_enqueue(p, &r1, NULL, 0) == 0);
    CHECK(r1.flags & WF_PREEMPTIBLE); /* revocable implies preemptible */
    CHECK_I64(p->pending.c[UC_REVOCABLE].v[RES_CPU], CORES(2));
    REQUIRE(admit_enqueue(p, &r2, NULL, 0) == 0);
    REQUIRE(admit_enqueue(p, &r3, NULL, 0) == 0);
    REQUIRE(admit_enqueue(p, &pre, NULL, 0) == 0);
    struct gang *out[4];
    /* r1 in; r2 to the revocable queue; r3 in (slack 3 exactly); pre blocks (entitlement) */
    REQUIRE_I64(admit_pool_round(p, out, 4), 2);
    CHECK(out[0] == &r1);
    CHECK(out[1] == &r3);
    CHECK_I64(admit_gang_queue(&r2), ADMIT_Q_REVOCABLE);
    CHECK_I64(r2.why.check, ADMIT_CHECK_SLACK);
    CHECK_I64(pre.why.check, ADMIT_CHECK_ENTITLEMENT);
    CHECK_I64(p->alloc.c[UC_REVOCABLE].v[RES_CPU], CORES(3));
    CHECK_I64(usage_nonslack(&p->alloc).v[RES_CPU], CORES(4)); /* revocable is not non-slack */
    char buf[400];
    admit_why_format(&r2, buf, sizeof buf);
    /* the numbers are those of the moment r2 was tried: after r1, before r3 */
    CHECK_STR(buf, "pool /a at its cpu slack entitlement: 2 of 3 cores allocated to revocable work, gang needs 2; position "
                   "1 of 1 in the pool's revocable queue; admitted once its revocable work frees 1 core or its slack "
                   "entitlement grows by 1 core");
    teardown(t);
}

TEST(admit_type_queue_fifo_and_head_of_line) {
    struct respool_tree *t = respool_tree_new();
    struct respool *p = mkpool(t, "/a", 2);
    REQUIRE(p);
    p->entitlement = cpu(10);
    p->alloc.c[UC_NONPREEMPT] = cpu(2); /* reservation used up */
    struct gang a, b, c;
    admit_gang_init(&a, "a", 1, 0, 1, cpu(2));
    admit_gang_init(&b, "b", 1, 0, 1, cpu(1));
    admit_gang_init(&c, "c", 2, 0, 1, cpu(1));
    REQUIRE(admit_enqueue(p, &a, NULL, 0) == 0);
    REQUIRE(admit_enqueue(p, &b, NULL, 0) == 0);
    REQUIRE(admit_enqueue(p, &c, NULL, 0) == 0);
    struct gang *out[3];
    CHECK_I64(admit_pool_round(p, out, 3), 0);
    CHECK_I64(admit_queued(p, ADMIT_Q_NONPREEMPT), 3);
    CHECK_I64(admit_queued(p, ADMIT_Q_PENDING), 0);
    CHECK(admit_head(p, ADMIT_Q_NONPREEMPT) == &c); /* priority, then FIFO, kept in the type queue */
    /* one core frees: c (head) fits; a (2) is then head and does not; b waits behind a */
    CHECK(admit_release(p, 0, cpu(1)) == 0);
    REQUIRE_I64(admit_pool_round(p, out, 3), 1);
    CHECK(out[0] == &c);
    CHECK(admit_head(p, ADMIT_Q_NONPREEMPT) == &a);
    CHECK_I64(a.why.check, ADMIT_CHECK_RESERVATION);
    teardown(t);
}

TEST(admit_inner_pool_and_bad_gangs_refused) {
    struct respool_tree *t = respool_tree_new();
    struct respool *a = mkpool(t, "/a", 0), *b = mkpool(t, "/a/b", 0);
    REQUIRE(a && b);
    struct gang g;
    char err[200] = "";
    admit_gang_init(&g, "g1", 1, WF_PREEMPTIBLE, 1, cpu(1));
    CHECK(admit_enqueue(a, &g, err, sizeof err) == -EINVAL);
    CHECK_HAS(err, "pool /a is not a leaf");
    CHECK(admit_enqueue(respool_root(t), &g, err, sizeof err) == -EINVAL);
    CHECK(a->admit == NULL);
    CHECK(resvec_is_zero(a->pending.c[UC_PREEMPT]));
    admit_gang_init(&g, "g2", 1, WF_PREEMPTIBLE, 0, cpu(1));
    CHECK(admit_enqueue(b, &g, err, sizeof err) == -EINVAL);
    CHECK_HAS(err, "no tasks");
    admit_gang_init(&g, "g3", 1, 64, 1, cpu(1));
    CHECK(admit_enqueue(b, &g, err, sizeof err) == -EINVAL);
    admit_gang_init(&g, "g4", 1, 0, 1, (struct resvec){{-1, 0, 0, 0}});
    CHECK(admit_enqueue(b, &g, err, sizeof err) == -EINVAL);
    CHECK_HAS(err, "cpu demand");
    admit_gang_init(&g, "g5", 1, 0, 1, cpu(1));
    CHECK(admit_enqueue(b, &g, err, sizeof err) == 0);
    CHECK(admit_enqueue(b, &g, err, sizeof err) == -EALREADY);
    CHECK_I64(b->pending.c[UC_NONPREEMPT].v[RES_CPU], CORES(1));
    /* a leaf with work cannot get children; an idle one can be released and deleted */
    CHECK(admit_pool_release(b) == -EBUSY);
    CHECK(admit_remove(&g) == 0);
    CHECK(admit_pool_release(b) == 0);
    CHECK(b->admit == NULL);
    CHECK(respool_delete(t, "/a/b", err, sizeof err) == 0);
    teardown(t);
}

/* Removing gangs from anywhere in the queue keeps the rest in order. */
TEST(admit_remove_keeps_order) {
    uint64_t seed = 7;
    struct respool_tree *t = respool_tree_new();
    struct respool *p = mkpool(t, "/a", 0);
    REQUIRE(p);
    p->entitlement = cpu(1000000);
    enum { N = 500 };
    struct gang *g = calloc(N, sizeof *g);
    bool *removed = calloc(N, sizeof *removed);
    REQUIRE(g && removed);
    for (int i = 0; i < N; i++) {
        admit_gang_init(&g[i], NULL, (uint32_t)test_range(&seed, 0, 9), WF_PREEMPTIBLE, 1, cpu(1));
        REQUIRE(admit_enqueue(p, &g[i], NULL, 0) == 0);
    }
    int left = N;
    for (int i = 0; i < N; i++)
        if (test_range(&seed, 0, 2) == 0) {
            CHECK(admit_remove(&g[i]) == 0);
            CHECK(admit_remove(&g[i]) == -ENOENT);
            removed[i] = true;
            left--;
        }
    CHECK_I64(p->pending.c[UC_PREEMPT].v[RES_CPU], CORES(left));
    struct gang **out = calloc(N, sizeof *out);
    REQUIRE(out);
    size_t n = admit_pool_round(p, out, N);
    CHECK_I64(n, left);
    for (size_t i = 1; i < n; i++) {
        bool ordered = out[i - 1]->priority > out[i]->priority ||
                       (out[i - 1]->priority == out[i]->priority && out[i - 1]->seq < out[i]->seq);
        CHECK(ordered);
    }
    for (size_t i = 0; i < n; i++) CHECK(!removed[out[i] - g]);
    CHECK(resvec_is_zero(p->pending.c[UC_PREEMPT]));
    CHECK_I64(p->alloc.c[UC_PREEMPT].v[RES_CPU], CORES(left));
    free(out);
    free(removed);
    free(g);
    teardown(t);
}

TEST(admit_out_capacity_and_tree_round) {
    struct respool_tree *t = respool_tree_new();
    struct respool *a = mkpool(t, "/a", 0), *b = mkpool(t, "/b", 0);
    REQUIRE(a && b);
    a->entitlement = b->entitlement = cpu(100);
    struct gang g[6];
    for (int i = 0; i < 6; i++) {
        admit_gang_init(&g[i], NULL, 1, WF_PREEMPTIBLE, 1, cpu(1));
        REQUIRE(admit_enqueue(i < 3 ? b : a, &g[i], NULL, 0) == 0);
    }
    struct gang *out[6];
    CHECK_I64(admit_round(t, out, 4), 4); /* pre-order: /a first */
    CHECK(out[0] == &g[3] && out[1] == &g[4] && out[2] == &g[5] && out[3] == &g[0]);
    CHECK_I64(admit_queued(b, -1), 2);
    CHECK_I64(admit_round(t, out, 6), 2);
    CHECK_I64(admit_round(t, out, 6), 0);
    teardown(t);
}

TEST(admit_with_entitlement_from_tree) {
    /* two teams of 50 on 100 cores; team1 asks 80 in 8 gangs of 10, team2 10 */
    struct respool_tree *t = respool_tree_new();
    struct respool *t1 = mkpool(t, "/team1", 50), *t2 = mkpool(t, "/team2", 50);
    REQUIRE(t1 && t2);
    struct gang g1[8], g2;
    for (int i = 0; i < 8; i++) {
        admit_gang_init(&g1[i], NULL, 1, WF_PREEMPTIBLE, 10, cpu(10));
        REQUIRE(admit_enqueue(t1, &g1[i], NULL, 0) == 0);
    }
    admit_gang_init(&g2, NULL, 1, WF_PREEMPTIBLE, 1, cpu(10));
    REQUIRE(admit_enqueue(t2, &g2, NULL, 0) == 0);
    REQUIRE(respool_entitle(t, cpu(100), 0) == 0);
    CHECK_I64(t1->entitlement.v[RES_CPU], CORES(85));
    CHECK_I64(t2->entitlement.v[RES_CPU], CORES(15));
    struct gang *out[9];
    CHECK_I64(admit_round(t, out, 9), 9); /* team1 borrows: 80 > its reservation 50 */
    CHECK_I64(t1->alloc.c[UC_PREEMPT].v[RES_CPU], CORES(80));
    teardown(t);
}

/* Random pools, limits and gang mixes: every rule holds after every round,
 * nothing is lost between pending and alloc, and admission order within a
 * queue follows priority then FIFO. */
TEST(admit_property_rules_hold) {
    uint64_t seed = 2024;
    for (int iter = 0; iter < 40; iter++) {
        struct respool_tree *t = respool_tree_new();
        struct respool_config c;
        respool_config_default(&c);
        c.res[RES_CPU].reservation = CORES(test_range(&seed, 0, 30));
        c.res[RES_MEMORY].reservation = GIB(test_range(&seed, 0, 30));
        c.controller_limit_pct = test_range(&seed, 0, 100) * RESPOOL_PCT_ONE;
        struct respool *p;
        char err[200];
        REQUIRE(respool_create(t, "/a", &c, &p, err, sizeof err) == 0);
        p->entitlement = (struct resvec){{CORES(test_range(&seed, 0, 60)), GIB(test_range(&seed, 0, 60)), 0, 0}};
        p->slack_entitlement = (struct resvec){{CORES(test_range(&seed, 0, 20)), GIB(test_range(&seed, 0, 20)), 0, 0}};
        enum { N = 60 };
        struct gang g[N];
        struct resvec total = resvec_zero();
        for (int i = 0; i < N; i++) {
            static const unsigned fl[] = {0, WF_PREEMPTIBLE, WF_REVOCABLE, WF_CONTROLLER,
                                          WF_PREEMPTIBLE | WF_CONTROLLER};
            struct resvec d = {{CORES(test_range(&seed, 0, 6)), GIB(test_range(&seed, 0, 6)), 0, 0}};
            admit_gang_init(&g[i], NULL, (uint32_t)test_range(&seed, 0, 4), fl[test_range(&seed, 0, 4)],
                            (uint32_t)test_range(&seed, 1, 3), d);
            REQUIRE(admit_enqueue(p, &g[i], NULL, 0) == 0);
            total = resvec_add(total, d);
        }
        struct gang *out[N];
        size_t admitted = 0;
        for (int round = 0; round < 6; round++) {
            size_t n = admit_pool_round(p, out, N);
            admitted += n;
            for (int k = 0; k < RES_NKINDS; k++) {
                CHECK(usage_nonslack(&p->alloc).v[k] <= p->entitlement.v[k]);
                CHECK(p->alloc.c[UC_NONPREEMPT].v[k] <= p->cfg.res[k].reservation);
                CHECK(p->alloc.c[UC_CONTROLLER].v[k] <= respool_controller_limit(p).v[k]);
                CHECK(p->alloc.c[UC_REVOCABLE].v[k] <= p->slack_entitlement.v[k]);
            }
            /* conservation: what was asked is either pending or allocated */
            struct resvec held = resvec_zero();
            for (int u = 0; u < UC_CONTROLLER; u++)
                held = resvec_add(held, resvec_add(p->alloc.c[u], p->pending.c[u]));
            CHECK(resvec_eq(held, total));
            /* every waiting head knows why; nothing queued is marked admitted */
            for (int q = 0; q < ADMIT_NQUEUES; q++) {
                struct gang *h = admit_head(p, (enum admit_queue)q);
                if (h && q != ADMIT_Q_PENDING) CHECK(h->why.check != ADMIT_CHECK_NONE);
            }
            for (size_t i = 0; i < n; i++) CHECK(admit_gang_queue(out[i]) < 0);
            /* the pending queue's head, once tried, failed entitlement (else it moved or went in) */
            struct gang *h = admit_head(p, ADMIT_Q_PENDING);
            if (h) CHECK_I64(h->why.check, ADMIT_CHECK_ENTITLEMENT);
            /* make some room for the next round */
            p->entitlement.v[RES_CPU] += CORES(3);
            p->slack_entitlement.v[RES_MEMORY] += GIB(2);
        }
        CHECK_I64(admitted + admit_queued(p, -1), N);
        teardown(t);
    }
}

/* A pool marked deleting admits nothing new, whatever its room; its waiting
 * gangs say why, and admission resumes if the mark goes (issue #16). */
TEST(admit_deleting_pool_admits_nothing) {
    struct respool_tree *t = respool_tree_new();
    struct respool *p = mkpool(t, "/a", 10);
    REQUIRE(p);
    p->entitlement = cpu(100);
    p->slack_entitlement = cpu(100);
    struct gang g[3];
    admit_gang_init(&g[0], "pre", 1, WF_PREEMPTIBLE, 1, cpu(1));
    admit_gang_init(&g[1], "np", 1, 0, 1, cpu(1));
    admit_gang_init(&g[2], "rev", 1, WF_REVOCABLE, 1, cpu(1));
    for (int i = 0; i < 3; i++) REQUIRE(admit_enqueue(p, &g[i], NULL, 0) == 0);
    p->deleting = true;
    struct gang *out[3];
    CHECK_I64(admit_pool_round(p, out, 3), 0);
    CHECK_I64(admit_queued(p, -1), 3);
    struct gang *h = admit_head(p, ADMIT_Q_PENDING);
    REQUIRE(h);
    CHECK_I64(h->why.check, ADMIT_CHECK_DELETING);
    char why[200];
    admit_why_format(h, why, sizeof why);
    CHECK_STR(why, "pool /a: is being deleted; it admits no new work (create the pod in another pool)");
    CHECK_STR(admit_check_name(ADMIT_CHECK_DELETING), "deletion");
    CHECK_I64(usage_nonslack(&p->alloc).v[RES_CPU], 0);
    p->deleting = false;
    CHECK_I64(admit_pool_round(p, out, 3), 3);
    teardown(t);
}
