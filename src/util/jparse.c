/* jparse: a recursive-descent JSON reader over a buffer that builds jansson
 * values (jparse.h). What jansson checks is checked here the same way:
 * UTF-8 in strings, control characters, escapes and surrogate pairs, \u0000
 * (refused: JSON_ALLOW_NUL is not offered), integer and real overflow, the
 * number grammar, the depth limit, duplicate keys under
 * JSON_REJECT_DUPLICATES, a top level that is an object or array unless
 * JSON_DECODE_ANY, and nothing but white space after it. */
#include "jparse.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define JP_STACK_STR 96 /* strings with escapes up to this decode on the stack (frames stay small: 2,048 deep) */

struct jp {
    const unsigned char *p, *end;
    size_t flags;
    int depth;
    /* jparse_filtered: which members to build, and the path to where the reader is */
    jparse_keep_fn keep;
    void *keep_ud;
    int pdepth; /* containers entered (may pass JPARSE_PATH_MAX; seg holds the first ones) */
    struct jparse_seg seg[JPARSE_PATH_MAX];
};

static json_t *value(struct jp *j);

static inline void ws(struct jp *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\r' || *j->p == '\t')) j->p++;
}

size_t jparse_utf8_len(const unsigned char *p, const unsigned char *end) {
    unsigned c = p[0];
    size_t n;
    uint32_t v;
    if (c < 0x80) return 1;
    if (c < 0xc2) return 0; /* continuation byte or overlong 2-byte lead */
    if (c < 0xe0) n = 2, v = c & 0x1f;
    else if (c < 0xf0) n = 3, v = c & 0x0f;
    else if (c < 0xf5) n = 4, v = c & 0x07;
    else return 0;
    if ((size_t)(end - p) < n) return 0;
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) return 0;
        v = (v << 6) | (p[i] & 0x3f);
    }
    if ((n == 3 && v < 0x800) || (n == 4 && v < 0x10000) || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
    return n;
}

static int hex4(const unsigned char *p, const unsigned char *end, uint32_t *out) {
    if (end - p < 4) return -1;
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= c - '0';
        else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
        else return -1;
    }
    *out = v;
    return 0;
}

static size_t put_utf8(uint32_t v, char *o) {
    if (v < 0x80) return o[0] = (char)v, 1;
    if (v < 0x800) return o[0] = (char)(0xc0 | (v >> 6)), o[1] = (char)(0x80 | (v & 0x3f)), 2;
    if (v < 0x10000)
        return o[0] = (char)(0xe0 | (v >> 12)), o[1] = (char)(0x80 | ((v >> 6) & 0x3f)),
               o[2] = (char)(0x80 | (v & 0x3f)), 3;
    return o[0] = (char)(0xf0 | (v >> 18)), o[1] = (char)(0x80 | ((v >> 12) & 0x3f)),
           o[2] = (char)(0x80 | ((v >> 6) & 0x3f)), o[3] = (char)(0x80 | (v & 0x3f)), 4;
}

/* A string at j->p (its opening quote). On success *s and *n are the
 * decoded bytes: either in the input (no escapes) or in *heap / stack. */
static int string(struct jp *j, const char **s, size_t *n, char *stack, char **heap) {
    const unsigned char *p = j->p + 1, *start = p, *end = j->end;
    /* the common case: no escapes, so the bytes are the value */
    while (p < end) {
        unsigned c = *p;
        if (c == '"') {
            *s = (const char *)start;
            *n = (size_t)(p - start);
            j->p = p + 1;
            return 0;
        }
        if (c == '\\') break;
        if (c < 0x20) return -1;
        if (c < 0x80) {
            p++;
            continue;
        }
        size_t k = jparse_utf8_len(p, end);
        if (!k) return -1;
        p += k;
    }
    if (p >= end) return -1;
    /* escapes: decode into a buffer (never longer than the input span) */
    const unsigned char *q = p;
    while (q < end && *q != '"') q += *q == '\\' ? 2 : 1;
    if (q >= end) return -1;
    size_t cap = (size_t)(q - start) + 1;
    char *o = cap <= JP_STACK_STR ? stack : (*heap = malloc(cap));
    if (!o) return -1;
    size_t len = (size_t)(p - start);
    memcpy(o, start, len);
    while (p < end) {
        unsigned c = *p;
        if (c == '"') {
            *s = o;
            *n = len;
            j->p = p + 1;
            return 0;
        }
        if (c < 0x20) return -1;
        if (c >= 0x80) {
            size_t k = jparse_utf8_len(p, end);
            if (!k) return -1;
            memcpy(o + len, p, k);
            len += k;
            p += k;
            continue;
        }
        if (c != '\\') {
            o[len++] = (char)c;
            p++;
            continue;
        }
        if (++p >= end) return -1;
        switch (*p++) {
        case '"': o[len++] = '"'; break;
        case '\\': o[len++] = '\\'; break;
        case '/': o[len++] = '/'; break;
        case 'b': o[len++] = '\b'; break;
        case 'f': o[len++] = '\f'; break;
        case 'n': o[len++] = '\n'; break;
        case 'r': o[len++] = '\r'; break;
        case 't': o[len++] = '\t'; break;
        case 'u': {
            uint32_t v, lo;
            if (hex4(p, end, &v)) return -1;
            p += 4;
            if (v >= 0xd800 && v <= 0xdbff) { /* a high surrogate: its low half must follow */
                if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || hex4(p + 2, end, &lo) || lo < 0xdc00 || lo > 0xdfff)
                    return -1;
                p += 6;
                v = 0x10000 + ((v - 0xd800) << 10) + (lo - 0xdc00);
            } else if (v >= 0xdc00 && v <= 0xdfff) {
                return -1; /* a lone low surrogate */
            } else if (v == 0) {
                return -1; /* \u0000: jansson wants JSON_ALLOW_NUL for it */
            }
            len += put_utf8(v, o + len);
            break;
        }
        default: return -1;
        }
    }
    return -1;
}

/* jansson reads one byte past a number or a word to see it end, and a NUL
 * byte read there is lost when put back: "[1\0]" is [1] to it. The same
 * here, so that both accept exactly the same inputs. */
static const unsigned char *skip_lost_nul(const unsigned char *p, const unsigned char *end) {
    return p < end && *p == 0 ? p + 1 : p;
}

static json_t *number(struct jp *j) {
    const unsigned char *p = j->p, *start = p, *end = j->end;
    bool real = false;
    if (p < end && *p == '-') p++;
    if (p >= end) return NULL;
    if (*p == '0') {
        p++;
        if (p < end && *p >= '0' && *p <= '9') return NULL; /* a leading zero */
    } else if (*p >= '1' && *p <= '9') {
        while (p < end && *p >= '0' && *p <= '9') p++;
    } else {
        return NULL;
    }
    if (p < end && *p == '.') {
        real = true;
        p++;
        if (p >= end || *p < '0' || *p > '9') return NULL;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        real = true;
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || *p < '0' || *p > '9') return NULL;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    char buf[128], *tmp = NULL, *txt = buf;
    size_t n = (size_t)(p - start);
    if (n >= sizeof buf && !(txt = tmp = malloc(n + 1))) return NULL;
    memcpy(txt, start, n);
    txt[n] = 0;
    json_t *v = NULL;
    char *e;
    errno = 0;
    if (!real) {
        long long x = strtoll(txt, &e, 10);
        if (!errno && *e == 0) v = json_integer((json_int_t)x);
    } else {
        double d = strtod(txt, &e);
        /* jansson refuses an overflow, not an underflow */
        if (*e == 0 && !(errno == ERANGE && (d > 1.0 || d < -1.0))) v = json_real(d);
    }
    free(tmp);
    if (v) j->p = skip_lost_nul(p, end);
    return v;
}

static int skip(struct jp *j);

/* A member's value, built when it is kept, else read and dropped. */
static json_t *member(struct jp *j, const char *k, size_t kn, bool *dropped) {
    *dropped = false;
    if (!j->keep) return value(j);
    if (j->pdepth <= JPARSE_PATH_MAX && !j->keep(j->keep_ud, j->seg, j->pdepth, k, kn)) {
        *dropped = true;
        return skip(j) ? NULL : json_null();
    }
    if (j->pdepth < JPARSE_PATH_MAX) j->seg[j->pdepth] = (struct jparse_seg){k, kn};
    j->pdepth++;
    json_t *v = value(j);
    j->pdepth--;
    return v;
}

static json_t *element(struct jp *j) {
    if (!j->keep) return value(j);
    if (j->pdepth < JPARSE_PATH_MAX) j->seg[j->pdepth] = (struct jparse_seg){NULL, 0};
    j->pdepth++;
    json_t *v = value(j);
    j->pdepth--;
    return v;
}

static json_t *object(struct jp *j) {
    json_t *o = json_object();
    if (!o) return NULL;
    j->p++;
    ws(j);
    if (j->p < j->end && *j->p == '}') {
        j->p++;
        return o;
    }
    char stack[JP_STACK_STR];
    for (;;) {
        if (j->p >= j->end || *j->p != '"') goto fail;
        const char *k;
        size_t kn;
        char *heap = NULL;
        if (string(j, &k, &kn, stack, &heap)) {
            free(heap);
            goto fail;
        }
        if (memchr(k, 0, kn) || ((j->flags & JSON_REJECT_DUPLICATES) && json_object_getn(o, k, kn))) {
            free(heap);
            goto fail;
        }
        ws(j);
        if (j->p >= j->end || *j->p != ':') {
            free(heap);
            goto fail;
        }
        j->p++;
        ws(j);
        bool dropped;
        json_t *v = member(j, k, kn, &dropped); /* nested values decode into their own frames' buffers: k stays */
        if (!v || (!dropped && json_object_setn_new_nocheck(o, k, kn, v))) {
            free(heap);
            goto fail;
        }
        free(heap);
        ws(j);
        if (j->p >= j->end) goto fail;
        if (*j->p == '}') {
            j->p++;
            return o;
        }
        if (*j->p != ',') goto fail;
        j->p++;
        ws(j);
    }
fail:
    json_decref(o);
    return NULL;
}

static json_t *array(struct jp *j) {
    json_t *a = json_array();
    if (!a) return NULL;
    j->p++;
    ws(j);
    if (j->p < j->end && *j->p == ']') {
        j->p++;
        return a;
    }
    for (;;) {
        json_t *v = element(j);
        if (!v || json_array_append_new(a, v)) goto fail;
        ws(j);
        if (j->p >= j->end) goto fail;
        if (*j->p == ']') {
            j->p++;
            return a;
        }
        if (*j->p != ',') goto fail;
        j->p++;
        ws(j);
    }
fail:
    json_decref(a);
    return NULL;
}

/* true, false, null: the word must end there (jansson reads a word, then compares) */
static json_t *literal(struct jp *j, const char *word, size_t n, json_t *v) {
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, word, n)) return NULL;
    const unsigned char *after = j->p + n;
    if (after < j->end && ((*after >= 'a' && *after <= 'z') || (*after >= 'A' && *after <= 'Z'))) return NULL;
    j->p = skip_lost_nul(after, j->end);
    return v;
}

static json_t *value(struct jp *j) {
    if (j->p >= j->end) return NULL;
    switch (*j->p) {
    case '{':
    case '[': {
        if (++j->depth > JSON_PARSER_MAX_DEPTH) return NULL;
        json_t *v = *j->p == '{' ? object(j) : array(j);
        j->depth--;
        return v;
    }
    case '"': {
        char stack[JP_STACK_STR], *heap = NULL;
        const char *s;
        size_t n;
        json_t *v = string(j, &s, &n, stack, &heap) ? NULL : json_stringn_nocheck(s, n);
        free(heap);
        return v;
    }
    case 't': return literal(j, "true", 4, json_true());
    case 'f': return literal(j, "false", 5, json_false());
    case 'n': return literal(j, "null", 4, json_null());
    default: return number(j);
    }
}

/* Reads one value without building it, refusing what value() refuses: 0, or
 * -1. Members and elements inside a dropped value are not asked about. */
static int skip(struct jp *j) {
    if (j->p >= j->end) return -1;
    unsigned char c = *j->p;
    if (c == '"') {
        char stack[JP_STACK_STR], *heap = NULL;
        const char *s;
        size_t n;
        int rc = string(j, &s, &n, stack, &heap);
        free(heap);
        return rc;
    }
    if (c != '{' && c != '[') {
        json_t *v = value(j); /* numbers and words: their checks are the builders' (singletons for words) */
        if (!v) return -1;
        json_decref(v);
        return 0;
    }
    if (++j->depth > JSON_PARSER_MAX_DEPTH) return -1;
    unsigned char close = c == '{' ? '}' : ']';
    j->p++;
    ws(j);
    if (j->p < j->end && *j->p == close) {
        j->p++;
        j->depth--;
        return 0;
    }
    for (;;) {
        if (close == '}') {
            if (j->p >= j->end || *j->p != '"' || skip(j)) return -1; /* the key: a string */
            ws(j);
            if (j->p >= j->end || *j->p != ':') return -1;
            j->p++;
            ws(j);
        }
        if (skip(j)) return -1;
        ws(j);
        if (j->p >= j->end) return -1;
        if (*j->p == close) {
            j->p++;
            j->depth--;
            return 0;
        }
        if (*j->p != ',') return -1;
        j->p++;
        ws(j);
    }
}

/* The whole input as one value, with nothing but white space around it. */
static json_t *document(struct jp *j) {
    ws(j);
    json_t *v = NULL;
    if (j->p < j->end && ((j->flags & JSON_DECODE_ANY) || *j->p == '{' || *j->p == '[')) {
        v = value(j);
        ws(j);
        if (v && j->p != j->end) {
            json_decref(v);
            v = NULL;
        }
    }
    return v;
}

json_t *jparse_filtered(const char *buf, size_t len, size_t flags, jparse_keep_fn keep, void *ud) {
    if (!buf || (flags & ~(size_t)JSON_DECODE_ANY)) return NULL;
    struct jp j = {.p = (const unsigned char *)buf,
                   .end = (const unsigned char *)buf + len,
                   .flags = flags,
                   .keep = keep,
                   .keep_ud = ud};
    return document(&j);
}

json_t *jparse_try(const char *buf, size_t len, size_t flags) {
    if (!buf || (flags & ~(size_t)(JSON_REJECT_DUPLICATES | JSON_DECODE_ANY))) return NULL;
    struct jp j = {.p = (const unsigned char *)buf, .end = (const unsigned char *)buf + len, .flags = flags};
    return document(&j);
}

json_t *jparse_loadb(const char *buf, size_t len, size_t flags, json_error_t *error) {
    json_t *v = jparse_try(buf, len, flags);
    if (v) {
        if (error) error->text[0] = 0;
        return v;
    }
    return json_loadb(buf, len, flags, error); /* its message; and its value, should it take what this did not */
}
