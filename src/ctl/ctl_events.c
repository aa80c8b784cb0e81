/* Aggregated Events and the PodScheduled condition (ctl.h).
 *
 * The recorder keeps, for the Events it posted most recently, the Event's
 * name and count under a key made of everything that makes two Events the
 * same (object, type, reason, message, as client-go's recorder compares
 * them). The same Event again is a PATCH of count and lastTimestamp on the
 * one already posted, not a new object (posted again, with its count, if
 * the API server no longer has it). The cache is bounded (least recently
 * used out); an Event that fell out of it is posted anew. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "ctl.h"
#include "strmap.h"

struct rec_entry {
    char *key;        /* the strmap's key, owned here */
    char *ns, *name;  /* the Event's namespace and name */
    char first[40];   /* firstTimestamp */
    uint32_t count;
    struct rec_entry *prev, *next; /* most recently used first */
};

struct ctl_recorder {
    struct kclient *kc;
    char *component;
    struct strmap by_key;
    struct rec_entry *head, *tail;
    size_t n, cap;
    uint64_t posted, bumped;
};

static void now_ts(char *ts, size_t len, struct timeval *tv_out) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    strftime(ts, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (tv_out) *tv_out = tv;
}

json_t *ctl_event_json(const char *component, const char *api_version, const char *kind, const char *ns,
                       const char *name, const char *uid, const char *type, const char *reason, const char *msg,
                       const char *ename, const char *first, const char *last, uint32_t count) {
    const char *evns = ns[0] ? ns : "default";
    json_t *obj = json_pack("{s:s, s:s, s:s, s:s}", "apiVersion", api_version, "kind", kind, "name", name, "uid",
                            uid ? uid : "");
    if (obj && ns[0]) json_object_set_new(obj, "namespace", json_string(ns));
    return obj ? json_pack("{s:s, s:s, s:{s:s, s:s}, s:o, s:s, s:s, s:s, s:{s:s}, s:s, s:s, s:I}", "apiVersion", "v1",
                           "kind", "Event", "metadata", "name", ename, "namespace", evns, "involvedObject", obj,
                           "reason", reason, "message", msg, "type", type, "source", "component", component,
                           "firstTimestamp", first, "lastTimestamp", last, "count", (json_int_t)count)
               : NULL;
}

/* A fresh Event name for an object: its name and the time, as client-go names them. */
static void event_name(char *out, size_t len, const char *name, const struct timeval *tv) {
    snprintf(out, len, "%.200s.%lx%05lx", name, (unsigned long)tv->tv_sec, (unsigned long)tv->tv_usec);
}

/* pelotond --events=false: set before the roles start, read only after */
static bool events_off;

void ctl_events_disable(void) { events_off = true; }

bool ctl_events_on(void) { return !events_off; }

void ctl_event_post(struct kclient *kc, const char *component, const char *api_version, const char *kind,
                    const char *ns, const char *name, const char *uid, const char *type, const char *reason,
                    const char *msg) {
    if (events_off) return;
    char ts[40], ename[320], path[512];
    struct timeval tv;
    now_ts(ts, sizeof ts, &tv);
    event_name(ename, sizeof ename, name, &tv);
    json_t *ev = ctl_event_json(component, api_version, kind, ns, name, uid, type, reason, msg, ename, ts, ts, 1);
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/events", ns[0] ? ns : "default");
    if (ev) kclient_request(kc, "POST", path, ev, NULL, NULL, NULL);
    json_decref(ev);
}

struct ctl_recorder *ctl_recorder_new(struct kclient *kc, const char *component, size_t cap) {
    struct ctl_recorder *r = calloc(1, sizeof *r);
    if (!r || !(r->component = strdup(component))) {
        free(r);
        return NULL;
    }
    r->kc = kc;
    r->cap = cap ? cap : CTL_RECORDER_CACHE;
    return r;
}

static void entry_free(struct rec_entry *e) {
    free(e->key);
    free(e->ns);
    free(e->name);
    free(e);
}

static void unlink_entry(struct ctl_recorder *r, struct rec_entry *e) {
    if (e->prev) e->prev->next = e->next;
    else r->head = e->next;
    if (e->next) e->next->prev = e->prev;
    else r->tail = e->prev;
    e->prev = e->next = NULL;
}

static void push_front(struct ctl_recorder *r, struct rec_entry *e) {
    e->next = r->head;
    e->prev = NULL;
    if (r->head) r->head->prev = e;
    r->head = e;
    if (!r->tail) r->tail = e;
}

void ctl_recorder_free(struct ctl_recorder *r) {
    if (!r) return;
    for (struct rec_entry *e = r->head, *next; e; e = next) {
        next = e->next;
        entry_free(e);
    }
    strmap_free(&r->by_key);
    free(r->component);
    free(r);
}

void ctl_recorder_counts(const struct ctl_recorder *r, uint64_t *posted, uint64_t *bumped) {
    *posted = r->posted;
    *bumped = r->bumped;
}

/* The key of an Event: what makes two the same. Fields are separated by a
 * byte no name, reason or type holds. */
static char *event_key(const char *ns, const char *name, const char *uid, const char *type, const char *reason,
                       const char *msg) {
    size_t len = strlen(ns) + strlen(name) + strlen(uid) + strlen(type) + strlen(reason) + strlen(msg) + 6;
    char *k = malloc(len);
    if (k) snprintf(k, len, "%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s", ns, name, uid, type, reason, msg);
    return k;
}

bool ctl_recorder_has(const struct ctl_recorder *r, const char *ns, const char *name, const char *uid, const char *type,
                      const char *reason, const char *msg) {
    char *key = event_key(ns, name, uid ? uid : "", type, reason, msg);
    bool has = key && strmap_get(&r->by_key, key);
    free(key);
    return has;
}

struct bump_ctx {
    struct kclient *kc;
    char path[300]; /* the namespace's events */
    json_t *ev;     /* the Event as it should now be */
};

static void bump_ctx_free(struct bump_ctx *x) {
    if (!x) return;
    json_decref(x->ev);
    free(x);
}

/* The Event counted again is gone (deleted, or expired by a real API
 * server's TTL): post it again with its count, as client-go does. */
static void on_bumped(void *ud, const struct kc_response *res) {
    struct bump_ctx *x = ud;
    if (res->status == 404) kclient_request(x->kc, "POST", x->path, x->ev, NULL, NULL, NULL);
    bump_ctx_free(x);
}

int ctl_record(struct ctl_recorder *r, const char *api_version, const char *kind, const char *ns, const char *name,
               const char *uid, const char *type, const char *reason, const char *fmt, ...) {
    char msg[1024], ts[40], path[800];
    if (events_off) return 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!uid) uid = "";
    char *key = event_key(ns, name, uid, type, reason, msg);
    if (!key) return -1;
    struct timeval tv;
    now_ts(ts, sizeof ts, &tv);
    struct rec_entry *e = strmap_get(&r->by_key, key);
    if (e) { /* the same Event again: count it on the one posted */
        free(key);
        unlink_entry(r, e);
        push_front(r, e);
        e->count++;
        r->bumped++;
        json_t *patch = json_pack("{s:I, s:s}", "count", (json_int_t)e->count, "lastTimestamp", ts);
        struct bump_ctx *x = calloc(1, sizeof *x);
        snprintf(path, sizeof path, "/api/v1/namespaces/%s/events/%s", e->ns, e->name);
        if (x) {
            x->kc = r->kc;
            snprintf(x->path, sizeof x->path, "/api/v1/namespaces/%s/events", e->ns);
            x->ev = ctl_event_json(r->component, api_version, kind, ns, name, uid, type, reason, msg, e->name, e->first,
                                   ts, e->count);
        }
        if (!patch || !x || !x->ev ||
            kclient_request(r->kc, "PATCH", path, patch, "application/merge-patch+json", on_bumped, x))
            bump_ctx_free(x);
        json_decref(patch);
        return 1;
    }
    e = calloc(1, sizeof *e);
    char ename[320];
    event_name(ename, sizeof ename, name, &tv);
    const char *evns = ns[0] ? ns : "default";
    if (!e || !(e->ns = strdup(evns)) || !(e->name = strdup(ename)) || strmap_put(&r->by_key, key, e, NULL)) {
        if (e) entry_free(e);
        free(key);
        ctl_event_post(r->kc, r->component, api_version, kind, ns, name, uid, type, reason, msg);
        return 0;
    }
    e->key = key;
    e->count = 1;
    snprintf(e->first, sizeof e->first, "%s", ts);
    push_front(r, e);
    if (++r->n > r->cap) { /* the least recently used Event is forgotten */
        struct rec_entry *old = r->tail;
        unlink_entry(r, old);
        strmap_del(&r->by_key, old->key);
        entry_free(old);
        r->n--;
    }
    r->posted++;
    json_t *ev = ctl_event_json(r->component, api_version, kind, ns, name, uid, type, reason, msg, ename, ts, ts, 1);
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/events", evns);
    if (ev) kclient_request(r->kc, "POST", path, ev, NULL, NULL, NULL);
    json_decref(ev);
    return 0;
}

/* ---- PodScheduled ---- */

json_t *ctl_pod_scheduled_patch(const char *uid, bool scheduled, const char *reason, const char *msg) {
    char ts[40];
    now_ts(ts, sizeof ts, NULL);
    json_t *c = json_pack("{s:s, s:s, s:n, s:s}", "type", "PodScheduled", "status", scheduled ? "True" : "False",
                          "lastProbeTime", "lastTransitionTime", ts);
    /* a strategic merge keeps the other fields of the condition of that
     * type: a reason or message not given is removed (null), so a True
     * written over a False reads as the binding's */
    if (c) json_object_set_new(c, "reason", reason ? json_string(reason) : json_null());
    if (c) json_object_set_new(c, "message", msg ? json_string(msg) : json_null());
    json_t *p = c ? json_pack("{s:{s:s}, s:{s:[o]}}", "metadata", "uid", uid ? uid : "", "status", "conditions", c)
                  : NULL;
    if (p && (!uid || !uid[0])) json_object_del(p, "metadata");
    return p;
}

struct cond_ctx {
    struct kclient *kc;
    char *path, *uid;
};

static void cond_ctx_free(struct cond_ctx *x) {
    free(x->path);
    free(x->uid);
    free(x);
}

/* A False written after the pod was bound (a binding can overtake the
 * write: they travel on different connections) is turned back to True: the
 * reply is the pod as stored, with its node. */
static void on_cond_written(void *ud, const struct kc_response *res) {
    struct cond_ctx *x = ud;
    json_t *pod = res->status >= 200 && res->status < 300 ? kc_response_body(res) : NULL;
    const char *node = json_string_value(json_object_get(json_object_get(pod, "spec"), "nodeName"));
    if (node && node[0]) {
        json_t *p = ctl_pod_scheduled_patch(x->uid, true, NULL, NULL);
        if (p) kclient_request(x->kc, "PATCH", x->path, p, "application/strategic-merge-patch+json", NULL, NULL);
        json_decref(p);
    }
    cond_ctx_free(x);
}

void ctl_pod_unschedulable(struct kclient *kc, const char *ns, const char *pod, const char *uid, const char *reason,
                           const char *msg) {
    char path[600];
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s/status", ns, pod);
    json_t *p = ctl_pod_scheduled_patch(uid, false, reason, msg);
    struct cond_ctx *x = calloc(1, sizeof *x);
    if (!p || !x || !(x->path = strdup(path)) || !(x->uid = strdup(uid ? uid : ""))) {
        json_decref(p);
        if (x) cond_ctx_free(x);
        return;
    }
    x->kc = kc;
    if (kclient_request(kc, "PATCH", path, p, "application/strategic-merge-patch+json", on_cond_written, x))
        cond_ctx_free(x);
    json_decref(p);
}
