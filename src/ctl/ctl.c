/* What the controller roles share (ctl.h). */
#include "ctl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

redisContext *ctl_redis_connect(const char *addr, char *err, size_t errlen) {
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
    return r;
}

redisReply *ctl_redis(redisContext *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(r, fmt, ap);
    va_end(ap);
    if (!rep) {
        fprintf(stderr, "level=error msg=\"redis: %s\"\n", r->errstr);
        return NULL;
    }
    if (rep->type == REDIS_REPLY_ERROR) {
        fprintf(stderr, "level=error msg=\"redis: %s\"\n", rep->str);
        freeReplyObject(rep);
        return NULL;
    }
    return rep;
}

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
