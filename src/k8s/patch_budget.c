/* The account a patch keeps while it applies (patch_int.h). */
#include <errno.h>
#include <string.h>

#include "errmsg.h"
#include "patch_int.h"

#define REAL_BYTES 16 /* a real's share of the estimate */

static size_t int_bytes(json_int_t v) {
    size_t n = v < 0 ? 2 : 1;
    for (unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v; u >= 10; u /= 10) n++;
    return n;
}

/* Adds v's figures to *sz; level is v's own depth from where the walk began. */
static void measure(const json_t *v, int level, struct patch_size *sz) {
    sz->nodes++;
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        sz->bytes += 2;
        if (level + 1 > sz->depth) sz->depth = level + 1;
        if (level > OBJ_MAX_DEPTH) return; /* already refused: no deeper recursion */
        const char *k;
        size_t klen;
        json_t *m;
        json_object_keylen_foreach((json_t *)v, k, klen, m) {
            sz->bytes += klen + 4; /* "k": and a comma */
            measure(m, level + 1, sz);
        }
        return;
    }
    case JSON_ARRAY: {
        sz->bytes += 2;
        if (level + 1 > sz->depth) sz->depth = level + 1;
        if (level > OBJ_MAX_DEPTH) return;
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) {
            sz->bytes += 1;
            measure(e, level + 1, sz);
        }
        return;
    }
    case JSON_STRING: sz->bytes += json_string_length(v) + 2; return;
    case JSON_INTEGER: sz->bytes += int_bytes(json_integer_value(v)); return;
    case JSON_REAL: sz->bytes += REAL_BYTES; return;
    case JSON_TRUE: sz->bytes += 4; return;
    case JSON_FALSE: sz->bytes += 5; return;
    default: sz->bytes += 4; return; /* null */
    }
}

struct patch_size pb_value(const json_t *v) {
    struct patch_size sz = {0, 0, 0};
    if (v) measure(v, 0, &sz);
    return sz;
}

struct patch_size pb_member(const char *key, const json_t *v) {
    struct patch_size sz = pb_value(v);
    sz.bytes += strlen(key) + 4;
    return sz;
}

struct patch_size pb_element(const json_t *v) {
    struct patch_size sz = pb_value(v);
    sz.bytes += 1;
    return sz;
}

struct patch_size pb_inside(const json_t *v) {
    struct patch_size sz = pb_value(v);
    if (sz.nodes) sz.bytes -= 2, sz.nodes -= 1;
    return sz;
}

void patch_estimate(const json_t *v, size_t *bytes, size_t *nodes, int *depth) {
    struct patch_size sz = pb_value(v);
    if (bytes) *bytes = sz.bytes;
    if (nodes) *nodes = sz.nodes;
    if (depth) *depth = sz.depth;
}

void pb_init(struct patch_budget *b, const struct patch_limits *lim, const char *what, char *err, size_t errlen) {
    static const struct patch_limits dflt = PATCH_LIMITS_DEFAULT;
    memset(b, 0, sizeof *b);
    b->lim = lim ? *lim : dflt;
    b->what = what;
    b->err = err;
    b->errlen = errlen;
}

int pb_depth_ok(struct patch_budget *b, int at, int depth) {
    if (at + depth > b->lim.max_depth)
        return core_fail(b->err, b->errlen, -E2BIG, "%s: the patched object would be nested deeper than %d levels",
                         b->what, b->lim.max_depth);
    return 0;
}

static int pb_check(struct patch_budget *b) {
    if (b->bytes > b->lim.max_bytes)
        return core_fail(b->err, b->errlen, -E2BIG,
                         "%s: the patched object would be larger than %zu bytes, the limit of a stored object",
                         b->what, b->lim.max_bytes);
    if (b->nodes > b->lim.max_nodes)
        return core_fail(b->err, b->errlen, -E2BIG, "%s: the patched object would hold more than %zu values",
                         b->what, b->lim.max_nodes);
    return 0;
}

int pb_start(struct patch_budget *b, const json_t *doc, struct patch_size *out) {
    struct patch_size sz = pb_value(doc);
    if (out) *out = sz;
    b->bytes = sz.bytes;
    b->nodes = sz.nodes;
    int rc = pb_depth_ok(b, 0, sz.depth);
    return rc ? rc : pb_check(b);
}

int pb_grow(struct patch_budget *b, struct patch_size sz, int at) {
    b->bytes += sz.bytes;
    b->nodes += sz.nodes;
    int rc = pb_depth_ok(b, at, sz.depth);
    return rc ? rc : pb_check(b);
}

void pb_shrink(struct patch_budget *b, struct patch_size sz) {
    b->bytes = b->bytes > sz.bytes ? b->bytes - sz.bytes : 0;
    b->nodes = b->nodes > sz.nodes ? b->nodes - sz.nodes : 0;
}

int pb_fits(const struct patch_budget *b, struct patch_size add, struct patch_size minus, int at) {
    struct patch_budget t = *b;
    pb_shrink(&t, minus);
    return pb_grow(&t, add, at);
}

int pb_charge(struct patch_budget *b, size_t steps) {
    b->work += steps;
    if (b->work > b->lim.max_work)
        return core_fail(b->err, b->errlen, -E2BIG,
                         "%s: the patch needs more than %zu steps of work (values copied, compared or shifted); "
                         "split it into smaller patches", b->what, b->lim.max_work);
    return 0;
}
