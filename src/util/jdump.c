/* jdump: jansson values to compact JSON text (jparse.h), written into one
 * growing buffer instead of through jansson's per-piece callbacks. The
 * output is json_dumps(v, JSON_COMPACT)'s, byte for byte; the fuzz target of
 * jparse compares the two on everything it parses. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jparse.h"

struct out {
    char *p;
    size_t len, cap;
    int bad;
};

static void grow(struct out *o, size_t n) {
    if (o->len + n <= o->cap) return;
    size_t nc = o->cap ? o->cap : 2048;
    while (nc < o->len + n) nc *= 2;
    char *b = realloc(o->p, nc);
    if (!b) {
        o->bad = 1;
        return;
    }
    o->p = b;
    o->cap = nc;
}

static void put(struct out *o, const char *s, size_t n) {
    if (!n) return;
    grow(o, n);
    if (o->bad) return;
    memcpy(o->p + o->len, s, n);
    o->len += n;
}

/* A string as jansson writes it: \\, \", \b \f \n \r \t, other control
 * characters as \u00XX, everything else (UTF-8 included) as it is. */
static void put_string(struct out *o, const char *s, size_t n) {
    static const char hex[] = "0123456789ABCDEF";
    const unsigned char *p = (const unsigned char *)s, *end = p + n, *run = p;
    grow(o, n + 2);
    if (o->bad) return;
    o->p[o->len++] = '"';
    while (p < end) {
        unsigned c = *p;
        if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
            p++;
            continue;
        }
        if (c >= 0x80) {
            size_t k = jparse_utf8_len(p, end);
            if (!k) {
                o->bad = 1;
                return;
            }
            p += k;
            continue;
        }
        put(o, (const char *)run, (size_t)(p - run));
        char esc[6] = {'\\', 0};
        size_t el = 2;
        switch (c) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        default:
            esc[1] = 'u', esc[2] = '0', esc[3] = '0', esc[4] = hex[c >> 4], esc[5] = hex[c & 15];
            el = 6;
        }
        put(o, esc, el);
        run = ++p;
    }
    put(o, (const char *)run, (size_t)(p - run));
    put(o, "\"", 1);
}

static void put_value(struct out *o, const json_t *v, int depth) {
    if (o->bad) return;
    if (depth > JSON_PARSER_MAX_DEPTH) { /* jansson finds cycles; this stops at depth */
        o->bad = 1;
        return;
    }
    switch (json_typeof(v)) {
    case JSON_NULL: put(o, "null", 4); return;
    case JSON_TRUE: put(o, "true", 4); return;
    case JSON_FALSE: put(o, "false", 5); return;
    case JSON_INTEGER: {
        char b[32];
        int n = snprintf(b, sizeof b, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        put(o, b, (size_t)n);
        return;
    }
    case JSON_REAL: { /* rare in these documents: jansson's own digits and exponent rules */
        char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        if (!s) {
            o->bad = 1;
            return;
        }
        put(o, s, strlen(s));
        free(s);
        return;
    }
    case JSON_STRING: put_string(o, json_string_value(v), json_string_length(v)); return;
    case JSON_ARRAY: {
        size_t n = json_array_size(v);
        put(o, "[", 1);
        for (size_t i = 0; i < n && !o->bad; i++) {
            if (i) put(o, ",", 1);
            put_value(o, json_array_get(v, i), depth + 1);
        }
        put(o, "]", 1);
        return;
    }
    case JSON_OBJECT: {
        put(o, "{", 1);
        int first = 1;
        for (void *it = json_object_iter((json_t *)v); it && !o->bad; it = json_object_iter_next((json_t *)v, it)) {
            if (!first) put(o, ",", 1);
            first = 0;
            put_string(o, json_object_iter_key(it), json_object_iter_key_len(it));
            put(o, ":", 1);
            put_value(o, json_object_iter_value(it), depth + 1);
        }
        put(o, "}", 1);
        return;
    }
    }
    o->bad = 1;
}

int jdump_append(char **buf, size_t *len, size_t *cap, const char *s, size_t n) {
    struct out o = {*buf, *len, *cap, 0};
    put(&o, s, n);
    put(&o, "", 1); /* kept NUL-terminated */
    o.len--;
    *buf = o.p, *cap = o.cap;
    if (o.bad) return -1;
    *len = o.len;
    return 0;
}

int jdump_append_string(char **buf, size_t *len, size_t *cap, const char *s, size_t n) {
    struct out o = {*buf, *len, *cap, 0};
    put_string(&o, s, n);
    put(&o, "", 1); /* kept NUL-terminated */
    o.len--;
    *buf = o.p, *cap = o.cap;
    if (o.bad) {
        if (*buf && *cap > *len) (*buf)[*len] = 0; /* as it was */
        return -1;
    }
    *len = o.len;
    return 0;
}

char *jdump(const json_t *v, size_t flags, size_t *len) {
    if (flags & ~(size_t)(JSON_COMPACT | JSON_ENCODE_ANY) || !(flags & JSON_COMPACT)) {
        char *s = json_dumps(v, flags);
        if (s && len) *len = strlen(s);
        return s;
    }
    if (!v || (!(flags & JSON_ENCODE_ANY) && !json_is_object(v) && !json_is_array(v))) return NULL;
    struct out o = {0};
    put_value(&o, v, 0);
    grow(&o, 1);
    if (o.bad) {
        free(o.p);
        return NULL;
    }
    o.p[o.len] = 0;
    if (len) *len = o.len;
    return o.p;
}
