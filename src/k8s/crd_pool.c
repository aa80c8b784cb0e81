#include "crd_pool.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admit.h"
#include "crd_common.h"
#include "errmsg.h"
#include "quantity.h"

#define PCT_MAX_PERCENT 100.0
#define SHARE_MAX_WEIGHT 1000000.0
#define MSG_MAX 512

#define pool_fail(err, errlen, code, name, ...) core_fail_about(err, errlen, code, CRD_POOL_RESOURCE, name, __VA_ARGS__)

/* Re-labels a core message "pool /org/team1: ..." as the Kubernetes object's
 * "resourcepools.peloton.io \"team1\": ..."; other core messages keep their
 * text behind the prefix. */
static int wrap_core(char *err, size_t errlen, int code, const char *name, const char *path, const char *msg) {
    char head[RESPOOL_PATH_MAX + 16];
    snprintf(head, sizeof head, "pool %s: ", path ? path : "");
    size_t hl = strlen(head);
    if (path && strncmp(msg, head, hl) == 0) msg += hl;
    return pool_fail(err, errlen, code, name, "%s", msg);
}

static const char *obj_name(const json_t *cr) {
    return json_string_value(json_object_get(json_object_get(cr, "metadata"), "name"));
}

/* spec.parent normalised: NULL, "" and "root" all mean top level (""). */
static const char *norm_parent(const char *p) {
    if (!p || strcmp(p, "root") == 0) return "";
    return p;
}

static const char *raw_parent(const json_t *cr) {
    return norm_parent(json_string_value(json_object_get(json_object_get(cr, "spec"), "parent")));
}

#define known_keys(obj, allowed, name, where, err, errlen) \
    crd_known_keys(obj, allowed, CRD_POOL_RESOURCE, name, where, err, errlen)

/* A quantity: a Kubernetes quantity string or a non-negative integer (whole
 * units: cores for cpu and gpu, bytes for memory and disk). */
static int decode_quantity(const json_t *v, enum res_kind k, const char *name, const char *where, int64_t *out,
                           char *err, size_t errlen) {
    char buf[32], qerr[160];
    const char *s;
    if (json_is_integer(v)) {
        if (json_integer_value(v) < 0)
            return pool_fail(err, errlen, -EINVAL, name, "%s: %" JSON_INTEGER_FORMAT " is negative", where,
                             json_integer_value(v));
        snprintf(buf, sizeof buf, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        s = buf;
    } else if (json_is_string(v)) {
        s = json_string_value(v);
    } else {
        return pool_fail(err, errlen, -EINVAL, name, "%s: expected a quantity (a string such as \"500m\" or \"4Gi\", or an integer)",
                         where);
    }
    int rc = quantity_parse_kind(k, s, out, qerr, sizeof qerr);
    if (rc) return pool_fail(err, errlen, rc, name, "%s: %s", where, qerr);
    return 0;
}

static int decode_resource(const json_t *item, size_t i, const char *name, struct respool_config *cfg,
                           bool *seen, char *err, size_t errlen) {
    static const char *const allowed[] = {"kind", "reservation", "limit", "share", "type", NULL};
    char where[64];
    snprintf(where, sizeof where, "spec.resources[%zu]", i);
    if (!json_is_object(item)) return pool_fail(err, errlen, -EINVAL, name, "%s: expected an object", where);
    int rc = known_keys(item, allowed, name, where, err, errlen);
    if (rc) return rc;
    const char *kn = json_string_value(json_object_get(item, "kind"));
    int k = kn ? res_kind_parse(kn) : -1;
    if (k < 0)
        return pool_fail(err, errlen, -EINVAL, name, "%s.kind: %s%.32s%s is not one of cpu, memory, disk, gpu", where,
                         kn ? "\"" : "", kn ? kn : "missing", kn ? "\"" : "");
    if (seen[k]) return pool_fail(err, errlen, -EINVAL, name, "%s.kind: %s is listed twice", where, kn);
    seen[k] = true;
    struct respool_kind_cfg *r = &cfg->res[k];
    char w2[96];
    const json_t *v;
    if ((v = json_object_get(item, "reservation")) && !json_is_null(v)) {
        snprintf(w2, sizeof w2, "%s.reservation (%s)", where, kn);
        if ((rc = decode_quantity(v, (enum res_kind)k, name, w2, &r->reservation, err, errlen))) return rc;
    }
    if ((v = json_object_get(item, "limit")) && !json_is_null(v)) {
        snprintf(w2, sizeof w2, "%s.limit (%s)", where, kn);
        if ((rc = decode_quantity(v, (enum res_kind)k, name, w2, &r->limit, err, errlen))) return rc;
    }
    if ((v = json_object_get(item, "share")) && !json_is_null(v)) {
        double d = json_is_number(v) ? json_number_value(v) : -1;
        if (!json_is_number(v) || !(d >= 0) || d > SHARE_MAX_WEIGHT)
            return pool_fail(err, errlen, -EINVAL, name, "%s.share (%s): expected a number in [0, %.0f]", where, kn,
                             SHARE_MAX_WEIGHT);
        r->share = (int64_t)llround(d * RESPOOL_SHARE_ONE);
    }
    if ((v = json_object_get(item, "type")) && !json_is_null(v)) {
        const char *t = json_string_value(v);
        if (t && strcmp(t, "STATIC") == 0) r->is_static = true;
        else if (t && strcmp(t, "ELASTIC") == 0) r->is_static = false;
        else
            return pool_fail(err, errlen, -EINVAL, name, "%s.type (%s): expected ELASTIC or STATIC", where, kn);
    }
    return 0;
}

static int decode_pct(const json_t *spec, const char *key, const char *name, int64_t *out, char *err, size_t errlen) {
    const json_t *o = json_object_get(spec, key);
    if (!o || json_is_null(o)) return 0;
    if (!json_is_object(o)) return pool_fail(err, errlen, -EINVAL, name, "spec.%s: expected an object {maxPercent}", key);
    static const char *const allowed[] = {"maxPercent", NULL};
    char where[48];
    snprintf(where, sizeof where, "spec.%s", key);
    int rc = known_keys(o, allowed, name, where, err, errlen);
    if (rc) return rc;
    const json_t *v = json_object_get(o, "maxPercent");
    if (!v || json_is_null(v)) return 0;
    double d = json_is_number(v) ? json_number_value(v) : -1;
    if (!json_is_number(v) || !(d >= 0) || d > PCT_MAX_PERCENT)
        return pool_fail(err, errlen, -EINVAL, name, "spec.%s.maxPercent: expected a number in [0, 100]", key);
    *out = (int64_t)llround(d * RESPOOL_PCT_ONE);
    return 0;
}

/* Decodes cr; *name and *parent point into cr (borrowed). */
static int decode_borrowed(const json_t *cr, const char **name, const char **parent, struct respool_config *cfg,
                           char *err, size_t errlen) {
    if (!json_is_object(cr)) return core_fail(err, errlen, -EINVAL, CRD_POOL_RESOURCE ": expected an object");
    const char *n = obj_name(cr);
    if (!n || !*n) return core_fail(err, errlen, -EINVAL, CRD_POOL_RESOURCE ": metadata.name is required");
    if (strcmp(n, "root") == 0)
        return pool_fail(err, errlen, -EINVAL, n, "metadata.name: \"root\" is reserved for the root pool");
    *name = n;
    respool_config_default(cfg);
    const json_t *spec = json_object_get(cr, "spec");
    *parent = "";
    if (!spec || json_is_null(spec)) return 0;
    if (!json_is_object(spec)) return pool_fail(err, errlen, -EINVAL, n, "spec: expected an object");
    static const char *const allowed[] = {"parent", "policy", "owningTeam", "ldapGroups", "description",
                                          "resources", "controllerLimit", "slackLimit", NULL};
    int rc = known_keys(spec, allowed, n, "spec", err, errlen);
    if (rc) return rc;
    const json_t *v = json_object_get(spec, "parent");
    if (v && !json_is_null(v) && !json_is_string(v))
        return pool_fail(err, errlen, -EINVAL, n, "spec.parent: expected the parent pool's name");
    *parent = norm_parent(json_string_value(v));
    if (strcmp(*parent, n) == 0) return pool_fail(err, errlen, -EINVAL, n, "spec.parent: a pool cannot be its own parent");
    if ((v = json_object_get(spec, "policy")) && !json_is_null(v) &&
        !(json_is_string(v) && strcmp(json_string_value(v), "PriorityFIFO") == 0))
        return pool_fail(err, errlen, -EINVAL, n, "spec.policy: expected PriorityFIFO");
    if ((v = json_object_get(spec, "resources")) && !json_is_null(v)) {
        if (!json_is_array(v)) return pool_fail(err, errlen, -EINVAL, n, "spec.resources: expected a list");
        bool seen[RES_NKINDS] = {false};
        for (size_t i = 0; i < json_array_size(v); i++)
            if ((rc = decode_resource(json_array_get(v, i), i, n, cfg, seen, err, errlen))) return rc;
    }
    if ((rc = decode_pct(spec, "controllerLimit", n, &cfg->controller_limit_pct, err, errlen))) return rc;
    if ((rc = decode_pct(spec, "slackLimit", n, &cfg->slack_limit_pct, err, errlen))) return rc;
    return 0;
}

int crd_pool_decode(const json_t *cr, char *name, size_t namelen, char *parent, size_t parentlen,
                    struct respool_config *cfg, char *err, size_t errlen) {
    const char *n, *p;
    int rc = decode_borrowed(cr, &n, &p, cfg, err, errlen);
    if (rc) return rc;
    if (strlen(n) >= namelen || strlen(p) >= parentlen)
        return pool_fail(err, errlen, -ENAMETOOLONG, n, "name too long for the caller's buffer");
    strcpy(name, n);
    strcpy(parent, p);
    return 0;
}

/* ---- the tree ---- */

struct node {
    const char *name, *parent; /* borrowed from the object */
    bool deleting;             /* metadata.deletionTimestamp */
    long parent_idx;           /* -1: top level */
    int depth;                 /* 1 for a top-level pool */
    int mark;                  /* 0 new, 1 on the current walk, 2 resolved */
    char *path;
    struct respool_config cfg;
};

struct forest {
    struct node *nodes;
    size_t n;
    size_t *by_name; /* node indices sorted by name */
    size_t *order;   /* parents first */
};

static void forest_free(struct forest *f) {
    for (size_t i = 0; f->nodes && i < f->n; i++) free(f->nodes[i].path);
    free(f->nodes);
    free(f->by_name);
    free(f->order);
    memset(f, 0, sizeof *f);
}

static int cmp_name(const void *a, const void *b, void *ctx) {
    const struct node *nodes = ctx;
    return strcmp(nodes[*(const size_t *)a].name, nodes[*(const size_t *)b].name);
}

static int cmp_depth(const void *a, const void *b, void *ctx) {
    const struct node *nodes = ctx;
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    int dx = nodes[x].depth, dy = nodes[y].depth;
    if (dx != dy) return dx - dy;
    return x < y ? -1 : x > y;
}

static long find_name(const struct forest *f, const char *name) {
    size_t lo = 0, hi = f->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(f->nodes[f->by_name[mid]].name, name);
        if (c == 0) return (long)f->by_name[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

static int cycle_fail(const struct forest *f, size_t start, char *err, size_t errlen) {
    char msg[MSG_MAX];
    size_t len = 0;
    size_t j = start;
    int steps = 0;
    do {
        int w = snprintf(msg + len, sizeof msg - len, "%s\"%.63s\"", steps ? " -> " : "", f->nodes[j].name);
        if (w < 0 || (size_t)w >= sizeof msg - len) break;
        len += (size_t)w;
        j = (size_t)f->nodes[j].parent_idx;
    } while (j != start && ++steps < 8);
    if (j == start && len < sizeof msg) snprintf(msg + len, sizeof msg - len, " -> \"%.63s\"", f->nodes[start].name);
    else if (len < sizeof msg) snprintf(msg + len, sizeof msg - len, " -> ...");
    return pool_fail(err, errlen, -ELOOP, f->nodes[start].name, "spec.parent forms a cycle: %s", msg);
}

/* Decodes, indexes and resolves every pool's path; f->order gets parents first. */
static int forest_load(struct forest *f, const json_t *const *pools, size_t n, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    if (n > CRD_POOL_MAX) return core_fail(err, errlen, -E2BIG, CRD_POOL_RESOURCE ": more than %d pools", CRD_POOL_MAX);
    f->nodes = calloc(n ? n : 1, sizeof *f->nodes);
    f->by_name = calloc(n ? n : 1, sizeof *f->by_name);
    f->order = calloc(n ? n : 1, sizeof *f->order);
    size_t *stack = calloc(n ? n : 1, sizeof *stack);
    int rc = 0;
    if (!f->nodes || !f->by_name || !f->order || !stack) {
        rc = core_fail(err, errlen, -ENOMEM, CRD_POOL_RESOURCE ": out of memory");
        goto out;
    }
    f->n = n;
    for (size_t i = 0; i < n; i++) {
        struct node *d = &f->nodes[i];
        if ((rc = decode_borrowed(pools[i], &d->name, &d->parent, &d->cfg, err, errlen))) goto out;
        d->deleting = crd_pool_deleting(pools[i]);
        f->by_name[i] = i;
    }
    qsort_r(f->by_name, n, sizeof *f->by_name, cmp_name, f->nodes);
    for (size_t i = 1; i < n; i++)
        if (strcmp(f->nodes[f->by_name[i]].name, f->nodes[f->by_name[i - 1]].name) == 0) {
            rc = pool_fail(err, errlen, -EEXIST, f->nodes[f->by_name[i]].name, "listed twice (names are unique)");
            goto out;
        }
    for (size_t i = 0; i < n; i++) {
        struct node *d = &f->nodes[i];
        d->parent_idx = -1;
        if (!*d->parent) continue;
        d->parent_idx = find_name(f, d->parent);
        if (d->parent_idx < 0) {
            rc = pool_fail(err, errlen, -ENOENT, d->name, "parent \"%.253s\" does not exist", d->parent);
            goto out;
        }
    }
    for (size_t i = 0; i < n; i++) {
        size_t len = 0;
        long j = (long)i;
        while (j >= 0 && f->nodes[j].mark == 0) {
            f->nodes[j].mark = 1;
            stack[len++] = (size_t)j;
            j = f->nodes[j].parent_idx;
        }
        if (j >= 0 && f->nodes[j].mark == 1) { rc = cycle_fail(f, (size_t)j, err, errlen); goto out; }
        while (len > 0) {
            struct node *d = &f->nodes[stack[--len]];
            const struct node *p = d->parent_idx >= 0 ? &f->nodes[d->parent_idx] : NULL;
            d->depth = p ? p->depth + 1 : 1;
            d->mark = 2;
            if (d->depth > RESPOOL_DEPTH_MAX) {
                rc = pool_fail(err, errlen, -EINVAL, d->name, "deeper than %d levels of pools", RESPOOL_DEPTH_MAX);
                goto out;
            }
            size_t pl = p ? strlen(p->path) : 0, nl = strlen(d->name);
            d->path = malloc(pl + nl + 2);
            if (!d->path) { rc = core_fail(err, errlen, -ENOMEM, CRD_POOL_RESOURCE ": out of memory"); goto out; }
            if (p) memcpy(d->path, p->path, pl);
            d->path[pl] = '/';
            memcpy(d->path + pl + 1, d->name, nl + 1);
        }
    }
    for (size_t i = 0; i < n; i++) f->order[i] = i;
    qsort_r(f->order, n, sizeof *f->order, cmp_depth, f->nodes);
out:
    free(stack);
    if (rc) forest_free(f);
    return rc;
}

static int forest_build(struct forest *f, struct respool_tree **out, char *err, size_t errlen) {
    struct respool_tree *t = respool_tree_new();
    if (!t) return core_fail(err, errlen, -ENOMEM, CRD_POOL_RESOURCE ": out of memory");
    char msg[MSG_MAX];
    for (size_t o = 0; o < f->n; o++) {
        const struct node *d = &f->nodes[f->order[o]];
        int rc = respool_create(t, d->path, &d->cfg, NULL, msg, sizeof msg);
        if (rc) {
            respool_tree_free(t);
            return wrap_core(err, errlen, rc, d->name, d->path, msg);
        }
    }
    /* marked after every pool is in: a child stored before its parent was
     * marked stays (only new children are refused) */
    for (size_t i = 0; i < f->n; i++)
        if (f->nodes[i].deleting) respool_lookup(t, f->nodes[i].path)->deleting = true;
    *out = t;
    return 0;
}

int crd_pool_build_tree(const json_t *const *pools, size_t n, struct respool_tree **out, char *err,
                        size_t errlen) {
    *out = NULL;
    struct forest f;
    int rc = forest_load(&f, pools, n, err, errlen);
    if (rc) return rc;
    rc = forest_build(&f, out, err, errlen);
    forest_free(&f);
    return rc;
}

struct respool *crd_pool_find(const struct respool_tree *t, const char *name) { return respool_by_name(t, name); }

/* The stored pools other than those called name, plus extra (may be NULL). */
static const json_t **others_plus(const json_t *const *existing, size_t n, const char *name, const json_t *extra,
                                  size_t *out_n) {
    const json_t **v = malloc((n + 1) * sizeof *v);
    if (!v) return NULL;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const char *en = obj_name(existing[i]);
        if (en && strcmp(en, name) == 0) continue;
        v[m++] = existing[i];
    }
    if (extra) v[m++] = extra;
    *out_n = m;
    return v;
}

int crd_pool_check_change(const json_t *const *existing, size_t n, const json_t *candidate, const json_t *old,
                          char *err, size_t errlen) {
    const char *name, *parent;
    struct respool_config cfg;
    int rc = decode_borrowed(candidate, &name, &parent, &cfg, err, errlen);
    if (rc) return rc;
    if (old) {
        const char *oname = obj_name(old);
        if (!oname || strcmp(oname, name) != 0)
            return pool_fail(err, errlen, -EINVAL, name, "metadata.name: the stored object is called \"%.253s\"",
                             oname ? oname : "");
        const char *oparent = raw_parent(old);
        if (strcmp(oparent, parent) != 0)
            return pool_fail(err, errlen, -EINVAL, name, "spec.parent is immutable (was \"%.253s\", now \"%.253s\")",
                             *oparent ? oparent : "root", *parent ? parent : "root");
    } else {
        for (size_t i = 0; i < n; i++) {
            const char *en = obj_name(existing[i]);
            if (en && strcmp(en, name) == 0) return pool_fail(err, errlen, -EEXIST, name, "already exists");
        }
        for (size_t i = 0; *parent && i < n; i++) {
            const char *en = obj_name(existing[i]);
            if (en && strcmp(en, parent) == 0 && crd_pool_deleting(existing[i]))
                return pool_fail(err, errlen, -EPERM, name,
                                 "parent \"%.253s\" is being deleted; it accepts no new child pools", parent);
        }
    }

    size_t m;
    const json_t **stored = others_plus(existing, n, name, old, &m);
    if (!stored) return core_fail(err, errlen, -ENOMEM, CRD_POOL_RESOURCE ": out of memory");
    struct respool_tree *t = NULL;
    char msg[MSG_MAX];
    rc = crd_pool_build_tree(stored, m, &t, NULL, 0);
    if (rc == 0) {
        /* The stored tree is sound: apply the one change, so the core's
         * message is about the candidate. */
        struct respool *p = NULL;
        if (*parent && !(p = crd_pool_find(t, parent))) {
            rc = pool_fail(err, errlen, -ENOENT, name, "parent \"%.253s\" does not exist", parent);
        } else if (old) {
            struct respool *self = crd_pool_find(t, name);
            rc = respool_update(t, self->path, NULL, &cfg, msg, sizeof msg);
            if (rc) rc = wrap_core(err, errlen, rc, name, self->path, msg);
        } else {
            char path[RESPOOL_PATH_MAX + RESPOOL_NAME_MAX + 2];
            snprintf(path, sizeof path, "%s/%s", p ? p->path : "", name);
            rc = respool_create(t, path, &cfg, NULL, msg, sizeof msg);
            if (rc) rc = wrap_core(err, errlen, rc, name, path, msg);
        }
        respool_tree_free(t);
    } else {
        /* The stored tree breaks a rule (or lacks a parent that the
         * candidate provides): allow the change only if the result is sound. */
        if (old) m--; /* drop old: it is last */
        stored[m++] = candidate;
        rc = crd_pool_build_tree(stored, m, &t, err, errlen);
        respool_tree_free(t);
    }
    free(stored);
    return rc;
}

int crd_pool_check_delete(const json_t *const *existing, size_t n, const char *name, char *err, size_t errlen) {
    char kids[256];
    size_t len = 0, count = 0;
    kids[0] = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(raw_parent(existing[i]), name ? name : "") != 0) continue;
        const char *cn = obj_name(existing[i]);
        if (!cn || (name && strcmp(cn, name) == 0)) continue;
        if (count++ < 4 && len < sizeof kids) {
            int w = snprintf(kids + len, sizeof kids - len, "%s\"%.40s\"", len ? ", " : "", cn);
            if (w > 0) len += (size_t)w;
        }
    }
    if (count)
        return pool_fail(err, errlen, -ENOTEMPTY, name, "has %zu child pool%s (%s%s); delete them first", count,
                         count == 1 ? "" : "s", kids, count > 4 ? ", ..." : "");
    return 0;
}

bool crd_pool_deleting(const json_t *cr) {
    return json_object_get(json_object_get(cr, "metadata"), "deletionTimestamp") != NULL;
}

bool crd_pool_has_finalizer(const json_t *cr) {
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(json_object_get(cr, "metadata"), "finalizers"), i, f) {
        if (json_is_string(f) && strcmp(json_string_value(f), CRD_POOL_FINALIZER) == 0) return true;
    }
    return false;
}

/* ---- status ---- */

static json_t *qstr(enum res_kind k, int64_t v) {
    char buf[48];
    quantity_format(k, v < 0 ? 0 : v, buf, sizeof buf);
    return json_string(buf);
}

/* Rounded for the printer columns; the exact quantity is beside it in status. */
static json_t *qshow(enum res_kind k, int64_t v) {
    char buf[48];
    quantity_format_display(k, v < 0 ? 0 : v, buf, sizeof buf);
    return json_string(buf);
}

static json_t *resvec_json(struct resvec r) {
    json_t *o = json_object();
    if (!o) return NULL;
    for (int k = 0; k < RES_NKINDS; k++)
        json_object_set_new(o, res_kind_name((enum res_kind)k), qstr((enum res_kind)k, r.v[k]));
    return o;
}

json_t *crd_pool_status(const struct respool *p) {
    struct resvec alloc = resvec_add(usage_nonslack(&p->alloc), p->alloc.c[UC_REVOCABLE]);
    json_t *st = json_object(), *sum = json_object();
    if (!st || !sum) { json_decref(st); json_decref(sum); return NULL; }
    int bad = 0;
    bad |= json_object_set_new(st, "path", json_string(p->path));
    bad |= json_object_set_new(st, "entitlement", resvec_json(p->entitlement));
    bad |= json_object_set_new(st, "slackEntitlement", resvec_json(p->slack_entitlement));
    bad |= json_object_set_new(st, "allocation", resvec_json(alloc));
    bad |= json_object_set_new(st, "demand", resvec_json(p->demand));
    for (int k = 0; k < RES_NKINDS; k++) {
        enum res_kind kind = (enum res_kind)k;
        json_t *o = json_object();
        bad |= json_object_set_new(o, "reservation", qshow(kind, p->cfg.res[k].reservation));
        bad |= json_object_set_new(o, "limit", qshow(kind, respool_effective_limit(p, kind)));
        bad |= json_object_set_new(o, "entitlement", qshow(kind, p->entitlement.v[k]));
        bad |= json_object_set_new(o, "allocation", qshow(kind, alloc.v[k]));
        bad |= json_object_set_new(o, "demand", qshow(kind, p->demand.v[k]));
        bad |= json_object_set_new(sum, res_kind_name(kind), o);
    }
    bad |= json_object_set_new(st, "summary", sum);
    if (bad) { json_decref(st); return NULL; }
    return st;
}

/* ---- status: gangs and conditions ---- */

const struct gang *crd_pool_held_head(const struct respool *leaf) {
    if (!respool_is_leaf(leaf)) return NULL;
    for (int q = 0; q < ADMIT_NQUEUES; q++) {
        const struct gang *h = admit_head(leaf, (enum admit_queue)q);
        if (h && h->why.check != ADMIT_CHECK_NONE) return h;
    }
    return NULL;
}

static const char *held_reason(enum admit_check c) {
    switch (c) {
    case ADMIT_CHECK_ENTITLEMENT: return "AtEntitlement";
    case ADMIT_CHECK_SLACK: return "AtSlackEntitlement";
    case ADMIT_CHECK_CONTROLLER: return "AtControllerLimit";
    case ADMIT_CHECK_RESERVATION: return "ReservationExhausted";
    case ADMIT_CHECK_DELETING: return "Terminating";
    default: return "Waiting";
    }
}

/* One condition; its lastTransitionTime is the one in prev (the conditions
 * last written) when the same type had the same status there, else now. */
static int add_condition(json_t *arr, const json_t *prev, const char *type, bool status, const char *reason,
                         const char *message, const char *now) {
    const char *st = status ? "True" : "False", *since = now;
    size_t i;
    json_t *c;
    json_array_foreach(prev, i, c) {
        const char *t = json_string_value(json_object_get(c, "type")),
                   *s = json_string_value(json_object_get(c, "status")),
                   *l = json_string_value(json_object_get(c, "lastTransitionTime"));
        if (t && s && l && strcmp(t, type) == 0 && strcmp(s, st) == 0) since = l;
    }
    return json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:s, s:s}", "type", type, "status", st, "reason",
                                                 reason, "message", message, "lastTransitionTime", since));
}

int crd_pool_status_gangs(json_t *st, const struct respool *p, struct crd_pool_gangs g,
                          const json_t *prev_conditions, const char *now) {
    json_t *conds = json_array();
    if (!st || !conds) { json_decref(conds); return -ENOMEM; }
    int bad = json_object_set_new(st, "gangs", json_pack("{s:I, s:I}", "pending", (json_int_t)g.pending, "running",
                                                         (json_int_t)g.running));
    char msg[800], line[700];
    /* Admitting: whether the head of a queue in the subtree is held, by which rule */
    const struct gang *h = g.held;
    if (h) {
        admit_why_format(h, line, sizeof line);
        snprintf(msg, sizeof msg, "%s; %zu gang%s", line, g.pending, g.pending == 1 ? " waits" : "s wait");
        bad |= add_condition(conds, prev_conditions, "Admitting", false, held_reason(h->why.check), msg, now);
    } else {
        snprintf(msg, sizeof msg, "%zu gang%s, none is held by an admission rule", g.pending,
                 g.pending == 1 ? " waits" : "s wait");
        bad |= add_condition(conds, prev_conditions, "Admitting", true, g.pending ? "Admitting" : "NothingWaiting",
                             msg, now);
    }
    /* Borrowing: allocation above reservation in some kind */
    struct resvec alloc = resvec_add(usage_nonslack(&p->alloc), p->alloc.c[UC_REVOCABLE]);
    size_t len = 0;
    msg[0] = 0;
    for (int k = 0; k < RES_NKINDS; k++) {
        enum res_kind kind = (enum res_kind)k;
        int64_t res = p->cfg.res[k].reservation;
        if (alloc.v[k] <= res || res == RES_UNLIMITED) continue;
        char a[48], r[48], d[48];
        quantity_format(kind, alloc.v[k], a, sizeof a);
        quantity_format(kind, res, r, sizeof r);
        quantity_format(kind, alloc.v[k] - res, d, sizeof d);
        int w = snprintf(msg + len, sizeof msg - len, "%s%s: allocation %s exceeds reservation %s by %s",
                         len ? "; " : "", res_kind_name(kind), a, r, d);
        if (w > 0 && (size_t)w < sizeof msg - len) len += (size_t)w;
    }
    if (len) {
        snprintf(msg + len, sizeof msg - len, "; preemption may take it back");
        bad |= add_condition(conds, prev_conditions, "Borrowing", true, "AboveReservation", msg, now);
    } else {
        bad |= add_condition(conds, prev_conditions, "Borrowing", false, "WithinReservation",
                             "allocation is within the reservation in every kind", now);
    }
    if (p->deleting) {
        snprintf(msg, sizeof msg, "marked for deletion; it goes once it has no child pools (now %d) and holds no work",
                 p->nchildren);
        bad |= add_condition(conds, prev_conditions, "Terminating", true, "MarkedForDeletion", msg, now);
    }
    bad |= json_object_set_new(st, "conditions", conds);
    return bad ? -ENOMEM : 0;
}
