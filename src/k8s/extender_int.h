/* What extender.c, extender_fast.c (the scan) and extender_text.c (the
 * replies as text) share (not a public interface). */
#ifndef PELOTON_K8S_EXTENDER_INT_H
#define PELOTON_K8S_EXTENDER_INT_H
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Go's case-insensitive field match (Unicode simple folding) of key against name. */
bool key_is(const char *key, const char *name);
/* Whether v nests at most `left` levels deep. */
bool depth_ok(const json_t *v, int left);
/* A name's length and bytes are acceptable (what names it in err). */
int check_name(const char *s, size_t len, const char *what, bool allow_empty, char *err, size_t errlen);

/* Length of the strict UTF-8 sequence at p (first byte >= 0x80): no overlong
 * forms, no surrogates, at most U+10FFFF; 0 when invalid. */
static inline size_t utf8_seq(const unsigned char *p, const unsigned char *end) {
    unsigned c = p[0], lo = 0x80, hi = 0xBF;
    size_t n;
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) lo = 0xA0;
        else if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90;
        else if (c == 0xF4) hi = 0x8F;
    } else return 0;
    if ((size_t)(end - p) < n || p[1] < lo || p[1] > hi) return 0;
    for (size_t i = 2; i < n; i++)
        if ((p[i] & 0xC0) != 0x80) return 0;
    return n;
}

/* The bytes of w that are '"', '\\', below 0x20 or above 0x7F have their
 * high bit set in the result (bytes above the first such byte may be set
 * too: a borrow; only the lowest-addressed hit is exact). */
static inline uint64_t special8(uint64_t w) {
    const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
    uint64_t q = w ^ (ones * '"'), b = w ^ (ones * '\\');
    return (((q - ones) & ~q) | ((b - ones) & ~b) | ((w - ones * 0x20) & ~w) | w) & high;
}

/* The first byte at or after p that is not plain string text (see
 * special8), or end: eight bytes at a time where the byte order allows. */
static inline const char *plain_run(const char *p, const char *end) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    while (end - p >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        uint64_t m = special8(w);
        if (m) return p + (__builtin_ctzll(m) >> 3);
        p += 8;
    }
#endif
    while (p < end) {
        unsigned char c = (unsigned char)*p;
        if (c < 0x20 || c >= 0x80 || c == '"' || c == '\\') return p;
        p++;
    }
    return p;
}

#endif
