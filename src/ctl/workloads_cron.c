/* CronJobs (workloads.h; docs/workloads.md "CronJob"): every second each
 * CronJob's schedule is checked (src/k8s/cron.h, UTC); a run that is due
 * creates a batch Job from spec.jobTemplate, owned by the CronJob, which the
 * workloads controller then runs as a BATCH Peloton Job. concurrencyPolicy,
 * suspend, startingDeadlineSeconds and the history limits are honoured;
 * status.active, lastScheduleTime and lastSuccessfulTime are written back. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cron.h"
#include "ktime.h"
#include "workloads_int.h"

#define CJ_TICK_MS 1000
#define CJ_MAX_OWNED 256 /* Jobs of one CronJob looked at per tick */

struct wl_cron {
    struct kclient *kc;
    struct kc_informer *cjs, *jobs;
    uv_timer_t tick;
};

static bool parse_time(const char *ts, int64_t *out) { return ktime_parse(ts, out); }

static void fmt_time(int64_t t, char out[32]) {
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void on_done(void *ud, const struct kc_response *r) {
    char *what = ud;
    if (r->status >= 300 && r->status != 409 && r->status != 404)
        fprintf(stderr, "level=warn component=cronjobs msg=\"write failed\" what=\"%s\" status=%ld error=\"%s\"\n", what,
                r->status, r->error ? r->error : "");
    free(what);
}

static void cj_send(struct wl_cron *c, const char *method, const char *path, json_t *body, const char *ct) {
    kclient_request(c->kc, method, path, body, ct, on_done, strdup(path));
    json_decref(body);
}

/* A Job's end: 1 Complete, -1 Failed, 0 still running. */
static int job_end(const json_t *job) {
    size_t i;
    json_t *cd;
    json_array_foreach(json_object_get(json_object_get(job, "status"), "conditions"), i, cd) {
        const char *t = str(cd, "type", NULL), *s = str(cd, "status", NULL);
        if (!t || !s || strcmp(s, "True")) continue;
        if (!strcmp(t, "Complete")) return 1;
        if (!strcmp(t, "Failed")) return -1;
    }
    return 0;
}

struct owned {
    const char *ns, *uid;
    const json_t *items[CJ_MAX_OWNED];
    int n;
};

static int collect(void *ud, json_t *job) {
    struct owned *o = ud;
    size_t i;
    json_t *r;
    if (o->n >= CJ_MAX_OWNED || strcmp(str(job, "metadata", "namespace") ? str(job, "metadata", "namespace") : "", o->ns))
        return 0;
    json_array_foreach(json_object_get(json_object_get(job, "metadata"), "ownerReferences"), i, r) {
        const char *u = str(r, "uid", NULL);
        if (json_is_true(json_object_get(r, "controller")) && u && !strcmp(u, o->uid)) {
            o->items[o->n++] = job;
            break;
        }
    }
    return 0;
}

static int64_t job_time(const json_t *job) {
    int64_t t = 0;
    if (!parse_time(str(job, "status", "completionTime"), &t)) parse_time(str(job, "metadata", "creationTimestamp"), &t);
    return t;
}

static int by_time(const void *a, const void *b) {
    int64_t x = job_time(*(const json_t *const *)a), y = job_time(*(const json_t *const *)b);
    return x < y ? -1 : x > y;
}

static void delete_job(struct wl_cron *c, const json_t *job) {
    char path[512];
    snprintf(path, sizeof path, "/apis/batch/v1/namespaces/%s/jobs/%s", str(job, "metadata", "namespace"),
             str(job, "metadata", "name"));
    cj_send(c, "DELETE", path, json_pack("{s:s, s:s, s:s}", "kind", "DeleteOptions", "apiVersion", "v1",
                                         "propagationPolicy", "Background"),
            NULL);
}

/* Deletes the oldest finished Jobs of one kind beyond limit. */
static void prune(struct wl_cron *c, const json_t **jobs, int n, int want_end, json_int_t limit) {
    const json_t *done[CJ_MAX_OWNED];
    int k = 0;
    for (int i = 0; i < n; i++)
        if (job_end(jobs[i]) == want_end) done[k++] = jobs[i];
    qsort(done, (size_t)k, sizeof done[0], by_time);
    for (int i = 0; i < k - limit; i++) delete_job(c, done[i]);
}

static void create_job(struct wl_cron *c, const json_t *cj, int64_t when) {
    const json_t *md = json_object_get(cj, "metadata"), *jt = json_object_get(json_object_get(cj, "spec"), "jobTemplate");
    const char *ns = str(md, "namespace", NULL), *name = str(md, "name", NULL);
    char jname[300], ts[32], path[512];
    snprintf(jname, sizeof jname, "%.240s-%lld", name, (long long)(when / 60));
    fmt_time(when, ts);
    json_t *jmd = json_object_get(jt, "metadata");
    json_t *labels = json_deep_copy(json_object_get(jmd, "labels"));
    json_t *ann = json_deep_copy(json_object_get(jmd, "annotations"));
    if (!json_is_object(ann)) json_decref(ann), ann = json_object();
    json_object_set_new(ann, "batch.kubernetes.io/cronjob-scheduled-timestamp", json_string(ts));
    json_t *body = json_pack("{s:s, s:s, s:{s:s, s:s, s:o*, s:o, s:[{s:s, s:s, s:s, s:s, s:b, s:b}]}, s:O}",
                             "apiVersion", "batch/v1", "kind", "Job", "metadata", "name", jname, "namespace", ns,
                             "labels", json_is_object(labels) ? labels : NULL, "annotations", ann, "ownerReferences",
                             "apiVersion", "batch/v1", "kind", "CronJob", "name", name, "uid", str(md, "uid", NULL),
                             "controller", 1, "blockOwnerDeletion", 1, "spec", json_object_get(jt, "spec"));
    if (!json_is_object(labels)) json_decref(labels);
    snprintf(path, sizeof path, "/apis/batch/v1/namespaces/%s/jobs", ns);
    if (body) cj_send(c, "POST", path, body, NULL);
    fprintf(stderr, "level=info component=cronjobs msg=\"Job created\" cronjob=%s/%s job=%s scheduled=%s\n", ns, name,
            jname, ts);
}

static int reconcile(void *ud, json_t *cj) {
    struct wl_cron *c = ud;
    const json_t *md = json_object_get(cj, "metadata"), *spec = json_object_get(cj, "spec");
    const char *ns = str(md, "namespace", NULL), *name = str(md, "name", NULL), *uid = str(md, "uid", NULL);
    if (!ns || !name || !uid || json_object_get(md, "deletionTimestamp")) return 0;
    struct owned o = {.ns = ns, .uid = uid};
    kc_informer_foreach(c->jobs, collect, &o);
    const json_t *old = json_object_get(cj, "status");
    json_t *st = json_object(), *active = json_array();
    int64_t last_ok = 0;
    for (int i = 0; i < o.n; i++) {
        int end = job_end(o.items[i]);
        if (!end)
            json_array_append_new(active, json_pack("{s:s, s:s, s:s, s:s, s:s}", "apiVersion", "batch/v1", "kind", "Job",
                                                    "name", str(o.items[i], "metadata", "name"), "namespace", ns, "uid",
                                                    str(o.items[i], "metadata", "uid")));
        else if (end > 0 && job_time(o.items[i]) > last_ok)
            last_ok = job_time(o.items[i]);
    }
    const char *lst = str(old, "lastScheduleTime", NULL);
    if (lst) json_object_set_new(st, "lastScheduleTime", json_string(lst));
    char ts[32];
    if (last_ok) {
        fmt_time(last_ok, ts);
        json_object_set_new(st, "lastSuccessfulTime", json_string(ts));
    }
    /* a due run */
    struct cron_sched sched;
    char err[200];
    int64_t after = 0, now = (int64_t)time(NULL);
    if (!parse_time(lst, &after)) parse_time(str(md, "creationTimestamp", NULL), &after);
    int64_t due = !cron_parse(str(spec, "schedule", NULL), &sched, err, sizeof err) ? cron_last(&sched, after, now) : -1;
    json_t *sds = json_object_get(spec, "startingDeadlineSeconds");
    bool late = json_is_integer(sds) && now - due > json_integer_value(sds);
    const char *cp = str(spec, "concurrencyPolicy", NULL);
    if (due > 0 && !json_is_true(json_object_get(spec, "suspend")) && !late) {
        bool forbid = cp && !strcmp(cp, "Forbid") && json_array_size(active);
        if (!forbid) {
            if (cp && !strcmp(cp, "Replace"))
                for (int i = 0; i < o.n; i++)
                    if (!job_end(o.items[i])) delete_job(c, o.items[i]);
            create_job(c, cj, due);
            fmt_time(due, ts);
            json_object_set_new(st, "lastScheduleTime", json_string(ts));
        }
    } else if (due > 0 && late) { /* missed its deadline: skipped, as kube-controller-manager does */
        fmt_time(due, ts);
        json_object_set_new(st, "lastScheduleTime", json_string(ts));
    }
    if (json_array_size(active)) json_object_set_new(st, "active", active);
    else json_decref(active);
    json_int_t keep_ok = json_is_integer(json_object_get(spec, "successfulJobsHistoryLimit"))
                             ? json_integer_value(json_object_get(spec, "successfulJobsHistoryLimit"))
                             : 3;
    json_int_t keep_failed = json_is_integer(json_object_get(spec, "failedJobsHistoryLimit"))
                                 ? json_integer_value(json_object_get(spec, "failedJobsHistoryLimit"))
                                 : 1;
    prune(c, o.items, o.n, 1, keep_ok);
    prune(c, o.items, o.n, -1, keep_failed);
    if (json_equal(st, old) || (!json_object_size(st) && !old)) {
        json_decref(st);
        return 0;
    }
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)old, k, v) if (!json_object_get(st, k)) json_object_set_new(st, k, json_null());
    char path[512];
    snprintf(path, sizeof path, "/apis/batch/v1/namespaces/%s/cronjobs/%s/status", ns, name);
    cj_send(c, "PATCH", path, json_pack("{s:o}", "status", st), "application/merge-patch+json");
    return 0;
}

static void on_tick(uv_timer_t *t) {
    struct wl_cron *c = t->data;
    if (kc_informer_synced(c->cjs) && kc_informer_synced(c->jobs)) kc_informer_foreach(c->cjs, reconcile, c);
}

static void on_any(void *ud, json_t *obj) {
    (void)ud;
    (void)obj;
}
static void on_any2(void *ud, json_t *old, json_t *obj) {
    (void)ud;
    (void)old;
    (void)obj;
}
static void on_synced(void *ud) { (void)ud; }

struct wl_cron *wl_cron_start(uv_loop_t *loop, struct kclient *kc) {
    struct wl_cron *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    static const struct kc_informer_handlers h = {on_any, on_any2, on_any, on_synced};
    c->kc = kc;
    c->cjs = kc_informer_new(kc, "/apis/batch/v1/cronjobs", NULL, &h, c);
    c->jobs = kc_informer_new(kc, "/apis/batch/v1/jobs", NULL, &h, c);
    if (!c->cjs || !c->jobs || kc_informer_start(c->cjs) || kc_informer_start(c->jobs)) {
        kc_informer_free(c->cjs);
        kc_informer_free(c->jobs);
        free(c);
        return NULL;
    }
    uv_timer_init(loop, &c->tick);
    c->tick.data = c;
    uv_timer_start(&c->tick, on_tick, CJ_TICK_MS, CJ_TICK_MS);
    return c;
}

static void closed(uv_handle_t *h) { free(h->data); }

void wl_cron_stop(struct wl_cron *c) {
    if (!c) return;
    kc_informer_free(c->cjs);
    kc_informer_free(c->jobs);
    uv_timer_stop(&c->tick);
    uv_close((uv_handle_t *)&c->tick, closed);
}
