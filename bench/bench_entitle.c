/* Entitlement for 10,000 pools four levels deep (target <= 10 ms), with demand
 * on every leaf, cpu and memory reservations, mixed shares and limits. */
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "entitle.h"
#include "respool.h"

static uint64_t rng = 12345;
static uint64_t next_rand(void) { return bench_rand(&rng); }

/* 10 orgs x 10 groups x 10 teams x 10 leaves = 10,000 leaves (+1,110 inner). */
static struct respool_tree *build(int fan, int *npools) {
    struct respool_tree *t = respool_tree_new();
    char path[128], err[256];
    int n = 0;
    for (int a = 0; a < fan; a++)
        for (int b = -1; b < fan; b++)
            for (int c = -1; c < (b < 0 ? 0 : fan); c++)
                for (int d = -1; d < (c < 0 ? 0 : fan); d++) {
                    if (b < 0) snprintf(path, sizeof path, "/o%d", a);
                    else if (c < 0) snprintf(path, sizeof path, "/o%d/g%d", a, b);
                    else if (d < 0) snprintf(path, sizeof path, "/o%d/g%d/t%d", a, b, c);
                    else snprintf(path, sizeof path, "/o%d/g%d/t%d/l%d", a, b, c, d);
                    int depth = b < 0 ? 1 : c < 0 ? 2 : d < 0 ? 3 : 4;
                    struct respool_config cfg;
                    respool_config_default(&cfg);
                    /* reservations shrink by the fan-out at each level so sums fit */
                    int64_t res = 10000000 / (depth == 1 ? 10 : depth == 2 ? 100 : depth == 3 ? 1000 : 10000);
                    cfg.res[RES_CPU].reservation = res / 2;
                    cfg.res[RES_MEMORY].reservation = (res / 2) << 20;
                    cfg.res[RES_CPU].share = 1000 + (int64_t)(next_rand() % 3000);
                    if (next_rand() % 4 == 0) cfg.res[RES_CPU].limit = res * 3;
                    struct respool *p;
                    if (respool_create(t, path, &cfg, &p, err, sizeof err)) {
                        fprintf(stderr, "%s\n", err);
                        exit(1);
                    }
                    n++;
                    if (depth == 4) {
                        p->pending.c[UC_PREEMPT].v[RES_CPU] = (int64_t)(next_rand() % 2000);
                        p->pending.c[UC_PREEMPT].v[RES_MEMORY] = (int64_t)(next_rand() % 2000) << 20;
                        p->alloc.c[UC_PREEMPT].v[RES_CPU] = (int64_t)(next_rand() % 500);
                        p->pending.c[UC_REVOCABLE].v[RES_CPU] = (int64_t)(next_rand() % 100);
                    }
                }
    *npools = n;
    return t;
}

int main(void) {
    int n;
    struct respool_tree *t = build(10, &n);
    struct resvec cap = {{8000000, 8000000LL << 20, 1LL << 50, 1000000}};
    int iters = 200;
    uint64_t best = UINT64_MAX, total = 0;
    for (int i = 0; i < iters; i++) {
        uint64_t t0 = bench_now_ns();
        if (respool_entitle(t, cap, 500000)) return 1;
        uint64_t dt = bench_now_ns() - t0;
        total += dt;
        if (dt < best) best = dt;
    }
    printf("entitlement: %d pools (10,000 leaves, 4 levels), 4 kinds, %d runs\n", n, iters);
    bench_report("entitle 11110 pools mean", (double)total / iters / 1e6, "ms", "(target <= 10 ms)");
    bench_report("entitle 11110 pools best", (double)best / 1e6, "ms", "");

    /* a wide level: 10,000 siblings under one parent */
    struct respool_tree *w = respool_tree_new();
    char path[64], err[256];
    for (int i = 0; i < 10000; i++) {
        struct respool_config cfg;
        respool_config_default(&cfg);
        cfg.res[RES_CPU].share = 1 + (int64_t)(next_rand() % 5000);
        snprintf(path, sizeof path, "/p%d", i);
        struct respool *p;
        if (respool_create(w, path, &cfg, &p, err, sizeof err)) return 1;
        p->pending.c[UC_PREEMPT].v[RES_CPU] = (int64_t)(next_rand() % 4000);
    }
    total = 0;
    for (int i = 0; i < 50; i++) {
        uint64_t t0 = bench_now_ns();
        respool_entitle(w, cap, 0);
        total += bench_now_ns() - t0;
    }
    bench_report("entitle 10000 siblings, one level, mean", (double)total / 50 / 1e6, "ms", "");

    for (struct respool *p = respool_root(t); p; p = respool_next_preorder(p)) memset(&p->pending, 0, sizeof p->pending), memset(&p->alloc, 0, sizeof p->alloc);
    for (struct respool *p = respool_root(w); p; p = respool_next_preorder(p)) memset(&p->pending, 0, sizeof p->pending);
    respool_tree_free(t);
    respool_tree_free(w);
    return 0;
}
