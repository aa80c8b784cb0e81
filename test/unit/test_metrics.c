/* metrics.h: the exposition text (HELP/TYPE, labels escaped, histogram
 * buckets cumulative with +Inf equal to _count), name checks, bounds on
 * series, and updates from another thread read by a scrape. */
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "test.h"

static char *render(struct metrics *m) {
    char *out = NULL;
    size_t len = 0;
    if (metrics_render(m, &out, &len)) return NULL;
    if (out && strlen(out) != len) {
        free(out);
        return NULL;
    }
    return out;
}

TEST(metrics_counter_gauge_text) {
    struct metrics *m = metrics_new();
    REQUIRE(m);
    const char *lab[] = {"pool", "reason"};
    struct metrics_family *c = metrics_counter(m, "peloton_admissions_total", "Admission decisions.", 2, lab);
    struct metrics_family *g = metrics_gauge(m, "peloton_queue_length", "Gangs\\waiting\nnow.", 1, lab);
    REQUIRE(c && g);
    const char *v1[] = {"/org/a", "admitted"};
    struct metrics_series *s = metrics_series(c, v1);
    metrics_inc(s);
    metrics_add(s, 41);
    CHECK(metrics_series(c, v1) == s); /* found again, not made twice */
    const char *v2[] = {"q\"x\\y\nz", "entitlement"};
    metrics_inc(metrics_series(c, v2));
    metrics_set(metrics_series1(g, "/org/a"), 2.5);
    metrics_set(metrics_series1(g, "inf"), INFINITY);
    metrics_set(metrics_series1(g, "neg"), -3);
    metrics_set(metrics_series1(g, "big"), 1e20);
    metrics_set(metrics_series1(g, "tenth"), 0.1);
    metrics_set(metrics_series1(g, "nan"), NAN);
    char *t = render(m);
    REQUIRE(t);
    CHECK_HAS(t, "# HELP peloton_admissions_total Admission decisions.\n# TYPE peloton_admissions_total counter\n"
                 "peloton_admissions_total{pool=\"/org/a\",reason=\"admitted\"} 42\n"
                 "peloton_admissions_total{pool=\"q\\\"x\\\\y\\nz\",reason=\"entitlement\"} 1\n");
    CHECK_HAS(t, "# HELP peloton_queue_length Gangs\\\\waiting\\nnow.\n# TYPE peloton_queue_length gauge\n"
                 "peloton_queue_length{pool=\"/org/a\"} 2.5\npeloton_queue_length{pool=\"inf\"} +Inf\n"
                 "peloton_queue_length{pool=\"neg\"} -3\npeloton_queue_length{pool=\"big\"} 1e+20\n"
                 "peloton_queue_length{pool=\"tenth\"} 0.1\npeloton_queue_length{pool=\"nan\"} NaN\n");
    CHECK_HAS(t, "metrics_series_dropped_total 0\n");
    CHECK_I64(metrics_value(s), 42);
    free(t);
    metrics_free(m);
}

TEST(metrics_histogram_text) {
    struct metrics *m = metrics_new();
    REQUIRE(m);
    const double b[] = {0.001, 0.1, 1};
    const char *lab[] = {"verb"};
    struct metrics_family *h = metrics_histogram(m, "x_duration_seconds", "Latency.", 1, lab, b, 3);
    struct metrics_family *h0 = metrics_histogram(m, "y_seconds", "No labels.", 0, NULL, b, 3);
    REQUIRE(h && h0);
    struct metrics_series *s = metrics_series1(h, "GET");
    metrics_observe(s, 0.0005);
    metrics_observe(s, 0.1); /* on a bound: that bucket (le is "less or equal") */
    metrics_observe(s, 0.5);
    metrics_observe(s, 7);
    metrics_observe(metrics_series0(h0), 2);
    char *t = render(m);
    REQUIRE(t);
    CHECK_HAS(t, "# TYPE x_duration_seconds histogram\n"
                 "x_duration_seconds_bucket{verb=\"GET\",le=\"0.001\"} 1\n"
                 "x_duration_seconds_bucket{verb=\"GET\",le=\"0.1\"} 2\n"
                 "x_duration_seconds_bucket{verb=\"GET\",le=\"1\"} 3\n"
                 "x_duration_seconds_bucket{verb=\"GET\",le=\"+Inf\"} 4\n"
                 "x_duration_seconds_sum{verb=\"GET\"} 7.6005\n"
                 "x_duration_seconds_count{verb=\"GET\"} 4\n");
    CHECK_HAS(t, "y_seconds_bucket{le=\"1\"} 0\ny_seconds_bucket{le=\"+Inf\"} 1\ny_seconds_sum 2\ny_seconds_count 1\n");
    CHECK_I64(metrics_value(s), 4);
    free(t);
    metrics_free(m);
}

TEST(metrics_names_checked) {
    struct metrics *m = metrics_new();
    REQUIRE(m);
    const char *bad_label[] = {"__reserved"};
    const char *le[] = {"le"};
    const char *colon[] = {"a:b"};
    const double up[] = {1, 2}, down[] = {2, 1}, nan_b[] = {NAN};
    CHECK(!metrics_counter(m, "", "x", 0, NULL));
    CHECK(!metrics_counter(m, "9lives", "x", 0, NULL));
    CHECK(!metrics_counter(m, "a-b", "x", 0, NULL));
    CHECK(!metrics_counter(m, "ok_total", "x", 1, bad_label));
    CHECK(!metrics_counter(m, "ok_total", "x", 1, colon));
    CHECK(!metrics_histogram(m, "h_seconds", "x", 1, le, up, 2));
    CHECK(!metrics_histogram(m, "h_seconds", "x", 0, NULL, down, 2));
    CHECK(!metrics_histogram(m, "h_seconds", "x", 0, NULL, nan_b, 1));
    CHECK(!metrics_histogram(m, "h_seconds", "x", 0, NULL, up, 0));
    CHECK(metrics_counter(m, "ns:ok_total", "x", 0, NULL));
    CHECK(!metrics_gauge(m, "ns:ok_total", "again", 0, NULL)); /* a name once */
    CHECK(metrics_histogram(m, "h_seconds", "x", 0, NULL, up, 2));
    /* NULL everywhere is a no-op */
    metrics_inc(metrics_series0(NULL));
    metrics_observe(NULL, 1);
    metrics_set(NULL, 1);
    metrics_free(m);
}

TEST(metrics_series_bounded) {
    struct metrics *m = metrics_new();
    REQUIRE(m);
    const char *lab[] = {"k"};
    struct metrics_family *c = metrics_counter(m, "many_total", "x", 1, lab);
    REQUIRE(c);
    char v[32];
    for (int i = 0; i < METRICS_MAX_SERIES; i++) {
        snprintf(v, sizeof v, "v%d", i);
        REQUIRE(metrics_series1(c, v));
    }
    CHECK(metrics_series1(c, "v17") != NULL); /* an existing one is still found */
    CHECK(metrics_series1(c, "one-more") == NULL);
    /* a value past METRICS_MAX_VALUE is cut: the same series as its prefix */
    struct metrics_family *g = metrics_gauge(m, "long_value", "x", 1, lab);
    char big[METRICS_MAX_VALUE + 50];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = 0;
    struct metrics_series *a = metrics_series1(g, big);
    big[METRICS_MAX_VALUE] = 0;
    CHECK(a && metrics_series1(g, big) == a);
    char *t = render(m);
    REQUIRE(t);
    CHECK_HAS(t, "metrics_series_dropped_total 1\n");
    free(t);
    metrics_free(m);
}

TEST(metrics_process_collector) {
    struct metrics *m = metrics_new();
    REQUIRE(m);
    REQUIRE(metrics_collector(m, metrics_collect_process, NULL) == 0);
    char *t = render(m);
    REQUIRE(t);
    CHECK_HAS(t, "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total ");
    CHECK_HAS(t, "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes ");
    const char *rss = strstr(t, "\nprocess_resident_memory_bytes ");
    CHECK(rss && strtod(rss + 31, NULL) > 1e6); /* this test binary holds more than a megabyte */
    CHECK_HAS(t, "process_start_time_seconds ");
    free(t);
    metrics_free(m);
}

struct writer {
    struct metrics *m;
    struct metrics_family *c, *h;
    int n;
};

static void *write_many(void *arg) {
    struct writer *w = arg;
    char v[16];
    for (int i = 0; i < w->n; i++) {
        snprintf(v, sizeof v, "p%d", i % 50); /* new series while the scrape runs */
        metrics_inc(metrics_series1(w->c, v));
        metrics_observe(metrics_series1(w->h, v), 0.01);
    }
    return NULL;
}

/* One writer thread, scrapes on this one meanwhile (ASan/UBSan; the counts
 * at the end are exact: single writer). */
TEST(metrics_scrape_while_writing) {
    struct metrics *m = metrics_new();
    REQUIRE(m);
    const char *lab[] = {"pool"};
    const double b[] = {0.005, 0.05};
    struct writer w = {.m = m, .n = 200000};
    w.c = metrics_counter(m, "w_total", "x", 1, lab);
    w.h = metrics_histogram(m, "w_seconds", "x", 1, lab, b, 2);
    REQUIRE(w.c && w.h);
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, write_many, &w) == 0);
    for (int i = 0; i < 20; i++) free(render(m));
    pthread_join(th, NULL);
    CHECK_I64(metrics_value(metrics_series1(w.c, "p7")), 200000 / 50);
    char *t = render(m);
    REQUIRE(t);
    CHECK_HAS(t, "w_seconds_bucket{pool=\"p0\",le=\"0.05\"} 4000\nw_seconds_bucket{pool=\"p0\",le=\"+Inf\"} 4000\n");
    free(t);
    metrics_free(m);
}

/* Dropping series: the others stay found (the same series, not new ones),
 * the dropped ones leave the text and come back empty when used again. */
TEST(metrics_series_drop_keeps_the_rest) {
    struct metrics *m = metrics_new();
    REQUIRE(m);
    const char *lab[] = {"pool"};
    struct metrics_family *g = metrics_gauge(m, "pool_gauge", "x", 1, lab);
    REQUIRE(g);
    enum { NS = 1000 };
    static struct metrics_series *s[NS];
    char v[64];
    for (int i = 0; i < NS; i++) {
        snprintf(v, sizeof v, "p%d", i);
        REQUIRE((s[i] = metrics_series1(g, v)));
        metrics_set(s[i], i);
    }
    uint64_t seed = 7;
    static bool gone[NS];
    for (int n = 0; n < NS / 2;) { /* half of them, in a random order */
        int i = (int)test_range(&seed, 0, NS - 1);
        if (gone[i]) continue;
        snprintf(v, sizeof v, "p%d", i);
        const char *vv = v;
        metrics_series_drop(g, &vv);
        gone[i] = true;
        n++;
    }
    const char *none = "never-made";
    metrics_series_drop(g, &none); /* absent: nothing happens */
    metrics_series_drop(NULL, &none);
    char *t = render(m);
    REQUIRE(t);
    int kept = 0;
    for (int i = 0; i < NS; i++) {
        snprintf(v, sizeof v, "pool_gauge{pool=\"p%d\"} %d\n", i, i);
        CHECK((strstr(t, v) != NULL) == !gone[i]);
        if (gone[i]) continue;
        kept++;
        snprintf(v, sizeof v, "p%d", i);
        CHECK(metrics_series1(g, v) == s[i]);
    }
    CHECK_I64(kept, NS / 2);
    free(t);
    for (int i = 0; i < NS; i++)
        if (gone[i]) {
            snprintf(v, sizeof v, "p%d", i);
            struct metrics_series *again = metrics_series1(g, v);
            CHECK(again && metrics_value(again) == 0);
            break;
        }
    metrics_free(m);
}

TEST(metrics_family_made_again_is_the_same_family) {
    /* a role stopped and started again in one process (a lease's terms)
     * registers its families again: the same ones, their series kept */
    struct metrics *m = metrics_new();
    static const char *const l[] = {"pool"};
    static const double b[] = {0.1, 1};
    struct metrics_family *c = metrics_counter(m, "x_total", "x", 1, l);
    struct metrics_family *h = metrics_histogram(m, "y_seconds", "y", 1, l, b, 2);
    metrics_inc(metrics_series1(c, "a"));
    CHECK(metrics_counter(m, "x_total", "x", 1, l) == c);
    CHECK(metrics_histogram(m, "y_seconds", "y", 1, l, b, 2) == h);
    metrics_inc(metrics_series1(metrics_counter(m, "x_total", "x", 1, l), "a"));
    char *text = render(m);
    CHECK(text && strstr(text, "x_total{pool=\"a\"} 2\n"));
    free(text);
    /* the name with another shape is still refused */
    static const char *const l2[] = {"node"};
    static const double b2[] = {0.5, 1};
    CHECK(metrics_gauge(m, "x_total", "x", 1, l) == NULL);
    CHECK(metrics_counter(m, "x_total", "x", 1, l2) == NULL);
    CHECK(metrics_counter(m, "x_total", "x", 0, NULL) == NULL);
    CHECK(metrics_histogram(m, "y_seconds", "y", 1, l, b2, 2) == NULL);
    metrics_free(m);
}
