/* WatchService over API-server watches (v1_watch.h).
 *
 * A watch starts by listing the Jobs (to resolve the pod filter's JobID and
 * to know every Job's JobID by uid) and, when pods are watched, listing one
 * pod (for the collection's resourceVersion); it then watches from those
 * versions, so it sees exactly what changes after it started. */
#include "v1_watch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "labels.h"
#include "pbjson.h"
#include "peloton/api/v1alpha/watch/svc/watch_svc.pb-c.h"
#include "svc_job.h"
#include "v1_map.h"

#define JOBS_PATH "/apis/peloton.io/v1alpha1/jobs"
#define D(x) (&peloton__api__v1alpha__watch__svc__##x##__descriptor)

struct v1_watch {
    struct kclient *kc;
    struct watch *open; /* a list */
    unsigned n;
};

struct watch;
/* One API-server watch of a Watch (its callbacks' ud): pods or jobs. */
struct side {
    struct watch *w;
    struct kc_watch *kw;
    char rv[32]; /* the resourceVersion last seen */
};

struct watch {
    struct watch *prev, *next;
    struct v1_watch *svc;
    struct native_call *call; /* NULL once the stream ended */
    char id[40];
    json_t *req;              /* the WatchRequest (proto3 JSON) */
    json_t *ids;              /* Job uid -> JobID, of every Job seen since the start */
    bool pods, jobs;          /* what is watched */
    char pod_path[512], pod_query[600];
    struct side sp, sj;       /* the pod watch, the job watch */
    bool paused;              /* the client is not reading: the API-server watches are stopped */
    int pending;              /* list requests in flight */
    bool dead;                /* ended while a request was in flight: freed by its callback */
};

static const char *jstr(const json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }

static void stop_sides(struct watch *w) {
    if (w->sp.kw) kc_watch_stop(w->sp.kw);
    if (w->sj.kw) kc_watch_stop(w->sj.kw);
    w->sp.kw = w->sj.kw = NULL;
}

static void watch_free(struct watch *w) {
    json_decref(w->req);
    json_decref(w->ids);
    free(w);
}

/* Ends w's stream (when still open) and stops its watches; w is freed now or
 * by the callback of its request in flight. */
static void watch_end(struct watch *w, enum native_code code, const char *msg) {
    if (w->call) native_call_end(w->call, code, msg);
    w->call = NULL;
    stop_sides(w);
    if (!w->dead) {
        w->dead = true;
        if (w->prev) w->prev->next = w->next;
        else w->svc->open = w->next;
        if (w->next) w->next->prev = w->prev;
        w->svc->n--;
    }
    if (!w->pending) watch_free(w);
}

/* One WatchResponse; false when the stream ended (w may be freed). */
static bool emit(struct watch *w, json_t *resp) {
    char err[256];
    json_object_set_new(resp, "watchId", json_string(w->id));
    ProtobufCMessage *m = pbjson_to_msg(D(watch_response), resp, err, sizeof err);
    json_decref(resp);
    if (!m) {
        watch_end(w, NC_INTERNAL, err);
        return false;
    }
    int rc = native_call_send(w->call, m);
    protobuf_c_message_free_unpacked(m, NULL);
    if (rc < 0) {
        watch_end(w, NC_CANCELLED, "the stream ended");
        return false;
    }
    if (rc == 1 && !w->paused) { /* the client is behind: stop taking events until it reads */
        w->paused = true;
        stop_sides(w);
        fprintf(stderr, "level=info role=native msg=\"watch paused: the client is not reading\" watch=%s\n", w->id);
    }
    return true;
}

static unsigned long long revision(const json_t *obj) {
    const char *rv = jstr(json_object_get(obj, "metadata"), "resourceVersion");
    return rv ? strtoull(rv, NULL, 10) : 0;
}

static void keep_rv(char dst[32], const json_t *obj) {
    const char *rv = jstr(json_object_get(obj, "metadata"), "resourceVersion");
    if (rv) snprintf(dst, 32, "%s", rv);
}

/* ---------------------------------------------------------------- events */

static void start_watches(struct watch *w);

static void on_end(void *ud, long status, const char *error) {
    struct side *sd = ud;
    struct watch *w = sd->w;
    sd->kw = NULL; /* kclient frees it after this returns */
    if (status == 410) {
        watch_end(w, NC_DEADLINE_EXCEEDED, "events were lost while the client did not read (resourceVersion too old)");
    } else if (status != 200) {
        char msg[300];
        snprintf(msg, sizeof msg, "the API server's watch ended: %ld %s", status, error ? error : "");
        watch_end(w, NC_UNAVAILABLE, msg);
    } else if (!w->paused) { /* a normal end (the API server's timeout): watch again from where it was */
        start_watches(w);
    }
}

/* An ERROR event: the watch ends (stopping the API-server watch in its own
 * event is allowed; its on_end then does not run). */
static void on_error(struct watch *w, const json_t *status) {
    bool gone = json_integer_value(json_object_get(status, "code")) == 410;
    watch_end(w, gone ? NC_DEADLINE_EXCEEDED : NC_UNAVAILABLE,
              gone ? "events were lost while the client did not read (resourceVersion too old)"
                   : "the API server's watch failed");
}

/* The pod's JobID: the Job its ownerReference names, by uid. */
static const char *pod_job_id(struct watch *w, const json_t *pod) {
    size_t i;
    const json_t *o;
    json_array_foreach(json_object_get(json_object_get(pod, "metadata"), "ownerReferences"), i, o) {
        if (strcmp(jstr(o, "kind") ?: "", "Job")) continue;
        const char *uid = jstr(o, "uid") ?: "";
        return jstr(w->ids, uid) ?: uid;
    }
    return NULL;
}

static bool pod_matches(struct watch *w, const json_t *pod, const char *jid, long long inst) {
    const json_t *f = json_object_get(w->req, "podFilter");
    const json_t *names = json_object_get(f, "podNames");
    if (json_array_size(names)) {
        char name[256];
        snprintf(name, sizeof name, "%s-%lld", jid, inst);
        bool any = false;
        size_t i;
        const json_t *n;
        json_array_foreach(names, i, n) any |= !strcmp(jstr(n, "value") ?: "", name);
        if (!any) return false;
    }
    size_t i;
    const json_t *l;
    const json_t *anns = json_object_get(json_object_get(pod, "metadata"), "annotations");
    json_array_foreach(json_object_get(f, "labels"), i, l) /* a pod's labels are its annotations (docs/native-api.md) */
        if (strcmp(jstr(anns, jstr(l, "key") ?: "") ?: "\x01", jstr(l, "value") ?: "")) return false;
    return true;
}

static void pod_changed(struct watch *w, const char *type, const json_t *obj) {
    const char *jid = pod_job_id(w, obj);
    long long inst = v1_pod_instance(obj);
    if (!jid || inst < 0 || !pod_matches(w, obj, jid, inst)) return;
    json_t *sum = v1_pod_summary(jid, (uint32_t)inst, obj, !strcmp(type, "DELETED"));
    emit(w, json_pack("{s:I,s:[o]}", "revision", (json_int_t)revision(obj), "pods", sum));
}

static void job_changed(struct watch *w, const char *type, const json_t *obj) {
    const char *uid = jstr(json_object_get(obj, "metadata"), "uid");
    if (uid) json_object_set_new(w->ids, uid, json_string(svc_job_id(obj)));
    if (!w->jobs || strcmp(jstr(json_object_get(obj, "spec"), "type") ?: "", "STATELESS")) return;
    const json_t *f = json_object_get(w->req, "statelessJobFilter");
    const json_t *ids = json_object_get(f, "jobIds");
    if (json_array_size(ids)) {
        bool any = false;
        size_t i;
        const json_t *id;
        json_array_foreach(ids, i, id) any |= !strcmp(jstr(id, "value") ?: "", svc_job_id(obj));
        if (!any) return;
    }
    json_t *sum = v1_job_summary(obj);
    if (!v1_labels_have(json_object_get(sum, "labels"), json_object_get(f, "labels"))) {
        json_decref(sum);
        return;
    }
    if (!strcmp(type, "DELETED"))
        json_object_set_new(json_object_get(sum, "status"), "state", json_string("JOB_STATE_DELETED"));
    emit(w, json_pack("{s:I,s:[o]}", "revision", (json_int_t)revision(obj), "statelessJobs", sum));
}

/* An event of either API-server watch (ud: its side). */
static void on_event(void *ud, const char *type, json_t *obj) {
    struct side *sd = ud;
    struct watch *w = sd->w;
    if (!strcmp(type, "ERROR")) {
        on_error(w, obj);
        return;
    }
    keep_rv(sd->rv, obj);
    if (!strcmp(type, "BOOKMARK")) return;
    if (sd == &w->sp) pod_changed(w, type, obj);
    else job_changed(w, type, obj);
}

/* The API-server watches, from the versions last seen. */
static void start_watches(struct watch *w) {
    struct kclient *kc = w->svc->kc;
    if (w->pods && !w->sp.kw &&
        !(w->sp.kw = kclient_watch(kc, w->pod_path, w->pod_query, w->sp.rv, on_event, on_end, &w->sp))) {
        watch_end(w, NC_UNAVAILABLE, "cannot watch pods");
        return;
    }
    /* the Jobs are followed for pods too: a Job made after the start gives its pods' JobID */
    if ((w->jobs || w->pods) && !w->sj.kw &&
        !(w->sj.kw = kclient_watch(kc, JOBS_PATH, NULL, w->sj.rv, on_event, on_end, &w->sj)))
        watch_end(w, NC_UNAVAILABLE, "cannot watch jobs");
}

/* The stream's producer (native.h): the client read (resume) or left. */
static void on_stream(void *ud, struct native_call *call, bool gone) {
    (void)call;
    struct watch *w = ud;
    if (gone) {
        watch_end(w, NC_CANCELLED, "the client went away");
    } else if (w->paused) {
        w->paused = false;
        fprintf(stderr, "level=info role=native msg=\"watch resumed\" watch=%s\n", w->id);
        start_watches(w);
    }
}

/* ---------------------------------------------------------------- start */

/* A request's answer arrived: false when the watch ended meanwhile (then freed here). */
static bool answered(struct watch *w) {
    w->pending--;
    if (!w->dead) return true;
    if (!w->pending) watch_free(w);
    return false;
}

static void on_pod_list(void *ud, const struct kc_response *r) {
    struct watch *w = ud;
    if (!answered(w)) return;
    const char *rv = r->status == 200 ? jstr(json_object_get(kc_response_body(r), "metadata"), "resourceVersion") : NULL;
    if (!rv) {
        watch_end(w, r->status ? NC_INTERNAL : NC_UNAVAILABLE, "the API server did not list pods");
        return;
    }
    snprintf(w->sp.rv, sizeof w->sp.rv, "%s", rv);
    if (!emit(w, json_pack("{s:I}", "revision", (json_int_t)strtoull(rv, NULL, 10)))) return;
    if (!w->paused) start_watches(w);
}

static void on_job_list(void *ud, const struct kc_response *r) {
    struct watch *w = ud;
    if (!answered(w)) return;
    json_t *body = r->status == 200 ? kc_response_body(r) : NULL;
    const json_t *items = json_object_get(body, "items");
    const char *rv = jstr(json_object_get(body, "metadata"), "resourceVersion");
    if (!json_is_array(items) || !rv) {
        watch_end(w, r->status ? NC_INTERNAL : NC_UNAVAILABLE, "the API server did not list jobs");
        return;
    }
    snprintf(w->sj.rv, sizeof w->sj.rv, "%s", rv);
    const char *want = jstr(json_object_get(json_object_get(w->req, "podFilter"), "jobId"), "value");
    const json_t *found = NULL;
    size_t i;
    const json_t *j;
    json_array_foreach(items, i, j) {
        const char *uid = jstr(json_object_get(j, "metadata"), "uid");
        if (uid) json_object_set_new(w->ids, uid, json_string(svc_job_id(j)));
        if (want && !strcmp(want, svc_job_id(j))) found = j;
    }
    if (!w->pods) {
        if (emit(w, json_pack("{s:I}", "revision", (json_int_t)strtoull(rv, NULL, 10))) && !w->paused) start_watches(w);
        return;
    }
    char sel[600];
    kc_escape(PL_JOB, sel, sizeof sel); /* peloton pods: those with a job label */
    if (want && *want) {
        if (!found) {
            char msg[256];
            snprintf(msg, sizeof msg, "podFilter.jobId: job %.128s not found", want);
            watch_end(w, NC_NOT_FOUND, msg);
            return;
        }
        const json_t *md = json_object_get(found, "metadata");
        snprintf(w->pod_path, sizeof w->pod_path, "/api/v1/namespaces/%s/pods", jstr(md, "namespace") ?: "");
        kc_escape(PL_JOB "=", sel, sizeof sel);
        size_t n = strlen(sel);
        kc_escape(jstr(md, "name") ?: "", sel + n, sizeof sel - n);
    } else {
        snprintf(w->pod_path, sizeof w->pod_path, "/api/v1/pods");
    }
    snprintf(w->pod_query, sizeof w->pod_query, "labelSelector=%.580s", sel);
    char path[1300];
    snprintf(path, sizeof path, "%s?limit=1&%s", w->pod_path, w->pod_query);
    w->pending++;
    if (kclient_request(w->svc->kc, "GET", path, NULL, NULL, on_pod_list, w)) {
        w->pending--;
        watch_end(w, NC_UNAVAILABLE, "API server unreachable");
    }
}

static void new_id(char *out, size_t len) {
    unsigned char b[16] = {0};
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) { /* not expected; the time makes it unique enough */
        uint64_t t = uv_hrtime();
        memcpy(b, &t, sizeof t);
    }
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* a version-4 UUID */
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    snprintf(out, len, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3],
             b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

static void h_watch(void *ud, struct native_call *call, const ProtobufCMessage *msg) {
    struct v1_watch *svc = ud;
    const Peloton__Api__V1alpha__Watch__Svc__WatchRequest *req = (const void *)msg;
    if (req->start_revision) {
        native_call_end(call, NC_OUT_OF_RANGE, "startRevision: watches start from now here (no history is kept)");
        return;
    }
    if (svc->n >= V1_WATCH_MAX) {
        native_call_end(call, NC_RESOURCE_EXHAUSTED, "too many watches open");
        return;
    }
    char err[256];
    json_t *rj = pbjson_from_msg(msg, err, sizeof err);
    struct watch *w = rj ? calloc(1, sizeof *w) : NULL;
    json_t *ids = json_object();
    if (!w || !ids) {
        json_decref(rj);
        json_decref(ids);
        free(w);
        native_call_end(call, NC_INTERNAL, rj ? "out of memory" : err);
        return;
    }
    w->svc = svc;
    w->call = call;
    w->req = rj;
    w->ids = ids;
    w->sp.w = w->sj.w = w;
    w->pods = req->pod_filter != NULL;
    w->jobs = req->stateless_job_filter != NULL;
    new_id(w->id, sizeof w->id);
    w->next = svc->open;
    if (svc->open) svc->open->prev = w;
    svc->open = w;
    svc->n++;
    native_call_set_producer(call, on_stream, w);
    w->pending++;
    if (kclient_request(svc->kc, "GET", JOBS_PATH, NULL, NULL, on_job_list, w)) {
        w->pending--;
        watch_end(w, NC_UNAVAILABLE, "API server unreachable");
    }
}

static void h_cancel(void *ud, struct native_call *call, const ProtobufCMessage *msg) {
    struct v1_watch *svc = ud;
    const Peloton__Api__V1alpha__Watch__Svc__CancelRequest *req = (const void *)msg;
    const char *id = req->watch_id ? req->watch_id : "";
    struct watch *w = svc->open;
    while (w && strcmp(w->id, id)) w = w->next;
    if (!w) {
        native_call_fail(call, NC_NOT_FOUND, "watch %.64s not found", id);
        return;
    }
    watch_end(w, NC_CANCELLED, "watch cancelled");
    Peloton__Api__V1alpha__Watch__Svc__CancelResponse resp = PELOTON__API__V1ALPHA__WATCH__SVC__CANCEL_RESPONSE__INIT;
    native_call_reply(call, &resp.base);
}

static const struct native_method methods[] = {
    {"Watch", D(watch_request), D(watch_response), h_watch, true},
    {"Cancel", D(cancel_request), D(cancel_response), h_cancel, false},
};

struct v1_watch *v1_watch_new(struct kclient *kc) {
    struct v1_watch *s = calloc(1, sizeof *s);
    if (s) s->kc = kc;
    return s;
}

void v1_watch_free(struct v1_watch *s) {
    if (!s) return;
    while (s->open) watch_end(s->open, NC_UNAVAILABLE, "the server stops");
    free(s);
}

int v1_watch_register(struct v1_watch *s, struct native_registry *r) {
    return native_registry_add(r, "peloton.api.v1alpha.watch.svc.WatchService", methods,
                               sizeof methods / sizeof methods[0], s);
}

unsigned v1_watch_count(const struct v1_watch *s) { return s->n; }
