/* Compiling an openAPIV3Schema into a node tree: structural checks, keyword
 * parsing, patterns (compiled by re2lite.c, bounded per schema), and default
 * checks. Validation, defaulting and pruning live in
 * schema_validate.c. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"
#include "schema_int.h"

/* Junctor subschemas (allOf/anyOf/oneOf/not) need no type and hold no defaults. */
#define IN_JUNCTOR 1

struct cctx {
    struct schema *s;
    char *err;
    size_t errlen;
    char path[512]; /* where we are, for messages; truncated when long */
};

static int cfail(struct cctx *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int cfail(struct cctx *c, int code, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t plen = strlen(c->path); /* a deep path shows its tail */
    const char *p = plen > 200 ? c->path + plen - 200 : c->path;
    return core_fail(c->err, c->errlen, code, "schema %s%s: %s", p == c->path ? "" : "...", p, msg);
}

static size_t path_push(struct cctx *c, const char *fmt, const char *a) {
    size_t len = strlen(c->path);
    snprintf(c->path + len, sizeof c->path - len, fmt, a);
    return len;
}

static void node_free(struct schema_node *n) {
    if (!n) return;
    for (size_t i = 0; i < n->nprops; i++) {
        free(n->props[i].name);
        node_free(n->props[i].node);
    }
    free(n->props);
    for (size_t i = 0; i < n->nrequired; i++) free(n->required[i]);
    free(n->required);
    node_free(n->items);
    node_free(n->addl);
    for (size_t i = 0; i < n->nall; i++) node_free(n->all_of[i]);
    for (size_t i = 0; i < n->nany; i++) node_free(n->any_of[i]);
    for (size_t i = 0; i < n->none_of; i++) node_free(n->one_of[i]);
    free(n->all_of);
    free(n->any_of);
    free(n->one_of);
    node_free(n->not_);
    regex_free(n->re);
    free(n->pattern);
    json_decref(n->enumv);
    json_decref(n->dflt);
    free(n);
}

void schema_free(struct schema *s) {
    if (!s) return;
    node_free(s->root);
    free(s);
}

const struct schema_node *schema_node_prop(const struct schema_node *n, const char *name) {
    size_t lo = 0, hi = n->nprops;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int d = strcmp(n->props[mid].name, name);
        if (d == 0) return n->props[mid].node;
        if (d < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

/* ---- patterns ---- */

/* Compiles a pattern with our RE2-dialect engine (regex.h): linear-time
 * matching, a program bounded per pattern and, here, per schema. */
static int compile_pattern(struct cctx *c, struct schema_node *n, const json_t *v) {
    if (!json_is_string(v)) return cfail(c, -EINVAL, "pattern must be a string");
    const char *p = json_string_value(v);
    size_t len = json_string_length(v);
    if (len > SCHEMA_MAX_PATTERN_LEN || strlen(p) != len)
        return cfail(c, -E2BIG, "pattern is longer than %d bytes or holds NUL", SCHEMA_MAX_PATTERN_LEN);
    if (++c->s->patterns > SCHEMA_MAX_PATTERNS)
        return cfail(c, -E2BIG, "more than %d patterns", SCHEMA_MAX_PATTERNS);
    if (!(n->pattern = strdup(p))) return -ENOMEM;
    char why[200];
    int rc = regex_compile(p, &n->re, why, sizeof why);
    if (rc == -ENOMEM) return rc;
    /* a long pattern is cut so that the reason still fits the message */
    if (rc) return cfail(c, rc, "pattern '%.200s%s' is not supported: %s", p, len > 200 ? "..." : "", why);
    c->s->pattern_insts += regex_insts(n->re);
    if (c->s->pattern_insts > SCHEMA_MAX_PATTERN_INSTS)
        return cfail(c, -E2BIG, "patterns compile to more than %d instructions in all (pattern '%.200s%s')",
                     SCHEMA_MAX_PATTERN_INSTS, p, len > 200 ? "..." : "");
    return 0;
}

/* ---- keywords ---- */

static int get_bool(struct cctx *c, const json_t *sch, const char *key, bool *out) {
    const json_t *v = json_object_get(sch, key);
    if (!v) return 0;
    if (!json_is_boolean(v)) return cfail(c, -EINVAL, "%s must be a boolean", key);
    *out = json_is_true(v);
    return 0;
}

static int get_count(struct cctx *c, const json_t *sch, const char *key, int64_t *out) {
    const json_t *v = json_object_get(sch, key);
    if (!v) return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return cfail(c, -EINVAL, "%s must be a non-negative integer", key);
    *out = json_integer_value(v);
    return 0;
}

static int get_number(struct cctx *c, const json_t *sch, const char *key, bool *has, double *out) {
    const json_t *v = json_object_get(sch, key);
    if (!v) return 0;
    if (!json_is_number(v)) return cfail(c, -EINVAL, "%s must be a number", key);
    *has = true;
    *out = json_number_value(v);
    return 0;
}

static int parse_type(struct cctx *c, const json_t *t, unsigned *types) {
    static const struct { const char *name; unsigned bit; } names[] = {
        {"object", SCHEMA_T_OBJECT}, {"array", SCHEMA_T_ARRAY},     {"string", SCHEMA_T_STRING},
        {"integer", SCHEMA_T_INTEGER}, {"number", SCHEMA_T_NUMBER}, {"boolean", SCHEMA_T_BOOLEAN},
    };
    if (!json_is_string(t)) return cfail(c, -EINVAL, "type must be a string");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(json_string_value(t), names[i].name) == 0) {
            *types = names[i].bit;
            return 0;
        }
    return cfail(c, -EINVAL,
                 "type: Unsupported value: \"%.64s\": supported values: \"array\", \"boolean\", \"integer\", "
                 "\"number\", \"object\", \"string\"",
                 json_string_value(t));
}

static void parse_format(struct schema_node *n, const json_t *f) {
    static const struct { const char *name; enum schema_format f; } names[] = {
        {"int32", SCHEMA_F_INT32}, {"int64", SCHEMA_F_INT64}, {"date-time", SCHEMA_F_DATE_TIME},
        {"date", SCHEMA_F_DATE},   {"byte", SCHEMA_F_BYTE},   {"uuid", SCHEMA_F_UUID},
    };
    if (!json_is_string(f)) return; /* kube-apiserver ignores formats it does not know */
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(json_string_value(f), names[i].name) == 0) {
            n->format = names[i].f;
            n->format_name = names[i].name;
        }
}

static int compile_node(struct cctx *c, const json_t *sch, int depth, int flags, struct schema_node **out);

static int prop_cmp(const void *a, const void *b) {
    return strcmp(((const struct schema_prop *)a)->name, ((const struct schema_prop *)b)->name);
}

static int compile_props(struct cctx *c, struct schema_node *n, const json_t *props, int depth, int flags) {
    if (!json_is_object(props)) return cfail(c, -EINVAL, "properties must be an object");
    size_t cnt = json_object_size(props);
    if (!cnt) return 0;
    if (!(n->props = calloc(cnt, sizeof *n->props))) return -ENOMEM;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)props, k, v) {
        struct schema_prop *p = &n->props[n->nprops];
        if (!(p->name = strdup(k))) return -ENOMEM;
        n->nprops++;
        size_t mark = path_push(c, ".properties.%s", k);
        int rc = compile_node(c, v, depth + 1, flags, &p->node);
        c->path[mark] = 0;
        if (rc) return rc;
    }
    qsort(n->props, n->nprops, sizeof *n->props, prop_cmp);
    return 0;
}

static int compile_list(struct cctx *c, const json_t *sch, const char *key, int depth, struct schema_node ***out,
                        size_t *nout) {
    const json_t *l = json_object_get(sch, key);
    if (!l) return 0;
    if (!json_is_array(l) || !json_array_size(l)) return cfail(c, -EINVAL, "%s must be a non-empty array", key);
    if (!(*out = calloc(json_array_size(l), sizeof **out))) return -ENOMEM;
    for (size_t i = 0; i < json_array_size(l); i++) {
        char idx[32];
        snprintf(idx, sizeof idx, "%zu", i);
        size_t mark = path_push(c, ".%s", key);
        path_push(c, "[%s]", idx);
        int rc = compile_node(c, json_array_get(l, i), depth + 1, IN_JUNCTOR, &(*out)[i]);
        c->path[mark] = 0;
        (*nout)++;
        if (rc) return rc;
    }
    return 0;
}

/* A default, once its own nested defaults are applied, must validate
 * against its node and survive pruning unchanged, as kube-apiserver demands
 * of CRD defaults. */
static int check_default(struct cctx *c, const struct schema_node *n) {
    json_t *copy = json_deep_copy(n->dflt);
    if (!copy) return -ENOMEM;
    int rc = schema_node_defaults(n, copy);
    json_t *pruned = rc ? NULL : json_deep_copy(copy);
    if (!rc && !pruned) rc = -ENOMEM;
    if (rc) {
        json_decref(copy);
        return rc;
    }
    schema_node_prune(n, pruned);
    bool same = json_equal(copy, pruned);
    json_decref(pruned);
    if (!same) {
        json_decref(copy);
        return cfail(c, -EINVAL, "default must not have unknown fields");
    }
    struct schema_result res = {0};
    schema_node_check(n, copy, "default", &res);
    json_decref(copy);
    if (res.n) rc = cfail(c, -EINVAL, "default is invalid: %s: %s", res.errors[0].field, res.errors[0].message);
    schema_result_free(&res);
    return rc;
}

static int compile_node(struct cctx *c, const json_t *sch, int depth, int flags, struct schema_node **out) {
    static const char *const forbidden[] = {"$ref",        "patternProperties", "additionalItems", "definitions",
                                            "dependencies", "$schema",          "id"};
    *out = NULL;
    if (depth > SCHEMA_MAX_DEPTH) return cfail(c, -E2BIG, "nested deeper than %d levels", SCHEMA_MAX_DEPTH);
    if (++c->s->nodes > SCHEMA_MAX_NODES) return cfail(c, -E2BIG, "more than %d schema nodes", SCHEMA_MAX_NODES);
    if (!json_is_object(sch)) return cfail(c, -EINVAL, "must be an object");
    for (size_t i = 0; i < sizeof forbidden / sizeof forbidden[0]; i++)
        if (json_object_get(sch, forbidden[i])) return cfail(c, -EINVAL, "%s is not supported", forbidden[i]);
    if (json_is_true(json_object_get(sch, "uniqueItems")))
        return cfail(c, -EINVAL, "uniqueItems cannot be set to true since the runtime complexity becomes quadratic");

    struct schema_node *n = calloc(1, sizeof *n);
    if (!n) return -ENOMEM;
    *out = n;
    n->min_len = n->max_len = n->min_items = n->max_items = n->min_props = n->max_props = -1;
    int rc;
    const json_t *t = json_object_get(sch, "type");
    if (t && (rc = parse_type(c, t, &n->types))) return rc;
    if ((rc = get_bool(c, sch, "nullable", &n->nullable)) ||
        (rc = get_bool(c, sch, "x-kubernetes-int-or-string", &n->int_or_string)) ||
        (rc = get_bool(c, sch, "x-kubernetes-preserve-unknown-fields", &n->preserve_unknown)) ||
        (rc = get_bool(c, sch, "x-kubernetes-embedded-resource", &n->embedded)) ||
        (rc = get_bool(c, sch, "exclusiveMinimum", &n->excl_min)) ||
        (rc = get_bool(c, sch, "exclusiveMaximum", &n->excl_max)))
        return rc;
    if (n->int_or_string && n->types) return cfail(c, -EINVAL, "type must be empty with x-kubernetes-int-or-string");
    if (!n->types && !n->int_or_string && !n->preserve_unknown && !(flags & IN_JUNCTOR))
        return cfail(c, -EINVAL, "type: Required value: must not be empty for specified object fields");
    if (n->embedded && n->types != SCHEMA_T_OBJECT)
        return cfail(c, -EINVAL, "x-kubernetes-embedded-resource requires type object");

    bool objectish = n->types == SCHEMA_T_OBJECT || (!n->types && (flags & IN_JUNCTOR));
    const json_t *props = json_object_get(sch, "properties");
    const json_t *addl = json_object_get(sch, "additionalProperties");
    const json_t *req = json_object_get(sch, "required");
    const json_t *items = json_object_get(sch, "items");
    if ((props || addl || req || json_object_get(sch, "minProperties") || json_object_get(sch, "maxProperties")) &&
        !objectish)
        return cfail(c, -EINVAL, "properties, additionalProperties, required, min/maxProperties need type object");
    if (props && addl) return cfail(c, -EINVAL, "additionalProperties and properties are mutually exclusive");
    if (items && n->types != SCHEMA_T_ARRAY && !(!n->types && (flags & IN_JUNCTOR)))
        return cfail(c, -EINVAL, "items needs type array");
    if (n->types == SCHEMA_T_ARRAY && !items && !(flags & IN_JUNCTOR))
        return cfail(c, -EINVAL, "items: Required value: must be specified for type array");

    if (props && (rc = compile_props(c, n, props, depth, flags & IN_JUNCTOR))) return rc;
    if (req) {
        if (!json_is_array(req)) return cfail(c, -EINVAL, "required must be an array of strings");
        if (json_array_size(req) && !(n->required = calloc(json_array_size(req), sizeof *n->required)))
            return -ENOMEM;
        for (size_t i = 0; i < json_array_size(req); i++) {
            const json_t *r = json_array_get(req, i);
            if (!json_is_string(r)) return cfail(c, -EINVAL, "required must be an array of strings");
            if (!(n->required[n->nrequired] = strdup(json_string_value(r)))) return -ENOMEM;
            n->nrequired++;
        }
    }
    if (addl) {
        if (json_is_boolean(addl)) {
            n->addl_any = json_is_true(addl);
            n->addl_none = !n->addl_any;
        } else {
            size_t mark = path_push(c, "%s", ".additionalProperties");
            rc = compile_node(c, addl, depth + 1, flags & IN_JUNCTOR, &n->addl);
            c->path[mark] = 0;
            if (rc) return rc;
        }
    }
    if (items) {
        if (!json_is_object(items)) return cfail(c, -EINVAL, "items must be a schema object");
        size_t mark = path_push(c, "%s", ".items");
        rc = compile_node(c, items, depth + 1, flags & IN_JUNCTOR, &n->items);
        c->path[mark] = 0;
        if (rc) return rc;
    }
    if ((rc = get_count(c, sch, "minLength", &n->min_len)) || (rc = get_count(c, sch, "maxLength", &n->max_len)) ||
        (rc = get_count(c, sch, "minItems", &n->min_items)) || (rc = get_count(c, sch, "maxItems", &n->max_items)) ||
        (rc = get_count(c, sch, "minProperties", &n->min_props)) ||
        (rc = get_count(c, sch, "maxProperties", &n->max_props)))
        return rc;
    bool has_mult = false;
    if ((rc = get_number(c, sch, "minimum", &n->has_min, &n->min)) ||
        (rc = get_number(c, sch, "maximum", &n->has_max, &n->max)) ||
        (rc = get_number(c, sch, "multipleOf", &has_mult, &n->multiple_of)))
        return rc;
    if (has_mult && !(n->multiple_of > 0)) return cfail(c, -EINVAL, "multipleOf must be greater than 0");
    const json_t *pat = json_object_get(sch, "pattern");
    if (pat && (rc = compile_pattern(c, n, pat))) return rc;
    const json_t *fmt = json_object_get(sch, "format");
    if (fmt) parse_format(n, fmt);
    const json_t *en = json_object_get(sch, "enum");
    if (en) {
        if (!json_is_array(en) || !json_array_size(en)) return cfail(c, -EINVAL, "enum must be a non-empty array");
        if (!(n->enumv = json_deep_copy(en))) return -ENOMEM;
    }
    if ((rc = compile_list(c, sch, "allOf", depth, &n->all_of, &n->nall)) ||
        (rc = compile_list(c, sch, "anyOf", depth, &n->any_of, &n->nany)) ||
        (rc = compile_list(c, sch, "oneOf", depth, &n->one_of, &n->none_of)))
        return rc;
    const json_t *nt = json_object_get(sch, "not");
    if (nt) {
        size_t mark = path_push(c, "%s", ".not");
        rc = compile_node(c, nt, depth + 1, IN_JUNCTOR, &n->not_);
        c->path[mark] = 0;
        if (rc) return rc;
    }
    const json_t *d = json_object_get(sch, "default");
    if (d) {
        if (flags & IN_JUNCTOR) return cfail(c, -EINVAL, "default is not allowed inside allOf, anyOf, oneOf or not");
        if (!(n->dflt = json_deep_copy(d))) return -ENOMEM;
        if ((rc = check_default(c, n))) return rc;
    }
    return 0;
}

int schema_compile(const json_t *openapi_v3_schema, struct schema **out, char *err, size_t errlen) {
    *out = NULL;
    struct schema *s = calloc(1, sizeof *s);
    if (!s) return -ENOMEM;
    struct cctx c = {.s = s, .err = err, .errlen = errlen, .path = "openAPIV3Schema"};
    int rc = compile_node(&c, openapi_v3_schema, 1, 0, &s->root);
    if (rc == 0 && s->root->types != SCHEMA_T_OBJECT)
        rc = cfail(&c, -EINVAL, "type: the root must be of type object");
    if (rc == -ENOMEM) core_fail(err, errlen, rc, "schema: out of memory");
    if (rc) {
        schema_free(s);
        return rc;
    }
    *out = s;
    return 0;
}
