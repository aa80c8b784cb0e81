/* Per-user request rate and watch count (shim_limits.h). */
#include <stdio.h>

#include "shim_limits.h"
#include "test.h"

TEST(limits_rate_takes_a_burst_then_refills_at_the_rate) {
    struct limits *l = limits_new(&(struct limits_config){.qps = 10, .burst = 20});
    unsigned retry = 0;
    int ok = 0;
    for (int i = 0; i < 30; i++) ok += limits_take(l, "alice", 1000, &retry) != NULL;
    CHECK_I64(ok, 20); /* the burst, then nothing in the same millisecond */
    CHECK_I64(retry, 1);
    CHECK(limits_take(l, "alice", 1099, &retry) == NULL); /* 99 ms: 0.99 of a token */
    CHECK(limits_take(l, "alice", 1100, &retry) != NULL); /* 100 ms at 10/s: one */
    CHECK(limits_take(l, "alice", 1100, &retry) == NULL);
    ok = 0;
    for (int i = 0; i < 100; i++) ok += limits_take(l, "alice", 3100, &retry) != NULL;
    CHECK_I64(ok, 20); /* two seconds refill 20, never past the burst */
    struct limits_stats st;
    limits_stats(l, &st);
    CHECK_I64(st.refused_rate, 10 + 1 + 1 + 80);
    CHECK_I64(st.users, 1);
    limits_free(l);
}

TEST(limits_users_have_their_own_buckets) {
    struct limits *l = limits_new(&(struct limits_config){.qps = 1, .burst = 1});
    unsigned retry = 0;
    CHECK(limits_take(l, "alice", 5, &retry) != NULL);
    CHECK(limits_take(l, "alice", 5, &retry) == NULL);
    CHECK(limits_take(l, "bob", 5, &retry) != NULL); /* alice's use is not bob's */
    limits_free(l);
}

TEST(limits_retry_after_says_when_a_token_is_back) {
    struct limits *l = limits_new(&(struct limits_config){.qps = 1, .burst = 1});
    unsigned retry = 0;
    CHECK(limits_take(l, "u", 0, &retry) != NULL);
    CHECK(limits_take(l, "u", 0, &retry) == NULL);
    CHECK_I64(retry, 1);
    limits_free(l);
    /* a burst below the rate is lifted to it; the wait for the next token
     * (500 ms at 2/s) is rounded up to a whole second */
    l = limits_new(&(struct limits_config){.qps = 2, .burst = 1});
    CHECK(limits_take(l, "u", 0, &retry) != NULL);
    CHECK(limits_take(l, "u", 0, &retry) != NULL); /* burst lifted to the rate: 2 */
    CHECK(limits_take(l, "u", 0, &retry) == NULL);
    CHECK_I64(retry, 1);
    limits_free(l);
}

TEST(limits_none_means_no_rate_limit) {
    struct limits *l = limits_new(&(struct limits_config){.qps = UINT32_MAX, .watches = UINT32_MAX});
    unsigned retry = 0;
    struct limits_user *u = NULL;
    for (int i = 0; i < 100000; i++) CHECK((u = limits_take(l, "u", 0, &retry)) != NULL);
    for (int i = 0; i < 10000; i++) CHECK(limits_watch_begin(l, u));
    limits_free(l);
}

TEST(limits_watches_are_counted_and_given_back) {
    struct limits *l = limits_new(&(struct limits_config){.watches = 3});
    unsigned retry = 0;
    struct limits_user *u = limits_take(l, "w", 0, &retry);
    CHECK(u != NULL);
    CHECK(limits_watch_begin(l, u));
    CHECK(limits_watch_begin(l, u));
    CHECK(limits_watch_begin(l, u));
    CHECK(!limits_watch_begin(l, u));
    limits_watch_end(l, u);
    CHECK(limits_watch_begin(l, u));
    struct limits_user *v = limits_take(l, "x", 0, &retry);
    CHECK(limits_watch_begin(l, v)); /* another user's count is its own */
    struct limits_stats st;
    limits_stats(l, &st);
    CHECK_I64(st.refused_watch, 1);
    limits_free(l);
}

TEST(limits_table_is_bounded_and_keeps_users_holding_watches) {
    struct limits *l = limits_new(&(struct limits_config){.qps = 100, .burst = 100});
    unsigned retry = 0;
    struct limits_user *pinned = limits_take(l, "pinned", 0, &retry);
    CHECK(limits_watch_begin(l, pinned));
    char name[32];
    for (int i = 0; i < LIMITS_MAX_USERS + 5000; i++) {
        snprintf(name, sizeof name, "user-%d", i);
        CHECK(limits_take(l, name, (uint64_t)i / 1000 * 1000 + 100000, &retry) != NULL);
    }
    struct limits_stats st;
    limits_stats(l, &st);
    CHECK(st.users <= LIMITS_MAX_USERS);
    /* the user holding a watch was not forgotten: its count is still there */
    CHECK(limits_take(l, "pinned", 200000, &retry) == pinned);
    limits_watch_end(l, pinned);
    limits_free(l);
}
