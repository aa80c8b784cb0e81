/* peloton-sim place: one placement round over a host snapshot
 * (format in docs/placement.md). Every input array and string is borrowed
 * from the input document; the few arrays built here are tracked and freed
 * before returning. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host.h"
#include "k8sparse.h"
#include "place.h"
#include "sim.h"
#include "simjson.h"

#define SP_MAX_HOSTS 1000000
#define SP_MAX_GANGS 1000000
#define SP_MAX_TASKS 10000000 /* over all gangs */
#define KP_MAX_LIST 4096      /* labels, taints, tolerations, terms, values per object */
#define KP_WHERE 256

static int sp_enum(json_t *obj, const char *key, const char *const *names, int count, const char *where,
                   int *out, char *err, size_t errlen) {
    const char *s = NULL;
    int rc = sj_str(obj, key, true, where, &s, err, errlen);
    if (rc) return rc;
    for (int i = 0; i < count; i++)
        if (!strcmp(s, names[i])) { *out = i; return 0; }
    snprintf(err, errlen, "%s.%s: unknown value \"%s\"", where, key, s);
    return -EINVAL;
}

static int sp_constraint(json_t *v, const char *w, int depth, struct kp_mem *m, struct place_constraint *c,
                         char *err, size_t errlen) {
    static const char *const keys[] = {"type", "labelConstraint", "andConstraint", "orConstraint", NULL};
    static const char *const lkeys[] = {"kind", "condition", "label", "requirement", NULL};
    static const char *const labkeys[] = {"key", "value", NULL};
    static const char *const subkeys[] = {"constraints", NULL};
    static const char *const types[] = {"LABEL", "AND", "OR"};
    static const char *const kinds[] = {"TASK", "HOST"};
    static const char *const conds[] = {"LESS_THAN", "EQUAL", "GREATER_THAN"};
    int rc, x;
    if (depth > PLACE_MAX_CONSTRAINT_DEPTH) {
        snprintf(err, errlen, "%s: nested deeper than %d", w, PLACE_MAX_CONSTRAINT_DEPTH);
        return -EINVAL;
    }
    if ((rc = kp_list(v, w, true, err, errlen)) || (rc = sj_known_keys(v, keys, w, err, errlen)) ||
        (rc = sp_enum(v, "type", types, 3, w, &x, err, errlen)))
        return rc;
    c->type = (enum pc_type)x;
    char wl[KP_WHERE];
    if (c->type == PC_LABEL) {
        json_t *lc = json_object_get(v, "labelConstraint");
        kp_where(wl, "%s.labelConstraint", w);
        if (!lc) {
            snprintf(err, errlen, "%s: required", wl);
            return -EINVAL;
        }
        int64_t req = 0;
        if ((rc = kp_list(lc, wl, true, err, errlen)) || (rc = sj_known_keys(lc, lkeys, wl, err, errlen)) ||
            (rc = sp_enum(lc, "kind", kinds, 2, wl, &x, err, errlen)))
            return rc;
        c->kind = (enum pc_kind)x;
        if ((rc = sp_enum(lc, "condition", conds, 3, wl, &x, err, errlen))) return rc;
        c->cond = (enum pc_cond)x;
        if ((rc = sj_opt_int(lc, "requirement", 0, UINT32_MAX, wl, &req, err, errlen))) return rc;
        c->requirement = (uint32_t)req;
        json_t *lab = json_object_get(lc, "label");
        char wb[KP_WHERE];
        kp_where(wb, "%s.label", wl);
        if (!lab) {
            snprintf(err, errlen, "%s: required", wb);
            return -EINVAL;
        }
        c->value = "";
        if ((rc = kp_list(lab, wb, true, err, errlen)) || (rc = sj_known_keys(lab, labkeys, wb, err, errlen)) ||
            (rc = sj_str(lab, "key", true, wb, &c->key, err, errlen)))
            return rc;
        json_t *lv = json_object_get(lab, "value");
        if (lv && !json_is_null(lv)) {
            char wv[KP_WHERE];
            kp_where(wv, "%s.value", wb);
            if ((rc = kp_label_value(lv, wv, m, &c->value, err, errlen))) return rc;
        }
        return 0;
    }
    const char *field = c->type == PC_AND ? "andConstraint" : "orConstraint";
    json_t *sub = json_object_get(v, field);
    kp_where(wl, "%s.%s", w, field);
    if (!sub) {
        snprintf(err, errlen, "%s: required", wl);
        return -EINVAL;
    }
    if ((rc = kp_list(sub, wl, true, err, errlen)) || (rc = sj_known_keys(sub, subkeys, wl, err, errlen))) return rc;
    json_t *arr = json_object_get(sub, "constraints");
    char wa[KP_WHERE];
    kp_where(wa, "%s.constraints", wl);
    if (!arr || json_is_null(arr)) return 0;
    if ((rc = kp_list(arr, wa, false, err, errlen))) return rc;
    struct place_constraint *subs = kp_alloc(m, json_array_size(arr), sizeof *subs);
    if (!subs) return KP_NOMEM(err, errlen);
    size_t i;
    json_t *sv;
    json_array_foreach(arr, i, sv) {
        char wi[KP_WHERE];
        kp_where(wi, "%s[%zu]", wa, i);
        if ((rc = sp_constraint(sv, wi, depth + 1, m, &subs[i], err, errlen))) return rc;
    }
    c->subs = subs;
    c->nsubs = (uint32_t)json_array_size(arr);
    return 0;
}

static int sp_task(json_t *v, const char *w, struct kp_mem *m, struct place_task *t, char *err, size_t errlen) {
    static const char *const keys[] = {"resources", "nodeSelector", "affinity", "tolerations", "constraint",
                                       "hostHint", "labels", NULL};
    char wf[KP_WHERE];
    int rc;
    struct resvec zero = resvec_zero();
    memset(t, 0, sizeof *t);
    if ((rc = kp_list(v, w, true, err, errlen)) || (rc = sj_known_keys(v, keys, w, err, errlen))) return rc;
    kp_where(wf, "%s.resources", w);
    if ((rc = sj_resvec(json_object_get(v, "resources"), &zero, wf, &t->req, err, errlen))) return rc;
    kp_where(wf, "%s.nodeSelector", w);
    struct host_kv *kv;
    if ((rc = kp_kv_map(json_object_get(v, "nodeSelector"), wf, m, &kv, &t->nselector, err, errlen))) return rc;
    t->selector = kv;
    kp_where(wf, "%s.labels", w);
    if ((rc = kp_kv_map(json_object_get(v, "labels"), wf, m, &kv, &t->nlabels, err, errlen))) return rc;
    t->labels = kv;
    kp_where(wf, "%s.affinity", w);
    struct place_term *terms;
    if ((rc = kp_affinity(json_object_get(v, "affinity"), wf, m, &terms, &t->nterms, err, errlen))) return rc;
    t->terms = terms;
    kp_where(wf, "%s.tolerations", w);
    struct place_toleration *tols;
    if ((rc = kp_tolerations(json_object_get(v, "tolerations"), wf, m, &tols, &t->ntols, err, errlen))) return rc;
    t->tols = tols;
    if ((rc = sj_str(v, "hostHint", false, w, &t->host_hint, err, errlen))) return rc;
    json_t *cv = json_object_get(v, "constraint");
    if (cv && !json_is_null(cv)) {
        struct place_constraint *c = kp_alloc(m, 1, sizeof *c);
        if (!c) return KP_NOMEM(err, errlen);
        kp_where(wf, "%s.constraint", w);
        if ((rc = sp_constraint(cv, wf, 1, m, c, err, errlen))) return rc;
        t->constraint = c;
    }
    return 0;
}

static int sp_hosts(json_t *arr, struct kp_mem *m, struct host_fleet *f, char *err, size_t errlen) {
    static const char *const keys[] = {"name", "backend", "allocatable", "allocated", "labels", "attributes",
                                       "taints", "unschedulable", "draining", "notReady", "tasks", NULL};
    static const char *const tkeys[] = {"job", "labels", NULL};
    if (!arr) {
        snprintf(err, errlen, "hosts: required");
        return -EINVAL;
    }
    if (!json_is_array(arr) || json_array_size(arr) > SP_MAX_HOSTS) {
        snprintf(err, errlen, "hosts: expected an array of at most %d hosts", SP_MAX_HOSTS);
        return -EINVAL;
    }
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) {
        char w[KP_WHERE], wf[KP_WHERE];
        int rc;
        struct host_spec s = {0};
        struct resvec zero = resvec_zero();
        kp_where(w, "hosts[%zu]", i);
        if ((rc = kp_list(v, w, true, err, errlen)) || (rc = sj_known_keys(v, keys, w, err, errlen)) ||
            (rc = sj_str(v, "name", true, w, &s.name, err, errlen)))
            return rc;
        const char *backend = "kubelet";
        if ((rc = sj_str(v, "backend", false, w, &backend, err, errlen))) return rc;
        if (!strcmp(backend, "kubelet")) s.backend = HOST_KUBELET;
        else if (!strcmp(backend, "mesos")) s.backend = HOST_MESOS;
        else {
            snprintf(err, errlen, "%s.backend: \"%s\" is not kubelet or mesos", w, backend);
            return -EINVAL;
        }
        kp_where(wf, "%s.allocatable", w);
        if ((rc = sj_resvec(json_object_get(v, "allocatable"), &zero, wf, &s.allocatable, err, errlen))) return rc;
        kp_where(wf, "%s.allocated", w);
        if ((rc = sj_resvec(json_object_get(v, "allocated"), &zero, wf, &s.allocated, err, errlen))) return rc;
        struct host_kv *labels, *attrs;
        uint32_t nl, na;
        kp_where(wf, "%s.labels", w);
        if ((rc = kp_kv_map(json_object_get(v, "labels"), wf, m, &labels, &nl, err, errlen))) return rc;
        kp_where(wf, "%s.attributes", w);
        if ((rc = kp_kv_map(json_object_get(v, "attributes"), wf, m, &attrs, &na, err, errlen))) return rc;
        struct host_kv *all = kp_alloc(m, (size_t)nl + na, sizeof *all);
        if (!all) return KP_NOMEM(err, errlen);
        for (uint32_t j = 0; j < nl; j++) all[j] = labels[j];
        for (uint32_t j = 0; j < na; j++) {
            for (uint32_t k = 0; k < nl; k++) {
                if (!strcmp(labels[k].key, attrs[j].key)) {
                    snprintf(err, errlen, "%s.attributes.%s: also given as a label", w, attrs[j].key);
                    return -EINVAL;
                }
            }
            all[nl + j] = attrs[j];
        }
        s.labels = all;
        s.nlabels = nl + na;
        struct host_taint_spec *taints;
        kp_where(wf, "%s.taints", w);
        if ((rc = kp_taints(json_object_get(v, "taints"), wf, m, &taints, &s.ntaints, err, errlen))) return rc;
        s.taints = taints;
        if ((rc = sj_opt_bool(v, "unschedulable", w, &s.unschedulable, err, errlen)) ||
            (rc = sj_opt_bool(v, "draining", w, &s.draining, err, errlen)) ||
            (rc = sj_opt_bool(v, "notReady", w, &s.not_ready, err, errlen)))
            return rc;
        uint32_t idx;
        rc = host_fleet_add(f, &s, &idx);
        if (rc == -EEXIST) {
            snprintf(err, errlen, "%s.name: duplicate host \"%s\"", w, s.name);
            return rc;
        }
        if (rc == -ENOMEM) return KP_NOMEM(err, errlen);
        if (rc) {
            snprintf(err, errlen, "%s: invalid host (empty name, or a label or taint too long)", w);
            return rc;
        }
        json_t *tasks = json_object_get(v, "tasks");
        if (!tasks || json_is_null(tasks)) continue;
        kp_where(wf, "%s.tasks", w);
        if (!json_is_array(tasks)) {
            snprintf(err, errlen, "%s: expected an array", wf);
            return -EINVAL;
        }
        size_t j;
        json_t *tv;
        json_array_foreach(tasks, j, tv) {
            char wt[KP_WHERE], wl[KP_WHERE];
            const char *job = NULL;
            struct host_kv *tl;
            uint32_t ntl;
            kp_where(wt, "%s[%zu]", wf, j);
            kp_where(wl, "%s.labels", wt);
            if ((rc = kp_list(tv, wt, true, err, errlen)) || (rc = sj_known_keys(tv, tkeys, wt, err, errlen)) ||
                (rc = sj_str(tv, "job", false, wt, &job, err, errlen)) ||
                (rc = kp_kv_map(json_object_get(tv, "labels"), wl, m, &tl, &ntl, err, errlen)))
                return rc;
            if (host_fleet_add_task(f, idx, job, tl, ntl)) return KP_NOMEM(err, errlen);
        }
    }
    return 0;
}

static int sp_gangs(json_t *arr, struct kp_mem *m, struct place_gang **out, uint32_t *n, char *err, size_t errlen) {
    static const char *const keys[] = {"id", "job", "strategy", "tasks", "count", "task", NULL};
    static const char *const strategies[] = {"PACK", "SPREAD_JOB", "LEAST_LOADED"};
    if (!arr) {
        snprintf(err, errlen, "gangs: required");
        return -EINVAL;
    }
    if (!json_is_array(arr) || json_array_size(arr) > SP_MAX_GANGS) {
        snprintf(err, errlen, "gangs: expected an array of at most %d gangs", SP_MAX_GANGS);
        return -EINVAL;
    }
    struct place_gang *g = kp_alloc(m, json_array_size(arr), sizeof *g);
    if (!g) return KP_NOMEM(err, errlen);
    uint64_t total = 0;
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) {
        char w[KP_WHERE], wf[KP_WHERE];
        int rc, st = PLACE_PACK;
        kp_where(w, "gangs[%zu]", i);
        if ((rc = kp_list(v, w, true, err, errlen)) || (rc = sj_known_keys(v, keys, w, err, errlen))) return rc;
        json_t *idv = json_object_get(v, "id");
        if (!idv || json_is_null(idv)) {
            char *buf = kp_alloc(m, 24, 1);
            if (!buf) return KP_NOMEM(err, errlen);
            snprintf(buf, 24, "%zu", i);
            g[i].id = buf;
        } else {
            kp_where(wf, "%s.id", w);
            if ((rc = kp_label_value(idv, wf, m, &g[i].id, err, errlen))) return rc;
        }
        if ((rc = sj_str(v, "job", false, w, &g[i].job, err, errlen))) return rc;
        if (json_object_get(v, "strategy") && (rc = sp_enum(v, "strategy", strategies, 3, w, &st, err, errlen)))
            return rc;
        g[i].strategy = (enum place_strategy)st;
        json_t *tasks = json_object_get(v, "tasks"), *task = json_object_get(v, "task");
        if ((tasks != NULL) == (task != NULL)) {
            snprintf(err, errlen, "%s: give either \"tasks\" or \"count\" and \"task\"", w);
            return -EINVAL;
        }
        struct place_task *t;
        if (tasks) {
            kp_where(wf, "%s.tasks", w);
            if (!json_is_array(tasks) || json_array_size(tasks) == 0) {
                snprintf(err, errlen, "%s: expected a non-empty array", wf);
                return -EINVAL;
            }
            size_t nt = json_array_size(tasks);
            if (total + nt > SP_MAX_TASKS) {
                snprintf(err, errlen, "%s: more than %d tasks in all gangs", wf, SP_MAX_TASKS);
                return -EINVAL;
            }
            if (!(t = kp_alloc(m, nt, sizeof *t))) return KP_NOMEM(err, errlen);
            size_t j;
            json_t *tv;
            json_array_foreach(tasks, j, tv) {
                char wt[KP_WHERE];
                kp_where(wt, "%s[%zu]", wf, j);
                if ((rc = sp_task(tv, wt, m, &t[j], err, errlen))) return rc;
            }
            g[i].ntasks = (uint32_t)nt;
        } else {
            int64_t count = 1;
            if ((rc = sj_opt_int(v, "count", 1, SP_MAX_TASKS, w, &count, err, errlen))) return rc;
            if (total + (uint64_t)count > SP_MAX_TASKS) {
                snprintf(err, errlen, "%s.count: more than %d tasks in all gangs", w, SP_MAX_TASKS);
                return -EINVAL;
            }
            if (!(t = kp_alloc(m, (size_t)count, sizeof *t))) return KP_NOMEM(err, errlen);
            kp_where(wf, "%s.task", w);
            if ((rc = sp_task(task, wf, m, &t[0], err, errlen))) return rc;
            for (int64_t j = 1; j < count; j++) t[j] = t[0];
            g[i].ntasks = (uint32_t)count;
        }
        if (json_object_get(v, "count") && tasks) {
            snprintf(err, errlen, "%s.count: only with \"task\"", w);
            return -EINVAL;
        }
        g[i].tasks = t;
        total += g[i].ntasks;
    }
    *out = g;
    *n = (uint32_t)json_array_size(arr);
    return 0;
}

static json_t *sp_output(struct host_fleet *f, const struct place_gang *g, uint32_t ngangs,
                         const struct place_round *r) {
    json_t *out = json_object(), *pl = json_array(), *fl = json_array(), *hs = json_array();
    json_object_set_new(out, "placements", pl);
    json_object_set_new(out, "failures", fl);
    for (uint32_t i = 0; i < r->ntried; i++) {
        const struct place_gang_result *gr = &r->gangs[i];
        if (gr->rc == 0) {
            json_t *tasks = json_array();
            for (uint32_t t = 0; t < g[i].ntasks; t++)
                json_array_append_new(tasks, json_pack("{s:I,s:s}", "index", (json_int_t)t, "host",
                                                       host_name(f, r->hosts[gr->first + t])));
            json_array_append_new(pl, json_pack("{s:s,s:o}", "gang", g[i].id, "tasks", tasks));
            continue;
        }
        char msg[512];
        place_failure_format(&gr->fail, msg, sizeof msg);
        json_t *rej = json_object();
        for (int k = 0; k < PR_NREASONS; k++)
            if (gr->fail.rejected[k])
                json_object_set_new(rej, place_reason_name((enum place_reason)k),
                                    json_integer(gr->fail.rejected[k]));
        char k8s[1024]; /* what placement says in FailedScheduling */
        place_failure_format_k8s(f, &gr->fail, g[i].ntasks, k8s, sizeof k8s);
        json_array_append_new(fl, json_pack("{s:s,s:I,s:s,s:s,s:o}", "gang", g[i].id, "task",
                                            (json_int_t)gr->fail.task, "reason", msg, "message", k8s, "rejected",
                                            rej));
    }
    if (r->ntried < ngangs) {
        json_t *d = json_array();
        for (uint32_t i = r->ntried; i < ngangs; i++) json_array_append_new(d, json_string(g[i].id));
        json_object_set_new(out, "deferred", d);
    }
    for (uint32_t i = 0; i < f->nhosts; i++)
        json_array_append_new(hs, json_pack("{s:s,s:o}", "name", host_name(f, i), "allocated",
                                            sj_resvec_out(f->hosts[i].allocated)));
    json_object_set_new(out, "hosts", hs);
    return out;
}

json_t *sim_place(json_t *in, char *err, size_t errlen) {
    static const char *const keys[] = {"hosts", "gangs", "options", NULL};
    static const char *const okeys[] = {"gpuHostsForAnyTask", "maxGangs", "spreadMaxCandidates", NULL};
    struct kp_mem m = {0};
    struct host_fleet *f = NULL;
    struct place_engine *e = NULL;
    struct place_round r = {0};
    struct place_gang *g = NULL;
    uint32_t ng = 0;
    json_t *out = NULL;
    struct place_options o;
    place_options_default(&o);
    if (!json_is_object(in)) {
        snprintf(err, errlen, "input: expected an object with hosts and gangs");
        return NULL;
    }
    if (sj_known_keys(in, keys, "input", err, errlen)) return NULL;
    json_t *opt = json_object_get(in, "options");
    if (opt && !json_is_null(opt)) {
        int64_t mg = 0, sc = 0;
        if (kp_list(opt, "options", true, err, errlen) || sj_known_keys(opt, okeys, "options", err, errlen) ||
            sj_opt_bool(opt, "gpuHostsForAnyTask", "options", &o.gpu_hosts_any_task, err, errlen) ||
            sj_opt_int(opt, "maxGangs", 0, SP_MAX_GANGS, "options", &mg, err, errlen) ||
            sj_opt_int(opt, "spreadMaxCandidates", 0, UINT32_MAX, "options", &sc, err, errlen))
            return NULL;
        o.max_gangs = (uint32_t)mg;
        o.spread_max_candidates = (uint32_t)sc;
    }
    if (!(f = host_fleet_new())) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (sp_hosts(json_object_get(in, "hosts"), &m, f, err, errlen) ||
        sp_gangs(json_object_get(in, "gangs"), &m, &g, &ng, err, errlen))
        goto done;
    if (!(e = place_engine_new(f, &o)) || place_round(e, g, ng, &r)) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    for (uint32_t i = 0; i < r.ntried; i++) {
        if (r.gangs[i].rc && r.gangs[i].rc != -ENOSPC) {
            snprintf(err, errlen, "gangs[%u]: invalid gang (%s)", i, strerror(-r.gangs[i].rc));
            goto done;
        }
    }
    out = sp_output(f, g, ng, &r);
    if (!out) snprintf(err, errlen, "out of memory");
done:
    place_round_free(&r);
    place_engine_free(e);
    host_fleet_free(f);
    kp_free_all(&m);
    return out;
}
