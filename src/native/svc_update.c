/* v0 UpdateService over a Job's rolling update (svc_update.h). */
#include "svc_update.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pbjson.h"
#include "peloton/api/v0/update/svc/update_svc.pb-c.h"
#include "peloton/api/v0/update/update.pb-c.h"
#include "svc_job.h"
#include "svc_jobwrite.h"

enum upd_kind { UK_GET, UK_LIST, UK_CACHE, UK_PAUSE, UK_RESUME, UK_ROLLBACK, UK_ABORT };

static const char *ustate(const json_t *job) {
    const json_t *st = json_object_get(job, "status");
    const char *s = svc_jstr(json_object_get(st, "update"), "state");
    json_int_t seen = json_integer_value(json_object_get(st, "observedGeneration"));
    if (seen && seen < svc_job_generation(job) && svc_job_annotation(job, SVC_A_UPDATE_ID))
        return "INITIALIZED"; /* written, not yet taken up by the job manager */
    return s && protobuf_c_enum_descriptor_get_value_by_name(&peloton__api__v0__update__state__descriptor, s) ? s
                                                                                                        : "INITIALIZED";
}

static bool terminal(const char *s) {
    return !strcmp(s, "SUCCEEDED") || !strcmp(s, "ABORTED") || !strcmp(s, "FAILED") || !strcmp(s, "ROLLED_BACK");
}

/* The UpdateID of job's latest update ("" when it has none): the native
 * one, else "<JobID>-0" for one made another way (kubectl). */
static void current_id(const json_t *job, char *out, size_t len) {
    const char *a = svc_job_annotation(job, SVC_A_UPDATE_ID);
    if (a) snprintf(out, len, "%s", a);
    else if (json_object_get(json_object_get(job, "status"), "update")) snprintf(out, len, "%s-0", svc_job_id(job));
    else out[0] = 0;
}

static json_t *u64(json_int_t v) {
    char b[32];
    snprintf(b, sizeof b, "%lld", (long long)(v > 0 ? v : 0));
    return json_string(b);
}

static json_t *update_info(const json_t *job, const char *uid, bool status_only) {
    const json_t *su = json_object_get(json_object_get(job, "status"), "update");
    const json_t *us = json_object_get(json_object_get(job, "spec"), "updateStrategy");
    json_int_t total = json_integer_value(json_object_get(su, "instancesTotal"));
    json_int_t done = json_integer_value(json_object_get(su, "instancesDone"));
    json_int_t failed = json_integer_value(json_object_get(su, "instancesFailed"));
    json_int_t left = total - done - failed;
    json_t *status = json_pack("{s:I,s:I,s:s,s:I}", "numTasksDone", done, "numTasksRemaining", left > 0 ? left : 0,
                               "state", ustate(job), "numTasksFailed", failed);
    json_t *info = json_pack("{s:{s:s},s:o,s:{s:s}}", "updateId", "value", uid, "status", status, "jobId", "value",
                             svc_job_id(job));
    if (status_only) return info;
    json_t *cfg = json_object();
    static const char *const keys[] = {"batchSize", "rollbackOnFailure", "maxInstanceAttempts", "maxFailureInstances"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (json_object_get(us, keys[i])) json_object_set(cfg, keys[i], json_object_get(us, keys[i]));
    if (json_is_true(json_object_get(us, "paused"))) json_object_set_new(cfg, "startPaused", json_true());
    json_object_set_new(info, "config", cfg);
    json_object_set_new(info, "configVersion", u64(json_integer_value(json_object_get(su, "toVersion"))));
    json_object_set_new(info, "prevConfigVersion", u64(json_integer_value(json_object_get(su, "fromVersion"))));
    return info;
}

/* The update w->req names is job's latest; else fails the call NOT_FOUND. */
static int is_current(struct svc_jw *w, const json_t *job) {
    char cur[256];
    const char *want = svc_jstr(json_object_get(w->req, "updateId"), "value") ?: "";
    current_id(job, cur, sizeof cur);
    if (cur[0] && !strcmp(cur, want)) return 0;
    if (cur[0]) native_call_fail(w->base.call, NC_NOT_FOUND, "update %.200s not found: the job's latest update is %s", want, cur);
    else native_call_fail(w->base.call, NC_NOT_FOUND, "update %.200s not found: the job has had no update", want);
    return -1;
}

/* ---------------------------------------------------------------- CreateUpdate */

static int create_plan(struct svc_jw *w, const json_t *job, json_t **put, json_t **reply) {
    const json_t *cfg = json_object_get(w->req, "jobConfig"), *uc = json_object_get(w->req, "updateConfig");
    char err[512];
    const char *t = svc_jstr(json_object_get(job, "spec"), "type");
    if (!t || (strcmp(t, "STATELESS") && strcmp(t, "STATEFUL"))) {
        native_call_fail(w->base.call, NC_FAILED_PRECONDITION,
                         "job %.128s is %s: rolling updates are for SERVICE jobs (JobManager.Update changes others)",
                         w->id, svc_job_type(json_object_get(job, "spec")));
        return -1;
    }
    if (json_is_true(json_object_get(uc, "stopBeforeUpdate"))) {
        native_call_fail(w->base.call, NC_INVALID_ARGUMENT, "updateConfig.stopBeforeUpdate: not supported here");
        return -1;
    }
    double pct = json_number_value(json_object_get(uc, "batchPercentage"));
    if (json_object_get(uc, "batchPercentage") && !(pct >= 0 && pct <= 100)) {
        native_call_fail(w->base.call, NC_INVALID_ARGUMENT, "updateConfig.batchPercentage: %g is not in [0, 100]", pct);
        return -1;
    }
    if (svc_jw_check_version(w, json_object_get(json_object_get(cfg, "changeLog"), "version"))) return -1;
    if (svc_job_config_plan(job, cfg, put, err, sizeof err)) {
        native_call_fail(w->base.call, NC_INVALID_ARGUMENT, "jobConfig: %s", err);
        return -1;
    }
    json_t *spec = json_object_get(*put, "spec"), *us = json_object_get(spec, "updateStrategy");
    if (!json_is_object(us)) json_object_set_new(spec, "updateStrategy", us = json_object());
    json_int_t batch = json_integer_value(json_object_get(uc, "batchSize"));
    if (pct > 0) batch = (json_int_t)ceil(pct * svc_job_instances(*put) / 100.0); /* precedence, as Peloton */
    json_object_set_new(us, "batchSize", json_integer(batch));
    json_object_set_new(us, "rollbackOnFailure", json_boolean(json_is_true(json_object_get(uc, "rollbackOnFailure"))));
    json_object_set_new(us, "maxInstanceAttempts", json_integer(json_integer_value(json_object_get(uc, "maxInstanceAttempts"))));
    json_object_set_new(us, "maxFailureInstances", json_integer(json_integer_value(json_object_get(uc, "maxFailureInstances"))));
    json_object_set_new(us, "paused", json_boolean(json_is_true(json_object_get(uc, "startPaused"))));
    char uid[256];
    svc_next_update_id(job, uid, sizeof uid);
    svc_job_annotate(*put, SVC_A_UPDATE_ID, uid);
    (void)reply;
    return 0;
}

static json_t *create_done(struct svc_jw *w, const json_t *stored) {
    (void)w;
    return json_pack("{s:{s:s}}", "updateID", "value", svc_job_annotation(stored, SVC_A_UPDATE_ID) ?: "");
}

/* ---------------------------------------------------------------- the others */

static int read_plan(struct svc_jw *w, const json_t *job, json_t **put, json_t **reply) {
    char cur[256];
    (void)put;
    if (w->arg == UK_LIST) {
        current_id(job, cur, sizeof cur);
        json_t *list = json_array();
        if (cur[0]) json_array_append_new(list, update_info(job, cur, false));
        *reply = json_pack("{s:o}", "updateInfo", list);
        return 0;
    }
    if (is_current(w, job)) return -1;
    current_id(job, cur, sizeof cur);
    if (w->arg == UK_GET) {
        *reply = json_pack("{s:o}", "updateInfo", update_info(job, cur, json_is_true(json_object_get(w->req, "statusOnly"))));
        return 0;
    }
    /* UK_CACHE */
    const json_t *su = json_object_get(json_object_get(job, "status"), "update");
    json_int_t total = json_integer_value(json_object_get(su, "instancesTotal"));
    json_t *all = json_array(), *curb = json_array();
    for (json_int_t i = 0; i < total && i < (1 << 24); i++) json_array_append_new(all, json_integer(i));
    size_t k;
    const json_t *v;
    json_array_foreach(json_object_get(su, "currentBatch"), k, v) if (json_is_integer(v)) json_array_append(curb, (json_t *)v);
    *reply = json_pack("{s:{s:s},s:s,s:o,s:o}", "jobId", "value", svc_job_id(job), "state", ustate(job),
                       "instancesTotal", all, "instancesCurrent", curb);
    return 0;
}

static int control_plan(struct svc_jw *w, const json_t *job, json_t **put, json_t **reply) {
    if (is_current(w, job)) return -1;
    const char *s = ustate(job);
    bool forward = !strcmp(s, "ROLLING_FORWARD") || !strcmp(s, "PAUSED") || !strcmp(s, "INITIALIZED");
    if (terminal(s) || (w->arg == UK_ROLLBACK && !forward)) {
        static const char *const verb[] = {[UK_PAUSE] = "paused", [UK_RESUME] = "resumed",
                                           [UK_ROLLBACK] = "rolled back", [UK_ABORT] = "aborted"};
        native_call_fail(w->base.call, NC_FAILED_PRECONDITION, "update %s is %s: it cannot be %s",
                         svc_jstr(json_object_get(w->req, "updateId"), "value") ?: "", s, verb[w->arg]);
        return -1;
    }
    *put = json_deep_copy(job);
    json_t *spec = json_object_get(*put, "spec"), *us = json_object_get(spec, "updateStrategy");
    if (!json_is_object(us)) json_object_set_new(spec, "updateStrategy", us = json_object());
    /* pause is declarative; a rollback or an abort also lifts it, so neither waits for a resume */
    json_object_set_new(us, "paused", json_boolean(w->arg == UK_PAUSE));
    if (w->arg == UK_ROLLBACK) svc_job_annotate(*put, SVC_A_UPDATE_ROLLBACK, "true");
    if (w->arg == UK_ABORT) svc_job_annotate(*put, SVC_A_UPDATE_ABORT, "true");
    (void)reply;
    return 0;
}

static json_t *empty_done(struct svc_jw *w, const json_t *stored) {
    (void)w, (void)stored;
    return json_object();
}

#define D(x) &peloton__api__v0__update__svc__##x##__descriptor
static const struct svc_jw_ops create_ops = {D(create_update_response), NULL, create_plan, create_done, UK_GET};
static const struct svc_jw_ops get_ops = {D(get_update_response), NULL, read_plan, empty_done, UK_GET};
static const struct svc_jw_ops list_ops = {D(list_updates_response), NULL, read_plan, empty_done, UK_LIST};
static const struct svc_jw_ops cache_ops = {D(get_update_cache_response), NULL, read_plan, empty_done, UK_CACHE};
static const struct svc_jw_ops pause_ops = {D(pause_update_response), NULL, control_plan, empty_done, UK_PAUSE};
static const struct svc_jw_ops resume_ops = {D(resume_update_response), NULL, control_plan, empty_done, UK_RESUME};
static const struct svc_jw_ops rollback_ops = {D(rollback_update_response), NULL, control_plan, empty_done, UK_ROLLBACK};
static const struct svc_jw_ops abort_ops = {D(abort_update_response), NULL, control_plan, empty_done, UK_ABORT};

/* Starts ops (their arg: an enum upd_kind) on the Job that msg names: its member jobmember (a JobID), or
 * when that is NULL, the JobID part of its "updateId". */
static void begin(void *ud, struct native_call *call, const ProtobufCMessage *msg, const struct svc_jw_ops *ops,
                  const char *jobmember) {
    char err[256], id[160];
    json_t *req = pbjson_from_msg(msg, err, sizeof err);
    if (!req) {
        native_call_fail(call, NC_INVALID_ARGUMENT, "%s", err);
        return;
    }
    if (jobmember) {
        const char *j = svc_jstr(json_object_get(req, jobmember), "value");
        snprintf(id, sizeof id, "%s", j ? j : "");
        if (!id[0]) {
            json_decref(req);
            native_call_fail(call, NC_INVALID_ARGUMENT, "%s: a JobID is required", jobmember);
            return;
        }
    } else {
        const char *u = svc_jstr(json_object_get(req, "updateId"), "value");
        if (!u || svc_update_job_id(u, id, sizeof id)) {
            native_call_fail(call, NC_INVALID_ARGUMENT, "updateId: \"%.200s\" is not an update id of this server "
                             "(<JobID>-<n>)", u ? u : "");
            json_decref(req);
            return;
        }
    }
    svc_jw_start(ud, call, ops, id, req);
}

static void h_create(void *ud, struct native_call *c, const ProtobufCMessage *m) { begin(ud, c, m, &create_ops, "jobId"); }
static void h_get(void *ud, struct native_call *c, const ProtobufCMessage *m) { begin(ud, c, m, &get_ops, NULL); }
static void h_list(void *ud, struct native_call *c, const ProtobufCMessage *m) { begin(ud, c, m, &list_ops, "jobID"); }
static void h_cache(void *ud, struct native_call *c, const ProtobufCMessage *m) { begin(ud, c, m, &cache_ops, NULL); }
static void h_pause(void *ud, struct native_call *c, const ProtobufCMessage *m) { begin(ud, c, m, &pause_ops, NULL); }
static void h_resume(void *ud, struct native_call *c, const ProtobufCMessage *m) { begin(ud, c, m, &resume_ops, NULL); }
static void h_rollback(void *ud, struct native_call *c, const ProtobufCMessage *m) { begin(ud, c, m, &rollback_ops, NULL); }
static void h_abort(void *ud, struct native_call *c, const ProtobufCMessage *m) { begin(ud, c, m, &abort_ops, NULL); }

#define M(name, req, resp, fn) {name, D(req), D(resp), fn, false}
static const struct native_method methods[] = {
    M("CreateUpdate", create_update_request, create_update_response, h_create),
    M("GetUpdate", get_update_request, get_update_response, h_get),
    M("ListUpdates", list_updates_request, list_updates_response, h_list),
    M("PauseUpdate", pause_update_request, pause_update_response, h_pause),
    M("ResumeUpdate", resume_update_request, resume_update_response, h_resume),
    M("RollbackUpdate", rollback_update_request, rollback_update_response, h_rollback),
    M("AbortUpdate", abort_update_request, abort_update_response, h_abort),
    M("GetUpdateCache", get_update_cache_request, get_update_cache_response, h_cache),
};

int svc_update_register(struct kclient *kc, struct native_registry *r) {
    return native_registry_add(r, "peloton.api.v0.update.svc.UpdateService", methods,
                               sizeof methods / sizeof methods[0], kc);
}
