/* A singleton role's lease in Redis (ctl_lease.h). */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "ctl_lease.h"

struct ctl_lease {
    uv_timer_t timer;
    struct ctl_db *db;
    char role[32], key[64], epoch_key[64], id[128];
    unsigned lease_ms;
    bool held;
    long long epoch;
    uint64_t renewed_ms; /* when the holder last knew the key was its own (monotonic) */
    ctl_lease_fn on_change;
    void *ud;
};

static const char RENEW[] = "if redis.call('GET', KEYS[1]) == ARGV[1] then "
                            "return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end";
static const char RELEASE[] = "if redis.call('GET', KEYS[1]) == ARGV[1] then "
                              "return redis.call('DEL', KEYS[1]) else return 0 end";

static uint64_t mono_ms(void) { return uv_hrtime() / 1000000; }

static void end_term(struct ctl_lease *l, const char *why) {
    l->held = false;
    fprintf(stderr, "level=warn msg=\"%s: lost the lease\" epoch=%lld reason=%s\n", l->role, l->epoch, why);
    l->on_change(l->ud, false, l->epoch);
}

static void on_tick(uv_timer_t *t) {
    struct ctl_lease *l = t->data;
    uint64_t now = mono_ms();
    if (l->held) {
        /* paused or blocked past the safe part of the lease: another process
         * may hold it by now, so act no more, whatever Redis says next */
        if (now - l->renewed_ms > (uint64_t)l->lease_ms * 2 / 3) {
            end_term(l, "late");
            return;
        }
        redisReply *rep = ctl_redis(l->db, "EVAL %s 1 %s %s %u", RENEW, l->key, l->id, l->lease_ms);
        bool ok = rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == 1;
        freeReplyObject(rep);
        if (ok) l->renewed_ms = now;
        else end_term(l, "renewal refused");
        return;
    }
    redisReply *rep = ctl_redis(l->db, "SET %s %s NX PX %u", l->key, l->id, l->lease_ms);
    bool got = rep && rep->type == REDIS_REPLY_STATUS;
    freeReplyObject(rep);
    if (!got) return;
    rep = ctl_redis(l->db, "INCR %s", l->epoch_key);
    long long epoch = rep && rep->type == REDIS_REPLY_INTEGER ? rep->integer : 0;
    freeReplyObject(rep);
    if (!epoch) { /* no fencing token, no term: give the key back and try later */
        freeReplyObject(ctl_redis(l->db, "EVAL %s 1 %s %s", RELEASE, l->key, l->id));
        return;
    }
    l->held = true;
    l->epoch = epoch;
    l->renewed_ms = now;
    fprintf(stderr, "level=info msg=\"%s: leader\" epoch=%lld id=%s\n", l->role, epoch, l->id);
    l->on_change(l->ud, true, epoch);
}

struct ctl_lease *ctl_lease_start(uv_loop_t *loop, struct ctl_db *db, const char *role, const char *id,
                                  unsigned lease_ms, ctl_lease_fn on_change, void *ud) {
    struct ctl_lease *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    l->db = db;
    snprintf(l->role, sizeof l->role, "%s", role);
    snprintf(l->key, sizeof l->key, "peloton:%s:leader", role);
    snprintf(l->epoch_key, sizeof l->epoch_key, "peloton:%s:epoch", role);
    snprintf(l->id, sizeof l->id, "%s", id);
    l->lease_ms = lease_ms ? lease_ms : CTL_LEASE_DEFAULT_MS;
    l->on_change = on_change;
    l->ud = ud;
    uv_timer_init(loop, &l->timer);
    l->timer.data = l;
    unsigned every = l->lease_ms / 3 ? l->lease_ms / 3 : 1;
    uv_timer_start(&l->timer, on_tick, 0, every);
    return l;
}

static void on_closed(uv_handle_t *h) { free(h->data); }

void ctl_lease_stop(struct ctl_lease *l) {
    if (!l) return;
    if (l->held) {
        l->held = false;
        l->on_change(l->ud, false, l->epoch);
        freeReplyObject(ctl_redis(l->db, "EVAL %s 1 %s %s", RELEASE, l->key, l->id)); /* hand over at once */
        fprintf(stderr, "level=info msg=\"%s: released the lease\" epoch=%lld\n", l->role, l->epoch);
    }
    uv_timer_stop(&l->timer);
    uv_close((uv_handle_t *)&l->timer, on_closed);
}

bool ctl_lease_held(const struct ctl_lease *l) { return l && l->held; }
