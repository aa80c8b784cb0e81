#include "crd_job.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crd_common.h"
#include "errmsg.h"
#include "respool.h"

#define MSG_MAX 512

#define job_fail(err, errlen, code, name, ...) core_fail_about(err, errlen, code, CRD_JOB_RESOURCE, name, __VA_ARGS__)

#define known_keys(obj, allowed, name, where, err, errlen) \
    crd_known_keys(obj, allowed, CRD_JOB_RESOURCE, name, where, err, errlen)

/* An optional object member of obj; absent or null gives NULL. */
static int opt_object(const json_t *obj, const char *key, const char *name, const char *where, const json_t **out,
                      char *err, size_t errlen) {
    const json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (!v || json_is_null(v)) return 0;
    if (!json_is_object(v)) return job_fail(err, errlen, -EINVAL, name, "%s.%s: expected an object", where, key);
    *out = v;
    return 0;
}

static int opt_uint(const json_t *obj, const char *key, uint64_t max, const char *name, const char *where,
                    uint32_t *out, char *err, size_t errlen) {
    const json_t *v = obj ? json_object_get(obj, key) : NULL;
    if (!v || json_is_null(v)) return 0;
    if (!json_is_integer(v))
        return job_fail(err, errlen, -EINVAL, name, "%s.%s: expected an integer", where, key);
    json_int_t i = json_integer_value(v);
    if (i < 0) return job_fail(err, errlen, -EINVAL, name, "%s.%s: %" JSON_INTEGER_FORMAT " is negative", where, key, i);
    if ((uint64_t)i > max)
        return job_fail(err, errlen, -EINVAL, name, "%s.%s: %" JSON_INTEGER_FORMAT " exceeds %llu", where, key, i,
                        (unsigned long long)max);
    *out = (uint32_t)i;
    return 0;
}

static int opt_bool(const json_t *obj, const char *key, const char *name, const char *where, bool *out, bool *given,
                    char *err, size_t errlen) {
    const json_t *v = obj ? json_object_get(obj, key) : NULL;
    if (given) *given = false;
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) return job_fail(err, errlen, -EINVAL, name, "%s.%s: expected true or false", where, key);
    *out = json_is_true(v);
    if (given) *given = true;
    return 0;
}

static int cmp_range(const void *a, const void *b) {
    uint32_t x = ((const struct crd_job_range *)a)->from, y = ((const struct crd_job_range *)b)->from;
    return (x > y) - (x < y);
}

/* spec.stoppedInstances: a list of {from, to} ranges ([from, to), as
 * Peloton's InstanceRange), at most CRD_JOB_MAX_STOPPED; kept sorted and
 * merged so crd_job_stopped can search them. */
static int decode_stopped(const json_t *s, const char *name, struct crd_job_extra *x, char *err, size_t errlen) {
    const json_t *v = json_object_get(s, "stoppedInstances");
    if (!v || json_is_null(v)) return 0;
    if (!json_is_array(v))
        return job_fail(err, errlen, -EINVAL, name, "spec.stoppedInstances: expected a list of {from, to} ranges");
    if (json_array_size(v) > CRD_JOB_MAX_STOPPED)
        return job_fail(err, errlen, -EINVAL, name, "spec.stoppedInstances: %zu ranges, more than %d",
                        json_array_size(v), CRD_JOB_MAX_STOPPED);
    static const char *const rk[] = {"from", "to", NULL};
    char where[64];
    size_t i;
    const json_t *r;
    json_array_foreach(v, i, r) {
        snprintf(where, sizeof where, "spec.stoppedInstances[%zu]", i);
        if (!json_is_object(r)) return job_fail(err, errlen, -EINVAL, name, "%s: expected an object {from, to}", where);
        int rc = known_keys(r, rk, name, where, err, errlen);
        if (rc) return rc;
        struct crd_job_range g = {0, 0};
        if (!json_object_get(r, "to"))
            return job_fail(err, errlen, -EINVAL, name, "%s.to: required (the range is [from, to))", where);
        if ((rc = opt_uint(r, "from", JOB_MAX_INSTANCES, name, where, &g.from, err, errlen))) return rc;
        if ((rc = opt_uint(r, "to", JOB_MAX_INSTANCES, name, where, &g.to, err, errlen))) return rc;
        if (g.from >= g.to)
            return job_fail(err, errlen, -EINVAL, name, "%s: from %u is not below to %u (the range is [from, to))",
                            where, g.from, g.to);
        x->stopped[x->nstopped++] = g;
    }
    qsort(x->stopped, x->nstopped, sizeof x->stopped[0], cmp_range);
    uint32_t k = 0;
    for (uint32_t j = 0; j < x->nstopped; j++) {
        if (k && x->stopped[j].from <= x->stopped[k - 1].to) {
            if (x->stopped[j].to > x->stopped[k - 1].to) x->stopped[k - 1].to = x->stopped[j].to;
        } else {
            x->stopped[k++] = x->stopped[j];
        }
    }
    x->nstopped = k;
    return 0;
}

bool crd_job_stopped(const struct crd_job_extra *x, uint32_t instance) {
    uint32_t lo = 0, hi = x->nstopped;
    while (lo < hi) { /* the last range with from <= instance */
        uint32_t mid = lo + (hi - lo) / 2;
        if (x->stopped[mid].from <= instance) lo = mid + 1;
        else hi = mid;
    }
    return lo > 0 && instance < x->stopped[lo - 1].to;
}

static int parse_type(const char *s) {
    for (int t = 0; t < JOB_NTYPES; t++)
        if (s && strcmp(s, job_type_name((enum job_type)t)) == 0) return t;
    return -1;
}

static int check_template(const json_t *spec, const char *name, char *err, size_t errlen) {
    const json_t *tpl = json_object_get(spec, "template");
    if (!tpl || json_is_null(tpl)) return job_fail(err, errlen, -EINVAL, name, "spec.template: required (a PodTemplateSpec)");
    if (!json_is_object(tpl)) return job_fail(err, errlen, -EINVAL, name, "spec.template: expected an object");
    const json_t *md = json_object_get(tpl, "metadata");
    if (md && !json_is_null(md) && !json_is_object(md))
        return job_fail(err, errlen, -EINVAL, name, "spec.template.metadata: expected an object");
    const json_t *ps = json_object_get(tpl, "spec");
    if (!json_is_object(ps)) return job_fail(err, errlen, -EINVAL, name, "spec.template.spec: required (a PodSpec)");
    const json_t *cs = json_object_get(ps, "containers");
    if (!json_is_array(cs) || json_array_size(cs) == 0)
        return job_fail(err, errlen, -EINVAL, name, "spec.template.spec.containers: at least one container is required");
    for (size_t i = 0; i < json_array_size(cs); i++) {
        const json_t *c = json_array_get(cs, i);
        const char *cn = json_string_value(json_object_get(c, "name"));
        if (!json_is_object(c) || !cn || !*cn)
            return job_fail(err, errlen, -EINVAL, name, "spec.template.spec.containers[%zu].name: required", i);
    }
    return 0;
}

/* The one decoder behind both entry points. */
static int decode_all(const json_t *cr, struct job_spec *spec, const char **pool, struct crd_job_extra *x, char *err,
                      size_t errlen) {
    memset(spec, 0, sizeof *spec);
    memset(x, 0, sizeof *x);
    *pool = NULL;
    if (!json_is_object(cr)) return core_fail(err, errlen, -EINVAL, CRD_JOB_RESOURCE ": expected an object");
    const char *name = json_string_value(json_object_get(json_object_get(cr, "metadata"), "name"));
    if (!name || !*name) return core_fail(err, errlen, -EINVAL, CRD_JOB_RESOURCE ": metadata.name is required");
    const json_t *s = json_object_get(cr, "spec");
    if (!json_is_object(s)) return job_fail(err, errlen, -EINVAL, name, "spec: required (an object)");
    static const char *const allowed[] = {"type", "resourcePool", "instanceCount", "sla", "template", "restartPolicy",
                                          "updateStrategy", "preemptionPolicy", "stoppedInstances", NULL};
    int rc = known_keys(s, allowed, name, "spec", err, errlen);
    if (rc) return rc;

    const char *tn = json_string_value(json_object_get(s, "type"));
    int type = parse_type(tn);
    if (type < 0)
        return job_fail(err, errlen, -EINVAL, name, "spec.type: %s%.32s%s is not BATCH, STATELESS, STATEFUL or DAEMON",
                        tn ? "\"" : "", tn ? tn : "missing", tn ? "\"" : "");
    spec->type = (enum job_type)type;
    spec->goal = JOB_GOAL_RUN;

    *pool = json_string_value(json_object_get(s, "resourcePool"));
    if (!*pool || !**pool)
        return job_fail(err, errlen, -EINVAL, name, "spec.resourcePool: required (the name of a leaf ResourcePool)");
    if (strcmp(*pool, "root") == 0)
        return job_fail(err, errlen, -EINVAL, name, "spec.resourcePool: the root pool holds no work; name a leaf pool");

    const json_t *ic = json_object_get(s, "instanceCount");
    if ((!ic || json_is_null(ic)) && spec->type != JOB_DAEMON)
        return job_fail(err, errlen, -EINVAL, name, "spec.instanceCount: required for %s jobs", tn);
    if ((rc = opt_uint(s, "instanceCount", JOB_MAX_INSTANCES, name, "spec", &spec->instance_count, err, errlen)))
        return rc;

    const json_t *sla, *rp, *us, *pp;
    if ((rc = opt_object(s, "sla", name, "spec", &sla, err, errlen))) return rc;
    if ((rc = opt_object(s, "restartPolicy", name, "spec", &rp, err, errlen))) return rc;
    if ((rc = opt_object(s, "updateStrategy", name, "spec", &us, err, errlen))) return rc;
    if ((rc = opt_object(s, "preemptionPolicy", name, "spec", &pp, err, errlen))) return rc;

    if (sla) {
        static const char *const sk[] = {"priority", "preemptible", "revocable", "minimumRunningInstances",
                                         "maximumRunningInstances", "maximumUnavailableInstances", NULL};
        if ((rc = known_keys(sla, sk, name, "spec.sla", err, errlen))) return rc;
        if ((rc = opt_uint(sla, "priority", UINT32_MAX, name, "spec.sla", &x->priority, err, errlen))) return rc;
        if ((rc = opt_bool(sla, "preemptible", name, "spec.sla", &x->preemptible, NULL, err, errlen))) return rc;
        if ((rc = opt_bool(sla, "revocable", name, "spec.sla", &x->revocable, NULL, err, errlen))) return rc;
        if ((rc = opt_uint(sla, "minimumRunningInstances", JOB_MAX_INSTANCES, name, "spec.sla", &spec->min_running,
                           err, errlen)))
            return rc;
        if ((rc = opt_uint(sla, "maximumRunningInstances", JOB_MAX_INSTANCES, name, "spec.sla", &x->max_running, err,
                           errlen)))
            return rc;
        if ((rc = opt_uint(sla, "maximumUnavailableInstances", JOB_MAX_INSTANCES, name, "spec.sla",
                           &x->max_unavailable, err, errlen)))
            return rc;
        if (x->revocable && !x->preemptible)
            return job_fail(err, errlen, -EINVAL, name,
                            "spec.sla.revocable: a revocable job must be preemptible (set spec.sla.preemptible: true)");
        if (x->max_running && spec->min_running > x->max_running)
            return job_fail(err, errlen, -EINVAL, name,
                            "spec.sla.minimumRunningInstances: %u exceeds maximumRunningInstances %u", spec->min_running,
                            x->max_running);
    }
    if (spec->type != JOB_DAEMON && spec->min_running > spec->instance_count)
        return job_fail(err, errlen, -EINVAL, name, "spec.sla.minimumRunningInstances: %u exceeds instanceCount %u",
                        spec->min_running, spec->instance_count);
    if (rp) {
        static const char *const rk[] = {"maxFailures", NULL};
        if ((rc = known_keys(rp, rk, name, "spec.restartPolicy", err, errlen))) return rc;
        if ((rc = opt_uint(rp, "maxFailures", UINT32_MAX, name, "spec.restartPolicy", &spec->max_failures, err,
                           errlen)))
            return rc;
        if (spec->max_failures > JOB_MAX_FAILURES_LIMIT)
            return job_fail(err, errlen, -EINVAL, name, "spec.restartPolicy.maxFailures: %u exceeds %d",
                            spec->max_failures, JOB_MAX_FAILURES_LIMIT);
    }
    if (pp) {
        static const char *const pk[] = {"killOnPreempt", NULL};
        if ((rc = known_keys(pp, pk, name, "spec.preemptionPolicy", err, errlen))) return rc;
        if ((rc = opt_bool(pp, "killOnPreempt", name, "spec.preemptionPolicy", &spec->kill_on_preempt, NULL, err,
                           errlen)))
            return rc;
    }
    x->update.min_running_ms = CRD_JOB_MIN_READY_SECONDS * 1000;
    if (us) {
        static const char *const uk[] = {"batchSize", "maxFailureInstances", "maxInstanceAttempts", "rollbackOnFailure",
                                         "minReadySeconds", "paused", NULL};
        if ((rc = known_keys(us, uk, name, "spec.updateStrategy", err, errlen))) return rc;
        if ((rc = opt_uint(us, "batchSize", JOB_MAX_INSTANCES, name, "spec.updateStrategy", &x->update.batch_size, err,
                           errlen)))
            return rc;
        if ((rc = opt_uint(us, "maxFailureInstances", JOB_MAX_INSTANCES, name, "spec.updateStrategy",
                           &x->update.max_failure_instances, err, errlen)))
            return rc;
        if ((rc = opt_bool(us, "rollbackOnFailure", name, "spec.updateStrategy", &x->update.rollback_on_failure, NULL,
                           err, errlen)))
            return rc;
        if ((rc = opt_uint(us, "maxInstanceAttempts", JOB_MAX_FAILURES_LIMIT, name, "spec.updateStrategy",
                           &x->update.max_instance_attempts, err, errlen)))
            return rc;
        uint32_t ready = CRD_JOB_MIN_READY_SECONDS;
        if ((rc = opt_uint(us, "minReadySeconds", CRD_JOB_MAX_MIN_READY_SECONDS, name, "spec.updateStrategy", &ready,
                           err, errlen)))
            return rc;
        x->update.min_running_ms = (int64_t)ready * 1000;
        if ((rc = opt_bool(us, "paused", name, "spec.updateStrategy", &x->update_paused, NULL, err, errlen))) return rc;
    }
    if ((rc = decode_stopped(s, name, x, err, errlen))) return rc;
    if ((rc = check_template(s, name, err, errlen))) return rc;

    /* The recorded state, so the reconciler marks only real changes. */
    spec->state = JOB_UNKNOWN;
    const char *st = json_string_value(json_object_get(json_object_get(cr, "status"), "state"));
    for (int i = 0; st && i < JOB_NSTATES; i++)
        if (strcmp(st, job_state_name((enum job_state)i)) == 0) spec->state = (enum job_state)i;

    char msg[MSG_MAX];
    if ((rc = job_spec_validate(spec, msg, sizeof msg))) return job_fail(err, errlen, rc, name, "spec.%s", msg);
    return 0;
}

int crd_job_decode(const json_t *cr, struct job_spec *spec, char *pool_name, size_t len, char *err,
                   size_t errlen) {
    struct crd_job_extra x;
    const char *pool;
    int rc = decode_all(cr, spec, &pool, &x, err, errlen);
    if (rc) return rc;
    if (strlen(pool) >= len) {
        const char *name = json_string_value(json_object_get(json_object_get(cr, "metadata"), "name"));
        return job_fail(err, errlen, -ENAMETOOLONG, name, "spec.resourcePool: longer than %zu characters",
                        len ? len - 1 : 0);
    }
    strcpy(pool_name, pool);
    return 0;
}

int crd_job_decode_extra(const json_t *cr, struct crd_job_extra *x, char *err, size_t errlen) {
    struct job_spec spec;
    const char *pool;
    return decode_all(cr, &spec, &pool, x, err, errlen);
}

unsigned crd_job_work_flags(const struct crd_job_extra *x) {
    unsigned f = 0;
    if (x->preemptible) f |= WF_PREEMPTIBLE;
    if (x->revocable) f |= WF_REVOCABLE | WF_PREEMPTIBLE;
    return f;
}

json_t *crd_job_status(enum job_state state, const struct job_counts *counts) {
    json_t *st = json_object(), *ts = json_object();
    if (!st || !ts) { json_decref(st); json_decref(ts); return NULL; }
    int bad = json_object_set_new(st, "state", json_string(job_state_name(state)));
    for (int s = 0; s < TASK_NSTATES; s++)
        bad |= json_object_set_new(ts, task_state_name((enum task_state)s), json_integer(counts ? counts->n[s] : 0));
    bad |= json_object_set_new(st, "taskStats", ts);
    if (bad) { json_decref(st); return NULL; }
    return st;
}
