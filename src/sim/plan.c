/* peloton-sim plan: one scheduling round. Pools, capacity, running tasks and
 * pending gangs in; entitlement, the gangs admitted (in order), the reasons
 * the rest wait, and the preemption plan out. Format: docs/plan-format.md. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admit.h"
#include "entitle.h"
#include "preempt.h"
#include "sim.h"
#include "simjson.h"
#include "simpools.h"
#include "task.h"

#define PLAN_MAX_ITEMS 1000000 /* tasks, gangs and tasks per gang */

struct plan_ctx {
    struct respool_tree *t;
    struct sim_cluster cl;
    struct preempt_task *tasks; /* the input's, then one READY entry per admitted gang */
    size_t ntasks;
    struct gang *gangs;
    size_t ngangs;
    struct preempt_state st;
    bool st_ready;
    char *err;
    size_t errlen;
};

static int bad(struct plan_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(struct plan_ctx *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, c->errlen, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

/* The leaf named by obj.pool. */
static int leaf_of(struct plan_ctx *c, json_t *obj, const char *where, struct respool **out) {
    const char *path = NULL;
    int rc = sj_str(obj, "pool", true, where, &path, c->err, c->errlen);
    if (rc) return rc;
    struct respool *p = respool_lookup(c->t, path);
    if (!p) return bad(c, "%s.pool: no pool \"%.200s\"", where, path);
    if (!respool_is_leaf(p)) return bad(c, "%s.pool: %s is not a leaf pool; only leaf pools hold work", where, path);
    *out = p;
    return 0;
}

/* preemptible / revocable / controller booleans -> WF_* */
static int work_flags(struct plan_ctx *c, json_t *obj, const char *where, unsigned *out) {
    bool pre = false, rev = false, ctl = false;
    int rc;
    if ((rc = sj_opt_bool(obj, "preemptible", where, &pre, c->err, c->errlen)) ||
        (rc = sj_opt_bool(obj, "revocable", where, &rev, c->err, c->errlen)) ||
        (rc = sj_opt_bool(obj, "controller", where, &ctl, c->err, c->errlen)))
        return rc;
    *out = (pre || rev ? WF_PREEMPTIBLE : 0) | (rev ? WF_REVOCABLE : 0) | (ctl ? WF_CONTROLLER : 0);
    return 0;
}

static int unique_id(struct plan_ctx *c, json_t *seen, json_t *obj, const char *where, const char **out) {
    int rc = sj_str(obj, "id", true, where, out, c->err, c->errlen);
    if (rc) return rc;
    if (json_object_get(seen, *out)) return bad(c, "%s.id: duplicate id \"%.200s\"", where, *out);
    json_object_set_new(seen, *out, json_true());
    return 0;
}

static int load_tasks(struct plan_ctx *c, json_t *arr, size_t extra) {
    static const char *const known[] = {"id", "pool", "resources", "priority", "preemptible", "revocable",
                                        "controller", "state", "startTime", NULL};
    if (arr && !json_is_null(arr) && !json_is_array(arr)) return bad(c, "tasks: expected a list");
    size_t n = json_is_array(arr) ? json_array_size(arr) : 0;
    if (n > PLAN_MAX_ITEMS) return bad(c, "tasks: more than %d", PLAN_MAX_ITEMS);
    c->tasks = calloc(n + extra + 1, sizeof *c->tasks);
    json_t *seen = json_object();
    if (!c->tasks || !seen) {
        json_decref(seen);
        snprintf(c->err, c->errlen, "out of memory");
        return -ENOMEM;
    }
    int rc = 0;
    struct resvec zero = resvec_zero();
    for (size_t i = 0; i < n && !rc; i++) {
        char where[48], w2[64];
        snprintf(where, sizeof where, "tasks[%zu]", i);
        json_t *o = json_array_get(arr, i);
        struct preempt_task *x = &c->tasks[i];
        int64_t prio = 0, start = 0;
        const char *state = "RUNNING";
        if (!json_is_object(o)) { rc = bad(c, "%s: expected an object", where); break; }
        snprintf(w2, sizeof w2, "%s.resources", where);
        if ((rc = sj_known_keys(o, known, where, c->err, c->errlen)) ||
            (rc = unique_id(c, seen, o, where, &x->id)) || (rc = leaf_of(c, o, where, &x->pool)) ||
            (rc = sj_resvec(json_object_get(o, "resources"), &zero, w2, &x->res, c->err, c->errlen)) ||
            (rc = sj_opt_int(o, "priority", 0, UINT32_MAX, where, &prio, c->err, c->errlen)) ||
            (rc = sj_opt_int(o, "startTime", INT64_MIN / 2, INT64_MAX / 2, where, &start, c->err, c->errlen)) ||
            (rc = work_flags(c, o, where, &x->flags)) ||
            (rc = sj_str(o, "state", false, where, &state, c->err, c->errlen)))
            break;
        int s = task_state_parse(state);
        if (s < 0 || (s != TASK_READY && s != TASK_PLACING && s != TASK_PLACED && s != TASK_LAUNCHING &&
                      s != TASK_STARTING && s != TASK_LAUNCHED && s != TASK_RUNNING && s != TASK_PREEMPTING &&
                      s != TASK_KILLING)) {
            rc = bad(c, "%s.state: \"%.40s\" is not a state that holds an allocation (READY, PLACING, PLACED, "
                        "LAUNCHING, STARTING, LAUNCHED, RUNNING, PREEMPTING, KILLING)", where, state);
            break;
        }
        x->state = (enum task_state)s;
        x->priority = (uint32_t)prio;
        x->start_ms = start;
        usage_add(&x->pool->alloc, x->flags, x->res);
        c->ntasks++;
    }
    json_decref(seen);
    return rc;
}

static int load_gang(struct plan_ctx *c, json_t *o, const char *where, json_t *seen, struct gang *g) {
    static const char *const known[] = {"id", "pool", "priority", "preemptible", "revocable", "controller",
                                        "tasks", "count", "resources", NULL};
    static const char *const task_known[] = {"resources", "name", "id", NULL};
    if (!json_is_object(o)) return bad(c, "%s: expected an object", where);
    const char *id;
    struct respool *p;
    int64_t prio = 0;
    unsigned flags;
    int rc;
    if ((rc = sj_known_keys(o, known, where, c->err, c->errlen)) || (rc = unique_id(c, seen, o, where, &id)) ||
        (rc = leaf_of(c, o, where, &p)) ||
        (rc = sj_opt_int(o, "priority", 0, UINT32_MAX, where, &prio, c->err, c->errlen)) ||
        (rc = work_flags(c, o, where, &flags)))
        return rc;
    json_t *tasks = json_object_get(o, "tasks");
    struct resvec zero = resvec_zero(), demand = zero, r;
    int64_t count = 0;
    char w2[96];
    if (tasks && !json_is_null(tasks)) {
        if (!json_is_array(tasks) || json_array_size(tasks) == 0 || json_array_size(tasks) > PLAN_MAX_ITEMS)
            return bad(c, "%s.tasks: expected a list of 1 to %d tasks", where, PLAN_MAX_ITEMS);
        if (json_object_get(o, "count") || json_object_get(o, "resources"))
            return bad(c, "%s: give either tasks, or count and resources", where);
        size_t i;
        json_t *x;
        json_array_foreach(tasks, i, x) {
            snprintf(w2, sizeof w2, "%s.tasks[%zu]", where, i);
            if (!json_is_object(x)) return bad(c, "%s: expected an object", w2);
            if ((rc = sj_known_keys(x, task_known, w2, c->err, c->errlen))) return rc;
            snprintf(w2, sizeof w2, "%s.tasks[%zu].resources", where, i);
            if ((rc = sj_resvec(json_object_get(x, "resources"), &zero, w2, &r, c->err, c->errlen))) return rc;
            demand = resvec_add(demand, r);
        }
        count = (int64_t)json_array_size(tasks);
    } else {
        count = 1;
        if ((rc = sj_opt_int(o, "count", 1, PLAN_MAX_ITEMS, where, &count, c->err, c->errlen))) return rc;
        snprintf(w2, sizeof w2, "%s.resources", where);
        if ((rc = sj_resvec(json_object_get(o, "resources"), &zero, w2, &r, c->err, c->errlen))) return rc;
        demand = resvec_scale(r, count);
    }
    for (int k = 0; k < RES_NKINDS; k++)
        if (demand.v[k] == RES_UNLIMITED)
            return bad(c, "%s: %s demand is too large", where, res_kind_name((enum res_kind)k));
    admit_gang_init(g, id, (uint32_t)prio, flags, (uint32_t)count, demand);
    char aerr[256];
    if ((rc = admit_enqueue(p, g, aerr, sizeof aerr))) return bad(c, "%s: %s", where, aerr);
    return 0;
}

static int load_gangs(struct plan_ctx *c, json_t *arr) {
    if (arr && !json_is_null(arr) && !json_is_array(arr)) return bad(c, "gangs: expected a list");
    size_t n = json_is_array(arr) ? json_array_size(arr) : 0;
    if (n > PLAN_MAX_ITEMS) return bad(c, "gangs: more than %d", PLAN_MAX_ITEMS);
    c->gangs = calloc(n + 1, sizeof *c->gangs);
    json_t *seen = json_object();
    if (!c->gangs || !seen) {
        json_decref(seen);
        snprintf(c->err, c->errlen, "out of memory");
        return -ENOMEM;
    }
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        char where[48];
        snprintf(where, sizeof where, "gangs[%zu]", i);
        rc = load_gang(c, json_array_get(arr, i), where, seen, &c->gangs[i]);
        if (!rc) c->ngangs++;
    }
    json_decref(seen);
    return rc;
}

static int load_options(struct plan_ctx *c, json_t *in) {
    struct preempt_config pc;
    preempt_config_default(&pc);
    int64_t checks = 1; /* a one-shot what-if: over now means give back now */
    int rc;
    if ((rc = sj_opt_int(in, "preemptionChecks", 1, 1000000, "input", &checks, c->err, c->errlen)) ||
        (rc = sj_opt_bool(in, "intraPool", "input", &pc.intra_pool, c->err, c->errlen)))
        return rc;
    pc.over_checks = (uint32_t)checks;
    if (preempt_state_init(&c->st, &pc)) return bad(c, "input.preemptionChecks: must be at least 1");
    c->st_ready = true;
    json_t *hist = json_object_get(in, "overEntitlementChecks");
    if (!hist || json_is_null(hist)) return 0;
    if (!json_is_object(hist)) return bad(c, "overEntitlementChecks: expected an object of pool path: count");
    const char *path;
    json_t *v;
    json_object_foreach(hist, path, v) {
        struct respool *p = respool_lookup(c->t, path);
        if (!p || !respool_is_leaf(p))
            return bad(c, "overEntitlementChecks.%.200s: no leaf pool with this path", path);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 1000000)
            return bad(c, "overEntitlementChecks.%.200s: expected an integer in [0, 1000000]", path);
        if (preempt_state_set(&c->st, p, (uint32_t)json_integer_value(v))) {
            snprintf(c->err, c->errlen, "out of memory");
            return -ENOMEM;
        }
    }
    return 0;
}

/* Slack cpu, unless given: what the non-slack allocation leaves of the capacity. */
static int entitle(struct plan_ctx *c) {
    if (!c->cl.slack_given) {
        respool_rollup(c->t);
        c->cl.slack_cpu =
            res_max(0, c->cl.capacity.v[RES_CPU] - usage_nonslack(&respool_root(c->t)->alloc).v[RES_CPU]);
    }
    if (respool_entitle(c->t, c->cl.capacity, c->cl.slack_cpu)) {
        snprintf(c->err, c->errlen, "out of memory");
        return -ENOMEM;
    }
    return 0;
}

static const char *queue_name(int q) {
    switch (q) {
    case ADMIT_Q_PENDING: return "pending";
    case ADMIT_Q_NONPREEMPT: return "non-preemptible";
    case ADMIT_Q_CONTROLLER: return "controller";
    case ADMIT_Q_REVOCABLE: return "revocable";
    }
    return "none";
}

static json_t *pending_out(struct plan_ctx *c) {
    json_t *arr = json_array();
    for (size_t i = 0; i < c->ngangs; i++) {
        struct gang *g = &c->gangs[i];
        int q = admit_gang_queue(g);
        if (q < 0) continue;
        char why[400];
        struct gang *head = admit_head(g->pool, (enum admit_queue)q);
        if (g->why.check == ADMIT_CHECK_NONE && head && head != g)
            snprintf(why, sizeof why, "pool %s: behind gang %s at the head of the %s queue", g->pool->path,
                     head->id, queue_name(q));
        else
            admit_why_format(g, why, sizeof why);
        json_t *o = json_object();
        json_object_set_new(o, "gang", json_string(g->id));
        json_object_set_new(o, "pool", json_string(g->pool->path));
        json_object_set_new(o, "queue", json_string(queue_name(q)));
        json_object_set_new(o, "check", json_string(admit_check_name(g->why.check)));
        json_object_set_new(o, "reason", json_string(why));
        json_array_append_new(arr, o);
    }
    return arr;
}

static json_t *preemptions_out(const struct preempt_plan *plan) {
    json_t *arr = json_array();
    for (size_t i = 0; i < plan->n; i++) {
        const struct preempt_victim *v = &plan->v[i];
        char why[400];
        preempt_victim_format(v, why, sizeof why);
        json_t *o = json_object();
        json_object_set_new(o, "task", json_string(v->task_id));
        json_object_set_new(o, "pool", json_string(v->pool->path));
        json_object_set_new(o, "kind", json_string(preempt_reason_name(v->reason)));
        if (v->reason == PREEMPT_PRIORITY) json_object_set_new(o, "gang", json_string(v->gang_id));
        json_object_set_new(o, "reason", json_string(why));
        json_array_append_new(arr, o);
    }
    return arr;
}

static json_t *run(struct plan_ctx *c, json_t *in) {
    int rc;
    if ((rc = load_options(c, in))) return NULL;
    if ((rc = load_tasks(c, json_object_get(in, "tasks"), json_is_array(json_object_get(in, "gangs"))
                                                              ? json_array_size(json_object_get(in, "gangs"))
                                                              : 0)))
        return NULL;
    if ((rc = load_gangs(c, json_object_get(in, "gangs")))) return NULL;
    if (entitle(c)) return NULL;

    struct gang **admitted = malloc((c->ngangs + 1) * sizeof *admitted);
    if (!admitted) {
        snprintf(c->err, c->errlen, "out of memory");
        return NULL;
    }
    size_t na = admit_round(c->t, admitted, c->ngangs);
    /* Admission changed the non-slack allocation: refresh slack and the outputs. */
    if (entitle(c)) {
        free(admitted);
        return NULL;
    }
    /* Admitted gangs hold allocation now: the planner sees them as READY, newest. */
    int64_t latest = 0;
    for (size_t i = 0; i < c->ntasks; i++)
        if (c->tasks[i].start_ms > latest) latest = c->tasks[i].start_ms;
    json_t *adm = json_array();
    for (size_t i = 0; i < na; i++) {
        struct gang *g = admitted[i];
        c->tasks[c->ntasks++] = (struct preempt_task){g->id, g->pool, g->demand, g->priority, g->flags,
                                                      TASK_READY, latest + 1 + (int64_t)i};
        json_array_append_new(adm, json_string(g->id));
    }
    free(admitted);

    struct preempt_plan plan = {0};
    if (preempt_plan(&c->st, c->t, c->tasks, c->ntasks, &plan, c->err, c->errlen)) {
        json_decref(adm);
        return NULL;
    }
    json_t *counters = json_object();
    for (struct respool *p = respool_root(c->t); p; p = respool_next_preorder(p))
        if (respool_is_leaf(p) && preempt_state_get(&c->st, p))
            json_object_set_new(counters, p->path, json_integer(preempt_state_get(&c->st, p)));

    json_t *out = json_object();
    json_object_set_new(out, "pools", sim_pools_out(c->t));
    json_object_set_new(out, "admitted", adm);
    json_object_set_new(out, "pending", pending_out(c));
    json_object_set_new(out, "preemptions", preemptions_out(&plan));
    json_object_set_new(out, "overEntitlementChecks", counters);
    preempt_plan_free(&plan);
    return out;
}

json_t *sim_plan(json_t *in, char *err, size_t errlen) {
    static const char *const known[] = {"capacity", "slackCpu", "pools", "tasks", "gangs", "preemptionChecks",
                                        "overEntitlementChecks", "intraPool", NULL};
    if (!json_is_object(in)) {
        snprintf(err, errlen, "input: expected an object with capacity, pools, tasks and gangs");
        return NULL;
    }
    if (sj_known_keys(in, known, "input", err, errlen)) return NULL;
    struct plan_ctx c = {.err = err, .errlen = errlen};
    if (sim_load_pools(in, &c.t, &c.cl, err, errlen)) return NULL;
    json_t *out = run(&c, in);
    if (c.st_ready) preempt_state_free(&c.st);
    admit_tree_release(c.t);
    respool_tree_free(c.t);
    free(c.tasks);
    free(c.gangs);
    return out;
}
