/* Strategic merge patch for built-in kinds.
 *
 * Kubernetes reads each list's patchStrategy/patchMergeKey from the Go struct
 * tags (OpenAPI x-kubernetes-patch-*). We approximate that with a static table
 * keyed by the list's field name and, where a name means different things,
 * the name of the field holding the object ("ports" of a container merges by
 * containerPort, "ports" of a Service spec by port). Lists not in the table are
 * replaced, as Kubernetes replaces lists that have no patch strategy
 * (tolerations, taints, args, command, ...).
 *
 * Merged list order follows the Kubernetes design "Preserve Order in
 * Strategic Merge Patch": items of the live list that the patch does not
 * mention come first, in live order; then the items the patch mentions, in
 * the order of $setElementOrder/<list> if given, else of the patch list.
 *
 * A list merge costs expected O(n + m) for lists of n and m elements: merge
 * keys, $setElementOrder entries, $retainKeys and the values of scalar lists
 * are looked up in an index (patch_keyidx.h), never by scanning a list, and
 * deletions compact a list in one pass. The budget (patch_int.h) hears of
 * every element and member added or removed, and pays for each index
 * operation as it is done. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"
#include "patch_keyidx.h"
#include "patch_int.h"

#define SMP_DELETED 1 /* smp_map: the patch asked to delete this map */

#define DIR_PATCH "$patch"
#define DIR_RETAIN "$retainKeys"
#define DIR_ORDER "$setElementOrder/"
#define DIR_DELPRIM "$deleteFromPrimitiveList/"

static const struct smp_field {
    const char *field, *parent; /* parent NULL: any */
    enum patch_list_strategy strategy;
    const char *key;
} smp_fields[] = {
    {"containers", NULL, PATCH_LIST_MERGE_KEY, "name"},
    {"initContainers", NULL, PATCH_LIST_MERGE_KEY, "name"},
    {"ephemeralContainers", NULL, PATCH_LIST_MERGE_KEY, "name"},
    {"env", NULL, PATCH_LIST_MERGE_KEY, "name"},
    {"volumes", NULL, PATCH_LIST_MERGE_KEY, "name"},
    {"imagePullSecrets", NULL, PATCH_LIST_MERGE_KEY, "name"},
    {"volumeMounts", NULL, PATCH_LIST_MERGE_KEY, "mountPath"},
    {"volumeDevices", NULL, PATCH_LIST_MERGE_KEY, "devicePath"},
    {"ports", "containers", PATCH_LIST_MERGE_KEY, "containerPort"},
    {"ports", "initContainers", PATCH_LIST_MERGE_KEY, "containerPort"},
    {"ports", "ephemeralContainers", PATCH_LIST_MERGE_KEY, "containerPort"},
    {"ports", "spec", PATCH_LIST_MERGE_KEY, "port"}, /* Service */
    {"conditions", NULL, PATCH_LIST_MERGE_KEY, "type"},
    {"addresses", "status", PATCH_LIST_MERGE_KEY, "type"}, /* Node */
    {"hostAliases", NULL, PATCH_LIST_MERGE_KEY, "ip"},
    {"topologySpreadConstraints", NULL, PATCH_LIST_MERGE_KEY, "topologyKey"},
    {"resourceClaims", NULL, PATCH_LIST_MERGE_KEY, "name"},
    {"schedulingGates", NULL, PATCH_LIST_MERGE_KEY, "name"},
    {"podIPs", NULL, PATCH_LIST_MERGE_KEY, "ip"},
    {"hostIPs", NULL, PATCH_LIST_MERGE_KEY, "ip"},
    {"ownerReferences", "metadata", PATCH_LIST_MERGE_KEY, "uid"},
    {"finalizers", "metadata", PATCH_LIST_MERGE_SCALAR, NULL},
    {"podCIDRs", "spec", PATCH_LIST_MERGE_SCALAR, NULL}, /* Node */
};

enum patch_list_strategy patch_list_strategy(const char *parent, const char *field, const char **merge_key) {
    if (merge_key) *merge_key = NULL;
    for (size_t i = 0; field && i < sizeof smp_fields / sizeof smp_fields[0]; i++) {
        const struct smp_field *f = &smp_fields[i];
        if (strcmp(f->field, field) || (f->parent && (!parent || strcmp(f->parent, parent)))) continue;
        if (merge_key) *merge_key = f->key;
        return f->strategy;
    }
    return PATCH_LIST_REPLACE;
}

struct smp {
    char *err;
    size_t errlen;
    struct patch_budget b;
    bool track; /* count what is added and removed (off while a detached value is built) */
};

/* Size changes of the document, when tracked. */
static void smp_shrink(struct smp *s, struct patch_size sz) {
    if (s->track) pb_shrink(&s->b, sz);
}
static int smp_grow(struct smp *s, struct patch_size sz, int at) {
    return s->track ? pb_grow(&s->b, sz, at) : 0;
}

/* patch_value_equal, paid for: PATCH_STEPS_CMP, and a step per
 * CMP_BYTES_PER_STEP bytes of strings. -E2BIG (message set) when the budget
 * is spent, else 1 or 0. */
static int smp_equal(struct smp *s, const json_t *a, const json_t *b) {
    size_t steps = PATCH_STEPS_CMP;
    if (json_is_string(a) && json_is_string(b)) steps += json_string_length(a) / CMP_BYTES_PER_STEP;
    int rc = pb_charge(&s->b, steps);
    return rc ? rc : patch_value_equal(a, b);
}

static bool is_directive(const char *k) {
    return !strcmp(k, DIR_PATCH) || !strcmp(k, DIR_RETAIN) || !strncmp(k, DIR_ORDER, strlen(DIR_ORDER)) ||
           !strncmp(k, DIR_DELPRIM, strlen(DIR_DELPRIM));
}

static int smp_map(json_t *dst, const json_t *patch, const char *parent, int depth, struct smp *s);

static int smp_oom(struct smp *s) { return core_fail(s->err, s->errlen, -ENOMEM, "out of memory"); }

/* Kubernetes' normalizeElementOrder: the merged list dst is split into the
 * items named by `by` (the $setElementOrder list, else the patch list) and
 * server-only items. Named items are ordered as in `by`; server-only items
 * keep their order; the two are then interleaved by their positions in the
 * live list `live` (mergeSortedSlice): a server-only item goes before the next
 * named item only when both were in the live list and it came first there.
 * An item's place in `by` and in `live` is its identity's first, found in an
 * index of each. */
static int smp_reorder(json_t *dst, const json_t *by, const json_t *live, const char *key, struct smp *s) {
    size_t n = json_array_size(dst), nby = json_array_size(by);
    if (n < 2) return 0;
    json_t **named = malloc(n * sizeof *named), **server = malloc(n * sizeof *server);
    long *rank = malloc(n * sizeof *rank), *at = NULL;
    size_t *start = calloc(nby + 1, sizeof *start), nn = 0, ns = 0, placed = 0;
    struct keyidx byx = {0}, livex = {0};
    int rc = named && server && rank && start ? keyidx_init(&byx, by, key, nby, &s->b) : smp_oom(s);
    if (rc == 0) rc = keyidx_add_all(&byx, nby);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        json_t *e = json_array_get(dst, i);
        rank[i] = keyidx_find(&byx, keyidx_id(e, key));
        if (KEYIDX_FAILED(rank[i])) {
            rc = (int)rank[i];
        } else if (rank[i] < 0) {
            server[ns++] = json_incref(e);
        } else {
            start[rank[i] + 1]++;
            nn++;
        }
    }
    if (rc == 0) { /* named items by rank, equal ranks in dst order: a counting sort */
        for (size_t r = 0; r < nby; r++) start[r + 1] += start[r];
        for (size_t i = 0; i < n; i++) {
            if (rank[i] < 0) continue;
            named[start[rank[i]]++] = json_incref(json_array_get(dst, i));
            placed++;
        }
    }
    if (rc == 0 && ns && nn) {
        at = malloc(n * sizeof *at);
        rc = at ? keyidx_init(&livex, live, key, json_array_size(live), &s->b) : smp_oom(s);
        if (rc == 0) rc = keyidx_add_all(&livex, json_array_size(live));
    }
    /* each item's place in the live list: the server-only items' first, then the named items' */
    for (size_t x = 0; rc == 0 && at && x < ns + nn; x++) {
        json_t *e = x < ns ? server[x] : named[x - ns];
        at[x] = keyidx_find(&livex, keyidx_id(e, key));
        if (KEYIDX_FAILED(at[x])) rc = (int)at[x];
    }
    size_t i = 0, j = 0, k = 0;
    while (rc == 0 && k < n) {
        json_t *pick;
        if (i < ns && j < nn) {
            long li = at[i], ri = at[ns + j];
            pick = (li >= 0 && ri >= 0 && li < ri) ? server[i++] : named[j++];
        } else {
            pick = i < ns ? server[i++] : named[j++];
        }
        if (json_array_set(dst, k++, pick)) rc = smp_oom(s);
    }
    keyidx_free(&livex);
    keyidx_free(&byx);
    free(at);
    for (i = 0; i < ns; i++) json_decref(server[i]);
    for (j = 0; j < placed; j++) json_decref(named[j]);
    free(named);
    free(server);
    free(rank);
    free(start);
    return rc;
}

/* validatePatchWithSetOrderList: the patch list's items (directives aside)
 * must appear in the $setElementOrder list, in the same relative order. */
static int smp_check_order(const json_t *patch, const json_t *order, const char *field, const char *key,
                           struct smp *s) {
    size_t pi = 0, oi = 0, np = json_array_size(patch), no = json_array_size(order);
    if (np == 0 || no == 0) return 0;
    while (pi < np && oi < no) {
        const json_t *e = json_array_get(patch, pi);
        if (key && json_object_get(e, DIR_PATCH)) {
            pi++;
            continue;
        }
        int eq = smp_equal(s, keyidx_id(e, key), keyidx_id(json_array_get(order, oi), key));
        if (eq < 0) return eq;
        pi += eq;
        oi++;
    }
    while (key && pi < np && json_object_get(json_array_get(patch, pi), DIR_PATCH)) pi++;
    if (pi < np)
        return core_fail(s->err, s->errlen, -EINVAL,
                         "the order in patch list \"%s\" doesn't match %s%s list", field, DIR_ORDER, field);
    return 0;
}

/* Removes from dst (an array in the document) the elements whose identity
 * (by key) is in index drop, in one pass. */
static int smp_drop(json_t *dst, struct keyidx *drop, const char *key, struct smp *s) {
    size_t n = json_array_size(dst), w = 0;
    int rc = 0;
    bool *keep = malloc((n ? n : 1) * sizeof *keep);
    if (!keep) return smp_oom(s);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        long at = keyidx_find(drop, keyidx_id(json_array_get(dst, i), key));
        if (KEYIDX_FAILED(at)) rc = (int)at;
        keep[i] = at < 0;
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        json_t *e = json_array_get(dst, i);
        if (!keep[i]) {
            smp_shrink(s, pb_element(e));
            continue;
        }
        if (w != i) json_array_set(dst, w, e); /* the slot's value was dropped, or moved before */
        w++;
    }
    while (rc == 0 && json_array_size(dst) > w) json_array_remove(dst, json_array_size(dst) - 1);
    free(keep);
    return rc;
}

/* Removes from dst every element equal to one in vals (scalar lists). */
static int smp_delete_values(json_t *dst, const json_t *vals, struct smp *s) {
    if (!json_array_size(dst) || !json_array_size(vals)) return 0;
    struct keyidx drop;
    int rc = keyidx_init(&drop, vals, NULL, json_array_size(vals), &s->b);
    if (rc) return rc;
    if ((rc = keyidx_add_all(&drop, json_array_size(vals))) == 0) rc = smp_drop(dst, &drop, NULL, s);
    keyidx_free(&drop);
    return rc;
}

/* Appends v (a new reference; NULL: a copy that failed) to list and adds it
 * to idx, list's index. */
static int smp_append(json_t *list, json_t *v, struct keyidx *idx, struct smp *s) {
    if (json_array_append_new(list, v)) return smp_oom(s);
    return keyidx_add(idx, json_array_size(list) - 1);
}

static int smp_list_scalars(json_t *dst, const json_t *patch, const json_t *order, const char *field, int depth,
                            struct smp *s) {
    size_t i;
    json_t *e;
    json_array_foreach(patch, i, e) {
        if (json_is_object(e) || json_is_array(e))
            return core_fail(s->err, s->errlen, -EINVAL, "list \"%s\": cannot merge lists without merge key", field);
    }
    int rc;
    if (order && (rc = smp_check_order(patch, order, field, NULL, s))) return rc;
    /* union: dst's values first, each once, then the patch's new ones */
    json_t *live = json_copy(dst), *res = json_array();
    struct keyidx seen = {0};
    size_t hint = json_array_size(dst) + json_array_size(patch);
    rc = live && res ? keyidx_init(&seen, res, NULL, hint, &s->b) : smp_oom(s);
    json_array_foreach(dst, i, e) {
        if (rc) break;
        long at = keyidx_find(&seen, e);
        if (KEYIDX_FAILED(at)) rc = (int)at;
        else if (at >= 0) smp_shrink(s, pb_element(e));
        else rc = smp_append(res, json_incref(e), &seen, s);
    }
    json_array_foreach(patch, i, e) {
        if (rc) break;
        long at = keyidx_find(&seen, e);
        if (KEYIDX_FAILED(at)) rc = (int)at;
        else if (at < 0 && (rc = smp_grow(s, pb_element(e), depth + 1)) == 0)
            rc = smp_append(res, json_deep_copy(e), &seen, s);
    }
    if (rc == 0 && (json_array_clear(dst) || json_array_extend(dst, res))) rc = smp_oom(s);
    if (rc == 0) rc = smp_reorder(dst, order ? order : patch, live, NULL, s);
    keyidx_free(&seen);
    json_decref(res);
    json_decref(live);
    return rc;
}

static int smp_list_maps(json_t *dst, const json_t *patch, const json_t *order, const char *field,
                         const char *key, int depth, struct smp *s) {
    size_t i, np = json_array_size(patch);
    json_t *e;
    bool replace = false;
    int rc;
    if (order && (rc = smp_check_order(patch, order, field, key, s))) return rc;
    json_t *live = json_copy(dst), *named = json_array(); /* named: patch elements other than directives */
    struct keyidx drop = {0}, idx = {0};
    rc = live && named ? 0 : smp_oom(s);
    json_array_foreach(patch, i, e) { /* special elements first, as Kubernetes does */
        if (rc) break;
        const json_t *d = json_object_get(e, DIR_PATCH);
        if (!d) continue;
        const char *dir = json_string_value(d);
        if (dir && !strcmp(dir, "delete")) {
            if (!json_object_get(e, key))
                rc = core_fail(s->err, s->errlen, -EINVAL,
                               "list \"%s\": map does not contain declared merge key: %s", field, key);
            else if (drop.tab || (rc = keyidx_init(&drop, patch, key, np, &s->b)) == 0)
                rc = keyidx_add(&drop, i); /* deleted below, all in one pass */
        } else if (dir && !strcmp(dir, "replace")) {
            replace = true;
        } else if (dir && !strcmp(dir, "merge")) {
            rc = core_fail(s->err, s->errlen, -EINVAL,
                           "list \"%s\": merging lists cannot yet be specified in the patch", field);
        } else {
            rc = core_fail(s->err, s->errlen, -EINVAL,
                           "list \"%s\": unknown patch type: %s", field, dir ? dir : "(not a string)");
        }
    }
    if (rc == 0 && drop.tab) rc = smp_drop(dst, &drop, key, s);
    if (rc == 0 && replace) {
        smp_shrink(s, pb_inside(dst));
        json_array_clear(dst);
    }
    if (rc == 0 && (rc = keyidx_init(&idx, dst, key, json_array_size(dst) + np, &s->b)) == 0)
        rc = keyidx_add_all(&idx, json_array_size(dst));
    json_array_foreach(patch, i, e) {
        if (rc) break;
        if (json_object_get(e, DIR_PATCH)) continue;
        const json_t *kv = json_object_get(e, key);
        if (!kv) {
            rc = core_fail(s->err, s->errlen, -EINVAL,
                           "list \"%s\": map does not contain declared merge key: %s", field, key);
            break;
        }
        long at = keyidx_find(&idx, kv);
        if (KEYIDX_FAILED(at)) {
            rc = (int)at;
            break;
        }
        bool added = at < 0;
        if (added) {
            json_t *slot = json_object();
            if (!slot || json_array_append_new(dst, slot)) {
                rc = smp_oom(s);
                break;
            }
            if ((rc = smp_grow(s, pb_element(slot), depth + 1))) break;
            at = (long)json_array_size(dst) - 1;
        }
        if ((rc = smp_map(json_array_get(dst, (size_t)at), e, field, depth + 1, s)) != 0) break;
        /* the merge copies a string, number or boolean merge key as it is; a
         * null one is deleted and an object one loses its nulls and
         * directives, so the element is indexed under its key as it is now */
        if (added || !(json_is_string(kv) || json_is_number(kv) || json_is_boolean(kv)))
            rc = keyidx_add(&idx, (size_t)at);
        if (rc == 0 && json_array_append(named, e)) rc = smp_oom(s);
    }
    if (rc == 0) rc = smp_reorder(dst, order ? order : named, replace ? dst : live, key, s);
    keyidx_free(&idx);
    keyidx_free(&drop);
    json_decref(named);
    json_decref(live);
    return rc;
}

/* Merges list patch into dst (owned array) for list `field` whose holder is
 * the value of `parent`; order is $setElementOrder/<field> or NULL. */
static int smp_list(json_t *dst, const json_t *patch, const json_t *order, const char *field, const char *parent,
                    int depth, struct smp *s) {
    if (depth >= PATCH_MAX_DEPTH)
        return core_fail(s->err, s->errlen, -E2BIG, "patch is nested deeper than %d levels", PATCH_MAX_DEPTH);
    size_t max = s->b.lim.max_list;
    if (json_array_size(dst) > max || json_array_size(patch) > max || json_array_size(order) > max)
        return core_fail(s->err, s->errlen, -E2BIG, "list \"%s\" has more than %zu elements", field, max);
    if (order && !json_is_array(order))
        return core_fail(s->err, s->errlen, -EINVAL,
                         "invalid patch format of setElementOrder list: %s%s must be a list", DIR_ORDER, field);
    const char *key;
    enum patch_list_strategy st = patch_list_strategy(parent, field, &key);
    size_t nobj = 0, i;
    json_t *e;
    json_array_foreach(dst, i, e) nobj += json_is_object(e);
    json_array_foreach(patch, i, e) nobj += json_is_object(e);
    if (st == PATCH_LIST_MERGE_KEY && nobj > 0) {
        if (nobj != json_array_size(dst) + json_array_size(patch))
            return core_fail(s->err, s->errlen, -EINVAL, "list \"%s\": list element types are not identical", field);
        json_array_foreach(order, i, e) {
            if (!json_object_get(e, key))
                return core_fail(s->err, s->errlen, -EINVAL,
                                 "%s%s: map does not contain declared merge key: %s", DIR_ORDER, field, key);
        }
        return smp_list_maps(dst, patch, order, field, key, depth, s);
    }
    if (nobj > 0)
        return core_fail(s->err, s->errlen, -EINVAL, "list \"%s\": cannot merge lists without merge key", field);
    return smp_list_scalars(dst, patch, order, field, depth, s);
}

/* The value for a key absent from dst (or of another type there): the patch
 * value merged into an empty container, so directives and nulls inside it are
 * applied rather than stored. Returns 0 with *out (NULL: store nothing).
 * Not counted in the document's size: the caller counts it whole. */
static int smp_fresh_value(const json_t *pv, const json_t *order, const char *field, const char *parent,
                           int depth, struct smp *s, json_t **out) {
    *out = NULL;
    int rc = 0;
    if (json_is_object(pv)) {
        json_t *m = json_object();
        if (!m) return core_fail(s->err, s->errlen, -ENOMEM, "out of memory");
        rc = smp_map(m, pv, field, depth + 1, s);
        if (rc == 0) *out = m;
        else json_decref(m);
        return rc == SMP_DELETED ? 0 : rc;
    }
    if (json_is_array(pv) && patch_list_strategy(parent, field, NULL) != PATCH_LIST_REPLACE) {
        json_t *a = json_array();
        if (!a) return core_fail(s->err, s->errlen, -ENOMEM, "out of memory");
        if ((rc = smp_list(a, pv, order, field, parent, depth + 1, s)) != 0) json_decref(a);
        else *out = a;
        return rc;
    }
    if (!(*out = json_deep_copy(pv))) return core_fail(s->err, s->errlen, -ENOMEM, "out of memory");
    return 0;
}

static int smp_fresh(const json_t *pv, const json_t *order, const char *field, const char *parent, int depth,
                     struct smp *s, json_t **out) {
    bool track = s->track;
    s->track = false;
    int rc = smp_fresh_value(pv, order, field, parent, depth, s, out);
    s->track = track;
    return rc;
}

/* Deletes member k of dst (an object in the document), if there. */
static void smp_del(json_t *dst, const char *k, struct smp *s) {
    json_t *v = json_object_get(dst, k);
    if (!v) return;
    smp_shrink(s, pb_member(k, v));
    json_object_del(dst, k);
}

/* applyRetainKeysDirective: every field the patch sets must be listed; the
 * fields of dst not listed are cleared before the merge. The list is looked
 * up in an index of it. */
static int smp_retain(json_t *dst, const json_t *keys, const json_t *patch, struct smp *s) {
    size_t i;
    json_t *e;
    if (!json_is_array(keys))
        return core_fail(s->err, s->errlen, -EINVAL, "invalid patch format of retainKeys: not a list");
    json_array_foreach(keys, i, e) {
        if (!json_is_string(e))
            return core_fail(s->err, s->errlen, -EINVAL,
                             "invalid patch format of retainKeys: not a list of strings");
    }
    struct keyidx kept;
    int rc = keyidx_init(&kept, keys, NULL, json_array_size(keys), &s->b);
    if (rc) return rc;
    rc = keyidx_add_all(&kept, json_array_size(keys));
    const char *k;
    json_t *v;
    void *tmp;
    json_object_foreach((json_t *)patch, k, v) {
        if (rc) break;
        if (json_is_null(v) || is_directive(k)) continue;
        long at = keyidx_find_text(&kept, k);
        if (KEYIDX_FAILED(at)) rc = (int)at;
        else if (at < 0)
            rc = core_fail(s->err, s->errlen, -EINVAL,
                           "invalid patch format of retainKeys: field \"%s\" is not retained", k);
    }
    json_object_foreach_safe(dst, tmp, k, v) {
        if (rc) break;
        long at = keyidx_find_text(&kept, k);
        if (KEYIDX_FAILED(at)) rc = (int)at;
        else if (at < 0) smp_del(dst, k, s);
    }
    keyidx_free(&kept);
    return rc;
}

/* Merges patch (an object) into dst (an owned object) in place; parent names
 * the field whose value dst is. Returns 0, SMP_DELETED or a negative code. */
static int smp_map(json_t *dst, const json_t *patch, const char *parent, int depth, struct smp *s) {
    if (depth >= PATCH_MAX_DEPTH)
        return core_fail(s->err, s->errlen, -E2BIG, "patch is nested deeper than %d levels", PATCH_MAX_DEPTH);
    const json_t *d = json_object_get(patch, DIR_PATCH);
    if (d) {
        const char *dir = json_string_value(d);
        if (dir && !strcmp(dir, "delete")) return SMP_DELETED;
        if (!dir || strcmp(dir, "replace"))
            return core_fail(s->err, s->errlen, -EINVAL,
                             "unknown patch type: %s in map \"%s\"", dir ? dir : "(not a string)", parent);
        smp_shrink(s, pb_inside(dst));
        json_object_clear(dst);
    }
    const json_t *rk = json_object_get(patch, DIR_RETAIN);
    int rc;
    if (rk && (rc = smp_retain(dst, rk, patch, s))) return rc;
    const char *k;
    json_t *pv;
    json_object_foreach((json_t *)patch, k, pv) {
        if (strncmp(k, DIR_DELPRIM, strlen(DIR_DELPRIM))) continue;
        if (!json_is_array(pv)) return core_fail(s->err, s->errlen, -EINVAL, "%s must be a list", k);
        json_t *cur = json_object_get(dst, k + strlen(DIR_DELPRIM));
        if (json_is_array(cur) && (rc = smp_delete_values(cur, pv, s))) return rc;
    }
    json_object_foreach((json_t *)patch, k, pv) {
        if (is_directive(k)) continue;
        if (json_is_null(pv)) {
            smp_del(dst, k, s);
            continue;
        }
        char okey[sizeof DIR_ORDER + 256];
        const json_t *order = NULL;
        if (strlen(k) < 256) {
            snprintf(okey, sizeof okey, "%s%s", DIR_ORDER, k);
            order = json_object_get(patch, okey);
        }
        json_t *cur = json_object_get(dst, k);
        if (json_is_object(cur) && json_is_object(pv)) {
            rc = smp_map(cur, pv, k, depth + 1, s);
            if (rc == SMP_DELETED) {
                smp_del(dst, k, s);
                rc = 0;
            }
        } else if (json_is_array(cur) && json_is_array(pv) &&
                   patch_list_strategy(parent, k, NULL) != PATCH_LIST_REPLACE) {
            rc = smp_list(cur, pv, order, k, parent, depth + 1, s);
        } else {
            json_t *v;
            rc = smp_fresh(pv, order, k, parent, depth, s, &v);
            if (rc == 0) smp_del(dst, k, s);
            if (rc == 0 && v && (rc = smp_grow(s, pb_member(k, v), depth + 1))) json_decref(v);
            else if (rc == 0 && v && json_object_set_new(dst, k, v))
                rc = core_fail(s->err, s->errlen, -ENOMEM, "out of memory");
        }
        if (rc) return rc;
    }
    json_object_foreach((json_t *)patch, k, pv) { /* $setElementOrder without a patch list: reorder only */
        if (strncmp(k, DIR_ORDER, strlen(DIR_ORDER))) continue;
        const char *field = k + strlen(DIR_ORDER);
        json_t *cur = json_object_get(dst, field);
        if (json_is_array(json_object_get(patch, field)) || !json_is_array(cur) ||
            patch_list_strategy(parent, field, NULL) == PATCH_LIST_REPLACE)
            continue;
        json_t *empty = json_array();
        rc = empty ? smp_list(cur, empty, pv, field, parent, depth + 1, s)
                   : core_fail(s->err, s->errlen, -ENOMEM, "out of memory");
        json_decref(empty);
        if (rc) return rc;
    }
    return 0;
}

int patch_strategic(const json_t *target, const json_t *patch, json_t **out, char *err, size_t errlen) {
    return patch_apply(PATCH_STRATEGIC, target, patch, NULL, out, err, errlen);
}

int patch_strategic_lim(const json_t *target, const json_t *patch, const struct patch_limits *lim, json_t **out,
                        char *err, size_t errlen, struct patch_size *tracked, size_t *work) {
    *out = NULL;
    struct smp s = {.err = err, .errlen = errlen, .track = true};
    pb_init(&s.b, lim, "strategic merge patch", err, errlen);
    if (!json_is_object(patch))
        return core_fail(s.err, s.errlen, -EINVAL, "strategic merge patch must be a JSON object");
    json_t *dst = json_is_object(target) ? json_deep_copy(target) : json_object();
    if (!dst) return core_fail(s.err, s.errlen, -ENOMEM, "out of memory");
    int rc = pb_start(&s.b, dst, NULL);
    if (rc == 0) rc = smp_map(dst, patch, "", 0, &s);
    if (rc == SMP_DELETED) {
        smp_shrink(&s, pb_inside(dst));
        json_object_clear(dst);
        rc = 0;
    }
    if (rc) {
        json_decref(dst);
        return rc;
    }
    *out = dst;
    if (tracked) *tracked = (struct patch_size){s.b.bytes, s.b.nodes, 0};
    if (work) *work = s.b.work;
    return 0;
}
