/* One Job's reconcile (jobmgr_ctl.h): template versions and the rolling
 * update, job_reconcile on the instance records, the actions carried out as
 * pod writes, the status and the Job's bookkeeping annotations, and the
 * cascading delete of a Job that is gone. Rules: docs/lifecycle.md, "The
 * jobmgr role". */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl.h"
#include "jobmgr_ctl.h"

#define CREATE_RETRY_MS 1000

/* ---- records ---- */

struct jm_inst *jm_inst_get(struct jm_job *job, uint32_t instance) {
    if (instance >= JM_MAX_INSTANCE) return NULL;
    if (instance >= job->ninst) {
        uint32_t n = job->ninst ? job->ninst : 8;
        while (n <= instance) n *= 2;
        struct jm_inst *v = realloc(job->inst, (size_t)n * sizeof *v);
        if (!v) return NULL;
        memset(v + job->ninst, 0, (size_t)(n - job->ninst) * sizeof *v);
        job->inst = v;
        job->ninst = n;
    }
    return &job->inst[instance];
}

void jm_inst_clear(struct jm_inst *r) {
    free(r->applied);
    free(r->pod);
    free(r->host);
    free(r->last_host);
    free(r->pin);
    memset(r, 0, sizeof *r);
}

void jm_set_state(struct jobmgr *jm, struct jm_inst *r, enum task_state s) {
    if (r->state == s) return;
    r->state = s;
    r->since_ms = jm_now_ms(jm);
    if (s == TASK_RUNNING) r->running_ms = r->since_ms;
}

void jm_set_str(char **dst, const char *v) {
    if ((!*dst && !v) || (*dst && v && !strcmp(*dst, v))) return;
    char *c = v ? strdup(v) : NULL;
    free(*dst);
    *dst = c;
}

/* The garbage is an array (sent in order) with a name -> index map, so a
 * large Job's cascade costs O(1) per pod event. */
struct jm_garbage *jm_garbage_find(struct jm_job *job, const char *name) {
    json_t *i = json_object_get(job->gindex, name);
    return i ? &job->garbage[json_integer_value(i)] : NULL;
}

void jm_garbage_add(struct jm_job *job, const char *name, bool grace0) {
    struct jm_garbage *g = jm_garbage_find(job, name);
    if (g) {
        if (grace0 && !g->grace0) g->grace0 = true, g->sent = false;
        return;
    }
    if (!job->gindex && !(job->gindex = json_object())) return;
    if (job->ngarbage == job->capgarbage) {
        size_t n = job->capgarbage ? job->capgarbage * 2 : 8;
        struct jm_garbage *v = realloc(job->garbage, n * sizeof *v);
        if (!v) return;
        job->garbage = v;
        job->capgarbage = n;
    }
    char *c = strdup(name);
    if (!c || json_object_set_new(job->gindex, name, json_integer((json_int_t)job->ngarbage))) {
        free(c);
        return;
    }
    job->garbage[job->ngarbage++] = (struct jm_garbage){c, grace0, false};
}

bool jm_garbage_remove(struct jm_job *job, const char *name) {
    json_t *iv = json_object_get(job->gindex, name);
    if (!iv) return false;
    size_t i = (size_t)json_integer_value(iv);
    free(job->garbage[i].name);
    json_object_del(job->gindex, name);
    if (i != --job->ngarbage) {
        job->garbage[i] = job->garbage[job->ngarbage];
        json_object_set_new(job->gindex, job->garbage[i].name, json_integer((json_int_t)i));
    }
    return true;
}

/* No grace period for deleting the record's pod: nothing runs in it, or no
 * kubelet will confirm the delete (node gone or not Ready; at-least-once). */
static bool idle_pod(const struct jobmgr *jm, const struct jm_inst *r) {
    return !r->bound || task_state_terminal(r->state) || !jm_node_ready(jm, r->host);
}

/* The next run of r (its pod, if any, goes to the garbage). */
static void do_restart(struct jobmgr *jm, struct jm_job *job, struct jm_inst *r, uint32_t run, uint32_t version,
                       bool count_failure, uint32_t crash_loop) {
    if (r->pod && r->present) jm_garbage_add(job, r->pod, idle_pod(jm, r));
    free(r->pod);
    r->pod = NULL;
    if (r->state == TASK_LOST) r->lost++;
    if (count_failure) r->failures++;
    r->run = run;
    r->version = version;
    r->crash_loop = crash_loop;
    r->running_ms = 0;
    r->present = r->bound = r->deleting = r->creating = r->create_inflight = false;
    r->kill = r->kill_sent = r->restart_pending = r->moving = false;
    r->create_ms = 0;
    r->gang_first = r->gang_run = r->gang_size = 0; /* alone, unless the plan says otherwise */
    if (r->host) {
        jm_set_str(&r->last_host, r->host);
        free(r->host);
        r->host = NULL;
    }
    jm_set_state(jm, r, TASK_INITIALIZED);
}

/* ---- writes ---- */

static char *fmt_path(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *fmt_path(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) s = NULL;
    va_end(ap);
    return s;
}

struct ctx {
    struct jobmgr *jm;
    struct jm_job *job;
    const json_t *obj, *tpl;
    uint32_t H;
    const struct job_spec *spec;
    const struct crd_job_extra *x;
    const char *pool;
    enum jm_pool_check pool_check; /* not OK: no pod is created */
    int64_t now;
    struct task_config tcfg;
    struct update_intent want; /* the operator's, for the update */
    bool generated;            /* JM_A_POD_NAMES: generated pod names */
};

static const json_t *tpl_for(const struct ctx *c, uint32_t version) {
    if (version == c->job->stable && c->job->stable_tpl) return c->job->stable_tpl;
    return c->tpl; /* H, or a version no longer known: the Job's template */
}

static void send_create(const struct ctx *c, struct jm_inst *r, uint32_t i) {
    const struct job_spec *spec = c->spec;
    /* the gang the run was started in, not the job's whole gang: members
     * still running are not waited for */
    struct jm_pod_params p = {.job = c->job->name, .ns = c->job->ns, .uid = c->job->uid, .pool = c->pool,
                              .type = spec->type, .instance = i, .run = r->run, .version = r->version,
                              .failures = r->failures, .lost = r->lost, .crash_loop = r->crash_loop,
                              .gang = r->gang_first, .gang_run = r->gang_run, .gang_size = r->gang_size,
                              .scheduler = c->jm->o.scheduler_name, .x = c->x, .generated = c->generated,
                              .salt = r->name_salt};
    if (spec->type == JOB_DAEMON) p.host = r->pin;
    else if (spec->type == JOB_STATEFUL) p.host = r->last_host;
    char err[512];
    json_t *pod = jm_pod_build(tpl_for(c, r->version), &p, err, sizeof err);
    char *path = fmt_path("/api/v1/namespaces/%s/pods", c->job->ns);
    if (!pod || !path) {
        jm_log("error", "msg=\"cannot build pod\" job=%s instance=%" PRIu32 " err=\"%s\"", c->job->key, i,
               pod ? "out of memory" : err);
        json_decref(pod);
        free(path);
        r->create_ms = c->now;
        return;
    }
    jm_set_str(&r->pod, json_string_value(json_object_get(json_object_get(pod, "metadata"), "name")));
    r->creating = r->create_inflight = true;
    r->create_ms = c->now;
    jm_send(c->jm, JM_RQ_CREATE, "POST", path, pod, NULL, c->job, r->pod, i, r->run);
}

static void send_delete(struct jobmgr *jm, struct jm_job *job, enum jm_req_kind kind, const char *pod, bool grace0,
                        uint32_t instance, uint32_t run) {
    char *path = fmt_path("/api/v1/namespaces/%s/pods/%s%s", job->ns, pod, grace0 ? "?gracePeriodSeconds=0" : "");
    /* the pod this decision was made about, not one that took its name since: the uid as precondition */
    const char *uid = json_string_value(
        json_object_get(json_object_get(kc_informer_get(jm->pods, job->ns, pod), "metadata"), "uid"));
    json_t *body = uid ? json_pack("{s:s, s:s, s:{s:s}}", "kind", "DeleteOptions", "apiVersion", "v1",
                                   "preconditions", "uid", uid)
                       : NULL;
    if (path) jm_send(jm, kind, "DELETE", path, body, body ? "application/json" : NULL, job, pod, instance, run);
    else json_decref(body);
}

static void send_garbage(struct jobmgr *jm, struct jm_job *job) {
    for (size_t i = 0; i < job->ngarbage; i++) {
        struct jm_garbage *g = &job->garbage[i];
        if (g->sent) continue;
        g->sent = true;
        send_delete(jm, job, JM_RQ_GARBAGE, g->name, g->grace0, 0, 0);
    }
}

static void persist(struct jobmgr *jm, struct jm_job *job) {
    if (!job->persist || job->persist_inflight) return;
    char v[16], to[16];
    snprintf(v, sizeof v, "%" PRIu32, job->stable);
    snprintf(to, sizeof to, "%" PRIu32, job->update_to);
    char *tpl = json_dumps(job->stable_tpl, JSON_COMPACT | JSON_SORT_KEYS);
    json_t *ann = json_pack("{s:s, s:s?}", JM_A_CONFIG_VERSION, v, JM_A_APPLIED_TEMPLATE, tpl);
    free(tpl);
    if (!ann) return;
    if (job->update_to) {
        json_object_set_new(ann, JM_A_UPDATE_TO, json_string(to));
        json_object_set_new(ann, JM_A_UPDATE_STATE, json_string(update_state_name(job->ust.state)));
    }
    for (int k = 0; k < JM_NONESHOT; k++) /* handled: removed */
        if (job->oneshot_clear[k]) json_object_set_new(ann, jm_oneshot_annotation[k], json_null());
    json_t *body = json_pack("{s:{s:o}}", "metadata", "annotations", ann);
    char *path = fmt_path(JM_JOBS_PATH "/namespaces/%s/jobs/%s", job->ns, job->name);
    if (!body || !path) {
        json_decref(body);
        free(path);
        return;
    }
    job->persist = false;
    memset(job->oneshot_clear, 0, sizeof job->oneshot_clear);
    job->persist_inflight = true;
    jm_send(jm, JM_RQ_ANNOTATE, "PATCH", path, body, "application/merge-patch+json", job, NULL, 0, 0);
}

/* ---- versions and the rolling update ---- */

/* A version or count from an annotation; 0 when absent or malformed. */
static uint32_t ann_u32(const char *s) {
    int64_t v = jm_parse_u32(s);
    return v < 0 ? 0 : (uint32_t)v;
}

static void set_stable(struct jm_job *job, uint32_t v, const json_t *tpl) {
    json_t *c = json_deep_copy(tpl);
    if (!c) return;
    json_decref(job->stable_tpl);
    job->stable_tpl = c;
    job->stable = v;
    job->persist = true;
}

/* From the Job's annotations (a restarted job manager), else the Job's
 * template is taken as applied. */
static void load_versions(struct jm_job *job, const json_t *obj, const json_t *tpl, uint32_t H) {
    const json_t *ann = json_object_get(json_object_get(obj, "metadata"), "annotations");
    uint32_t a = ann_u32(json_string_value(json_object_get(ann, JM_A_CONFIG_VERSION)));
    const char *ts = json_string_value(json_object_get(ann, JM_A_APPLIED_TEMPLATE));
    json_t *t = ts ? json_loads(ts, 0, NULL) : NULL;
    if (a && t && jm_template_version(t) == a) {
        json_decref(job->stable_tpl);
        job->stable_tpl = t;
        job->stable = a;
    } else {
        json_decref(t);
        set_stable(job, H, tpl);
    }
    job->update_to = ann_u32(json_string_value(json_object_get(ann, JM_A_UPDATE_TO)));
    const char *us = json_string_value(json_object_get(ann, JM_A_UPDATE_STATE));
    job->ust.state = UPDATE_INVALID;
    for (int s = 1; us && s < UPDATE_NSTATES; s++)
        if (!strcmp(us, update_state_name((enum update_state)s))) job->ust.state = (enum update_state)s;
    job->ust.from = job->stable;
    job->ust.to = job->update_to;
    if (job->ust.state == UPDATE_ROLLING_BACKWARD) job->ust.state = UPDATE_ROLLED_BACK; /* see Known gaps */
    else if (job->update_to && !update_state_terminal(job->ust.state)) job->ust.state = UPDATE_INVALID; /* restarts */
    job->loaded = true;
}

static void start_update(struct ctx *c, uint32_t from) {
    struct jm_job *job = c->job;
    struct update_spec us = c->x->update;
    if (!us.max_instance_attempts) us.max_instance_attempts = c->jm->o.update_max_attempts;
    char err[512];
    int rc = update_create(&job->u, c->spec->type, c->spec->instance_count, from, c->H, &us, err, sizeof err);
    if (rc) { /* nothing to roll (no instances): the new template simply applies */
        jm_log("info", "msg=\"template applied without a rolling update\" job=%s version=%" PRIu32 " why=\"%s\"",
               job->key, c->H, err);
        job->u = NULL;
        set_stable(job, c->H, c->tpl);
        return;
    }
    job->update_to = c->H;
    jm_update_progress(job->u, &job->ust);
    job->persist = true;
    jm_log("info", "msg=\"rolling update started\" job=%s from=%" PRIu32 " to=%" PRIu32 " batch=%" PRIu32, job->key,
           from, c->H, job->u->batch);
}

static void versions_step(struct ctx *c) {
    struct jm_job *job = c->job;
    if (job->u) {
        if (job->u->to_version == c->H && job->u->count == c->spec->instance_count) return;
        /* a new template, or a new instanceCount (the planner's count is
         * fixed): plan again from the applied version */
        uint32_t old_to = job->u->to_version;
        update_free(job->u);
        job->u = NULL;
        jm_log("info", "msg=\"rolling update superseded\" job=%s to=%" PRIu32 " instances=%" PRIu32, job->key, c->H,
               c->spec->instance_count);
        start_update(c, c->H == job->stable ? old_to : job->stable);
        return;
    }
    if (c->H == job->stable) return;
    if (c->spec->type != JOB_STATELESS && c->spec->type != JOB_STATEFUL) {
        set_stable(job, c->H, c->tpl); /* new runs use it; running ones are left alone */
        return;
    }
    if (job->update_to == c->H && update_state_terminal(job->ust.state)) return; /* rolled back from it */
    start_update(c, job->stable);
}

static void task_of(const struct jm_job *job, const struct jm_inst *r, uint32_t i, uint32_t cur, struct task *t) {
    memset(t, 0, sizeof *t);
    t->instance = i;
    t->run = r->run;
    t->state = r->state;
    t->state_since_ms = r->since_ms;
    t->failures = r->failures;
    t->lost = r->lost;
    t->preempted = r->preempted;
    t->config_version = r->version;
    /* during an update only the planner moves an instance to another
     * version: a restart of one it does not hold keeps the run's version */
    t->desired_version = r->restart_pending ? r->restart_version : job->u ? r->version : cur;
    t->crash_loop = r->crash_loop;
    t->running_since_ms = r->running_ms;
    t->held = r->restart_pending || (job->u && i < job->u->count && update_holds(job->u, i));
    t->stop = r->stopped;
    t->host = r->present ? r->host : NULL;
    t->last_host = r->last_host;
    t->pinned_host = r->pin;
}

static void update_step(struct ctx *c) {
    struct jm_job *job = c->job;
    struct update *u = job->u;
    if (job->ninst > job->cap_snap || !job->snap) { /* kept between reconciles */
        size_t cap = job->ninst > 16 ? job->ninst : 16;
        struct update_instance *v = realloc(job->snap, cap * sizeof *v);
        if (!v) return;
        job->snap = v;
        job->cap_snap = cap;
    }
    struct update_instance *snap = job->snap;
    struct update_action *acts = calloc(u->batch + 1, sizeof *acts);
    if (!acts) goto out;
    size_t n = 0, nacts = 0;
    for (uint32_t i = 0; i < job->ninst && i < u->count; i++) {
        if (!job->inst[i].used) continue;
        struct task t;
        task_of(job, &job->inst[i], i, u->target, &t);
        update_instance_of(&t, &snap[n++]);
        if (job->inst[i].stopped && !job->inst[i].restart_pending) {
            /* stopped (spec.stoppedInstances): nothing to roll now; shown to
             * the planner as settled at the target, it is started at the
             * Job's template when it starts again (as Peloton left a stopped
             * instance stopped through an update) */
            snap[n - 1].version = u->target;
            snap[n - 1].state = TASK_RUNNING;
            snap[n - 1].state_since_ms = 0;
        }
    }
    char err[512];
    enum update_state before = u->state;
    enum update_cmd cmd = update_cmd_for(u, &c->want);
    if (update_plan(u, snap, n, cmd, c->now, acts, u->batch, &nacts, err, sizeof err)) {
        jm_log("error", "msg=\"update plan failed\" job=%s err=\"%s\"", job->key, err);
        goto out;
    }
    if (u->next_check_ms != INT64_MAX) jm_wake_at(c->jm, job, u->next_check_ms);
    jm_update_event(c->jm, job, before, u);
    for (size_t k = 0; k < nacts; k++) {
        if (acts[k].instance >= job->ninst || !job->inst[acts[k].instance].used) continue;
        struct jm_inst *r = &job->inst[acts[k].instance];
        r->restart_pending = true;
        r->restart_version = acts[k].version;
    }
    jm_update_progress(u, &job->ust);
    if (u->state != before) {
        job->persist = true;
        jm_log("info", "msg=\"rolling update\" job=%s state=%s done=%" PRIu32 "/%" PRIu32 " failed=%" PRIu32,
               job->key, update_state_name(u->state), u->ndone, u->count, job->ust.failed);
    }
    if (update_state_terminal(u->state)) {
        /* SUCCEEDED, or FAILED while rolling forward: the new template stays
         * (Peloton leaves a failed update's instances where they are) */
        if (u->state == UPDATE_SUCCEEDED || (u->state == UPDATE_FAILED && u->target == u->to_version))
            set_stable(job, u->to_version, tpl_for(c, u->to_version));
        update_free(u);
        job->u = NULL;
        job->persist = true;
    }
out:
    free(acts);
}

/* Carries out the update's restarts: a terminal instance starts its next
 * run now, or once its restart backoff is over (a retry at the same
 * version); a live one is killed first. */
static void pending_restarts(struct ctx *c) {
    struct jm_job *job = c->job;
    for (uint32_t i = 0; i < job->ninst; i++) {
        struct jm_inst *r = &job->inst[i];
        if (!r->used || !r->restart_pending || r->stopped) continue; /* a stopped one waits for its start */
        uint32_t v = r->restart_version;
        if (task_state_terminal(r->state)) {
            uint32_t loop;
            int64_t at = jm_restart_at(&c->tcfg, r, v, &loop);
            if (at > r->since_ms && c->now < at) continue; /* jm_backoff_scan reports it and wakes us */
            do_restart(c->jm, job, r, r->run + 1, v, false, loop);
        } else if (r->state == TASK_INITIALIZED && !r->present && !r->creating) {
            do_restart(c->jm, job, r, r->run + 1, v, false, 0);
        } else if (r->present) {
            r->kill = true;
        }
    }
}

/* ---- the reconcile ---- */

/* DAEMON: the nodes where the job's pod could be placed (jm_fleet_eligible
 * on the pod it would create, without a pin). -errno with err when the
 * template cannot be judged: the caller then changes nothing. */
static int daemon_hosts(struct ctx *c, const char ***out, size_t *n, char *err, size_t errlen) {
    struct jm_fleet *fl = jm_fleet(c->jm);
    if (!fl) return snprintf(err, errlen, "out of memory"), -ENOMEM;
    struct jm_pod_params p = {.job = c->job->name, .ns = c->job->ns, .uid = c->job->uid, .pool = c->pool,
                              .type = JOB_DAEMON, .instance = 0, .run = 1, .version = c->spec->config_version,
                              .scheduler = c->jm->o.scheduler_name, .x = c->x};
    json_t *pod = jm_pod_build(c->tpl, &p, err, errlen);
    if (!pod) return -EINVAL;
    *out = calloc(jm_fleet_size(fl) ? jm_fleet_size(fl) : 1, sizeof **out);
    int rc = *out ? jm_fleet_eligible(fl, pod, *out, n, err, errlen) : -ENOMEM;
    json_decref(pod);
    return rc;
}

static void set_gang(struct jm_inst *r, const struct job_action *a) {
    r->gang_first = a->gang_first;
    r->gang_run = a->gang_first_run;
    r->gang_size = a->gang_size;
}

static void apply_action(struct ctx *c, const struct job_action *a) {
    struct jm_inst *r = jm_inst_get(c->job, a->instance);
    if (!r) return;
    switch (a->kind) {
    case JOB_ACT_CREATE:
        jm_inst_clear(r);
        r->used = true;
        r->run = a->run ? a->run : 1;
        r->version = a->version;
        if (a->host && a->host_pinned) jm_set_str(&r->pin, a->host);
        r->state = TASK_UNKNOWN;
        jm_set_state(c->jm, r, TASK_INITIALIZED);
        set_gang(r, a);
        break;
    case JOB_ACT_RESTART:
        do_restart(c->jm, c->job, r, a->run, a->version, a->count_failure, a->crash_loop);
        if (a->host && a->host_pinned) jm_set_str(&r->pin, a->host);
        set_gang(r, a);
        break;
    case JOB_ACT_KILL:
        r->kill = true;
        if (!r->present && !r->creating) jm_set_state(c->jm, r, TASK_KILLED);
        break;
    case JOB_ACT_DELETE:
        if (r->pod && r->present) jm_garbage_add(c->job, r->pod, idle_pod(c->jm, r));
        jm_inst_clear(r);
        break;
    default: /* TIMEOUT: no PLACING/LAUNCHING here; MARK: the status below */
        break;
    }
}

/* An instance holds one of sla.maximumRunningInstances' slots from the
 * moment its pod is asked for until that run ends: its pod exists (or is
 * being created) and the run is not terminal. */
static bool holds_slot(const struct jm_inst *r) {
    return r->used && (r->present || r->creating) && !task_state_terminal(r->state);
}

/* How many more pods of the job may start now: sla.maximumRunningInstances
 * less the instances holding a slot, for a BATCH job with a maximum
 * (Peloton's job manager holds the rest back and releases the next one as a
 * run ends); UINT32_MAX otherwise. */
static uint32_t free_slots(const struct ctx *c) {
    if (c->spec->type != JOB_BATCH || !c->x->max_running) return UINT32_MAX;
    uint32_t held = 0;
    for (uint32_t i = 0; i < c->job->ninst; i++) held += holds_slot(&c->job->inst[i]);
    return held >= c->x->max_running ? 0 : c->x->max_running - held;
}

static void send_pass(struct ctx *c) {
    struct jm_job *job = c->job;
    for (uint32_t i = 0; i < job->ninst; i++) {
        struct jm_inst *r = &job->inst[i];
        if (r->used && r->creating && !r->create_inflight && !r->present &&
            c->now - r->create_ms > (int64_t)c->jm->o.resync_ms)
            r->creating = false; /* created but never seen: send it again (409 is fine) */
    }
    uint32_t slots = free_slots(c);
    for (uint32_t i = 0; i < job->ninst; i++) {
        struct jm_inst *r = &job->inst[i];
        if (!r->used) continue;
        bool due = !r->create_ms || c->now - r->create_ms >= CREATE_RETRY_MS || r->pod == NULL;
        /* no pods while the pool is not right (docs/lifecycle.md), for a
         * stopped instance, or beyond sla.maximumRunningInstances */
        if (r->state == TASK_INITIALIZED && !r->present && !r->creating && !r->kill && due &&
            c->pool_check == JM_POOL_OK && !crd_job_stopped(c->x, i) && slots > 0) {
            send_create(c, r, i);
            if (slots != UINT32_MAX) slots--;
        }
        if (r->kill && r->present && !r->deleting && !r->kill_sent && r->pod) {
            r->kill_sent = true;
            send_delete(c->jm, job, JM_RQ_KILL, r->pod, idle_pod(c->jm, r), i, r->run);
        }
    }
    send_garbage(c->jm, job);
}

static void send_status(struct ctx *c, const struct job_plan *plan, const struct jm_backoff_status *bo) {
    struct jm_job *job = c->job;
    json_t *st =
        jm_status_build(plan->state, &plan->counts, job->ust.state != UPDATE_INVALID ? &job->ust : NULL, bo);
    char now[40];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (st && jm_status_set_pool(st, json_object_get(c->obj, "status"), c->pool_check, c->pool, now)) {
        json_decref(st);
        st = NULL;
    }
    /* why it is not yet Running: the pods that wait to be scheduled */
    size_t nw = 0;
    for (uint32_t i = 0; i < job->ninst; i++) {
        const struct jm_inst *r = &job->inst[i];
        nw += r->used && r->present && !r->bound && !r->deleting && r->pod && !task_state_terminal(r->state);
    }
    const json_t **waiting = nw ? calloc(nw, sizeof *waiting) : NULL;
    size_t k = 0;
    /* the pod cache keeps text: a pod with no PodScheduled=False stands as an
     * empty object, and one pod of each reason is decoded for them all (the
     * status reads the reason of each and the message of one) */
    json_t *none = json_object();
    const char *rs[JM_REASONS_MAX];
    const json_t *rp[JM_REASONS_MAX];
    size_t nrs = 0;
    for (uint32_t i = 0; waiting && none && i < job->ninst; i++) {
        const struct jm_inst *r = &job->inst[i];
        if (!r->used || !r->present || r->bound || r->deleting || !r->pod || task_state_terminal(r->state)) continue;
        if (!r->unsched) {
            waiting[k++] = none;
            continue;
        }
        size_t j = 0;
        while (j < nrs && rs[j] != r->unsched) j++;
        if (j < nrs) {
            waiting[k++] = rp[j];
            continue;
        }
        const json_t *pod = kc_informer_get(c->jm->pods, job->ns, r->pod);
        if (!pod) continue;
        waiting[k++] = pod;
        if (r->unsched != jm_reason_other && nrs < JM_REASONS_MAX) rs[nrs] = r->unsched, rp[nrs++] = pod;
    }
    if (st && ((nw && !waiting) ||
               jm_status_set_running(st, json_object_get(c->obj, "status"), waiting, k, &plan->counts, now))) {
        json_decref(st);
        st = NULL;
    }
    free(waiting);
    json_decref(none);
    const json_t *gen = json_object_get(json_object_get(c->obj, "metadata"), "generation");
    if (st && json_is_integer(gen))
        json_object_set_new(st, "observedGeneration", json_integer(json_integer_value(gen)));
    char *dump = st ? json_dumps(st, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    if (!dump) {
        json_decref(st);
        return;
    }
    if (jm_status_same(json_object_get(c->obj, "status"), st)) {
        free(job->status_sent);
        job->status_sent = dump;
        json_decref(st);
        return;
    }
    if (job->status_inflight || (job->status_sent && !strcmp(job->status_sent, dump))) {
        free(dump);
        json_decref(st);
        return;
    }
    char *path = fmt_path(JM_JOBS_PATH "/namespaces/%s/jobs/%s/status", job->ns, job->name);
    json_t *body = json_pack("{s:o}", "status", st);
    /* decided from this copy of the Job: a newer one (another writer, or a
     * job manager of a later term) makes it 409, not overwritten */
    const char *rv = json_string_value(json_object_get(json_object_get(c->obj, "metadata"), "resourceVersion"));
    if (body && rv) json_object_set_new(body, "metadata", json_pack("{s:s}", "resourceVersion", rv));
    if (!path || !body) {
        free(path);
        json_decref(body);
        free(dump);
        return;
    }
    free(job->status_sent);
    job->status_sent = dump;
    job->status_inflight = true;
    jm_send(c->jm, JM_RQ_STATUS, "PATCH", path, body, "application/merge-patch+json", job, NULL, 0, 0);
}

/* Every record goes; their pods go to the garbage. */
static void drop_records(struct jobmgr *jm, struct jm_job *job) {
    for (uint32_t i = 0; i < job->ninst; i++) {
        struct jm_inst *r = &job->inst[i];
        if (r->used && r->pod && r->present) jm_garbage_add(job, r->pod, idle_pod(jm, r));
        jm_inst_clear(r);
    }
    update_free(job->u);
    job->u = NULL;
}

/* The Job is gone (or being deleted): its pods go, then the record. */
static bool cascade(struct jobmgr *jm, struct jm_job *job) {
    drop_records(jm, job);
    send_garbage(jm, job);
    if (job->ngarbage == 0 && !job->dirty) {
        if (job->uid) jm_log("info", "msg=\"job gone, pods deleted\" job=%s", job->key);
        jm_job_free(jm, job);
        return true;
    }
    return false;
}

/* A new Job of the same name: the old one's pods and bookkeeping go. */
static void new_incarnation(struct jobmgr *jm, struct jm_job *job) {
    drop_records(jm, job);
    job->loaded = false;
    job->update_to = 0;
    job->ust = (struct jm_update_status){0};
    free(job->status_sent);
    job->status_sent = NULL;
}

/* An Event on the Job when its pool goes wrong (Warning) and when it is
 * right again after that (Normal); nothing for a pool that was always
 * there. The condition PoolReady says the same in the status. */
static void tell_pool(struct ctx *c) {
    struct jm_job *job = c->job;
    if (c->pool_check == job->pool_told) return;
    char msg[600];
    jm_pool_message(c->pool_check, c->pool, msg, sizeof msg);
    bool ok = c->pool_check == JM_POOL_OK;
    ctl_object_event(c->jm->kc, "peloton-jobmgr", JM_API_VERSION, "Job", job->ns, job->name, job->uid,
                     ok ? "Normal" : "Warning", jm_pool_reason(c->pool_check), "%s%s", msg,
                     ok ? ": the job proceeds" : "");
    jm_log(ok ? "info" : "warn", "msg=\"%s\" job=%s pool=%s", jm_pool_reason(c->pool_check), job->key, c->pool);
    job->pool_told = c->pool_check;
}

bool jm_sync_job(struct jobmgr *jm, struct jm_job *job) {
    json_t *obj = kc_informer_get(jm->jobs, job->ns, job->name);
    const json_t *md = json_object_get(obj, "metadata");
    if (!obj || json_object_get(md, "deletionTimestamp")) return cascade(jm, job);
    const char *uid = json_string_value(json_object_get(md, "uid"));
    if (job->uid && uid && strcmp(job->uid, uid)) new_incarnation(jm, job);
    jm_set_str(&job->uid, uid);

    struct job_spec spec;
    struct crd_job_extra x;
    char pool[256], err[512];
    if (crd_job_decode(obj, &spec, pool, sizeof pool, err, sizeof err) ||
        crd_job_decode_extra(obj, &x, err, sizeof err)) {
        if (!job->last_err || strcmp(job->last_err, err))
            jm_log("warn", "msg=\"invalid job\" job=%s err=\"%s\"", job->key, err);
        jm_set_str(&job->last_err, err);
        send_garbage(jm, job);
        return false;
    }
    struct ctx c = {.jm = jm, .job = job, .obj = obj, .spec = &spec, .x = &x, .pool = pool, .now = jm_now_ms(jm)};
    jm_task_config(jm, &c.tcfg);
    const char *naming = json_string_value(json_object_get(json_object_get(md, "annotations"), JM_A_POD_NAMES));
    c.generated = naming && !strcmp(naming, JM_POD_NAMES_GENERATED);
    c.pool_check = jm_pool_check(jm, pool);
    tell_pool(&c);
    c.tpl = json_object_get(json_object_get(obj, "spec"), "template");
    c.H = jm_template_version(c.tpl);
    if (!job->loaded) load_versions(job, obj, c.tpl, c.H);
    versions_step(&c);

    /* a pod on a node that is gone is LOST (at-least-once: it runs again);
     * a host found once is looked up again only when a Node came or went
     * (jm->node_gen) or the record's host changed */
    for (uint32_t i = 0; i < job->ninst; i++) {
        struct jm_inst *r = &job->inst[i];
        if (!r->used || !r->present || !r->bound || task_state_terminal(r->state) || r->node_gen == jm->node_gen)
            continue;
        if (jm_node_exists(jm, r->host)) r->node_gen = jm->node_gen;
        else jm_set_state(jm, r, TASK_LOST);
    }
    for (uint32_t i = 0; i < job->ninst; i++) job->inst[i].stopped = crd_job_stopped(&x, i);
    jm_update_intent(jm, job, obj, x.update_paused, &c.want);
    if (job->u) update_step(&c);
    if (jm_any_maintenance(jm)) jm_drain_step(jm, job, spec.type, spec.instance_count, jm_drain_budget(&x));
    pending_restarts(&c);

    uint32_t cur = job->u ? job->u->target : job->stable;
    spec.config_version = cur;
    size_t n = 0;
    for (uint32_t i = 0; i < job->ninst; i++) n += job->inst[i].used;
    const char **hosts = NULL;
    size_t nhosts = 0;
    if (spec.type == JOB_DAEMON && daemon_hosts(&c, &hosts, &nhosts, err, sizeof err)) {
        if (!job->last_err || strcmp(job->last_err, err))
            jm_log("warn", "msg=\"cannot judge the daemon's nodes\" job=%s err=\"%s\"", job->key, err);
        jm_set_str(&job->last_err, err);
        free(hosts);
        send_garbage(jm, job);
        return false;
    }
    if (n > job->cap_tasks || !job->tasks) { /* kept: a large job's array is not allocated (and zeroed) per sync */
        size_t cap = n > 16 ? n + n / 4 : 16;
        struct task *v = realloc(job->tasks, cap * sizeof *v);
        if (!v) {
            free(hosts);
            return false;
        }
        job->tasks = v;
        job->cap_tasks = cap;
    }
    struct task *tasks = job->tasks;
    n = 0;
    for (uint32_t i = 0; i < job->ninst; i++)
        if (job->inst[i].used) task_of(job, &job->inst[i], i, cur, &tasks[n++]);
    struct job_input in = {.spec = &spec, .tasks = tasks, .ntasks = n, .hosts = hosts, .nhosts = nhosts,
                           .task_cfg = &c.tcfg, .now_ms = c.now};
    struct job_plan plan;
    if (job_reconcile(&in, &plan, err, sizeof err)) {
        jm_log("error", "msg=\"reconcile failed\" job=%s err=\"%s\"", job->key, err);
    } else {
        for (size_t k = 0; k < plan.n; k++) apply_action(&c, &plan.v[k]);
        if (plan.next_deadline_ms != INT64_MAX) jm_wake_at(jm, job, plan.next_deadline_ms);
        struct jm_backoff_status bo;
        jm_backoff_scan(jm, job, spec.type, &c.tcfg, cur, c.now, &bo);
        send_pass(&c);
        send_status(&c, &plan, &bo);
        persist(jm, job);
    }
    job_plan_free(&plan);
    free(hosts);
    return false;
}

/* ---- request completions ---- */

/* A create of a generated name answered 409: whether the pod of that name
 * is another's, i.e. not known to the pod informer as this run of this
 * instance of this Job (the informer sees only pods labelled
 * peloton.io/job, so a stranger's pod is not in it at all). Taking another
 * name for a create of ours that went through unseen costs a second pod of
 * the run, which the first one's arrival sends to the garbage. (A
 * <job>-<instance> name has no other to take: that create waits until the
 * other pod is gone, as before.) */
static bool name_taken(struct jobmgr *jm, const struct jm_job *job, const struct jm_req *q) {
    char plain[512];
    if (jm_pod_name(plain, sizeof plain, job->name, q->instance, q->run) == 0 && !strcmp(plain, q->pod)) return false;
    const json_t *pod = kc_informer_get(jm->pods, job->ns, q->pod);
    struct jm_pod_view v;
    if (!pod) return true;
    if (jm_pod_parse(pod, &v)) return true;
    return strcmp(v.job, job->name) || v.instance != q->instance || v.run != q->run ||
           (v.owner_uid && job->uid && strcmp(v.owner_uid, job->uid));
}

void jm_req_done(struct jobmgr *jm, struct jm_job *job, const struct jm_req *q, long status, const char *error) {
    bool ok = status >= 200 && status < 300;
    struct jm_inst *r = job && (q->kind == JM_RQ_CREATE || q->kind == JM_RQ_KILL) && q->instance < job->ninst
                            ? &job->inst[q->instance]
                            : NULL;
    if (r && (!r->used || r->run != q->run)) r = NULL;
    switch (q->kind) {
    case JM_RQ_CREATE:
        if (status == 409) ok = true; /* it exists: the informer will show it */
        if (r && status == 409 && name_taken(jm, job, q)) { /* by another pod: the next try takes another name */
            r->name_salt++;
            ok = false;
        }
        if (r) {
            r->create_inflight = false;
            if (!ok) {
                r->creating = false;
                r->create_ms = jm_now_ms(jm);
            }
        }
        break;
    case JM_RQ_KILL:
        if (status == 404) ok = true;
        if (r && !ok) r->kill_sent = false;
        break;
    case JM_RQ_GARBAGE:
        if (status == 404) {
            ok = true;
            if (job) jm_garbage_remove(job, q->pod);
        } else if (!ok && job) {
            struct jm_garbage *g = jm_garbage_find(job, q->pod);
            if (g) g->sent = false; /* again on the next reconcile */
        }
        if (job && ok && job->ngarbage == 0 && !kc_informer_get(jm->jobs, job->ns, job->name)) jm_mark_dirty(jm, job);
        break;
    case JM_RQ_STATUS:
        if (job) {
            job->status_inflight = false;
            if (!ok) {
                free(job->status_sent);
                job->status_sent = NULL;
            }
            /* the state may have moved on meanwhile; after a 409 the copy it
             * was decided from was old: decided again from the newer one */
            if (ok || status == 409) jm_mark_dirty(jm, job);
            if (status == 409) return; /* expected while the Job's watch catches up: not a failure to report */
        }
        break;
    case JM_RQ_ANNOTATE:
        if (job) {
            job->persist_inflight = false;
            if (!ok) job->persist = true;
        }
        break;
    }
    if (!ok)
        jm_log("warn", "msg=\"write failed\" job=%s pod=%s path=%s status=%ld err=\"%s\"", q->key ? q->key : "-",
               q->pod ? q->pod : "-", q->path, status, error ? error : "");
}
