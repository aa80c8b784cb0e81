/* JSON merge patch (RFC 7386), JSON patch (RFC 6902) and JSON value
 * equality. Strategic merge patch lives in patch_strategic.c.
 * Every function works on a private deep copy of the target, so a failure
 * part-way through a JSON patch leaves nothing half-applied for the caller.
 * Each step tells the budget (patch_budget.c) what it adds and removes. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"
#include "patch_int.h"

/* ---- equality ---- */

static bool value_equal(const json_t *a, const json_t *b, int depth) {
    if (a == b) return true;
    if (!a || !b || depth > PATCH_MAX_DEPTH) return false;
    if (json_is_number(a) && json_is_number(b)) {
        if (json_is_integer(a) && json_is_integer(b)) return json_integer_value(a) == json_integer_value(b);
        return json_number_value(a) == json_number_value(b);
    }
    if (json_typeof(a) != json_typeof(b)) return false;
    switch (json_typeof(a)) {
    case JSON_STRING:
        return json_string_length(a) == json_string_length(b) &&
               memcmp(json_string_value(a), json_string_value(b), json_string_length(a)) == 0;
    case JSON_ARRAY: {
        size_t n = json_array_size(a);
        if (n != json_array_size(b)) return false;
        for (size_t i = 0; i < n; i++)
            if (!value_equal(json_array_get(a, i), json_array_get(b, i), depth + 1)) return false;
        return true;
    }
    case JSON_OBJECT: {
        if (json_object_size(a) != json_object_size(b)) return false;
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)a, k, v) {
            if (!value_equal(v, json_object_get(b, k), depth + 1)) return false;
        }
        return true;
    }
    default: /* true, false, null are singletons of their type */
        return true;
    }
}

bool patch_value_equal(const json_t *a, const json_t *b) { return value_equal(a, b, 0); }

/* ---- RFC 7386 ---- */

struct merge {
    struct patch_budget b;
    bool share; /* patch values that replace are taken by reference, not copied */
};

/* Applies patch to *v (owned; NULL when absent), `depth` containers deep in
 * the document, replacing *v as needed. */
static int merge_apply(json_t **v, const json_t *patch, int depth, struct merge *m, char *err, size_t errlen) {
    int rc;
    if (!json_is_object(patch)) {
        pb_shrink(&m->b, pb_value(*v));
        if ((rc = pb_grow(&m->b, pb_value(patch), depth))) return rc;
        json_t *c = m->share ? json_incref((json_t *)patch) : json_deep_copy(patch);
        if (!c) return -ENOMEM;
        json_decref(*v);
        *v = c;
        return 0;
    }
    if (depth >= PATCH_MAX_DEPTH)
        return core_fail(err, errlen, -E2BIG, "merge patch is nested deeper than %d levels", PATCH_MAX_DEPTH);
    if (!json_is_object(*v)) {
        pb_shrink(&m->b, pb_value(*v));
        json_decref(*v);
        if (!(*v = json_object())) return -ENOMEM;
        if ((rc = pb_grow(&m->b, pb_value(*v), depth))) return rc;
    }
    const char *k;
    json_t *pv;
    json_object_foreach((json_t *)patch, k, pv) {
        json_t *cur = json_object_get(*v, k);
        if (json_is_null(pv)) {
            if (cur) pb_shrink(&m->b, pb_member(k, cur));
            json_object_del(*v, k);
            continue;
        }
        if (!cur && (rc = pb_grow(&m->b, pb_member(k, NULL), depth + 1))) return rc;
        json_incref(cur);
        rc = merge_apply(&cur, pv, depth + 1, m, err, errlen);
        if (rc == 0 && json_object_set_new(*v, k, cur) != 0) rc = -ENOMEM;
        else if (rc) json_decref(cur);
        if (rc) return rc;
    }
    return 0;
}

static int merge(const json_t *target, const json_t *patch, bool share, const struct patch_limits *lim, json_t **out,
                 char *err, size_t errlen, struct patch_size *tracked, size_t *work) {
    *out = NULL;
    if (!patch) return core_fail(err, errlen, -EINVAL, "merge patch is empty");
    struct merge m = {.share = share};
    pb_init(&m.b, lim, "merge patch", err, errlen);
    int rc = pb_start(&m.b, target, NULL);
    if (rc) return rc;
    json_t *v = target ? json_deep_copy(target) : NULL;
    if (target && !v) goto oom;
    rc = merge_apply(&v, patch, 0, &m, err, errlen);
    if (rc) {
        json_decref(v);
        if (rc == -ENOMEM) goto oom;
        return rc;
    }
    *out = v;
    if (tracked) *tracked = (struct patch_size){m.b.bytes, m.b.nodes, 0};
    if (work) *work = m.b.work;
    return 0;
oom:
    return core_fail(err, errlen, -ENOMEM, "out of memory");
}

int patch_merge(const json_t *target, const json_t *patch, json_t **out, char *err, size_t errlen) {
    return merge(target, patch, false, NULL, out, err, errlen, NULL, NULL);
}

int patch_merge_sharing(const json_t *target, const json_t *patch, json_t **out, char *err, size_t errlen) {
    return merge(target, patch, true, NULL, out, err, errlen, NULL, NULL);
}

/* ---- RFC 6901 pointers ---- */

struct jptr {
    int n;
    char **tok; /* tok[0] owns one buffer holding every token */
    char *buf;
};

static void jptr_free(struct jptr *p) {
    free(p->tok);
    free(p->buf);
    memset(p, 0, sizeof *p);
}

static int jptr_parse(const char *s, struct jptr *p) {
    memset(p, 0, sizeof *p);
    if (!*s) return 0;
    if (*s != '/') return -EINVAL;
    size_t len = strlen(s);
    int n = 0;
    for (size_t i = 0; i < len; i++) n += s[i] == '/';
    p->buf = malloc(len + 1);
    p->tok = malloc((size_t)n * sizeof *p->tok);
    if (!p->buf || !p->tok) {
        jptr_free(p);
        return -ENOMEM;
    }
    char *o = p->buf;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '/') {
            if (p->n) *o++ = 0;
            p->tok[p->n++] = o;
        } else if (s[i] == '~') {
            char c = s[i + 1];
            if (c != '0' && c != '1') {
                jptr_free(p);
                return -EINVAL;
            }
            *o++ = c == '0' ? '~' : '/';
            i++;
        } else {
            *o++ = s[i];
        }
    }
    *o = 0;
    return 0;
}

/* An array index token: "0" or digits without a leading zero, or "-" (the
 * end) when allow_end. Returns 0 with *idx, -EINVAL (malformed) or -ERANGE. */
static int jptr_index(const char *t, size_t size, bool allow_end, bool allow_size, size_t *idx) {
    if (!strcmp(t, "-")) {
        if (!allow_end) return -ERANGE; /* "-" names the element after the last */
        *idx = size;
        return 0;
    }
    size_t n = strlen(t);
    if (n == 0 || strspn(t, "0123456789") != n || (t[0] == '0' && n > 1)) return -EINVAL;
    if (n > 18) return -ERANGE;
    size_t v = 0;
    for (; *t; t++) v = v * 10 + (size_t)(*t - '0');
    if (v > size || (v == size && !allow_size)) return -ERANGE;
    *idx = v;
    return 0;
}

/* The value at the first `upto` tokens of p, or NULL. */
static json_t *jptr_get(json_t *doc, const struct jptr *p, int upto) {
    json_t *v = doc;
    for (int i = 0; v && i < upto; i++) {
        if (json_is_object(v)) {
            v = json_object_get(v, p->tok[i]);
        } else if (json_is_array(v)) {
            size_t idx;
            v = jptr_index(p->tok[i], json_array_size(v), false, false, &idx) ? NULL : json_array_get(v, idx);
        } else {
            v = NULL;
        }
    }
    return v;
}

/* ---- RFC 6902 ---- */

struct jp {
    json_t *doc;
    int opi;
    const char *op, *path;
    struct patch_budget b;
    int depth_ub;  /* at least the document's nesting depth */
    char what[64]; /* "json patch operation 3 (copy)", for the budget's messages */
    char *err;
    size_t errlen;
};

static int jp_fail(struct jp *j, int rc, const char *what) {
    return core_fail(j->err, j->errlen, rc, "json patch operation %d (%s): %s: \"%s\"", j->opi, j->op, what, j->path);
}

/* Counts value, of size vs, placed at p where its key or separator costs
 * slot. moved: the value is in the account already (a move), and vs.depth is
 * only an upper bound of its depth, which is measured (and paid for) only
 * when the bound could pass the limit. */
static int jp_place(struct jp *j, const struct jptr *p, const json_t *value, struct patch_size vs, bool moved,
                    struct patch_size slot) {
    int rc;
    if (moved && p->n + vs.depth > j->b.lim.max_depth) {
        struct patch_size exact = pb_value(value);
        if ((rc = pb_charge(&j->b, exact.nodes * PATCH_STEPS_WALK))) return rc;
        vs.depth = exact.depth;
    }
    struct patch_size add = {slot.bytes, slot.nodes, vs.depth};
    if (!moved) add.bytes += vs.bytes, add.nodes += vs.nodes;
    if ((rc = pb_grow(&j->b, add, p->n))) return rc;
    if (p->n + vs.depth > j->depth_ub) j->depth_ub = p->n + vs.depth;
    return 0;
}

/* The size of what an add at p would replace: the member it names, or the
 * whole document. */
static struct patch_size jp_replaced(struct jp *j, const struct jptr *p) {
    if (p->n == 0) return pb_value(j->doc);
    json_t *parent = jptr_get(j->doc, p, p->n - 1);
    json_t *old = json_is_object(parent) ? json_object_get(parent, p->tok[p->n - 1]) : NULL;
    return old ? pb_member(p->tok[p->n - 1], old) : pb_value(NULL);
}

/* Adds value (owned; consumed on every path) at p; vs and moved as for jp_place. */
static int jp_add(struct jp *j, const struct jptr *p, json_t *value, struct patch_size vs, bool moved) {
    int rc;
    if (p->n == 0) { /* the new document: measured again */
        struct patch_size now;
        if ((rc = pb_start(&j->b, value, &now)) || (moved && (rc = pb_charge(&j->b, now.nodes * PATCH_STEPS_WALK)))) {
            json_decref(value);
            return rc;
        }
        json_decref(j->doc);
        j->doc = value;
        j->depth_ub = now.depth;
        return 0;
    }
    json_t *parent = jptr_get(j->doc, p, p->n - 1);
    const char *last = p->tok[p->n - 1];
    if (json_is_object(parent)) {
        json_t *old = json_object_get(parent, last);
        if (old) pb_shrink(&j->b, pb_member(last, old));
        if ((rc = jp_place(j, p, value, vs, moved, pb_member(last, NULL)))) {
            json_decref(value);
            return rc;
        }
        rc = json_object_set_new(parent, last, value) ? -ENOMEM : 0;
        return rc ? jp_fail(j, rc, "out of memory") : 0;
    }
    if (json_is_array(parent)) {
        size_t idx, n = json_array_size(parent);
        if ((rc = jptr_index(last, n, true, true, &idx))) {
            json_decref(value);
            return jp_fail(j, rc, rc == -ERANGE ? "array index out of range" : "invalid array index");
        }
        if ((rc = pb_charge(&j->b, (n - idx) / SHIFTS_PER_STEP)) ||
            (rc = jp_place(j, p, value, vs, moved, pb_element(NULL)))) {
            json_decref(value);
            return rc;
        }
        rc = json_array_insert_new(parent, idx, value) ? -ENOMEM : 0;
        return rc ? jp_fail(j, rc, "out of memory") : 0;
    }
    json_decref(value);
    return jp_fail(j, -ENOENT, "doc is missing path");
}

/* Removes the value at p; when taken is non-NULL it receives it (owned) and
 * stays in the account (a move puts it back). */
static int jp_remove(struct jp *j, const struct jptr *p, json_t **taken) {
    if (p->n == 0) return jp_fail(j, -EINVAL, "cannot remove the whole document");
    json_t *parent = jptr_get(j->doc, p, p->n - 1);
    const char *last = p->tok[p->n - 1];
    if (json_is_object(parent)) {
        json_t *v = json_object_get(parent, last);
        if (!v) return jp_fail(j, -ENOENT, "doc is missing path");
        pb_shrink(&j->b, pb_member(last, taken ? NULL : v));
        if (taken) *taken = json_incref(v);
        json_object_del(parent, last);
        return 0;
    }
    if (json_is_array(parent)) {
        size_t idx, n = json_array_size(parent);
        int rc = jptr_index(last, n, false, false, &idx);
        if (rc) return jp_fail(j, rc, rc == -ERANGE ? "array index out of range" : "invalid array index");
        if ((rc = pb_charge(&j->b, (n - idx) / SHIFTS_PER_STEP))) return rc;
        json_t *v = json_array_get(parent, idx);
        pb_shrink(&j->b, pb_element(taken ? NULL : v));
        if (taken) *taken = json_incref(v);
        json_array_remove(parent, idx);
        return 0;
    }
    return jp_fail(j, -ENOENT, "doc is missing path");
}

/* Replace: the target must exist; then it is a remove and an add. */
static int jp_replace(struct jp *j, const struct jptr *p, json_t *value, struct patch_size vs) {
    int rc = jptr_get(j->doc, p, p->n) ? 0 : jp_fail(j, -ENOENT, "doc is missing path");
    if (rc == 0 && p->n > 0) rc = jp_remove(j, p, NULL);
    if (rc) {
        json_decref(value);
        return rc;
    }
    return jp_add(j, p, value, vs, false);
}

static bool jptr_is_prefix(const struct jptr *a, const struct jptr *b) {
    if (a->n > b->n) return false;
    for (int i = 0; i < a->n; i++)
        if (strcmp(a->tok[i], b->tok[i])) return false;
    return true;
}

static int jp_op(struct jp *j, const json_t *o) {
    if (!json_is_object(o)) {
        j->op = "?";
        j->path = "";
        return jp_fail(j, -EINVAL, "operation is not an object");
    }
    j->op = json_string_value(json_object_get(o, "op"));
    j->path = json_string_value(json_object_get(o, "path"));
    if (!j->op) {
        j->op = "?";
        j->path = j->path ? j->path : "";
        return jp_fail(j, -EINVAL, "missing or non-string \"op\"");
    }
    if (!j->path) {
        j->path = "";
        return jp_fail(j, -EINVAL, "missing or non-string \"path\"");
    }
    bool add = !strcmp(j->op, "add"), rem = !strcmp(j->op, "remove"), rep = !strcmp(j->op, "replace"),
         mov = !strcmp(j->op, "move"), cpy = !strcmp(j->op, "copy"), tst = !strcmp(j->op, "test");
    if (!(add || rem || rep || mov || cpy || tst)) return jp_fail(j, -EINVAL, "unknown operation at path");
    snprintf(j->what, sizeof j->what, "json patch operation %d (%s)", j->opi, j->op);
    const json_t *value = json_object_get(o, "value");
    if ((add || rep || tst) && !value) return jp_fail(j, -EINVAL, "missing \"value\" for path");
    const char *from = json_string_value(json_object_get(o, "from"));
    if ((mov || cpy) && !from) return jp_fail(j, -EINVAL, "missing or non-string \"from\" for path");

    struct jptr p, f = {0};
    int rc = jptr_parse(j->path, &p);
    if (rc) return jp_fail(j, rc, rc == -ENOMEM ? "out of memory" : "invalid JSON pointer");
    if ((mov || cpy) && (rc = jptr_parse(from, &f))) {
        jptr_free(&p);
        j->path = from;
        return jp_fail(j, rc, rc == -ENOMEM ? "out of memory" : "invalid JSON pointer in \"from\"");
    }
    if (add || rep) {
        struct patch_size vs = pb_value(value);
        json_t *c = json_deep_copy(value);
        rc = !c ? jp_fail(j, -ENOMEM, "out of memory") : add ? jp_add(j, &p, c, vs, false) : jp_replace(j, &p, c, vs);
    } else if (rem) {
        rc = jp_remove(j, &p, NULL);
    } else if (tst) {
        json_t *cur = jptr_get(j->doc, &p, p.n);
        if (!cur) rc = jp_fail(j, -ENOENT, "doc is missing path");
        else if (!patch_value_equal(cur, value)) rc = jp_fail(j, -ECANCELED, "test failed: value differs at path");
    } else {
        json_t *src = jptr_get(j->doc, &f, f.n);
        if (!src) {
            j->path = from;
            rc = jp_fail(j, -ENOENT, "doc is missing \"from\" path");
        } else if (mov && jptr_is_prefix(&f, &p)) {
            if (f.n != p.n) rc = jp_fail(j, -EINVAL, "cannot move a value into one of its children, at path");
        } else if (mov) {
            json_t *taken = NULL;
            struct patch_size bound = {0, 0, j->depth_ub - f.n};
            if ((rc = jp_remove(j, &f, &taken)) == 0) rc = jp_add(j, &p, taken, bound, true);
        } else {
            /* a copy is the one step that can double the document: its
             * cost is charged, and whether the document can hold it checked,
             * before it is made */
            struct patch_size vs = pb_value(src);
            if ((rc = pb_charge(&j->b, vs.nodes * PATCH_STEPS_COPY)) == 0 &&
                (rc = pb_fits(&j->b, vs, jp_replaced(j, &p), p.n)) == 0) {
                json_t *c = json_deep_copy(src);
                rc = c ? jp_add(j, &p, c, vs, false) : jp_fail(j, -ENOMEM, "out of memory");
            }
        }
    }
    jptr_free(&p);
    jptr_free(&f);
    return rc;
}

int patch_json(const json_t *target, const json_t *patch, json_t **out, char *err, size_t errlen) {
    return patch_apply(PATCH_JSON, target, patch, NULL, out, err, errlen);
}

static int json_patch(const json_t *target, const json_t *patch, const struct patch_limits *lim, json_t **out,
                      char *err, size_t errlen, struct patch_size *tracked, size_t *work) {
    *out = NULL;
    if (!json_is_array(patch)) return core_fail(err, errlen, -EINVAL, "json patch must be an array of operations");
    if (json_array_size(patch) > PATCH_MAX_OPS)
        return core_fail(err, errlen, -E2BIG, "json patch has more than %d operations", PATCH_MAX_OPS);
    struct jp j = {.err = err, .errlen = errlen};
    snprintf(j.what, sizeof j.what, "json patch");
    pb_init(&j.b, lim, j.what, err, errlen);
    struct patch_size ts;
    int rc = pb_start(&j.b, target ? target : json_null(), &ts);
    if (rc) return rc;
    j.depth_ub = ts.depth;
    if (!(j.doc = target ? json_deep_copy(target) : json_null()))
        return core_fail(err, errlen, -ENOMEM, "out of memory");
    for (size_t i = 0; i < json_array_size(patch); i++) {
        j.opi = (int)i;
        rc = jp_op(&j, json_array_get(patch, i));
        if (rc) {
            json_decref(j.doc);
            return rc;
        }
    }
    *out = j.doc;
    if (tracked) *tracked = (struct patch_size){j.b.bytes, j.b.nodes, j.depth_ub};
    if (work) *work = j.b.work;
    return 0;
}

int patch_apply_counted(enum patch_type type, const json_t *target, const json_t *patch,
                        const struct patch_limits *lim, json_t **out, char *err, size_t errlen,
                        struct patch_size *tracked, size_t *work) {
    switch (type) {
    case PATCH_MERGE: return merge(target, patch, false, lim, out, err, errlen, tracked, work);
    case PATCH_MERGE_SHARING: return merge(target, patch, true, lim, out, err, errlen, tracked, work);
    case PATCH_JSON: return json_patch(target, patch, lim, out, err, errlen, tracked, work);
    case PATCH_STRATEGIC: return patch_strategic_lim(target, patch, lim, out, err, errlen, tracked, work);
    }
    *out = NULL;
    return core_fail(err, errlen, -EINVAL, "unknown patch type");
}

int patch_apply_tracked(enum patch_type type, const json_t *target, const json_t *patch,
                        const struct patch_limits *lim, json_t **out, char *err, size_t errlen,
                        struct patch_size *tracked) {
    return patch_apply_counted(type, target, patch, lim, out, err, errlen, tracked, NULL);
}

int patch_apply(enum patch_type type, const json_t *target, const json_t *patch, const struct patch_limits *lim,
                json_t **out, char *err, size_t errlen) {
    return patch_apply_tracked(type, target, patch, lim, out, err, errlen, NULL);
}
