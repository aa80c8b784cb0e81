/* A singleton role's lease in Redis (ctl_lease.h). */
#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "ctl_lease.h"
#include "metrics.h"

struct ctl_lease {
    uv_timer_t timer, deadline;
    int open; /* timers not yet closed */
    struct ctl_db *db;
    char role[32], key[64], epoch_key[64], id[128];
    unsigned lease_ms;
    bool held, stale;
    const char *ending; /* why a stale term ends at the next tick */
    long long epoch;
    uint64_t renewed_ms; /* when the holder last knew the key was its own (monotonic) */
    uint64_t valid_ms;   /* until when it acts: before the lease can have run out in Redis (monotonic) */
    uint64_t refused;    /* writes refused in this term */
    struct metrics_series *m_refused;
    ctl_lease_fn on_change;
    void *ud;
};

static const char RENEW[] = "if redis.call('GET', KEYS[1]) == ARGV[1] then "
                            "return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end";
static const char RELEASE[] = "if redis.call('GET', KEYS[1]) == ARGV[1] then "
                              "return redis.call('DEL', KEYS[1]) else return 0 end";
/* A new term: the key taken when it is free or still holds this
 * contender's own id, and the epoch moved on, atomically; the new epoch,
 * or 0 when another holds the key. A key that holds the contender's id
 * outlived its last term (a Redis failover that kept it, a term ended by
 * the holder's own clock or by a refused write): nobody took the lease
 * since (an acquisition replaces the value), so waiting it out would only
 * leave the role without a holder for up to a lease. */
static const char ACQUIRE[] = "local v = redis.call('GET', KEYS[1]) "
                              "if v and v ~= ARGV[1] then return 0 end "
                              "redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) "
                              "return redis.call('INCR', KEYS[2])";

static uint64_t mono_ms(void) { return uv_hrtime() / 1000000; }

static void on_deadline(uv_timer_t *t);

/* The key was this holder's at `sent` (the request left before Redis ran
 * it, so the lease there lasts at least until sent + lease_ms): it acts
 * until four fifths of that, the rest a margin for clock rates and the
 * loop's lateness. */
static void extend(struct ctl_lease *l, uint64_t sent) {
    l->renewed_ms = sent;
    l->valid_ms = sent + (uint64_t)l->lease_ms * 4 / 5;
    uint64_t now = mono_ms();
    uv_timer_start(&l->deadline, on_deadline, l->valid_ms > now ? l->valid_ms - now : 0, 0);
}

static void end_term(struct ctl_lease *l, const char *why) {
    l->held = false;
    uv_timer_stop(&l->deadline);
    fprintf(stderr, "level=warn msg=\"%s: lost the lease\" epoch=%lld reason=%s\n", l->role, l->epoch, why);
    l->on_change(l->ud, false, l->epoch);
}

/* No renewal got through in time: the term ends before the lease in Redis can run out. */
static void on_deadline(uv_timer_t *t) {
    struct ctl_lease *l = t->data;
    if (l->held && mono_ms() >= l->valid_ms) end_term(l, "not-renewed-in-time");
}

static void on_tick(uv_timer_t *t) {
    struct ctl_lease *l = t->data;
    uint64_t now = mono_ms();
    if (l->held && l->stale) { /* a write was refused: a newer term exists, or its time ran out */
        end_term(l, l->ending);
        return;
    }
    if (l->held) {
        /* The key still holding this id proves nobody else took the lease
         * since the last renewal (an acquisition replaces the value), even
         * after a pause past the lease: the term goes on. Otherwise it ends
         * here; what the loop ran between a long pause and this check is
         * what the fence script is for. */
        bool late = now - l->renewed_ms > (uint64_t)l->lease_ms * 2 / 3;
        redisReply *rep = ctl_redis(l->db, "EVAL %s 1 %s %s %u", RENEW, l->key, l->id, l->lease_ms);
        bool ok = rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == 1;
        freeReplyObject(rep);
        if (!ok) {
            end_term(l, late ? "late" : "renewal refused");
            return;
        }
        if (late)
            fprintf(stderr, "level=warn msg=\"%s: lease renewed late\" epoch=%lld late_ms=%llu\n", l->role, l->epoch,
                    (unsigned long long)(now - l->renewed_ms));
        extend(l, now);
        return;
    }
    redisReply *rep = ctl_redis(l->db, "EVAL %s 2 %s %s %s %u", ACQUIRE, l->key, l->epoch_key, l->id, l->lease_ms);
    long long epoch = rep && rep->type == REDIS_REPLY_INTEGER ? rep->integer : 0;
    freeReplyObject(rep);
    if (epoch <= 0) return; /* another holds it, or Redis failed: nothing taken */
    l->held = true;
    l->stale = false;
    l->refused = 0;
    l->epoch = epoch;
    extend(l, now);
    fprintf(stderr, "level=info msg=\"%s: leader\" epoch=%lld id=%s\n", l->role, epoch, l->id);
    l->on_change(l->ud, true, epoch);
}

/* A fenced write of this role was refused (ctl_db's hook; inside a reply's
 * reading, so the term ends from the timer, not here). */
static void on_refused(void *ud, const char *refusal) {
    struct ctl_lease *l = ud;
    /* "<mark> <key> <epoch> <held> <commands>" */
    char held[32] = "?";
    long long n = 1;
    if (sscanf(refusal, "%*s %*s %*s %31s %lld", held, &n) < 2 || n < 1) n = 1;
    metrics_add(l->m_refused, (uint64_t)n);
    if (l->refused == 0) /* one line a term; the metric counts them all */
        fprintf(stderr, "level=warn msg=\"%s: write refused, stale epoch\" epoch=%lld held=%s writes=%lld\n", l->role,
                l->epoch, held, n);
    l->refused += (uint64_t)n;
    if (l->held && !l->stale) {
        l->stale = true;
        l->ending = "stale-epoch";
        unsigned every = l->lease_ms / 3 ? l->lease_ms / 3 : 1;
        uv_timer_start(&l->timer, on_tick, 0, every);
    }
}

struct ctl_lease *ctl_lease_new(uv_loop_t *loop, struct ctl_db *db, const char *role, const char *id,
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
    if (ctl_db_hook(db, l->epoch_key, on_refused, l)) {
        free(l);
        return NULL;
    }
    uv_timer_init(loop, &l->timer);
    uv_timer_init(loop, &l->deadline);
    l->timer.data = l->deadline.data = l;
    l->open = 2;
    return l;
}

void ctl_lease_begin(struct ctl_lease *l) {
    unsigned every = l->lease_ms / 3 ? l->lease_ms / 3 : 1;
    uv_timer_start(&l->timer, on_tick, every, every);
    on_tick(&l->timer); /* the first attempt now: a role without a contender starts at once */
}

struct ctl_lease *ctl_lease_start(uv_loop_t *loop, struct ctl_db *db, const char *role, const char *id,
                                  unsigned lease_ms, ctl_lease_fn on_change, void *ud) {
    struct ctl_lease *l = ctl_lease_new(loop, db, role, id, lease_ms, on_change, ud);
    if (l) ctl_lease_begin(l);
    return l;
}

void ctl_lease_metrics(struct ctl_lease *l, struct metrics *reg) {
    static const char *const label[] = {"role"};
    struct metrics_family *f =
        reg ? metrics_counter(reg, "peloton_lease_writes_refused_total",
                              "Writes of a role's term refused by the fence script: the role's epoch had moved on "
                              "(a newer term exists), or refused before sending (the lease may have run out)",
                              1, label)
            : NULL;
    l->m_refused = metrics_series1(f, l->role);
}

static void on_closed(uv_handle_t *h) {
    struct ctl_lease *l = h->data;
    if (--l->open == 0) free(l);
}

void ctl_lease_stop(struct ctl_lease *l) {
    if (!l) return;
    if (l->held) {
        l->held = false;
        l->on_change(l->ud, false, l->epoch);
        freeReplyObject(ctl_redis(l->db, "EVAL %s 1 %s %s", RELEASE, l->key, l->id)); /* hand over at once */
        fprintf(stderr, "level=info msg=\"%s: released the lease\" epoch=%lld\n", l->role, l->epoch);
    }
    ctl_db_unhook(l->db, l->epoch_key, l);
    uv_timer_stop(&l->timer);
    uv_timer_stop(&l->deadline);
    uv_close((uv_handle_t *)&l->timer, on_closed);
    uv_close((uv_handle_t *)&l->deadline, on_closed);
}

bool ctl_lease_held(const struct ctl_lease *l) { return l && l->held && !l->stale && mono_ms() < l->valid_ms; }

long long ctl_lease_epoch(const struct ctl_lease *l) { return l ? l->epoch : 0; }

/* Whether a write of the term may leave; one that may not is counted
 * (and, past the local deadline, ends the term from the timer). */
static bool may_write(struct ctl_lease *l) {
    if (l->held && !l->stale && mono_ms() < l->valid_ms && l->db->fence_sha[0]) return true;
    metrics_inc(l->m_refused);
    if (l->held && !l->stale) {
        l->stale = true; /* past the deadline (its timer not yet run), or no script: end the term */
        l->ending = l->db->fence_sha[0] ? "not-renewed-in-time" : "no-fence-script";
        if (!l->refused++)
            fprintf(stderr, "level=warn msg=\"%s: write refused, lease may have run out\" epoch=%lld\n", l->role,
                    l->epoch);
        uv_timer_start(&l->timer, on_tick, 0, l->lease_ms / 3 ? l->lease_ms / 3 : 1);
    }
    return false;
}

int ctl_lease_defer(struct ctl_lease *l, struct ctl_db *db, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = 0;
    if (!l) ctl_redis_vdefer(db, fmt, ap);
    else rc = may_write(l) ? ctl_redis_vfenced(l->db, l->epoch_key, l->epoch, fmt, ap) : -1;
    va_end(ap);
    return rc;
}

redisReply *ctl_lease_redis(struct ctl_lease *l, struct ctl_db *db, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = NULL;
    if (!l) rep = ctl_vredis(db, fmt, ap);
    else if (may_write(l)) rep = ctl_redis_vfenced_now(l->db, l->epoch_key, l->epoch, fmt, ap);
    va_end(ap);
    return rep;
}
