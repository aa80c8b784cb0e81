/* The metrics registry's hot path (src/util/metrics.h): an increment of a
 * series held by its caller, a lookup by label values then an increment (as
 * the roles do per event), a histogram observation by three labels (as the
 * API server does per request), and a scrape of a registry the size pelotond
 * has with 1,000 pools. */
#include <stdlib.h>

#include "bench.h"
#include "metrics.h"

#define N 10000000

int main(void) {
    struct metrics *m = metrics_new();
    if (!m) return 1;
    const char *one[] = {"pool"}, *three[] = {"verb", "resource", "code"};
    struct metrics_family *c = metrics_counter(m, "b_total", "x", 1, one);
    static const double b[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                               0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30,    60};
    struct metrics_family *h = metrics_histogram(m, "b_seconds", "x", 3, three, b, 18);
    struct metrics_series *s = metrics_series1(c, "held");

    uint64_t t = bench_now_ns();
    for (int i = 0; i < N; i++) metrics_inc(s);
    bench_report("metrics: increment of a held series", (double)(bench_now_ns() - t) / N, "ns", "");

    t = bench_now_ns();
    for (int i = 0; i < N; i++) metrics_inc(metrics_series1(c, "/org/team-a/leaf-17"));
    bench_report("metrics: lookup by one label + increment", (double)(bench_now_ns() - t) / N, "ns", "");

    const char *v[3] = {"CREATE", "pods/binding", "201"};
    uint64_t x = 88172645463325252ull;
    t = bench_now_ns();
    for (int i = 0; i < N / 10; i++)
        metrics_observe(metrics_series(h, v), (double)(bench_rand(&x) % 100000) / 1e7);
    bench_report("metrics: lookup by three labels + observe", (double)(bench_now_ns() - t) / (N / 10), "ns", "");

    /* pelotond's shape with 1,000 pools: 4 gauges x 4 kinds each (16,000 series), 61 histogram series */
    const char *pk[] = {"pool", "kind"};
    struct metrics_family *g[4] = {metrics_gauge(m, "b_pool_entitlement", "x", 2, pk),
                                   metrics_gauge(m, "b_pool_allocation", "x", 2, pk),
                                   metrics_gauge(m, "b_pool_demand", "x", 2, pk),
                                   metrics_gauge(m, "b_pool_reservation", "x", 2, pk)};
    char name[32];
    static const char *const kinds[] = {"cpu", "memory", "disk", "gpu"};
    for (int p = 0; p < 1000; p++) {
        snprintf(name, sizeof name, "pool-%d", p);
        for (int k = 0; k < 4; k++)
            for (int f = 0; f < 4; f++) {
                const char *pv[2] = {name, kinds[k]};
                metrics_set(metrics_series(g[f], pv), p * 1.5);
            }
    }
    for (int i = 0; i < 60; i++) {
        snprintf(name, sizeof name, "r%d", i);
        const char *rv[3] = {"GET", name, "200"};
        metrics_observe(metrics_series(h, rv), 0.001);
    }
    char *out;
    size_t len = 0;
    int reps = 20;
    t = bench_now_ns();
    for (int i = 0; i < reps; i++) {
        if (metrics_render(m, &out, &len)) return 1;
        free(out);
    }
    bench_report("metrics: scrape, 16,000 gauges + 61 histograms", (double)(bench_now_ns() - t) / reps / 1e6,
                 "ms", "");
    bench_report("metrics: scrape size", (double)len / 1024, "KiB", "");
    metrics_free(m);
    return 0;
}
