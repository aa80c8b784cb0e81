/* Integration tests of the controllers' Redis connection (src/ctl/ctl.c)
 * against a real redis-server: deferred writes in bulk, across many sends of
 * the output buffer, keep their order and all arrive, also when calls that
 * want a reply come in between. */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "ctl.h"
#include "redis_fixture.h"
#include "test.h"

TEST(ctl_db_deferred_writes_in_bulk_arrive_in_order) {
    struct redis_fixture f;
    REQUIRE_I64(redis_fixture_start(&f, NULL), 0);
    uv_loop_t loop;
    uv_loop_init(&loop);
    char addr[64], err[256];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", f.proc.port);
    struct ctl_db *db = ctl_db_open(&loop, addr, err, sizeof err);
    if (!db) {
        test_fail(__FILE__, __LINE__, "ctl_db_open: %s", err);
        uv_loop_close(&loop);
        redis_fixture_stop(&f);
        return;
    }
    /* 20,000 writes of ~60 bytes on the wire: the 64 KiB send threshold is
     * crossed about twenty times within one loop turn, and every 3,001st
     * write a read settles what waits */
    enum { N = 20000 };
    long long lens[8];
    int nl = 0;
    for (int i = 0; i < N; i++) {
        ctl_redis_defer(db, "RPUSH ctl:test %s-%08d", "item-with-some-length", i);
        if (i % 3001 == 3000 && nl < 8) {
            redisReply *r = ctl_redis(db, "LLEN ctl:test");
            lens[nl++] = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
            freeReplyObject(r);
        }
    }
    for (int k = 0; k < nl; k++) CHECK_I64(lens[k], 3001LL * (k + 1)); /* settled in order before each read */
    uv_run(&loop, UV_RUN_NOWAIT); /* the turn's end sends and reads the rest */
    redisReply *r = ctl_redis(db, "LLEN ctl:test");
    REQUIRE(r && r->type == REDIS_REPLY_INTEGER);
    CHECK_I64(r->integer, N);
    freeReplyObject(r);
    int bad = 0;
    for (int i = 0; i < N; i += 997) {
        char want[64];
        snprintf(want, sizeof want, "item-with-some-length-%08d", i);
        r = ctl_redis(db, "LINDEX ctl:test %d", i);
        if (!r || r->type != REDIS_REPLY_STRING || strcmp(r->str, want)) bad++;
        freeReplyObject(r);
    }
    CHECK_I64(bad, 0);
    CHECK_I64(db->deferred, 0);
    ctl_db_close(db);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    redis_fixture_stop(&f);
}
