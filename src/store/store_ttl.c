/* Objects past an age: the scan a TTL sweeper walks (store.h, "objects past
 * an age"; docs/store.md, "Expiry by age").
 *
 * Keys, beside the resource's own (P = the prefix):
 *   P ttl:<res>       sorted set: member a value of the counter, score the
 *                     second (Redis's clock) it was read; every version up
 *                     to the member was written before that second ended
 *   P ttllease:<res>  string: the id of the sweeper holding the lease (PX)
 *
 * An object's `v:` field is the version of its last write, so it is older
 * than the TTL when that version is at most the member of the newest mark
 * taken more than ttl + 1 seconds ago: no object is read or parsed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_int.h"

/* KEYS rv idx obj marks lease; ARGV owner lease_ms ttl_s after max.
 * Reply {1, holder} when another holds the lease, else
 * {0, threshold, next, scanned, member, version, ...}. */
static const char lua_ttl_scan[] =
    "local holder = redis.call('GET', KEYS[5])\n"
    "if holder and holder ~= ARGV[1] then return {1, holder} end\n"
    "redis.call('SET', KEYS[5], ARGV[1], 'PX', ARGV[2])\n"
    "local now = tonumber(redis.call('TIME')[1])\n"
    "local last = redis.call('ZREVRANGE', KEYS[4], 0, 0, 'WITHSCORES')\n"
    "if #last == 0 or tonumber(last[2]) < now then\n"
    "  redis.call('ZADD', KEYS[4], 'NX', now, redis.call('GET', KEYS[1]) or '0')\n"
    "end\n"
    "local m = redis.call('ZREVRANGEBYSCORE', KEYS[4], now - tonumber(ARGV[3]) - 1, '-inf', 'WITHSCORES', "
    "'LIMIT', 0, 1)\n"
    "if #m == 0 then return {0, '0', '', 0} end\n"
    "redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', '(' .. m[2])\n"
    "local thr = tonumber(m[1])\n"
    "local max = tonumber(ARGV[5])\n"
    "local from = '-'\n"
    "if ARGV[4] ~= '' then from = '(' .. ARGV[4] end\n"
    "local mem = redis.call('ZRANGE', KEYS[2], from, '+', 'BYLEX', 'LIMIT', 0, max)\n"
    "local out = {0, m[1], '', #mem}\n"
    "if #mem == max then out[3] = mem[#mem] end\n"
    "if #mem > 0 then\n"
    "  local f = {}\n"
    "  for i = 1, #mem do f[i] = 'v:' .. mem[i] end\n"
    "  local v = redis.call('HMGET', KEYS[3], unpack(f))\n"
    "  for i = 1, #mem do\n"
    "    local n = tonumber(v[i])\n"
    "    if n and n <= thr then out[#out + 1] = mem[i]; out[#out + 1] = v[i] end\n"
    "  end\n"
    "end\n"
    "return out\n";

static char *reply_str(const redisReply *r) {
    if (!r || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_STATUS)) return NULL;
    char *s = malloc(r->len + 1);
    if (s) {
        memcpy(s, r->str, r->len);
        s[r->len] = '\0';
    }
    return s;
}

void store_ttl_page_free(struct store_ttl_page *p) {
    if (!p) return;
    for (size_t i = 0; i < p->n; i++) {
        free(p->members[i]);
        free(p->versions[i]);
    }
    free(p->members);
    free(p->versions);
    free(p->next);
    memset(p, 0, sizeof *p);
}

/* Fills out from the script's reply: 0, or -EIO on a reply of another shape. */
static int read_page(const redisReply *r, struct store_ttl_page *out, char *err, size_t errlen) {
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 2 || r->element[0]->type != REDIS_REPLY_INTEGER) {
        store_reply_error(r, err, errlen);
        return -EIO;
    }
    if (r->element[0]->integer == 1) return 0; /* another sweeps */
    out->owner = true;
    if (r->elements < 4 || (r->elements - 4) % 2 || r->element[1]->type != REDIS_REPLY_STRING ||
        r->element[2]->type != REDIS_REPLY_STRING || r->element[3]->type != REDIS_REPLY_INTEGER) {
        snprintf(err, errlen, "redis: unexpected reply to the TTL scan");
        return -EIO;
    }
    out->threshold_rv = strtoull(r->element[1]->str, NULL, 10);
    if (r->element[2]->len && !(out->next = reply_str(r->element[2]))) return -ENOMEM;
    out->scanned = (size_t)r->element[3]->integer;
    size_t n = (r->elements - 4) / 2;
    if (!n) return 0;
    out->members = calloc(n, sizeof *out->members);
    out->versions = calloc(n, sizeof *out->versions);
    if (!out->members || !out->versions) return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        out->members[i] = reply_str(r->element[4 + 2 * i]);
        out->versions[i] = reply_str(r->element[5 + 2 * i]);
        out->n = i + 1;
        if (!out->members[i] || !out->versions[i]) return -ENOMEM;
    }
    return 0;
}

int store_ttl_scan(struct store *s, const char *resource, const char *owner, unsigned lease_ms, int64_t ttl_s,
                   const char *after, size_t max, struct store_ttl_page *out) {
    memset(out, 0, sizeof *out);
    struct store_raw raw;
    int rc = store_raw(s, &raw);
    if (rc) return rc;
    if ((rc = store_validate_key(resource, "", "x", raw.err, raw.errlen))) return rc;
    if (!owner || !owner[0] || lease_ms == 0 || ttl_s <= 0 || max == 0 || max > STORE_TTL_SCAN_MAX || !after) {
        snprintf(raw.err, raw.errlen, "store_ttl_scan: bad arguments");
        return -EINVAL;
    }
    char k_rv[STORE_PREFIX_MAX + 8], k_idx[STORE_PREFIX_MAX + 300], k_obj[STORE_PREFIX_MAX + 300],
        k_marks[STORE_PREFIX_MAX + 300], k_lease[STORE_PREFIX_MAX + 300], a_lease[24], a_ttl[24], a_max[24];
    snprintf(k_rv, sizeof k_rv, "%srv", raw.prefix);
    snprintf(k_idx, sizeof k_idx, "%sidx:%s", raw.prefix, resource);
    snprintf(k_obj, sizeof k_obj, "%sobj:%s", raw.prefix, resource);
    snprintf(k_marks, sizeof k_marks, "%sttl:%s", raw.prefix, resource);
    snprintf(k_lease, sizeof k_lease, "%sttllease:%s", raw.prefix, resource);
    snprintf(a_lease, sizeof a_lease, "%u", lease_ms);
    snprintf(a_ttl, sizeof a_ttl, "%lld", (long long)ttl_s);
    snprintf(a_max, sizeof a_max, "%zu", max);
    const char *argv[] = {"EVAL", lua_ttl_scan, "5", k_rv, k_idx, k_obj, k_marks, k_lease,
                          owner,  a_lease,      a_ttl, after, a_max};
    redisReply *r = redisCommandArgv(raw.c, (int)(sizeof argv / sizeof argv[0]), argv, NULL);
    if (!r) {
        snprintf(raw.err, raw.errlen, "redis: %s", raw.c->errstr[0] ? raw.c->errstr : "no reply");
        return -EIO;
    }
    rc = read_page(r, out, raw.err, raw.errlen);
    freeReplyObject(r);
    if (rc) store_ttl_page_free(out);
    return rc;
}
