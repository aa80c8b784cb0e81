/* Validation, defaulting and pruning of custom resources against a compiled
 * schema (schema.c). Every walk follows the schema tree, so recursion depth is
 * bounded by SCHEMA_MAX_DEPTH whatever the object holds. Messages follow
 * kube-apiserver's: a field.Error body (`Invalid value: <v>: <detail>`) whose
 * detail is kube-openapi's (`<path> in body should ...`). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsontype.h"
#include "patch.h"
#include "schema_int.h"

#define R_REQUIRED "FieldValueRequired"
#define R_INVALID "FieldValueInvalid"
#define R_TYPE "FieldValueTypeInvalid"
#define R_NOT_SUPPORTED "FieldValueNotSupported"
#define R_TOO_LONG "FieldValueTooLong"
#define R_TOO_MANY "FieldValueTooMany"
#define R_INTERNAL "InternalError"

struct vctx {
    struct schema_result *res;
    size_t limit; /* errors wanted in res; 1 when only asking "is it valid?" */
    char *path;   /* current field path, NUL-terminated */
    size_t len, cap;
    size_t steps; /* checks (and regex states, SCHEMA_REGEX_STATES_PER_STEP a step) so far, shared with probes */
    bool oom, over;
};

/* ---- paths and messages ---- */

static bool path_reserve(struct vctx *c, size_t more) {
    if (c->len + more + 1 <= c->cap) return true;
    size_t cap = c->cap ? c->cap : 128;
    while (cap < c->len + more + 1) cap *= 2;
    char *p = realloc(c->path, cap);
    if (!p) {
        c->oom = true;
        return false;
    }
    c->path = p;
    c->cap = cap;
    return true;
}

/* Appends ".key" (or "key" at the start). A key longer than
 * SCHEMA_MAX_VALUE_SHOWN bytes is cut and marked "...", so that paths (which
 * every message repeats) stay within SCHEMA_MAX_DEPTH such segments. */
static size_t push_key(struct vctx *c, const char *key) {
    size_t mark = c->len, kl = strlen(key);
    bool cut = kl > SCHEMA_MAX_VALUE_SHOWN;
    if (cut) {
        kl = SCHEMA_MAX_VALUE_SHOWN;
        while (kl && ((unsigned char)key[kl] & 0xC0) == 0x80) kl--;
    }
    if (!path_reserve(c, kl + 4)) return mark;
    if (c->len) c->path[c->len++] = '.';
    memcpy(c->path + c->len, key, kl);
    c->len += kl;
    if (cut) {
        memcpy(c->path + c->len, "...", 3);
        c->len += 3;
    }
    c->path[c->len] = 0;
    return mark;
}

static size_t push_index(struct vctx *c, size_t i) {
    size_t mark = c->len;
    char digits[24];
    size_t nd = 0;
    if (!path_reserve(c, 24)) return mark;
    do digits[nd++] = (char)('0' + i % 10);
    while ((i /= 10) != 0);
    c->path[c->len++] = '[';
    while (nd) c->path[c->len++] = digits[--nd];
    c->path[c->len++] = ']';
    c->path[c->len] = 0;
    return mark;
}

static void pop(struct vctx *c, size_t mark) {
    c->len = mark;
    if (c->path) c->path[mark] = 0;
}

static const char *cur_path(const struct vctx *c) { return c->path ? c->path : ""; }

/* Stop walking: out of memory, or one error past the cap has been seen (so
 * that truncated is exact), or a yes/no probe has its answer. */
static bool full(const struct vctx *c) {
    return c->oom || c->over || c->res->truncated || (c->limit < SCHEMA_MAX_ERRORS && c->res->n >= c->limit);
}

static char *vformat(const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0) return NULL;
    char *s = malloc((size_t)n + 1);
    if (s) vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}

static int result_vadd(struct schema_result *r, const char *reason, const char *field, const char *fmt, va_list ap) {
    if (r->n >= SCHEMA_MAX_ERRORS) {
        r->truncated = true;
        return 0;
    }
    if (!r->errors && !(r->errors = calloc(SCHEMA_MAX_ERRORS, sizeof *r->errors))) return -ENOMEM;
    char *msg = vformat(fmt, ap);
    char *f = strdup(field);
    if (!msg || !f) {
        free(msg);
        free(f);
        return -ENOMEM;
    }
    r->errors[r->n++] = (struct schema_error){.reason = reason, .field = f, .message = msg};
    return 0;
}

int schema_result_add(struct schema_result *res, const char *reason, const char *field, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = result_vadd(res, reason, field, fmt, ap);
    va_end(ap);
    return rc;
}

static void add_error(struct vctx *c, const char *reason, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add_error(struct vctx *c, const char *reason, const char *fmt, ...) {
    struct schema_result *r = c->res;
    if (c->oom) return;
    if (r->n >= c->limit) {
        r->truncated = true;
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    if (result_vadd(r, reason, cur_path(c), fmt, ap)) c->oom = true;
    va_end(ap);
}

/* A float64 as Go's %v prints it: the shortest digits that read back as d,
 * in %e form when the exponent is < -4 or >= 6 (1e+06, 0.35, 10). */
static void fmt_num(double d, char *buf, size_t len) {
    int prec = 1;
    for (; prec < 17; prec++) {
        snprintf(buf, len, "%.*e", prec - 1, d);
        if (strtod(buf, NULL) == d) break;
    }
    snprintf(buf, len, "%.*e", prec - 1, d);
    const char *e = strchr(buf, 'e');
    int exp = e ? atoi(e + 1) : 0;
    if (!isfinite(d) || exp < -4 || exp >= 6) return;
    snprintf(buf, len, "%.*f", prec - 1 - exp > 0 ? prec - 1 - exp : 0, d);
}

/* Appends s quoted as Go's %q would (ASCII escapes; UTF-8 passes through),
 * keeping at most SCHEMA_MAX_VALUE_SHOWN source bytes. buf needs
 * 4 * SCHEMA_MAX_VALUE_SHOWN + 8 bytes. */
static void quote(const char *s, size_t slen, char *buf) {
    size_t o = 0, n = slen;
    bool cut = false;
    if (n > SCHEMA_MAX_VALUE_SHOWN) {
        n = SCHEMA_MAX_VALUE_SHOWN;
        while (n && ((unsigned char)s[n] & 0xC0) == 0x80) n--; /* do not split a rune */
        cut = true;
    }
    buf[o++] = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        switch (ch) {
        case '"': buf[o++] = '\\'; buf[o++] = '"'; break;
        case '\\': buf[o++] = '\\'; buf[o++] = '\\'; break;
        case '\n': buf[o++] = '\\'; buf[o++] = 'n'; break;
        case '\t': buf[o++] = '\\'; buf[o++] = 't'; break;
        case '\r': buf[o++] = '\\'; buf[o++] = 'r'; break;
        default:
            if (ch < 0x20 || ch == 0x7f) o += (size_t)sprintf(buf + o, "\\x%02x", ch);
            else buf[o++] = (char)ch;
        }
    }
    if (cut) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o++] = '"';
    buf[o] = 0;
}

#define VALUE_BUF (4 * SCHEMA_MAX_VALUE_SHOWN + 8)

/* A bad value as field.Error prints it: strings quoted, numbers and booleans
 * bare, null as "null", objects and arrays as compact JSON (Go prints its
 * %#v there). */
static void show_value(const json_t *v, char *buf) {
    char num[64];
    switch (json_typeof(v)) {
    case JSON_STRING: quote(json_string_value(v), json_string_length(v), buf); return;
    case JSON_INTEGER: snprintf(buf, VALUE_BUF, "%" PRId64, (int64_t)json_integer_value(v)); return;
    case JSON_REAL: fmt_num(json_real_value(v), num, sizeof num); snprintf(buf, VALUE_BUF, "%s", num); return;
    case JSON_TRUE: snprintf(buf, VALUE_BUF, "true"); return;
    case JSON_FALSE: snprintf(buf, VALUE_BUF, "false"); return;
    case JSON_NULL: snprintf(buf, VALUE_BUF, "\"null\""); return;
    default: {
        char *s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
        if (!s) {
            snprintf(buf, VALUE_BUF, "%s", json_is_object(v) ? "{...}" : "[...]");
            return;
        }
        size_t l = strlen(s);
        if (l > SCHEMA_MAX_VALUE_SHOWN) snprintf(buf, VALUE_BUF, "%.*s...", SCHEMA_MAX_VALUE_SHOWN, s);
        else snprintf(buf, VALUE_BUF, "%s", s);
        free(s);
    }
    }
}

static const char *type_name(const struct schema_node *n) {
    if (n->int_or_string) return "integer,string";
    switch (n->types) {
    case SCHEMA_T_OBJECT: return "object";
    case SCHEMA_T_ARRAY: return "array";
    case SCHEMA_T_STRING: return "string";
    case SCHEMA_T_INTEGER: return "integer";
    case SCHEMA_T_NUMBER: return "number";
    default: return "boolean";
    }
}

static bool is_integral(double d) { return isfinite(d) && d == floor(d) && fabs(d) < 9.2e18; }

static bool type_ok(unsigned want, const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return want & SCHEMA_T_OBJECT;
    case JSON_ARRAY: return want & SCHEMA_T_ARRAY;
    case JSON_STRING: return want & SCHEMA_T_STRING;
    case JSON_INTEGER: return want & (SCHEMA_T_INTEGER | SCHEMA_T_NUMBER);
    case JSON_REAL:
        return (want & SCHEMA_T_NUMBER) || ((want & SCHEMA_T_INTEGER) && is_integral(json_real_value(v)));
    case JSON_TRUE:
    case JSON_FALSE: return want & SCHEMA_T_BOOLEAN;
    default: return false;
    }
}

/* `Invalid value: "<actual>": <path> in body must be of type <t>: "<actual>"` */
static void type_error(struct vctx *c, const char *want, const char *actual) {
    add_error(c, R_TYPE, "Invalid value: \"%s\": %s in body must be of type %s: \"%s\"", actual, cur_path(c), want,
              actual);
}

/* ---- formats ---- */

static bool digits(const char *s, int n) {
    for (int i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return false;
    return true;
}

static int num2(const char *s) { return (s[0] - '0') * 10 + (s[1] - '0'); }

static bool is_date(const char *s) {
    if (!digits(s, 4) || s[4] != '-' || !digits(s + 5, 2) || s[7] != '-' || !digits(s + 8, 2)) return false;
    int m = num2(s + 5), d = num2(s + 8);
    return m >= 1 && m <= 12 && d >= 1 && d <= 31;
}

/* RFC 3339, loosely (as Go's strfmt accepts): a date, T/t/space, hh:mm
 * with optional :ss and fraction, optional Z or ±hh[:]mm. */
static bool is_date_time(const char *s) {
    if (!is_date(s) || (s[10] != 'T' && s[10] != 't' && s[10] != ' ')) return false;
    s += 11;
    if (!digits(s, 2) || s[2] != ':' || !digits(s + 3, 2) || num2(s) > 23 || num2(s + 3) > 59) return false;
    s += 5;
    if (*s == ':') {
        if (!digits(s + 1, 2) || num2(s + 1) > 60) return false;
        s += 3;
        if (*s == '.') {
            if (!digits(s + 1, 1)) return false;
            s++;
            while (*s >= '0' && *s <= '9') s++;
        }
    }
    if (*s == 'Z' || *s == 'z') return s[1] == 0;
    if (*s == '+' || *s == '-') {
        s++;
        if (!digits(s, 2) || num2(s) > 23) return false;
        s += 2;
        if (*s == ':') s++;
        return digits(s, 2) && num2(s) <= 59 && s[2] == 0;
    }
    return *s == 0;
}

static bool is_b64(const char *s, size_t len) {
    if (len % 4) return false;
    size_t pad = 0;
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        if (ch == '=') {
            if (i < len - 2) return false;
            pad++;
            continue;
        }
        if (pad) return false;
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '+' ||
              ch == '/'))
            return false;
    }
    return true;
}

static bool is_uuid(const char *s, size_t len) {
    if (len != 36) return false;
    for (size_t i = 0; i < 36; i++) {
        char ch = s[i];
        bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? ch != '-' : !((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F')))
            return false;
    }
    return true;
}

static bool format_ok(const struct schema_node *n, const json_t *v) {
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        size_t len = json_string_length(v);
        switch (n->format) {
        case SCHEMA_F_DATE_TIME: return strlen(s) == len && is_date_time(s);
        case SCHEMA_F_DATE: return len == 10 && is_date(s);
        case SCHEMA_F_BYTE: return is_b64(s, len);
        case SCHEMA_F_UUID: return is_uuid(s, len);
        default: return true;
        }
    }
    if (n->format == SCHEMA_F_INT32) {
        double d = json_number_value(v);
        return !json_is_number(v) || (d >= -2147483648.0 && d <= 2147483647.0);
    }
    return true;
}

/* The "supported values" of a NotSupported error: strings as they are,
 * others as JSON, each quoted, ", "-separated; cut after about 4 KiB. */
static char *enum_list(const json_t *enumv) {
    enum { CAP = 16 * SCHEMA_MAX_VALUE_SHOWN };
    char *list = malloc(CAP + VALUE_BUF + 8);
    size_t o = 0;
    if (!list) return NULL;
    list[0] = 0;
    for (size_t i = 0; i < json_array_size(enumv); i++) {
        if (o > CAP) {
            memcpy(list + o, ", ...", 6);
            break;
        }
        const json_t *e = json_array_get(enumv, i);
        char *js = json_is_string(e) ? NULL : json_dumps(e, JSON_COMPACT | JSON_ENCODE_ANY | JSON_SORT_KEYS);
        const char *raw = json_is_string(e) ? json_string_value(e) : js ? js : "";
        if (i) {
            memcpy(list + o, ", ", 3);
            o += 2;
        }
        quote(raw, json_is_string(e) ? json_string_length(e) : strlen(raw), list + o);
        o += strlen(list + o);
        free(js);
    }
    return list;
}

/* ---- validation ---- */

static void check(struct vctx *c, const struct schema_node *n, const json_t *v, bool root);

static size_t rune_count(const char *s, size_t len) {
    size_t r = 0;
    for (size_t i = 0; i < len; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80) r++;
    return r;
}

/* Runs sub against v into a scratch result and says whether it found none. */
static bool passes(struct vctx *c, const struct schema_node *sub, const json_t *v) {
    struct schema_result scratch = {0}, *saved = c->res;
    size_t saved_limit = c->limit;
    c->res = &scratch;
    c->limit = 1;
    check(c, sub, v, false);
    c->res = saved;
    c->limit = saved_limit;
    bool ok = scratch.n == 0;
    schema_result_free(&scratch);
    return ok;
}

static void check_string(struct vctx *c, const struct schema_node *n, const json_t *v) {
    char shown[VALUE_BUF];
    const char *s = json_string_value(v);
    size_t len = json_string_length(v);
    if (n->max_len >= 0 && rune_count(s, len) > (size_t)n->max_len)
        add_error(c, R_TOO_LONG, "Too long: may not be longer than %" PRId64, n->max_len);
    if (n->min_len >= 0 && rune_count(s, len) < (size_t)n->min_len) {
        show_value(v, shown);
        add_error(c, R_INVALID, "Invalid value: %s: %s in body should be at least %" PRId64 " chars long", shown,
                  cur_path(c), n->min_len);
    }
    if (!n->re) return;
    /* the search spends from the same budget, in states (a part of a step
     * each, rounded up): a huge value cannot stall the server */
    size_t states = c->steps * SCHEMA_REGEX_STATES_PER_STEP;
    int m = regex_match(n->re, s, len, &states, (size_t)SCHEMA_MAX_STEPS * SCHEMA_REGEX_STATES_PER_STEP);
    c->steps = (states + SCHEMA_REGEX_STATES_PER_STEP - 1) / SCHEMA_REGEX_STATES_PER_STEP;
    if (m == -E2BIG) c->over = true;
    else if (m < 0) c->oom = true;
    else if (m == 0) {
        show_value(v, shown);
        add_error(c, R_INVALID, "Invalid value: %s: %s in body should match '%s'", shown, cur_path(c), n->pattern);
    }
}

static void check_number(struct vctx *c, const struct schema_node *n, const json_t *v) {
    char shown[VALUE_BUF], lim[64];
    double d = json_number_value(v);
    if (n->has_max && (n->excl_max ? d >= n->max : d > n->max)) {
        show_value(v, shown);
        fmt_num(n->max, lim, sizeof lim);
        add_error(c, R_INVALID, "Invalid value: %s: %s in body should be less than %s%s", shown, cur_path(c),
                  n->excl_max ? "" : "or equal to ", lim);
    }
    if (n->has_min && (n->excl_min ? d <= n->min : d < n->min)) {
        show_value(v, shown);
        fmt_num(n->min, lim, sizeof lim);
        add_error(c, R_INVALID, "Invalid value: %s: %s in body should be greater than %s%s", shown, cur_path(c),
                  n->excl_min ? "" : "or equal to ", lim);
    }
    if (n->multiple_of > 0) {
        double q = d / n->multiple_of;
        if (!isfinite(q) || fabs(q - nearbyint(q)) > 1e-9 * fmax(1.0, fabs(q))) {
            show_value(v, shown);
            fmt_num(n->multiple_of, lim, sizeof lim);
            add_error(c, R_INVALID, "Invalid value: %s: %s in body should be a multiple of %s", shown, cur_path(c),
                      lim);
        }
    }
}

static void check_array(struct vctx *c, const struct schema_node *n, const json_t *v) {
    size_t cnt = json_array_size(v);
    if (n->max_items >= 0 && cnt > (size_t)n->max_items)
        add_error(c, R_TOO_MANY, "Too many: %zu: must have at most %" PRId64 " item%s", cnt, n->max_items,
                  n->max_items == 1 ? "" : "s");
    if (n->min_items >= 0 && cnt < (size_t)n->min_items)
        add_error(c, R_INVALID, "Invalid value: %zu: %s in body should have at least %" PRId64 " items", cnt,
                  cur_path(c), n->min_items);
    if (!n->items) return;
    for (size_t i = 0; i < cnt && !full(c); i++) {
        size_t mark = push_index(c, i);
        check(c, n->items, json_array_get(v, i), false);
        pop(c, mark);
    }
}

/* apiVersion and kind (strings) and metadata (an object) at the root and in
 * embedded resources; true when key is one of them. */
static bool check_meta_field(struct vctx *c, const char *key, const json_t *val) {
    bool str = strcmp(key, "apiVersion") == 0 || strcmp(key, "kind") == 0;
    if (!str && strcmp(key, "metadata") != 0) return false;
    if (str ? !json_is_string(val) : !json_is_object(val)) {
        size_t mark = push_key(c, key);
        type_error(c, str ? "string" : "object", json_type_name(val));
        pop(c, mark);
    }
    return true;
}

static void check_object(struct vctx *c, const struct schema_node *n, const json_t *v, bool root) {
    size_t cnt = json_object_size(v);
    if (n->max_props >= 0 && cnt > (size_t)n->max_props)
        add_error(c, R_TOO_MANY, "Too many: %zu: must have at most %" PRId64 " item%s", cnt, n->max_props,
                  n->max_props == 1 ? "" : "s");
    if (n->min_props >= 0 && cnt < (size_t)n->min_props)
        add_error(c, R_INVALID, "Invalid value: %zu: %s in body should have at least %" PRId64 " properties", cnt,
                  cur_path(c), n->min_props);
    for (size_t i = 0; i < n->nrequired && !full(c); i++) {
        if (json_object_get(v, n->required[i])) continue;
        size_t mark = push_key(c, n->required[i]);
        add_error(c, R_REQUIRED, "Required value");
        pop(c, mark);
    }
    if (n->embedded) {
        static const char *const need[] = {"apiVersion", "kind"};
        for (size_t i = 0; i < 2; i++) {
            const json_t *f = json_object_get(v, need[i]);
            if (f && (!json_is_string(f) || json_string_length(f))) continue;
            size_t mark = push_key(c, need[i]);
            add_error(c, R_REQUIRED, "Required value: must not be empty");
            pop(c, mark);
        }
    }
    const char *k;
    json_t *val;
    json_object_foreach((json_t *)v, k, val) {
        if (full(c)) return;
        if ((root || n->embedded) && check_meta_field(c, k, val)) continue;
        const struct schema_node *p = schema_node_prop(n, k);
        if (!p) p = n->addl;
        size_t mark = push_key(c, k);
        if (p) check(c, p, val, false);
        else if (n->addl_none) {
            char *where = strdup(cur_path(c));
            pop(c, mark);
            if (!where) {
                c->oom = true;
                return;
            }
            add_error(c, R_INVALID, "Invalid value: \"\": %s in body is a forbidden property", where);
            free(where);
            continue;
        }
        pop(c, mark);
    }
}

static void check_junctors(struct vctx *c, const struct schema_node *n, const json_t *v) {
    for (size_t i = 0; i < n->nall && !full(c); i++) check(c, n->all_of[i], v, false);
    if (n->nany) {
        bool ok = false;
        for (size_t i = 0; i < n->nany && !ok && !c->oom; i++) ok = passes(c, n->any_of[i], v);
        if (!ok)
            add_error(c, R_INVALID, "Invalid value: \"\": %s in body must validate at least one schema (anyOf)",
                      cur_path(c));
    }
    if (n->none_of) {
        size_t good = 0;
        for (size_t i = 0; i < n->none_of && good < 2 && !c->oom; i++) good += passes(c, n->one_of[i], v);
        if (good != 1)
            add_error(c, R_INVALID, "Invalid value: \"\": %s in body must validate one and only one schema (oneOf)",
                      cur_path(c));
    }
    if (n->not_ && passes(c, n->not_, v))
        add_error(c, R_INVALID, "Invalid value: \"\": %s in body must not validate the schema (not)", cur_path(c));
}

static void check(struct vctx *c, const struct schema_node *n, const json_t *v, bool root) {
    if (full(c)) return;
    if (++c->steps > SCHEMA_MAX_STEPS) {
        c->over = true;
        return;
    }
    if (json_is_null(v)) {
        if (n->nullable || (!n->types && !n->int_or_string)) return;
        type_error(c, type_name(n), "null");
        return;
    }
    unsigned want = n->int_or_string ? SCHEMA_T_INTEGER | SCHEMA_T_STRING : n->types;
    if (want && !type_ok(want, v)) {
        type_error(c, type_name(n), json_type_name(v));
        return;
    }
    if (n->format && !format_ok(n, v)) {
        char shown[VALUE_BUF];
        show_value(v, shown);
        add_error(c, R_TYPE, "Invalid value: %s: %s in body must be of type %s: %s", shown, cur_path(c),
                  n->format_name, shown);
    }
    if (n->enumv) {
        bool found = false;
        for (size_t i = 0; i < json_array_size(n->enumv) && !found; i++)
            found = patch_value_equal(json_array_get(n->enumv, i), v);
        if (!found) {
            char shown[VALUE_BUF];
            show_value(v, shown);
            char *list = enum_list(n->enumv);
            if (!list) {
                c->oom = true;
                return;
            }
            add_error(c, R_NOT_SUPPORTED, "Unsupported value: %s: supported values: %s", shown, list);
            free(list);
        }
    }
    switch (json_typeof(v)) {
    case JSON_STRING: check_string(c, n, v); break;
    case JSON_INTEGER:
    case JSON_REAL: check_number(c, n, v); break;
    case JSON_ARRAY: check_array(c, n, v); break;
    case JSON_OBJECT: check_object(c, n, v, root); break;
    default: break;
    }
    check_junctors(c, n, v);
}

static int run_check(const struct schema_node *n, const json_t *v, const char *path, bool root,
                     struct schema_result *res) {
    struct vctx c = {.res = res, .limit = SCHEMA_MAX_ERRORS};
    size_t before = res->n;
    if (path && *path) push_key(&c, path);
    check(&c, n, v, root);
    if (c.over && !c.oom) { /* one error past the cap if need be: the object is not accepted */
        c.over = false;
        c.limit = SCHEMA_MAX_ERRORS + 1;
        pop(&c, 0);
        if (res->n >= SCHEMA_MAX_ERRORS) {
            free(res->errors[res->n - 1].field);
            free(res->errors[res->n - 1].message);
            res->n--;
            res->truncated = true;
        }
        add_error(&c, R_INTERNAL, "Internal error: validation needs more than %d steps", SCHEMA_MAX_STEPS);
    }
    free(c.path);
    if (c.oom) return -ENOMEM;
    return res->n > before ? -EINVAL : 0;
}

size_t schema_node_check(const struct schema_node *n, const json_t *v, const char *path, struct schema_result *res) {
    size_t before = res->n;
    run_check(n, v, path, false, res);
    return res->n - before;
}

int schema_validate(const struct schema *s, const json_t *obj, struct schema_result *res) {
    return run_check(s->root, obj, NULL, true, res);
}

void schema_result_free(struct schema_result *res) {
    if (!res) return;
    for (size_t i = 0; i < res->n; i++) {
        free(res->errors[i].field);
        free(res->errors[i].message);
    }
    free(res->errors);
    *res = (struct schema_result){0};
}

json_t *schema_result_causes(const struct schema_result *res) {
    json_t *a = json_array();
    for (size_t i = 0; a && i < res->n; i++) {
        const struct schema_error *e = &res->errors[i];
        if (json_array_append_new(a, json_pack("{ssssss}", "reason", e->reason, "message", e->message, "field",
                                               e->field)) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

int schema_result_format(const struct schema_result *res, char *buf, size_t len) {
    size_t o = 0;
    bool many = res->n > 1;
#define PUT(...)                                                                          \
    do {                                                                                  \
        int w_ = snprintf(o < len ? buf + o : NULL, o < len ? len - o : 0, __VA_ARGS__);  \
        if (w_ > 0) o += (size_t)w_;                                                      \
    } while (0)
    if (len) buf[0] = 0;
    if (many) PUT("[");
    for (size_t i = 0; i < res->n; i++) {
        const struct schema_error *e = &res->errors[i];
        PUT("%s%s%s%s", i ? ", " : "", e->field, *e->field ? ": " : "", e->message);
    }
    if (many) PUT("]");
#undef PUT
    return (int)o;
}

/* ---- defaulting ---- */

static bool is_meta_key(const char *k) {
    return strcmp(k, "apiVersion") == 0 || strcmp(k, "kind") == 0 || strcmp(k, "metadata") == 0;
}

/* Sets obj[key] from the node's default, or drops a non-nullable null. */
static int default_slot(json_t *obj, const char *key, const struct schema_node *p) {
    json_t *cur = json_object_get(obj, key);
    if (cur && !(json_is_null(cur) && !p->nullable)) return 0;
    if (!p->dflt) {
        if (cur) json_object_del(obj, key);
        return 0;
    }
    json_t *d = json_deep_copy(p->dflt);
    if (!d || json_object_set_new(obj, key, d) != 0) return -ENOMEM;
    return 0;
}

static int defaults(const struct schema_node *n, json_t *v, bool root) {
    int rc;
    if (json_is_object(v)) {
        bool meta = root || n->embedded;
        for (size_t i = 0; i < n->nprops; i++) {
            if (meta && is_meta_key(n->props[i].name)) continue;
            if ((rc = default_slot(v, n->props[i].name, n->props[i].node))) return rc;
        }
        if (n->addl) {
            const char *k;
            json_t *val;
            void *tmp;
            json_object_foreach_safe(v, tmp, k, val) {
                if (meta && is_meta_key(k)) continue;
                if (json_is_null(val) && (rc = default_slot(v, k, n->addl))) return rc;
            }
        }
        const char *k;
        json_t *val;
        json_object_foreach(v, k, val) {
            if (meta && is_meta_key(k)) continue;
            const struct schema_node *p = schema_node_prop(n, k);
            if (!p) p = n->addl;
            if (p && (rc = defaults(p, val, false))) return rc;
        }
    } else if (json_is_array(v) && n->items) {
        for (size_t i = 0; i < json_array_size(v); i++) {
            json_t *e = json_array_get(v, i);
            if (json_is_null(e) && !n->items->nullable && n->items->dflt) {
                json_t *d = json_deep_copy(n->items->dflt);
                if (!d || json_array_set_new(v, i, d) != 0) return -ENOMEM;
                e = d;
            }
            if ((rc = defaults(n->items, e, false))) return rc;
        }
    }
    return 0;
}

int schema_apply_defaults(const struct schema *s, json_t *obj) { return defaults(s->root, obj, true); }

int schema_node_defaults(const struct schema_node *n, json_t *v) { return defaults(n, v, false); }

/* ---- pruning ---- */

static void prune(const struct schema_node *n, json_t *v, bool root) {
    if (json_is_object(v)) {
        bool meta = root || n->embedded;
        const char *k;
        json_t *val;
        void *tmp;
        json_object_foreach_safe(v, tmp, k, val) {
            if (meta && is_meta_key(k)) continue;
            const struct schema_node *p = schema_node_prop(n, k);
            if (!p) p = n->addl;
            if (p) prune(p, val, false);
            else if (!n->preserve_unknown && !n->addl_any) json_object_del(v, k);
        }
    } else if (json_is_array(v) && n->items) {
        for (size_t i = 0; i < json_array_size(v); i++) prune(n->items, json_array_get(v, i), false);
    }
}

void schema_node_prune(const struct schema_node *n, json_t *v) { prune(n, v, false); }

int schema_prune(const struct schema *s, json_t *obj) {
    prune(s->root, obj, true);
    return 0;
}
