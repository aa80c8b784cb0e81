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
#include "place.h"
#include "sim.h"
#include "simjson.h"

#define SP_MAX_HOSTS 1000000
#define SP_MAX_GANGS 1000000
#define SP_MAX_TASKS 10000000 /* over all gangs */
#define SP_MAX_LIST 4096      /* labels, taints, tolerations, terms, values per object */
#define SP_WHERE 256

struct sp_mem {
    void **p;
    size_t n, cap;
};

static void *sp_alloc(struct sp_mem *m, size_t count, size_t size) {
    if (m->n == m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 64;
        void **q = realloc(m->p, nc * sizeof *q);
        if (!q) return NULL;
        m->p = q;
        m->cap = nc;
    }
    void *x = calloc(count ? count : 1, size);
    if (x) m->p[m->n++] = x;
    return x;
}

static void sp_free_all(struct sp_mem *m) {
    for (size_t i = 0; i < m->n; i++) free(m->p[i]);
    free(m->p);
}

/* Builds a field path ("gangs[3].tasks[0]") into a SP_WHERE buffer; long
 * paths are cut, which only shortens a message. */
__attribute__((format(printf, 2, 3))) static void wh(char *out, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, SP_WHERE, fmt, ap);
    va_end(ap);
}

#define NOMEM(err, errlen) (snprintf(err, errlen, "out of memory"), -ENOMEM)

static int sp_list(json_t *v, const char *where, bool object, char *err, size_t errlen) {
    if (object ? !json_is_object(v) : !json_is_array(v)) {
        snprintf(err, errlen, "%s: expected %s", where, object ? "an object" : "an array");
        return -EINVAL;
    }
    size_t n = object ? json_object_size(v) : json_array_size(v);
    if (n > SP_MAX_LIST) {
        snprintf(err, errlen, "%s: more than %d entries", where, SP_MAX_LIST);
        return -EINVAL;
    }
    return 0;
}

/* A label value: a string, or a number/bool written as text (YAML may turn
 * `zone: 1` into a number). */
static int sp_label_value(json_t *v, const char *where, struct sp_mem *m, const char **out, char *err,
                          size_t errlen) {
    if (json_is_string(v)) { *out = json_string_value(v); return 0; }
    char *buf;
    if (json_is_integer(v) || json_is_boolean(v)) {
        if (!(buf = sp_alloc(m, 32, 1))) return NOMEM(err, errlen);
        if (json_is_integer(v)) snprintf(buf, 32, "%lld", (long long)json_integer_value(v));
        else snprintf(buf, 32, "%s", json_is_true(v) ? "true" : "false");
        *out = buf;
        return 0;
    }
    snprintf(err, errlen, "%s: expected a string", where);
    return -EINVAL;
}

static int sp_kv_map(json_t *obj, const char *where, struct sp_mem *m, struct host_kv **out, uint32_t *n,
                     char *err, size_t errlen) {
    *out = NULL;
    *n = 0;
    if (!obj || json_is_null(obj)) return 0;
    int rc = sp_list(obj, where, true, err, errlen);
    if (rc) return rc;
    struct host_kv *kv = sp_alloc(m, json_object_size(obj), sizeof *kv);
    if (!kv) return NOMEM(err, errlen);
    const char *key;
    json_t *val;
    uint32_t i = 0;
    json_object_foreach(obj, key, val) {
        char w[SP_WHERE];
        wh(w, "%s.%s", where, key);
        if (!key[0]) {
            snprintf(err, errlen, "%s: empty key", where);
            return -EINVAL;
        }
        kv[i].key = key;
        if ((rc = sp_label_value(val, w, m, &kv[i].value, err, errlen))) return rc;
        i++;
    }
    *out = kv;
    *n = i;
    return 0;
}

static int sp_effect(json_t *obj, const char *where, bool optional, int *out, char *err, size_t errlen) {
    const char *s = NULL;
    int rc = sj_str(obj, "effect", !optional, where, &s, err, errlen);
    if (rc) return rc;
    if (!s || (optional && !s[0])) { *out = TOL_ANY_EFFECT; return 0; }
    if (!strcmp(s, "NoSchedule")) *out = TAINT_NO_SCHEDULE;
    else if (!strcmp(s, "PreferNoSchedule")) *out = TAINT_PREFER_NO_SCHEDULE;
    else if (!strcmp(s, "NoExecute")) *out = TAINT_NO_EXECUTE;
    else {
        snprintf(err, errlen, "%s.effect: \"%s\" is not NoSchedule, PreferNoSchedule or NoExecute", where, s);
        return -EINVAL;
    }
    return 0;
}

static int sp_taints(json_t *arr, const char *where, struct sp_mem *m, struct host_taint_spec **out,
                     uint32_t *n, char *err, size_t errlen) {
    static const char *const keys[] = {"key", "value", "effect", "timeAdded", NULL};
    *out = NULL;
    *n = 0;
    if (!arr || json_is_null(arr)) return 0;
    int rc = sp_list(arr, where, false, err, errlen);
    if (rc) return rc;
    struct host_taint_spec *t = sp_alloc(m, json_array_size(arr), sizeof *t);
    if (!t) return NOMEM(err, errlen);
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) {
        char w[SP_WHERE];
        int eff;
        wh(w, "%s[%zu]", where, i);
        if (!json_is_object(v)) {
            snprintf(err, errlen, "%s: expected an object", w);
            return -EINVAL;
        }
        if ((rc = sj_known_keys(v, keys, w, err, errlen)) || (rc = sj_str(v, "key", true, w, &t[i].key, err, errlen)) ||
            (rc = sj_str(v, "value", false, w, &t[i].value, err, errlen)) ||
            (rc = sp_effect(v, w, false, &eff, err, errlen)))
            return rc;
        t[i].effect = (enum taint_effect)eff;
    }
    *out = t;
    *n = (uint32_t)json_array_size(arr);
    return 0;
}

static int sp_tolerations(json_t *arr, const char *where, struct sp_mem *m, struct place_toleration **out,
                          uint32_t *n, char *err, size_t errlen) {
    static const char *const keys[] = {"key", "operator", "value", "effect", "tolerationSeconds", NULL};
    *out = NULL;
    *n = 0;
    if (!arr || json_is_null(arr)) return 0;
    int rc = sp_list(arr, where, false, err, errlen);
    if (rc) return rc;
    struct place_toleration *t = sp_alloc(m, json_array_size(arr), sizeof *t);
    if (!t) return NOMEM(err, errlen);
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) {
        char w[SP_WHERE];
        const char *op = "Equal";
        wh(w, "%s[%zu]", where, i);
        if (!json_is_object(v)) {
            snprintf(err, errlen, "%s: expected an object", w);
            return -EINVAL;
        }
        if ((rc = sj_known_keys(v, keys, w, err, errlen)) || (rc = sj_str(v, "key", false, w, &t[i].key, err, errlen)) ||
            (rc = sj_str(v, "operator", false, w, &op, err, errlen)) ||
            (rc = sj_str(v, "value", false, w, &t[i].value, err, errlen)) ||
            (rc = sp_effect(v, w, true, &t[i].effect, err, errlen)))
            return rc;
        if (!strcmp(op, "Equal")) t[i].op = TOL_EQUAL;
        else if (!strcmp(op, "Exists")) t[i].op = TOL_EXISTS;
        else {
            snprintf(err, errlen, "%s.operator: \"%s\" is not Equal or Exists", w, op);
            return -EINVAL;
        }
        if ((!t[i].key || !t[i].key[0]) && t[i].op != TOL_EXISTS) {
            snprintf(err, errlen, "%s.operator: an empty key needs operator Exists", w);
            return -EINVAL;
        }
        if (t[i].op == TOL_EXISTS && t[i].value && t[i].value[0]) {
            snprintf(err, errlen, "%s.value: must be empty with operator Exists", w);
            return -EINVAL;
        }
    }
    *out = t;
    *n = (uint32_t)json_array_size(arr);
    return 0;
}

static int sp_expr(json_t *v, const char *w, struct sp_mem *m, struct place_expr *x, char *err, size_t errlen) {
    static const char *const keys[] = {"key", "operator", "values", NULL};
    static const char *const ops[] = {"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"};
    const char *op = NULL;
    int rc;
    if (!json_is_object(v)) {
        snprintf(err, errlen, "%s: expected an object", w);
        return -EINVAL;
    }
    if ((rc = sj_known_keys(v, keys, w, err, errlen)) || (rc = sj_str(v, "key", true, w, &x->key, err, errlen)) ||
        (rc = sj_str(v, "operator", true, w, &op, err, errlen)))
        return rc;
    int k = -1;
    for (int i = 0; i < 6; i++) if (!strcmp(op, ops[i])) k = i;
    if (k < 0) {
        snprintf(err, errlen, "%s.operator: \"%s\" is not In, NotIn, Exists, DoesNotExist, Gt or Lt", w, op);
        return -EINVAL;
    }
    x->op = (enum sel_op)k;
    json_t *vals = json_object_get(v, "values");
    char wv[SP_WHERE];
    wh(wv, "%s.values", w);
    size_t nv = 0;
    if (vals && !json_is_null(vals)) {
        if ((rc = sp_list(vals, wv, false, err, errlen))) return rc;
        nv = json_array_size(vals);
    }
    const char **arr = sp_alloc(m, nv, sizeof *arr);
    if (!arr) return NOMEM(err, errlen);
    for (size_t i = 0; i < nv; i++) {
        char wi[SP_WHERE];
        wh(wi, "%s[%zu]", wv, i);
        if ((rc = sp_label_value(json_array_get(vals, i), wi, m, &arr[i], err, errlen))) return rc;
    }
    x->values = arr;
    x->nvalues = (uint32_t)nv;
    if ((x->op == SEL_IN || x->op == SEL_NOT_IN) && nv == 0) {
        snprintf(err, errlen, "%s: operator %s needs at least one value", wv, op);
        return -EINVAL;
    }
    if ((x->op == SEL_EXISTS || x->op == SEL_DOES_NOT_EXIST) && nv) {
        snprintf(err, errlen, "%s: operator %s takes no values", wv, op);
        return -EINVAL;
    }
    if (x->op == SEL_GT || x->op == SEL_LT) {
        char *end;
        if (nv != 1 || !arr[0][0] || (strtoll(arr[0], &end, 10), *end)) {
            snprintf(err, errlen, "%s: operator %s needs exactly one integer value", wv, op);
            return -EINVAL;
        }
    }
    return 0;
}

static int sp_affinity(json_t *aff, const char *where, struct sp_mem *m, struct place_term **out, uint32_t *n,
                       char *err, size_t errlen) {
    static const char *const akeys[] = {"nodeAffinity", NULL};
    static const char *const nkeys[] = {"requiredDuringSchedulingIgnoredDuringExecution",
                                        "preferredDuringSchedulingIgnoredDuringExecution", NULL};
    static const char *const rkeys[] = {"nodeSelectorTerms", NULL};
    static const char *const tkeys[] = {"matchExpressions", NULL};
    char w[SP_WHERE];
    int rc;
    *out = NULL;
    *n = 0;
    if (!aff || json_is_null(aff)) return 0;
    if ((rc = sp_list(aff, where, true, err, errlen)) || (rc = sj_known_keys(aff, akeys, where, err, errlen)))
        return rc;
    json_t *na = json_object_get(aff, "nodeAffinity");
    if (!na || json_is_null(na)) return 0;
    wh(w, "%s.nodeAffinity", where);
    if ((rc = sp_list(na, w, true, err, errlen)) || (rc = sj_known_keys(na, nkeys, w, err, errlen))) return rc;
    json_t *req = json_object_get(na, "requiredDuringSchedulingIgnoredDuringExecution");
    if (!req || json_is_null(req)) return 0;
    wh(w, "%s.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution", where);
    if ((rc = sp_list(req, w, true, err, errlen)) || (rc = sj_known_keys(req, rkeys, w, err, errlen))) return rc;
    json_t *terms = json_object_get(req, "nodeSelectorTerms");
    char wt[SP_WHERE];
    wh(wt, "%s.nodeSelectorTerms", w);
    if (!terms || (rc = sp_list(terms, wt, false, err, errlen))) {
        if (!terms) snprintf(err, errlen, "%s: required", wt);
        return -EINVAL;
    }
    if (json_array_size(terms) == 0) {
        snprintf(err, errlen, "%s: needs at least one term", wt);
        return -EINVAL;
    }
    struct place_term *t = sp_alloc(m, json_array_size(terms), sizeof *t);
    if (!t) return NOMEM(err, errlen);
    size_t i;
    json_t *tv;
    json_array_foreach(terms, i, tv) {
        char wi[SP_WHERE], we[SP_WHERE];
        wh(wi, "%s[%zu]", wt, i);
        if ((rc = sp_list(tv, wi, true, err, errlen)) || (rc = sj_known_keys(tv, tkeys, wi, err, errlen))) return rc;
        json_t *ex = json_object_get(tv, "matchExpressions");
        if (!ex || json_is_null(ex)) continue; /* an empty term matches nothing */
        wh(we, "%s.matchExpressions", wi);
        if ((rc = sp_list(ex, we, false, err, errlen))) return rc;
        struct place_expr *x = sp_alloc(m, json_array_size(ex), sizeof *x);
        if (!x) return NOMEM(err, errlen);
        size_t j;
        json_t *xv;
        json_array_foreach(ex, j, xv) {
            char wj[SP_WHERE];
            wh(wj, "%s[%zu]", we, j);
            if ((rc = sp_expr(xv, wj, m, &x[j], err, errlen))) return rc;
        }
        t[i].exprs = x;
        t[i].nexprs = (uint32_t)json_array_size(ex);
    }
    *out = t;
    *n = (uint32_t)json_array_size(terms);
    return 0;
}

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

static int sp_constraint(json_t *v, const char *w, int depth, struct sp_mem *m, struct place_constraint *c,
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
    if ((rc = sp_list(v, w, true, err, errlen)) || (rc = sj_known_keys(v, keys, w, err, errlen)) ||
        (rc = sp_enum(v, "type", types, 3, w, &x, err, errlen)))
        return rc;
    c->type = (enum pc_type)x;
    char wl[SP_WHERE];
    if (c->type == PC_LABEL) {
        json_t *lc = json_object_get(v, "labelConstraint");
        wh(wl, "%s.labelConstraint", w);
        if (!lc) {
            snprintf(err, errlen, "%s: required", wl);
            return -EINVAL;
        }
        int64_t req = 0;
        if ((rc = sp_list(lc, wl, true, err, errlen)) || (rc = sj_known_keys(lc, lkeys, wl, err, errlen)) ||
            (rc = sp_enum(lc, "kind", kinds, 2, wl, &x, err, errlen)))
            return rc;
        c->kind = (enum pc_kind)x;
        if ((rc = sp_enum(lc, "condition", conds, 3, wl, &x, err, errlen))) return rc;
        c->cond = (enum pc_cond)x;
        if ((rc = sj_opt_int(lc, "requirement", 0, UINT32_MAX, wl, &req, err, errlen))) return rc;
        c->requirement = (uint32_t)req;
        json_t *lab = json_object_get(lc, "label");
        char wb[SP_WHERE];
        wh(wb, "%s.label", wl);
        if (!lab) {
            snprintf(err, errlen, "%s: required", wb);
            return -EINVAL;
        }
        c->value = "";
        if ((rc = sp_list(lab, wb, true, err, errlen)) || (rc = sj_known_keys(lab, labkeys, wb, err, errlen)) ||
            (rc = sj_str(lab, "key", true, wb, &c->key, err, errlen)))
            return rc;
        json_t *lv = json_object_get(lab, "value");
        if (lv && !json_is_null(lv)) {
            char wv[SP_WHERE];
            wh(wv, "%s.value", wb);
            if ((rc = sp_label_value(lv, wv, m, &c->value, err, errlen))) return rc;
        }
        return 0;
    }
    const char *field = c->type == PC_AND ? "andConstraint" : "orConstraint";
    json_t *sub = json_object_get(v, field);
    wh(wl, "%s.%s", w, field);
    if (!sub) {
        snprintf(err, errlen, "%s: required", wl);
        return -EINVAL;
    }
    if ((rc = sp_list(sub, wl, true, err, errlen)) || (rc = sj_known_keys(sub, subkeys, wl, err, errlen))) return rc;
    json_t *arr = json_object_get(sub, "constraints");
    char wa[SP_WHERE];
    wh(wa, "%s.constraints", wl);
    if (!arr || json_is_null(arr)) return 0;
    if ((rc = sp_list(arr, wa, false, err, errlen))) return rc;
    struct place_constraint *subs = sp_alloc(m, json_array_size(arr), sizeof *subs);
    if (!subs) return NOMEM(err, errlen);
    size_t i;
    json_t *sv;
    json_array_foreach(arr, i, sv) {
        char wi[SP_WHERE];
        wh(wi, "%s[%zu]", wa, i);
        if ((rc = sp_constraint(sv, wi, depth + 1, m, &subs[i], err, errlen))) return rc;
    }
    c->subs = subs;
    c->nsubs = (uint32_t)json_array_size(arr);
    return 0;
}

static int sp_task(json_t *v, const char *w, struct sp_mem *m, struct place_task *t, char *err, size_t errlen) {
    static const char *const keys[] = {"resources", "nodeSelector", "affinity", "tolerations", "constraint",
                                       "hostHint", "labels", NULL};
    char wf[SP_WHERE];
    int rc;
    struct resvec zero = resvec_zero();
    memset(t, 0, sizeof *t);
    if ((rc = sp_list(v, w, true, err, errlen)) || (rc = sj_known_keys(v, keys, w, err, errlen))) return rc;
    wh(wf, "%s.resources", w);
    if ((rc = sj_resvec(json_object_get(v, "resources"), &zero, wf, &t->req, err, errlen))) return rc;
    wh(wf, "%s.nodeSelector", w);
    struct host_kv *kv;
    if ((rc = sp_kv_map(json_object_get(v, "nodeSelector"), wf, m, &kv, &t->nselector, err, errlen))) return rc;
    t->selector = kv;
    wh(wf, "%s.labels", w);
    if ((rc = sp_kv_map(json_object_get(v, "labels"), wf, m, &kv, &t->nlabels, err, errlen))) return rc;
    t->labels = kv;
    wh(wf, "%s.affinity", w);
    struct place_term *terms;
    if ((rc = sp_affinity(json_object_get(v, "affinity"), wf, m, &terms, &t->nterms, err, errlen))) return rc;
    t->terms = terms;
    wh(wf, "%s.tolerations", w);
    struct place_toleration *tols;
    if ((rc = sp_tolerations(json_object_get(v, "tolerations"), wf, m, &tols, &t->ntols, err, errlen))) return rc;
    t->tols = tols;
    if ((rc = sj_str(v, "hostHint", false, w, &t->host_hint, err, errlen))) return rc;
    json_t *cv = json_object_get(v, "constraint");
    if (cv && !json_is_null(cv)) {
        struct place_constraint *c = sp_alloc(m, 1, sizeof *c);
        if (!c) return NOMEM(err, errlen);
        wh(wf, "%s.constraint", w);
        if ((rc = sp_constraint(cv, wf, 1, m, c, err, errlen))) return rc;
        t->constraint = c;
    }
    return 0;
}

static int sp_hosts(json_t *arr, struct sp_mem *m, struct host_fleet *f, char *err, size_t errlen) {
    static const char *const keys[] = {"name", "backend", "allocatable", "allocated", "labels", "attributes",
                                       "taints", "unschedulable", "draining", "tasks", NULL};
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
        char w[SP_WHERE], wf[SP_WHERE];
        int rc;
        struct host_spec s = {0};
        struct resvec zero = resvec_zero();
        wh(w, "hosts[%zu]", i);
        if ((rc = sp_list(v, w, true, err, errlen)) || (rc = sj_known_keys(v, keys, w, err, errlen)) ||
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
        wh(wf, "%s.allocatable", w);
        if ((rc = sj_resvec(json_object_get(v, "allocatable"), &zero, wf, &s.allocatable, err, errlen))) return rc;
        wh(wf, "%s.allocated", w);
        if ((rc = sj_resvec(json_object_get(v, "allocated"), &zero, wf, &s.allocated, err, errlen))) return rc;
        struct host_kv *labels, *attrs;
        uint32_t nl, na;
        wh(wf, "%s.labels", w);
        if ((rc = sp_kv_map(json_object_get(v, "labels"), wf, m, &labels, &nl, err, errlen))) return rc;
        wh(wf, "%s.attributes", w);
        if ((rc = sp_kv_map(json_object_get(v, "attributes"), wf, m, &attrs, &na, err, errlen))) return rc;
        struct host_kv *all = sp_alloc(m, (size_t)nl + na, sizeof *all);
        if (!all) return NOMEM(err, errlen);
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
        wh(wf, "%s.taints", w);
        if ((rc = sp_taints(json_object_get(v, "taints"), wf, m, &taints, &s.ntaints, err, errlen))) return rc;
        s.taints = taints;
        if ((rc = sj_opt_bool(v, "unschedulable", w, &s.unschedulable, err, errlen)) ||
            (rc = sj_opt_bool(v, "draining", w, &s.draining, err, errlen)))
            return rc;
        uint32_t idx;
        rc = host_fleet_add(f, &s, &idx);
        if (rc == -EEXIST) {
            snprintf(err, errlen, "%s.name: duplicate host \"%s\"", w, s.name);
            return rc;
        }
        if (rc == -ENOMEM) return NOMEM(err, errlen);
        if (rc) {
            snprintf(err, errlen, "%s: invalid host (empty name, or a label or taint too long)", w);
            return rc;
        }
        json_t *tasks = json_object_get(v, "tasks");
        if (!tasks || json_is_null(tasks)) continue;
        wh(wf, "%s.tasks", w);
        if (!json_is_array(tasks)) {
            snprintf(err, errlen, "%s: expected an array", wf);
            return -EINVAL;
        }
        size_t j;
        json_t *tv;
        json_array_foreach(tasks, j, tv) {
            char wt[SP_WHERE], wl[SP_WHERE];
            const char *job = NULL;
            struct host_kv *tl;
            uint32_t ntl;
            wh(wt, "%s[%zu]", wf, j);
            wh(wl, "%s.labels", wt);
            if ((rc = sp_list(tv, wt, true, err, errlen)) || (rc = sj_known_keys(tv, tkeys, wt, err, errlen)) ||
                (rc = sj_str(tv, "job", false, wt, &job, err, errlen)) ||
                (rc = sp_kv_map(json_object_get(tv, "labels"), wl, m, &tl, &ntl, err, errlen)))
                return rc;
            if (host_fleet_add_task(f, idx, job, tl, ntl)) return NOMEM(err, errlen);
        }
    }
    return 0;
}

static int sp_gangs(json_t *arr, struct sp_mem *m, struct place_gang **out, uint32_t *n, char *err, size_t errlen) {
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
    struct place_gang *g = sp_alloc(m, json_array_size(arr), sizeof *g);
    if (!g) return NOMEM(err, errlen);
    uint64_t total = 0;
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) {
        char w[SP_WHERE], wf[SP_WHERE];
        int rc, st = PLACE_PACK;
        wh(w, "gangs[%zu]", i);
        if ((rc = sp_list(v, w, true, err, errlen)) || (rc = sj_known_keys(v, keys, w, err, errlen))) return rc;
        json_t *idv = json_object_get(v, "id");
        if (!idv || json_is_null(idv)) {
            char *buf = sp_alloc(m, 24, 1);
            if (!buf) return NOMEM(err, errlen);
            snprintf(buf, 24, "%zu", i);
            g[i].id = buf;
        } else {
            wh(wf, "%s.id", w);
            if ((rc = sp_label_value(idv, wf, m, &g[i].id, err, errlen))) return rc;
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
            wh(wf, "%s.tasks", w);
            if (!json_is_array(tasks) || json_array_size(tasks) == 0) {
                snprintf(err, errlen, "%s: expected a non-empty array", wf);
                return -EINVAL;
            }
            size_t nt = json_array_size(tasks);
            if (total + nt > SP_MAX_TASKS) {
                snprintf(err, errlen, "%s: more than %d tasks in all gangs", wf, SP_MAX_TASKS);
                return -EINVAL;
            }
            if (!(t = sp_alloc(m, nt, sizeof *t))) return NOMEM(err, errlen);
            size_t j;
            json_t *tv;
            json_array_foreach(tasks, j, tv) {
                char wt[SP_WHERE];
                wh(wt, "%s[%zu]", wf, j);
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
            if (!(t = sp_alloc(m, (size_t)count, sizeof *t))) return NOMEM(err, errlen);
            wh(wf, "%s.task", w);
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
        json_array_append_new(fl, json_pack("{s:s,s:I,s:s,s:o}", "gang", g[i].id, "task",
                                            (json_int_t)gr->fail.task, "reason", msg, "rejected", rej));
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
    struct sp_mem m = {0};
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
        if (sp_list(opt, "options", true, err, errlen) || sj_known_keys(opt, okeys, "options", err, errlen) ||
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
    sp_free_all(&m);
    return out;
}
