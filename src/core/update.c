/* Rolling update planner (see update.h, docs/lifecycle.md). */
#include "errmsg.h"
#include "update.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    F_INFLIGHT = 1u,   /* started by the planner, not yet confirmed */
    F_GAVEUP = 2u,     /* maxInstanceAttempts exhausted in the current direction */
    F_RETRY = 4u,      /* this call: failed attempt, start again (counted) */
    F_RETRY_FREE = 8u, /* this call: LOST/KILLED at target, start again (not counted) */
    F_SETTLED = 16u,   /* RUNNING at the target for min_running_ms: counts as updated */
};

static const char *const g_names[UPDATE_NSTATES] = {
    "INVALID", "INITIALIZED", "ROLLING_FORWARD", "PAUSED", "SUCCEEDED",
    "ABORTED", "FAILED",      "ROLLING_BACKWARD", "ROLLED_BACK",
};

const char *update_state_name(enum update_state s) {
    if ((int)s < 0 || s >= UPDATE_NSTATES) return "INVALID";
    return g_names[s];
}

bool update_state_terminal(enum update_state s) {
    return s == UPDATE_SUCCEEDED || s == UPDATE_ABORTED || s == UPDATE_FAILED || s == UPDATE_ROLLED_BACK;
}


int update_create(struct update **out, enum job_type type, uint32_t count, uint32_t from_version,
                  uint32_t to_version, const struct update_spec *spec, char *err, size_t errlen) {
    *out = NULL;
    if (type != JOB_STATELESS && type != JOB_STATEFUL)
        return core_fail(err, errlen, -EINVAL, "rolling update supports STATELESS and STATEFUL jobs, not %s",
                    job_type_name(type));
    if (count == 0 || count > JOB_MAX_INSTANCES)
        return core_fail(err, errlen, -EINVAL, "instanceCount %u out of range 1..%u", count, JOB_MAX_INSTANCES);
    if (from_version == to_version)
        return core_fail(err, errlen, -EINVAL, "update from version %u to the same version", from_version);
    if (spec->batch_percentage > 100)
        return core_fail(err, errlen, -EINVAL, "batchPercentage %u exceeds 100", spec->batch_percentage);
    if (spec->min_running_ms < 0)
        return core_fail(err, errlen, -EINVAL, "min_running_ms %lld is negative", (long long)spec->min_running_ms);

    struct update *u = calloc(1, sizeof *u);
    if (!u) return core_fail(err, errlen, -ENOMEM, "out of memory");
    u->attempts = calloc(count, sizeof *u->attempts);
    u->start_run = calloc(count, sizeof *u->start_run);
    u->flags = calloc(count, sizeof *u->flags);
    u->view = calloc(count, sizeof *u->view);
    if (!u->attempts || !u->start_run || !u->flags || !u->view) {
        update_free(u);
        return core_fail(err, errlen, -ENOMEM, "out of memory");
    }
    u->type = type;
    u->count = count;
    u->from_version = from_version;
    u->to_version = to_version;
    u->target = to_version;
    u->spec = *spec;
    if (spec->batch_size) u->batch = spec->batch_size;
    else if (spec->batch_percentage)
        u->batch = (uint32_t)(((uint64_t)count * spec->batch_percentage + 99) / 100);
    else u->batch = count;
    if (u->batch < 1) u->batch = 1;
    if (u->batch > count) u->batch = count;
    u->state = UPDATE_INITIALIZED;
    u->resume_state = UPDATE_ROLLING_FORWARD;
    u->next_check_ms = INT64_MAX;
    *out = u;
    return 0;
}

void update_free(struct update *u) {
    if (!u) return;
    free(u->attempts);
    free(u->start_run);
    free(u->flags);
    free(u->view);
    free(u);
}

enum update_cmd update_cmd_for(const struct update *u, const struct update_intent *want) {
    if (update_state_terminal(u->state)) return UPDATE_CMD_NONE;
    if (want->abort) return UPDATE_CMD_ABORT;
    bool forward = u->state == UPDATE_INITIALIZED || u->state == UPDATE_ROLLING_FORWARD ||
                   (u->state == UPDATE_PAUSED && u->resume_state == UPDATE_ROLLING_FORWARD);
    if (want->rollback && forward) return UPDATE_CMD_ROLLBACK;
    if (want->paused && u->state != UPDATE_PAUSED) return UPDATE_CMD_PAUSE;
    if (!want->paused && u->state == UPDATE_PAUSED) return UPDATE_CMD_RESUME;
    return UPDATE_CMD_NONE;
}

bool update_holds(const struct update *u, uint32_t instance) {
    return instance < u->count && (u->flags[instance] & F_INFLIGHT);
}

bool update_gave_up(const struct update *u, uint32_t instance) {
    return instance < u->count && (u->flags[instance] & F_GAVEUP);
}

void update_instance_of(const struct task *t, struct update_instance *out) {
    out->instance = t->instance;
    out->version = t->config_version;
    out->run = t->run;
    out->state = t->state;
    out->state_since_ms = t->state_since_ms;
    out->host = t->host ? t->host : t->last_host;
}

/* --- one step --- */

struct step {
    struct update *u;
    int64_t now_ms;
    struct update_action *acts;
    size_t cap, n;
};

static bool at_target(const struct update *u, const struct update_instance *v) {
    return v && v->version == u->target;
}

static bool is_running(const struct update_instance *v) { return v && v->state == TASK_RUNNING; }

static void emit(struct step *s, uint32_t i, bool counted) {
    struct update *u = s->u;
    const struct update_instance *v = u->view[i];
    if (s->n == s->cap) return;
    if (counted) u->attempts[i]++;
    u->start_run[i] = v ? v->run : 0;
    if (!(u->flags[i] & F_INFLIGHT)) {
        u->flags[i] |= F_INFLIGHT;
        u->ninflight++;
    }
    s->acts[s->n++] = (struct update_action){
        .instance = i,
        .version = u->target,
        .attempt = u->attempts[i],
        .takes_down = is_running(v),
        .host_hint = (u->type == JOB_STATEFUL && v) ? v->host : NULL,
    };
}

static void clear_inflight(struct update *u, uint32_t i) {
    if (u->flags[i] & F_INFLIGHT) {
        u->flags[i] &= (uint8_t)~F_INFLIGHT;
        u->ninflight--;
    }
}

/* A failed run at the target version (FAILED, or SUCCEEDED: a service should
 * not exit) of instance i, in flight: retry, or give up once
 * maxInstanceAttempts runs failed. */
static void failed_attempt(struct update *u, uint32_t i) {
    if (u->spec.max_instance_attempts && u->attempts[i] >= u->spec.max_instance_attempts) {
        clear_inflight(u, i);
        u->flags[i] |= F_GAVEUP;
        u->nfailed++;
    } else {
        u->flags[i] |= F_RETRY;
    }
}

/* Reads the snapshot. An instance counts as updated (F_SETTLED) once it has
 * been RUNNING at the target for min_running_ms, whoever started it; a run at
 * the target that ends before that is a failed attempt, whoever started it
 * (the planner adopts it). Also sets next_check_ms. */
static void observe(struct step *s) {
    struct update *u = s->u;
    u->next_check_ms = INT64_MAX;
    for (uint32_t i = 0; i < u->count; i++) {
        u->flags[i] &= (uint8_t)~(F_RETRY | F_RETRY_FREE);
        const struct update_instance *v = u->view[i];
        if (!at_target(u, v)) u->flags[i] &= (uint8_t)~F_SETTLED;
        if (u->flags[i] & (F_SETTLED | F_GAVEUP)) continue;
        bool inflight = u->flags[i] & F_INFLIGHT;
        if (inflight && (!v || v->run <= u->start_run[i])) continue; /* our start has not taken effect yet */
        if (!at_target(u, v)) {
            /* A new run at another version: not ours any more; it becomes a candidate again. */
            if (inflight && (task_state_terminal(v->state) || is_running(v))) clear_inflight(u, i);
            continue;
        }
        if (is_running(v)) {
            int64_t at = v->state_since_ms + u->spec.min_running_ms;
            if (s->now_ms >= at) {
                clear_inflight(u, i);
                u->flags[i] |= F_SETTLED;
            } else if (at < u->next_check_ms) {
                u->next_check_ms = at;
            }
            continue;
        }
        if (v->state == TASK_FAILED || v->state == TASK_SUCCEEDED) {
            if (!inflight) { /* at the target, not settled, not ours: adopt the failed run */
                u->flags[i] |= F_INFLIGHT;
                u->ninflight++;
                u->start_run[i] = v->run - 1;
                if (u->attempts[i] == 0) u->attempts[i] = 1;
            }
            failed_attempt(u, i);
        } else if (inflight && (v->state == TASK_LOST || v->state == TASK_KILLED)) {
            u->flags[i] |= F_RETRY_FREE;
        }
    }
}

static void count_done(struct update *u) {
    u->ndone = 0;
    for (uint32_t i = 0; i < u->count; i++)
        if (u->flags[i] & F_SETTLED) u->ndone++;
}

static bool complete(const struct update *u) {
    if (u->ninflight) return false;
    for (uint32_t i = 0; i < u->count; i++)
        if (!(u->flags[i] & (F_GAVEUP | F_SETTLED))) return false;
    return true;
}

/* Retries, then new starts within the batch and the unavailability bound. */
static void select_starts(struct step *s) {
    struct update *u = s->u;
    uint32_t unavailable = 0;
    for (uint32_t i = 0; i < u->count; i++) {
        if (u->flags[i] & F_GAVEUP) continue;
        if ((u->flags[i] & F_INFLIGHT) || !is_running(u->view[i])) unavailable++;
    }
    for (uint32_t i = 0; i < u->count; i++) {
        if (u->flags[i] & F_RETRY) emit(s, i, true);
        else if (u->flags[i] & F_RETRY_FREE) emit(s, i, false);
        u->flags[i] &= (uint8_t)~(F_RETRY | F_RETRY_FREE);
    }
    /* Pass 0: instances already down (free to update); pass 1: running ones. */
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t i = 0; i < u->count; i++) {
            if (u->flags[i] & (F_INFLIGHT | F_GAVEUP)) continue;
            const struct update_instance *v = u->view[i];
            if (at_target(u, v)) continue;
            bool running = is_running(v);
            if (running != (pass == 1)) continue;
            if (u->ninflight >= u->batch) return;
            if (running) {
                if (unavailable >= u->batch) return;
                unavailable++;
            }
            u->attempts[i] = 0;
            emit(s, i, true);
        }
    }
}

/* Turns around: target becomes from_version; in-flight instances are
 * retargeted at once (they are already unavailable). */
static void begin_rollback(struct step *s) {
    struct update *u = s->u;
    u->nfailed_forward = u->nfailed;
    u->state = UPDATE_ROLLING_BACKWARD;
    u->target = u->from_version;
    u->nfailed = 0;
    for (uint32_t i = 0; i < u->count; i++) {
        u->flags[i] &= (uint8_t)~(F_GAVEUP | F_RETRY | F_RETRY_FREE | F_SETTLED);
        u->attempts[i] = 0;
        if (u->flags[i] & F_INFLIGHT) emit(s, i, true);
    }
}

static void finish(struct update *u, enum update_state st) {
    u->state = st;
    for (uint32_t i = 0; i < u->count; i++) clear_inflight(u, i);
}

/* After a failure: roll back (forward, rollbackOnFailure) or fail. */
static void on_failure(struct step *s) {
    struct update *u = s->u;
    if (u->state == UPDATE_ROLLING_FORWARD && u->spec.rollback_on_failure) begin_rollback(s);
    else finish(u, UPDATE_FAILED);
}

int update_plan(struct update *u, const struct update_instance *inst, size_t n, enum update_cmd cmd,
                int64_t now_ms, struct update_action *acts, size_t cap, size_t *nacts, char *err,
                size_t errlen) {
    *nacts = 0;
    /* Validate everything before changing anything. */
    memset(u->view, 0, u->count * sizeof *u->view);
    for (size_t k = 0; k < n; k++) {
        if (inst[k].instance >= u->count) continue;
        if (u->view[inst[k].instance])
            return core_fail(err, errlen, -EINVAL, "duplicate snapshot for instance %u", inst[k].instance);
        u->view[inst[k].instance] = &inst[k];
    }
    switch (cmd) {
    case UPDATE_CMD_NONE:
        break;
    case UPDATE_CMD_PAUSE:
        if (u->state != UPDATE_INITIALIZED && u->state != UPDATE_ROLLING_FORWARD &&
            u->state != UPDATE_ROLLING_BACKWARD)
            return core_fail(err, errlen, -EINVAL, "cannot pause an update in %s", update_state_name(u->state));
        break;
    case UPDATE_CMD_RESUME:
        if (u->state != UPDATE_PAUSED)
            return core_fail(err, errlen, -EINVAL, "cannot resume an update in %s (not PAUSED)",
                        update_state_name(u->state));
        break;
    case UPDATE_CMD_ABORT:
        if (update_state_terminal(u->state))
            return core_fail(err, errlen, -EINVAL, "cannot abort an update in %s", update_state_name(u->state));
        break;
    case UPDATE_CMD_ROLLBACK:
        if (u->state != UPDATE_INITIALIZED && u->state != UPDATE_ROLLING_FORWARD &&
            !(u->state == UPDATE_PAUSED && u->resume_state == UPDATE_ROLLING_FORWARD))
            return core_fail(err, errlen, -EINVAL, "cannot roll back an update in %s%s", update_state_name(u->state),
                             u->state == UPDATE_PAUSED ? " (paused while rolling back)" : "");
        break;
    default:
        return core_fail(err, errlen, -EINVAL, "unknown update command %d", (int)cmd);
    }

    struct step s = {.u = u, .now_ms = now_ms, .acts = acts, .cap = cap};
    if (cmd == UPDATE_CMD_ABORT) {
        finish(u, UPDATE_ABORTED);
        count_done(u);
        return 0;
    }
    if (update_state_terminal(u->state)) {
        count_done(u);
        return 0;
    }
    if (u->state == UPDATE_INITIALIZED)
        u->state = u->spec.start_paused && cmd != UPDATE_CMD_ROLLBACK ? UPDATE_PAUSED : UPDATE_ROLLING_FORWARD;
    if (cmd == UPDATE_CMD_PAUSE && u->state != UPDATE_PAUSED) {
        u->resume_state = u->state;
        u->state = UPDATE_PAUSED;
    } else if (cmd == UPDATE_CMD_RESUME) {
        u->state = u->resume_state;
    }

    observe(&s);
    if (cmd == UPDATE_CMD_ROLLBACK) {
        u->state = UPDATE_ROLLING_FORWARD; /* (from PAUSED too: a rollback resumes) */
        begin_rollback(&s);
    }
    if (u->state != UPDATE_PAUSED) {
        if (u->spec.max_failure_instances && u->nfailed >= u->spec.max_failure_instances) on_failure(&s);
        else if (complete(u)) {
            if (u->nfailed) on_failure(&s);
            else finish(u, u->state == UPDATE_ROLLING_FORWARD ? UPDATE_SUCCEEDED : UPDATE_ROLLED_BACK);
        }
        if (!update_state_terminal(u->state)) select_starts(&s);
    }
    count_done(u);
    *nacts = s.n;
    return 0;
}
