/* What the controller roles share (ctl.h). */
#include "ctl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "podspec.h"

static void log_reply_error(redisContext *c, redisReply *rep) {
    if (!rep) fprintf(stderr, "level=error msg=\"redis: %s\"\n", c->errstr[0] ? c->errstr : "no reply");
    else if (rep->type == REDIS_REPLY_ERROR) fprintf(stderr, "level=error msg=\"redis: %s\"\n", rep->str);
}

static void on_flush(uv_check_t *h) {
    struct ctl_db *db = h->data;
    uv_check_stop(h);
    ctl_redis_settle(db);
}

static void flush_closed(uv_handle_t *h) { free(h); }

struct ctl_db *ctl_db_open(uv_loop_t *loop, const char *addr, char *err, size_t errlen) {
    char host[256];
    const char *colon = strrchr(addr, ':');
    if (!colon || (size_t)(colon - addr) >= sizeof host) {
        snprintf(err, errlen, "redis address \"%s\": expected host:port", addr);
        return NULL;
    }
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = 0;
    struct timeval tv = {2, 0};
    redisContext *r = redisConnectWithTimeout(host, atoi(colon + 1), tv);
    if (!r || r->err) {
        snprintf(err, errlen, "redis %s: %s", addr, r ? r->errstr : "out of memory");
        if (r) redisFree(r);
        return NULL;
    }
    tv.tv_sec = 5;
    redisSetTimeout(r, tv);
    struct ctl_db *db = calloc(1, sizeof *db);
    uv_check_t *flush = malloc(sizeof *flush);
    if (!db || !flush) {
        snprintf(err, errlen, "out of memory");
        free(db);
        free(flush);
        redisFree(r);
        return NULL;
    }
    db->c = r;
    db->flush = flush;
    uv_check_init(loop, flush);
    flush->data = db;
    return db;
}

void ctl_db_close(struct ctl_db *db) {
    if (!db) return;
    ctl_redis_settle(db);
    uv_check_stop(db->flush);
    uv_close((uv_handle_t *)db->flush, flush_closed);
    redisFree(db->c);
    free(db);
}

void ctl_redis_settle(struct ctl_db *db) {
    while (db->deferred) {
        void *rep = NULL;
        db->deferred--;
        if (redisGetReply(db->c, &rep) != REDIS_OK) { /* the connection is gone: nothing more will come */
            log_reply_error(db->c, NULL);
            db->deferred = 0;
            break;
        }
        if (((redisReply *)rep)->type == REDIS_REPLY_ERROR) log_reply_error(db->c, rep);
        freeReplyObject(rep);
    }
}

redisReply *ctl_redis(struct ctl_db *db, const char *fmt, ...) {
    ctl_redis_settle(db);
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(db->c, fmt, ap);
    va_end(ap);
    if (!rep || rep->type == REDIS_REPLY_ERROR) {
        log_reply_error(db->c, rep);
        freeReplyObject(rep);
        return NULL;
    }
    return rep;
}

void ctl_redis_defer(struct ctl_db *db, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = redisvAppendCommand(db->c, fmt, ap);
    va_end(ap);
    if (rc != REDIS_OK) {
        log_reply_error(db->c, NULL);
        return;
    }
    if (db->deferred++ == 0) uv_check_start(db->flush, on_flush);
}

void ctl_redis_append(struct ctl_db *db, const char *fmt, ...) {
    ctl_redis_settle(db);
    va_list ap;
    va_start(ap, fmt);
    if (redisvAppendCommand(db->c, fmt, ap) != REDIS_OK) log_reply_error(db->c, NULL);
    va_end(ap);
}

redisReply *ctl_redis_reply(struct ctl_db *db) {
    void *rep = NULL;
    if (redisGetReply(db->c, &rep) != REDIS_OK) {
        log_reply_error(db->c, NULL);
        return NULL;
    }
    return rep;
}

const struct kc_informer_opts ctl_pods_slim = {.transform = pod_slim, .keep = pod_slim_keep};

void ctl_pod_event(struct kclient *kc, const char *component, const char *ns, const char *pod, const char *uid,
                   const char *type, const char *reason, const char *fmt, ...) {
    char msg[1024], ts[40], name[320], path[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(name, sizeof name, "%.200s.%lx%05lx", pod, (unsigned long)tv.tv_sec, (unsigned long)tv.tv_usec);
    json_t *ev = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:s, s:s, s:s, s:s}, s:s, s:s, s:s, s:{s:s}, s:s, s:s, "
                           "s:i}",
                           "apiVersion", "v1", "kind", "Event", "metadata", "name", name, "namespace", ns,
                           "involvedObject", "apiVersion", "v1", "kind", "Pod", "name", pod, "namespace", ns, "uid",
                           uid ? uid : "", "reason", reason, "message", msg, "type", type, "source", "component",
                           component, "firstTimestamp", ts, "lastTimestamp", ts, "count", 1);
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/events", ns);
    if (ev) kclient_request(kc, "POST", path, ev, NULL, NULL, NULL);
    json_decref(ev);
}
