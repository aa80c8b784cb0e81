/* Admission and preemption planning in process.
 *   enqueue + admit: 1,000 leaf pools, 1,000,000 gangs (target >= 1,000,000 gangs/s)
 *   remove: 100,000 queued gangs taken back from anywhere in their queues
 *   head-of-line: a round where every pool blocks at its entitlement
 *   preempt_plan: 100,000 running tasks, half the pools over entitlement and a
 *   waiting high-priority gang in every pool
 *   rank: the place of each of 20,000 gangs queued in one pool, as the
 *   resource manager's reasons say it (admit_why_format) */
#include <stdlib.h>
#include <string.h>

#include "admit.h"
#include "bench.h"
#include "entitle.h"
#include "preempt.h"
#include "respool.h"

#define NPOOLS 1000
#define NGANGS 1000000
#define NTASKS 100000

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_rand(void) { return bench_rand(&rng); }

/* 10 orgs of 100 leaves. */
static struct respool_tree *build(struct respool **leaves) {
    struct respool_tree *t = respool_tree_new();
    char path[64], err[256];
    int n = 0;
    for (int o = 0; o < NPOOLS / 100; o++) {
        struct respool_config c;
        respool_config_default(&c);
        c.res[RES_CPU].reservation = 100 * 10000;
        snprintf(path, sizeof path, "/org%d", o);
        if (respool_create(t, path, &c, NULL, err, sizeof err)) { fprintf(stderr, "%s\n", err); exit(1); }
        for (int l = 0; l < 100; l++) {
            c.res[RES_CPU].reservation = 10000;
            c.res[RES_CPU].share = 1000 + (int64_t)(next_rand() % 3000);
            snprintf(path, sizeof path, "/org%d/team%d", o, l);
            if (respool_create(t, path, &c, &leaves[n++], err, sizeof err)) { fprintf(stderr, "%s\n", err); exit(1); }
        }
    }
    return t;
}

static void bench_admission(void) {
    struct respool *leaves[NPOOLS];
    struct respool_tree *t = build(leaves);
    struct gang *g = calloc(NGANGS, sizeof *g);
    struct gang **out = malloc(NGANGS * sizeof *out);
    if (!g || !out) exit(1);
    for (size_t i = 0; i < NGANGS; i++) {
        int64_t ntasks = 1 + (int64_t)(next_rand() % 4);
        admit_gang_init(&g[i], NULL, (uint32_t)(next_rand() % 10), WF_PREEMPTIBLE, (uint32_t)ntasks,
                        (struct resvec){{ntasks * 500, ntasks << 28, 0, 0}});
    }
    uint64_t t0 = bench_now_ns();
    for (size_t i = 0; i < NGANGS; i++)
        if (admit_enqueue(leaves[next_rand() % NPOOLS], &g[i], NULL, 0)) exit(1);
    uint64_t t1 = bench_now_ns();
    /* capacity for everything: the round measures the queues, not refusals */
    if (respool_entitle(t, (struct resvec){{INT64_MAX / 4, INT64_MAX / 4, 0, 0}}, 0)) exit(1);
    uint64_t t2 = bench_now_ns();
    size_t n = admit_round(t, out, NGANGS);
    uint64_t t3 = bench_now_ns();
    if (n != NGANGS) fprintf(stderr, "admitted %zu of %d\n", n, NGANGS);
    bench_report("admit enqueue (1,000 pools)", NGANGS / ((t1 - t0) / 1e9), "gangs/s", ">= 1,000,000");
    bench_report("admit round (1,000,000 gangs)", NGANGS / ((t3 - t2) / 1e9), "gangs/s", ">= 1,000,000");
    bench_report("admit enqueue+round", NGANGS / ((t3 - t2 + t1 - t0) / 1e9), "gangs/s", ">= 1,000,000");
    bench_report("entitlement after enqueue", (t2 - t1) / 1e6, "ms", "");

    /* removal from the middle of the queues */
    for (size_t i = 0; i < NGANGS; i++) {
        usage_sub(&g[i].pool->alloc, g[i].flags, g[i].demand);
        if (admit_enqueue(leaves[next_rand() % NPOOLS], &g[i], NULL, 0)) exit(1);
    }
    t0 = bench_now_ns();
    for (size_t i = 0; i < NGANGS; i += NGANGS / 100000)
        if (admit_remove(&g[i])) exit(1);
    t1 = bench_now_ns();
    bench_report("admit remove (100,000 of 1,000,000 queued)", 100000 / ((t1 - t0) / 1e9), "gangs/s", "");

    /* head of line: entitlement for about half of each pool's queue */
    for (int i = 0; i < NPOOLS; i++) {
        int64_t q = 0;
        for (size_t j = 0; j < admit_queued(leaves[i], -1); j++) q += 625; /* half the mean demand (1,250m) */
        leaves[i]->entitlement = (struct resvec){{q, INT64_MAX / 4, 0, 0}};
    }
    t0 = bench_now_ns();
    n = admit_round(t, out, NGANGS);
    t1 = bench_now_ns();
    bench_report("admit round, pools blocked at entitlement", n / ((t1 - t0) / 1e9), "gangs/s", "");
    t0 = bench_now_ns();
    size_t n2 = admit_round(t, out, NGANGS); /* every pool blocked: the cost of a no-op round */
    t1 = bench_now_ns();
    bench_report("admit round, all blocked (1,000 pools)", (t1 - t0) / 1e3, "us", "");
    (void)n2;

    admit_tree_release(t);
    respool_tree_free(t);
    free(g);
    free(out);
}

static void bench_preempt(void) {
    struct respool *leaves[NPOOLS];
    struct respool_tree *t = build(leaves);
    struct preempt_task *ts = calloc(NTASKS, sizeof *ts);
    struct gang *g = calloc(NPOOLS, sizeof *g);
    if (!ts || !g) exit(1);
    static const enum task_state states[] = {TASK_READY, TASK_PLACING, TASK_LAUNCHING, TASK_RUNNING,
                                             TASK_RUNNING, TASK_RUNNING};
    for (size_t i = 0; i < NTASKS; i++) {
        struct respool *p = leaves[next_rand() % NPOOLS];
        uint64_t r = next_rand();
        unsigned flags = r % 10 == 0 ? 0 : r % 10 == 1 ? WF_REVOCABLE | WF_PREEMPTIBLE : WF_PREEMPTIBLE;
        ts[i] = (struct preempt_task){NULL, p, (struct resvec){{500 + (int64_t)(r >> 8) % 2000, 1 << 28, 0, 0}},
                                      (uint32_t)((r >> 20) % 10), flags, states[(r >> 30) % 6],
                                      (int64_t)((r >> 33) % 1000000)};
        usage_add(&p->alloc, flags, ts[i].res);
    }
    for (int i = 0; i < NPOOLS; i++) {
        struct respool *p = leaves[i];
        struct resvec ns = usage_nonslack(&p->alloc);
        /* odd pools are 20% over (cpu and slack), even pools exactly at entitlement */
        p->entitlement = ns;
        p->slack_entitlement = p->alloc.c[UC_REVOCABLE];
        if (i % 2) {
            p->entitlement.v[RES_CPU] = ns.v[RES_CPU] * 8 / 10;
            p->slack_entitlement.v[RES_CPU] = p->alloc.c[UC_REVOCABLE].v[RES_CPU] * 8 / 10;
        }
        admit_gang_init(&g[i], NULL, 8, WF_PREEMPTIBLE, 4, (struct resvec){{4000, 0, 0, 0}});
        if (admit_enqueue(p, &g[i], NULL, 0)) exit(1);
    }
    struct gang *out[NPOOLS];
    admit_round(t, out, NPOOLS); /* the gangs wait at their heads, on entitlement */
    struct preempt_config cfg;
    preempt_config_default(&cfg);
    cfg.over_checks = 1;
    struct preempt_state st;
    struct preempt_plan plan = {0};
    if (preempt_state_init(&st, &cfg)) exit(1);
    uint64_t t0 = bench_now_ns();
    if (preempt_plan(&st, t, ts, NTASKS, &plan, NULL, 0)) exit(1);
    uint64_t t1 = bench_now_ns();
    size_t inter = 0;
    for (size_t i = 0; i < plan.n; i++) inter += plan.v[i].reason != PREEMPT_PRIORITY;
    bench_report("preempt_plan (100,000 tasks, 1,000 pools)", (t1 - t0) / 1e6, "ms", "");
    bench_report("  victims inter-pool", (double)inter, "tasks", "");
    bench_report("  victims intra-pool", (double)(plan.n - inter), "tasks", "");
    preempt_plan_free(&plan);
    /* a check where nothing is over and nobody waits */
    for (int i = 0; i < NPOOLS; i++) {
        admit_remove(&g[i]);
        leaves[i]->entitlement = resvec_unlimited();
        leaves[i]->slack_entitlement = resvec_unlimited();
    }
    t0 = bench_now_ns();
    if (preempt_plan(&st, t, ts, NTASKS, &plan, NULL, 0)) exit(1);
    t1 = bench_now_ns();
    bench_report("preempt_plan, nothing over (100,000 tasks)", (t1 - t0) / 1e6, "ms", "");
    preempt_plan_free(&plan);
    preempt_state_free(&st);
    admit_tree_release(t);
    respool_tree_free(t);
    free(ts);
    free(g);
}

/* The reasons of gangs waiting in one pool carry their place in its queue:
 * the first rank after a change of the queue sorts a copy of it, the rest
 * search it. Both figures: every waiting gang told in one round (one sort),
 * and the worst case, a change of the queue before each rank. */
static void bench_rank(void) {
    enum { N = 20000 };
    struct respool_tree *t = respool_tree_new();
    struct respool_config c;
    respool_config_default(&c);
    struct respool *p = NULL;
    char err[256], why[700];
    if (respool_create(t, "/team", &c, &p, err, sizeof err)) { fprintf(stderr, "%s\n", err); exit(1); }
    struct gang *g = calloc(N + 1, sizeof *g);
    if (!g) exit(1);
    for (size_t i = 0; i < N; i++) {
        admit_gang_init(&g[i], "default/g", (uint32_t)(next_rand() % 10), WF_PREEMPTIBLE, 1,
                        (struct resvec){{500, 1 << 28, 0, 0}});
        if (admit_enqueue(p, &g[i], NULL, 0)) exit(1);
    }
    uint64_t t0 = bench_now_ns(), sum = 0;
    for (size_t i = 0; i < N; i++) sum += (uint64_t)admit_why_format(&g[i], why, sizeof why);
    uint64_t t1 = bench_now_ns();
    bench_report("why+rank, 20,000 queued (one sort)", (t1 - t0) / 1e3 / N, "us/gang", "");
    admit_gang_init(&g[N], "default/x", 5, WF_PREEMPTIBLE, 1, (struct resvec){{500, 1 << 28, 0, 0}});
    t0 = bench_now_ns();
    for (int i = 0; i < 100; i++) { /* the queue changes before each: every rank sorts */
        if (admit_enqueue(p, &g[N], NULL, 0) || admit_remove(&g[N])) exit(1);
        sum += admit_gang_rank(&g[(size_t)i * 97 % N]);
    }
    t1 = bench_now_ns();
    bench_report("rank after a change, 20,000 queued (a sort)", (t1 - t0) / 1e6 / 100, "ms", "");
    if (!sum) fprintf(stderr, "no output\n");
    admit_tree_release(t);
    respool_tree_free(t);
    free(g);
}

int main(void) {
    bench_rank();
    bench_admission();
    bench_preempt();
    return 0;
}
