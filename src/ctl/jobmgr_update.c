/* The job manager's side of rolling-update control and restart backoff
 * (jobmgr_ctl.h): the operator's intent read from the Job (pause, abort),
 * Events on update transitions, and the instances waiting out a
 * CrashLoopBackOff (status, Events, wake-ups). Rules: docs/lifecycle.md,
 * "Update control" and "Restart backoff". */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl.h"
#include "jobmgr_ctl.h"

#define JM_COMPONENT "peloton-jobmgr"

void jm_task_config(const struct jobmgr *jm, struct task_config *cfg) {
    task_config_default(cfg);
    cfg->backoff_initial_ms = jm->o.backoff_ms;
    cfg->backoff_max_ms = jm->o.backoff_max_ms;
    cfg->backoff_reset_ms = 2 * (int64_t)jm->o.backoff_max_ms;
}

int64_t jm_restart_at(const struct task_config *cfg, const struct jm_inst *r, uint32_t version, uint32_t *loop) {
    struct task t = {.state = r->state,
                     .state_since_ms = r->since_ms,
                     .config_version = r->version,
                     .desired_version = version,
                     .crash_loop = r->crash_loop,
                     .running_since_ms = r->running_ms};
    return task_restart_at(&t, cfg, loop);
}

static void job_event(struct jobmgr *jm, const struct jm_job *job, const char *type, const char *reason,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void job_event(struct jobmgr *jm, const struct jm_job *job, const char *type, const char *reason,
                      const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ctl_object_event(jm->kc, JM_COMPONENT, JM_API_VERSION, "Job", job->ns, job->name, job->uid, type, reason, "%s",
                     msg);
}

const char *const jm_oneshot_annotation[JM_NONESHOT] = {JM_A_UPDATE_ABORT, JM_A_UPDATE_ROLLBACK};

/* One-shot request k: true when it applies to the update in progress now. */
static bool oneshot(struct jobmgr *jm, struct jm_job *job, const json_t *ann, int k) {
    static const char *const ignored[JM_NONESHOT] = {"UpdateAbortIgnored", "UpdateRollbackIgnored"};
    const char *name = jm_oneshot_annotation[k];
    const char *v = json_string_value(json_object_get(ann, name));
    if (!v) {
        free(job->oneshot_seen[k]);
        job->oneshot_seen[k] = NULL;
        return false;
    }
    if (job->oneshot_seen[k] && !strcmp(job->oneshot_seen[k], v)) return false; /* handled; removal on its way */
    jm_set_str(&job->oneshot_seen[k], v);
    job->oneshot_clear[k] = job->persist = true;
    struct update_intent probe = {.paused = job->u && job->u->state == UPDATE_PAUSED,
                                  .abort = k == JM_ONESHOT_ABORT,
                                  .rollback = k == JM_ONESHOT_ROLLBACK};
    enum update_cmd want = k == JM_ONESHOT_ABORT ? UPDATE_CMD_ABORT : UPDATE_CMD_ROLLBACK;
    if (!job->u || update_state_terminal(job->u->state)) {
        job_event(jm, job, "Warning", ignored[k], "%s=%.40s: no rolling update in progress", name, v);
    } else if (strcmp(v, "true") && jm_parse_u32(v) != (int64_t)job->u->to_version) {
        job_event(jm, job, "Warning", ignored[k],
                  "%s=%.40s: the update in progress is to version %" PRIu32 " (give that, or \"true\")", name, v,
                  job->u->to_version);
    } else if (update_cmd_for(job->u, &probe) != want) {
        job_event(jm, job, "Warning", ignored[k], "%s=%.40s: the update is %s%s", name, v,
                  update_state_name(job->u->state), job->u->state == UPDATE_PAUSED ? " while rolling back" : "");
    } else {
        return true;
    }
    return false;
}

void jm_update_intent(struct jobmgr *jm, struct jm_job *job, const json_t *obj, bool paused,
                      struct update_intent *out) {
    const json_t *ann = json_object_get(json_object_get(obj, "metadata"), "annotations");
    memset(out, 0, sizeof *out);
    out->paused = paused;
    out->abort = oneshot(jm, job, ann, JM_ONESHOT_ABORT);
    out->rollback = oneshot(jm, job, ann, JM_ONESHOT_ROLLBACK);
}

void jm_update_event(struct jobmgr *jm, const struct jm_job *job, enum update_state before,
                     const struct update *u) {
    if (u->state == before) return;
    const char *type = "Normal", *reason = NULL;
    switch (u->state) {
    case UPDATE_ROLLING_FORWARD:
        reason = before == UPDATE_PAUSED ? "UpdateResumed" : "UpdateStarted";
        break;
    case UPDATE_ROLLING_BACKWARD:
        reason = before == UPDATE_PAUSED ? "UpdateResumed" : "UpdateRollingBack";
        type = before == UPDATE_PAUSED ? "Normal" : "Warning";
        break;
    case UPDATE_PAUSED: reason = "UpdatePaused"; break;
    case UPDATE_SUCCEEDED: reason = "UpdateSucceeded"; break;
    case UPDATE_ROLLED_BACK: reason = "UpdateRolledBack"; type = "Warning"; break;
    case UPDATE_FAILED: reason = "UpdateFailed"; type = "Warning"; break;
    case UPDATE_ABORTED: reason = "UpdateAborted"; break;
    default: return;
    }
    job_event(jm, job, type, reason,
              "rolling update %" PRIu32 " -> %" PRIu32 ": %s (%" PRIu32 "/%" PRIu32 " updated, %" PRIu32 " failed)",
              u->from_version, u->to_version, update_state_name(u->state), u->ndone, u->count,
              u->nfailed_forward > u->nfailed ? u->nfailed_forward : u->nfailed);
}

void jm_update_progress(const struct update *u, struct jm_update_status *st) {
    *st = (struct jm_update_status){.state = u->state,
                                    .from = u->from_version,
                                    .to = u->to_version,
                                    .done = u->ndone,
                                    .failed = u->nfailed_forward > u->nfailed ? u->nfailed_forward : u->nfailed,
                                    .count = u->count,
                                    .batch = u->batch};
    for (uint32_t i = 0; i < u->count; i++) {
        if (!update_holds(u, i)) continue;
        if (st->ncurrent < JM_STATUS_BATCH_MAX) st->current[st->ncurrent] = i;
        st->ncurrent++;
    }
}

/* Whether record r waits out a backoff now, and until when. version: the
 * version of its next run. */
static bool waiting(const struct task_config *cfg, const struct jm_inst *r, uint32_t version, int64_t now,
                    int64_t *at) {
    uint32_t loop;
    if (!r->used || (r->state != TASK_FAILED && r->state != TASK_SUCCEEDED)) return false;
    *at = jm_restart_at(cfg, r, version, &loop);
    return *at > r->since_ms && now < *at;
}

void jm_backoff_scan(struct jobmgr *jm, struct jm_job *job, enum job_type type, const struct task_config *cfg,
                     uint32_t cur, int64_t now, struct jm_backoff_status *out) {
    memset(out, 0, sizeof *out);
    if (type == JOB_BATCH) return;
    for (uint32_t i = 0; i < job->ninst; i++) {
        struct jm_inst *r = &job->inst[i];
        int64_t at;
        uint32_t v = r->restart_pending ? r->restart_version : (job->u ? r->version : cur);
        if (!waiting(cfg, r, v, now, &at)) continue;
        int64_t delay_ms = at - r->since_ms;
        if (r->backoff_run != r->run) { /* a new wait: fix its wall-clock end, say it once */
            r->backoff_run = r->run;
            r->backoff_wall = (int64_t)time(NULL) + (at - now + 999) / 1000;
            job_event(jm, job, "Warning", "BackOff",
                      "Back-off restarting failed instance %" PRIu32 ": run %" PRIu32 " %s, restart %" PRIu32
                      " of a crash loop in %" PRId64 "s",
                      i, r->run, r->state == TASK_FAILED ? "failed" : "exited", r->crash_loop + 1,
                      (delay_ms + 999) / 1000);
            jm_log("info", "msg=\"restart backoff\" job=%s instance=%" PRIu32 " run=%" PRIu32 " delay_ms=%" PRId64,
                   job->key, i, r->run, delay_ms);
        }
        if (out->n < JM_STATUS_BACKOFF_MAX) {
            out->items[out->n].instance = i;
            out->items[out->n].restarts = r->crash_loop;
            out->items[out->n].delay_s = (uint32_t)((delay_ms + 999) / 1000);
            out->items[out->n].restart_at = r->backoff_wall;
        }
        out->n++;
        jm_wake_at(jm, job, at);
    }
}
