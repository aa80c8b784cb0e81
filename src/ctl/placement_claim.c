/* Shared claims of host capacity (placement_claim.h). */
#include "placement_claim.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl.h"
#include "host.h"

/* KEYS[i]: the claims of node i. ARGV: owner, now, ttl, k (nodes), then
 * per node its free cpu, memory, gpu as the caller sees them, then per
 * task: uid, node index, cpu, memory, gpu. Returns 0, or the index of the
 * first node short of room. */
static const char CLAIM[] =
    "local me, now, ttl, k = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]) "
    "local free, mine, a = {}, {}, 5 "
    "for i = 1, k do free[i] = {tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])} a = a + 3 end "
    "local t = a "
    "while t <= #ARGV do mine[ARGV[t]] = true t = t + 5 end "
    "for i = 1, k do "
    "  local all = redis.call('HGETALL', KEYS[i]) "
    "  for j = 1, #all, 2 do "
    "    local o, c, m, g, e = string.match(all[j + 1], '^(%S+) (%S+) (%S+) (%S+) (%S+)$') "
    "    if not e or tonumber(e) <= now then redis.call('HDEL', KEYS[i], all[j]) "
    "    elseif o ~= me and not mine[all[j]] then "
    "      free[i][1] = free[i][1] - tonumber(c) free[i][2] = free[i][2] - tonumber(m) "
    "      free[i][3] = free[i][3] - tonumber(g) end "
    "  end "
    "end "
    "t = a "
    "while t <= #ARGV do "
    "  local f = free[tonumber(ARGV[t + 1])] "
    "  for r = 1, 3 do f[r] = f[r] - tonumber(ARGV[t + 1 + r]) "
    "    if f[r] < 0 then return tonumber(ARGV[t + 1]) end end "
    "  t = t + 5 "
    "end "
    "t = a "
    "while t <= #ARGV do "
    "  local key = KEYS[tonumber(ARGV[t + 1])] "
    "  redis.call('HSET', key, ARGV[t], me .. ' ' .. ARGV[t + 2] .. ' ' .. ARGV[t + 3] .. ' ' .. ARGV[t + 4] .. "
    "' ' .. (now + ttl)) "
    "  redis.call('PEXPIRE', key, 2 * ttl) "
    "  t = t + 5 "
    "end "
    "return 0";

/* KEYS[1] the node's claims, ARGV: uid, "bound" or "failed", now, grace. */
static const char CONSUME[] =
    "local v = redis.call('HGET', KEYS[1], ARGV[1]) "
    "if not v then return 0 end "
    "if ARGV[2] ~= 'bound' then return redis.call('HDEL', KEYS[1], ARGV[1]) end "
    "local head = string.match(v, '^(%S+ %S+ %S+ %S+) ') "
    "if not head then return redis.call('HDEL', KEYS[1], ARGV[1]) end "
    "redis.call('HSET', KEYS[1], ARGV[1], head .. ' ' .. (tonumber(ARGV[3]) + tonumber(ARGV[4]))) "
    "return 1";

static int64_t wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int pl_claims_init(struct pl_claims *c, struct ctl_db *db, const char *owner, uint32_t ttl_ms, uint32_t grace_ms) {
    c->db = db;
    snprintf(c->owner, sizeof c->owner, "%s", owner);
    c->ttl_ms = ttl_ms;
    c->grace_ms = grace_ms;
    c->claim = ctl_db_script(db, CLAIM);
    c->consume = ctl_db_script(db, CONSUME);
    return c->claim < 0 || c->consume < 0 ? -1 : 0;
}

/* A resource as the script's decimal number (unlimited: a large one). */
static long long res_arg(int64_t v) { return v == RES_UNLIMITED ? (long long)1 << 60 : (long long)v; }

/* The script's arguments: pointers into one buffer of NUL-terminated strings. */
struct args {
    const char **v;
    size_t *len;
    size_t n, cap;
    char *buf, *at, *end;
};

static void arg_str(struct args *a, const char *s) {
    if (a->n == a->cap) return;
    a->v[a->n] = s;
    a->len[a->n++] = strlen(s);
}

/* A copy of what fmt makes, kept in the buffer. */
static void arg_fmt(struct args *a, const char *fmt, const char *s, long long v) {
    int len = s ? snprintf(a->at, (size_t)(a->end - a->at), fmt, s) : snprintf(a->at, (size_t)(a->end - a->at), fmt, v);
    if (len < 0 || len >= a->end - a->at) return;
    arg_str(a, a->at);
    a->at += len + 1;
}

int pl_claims_take(struct pl_claims *c, const struct host_fleet *f, const uint32_t *hosts, const char *const *uids,
                   const struct resvec *req, uint32_t n, char *node, size_t cap) {
    if (!n) return 0;
    /* the gang's distinct nodes, in order of first use */
    uint32_t *nodes = malloc(n * sizeof *nodes), *slot = malloc(n * sizeof *slot), k = 0;
    struct args a = {.cap = 7 + (size_t)n * 9};
    size_t bytes = a.cap * 24 + (size_t)n * (sizeof PL_CLAIM_KEY + 256);
    a.v = malloc(a.cap * sizeof *a.v);
    a.len = malloc(a.cap * sizeof *a.len);
    a.buf = a.at = malloc(bytes);
    a.end = a.buf ? a.buf + bytes : NULL;
    int rc = -1;
    if (!nodes || !slot || !a.v || !a.len || !a.buf) goto out;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t j = 0;
        while (j < k && nodes[j] != hosts[i]) j++;
        if (j == k) nodes[k++] = hosts[i];
        slot[i] = j + 1;
    }
    arg_str(&a, "EVALSHA");
    arg_str(&a, ctl_db_sha(c->db, c->claim));
    arg_fmt(&a, "%lld", NULL, k);
    for (uint32_t j = 0; j < k; j++) arg_fmt(&a, PL_CLAIM_KEY "%s", host_name(f, nodes[j]), 0);
    arg_str(&a, c->owner);
    arg_fmt(&a, "%lld", NULL, wall_ms());
    arg_fmt(&a, "%lld", NULL, c->ttl_ms);
    arg_fmt(&a, "%lld", NULL, k);
    for (uint32_t j = 0; j < k; j++) {
        struct resvec fr = host_free(&f->hosts[nodes[j]]);
        arg_fmt(&a, "%lld", NULL, res_arg(fr.v[RES_CPU]));
        arg_fmt(&a, "%lld", NULL, res_arg(fr.v[RES_MEMORY]));
        arg_fmt(&a, "%lld", NULL, res_arg(fr.v[RES_GPU]));
    }
    for (uint32_t i = 0; i < n; i++) {
        arg_str(&a, uids[i]);
        arg_fmt(&a, "%lld", NULL, slot[i]);
        arg_fmt(&a, "%lld", NULL, req[i].v[RES_CPU]);
        arg_fmt(&a, "%lld", NULL, req[i].v[RES_MEMORY]);
        arg_fmt(&a, "%lld", NULL, req[i].v[RES_GPU]);
    }
    if (a.n != 7 + (size_t)k * 4 + (size_t)n * 5) goto out; /* a node name too long for the buffer */
    redisReply *rep = ctl_redis_argv(c->db, (int)a.n, a.v, a.len);
    if (rep && rep->type == REDIS_REPLY_INTEGER) {
        rc = rep->integer == 0 ? 0 : 1;
        if (rc && rep->integer >= 1 && rep->integer <= k)
            snprintf(node, cap, "%s", host_name(f, nodes[rep->integer - 1]));
    }
    freeReplyObject(rep);
out:
    free(nodes);
    free(slot);
    free(a.v);
    free(a.len);
    free(a.buf);
    return rc;
}

void pl_claims_settle(struct pl_claims *c, const char *node, const char *uid, bool bound) {
    ctl_redis_defer(c->db, "EVALSHA %s 1 %s%s %s %s %lld %u", ctl_db_sha(c->db, c->consume), PL_CLAIM_KEY, node, uid,
                    bound ? "bound" : "failed", (long long)wall_ms(), c->grace_ms);
}
