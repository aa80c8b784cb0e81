/* Kubernetes scheduling fields (labels, taints, tolerations, node affinity)
 * parsed into the core's placement structs. Shared by peloton-sim's input
 * format (strict: unknown keys are errors) and Pod objects (lenient: fields
 * the core does not use are ignored). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "k8sparse.h"
#include "simjson.h"

int kp_known_keys(const struct kp_mem *m, json_t *obj, const char *const *allowed, const char *where, char *err,
                  size_t errlen) {
    return m->lenient ? 0 : sj_known_keys(obj, allowed, where, err, errlen);
}

void *kp_alloc(struct kp_mem *m, size_t count, size_t size) {
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

void kp_free_all(struct kp_mem *m) {
    for (size_t i = 0; i < m->n; i++) free(m->p[i]);
    free(m->p);
}

/* Builds a field path ("gangs[3].tasks[0]") into a KP_WHERE buffer; long
 * paths are cut, which only shortens a message. */
void kp_where(char *out, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, KP_WHERE, fmt, ap);
    va_end(ap);
}


int kp_list(json_t *v, const char *where, bool object, char *err, size_t errlen) {
    if (object ? !json_is_object(v) : !json_is_array(v)) {
        snprintf(err, errlen, "%s: expected %s", where, object ? "an object" : "an array");
        return -EINVAL;
    }
    size_t n = object ? json_object_size(v) : json_array_size(v);
    if (n > KP_MAX_LIST) {
        snprintf(err, errlen, "%s: more than %d entries", where, KP_MAX_LIST);
        return -EINVAL;
    }
    return 0;
}

/* A label value: a string, or a number/bool written as text (YAML may turn
 * `zone: 1` into a number). */
int kp_label_value(json_t *v, const char *where, struct kp_mem *m, const char **out, char *err,
                          size_t errlen) {
    if (json_is_string(v)) { *out = json_string_value(v); return 0; }
    char *buf;
    if (json_is_integer(v) || json_is_boolean(v)) {
        if (!(buf = kp_alloc(m, 32, 1))) return KP_NOMEM(err, errlen);
        if (json_is_integer(v)) snprintf(buf, 32, "%lld", (long long)json_integer_value(v));
        else snprintf(buf, 32, "%s", json_is_true(v) ? "true" : "false");
        *out = buf;
        return 0;
    }
    snprintf(err, errlen, "%s: expected a string", where);
    return -EINVAL;
}

int kp_kv_map(json_t *obj, const char *where, struct kp_mem *m, struct host_kv **out, uint32_t *n,
                     char *err, size_t errlen) {
    *out = NULL;
    *n = 0;
    if (!obj || json_is_null(obj)) return 0;
    int rc = kp_list(obj, where, true, err, errlen);
    if (rc) return rc;
    struct host_kv *kv = kp_alloc(m, json_object_size(obj), sizeof *kv);
    if (!kv) return KP_NOMEM(err, errlen);
    const char *key;
    json_t *val;
    uint32_t i = 0;
    json_object_foreach(obj, key, val) {
        char w[KP_WHERE];
        kp_where(w, "%s.%s", where, key);
        if (!key[0]) {
            snprintf(err, errlen, "%s: empty key", where);
            return -EINVAL;
        }
        kv[i].key = key;
        if ((rc = kp_label_value(val, w, m, &kv[i].value, err, errlen))) return rc;
        i++;
    }
    *out = kv;
    *n = i;
    return 0;
}

int kp_effect(json_t *obj, const char *where, bool optional, int *out, char *err, size_t errlen) {
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

int kp_taints(json_t *arr, const char *where, struct kp_mem *m, struct host_taint_spec **out,
                     uint32_t *n, char *err, size_t errlen) {
    static const char *const keys[] = {"key", "value", "effect", "timeAdded", NULL};
    *out = NULL;
    *n = 0;
    if (!arr || json_is_null(arr)) return 0;
    int rc = kp_list(arr, where, false, err, errlen);
    if (rc) return rc;
    struct host_taint_spec *t = kp_alloc(m, json_array_size(arr), sizeof *t);
    if (!t) return KP_NOMEM(err, errlen);
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) {
        char w[KP_WHERE];
        int eff;
        kp_where(w, "%s[%zu]", where, i);
        if (!json_is_object(v)) {
            snprintf(err, errlen, "%s: expected an object", w);
            return -EINVAL;
        }
        if ((rc = kp_known_keys(m, v, keys, w, err, errlen)) || (rc = sj_str(v, "key", true, w, &t[i].key, err, errlen)) ||
            (rc = sj_str(v, "value", false, w, &t[i].value, err, errlen)) ||
            (rc = kp_effect(v, w, false, &eff, err, errlen)))
            return rc;
        t[i].effect = (enum taint_effect)eff;
    }
    *out = t;
    *n = (uint32_t)json_array_size(arr);
    return 0;
}

int kp_tolerations(json_t *arr, const char *where, struct kp_mem *m, struct place_toleration **out,
                          uint32_t *n, char *err, size_t errlen) {
    static const char *const keys[] = {"key", "operator", "value", "effect", "tolerationSeconds", NULL};
    *out = NULL;
    *n = 0;
    if (!arr || json_is_null(arr)) return 0;
    int rc = kp_list(arr, where, false, err, errlen);
    if (rc) return rc;
    struct place_toleration *t = kp_alloc(m, json_array_size(arr), sizeof *t);
    if (!t) return KP_NOMEM(err, errlen);
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) {
        char w[KP_WHERE];
        const char *op = "Equal";
        kp_where(w, "%s[%zu]", where, i);
        if (!json_is_object(v)) {
            snprintf(err, errlen, "%s: expected an object", w);
            return -EINVAL;
        }
        if ((rc = kp_known_keys(m, v, keys, w, err, errlen)) || (rc = sj_str(v, "key", false, w, &t[i].key, err, errlen)) ||
            (rc = sj_str(v, "operator", false, w, &op, err, errlen)) ||
            (rc = sj_str(v, "value", false, w, &t[i].value, err, errlen)) ||
            (rc = kp_effect(v, w, true, &t[i].effect, err, errlen)))
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

int kp_expr(json_t *v, const char *w, struct kp_mem *m, struct place_expr *x, char *err, size_t errlen) {
    static const char *const keys[] = {"key", "operator", "values", NULL};
    static const char *const ops[] = {"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"};
    const char *op = NULL;
    int rc;
    if (!json_is_object(v)) {
        snprintf(err, errlen, "%s: expected an object", w);
        return -EINVAL;
    }
    if ((rc = kp_known_keys(m, v, keys, w, err, errlen)) || (rc = sj_str(v, "key", true, w, &x->key, err, errlen)) ||
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
    char wv[KP_WHERE];
    kp_where(wv, "%s.values", w);
    size_t nv = 0;
    if (vals && !json_is_null(vals)) {
        if ((rc = kp_list(vals, wv, false, err, errlen))) return rc;
        nv = json_array_size(vals);
    }
    const char **arr = kp_alloc(m, nv, sizeof *arr);
    if (!arr) return KP_NOMEM(err, errlen);
    for (size_t i = 0; i < nv; i++) {
        char wi[KP_WHERE];
        kp_where(wi, "%s[%zu]", wv, i);
        if ((rc = kp_label_value(json_array_get(vals, i), wi, m, &arr[i], err, errlen))) return rc;
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

int kp_affinity(json_t *aff, const char *where, struct kp_mem *m, struct place_term **out, uint32_t *n,
                       char *err, size_t errlen) {
    static const char *const akeys[] = {"nodeAffinity", NULL};
    static const char *const nkeys[] = {"requiredDuringSchedulingIgnoredDuringExecution",
                                        "preferredDuringSchedulingIgnoredDuringExecution", NULL};
    static const char *const rkeys[] = {"nodeSelectorTerms", NULL};
    static const char *const tkeys[] = {"matchExpressions", NULL};
    char w[KP_WHERE];
    int rc;
    *out = NULL;
    *n = 0;
    if (!aff || json_is_null(aff)) return 0;
    if ((rc = kp_list(aff, where, true, err, errlen)) || (rc = kp_known_keys(m, aff, akeys, where, err, errlen)))
        return rc;
    json_t *na = json_object_get(aff, "nodeAffinity");
    if (!na || json_is_null(na)) return 0;
    kp_where(w, "%s.nodeAffinity", where);
    if ((rc = kp_list(na, w, true, err, errlen)) || (rc = kp_known_keys(m, na, nkeys, w, err, errlen))) return rc;
    json_t *req = json_object_get(na, "requiredDuringSchedulingIgnoredDuringExecution");
    if (!req || json_is_null(req)) return 0;
    kp_where(w, "%s.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution", where);
    if ((rc = kp_list(req, w, true, err, errlen)) || (rc = kp_known_keys(m, req, rkeys, w, err, errlen))) return rc;
    json_t *terms = json_object_get(req, "nodeSelectorTerms");
    char wt[KP_WHERE];
    kp_where(wt, "%s.nodeSelectorTerms", w);
    if (!terms || (rc = kp_list(terms, wt, false, err, errlen))) {
        if (!terms) snprintf(err, errlen, "%s: required", wt);
        return -EINVAL;
    }
    if (json_array_size(terms) == 0) {
        snprintf(err, errlen, "%s: needs at least one term", wt);
        return -EINVAL;
    }
    struct place_term *t = kp_alloc(m, json_array_size(terms), sizeof *t);
    if (!t) return KP_NOMEM(err, errlen);
    size_t i;
    json_t *tv;
    json_array_foreach(terms, i, tv) {
        char wi[KP_WHERE], we[KP_WHERE];
        kp_where(wi, "%s[%zu]", wt, i);
        if ((rc = kp_list(tv, wi, true, err, errlen)) || (rc = kp_known_keys(m, tv, tkeys, wi, err, errlen))) return rc;
        json_t *ex = json_object_get(tv, "matchExpressions");
        if (!ex || json_is_null(ex)) continue; /* an empty term matches nothing */
        kp_where(we, "%s.matchExpressions", wi);
        if ((rc = kp_list(ex, we, false, err, errlen))) return rc;
        struct place_expr *x = kp_alloc(m, json_array_size(ex), sizeof *x);
        if (!x) return KP_NOMEM(err, errlen);
        size_t j;
        json_t *xv;
        json_array_foreach(ex, j, xv) {
            char wj[KP_WHERE];
            kp_where(wj, "%s[%zu]", we, j);
            if ((rc = kp_expr(xv, wj, m, &x[j], err, errlen))) return rc;
        }
        t[i].exprs = x;
        t[i].nexprs = (uint32_t)json_array_size(ex);
    }
    *out = t;
    *n = (uint32_t)json_array_size(terms);
    return 0;
}
