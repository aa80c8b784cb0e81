#include "simpools.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simjson.h"

static int load_share(json_t *v, const char *where, struct respool_config *c, char *err, size_t errlen) {
    if (!v || json_is_null(v)) return 0;
    for (int k = 0; k < RES_NKINDS; k++) {
        json_t *x = json_is_object(v) ? json_object_get(v, res_kind_name((enum res_kind)k)) : v;
        if (!x || json_is_null(x)) continue;
        if (!json_is_number(x) || !(json_number_value(x) >= 0) || json_number_value(x) > 1e6) {
            snprintf(err, errlen, "%s.share%s%s: expected a number in [0, 1000000]", where,
                     json_is_object(v) ? "." : "", json_is_object(v) ? res_kind_name((enum res_kind)k) : "");
            return -EINVAL;
        }
        c->res[k].share = (int64_t)llround(json_number_value(x) * RESPOOL_SHARE_ONE);
    }
    if (json_is_object(v)) {
        const char *key;
        json_t *x;
        json_object_foreach(v, key, x) if (res_kind_parse(key) < 0) {
            snprintf(err, errlen, "%s.share: unknown resource kind \"%s\"", where, key);
            return -EINVAL;
        }
    }
    return 0;
}

static int load_static(json_t *v, const char *where, struct respool_config *c, char *err, size_t errlen) {
    if (!v || json_is_null(v)) return 0;
    if (json_is_boolean(v)) {
        for (int k = 0; k < RES_NKINDS; k++) c->res[k].is_static = json_is_true(v);
        return 0;
    }
    if (!json_is_array(v)) {
        snprintf(err, errlen, "%s.static: expected a list of kinds or a boolean", where);
        return -EINVAL;
    }
    size_t i;
    json_t *x;
    json_array_foreach(v, i, x) {
        int k = json_is_string(x) ? res_kind_parse(json_string_value(x)) : -1;
        if (k < 0) {
            snprintf(err, errlen, "%s.static[%zu]: expected one of cpu, memory, disk, gpu", where, i);
            return -EINVAL;
        }
        c->res[k].is_static = true;
    }
    return 0;
}

static int load_pct(json_t *obj, const char *key, const char *where, int64_t *out, char *err, size_t errlen) {
    double d = (double)*out / RESPOOL_PCT_ONE;
    /* range is checked by the tree's own rule, so pass anything finite through */
    int rc = sj_opt_double(obj, key, -1e9, 1e9, where, &d, err, errlen);
    if (!rc) *out = (int64_t)llround(d * RESPOOL_PCT_ONE);
    return rc;
}

static int depth_of(const char *path) {
    int d = 0;
    for (; *path; path++) d += *path == '/';
    return d;
}

struct pending_pool {
    size_t input_index;
    int depth;
};

static int cmp_depth(const void *a, const void *b) {
    const struct pending_pool *x = a, *y = b;
    if (x->depth != y->depth) return x->depth - y->depth;
    return x->input_index < y->input_index ? -1 : x->input_index > y->input_index;
}

int sim_load_pools(json_t *in, struct respool_tree **out, struct sim_cluster *cl, char *err, size_t errlen) {
    *out = NULL;
    if (!json_is_object(in)) {
        snprintf(err, errlen, "input: expected an object with capacity and pools");
        return -EINVAL;
    }
    struct resvec zero = resvec_zero();
    int rc;
    if ((rc = sj_resvec(json_object_get(in, "capacity"), &zero, "capacity", &cl->capacity, err, errlen))) return rc;
    json_t *slack = json_object_get(in, "slackCpu");
    cl->slack_given = slack && !json_is_null(slack);
    if (cl->slack_given && (rc = sj_quantity(slack, RES_CPU, "slackCpu", &cl->slack_cpu, err, errlen))) return rc;

    json_t *pools = json_object_get(in, "pools");
    if (!json_is_array(pools)) {
        snprintf(err, errlen, "pools: expected a list");
        return -EINVAL;
    }
    size_t n = json_array_size(pools);
    struct pending_pool *order = calloc(n ? n : 1, sizeof *order);
    struct respool_tree *t = respool_tree_new();
    if (!order || !t) {
        free(order);
        respool_tree_free(t);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    static const char *const known[] = {"path", "reservation", "limit", "share", "static", "controllerLimit",
                                        "slackLimit", "demand", "allocation", "policy", "name", NULL};
    for (size_t i = 0; i < n; i++) {
        char where[64];
        snprintf(where, sizeof where, "pools[%zu]", i);
        json_t *p = json_array_get(pools, i);
        const char *path = NULL;
        if (!json_is_object(p)) { snprintf(err, errlen, "%s: expected an object", where); rc = -EINVAL; goto fail; }
        if ((rc = sj_known_keys(p, known, where, err, errlen))) goto fail;
        if ((rc = sj_str(p, "path", true, where, &path, err, errlen))) goto fail;
        order[i] = (struct pending_pool){i, depth_of(path)};
    }
    /* Parents before children, whatever the listing order. */
    qsort(order, n, sizeof *order, cmp_depth);
    for (size_t o = 0; o < n; o++) {
        size_t i = order[o].input_index;
        char where[64];
        snprintf(where, sizeof where, "pools[%zu]", i);
        json_t *p = json_array_get(pools, i);
        const char *path = json_string_value(json_object_get(p, "path"));
        struct respool_config c;
        respool_config_default(&c);
        struct resvec res, lim, unl = resvec_unlimited(), demand, alloc;
        char w2[96];
        snprintf(w2, sizeof w2, "%s.reservation", where);
        if ((rc = sj_resvec(json_object_get(p, "reservation"), &zero, w2, &res, err, errlen))) goto fail;
        snprintf(w2, sizeof w2, "%s.limit", where);
        if ((rc = sj_resvec(json_object_get(p, "limit"), &unl, w2, &lim, err, errlen))) goto fail;
        snprintf(w2, sizeof w2, "%s.demand", where);
        if ((rc = sj_resvec(json_object_get(p, "demand"), &zero, w2, &demand, err, errlen))) goto fail;
        snprintf(w2, sizeof w2, "%s.allocation", where);
        if ((rc = sj_resvec(json_object_get(p, "allocation"), &zero, w2, &alloc, err, errlen))) goto fail;
        for (int k = 0; k < RES_NKINDS; k++) {
            c.res[k].reservation = res.v[k];
            c.res[k].limit = lim.v[k];
        }
        if ((rc = load_share(json_object_get(p, "share"), where, &c, err, errlen))) goto fail;
        if ((rc = load_static(json_object_get(p, "static"), where, &c, err, errlen))) goto fail;
        if ((rc = load_pct(p, "controllerLimit", where, &c.controller_limit_pct, err, errlen))) goto fail;
        if ((rc = load_pct(p, "slackLimit", where, &c.slack_limit_pct, err, errlen))) goto fail;
        const char *policy = NULL;
        if ((rc = sj_str(p, "policy", false, where, &policy, err, errlen))) goto fail;
        if (policy && strcmp(policy, "PriorityFIFO") != 0) {
            snprintf(err, errlen, "%s.policy: \"%.32s\" is not supported (PriorityFIFO)", where, policy);
            rc = -EINVAL;
            goto fail;
        }
        struct respool *pool;
        if ((rc = respool_create(t, path, &c, &pool, err, errlen))) goto fail;
        pool->pending.c[UC_PREEMPT] = demand;
        pool->alloc.c[UC_PREEMPT] = alloc;
    }
    if (!cl->slack_given) {
        respool_rollup(t);
        cl->slack_cpu = res_max(0, cl->capacity.v[RES_CPU] - usage_nonslack(&respool_root(t)->alloc).v[RES_CPU]);
    }
    free(order);
    *out = t;
    return 0;
fail:
    /* the loader only set usage on pools; clear it so the tree frees cleanly */
    free(order);
    respool_tree_free(t);
    return rc;
}

json_t *sim_pools_out(struct respool_tree *t) {
    json_t *arr = json_array();
    for (struct respool *p = respool_next_preorder(respool_root(t)); p; p = respool_next_preorder(p)) {
        json_t *o = json_object();
        json_object_set_new(o, "path", json_string(p->path));
        json_object_set_new(o, "entitlement", sj_resvec_out(p->entitlement));
        json_object_set_new(o, "demand", sj_resvec_out(p->demand));
        json_object_set_new(o, "allocation", sj_resvec_out(resvec_add(usage_nonslack(&p->alloc), p->alloc.c[UC_REVOCABLE])));
        json_object_set_new(o, "slackEntitlement", sj_resvec_out(p->slack_entitlement));
        json_array_append_new(arr, o);
    }
    return arr;
}
