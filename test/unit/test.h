/* Minimal unit-test harness.
 *
 * TEST(name) { ... } defines and registers a test (a constructor adds it to the
 * list). CHECK* record a failure and carry on; REQUIRE* record it and return from
 * the test. A test passes when it records no failure. The runner (main.c) prints
 * "unit: N passed, N failed". No allocation is owned by the harness. */
#ifndef PELOTON_TEST_H
#define PELOTON_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

typedef void (*test_fn)(void);
void test_register(const char *name, const char *file, test_fn fn);
void test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define TEST(name)                                                        \
    static void name(void);                                               \
    __attribute__((constructor)) static void test_reg_##name(void) {      \
        test_register(#name, __FILE__, name);                             \
    }                                                                     \
    static void name(void)

#define CHECK(c)                                                          \
    do { if (!(c)) test_fail(__FILE__, __LINE__, "CHECK(%s)", #c); } while (0)
#define REQUIRE(c)                                                        \
    do { if (!(c)) { test_fail(__FILE__, __LINE__, "REQUIRE(%s)", #c); return; } } while (0)

#define CHECK_I64(a, b)                                                   \
    do { int64_t a_ = (int64_t)(a), b_ = (int64_t)(b);                    \
         if (a_ != b_) test_fail(__FILE__, __LINE__, "%s == %s: %" PRId64 " != %" PRId64, \
                                 #a, #b, a_, b_); } while (0)
#define REQUIRE_I64(a, b)                                                 \
    do { int64_t a_ = (int64_t)(a), b_ = (int64_t)(b);                    \
         if (a_ != b_) { test_fail(__FILE__, __LINE__, "%s == %s: %" PRId64 " != %" PRId64, \
                                   #a, #b, a_, b_); return; } } while (0)
#define CHECK_STR(a, b)                                                   \
    do { const char *a_ = (a), *b_ = (b);                                 \
         if (!a_ || !b_ || strcmp(a_, b_) != 0)                           \
             test_fail(__FILE__, __LINE__, "%s == %s: \"%s\" != \"%s\"",  \
                       #a, #b, a_ ? a_ : "(null)", b_ ? b_ : "(null)"); } while (0)
/* Substring check, for error messages. */
#define CHECK_HAS(hay, needle)                                            \
    do { const char *h_ = (hay), *n_ = (needle);                          \
         if (!h_ || !strstr(h_, n_))                                      \
             test_fail(__FILE__, __LINE__, "\"%s\" does not contain \"%s\"", \
                       h_ ? h_ : "(null)", n_); } while (0)

/* Deterministic PRNG for property tests (splitmix64). */
static inline uint64_t test_rand(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static inline int64_t test_range(uint64_t *s, int64_t lo, int64_t hi) {
    return lo + (int64_t)(test_rand(s) % (uint64_t)(hi - lo + 1));
}

#endif
