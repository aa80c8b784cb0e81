/* Redis behind Sentinel (store.h): the primary's address, asked of the
 * Sentinels in turn, and checked with ROLE before a connection is used. */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"

#define SENTINEL_TIMEOUT_MS 500 /* each Sentinel's connect and answer */

/* Written once at start, before the threads that connect exist; read after. */
static struct {
    int n;
    char host[STORE_MAX_SENTINELS][256];
    int port[STORE_MAX_SENTINELS];
    char master[128];
} cfg;

int store_sentinel_config(const char *sentinels, const char *master_name, char *err, size_t errlen) {
    if (!master_name || !master_name[0] || strlen(master_name) >= sizeof cfg.master) {
        snprintf(err, errlen, "a Sentinel master name (1 to %zu bytes) is required", sizeof cfg.master - 1);
        return -EINVAL;
    }
    int n = 0;
    const char *p = sentinels ? sentinels : "";
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char one[300];
        if (n == STORE_MAX_SENTINELS || len == 0 || len >= sizeof one) {
            snprintf(err, errlen, "Sentinels \"%s\": 1 to %d host:port addresses, comma-separated", sentinels,
                     STORE_MAX_SENTINELS);
            return -EINVAL;
        }
        memcpy(one, p, len);
        one[len] = 0;
        if (store_parse_addr(one, cfg.host[n], sizeof cfg.host[n], &cfg.port[n]) || cfg.port[n] == 0) {
            snprintf(err, errlen, "Sentinel address \"%s\": expected host:port", one);
            return -EINVAL;
        }
        n++;
        p += len + (comma ? 1 : 0);
    }
    if (!n) {
        snprintf(err, errlen, "at least one Sentinel address is required");
        return -EINVAL;
    }
    cfg.n = n;
    snprintf(cfg.master, sizeof cfg.master, "%s", master_name);
    return 0;
}

bool store_sentinel_on(void) { return cfg.n > 0; }

static struct timeval tv(int ms) { return (struct timeval){ms / 1000, (ms % 1000) * 1000}; }

/* Whether host:port says it is a primary (ROLE's first element). */
static bool is_primary(const char *host, int port) {
    redisContext *c = redisConnectWithTimeout(host, port, tv(SENTINEL_TIMEOUT_MS));
    if (!c || c->err) {
        if (c) redisFree(c);
        return false;
    }
    redisSetTimeout(c, tv(SENTINEL_TIMEOUT_MS));
    redisReply *r = redisCommand(c, "ROLE");
    bool ok = r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 && r->element[0]->type == REDIS_REPLY_STRING &&
              !strcmp(r->element[0]->str, "master");
    if (r) freeReplyObject(r);
    redisFree(c);
    return ok;
}

int store_replicas_online(const redisReply *r) {
    if (!r || r->type != REDIS_REPLY_STRING) return -1;
    if (!strstr(r->str, "role:master")) return -1;
    int n = 0; /* one "slaveN:ip=…,port=…,state=online,…" line per replica */
    for (const char *p = r->str; (p = strstr(p, ",state=online,")); p++) n++;
    return n;
}

int store_sentinel_primary(char *host, size_t hostlen, int *port, char *err, size_t errlen) {
    snprintf(err, errlen, "no Sentinel answered for \"%s\"", cfg.master);
    for (int i = 0; i < cfg.n; i++) {
        redisContext *c = redisConnectWithTimeout(cfg.host[i], cfg.port[i], tv(SENTINEL_TIMEOUT_MS));
        if (!c || c->err) {
            if (c) redisFree(c);
            continue;
        }
        redisSetTimeout(c, tv(SENTINEL_TIMEOUT_MS));
        redisReply *r = redisCommand(c, "SENTINEL get-master-addr-by-name %s", cfg.master);
        bool named = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
                     r->element[0]->type == REDIS_REPLY_STRING && r->element[1]->type == REDIS_REPLY_STRING &&
                     strlen(r->element[0]->str) < hostlen;
        if (named) {
            char h[256];
            snprintf(h, sizeof h, "%s", r->element[0]->str);
            int p = atoi(r->element[1]->str);
            freeReplyObject(r);
            redisFree(c);
            if (p > 0 && p < 65536 && is_primary(h, p)) {
                snprintf(host, hostlen, "%s", h);
                *port = p;
                return 0;
            }
            snprintf(err, errlen, "the primary the Sentinels name for \"%s\" (%s:%d) is not a primary yet", cfg.master,
                     h, p);
            continue; /* mid-failover: another Sentinel may know better */
        }
        if (r) freeReplyObject(r);
        redisFree(c);
    }
    return -EIO;
}
