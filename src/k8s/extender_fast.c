/* The extender's fast path for NodeNames requests (extender.h), the scan: it
 * reads the raw body, hands only the Pod to jansson and keeps the node names
 * as byte ranges in a reusable hash set (or takes them from a hint). Checked
 * against the jansson path in extender.c (unit tests, the differential fuzz
 * target): anything the scan does not accept exactly as the jansson path
 * would is left to that path (-EAGAIN). The replies: extender_text.c. */
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

/* ---- the fast path for preempt (NodeNameToMetaVictims) ----
 * kube-scheduler sends one entry per candidate node (hundreds at thousands
 * of nodes): jansson's value per node, per victim list and per UID cost more
 * than the preemption itself. The same rules as scan_body: only what the
 * jansson path accepts, and exactly as it decodes it; anything else (escaped
 * names, NodeNameToVictims, unknown keys, an error to report) is -EAGAIN. */

/* p at a string's opening quote: the string without escapes into [*s0, *s1)
 * and p past its closing quote; NULL otherwise. */
static const char *plain_string(const char *p, const char *end, const char **s0, const char **s1) {
    if (p == end || *p != '"') return NULL;
    bool esc;
    const char *q = string_end(p + 1, end, &esc);
    if (!q || esc) return NULL;
    *s0 = p + 1;
    *s1 = q;
    return q + 1;
}

/* p at an object key: which of names[0..n) it is (case-insensitively, as
 * get_fields), p past the ':' and the blanks after it; -1 for another key. */
static int scan_key(const char **pp, const char *end, const char *const *names, int n) {
    const char *k0, *k1, *p = plain_string(*pp, end, &k0, &k1);
    char key[64];
    if (!p || (size_t)(k1 - k0) >= sizeof key) return -1;
    memcpy(key, k0, (size_t)(k1 - k0));
    key[k1 - k0] = '\0';
    int f = -1;
    for (int i = 0; i < n && f < 0; i++)
        if (key_is(key, names[i])) f = i;
    p = skip_ws(p, end);
    if (f < 0 || p == end || *p != ':') return -1;
    *pp = skip_ws(p + 1, end);
    return f;
}

static bool is_null(const char **pp, const char *end) {
    if (end - *pp < 4 || memcmp(*pp, "null", 4) != 0) return false;
    *pp += 4;
    return true;
}

/* After a member: ',' (true: another follows) or the closing c (false, p
 * past it); -1 for anything else. */
static int next_member(const char **pp, const char *end, char c) {
    const char *p = skip_ws(*pp, end);
    if (p == end) return -1;
    if (*p == ',') {
        *pp = skip_ws(p + 1, end);
        return 1;
    }
    if (*p != c) return -1;
    *pp = p + 1;
    return 0;
}

static const char *const SCAN_VICTIMS[] = {"Pods", "NumPDBViolations"};
static const char *const SCAN_METAPOD[] = {"UID"};

/* One MetaVictims value at *pp (an object or null) into v. */
static int scan_victims(const char **pp, const char *end, struct extender_victims *v, size_t *total) {
    const char *p = *pp;
    if (is_null(&p, end)) {
        *pp = p;
        return 0;
    }
    if (p == end || *p != '{') return -EAGAIN;
    p = skip_ws(p + 1, end);
    bool seen[2] = {false, false};
    size_t cap = 0;
    int more = p < end && *p == '}' ? 0 : 1;
    if (!more) p++;
    while (more == 1) {
        int f = scan_key(&p, end, SCAN_VICTIMS, 2);
        if (f < 0 || seen[f]) return -EAGAIN;
        seen[f] = true;
        if (is_null(&p, end)) {
        } else if (f == 1) { /* a non-negative integer, as jansson reads it */
            const char *d = p;
            while (p < end && *p >= '0' && *p <= '9') p++;
            if (p == d || p - d > 18 || (*d == '0' && p - d > 1) || (p < end && (*p == '.' || *p == 'e' || *p == 'E')))
                return -EAGAIN;
            v->num_pdb_violations = strtoll(d, NULL, 10);
        } else {
            if (p == end || *p != '[') return -EAGAIN;
            p = skip_ws(p + 1, end);
            int items = p < end && *p == ']' ? 0 : 1;
            if (!items) p++;
            while (items == 1) {
                if (p == end || *p != '{') return -EAGAIN;
                p = skip_ws(p + 1, end);
                const char *u0, *u1;
                if (scan_key(&p, end, SCAN_METAPOD, 1) != 0 || !(p = plain_string(p, end, &u0, &u1)) ||
                    next_member(&p, end, '}') != 0)
                    return -EAGAIN; /* a MetaPod is {"UID": "..."} here; anything more: the jansson path */
                char err[8];
                if (check_name(u0, (size_t)(u1 - u0), "", false, err, sizeof err)) return -EAGAIN;
                if (v->npods >= EXTENDER_MAX_VICTIMS || ++*total > EXTENDER_MAX_VICTIMS_TOTAL) return -EAGAIN;
                if (v->npods == cap) {
                    size_t nc = cap ? 2 * cap : 4;
                    char **u = realloc(v->uids, nc * sizeof *u);
                    if (!u) return -ENOMEM;
                    v->uids = u;
                    cap = nc;
                }
                if (!(v->uids[v->npods] = strndup(u0, (size_t)(u1 - u0)))) return -ENOMEM;
                v->npods++;
                items = next_member(&p, end, ']');
                if (items < 0) return -EAGAIN;
            }
        }
        more = next_member(&p, end, '}');
        if (more < 0) return -EAGAIN;
    }
    *pp = p;
    return 0;
}

static const char *const SCAN_PREEMPT[] = {"Pod", "NodeNameToVictims", "NodeNameToMetaVictims"};

static int scan_preempt(const char *body, size_t len, struct extender_preemption_args *a) {
    const char *p = skip_ws(body, body + len), *end = body + len, *pod0 = NULL, *pod1 = NULL;
    bool seen[3] = {false, false, false}, meta = false;
    if (p == end || *p != '{') return -EAGAIN;
    p = skip_ws(p + 1, end);
    size_t cap = 0, total = 0;
    for (int more = 1; more == 1;) {
        int f = scan_key(&p, end, SCAN_PREEMPT, 3);
        if (f < 0 || seen[f]) return -EAGAIN;
        seen[f] = true;
        if (f == 0) {
            if (p == end || *p != '{' || !(pod1 = skip_nested(p, end))) return -EAGAIN;
            pod0 = p;
            p = pod1;
        } else if (f == 1) {
            if (!is_null(&p, end)) return -EAGAIN; /* Pod objects as victims: the jansson path */
        } else {
            if (p == end || *p != '{') return -EAGAIN;
            meta = true;
            p = skip_ws(p + 1, end);
            int nodes = p < end && *p == '}' ? 0 : 1;
            if (!nodes) p++;
            while (nodes == 1) {
                const char *n0, *n1;
                if (!(p = plain_string(p, end, &n0, &n1))) return -EAGAIN;
                p = skip_ws(p, end);
                if (p == end || *p != ':') return -EAGAIN;
                p = skip_ws(p + 1, end);
                char err[8];
                if (check_name(n0, (size_t)(n1 - n0), "", false, err, sizeof err) || a->nnodes >= EXTENDER_MAX_NODES)
                    return -EAGAIN;
                if (a->nnodes == cap) {
                    size_t nc = cap ? 2 * cap : 64;
                    struct extender_victims *nv = realloc(a->nodes, nc * sizeof *nv);
                    if (!nv) return -ENOMEM;
                    a->nodes = nv;
                    cap = nc;
                }
                struct extender_victims *v = &a->nodes[a->nnodes];
                *v = (struct extender_victims){0};
                if (!(v->node = strndup(n0, (size_t)(n1 - n0)))) return -ENOMEM;
                a->nnodes++;
                if (json_object_get(a->index, v->node)) return -EAGAIN; /* a duplicate: the jansson path refuses it */
                json_t *pos = json_integer((json_int_t)(a->nnodes - 1));
                if (!pos || json_object_set_new(a->index, v->node, pos)) return -ENOMEM;
                int rc = scan_victims(&p, end, v, &total);
                if (rc) return rc;
                nodes = next_member(&p, end, '}');
                if (nodes < 0) return -EAGAIN;
            }
        }
        more = next_member(&p, end, '}');
        if (more < 0) return -EAGAIN;
    }
    if (skip_ws(p, end) != end || !pod0 || !meta) return -EAGAIN;
    json_t *pod = json_loadb(pod0, (size_t)(pod1 - pod0), JSON_REJECT_DUPLICATES, NULL);
    if (!pod || !depth_ok(pod, EXTENDER_MAX_DEPTH)) {
        json_decref(pod);
        return -EAGAIN;
    }
    a->pod = pod;
    a->meta = true;
    return 0;
}

int extender_scan_preemption_args(const char *body, size_t len, struct extender_preemption_args **out) {
    *out = NULL;
    struct extender_preemption_args *a = calloc(1, sizeof *a);
    if (!a || !(a->index = json_object())) {
        extender_preemption_args_free(a);
        return -ENOMEM;
    }
    int rc = body ? scan_preempt(body, len, a) : -EAGAIN;
    if (rc) {
        extender_preemption_args_free(a);
        return rc;
    }
    *out = a;
    return 0;
}
