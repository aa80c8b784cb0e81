/* Placement throughput and memory (targets in DESIGN.md: >= 100,000 tasks/s
 * onto 10,000 hosts on one core). Prints figures; never fails on speed. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "host.h"
#include "place.h"

#define GIB(n) ((int64_t)(n) << 30)

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_rand(void) { return bench_rand(&rng); }
static int64_t range(int64_t lo, int64_t hi) { return lo + (int64_t)(next_rand() % (uint64_t)(hi - lo + 1)); }

static char names[64][16];
static const char *zone_name(int z) { return names[z]; }

/* Hosts of 16-64 cores, 4 GiB per core, in nzones zones; 5% GPU hosts, 1%
 * unschedulable, 2% tainted. */
static struct host_fleet *fleet(uint32_t n, int nzones, bool preload) {
    struct host_fleet *f = host_fleet_new();
    char name[32];
    for (uint32_t i = 0; i < n; i++) {
        int64_t cores = range(1, 4) * 16;
        struct host_kv labels[] = {{"zone", zone_name((int)(i % (uint32_t)nzones))}, {"rack", names[i % 40]}};
        struct host_taint_spec taint = {"dedicated", "infra", TAINT_NO_SCHEDULE};
        struct host_spec s = {0};
        snprintf(name, sizeof name, "host-%06u", i);
        s.name = name;
        s.backend = i % 2 ? HOST_MESOS : HOST_KUBELET;
        s.allocatable = (struct resvec){{cores * 1000, GIB(cores * 4), GIB(1000), 0}};
        s.labels = labels;
        s.nlabels = 2;
        if (preload) /* 0-80% of cpu and memory already allocated */
            for (int k = 0; k < 2; k++) s.allocated.v[k] = s.allocatable.v[k] / 100 * range(0, 80);
        int64_t r = range(0, 99);
        if (r < 5) s.allocatable.v[RES_GPU] = 8000;
        else if (r < 6) s.unschedulable = true;
        else if (r < 8) { s.taints = &taint; s.ntaints = 1; }
        if (host_fleet_add(f, &s, NULL)) { fprintf(stderr, "host_fleet_add failed\n"); exit(1); }
    }
    return f;
}

struct workload {
    struct place_task *tasks;
    struct place_gang *gangs;
    struct host_kv *sel;
    char (*jobs)[16];
    uint32_t ntasks, ngangs;
};

static struct workload workload(uint32_t ntasks, uint32_t gang_size, enum place_strategy s, int nzones_sel,
                                uint32_t gangs_per_job) {
    struct workload w = {0};
    w.ntasks = ntasks;
    w.ngangs = ntasks / gang_size;
    w.tasks = calloc(ntasks, sizeof *w.tasks);
    w.gangs = calloc(w.ngangs, sizeof *w.gangs);
    w.sel = calloc(ntasks, sizeof *w.sel);
    w.jobs = calloc(w.ngangs, sizeof *w.jobs);
    for (uint32_t i = 0; i < ntasks; i++) {
        struct place_task *t = &w.tasks[i];
        t->req = (struct resvec){{range(1, 8) * 500, range(1, 8) * GIB(1), GIB(1), 0}};
        if (nzones_sel) {
            w.sel[i] = (struct host_kv){"zone", zone_name((int)range(0, nzones_sel - 1))};
            t->selector = &w.sel[i];
            t->nselector = 1;
        }
    }
    for (uint32_t g = 0; g < w.ngangs; g++) {
        snprintf(w.jobs[g], sizeof w.jobs[g], "job-%u", g / gangs_per_job);
        w.gangs[g] = (struct place_gang){w.jobs[g], w.jobs[g], s, w.tasks + (size_t)g * gang_size, gang_size};
    }
    return w;
}

static void workload_free(struct workload *w) {
    free(w->tasks);
    free(w->gangs);
    free(w->sel);
    free(w->jobs);
}

static void run(const char *label, uint32_t nhosts, uint32_t ntasks, uint32_t gang_size, enum place_strategy s,
                int nzones_sel, bool report_memory, uint32_t gangs_per_job, bool preload, uint32_t spread_limit) {
    struct host_fleet *f = fleet(nhosts, 10, preload);
    struct workload w = workload(ntasks, gang_size, s, nzones_sel, gangs_per_job);
    uint64_t t0 = bench_now_ns();
    struct place_options o;
    place_options_default(&o);
    o.spread_max_candidates = spread_limit;
    struct place_engine *e = place_engine_new(f, &o);
    uint64_t t1 = bench_now_ns();
    size_t fleet_before = host_fleet_bytes(f), engine_bytes = place_engine_bytes(e);
    struct place_round r;
    if (!e || place_round(e, w.gangs, w.ngangs, &r)) { fprintf(stderr, "out of memory\n"); exit(1); }
    uint64_t t2 = bench_now_ns();
    struct place_stats st;
    place_engine_stats(e, &st);
    char name[96];
    double secs = (double)(t2 - t1) / 1e9;
    snprintf(name, sizeof name, "%s tasks/s", label);
    bench_report(name, (double)st.tasks_placed / secs, "tasks/s", ">= 100000");
    snprintf(name, sizeof name, "%s gangs/s (placed+failed)", label);
    bench_report(name, (double)(st.gangs_placed + st.gangs_failed) / secs, "gangs/s", NULL);
    snprintf(name, sizeof name, "%s placed", label);
    bench_report(name, (double)st.tasks_placed, "tasks", NULL);
    snprintf(name, sizeof name, "%s gangs failed", label);
    bench_report(name, (double)st.gangs_failed, "gangs", NULL);
    snprintf(name, sizeof name, "%s candidates/task", label);
    bench_report(name, (double)st.candidates / (double)(ntasks ? ntasks : 1), "hosts", NULL);
    snprintf(name, sizeof name, "%s index build", label);
    bench_report(name, (double)(t1 - t0) / 1e6, "ms", NULL);
    if (report_memory) {
        size_t fleet_after = host_fleet_bytes(f);
        bench_report("memory per host (fleet + index)", (double)(fleet_before + engine_bytes) / nhosts, "bytes",
                     NULL);
        /* per placed task: the per-host job/label counts it grows, plus its result slot */
        double per_task = (double)(fleet_after - fleet_before) / (double)(st.tasks_placed ? st.tasks_placed : 1) +
                          (double)sizeof(uint32_t) +
                          (double)sizeof(struct place_gang_result) / gang_size;
        bench_report("memory per placed task", per_task, "bytes", NULL);
    }
    if (st.index_misses) printf("bench %s: %llu index misses (bug)\n", label, (unsigned long long)st.index_misses);
    place_round_free(&r);
    place_engine_free(e);
    host_fleet_free(f);
    workload_free(&w);
}

/* The slow path: gangs no host can take, each costing a full-fleet scan. */
static void run_failures(uint32_t nhosts, uint32_t nfail) {
    struct host_fleet *f = fleet(nhosts, 10, true);
    struct place_engine *e = place_engine_new(f, NULL);
    struct place_task t = {0};
    t.req = (struct resvec){{1000000, GIB(1), 0, 0}}; /* 1000 cores */
    uint64_t t0 = bench_now_ns();
    for (uint32_t i = 0; i < nfail; i++) {
        struct place_gang g = {"big", "big", PLACE_PACK, &t, 1};
        uint32_t h;
        struct place_failure fl;
        if (place_gang(e, &g, &h, &fl) != -ENOSPC) { fprintf(stderr, "unexpected placement\n"); exit(1); }
    }
    uint64_t t1 = bench_now_ns();
    bench_report("failure (full scan) 10k hosts, per gang", (double)(t1 - t0) / 1e3 / nfail, "us", NULL);
    place_engine_free(e);
    host_fleet_free(f);
}

int main(void) {
    for (int i = 0; i < 64; i++) snprintf(names[i], sizeof names[i], "z%02d", i);
    run("100k x1 -> 10k hosts PACK", 10000, 100000, 1, PLACE_PACK, 0, true, 100, false, 0);
    run("60k x1 -> 10k preloaded hosts PACK", 10000, 60000, 1, PLACE_PACK, 0, false, 100, true, 0);
    run("100k x1 -> 10k hosts LEAST_LOADED", 10000, 100000, 1, PLACE_LEAST_LOADED, 0, false, 100, false, 0);
    run("60k x1 -> 10k preloaded LEAST_LOADED", 10000, 60000, 1, PLACE_LEAST_LOADED, 0, false, 100, true, 0);
    run("100k x1 -> 10k hosts SPREAD_JOB", 10000, 100000, 1, PLACE_SPREAD_JOB, 0, false, 100, false, 0);
    run("100k x1 -> 10k hosts PACK nodeSelector", 10000, 100000, 1, PLACE_PACK, 10, false, 100, false, 0);
    run("12.5k x8 -> 10k hosts PACK", 10000, 100000, 8, PLACE_PACK, 0, false, 100, false, 0);
    run("12.5k x8 -> 10k hosts SPREAD_JOB", 10000, 100000, 8, PLACE_SPREAD_JOB, 0, false, 100, false, 0);
    run("100k x1 -> 50k hosts PACK", 50000, 100000, 1, PLACE_PACK, 0, false, 100, false, 0);
    run("100k x1 -> 50k hosts LEAST_LOADED", 50000, 100000, 1, PLACE_LEAST_LOADED, 0, false, 100, false, 0);
    /* worst case for SPREAD_JOB: one job with more tasks than hosts, uneven load */
    run("15k x1 one job -> 5k preloaded SPREAD exact", 5000, 15000, 1, PLACE_SPREAD_JOB, 0, false, 15000, true, 0);
    run("15k x1 one job -> 5k preloaded SPREAD max 64", 5000, 15000, 1, PLACE_SPREAD_JOB, 0, false, 15000, true, 64);
    run_failures(10000, 200);
    return 0;
}
