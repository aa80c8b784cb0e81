/* Job types, job state derivation and the reconciler (see job.h). */
#include "errmsg.h"
#include "job.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const g_type_names[JOB_NTYPES] = {"BATCH", "STATELESS", "STATEFUL", "DAEMON"};
static const char *const g_state_names[JOB_NSTATES] = {
    "UNKNOWN", "INITIALIZED", "PENDING", "RUNNING", "SUCCEEDED",
    "FAILED",  "KILLED",      "KILLING", "UNINITIALIZED", "DELETED",
};

const char *job_type_name(enum job_type t) {
    if ((int)t < 0 || t >= JOB_NTYPES) return "INVALID";
    return g_type_names[t];
}

const char *job_state_name(enum job_state s) {
    if ((int)s < 0 || s >= JOB_NSTATES) return "INVALID";
    return g_state_names[s];
}


int job_spec_validate(const struct job_spec *spec, char *err, size_t errlen) {
    if ((int)spec->type < 0 || spec->type >= JOB_NTYPES)
        return core_fail(err, errlen, -EINVAL, "job type %d is not BATCH, STATELESS, STATEFUL or DAEMON",
                    (int)spec->type);
    if ((int)spec->goal < JOB_GOAL_RUN || spec->goal > JOB_GOAL_DELETE)
        return core_fail(err, errlen, -EINVAL, "job goal %d is not RUN, KILL or DELETE", (int)spec->goal);
    if (spec->max_failures > JOB_MAX_FAILURES_LIMIT)
        return core_fail(err, errlen, -EINVAL, "restartPolicy.maxFailures %u exceeds %d", spec->max_failures,
                    JOB_MAX_FAILURES_LIMIT);
    if (spec->instance_count > JOB_MAX_INSTANCES)
        return core_fail(err, errlen, -EINVAL, "instanceCount %u exceeds %u", spec->instance_count,
                    JOB_MAX_INSTANCES);
    if (spec->type != JOB_DAEMON && spec->min_running > spec->instance_count)
        return core_fail(err, errlen, -EINVAL, "minimumRunningInstances %u exceeds instanceCount %u",
                    spec->min_running, spec->instance_count);
    return 0;
}

uint32_t job_gang_of(const struct job_spec *spec, uint32_t instance) {
    if (spec->min_running > 1 && instance < spec->min_running) return 0;
    return instance;
}

uint32_t job_gang_size(const struct job_spec *spec, uint32_t gang) {
    if (spec->min_running > 1 && gang == 0) return spec->min_running;
    return 1;
}

void job_count_states(const struct task *tasks, size_t n, struct job_counts *out) {
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < n; i++) {
        enum task_state s = tasks[i].state;
        if ((int)s < 0 || s >= TASK_NSTATES) s = TASK_UNKNOWN;
        out->n[s]++;
        out->total++;
    }
}

enum job_state job_state_derive(const struct job_spec *spec, const struct job_counts *c) {
    uint32_t live = c->total - c->n[TASK_DELETED];
    uint32_t terminal = c->n[TASK_SUCCEEDED] + c->n[TASK_FAILED] + c->n[TASK_LOST] + c->n[TASK_KILLED];
    uint32_t active = live - terminal;
    if (spec->goal == JOB_GOAL_DELETE && live == 0) return JOB_DELETED;
    if (spec->goal != JOB_GOAL_RUN) return active ? JOB_KILLING : JOB_KILLED;
    if (live == 0) return JOB_INITIALIZED;
    if (active == 0) {
        if (c->n[TASK_SUCCEEDED] == live) return JOB_SUCCEEDED;
        if (c->n[TASK_FAILED] || c->n[TASK_LOST]) return JOB_FAILED;
        return JOB_KILLED;
    }
    if (c->n[TASK_RUNNING] || c->n[TASK_PREEMPTING] || c->n[TASK_KILLING]) return JOB_RUNNING;
    if (c->n[TASK_INITIALIZED] == live) return JOB_INITIALIZED;
    return JOB_PENDING;
}

/* --- the reconciler --- */

static int plan_push(struct job_plan *p, struct job_action a) {
    if (p->n == p->cap) {
        size_t ncap = p->cap ? p->cap * 2 : 16;
        struct job_action *nv = realloc(p->v, ncap * sizeof *nv);
        if (!nv) return -ENOMEM;
        p->v = nv;
        p->cap = ncap;
    }
    p->v[p->n++] = a;
    return 0;
}

void job_plan_free(struct job_plan *plan) {
    free(plan->v);
    plan->v = NULL;
    plan->n = plan->cap = 0;
}

static int cmp_task_ptr(const void *a, const void *b) {
    uint32_t x = (*(const struct task *const *)a)->instance;
    uint32_t y = (*(const struct task *const *)b)->instance;
    return (x > y) - (x < y);
}

static int cmp_str_ptr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Index of name in the sorted, de-duplicated host list, or -1. */
static long host_index(const char *const *hosts, size_t n, const char *name) {
    if (!name || n == 0) return -1;
    const char *const *hit = bsearch(&name, hosts, n, sizeof *hosts, cmp_str_ptr);
    return hit ? (long)(hit - hosts) : -1;
}

/* The live (not DELETED) records in ascending id order: the input itself
 * when it is so already, else a sorted array of pointers into it. */
struct live {
    const struct task *direct;
    const struct task **sorted;
};

static const struct task *live_at(const struct live *lv, size_t i) {
    return lv->direct ? &lv->direct[i] : lv->sorted[i];
}

/* The state a KILL action moves a non-terminal task to. */
static enum task_state kill_target(enum task_state s) {
    switch (s) {
    case TASK_LAUNCHED: case TASK_STARTING: case TASK_RUNNING: case TASK_PREEMPTING:
        return TASK_KILLING;
    default:
        return TASK_KILLED;
    }
}

struct recon {
    const struct job_input *in;
    const struct job_spec *spec;
    struct job_plan *plan;
    struct job_counts proj; /* counts after this plan's actions */
};

static void proj_move(struct recon *r, enum task_state from, enum task_state to) {
    r->proj.n[from]--;
    r->proj.n[to]++;
}

static int emit_restart(struct recon *r, const struct task *t, bool count_failure, const char *host,
                        bool pinned, uint32_t crash_loop) {
    struct job_action a = {.kind = JOB_ACT_RESTART,
                           .crash_loop = crash_loop,
                           .instance = t->instance,
                           .run = t->run + 1,
                           .version = t->desired_version,
                           .count_failure = count_failure,
                           .gang = job_gang_of(r->spec, t->instance),
                           .host = host,
                           .host_pinned = pinned};
    proj_move(r, t->state, TASK_INITIALIZED);
    return plan_push(r->plan, a);
}

/* One existing, non-DELETED instance. wanted: the spec still wants it to exist.
 * pin: DAEMON host. */
static int reconcile_one(struct recon *r, const struct task *t, bool wanted, const char *pin) {
    const struct job_spec *spec = r->spec;
    bool terminal = task_state_terminal(t->state);

    if (spec->goal != JOB_GOAL_RUN || t->stop || !wanted) {
        if (!terminal) {
            if (t->state == TASK_KILLING) return 0; /* already on its way */
            enum task_state to = kill_target(t->state);
            proj_move(r, t->state, to);
            return plan_push(r->plan, (struct job_action){.kind = JOB_ACT_KILL, .instance = t->instance});
        }
        if (spec->goal == JOB_GOAL_DELETE || !wanted) {
            r->proj.n[t->state]--;
            r->proj.total--;
            return plan_push(r->plan, (struct job_action){.kind = JOB_ACT_DELETE, .instance = t->instance});
        }
        return 0; /* stopped: stays terminal */
    }

    const struct task_config *cfg = r->in->task_cfg;
    struct task_config defcfg;
    if (!cfg) {
        task_config_default(&defcfg);
        cfg = &defcfg;
    }
    if (!terminal) {
        int64_t d = task_deadline(t, cfg);
        if (d != INT64_MAX && r->in->now_ms >= d) {
            proj_move(r, t->state, TASK_READY);
            return plan_push(r->plan, (struct job_action){
                                          .kind = JOB_ACT_TIMEOUT, .instance = t->instance, .to = TASK_READY});
        }
        if (d < r->plan->next_deadline_ms) r->plan->next_deadline_ms = d;
        return 0;
    }
    if (t->held) return 0; /* the update planner restarts this one */

    const char *host = NULL;
    bool pinned = false;
    if (spec->type == JOB_STATEFUL) host = t->host ? t->host : t->last_host;
    if (spec->type == JOB_DAEMON) {
        host = pin;
        pinned = true;
    }
    uint32_t loop = 0;
    if (spec->type != JOB_BATCH) { /* services: CrashLoopBackOff */
        int64_t at = task_restart_at(t, cfg, &loop);
        if (at > t->state_since_ms && r->in->now_ms < at) {
            r->plan->nbackoff++;
            proj_move(r, t->state, TASK_INITIALIZED); /* it will run again: the job is not FAILED */
            if (at < r->plan->next_deadline_ms) r->plan->next_deadline_ms = at;
            return 0;
        }
    }
    switch (t->state) {
    case TASK_SUCCEEDED:
        if (spec->type == JOB_BATCH) return 0; /* done */
        return emit_restart(r, t, false, host, pinned, loop);
    case TASK_FAILED:
        if (spec->type == JOB_BATCH && t->failures >= spec->max_failures) return 0; /* exhausted */
        return emit_restart(r, t, true, host, pinned, loop);
    case TASK_LOST:
        return emit_restart(r, t, false, host, pinned, loop); /* at-least-once, not a failure */
    case TASK_KILLED:
        if (t->preempted && spec->kill_on_preempt) return 0; /* stays killed */
        return emit_restart(r, t, false, host, pinned, loop);
    default:
        return 0;
    }
}

int job_reconcile(const struct job_input *in, struct job_plan *plan, char *err, size_t errlen) {
    const struct job_spec *spec = in->spec;
    memset(plan, 0, sizeof *plan);
    plan->next_deadline_ms = INT64_MAX;
    int rc = job_spec_validate(spec, err, errlen);
    if (rc) return rc;
    job_count_states(in->tasks, in->ntasks, &plan->counts);

    struct recon r = {.in = in, .spec = spec, .plan = plan, .proj = plan->counts};
    const struct task **sorted = NULL;
    const char **hosts = NULL;
    bool *claimed = NULL;
    size_t nlive = 0, nhosts = 0;

    bool in_order = true, any_deleted = false;
    for (size_t i = 0; i < in->ntasks; i++) {
        const struct task *t = &in->tasks[i];
        if ((int)t->state < 0 || t->state >= TASK_NSTATES || t->state == TASK_UNKNOWN ||
            t->state == TASK_RESERVED)
            return core_fail(err, errlen, -EINVAL, "instance %u is in state %s, which a job instance never holds",
                             t->instance, task_state_name(t->state));
        if (t->state == TASK_DELETED) {
            any_deleted = true;
            continue;
        }
        if (t->instance >= JOB_MAX_INSTANCES)
            return core_fail(err, errlen, -EINVAL, "instance id %u exceeds %u", t->instance, JOB_MAX_INSTANCES);
        if (i && in->tasks[i - 1].instance > t->instance) in_order = false;
    }
    /* Records in ascending id order without DELETED ones (how the job
     * manager passes them) are read in place: no copy, no sort. */
    struct live lv = {0};
    if (in_order && !any_deleted) {
        lv.direct = in->tasks;
        nlive = in->ntasks;
    } else {
        sorted = malloc((in->ntasks ? in->ntasks : 1) * sizeof *sorted);
        if (!sorted) return core_fail(err, errlen, -ENOMEM, "out of memory");
        for (size_t i = 0; i < in->ntasks; i++)
            if (in->tasks[i].state != TASK_DELETED) sorted[nlive++] = &in->tasks[i];
        qsort(sorted, nlive, sizeof *sorted, cmp_task_ptr);
        lv.sorted = sorted;
    }
    for (size_t i = 1; i < nlive; i++)
        if (live_at(&lv, i)->instance == live_at(&lv, i - 1)->instance) {
            rc = core_fail(err, errlen, -EINVAL, "duplicate records for instance %u", live_at(&lv, i)->instance);
            goto out;
        }

    if (spec->type == JOB_DAEMON && in->nhosts) {
        hosts = malloc(in->nhosts * sizeof *hosts);
        claimed = calloc(in->nhosts, sizeof *claimed);
        if (!hosts || !claimed) {
            rc = core_fail(err, errlen, -ENOMEM, "out of memory");
            goto out;
        }
        for (size_t i = 0; i < in->nhosts; i++)
            if (in->hosts[i]) hosts[nhosts++] = in->hosts[i];
        qsort(hosts, nhosts, sizeof *hosts, cmp_str_ptr);
        size_t k = 0;
        for (size_t i = 0; i < nhosts; i++)
            if (k == 0 || strcmp(hosts[k - 1], hosts[i]) != 0) hosts[k++] = hosts[i];
        nhosts = k;
    }

    for (size_t i = 0; i < nlive; i++) {
        const struct task *t = live_at(&lv, i);
        bool wanted;
        const char *pin = NULL;
        if (spec->type == JOB_DAEMON) {
            long h = host_index(hosts, nhosts, t->pinned_host);
            wanted = h >= 0 && !claimed[h]; /* one instance per host: the lowest id keeps it */
            if (wanted) {
                claimed[h] = true;
                pin = hosts[h];
            }
        } else {
            wanted = t->instance < spec->instance_count;
        }
        rc = reconcile_one(&r, t, wanted, pin);
        if (rc) goto out_nomem;
    }

    if (spec->goal == JOB_GOAL_RUN) {
        /* Missing instances. */
        size_t k = 0; /* walks sorted ids */
        if (spec->type == JOB_DAEMON) {
            uint32_t next = 0;
            for (size_t h = 0; h < nhosts; h++) {
                if (claimed[h]) continue;
                while (k < nlive && live_at(&lv, k)->instance < next) k++;
                while (k < nlive && live_at(&lv, k)->instance == next) {
                    next++;
                    k++;
                }
                struct job_action a = {.kind = JOB_ACT_CREATE, .instance = next, .run = 1,
                                       .version = spec->config_version, .gang = next,
                                       .host = hosts[h], .host_pinned = true};
                r.proj.n[TASK_INITIALIZED]++;
                r.proj.total++;
                if ((rc = plan_push(plan, a))) goto out_nomem;
                next++;
            }
        } else {
            for (uint32_t i = 0; i < spec->instance_count; i++) {
                while (k < nlive && live_at(&lv, k)->instance < i) k++;
                if (k < nlive && live_at(&lv, k)->instance == i) continue;
                struct job_action a = {.kind = JOB_ACT_CREATE, .instance = i, .run = 1,
                                       .version = spec->config_version, .gang = job_gang_of(spec, i)};
                r.proj.n[TASK_INITIALIZED]++;
                r.proj.total++;
                if ((rc = plan_push(plan, a))) goto out_nomem;
            }
        }
    }

    /* Gangs: the members of gang 0 started together in this plan form a gang
     * of their own, named by their lowest member and its new run (a member
     * started alone is in no gang). Members still running are not waited
     * for: a replacement never needs the whole original gang again. */
    uint32_t gang0 = 0, first = UINT32_MAX, first_run = 0;
    for (size_t i = 0; i < plan->n; i++) {
        const struct job_action *a = &plan->v[i];
        if ((a->kind != JOB_ACT_CREATE && a->kind != JOB_ACT_RESTART) || a->gang != 0 ||
            job_gang_size(spec, 0) < 2)
            continue;
        gang0++;
        if (a->instance < first) first = a->instance, first_run = a->run;
    }
    for (size_t i = 0; i < plan->n; i++) {
        struct job_action *a = &plan->v[i];
        if (a->kind != JOB_ACT_CREATE && a->kind != JOB_ACT_RESTART) continue;
        bool grouped = a->gang == 0 && gang0 > 0;
        a->gang_size = grouped ? gang0 : 1;
        a->gang_first = grouped ? first : a->instance;
        a->gang_first_run = grouped ? first_run : a->run;
    }

    plan->state = job_state_derive(spec, &r.proj);
    if (plan->state != spec->state)
        if ((rc = plan_push(plan, (struct job_action){.kind = JOB_ACT_MARK, .state = plan->state})))
            goto out_nomem;
    rc = 0;
    goto out;
out_nomem:
    core_fail(err, errlen, rc, "out of memory");
out:
    free(sorted);
    free(hosts);
    free(claimed);
    return rc;
}
