/* ctl_resp_vformat writes the bytes hiredis' redisFormatCommand writes for
 * the formats the controllers use, and refuses what it does not know. */
#include <stdarg.h>
#include <stdlib.h>

#include <errno.h>
#include "ctl.h"
#include "store.h"
#include "test.h"

static int mine(char *out, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = ctl_resp_vformat(out, cap, fmt, ap);
    va_end(ap);
    return n;
}

#define SAME(...)                                                                               \
    do {                                                                                        \
        char out_[8192], *theirs_ = NULL;                                                       \
        int n_ = mine(out_, sizeof out_, __VA_ARGS__);                                          \
        int t_ = redisFormatCommand(&theirs_, __VA_ARGS__);                                     \
        CHECK(n_ > 0);                                                                          \
        CHECK_I64(n_, t_);                                                                      \
        if (n_ > 0 && n_ == t_ && memcmp(out_, theirs_, (size_t)n_))                            \
            test_fail(__FILE__, __LINE__, "bytes differ: %.*s / %.*s", n_, out_, t_, theirs_); \
        free(theirs_);                                                                          \
    } while (0)

TEST(ctl_resp_format_matches_hiredis) {
    SAME("ZADD %s %lld %s", "peloton:retry", (long long)-17, "default/g1");
    SAME("HINCRBY %s%s attempts 1", "peloton:gang:", "default/g1");
    SAME("HSET %s%s ns %s pods %s pool %s epoch %lld", "peloton:gang:", "ns/a", "ns", "3", "team-a", 42LL);
    SAME("ZADD %s%s %.0f %s", "peloton:pending:", "team-a", 1.5e12, "ns/p");
    SAME("LPOP %s %u", "peloton:ready", 512u);
    SAME("RPUSH %s %s", "k", "a value with spaces");   /* one argument */
    SAME("SET %s %s", "k", "");                        /* an empty argument */
    SAME("  MULTI   SPACES  %d  %ld %lu %i %llu ", -1, 2L, 3UL, 5, 6ULL);
    SAME("PERCENT 100%% %s%%", "x");
    SAME("GET key");
}

TEST(ctl_resp_format_refuses_what_it_does_not_know) {
    char out[64];
    CHECK_I64(mine(out, sizeof out, "SET %s %b", "k", "v", (size_t)1), -1); /* binary args: hiredis' */
    CHECK_I64(mine(out, sizeof out, "SET k %x", 255), -1);
    CHECK_I64(mine(out, sizeof out, "SET k %zu", (size_t)1), -1); /* hiredis refuses it too */
    CHECK_I64(mine(out, sizeof out, "SET %s v", (const char *)NULL), -1);
    CHECK_I64(mine(out, 16, "SET key-too-long-for-16 v"), -1); /* the caller's buffer */
    char big[5000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    char wide[8192];
    CHECK_I64(mine(wide, sizeof wide, "SET k %s", big), -1); /* past 4 KiB of arguments */
}

/* Redis addresses as pelotond's --redis takes them (store_parse_addr, used
 * by the API server's store and the controllers' ctl_db_open). */
TEST(ctl_redis_addresses) {
    char host[64];
    int port = -1;
    CHECK_I64(store_parse_addr("127.0.0.1:6379", host, sizeof host, &port), 0);
    CHECK_STR(host, "127.0.0.1");
    CHECK_I64(port, 6379);
    CHECK_I64(store_parse_addr("redis.local:7000", host, sizeof host, &port), 0);
    CHECK_STR(host, "redis.local");
    CHECK_I64(port, 7000);
    CHECK_I64(store_parse_addr("unix:///run/redis/redis.sock", host, sizeof host, &port), 0);
    CHECK_STR(host, "/run/redis/redis.sock");
    CHECK_I64(port, 0);
    CHECK_I64(store_parse_addr("unix:/tmp/r.sock", host, sizeof host, &port), 0);
    CHECK_STR(host, "/tmp/r.sock");
    CHECK_I64(store_parse_addr("/tmp/r.sock", host, sizeof host, &port), 0);
    CHECK_STR(host, "/tmp/r.sock");
    const char *bad[] = {"localhost", ":6379", "h:", "h:0", "h:65536", "h:12x", "unix://rel.sock", "unix:",
                         "unix:///a/path/far/too/long/for/a/host/buffer/of/sixty/four/bytes/redis.sock"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (store_parse_addr(bad[i], host, sizeof host, &port) != -EINVAL)
            test_fail(__FILE__, __LINE__, "\"%s\" accepted", bad[i]);
}
