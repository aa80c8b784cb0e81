/* kube-scheduler extender wire format: request decoders and reply encoders.
 * Decoders read a fixed shape a few levels deep and never recurse into the
 * embedded Kubernetes objects except to bound their depth; names are copied,
 * objects are kept as references. A jansson object serves as the name index
 * (name -> position) for duplicate detection and O(1) membership checks.
 * The fast path for NodeNames requests is in extender_fast.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsontype.h"
#include "errmsg.h"
#include "extender.h"
#include "extender_int.h"

/* ---- helpers ---- */

/* Go's encoding/json field match: equal under Unicode simple case folding.
 * Field names are ASCII letters; the only non-ASCII members of their folding
 * orbits are U+212A KELVIN SIGN (k) and U+017F LATIN SMALL LETTER LONG S (s). */
bool key_is(const char *key, const char *name) {
    const char *k = key;
    for (const char *n = name; *n; n++) {
        char c = *n >= 'A' && *n <= 'Z' ? (char)(*n - 'A' + 'a') : *n;
        char kc = *k >= 'A' && *k <= 'Z' ? (char)(*k - 'A' + 'a') : *k;
        if (kc == c && kc) {
            k++;
        } else if (c == 'k' && strncmp(k, "\xe2\x84\xaa", 3) == 0) {
            k += 3;
        } else if (c == 's' && strncmp(k, "\xc5\xbf", 2) == 0) {
            k += 2;
        } else {
            return false;
        }
    }
    return *k == '\0';
}

/* Looks up the n fields of a Go struct in obj. vals[i] is NULL when the key
 * is absent or null. Two keys folding to one field are refused: Go would let
 * the later one win, and jansson does not promise an order to pick by. */
static int get_fields(const json_t *obj, const char *type, const char *const *names, size_t n, json_t **vals,
                      char *err, size_t errlen) {
    bool seen[8] = {false};
    for (size_t i = 0; i < n; i++) vals[i] = NULL;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)obj, k, v) {
        for (size_t i = 0; i < n; i++) {
            if (!key_is(k, names[i])) continue;
            if (seen[i])
                return core_fail(err, errlen, -EINVAL, "%s: more than one key for field %s (keys match case-insensitively)",
                                 type, names[i]);
            seen[i] = true;
            vals[i] = json_is_null(v) ? NULL : v;
            break;
        }
    }
    return 0;
}

/* True when v nests no deeper than left levels of objects and arrays.
 * The recursion stops at left == 0, so it is bounded by EXTENDER_MAX_DEPTH. */
bool depth_ok(const json_t *v, int left) {
    if (json_is_object(v)) {
        if (left == 0) return false;
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x) {
            if (!depth_ok(x, left - 1)) return false;
        }
    } else if (json_is_array(v)) {
        if (left == 0) return false;
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) {
            if (!depth_ok(x, left - 1)) return false;
        }
    }
    return true;
}

/* Validates a name of len bytes (non-empty unless allow_empty, at most
 * EXTENDER_MAX_NAME bytes, no NUL); s need not be NUL-terminated. */
int check_name(const char *s, size_t len, const char *what, bool allow_empty, char *err, size_t errlen) {
    if (len == 0 && !allow_empty) return core_fail(err, errlen, -EINVAL, "%s: must not be empty", what);
    if (len > EXTENDER_MAX_NAME)
        return core_fail(err, errlen, -E2BIG, "%s: %zu bytes, longer than %d", what, len, EXTENDER_MAX_NAME);
    if (memchr(s, '\0', len)) return core_fail(err, errlen, -EINVAL, "%s: contains a NUL byte", what);
    return 0;
}

static int take_name(const json_t *v, const char *what, bool allow_empty, char **out, char *err, size_t errlen) {
    *out = NULL;
    if (!v) {
        if (!allow_empty) return core_fail(err, errlen, -EINVAL, "%s: missing", what);
        return (*out = strdup("")) ? 0 : -ENOMEM;
    }
    if (!json_is_string(v))
        return core_fail(err, errlen, -EINVAL, "%s: expected a string, got %s", what, json_type_name(v));
    int rc = check_name(json_string_value(v), json_string_length(v), what, allow_empty, err, errlen);
    if (rc) return rc;
    return (*out = strdup(json_string_value(v))) ? 0 : -ENOMEM;
}

static int take_pod(json_t *v, const char *what, json_t **out, char *err, size_t errlen) {
    if (!v) return core_fail(err, errlen, -EINVAL, "%s: missing (null or absent)", what);
    if (!json_is_object(v))
        return core_fail(err, errlen, -EINVAL, "%s: expected a Pod object, got %s", what, json_type_name(v));
    if (!depth_ok(v, EXTENDER_MAX_DEPTH))
        return core_fail(err, errlen, -E2BIG, "%s: nested deeper than %d levels", what, EXTENDER_MAX_DEPTH);
    *out = json_incref(v);
    return 0;
}

/* Adds name at position pos to index; a name already there is a duplicate. */
static int index_add(json_t *index, const char *name, size_t pos, const char *what, char *err, size_t errlen) {
    if (json_object_get(index, name))
        return core_fail(err, errlen, -EINVAL, "%s: duplicate node name \"%.64s\"", what, name);
    json_t *p = json_integer((json_int_t)pos);
    if (!p || json_object_set_new(index, name, p) != 0) return -ENOMEM;
    return 0;
}

static long index_find(const json_t *index, const char *name) {
    if (!index || !name) return -1;
    json_t *p = json_object_get(index, name);
    return p ? (long)json_integer_value(p) : -1;
}

/* A JSON string of at most EXTENDER_MAX_REASON bytes, cut at a UTF-8
 * boundary; NULL when s is not valid UTF-8 (or out of memory). */
static json_t *reason_string(const char *s) {
    size_t len = strlen(s);
    if (len > EXTENDER_MAX_REASON) {
        len = EXTENDER_MAX_REASON;
        while (len > 0 && ((unsigned char)s[len] & 0xC0) == 0x80) len--;
    }
    return json_stringn(s, len);
}

/* ---- ExtenderArgs ---- */

static const char *const ARGS_FIELDS[] = {"Pod", "Nodes", "NodeNames"};

void extender_args_free(struct extender_args *a) {
    if (!a) return;
    for (size_t i = 0; i < a->nnodes; i++) free(a->names[i]);
    free(a->names);
    json_decref(a->pod);
    json_decref(a->items);
    json_decref(a->index);
    free(a);
}

static int decode_node_names(struct extender_args *a, const json_t *list, char *err, size_t errlen) {
    if (!json_is_array(list))
        return core_fail(err, errlen, -EINVAL, "ExtenderArgs.NodeNames: expected an array of strings or null, got %s",
                         json_type_name(list));
    size_t n = json_array_size(list);
    if (n > EXTENDER_MAX_NODES)
        return core_fail(err, errlen, -E2BIG, "ExtenderArgs.NodeNames: %zu names, more than %d", n, EXTENDER_MAX_NODES);
    if (!(a->names = calloc(n ? n : 1, sizeof *a->names))) return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        char what[64];
        snprintf(what, sizeof what, "ExtenderArgs.NodeNames[%zu]", i);
        int rc = take_name(json_array_get(list, i), what, false, &a->names[i], err, errlen);
        if (rc) return rc;
        a->nnodes++;
        if ((rc = index_add(a->index, a->names[i], i, what, err, errlen))) return rc;
    }
    return 0;
}

static int decode_node_list(struct extender_args *a, const json_t *list, char *err, size_t errlen) {
    if (!json_is_object(list))
        return core_fail(err, errlen, -EINVAL, "ExtenderArgs.Nodes: expected a NodeList object or null, got %s",
                         json_type_name(list));
    json_t *items = json_object_get(list, "items");
    if (!items || json_is_null(items)) {
        a->items = json_array();
        if (!a->items) return -ENOMEM;
    } else if (!json_is_array(items)) {
        return core_fail(err, errlen, -EINVAL, "ExtenderArgs.Nodes.items: expected an array or null, got %s",
                         json_type_name(items));
    } else {
        a->items = json_incref(items);
    }
    size_t n = json_array_size(a->items);
    if (n > EXTENDER_MAX_NODES)
        return core_fail(err, errlen, -E2BIG, "ExtenderArgs.Nodes.items: %zu nodes, more than %d", n, EXTENDER_MAX_NODES);
    if (!(a->names = calloc(n ? n : 1, sizeof *a->names))) return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        char what[64];
        json_t *node = json_array_get(a->items, i);
        snprintf(what, sizeof what, "ExtenderArgs.Nodes.items[%zu]", i);
        if (!json_is_object(node))
            return core_fail(err, errlen, -EINVAL, "%s: expected a Node object, got %s", what, json_type_name(node));
        if (!depth_ok(node, EXTENDER_MAX_DEPTH))
            return core_fail(err, errlen, -E2BIG, "%s: nested deeper than %d levels", what, EXTENDER_MAX_DEPTH);
        json_t *md = json_object_get(node, "metadata");
        if (!json_is_object(md))
            return core_fail(err, errlen, -EINVAL, "%s.metadata: expected an object, got %s", what,
                             md ? json_type_name(md) : "nothing");
        snprintf(what, sizeof what, "ExtenderArgs.Nodes.items[%zu].metadata.name", i);
        int rc = take_name(json_object_get(md, "name"), what, false, &a->names[i], err, errlen);
        if (rc) return rc;
        a->nnodes++;
        if ((rc = index_add(a->index, a->names[i], i, what, err, errlen))) return rc;
    }
    return 0;
}

int extender_decode_args(const json_t *body, struct extender_args **out, char *err, size_t errlen) {
    *out = NULL;
    if (!json_is_object(body))
        return core_fail(err, errlen, -EINVAL, "ExtenderArgs: expected an object, got %s",
                         body ? json_type_name(body) : "nothing");
    json_t *f[3];
    int rc = get_fields(body, "ExtenderArgs", ARGS_FIELDS, 3, f, err, errlen);
    if (rc) return rc;
    if (f[1] && f[2])
        return core_fail(err, errlen, -EINVAL,
                         "ExtenderArgs: both Nodes and NodeNames are set; exactly one must be (NodeNames when "
                         "nodeCacheCapable)");
    if (!f[1] && !f[2])
        return core_fail(err, errlen, -EINVAL, "ExtenderArgs: neither Nodes nor NodeNames is set");
    struct extender_args *a = calloc(1, sizeof *a);
    if (!a || !(a->index = json_object())) {
        free(a);
        return -ENOMEM;
    }
    rc = take_pod(f[0], "ExtenderArgs.Pod", &a->pod, err, errlen);
    if (!rc) {
        a->node_cache = f[2] != NULL;
        rc = a->node_cache ? decode_node_names(a, f[2], err, errlen) : decode_node_list(a, f[1], err, errlen);
    }
    if (rc) {
        extender_args_free(a);
        return rc;
    }
    *out = a;
    return 0;
}

long extender_args_find(const struct extender_args *a, const char *node) { return a ? index_find(a->index, node) : -1; }

/* ---- ExtenderBindingArgs ---- */

static const char *const BIND_FIELDS[] = {"PodName", "PodNamespace", "PodUID", "Node"};

void extender_binding_args_free(struct extender_binding_args *a) {
    if (!a) return;
    free(a->pod_name);
    free(a->pod_namespace);
    free(a->pod_uid);
    free(a->node);
    free(a);
}

int extender_decode_binding_args(const json_t *body, struct extender_binding_args **out, char *err, size_t errlen) {
    *out = NULL;
    if (!json_is_object(body))
        return core_fail(err, errlen, -EINVAL, "ExtenderBindingArgs: expected an object, got %s",
                         body ? json_type_name(body) : "nothing");
    json_t *f[4];
    int rc = get_fields(body, "ExtenderBindingArgs", BIND_FIELDS, 4, f, err, errlen);
    if (rc) return rc;
    struct extender_binding_args *a = calloc(1, sizeof *a);
    if (!a) return -ENOMEM;
    if (!(rc = take_name(f[0], "ExtenderBindingArgs.PodName", false, &a->pod_name, err, errlen)) &&
        !(rc = take_name(f[1], "ExtenderBindingArgs.PodNamespace", false, &a->pod_namespace, err, errlen)) &&
        !(rc = take_name(f[2], "ExtenderBindingArgs.PodUID", true, &a->pod_uid, err, errlen)))
        rc = take_name(f[3], "ExtenderBindingArgs.Node", false, &a->node, err, errlen);
    if (rc) {
        extender_binding_args_free(a);
        return rc;
    }
    *out = a;
    return 0;
}

/* ---- ExtenderPreemptionArgs ---- */

static const char *const PREEMPT_FIELDS[] = {"Pod", "NodeNameToVictims", "NodeNameToMetaVictims"};
static const char *const VICTIMS_FIELDS[] = {"Pods", "NumPDBViolations"};
static const char *const METAPOD_FIELDS[] = {"UID"};

void extender_preemption_args_free(struct extender_preemption_args *a) {
    if (!a) return;
    for (size_t i = 0; i < a->nnodes; i++) {
        struct extender_victims *v = &a->nodes[i];
        free(v->node);
        for (size_t j = 0; j < v->npods; j++) free(v->uids[j]);
        free(v->uids);
        json_decref(v->pods);
    }
    free(a->nodes);
    json_decref(a->pod);
    json_decref(a->index);
    free(a);
}

/* One Victims or MetaVictims value (val may be NULL: no victims). named:
 * the error messages name where in the request (built per node and per
 * victim, they cost more than the decoding itself at hundreds of nodes), else
 * the caller decodes again with named set when this one fails. */
static int decode_victims_at(struct extender_victims *v, const json_t *val, bool meta, const char *map,
                             size_t *total, bool named, char *err, size_t errlen) {
    char what[128] = "";
    if (named) snprintf(what, sizeof what, "ExtenderPreemptionArgs.%s[\"%.64s\"]", map, v->node);
    if (!val) return 0;
    if (!json_is_object(val))
        return core_fail(err, errlen, -EINVAL, "%s: expected an object or null, got %s", what, json_type_name(val));
    json_t *f[2];
    int rc = get_fields(val, what, VICTIMS_FIELDS, 2, f, err, errlen);
    if (rc) return rc;
    if (f[1]) {
        if (!json_is_integer(f[1]))
            return core_fail(err, errlen, -EINVAL, "%s.NumPDBViolations: expected an integer, got %s", what,
                             json_type_name(f[1]));
        v->num_pdb_violations = (int64_t)json_integer_value(f[1]);
        if (v->num_pdb_violations < 0)
            return core_fail(err, errlen, -EINVAL, "%s.NumPDBViolations: negative (%lld)", what,
                             (long long)v->num_pdb_violations);
    }
    if (!f[0]) return 0;
    if (!json_is_array(f[0]))
        return core_fail(err, errlen, -EINVAL, "%s.Pods: expected an array or null, got %s", what, json_type_name(f[0]));
    size_t n = json_array_size(f[0]);
    if (n > EXTENDER_MAX_VICTIMS)
        return core_fail(err, errlen, -E2BIG, "%s.Pods: %zu victims, more than %d", what, n, EXTENDER_MAX_VICTIMS);
    if ((*total += n) > EXTENDER_MAX_VICTIMS_TOTAL)
        return core_fail(err, errlen, -E2BIG, "ExtenderPreemptionArgs.%s: more than %d victims in all", map,
                         EXTENDER_MAX_VICTIMS_TOTAL);
    if (!(v->uids = calloc(n ? n : 1, sizeof *v->uids))) return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        json_t *p = json_array_get(f[0], i), *uid;
        char pw[160] = "";
        if (named) snprintf(pw, sizeof pw, "%s.Pods[%zu]", what, i);
        if (!json_is_object(p))
            return core_fail(err, errlen, -EINVAL, "%s: expected %s object, got %s", pw, meta ? "a MetaPod" : "a Pod",
                             json_type_name(p));
        if (meta) {
            if ((rc = get_fields(p, pw, METAPOD_FIELDS, 1, &uid, err, errlen))) return rc;
            if (named) snprintf(pw, sizeof pw, "%s.Pods[%zu].UID", what, i);
        } else {
            if (!depth_ok(p, EXTENDER_MAX_DEPTH))
                return core_fail(err, errlen, -E2BIG, "%s: nested deeper than %d levels", pw, EXTENDER_MAX_DEPTH);
            json_t *md = json_object_get(p, "metadata");
            uid = json_is_object(md) ? json_object_get(md, "uid") : NULL;
            if (named) snprintf(pw, sizeof pw, "%s.Pods[%zu].metadata.uid", what, i);
        }
        if ((rc = take_name(uid && !json_is_null(uid) ? uid : NULL, pw, false, &v->uids[i], err, errlen))) return rc;
        v->npods++;
    }
    if (!meta) v->pods = json_incref(f[0]);
    return 0;
}

/* decode_victims_at without the names first; a failure is decoded again,
 * from the same state, for its message. */
static int decode_victims(struct extender_victims *v, const json_t *val, bool meta, const char *map, size_t *total,
                          char *err, size_t errlen) {
    size_t total0 = *total;
    int rc = decode_victims_at(v, val, meta, map, total, false, err, errlen);
    if (!rc || rc == -ENOMEM) return rc;
    for (size_t j = 0; j < v->npods; j++) free(v->uids[j]);
    free(v->uids);
    v->uids = NULL;
    v->npods = 0;
    v->num_pdb_violations = 0;
    *total = total0;
    return decode_victims_at(v, val, meta, map, total, true, err, errlen);
}

int extender_decode_preemption_args(const json_t *body, struct extender_preemption_args **out, char *err,
                                    size_t errlen) {
    *out = NULL;
    if (!json_is_object(body))
        return core_fail(err, errlen, -EINVAL, "ExtenderPreemptionArgs: expected an object, got %s",
                         body ? json_type_name(body) : "nothing");
    json_t *f[3];
    int rc = get_fields(body, "ExtenderPreemptionArgs", PREEMPT_FIELDS, 3, f, err, errlen);
    if (rc) return rc;
    if (f[1] && f[2])
        return core_fail(err, errlen, -EINVAL,
                         "ExtenderPreemptionArgs: both NodeNameToVictims and NodeNameToMetaVictims are set; exactly "
                         "one must be (NodeNameToMetaVictims when nodeCacheCapable)");
    if (!f[1] && !f[2])
        return core_fail(err, errlen, -EINVAL,
                         "ExtenderPreemptionArgs: neither NodeNameToVictims nor NodeNameToMetaVictims is set");
    bool meta = f[2] != NULL;
    const char *map = meta ? "NodeNameToMetaVictims" : "NodeNameToVictims";
    json_t *m = meta ? f[2] : f[1];
    if (!json_is_object(m))
        return core_fail(err, errlen, -EINVAL, "ExtenderPreemptionArgs.%s: expected an object or null, got %s", map,
                         json_type_name(m));
    size_t n = json_object_size(m);
    if (n > EXTENDER_MAX_NODES)
        return core_fail(err, errlen, -E2BIG, "ExtenderPreemptionArgs.%s: %zu nodes, more than %d", map, n,
                         EXTENDER_MAX_NODES);
    struct extender_preemption_args *a = calloc(1, sizeof *a);
    if (!a || !(a->index = json_object()) || !(a->nodes = calloc(n ? n : 1, sizeof *a->nodes))) {
        extender_preemption_args_free(a);
        return -ENOMEM;
    }
    a->meta = meta;
    rc = take_pod(f[0], "ExtenderPreemptionArgs.Pod", &a->pod, err, errlen);
    size_t total = 0;
    const char *k;
    json_t *v;
    char what[96]; /* the same for every key: written once, not per node */
    snprintf(what, sizeof what, "ExtenderPreemptionArgs.%s key", map);
    json_object_foreach(m, k, v) {
        if (rc) break;
        struct extender_victims *nv = &a->nodes[a->nnodes];
        if ((rc = check_name(k, strlen(k), what, false, err, errlen))) break;
        if (!(nv->node = strdup(k))) {
            rc = -ENOMEM;
            break;
        }
        a->nnodes++;
        if ((rc = index_add(a->index, k, a->nnodes - 1, what, err, errlen))) break;
        rc = decode_victims(nv, json_is_null(v) ? NULL : v, meta, map, &total, err, errlen);
    }
    if (rc) {
        extender_preemption_args_free(a);
        return rc;
    }
    *out = a;
    return 0;
}

long extender_preemption_find(const struct extender_preemption_args *a, const char *node) {
    return a ? index_find(a->index, node) : -1;
}

/* ---- replies ---- */

/* Sets key to value (a new reference, consumed); false when value is NULL. */
static bool put(json_t *obj, const char *key, json_t *value) { return value && json_object_set_new(obj, key, value) == 0; }

int extender_filter_result(const struct extender_args *args, const struct extender_node_verdict *v, size_t nv,
                           json_t **out, char *err, size_t errlen) {
    *out = NULL;
    if (!args) return core_fail(err, errlen, -EINVAL, "filter result: no request");
    if (nv && !v) return core_fail(err, errlen, -EINVAL, "filter result: no verdicts");
    unsigned char *state = calloc(args->nnodes ? args->nnodes : 1, 1);
    json_t *failed = json_object(), *unres = json_object(), *pass = json_array(), *res = json_object();
    int rc = 0;
    if (!state || !failed || !unres || !pass || !res) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < nv; i++) {
        const char *node = v[i].node;
        long pos = extender_args_find(args, node);
        if (pos < 0) {
            rc = core_fail(err, errlen, -EINVAL, "filter verdict %zu: node \"%.64s\" is not in the request", i,
                           node ? node : "(null)");
            goto out;
        }
        if (state[pos]) {
            rc = core_fail(err, errlen, -EINVAL, "filter verdict %zu: node \"%.64s\" has more than one verdict", i, node);
            goto out;
        }
        if (v[i].verdict != EXTENDER_PASS && v[i].verdict != EXTENDER_FAIL &&
            v[i].verdict != EXTENDER_FAIL_UNRESOLVABLE) {
            rc = core_fail(err, errlen, -EINVAL, "filter verdict %zu: unknown verdict %d", i, (int)v[i].verdict);
            goto out;
        }
        state[pos] = (unsigned char)(1 + v[i].verdict);
        if (v[i].verdict == EXTENDER_PASS) continue;
        const char *reason = v[i].reason ? v[i].reason : "";
        if (strlen(reason) > EXTENDER_MAX_REASON) {
            rc = core_fail(err, errlen, -E2BIG, "filter verdict %zu: reason longer than %d bytes", i, EXTENDER_MAX_REASON);
            goto out;
        }
        json_t *r = json_string(reason);
        if (!r) {
            rc = core_fail(err, errlen, -EINVAL, "filter verdict %zu: reason is not valid UTF-8", i);
            goto out;
        }
        if (!put(v[i].verdict == EXTENDER_FAIL ? failed : unres, node, r)) {
            rc = -ENOMEM;
            goto out;
        }
    }
    for (size_t i = 0; i < args->nnodes; i++) {
        if (state[i] != 1 + EXTENDER_PASS) continue;
        json_t *e = args->node_cache ? json_string(args->names[i]) : json_incref(json_array_get(args->items, i));
        if (!e || json_array_append_new(pass, e) != 0) {
            rc = -ENOMEM;
            goto out;
        }
    }
    /* Go's field order: Nodes, NodeNames, FailedNodes, FailedAndUnresolvableNodes, Error. */
    json_t *list = NULL;
    if (!args->node_cache) {
        list = json_pack("{s:{},s:O}", "metadata", "items", pass);
        if (!list) {
            rc = -ENOMEM;
            goto out;
        }
    }
    if (!put(res, "Nodes", list ? list : json_null()) ||
        !put(res, "NodeNames", args->node_cache ? json_incref(pass) : json_null()) ||
        !put(res, "FailedNodes", json_incref(failed)) || !put(res, "FailedAndUnresolvableNodes", json_incref(unres)) ||
        !put(res, "Error", json_string("")))
        rc = -ENOMEM;
out:
    free(state);
    json_decref(failed);
    json_decref(unres);
    json_decref(pass);
    if (rc) json_decref(res);
    else *out = res;
    return rc;
}

/* Checks one node of a reply: named, a valid name, known to the request
 * (the caller's lookup; true when there is no request to check against) and
 * not seen before in this reply; then records it in seen. */
static int reply_node(json_t *seen, const char *node, bool known, const char *what, char *err, size_t errlen) {
    if (!node) return core_fail(err, errlen, -EINVAL, "%s: no node name", what);
    int rc = check_name(node, strlen(node), what, false, err, errlen);
    if (rc) return rc;
    if (!known) return core_fail(err, errlen, -EINVAL, "%s: node \"%.64s\" is not in the request", what, node);
    if (json_object_get(seen, node))
        return core_fail(err, errlen, -EINVAL, "%s: node \"%.64s\" listed more than once", what, node);
    if (json_object_set_new(seen, node, json_true()) != 0)
        return core_fail(err, errlen, -EINVAL, "%s: node name is not valid UTF-8", what);
    return 0;
}

int extender_priority_list(const struct extender_args *args, const struct extender_host_priority *p, size_t n,
                           json_t **out, char *err, size_t errlen) {
    *out = NULL;
    if (n && !p) return core_fail(err, errlen, -EINVAL, "priority list: no entries");
    if (n > EXTENDER_MAX_NODES)
        return core_fail(err, errlen, -E2BIG, "priority list: %zu hosts, more than %d", n, EXTENDER_MAX_NODES);
    json_t *seen = json_object(), *list = json_array();
    int rc = 0;
    if (!seen || !list) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const char *host = p[i].host;
        char what[48];
        snprintf(what, sizeof what, "priority %zu: Host", i);
        if ((rc = reply_node(seen, host, !args || extender_args_find(args, host) >= 0, what, err, errlen))) goto out;
        json_t *h = json_string(host);
        if (!h) {
            rc = -ENOMEM; /* reply_node checked the UTF-8 */
            goto out;
        }
        int64_t s = p[i].score;
        if (s < EXTENDER_MIN_PRIORITY) s = EXTENDER_MIN_PRIORITY;
        if (s > EXTENDER_MAX_PRIORITY) s = EXTENDER_MAX_PRIORITY;
        json_t *e = json_object();
        if (!e) json_decref(h);
        if (!e || !put(e, "Host", h) || !put(e, "Score", json_integer((json_int_t)s))) {
            json_decref(e);
            rc = -ENOMEM;
            goto out;
        }
        if (json_array_append_new(list, e) != 0) {
            rc = -ENOMEM;
            goto out;
        }
    }
out:
    json_decref(seen);
    if (rc) json_decref(list);
    else *out = list;
    return rc;
}

int extender_binding_result(const char *error, json_t **out) {
    json_t *e = reason_string(error ? error : "");
    if (!e) e = json_string("extender error (message not valid UTF-8)");
    *out = json_object();
    if (!*out || !put(*out, "Error", e)) {
        if (!*out) json_decref(e);
        json_decref(*out);
        *out = NULL;
        return -ENOMEM;
    }
    return 0;
}

int extender_preemption_result(const struct extender_preemption_args *in, const struct extender_victims *v, size_t n,
                               json_t **out, char *err, size_t errlen) {
    *out = NULL;
    if (n && !v) return core_fail(err, errlen, -EINVAL, "preemption result: no nodes");
    if (n > EXTENDER_MAX_NODES)
        return core_fail(err, errlen, -E2BIG, "preemption result: %zu nodes, more than %d", n, EXTENDER_MAX_NODES);
    json_t *seen = json_object(), *map = json_object(), *res = NULL;
    int rc = 0;
    if (!seen || !map) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const char *node = v[i].node;
        char what[48];
        snprintf(what, sizeof what, "preemption result node %zu", i);
        if ((rc = reply_node(seen, node, !in || extender_preemption_find(in, node) >= 0, what, err, errlen))) goto out;
        if (v[i].npods == 0) continue; /* kube-scheduler refuses a node without victims */
        if (v[i].npods > EXTENDER_MAX_VICTIMS) {
            rc = core_fail(err, errlen, -E2BIG, "%s: %zu victims, more than %d", what, v[i].npods, EXTENDER_MAX_VICTIMS);
            goto out;
        }
        if (v[i].num_pdb_violations < 0) {
            rc = core_fail(err, errlen, -EINVAL, "%s: negative NumPDBViolations", what);
            goto out;
        }
        if (!v[i].uids) {
            rc = core_fail(err, errlen, -EINVAL, "%s: %zu victims but no UIDs", what, v[i].npods);
            goto out;
        }
        json_t *pods = json_array(), *mv = json_object();
        if (!pods || !mv) {
            json_decref(pods);
            json_decref(mv);
            rc = -ENOMEM;
            goto out;
        }
        if (!put(mv, "Pods", pods) || !put(mv, "NumPDBViolations", json_integer((json_int_t)v[i].num_pdb_violations))) {
            json_decref(mv);
            rc = -ENOMEM;
            goto out;
        }
        if (!put(map, node, mv)) { /* map now owns mv, mv owns pods */
            rc = -ENOMEM;
            goto out;
        }
        for (size_t j = 0; j < v[i].npods; j++) {
            const char *uid = v[i].uids[j];
            char uw[128];
            snprintf(uw, sizeof uw, "%s: UID %zu", what, j);
            if (!uid) {
                rc = core_fail(err, errlen, -EINVAL, "%s: missing", uw);
                goto out;
            }
            if ((rc = check_name(uid, strlen(uid), uw, false, err, errlen))) goto out;
            json_t *u = json_string(uid);
            if (!u) {
                rc = core_fail(err, errlen, -EINVAL, "%s: not valid UTF-8", uw);
                goto out;
            }
            json_t *mp = json_object();
            if (!mp) json_decref(u);
            if (!put(mp, "UID", u)) {
                json_decref(mp);
                rc = -ENOMEM;
                goto out;
            }
            if (json_array_append_new(pods, mp) != 0) {
                rc = -ENOMEM;
                goto out;
            }
        }
    }
    res = json_object();
    if (!put(res, "NodeNameToMetaVictims", json_incref(map))) rc = -ENOMEM;
out:
    json_decref(seen);
    json_decref(map);
    if (rc) json_decref(res);
    else *out = res;
    return rc;
}

int extender_error_reply(enum extender_verb verb, const char *msg, json_t **out) {
    *out = NULL;
    if (!msg || !*msg) msg = "extender error";
    if (verb == EXTENDER_BIND) return extender_binding_result(msg, out);
    if (verb != EXTENDER_FILTER) return -ENOTSUP;
    json_t *e = reason_string(msg);
    if (!e) e = json_string("extender error (message not valid UTF-8)");
    json_t *r = json_pack("{s:n,s:n,s:n,s:n,s:o}", "Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes",
                          "Error", e);
    if (!r) return -ENOMEM;
    *out = r;
    return 0;
}
