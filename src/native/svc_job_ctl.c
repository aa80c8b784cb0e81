/* v0 JobManager's writes (Update, Stop, Start, Restart) and its cache
 * methods (Refresh, GetCache, GetActiveJobs) over Job objects (svc_job.h).
 * Mapping, docs/native-api.md: Stop scales the Job to 0 instances and keeps
 * the count in SVC_A_STOPPED, Start restores it; Restart of a service is a
 * rolling update (a template annotation changes, so the job manager's
 * update planner replaces every instance batch by batch), of anything else,
 * or of some instances, a new run of each (its pod is deleted). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pbjson.h"
#include "peloton/api/v0/job/job.pb-c.h"
#include "svc_job.h"
#include "svc_jobwrite.h"

static json_t *id_json(const char *id) { return json_pack("{s:s}", "value", id); }

static json_t *version_json(const json_t *job) {
    char v[32];
    snprintf(v, sizeof v, "%lld", (long long)svc_job_generation(job));
    return json_string(v);
}

static bool is_service(const json_t *job) {
    const char *t = svc_jstr(json_object_get(job, "spec"), "type");
    return t && (!strcmp(t, "STATELESS") || !strcmp(t, "STATEFUL"));
}

static bool is_daemon(const json_t *job) {
    const char *t = svc_jstr(json_object_get(job, "spec"), "type");
    return t && !strcmp(t, "DAEMON");
}

long long svc_job_stopped_count(const json_t *job) {
    const char *s = svc_job_annotation(job, SVC_A_STOPPED);
    return s ? strtoll(s, NULL, 10) : -1;
}

/* The instances req's "ranges" name, or NULL after failing the call
 * (INVALID_ARGUMENT naming the field). */
static json_t *ranges_of(struct svc_jw *w, uint32_t n) {
    char err[256];
    bool past;
    json_t *all = svc_instances_of(json_object_get(w->req, "ranges"), n, &past, err, sizeof err);
    if (!all) native_call_fail(w->base.call, NC_INVALID_ARGUMENT, "%s", err);
    return all;
}

/* The instances the request's ranges name stopped (or started again) while
 * the job runs: the Job with its new spec.stoppedInstances in *put (none
 * when nothing changes); -1 after failing the call. */
static int stop_some(struct svc_jw *w, const json_t *job, bool stop, json_t **put) {
    json_t *inst = ranges_of(w, svc_job_instances(job));
    if (!inst) return -1;
    int rc = svc_job_stop_some(job, inst, stop, put);
    json_decref(inst);
    if (rc)
        native_call_fail(w->base.call, NC_INVALID_ARGUMENT,
                         "ranges: the job's stopped instances would need more than %d ranges", SVC_STOPPED_MAX_RANGES);
    return rc;
}

/* How many instances req's "ranges" name among n (none given: n, without
 * listing them); -1 after failing the call. */
static int count_named(struct svc_jw *w, uint32_t n, size_t *k) {
    if (!json_array_size(json_object_get(w->req, "ranges"))) {
        *k = n;
        return 0;
    }
    json_t *inst = ranges_of(w, n);
    if (!inst) return -1;
    *k = json_array_size(inst);
    json_decref(inst);
    return 0;
}

/* ---------------------------------------------------------------- Update */

static json_t *update_error(const char *member, const char *id, const char *msg) {
    return json_pack("{s:{s:{s:{s:s},s:s}}}", "error", member, "id", "value", id, "message", msg);
}

static json_t *update_not_found(const char *id) {
    char msg[256];
    snprintf(msg, sizeof msg, "job %.128s not found", id);
    return update_error("jobNotFound", id, msg);
}

int svc_job_config_plan(const json_t *job, const json_t *cfg, json_t **put, char *err, size_t errlen) {
    json_t *fresh = cfg ? svc_job_from_config(cfg, "", err, errlen) : NULL;
    if (!cfg) snprintf(err, errlen, "config is required");
    if (!fresh) return -1;
    const char *had = svc_jstr(json_object_get(job, "spec"), "type"), *now = svc_jstr(json_object_get(fresh, "spec"), "type");
    bool same = had && now && (!strcmp(had, now) || (!strcmp(had, "STATEFUL") && !strcmp(now, "STATELESS")));
    const char *hname = svc_jstr(json_object_get(job, "metadata"), "name");
    const char *fname = svc_jstr(json_object_get(fresh, "metadata"), "name");
    if (!same) snprintf(err, errlen, "config.type: a job's type cannot change (it is %s)", svc_job_type(json_object_get(job, "spec")));
    else if (strcmp(hname ?: "", fname ?: ""))
        snprintf(err, errlen, "config.name: a job cannot be renamed (it is \"%.100s\")", hname ?: "");
    if (!same || strcmp(hname ?: "", fname ?: "")) {
        json_decref(fresh);
        return -1;
    }
    *put = svc_job_merge(job, fresh);
    json_decref(fresh);
    const json_t *was = json_object_get(json_object_get(job, "spec"), "template");
    if (is_service(job) && !json_equal((json_t *)was, json_object_get(json_object_get(*put, "spec"), "template"))) {
        char uid[256]; /* a new template: the planner rolls it, an update of its own */
        svc_next_update_id(job, uid, sizeof uid);
        svc_job_annotate(*put, SVC_A_UPDATE_ID, uid);
    }
    long long stopped = svc_job_stopped_count(job);
    if (stopped >= 0) { /* a stopped job keeps 0 instances; the new count is the one Start restores */
        char v[32];
        snprintf(v, sizeof v, "%lld", (long long)svc_job_instances(*put));
        svc_job_annotate(*put, SVC_A_STOPPED, v);
        json_object_set_new(json_object_get(*put, "spec"), "instanceCount", json_integer(0));
    }
    return 0;
}

static int update_plan(struct svc_jw *w, const json_t *job, json_t **put, json_t **reply) {
    const json_t *cfg = json_object_get(w->req, "config");
    char err[512];
    if (svc_jw_check_version(w, json_object_get(json_object_get(cfg, "changeLog"), "version"))) return -1;
    if (svc_job_config_plan(job, cfg, put, err, sizeof err)) *reply = update_error("invalidConfig", w->id, err);
    return 0;
}

static json_t *update_done(struct svc_jw *w, const json_t *stored) {
    char msg[128];
    snprintf(msg, sizeof msg, "job updated to configuration version %lld", (long long)svc_job_generation(stored));
    return json_pack("{s:o,s:s}", "id", id_json(w->id), "message", msg);
}

static const struct svc_jw_ops update_ops = {&peloton__api__v0__job__update_response__descriptor, update_not_found,
                                             update_plan, update_done, 0};

/* ---------------------------------------------------------------- Stop, Start */

static int stop_plan(struct svc_jw *w, const json_t *job, json_t **put, json_t **reply) {
    if (svc_jw_check_version(w, json_object_get(w->req, "resourceVersion"))) return -1;
    if (is_daemon(job)) {
        native_call_fail(w->base.call, NC_FAILED_PRECONDITION,
                         "job %.128s is a DAEMON job (one instance per host): stopping it is not supported here", w->id);
        return -1;
    }
    if (svc_job_stopped_count(job) >= 0) return 0; /* stopped already */
    uint32_t n = svc_job_instances(job);
    size_t k;
    if (count_named(w, n, &k)) return -1;
    (void)reply;
    if (k != n) return stop_some(w, job, true, put); /* spec.stoppedInstances */
    *put = svc_job_stop(job);
    return 0;
}

json_t *svc_job_stop(const json_t *job) {
    char v[32];
    snprintf(v, sizeof v, "%u", svc_job_instances(job));
    json_t *out = json_deep_copy(job);
    svc_job_annotate(out, SVC_A_STOPPED, v);
    json_object_set_new(json_object_get(out, "spec"), "instanceCount", json_integer(0));
    return out;
}

json_t *svc_job_start(const json_t *job) {
    json_t *out = json_deep_copy(job);
    svc_job_annotate(out, SVC_A_STOPPED, NULL);
    json_object_set_new(json_object_get(out, "spec"), "instanceCount", json_integer(svc_job_stopped_count(job)));
    return out;
}

static int start_plan(struct svc_jw *w, const json_t *job, json_t **put, json_t **reply) {
    if (svc_jw_check_version(w, json_object_get(w->req, "resourceVersion"))) return -1;
    long long n = svc_job_stopped_count(job);
    (void)reply;
    if (n < 0) { /* running: its stopped instances (those named, or all) start again */
        if (json_array_size(json_object_get(w->req, "ranges"))) return stop_some(w, job, false, put);
        if (!json_object_get(json_object_get(job, "spec"), "stoppedInstances")) return 0;
        *put = json_deep_copy(job);
        json_object_del(json_object_get(*put, "spec"), "stoppedInstances");
        return 0;
    }
    size_t k;
    if (count_named(w, (uint32_t)n, &k)) return -1;
    if (k != (size_t)n) {
        native_call_fail(w->base.call, NC_UNIMPLEMENTED,
                         "starting %zu of the %lld instances of a stopped job: start the whole job (no ranges)", k, n);
        return -1;
    }
    *put = svc_job_start(job);
    json_object_del(json_object_get(*put, "spec"), "stoppedInstances"); /* every instance runs again */
    return 0;
}

static json_t *version_done(struct svc_jw *w, const json_t *stored) {
    json_t *r = json_pack("{s:o}", "resourceVersion", version_json(stored ? stored : w->job));
    if (w->arg) json_object_set_new(r, "updateID", id_json(svc_job_annotation(stored, SVC_A_UPDATE_ID) ?: ""));
    return r;
}

static const struct svc_jw_ops stop_ops = {&peloton__api__v0__job__stop_response__descriptor, NULL, stop_plan,
                                           version_done, 0};
static const struct svc_jw_ops start_ops = {&peloton__api__v0__job__start_response__descriptor, NULL, start_plan,
                                            version_done, 0};

/* ---------------------------------------------------------------- Restart */

int svc_job_rolling_restart(const json_t *job, uint32_t batch, json_t **put) {
    json_t *out = json_deep_copy(job);
    json_t *tpl = json_object_get(json_object_get(out, "spec"), "template");
    json_t *tmd = json_object_get(tpl, "metadata");
    if (!json_is_object(tmd)) json_object_set_new(tpl, "metadata", tmd = json_object());
    json_t *tann = json_object_get(tmd, "annotations");
    if (!json_is_object(tann)) json_object_set_new(tmd, "annotations", tann = json_object());
    char v[32], uid[256];
    snprintf(v, sizeof v, "%lld", strtoll(svc_jstr(tann, SVC_A_RESTART) ?: "0", NULL, 10) + 1);
    json_object_set_new(tann, SVC_A_RESTART, json_string(v));
    if (batch) {
        json_t *spec = json_object_get(out, "spec"), *us = json_object_get(spec, "updateStrategy");
        if (!json_is_object(us)) json_object_set_new(spec, "updateStrategy", us = json_object());
        json_object_set_new(us, "batchSize", json_integer(batch));
    }
    svc_next_update_id(job, uid, sizeof uid);
    svc_job_annotate(out, SVC_A_UPDATE_ID, uid);
    *put = out;
    return 0;
}

static int restart_plan(struct svc_jw *w, const json_t *job, json_t **put, json_t **reply) {
    if (svc_jw_check_version(w, json_object_get(w->req, "resourceVersion"))) return -1;
    if (svc_job_stopped_count(job) >= 0) {
        native_call_fail(w->base.call, NC_FAILED_PRECONDITION, "job %.128s is stopped: Start it", w->id);
        return -1;
    }
    uint32_t n = svc_job_instances(job);
    size_t k;
    if (count_named(w, n, &k)) return -1;
    w->arg = 0; /* 1: a rolling restart (an UpdateID to answer) */
    if (is_service(job) && k == n) { /* every instance: a rolling restart */
        json_int_t b = json_integer_value(json_object_get(json_object_get(w->req, "restartConfig"), "batchSize"));
        w->arg = 1;
        return svc_job_rolling_restart(job, b > 0 && b <= UINT32_MAX ? (uint32_t)b : 0, put);
    }
    json_t *inst = ranges_of(w, n);
    if (!inst) return -1;
    json_decref(w->del);
    w->del = inst; /* a new run of each */
    (void)reply;
    return 0;
}

static const struct svc_jw_ops restart_ops = {&peloton__api__v0__job__restart_response__descriptor, NULL,
                                              restart_plan, version_done, 0};

/* ---------------------------------------------------------------- Refresh, GetCache */

static int refresh_plan(struct svc_jw *w, const json_t *job, json_t **put, json_t **reply) {
    *reply = json_object(); /* nothing is cached: every call reads the Job */
    (void)w, (void)job, (void)put;
    return 0;
}

static int cache_plan(struct svc_jw *w, const json_t *job, json_t **put, json_t **reply) {
    json_t *info = svc_job_info(job);
    *reply = json_pack("{s:O,s:O}", "config", json_object_get(info, "config"), "runtime", json_object_get(info, "runtime"));
    json_decref(info);
    (void)w, (void)put;
    return 0;
}

static json_t *no_done(struct svc_jw *w, const json_t *stored) {
    (void)w, (void)stored;
    return json_object();
}

static const struct svc_jw_ops refresh_ops = {&peloton__api__v0__job__refresh_response__descriptor, NULL,
                                              refresh_plan, no_done, 0};
static const struct svc_jw_ops cache_ops = {&peloton__api__v0__job__get_cache_response__descriptor, NULL, cache_plan,
                                            no_done, 0};

/* ---------------------------------------------------------------- GetActiveJobs */

static void active_release(struct svc_op *op) { free(op); }

static void on_active(void *ud, const struct kc_response *r) {
    struct svc_op *op = ud;
    const json_t *items = svc_list_items(r);
    if (!items) svc_fail_status(op->call, r);
    else {
        json_t *ids = json_array();
        size_t i;
        const json_t *j;
        json_array_foreach(items, i, j) {
            const char *st = svc_jstr(json_object_get(j, "status"), "state");
            if (!st || (strcmp(st, "SUCCEEDED") && strcmp(st, "FAILED") && strcmp(st, "KILLED") && strcmp(st, "DELETED")))
                json_array_append_new(ids, id_json(svc_job_id(j)));
        }
        svc_reply_json(op->call, &peloton__api__v0__job__get_active_jobs_response__descriptor,
                       json_pack("{s:o}", "ids", ids));
    }
    svc_op_free(op);
}

/* ---------------------------------------------------------------- handlers */

/* Starts ops with msg as JSON; the JobID is msg's member "id". */
static void begin(void *ud, struct native_call *call, const ProtobufCMessage *msg, const struct svc_jw_ops *ops) {
    char err[256];
    json_t *req = pbjson_from_msg(msg, err, sizeof err);
    if (!req) {
        native_call_fail(call, NC_INVALID_ARGUMENT, "%s", err);
        return;
    }
    const char *id = svc_jstr(json_object_get(req, "id"), "value");
    if (!id || !*id) {
        json_decref(req);
        native_call_fail(call, NC_INVALID_ARGUMENT, "id: a JobID is required");
        return;
    }
    char idbuf[160];
    snprintf(idbuf, sizeof idbuf, "%s", id);
    svc_jw_start(ud, call, ops, idbuf, req);
}

static void h_update(void *ud, struct native_call *c, const ProtobufCMessage *m) { begin(ud, c, m, &update_ops); }
static void h_stop(void *ud, struct native_call *c, const ProtobufCMessage *m) { begin(ud, c, m, &stop_ops); }
static void h_start(void *ud, struct native_call *c, const ProtobufCMessage *m) { begin(ud, c, m, &start_ops); }
static void h_restart(void *ud, struct native_call *c, const ProtobufCMessage *m) { begin(ud, c, m, &restart_ops); }
static void h_refresh(void *ud, struct native_call *c, const ProtobufCMessage *m) { begin(ud, c, m, &refresh_ops); }
static void h_cache(void *ud, struct native_call *c, const ProtobufCMessage *m) { begin(ud, c, m, &cache_ops); }

static void h_active(void *ud, struct native_call *call, const ProtobufCMessage *msg) {
    struct svc_op *op = svc_op_new(sizeof *op, ud, call, active_release);
    if (op) svc_op_request(op, "GET", SVC_JOBS_PATH, NULL, on_active);
    (void)msg;
}

#define M(name, req, resp, fn)                                                                                         \
    {name, &peloton__api__v0__job__##req##__descriptor, &peloton__api__v0__job__##resp##__descriptor, fn, false}
static const struct native_method methods[] = {
    M("Update", update_request, update_response, h_update),
    M("Stop", stop_request, stop_response, h_stop),
    M("Start", start_request, start_response, h_start),
    M("Restart", restart_request, restart_response, h_restart),
    M("Refresh", refresh_request, refresh_response, h_refresh),
    M("GetCache", get_cache_request, get_cache_response, h_cache),
    M("GetActiveJobs", get_active_jobs_request, get_active_jobs_response, h_active),
};

const struct native_method *svc_job_ctl_methods(size_t *n) {
    *n = sizeof methods / sizeof methods[0];
    return methods;
}
