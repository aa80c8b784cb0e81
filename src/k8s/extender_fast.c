/* The extender's fast path for NodeNames requests (extender.h): a scan of
 * the raw body that hands only the Pod to jansson and keeps the node names as
 * byte ranges in a reusable hash set, and encoders that write the reply text
 * directly. Both are checked against the jansson path in extender.c (unit
 * tests, the differential fuzz target): anything the scan does not accept
 * exactly as the jansson path would is left to that path (-EAGAIN). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"
#include "extender.h"
#include "extender_int.h"

/* ---- the fast path (NodeNames mode) ----
 * The scan accepts only what json_loadb(JSON_REJECT_DUPLICATES) and
 * extender_decode_args accept, and returns -EAGAIN for everything else, so
 * that the jansson path alone decides errors and their messages. Outside the
 * Pod it checks the JSON itself (strings as jansson's lexer: no raw control
 * bytes, known escapes, strict UTF-8, paired surrogates, no \u0000); the Pod's
 * byte range is parsed by jansson, which checks it. */

/* Scratch kept between scans up to this size; a larger one (a huge request
 * with escaped names) is released at the next scan. */
#define SCAN_SCRATCH_KEEP (1u << 20)

static const char *skip_ws(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    return p;
}

/* Length of the strict UTF-8 sequence at p (first byte >= 0x80): no overlong
 * forms, no surrogates, at most U+10FFFF; 0 when invalid. */
static size_t utf8_seq(const unsigned char *p, const unsigned char *end) {
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

/* The four hex digits at p (p + 4 <= end), or -1. */
static long hex4(const char *p, const char *end) {
    if (end - p < 4) return -1;
    long v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
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

/* The hash's steps: a word of eight bytes, a last partial word (the bytes
 * as a little-endian number, so that a masked load gives the same value),
 * the finish. */
#define HASH_SEED 0x9e3779b97f4a7c15ull
static inline uint64_t hash_word(uint64_t h, uint64_t w) {
    h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 31);
}
static inline uint64_t hash_tail(uint64_t h, uint64_t w) { return (h ^ w) * 0x94d049bb133111ebull; }
static inline uint64_t hash_finish(uint64_t h) {
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 32);
}

/* p is just past a string's opening quote: its closing quote when the
 * string is plain text of at most 15 bytes (most node names), else NULL;
 * then *hash is extender_name_hash of it, from the words already loaded. */
static inline const char *short_plain(const char *p, const char *end, uint64_t *hash) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (end - p < 16) return NULL;
    uint64_t w1, w2;
    memcpy(&w1, p, 8);
    memcpy(&w2, p + 8, 8);
    uint64_t m = special8(w1);
    size_t k = m ? (size_t)__builtin_ctzll(m) >> 3 : 8 + ((m = special8(w2)) ? (size_t)__builtin_ctzll(m) >> 3 : 8);
    if (k >= 16 || p[k] != '"') return NULL;
    uint64_t h = HASH_SEED ^ k;
    if (k >= 8) h = hash_word(h, w1);
    uint64_t t = k >= 8 ? w2 : w1, r = k & 7;
    if (r) h = hash_tail(h, t & ((1ull << (8 * r)) - 1));
    *hash = hash_finish(h);
    return p + k;
#else
    (void)p;
    (void)end;
    (void)hash;
    return NULL;
#endif
}

/* p is just past a string's opening quote: returns its closing quote, or
 * NULL when jansson would refuse the string (or it does not end). *esc says
 * whether it has escapes. */
static inline const char *string_end(const char *p, const char *end, bool *esc) {
    *esc = false;
    while ((p = plain_run(p, end)) < end) {
        unsigned char c = (unsigned char)*p;
        if (c == '"') return p;
        if (c < 0x20) return NULL;
        if (c < 0x80 && c != '\\') {
            p++;
            continue;
        }
        if (c >= 0x80) {
            size_t n = utf8_seq((const unsigned char *)p, (const unsigned char *)end);
            if (!n) return NULL;
            p += n;
            continue;
        }
        *esc = true;
        if (end - p < 2) return NULL;
        char e = p[1];
        if (e != 'u') {
            if (e != '"' && e != '\\' && e != '/' && e != 'b' && e != 'f' && e != 'n' && e != 'r' && e != 't')
                return NULL;
            p += 2;
            continue;
        }
        long u = hex4(p + 2, end);
        if (u <= 0 || (u >= 0xDC00 && u <= 0xDFFF)) return NULL; /* invalid, \u0000, a lone low surrogate */
        p += 6;
        if (u >= 0xD800 && u <= 0xDBFF) {
            if (end - p < 2 || p[0] != '\\' || p[1] != 'u') return NULL;
            long lo = hex4(p + 2, end);
            if (lo < 0xDC00 || lo > 0xDFFF) return NULL;
            p += 6;
        }
    }
    return NULL;
}

/* Decodes the string body [p, q) that string_end accepted into dst (room
 * for q - p bytes: decoding never grows it); returns the decoded length. */
static size_t unescape(const char *p, const char *q, char *dst) {
    char *d = dst;
    while (p < q) {
        if (*p != '\\') {
            *d++ = *p++;
            continue;
        }
        char e = p[1];
        p += 2;
        switch (e) {
        case 'b': *d++ = '\b'; break;
        case 'f': *d++ = '\f'; break;
        case 'n': *d++ = '\n'; break;
        case 'r': *d++ = '\r'; break;
        case 't': *d++ = '\t'; break;
        case 'u': {
            unsigned long u = (unsigned long)hex4(p, q);
            p += 4;
            if (u >= 0xD800 && u <= 0xDBFF) {
                u = 0x10000 + ((u - 0xD800) << 10) + ((unsigned long)hex4(p + 2, q) - 0xDC00);
                p += 6;
            }
            if (u < 0x80) {
                *d++ = (char)u;
            } else if (u < 0x800) {
                *d++ = (char)(0xC0 | (u >> 6));
                *d++ = (char)(0x80 | (u & 0x3F));
            } else if (u < 0x10000) {
                *d++ = (char)(0xE0 | (u >> 12));
                *d++ = (char)(0x80 | ((u >> 6) & 0x3F));
                *d++ = (char)(0x80 | (u & 0x3F));
            } else {
                *d++ = (char)(0xF0 | (u >> 18));
                *d++ = (char)(0x80 | ((u >> 12) & 0x3F));
                *d++ = (char)(0x80 | ((u >> 6) & 0x3F));
                *d++ = (char)(0x80 | (u & 0x3F));
            }
            break;
        }
        default: *d++ = e; break; /* " \ / */
        }
    }
    return (size_t)(d - dst);
}

/* One past the object or array that starts at p, by counting brackets
 * outside strings; NULL when it does not end. Checks nothing else: the range
 * goes to jansson, which refuses it unless it is exactly one valid value. */
static const char *skip_nested(const char *p, const char *end) {
    size_t depth = 0;
    while (p < end) {
        char c = *p++;
        if (c == '"') {
            for (;;) {
                if (p >= end) return NULL;
                if (*p == '"') break;
                if (*p == '\\') {
                    if (end - p < 2) return NULL;
                    p += 2;
                } else {
                    p++;
                }
            }
            p++;
        } else if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            if (--depth == 0) return p;
        }
    }
    return NULL;
}

uint64_t extender_name_hash(const char *s, size_t len) {
    uint64_t h = HASH_SEED ^ len;
    size_t k = len;
    for (; k >= 8; s += 8, k -= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
#if !(defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__)
        w = __builtin_bswap64(w);
#endif
        h = hash_word(h, w);
    }
    if (k) {
        uint64_t w = 0;
        for (size_t i = 0; i < k; i++) w |= (uint64_t)(unsigned char)s[i] << (8 * i);
        h = hash_tail(h, w);
    }
    return hash_finish(h);
}

/* Copies n bytes with fixed-size moves (names and runs are short). */
static inline void copy_short(char *d, const char *s, size_t n) {
    if (n >= 8) {
        for (size_t i = 0; i + 8 <= n; i += 8) memcpy(d + i, s + i, 8);
        memcpy(d + n - 8, s + n - 8, 8);
    } else if (n >= 4) {
        memcpy(d, s, 4);
        memcpy(d + n - 4, s + n - 4, 4);
    } else {
        for (size_t i = 0; i < n; i++) d[i] = s[i];
    }
}

static inline bool bytes_eq(const char *a, const char *b, size_t len) {
    if (len >= 8) { /* names are short: compare the first eight bytes inline */
        uint64_t x, y;
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        if (x != y) return false;
    }
    return memcmp(a, b, len) == 0;
}

/* Builds the name set of s (and the names' hashes); -EAGAIN on a repeated
 * name (the jansson path refuses it with its message). A slot holds the
 * hash's high half and the index + 1, so that probes rarely touch a name. */
static int scan_index(struct extender_scan *s) {
    size_t want = 16;
    while (want < 2 * s->nnodes) want *= 2;
    if (want > s->slots_cap_) {
        free(s->slots_);
        s->slots_cap_ = 0;
        if (!(s->slots_ = malloc(want * sizeof *s->slots_))) return -ENOMEM;
        s->slots_cap_ = want;
    }
    s->nslots_ = want;
    memset(s->slots_, 0, want * sizeof *s->slots_);
    size_t mask = want - 1;
    for (size_t i = 0; i < s->nnodes; i++) {
        const struct extender_name *nm = &s->names[i];
        uint64_t h = s->hashes[i], hi = h & 0xffffffff00000000ull;
        size_t j = (size_t)h & mask;
        for (uint64_t e; (e = s->slots_[j]); j = (j + 1) & mask) {
            const struct extender_name *o = &s->names[(uint32_t)e - 1];
            if ((e & 0xffffffff00000000ull) == hi && o->len == nm->len && bytes_eq(o->s, nm->s, nm->len))
                return -EAGAIN;
        }
        s->slots_[j] = hi | (uint64_t)(i + 1);
    }
    return 0;
}

long extender_scan_find(const struct extender_scan *s, const char *name, size_t len) {
    if (s && name && s->hinted_) { /* no set was built: the names one by one */
        for (size_t i = 0; i < s->nnodes; i++)
            if (s->names[i].len == len && memcmp(s->names[i].s, name, len) == 0) return (long)i;
        return -1;
    }
    if (!s || !name || !s->nslots_ || !s->nnodes) return -1;
    uint64_t h = extender_name_hash(name, len), hi = h & 0xffffffff00000000ull;
    size_t mask = s->nslots_ - 1;
    for (size_t j = (size_t)h & mask; s->slots_[j]; j = (j + 1) & mask) {
        uint64_t e = s->slots_[j];
        const struct extender_name *o = &s->names[(uint32_t)e - 1];
        if ((e & 0xffffffff00000000ull) == hi && o->len == len && bytes_eq(o->s, name, len)) return (long)((uint32_t)e - 1);
    }
    return -1;
}

/* The NodeNames array at *pp: names into s (escaped ones decoded into the
 * scratch, *used bytes of it taken so far); *pp moves past the array. */
static int scan_names(struct extender_scan *s, const char **pp, const char *end, size_t *used,
                      const struct extender_names_hint *hint) {
    const char *p = *pp, *text = p;
    if (*p != '[') return -EAGAIN; /* null (an error unless Nodes is set) or another type */
    if (hint && hint->len <= (size_t)(end - p) && memcmp(p, hint->text, hint->len) == 0) {
        /* the very array the hint decoded: a complete value, so the body's ends where the hint's does */
        s->names = hint->names;
        s->hashes = hint->hashes;
        s->nnodes = hint->n;
        s->names_text = text;
        s->names_len = hint->len;
        s->compact = true;
        s->hinted_ = true;
        *pp = p + hint->len;
        return 0;
    }
    p = skip_ws(p + 1, end);
    size_t n = 0;
    bool compact = p == text + 1; /* and stays so while every separator is one byte and nothing is escaped */
    if (p < end && *p == ']') {
        p++;
    } else {
        for (;;) {
            if (p == end || *p != '"' || n == EXTENDER_MAX_NODES) return -EAGAIN;
            bool esc = false, hashed = true;
            uint64_t h = 0;
            const char *q = short_plain(p + 1, end, &h);
            if (!q) {
                hashed = false;
                if (!(q = string_end(p + 1, end, &esc))) return -EAGAIN;
            }
            struct extender_name nm = {p + 1, (size_t)(q - p - 1)};
            if (esc) {
                /* all escaped names of this scan decode from [p, end): room for that, once */
                if (*used == 0 && s->scratch_cap_ < (size_t)(end - p)) {
                    free(s->scratch_);
                    s->scratch_cap_ = 0;
                    if (!(s->scratch_ = malloc((size_t)(end - p)))) return -ENOMEM;
                    s->scratch_cap_ = (size_t)(end - p);
                }
                nm.s = s->scratch_ + *used;
                nm.len = unescape(p + 1, q, s->scratch_ + *used);
                *used += nm.len;
            }
            if (nm.len == 0 || nm.len > EXTENDER_MAX_NAME) return -EAGAIN;
            if (n == s->cap_) {
                size_t cap = s->cap_ ? 2 * s->cap_ : 256;
                struct extender_name *v = realloc(s->names_, cap * sizeof *v);
                if (v) s->names = s->names_ = v;
                uint64_t *hv = v ? realloc(s->hashes_, cap * sizeof *hv) : NULL;
                if (!hv) return -ENOMEM;
                s->hashes = s->hashes_ = hv;
                s->cap_ = cap;
            }
            s->hashes_[n] = hashed ? h : extender_name_hash(nm.s, nm.len);
            s->names_[n++] = nm;
            compact = compact && !esc;
            if (end - q > 2 && q[1] == ',' && q[2] == '"') { /* no white space: the next name at once */
                p = q + 2;
                continue;
            }
            p = skip_ws(q + 1, end);
            compact = compact && p == q + 1;
            if (p == end) return -EAGAIN;
            if (*p == ']') {
                p++;
                break;
            }
            if (*p != ',') return -EAGAIN;
            const char *comma = p;
            p = skip_ws(p + 1, end);
            compact = compact && p == comma + 1;
        }
    }
    s->nnodes = n;
    s->names = s->names_;
    s->hashes = s->hashes_;
    s->names_text = text;
    s->names_len = (size_t)(p - text);
    s->compact = compact;
    *pp = p;
    return scan_index(s);
}

enum { SCAN_POD, SCAN_NODES, SCAN_NAMES };

static int scan_body(const char *body, size_t len, const struct extender_names_hint *hint, struct extender_scan *s) {
    const char *p = body, *end = body + len, *pod0 = NULL, *pod1 = NULL;
    bool seen[3] = {false, false, false};
    size_t used = 0;
    p = skip_ws(p, end);
    if (p == end || *p != '{') return -EAGAIN;
    p = skip_ws(p + 1, end);
    for (;;) {
        if (p == end || *p != '"') return -EAGAIN;
        bool esc;
        const char *k0 = p + 1, *k1 = string_end(k0, end, &esc);
        char key[64];
        /* a longer key is no field name (or a heavily escaped one: the jansson path takes it) */
        if (!k1 || (size_t)(k1 - k0) >= sizeof key) return -EAGAIN;
        size_t kl = (size_t)(k1 - k0);
        if (esc) kl = unescape(k0, k1, key);
        else memcpy(key, k0, kl);
        key[kl] = '\0';
        int f = key_is(key, "Pod") ? SCAN_POD : key_is(key, "Nodes") ? SCAN_NODES : key_is(key, "NodeNames") ? SCAN_NAMES : -1;
        if (f < 0 || seen[f]) return -EAGAIN;
        seen[f] = true;
        p = skip_ws(k1 + 1, end);
        if (p == end || *p != ':') return -EAGAIN;
        p = skip_ws(p + 1, end);
        if (p == end) return -EAGAIN;
        if (f == SCAN_POD) {
            if (*p != '{' || !(pod1 = skip_nested(p, end))) return -EAGAIN;
            pod0 = p;
            p = pod1;
        } else if (f == SCAN_NODES) {
            if (end - p < 4 || memcmp(p, "null", 4) != 0) return -EAGAIN; /* Nodes mode */
            p += 4;
        } else {
            int rc = scan_names(s, &p, end, &used, hint);
            if (rc) return rc;
        }
        p = skip_ws(p, end);
        if (p == end) return -EAGAIN;
        if (*p == '}') break;
        if (*p != ',') return -EAGAIN;
        p = skip_ws(p + 1, end);
    }
    if (skip_ws(p + 1, end) != end || !seen[SCAN_POD] || !seen[SCAN_NAMES]) return -EAGAIN;
    json_t *pod = json_loadb(pod0, (size_t)(pod1 - pod0), JSON_REJECT_DUPLICATES, NULL);
    if (!pod) return -EAGAIN;
    if (!depth_ok(pod, EXTENDER_MAX_DEPTH)) {
        json_decref(pod);
        return -EAGAIN;
    }
    s->pod = pod;
    s->pod_text = pod0;
    s->pod_len = (size_t)(pod1 - pod0);
    return 0;
}

int extender_scan_args_hinted(const char *body, size_t len, const struct extender_names_hint *hint,
                              struct extender_scan *s) {
    extender_scan_reset(s);
    if (s->scratch_cap_ > SCAN_SCRATCH_KEEP) {
        free(s->scratch_);
        s->scratch_ = NULL;
        s->scratch_cap_ = 0;
    }
    int rc = body ? scan_body(body, len, hint, s) : -EAGAIN;
    if (rc) extender_scan_reset(s);
    return rc;
}

int extender_scan_args(const char *body, size_t len, struct extender_scan *s) {
    return extender_scan_args_hinted(body, len, NULL, s);
}

void extender_scan_reset(struct extender_scan *s) {
    json_decref(s->pod);
    s->pod = NULL;
    s->nnodes = 0;
    s->nslots_ = 0;
    s->pod_text = s->names_text = NULL;
    s->pod_len = s->names_len = 0;
    s->compact = false;
    s->names = s->names_;
    s->hashes = s->hashes_;
    s->hinted_ = false;
}

void extender_scan_free(struct extender_scan *s) {
    if (!s) return;
    extender_scan_reset(s);
    free(s->names_);
    free(s->hashes_);
    free(s->scratch_);
    free(s->slots_);
    memset(s, 0, sizeof *s);
}

/* ---- replies as text ---- */

void extender_buf_free(struct extender_buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* Room for more bytes and the NUL after them. */
static int buf_grow(struct extender_buf *b, size_t more) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len <= more) {
        if (cap > SIZE_MAX / 2) return -ENOMEM;
        cap *= 2;
    }
    char *d = realloc(b->data, cap);
    if (!d) return -ENOMEM;
    b->data = d;
    b->cap = cap;
    return 0;
}

static inline int buf_reserve(struct extender_buf *b, size_t more) {
    return b->cap > b->len && b->cap - b->len > more ? 0 : buf_grow(b, more);
}

/* Writes s (len bytes) at d as a JSON string, escaped as jansson dumps one:
 * \" \\ \b \f \n \r \t, other bytes below 0x20 as \u00XX, the rest as is;
 * room for 6 * len + 2 bytes. Returns the end, or NULL when s is not valid
 * UTF-8 (*nul set when the first trouble was a NUL byte). */
static char *put_string(char *d, const char *s, size_t len, bool *nul) {
    static const char hex[] = "0123456789ABCDEF";
    if (len >= 8 && len <= 16) { /* most node names: 8 to 16 plain bytes */
        uint64_t a, b;
        memcpy(&a, s, 8);
        memcpy(&b, s + len - 8, 8);
        if (!special8(a) && !special8(b)) {
            d[0] = '"';
            memcpy(d + 1, &a, 8);
            memcpy(d + 1 + len - 8, &b, 8);
            d[len + 1] = '"';
            return d + len + 2;
        }
    }
    const char *e = s + len;
    *d++ = '"';
    for (;;) {
        const char *q = plain_run(s, e);
        if (q - s > 64) memcpy(d, s, (size_t)(q - s));
        else copy_short(d, s, (size_t)(q - s));
        d += q - s;
        if ((s = q) == e) break;
        unsigned c = (unsigned char)*s;
        if (c >= 0x80) {
            size_t k = utf8_seq((const unsigned char *)s, (const unsigned char *)e);
            if (!k) return NULL;
            memcpy(d, s, k);
            d += k;
            s += k;
            continue;
        }
        if (c == 0 && nul) {
            *nul = true;
            return NULL;
        }
        *d++ = '\\';
        switch (c) {
        case '"': *d++ = '"'; break;
        case '\\': *d++ = '\\'; break;
        case '\b': *d++ = 'b'; break;
        case '\f': *d++ = 'f'; break;
        case '\n': *d++ = 'n'; break;
        case '\r': *d++ = 'r'; break;
        case '\t': *d++ = 't'; break;
        default:
            memcpy(d, "u00", 3);
            d[3] = hex[c >> 4];
            d[4] = hex[c & 15];
            d += 5;
            break;
        }
        s++;
    }
    *d++ = '"';
    return d;
}

#define PUT_LIT(d, lit) (memcpy((d), (lit), sizeof(lit) - 1), (d) += sizeof(lit) - 1)

/* The passing names of a compact scan (extender_scan.compact) as an array:
 * each run of passing names is one copy of the body's text for it. */
static int pass_runs(struct extender_buf *b, const struct extender_name *names, const struct extender_name_verdict *v,
                     size_t n) {
    bool first = true;
    b->data[b->len++] = '[';
    for (size_t i = 0; i < n;) {
        if (v[i].verdict != EXTENDER_PASS) {
            i++;
            continue;
        }
        size_t j = i + 1;
        while (j < n && v[j].verdict == EXTENDER_PASS) j++;
        const char *from = names[i].s - 1, *to = names[j - 1].s + names[j - 1].len + 1; /* the quotes */
        if (buf_reserve(b, (size_t)(to - from) + 2)) return -ENOMEM;
        if (!first) b->data[b->len++] = ',';
        first = false;
        memcpy(b->data + b->len, from, (size_t)(to - from));
        b->len += (size_t)(to - from);
        i = j;
    }
    b->data[b->len++] = ']';
    return 0;
}

/* One section of the filter result: the names with verdict `which`, as an
 * array (PASS) or as an object name -> reason (reasons checked already). A
 * run of one reason pointer is escaped once and copied after. */
static int filter_section(struct extender_buf *b, const struct extender_name *names,
                          const struct extender_name_verdict *v, size_t n, enum extender_verdict which, char *err,
                          size_t errlen) {
    const char *last = NULL;
    size_t last_off = 0, last_len = 0;
    bool first = true;
    if (buf_reserve(b, 1)) return -ENOMEM;
    b->data[b->len++] = which == EXTENDER_PASS ? '[' : '{';
    for (size_t i = 0; i < n; i++) {
        if (v[i].verdict != which) continue;
        const struct extender_name *nm = &names[i];
        if (nm->len > (SIZE_MAX - 16) / 6 || buf_reserve(b, 6 * nm->len + 4)) return -ENOMEM;
        char *d = b->data + b->len;
        if (!first) *d++ = ',';
        first = false;
        if (!(d = put_string(d, nm->s, nm->len, NULL)))
            return core_fail(err, errlen, -EINVAL, "filter result: node %zu: name is not valid UTF-8", i);
        b->len = (size_t)(d - b->data);
        if (which == EXTENDER_PASS) continue;
        const char *r = v[i].reason ? v[i].reason : "";
        size_t rlen = r == last ? 0 : strlen(r);
        if (buf_reserve(b, 1 + (r == last ? last_len : 6 * rlen + 2))) return -ENOMEM;
        b->data[b->len++] = ':';
        if (r == last) {
            memcpy(b->data + b->len, b->data + last_off, last_len);
            b->len += last_len;
            continue;
        }
        d = put_string(b->data + b->len, r, rlen, NULL); /* checked: valid */
        last = r;
        last_off = b->len;
        last_len = (size_t)(d - (b->data + b->len));
        b->len += last_len;
    }
    if (buf_reserve(b, 1)) return -ENOMEM;
    b->data[b->len++] = which == EXTENDER_PASS ? ']' : '}';
    return 0;
}

/* The filter result for names (compact: a compact scan's, see pass_runs);
 * pass (may be NULL) gets where the passing names' array stands. */
static int filter_result(const struct extender_name *names, const struct extender_name_verdict *v, size_t n,
                         bool compact, struct extender_buf *out, struct extender_span *pass, char *err,
                         size_t errlen) {
    out->len = 0;
    if (n && (!names || !v)) return core_fail(err, errlen, -EINVAL, "filter result: no verdicts");
    /* the checks in verdict order, as extender_filter_result makes them; a
     * size to start with; and which sections have names at all */
    size_t need = 128, count[3] = {0, 0, 0};
    const char *last = NULL;
    size_t last_len = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i].verdict != EXTENDER_PASS && v[i].verdict != EXTENDER_FAIL &&
            v[i].verdict != EXTENDER_FAIL_UNRESOLVABLE)
            return core_fail(err, errlen, -EINVAL, "filter verdict %zu: unknown verdict %d", i, (int)v[i].verdict);
        count[v[i].verdict]++;
        need += names[i].len + 3;
        if (v[i].verdict == EXTENDER_PASS) continue;
        const char *r = v[i].reason ? v[i].reason : "";
        if (r != last) {
            last_len = strlen(r);
            if (last_len > EXTENDER_MAX_REASON)
                return core_fail(err, errlen, -E2BIG, "filter verdict %zu: reason longer than %d bytes", i,
                                 EXTENDER_MAX_REASON);
            const char *e = r + last_len;
            for (const char *q = r; (q = plain_run(q, e)) < e;) {
                size_t k = (unsigned char)*q < 0x80 ? 1 : utf8_seq((const unsigned char *)q, (const unsigned char *)e);
                if (!k) return core_fail(err, errlen, -EINVAL, "filter verdict %zu: reason is not valid UTF-8", i);
                q += k;
            }
            last = r;
        }
        need += last_len + 3;
    }
    int rc = buf_reserve(out, need);
    /* Go's field order: Nodes, NodeNames, FailedNodes, FailedAndUnresolvableNodes, Error */
    static const char head[] = "{\"Nodes\":null,\"NodeNames\":", failed[] = ",\"FailedNodes\":",
                      unres[] = ",\"FailedAndUnresolvableNodes\":", tail[] = ",\"Error\":\"\"}";
    static const char *const label[3] = {NULL, failed, unres};
    static const size_t label_len[3] = {0, sizeof failed - 1, sizeof unres - 1};
    if (!rc) {
        memcpy(out->data, head, sizeof head - 1);
        out->len = sizeof head - 1;
    }
    for (int w = EXTENDER_PASS; !rc && w <= EXTENDER_FAIL_UNRESOLVABLE; w++) {
        if (w != EXTENDER_PASS && (rc = buf_reserve(out, label_len[w] + 2))) break;
        if (w != EXTENDER_PASS) {
            memcpy(out->data + out->len, label[w], label_len[w]);
            out->len += label_len[w];
        }
        size_t at = out->len;
        if (!count[w]) { /* nothing to look for */
            memcpy(out->data + out->len, w == EXTENDER_PASS ? "[]" : "{}", 2);
            out->len += 2;
        } else if (w == EXTENDER_PASS && compact) {
            rc = pass_runs(out, names, v, n);
        } else {
            rc = filter_section(out, names, v, n, (enum extender_verdict)w, err, errlen);
        }
        if (w == EXTENDER_PASS && pass) *pass = (struct extender_span){at, out->len - at};
    }
    if (!rc && !(rc = buf_reserve(out, sizeof tail))) {
        memcpy(out->data + out->len, tail, sizeof tail); /* with the NUL */
        out->len += sizeof tail - 1;
    }
    if (rc) {
        out->len = 0;
        if (rc == -ENOMEM) core_fail(err, errlen, -ENOMEM, "filter result: out of memory");
    }
    return rc;
}

int extender_filter_result_buf(const struct extender_name *names, const struct extender_name_verdict *v, size_t n,
                               struct extender_buf *out, char *err, size_t errlen) {
    return filter_result(names, v, n, false, out, NULL, err, errlen);
}

int extender_filter_result_scan(const struct extender_scan *s, const struct extender_name_verdict *v,
                                struct extender_buf *out, struct extender_span *pass, char *err, size_t errlen) {
    return filter_result(s->names, v, s->nnodes, s->compact, out, pass, err, errlen);
}

/* A score, clamped, and the entry's closing brace. */
static inline char *put_score(char *d, int64_t v) {
    if (v < EXTENDER_MIN_PRIORITY) v = EXTENDER_MIN_PRIORITY;
    if (v > EXTENDER_MAX_PRIORITY) v = EXTENDER_MAX_PRIORITY;
    if (v >= 10) *d++ = (char)('0' + v / 10);
    *d++ = (char)('0' + v % 10);
    *d++ = '}';
    return d;
}

int extender_priority_list_buf(const struct extender_name *hosts, const int64_t *scores, size_t n,
                               struct extender_buf *out, char *err, size_t errlen) {
    out->len = 0;
    if (n && (!hosts || !scores)) return core_fail(err, errlen, -EINVAL, "priority list: no entries");
    if (n > EXTENDER_MAX_NODES)
        return core_fail(err, errlen, -E2BIG, "priority list: %zu hosts, more than %d", n, EXTENDER_MAX_NODES);
    size_t need = 3;
    for (size_t i = 0; i < n; i++) need += (hosts[i].s ? hosts[i].len : 0) + sizeof "{\"Host\":\"\",\"Score\":10},";
    if (buf_reserve(out, need)) return core_fail(err, errlen, -ENOMEM, "priority list: out of memory");
    char *d = out->data;
    *d++ = '[';
    for (size_t i = 0; i < n; i++) {
        /* each host checked as reply_node checks it, but for repeats: see the header */
        const struct extender_name *h = &hosts[i];
        char what[48];
        bool nul = false;
        size_t at = (size_t)(d - out->data);
        if (!h->s || h->len == 0 || h->len > EXTENDER_MAX_NAME) {
            snprintf(what, sizeof what, "priority %zu: Host", i);
            out->len = 0;
            return h->s ? check_name(h->s, h->len, what, false, err, errlen)
                        : core_fail(err, errlen, -EINVAL, "%s: no node name", what);
        }
        if (buf_reserve(out, at + 6 * h->len + 32 - out->len)) {
            out->len = 0;
            return core_fail(err, errlen, -ENOMEM, "priority list: out of memory");
        }
        d = out->data + at;
        if (i) *d++ = ',';
        PUT_LIT(d, "{\"Host\":");
        if (!(d = put_string(d, h->s, h->len, &nul))) {
            /* a NUL anywhere is reported before bad UTF-8, as check_name runs first there */
            snprintf(what, sizeof what, "priority %zu: Host", i);
            out->len = 0;
            int rc = check_name(h->s, h->len, what, false, err, errlen);
            return rc ? rc : core_fail(err, errlen, -EINVAL, "%s: node name is not valid UTF-8", what);
        }
        PUT_LIT(d, ",\"Score\":");
        d = put_score(d, scores[i]);
    }
    *d++ = ']';
    *d = '\0';
    out->len = (size_t)(d - out->data);
    return 0;
}

int extender_priority_list_scan(const struct extender_scan *s, const int64_t *scores, struct extender_buf *out,
                                char *err, size_t errlen) {
    size_t n = s->nnodes;
    const struct extender_name *hosts = s->names;
    out->len = 0;
    if (n && !scores) return core_fail(err, errlen, -EINVAL, "priority list: no entries");
    /* a compact scan's names go out as they came in; others are escaped */
    size_t need = 3;
    for (size_t i = 0; i < n; i++) need += (s->compact ? 1 : 6) * hosts[i].len + sizeof "{\"Host\":\"\",\"Score\":10},";
    if (buf_reserve(out, need)) return core_fail(err, errlen, -ENOMEM, "priority list: out of memory");
    char *d = out->data;
    *d++ = '[';
    for (size_t i = 0; i < n; i++) {
        const struct extender_name *h = &hosts[i];
        if (i) *d++ = ',';
        if (s->compact) {
            PUT_LIT(d, "{\"Host\":\"");
            copy_short(d, h->s, h->len);
            d += h->len;
            PUT_LIT(d, "\",\"Score\":");
        } else {
            PUT_LIT(d, "{\"Host\":");
            d = put_string(d, h->s, h->len, NULL); /* the scan took only valid names */
            PUT_LIT(d, ",\"Score\":");
        }
        d = put_score(d, scores[i]);
    }
    *d++ = ']';
    *d = '\0';
    out->len = (size_t)(d - out->data);
    return 0;
}
