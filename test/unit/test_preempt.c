#include <errno.h>
#include <stdlib.h>

#include "admit.h"
#include "entitle.h"
#include "preempt.h"
#include "respool.h"
#include "test.h"

#define CORES(n) ((int64_t)(n) * 1000)
#define GIB(n) ((int64_t)(n) << 30)

static struct resvec cpu(int64_t cores) { return (struct resvec){{CORES(cores), 0, 0, 0}}; }

static struct respool *mkpool(struct respool_tree *t, const char *path, int64_t res_cores) {
    struct respool_config c;
    respool_config_default(&c);
    c.res[RES_CPU].reservation = CORES(res_cores);
    char err[256];
    struct respool *p = NULL;
    if (respool_create(t, path, &c, &p, err, sizeof err)) test_fail(__FILE__, __LINE__, "%s", err);
    return p;
}

static struct preempt_task task(const char *id, struct respool *p, int64_t cores, uint32_t prio, unsigned flags,
                                enum task_state s, int64_t start) {
    return (struct preempt_task){id, p, cpu(cores), prio, flags, s, start};
}

/* Adds the tasks to their pools' allocation, as admission would have. */
static void charge(const struct preempt_task *ts, size_t n) {
    for (size_t i = 0; i < n; i++) usage_add(&ts[i].pool->alloc, ts[i].flags, ts[i].res);
}

static struct preempt_state state(uint32_t checks, bool intra) {
    struct preempt_config c;
    preempt_config_default(&c);
    c.over_checks = checks;
    c.intra_pool = intra;
    struct preempt_state st;
    if (preempt_state_init(&st, &c)) test_fail(__FILE__, __LINE__, "state init");
    return st;
}

static void teardown(struct respool_tree *t, struct preempt_state *st, struct preempt_plan *plan) {
    preempt_plan_free(plan);
    preempt_state_free(st);
    admit_tree_release(t);
    respool_tree_free(t);
}

static const char *vid(const struct preempt_plan *p, size_t i) { return i < p->n ? p->v[i].task_id : "(none)"; }

TEST(preempt_config_and_state) {
    struct preempt_config c;
    preempt_config_default(&c);
    CHECK_I64(c.over_checks, 3);
    CHECK(c.intra_pool);
    struct preempt_state st;
    c.over_checks = 0;
    CHECK(preempt_state_init(&st, &c) == -EINVAL);
    CHECK(preempt_state_init(&st, NULL) == -EINVAL);
}

TEST(preempt_revocable_first) {
    struct respool_tree *t = respool_tree_new();
    struct respool *p = mkpool(t, "/a", 0);
    REQUIRE(p);
    p->entitlement = cpu(10);
    p->slack_entitlement = cpu(2);
    struct preempt_task ts[] = {
        task("p1", p, 6, 0, WF_PREEMPTIBLE, TASK_READY, 1),
        task("p2", p, 6, 0, WF_PREEMPTIBLE, TASK_READY, 2),
        task("r1", p, 3, 9, WF_REVOCABLE | WF_PREEMPTIBLE, TASK_RUNNING, 0),
        task("n1", p, 1, 0, 0, TASK_READY, 5),
    };
    charge(ts, 4); /* non-slack 13 > 10, revocable 3 > 2 */
    struct preempt_state st = state(1, true);
    struct preempt_plan plan = {0};
    char err[200];
    REQUIRE(preempt_plan(&st, t, ts, 4, &plan, err, sizeof err) == 0);
    REQUIRE_I64(plan.n, 2);
    CHECK_STR(vid(&plan, 0), "r1"); /* revocable first, whatever its state and priority */
    CHECK_I64(plan.v[0].reason, PREEMPT_OVER_SLACK);
    CHECK_STR(vid(&plan, 1), "p2"); /* newest of equals; one of 6 covers the 3 over */
    CHECK_I64(plan.v[1].reason, PREEMPT_OVER_ENTITLEMENT);
    CHECK_I64(plan.v[1].task, 1);
    CHECK(plan.v[1].pool == p);
    char buf[200];
    preempt_victim_format(&plan.v[0], buf, sizeof buf);
    CHECK_STR(buf, "pool /a over cpu slack entitlement by 1 for 1 check");
    preempt_victim_format(&plan.v[1], buf, sizeof buf);
    CHECK_STR(buf, "pool /a over cpu entitlement by 3 for 1 check");
    CHECK_STR(preempt_reason_name(plan.v[1].reason), "over-entitlement");
    teardown(t, &st, &plan);
}

TEST(preempt_ranking_state_priority_newest) {
    struct respool_tree *t = respool_tree_new();
    struct respool *p = mkpool(t, "/a", 0);
    REQUIRE(p);
    p->entitlement = cpu(4);
    struct preempt_task ts[] = {
        task("run-old-p1", p, 1, 1, WF_PREEMPTIBLE, TASK_RUNNING, 10),
        task("run-new-p1", p, 1, 1, WF_PREEMPTIBLE, TASK_RUNNING, 30),
        task("run-p0", p, 1, 0, WF_PREEMPTIBLE, TASK_RUNNING, 5),
        task("placing-p9", p, 1, 9, WF_PREEMPTIBLE, TASK_PLACING, 1),
        task("ready-p9", p, 1, 9, WF_PREEMPTIBLE, TASK_READY, 1),
        task("launching-p0", p, 1, 0, WF_PREEMPTIBLE, TASK_LAUNCHING, 1),
        task("np", p, 1, 0, 0, TASK_READY, 99),
        task("run-mid-p1", p, 1, 1, WF_PREEMPTIBLE, TASK_RUNNING, 20),
    };
    charge(ts, 8); /* 8 > 4: four must go */
    struct preempt_state st = state(1, true);
    struct preempt_plan plan = {0};
    REQUIRE(preempt_plan(&st, t, ts, 8, &plan, NULL, 0) == 0);
    REQUIRE_I64(plan.n, 4);
    CHECK_STR(vid(&plan, 0), "ready-p9");     /* state first: READY */
    CHECK_STR(vid(&plan, 1), "placing-p9");   /* then PLACING */
    CHECK_STR(vid(&plan, 2), "launching-p0"); /* then LAUNCHING, before RUNNING */
    CHECK_STR(vid(&plan, 3), "run-p0");       /* RUNNING: lowest priority first */
    /* one more core over: among equal priority the newest goes */
    p->entitlement = cpu(2);
    preempt_plan_free(&plan);
    REQUIRE(preempt_plan(&st, t, ts, 8, &plan, NULL, 0) == 0);
    REQUIRE_I64(plan.n, 6);
    CHECK_STR(vid(&plan, 4), "run-new-p1");
    CHECK_STR(vid(&plan, 5), "run-mid-p1");
    /* non-preemptible work is never a victim, even when it alone is over */
    p->entitlement = cpu(0);
    preempt_plan_free(&plan);
    REQUIRE(preempt_plan(&st, t, ts, 8, &plan, NULL, 0) == 0);
    CHECK_I64(plan.n, 7);
    for (size_t i = 0; i < plan.n; i++) CHECK(strcmp(plan.v[i].task_id, "np") != 0);
    teardown(t, &st, &plan);
}

TEST(preempt_greedy_stops_when_under) {
    struct respool_tree *t = respool_tree_new();
    struct respool *p = mkpool(t, "/a", 0);
    REQUIRE(p);
    p->entitlement = (struct resvec){{CORES(5), GIB(10), 0, 0}};
    struct preempt_task ts[] = {
        task("a", p, 2, 0, WF_PREEMPTIBLE, TASK_RUNNING, 50),
        task("mem-only", p, 0, 0, WF_PREEMPTIBLE, TASK_RUNNING, 40),
        task("b", p, 2, 0, WF_PREEMPTIBLE, TASK_RUNNING, 30),
        task("c", p, 1, 0, WF_PREEMPTIBLE, TASK_RUNNING, 20),
        task("d", p, 3, 0, WF_PREEMPTIBLE, TASK_RUNNING, 10),
    };
    ts[1].res.v[RES_MEMORY] = GIB(4); /* memory is not over: this one shrinks nothing over */
    charge(ts, 5);                    /* cpu 8 > 5 by 3 */
    struct preempt_state st = state(1, true);
    struct preempt_plan plan = {0};
    REQUIRE(preempt_plan(&st, t, ts, 5, &plan, NULL, 0) == 0);
    REQUIRE_I64(plan.n, 2);
    CHECK_STR(vid(&plan, 0), "a");
    CHECK_STR(vid(&plan, 1), "b"); /* 2 + 2 covers 3: stop, c and d stay */
    CHECK_I64(plan.v[0].kind, RES_CPU);
    CHECK_I64(plan.v[0].amount, CORES(3));
    teardown(t, &st, &plan);
}

TEST(preempt_needs_consecutive_checks) {
    struct respool_tree *t = respool_tree_new();
    struct respool *p = mkpool(t, "/a", 0), *q = mkpool(t, "/b", 0);
    REQUIRE(p && q);
    p->entitlement = cpu(1);
    q->entitlement = cpu(10);
    struct preempt_task ts[] = {task("t", p, 2, 0, WF_PREEMPTIBLE, TASK_RUNNING, 1)};
    charge(ts, 1);
    struct preempt_state st = state(3, true);
    struct preempt_plan plan = {0};
    for (uint32_t i = 1; i <= 2; i++) {
        REQUIRE(preempt_plan(&st, t, ts, 1, &plan, NULL, 0) == 0);
        CHECK_I64(plan.n, 0);
        CHECK_I64(preempt_state_get(&st, p), i);
        CHECK_I64(preempt_state_get(&st, q), 0);
        preempt_plan_free(&plan);
    }
    /* back under for one check: the count starts again */
    p->entitlement = cpu(2);
    REQUIRE(preempt_plan(&st, t, ts, 1, &plan, NULL, 0) == 0);
    CHECK_I64(preempt_state_get(&st, p), 0);
    preempt_plan_free(&plan);
    p->entitlement = cpu(1);
    for (uint32_t i = 1; i <= 3; i++) {
        preempt_plan_free(&plan);
        REQUIRE(preempt_plan(&st, t, ts, 1, &plan, NULL, 0) == 0);
        CHECK_I64(plan.n, i == 3 ? 1 : 0);
    }
    char buf[200];
    REQUIRE(plan.n == 1);
    preempt_victim_format(&plan.v[0], buf, sizeof buf);
    CHECK_STR(buf, "pool /a over cpu entitlement by 1 for 3 checks");
    CHECK_I64(preempt_state_get(&st, p), 0); /* reset after giving back */
    /* seeded history counts */
    CHECK(preempt_state_set(&st, p, 2) == 0);
    preempt_plan_free(&plan);
    REQUIRE(preempt_plan(&st, t, ts, 1, &plan, NULL, 0) == 0);
    CHECK_I64(plan.n, 1);
    teardown(t, &st, &plan);
}

TEST(preempt_leaving_tasks_count_as_freed) {
    struct respool_tree *t = respool_tree_new();
    struct respool *p = mkpool(t, "/a", 0);
    REQUIRE(p);
    p->entitlement = cpu(4);
    struct preempt_task ts[] = {
        task("going", p, 2, 0, WF_PREEMPTIBLE, TASK_PREEMPTING, 9),
        task("killing", p, 1, 0, WF_PREEMPTIBLE, TASK_KILLING, 9),
        task("stay", p, 3, 0, WF_PREEMPTIBLE, TASK_RUNNING, 1),
        task("done", p, 3, 0, WF_PREEMPTIBLE, TASK_SUCCEEDED, 1), /* holds nothing: ignored */
    };
    charge(ts, 3); /* 6 > 4, but 3 of it is already leaving */
    struct preempt_state st = state(1, true);
    struct preempt_plan plan = {0};
    REQUIRE(preempt_plan(&st, t, ts, 4, &plan, NULL, 0) == 0);
    CHECK_I64(plan.n, 0);
    CHECK_I64(preempt_state_get(&st, p), 0);
    teardown(t, &st, &plan);
}

/* A waiting gang and the running tasks of its pool. */
struct intra {
    struct respool_tree *t;
    struct respool *p;
    struct gang g;
    struct preempt_task ts[4];
};

static void intra_setup(struct intra *x, int64_t ent, uint32_t gang_prio, int64_t gang_cores) {
    x->t = respool_tree_new();
    mkpool(x->t, "/a", 0);
    x->p = mkpool(x->t, "/a/b", 0);
    x->p->entitlement = cpu(ent);
    x->ts[0] = task("low-old", x->p, 2, 1, WF_PREEMPTIBLE, TASK_RUNNING, 1);
    x->ts[1] = task("low-new", x->p, 2, 1, WF_PREEMPTIBLE, TASK_RUNNING, 3);
    x->ts[2] = task("low-mid", x->p, 2, 1, WF_PREEMPTIBLE, TASK_RUNNING, 2);
    x->ts[3] = task("high", x->p, 4, 3, WF_PREEMPTIBLE, TASK_RUNNING, 4);
    charge(x->ts, 4); /* 10 */
    admit_gang_init(&x->g, "g7", gang_prio, WF_PREEMPTIBLE, 1, cpu(gang_cores));
    if (admit_enqueue(x->p, &x->g, NULL, 0)) test_fail(__FILE__, __LINE__, "enqueue");
    struct gang *out[1];
    if (admit_pool_round(x->p, out, 1) != 0) test_fail(__FILE__, __LINE__, "gang admitted");
}

TEST(preempt_intra_pool_lower_priority_newest) {
    struct intra x;
    intra_setup(&x, 10, 5, 3);
    CHECK_I64(x.g.why.check, ADMIT_CHECK_ENTITLEMENT);
    struct preempt_state st = state(3, true);
    struct preempt_plan plan = {0};
    REQUIRE(preempt_plan(&st, x.t, x.ts, 4, &plan, NULL, 0) == 0);
    REQUIRE_I64(plan.n, 2);
    CHECK_STR(vid(&plan, 0), "low-new");
    CHECK_STR(vid(&plan, 1), "low-mid");
    CHECK_I64(plan.v[0].reason, PREEMPT_PRIORITY);
    char buf[200];
    preempt_victim_format(&plan.v[0], buf, sizeof buf);
    CHECK_STR(buf, "priority 5 gang g7 preempts priority 1 (pool /a/b short of cpu entitlement by 3)");
    CHECK_STR(preempt_reason_name(plan.v[0].reason), "priority");
    /* with intra-pool planning off, nothing */
    preempt_plan_free(&plan);
    st.cfg.intra_pool = false;
    REQUIRE(preempt_plan(&st, x.t, x.ts, 4, &plan, NULL, 0) == 0);
    CHECK_I64(plan.n, 0);
    teardown(x.t, &st, &plan);
}

TEST(preempt_intra_pool_uses_free_entitlement) {
    struct intra x;
    intra_setup(&x, 12, 5, 3); /* 2 free: one victim of 2 is enough */
    struct preempt_state st = state(3, true);
    struct preempt_plan plan = {0};
    REQUIRE(preempt_plan(&st, x.t, x.ts, 4, &plan, NULL, 0) == 0);
    REQUIRE_I64(plan.n, 1);
    CHECK_STR(vid(&plan, 0), "low-new");
    CHECK_I64(plan.v[0].amount, CORES(1));
    teardown(x.t, &st, &plan);
}

TEST(preempt_intra_pool_only_strictly_lower) {
    struct intra x;
    intra_setup(&x, 10, 1, 2); /* same priority as the low tasks */
    struct preempt_state st = state(3, true);
    struct preempt_plan plan = {0};
    REQUIRE(preempt_plan(&st, x.t, x.ts, 4, &plan, NULL, 0) == 0);
    CHECK_I64(plan.n, 0);
    teardown(x.t, &st, &plan);
}

TEST(preempt_intra_pool_only_when_enough_freed) {
    struct intra x;
    intra_setup(&x, 10, 3, 7); /* priority 3 may take the three low ones: 6 < 7 */
    struct preempt_state st = state(3, true);
    struct preempt_plan plan = {0};
    REQUIRE(preempt_plan(&st, x.t, x.ts, 4, &plan, NULL, 0) == 0);
    CHECK_I64(plan.n, 0);
    preempt_plan_free(&plan);
    /* priority 4 may also take "high" (priority 3): 10 >= 7 */
    x.g.priority = 4;
    REQUIRE(preempt_plan(&st, x.t, x.ts, 4, &plan, NULL, 0) == 0);
    REQUIRE_I64(plan.n, 4);
    CHECK_STR(vid(&plan, 0), "low-new");
    CHECK_STR(vid(&plan, 3), "high");
    teardown(x.t, &st, &plan);
}

TEST(preempt_no_task_picked_twice) {
    /* the pool is over (inter-pool) and a high-priority gang waits (intra-pool) */
    struct intra x;
    intra_setup(&x, 8, 9, 4); /* over by 2; the gang needs 4 more after that */
    struct preempt_state st = state(1, true);
    struct preempt_plan plan = {0};
    REQUIRE(preempt_plan(&st, x.t, x.ts, 4, &plan, NULL, 0) == 0);
    /* (a): one low task of 2 (newest); (b): 2 + 4 - 8 + ... */
    REQUIRE(plan.n >= 2);
    CHECK_I64(plan.v[0].reason, PREEMPT_OVER_ENTITLEMENT);
    CHECK_STR(vid(&plan, 0), "low-new");
    for (size_t i = 0; i < plan.n; i++)
        for (size_t j = i + 1; j < plan.n; j++) CHECK(plan.v[i].task != plan.v[j].task);
    /* after (a) the pool holds 8 of 8; the gang needs 4: low-mid and low-old */
    REQUIRE_I64(plan.n, 3);
    CHECK_STR(vid(&plan, 1), "low-mid");
    CHECK_STR(vid(&plan, 2), "low-old");
    CHECK_I64(plan.v[1].reason, PREEMPT_PRIORITY);
    teardown(x.t, &st, &plan);
}

TEST(preempt_intra_pool_two_gangs_share_the_freed_room) {
    struct respool_tree *t = respool_tree_new();
    struct respool *p = mkpool(t, "/a", 0);
    REQUIRE(p);
    p->entitlement = cpu(4);
    p->slack_entitlement = cpu(2);
    struct preempt_task ts[] = {
        task("pre", p, 4, 1, WF_PREEMPTIBLE, TASK_RUNNING, 1),
        task("rev", p, 2, 1, WF_REVOCABLE | WF_PREEMPTIBLE, TASK_RUNNING, 1),
    };
    charge(ts, 2);
    struct gang a, b, r;
    admit_gang_init(&a, "a", 5, WF_PREEMPTIBLE, 1, cpu(3));
    admit_gang_init(&b, "b", 4, WF_PREEMPTIBLE, 1, cpu(3));
    admit_gang_init(&r, "r", 5, WF_REVOCABLE, 1, cpu(1));
    REQUIRE(admit_enqueue(p, &r, NULL, 0) == 0); /* tried first: moves to the revocable queue */
    REQUIRE(admit_enqueue(p, &a, NULL, 0) == 0); /* blocks the pending queue */
    REQUIRE(admit_enqueue(p, &b, NULL, 0) == 0);
    struct gang *out[3];
    CHECK_I64(admit_pool_round(p, out, 3), 0);
    CHECK_I64(admit_gang_queue(&r), ADMIT_Q_REVOCABLE);
    CHECK_I64(r.why.check, ADMIT_CHECK_SLACK);
    struct preempt_state st = state(1, true);
    struct preempt_plan plan = {0};
    REQUIRE(preempt_plan(&st, t, ts, 2, &plan, NULL, 0) == 0);
    /* r (priority 5, first in) takes "rev"; a takes "pre"; b is not a head */
    REQUIRE_I64(plan.n, 2);
    CHECK_STR(vid(&plan, 0), "rev");
    CHECK_STR(vid(&plan, 1), "pre");
    char buf[200];
    preempt_victim_format(&plan.v[0], buf, sizeof buf);
    CHECK_STR(buf, "priority 5 gang r preempts priority 1 (pool /a short of cpu slack entitlement by 1)");
    teardown(t, &st, &plan);
}

TEST(preempt_refuses_inner_pool_task) {
    struct respool_tree *t = respool_tree_new();
    struct respool *a = mkpool(t, "/a", 0);
    REQUIRE(a && mkpool(t, "/a/b", 0));
    struct preempt_task ts[] = {task("x", a, 1, 0, WF_PREEMPTIBLE, TASK_RUNNING, 1)};
    struct preempt_state st = state(1, true);
    struct preempt_plan plan = {0};
    char err[200] = "";
    CHECK(preempt_plan(&st, t, ts, 1, &plan, err, sizeof err) == -EINVAL);
    CHECK_HAS(err, "task x: pool /a is not a leaf");
    CHECK_I64(plan.n, 0);
    teardown(t, &st, &plan);
}

/* The blog's scenario: team1 borrows team2's idle reservation; team2's demand
 * returns; entitlement shifts back and team1's excess is preempted. */
TEST(preempt_blog_scenario) {
    struct respool_tree *t = respool_tree_new();
    struct respool *org = mkpool(t, "/org", 100);
    struct respool *t1 = mkpool(t, "/org/team1", 50), *t2 = mkpool(t, "/org/team2", 50);
    REQUIRE(org && t1 && t2);
    struct resvec cap = cpu(100);
    struct gang g1[8], g2[5];
    struct preempt_task ts[13];
    char ids[13][32];
    for (int i = 0; i < 8; i++) {
        snprintf(ids[i], sizeof ids[i], "team1-%d", i);
        admit_gang_init(&g1[i], ids[i], 1, WF_PREEMPTIBLE, 1, cpu(10));
        REQUIRE(admit_enqueue(t1, &g1[i], NULL, 0) == 0);
    }
    snprintf(ids[8], sizeof ids[8], "team2-0");
    admit_gang_init(&g2[0], ids[8], 1, WF_PREEMPTIBLE, 1, cpu(10));
    REQUIRE(admit_enqueue(t2, &g2[0], NULL, 0) == 0);
    REQUIRE(respool_entitle(t, cap, 0) == 0);
    CHECK_I64(t1->entitlement.v[RES_CPU], CORES(85));
    CHECK_I64(t2->entitlement.v[RES_CPU], CORES(15));
    struct gang *out[13];
    REQUIRE_I64(admit_round(t, out, 13), 9);
    CHECK_I64(t1->alloc.c[UC_PREEMPT].v[RES_CPU], CORES(80)); /* 30 borrowed */
    size_t nt = 0;
    for (size_t i = 0; i < 9; i++)
        ts[nt++] = (struct preempt_task){out[i]->id, out[i]->pool, out[i]->demand, 1, WF_PREEMPTIBLE,
                                         TASK_RUNNING, (int64_t)i};

    /* team2's demand returns: four more gangs of 10 */
    for (int i = 1; i < 5; i++) {
        snprintf(ids[8 + i], sizeof ids[8 + i], "team2-%d", i);
        admit_gang_init(&g2[i], ids[8 + i], 1, WF_PREEMPTIBLE, 1, cpu(10));
        REQUIRE(admit_enqueue(t2, &g2[i], NULL, 0) == 0);
    }
    REQUIRE(respool_entitle(t, cap, 0) == 0);
    CHECK_I64(t1->entitlement.v[RES_CPU], CORES(50));
    CHECK_I64(t2->entitlement.v[RES_CPU], CORES(50));
    REQUIRE_I64(admit_round(t, out, 13), 4); /* admitted against entitlement */
    for (size_t i = 0; i < 4; i++)
        ts[nt++] = (struct preempt_task){out[i]->id, out[i]->pool, out[i]->demand, 1, WF_PREEMPTIBLE, TASK_READY,
                                         (int64_t)(100 + i)};
    CHECK_I64(t2->alloc.c[UC_PREEMPT].v[RES_CPU], CORES(50));

    struct preempt_state st = state(2, true);
    struct preempt_plan plan = {0};
    REQUIRE(preempt_plan(&st, t, ts, nt, &plan, NULL, 0) == 0);
    CHECK_I64(plan.n, 0); /* first check over: wait */
    CHECK_I64(preempt_state_get(&st, t1), 1);
    preempt_plan_free(&plan);
    REQUIRE(preempt_plan(&st, t, ts, nt, &plan, NULL, 0) == 0);
    REQUIRE_I64(plan.n, 3); /* 80 - 50 = 30: three gangs of 10, newest first */
    CHECK_STR(vid(&plan, 0), "team1-7");
    CHECK_STR(vid(&plan, 1), "team1-6");
    CHECK_STR(vid(&plan, 2), "team1-5");
    char buf[200];
    preempt_victim_format(&plan.v[0], buf, sizeof buf);
    CHECK_STR(buf, "pool /org/team1 over cpu entitlement by 30 for 2 checks");
    /* acting on the plan: the victims' allocation is released; team1 is back at 50 */
    for (size_t i = 0; i < plan.n; i++)
        CHECK(admit_release(plan.v[i].pool, WF_PREEMPTIBLE, ts[plan.v[i].task].res) == 0);
    CHECK_I64(t1->alloc.c[UC_PREEMPT].v[RES_CPU], CORES(50));
    teardown(t, &st, &plan);
}

/* Random pools and tasks: after acting on the plan, every pool that gave back
 * is no longer over unless no candidate left could help; victims are never
 * non-preemptible, never picked twice, and always of their pool. */
TEST(preempt_property_giveback) {
    uint64_t seed = 99;
    for (int iter = 0; iter < 30; iter++) {
        struct respool_tree *t = respool_tree_new();
        struct respool *pools[4];
        char path[16];
        for (int i = 0; i < 4; i++) {
            snprintf(path, sizeof path, "/p%d", i);
            pools[i] = mkpool(t, path, 0);
            REQUIRE(pools[i]);
        }
        enum { N = 80 };
        struct preempt_task ts[N];
        static const enum task_state states[] = {TASK_READY, TASK_PLACING, TASK_RUNNING, TASK_PREEMPTING};
        static const unsigned fl[] = {0, WF_PREEMPTIBLE, WF_PREEMPTIBLE | WF_REVOCABLE};
        for (int i = 0; i < N; i++) {
            ts[i] = task("t", pools[test_range(&seed, 0, 3)], test_range(&seed, 0, 4),
                         (uint32_t)test_range(&seed, 0, 5), fl[test_range(&seed, 0, 2)],
                         states[test_range(&seed, 0, 3)], test_range(&seed, 0, 1000));
            ts[i].res.v[RES_MEMORY] = GIB(test_range(&seed, 0, 3));
        }
        charge(ts, N);
        for (int i = 0; i < 4; i++) {
            struct resvec ns = usage_nonslack(&pools[i]->alloc), rv = pools[i]->alloc.c[UC_REVOCABLE];
            for (int k = 0; k < 2; k++) {
                pools[i]->entitlement.v[k] = ns.v[k] * test_range(&seed, 3, 12) / 10;
                pools[i]->slack_entitlement.v[k] = rv.v[k] * test_range(&seed, 3, 12) / 10;
            }
        }
        struct preempt_state st = state(1, true);
        struct preempt_plan plan = {0};
        REQUIRE(preempt_plan(&st, t, ts, N, &plan, NULL, 0) == 0);
        bool taken[N] = {false};
        for (size_t v = 0; v < plan.n; v++) {
            size_t i = plan.v[v].task;
            REQUIRE(i < N);
            CHECK(!taken[i]);
            taken[i] = true;
            CHECK(ts[i].flags & WF_PREEMPTIBLE);
            CHECK(ts[i].state != TASK_PREEMPTING);
            CHECK(plan.v[v].pool == ts[i].pool);
        }
        for (int p = 0; p < 4; p++) {
            struct resvec ns = resvec_zero(), rv = resvec_zero();
            for (int i = 0; i < N; i++) {
                if (ts[i].pool != pools[p] || taken[i] || ts[i].state == TASK_PREEMPTING) continue;
                if (ts[i].flags & WF_REVOCABLE) rv = resvec_add(rv, ts[i].res);
                else ns = resvec_add(ns, ts[i].res);
            }
            struct resvec over_ns = resvec_sub(ns, pools[p]->entitlement);
            struct resvec over_rv = resvec_sub(rv, pools[p]->slack_entitlement);
            /* still over: then no candidate left shrinks an over kind */
            for (int i = 0; i < N; i++) {
                if (ts[i].pool != pools[p] || taken[i] || ts[i].state == TASK_PREEMPTING) continue;
                if (!(ts[i].flags & WF_PREEMPTIBLE)) continue;
                const struct resvec *o = (ts[i].flags & WF_REVOCABLE) ? &over_rv : &over_ns;
                for (int k = 0; k < RES_NKINDS; k++) CHECK(!(o->v[k] > 0 && ts[i].res.v[k] > 0));
            }
        }
        teardown(t, &st, &plan);
    }
}

/* preempt_pool_wanted: a plan given only the tasks of the pools it wants
 * is the plan of every task, check after check (the same victims, reasons,
 * kinds and amounts, and the same counters), with tasks leaving, pools
 * over and under, revocable work, and gangs waiting at heads on the
 * entitlement rule, the slack rule or the reservation rule. */
TEST(preempt_wanted_pools_plan_as_all) {
    uint64_t seed = 4242;
    for (int iter = 0; iter < 60; iter++) {
        struct respool_tree *t = respool_tree_new();
        enum { NP = 6, N = 120 };
        struct respool *pools[NP];
        char path[16], ids[N][16];
        mkpool(t, "/org", 6);
        for (int i = 0; i < NP; i++) {
            snprintf(path, sizeof path, i < 3 ? "/org/p%d" : "/p%d", i);
            pools[i] = mkpool(t, path, 2);
            REQUIRE(pools[i]);
        }
        struct preempt_task ts[N], sub[N];
        size_t back[N];
        static const enum task_state states[] = {TASK_READY, TASK_PLACING, TASK_RUNNING, TASK_PREEMPTING,
                                                 TASK_LAUNCHED};
        static const unsigned fl[] = {0, WF_PREEMPTIBLE, WF_PREEMPTIBLE | WF_REVOCABLE};
        for (int i = 0; i < N; i++) {
            snprintf(ids[i], sizeof ids[i], "t%d", i);
            ts[i] = task(ids[i], pools[test_range(&seed, 0, NP - 1)], test_range(&seed, 0, 4),
                         (uint32_t)test_range(&seed, 0, 5), fl[test_range(&seed, 0, 2)],
                         states[test_range(&seed, 0, 4)], test_range(&seed, 0, 1000));
            ts[i].res.v[RES_MEMORY] = GIB(test_range(&seed, 0, 3));
        }
        charge(ts, N);
        struct gang gangs[NP];
        for (int i = 0; i < NP; i++) {
            struct resvec ns = usage_nonslack(&pools[i]->alloc), rv = pools[i]->alloc.c[UC_REVOCABLE];
            for (int k = 0; k < 2; k++) {
                pools[i]->entitlement.v[k] = ns.v[k] * test_range(&seed, 5, 14) / 10;
                pools[i]->slack_entitlement.v[k] = rv.v[k] * test_range(&seed, 5, 14) / 10;
            }
            int64_t g = test_range(&seed, 0, 3); /* a head waiting on: none, entitlement, slack, reservation */
            if (!g) continue;
            admit_gang_init(&gangs[i], ids[i], 9, g == 2 ? WF_REVOCABLE | WF_PREEMPTIBLE : g == 1 ? WF_PREEMPTIBLE : 0,
                            1, cpu(test_range(&seed, 1, 6)));
            REQUIRE(admit_enqueue(pools[i], &gangs[i], NULL, 0) == 0);
        }
        struct gang *out[NP];
        admit_round(t, out, NP); /* sets the heads' why; admits what fits */
        struct preempt_state all = state(2, true), part = state(2, true);
        for (int check = 0; check < 4; check++) {
            struct preempt_plan pa = {0}, pb = {0};
            size_t m = 0;
            for (int i = 0; i < N; i++)
                if (preempt_pool_wanted(&part, ts[i].pool)) {
                    back[m] = (size_t)i;
                    sub[m++] = ts[i];
                }
            REQUIRE(preempt_plan(&all, t, ts, N, &pa, NULL, 0) == 0);
            REQUIRE(preempt_plan(&part, t, sub, m, &pb, NULL, 0) == 0);
            REQUIRE_I64(pb.n, pa.n);
            for (size_t v = 0; v < pa.n; v++) {
                CHECK_STR(pb.v[v].task_id, pa.v[v].task_id);
                CHECK_I64(back[pb.v[v].task], pa.v[v].task);
                CHECK(pb.v[v].pool == pa.v[v].pool);
                CHECK_I64(pb.v[v].reason, pa.v[v].reason);
                CHECK_I64(pb.v[v].kind, pa.v[v].kind);
                CHECK_I64(pb.v[v].amount, pa.v[v].amount);
                CHECK_I64(pb.v[v].checks, pa.v[v].checks);
                CHECK(!pa.v[v].gang_id == !pb.v[v].gang_id);
                CHECK(preempt_pool_wanted(&part, pa.v[v].pool));
            }
            for (int i = 0; i < NP; i++) CHECK_I64(preempt_state_get(&part, pools[i]), preempt_state_get(&all, pools[i]));
            /* the victims leave, as the caller would have them */
            for (size_t v = 0; v < pa.n; v++) ts[pa.v[v].task].state = TASK_PREEMPTING;
            preempt_plan_free(&pa);
            preempt_plan_free(&pb);
        }
        preempt_state_free(&all);
        struct preempt_plan none = {0};
        teardown(t, &part, &none);
    }
}
