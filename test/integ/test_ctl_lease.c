/* Integration tests of a role's lease and its fenced writes
 * (src/ctl/ctl_lease.c) against a real redis-server: a write of a term whose
 * epoch has moved on (a newer term began elsewhere) is refused by Redis,
 * logged, counted, and ends the term; nothing the old term writes after that
 * lands. A holder whose renewal is overdue stops writing by its own clock,
 * before the lease in Redis can have run out. */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "ctl.h"
#include "ctl_lease.h"
#include "metrics.h"
#include "redis_fixture.h"
#include "test.h"

struct terms {
    int began, ended;
    long long epoch;
};

static void on_term(void *ud, bool leader, long long epoch) {
    struct terms *t = ud;
    if (leader) t->began++;
    else t->ended++;
    t->epoch = epoch;
}

static bool exists(struct ctl_db *db, const char *key) {
    redisReply *r = ctl_redis(db, "EXISTS %s", key);
    bool yes = r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    return yes;
}

static struct ctl_db *open_db(uv_loop_t *loop, struct redis_fixture *f) {
    char addr[64], err[256];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", f->proc.port);
    struct ctl_db *db = ctl_db_open(loop, addr, err, sizeof err);
    if (!db) fprintf(stderr, "ctl_db_open: %s\n", err);
    return db;
}

/* Runs the loop until the term ended or 2 s passed. Without blocking: the
 * pass that ends the term (the tick at 0 after a refusal) would else go on
 * to wait for the next tick, a third of the lease (10 s) later. */
static void run_until_ended(uv_loop_t *loop, const struct terms *t) {
    uint64_t until = uv_hrtime() / 1000000 + 2000;
    while (!t->ended && uv_hrtime() / 1000000 < until) {
        uv_run(loop, UV_RUN_NOWAIT);
        if (!t->ended) usleep(1000);
    }
}

/* A redis-server, a loop and a connection to it: each test's setting. */
struct setting {
    struct redis_fixture f;
    uv_loop_t loop;
    struct ctl_db *db;
    struct terms t;
};

static int setting_open(struct setting *s) {
    memset(s, 0, sizeof *s);
    if (redis_fixture_start(&s->f, NULL)) return -1;
    uv_loop_init(&s->loop);
    s->db = open_db(&s->loop, &s->f);
    return s->db ? 0 : -1;
}

/* Stops the lease (NULL-safe), closes the connection and the server. */
static void setting_close(struct setting *s, struct ctl_lease *l) {
    ctl_lease_stop(l);
    ctl_db_close(s->db);
    uv_run(&s->loop, UV_RUN_DEFAULT);
    uv_loop_close(&s->loop);
    redis_fixture_stop(&s->f);
}

TEST(ctl_lease_a_stale_terms_writes_are_refused_and_end_it) {
    struct setting st;
    REQUIRE_I64(setting_open(&st), 0);
    struct ctl_db *db = st.db;
    struct metrics *reg = metrics_new();
    REQUIRE(reg);
    struct terms *tp = &st.t;
    struct ctl_lease *l = ctl_lease_new(&st.loop, db, "fenced", "me", 30000, on_term, tp);
    REQUIRE(l);
    ctl_lease_metrics(l, reg);
    ctl_lease_begin(l);
    CHECK_I64(tp->began, 1);
    CHECK(ctl_lease_held(l));
    /* a write of the current term lands */
    CHECK_I64(ctl_lease_defer(l, db, "SET %s %s", "ctl:before", "x"), 0);
    ctl_redis_settle(db);
    CHECK(exists(db, "ctl:before"));
    /* a newer term elsewhere: the epoch moves on (the holder's renewal is 10 s away) */
    freeReplyObject(ctl_redis(db, "INCR peloton:fenced:epoch"));
    CHECK_I64(ctl_lease_defer(l, db, "SET %s %s", "ctl:after", "x"), 0); /* sent; Redis refuses it */
    CHECK_I64(ctl_lease_defer(l, db, "HSET %s%s f %s", "ctl:", "gang", "v"), 0);
    ctl_redis_settle(db);
    CHECK(!exists(db, "ctl:after"));
    CHECK(!exists(db, "ctl:gang"));
    CHECK(!ctl_lease_held(l)); /* it stops acting at once */
    /* its writes from now on do not even leave */
    CHECK_I64(ctl_lease_defer(l, db, "SET %s %s", "ctl:later", "x"), -1);
    redisReply *r = ctl_lease_redis(l, db, "SET %s %s", "ctl:later", "x");
    CHECK(r == NULL);
    ctl_redis_settle(db);
    CHECK(!exists(db, "ctl:later"));
    run_until_ended(&st.loop, tp); /* the term ends from the loop */
    CHECK_I64(tp->ended, 1);
    char *text = NULL;
    size_t len = 0;
    REQUIRE_I64(metrics_render(reg, &text, &len), 0);
    CHECK(strstr(text, "peloton_lease_writes_refused_total{role=\"fenced\"} 4") != NULL);
    free(text);
    /* an unfenced write (a role without a lease) goes straight through */
    CHECK_I64(ctl_lease_defer(NULL, db, "SET %s %s", "ctl:unfenced", "x"), 0);
    ctl_redis_settle(db);
    CHECK(exists(db, "ctl:unfenced"));
    setting_close(&st, l);
    metrics_free(reg);
}

TEST(ctl_lease_the_fence_script_survives_a_script_flush_and_a_new_connection) {
    struct setting st;
    REQUIRE_I64(setting_open(&st), 0);
    struct ctl_db *db = st.db;
    struct ctl_lease *l = ctl_lease_start(&st.loop, db, "flushed", "me", 30000, on_term, &st.t);
    REQUIRE(l && ctl_lease_held(l));
    freeReplyObject(ctl_redis(db, "SCRIPT FLUSH"));
    ctl_lease_defer(l, db, "SET %s %s", "ctl:lost", "x"); /* NOSCRIPT: lost, and the script is loaded again */
    ctl_redis_settle(db);
    CHECK(!exists(db, "ctl:lost"));
    CHECK_I64(ctl_lease_defer(l, db, "SET %s %s", "ctl:kept", "x"), 0);
    ctl_redis_settle(db);
    CHECK(exists(db, "ctl:kept"));
    CHECK(ctl_lease_held(l)); /* a missing script is no refusal */
    setting_close(&st, l);
}

TEST(ctl_lease_a_holder_that_did_not_renew_stops_before_its_lease_can_run_out) {
    struct setting st;
    REQUIRE_I64(setting_open(&st), 0);
    struct ctl_db *db = st.db;
    struct ctl_lease *l = ctl_lease_start(&st.loop, db, "slow", "me", 3000, on_term, &st.t);
    REQUIRE(l && ctl_lease_held(l));
    /* the loop does not run for 2.5 s (a long pause): no renewal; the
     * lease in Redis (3 s) still holds, but the holder's own time (2.4 s) is up */
    nanosleep(&(struct timespec){2, 500 * 1000000L}, NULL);
    CHECK(exists(db, "peloton:slow:leader"));
    CHECK(!ctl_lease_held(l));
    CHECK_I64(ctl_lease_defer(l, db, "SET %s %s", "ctl:late", "x"), -1);
    ctl_redis_settle(db);
    CHECK(!exists(db, "ctl:late"));
    run_until_ended(&st.loop, &st.t);
    CHECK_I64(st.t.ended, 1);
    setting_close(&st, l);
}

TEST(ctl_lease_fenced_writes_batched_keep_their_order_among_others) {
    struct setting st;
    REQUIRE_I64(setting_open(&st), 0);
    struct ctl_db *db = st.db;
    struct ctl_lease *l = ctl_lease_start(&st.loop, db, "batched", "me", 30000, on_term, &st.t);
    REQUIRE(l && ctl_lease_held(l));
    /* fenced and unfenced writes interleaved, a value with spaces, then a read: in order */
    enum { N = 6000 };
    for (int i = 0; i < N; i++) {
        if (i % 7 == 3) ctl_redis_defer(db, "RPUSH ctl:order %d", i);
        else ctl_lease_defer(l, db, "RPUSH ctl:order %d", i);
        if (i == 4000) { /* a read in between sends what waits first */
            redisReply *r = ctl_redis(db, "LLEN ctl:order");
            CHECK(r && r->type == REDIS_REPLY_INTEGER && r->integer == 4001);
            freeReplyObject(r);
        }
    }
    ctl_lease_defer(l, db, "SET ctl:spaced %s", "a value with spaces");
    /* a synchronous fenced write answers with its own reply */
    redisReply *r = ctl_lease_redis(l, db, "LPOP ctl:order");
    CHECK(r && r->type == REDIS_REPLY_STRING && !strcmp(r->str, "0"));
    freeReplyObject(r);
    uv_run(&st.loop, UV_RUN_NOWAIT);
    r = ctl_redis(db, "LLEN ctl:order");
    CHECK(r && r->type == REDIS_REPLY_INTEGER && r->integer == N - 1);
    freeReplyObject(r);
    int bad = 0;
    for (int i = 1; i < N; i += 397) {
        r = ctl_redis(db, "LINDEX ctl:order %d", i - 1);
        if (!r || r->type != REDIS_REPLY_STRING || atoi(r->str) != i) bad++;
        freeReplyObject(r);
    }
    CHECK_I64(bad, 0);
    r = ctl_redis(db, "GET ctl:spaced");
    CHECK(r && r->type == REDIS_REPLY_STRING && !strcmp(r->str, "a value with spaces"));
    freeReplyObject(r);
    CHECK(ctl_lease_held(l));
    CHECK_I64(db->deferred, 0);
    setting_close(&st, l);
}

/* Runs the loop until *n (a count of terms begun or ended) reaches want
 * or ms passed (without blocking). */
static void run_until_n(uv_loop_t *loop, const int *n, int want, unsigned ms) {
    uint64_t until = uv_hrtime() / 1000000 + ms;
    while (*n < want && uv_hrtime() / 1000000 < until) {
        uv_run(loop, UV_RUN_NOWAIT);
        if (*n < want) usleep(1000);
    }
}

static long long redis_int(struct ctl_db *db, const char *fmt, const char *key) {
    redisReply *r = ctl_redis(db, fmt, key);
    long long v = r && r->type == REDIS_REPLY_INTEGER ? r->integer
                  : r && r->type == REDIS_REPLY_STRING ? atoll(r->str)
                                                       : -1;
    freeReplyObject(r);
    return v;
}

/* A term that ended while the lease key still holds the holder's id (here:
 * a refused write; a Redis failover that kept the key, or the holder's own
 * clock, leave it so too) is followed by a new term at the next attempt,
 * with a new epoch: the key is not waited out. A key that holds another
 * id is not taken. */
TEST(ctl_lease_a_key_holding_its_own_id_is_taken_again) {
    struct setting st;
    REQUIRE_I64(setting_open(&st), 0);
    struct ctl_db *db = st.db;
    struct ctl_lease *l = ctl_lease_start(&st.loop, db, "retake", "me", 3000, on_term, &st.t);
    REQUIRE(l && ctl_lease_held(l));
    CHECK_I64(st.t.epoch, 1);
    freeReplyObject(ctl_redis(db, "INCR peloton:retake:epoch")); /* bumped behind its back: the key still "me" */
    freeReplyObject(ctl_redis(db, "PEXPIRE peloton:retake:leader 60000"));
    CHECK_I64(ctl_lease_defer(l, db, "SET %s %s", "ctl:refused", "x"), 0);
    ctl_redis_settle(db);
    run_until_ended(&st.loop, &st.t);
    CHECK_I64(st.t.ended, 1);
    run_until_n(&st.loop, &st.t.began, 2, 2500); /* the next attempt comes within a third of the lease */
    CHECK_I64(st.t.began, 2);
    CHECK_I64(st.t.epoch, 3);
    CHECK(ctl_lease_held(l));
    long long ttl = redis_int(db, "PTTL %s", "peloton:retake:leader");
    CHECK(ttl > 0 && ttl <= 3000); /* the lease's, not the 60 s the key had */
    /* another's key is not taken */
    freeReplyObject(ctl_redis(db, "SET peloton:retake:leader someone-else PX 60000"));
    run_until_n(&st.loop, &st.t.ended, 2, 2500); /* its renewal finds the key taken: the term ends */
    CHECK_I64(st.t.ended, 2);
    run_until_n(&st.loop, &st.t.began, 3, 2500);
    CHECK_I64(st.t.began, 2);
    CHECK_I64(redis_int(db, "GET %s", "peloton:retake:epoch"), 3);
    setting_close(&st, l);
}
