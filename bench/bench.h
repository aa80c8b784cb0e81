/* Shared helpers for benchmarks: a monotonic clock and a figure printer.
 * Benchmarks print figures; they do not pass or fail on speed. */
#ifndef PELOTON_BENCH_H
#define PELOTON_BENCH_H

#include <stdint.h>
#include <stdio.h>
#include <time.h>

static inline uint64_t bench_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* xorshift64: deterministic benchmark inputs; *state must start non-zero. */
static inline uint64_t bench_rand(uint64_t *state) {
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *state = x;
}

/* Sorts v[0..n) ascending (insertion: a benchmark's few runs), for medians. */
static inline void bench_sort(double *v, int n) {
    for (int a = 1; a < n; a++)
        for (int b = a; b > 0 && v[b - 1] > v[b]; b--) {
            double t = v[b];
            v[b] = v[b - 1];
            v[b - 1] = t;
        }
}

/* One line per figure: "bench NAME: VALUE UNIT (target)". */
static inline void bench_report(const char *name, double value, const char *unit, const char *target) {
    printf("bench %-44s %12.3f %-10s %s\n", name, value, unit, target ? target : "");
}

#endif
