/* The protobuf writer (pbwrite.h). An embedded message's length comes before
 * its body but is known only at its end: pbw_begin leaves one byte for it, and
 * pbw_end moves the body up when the length needs more (a body of 128 bytes
 * or more), so the encoding stays the shortest one. */
#include "pbwrite.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2 };
#define FIELD_MAX ((1u << 29) - 1)

void pbw_init(struct pbw *w, size_t max) {
    memset(w, 0, sizeof *w);
    w->max = max ? max : PBW_DEFAULT_MAX;
}

void pbw_free(struct pbw *w) {
    free(w->buf);
    w->buf = NULL;
    w->len = w->cap = 0;
    w->depth = 0;
}

int pbw_error(const struct pbw *w) { return w->err; }

size_t pbw_varint_size(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* Room for n more bytes; false (and the error set) when there is none. */
static bool reserve(struct pbw *w, size_t n) {
    if (w->err) return false;
    if (n > w->max || w->len > w->max - n) {
        w->err = -E2BIG;
        return false;
    }
    if (w->len + n <= w->cap) return true;
    size_t cap = w->cap ? w->cap : 256;
    while (cap < w->len + n) cap = cap > w->max / 2 ? w->max : cap * 2;
    unsigned char *b = realloc(w->buf, cap);
    if (!b) {
        w->err = -ENOMEM;
        return false;
    }
    w->buf = b;
    w->cap = cap;
    return true;
}

/* Writes v's varint at p (room checked by the caller); returns its size. */
static size_t put_varint(unsigned char *p, uint64_t v) {
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (unsigned char)v;
    return n;
}

static bool raw_varint(struct pbw *w, uint64_t v) {
    if (!reserve(w, pbw_varint_size(v))) return false;
    w->len += put_varint(w->buf + w->len, v);
    return true;
}

static bool tag(struct pbw *w, uint32_t field, int wt) {
    if (w->err) return false;
    if (field == 0 || field > FIELD_MAX) {
        w->err = -EINVAL;
        return false;
    }
    return raw_varint(w, ((uint64_t)field << 3) | (uint64_t)wt);
}

void pbw_varint(struct pbw *w, uint32_t field, uint64_t v) {
    if (tag(w, field, WT_VARINT)) raw_varint(w, v);
}

void pbw_int64(struct pbw *w, uint32_t field, int64_t v) { pbw_varint(w, field, (uint64_t)v); }

void pbw_bool(struct pbw *w, uint32_t field, bool v) { pbw_varint(w, field, v ? 1 : 0); }

void pbw_double(struct pbw *w, uint32_t field, double v) {
    if (!tag(w, field, WT_I64) || !reserve(w, 8)) return;
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    for (int i = 0; i < 8; i++) w->buf[w->len++] = (unsigned char)(bits >> (8 * i)); /* little-endian on the wire */
}

void pbw_bytes(struct pbw *w, uint32_t field, const void *p, size_t n) {
    if (!tag(w, field, WT_LEN) || !raw_varint(w, n) || !reserve(w, n)) return;
    if (n) memcpy(w->buf + w->len, p, n);
    w->len += n;
}

void pbw_string(struct pbw *w, uint32_t field, const char *s) { pbw_bytes(w, field, s ? s : "", s ? strlen(s) : 0); }

void pbw_begin(struct pbw *w, uint32_t field) {
    if (w->err) return;
    if (w->depth == PBW_MAX_DEPTH) {
        w->err = -E2BIG;
        return;
    }
    if (!tag(w, field, WT_LEN) || !reserve(w, 1)) return;
    w->buf[w->len++] = 0; /* the length's first byte, filled in by pbw_end */
    w->open[w->depth++] = w->len;
}

void pbw_end(struct pbw *w) {
    if (w->err) return;
    if (w->depth == 0) {
        w->err = -EINVAL;
        return;
    }
    size_t start = w->open[--w->depth];
    size_t body = w->len - start, extra = pbw_varint_size(body) - 1;
    if (extra) {
        if (!reserve(w, extra)) return;
        memmove(w->buf + start + extra, w->buf + start, body);
        w->len += extra;
    }
    put_varint(w->buf + start - 1, body);
}

unsigned char *pbw_take(struct pbw *w, size_t *len) {
    *len = 0;
    if (w->err || w->depth) {
        if (!w->err) w->err = -EINVAL;
        return NULL;
    }
    if (!w->buf && !reserve(w, 1)) return NULL;
    unsigned char *b = w->buf;
    *len = w->len;
    w->buf = NULL;
    w->len = w->cap = 0;
    return b;
}
