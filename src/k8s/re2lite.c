/* Compiling a pattern: a recursive-descent parser builds a tree (refusing
 * what RE2 refuses, and past our limits), then the tree is sized and emitted
 * as a Thompson program. The matcher is re2lite_match.c. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "re2lite_int.h"

enum node_kind { N_EMPTY, N_LIT, N_CLASS, N_ANY, N_ASSERT, N_CAT, N_ALT, N_REPEAT };

/* Tree nodes live in one array and point at each other by index (-1: none),
 * so growing the array moves nothing that is held. */
struct node {
    uint8_t kind;
    uint32_t a;                /* N_LIT code point, N_CLASS class index, N_ASSERT kind */
    int min, max;              /* N_REPEAT; max -1: no upper bound */
    int32_t child, last, next; /* first and last child (N_CAT, N_ALT, N_REPEAT), next sibling */
    uint32_t product;          /* the largest product of nested {n,m} counts inside, for REGEX_MAX_REPEAT */
};

struct parser {
    const char *p, *end; /* the rest of the pattern; *end is its NUL */
    struct node *nodes;
    size_t nnodes, capnodes;
    struct regex_range *tmp; /* the class being parsed, any order */
    size_t ntmp, captmp;
    struct regex_class *cls;
    size_t ncls, capcls;
    struct regex_range *rng; /* the classes' ranges above ASCII */
    size_t nrng, caprng;
    int depth;
    int rc;
    char *err;
    size_t errlen;
};

static int32_t fail(struct parser *p, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int32_t fail(struct parser *p, int code, const char *fmt, ...) {
    if (p->rc) return -1; /* the first failure explains */
    p->rc = code;
    if (p->err && p->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->err, p->errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* How many bytes of the pattern from `from` a message quotes: up to the
 * parser's position, at most 32, not cutting a UTF-8 sequence. */
static int quoted(const struct parser *p, const char *from) {
    size_t n = (size_t)(p->p - from);
    if (n > 32) {
        n = 32;
        while (n && ((unsigned char)from[n] & 0xC0) == 0x80) n--;
    }
    return (int)n;
}

static bool grow(void **a, size_t *cap, size_t n, size_t size) {
    if (n < *cap) return true;
    size_t c = *cap ? *cap * 2 : 16;
    void *b = realloc(*a, c * size);
    if (!b) return false;
    *a = b;
    *cap = c;
    return true;
}

static int32_t new_node(struct parser *p, enum node_kind kind) {
    if (!grow((void **)&p->nodes, &p->capnodes, p->nnodes, sizeof *p->nodes))
        return fail(p, -ENOMEM, "out of memory");
    p->nodes[p->nnodes] = (struct node){.kind = (uint8_t)kind, .child = -1, .last = -1, .next = -1, .product = 1};
    return (int32_t)p->nnodes++;
}

static void add_child(struct parser *p, int32_t parent, int32_t c) {
    struct node *n = &p->nodes[parent];
    if (n->last < 0) n->child = c;
    else p->nodes[n->last].next = c;
    n->last = c;
    if (p->nodes[c].product > n->product) n->product = p->nodes[c].product;
}

static int32_t leaf(struct parser *p, enum node_kind kind, uint32_t a) {
    int32_t n = new_node(p, kind);
    if (n >= 0) p->nodes[n].a = a;
    return n;
}

/* A code point of the pattern itself, which must be valid UTF-8. */
static int next_rune(struct parser *p, uint32_t *r) {
    bool valid;
    p->p += regex_utf8_decode((const unsigned char *)p->p, (size_t)(p->end - p->p), r, &valid);
    return valid ? 0 : fail(p, -EINVAL, "invalid UTF-8 in the pattern");
}

/* ---- classes ---- */

struct span {
    uint32_t lo, hi;
};

static const struct span S_DIGIT[] = {{'0', '9'}};
static const struct span S_SPACE[] = {{'\t', '\n'}, {'\f', '\r'}, {' ', ' '}}; /* \s: RE2's, without \v */
static const struct span S_WORD[] = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
static const struct span S_ALNUM[] = {{'0', '9'}, {'A', 'Z'}, {'a', 'z'}};
static const struct span S_ALPHA[] = {{'A', 'Z'}, {'a', 'z'}};
static const struct span S_ASCII[] = {{0, 0x7F}};
static const struct span S_BLANK[] = {{'\t', '\t'}, {' ', ' '}};
static const struct span S_CNTRL[] = {{0, 0x1F}, {0x7F, 0x7F}};
static const struct span S_GRAPH[] = {{'!', '~'}};
static const struct span S_LOWER[] = {{'a', 'z'}};
static const struct span S_PRINT[] = {{' ', '~'}};
static const struct span S_PUNCT[] = {{'!', '/'}, {':', '@'}, {'[', '`'}, {'{', '~'}};
static const struct span S_PSPACE[] = {{'\t', '\r'}, {' ', ' '}};
static const struct span S_UPPER[] = {{'A', 'Z'}};
static const struct span S_XDIGIT[] = {{'0', '9'}, {'A', 'F'}, {'a', 'f'}};

#define SPANS(a) a, sizeof a / sizeof a[0]

static const struct {
    const char *name;
    const struct span *s;
    size_t n;
} posix_classes[] = {
    {"alnum", SPANS(S_ALNUM)}, {"alpha", SPANS(S_ALPHA)}, {"ascii", SPANS(S_ASCII)},   {"blank", SPANS(S_BLANK)},
    {"cntrl", SPANS(S_CNTRL)}, {"digit", SPANS(S_DIGIT)}, {"graph", SPANS(S_GRAPH)},   {"lower", SPANS(S_LOWER)},
    {"print", SPANS(S_PRINT)}, {"punct", SPANS(S_PUNCT)}, {"space", SPANS(S_PSPACE)}, {"upper", SPANS(S_UPPER)},
    {"word", SPANS(S_WORD)},   {"xdigit", SPANS(S_XDIGIT)},
};

static int add_range(struct parser *p, uint32_t lo, uint32_t hi) {
    if (!grow((void **)&p->tmp, &p->captmp, p->ntmp, sizeof *p->tmp)) return fail(p, -ENOMEM, "out of memory");
    p->tmp[p->ntmp++] = (struct regex_range){lo, hi};
    return 0;
}

/* Adds the spans (sorted, disjoint), or everything they leave out. */
static int add_spans(struct parser *p, const struct span *s, size_t n, bool negate) {
    uint32_t from = 0;
    for (size_t i = 0; i < n; i++) {
        if (!negate && add_range(p, s[i].lo, s[i].hi)) return -1;
        if (negate && s[i].lo > from && add_range(p, from, s[i].lo - 1)) return -1;
        from = s[i].hi + 1;
    }
    return negate ? add_range(p, from, REGEX_MAX_RUNE) : 0;
}

/* \d \D \w \W \s \S */
static int add_perl_class(struct parser *p, uint32_t letter) {
    switch (letter) {
    case 'd': return add_spans(p, SPANS(S_DIGIT), false);
    case 'D': return add_spans(p, SPANS(S_DIGIT), true);
    case 'w': return add_spans(p, SPANS(S_WORD), false);
    case 'W': return add_spans(p, SPANS(S_WORD), true);
    case 's': return add_spans(p, SPANS(S_SPACE), false);
    default: return add_spans(p, SPANS(S_SPACE), true);
    }
}

static int range_cmp(const void *a, const void *b) {
    const struct regex_range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Turns the ranges in p->tmp (negated if asked) into a class: an ASCII bitmap
 * and sorted, merged ranges above it. Returns an N_CLASS node. */
static int32_t finish_class(struct parser *p, bool negate) {
    qsort(p->tmp, p->ntmp, sizeof *p->tmp, range_cmp);
    size_t n = 0;
    for (size_t i = 0; i < p->ntmp; i++) {
        if (n && p->tmp[i].lo <= p->tmp[n - 1].hi + 1) {
            if (p->tmp[i].hi > p->tmp[n - 1].hi) p->tmp[n - 1].hi = p->tmp[i].hi;
        } else {
            p->tmp[n++] = p->tmp[i];
        }
    }
    p->ntmp = n;
    if (negate) { /* the gaps, written behind the reading position: n + 1 ranges at most */
        if (add_range(p, 0, 0)) return -1;
        uint32_t from = 0;
        size_t out = 0;
        for (size_t i = 0; i < n; i++) {
            struct regex_range r = p->tmp[i];
            if (r.lo > from) p->tmp[out++] = (struct regex_range){from, r.lo - 1};
            from = r.hi + 1;
        }
        if (from <= REGEX_MAX_RUNE) p->tmp[out++] = (struct regex_range){from, REGEX_MAX_RUNE};
        p->ntmp = out;
    }
    if (!grow((void **)&p->cls, &p->capcls, p->ncls, sizeof *p->cls)) return fail(p, -ENOMEM, "out of memory");
    struct regex_class *c = &p->cls[p->ncls];
    *c = (struct regex_class){.first = (uint32_t)p->nrng};
    for (size_t i = 0; i < p->ntmp; i++) {
        struct regex_range r = p->tmp[i];
        for (uint32_t ch = r.lo; ch <= r.hi && ch < 0x80; ch++) c->ascii[ch >> 5] |= 1u << (ch & 31);
        if (r.hi < 0x80) continue;
        if (r.lo < 0x80) r.lo = 0x80;
        if (!grow((void **)&p->rng, &p->caprng, p->nrng, sizeof *p->rng)) return fail(p, -ENOMEM, "out of memory");
        p->rng[p->nrng++] = r;
        c->n++;
    }
    p->ntmp = 0;
    return leaf(p, N_CLASS, (uint32_t)p->ncls++);
}

/* ---- escapes ---- */

enum escape { ESC_RUNE, ESC_CLASS, ESC_ASSERT };

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bool is_alnum(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* \xHH or \x{H...} after the x; the code point in *r. */
static int parse_hex(struct parser *p, const char *at, uint32_t *r) {
    uint32_t v = 0;
    if (*p->p == '{') {
        int digits = 0;
        for (p->p++; hexval(*p->p) >= 0; p->p++, digits++)
            if ((v = v * 16 + (uint32_t)hexval(*p->p)) > REGEX_MAX_RUNE) break;
        if (!digits || *p->p != '}' || v > REGEX_MAX_RUNE) {
            if (*p->p) p->p++;
            return fail(p, -EINVAL, "invalid escape `%.*s`", quoted(p, at), at);
        }
        p->p++;
    } else {
        for (int i = 0; i < 2; i++, p->p++) {
            if (hexval(*p->p) < 0) {
                if (*p->p) p->p++;
                return fail(p, -EINVAL, "invalid escape `%.*s`", quoted(p, at), at);
            }
            v = v * 16 + (uint32_t)hexval(*p->p);
        }
    }
    *r = v;
    return 0;
}

/* The escape at p->p (a backslash). Returns ESC_RUNE with the code point in
 * *r, ESC_CLASS with the Perl class letter (d D w W s S) in *r, ESC_ASSERT
 * (outside classes only) with an enum regex_assert in *r, or -1. */
static int parse_escape(struct parser *p, bool in_class, uint32_t *r) {
    const char *at = p->p++;
    if (p->p >= p->end) return fail(p, -EINVAL, "trailing backslash at end of pattern");
    unsigned char c = (unsigned char)*p->p++;
    switch (c) {
    case '1': case '2': case '3': case '4': case '5': case '6': case '7': case '8': case '9':
        /* \1 alone is a back-reference; \12 is octal in RE2 (and \8 nothing) */
        if (c > '7' || *p->p < '0' || *p->p > '7')
            return fail(p, -EINVAL, "back-references (\\%c) are not supported", c);
        /* fall through */
    case '0': /* octal: up to two more digits, as RE2 */
        *r = (uint32_t)(c - '0');
        for (int i = 0; i < 2 && *p->p >= '0' && *p->p <= '7'; i++) *r = *r * 8 + (uint32_t)(*p->p++ - '0');
        return ESC_RUNE;
    case 'a': *r = 7; return ESC_RUNE;
    case 'f': *r = '\f'; return ESC_RUNE;
    case 't': *r = '\t'; return ESC_RUNE;
    case 'n': *r = '\n'; return ESC_RUNE;
    case 'r': *r = '\r'; return ESC_RUNE;
    case 'v': *r = '\v'; return ESC_RUNE;
    case 'x': return parse_hex(p, at, r) ? -1 : ESC_RUNE;
    case 'd': case 'D': case 'w': case 'W': case 's': case 'S': *r = c; return ESC_CLASS;
    case 'p': case 'P':
        return fail(p, -EINVAL, "Unicode classes (\\%c{...}) are not supported", c);
    case 'C': return fail(p, -EINVAL, "\\C (any byte) is not supported");
    case 'Z': return fail(p, -EINVAL, "\\Z is not supported (RE2 has only \\z)");
    case 'A': case 'z': case 'b': case 'B':
        if (in_class) break;
        *r = c == 'A' ? RX_BEGIN_TEXT : c == 'z' ? RX_END_TEXT : c == 'b' ? RX_WORD_BOUNDARY : RX_NOT_WORD_BOUNDARY;
        return ESC_ASSERT;
    default:
        if (c < 0x80 && !is_alnum(c)) { /* escaped punctuation is itself */
            *r = c;
            return ESC_RUNE;
        }
    }
    if (c >= 0x80) /* quote the whole character */
        while (p->p < p->end && ((unsigned char)*p->p & 0xC0) == 0x80) p->p++;
    return fail(p, -EINVAL, "invalid escape `%.*s`%s", quoted(p, at), at, in_class ? " inside [...]" : "");
}

/* [...] at p->p. */
static int32_t parse_class(struct parser *p) {
    const char *at = p->p++;
    bool negate = *p->p == '^';
    if (negate) p->p++;
    p->ntmp = 0;
    for (bool first = true;; first = false) {
        if (p->p >= p->end) return fail(p, -EINVAL, "missing closing ] in `%.*s`", quoted(p, at), at);
        if (*p->p == ']' && !first) break; /* a ] first is a member, as in RE2 */
        if (p->p[0] == '[' && p->p[1] == ':') {
            const char *close = strstr(p->p + 2, ":]");
            if (close) {
                const char *name = p->p + 2;
                bool neg = *name == '^';
                name += neg;
                size_t i, len = (size_t)(close - name);
                for (i = 0; i < sizeof posix_classes / sizeof posix_classes[0]; i++)
                    if (strlen(posix_classes[i].name) == len && !memcmp(posix_classes[i].name, name, len)) break;
                const char *from = p->p;
                p->p = close + 2;
                if (i == sizeof posix_classes / sizeof posix_classes[0])
                    return fail(p, -EINVAL, "unknown POSIX class `%.*s`", quoted(p, from), from);
                if (add_spans(p, posix_classes[i].s, posix_classes[i].n, neg)) return -1;
                continue;
            }
        }
        const char *item = p->p;
        uint32_t lo, hi;
        if (*p->p == '\\') {
            int k = parse_escape(p, true, &lo);
            if (k < 0) return -1;
            if (k == ESC_CLASS) {
                if (add_perl_class(p, lo)) return -1;
                continue;
            }
        } else if (next_rune(p, &lo)) {
            return -1;
        }
        hi = lo;
        if (p->p[0] == '-' && p->p[1] && p->p[1] != ']') { /* a range; a - elsewhere is itself */
            p->p++;
            int k = ESC_RUNE;
            if (*p->p == '\\' ? (k = parse_escape(p, true, &hi)) < 0 : next_rune(p, &hi) != 0) return -1;
            if (k == ESC_CLASS || hi < lo)
                return fail(p, -EINVAL, "invalid character class range `%.*s`", quoted(p, item), item);
        }
        if (add_range(p, lo, hi)) return -1;
    }
    p->p++;
    return finish_class(p, negate);
}

/* ---- structure ---- */

/* A count at *q: digits without a leading zero (as RE2), capped just past
 * REGEX_MAX_REPEAT; -1 when there is none. */
static int parse_number(const char **q) {
    const char *d = *q;
    int n = 0;
    if (*d < '0' || *d > '9' || (d[0] == '0' && d[1] >= '0' && d[1] <= '9')) return -1;
    for (; *d >= '0' && *d <= '9'; d++)
        if (n <= REGEX_MAX_REPEAT) n = n * 10 + (*d - '0');
    *q = d;
    return n;
}

/* {n}, {n,} or {n,m} at s (s[0] == '{'): its length, or 0 when it is not one
 * (then the { is a literal, as in RE2). *max is -1 for {n,}. */
static size_t parse_count(const char *s, int *min, int *max) {
    const char *q = s + 1;
    int n = parse_number(&q), m = n;
    if (n < 0) return 0;
    if (*q == ',') {
        q++;
        m = *q == '}' ? -1 : parse_number(&q);
        if (m == -1 && *q != '}') return 0;
    }
    if (*q != '}') return 0;
    *min = n;
    *max = m;
    return (size_t)(q - s) + 1;
}

/* A quantifier at p->p: its length and bounds, or 0. */
static size_t quantifier(const char *s, int *min, int *max) {
    switch (*s) {
    case '*': *min = 0, *max = -1; return 1;
    case '+': *min = 1, *max = -1; return 1;
    case '?': *min = 0, *max = 1; return 1;
    case '{': return parse_count(s, min, max);
    default: return 0;
    }
}

/* The quantifier after atom, if any. */
static int32_t parse_quantifier(struct parser *p, int32_t atom) {
    const char *at = p->p;
    int min, max, min2, max2;
    size_t used = quantifier(p->p, &min, &max);
    if (!used) return atom;
    p->p += used;
    bool lazy = *p->p == '?'; /* prefers fewer: the same yes/no answer */
    if (lazy) p->p++;
    size_t again = quantifier(p->p, &min2, &max2);
    if (again) {
        bool possessive = !lazy && *p->p == '+';
        p->p += again;
        if (possessive)
            return fail(p, -EINVAL, "possessive quantifier `%.*s` is not supported", quoted(p, at), at);
        return fail(p, -EINVAL, "invalid nested repetition operator `%.*s`", quoted(p, at), at);
    }
    if (min > REGEX_MAX_REPEAT || max > REGEX_MAX_REPEAT)
        return fail(p, -E2BIG, "repetition count in `%.*s` is over %d", quoted(p, at), at, REGEX_MAX_REPEAT);
    if (max >= 0 && max < min) return fail(p, -EINVAL, "invalid repeat count `%.*s`", quoted(p, at), at);
    int32_t r = new_node(p, N_REPEAT);
    if (r < 0) return -1;
    p->nodes[r].min = min;
    p->nodes[r].max = max;
    add_child(p, r, atom);
    if (*at == '{') { /* RE2 bounds nested counted repetitions by their product */
        uint32_t count = (uint32_t)(max >= 0 ? max : min);
        uint64_t product = (uint64_t)p->nodes[atom].product * (count ? count : 1);
        if (product > REGEX_MAX_REPEAT)
            return fail(p, -E2BIG, "nested repetitions multiply to over %d at `%.*s`", REGEX_MAX_REPEAT,
                        quoted(p, at), at);
        p->nodes[r].product = (uint32_t)product;
    }
    return r;
}

static int32_t parse_alt(struct parser *p);

/* ( ... ) at p->p: its contents. */
static int32_t parse_group(struct parser *p) {
    const char *at = p->p++;
    if (*p->p == '?') {
        const char *q = p->p + 1;
        if (*q == ':') {
            p->p = q + 1;
        } else if (*q == '=' || *q == '!' || (*q == '<' && (q[1] == '=' || q[1] == '!'))) {
            p->p = q + 1 + (*q == '<');
            return fail(p, -EINVAL, "lookaround `%.*s` is not supported", quoted(p, at), at);
        } else if (*q == 'P' && (q[1] == '=' || q[1] == '>')) {
            p->p = q + 2;
            return fail(p, -EINVAL, "named back-references `%.*s` are not supported", quoted(p, at), at);
        } else if ((*q == 'P' && q[1] == '<') || *q == '<') { /* a named group: we capture nothing */
            q += *q == 'P' ? 2 : 1;
            const char *name = q;
            while (is_alnum((unsigned char)*q) || *q == '_') q++;
            p->p = q + (*q == '>');
            if (q == name || *q != '>') return fail(p, -EINVAL, "invalid named capture `%.*s`", quoted(p, at), at);
        } else {
            while (p->p < p->end && *p->p != ')' && *p->p != ':') p->p++;
            if (p->p < p->end) p->p++;
            return fail(p, -EINVAL, "inline flags `%.*s` are not supported", quoted(p, at), at);
        }
    }
    if (p->depth >= REGEX_MAX_DEPTH) return fail(p, -E2BIG, "groups nested deeper than %d", REGEX_MAX_DEPTH);
    p->depth++;
    int32_t in = parse_alt(p);
    p->depth--;
    if (in < 0) return -1;
    if (*p->p != ')') return fail(p, -EINVAL, "missing closing ) for `%.*s`", quoted(p, at), at);
    p->p++;
    return in;
}

/* \Q...\E: its characters are appended to cat but the last, returned as the
 * atom a quantifier may apply to (as in RE2: \Qab\E* is a b*). */
static int32_t parse_quote(struct parser *p, int32_t cat) {
    p->p += 2;
    const char *stop = strstr(p->p, "\\E");
    if (!stop) stop = p->end;
    int32_t prev = -1;
    while (p->p < stop) {
        uint32_t r;
        if (next_rune(p, &r)) return -1;
        if (prev >= 0) add_child(p, cat, prev);
        if ((prev = leaf(p, N_LIT, r)) < 0) return -1;
    }
    p->p = stop + (stop < p->end ? 2 : 0);
    return prev >= 0 ? prev : new_node(p, N_EMPTY);
}

static int32_t parse_atom(struct parser *p, int32_t cat) {
    int min, max;
    uint32_t r;
    switch (*p->p) {
    case '(': return parse_group(p);
    case '[': return parse_class(p);
    case '.': p->p++; return new_node(p, N_ANY);
    case '^': p->p++; return leaf(p, N_ASSERT, RX_BEGIN_TEXT);
    case '$': p->p++; return leaf(p, N_ASSERT, RX_END_TEXT);
    case '*': case '+': case '?': case '{': {
        size_t used = quantifier(p->p, &min, &max);
        if (!used) break; /* a { that is no quantifier is itself */
        const char *at = p->p;
        p->p += used;
        return fail(p, -EINVAL, "missing argument to repetition operator `%.*s`", quoted(p, at), at);
    }
    case '\\': {
        if (p->p[1] == 'Q') return parse_quote(p, cat);
        int k = parse_escape(p, false, &r);
        if (k < 0) return -1;
        if (k == ESC_ASSERT) return leaf(p, N_ASSERT, r);
        if (k == ESC_RUNE) return leaf(p, N_LIT, r);
        p->ntmp = 0;
        return add_perl_class(p, r) ? -1 : finish_class(p, false);
    }
    default: break;
    }
    return next_rune(p, &r) ? -1 : leaf(p, N_LIT, r);
}

static int32_t parse_concat(struct parser *p) {
    int32_t cat = new_node(p, N_CAT);
    if (cat < 0) return -1;
    while (p->p < p->end && *p->p != '|' && *p->p != ')') {
        int32_t a = parse_atom(p, cat);
        if (a < 0 || (a = parse_quantifier(p, a)) < 0) return -1;
        add_child(p, cat, a);
    }
    return cat;
}

static int32_t parse_alt(struct parser *p) {
    int32_t alt = -1, first = parse_concat(p);
    if (first < 0) return -1;
    while (*p->p == '|') {
        p->p++;
        if (alt < 0) {
            if ((alt = new_node(p, N_ALT)) < 0) return -1;
            add_child(p, alt, first);
        }
        int32_t next = parse_concat(p);
        if (next < 0) return -1;
        add_child(p, alt, next);
    }
    return alt < 0 ? first : alt;
}

/* ---- program ---- */

/* Instructions node n compiles to, saturating just past REGEX_MAX_INSTS. */
static uint64_t size_of(const struct parser *p, int32_t n) {
    const uint64_t cap = REGEX_MAX_INSTS + 1;
    const struct node *nd = &p->nodes[n];
    uint64_t s = 0, k = 0;
    switch (nd->kind) {
    case N_EMPTY: return 0;
    case N_CAT:
    case N_ALT:
        for (int32_t c = nd->child; c >= 0 && s < cap; c = p->nodes[c].next, k++) s += size_of(p, c);
        if (nd->kind == N_ALT) s += 2 * (k - 1); /* a split and a jump per alternative but the last */
        return s < cap ? s : cap;
    case N_REPEAT:
        s = size_of(p, nd->child);
        if (nd->max < 0) s = (uint64_t)nd->min * s + (nd->min ? 1 : s + 2); /* e{n-1} e+, or e* */
        else s = (uint64_t)nd->min * s + (uint64_t)(nd->max - nd->min) * (s + 1); /* e{n} (e(e)?)? */
        return s < cap ? s : cap;
    default: return 1;
    }
}

/* Whether every match of node n starts at the start of the text. */
static bool anchored(const struct parser *p, int32_t n) {
    const struct node *nd = &p->nodes[n];
    switch (nd->kind) {
    case N_ASSERT: return nd->a == RX_BEGIN_TEXT;
    case N_CAT: return nd->child >= 0 && anchored(p, nd->child);
    case N_REPEAT: return nd->min > 0 && anchored(p, nd->child);
    case N_ALT:
        for (int32_t c = nd->child; c >= 0; c = p->nodes[c].next)
            if (!anchored(p, c)) return false;
        return true;
    default: return false;
    }
}

#define NO_PC UINT32_MAX

struct emitter {
    const struct parser *p;
    struct regex_inst *inst;
    uint32_t pc;
};

static uint32_t put(struct emitter *e, enum regex_op op, uint32_t x, uint32_t y) {
    e->inst[e->pc] = (struct regex_inst){.op = op, .x = x, .y = y};
    return e->pc++;
}

/* Points every y of the chain (linked through y, ending in NO_PC) at to. */
static void patch_y(struct emitter *e, uint32_t chain, uint32_t to) {
    while (chain != NO_PC) {
        uint32_t next = e->inst[chain].y;
        e->inst[chain].y = to;
        chain = next;
    }
}

/* Emits node n so that it falls through to what follows it. */
static void emit(struct emitter *e, int32_t n) {
    const struct node *nd = &e->p->nodes[n];
    uint32_t chain = NO_PC, start;
    switch (nd->kind) {
    case N_EMPTY: return;
    case N_LIT: put(e, RX_CHAR, nd->a, 0); return;
    case N_CLASS: put(e, RX_CLASS, nd->a, 0); return;
    case N_ANY: put(e, RX_ANY, 0, 0); return;
    case N_ASSERT: put(e, RX_ASSERT, nd->a, 0); return;
    case N_CAT:
        for (int32_t c = nd->child; c >= 0; c = e->p->nodes[c].next) emit(e, c);
        return;
    case N_ALT: /* split to this one or the next; each but the last jumps to the end */
        for (int32_t c = nd->child; c >= 0; c = e->p->nodes[c].next) {
            if (e->p->nodes[c].next < 0) {
                emit(e, c);
                break;
            }
            uint32_t split = put(e, RX_SPLIT, e->pc + 1, 0);
            emit(e, c);
            chain = put(e, RX_JMP, 0, chain);
            e->inst[split].y = e->pc;
        }
        for (uint32_t j = chain; j != NO_PC; j = e->inst[j].y) e->inst[j].x = e->pc;
        return;
    default: /* N_REPEAT */
        for (int i = 0; i < nd->min - (nd->max < 0 && nd->min > 0); i++) emit(e, nd->child);
        start = e->pc;
        if (nd->max < 0 && nd->min > 0) { /* e+ */
            emit(e, nd->child);
            put(e, RX_SPLIT, start, e->pc + 1);
        } else if (nd->max < 0) { /* e* */
            put(e, RX_SPLIT, start + 1, 0);
            emit(e, nd->child);
            put(e, RX_JMP, start, 0);
            e->inst[start].y = e->pc;
        } else { /* (e(e)?)?: every split skips to the end */
            for (int i = nd->min; i < nd->max; i++) {
                chain = put(e, RX_SPLIT, e->pc + 1, chain);
                emit(e, nd->child);
            }
            patch_y(e, chain, e->pc);
        }
    }
}

static void parser_free(struct parser *p) {
    free(p->nodes);
    free(p->tmp);
    free(p->cls);
    free(p->rng);
}

int regex_compile(const char *pattern, struct regex **out, char *err, size_t errlen) {
    *out = NULL;
    if (err && errlen) err[0] = 0;
    size_t len = strlen(pattern);
    struct parser p = {.p = pattern, .end = pattern + len, .err = err, .errlen = errlen};
    if (len > REGEX_MAX_LEN) {
        fail(&p, -E2BIG, "pattern is longer than %d bytes", REGEX_MAX_LEN);
        return p.rc;
    }
    int32_t root = parse_alt(&p);
    if (root >= 0 && p.p < p.end) root = fail(&p, -EINVAL, "unexpected ) at offset %zu", (size_t)(p.p - pattern));
    uint64_t ninst = root >= 0 ? size_of(&p, root) + 1 : 0; /* and a final MATCH */
    if (root >= 0 && ninst > REGEX_MAX_INSTS)
        root = fail(&p, -E2BIG, "it compiles to more than %d instructions ({n,m} repeat what they follow)",
                    REGEX_MAX_INSTS);
    struct regex *re = NULL;
    if (root >= 0) {
        size_t head = (sizeof *re + 7) & ~(size_t)7;
        size_t bytes = head + ninst * sizeof *re->inst + p.ncls * sizeof *re->cls + p.nrng * sizeof *re->rng;
        if (!(re = calloc(1, bytes))) root = fail(&p, -ENOMEM, "out of memory");
        else {
            re->ninst = (uint32_t)ninst;
            re->ncls = (uint32_t)p.ncls;
            re->nrng = (uint32_t)p.nrng;
            re->bytes = bytes;
            re->inst = (struct regex_inst *)((char *)re + head);
            re->cls = (struct regex_class *)(re->inst + ninst);
            re->rng = (struct regex_range *)(re->cls + p.ncls);
            if (p.ncls) memcpy(re->cls, p.cls, p.ncls * sizeof *re->cls);
            if (p.nrng) memcpy(re->rng, p.rng, p.nrng * sizeof *re->rng);
            re->anchored = anchored(&p, root);
            struct emitter e = {.p = &p, .inst = re->inst};
            emit(&e, root);
            put(&e, RX_MATCH, 0, 0);
        }
    }
    parser_free(&p);
    if (root < 0) {
        free(re);
        return p.rc ? p.rc : -EINVAL;
    }
    *out = re;
    return 0;
}

void regex_free(struct regex *re) { free(re); }

size_t regex_insts(const struct regex *re) { return re->ninst; }

size_t regex_bytes(const struct regex *re) { return re->bytes; }
