/* Unit-test runner: runs every registered test (or those whose name contains
 * argv[1]) and prints one line per failure and the summary line. */
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <time.h>

#include "test.h"

struct test_case { const char *name, *file; test_fn fn; };

static struct test_case g_tests[4096];
static int g_ntests;
static int g_failures_in_current;

void test_register(const char *name, const char *file, test_fn fn) {
    if (g_ntests == (int)(sizeof g_tests / sizeof g_tests[0])) {
        fprintf(stderr, "test harness: too many tests\n");
        abort();
    }
    g_tests[g_ntests++] = (struct test_case){name, file, fn};
}

void test_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    g_failures_in_current++;
    if (g_failures_in_current > 20) return; /* keep the log readable */
    fprintf(stderr, "  %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int main(int argc, char **argv) {
    const char *filter = argc > 1 ? argv[1] : NULL;
    int passed = 0, failed = 0;
    /* a test that takes TEST_SLOW_SECONDS (5) or more is named with its
     * seconds: where a suite's time goes, for whoever shortens it */
    double slow = getenv("TEST_SLOW_SECONDS") ? atof(getenv("TEST_SLOW_SECONDS")) : 5.0;
    /* as every daemon does: the servers tested in-process write to sockets
     * a client may have closed (libuv writes with write(2)) */
    signal(SIGPIPE, SIG_IGN);
    for (int i = 0; i < g_ntests; i++) {
        if (filter && !strstr(g_tests[i].name, filter)) continue;
        g_failures_in_current = 0;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        g_tests[i].fn();
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
        if (took >= slow) fprintf(stderr, "  %s: %.1f s\n", g_tests[i].name, took);
        if (g_failures_in_current) {
            failed++;
            fprintf(stderr, "FAIL %s (%s)\n", g_tests[i].name, g_tests[i].file);
        } else {
            passed++;
            if (getenv("TEST_VERBOSE")) fprintf(stderr, "ok   %s\n", g_tests[i].name);
        }
    }
    printf("%s: %d passed, %d failed\n", getenv("TEST_SUITE") ? getenv("TEST_SUITE") : "unit", passed, failed);
    return failed ? 1 : 0;
}
